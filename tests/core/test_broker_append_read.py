"""Broker: append, partition choice, producer dedup, reads and polls by
offset / timestamp / first / last / next, consumer offsets, bad inputs."""

from __future__ import annotations

import pytest
import xxhash
from broker_helpers import items, offsets, open_broker, payloads

from core.consumers import Consumer, PollStrategy
from core.errors import (
    ConsumerOffsetNotFound,
    HeadersTooLarge,
    InvalidArgument,
    InvalidHeaderKey,
    InvalidOffset,
    PartitionNotFound,
    PayloadTooLarge,
)
from core.header_value import HeaderValue
from core.log import AppendInput
from core.message import MAX_HEADERS_SIZE, Headers
from core.model import TopicSettings
from core.record import MAX_PAYLOAD

ME = Consumer("consumer", 1)


@pytest.fixture
def broker(tmp_path):
    b = open_broker(tmp_path)
    b.create_stream("s")
    b.create_topic("s", "t", partitions=3)
    yield b
    b.close()


# -- append and partition choice ---------------------------------------------
def test_append_assigns_consecutive_offsets_and_one_timestamp(broker):
    r1 = broker.append("s", "t", items("a", "b", "c"), partition=1)
    r2 = broker.append("s", "t", items("d"), partition=1)
    assert (r1.partition_id, r1.base_offset, r1.count, r1.duplicate) == (1, 0, 3, False)
    assert r2.base_offset == 3 and r2.timestamp >= r1.timestamp
    msgs = broker.read_messages("s", "t", 1, 0, 10)
    assert [m.payload for m in msgs] == [b"a", b"b", b"c", b"d"]
    assert [m.offset for m in msgs] == [0, 1, 2, 3]
    assert {m.timestamp for m in msgs[:3]} == {r1.timestamp}
    assert len({m.id for m in msgs}) == 4 and all(m.id for m in msgs)  # UUIDv7s assigned


def test_append_keeps_given_id_origin_timestamp_and_headers(broker):
    headers = Headers()
    headers.add("k", "v1")
    headers.add("k", "v2")  # repeated keys survive, in order
    headers.add(HeaderValue.uint32(7), HeaderValue.float64(1.5))
    item = AppendInput(b"body", headers.encode(), id=12345, origin_timestamp=42)
    broker.append("s", "t", [item], partition=0)
    (msg,) = broker.read_messages("s", "t", 0, 0, 1)
    assert (msg.id, msg.origin_timestamp, msg.payload) == (12345, 42, b"body")
    assert msg.headers == headers
    assert [v.as_str() for v in msg.headers.get_all("k")] == ["v1", "v2"]


def test_explicit_partition_wins_over_key(broker):
    assert broker.append("s", "t", items("x"), partition=2, key=b"anything").partition_id == 2


def test_key_hash_picks_a_stable_partition(broker):
    for key in (b"user-1", b"user-2", b"user-3", b"\x00\xff"):
        want = xxhash.xxh32_intdigest(key) % 3  # Iggy's messages_key rule
        got = {broker.append("s", "t", items("x"), key=key).partition_id for _ in range(4)}
        assert got == {want}


def test_balanced_round_robin_cycles_partitions_per_topic(broker):
    broker.create_topic("s", "u", partitions=2)
    picks = [broker.append("s", "t", items("x")).partition_id for _ in range(7)]
    other = [broker.append("s", "u", items("x")).partition_id for _ in range(3)]
    assert picks == [0, 1, 2, 0, 1, 2, 0]
    assert other == [0, 1, 0]  # each topic keeps its own cursor


def test_round_robin_follows_a_shrinking_partition_count(broker):
    for _ in range(2):
        broker.append("s", "t", items("x"))  # cursor now at 2
    broker.delete_partitions("s", "t", 1)
    assert [broker.append("s", "t", items("x")).partition_id for _ in range(3)] == [0, 1, 0]


