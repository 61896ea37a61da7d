"""Crash recovery: what ``Partition.open`` does to each segment it finds.

Theory of operation
-------------------
*Sealed* segments were complete and fsynced (with their index files) before
the next segment was created, so opening one only checks that its index files
have the right shape (entry sizes, last record ending exactly at the end of
the log file, time index covering every record). If not, both indexes are
rebuilt from the log by walking its batches, checking every CRC; a sealed
segment that does not walk cleanly to its end raises :class:`CorruptSegment`
and the partition salvages it (``salvage.py``).

:func:`recover_segments` does it for a whole partition directory; a damaged
segment goes to the ``salvage`` function it is given (the partition's
``Quarantine.salvage``, ``salvage.py``).

The *active* (last) segment may end in a torn write: the process or the machine
died during a flush. Its batches are walked from the start, each one's framing,
CRC and base offset checked; the file is cut at the first batch that fails, and
a warning says how many bytes went. Only the last write can be torn, so when a
good batch follows the bad one the segment is damaged, not torn: nothing is
cut and the partition salvages it instead (``salvage.py``). Index entries are
trusted batch by batch while every one of them equals what the batch walked
gives; from the first disagreement on they are rebuilt from the records. The
same walk replays the producer-dedup entries of every batch header (the first
batch of a segment carries a snapshot of the whole table, so nothing before
the active segment is needed).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from ..errors import CorruptSegment
from .batch import BATCH_HEADER_SIZE, BATCH_MAGIC, BatchInfo, batch_crc_ok, batch_entries, decode_producers, parse_batch_header
from .config import MiB
from .index import I_LEN, I_POS, INDEX_ENTRY, T_COUNT, T_FIRST, T_POS, TIME_ENTRY, EntryTable
from .producers import Table, remember
from .segment import LOG_SUFFIX, NAME_DIGITS, Segment, fsync_dir, pread_exact

log = logging.getLogger("ferry.log")

# Read-ahead while walking batches at open: large enough that a segment of tiny
# batches costs a few hundred reads, not one per batch, small enough to be
# irrelevant next to the segment itself.
SCAN_WINDOW = 4 * MiB


class BatchScan:
    """Iterate the batches of a segment file whose framing and CRC hold.

    Stops at the first one that does not; afterwards ``stop`` is the position
    just past the last good batch and ``reason`` says why it stopped ("" at a
    clean end of file). A caller may also cut the walk with :meth:`cut`."""

    def __init__(self, fd: int, size: int, start: int = 0) -> None:
        self.fd = fd
        self.size = size
        self.start = start  # where the walk begins (salvage resumes past damage)
        self.stop = start
        self.reason = ""
        self._buf = b""
        self._at = 0  # file position of _buf[0]

    def _window(self, pos: int, n: int) -> int:
        """Make ``[pos, pos+n)`` available in ``_buf``; returns its index there."""
        if pos < self._at or pos + n > self._at + len(self._buf):
            want = min(max(n, SCAN_WINDOW), self.size - pos)
            self._buf = pread_exact(self.fd, want, pos)
            self._at = pos
        return pos - self._at

    def __iter__(self) -> Iterator[tuple[BatchInfo, memoryview]]:
        pos = self.start
        while pos < self.size:
            if self.size - pos < BATCH_HEADER_SIZE:
                self.reason = "batch header truncated"
                break
            at = self._window(pos, BATCH_HEADER_SIZE)  # may replace _buf: call it first
            try:
                info = parse_batch_header(self._buf, at, pos)
            except CorruptSegment as exc:
                self.reason = exc.message
                break
            if info.end > self.size:
                self.reason = "batch extends past the end of the file"
                break
            at = self._window(pos, info.length)
            if not batch_crc_ok(self._buf, at, info):
                self.reason = "batch checksum mismatch"
                break
            self.stop = info.end
            yield info, memoryview(self._buf)[at : at + info.length]
            pos = self.stop

    def cut(self, position: int, reason: str) -> None:
        """Declare everything from ``position`` bad (the caller found a problem)."""
        self.stop = position
        self.reason = reason


def find_next_batch(fd: int, size: int, start: int, min_offset: int) -> BatchInfo | None:
    """The first batch at or after file position ``start`` whose framing and CRC
    hold and whose base offset is at least ``min_offset``, or None. Used to step
    over damage: a CRC-32 match on a candidate found by its magic is what tells
    a damaged batch followed by good ones from a torn tail."""
    pos = start
    while size - pos >= BATCH_HEADER_SIZE:
        n = min(SCAN_WINDOW, size - pos)
        window = pread_exact(fd, n, pos)
        i = window.find(BATCH_MAGIC)
        while i >= 0:
            for info, _view in BatchScan(fd, size, pos + i):
                if info.base_offset >= min_offset:
                    return info
                break
            i = window.find(BATCH_MAGIC, i + 1)
        if pos + n >= size:
            break
        pos += n - (len(BATCH_MAGIC) - 1)  # a magic split across two windows is still found
    return None


# -- sealed segments -------------------------------------------------------------
def _sealed_shape_ok(seg: Segment) -> bool:
    index, times = seg.index, seg.times
    if not index.count or not times.count:
        return False
    if len(index.buf) != index.nbytes or len(times.buf) != times.nbytes:
        return False
    last = index.last()
    t0, tl = times.get(0), times.last()
    return (
        t0[T_POS] == 0
        and t0[T_FIRST] == 0
        and tl[T_FIRST] + tl[T_COUNT] == index.count
        and last[I_POS] + last[I_LEN] == seg.size
        and tl[T_POS] < last[I_POS]
    )


def rebuild_indexes(seg: Segment) -> None:
    """Rebuild a sealed segment's two index files by walking its log, checking
    every CRC, and map them again. Raises CorruptSegment when the log itself
    does not walk cleanly to its end (then only salvage can help)."""
    index, times, rel = bytearray(), bytearray(), 0
    scan = BatchScan(seg.fd, seg.size)
    for info, view in scan:
        if info.base_offset != seg.base_offset + rel:
            raise CorruptSegment("batch offsets are not contiguous", position=info.position)
        idx, tim, _end = batch_entries(view, info, seg.base_offset)
        index += idx
        times += tim
        rel += info.count
    if scan.stop != seg.size or not rel:
        raise CorruptSegment(f"sealed segment is damaged: {scan.reason or 'empty'}", position=scan.stop)
    seg.index.close()
    seg.times.close()
    seg.index = EntryTable(INDEX_ENTRY, index)
    seg.times = EntryTable(TIME_ENTRY, times)
    seg.rewrite_tables()
    seg.load_tables(mapped=True)
    seg.reset_verified(True)  # every batch was just checked
    seg.compute_end_byte()


def open_sealed(seg: Segment) -> None:
    """Open a sealed segment; rebuild its indexes when their shape is wrong.
    Raises CorruptSegment (files left open; the caller salvages)."""
    seg.sealed = True
    seg.open_files(writable=False)
    seg.load_tables(mapped=True)
    if not _sealed_shape_ok(seg):
        log.warning("rebuilding the indexes of segment %s", seg.path(LOG_SUFFIX))
        rebuild_indexes(seg)
    else:
        seg.reset_verified(False)
    seg.compute_end_byte()


# -- the active segment ----------------------------------------------------------
def _covered(seg: Segment, k: int, rel: int, idx: bytes, tim: bytes) -> bool:
    """Do the stored index entries of batch number ``k`` equal the ones rebuilt
    from it? Every entry is compared, not just the batch's bounds: one flipped
    position in the middle would otherwise serve the wrong bytes as a record."""
    isz, tsz = seg.index.entry.size, seg.times.entry.size
    if k >= seg.times.count or rel * isz + len(idx) > seg.index.nbytes:
        return False
    return seg.times.buf[k * tsz : (k + 1) * tsz] == tim and seg.index.buf[rel * isz : rel * isz + len(idx)] == idx


def recover_active(seg: Segment, max_producers: int) -> tuple[dict[str, tuple[int, int]], int]:
    """Open the active segment: walk its batches, truncate a torn tail, bring
    its indexes in line. Returns the producer-dedup table replayed from the batch
    headers (id -> (last sequence, last write µs), in write order) and the
    number of bytes cut off the tail. Raises CorruptSegment,
    changing nothing on disk, when a bad batch is followed by good ones (the
    partition then salvages the segment, ``core/log/salvage.py``)."""
    seg.open_files(writable=True)
    seg.load_tables(mapped=False)
    producers: dict[str, tuple[int, int]] = {}
    scan = BatchScan(seg.fd, seg.size)
    k = rel = 0
    trusting, changed = True, False
    for info, view in scan:
        if info.base_offset != seg.base_offset + rel:
            scan.cut(info.position, "batch offsets are not contiguous")
            break
        try:
            entries = decode_producers(view, 0, info) if info.producer_count else ()
            idx, tim, _end = batch_entries(view, info, seg.base_offset)
        except CorruptSegment as exc:
            scan.cut(info.position, exc.message)
            break
        if not (trusting and _covered(seg, k, rel, idx, tim)):
            if trusting:  # first disagreement: drop the stored entries from here on
                seg.index.truncate(rel)
                seg.times.truncate(k)
                trusting, changed = False, True
            seg.index.extend(idx)
            seg.times.extend(tim)
        for pid, seq, ts in entries:
            producers.pop(pid, None)
            producers[pid] = (seq, ts)
        k += 1
        rel += info.count
    tables_exact = len(seg.index.buf) == seg.index.nbytes and len(seg.times.buf) == seg.times.nbytes
    if seg.index.count != rel or seg.times.count != k or not tables_exact:
        seg.index.truncate(rel)
        seg.times.truncate(k)
        changed = True
    torn = seg.size - scan.stop
    if torn and find_next_batch(seg.fd, seg.size, scan.stop + 1, seg.base_offset + rel) is not None:
        # A good batch after the bad one: this is damage in the middle, not a
        # write torn by a crash (only the last write can be torn). Cutting here
        # would silently drop acknowledged records; the caller salvages instead.
        raise CorruptSegment(f"damaged batch inside the active segment: {scan.reason}", position=scan.stop)
    if torn:
        log.warning(
            "truncating %d bytes of a torn or corrupt write at the tail of %s (%s)",
            torn, seg.path(LOG_SUFFIX), scan.reason,
        )  # fmt: skip
        os.ftruncate(seg.fd, scan.stop)
        os.fsync(seg.fd)
        seg.size = scan.stop
    if changed:
        seg.rewrite_tables()
    seg.compute_end_byte()
    while len(producers) > max_producers:
        del producers[next(iter(producers))]
    return producers, torn


# ``salvage(seg, exc, seg_next)`` -> (the segments its good runs became, the dedup
# entries they carry): Quarantine.salvage (salvage.py), which logs what was lost.
Salvage = Callable[[Segment, BaseException, int], tuple[list[Segment], list[tuple[str, int, int]]]]


@dataclass(slots=True)
class Recovered:
    """What :func:`recover_segments` found in a partition directory."""

    segments: list[Segment]  # sealed in offset order, the active one last
    producers: Table  # the dedup table replayed from the active segment
    torn_bytes: int = 0  # cut off the active segment's tail
    # The active segment was salvaged: its first batch may not hold the dedup
    # snapshot any more, so the next batch written must carry one.
    snapshot_due: bool = False


def recover_segments(path: Path, max_producers: int, fsync: bool, salvage: Salvage) -> Recovered:
    """Open every segment of the partition directory ``path``: the last one
    recovered as the active segment (torn tail cut; one left empty by a crashed
    roll removed and the one before it active again; a fresh one created when
    there is none), the others opened sealed, damaged ones handed to
    ``salvage``. Raises OSError when the disk refuses (the segments opened so
    far are closed), and what ``salvage`` does not handle."""
    bases = sorted(int(p.stem) for p in path.glob("*" + LOG_SUFFIX) if len(p.stem) == NAME_DIGITS and p.stem.isdigit())
    found = _recover_active(path, bases, max_producers, fsync, salvage)  # pops the bases it consumed
    active, salvaged = found.segments[-1], found.segments[:-1]
    segments: list[Segment] = []
    try:
        for base in bases:
            seg = Segment(path, base)
            try:
                open_sealed(seg)
            except CorruptSegment as exc:
                segments += salvage(seg, exc, seg.next_offset)[0]
                continue
            except BaseException:
                seg.close()
                raise
            segments.append(seg)
        segments += salvaged
    except BaseException:
        for seg in [*segments, active, *salvaged]:
            seg.close()
        raise
    if not active.count and segments:
        active.start_byte = active.end_byte = segments[-1].end_byte
    segments.append(active)
    found.segments = segments
    return found


def _recover_active(path: Path, bases: list[int], max_producers: int, fsync: bool, salvage: Salvage) -> Recovered:
    """Recover the last segment; one left empty by a crashed roll is removed
    and the one before it becomes active again. One damaged in the middle is
    salvaged: its last good run becomes the active segment, the runs before it
    sealed segments to follow the others (``segments``: those, then the active one)."""
    torn_total = 0
    while bases:
        seg = Segment(path, bases.pop())
        try:
            producers, torn = recover_active(seg, max_producers)
        except CorruptSegment as exc:
            found = _salvage_active(path, seg, exc, bases, max_producers, fsync, salvage)
            found.torn_bytes += torn_total
            return found
        except BaseException:
            seg.close()
            raise
        torn_total += torn
        if seg.count or not bases:
            return Recovered([seg], producers, torn_total)
        log.warning("removing empty segment %s (a roll that never got its first batch)", seg.path(LOG_SUFFIX))
        seg.remove()
    seg = Segment.create(path, 0, 0)
    if fsync:
        fsync_dir(path)
    return Recovered([seg], {}, torn_total)


def _salvage_active(path: Path, seg: Segment, exc: CorruptSegment, bases: list[int], max_producers: int,
                    fsync: bool, salvage: Salvage) -> Recovered:
    kept, entries = salvage(seg, exc, 0)
    if not kept:  # nothing good was left: the segment before becomes active
        return _recover_active(path, bases, max_producers, fsync, salvage)
    last = kept.pop()
    last.close()
    active = Segment(path, last.base_offset)
    try:
        recover_active(active, max_producers)  # walks cleanly: it was just written
    except BaseException:
        active.close()
        for other in kept:
            other.close()
        raise
    # The dedup snapshot sat in the segment's first batch, which may be the
    # damaged one: keep every entry the good batches still carry, and have
    # the next write carry a full snapshot so the next restart sees them too.
    producers: Table = {}
    for pid, seq, ts in entries:
        remember(producers, pid, seq, ts, max_producers)
    return Recovered([*kept, active], producers, snapshot_due=True)
