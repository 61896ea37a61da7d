"""One Kafka consumer group across two gateways over the JetStream store (docs/kafka.md
"Scale-out"): every gateway serving Kafka is a broker, each partition has one leader and
each group one coordinator (adapters/kafka/placement.py), so confluent-kafka members
bootstrapped at different gateways form one group and split the partitions.

Runs only in the store pass (FERRY_TEST_STORE=jetstream, `make test`'s second run): both
gateways share that pass's cluster under one store prefix."""

from __future__ import annotations

import time
import uuid
from contextlib import ExitStack

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from ferry_harness import TEST_STORE, running_gateway, store_env
from kafka_support import sasl_conf as conf
from kafka_support import until as wait_until

pytestmark = [pytest.mark.store,
              pytest.mark.skipif(TEST_STORE != "jetstream", reason="two gateways need the JetStream store pass")]
WAIT_S = 60  # a loop's limit: guards a hang only (a lease is 7 s, a leader election ~5 s)
PARTITIONS = 4
# Short group timers keep the rebalances quick: Kafka's smallest session timeout
# (group.min.session.timeout.ms), a heartbeat well inside it.
GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300, "auto.offset.reset": "earliest",
         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000}


def until(what: str, check):
    return wait_until(what, check, WAIT_S)


def produce(gw, topic: str, n: int, tag: str) -> set[bytes]:
    """``n`` keyed records spread over every partition, through the leaders (bootstrapped at ``gw``)."""
    p = Producer({**conf(gw), "linger.ms": 5})
    errors = []
    values = set()
    for i in range(n):
        value = f"{tag}-{i}".encode()
        values.add(value)
        p.produce(topic, key=f"k{i}".encode(), value=value, partition=i % PARTITIONS,
                  on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert p.flush(WAIT_S) == 0
    assert errors == []
    return values


def poll_until(consumers: list, want: int, settled=lambda: True) -> list:
    """Records from ``consumers`` (polled in turn) until ``want`` came and ``settled()``."""
    got = []
    deadline = time.monotonic() + WAIT_S
    while len(got) < want or not settled():
        assert time.monotonic() < deadline, f"got {len(got)} of {want} records"
        for c in consumers:
            m = c.poll(0.05)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m)
    for c in consumers:  # nothing more than the records written (no duplicates on the way)
        m = c.poll(0.3)
        assert m is None or m.error() is not None, f"an extra record {m.value()!r}"
    return got


def test_one_group_across_two_gateways_splits_partitions_and_resumes_from_commits(tmp_path):
    env = {**store_env(), "FERRY_KAFKA_INITIAL_REBALANCE_DELAY_MS": "0"}  # one prefix: the same store
    with ExitStack() as stack:
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
        a, b = (stack.enter_context(running_gateway(tmp_path / name, **env)) for name in ("a", "b"))
        admins = [AdminClient(conf(gw)) for gw in (a, b)]
        until("both gateways list both brokers",
              lambda: all(len(adm.list_topics(timeout=5).brokers) == 2 for adm in admins))
        topic = f"so-{uuid.uuid4().hex[:8]}"
        admins[0].create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(WAIT_S)

        def leaders(adm):
            t = adm.list_topics(topic, timeout=5).topics[topic]
            return None if t.error or len(t.partitions) != PARTITIONS else {i: p.leader for i, p in
                                                                             t.partitions.items()}
        seen = [until("the topic on both gateways", lambda adm=adm: leaders(adm)) for adm in admins]
        assert seen[0] == seen[1]  # every gateway computes the same leaders
        assert set(seen[0].values()) <= set(admins[0].list_topics(timeout=5).brokers)
        # one cluster: librdkafka warns when one client's brokers report different ids
        ids = {adm.list_topics(timeout=5).cluster_id for adm in admins}
        assert len(ids) == 1 and None not in ids

        group = f"g-{topic}"
        c1 = Consumer({**conf(a), **GROUP, "group.id": group})
        c2 = Consumer({**conf(b), **GROUP, "group.id": group})
        stack.callback(c1.close)
        c1.subscribe([topic])
        c2.subscribe([topic])
        # One group: the members split the partitions (two groups of one would each take all four).
        poll_until([c1, c2], 0, lambda: len(c1.assignment()) == 2 and len(c2.assignment()) == 2)
        assert {p.partition for p in c1.assignment()} | {p.partition for p in c2.assignment()} == set(
            range(PARTITIONS))

        first = produce(a, topic, 40, "first")
        got = poll_until([c1, c2], len(first))
        assert sorted(m.value() for m in got) == sorted(first)  # every record exactly once
        assert {m.partition() for m in got} == set(range(PARTITIONS))
        c1.commit(asynchronous=False)
        c2.commit(asynchronous=False)
        c2.close()  # leaves: the other member takes every partition

        # Written once the rebalance is over: an eager one revokes every partition, and the
        # member then resumes its own from the commits too, reading again what it had not committed.
        poll_until([c1], 0, lambda: len(c1.assignment()) == PARTITIONS)
        second = produce(a, topic, 20, "second")
        got = poll_until([c1], len(second))
        assert sorted(m.value() for m in got) == sorted(second)  # from the commits, nothing read twice
        c1.commit(asynchronous=False)

        third = produce(b, topic, 8, "third")
        c1.unsubscribe()  # leaves: the newcomer resumes where the group committed
        c3 = Consumer({**conf(b), **GROUP, "group.id": group})
        stack.callback(c3.close)
        c3.subscribe([topic])
        got = poll_until([c3], len(third), lambda: len(c3.assignment()) == PARTITIONS)
        assert sorted(m.value() for m in got) == sorted(third)
