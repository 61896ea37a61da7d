"""An idempotent producer's records are stored once even when the cluster stores an
append whose acknowledgement the gateway never got (docs/scale-out.md "Fault schedule",
item 6; docs/kafka.md "Scale-out").

A proxy sits between the gateway and one nats-server node and holds everything the
node sends back (PubAcks, the mirror's messages, PONGs) for longer than the store keeps
re-sending (``PUBLISH_RETRY_S``, 30 s), while what the gateway sends still reaches the
cluster. The cluster therefore stores the producer's batch, and the gateway cannot know
it. Before the fix the gateway answered that batch KAFKA_STORAGE_ERROR and the next one,
pipelined behind it, OUT_OF_ORDER_SEQUENCE_NUMBER: librdkafka reads the second answer as
proof that the first batch is not in the log, bumps its epoch ("skipped sequence
numbers", rdkafka_request.c ``rd_kafka_handle_idempotent_Produce_error``) and sends
both batches' records again under the new epoch from sequence 0, so they were stored
twice. Kafka's broker answers OUT_OF_ORDER_SEQUENCE_NUMBER only when its log lacks the
missing sequences, which is what the gateway now does: while an append of the same
producer that could fill the gap is unresolved, the later batch gets a retriable error.
"""

from __future__ import annotations

import collections
import socket
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ferry_harness import running_gateway
from nats_cluster_fixtures import nats_cluster  # noqa: F401 - the test's own cluster (it is starved)
from tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow
WAIT_S = 120  # guards a hang only
# Longer than the store re-sends an unacknowledged message (PUBLISH_RETRY_S, 30 s,
# gateway/jetstream_store/store.py), so the gateway gives the append up while the
# cluster has stored it.
HOLD_S = 36.0


class AckHoldingProxy(TcpProxy):
    """A TCP proxy ``listen -> target`` that forwards client bytes at once and, while
    ``holding`` is set, keeps the server's bytes back (nothing is dropped: they leave
    when it clears, unless the client closed meanwhile)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.holding = threading.Event()
        super().__init__(target)

    def relay(self, data: bytes, dst: socket.socket, from_client: bool, state: dict) -> bool:
        while not from_client and self.holding.is_set():
            time.sleep(0.05)
        dst.sendall(data)
        return True

    def close(self) -> None:
        self.holding.clear()
        super().close()


def test_a_batch_stored_without_its_ack_is_not_stored_again_under_a_new_epoch(tmp_path, nats_cluster):  # noqa: F811
    proxy = AckHoldingProxy(("127.0.0.1", nats_cluster.client_ports[0]))
    try:
        with running_gateway(tmp_path, FERRY_STORE_URL=f"nats://127.0.0.1:{proxy.port}",
                             FERRY_STORE_PREFIX="EF") as gw:
            conf = {"bootstrap.servers": f"127.0.0.1:{gw.ports['kafka']}", "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "PLAIN", "sasl.username": gw.cfg.auth.root_username,
                    "sasl.password": gw.cfg.auth.root_password}
            topic = f"ef-{uuid.uuid4().hex[:8]}"
            admin = AdminClient(conf)
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(WAIT_S)
            p = Producer({**conf, "enable.idempotence": True, "acks": "all", "linger.ms": 5})
            outcomes: dict[str, object] = {}

            def produce(lo: int, hi: int, pause: float) -> None:
                for i in range(lo, hi):
                    p.produce(topic, value=f"m{i}".encode(), partition=0,
                              on_delivery=lambda err, m: outcomes.__setitem__(m.value().decode(), err))
                    p.poll(pause)

            produce(0, 20, 0)
            assert p.flush(WAIT_S) == 0
            proxy.holding.set()
            produce(20, 60, 0.05)  # several requests in flight behind the first
            time.sleep(HOLD_S)
            proxy.holding.clear()
            assert p.flush(WAIT_S) == 0
            failed = {v: str(e) for v, e in outcomes.items() if e is not None}

            c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                          "enable.auto.commit": False})
            c.assign([TopicPartition(topic, 0, 0)])
            got: list[tuple[int, str]] = []
            deadline = time.monotonic() + WAIT_S
            quiet_since = time.monotonic()
            while time.monotonic() - quiet_since < 3:
                assert time.monotonic() < deadline
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    got.append((m.offset(), m.value().decode()))
                    quiet_since = time.monotonic()
            c.close()
    finally:
        proxy.close()
    counts = collections.Counter(v for _, v in got)
    twice = {v: [o for o, w in got if w == v] for v, n in counts.items() if n > 1}
    assert twice == {}, f"stored more than once (value: offsets): {twice}"
    # every record the producer was told is delivered is stored
    assert {f"m{i}" for i in range(60)} - set(failed) <= set(counts)
