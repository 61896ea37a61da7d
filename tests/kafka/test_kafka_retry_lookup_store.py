"""A retried idempotent batch sent to another gateway after its first gateway stopped
(docs/scale-out.md "Fault schedule", item 2): answered with no error and the first
attempt's base offset, as Kafka's new partition leader answers from the producer state
it replicated (``ProducerStateEntry``), not DUPLICATE_SEQUENCE_NUMBER with offset -1.

Runs only in the store pass (FERRY_TEST_STORE=jetstream): both gateways share that
pass's cluster under one store prefix. The Kafka client is a raw socket one so the
retry carries exactly the first attempt's batch (producer id, epoch, sequences)."""

from __future__ import annotations

import socket
import struct
import time
import uuid
from contextlib import ExitStack

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from adapters.kafka import frames
from adapters.kafka.errors import ErrorCode
from adapters.kafka.messages import PRODUCE
from adapters.kafka.messages_admin import SASL_AUTHENTICATE, SASL_HANDSHAKE
from adapters.kafka.messages_txn import INIT_PRODUCER_ID
from adapters.kafka.records import Record, encode_batch
from ferry_harness import TEST_STORE, running_gateway, store_env
from kafka_support import sasl_conf as conf
from kafka_support import until as wait_until

pytestmark = [pytest.mark.store,
              pytest.mark.skipif(TEST_STORE != "jetstream", reason="two gateways need the JetStream store pass")]
WAIT_S = 60  # a loop's limit: guards a hang only (a lease is 7 s)
NOT_ENOUGH_REPLICAS = int(ErrorCode.NOT_ENOUGH_REPLICAS)


class RawKafka:
    """One Kafka connection speaking the request tables directly."""

    def __init__(self, gw) -> None:
        self.sock = socket.create_connection(("127.0.0.1", gw.ports["kafka"]), timeout=WAIT_S)
        self.corr = 0
        assert self.call(SASL_HANDSHAKE, 1, mechanism="PLAIN").error_code == 0
        user, password = gw.cfg.auth.root_username, gw.cfg.auth.root_password
        token = b"\0" + user.encode() + b"\0" + password.encode()
        assert self.call(SASL_AUTHENTICATE, 1, auth_bytes=token).error_code == 0

    def call(self, api, version, **fields):
        self.corr += 1
        self.sock.sendall(frames.encode_request(api.key, version, self.corr, "h7", api.request.make(**fields)))
        size = struct.unpack(">i", self._read(4))[0]
        corr, value = frames.decode_response(api.key, version, self._read(size))
        assert corr == self.corr
        return value

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "the gateway closed the connection"
            buf += chunk
        return buf

    def produce(self, topic: str, partition: int, records: bytes, *, retry: bool = True):
        """One batch's answer, sent again while it is NOT_ENOUGH_REPLICAS ("not written",
        retriable, as librdkafka does: a leader new to the partition first catches its
        copy up with the stored log, adapters/kafka/catch_up.py) unless ``retry`` is False."""
        P = PRODUCE.request.structs
        data = P["TopicProduceData"].make(name=topic, partition_data=(
            P["PartitionProduceData"].make(index=partition, records=records),))
        deadline = time.monotonic() + WAIT_S
        while True:
            out = self.call(PRODUCE, 9, acks=-1, timeout_ms=10_000, topic_data=(data,))
            answer = out.responses[0].partition_responses[0]
            if not retry or answer.error_code != NOT_ENOUGH_REPLICAS or time.monotonic() > deadline:
                return answer
            time.sleep(0.1)  # librdkafka's retry.backoff.ms

    def close(self) -> None:
        self.sock.close()


def until(what: str, check):
    return wait_until(what, check, WAIT_S, tolerate=(KafkaException,))


def test_a_retry_through_the_new_leader_gets_the_first_attempts_offset(tmp_path):
    env = store_env()
    topic = f"rl-{uuid.uuid4().hex[:8]}"
    with ExitStack() as stack:
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
        gws = [stack.enter_context(running_gateway(tmp_path / name, **env)) for name in ("a", "b")]
        admins = [AdminClient(conf(gw)) for gw in gws]
        until("both gateways list both brokers",
              lambda: all(len(adm.list_topics(timeout=5).brokers) == 2 for adm in admins))
        admins[0].create_topics([NewTopic(topic, 2, 1)])[topic].result(WAIT_S)

        def leader(adm, partition):
            t = adm.list_topics(topic, timeout=5).topics.get(topic)
            return None if t is None or t.error or partition not in t.partitions else t.partitions[partition].leader
        lead = until("partition 0's leader", lambda: leader(admins[0], 0))
        brokers = admins[0].list_topics(timeout=5).brokers
        own = [next(i for i, bm in brokers.items() if bm.port == gw.ports["kafka"]) for gw in gws]  # broker ids
        first = own.index(lead)
        other = 1 - first
        a = RawKafka(gws[first])
        pid = a.call(INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout_ms=60_000)
        assert pid.error_code == 0
        kw = dict(producer_id=pid.producer_id, producer_epoch=pid.producer_epoch)
        batches = [encode_batch([Record(offset_delta=i, timestamp_delta=i, value=b"v%d-%d" % (n, i), key=b"k")
                                 for i in range(3)], base_timestamp=int(time.time() * 1000), base_sequence=3 * n,
                                **kw) for n in range(3)]
        answers = [a.produce(topic, 0, b) for b in batches]
        assert [(r.error_code, r.base_offset) for r in answers] == [(0, 0), (0, 3), (0, 6)]
        a.close()
        gws[first].stop()  # a clean stop gives up its lease: the other gateway leads partition 0
        until("the other gateway leads partition 0",
              lambda: (leader(admins[other], 0), own[other]) if leader(admins[other], 0) == own[other] else None)
        b = RawKafka(gws[other])
        for n in (1, 2, 0):  # the first attempts' answers never reached the client
            retry = b.produce(topic, 0, batches[n])
            assert (retry.error_code, retry.base_offset) == (0, 3 * n)
        nxt = b.produce(topic, 0, encode_batch([Record(offset_delta=0, value=b"next")], base_sequence=9, **kw))
        assert (nxt.error_code, nxt.base_offset) == (0, 9)  # nothing was stored twice
        b.close()
