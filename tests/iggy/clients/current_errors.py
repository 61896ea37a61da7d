"""apache-iggy 0.9.0: the not-found and invalid-argument table (issue 15), run in its own
venv: python current_errors.py PORT. One JSON line per case, in order; the expected
replies and their reference-server sources are in tests/iggy/test_iggy_error_codes.py.

Setup: stream "s", topic "t" (2 partitions, one message in partition 0), group "g" that
this connection has not joined. Commands the wheel has no method for (consumer offsets,
SyncConsumerGroup, FlushUnsavedBuffer, GetClient) go through ``send_binary_request``."""

import asyncio
import os
import struct
import sys

from apache_iggy import Consumer, IggyClient, Partitioning, PollingStrategy, SendMessage
from scenario import out


def sid(name_or_id) -> bytes:
    """Identifier: kind 1 (u32) or 2 (string), length, value (iggy-current.md 6.1)."""
    if isinstance(name_or_id, int):
        return bytes([1, 4]) + struct.pack("<I", name_or_id)
    return bytes([2, len(name_or_id)]) + name_or_id.encode()


def offset_body(stream, topic, partition, *, kind=1, consumer=1) -> bytes:
    """Consumer, Id stream, Id topic, u8 has_partition, u32 partition (iggy-current.md 6.10)."""
    has, pid = (0, 0) if partition is None else (1, partition)
    return bytes([kind]) + sid(consumer) + sid(stream) + sid(topic) + bytes([has]) + struct.pack("<I", pid)


def render(value):
    if value is None:
        return {"value": None}
    if isinstance(value, (bytes, bytearray)):
        return {"raw": bytes(value).hex()}
    if isinstance(value, list):
        if not value:
            return {"list": []}
        if hasattr(value[0], "offset"):
            return {"got": [m.offset() for m in value]}
        return {"names": [x.name for x in value]}
    if hasattr(value, "name"):
        return {"name": value.name}
    return {"ok": True}


async def case(step, awaitable):
    try:
        value = await awaitable
    except RuntimeError as exc:
        out(step, error=str(exc))
    else:
        out(step, **render(value))


