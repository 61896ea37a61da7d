"""Kafka's high watermark is the durable end (issue 30), with confluent-kafka (librdkafka).

The gateway runs in this process, so the test holds its fdatasync
(tests/support/held_fsync.py): a produced record is appended but not durable, so a
consumer polling the partition gets nothing, the producer no delivery report, and
neither ListOffsets (``get_watermark_offsets``) nor a Fetch's high watermark (the
consumer's cached one) counts it; once the write is durable all of them do
(docs/kafka.md "What consumers see").
"""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from held_fsync import HOLD_LIMIT_S, held_fsync, held_gateway  # noqa: F401 - the fixtures
from test_kafka_clients import WAIT_S, drain, sasl, topic_name

# How long the consumer gets to show a record that is not durable yet. Before issue 30
# a waiting fetch had it within milliseconds of the append; a pass never depends on
# this (a durable-only gateway sends nothing however long it is given).
HELD_WINDOW_S = 1.0


@pytest.fixture
def gw(held_gateway):
    return held_gateway


def test_consumers_and_watermarks_see_a_record_only_once_durable(gw, held_fsync):  # noqa: F811
    topic = topic_name("hwm")
    admin = AdminClient(sasl(gw))  # kept: a handle collected mid-call fails the call
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(WAIT_S)
    tp = TopicPartition(topic, 0)
    reports = []
    p = Producer({**sasl(gw), "acks": "all", "linger.ms": 0})
    p.produce(topic, value=b"first", partition=0, on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert p.flush(WAIT_S) == 0 and reports == [(None, 0)]
    c = Consumer({**sasl(gw), "group.id": "unused", "enable.auto.commit": False, "fetch.wait.max.ms": 200})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert [m.value() for m in drain(c, 1)] == [b"first"]
        assert c.get_watermark_offsets(tp, WAIT_S) == (0, 1)

        held_fsync.hold()
        p.produce(topic, value=b"held", partition=0, on_delivery=lambda err, msg: reports.append((err, msg.offset())))
        p.poll(0)  # send it
        assert held_fsync.entered.wait(HOLD_LIMIT_S), "the gateway never started writing the record"
        assert c.poll(HELD_WINDOW_S) is None  # appended, not durable: the consumer gets nothing
        assert p.flush(0) == 1 and reports == [(None, 0)]  # ... and the producer no ack
        assert c.get_watermark_offsets(tp, WAIT_S) == (0, 1)  # ListOffsets EARLIEST / LATEST
        assert c.get_watermark_offsets(tp, cached=True)[1] == 1  # the Fetch answers' high watermark

        held_fsync.release()
        assert p.flush(WAIT_S) == 0 and reports == [(None, 0), (None, 1)]
        assert [m.value() for m in drain(c, 1)] == [b"held"]
        assert c.get_watermark_offsets(tp, WAIT_S) == (0, 2)
        assert c.get_watermark_offsets(tp, cached=True)[1] == 2
    finally:
        c.close()
