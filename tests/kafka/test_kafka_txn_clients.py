"""Kafka transactions with real clients against a gateway on 127.0.0.1 port 0:
confluent-kafka and kafka-python commit and abort; read_committed and read_uncommitted
consumers and a NATS JetStream reader see only committed records (staging: an aborted
record never reaches the log); consume-transform-produce stays exactly-once across a
kill -9 of the producer process (docs/kafka.md "Transactions")."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from ferry_harness import running_gateway
from test_kafka_clients import WAIT_S, drain, kp_sasl, read_all, sasl, topic_name

pytestmark = pytest.mark.store


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with running_gateway(tmp_path_factory.mktemp("kafkatxn"), FERRY_KAFKA_INITIAL_REBALANCE_DELAY_MS="0") as gw:
        yield gw


def create(gw, topic: str, partitions: int) -> None:
    admin = AdminClient(sasl(gw))  # kept alive until the result is in
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(WAIT_S)


def txn_producer(gw, txn_id: str) -> Producer:
    p = Producer({**sasl(gw), "transactional.id": txn_id, "transaction.timeout.ms": 60_000, "linger.ms": 5})
    p.init_transactions(WAIT_S)
    return p


def commit_and_abort(p: Producer, topic: str, partitions: int) -> list[bytes]:
    """One committed transaction, one aborted (its records flushed to the gateway first),
    one more committed; the committed values."""
    p.begin_transaction()
    for i in range(6):
        p.produce(topic, value=b"c%d" % i, key=b"k%d" % i, partition=i % partitions)
    p.commit_transaction(WAIT_S)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=b"aborted%d" % i, partition=i % partitions)
    assert p.flush(WAIT_S) == 0  # staged on the gateway, then thrown away
    p.abort_transaction(WAIT_S)
    p.begin_transaction()
    p.produce(topic, value=b"c-last", partition=0)
    p.commit_transaction(WAIT_S)
    return [b"c%d" % i for i in range(6)] + [b"c-last"]


def test_confluent_commit_and_abort_seen_by_both_isolation_levels(gw):
    topic = topic_name("tx")
    create(gw, topic, 2)
    p = txn_producer(gw, f"tx-{topic}")
    committed = commit_and_abort(p, topic, 2)
    for isolation in ("read_committed", "read_uncommitted"):
        got = read_all({**sasl(gw), "isolation.level": isolation}, topic, len(committed), partitions=2)
        assert sorted(m.value() for m in got) == sorted(committed), isolation
        assert sorted((m.partition(), m.offset()) for m in got) == [(0, o) for o in range(4)] + [(1, o) for o in range(3)]
    assert [m.key() for m in got if m.value() == b"c0"] == [b"k0"]


def test_a_jetstream_reader_sees_only_committed_records(gw):
    import nats
    name = "TX" + uuid.uuid4().hex[:8].upper()
    subject = f"txn.{name.lower()}"

    async def setup():
        nc = await nats.connect(gw.url())
        try:
            await nc.jetstream().add_stream(name=name, subjects=[subject])
        finally:
            await nc.close()

    asyncio.run(setup())
    topic = f"jetstream.{name}"  # the JetStream stream NAME is Kafka topic jetstream.NAME (one partition)
    committed = commit_and_abort(txn_producer(gw, f"js-{name}"), topic, 1)

    async def read():
        nc = await nats.connect(gw.url())
        try:
            js = nc.jetstream()
            info = await js.stream_info(name)
            psub = await js.pull_subscribe(subject, durable="R", stream=name)
            msgs = await psub.fetch(len(committed), timeout=WAIT_S)
            return info.state.messages, [m.data for m in msgs]
        finally:
            await nc.close()

    count, values = asyncio.run(read())
    assert count == len(committed)
    assert values == committed


def test_kafka_python_commit_and_abort(gw):
    from kafka import KafkaConsumer, KafkaProducer
    topic = topic_name("kptx")
    create(gw, topic, 2)
    p = KafkaProducer(**kp_sasl(gw), transactional_id=f"kp-{topic}")
    p.init_transactions()
    p.begin_transaction()
    for i in range(4):
        p.send(topic, value=b"kc%d" % i, partition=i % 2)
    p.commit_transaction()
    p.begin_transaction()
    p.send(topic, value=b"gone", partition=1)
    p.flush()
    p.abort_transaction()
    p.begin_transaction()
    p.send(topic, value=b"kc-last", partition=0)
    p.commit_transaction()
    p.close()
    c = KafkaConsumer(topic, **kp_sasl(gw), group_id=f"g-{topic}", auto_offset_reset="earliest",
                      isolation_level="read_committed", consumer_timeout_ms=2000)
    values = sorted(m.value for m in c)
    c.close()
    assert values == sorted([b"kc%d" % i for i in range(4)] + [b"kc-last"])


def read_until(gw, topic: str, n: int) -> list:
    """The records of both partitions read_committed until ``n`` came and a poll found no
    more, or WAIT_S without a record."""
    c = Consumer({**sasl(gw), "group.id": "unused", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in (0, 1)])
    try:
        return drain(c, n)
    finally:
        c.close()


# The transformer: reads the input in a group, writes each record transformed to the output
# and sends the consumed offsets in the same transaction; a small transaction per poll.
TRANSFORMER = r"""
import json, os, sys
from confluent_kafka import Consumer, Producer
conf = json.loads(os.environ["KAFKA_CONF"])
src, dst, group, txn_id = sys.argv[1:5]
p = Producer({**conf, "transactional.id": txn_id, "transaction.timeout.ms": 20000})
p.init_transactions(30)
c = Consumer({**conf, "group.id": group, "group.instance.id": "transformer", "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "isolation.level": "read_committed", "session.timeout.ms": 6000,
              "heartbeat.interval.ms": 500, "max.poll.interval.ms": 20000})
c.subscribe([src])
done = 0
while True:
    msgs = [m for m in c.consume(10, 0.5) if m.error() is None]
    if not msgs:
        continue
    p.begin_transaction()
    for m in msgs:
        p.produce(dst, key=m.key(), value=b"T:" + m.value(), partition=m.partition())
    p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    done += len(msgs)
    print(done, flush=True)
"""


def test_consume_transform_produce_is_exactly_once_across_a_kill_9_of_the_producer(gw):
    src, dst = topic_name("in"), topic_name("out")
    create(gw, src, 2)
    create(gw, dst, 2)
    n = 300
    p = Producer({**sasl(gw), "enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        p.produce(src, value=b"r%03d" % i, key=b"%d" % i, partition=i % 2)
    assert p.flush(WAIT_S) == 0
    args = [sys.executable, "-c", TRANSFORMER, src, dst, f"g-{src}", f"t-{src}"]
    env = {**os.environ, "KAFKA_CONF": json.dumps(sasl(gw))}

    def start():
        return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    first = start()
    try:
        for line in first.stdout:  # the count of records transformed and committed so far
            if int(line) >= n // 3:
                break
        else:
            pytest.fail(f"the transformer stopped early (exit {first.wait(WAIT_S)})")
        os.kill(first.pid, signal.SIGKILL)  # mid-way: likely inside a transaction
    finally:
        first.kill()
        first.wait(WAIT_S)
    second = start()
    try:
        got = read_until(gw, dst, n)
    finally:
        second.kill()
        second.wait(WAIT_S)
    values = sorted(m.value() for m in got)
    assert values == sorted(b"T:r%03d" % i for i in range(n))  # every input once: none lost, none twice
