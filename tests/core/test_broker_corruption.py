"""Corrupt bytes in the middle of a partition: damaged records are never
served, the damage is logged and reported with CorruptSegment, the damaged
segment goes to ``quarantine/``, its good batches and everything else stay
readable, and nothing crashes (issue 3, "corrupt segment byte in the middle")."""

from __future__ import annotations

import logging
import shutil

import pytest
from broker_helpers import items, offsets, open_broker, payloads

from core.consumers import Consumer, PollStrategy
from core.errors import CorruptSegment
from core.log.batch import BATCH_HEADER, BATCH_HEADER_SIZE
from core.log.salvage import QUARANTINE_DIR
from core.log.segment import SUFFIXES

SEG = 1500  # bytes: three batches of three 60-byte messages per segment
N = 60


def _payload(i: int) -> bytes:
    return f"m{i:04d}".encode().ljust(60, b".")


def _build(path, **cfg):
    """A broker whose s/t partition 0 holds N records in 3-record batches over
    several segments; returns the partition directory and its .log files."""
    b = open_broker(path, segment_bytes=SEG, **cfg)
    b.create_stream("s")
    b.create_topic("s", "t")
    for i in range(0, N, 3):
        b.append("s", "t", [items(_payload(j))[0] for j in range(i, i + 3)], partition=0, producer=("w", i))
        b.flush()  # one batch per append
    b.close()
    pdir = path / "streams" / "0" / "topics" / "0" / "partitions" / "0"
    logs = sorted(pdir.glob("*.log"))
    assert len(logs) >= 4
    return pdir, logs


def _batches(data: bytes) -> list[tuple[int, int, int]]:
    """(position, base_offset, count) of each batch of a segment file."""
    out, pos = [], 0
    while pos < len(data):
        fields = BATCH_HEADER.unpack_from(data, pos)
        out.append((pos, fields[5], fields[8]))
        pos += fields[1]
    return out


def _flip(path, pos: int, mask: int = 0x20) -> None:
    data = bytearray(path.read_bytes())
    data[pos] ^= mask
    path.write_bytes(bytes(data))


_consumers = iter(range(1, 1 << 30))


def _read_everything(broker) -> tuple[dict[int, bytes], int]:
    """Poll the whole partition with a new consumer; returns offset -> payload
    and how many polls raised CorruptSegment."""
    me, got, errors = Consumer("consumer", next(_consumers)), {}, 0
    for _ in range(200):
        try:
            batch = broker.consumers.poll("s", "t", me, PollStrategy("next"), 5, partition=0, auto_commit=True).batch
        except CorruptSegment:
            errors += 1
            continue
        if not batch.count:
            break
        for rv in batch.records():
            assert rv.offset not in got
            got[rv.offset] = bytes(rv.payload)
    return got, errors


def test_flipped_byte_in_an_early_record_is_reported_quarantined_and_never_served(tmp_path, caplog):
    pdir, logs = _build(tmp_path)
    victim = logs[1]  # a sealed segment in the middle of the partition
    pos, base, count = _batches(victim.read_bytes())[1]  # its middle batch
    _flip(victim, pos + BATCH_HEADER_SIZE + 64 + 10)  # a payload byte of its first record
    broker = open_broker(tmp_path, segment_bytes=SEG)  # sealed segments are not re-read at open
    damaged = set(range(base, base + count))
    try:
        with caplog.at_level(logging.ERROR, logger="ferry.log"):
            got, errors = _read_everything(broker)
        assert errors == 1  # reported once, with a typed error
        assert "failed its checksum" in caplog.text and str(victim.name) in caplog.text
        assert set(got) == set(range(N)) - damaged  # the rest stays readable, this segment's good batches too
        assert all(got[o] == _payload(o) for o in got)  # byte-identical, nothing damaged served
        assert sorted(p.name for p in (pdir / QUARANTINE_DIR).iterdir()) == sorted(
            victim.stem + s for s in SUFFIXES
        )
        with pytest.raises(CorruptSegment):  # the quarantined copy is still the damaged one
            raise_if_damaged(pdir / QUARANTINE_DIR / victim.name)
        for o in damaged:  # a read inside the gap continues after it
            assert broker.read("s", "t", 0, o, 1).first_offset == base + count
        assert offsets(broker.read("s", "t", 0, base - 2, 10)) == [base - 2, base - 1]  # stops at the gap
        r = broker.append("s", "t", items("after"), partition=0)  # still writable
        assert r.base_offset == N
    finally:
        broker.close()
    again = open_broker(tmp_path, segment_bytes=SEG)
    try:
        got, errors = _read_everything(again)
        assert errors == 0
        assert set(got) == (set(range(N)) - damaged) | {N}
        assert again.append("s", "t", items("x"), partition=0, producer=("w", 57)).duplicate  # dedup intact
    finally:
        again.close()


