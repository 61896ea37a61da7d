"""Real Kafka clients against the kafka listener of a gateway on 127.0.0.1 port 0:
confluent-kafka (librdkafka), kafka-python and aiokafka produce and consume with
SASL/PLAIN as Ferry users; records cross to NATS and back (docs/kafka.md)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from ferry_harness import running_gateway

pytestmark = pytest.mark.store

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
    """Poll ``c`` until ``n`` records came and one more poll found nothing, or WAIT_S
    passed without a record (a time since the last record, not a count of polls, so
    a long read is not cut short)."""
    got, last = [], time.monotonic()
    while time.monotonic() - last < WAIT_S:
        m = c.poll(0.1)
        if m is None:
            if len(got) >= n:
                break
            continue
        assert m.error() is None, m.error()
        got.append(m)
        last = time.monotonic()
    return got


def read_all(conf: dict, topic: str, n: int, partitions: int = 1) -> list:
    """The first ``n`` records of a topic's partitions, assigned (no group), in order per partition."""
    c = Consumer({**conf, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    try:
        return drain(c, n)
    finally:
        c.close()


def consume_all(conf: dict, topic: str, n: int) -> list:
    """The first ``n`` records through a consumer group (subscribe), committed at the end."""
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    try:
        got = drain(c, n)
        c.commit(asynchronous=False)
    finally:
        c.close()
    return got


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


def test_confluent_admin_create_describe_and_committed_offsets(gw):
    topic = topic_name("adm")
    admin = AdminClient(sasl(gw))
    fs = admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1,
                                       config={"retention.ms": "3600000"})])
    fs[topic].result(WAIT_S)
    md = admin.list_topics(timeout=WAIT_S)
    assert len(md.topics[topic].partitions) == 3
    again = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    with pytest.raises(KafkaException) as err:
        again[topic].result(WAIT_S)
    assert err.value.args[0].name() == "TOPIC_ALREADY_EXISTS"
    bad = admin.create_topics([NewTopic(topic_name(), num_partitions=1, replication_factor=3)])
    with pytest.raises(KafkaException) as err:
        list(bad.values())[0].result(WAIT_S)
    assert err.value.args[0].name() == "INVALID_REPLICATION_FACTOR"
    p = Producer(sasl(gw))
    for i in range(30):
        p.produce(topic, value=b"x", partition=i % 3)
    p.flush(WAIT_S)
    got = consume_all(sasl(gw), topic, 30)
    assert len(got) == 30
    c = Consumer({**sasl(gw), "group.id": f"g-{topic}"})
    committed = c.committed([TopicPartition(topic, i) for i in range(3)], timeout=WAIT_S)
    c.close()
    assert sorted(tp.offset for tp in committed) == [10, 10, 10]
    lo, hi = Consumer({**sasl(gw), "group.id": "wm"}).get_watermark_offsets(TopicPartition(topic, 0), WAIT_S)
    assert (lo, hi) == (0, 10)


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


def test_kafka_python_idempotent_producer_and_group_of_two(gw):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic as KNewTopic
    topic = topic_name("kp")
    KafkaAdminClient(**kp_sasl(gw)).create_topics([KNewTopic(topic, 4, 1)])
    prod = KafkaProducer(**kp_sasl(gw), acks="all", enable_idempotence=True)
    futures = [prod.send(topic, value=f"m{i}".encode(), key=str(i).encode(), partition=i % 4,
                         headers=[("h", b"1")]) for i in range(40)]
    offsets = [f.get(WAIT_S) for f in futures]
    prod.close()
    assert sorted((m.partition, m.offset) for m in offsets) == sorted((p, o) for p in range(4) for o in range(10))
    group = f"grp-{topic}"
    # metadata_max_age_ms: see test_kafka_client_matrix.py KafkaPythonOps.consumer
    # heartbeat_interval_ms: a member learns of a rebalance at its next heartbeat (3 s by
    # default); under a loaded CI the joins, the first assignment made without the topic's
    # metadata ("No partition metadata") and the rebalance after it outlasted a loop of
    # WAIT_S * 2 polls, so the loop runs to a deadline instead.
    consumers = [KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                               consumer_timeout_ms=500, metadata_max_age_ms=1000, heartbeat_interval_ms=500,
                               **kp_sasl(gw)) for _ in range(2)]
    seen: set = set()  # (partition, offset, value): a rebalance may hand a partition over mid-read
    deadline = time.monotonic() + 2 * WAIT_S
    while time.monotonic() < deadline:
        for c in consumers:
            for records in c.poll(timeout_ms=200).values():
                seen |= {(r.partition, r.offset, r.value) for r in records}
        assignments = [c.assignment() for c in consumers]
        if len(seen) >= 40 and all(len(a) == 2 for a in assignments):
            break
    for c in consumers:
        c.close()
    assert sorted(v for _p, _o, v in seen) == sorted(f"m{i}".encode() for i in range(40))
    assert all(len(a) == 2 for a in assignments), assignments  # the range assignor split 4 partitions
    assert not (assignments[0] & assignments[1])