async def main(port: int) -> None:
    c = IggyClient(f"127.0.0.1:{port}")
    await c.connect()
    await c.login_user("iggy", "iggy")
    await c.create_stream("s")
    await c.create_topic("s", "t", 2)
    await c.send_messages("s", "t", 0, [SendMessage("m0")])
    await c.create_consumer_group("s", "t", "g")
    one, group = Consumer.Single(1), Consumer.Group("g")

    def poll(stream="s", topic="t", partition=0, consumer=one, count=10):
        return c.poll_messages(stream, topic, consumer=consumer, polling_strategy=PollingStrategy.Offset(0),
                               count=count, auto_commit=False, partition_id=partition)

    def send(stream="s", topic="t", partitioning=0):
        return c.send_messages(stream, topic, partitioning, [SendMessage("x")])

    def raw(code, body):
        return c.send_binary_request(code, body)

    def store(stream="s", topic="t", partition=0, offset=0, **consumer):  # + u64 offset, u8 ack_level
        return raw(121, offset_body(stream, topic, partition, **consumer) + struct.pack("<QB", offset, 1))

    def delete_offset(stream="s", topic="t", partition=0, consumer=7):  # + u8 ack_level
        return raw(122, offset_body(stream, topic, partition, consumer=consumer) + b"\x01")

    cases = [
        # streams
        ("get_stream_missing", lambda: c.get_stream("nope")),
        ("update_stream_missing", lambda: c.update_stream("nope", "x")),
        ("update_stream_missing_id", lambda: c.update_stream(99, "x")),
        ("purge_stream_missing", lambda: c.purge_stream("nope")),
        ("delete_stream_missing", lambda: c.delete_stream("nope")),
        # topics
        ("get_topic_missing_stream", lambda: c.get_topic("nope", "t")),
        ("get_topic_missing", lambda: c.get_topic("s", "nope")),
        ("get_topics_missing_stream", lambda: c.get_topics("nope")),
        ("get_topics_missing_stream_id", lambda: c.get_topics(99)),
        ("create_topic_missing_stream", lambda: c.create_topic("nope", "t", 1)),
        ("update_topic_missing", lambda: c.update_topic("s", "nope", "x")),
        ("purge_topic_missing", lambda: c.purge_topic("s", "nope")),
        ("delete_topic_missing_stream", lambda: c.delete_topic("nope", "t")),
        ("delete_topic_missing", lambda: c.delete_topic("s", "nope")),
        # partitions
        ("create_partitions_missing_topic", lambda: c.create_partitions("s", "nope", 1)),
        ("create_partitions_zero", lambda: c.create_partitions("s", "t", 0)),
        ("delete_partitions_zero", lambda: c.delete_partitions("s", "t", 0)),
        ("delete_partitions_too_many", lambda: c.delete_partitions("s", "t", 3)),
        ("delete_segments_missing_stream", lambda: raw(503, sid("nope") + sid("t") + struct.pack("<II", 0, 1))),
        # consumer groups
        ("get_group_missing", lambda: c.get_consumer_group("s", "t", "nope")),
        ("get_group_missing_stream", lambda: c.get_consumer_group("nope", "t", "g")),
        ("get_group_missing_topic", lambda: c.get_consumer_group("s", "nope", "g")),
        ("get_groups_missing_stream", lambda: c.get_consumer_groups("nope", "t")),
        ("get_groups_missing_topic", lambda: c.get_consumer_groups("s", "nope")),
        ("create_group_missing_topic", lambda: c.create_consumer_group("s", "nope", "g2")),
        ("join_missing_group", lambda: c.join_consumer_group("s", "t", "nope")),
        ("join_missing_group_id", lambda: c.join_consumer_group("s", "t", 99)),
        ("join_missing_stream", lambda: c.join_consumer_group("nope", "t", "g")),
        ("leave_missing_group", lambda: c.leave_consumer_group("s", "t", "nope")),
        ("leave_not_a_member", lambda: c.leave_consumer_group("s", "t", "g")),
        ("delete_missing_group", lambda: c.delete_consumer_group("s", "t", "nope")),
        ("sync_missing_group", lambda: raw(606, sid("s") + sid("t") + sid("nope"))),
        ("sync_missing_stream", lambda: raw(606, sid("nope") + sid("t") + sid("g"))),
        ("sync_not_a_member", lambda: raw(606, sid("s") + sid("t") + sid("g"))),
        # messages
        ("poll_missing_stream", lambda: poll(stream="nope")),
        ("poll_missing_topic", lambda: poll(topic="nope")),
        ("poll_missing_partition", lambda: poll(partition=5)),
        ("poll_count_zero", lambda: poll(count=0)),  # refused by the client itself
        ("poll_count_zero_raw", lambda: raw(100, offset_body("s", "t", 0) + struct.pack("<BQIB", 1, 0, 0, 0))),
        ("poll_group_not_a_member", lambda: poll(consumer=group, partition=0)),
        ("poll_group_missing_group", lambda: poll(consumer=Consumer.Group("nope"), partition=0)),
        ("poll_group_no_assignment", lambda: poll(consumer=Consumer.Group("nope"), partition=None)),
        ("send_missing_stream", lambda: send(stream="nope")),
        ("send_missing_topic", lambda: send(topic="nope")),
        ("send_missing_partition", lambda: send(partitioning=5)),
        ("send_balanced_missing_topic", lambda: send(topic="nope", partitioning=Partitioning.balanced())),
        ("flush_missing_stream", lambda: raw(102, sid("nope") + sid("t") + struct.pack("<IB", 0, 0))),
        ("flush", lambda: raw(102, sid("s") + sid("t") + struct.pack("<IB", 0, 0))),
        # consumer offsets
        ("get_offset_missing_stream", lambda: raw(120, offset_body("nope", "t", 0))),
        ("get_offset_missing_partition", lambda: raw(120, offset_body("s", "t", 5))),
        ("get_offset_missing_group", lambda: raw(120, offset_body("s", "t", 0, kind=2, consumer="nope"))),
        ("get_offset_none_stored", lambda: raw(120, offset_body("s", "t", 0))),
        ("store_offset_missing_stream", lambda: store(stream="nope")),
        ("store_offset_missing_partition", lambda: store(partition=5)),
        ("store_offset_no_partition", lambda: store(partition=None)),
        ("store_offset_group_not_a_member", lambda: store(kind=2, consumer="g")),
        ("store_offset_past_end", lambda: store(offset=9)),
        ("store_offset_empty_partition", lambda: store(partition=1)),
        ("delete_offset_missing_stream", lambda: delete_offset(stream="nope")),
        ("delete_offset_none_stored", lambda: delete_offset()),
        # clients
        ("get_client_zero", lambda: raw(21, struct.pack("<I", 0))),
        ("get_client_missing", lambda: raw(21, struct.pack("<I", 999_999))),
    ]
    wanted = set(sys.argv[2:])
    for step, call in cases:  # one at a time: the wheel starts a call when it is made
        if not wanted or step in wanted:
            await case(step, call())
    await c.ping()  # every error above left the connection open
    s = await c.get_stream("s")
    out("still_open", name=s.name, topics=s.topics_count)


asyncio.run(main(int(sys.argv[1])))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