# -- producer dedup ------------------------------------------------------------
def test_same_producer_sequence_twice_is_a_duplicate(broker):
    first = broker.append("s", "t", items("once"), partition=0, producer=("writer", 1))
    dup = broker.append("s", "t", items("twice"), partition=0, producer=("writer", 1))
    older = broker.append("s", "t", items("older"), partition=0, producer=("writer", 0))
    nxt = broker.append("s", "t", items("next"), partition=0, producer=("writer", 2))
    assert not first.duplicate and dup.duplicate and older.duplicate and not nxt.duplicate
    assert dup.count == 0
    assert payloads(broker.read("s", "t", 0, 0, 10)) == [b"once", b"next"]


def test_dedup_is_per_partition(broker):
    broker.append("s", "t", items("a"), partition=0, producer=("writer", 5))
    assert not broker.append("s", "t", items("a"), partition=1, producer=("writer", 5)).duplicate


def test_duplicates_are_not_offered_to_listeners_or_live_subscribers(broker):
    from broker_helpers import Inbox

    seen = []
    broker.add_append_listener(lambda info, pid, result, its: seen.append(result.base_offset))
    inbox = Inbox()
    broker.live.subscribe("s.t", inbox)
    broker.append("s", "t", items("a"), partition=0, producer=("w", 1))
    broker.append("s", "t", items("a"), partition=0, producer=("w", 1))
    assert seen == [0] and inbox.payloads == [b"a"]


def test_dedup_survives_reopen(tmp_path, broker):
    broker.append("s", "t", items("a"), partition=0, producer=("writer", 10))
    broker.close()
    again = open_broker(tmp_path)
    try:
        assert again.append("s", "t", items("retry"), partition=0, producer=("writer", 10)).duplicate
        assert not again.append("s", "t", items("new"), partition=0, producer=("writer", 11)).duplicate
        assert payloads(again.read("s", "t", 0, 0, 10)) == [b"a", b"new"]
    finally:
        again.close()


@pytest.mark.parametrize("producer", [("", 1), ("x" * 256, 1), (7, 1), ("w", 1 << 63), ("w", True), ("w", "1")])
def test_bad_producer_is_refused(broker, producer):
    with pytest.raises(InvalidArgument):
        broker.append("s", "t", items("x"), partition=0, producer=producer)
    assert broker.partition("s", "t", 0).next_offset == 0


# -- bad inputs ----------------------------------------------------------------
def test_empty_append_is_refused(broker):
    with pytest.raises(InvalidArgument):
        broker.append("s", "t", [])


def test_oversized_header_block_is_refused_by_headers(broker):
    headers = Headers()
    with pytest.raises(HeadersTooLarge):
        for i in range(1000):
            headers.add(f"key-{i:04d}", "v" * 200)  # ~215 bytes each: past 100 KB


def test_empty_header_key_is_refused():
    with pytest.raises(InvalidHeaderKey):
        Headers().add("", "v")


def test_raw_header_block_over_the_limit_is_refused_by_append_issue_3(broker):
    """AppendInput.headers is trusted as encoded by Headers, but a block past
    MAX_HEADERS_SIZE was stored anyway and then served to every dialect."""
    block = b"\x02" * (MAX_HEADERS_SIZE + 1)
    with pytest.raises(HeadersTooLarge):
        broker.append("s", "t", [AppendInput(b"x", block)], partition=0)
    with pytest.raises(HeadersTooLarge):
        broker.append("s", "t", [AppendInput(b"ok"), AppendInput(b"x", block)], partition=0)
    assert broker.partition("s", "t", 0).next_offset == 0  # nothing half-appended


def test_oversized_payload_is_refused(broker):
    with pytest.raises(PayloadTooLarge):
        broker.append("s", "t", [AppendInput(bytes(MAX_PAYLOAD + 1))], partition=0)
    assert broker.partition("s", "t", 0).next_offset == 0


@pytest.mark.parametrize("bad_id", [-1, 1 << 128])
def test_message_id_outside_u128_is_refused(broker, bad_id):
    with pytest.raises(InvalidArgument):
        broker.append("s", "t", [AppendInput(b"x", id=bad_id)], partition=0)