def test_aiokafka_gzip_round_trip(gw):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    topic = topic_name("aio")
    conf = kp_sasl(gw)

    async def scenario():
        prod = AIOKafkaProducer(**conf, compression_type="gzip")
        await prod.start()
        try:
            for i in range(20):
                await prod.send_and_wait(topic, f"a{i}".encode(), key=b"k")
        finally:
            await prod.stop()
        cons = AIOKafkaConsumer(topic, **conf, group_id=f"g-{topic}", auto_offset_reset="earliest")
        await cons.start()
        out = []
        try:
            async with asyncio.timeout(WAIT_S):
                async for msg in cons:
                    out.append(msg.value)
                    if len(out) == 20:
                        break
        finally:
            await cons.stop()
        return out

    assert asyncio.run(scenario()) == [f"a{i}".encode() for i in range(20)]


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


@pytest.mark.skipif(NODE is None or not (NODE_DIR / "node_modules" / "kafkajs").is_dir(),
                    reason="node or kafkajs missing: run `make test` (npm install in tests/kafka/node)")
def test_kafkajs_admin_produce_gzip_and_group_consume(gw):
    topic = topic_name("js")
    done = subprocess.run([NODE, str(NODE_DIR / "scenario.js"), f"127.0.0.1:{gw.ports['kafka']}", topic],
                          cwd=NODE_DIR, capture_output=True, timeout=90,
                          env={**os.environ, "KAFKA_USER": gw.cfg.auth.root_username,
                               "KAFKA_PASS": gw.cfg.auth.root_password})
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    out = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert out["created"] is True and out["partitions"] == 2
    assert sorted(out["sent"]) == [[0, "0"], [1, "0"]] and out["zipped"] == [[0, "1"]]
    assert [(m["partition"], m["offset"], m["key"], m["value"]) for m in out["got"]] == [
        (0, "0", "a", "one"), (0, "1", "c", "three"), (1, "0", "b", "two")]
    assert out["got"][0]["headers"] == {"trace": "t1"}


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


