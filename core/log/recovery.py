"""Crash recovery: what ``Partition.open`` does to each segment it finds.

Theory of operation
-------------------
*Sealed* segments were complete and fsynced (with their index files) before
the next segment was created, so opening one only checks that its index files
have the right shape (entry sizes, last record ending exactly at the end of
the log file, time index covering every record). If not, both indexes are
rebuilt from the log by walking its batches, checking every CRC; a sealed
segment that does not walk cleanly to its end raises :class:`CorruptSegment`
and the partition quarantines it.

The *active* (last) segment may end in a torn write: the process or the machine
died during a flush. Its batches are walked from the start, each one's framing,
CRC and base offset checked; the file is cut at the first batch that fails, and
a warning says how many bytes went. Index entries are trusted batch by batch
while they agree with the batch walked (time entry equal, first and last
record entries matching the batch's bounds); from the first disagreement on
they are rebuilt from the records. The same walk replays the producer-dedup
entries of every batch header (the first batch of a segment carries a snapshot
of the whole table, so nothing before the active segment is needed).
"""

from __future__ import annotations

import logging
import os
import struct
from typing import Iterator

from ..errors import CorruptSegment
from .batch import BATCH_HEADER_SIZE, BatchInfo, batch_crc_ok, decode_producers, parse_batch_header
from .config import MiB
from .index import I_BYTE, I_LEN, I_POS, INDEX_ENTRY, T_COUNT, T_FIRST, T_POS, TIME_ENTRY, EntryTable
from .segment import LOG_SUFFIX, Segment, pread_exact

log = logging.getLogger("ferry.log")

# Read-ahead while walking batches at open: large enough that a segment of tiny
# batches costs a few hundred reads, not one per batch, small enough to be
# irrelevant next to the segment itself.
SCAN_WINDOW = 4 * MiB

# offset, timestamp, headers_length, payload_length of a core.record header
_REC_FIELDS = struct.Struct("<24xQQ8xII")
_REC_HEADER = 64


class BatchScan:
    """Iterate the batches of a segment file whose framing and CRC hold.

    Stops at the first one that does not; afterwards ``stop`` is the position
    just past the last good batch and ``reason`` says why it stopped ("" at a
    clean end of file). A caller may also cut the walk with :meth:`cut`."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = size
        self.stop = 0
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
        pos = 0
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


def batch_entries(batch: memoryview, info: BatchInfo, segment_base: int) -> tuple[bytes, bytes, int]:
    """The offset-index entries and the time-index entry of one CRC-checked
    batch, and the Pravega byte position just past its last record.
    CorruptSegment when the records do not exactly fill the batch."""
    parts = []
    pos = info.header_length
    byte_pos = info.base_byte_pos
    for i in range(info.count):
        if pos + _REC_HEADER > info.length:
            raise CorruptSegment("record overruns its batch", position=info.position)
        offset, ts, hlen, plen = _REC_FIELDS.unpack_from(batch, pos)
        if offset != info.base_offset + i:
            raise CorruptSegment("record offset does not match its batch", position=info.position)
        size = _REC_HEADER + hlen + plen
        parts.append(INDEX_ENTRY.pack(info.position + pos, size, byte_pos, ts))
        byte_pos += 8 + plen
        pos += size
    if pos != info.length:
        raise CorruptSegment("records do not fill their batch", position=info.position)
    time_entry = TIME_ENTRY.pack(info.max_timestamp, info.position, info.base_offset - segment_base, info.count)
    return b"".join(parts), time_entry, byte_pos


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


def open_sealed(seg: Segment) -> None:
    """Open a sealed segment; rebuild its indexes when their shape is wrong.
    Raises CorruptSegment (files left open; the caller quarantines)."""
    seg.sealed = True
    seg.open_files(writable=False)
    seg.load_tables(mapped=True)
    if not _sealed_shape_ok(seg):
        log.warning("rebuilding the indexes of segment %s", seg.path(LOG_SUFFIX))
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
            raise CorruptSegment(
                f"sealed segment is damaged: {scan.reason or 'empty'}", position=scan.stop,
            )  # fmt: skip
        seg.index.close()
        seg.times.close()
        seg.index = EntryTable(INDEX_ENTRY, index)
        seg.times = EntryTable(TIME_ENTRY, times)
        seg.rewrite_tables()
        seg.load_tables(mapped=True)
        seg.reset_verified(True)
    else:
        seg.reset_verified(False)
    seg.compute_end_byte()


# -- the active segment ----------------------------------------------------------
def _covered(seg: Segment, k: int, rel: int, info: BatchInfo) -> bool:
    """Do the stored index entries agree with batch number ``k`` as walked?"""
    index, times = seg.index, seg.times
    if k >= times.count or rel + info.count > index.count:
        return False
    if times.get(k) != (info.max_timestamp, info.position, rel, info.count):
        return False
    first, last = index.get(rel), index.get(rel + info.count - 1)
    return (
        first[I_POS] == info.records_start
        and first[I_BYTE] == info.base_byte_pos
        and last[I_POS] + last[I_LEN] == info.end
    )


def recover_active(seg: Segment, max_producers: int) -> tuple[dict[str, int], int]:
    """Open the active segment: walk its batches, truncate a torn tail, bring
    its indexes in line. Returns the producer-dedup table replayed from the batch
    headers and the number of bytes cut off the tail."""
    seg.open_files(writable=True)
    seg.load_tables(mapped=False)
    producers: dict[str, int] = {}
    scan = BatchScan(seg.fd, seg.size)
    k = rel = 0
    trusting, changed = True, False
    for info, view in scan:
        if info.base_offset != seg.base_offset + rel:
            scan.cut(info.position, "batch offsets are not contiguous")
            break
        try:
            entries = decode_producers(view, 0, info) if info.producer_count else ()
            rebuilt = None if trusting and _covered(seg, k, rel, info) else batch_entries(view, info, seg.base_offset)
        except CorruptSegment as exc:
            scan.cut(info.position, exc.message)
            break
        if rebuilt is not None:
            if trusting:  # first disagreement: drop the stored entries from here on
                seg.index.truncate(rel)
                seg.times.truncate(k)
                trusting, changed = False, True
            seg.index.extend(rebuilt[0])
            seg.times.extend(rebuilt[1])
        for pid, seq in entries:
            producers.pop(pid, None)
            producers[pid] = seq
        k += 1
        rel += info.count
    tables_exact = len(seg.index.buf) == seg.index.nbytes and len(seg.times.buf) == seg.times.nbytes
    if seg.index.count != rel or seg.times.count != k or not tables_exact:
        seg.index.truncate(rel)
        seg.times.truncate(k)
        changed = True
    torn = seg.size - scan.stop
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