def test_negative_offset_and_count_are_typed_errors(broker):
    broker.append("s", "t", items("a"), partition=0)
    with pytest.raises(InvalidOffset):
        broker.read("s", "t", 0, -1, 1)
    with pytest.raises(InvalidArgument):
        broker.read("s", "t", 0, 0, -1)
    with pytest.raises(InvalidArgument):
        broker.consumers.poll("s", "t", ME, PollStrategy("offset", 0), 0, partition=0)
    with pytest.raises(InvalidArgument):
        PollStrategy("sideways")


def test_read_past_the_end_is_empty_not_an_error(broker):
    broker.append("s", "t", items("a", "b"), partition=0)
    batch = broker.read("s", "t", 0, 2, 10)
    assert batch.count == 0 and batch.first_offset == 2
    assert broker.read("s", "t", 0, 1000, 10).count == 0
    assert broker.consumers.poll("s", "t", ME, PollStrategy("offset", 99), 5, partition=0).batch.count == 0


def test_byte_position_past_the_end_is_invalid_offset(broker):
    broker.append("s", "t", items("abc"), partition=0)
    part = broker.partition("s", "t", 0)
    assert part.byte_pos_of(1) == part.byte_end == 8 + 3
    with pytest.raises(InvalidOffset):
        part.byte_pos_of(2)
    with pytest.raises(InvalidOffset):
        part.offset_for_byte_pos(part.byte_end + 1)


# -- reads and polling strategies ------------------------------------------------
@pytest.fixture
def ten(broker):
    """Ten records on partition 0, appended at known, increasing times."""
    times = []
    part = broker.partition("s", "t", 0)
    clock = iter(range(1_000, 100_000, 1_000))
    part._clock = lambda: next(clock)  # deterministic append times (µs)
    for i in range(10):
        times.append(broker.append("s", "t", items(f"m{i}"), partition=0).timestamp)
    return times


def test_read_by_offset_count_and_max_bytes(broker, ten):
    assert offsets(broker.read("s", "t", 0, 3, 4)) == [3, 4, 5, 6]
    one = broker.read("s", "t", 0, 0, 10, max_bytes=1)
    assert offsets(one) == [0]  # at least one record, as Kafka's fetch.max.bytes
    size = one.sizes[0]
    assert offsets(broker.read("s", "t", 0, 0, 10, max_bytes=3 * size)) == [0, 1, 2]


def test_poll_strategies(broker, ten):
    def poll(kind, value=0, count=3):
        return offsets(broker.consumers.poll("s", "t", ME, PollStrategy(kind, value), count, partition=0).batch)

    assert poll("offset", 4) == [4, 5, 6]
    assert poll("first") == [0, 1, 2]
    assert poll("last") == [7, 8, 9]
    assert poll("last", count=50) == list(range(10))
    assert poll("timestamp", ten[6]) == [6, 7, 8]
    assert poll("timestamp", ten[6] - 1) == [6, 7, 8]  # first at or after
    assert poll("timestamp", 0) == [0, 1, 2]
    assert poll("timestamp", ten[-1] + 1) == []
    assert poll("next") == [0, 1, 2]  # nothing stored: from the first offset
    result = broker.consumers.poll("s", "t", ME, PollStrategy("first"), 1, partition=0)
    assert result.current_offset == 9 and result.partition_id == 0


def test_poll_next_with_auto_commit_walks_the_partition(broker, ten):
    seen = []
    while True:
        batch = broker.consumers.poll("s", "t", ME, PollStrategy("next"), 4, partition=0, auto_commit=True).batch
        if not batch.count:
            break
        seen += offsets(batch)
    assert seen == list(range(10))
    assert broker.consumers.get_offset(ME, "s", "t", 0) == 9
    other = Consumer("consumer", 2)  # offsets are per consumer
    assert offsets(broker.consumers.poll("s", "t", other, PollStrategy("next"), 2, partition=0).batch) == [0, 1]