def test_scram_sha_256_and_512_with_every_client_and_a_wrong_password_refused(gw):
    # The root user got SCRAM credentials when the gateway created it (core/scram.py).
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioPartition
    from confluent_kafka import KafkaError
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import TopicPartition as KpPartition
    topic = topic_name("scram")

    def scram(mechanism: str, **extra) -> dict:
        return {**sasl(gw), "sasl.mechanism": mechanism, **extra}

    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        p = Producer(scram(mechanism))
        p.produce(topic, value=mechanism.encode())
        assert p.flush(WAIT_S) == 0
    kp = {**kp_sasl(gw), "sasl_mechanism": "SCRAM-SHA-512"}
    prod = KafkaProducer(**kp)
    prod.send(topic, b"kafka-python").get(WAIT_S)
    prod.close()
    aio = {**kp_sasl(gw), "sasl_mechanism": "SCRAM-SHA-256"}

    async def aiokafka_round_trip():
        prod = AIOKafkaProducer(**aio)
        await prod.start()
        try:
            await prod.send_and_wait(topic, b"aiokafka")
        finally:
            await prod.stop()
        cons = AIOKafkaConsumer(**aio)
        await cons.start()
        try:
            cons.assign([AioPartition(topic, 0)])
            await cons.seek_to_beginning()
            out = []
            async with asyncio.timeout(WAIT_S):
                while len(out) < 4:
                    for records in (await cons.getmany(timeout_ms=200)).values():
                        out += [r.value for r in records]
            return out
        finally:
            await cons.stop()

    expected = [b"SCRAM-SHA-256", b"SCRAM-SHA-512", b"kafka-python", b"aiokafka"]
    assert asyncio.run(aiokafka_round_trip()) == expected
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        assert [m.value() for m in read_all(scram(mechanism), topic, 4)] == expected
    cons = KafkaConsumer(**kp, consumer_timeout_ms=500)
    cons.assign([KpPartition(topic, 0)])
    cons.seek_to_beginning()
    seen = []
    for _ in range(WAIT_S * 5):
        for records in cons.poll(timeout_ms=200).values():
            seen += [r.value for r in records]
        if len(seen) >= 4:
            break
    cons.close()
    assert seen == expected
    if NODE is not None and (NODE_DIR / "node_modules" / "kafkajs").is_dir():
        done = subprocess.run([NODE, str(NODE_DIR / "scenario.js"), f"127.0.0.1:{gw.ports['kafka']}",
                               topic_name("scramjs")], cwd=NODE_DIR, capture_output=True, timeout=90,
                              env={**os.environ, "KAFKA_USER": gw.cfg.auth.root_username,
                                   "KAFKA_PASS": gw.cfg.auth.root_password, "KAFKA_MECHANISM": "scram-sha-256"})
        assert done.returncode == 0, done.stderr.decode()[-3000:]
        out = json.loads(done.stdout.decode().strip().splitlines()[-1])
        assert sorted(m["value"] for m in out["got"]) == ["one", "three", "two"]
    # One wrong password (the login guard of 127.0.0.1 is shared with this module's tests:
    # five failures are free, and the next success forgets them).
    errors = []
    bad = Producer(scram("SCRAM-SHA-256", **{"sasl.password": "wrong-password", "error_cb": errors.append,
                                             "reconnect.backoff.ms": 10000, "reconnect.backoff.max.ms": 10000}))
    for _ in range(WAIT_S * 10):
        bad.poll(0.1)
        if errors:
            break
    del bad  # librdkafka keeps reconnecting until the handle is destroyed
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors


def test_alter_configs_and_delete_records_with_confluent_and_kafka_python(gw):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition as KpPartition
    topic = topic_name("dr")
    admin = AdminClient(sasl(gw))
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(WAIT_S)
    alter = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([alter])[alter].result(WAIT_S)
    (described,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    entry = described.result(WAIT_S)["retention.ms"]
    assert (entry.value, ConfigSource(entry.source)) == ("3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    p = Producer(sasl(gw))
    for i in range(10):
        p.produce(topic, value=f"r{i}".encode(), partition=i % 2)
    assert p.flush(WAIT_S) == 0
    (deleted,) = admin.delete_records([TopicPartition(topic, 0, 3)]).values()
    assert deleted.result(WAIT_S).low_watermark == 3
    c = Consumer({**sasl(gw), "group.id": "wm"})
    assert c.get_watermark_offsets(TopicPartition(topic, 0), WAIT_S) == (3, 5)
    got = read_all(sasl(gw), topic, 2)  # partition 0 from OFFSET_BEGINNING starts at the new start
    assert [(m.offset(), m.value()) for m in got] == [(3, b"r6"), (4, b"r8")]
    kp = KafkaAdminClient(**kp_sasl(gw))
    try:
        result = kp.delete_records({KpPartition(topic, 1): 4})
    finally:
        kp.close()
    assert result[KpPartition(topic, 1)]["low_watermark"] == 4
    assert c.get_watermark_offsets(TopicPartition(topic, 1), WAIT_S) == (4, 5)
    c.close()
