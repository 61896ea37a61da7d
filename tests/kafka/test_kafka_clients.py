"""Real Kafka clients against the kafka listener of a gateway on 127.0.0.1 port 0:
confluent-kafka (librdkafka), kafka-python and aiokafka produce and consume with
SASL/PLAIN as Ferry users; records cross to NATS and back (docs/kafka.md)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from ferry_harness import running_gateway

WAIT_S = 30  # a poll loop's limit: far above what these few records take
NODE_DIR = Path(__file__).parent / "node"
NODE = shutil.which("node")
KCAT = shutil.which("kcat")


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with running_gateway(tmp_path_factory.mktemp("kafka"), FERRY_KAFKA_INITIAL_REBALANCE_DELAY_MS="0") as gw:
        yield gw


def sasl(gw, user: str | None = None, password: str | None = None) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{gw.ports['kafka']}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user or gw.cfg.auth.root_username,
            "sasl.password": password or gw.cfg.auth.root_password}


def kp_sasl(gw) -> dict:
    return {"bootstrap_servers": f"127.0.0.1:{gw.ports['kafka']}", "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": gw.cfg.auth.root_username,
            "sasl_plain_password": gw.cfg.auth.root_password}


def topic_name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def drain(c, n: int) -> list:
    """Poll ``c`` until ``n`` records came and one more poll found nothing (or WAIT_S)."""
    got = []
    for _ in range(WAIT_S * 10):
        m = c.poll(0.1)
        if m is None:
            if len(got) >= n:
                break
            continue
        assert m.error() is None, m.error()
        got.append(m)
    return got


def read_all(conf: dict, topic: str, n: int, partitions: int = 1) -> list:
    """The first ``n`` records of a topic's partitions, assigned (no group), in order per partition."""
    c = Consumer({**conf, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    try:
        return drain(c, n)
    finally:
        c.close()


def test_confluent_produce_consume_keys_headers_and_acks(gw):
    topic = topic_name()
    p = Producer({**sasl(gw), "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    reports = []
    for i in range(50):
        p.produce(topic, value=f"v{i}".encode(), key=f"k{i % 5}".encode(),
                  headers=[("trace", f"t{i}".encode()), ("bin", b"\xff\x00")],
                  on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    p.produce(topic, value=None, key=b"gone")  # a tombstone
    assert p.flush(WAIT_S) == 0
    assert [e for e, _ in reports if e is not None] == []
    assert sorted(o for _, o in reports) == list(range(50))
    got = read_all(sasl(gw), topic, 51)
    assert [m.value() for m in got[:50]] == [f"v{i}".encode() for i in range(50)]
    assert [m.key() for m in got[:50]] == [f"k{i % 5}".encode() for i in range(50)]
    assert got[0].headers() == [("trace", b"t0"), ("bin", b"\xff\x00")]
    assert got[50].value() is None and got[50].key() == b"gone"
    assert [m.offset() for m in got] == list(range(51))


def test_wrong_password_and_no_sasl_are_refused(tmp_path):
    # its own gateway: the failures slow further logins from 127.0.0.1 (the login guard)
    with running_gateway(tmp_path) as gw:
        _refused(gw)


def _refused(gw):
    # one or two attempts only: more failures from 127.0.0.1 would slow the other tests'
    # logins through the shared login guard (core/access.py: 5 free failures)
    p = Producer({**sasl(gw, password="wrong-password"), "message.timeout.ms": 2000,
                  "reconnect.backoff.ms": 10000, "reconnect.backoff.max.ms": 10000})
    errors = []
    p.produce(topic_name(), value=b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(5)
    del p  # librdkafka keeps reconnecting until the handle is destroyed
    assert errors and errors[0] is not None
    from kafka import KafkaProducer
    from kafka.errors import KafkaError
    with pytest.raises(KafkaError):
        KafkaProducer(bootstrap_servers=f"127.0.0.1:{gw.ports['kafka']}", request_timeout_ms=3000,
                      max_block_ms=3000, bootstrap_timeout_ms=3000).send(topic_name(), b"x").get(5)


def test_kafka_records_are_nats_messages_and_back(gw):
    import nats
    topic = "bridge.orders"  # stream "bridge", topic "orders": NATS subject bridge.orders
    p = Producer(sasl(gw))
    p.produce(topic, value=b"from-kafka", key=b"k1", headers=[("trace", b"abc")])
    p.flush(WAIT_S)

    async def via_nats():
        nc = await nats.connect(gw.url())
        try:
            await nc.publish("bridge.orders", b"from-nats", headers={"x-origin": "nats"})
            await nc.flush()
        finally:
            await nc.close()

    asyncio.run(via_nats())
    got = read_all(sasl(gw), topic, 2)
    assert [m.value() for m in got] == [b"from-kafka", b"from-nats"]
    assert got[0].key() == b"k1" and ("trace", b"abc") in got[0].headers()
    assert got[1].key() is None
    assert ("x-origin", b"nats") in got[1].headers()
    assert ("ferry-nats-subject", b"bridge.orders") in got[1].headers()


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (.ci/run installs it with apt)")
def test_kcat_produces_and_consumes_with_headers(gw):
    topic = topic_name("kcat")
    auth = ["-b", f"127.0.0.1:{gw.ports['kafka']}", "-X", "security.protocol=SASL_PLAINTEXT",
            "-X", "sasl.mechanisms=PLAIN", "-X", f"sasl.username={gw.cfg.auth.root_username}",
            "-X", f"sasl.password={gw.cfg.auth.root_password}"]
    produced = subprocess.run([KCAT, *auth, "-P", "-t", topic, "-K", ":", "-H", "source=kcat"],
                              input=b"k1:hello\nk2:world\n", capture_output=True, timeout=60)
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = subprocess.run([KCAT, *auth, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
                               "-f", "%o %k %s %h\\n"], capture_output=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert consumed.stdout.decode().splitlines() == ["0 k1 hello source=kcat", "1 k2 world source=kcat"]