def test_poll_on_an_empty_partition_reports_minus_one(broker):
    result = broker.consumers.poll("s", "t", ME, PollStrategy("next"), 5, partition=2)
    assert result.batch.count == 0 and result.current_offset == -1


def test_consumer_offsets_store_get_delete(broker, ten):
    assert broker.consumers.get_offset(ME, "s", "t", 0) is None
    broker.consumers.store_offset(ME, "s", "t", 0, 4)
    assert broker.consumers.get_offset(ME, "s", "t", 0) == 4
    assert offsets(broker.consumers.poll("s", "t", ME, PollStrategy("next"), 2, partition=0).batch) == [5, 6]
    broker.consumers.store_offset(ME, "s", "t", 0, 1)  # moving back is allowed (replay)
    assert broker.consumers.get_offset(ME, "s", "t", 0) == 1
    broker.consumers.delete_offset(ME, "s", "t", 0)
    assert broker.consumers.get_offset(ME, "s", "t", 0) is None
    with pytest.raises(ConsumerOffsetNotFound):
        broker.consumers.delete_offset(ME, "s", "t", 0)


def test_storing_an_offset_past_the_end_is_invalid_offset(broker, ten):
    with pytest.raises(InvalidOffset):
        broker.consumers.store_offset(ME, "s", "t", 0, 10)
    with pytest.raises(InvalidOffset):
        broker.consumers.store_offset(ME, "s", "t", 0, -1)
    with pytest.raises(InvalidOffset):
        broker.consumers.store_offset(ME, "s", "t", 1, 0)  # partition 1 is empty
    with pytest.raises(PartitionNotFound):
        broker.consumers.store_offset(ME, "s", "t", 3, 0)
    assert broker.consumers.get_offset(ME, "s", "t", 0) is None


def test_consumer_offsets_survive_reopen(tmp_path, broker, ten):
    broker.consumers.store_offset(ME, "s", "t", 0, 6)
    broker.close()
    again = open_broker(tmp_path)
    try:
        assert again.consumers.get_offset(ME, "s", "t", 0) == 6
        assert offsets(again.consumers.poll("s", "t", ME, PollStrategy("next"), 10, partition=0).batch) == [7, 8, 9]
    finally:
        again.close()


def test_retention_by_age_and_size_through_the_broker(tmp_path):
    b = open_broker(tmp_path, segment_bytes=600)
    try:
        b.create_stream("s")
        b.create_topic("s", "old", settings=TopicSettings(message_expiry=1_000_000))  # 1 s, in µs
        b.create_topic("s", "big", partitions=2, settings=TopicSettings(max_topic_size=2 * 1400))  # 1400 B/partition
        b.create_topic("s", "keep")
        for name in ("old", "big", "keep"):
            for i in range(30):
                b.append("s", name, items(f"{name}-{i:03d}".ljust(100, ".")), partition=0)
                b.flush()  # one batch each: many small segments
        old, big, keep = (b.partition("s", n, 0) for n in ("old", "big", "keep"))
        segments = old.segment_count
        last_ts = b.read_messages("s", "old", 0, 29, 1)[0].timestamp
        b.enforce_retention(now=last_ts + 500_000)
        assert old.segment_count == segments and old.first_offset == 0  # nothing a second old yet
        assert b.enforce_retention(now=last_ts + 2_000_000) == segments - 1
        assert old.segment_count == 1 and old.first_offset > 0  # only the active segment stays
        assert big.size_bytes <= 1400 + 600 and big.first_offset > 0
        assert keep.first_offset == 0  # no limits: untouched
        first = b.consumers.poll("s", "old", ME, PollStrategy("first"), 1, partition=0).batch
        assert offsets(first) == [old.first_offset]  # reads start at what is left
        assert offsets(b.read("s", "old", 0, 0, 1)) == [old.first_offset]
        assert old.next_offset == 30  # offsets are never reused
    finally:
        b.close()
