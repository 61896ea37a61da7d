"""A gateway that takes a Kafka partition's leadership while its copy of the partition lags
the stored log answers the producer's next batch retriable, never OUT_OF_ORDER_SEQUENCE_NUMBER
(docs/scale-out.md "Fault schedule", item 6; adapters/kafka/catch_up.py).

In seed 3 of bench/fault_schedule.py, one librdkafka producer stopped for good ("sequence
desynchronization", rdkafka_request.c ``rd_kafka_handle_idempotent_Produce_error``): its
batch was answered NOT_LEADER_FOR_PARTITION, and the gateway that took the partition over
answered the same batch OUT_OF_ORDER because its mirror had not yet applied that producer's
last batches, stored through the other gateway. Kafka's new leader holds the log it
replicated; here the new leader first catches its copy up with the stream's end.

Gateway B reaches the cluster through a proxy that, on cue, holds back only the messages
the cluster delivers to B's partition mirrors (everything else, leases and PubAcks
included, passes), so B's copy lags by exactly the batch stored meanwhile through A.
Runs only in the store pass (FERRY_TEST_STORE=jetstream). Before the fix B answered
OUT_OF_ORDER_SEQUENCE_NUMBER (expected sequence 6, got 9)."""

from __future__ import annotations

import base64
import re
import socket
import threading
import time
import uuid
from contextlib import ExitStack
from urllib.parse import urlparse

import httpx
import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from adapters.kafka.errors import ErrorCode
from adapters.kafka.messages_txn import INIT_PRODUCER_ID
from adapters.kafka.records import Record, encode_batch
from ferry_harness import TEST_STORE, running_gateway, shared_cluster, store_env
from kafka_support import sasl_conf as conf
from kafka_support import until as wait_until
from tcp_proxy import TcpProxy
from test_kafka_retry_lookup_store import RawKafka

pytestmark = [pytest.mark.store,
              pytest.mark.skipif(TEST_STORE != "jetstream", reason="two gateways need the JetStream store pass")]
WAIT_S = 60  # a loop's limit: guards a hang only (a lease is 7 s)
PARTITIONS = 16  # one of them is led by gateway A (rendezvous over two gateways: 1 - 2**-16)
# A server-to-client NATS frame: MSG <subject> <sid> [reply] <size> / HMSG ... <hdr size> <size>
_FRAME = re.compile(rb"^(MSG|HMSG) (\S+) (\S+)(?: (\S+))?(?: \d+)? (\d+)$")


class MirrorHoldingProxy(TcpProxy):
    """Forwards everything, except that while ``holding`` is set the stored messages the
    cluster delivers for the partition streams of ``prefix`` (ack reply ``$JS.ACK...``
    naming a ``<prefix>_P_`` stream) are kept back, in order, until :meth:`release`."""

    def __init__(self, target: tuple[str, int], prefix: str) -> None:
        self.holding = threading.Event()
        self.marker = f"{prefix}_P_".upper().encode()  # stream names are upper case (layout.py)
        self.send_lock = threading.Lock()
        self.pending: list[tuple[socket.socket, list[bytes]]] = []  # per connection: held frames
        super().__init__(target)

    def relay(self, data: bytes, dst: socket.socket, from_client: bool, state: dict) -> bool:
        if from_client:
            dst.sendall(data)
            return True
        buf = state.setdefault("buf", bytearray())
        if "held" not in state:
            state["held"] = []
            with self.send_lock:
                self.pending.append((dst, state["held"]))
        buf += data
        out = bytearray()
        with self.send_lock:
            held = state["held"]
            while (frame := _take_frame(buf)) is not None:
                if self._mirror(frame) and (self.holding.is_set() or held):
                    held.append(frame)  # behind what is held already: the mirror's order stays
                    if not self.holding.is_set():
                        out += b"".join(held)
                        held.clear()
                    continue
                out += frame
            if out:
                dst.sendall(out)
        return True

    def _mirror(self, frame: bytes) -> bool:
        line = frame[:frame.index(b"\r\n")]
        m = _FRAME.match(line)
        return bool(m and m.group(4) and m.group(4).startswith(b"$JS.ACK.") and self.marker in m.group(4).upper())

    def release(self) -> None:
        self.holding.clear()
        with self.send_lock:
            for dst, held in self.pending:
                if held:
                    try:
                        dst.sendall(b"".join(held))
                    except OSError:
                        pass
                    held.clear()

    def close(self) -> None:
        self.release()
        super().close()


def _take_frame(buf: bytearray) -> bytes | None:
    """The first whole frame of ``buf`` (removed from it), or None for a partial one."""
    end = buf.find(b"\r\n")
    if end < 0:
        return None
    m = _FRAME.match(bytes(buf[:end]))
    size = end + 2 + (int(m.group(5)) + 2 if m else 0)
    if len(buf) < size:
        return None
    frame = bytes(buf[:size])
    del buf[:size]
    return frame


