"""Salvage: take a damaged segment out of service without losing its good batches.

Theory of operation
-------------------
A segment whose bytes fail their CRC (a flipped bit on disk, a zeroed page,
a bad sector) is never served again, but one bad batch must not cost the
thousands of acknowledged batches around it. Salvage therefore:

1. walks the segment file batch by batch (framing, CRC, consecutive offsets)
   and, at each damaged stretch, looks for the next batch that passes its CRC
   (``recovery.find_next_batch``), giving *runs* of consecutive good batches
   and the damaged byte ranges between them;
2. moves the segment's three files into the partition's ``quarantine/``
   folder, untouched, for inspection (never read by Ferry again);
3. writes each run back as a segment of its own, named after its first
   offset, with freshly built indexes, each file written under a temporary
   name, fsynced, then renamed into place, and the directory fsynced.

The partition puts those segments where the damaged one was. Offsets are dense
inside a segment but may jump between segments, and reads already treat such
a jump as a gap (``reads.py``): a read that reaches it stops before it, a read
that starts inside it continues at the next record held. Only the damaged
batches' records are lost; every error is logged with the offsets it cost.

A crash half-way leaves the original in ``quarantine/`` and some of its runs
in place: nothing wrong is ever served, and what is missing is still in the
quarantined file (docs/storage.md, "Corruption").
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CorruptSegment
from .batch import batch_entries, decode_producers
from .index import INDEX_ENTRY, TIME_ENTRY, EntryTable
from .recovery import SCAN_WINDOW, BatchScan, find_next_batch, open_sealed, rebuild_indexes
from .segment import LOG_SUFFIX, Segment, fsync_dir, write_all

log = logging.getLogger("ferry.log")

QUARANTINE_DIR = "quarantine"
TEMP_SUFFIX = ".salvage"  # never matches "*.log": a leftover is not taken for a segment


@dataclass(slots=True)
class Run:
    """Consecutive good batches of a damaged file, ``[start, end)`` in it."""

    start: int
    base_offset: int
    end: int = 0
    count: int = 0
    index: bytearray = field(default_factory=bytearray)
    times: bytearray = field(default_factory=bytearray)

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.count


@dataclass(slots=True)
class Survey:
    """What a walk over a damaged file found."""

    runs: list[Run]
    damaged: list[tuple[int, int]]  # byte ranges [start, end) of the file that are lost
    producers: list[tuple[str, int, int]]  # dedup entries (id, seq, write µs) of the good batches, in file order


def survey(fd: int, size: int, base_offset: int) -> Survey:
    """Split the file ``fd`` (``size`` bytes, first offset ``base_offset``) into
    runs of good batches and the damaged ranges between them."""
    out = Survey([], [], [])
    pos, run = 0, None
    while pos < size:
        scan = BatchScan(fd, size, pos)
        for info, view in scan:
            if run is not None and info.base_offset != run.next_offset:
                if info.base_offset < run.next_offset:  # offsets going back: not ours to keep
                    scan.cut(info.position, "batch offsets go backwards")
                    break
                run = None  # a jump forward: the records in between were never here
            start = info.position if run is None else run.start
            rbase = info.base_offset if run is None else run.base_offset
            try:
                idx, tim, _end = batch_entries(view, info, rbase, info.position - start)
                entries = decode_producers(view, 0, info) if info.producer_count else ()
            except CorruptSegment as exc:
                scan.cut(info.position, exc.message)
                break
            if run is None:
                run = Run(info.position, info.base_offset)
                out.runs.append(run)
            run.end = info.end
            run.count += info.count
            run.index += idx
            run.times += tim
            out.producers.extend(entries)
        if scan.stop >= size:
            break
        floor = run.next_offset if run is not None else base_offset
        nxt = find_next_batch(fd, size, scan.stop + 1, floor)
        out.damaged.append((scan.stop, nxt.position if nxt is not None else size))
        if nxt is None:
            break
        pos, run = nxt.position, None
    return out


def salvage(seg: Segment, qdir: Path, fsync: bool) -> tuple[list[Segment], Survey, list[Path]]:
    """Quarantine ``seg`` (its files must be open) and put its good runs back
    as sealed segments. Returns the new segments in offset order, the survey
    and the quarantined paths. Raises OSError when the disk refuses."""
    found = survey(seg.fd, seg.size, seg.base_offset)
    directory = seg.directory
    if fsync and not qdir.exists():
        qdir.mkdir()
        fsync_dir(directory)  # quarantine/ itself is durable before anything moves into it
    moved = seg.quarantine(qdir)  # closes seg; from now on it is read from quarantine/
    if fsync:
        # The originals are durable in quarantine/ before the partition directory can
        # durably lose them (its fsync below, or a concurrent roll's): syncing the
        # partition directory first left a window where a power cut kept them in
        # neither place (tests/gateway/test_powerloss.py, lazyfs).
        fsync_dir(qdir)
    source = next((p for p in moved if p.name.startswith(seg.path(LOG_SUFFIX).name)), None)
    segments: list[Segment] = []
    if source is not None and found.runs:
        fd = os.open(source, os.O_RDONLY)
        try:
            for run in found.runs:
                segments.append(_write_run(directory, fd, run, fsync))
        finally:
            os.close(fd)
    if fsync:
        fsync_dir(directory)
    return segments, found, moved


def _write_run(directory: Path, src_fd: int, run: Run, fsync: bool) -> Segment:
    """Copy one run into a segment of its own and open it, sealed and verified."""
    seg = Segment(directory, run.base_offset)
    final = seg.path(LOG_SUFFIX)
    temp = final.with_name(final.name + TEMP_SUFFIX)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pos = run.start
        while pos < run.end:
            chunk = os.pread(src_fd, min(SCAN_WINDOW, run.end - pos), pos)
            if not chunk:
                raise OSError(f"quarantined file shrank while salvaging {final}")
            write_all(fd, chunk)
            pos += len(chunk)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    seg.index = EntryTable(INDEX_ENTRY, run.index)
    seg.times = EntryTable(TIME_ENTRY, run.times)
    seg.rewrite_tables()  # indexes first: a .log in place always has its indexes
    os.replace(temp, final)
    seg.index, seg.times = EntryTable(INDEX_ENTRY), EntryTable(TIME_ENTRY)
    open_sealed(seg)
    seg.reset_verified(True)  # every batch was CRC-checked by the survey
    return seg


def lost_ranges(seg_base: int, seg_next: int, runs: list[Run]) -> list[tuple[int, int]]:
    """Offset ranges ``[first, last]`` of a segment ``seg_base..seg_next`` that no run kept."""
    lost, at = [], seg_base
    for run in runs:
        if run.base_offset > at:
            lost.append((at, run.base_offset - 1))
        at = max(at, run.next_offset)
    if seg_next > at:
        lost.append((at, seg_next - 1))
    return lost


class Quarantine:
    """What one partition does with a segment that failed its checks (at open,
    or when a read finds the damage): rebuild its indexes when only they were
    wrong, else salvage it into ``<partition>/quarantine/``, logging what was
    lost. ``count`` is how many segments went (tests, metrics)."""

    def __init__(self, path: Path, partition_id: int, fsync: bool) -> None:
        self.directory = path / QUARANTINE_DIR
        self.partition_id = partition_id
        self.fsync = fsync
        self.count = 0

    def rebuild_indexes(self, seg: Segment, exc: CorruptSegment) -> bool:
        """A check failed: if the log walks cleanly, only the (derived) indexes
        were damaged; rebuild them and say True. False when the log is damaged."""
        try:
            rebuild_indexes(seg)
        except CorruptSegment:
            return False
        except OSError:
            log.exception("could not rebuild the indexes of %s", seg.path(LOG_SUFFIX))
            return False
        log.warning(
            "partition %d: the indexes of segment %d disagreed with its log (%s); rebuilt them from the log",
            self.partition_id, seg.base_offset, exc,
        )  # fmt: skip
        return True

    def salvage(
        self, seg: Segment, exc: BaseException, seg_next: int
    ) -> tuple[list[Segment], list[tuple[str, int, int]]]:
        """Quarantine ``seg``; return the segments its good runs became (maybe
        none) and the dedup entries those carry, in file order. Logs what was
        lost; a disk error leaves the segment out of service."""
        qdir = self.directory
        try:
            kept, found, moved = salvage(seg, qdir, self.fsync)
        except OSError:
            log.exception("could not salvage corrupt segment %s into %s", seg.path(LOG_SUFFIX), qdir)
            seg.close()
            return [], []
        seg_next = max([seg_next, *(run.next_offset for run in found.runs)])
        lost = lost_ranges(seg.base_offset, seg_next, found.runs)
        log.error(
            "partition %d: segment %d failed its checksum (%s); moved to %s; kept %d good runs as segments %s; "
            "offsets lost: %s; its damaged records are never served",
            self.partition_id, seg.base_offset, exc, ", ".join(str(p) for p in moved) or qdir,
            len(kept), [s.base_offset for s in kept] or "none",
            ", ".join(f"{a}..{b}" for a, b in lost) or "none (only batch framing)",
        )  # fmt: skip
        self.count += 1
        return kept, found.producers


__all__ = ["QUARANTINE_DIR", "Quarantine", "Run", "Survey", "lost_ranges", "salvage", "survey"]
