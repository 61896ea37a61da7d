"""Defects librdkafka's own test suite found in the Kafka listener (tests/kafka/librdkafka/,
docs/kafka.md "librdkafka's test suite"), each pinned by the sans-I/O session."""

from __future__ import annotations

from test_kafka_session import Client, batch, broker, ctx, fetch_req, produce  # noqa: F401 - fixtures

from adapters.kafka import frames
from adapters.kafka.errors import ErrorCode as E
from adapters.kafka.messages import FETCH
from adapters.kafka.messages_admin import CREATE_PARTITIONS, CREATE_TOPICS


def test_fetch_error_partitions_carry_empty_records_not_null_rdkafka_0034(ctx, broker):
    """librdkafka's 0034_offset_reset: a Fetch v12 answer with OFFSET_OUT_OF_RANGE had a
    null record set, which librdkafka refuses ("invalid MessageSetSize -1") instead of
    resetting the offset. Kafka sends an empty one (ReplicaManager.createLogReadResult)."""
    c = Client(ctx)
    c.login()
    broker.create_stream("s")
    broker.create_topic("s", "t", 1)
    produce(c, "s.t", batch(b"a"))
    for version in (4, 11, 12):  # non-flexible and flexible (compact) record sets
        for req in (fetch_req("s.t", 99), fetch_req("s.t", 0, partition=5), fetch_req("s.nope", 0)):
            c.corr += 1
            outcome = c.session.handle(frames.encode_request(FETCH.key, version, c.corr, "t",
                                                              FETCH.request.make(**req))[4:], c.now)
            _, value = frames.decode_response(FETCH.key, version, outcome.frame[4:])
            part = value.responses[0].partitions[0]
            assert part.error_code in (E.OFFSET_OUT_OF_RANGE, E.UNKNOWN_TOPIC_OR_PARTITION)
            assert part.records == b"", (version, req)


def test_manual_replica_assignments_naming_this_broker_are_accepted_rdkafka_0081(ctx, broker):
    """librdkafka's 0081_admin creates topics with a replica assignment naming every broker
    the cluster has (here: node 1, once per partition). Ferry refused any assignment with
    INVALID_REQUEST; Kafka takes a valid one and answers what its controller checks
    (ReplicationControlManager.createTopic, validateManualPartitionAssignment)."""
    c = Client(ctx)
    c.login()
    S = CREATE_TOPICS.request.structs
    node = ctx.node_id

    def create(name, *lists, n=-1, rf=-1, indexes=None):
        indexes = range(len(lists)) if indexes is None else indexes
        t = S["CreatableTopic"].make(name=name, num_partitions=n, replication_factor=rf, assignments=tuple(
            S["CreatableReplicaAssignment"].make(partition_index=i, broker_ids=ids) for i, ids in zip(indexes, lists)))
        return c.call(CREATE_TOPICS, 7, topics=(t,), timeout_ms=1000).topics[0]

    ok = create("man.ual", (node,), (node,), (node,))
    assert (ok.error_code, ok.num_partitions) == (0, 3)
    assert broker.get_topic("man", "ual").partitions_count == 3
    assert create("a.rf", (node,), rf=1).error_code == E.INVALID_REQUEST
    assert create("a.n", (node,), n=1).error_code == E.INVALID_REQUEST
    bad = {"other": ((node + 1,),), "twice": ((node, node),), "empty": ((),),
           "gap": ((node,), (node,)), "dup": ((node,), (node,))}
    indexes = {"gap": (0, 2), "dup": (0, 0)}
    for name, lists in bad.items():
        assert create("a." + name, *lists, indexes=indexes.get(name)).error_code == E.INVALID_REPLICA_ASSIGNMENT, name
        assert ctx.topic("a." + name) is None

    P = CREATE_PARTITIONS.request.structs

    def grow(count, *lists):
        assignments = None if not lists else tuple(P["CreatePartitionsAssignment"].make(broker_ids=ids) for ids in lists)
        t = P["CreatePartitionsTopic"].make(name="man.ual", count=count, assignments=assignments)
        return c.call(CREATE_PARTITIONS, 3, topics=(t,), timeout_ms=1000, validate_only=False).results[0]

    assert grow(5, (node,)).error_code == E.INVALID_REPLICA_ASSIGNMENT  # two new partitions, one list
    assert grow(5, (node,), (node + 1,)).error_code == E.INVALID_REPLICA_ASSIGNMENT
    assert broker.get_topic("man", "ual").partitions_count == 3
    assert grow(5, (node,), (node,)).error_code == 0
    assert broker.get_topic("man", "ual").partitions_count == 5
