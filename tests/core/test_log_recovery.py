"""core.log crash recovery: torn tails, rebuilt indexes, corrupt sealed
segments (quarantine), producer dedup surviving restarts."""

from __future__ import annotations

import logging
import os
import shutil

import pytest
from log_helpers import items, numbered, offsets, open_part, read_all, segment_files

from core.errors import CorruptSegment
from core.log.batch import BATCH_HEADER, BATCH_HEADER_SIZE, BATCH_MAGIC
from core.log.salvage import QUARANTINE_DIR


def _three_batches(path, **cfg):
    part = open_part(path, **cfg)
    for start in (0, 2, 4):
        part.append(numbered(start, 2, size=12), producer=("writer-1", start))
        part.flush()
    part.close()
    return path / "00000000000000000000.log"


def _batch_starts(data: bytes) -> list[int]:
    starts, pos = [], 0
    while pos < len(data):
        magic, length = BATCH_HEADER.unpack_from(data, pos)[:2]
        assert magic == BATCH_MAGIC
        starts.append(pos)
        pos += length
    return starts


def test_every_cut_inside_the_last_batch_keeps_the_earlier_batches(tmp_path):
    log_file = _three_batches(tmp_path / "orig")
    data = log_file.read_bytes()
    last = _batch_starts(data)[-1]
    before = read_all(open_part(tmp_path / "orig"))[:4]
    for cut in range(last, len(data)):
        work = tmp_path / f"cut{cut}"
        shutil.copytree(tmp_path / "orig", work)
        with open(work / log_file.name, "r+b") as f:
            f.truncate(cut)
        part = open_part(work)
        assert part.torn_bytes == cut - last
        assert part.next_offset == 4
        assert read_all(part) == before  # nothing partial is served
        assert os.path.getsize(work / log_file.name) == last
        assert part.producer_sequence("writer-1") == 2  # the torn batch's entry is gone too
        part.append(items("after"), producer=("writer-1", 4))  # seq 4 was never stored
        part.close()
        assert offsets(open_part(work).read(0, 10)) == [0, 1, 2, 3, 4]
        shutil.rmtree(work)


def test_garbage_after_the_last_batch_is_cut_with_a_warning(tmp_path, caplog):
    log_file = _three_batches(tmp_path)
    size = log_file.stat().st_size
    with open(log_file, "ab") as f:
        f.write(b"\x00garbage" * 20)
    with caplog.at_level(logging.WARNING, logger="ferry.log"):
        part = open_part(tmp_path)
    assert part.torn_bytes == 160
    assert "160 bytes" in caplog.text
    assert log_file.stat().st_size == size
    assert part.next_offset == 6


def test_flipped_byte_in_the_last_batch_drops_that_batch(tmp_path):
    log_file = _three_batches(tmp_path)
    data = bytearray(log_file.read_bytes())
    last = _batch_starts(bytes(data))[-1]
    data[last + BATCH_HEADER_SIZE + 30] ^= 0x40  # inside a record of the last batch
    log_file.write_bytes(bytes(data))
    part = open_part(tmp_path)
    assert part.next_offset == 4
    assert part.torn_bytes == len(data) - last


def test_missing_or_short_indexes_are_rebuilt(tmp_path):
    part = open_part(tmp_path, segment_bytes=500)
    for i in range(0, 30, 3):
        part.append(numbered(i, 3, size=40))
        part.flush()
    before = read_all(part)
    lookups = [(part.byte_pos_of(o), part.offset_for_timestamp(0)) for o in range(30)]
    part.close()
    index_files = segment_files(tmp_path, ".index")
    assert len(index_files) > 2
    index_files[0].unlink()  # a sealed segment without index
    with open(index_files[1], "r+b") as f:  # a sealed segment with a short one
        f.truncate(f.seek(0, 2) - 28)
    with open(index_files[-1], "r+b") as f:  # the active segment with a short one
        f.truncate(f.seek(0, 2) - 28)
    segment_files(tmp_path, ".timeindex")[-1].unlink()
    again = open_part(tmp_path, segment_bytes=500)
    assert read_all(again) == before
    assert [(again.byte_pos_of(o), again.offset_for_timestamp(0)) for o in range(30)] == lookups
    assert index_files[0].exists()  # written back
    again.close()
    assert read_all(open_part(tmp_path, segment_bytes=500)) == before


def _sealed_log(path):
    part = open_part(path, segment_bytes=400)
    for i in range(0, 24, 2):
        part.append(numbered(i, 2, size=40))
        part.flush()
    part.close()
    logs = segment_files(path)
    assert len(logs) >= 3
    return logs