def raise_if_damaged(log_file) -> None:
    """Walk a segment file the way recovery does; CorruptSegment if it does not walk cleanly."""
    import os

    from core.log.recovery import BatchScan

    fd = os.open(log_file, os.O_RDONLY)
    try:
        scan = BatchScan(fd, os.fstat(fd).st_size)
        for _ in scan:
            pass
        if scan.stop != scan.size:
            raise CorruptSegment(scan.reason)
    finally:
        os.close(fd)


def test_damaged_segment_found_at_open_is_salvaged(tmp_path, caplog):
    pdir, logs = _build(tmp_path)
    victim = logs[2]
    pos, base, count = _batches(victim.read_bytes())[0]
    _flip(victim, pos + 20)  # a batch header byte (its base byte position)
    victim.with_suffix(".index").unlink()  # forces a rebuild at open, which walks every CRC
    with caplog.at_level(logging.ERROR, logger="ferry.log"):
        broker = open_broker(tmp_path, segment_bytes=SEG)
    try:
        assert "failed its checksum" in caplog.text
        got, errors = _read_everything(broker)
        assert errors == 0  # found at open: nothing left to report to a reader
        assert set(got) == set(range(N)) - set(range(base, base + count))
        assert all(got[o] == _payload(o) for o in got)
        assert (pdir / QUARANTINE_DIR / victim.name).exists()
    finally:
        broker.close()


def test_damage_in_the_middle_of_the_active_segment_keeps_the_batches_after_it(tmp_path, caplog):
    """Recovery used to take any bad batch of the active segment for a torn
    write and cut the file there, silently dropping acknowledged batches after it."""
    pdir, logs = _build(tmp_path)
    active = logs[-1]
    batches = _batches(active.read_bytes())
    assert len(batches) >= 2
    pos, base, count = batches[0]
    _flip(active, pos + BATCH_HEADER_SIZE + 64)  # first record's payload, first batch
    with caplog.at_level(logging.WARNING, logger="ferry.log"):
        broker = open_broker(tmp_path, segment_bytes=SEG)
    try:
        assert "failed its checksum" in caplog.text and "truncating" not in caplog.text
        part = broker.partition("s", "t", 0)
        assert part.torn_bytes == 0 and part.next_offset == N
        got, errors = _read_everything(broker)
        assert set(got) == set(range(N)) - set(range(base, base + count))
        assert all(got[o] == _payload(o) for o in got)
        assert (pdir / QUARANTINE_DIR / active.name).exists()
        # dedup entries of the surviving batches are still known
        assert broker.append("s", "t", items("dup"), partition=0, producer=("w", 57)).duplicate
        assert broker.append("s", "t", items("new"), partition=0, producer=("w", 60)).base_offset == N
    finally:
        broker.close()
    again = open_broker(tmp_path, segment_bytes=SEG)
    try:  # and after one more restart (the next batch carried a dedup snapshot)
        assert again.append("s", "t", items("dup"), partition=0, producer=("w", 60)).duplicate
        assert again.append("s", "t", items("dup"), partition=0, producer=("w", 57)).duplicate
        assert payloads(again.read("s", "t", 0, N, 5)) == [b"new"]
    finally:
        again.close()


def test_torn_tail_of_the_active_segment_is_still_cut(tmp_path):
    _pdir, logs = _build(tmp_path)
    active = logs[-1]
    pos, base, _count = _batches(active.read_bytes())[-1]
    _flip(active, pos + BATCH_HEADER_SIZE + 70)  # the last batch: indistinguishable from a torn write
    broker = open_broker(tmp_path, segment_bytes=SEG)
    try:
        assert broker.partition("s", "t", 0).next_offset == base
        assert broker.partition("s", "t", 0).salvaged == 0
    finally:
        broker.close()


@pytest.mark.parametrize("suffix, at", [(".index", 28 * 4 + 3), (".timeindex", 24 + 9)])
def test_damaged_index_of_a_sealed_segment_is_rebuilt_not_served(tmp_path, caplog, suffix, at):
    """A flipped byte in a sealed segment's offset index used to slice the wrong
    bytes out of a good log and serve them as records; one in its time index
    quarantined a perfectly good segment."""
    pdir, logs = _build(tmp_path)
    _flip(logs[0].with_suffix(suffix), at, 0x04)
    broker = open_broker(tmp_path, segment_bytes=SEG)
    try:
        with caplog.at_level(logging.WARNING, logger="ferry.log"):
            got, errors = _read_everything(broker)
        assert errors == 0
        assert got == {o: _payload(o) for o in range(N)}
        assert "rebuilt them from the log" in caplog.text
        assert not (pdir / QUARANTINE_DIR).exists()
    finally:
        broker.close()


