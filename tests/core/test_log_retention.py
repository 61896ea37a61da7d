"""core.log retention (age, size), purge and delete."""

from __future__ import annotations

import pytest
from log_helpers import FakeClock, T0, items, numbered, offsets, open_part, read_all, segment_files

from core.errors import InvalidArgument, InvalidOffset, PartitionNotFound

SECOND = 1_000_000


def _aged(path, clock):
    """Five segments of 4 records each, written one second apart per segment."""
    part = open_part(path, clock, segment_bytes=550)
    for i in range(0, 20, 2):
        part.append(numbered(i, 2, size=40))
        part.flush()
        if i % 4 == 2:
            clock.advance(SECOND)
    assert [n for _b, n, _s in part.segment_positions()] == [4, 4, 4, 4, 4]
    return part


def test_retention_by_age_drops_whole_expired_segments(tmp_path):
    clock = FakeClock()
    part = _aged(tmp_path, clock)
    now = T0 + 4 * SECOND  # newest record per segment: T0, T0+1s, ..., T0+4s
    assert part.enforce_retention(now, 10 * SECOND, 0) == 0
    assert part.enforce_retention(now, int(2.5 * SECOND), 0) == 2
    assert part.first_offset == 8
    assert part.byte_start == part.byte_pos_of(8) > 0
    assert part.read(0, 3).first_offset == 8  # below first: starts at first
    with pytest.raises(InvalidOffset):
        part.byte_pos_of(7)
    assert part.enforce_retention(now + 100 * SECOND, SECOND, 0) == 2  # never the active one
    assert part.segment_count == 1 and part.first_offset == 16
    part.close()
    again = open_part(tmp_path, clock, segment_bytes=550)
    assert (again.first_offset, again.next_offset) == (16, 20)
    assert offsets(again.read(0, 100)) == [16, 17, 18, 19]


def test_retention_by_size_drops_oldest_segments(tmp_path):
    clock = FakeClock()
    part = _aged(tmp_path, clock)
    sizes = [s for _b, _n, s in part.segment_positions()]
    limit = sum(sizes[-3:])
    assert part.enforce_retention(clock.now, 0, limit) == 2
    assert part.size_bytes == limit
    assert part.first_offset == 8
    assert len(segment_files(tmp_path)) == 3
    assert len(segment_files(tmp_path, ".index")) == 3
    assert part.enforce_retention(clock.now, 0, 0) == 0  # 0 = no limit
    with pytest.raises(InvalidArgument):
        part.enforce_retention(clock.now, -1, 0)


def test_purge_restarts_offsets_at_zero(tmp_path):
    clock = FakeClock()
    part = _aged(tmp_path, clock)
    part.append(items("pending"), producer=("w", 3))
    part.purge()
    assert (part.first_offset, part.next_offset, part.byte_end, part.record_count) == (0, 0, 0, 0)
    assert part.producer_sequence("w") is None
    assert len(segment_files(tmp_path)) == 1
    part.append(items("fresh"))
    part.close()
    assert read_all(open_part(tmp_path, clock, segment_bytes=550)) == [(0, b"fresh")]


def test_delete_fails_pending_callbacks_and_removes_the_directory(tmp_path):
    path = tmp_path / "p"
    part = open_part(path)
    part.append(items("durable"))
    part.flush()
    outcomes = []
    part.append(items("pending"), on_durable=outcomes.append)
    part.delete()
    assert isinstance(outcomes[0], PartitionNotFound)
    assert not path.exists()


def test_retention_keeps_timestamps_monotonic_after_restart(tmp_path):
    clock = FakeClock()
    part = _aged(tmp_path, clock)
    part.close()
    clock.now = T0 - 50 * SECOND  # the wall clock went back while we were down
    again = open_part(tmp_path, clock, segment_bytes=550)
    assert again.append(items("later")).timestamp == T0 + 4 * SECOND


def test_delete_oldest_segments_keeps_the_active_one_and_the_offsets(tmp_path):
    """Iggy's DeleteSegments: the N oldest sealed segments go; asking for more than
    there are stops at the active segment; offsets are never renumbered."""
    clock = FakeClock()
    part = _aged(tmp_path, clock)  # 5 segments of 4 records: 0-3, 4-7, 8-11, 12-15, 16-19 (active)
    assert part.delete_oldest_segments(0) == 0
    assert part.delete_oldest_segments(2) == 2
    assert [b for b, _n, _s in part.segment_positions()] == [8, 12, 16]
    assert (part.first_offset, part.next_offset, part.record_count) == (8, 20, 12)
    assert offsets(part.read(0, 5)) == [8, 9, 10, 11, 12]  # below first: starts at first
    assert offsets(part.read(13, 3)) == [13, 14, 15]
    assert len(segment_files(tmp_path)) == 3 and len(segment_files(tmp_path, ".timeindex")) == 3
    assert part.delete_oldest_segments(100) == 2  # more than sealed: all sealed, never the active
    assert part.segment_count == 1 and part.first_offset == 16
    assert part.delete_oldest_segments(1) == 0
    assert part.append(numbered(20, 1, size=40)).base_offset == 20
    with pytest.raises(InvalidArgument):
        part.delete_oldest_segments(-1)
    part.close()
    again = open_part(tmp_path, clock, segment_bytes=550)
    assert (again.first_offset, again.next_offset) == (16, 21)
    assert offsets(again.read(0, 100)) == [16, 17, 18, 19, 20]


def test_delete_oldest_segments_stops_at_the_lowest_consumed_offset(tmp_path):
    """A segment holding an offset past the lowest stored consumer offset stays
    (apache/iggy's consumer barrier), and so does everything after it."""
    part = _aged(tmp_path, FakeClock())
    assert part.delete_oldest_segments(4, consumed_up_to=2) == 0  # segment 0-3 not fully consumed
    assert part.delete_oldest_segments(4, consumed_up_to=9) == 2  # 0-3 and 4-7; 8-11 holds 10, 11
    assert part.first_offset == 8
    assert part.delete_oldest_segments(4, consumed_up_to=11) == 1
    assert part.delete_oldest_segments(4, consumed_up_to=19) == 1  # 12-15; 16-19 is the active one
    assert part.first_offset == 16
