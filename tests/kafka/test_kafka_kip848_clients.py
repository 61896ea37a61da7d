"""KIP-848 with the one client that offers it: confluent-kafka (librdkafka 2.16) consumers with
``group.protocol=consumer`` against a gateway on 127.0.0.1 port 0 (docs/kafka.md "Groups").

Two members share a 4-partition topic through Ferry's server-side assignor; the partitions
move when the second joins and when it leaves; every record is read once, and a third
consumer of the same group resumes from the committed offsets (OffsetCommit v9 with the
member epoch)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from ferry_harness import running_gateway
from test_kafka_clients import WAIT_S, sasl, topic_name

from adapters.kafka import consumer_groups

pytestmark = pytest.mark.store

PARTITIONS = 4
PER_PARTITION = 3  # records per partition per round: few, every partition covered
# The heartbeat interval is the coordinator's (Kafka's group.consumer.heartbeat.interval.ms,
# 5 s) and a member learns of a new assignment only at its next heartbeat; the listener has
# no option for it, so this module's gateway starts with a short one to keep the moves quick.
HEARTBEAT_MS = 300


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(consumer_groups, "HEARTBEAT_INTERVAL_MS", HEARTBEAT_MS)
        with running_gateway(tmp_path_factory.mktemp("kip848"), FERRY_KAFKA_INITIAL_REBALANCE_DELAY_MS="0") as gw:
            yield gw


def consumer(gw, group: str) -> Consumer:
    # No session.timeout.ms / heartbeat.interval.ms / partition.assignment.strategy:
    # librdkafka refuses them with group.protocol=consumer (the coordinator owns them).
    return Consumer({**sasl(gw), "group.id": group, "group.protocol": "consumer", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})


def produce(gw, topic: str, round_: int) -> set:
    p = Producer({**sasl(gw), "acks": "all", "linger.ms": 1})
    for part in range(PARTITIONS):
        for i in range(PER_PARTITION):
            p.produce(topic, value=f"r{round_}-p{part}-{i}".encode(), partition=part)
    assert p.flush(WAIT_S) == 0
    return {f"r{round_}-p{part}-{i}" for part in range(PARTITIONS) for i in range(PER_PARTITION)}


def parts(c: Consumer) -> set:
    return {tp.partition for tp in c.assignment()}


def poll_until(consumers: list, got: dict, done) -> None:
    """Poll every consumer (records go to ``got[consumer]``) until ``done()`` or WAIT_S."""
    for _ in range(WAIT_S * 10 // len(consumers)):
        if done():
            return
        for c in consumers:
            m = c.poll(0.1)
            if m is not None:
                assert m.error() is None, m.error()
                got[c].append(m)
    assert done(), [parts(c) for c in consumers]


def values(msgs) -> list:
    return [m.value().decode() for m in msgs]


def test_two_consumers_share_and_hand_over_partitions_and_offsets_survive(gw):
    topic, group = topic_name("kip848"), topic_name("g848")
    admin = AdminClient(sasl(gw))  # kept: a collected client cancels its requests
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(WAIT_S)
    sent = produce(gw, topic, 1)
    c1, c2 = consumer(gw, group), consumer(gw, group)
    got = {c1: [], c2: []}
    try:
        c1.subscribe([topic])  # alone: every partition, every record of round 1
        poll_until([c1], got, lambda: len(got[c1]) == len(sent))
        assert parts(c1) == set(range(PARTITIONS))
        c1.commit(asynchronous=False)

        c2.subscribe([topic])  # the second member: two partitions move, after c1 let them go
        poll_until([c1, c2], got, lambda: len(parts(c1)) == len(parts(c2)) == PARTITIONS // 2)
        assert parts(c1) | parts(c2) == set(range(PARTITIONS))
        described = admin.describe_consumer_groups([group])[group].result(WAIT_S)  # ConsumerGroupDescribe
        assert described.type == ConsumerGroupType.CONSUMER and described.partition_assignor == "uniform"
        assert sorted(tp.partition for m in described.members for tp in m.assignment.topic_partitions) == \
            list(range(PARTITIONS))
        shared = produce(gw, topic, 2)
        sent |= shared
        poll_until([c1, c2], got, lambda: len(got[c1]) + len(got[c2]) == len(sent))
        round2 = {c: [m for m in got[c] if m.value().startswith(b"r2-")] for c in (c1, c2)}
        for c in (c1, c2):
            assert round2[c] and {m.partition() for m in round2[c]} <= parts(c)
            c.commit(asynchronous=False)

        c2.close()  # leaves (epoch -1): c1 takes everything over
        poll_until([c1], got, lambda: parts(c1) == set(range(PARTITIONS)))
        sent |= produce(gw, topic, 3)
        poll_until([c1], got, lambda: len(got[c1]) + len(got[c2]) == len(sent))
        c1.commit(asynchronous=False)
    finally:
        c1.close()
        try:
            c2.close()
        except RuntimeError:  # already closed
            pass
    read = values(got[c1]) + values(got[c2])
    assert sorted(read) == sorted(sent)  # every record once: none lost, none twice

    c3 = consumer(gw, group)  # the same group after both left: resumes at the commits
    try:
        c3.subscribe([topic])
        poll_until([c3], {c3: []}, lambda: parts(c3) == set(range(PARTITIONS)))
        committed = c3.committed(list(c3.assignment()), timeout=WAIT_S)
        assert sorted((tp.partition, tp.offset) for tp in committed) == \
            [(p, 3 * PER_PARTITION) for p in range(PARTITIONS)]
        fresh = produce(gw, topic, 4)
        got3 = {c3: []}
        poll_until([c3], got3, lambda: len(got3[c3]) == len(fresh))
        assert set(values(got3[c3])) == fresh  # nothing before the commits came again
    finally:
        c3.close()


def test_a_regex_subscription_is_refused_loudly(gw):
    c = consumer(gw, topic_name("g848re"))
    try:
        c.subscribe(["^kip848-.*"])
        error = None
        for _ in range(WAIT_S * 10):
            m = c.poll(0.1)
            if m is not None and m.error() is not None:
                error = m.error()
                break
        # SubscribedTopicRegex answers INVALID_REQUEST, which librdkafka makes fatal
        assert error is not None and error.code() == KafkaError._FATAL, error
        assert "invalid request" in str(error).lower() or "invalid_request" in str(error).lower(), error
    finally:
        try:
            c.close()
        except Exception:  # noqa: BLE001 - closing a consumer after its fatal error may raise it again
            pass