def until(what: str, check):
    return wait_until(what, check, WAIT_S, tolerate=(KafkaException, httpx.HTTPError))


def batch(pid, n: int) -> bytes:
    """The producer's ``n``-th batch: 3 records, sequences 3n..3n+2."""
    return encode_batch([Record(offset_delta=i, timestamp_delta=i, value=b"v%d" % (3 * n + i)) for i in range(3)],
                        base_timestamp=int(time.time() * 1000), base_sequence=3 * n,
                        producer_id=pid.producer_id, producer_epoch=pid.producer_epoch)


def test_a_new_leader_whose_copy_lags_answers_retriable_not_out_of_order(tmp_path):
    env = store_env()
    node = urlparse(shared_cluster().urls[0])
    topic = f"cu-{uuid.uuid4().hex[:8]}"
    with ExitStack() as stack:
        proxy = MirrorHoldingProxy((node.hostname, node.port), env["FERRY_STORE_PREFIX"])
        stack.callback(proxy.close)
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
        a = stack.enter_context(running_gateway(tmp_path / "a", **env))
        b = stack.enter_context(running_gateway(tmp_path / "b", **{
            **env, "FERRY_STORE_URL": f"nats://127.0.0.1:{proxy.port}"}))
        admin_a, admin_b = AdminClient(conf(a)), AdminClient(conf(b))
        until("both gateways list both brokers",
              lambda: all(len(adm.list_topics(timeout=5).brokers) == 2 for adm in (admin_a, admin_b)))
        admin_a.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(WAIT_S)
        brokers = admin_a.list_topics(timeout=5).brokers
        node_a, node_b = (next(i for i, bm in brokers.items() if bm.port == gw.ports["kafka"]) for gw in (a, b))

        def leaders(adm):
            t = adm.list_topics(topic, timeout=5).topics.get(topic)
            if t is None or t.error or len(t.partitions) != PARTITIONS:
                return None
            return {p: t.partitions[p].leader for p in t.partitions}
        part = min(p for p, lead in until("the partitions' leaders", lambda: leaders(admin_a)).items()
                   if lead == node_a)

        raw_a = RawKafka(a)
        stack.callback(raw_a.close)
        pid = raw_a.call(INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout_ms=60_000)
        assert pid.error_code == 0
        for n in (0, 1):
            answer = raw_a.produce(topic, part, batch(pid, n))
            assert (answer.error_code, answer.base_offset) == (0, 3 * n)

        http_b = stack.enter_context(httpx.Client(base_url=f"http://127.0.0.1:{b.ports['http']}", timeout=WAIT_S))
        login = http_b.post("/users/login", json={"username": b.cfg.auth.root_username,
                                                  "password": b.cfg.auth.root_password})
        http_b.headers["authorization"] = f"Bearer {login.json()['access_token']['token']}"

        def copy_b() -> list[bytes]:
            r = http_b.get(f"/streams/kafka/topics/{topic}/messages",
                           params={"kind": "offset", "value": 0, "count": 100, "partition_id": part})
            return [m["payload"] for m in r.json()["messages"]] if r.status_code == 200 else []
        until("B's copy holds the first two batches", lambda: len(copy_b()) == 6)

        proxy.holding.set()  # B's mirrors get nothing more until released
        answer = raw_a.produce(topic, part, batch(pid, 2))
        assert (answer.error_code, answer.base_offset) == (0, 6)
        raw_a.close()
        a.stop()  # a clean stop gives up A's lease: B leads every partition
        until("B leads the partition", lambda: (leaders(admin_b) or {}).get(part) == node_b)

        raw_b = RawKafka(b)
        stack.callback(raw_b.close)
        for _ in range(3):  # while B's copy lacks batch 2: retriable every time, never OUT_OF_ORDER
            answer = raw_b.produce(topic, part, batch(pid, 3), retry=False)
            assert answer.error_code == int(ErrorCode.NOT_ENOUGH_REPLICAS), answer
            time.sleep(0.1)  # librdkafka's retry.backoff.ms
        assert len(copy_b()) == 6  # the copy still lags: the proxy held batch 2 back

        proxy.release()
        answer = raw_b.produce(topic, part, batch(pid, 3))  # sent again while NOT_ENOUGH_REPLICAS
        assert (answer.error_code, answer.base_offset) == (0, 9)
        until("B's copy holds all four batches", lambda: len(copy_b()) >= 12)
        assert [base64.b64decode(p) for p in copy_b()] == [b"v%d" % i for i in range(12)]  # in order, once