@pytest.mark.parametrize("which", ["sealed", "active"])
def test_no_single_byte_flip_is_ever_served_or_crashes(tmp_path, which):
    """Flip each byte of a segment in turn (log and both indexes): every record
    served must be the one written, the only error a read may raise is
    CorruptSegment, and only that segment's records may go missing. Runs on the
    partition alone (no metadata store) to stay quick."""
    from core.log import LogConfig, Partition

    orig = tmp_path / "orig"
    pdir, logs = _build(orig)
    k = 1 if which == "sealed" else len(logs) - 1
    victim = logs[k]
    files = [victim, victim.with_suffix(".index"), victim.with_suffix(".timeindex")]
    cases = [(f, i) for f in files for i in range(0, f.stat().st_size, 4)]
    assert len(cases) > 100
    may_lose = set(range(int(victim.stem), int(logs[k + 1].stem) if k + 1 < len(logs) else N))
    cfg = LogConfig(segment_bytes=SEG, fsync="never")
    for n, (f, i) in enumerate(cases):
        work = tmp_path / f"case{n}"
        shutil.copytree(pdir, work)
        _flip(work / f.name, i, 0x01)
        part = Partition.open(work, 0, cfg)
        try:
            got, offset, errors = {}, 0, 0
            for _ in range(100):
                try:
                    batch = part.read(offset, 7)
                except CorruptSegment:
                    errors += 1  # quarantined now: the same read goes on past it
                    continue
                if not batch.count:
                    break
                got.update((rv.offset, bytes(rv.payload)) for rv in batch.records())
                offset = batch.next_offset
            assert errors <= 1 and offset >= part.first_offset, (f.name, i)
            assert all(got[o] == _payload(o) for o in got), (f.name, i)
            assert set(range(N)) - set(got) <= may_lose, (f.name, i)
        finally:
            part.close()
        shutil.rmtree(work)


def test_leftover_of_a_salvage_cut_short_is_removed_at_open(tmp_path):
    pdir, logs = _build(tmp_path)
    leftover = pdir / (logs[1].name + ".salvage")
    leftover.write_bytes(b"half a copy")
    broker = open_broker(tmp_path, segment_bytes=SEG)
    try:
        assert not leftover.exists()
        assert offsets(broker.read("s", "t", 0, 0, N)) == list(range(N))
    finally:
        broker.close()


async def test_salvage_while_the_flusher_keeps_writing_and_rolling(tmp_path):
    import trio

    from core.flusher import run_broker_tasks

    pdir, logs = _build(tmp_path)
    victim = logs[1]
    pos, base, count = _batches(victim.read_bytes())[0]
    _flip(victim, pos + BATCH_HEADER_SIZE + 64 + 3)
    broker = open_broker(tmp_path, segment_bytes=SEG, fsync="always")
    acked: list[int] = []
    errors = 0
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(run_broker_tasks, broker)

            async def producer():
                for i in range(N, N + 120):
                    done = trio.Event()
                    broker.append("s", "t", [items(_payload(i))[0]], partition=0,
                                  on_durable=lambda r, d=done: (acked.append(r.base_offset), d.set()))  # fmt: skip
                    await done.wait()

            async with trio.open_nursery() as work:
                work.start_soon(producer)
                offset = 0
                while offset < N + 120:  # a reader chasing the producer through the damage
                    try:
                        batch = broker.read("s", "t", 0, offset, 4)
                    except CorruptSegment:
                        errors += 1
                        continue
                    if not batch.count:
                        await trio.sleep(0.001)
                        continue
                    for rv in batch.records():
                        assert bytes(rv.payload) == _payload(rv.offset)
                    offset = batch.next_offset
            nursery.cancel_scope.cancel()
    finally:
        broker.close()
    assert errors == 1 and acked == list(range(N, N + 120))
    again = open_broker(tmp_path, segment_bytes=SEG)
    try:
        got = {rv.offset: bytes(rv.payload) for rv in again.read("s", "t", 0, 0, 1000).records()}
        got.update({rv.offset: bytes(rv.payload) for rv in again.read("s", "t", 0, base + count, 1000).records()})
        assert set(got) == set(range(N + 120)) - set(range(base, base + count))
        assert all(got[o] == _payload(o) for o in got)
        assert again.partition("s", "t", 0).segment_count > len(logs)  # it kept rolling meanwhile
    finally:
        again.close()


@pytest.mark.parametrize("window", [57, 100])
def test_survey_finds_the_same_runs_whatever_the_read_window(tmp_path, monkeypatch, window):
    """The resync after damage searches the file window by window: a batch
    magic split across two windows must still be found."""
    import os

    from core.log import recovery, salvage

    _pdir, logs = _build(tmp_path)
    victim = logs[1]
    batches = _batches(victim.read_bytes())
    _flip(victim, batches[0][0] + BATCH_HEADER_SIZE + 70)
    fd = os.open(victim, os.O_RDONLY)
    try:
        want = salvage.survey(fd, victim.stat().st_size, int(victim.stem))
        monkeypatch.setattr(recovery, "SCAN_WINDOW", window)
        got = salvage.survey(fd, victim.stat().st_size, int(victim.stem))
    finally:
        os.close(fd)
    assert [(r.start, r.end, r.base_offset, r.count) for r in got.runs] == [
        (r.start, r.end, r.base_offset, r.count) for r in want.runs
    ]
    assert got.damaged == want.damaged == [(0, batches[1][0])]
    assert got.runs[0].base_offset == batches[1][1] and got.runs[0].end == victim.stat().st_size