def test_corrupt_byte_in_a_sealed_segment_is_caught_on_read_and_quarantined(tmp_path, caplog):
    logs = _sealed_log(tmp_path)
    victim = logs[1]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    part = open_part(tmp_path, segment_bytes=400)
    victim_base = int(victim.stem)
    next_base = int(logs[2].stem)
    assert offsets(part.read(0, victim_base)) == list(range(victim_base))  # before it: fine
    with caplog.at_level(logging.ERROR, logger="ferry.log"), pytest.raises(CorruptSegment):
        part.read(victim_base, 100)
    assert "failed its checksum" in caplog.text
    assert not victim.exists()
    assert (tmp_path / QUARANTINE_DIR / victim.name).exists()
    assert (tmp_path / QUARANTINE_DIR / (victim.stem + ".index")).exists()
    # never served again: a read into the gap starts after it, one before stops at it
    assert part.read(victim_base, 5).first_offset == next_base
    assert offsets(part.read(0, 100)) == list(range(victim_base))
    part.append(items("still writable"))
    part.close()
    again = open_part(tmp_path, segment_bytes=400)
    assert part.next_offset == again.next_offset
    assert not any(p.name == victim.name for p in segment_files(tmp_path))


def test_corrupt_sealed_segment_with_a_bad_index_is_quarantined_at_open(tmp_path, caplog):
    logs = _sealed_log(tmp_path)
    victim = logs[0]
    data = bytearray(victim.read_bytes())
    data[BATCH_HEADER_SIZE + 10] ^= 0x01
    victim.write_bytes(bytes(data))
    victim.with_suffix(".index").unlink()  # forces a rebuild, which checks every CRC
    with caplog.at_level(logging.ERROR, logger="ferry.log"):
        part = open_part(tmp_path, segment_bytes=400)
    assert (tmp_path / QUARANTINE_DIR / victim.name).exists()
    assert part.first_offset == int(logs[1].stem)
    assert offsets(part.read(0, 3)) == [part.first_offset + i for i in range(3)]


def test_empty_active_segment_left_by_a_crashed_roll_is_dropped(tmp_path):
    logs = _sealed_log(tmp_path)
    before = read_all(open_part(tmp_path, segment_bytes=400))
    ghost = tmp_path / f"{len(before):020d}.log"
    ghost.write_bytes(b"")
    part = open_part(tmp_path, segment_bytes=400)
    assert not ghost.exists()
    assert read_all(part) == before
    assert part.segment_count == len(logs)


def test_dedup_duplicate_is_not_written(tmp_path):
    part = open_part(tmp_path)
    acks = []
    first = part.append(items("a"), producer=("w", 1), on_durable=acks.append)
    dup = part.append(items("a again"), producer=("w", 1), on_durable=acks.append)
    older = part.append(items("a older"), producer=("w", 0))
    other = part.append(items("b"), producer=("v", 1))
    assert dup.duplicate and older.duplicate and dup.count == 0
    assert not first.duplicate and not other.duplicate
    assert part.next_offset == 2
    assert acks == []
    part.flush()
    assert acks == [first, dup]  # the duplicate's ack waits for the original's
    late = []
    part.append(items("a"), producer=("w", 1), on_durable=late.append)
    assert late == [] and part.needs_flush  # fired by the next flush round, never inline
    part.fire_ready_acks()
    assert late[0].duplicate


def test_dedup_survives_restarts_rolls_and_retention(tmp_path):
    part = open_part(tmp_path, segment_bytes=300)
    for seq in range(12):
        part.append(numbered(seq, 1, size=60), producer=(f"writer-{seq % 3}", seq))
        part.flush()
    part.append(numbered(99, 1), producer=("early", 5))
    part.flush()
    for seq in range(12, 20):
        part.append(numbered(seq, 1, size=60), producer=("writer-0", seq))
        part.flush()
    assert part.enforce_retention(0, 0, 1) > 0  # only the active segment remains
    assert part.segment_count == 1
    part.close()
    again = open_part(tmp_path, segment_bytes=300)
    assert again.producer_sequence("writer-0") == 19
    assert again.producer_sequence("writer-1") == 10
    assert again.producer_sequence("writer-2") == 11
    assert again.producer_sequence("early") == 5
    end = again.next_offset
    assert again.append(items("x"), producer=("writer-2", 11)).duplicate
    assert not again.append(items("x"), producer=("writer-2", 12)).duplicate
    assert again.next_offset == end + 1


def test_dedup_table_is_bounded(tmp_path):
    part = open_part(tmp_path, max_producers=2)
    for pid in ("a", "b", "c"):
        part.append(items(pid), producer=(pid, 1))
    assert part.producer_sequence("a") is None  # least recently written is forgotten
    assert part.producer_sequence("c") == 1
    part.close()
    again = open_part(tmp_path, max_producers=2)
    assert again.producer_sequence("a") is None and again.producer_sequence("b") == 1
