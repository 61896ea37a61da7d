"""core.log: appends, reads (pending and stored, mid-batch, across rolls and
restarts), the ReadBatch view, lookups by timestamp and byte position."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from log_helpers import FakeClock, T0, items, numbered, offsets, open_part, payloads, read_all

from core.errors import InvalidArgument, InvalidOffset, PayloadTooLarge, StorageError
from core.log import AppendInput, AppendResult, LogConfig
from core.record import RECORD_HEADER_SIZE, encode_record, parse_record


def test_append_assigns_consecutive_offsets_and_one_timestamp(tmp_path):
    clock = FakeClock()
    part = open_part(tmp_path, clock)
    first = part.append(items("a", "b", "c"))
    clock.advance(5)
    second = part.append(items("d"))
    assert first == AppendResult(7, 0, 3, T0)
    assert second == AppendResult(7, 3, 1, T0 + 5)
    assert (part.first_offset, part.next_offset, part.last_offset) == (0, 4, 3)
    assert part.record_count == 4


def test_pending_records_are_readable_before_the_flush(tmp_path):
    part = open_part(tmp_path)
    part.append(items("one", "two"))
    assert part.pending_bytes > 0 and part.needs_flush
    batch = part.read(0, 10)
    assert payloads(batch) == [b"one", b"two"]
    assert part.segment_positions() == [(0, 0, 0)]  # nothing on disk yet
    part.flush()
    assert part.pending_bytes == 0 and not part.needs_flush
    assert payloads(part.read(0, 10)) == [b"one", b"two"]


def test_stored_bytes_are_exactly_the_encoded_records(tmp_path):
    clock = FakeClock()
    part = open_part(tmp_path, clock)
    part.append([AppendInput(b"payload", b"", id=42, origin_timestamp=5)])
    part.flush()
    expected = encode_record(42, 0, T0, 5, b"", b"payload")
    batch = part.read(0, 1)
    assert batch.to_bytes() == expected
    rv = parse_record(batch.to_bytes(), 0)  # checksum verified
    assert (rv.id, rv.offset, rv.timestamp, rv.origin_timestamp) == (42, 0, T0, 5)


def test_id_zero_gets_a_uuid7_and_origin_defaults_to_append_time(tmp_path):
    part = open_part(tmp_path)
    part.append(items("x", "y"))
    first, second = part.read(0, 2).records()
    assert uuid.UUID(int=first.id).version == 7
    assert second.id > first.id
    assert first.origin_timestamp == first.timestamp == T0


def test_read_starts_mid_batch(tmp_path):
    part = open_part(tmp_path)
    part.append(numbered(0, 10))
    part.flush()
    batch = part.read(3, 4)
    assert offsets(batch) == [3, 4, 5, 6]
    assert batch.first_offset == 3 and batch.next_offset == 7 and batch.last_offset == 6
    assert len(batch.chunks) == 1  # records of one batch are contiguous on disk
    assert payloads(batch)[0].startswith(b"m000003")


def test_read_spanning_batches_gives_one_chunk_per_run(tmp_path):
    part = open_part(tmp_path)
    part.append(numbered(0, 3))
    part.flush()
    part.append(numbered(3, 3))
    part.flush()
    part.append(numbered(6, 2))  # still pending
    batch = part.read(1, 100)
    assert offsets(batch) == list(range(1, 8))
    assert len(batch.chunks) == 4  # batch 1, batch 2, then two pending records
    whole = batch.to_bytes()
    assert len(whole) == batch.nbytes == sum(batch.sizes)
    for pos, size, raw in zip(batch.positions, batch.sizes, batch.raw_records()):
        assert whole[pos : pos + size] == bytes(raw)
        assert parse_record(raw, 0).size == size


def test_reads_across_segment_rolls_and_restarts(tmp_path):
    part = open_part(tmp_path, segment_bytes=600)
    expected = []
    for i in range(0, 40, 4):
        part.append(numbered(i, 4, size=30))
        expected += [f"m{j:06d}".encode().ljust(30, b".") for j in range(i, i + 4)]
        part.flush()
    assert part.segment_count > 3
    stored = read_all(part)
    assert [p for _o, p in stored] == expected
    assert [o for o, _p in stored] == list(range(40))
    ends = (part.next_offset, part.byte_end, part.size_bytes)
    part.close()
    again = open_part(tmp_path, segment_bytes=600)
    assert read_all(again) == stored
    assert (again.next_offset, again.byte_end, again.size_bytes) == ends
    assert again.torn_bytes == 0
    again.append(numbered(40, 1, size=30))
    again.close()
    third = open_part(tmp_path, segment_bytes=600)
    assert [o for o, _p in read_all(third)] == list(range(41))


def test_segment_size_is_respected_unless_one_batch_is_larger(tmp_path):
    part = open_part(tmp_path, segment_bytes=1000)
    for i in range(30):
        part.append(numbered(i, 1, size=100))
    part.flush()  # a backlog larger than a segment is written over several batches
    sizes = [size for _base, _n, size in part.segment_positions()]
    assert all(size <= 1000 for size in sizes)
    part.append([AppendInput(b"z" * 3000)])
    part.flush()
    assert part.segment_positions()[-1][2] > 1000
    assert [o for o, _p in read_all(part)] == list(range(31))


def test_read_limits(tmp_path):
    part = open_part(tmp_path)
    part.append(numbered(0, 5, size=50))
    part.flush()
    size = RECORD_HEADER_SIZE + 50
    assert part.read(5, 10).count == 0  # at the end
    assert part.read(500, 10).first_offset == 500
    assert part.read(0, 0).count == 0
    assert part.read(0, 10, max_bytes=2 * size + 1).count == 2
    assert part.read(0, 10, max_bytes=1).count == 1  # never stuck behind a big record
    part.append(numbered(5, 3, size=50))
    assert offsets(part.read(3, 10, max_bytes=3 * size)) == [3, 4, 5]  # across disk and pending
    with pytest.raises(InvalidOffset):
        part.read(-1, 1)
    with pytest.raises(InvalidArgument):
        part.read(0, -1)
    with pytest.raises(InvalidArgument):
        part.read(0, 1, max_bytes=-1)


def test_timestamps_never_go_backwards(tmp_path):
    clock = FakeClock()
    part = open_part(tmp_path, clock)
    part.append(items("a"))
    clock.advance(-1_000_000)
    result = part.append(items("b"))
    assert result.timestamp == T0
    assert [rv.timestamp for rv in part.read(0, 2).records()] == [T0, T0]


def test_offset_for_timestamp_across_segments_and_pending(tmp_path):
    clock = FakeClock()
    part = open_part(tmp_path, clock, segment_bytes=400)
    for i in range(12):  # offsets 2i, 2i+1 at T0 + 10 i
        part.append(numbered(2 * i, 2, size=40))
        if i < 9:
            part.flush()
        clock.advance(10)
    assert part.segment_count > 2
    assert part.offset_for_timestamp(0) == 0
    assert part.offset_for_timestamp(T0) == 0
    assert part.offset_for_timestamp(T0 + 1) == 2
    assert part.offset_for_timestamp(T0 + 50) == 10
    assert part.offset_for_timestamp(T0 + 95) == 20  # pending
    assert part.offset_for_timestamp(T0 + 110) == 22
    assert part.offset_for_timestamp(T0 + 111) == part.next_offset == 24
    part.close()
    again = open_part(tmp_path, clock, segment_bytes=400)
    assert again.offset_for_timestamp(T0 + 41) == 10


def test_byte_positions_follow_the_pravega_view(tmp_path):
    part = open_part(tmp_path, segment_bytes=300)
    sizes = [3, 0, 17, 5, 40, 1, 9, 2]
    for i, n in enumerate(sizes):
        part.append([AppendInput(b"p" * n)])
        if i < 6:
            part.flush()
    starts = [0]
    for n in sizes:
        starts.append(starts[-1] + 8 + n)
    assert part.byte_start == 0 and part.byte_end == starts[-1]
    for offset, start in enumerate(starts):
        assert part.byte_pos_of(offset) == start
        assert part.offset_for_byte_pos(start) == offset
        if offset < len(sizes):
            assert part.offset_for_byte_pos(start + 7 + sizes[offset]) == offset  # last byte of the event
    with pytest.raises(InvalidOffset):
        part.offset_for_byte_pos(starts[-1] + 1)
    with pytest.raises(InvalidOffset):
        part.byte_pos_of(len(sizes) + 1)
    part.close()
    again = open_part(tmp_path, segment_bytes=300)
    assert [again.byte_pos_of(o) for o in range(len(starts))] == starts


def test_backpressure_flag_never_drops_data(tmp_path):
    part = open_part(tmp_path, max_pending_bytes=500)
    for i in range(10):
        part.append(numbered(i, 1, size=100))
    assert part.over_limit and part.pending_bytes > 500
    assert part.read(0, 100).count == 10
    part.flush()
    assert not part.over_limit and part.pending_bytes == 0
    assert len(read_all(part)) == 10


def test_bad_appends_are_refused_without_side_effects(tmp_path):
    part = open_part(tmp_path)
    with pytest.raises(InvalidArgument):
        part.append([])
    with pytest.raises(InvalidArgument):
        part.append(items("x"), producer=("", 1))
    with pytest.raises(InvalidArgument):
        part.append(items("x"), producer=("p" * 256, 1))
    with pytest.raises(InvalidArgument):
        part.append(items("x"), producer=("p", 1 << 63))
    with pytest.raises(InvalidArgument):  # id outside u128, second item: nothing of the call lands
        part.append([AppendInput(b"ok"), AppendInput(b"bad", id=1 << 128)])
    assert part.next_offset == 0 and part.pending_bytes == 0 and not part.needs_flush


def test_one_append_larger_than_a_batch_is_refused(tmp_path, monkeypatch):
    from core.log import partition as partition_mod

    monkeypatch.setattr(partition_mod, "MAX_APPEND_BYTES", 1000)
    part = open_part(tmp_path)
    with pytest.raises(PayloadTooLarge):
        part.append(numbered(0, 20, size=100))
    assert part.next_offset == 0


def test_closed_partition_refuses_appends(tmp_path):
    part = open_part(tmp_path)
    part.append(items("a"))
    part.close()
    part.close()  # idempotent
    with pytest.raises(StorageError):
        part.append(items("b"))
    assert read_all(open_part(tmp_path)) == [(0, b"a")]


def test_log_config_validation():
    for bad in (
        {"segment_bytes": 0},
        {"fsync": "sometimes"},
        {"fsync_interval_ms": -1},
        {"fsync_interval_ms": True},
        {"max_pending_bytes": 0},
        {"max_producers": 0},
        {"producer_ttl_ms": -1},
        {"producer_ttl_ms": 1.5},
        {"producer_ttl_ms": True},
        {"producer_ttl_ms": 11 * 365 * 24 * 3600 * 1000},
    ):
        with pytest.raises(InvalidArgument):
            LogConfig(**bad)
    assert LogConfig().fsync == "batch" and LogConfig().fsync_interval_ms == 0.0


def test_durable_next_offset_trails_appends_until_the_flush(tmp_path):
    part = open_part(tmp_path)
    part.append(items("a", "b"))
    assert (part.durable_next_offset, part.next_offset) == (0, 2)
    part.flush()
    assert part.durable_next_offset == 2


# -- model-based: random appends, flushes, restarts and retention ----------------
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(st.binary(max_size=70), min_size=1, max_size=4)),
        st.tuples(st.just("flush"), st.none()),
        st.tuples(st.just("reopen"), st.none()),
        st.tuples(st.just("retain"), st.integers(min_value=1, max_value=3000)),
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None)
@given(ops=OPS)
def test_log_agrees_with_a_list_model(ops):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        part = open_part(path, segment_bytes=700)
        model: list[bytes] = []  # payload by offset
        first = 0
        for op, arg in ops:
            if op == "append":
                part.append([AppendInput(p) for p in arg])
                model += arg
            elif op == "flush":
                part.flush()
            elif op == "reopen":
                part.close()
                part = open_part(path, segment_bytes=700)
            else:
                part.enforce_retention(T0, 0, arg)
                first = part.first_offset
            assert part.next_offset == len(model)
        assert part.first_offset == first
        batch = part.read(0, 1000)
        assert batch.first_offset == first
        assert payloads(batch) == model[first:]
        byte = sum(8 + len(p) for p in model[:first])
        for offset in range(first, len(model)):
            assert part.byte_pos_of(offset) == byte
            assert part.offset_for_byte_pos(byte) == offset
            byte += 8 + len(model[offset])
        assert part.byte_end == byte
        part.close()
