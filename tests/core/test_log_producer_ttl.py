"""core.log producer dedup: idle producers expire after ``producer_ttl_ms``,
in the process and across restarts (core/log/producers.py, batch.FLAG_PRODUCER_TIMES)."""

from __future__ import annotations

from log_helpers import T0, FakeClock, items, numbered, open_part

from core.log.batch import (
    BATCH_HEADER_SIZE,
    FLAG_PRODUCER_TIMES,
    _ID_LEN,
    _SEQ,
    batch_head,
    decode_producers,
    parse_batch_header,
)

TTL_MS = 60_000
TTL_US = TTL_MS * 1000


def _open(path, clock, **cfg):
    cfg.setdefault("producer_ttl_ms", TTL_MS)
    return open_part(path, clock, **cfg)


def test_an_idle_producer_starts_over_after_its_ttl(tmp_path):
    clock = FakeClock()
    part = _open(tmp_path, clock)
    part.append(items("a"), producer=("w", 5))
    part.flush()
    clock.advance(TTL_US)  # exactly the TTL: still remembered
    assert part.append(items("retry"), producer=("w", 5)).duplicate
    assert part.producer_sequence("w") == 5
    clock.advance(1)
    assert part.producer_sequence("w") is None
    back = part.append(items("new writer, same id"), producer=("w", 3))
    assert not back.duplicate
    # Its fresh entry counts from now: a retry of 3, still pending, is a duplicate.
    assert part.append(items("retry"), producer=("w", 3)).duplicate
    assert part.producer_sequence("w") == 3


def test_an_expired_producer_is_forgotten_after_a_restart_too(tmp_path):
    clock = FakeClock()
    part = _open(tmp_path, clock)
    part.append(items("a"), producer=("idle", 7))
    part.flush()
    clock.advance(TTL_US // 2)
    part.append(items("b"), producer=("busy", 1))
    part.close()
    clock.advance(TTL_US // 2 + 1)  # "idle" is past its TTL now, "busy" is not
    again = _open(tmp_path, clock)
    assert again.producer_sequence("idle") is None
    assert not again.append(items("a again"), producer=("idle", 7)).duplicate
    assert again.producer_sequence("busy") == 1
    assert again.append(items("b again"), producer=("busy", 1)).duplicate


def test_segment_snapshots_keep_each_producer_s_own_write_time(tmp_path):
    """The first batch of each segment carries the whole table: with the write time of
    every entry, not the snapshot's, so a roll does not make an idle producer young."""
    clock = FakeClock()
    part = _open(tmp_path, clock, segment_bytes=300)
    part.append(numbered(0, 1, size=60), producer=("idle", 1))
    part.flush()
    clock.advance(TTL_US // 2)
    for seq in range(1, 6):  # every flush rolls: each new segment starts with a snapshot
        part.append(numbered(seq, 1, size=60), producer=("busy", seq))
        part.flush()
    assert part.segment_count >= 5
    assert part.enforce_retention(0, 0, 1) > 0  # only the active segment, with its snapshot, remains
    part.close()
    clock.advance(TTL_US // 2 + 1)
    again = _open(tmp_path, clock, segment_bytes=300)
    assert again.producer_sequence("idle") is None
    assert again.producer_sequence("busy") == 5
    again.close()
    still = _open(tmp_path, FakeClock(T0 + TTL_US // 2), segment_bytes=300)  # before its TTL: kept
    assert still.producer_sequence("idle") == 1


def test_expired_producers_leave_the_table_at_the_next_write(tmp_path):
    clock = FakeClock()
    part = _open(tmp_path, clock)
    for i in range(50):
        part.append(items("x"), producer=(f"w{i}", 1))
    part.flush()
    clock.advance(TTL_US + 1)
    part.append(items("y"), producer=("fresh", 1))
    part.flush()
    # Pruned off the append path, at the write: memory and the next snapshot stay small.
    assert list(part._producers) == ["fresh"] and list(part._durable_producers) == ["fresh"]


def test_a_zero_ttl_never_expires(tmp_path):
    clock = FakeClock()
    part = _open(tmp_path, clock, producer_ttl_ms=0)
    part.append(items("a"), producer=("w", 1))
    part.flush()
    clock.advance(100 * 365 * 24 * 3600 * 1_000_000)
    part.append(items("b"), producer=("other", 1))
    part.flush()
    assert part.append(items("a"), producer=("w", 1)).duplicate
    part.close()
    assert _open(tmp_path, clock, producer_ttl_ms=0).producer_sequence("w") == 1


def test_batches_written_before_producer_times_give_entries_the_batch_time():
    """A batch without FLAG_PRODUCER_TIMES (the layout before idle expiry) still decodes."""
    entry = _ID_LEN.pack(1) + b"w" + _SEQ.pack(9)
    head = batch_head(base_offset=0, base_byte_pos=0, max_timestamp=T0 + 5, count=1,
                      producers=entry, producer_count=1, flags=0, records_len=64)
    info = parse_batch_header(head + bytes(64), 0, 0)
    assert not info.flags & FLAG_PRODUCER_TIMES and info.header_length == BATCH_HEADER_SIZE + len(entry)
    assert decode_producers(head, 0, info) == [("w", 9, T0 + 5)]
