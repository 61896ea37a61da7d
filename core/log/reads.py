"""The read side of a partition: reads by offset and the three lookups.

A mixin over :class:`core.log.partition.Partition`'s state (its ``_segments``,
pending ``_calls``, ``_next_offset`` and ``_byte_end``), kept apart so each
module stays small. Records come from sealed segments, then the active one,
then the pending calls not yet written, in offset order; a read never spans a
gap left by a quarantined segment (it stops there, or starts after it).
"""

from __future__ import annotations

import logging
import struct
import sys
from bisect import bisect_left, bisect_right
from operator import attrgetter
from pathlib import Path

from ..errors import CorruptSegment, InvalidArgument, InvalidOffset, StorageError
from .config import LogConfig
from .index import I_BYTE, I_TS, T_MAXTS
from .pending import PendingCall
from .readbatch import ReadBatch
from .recovery import rebuild_indexes
from .salvage import lost_ranges, salvage
from .segment import LOG_SUFFIX, Segment

log = logging.getLogger("ferry.log")

QUARANTINE_DIR = "quarantine"
_UNLIMITED = sys.maxsize
_PAYLOAD_LEN = struct.Struct("<I")  # core.record payload_length, at byte 52
_PAYLOAD_LEN_AT = 52
_BASE = attrgetter("base_offset")
_START_BYTE = attrgetter("start_byte")
_BYTE_POS = attrgetter("byte_pos")
_TIMESTAMP = attrgetter("timestamp")


def _max_ts(seg: Segment) -> int:
    return seg.times.last()[T_MAXTS]


def _event_bytes(record: bytes) -> int:
    """Bytes a record occupies in the Pravega view: an 8-byte frame + payload."""
    return 8 + _PAYLOAD_LEN.unpack_from(record, _PAYLOAD_LEN_AT)[0]


def _read_block(call: PendingCall, skip: int, count: int, budget: int, chunks: list, sizes: list) -> tuple[int, int]:
    """Take records of an encoded call (from its record ``skip``) as one chunk,
    within ``count`` and ``budget`` (always one record when ``sizes`` is still
    empty, as ``read`` promises). Returns what is left of ``count`` (0 when the
    budget stopped it) and of ``budget``."""
    call_sizes = call.sizes
    start = stop = sum(call_sizes[:skip])
    taken, full = 0, False
    for size in call_sizes[skip : skip + count]:
        if size > budget and sizes:
            full = True
            break
        sizes.append(size)
        stop += size
        budget -= size
        taken += 1
    if taken:
        chunks.append(memoryview(call.records[0])[start:stop])
    return (0 if full else count - taken), budget


class PartitionReads:
    """Reads and lookups; see the module docstring."""

    partition_id: int
    path: Path
    _segments: list[Segment]
    _calls: list[PendingCall]
    _next_offset: int
    _byte_end: int
    cfg: LogConfig
    salvaged: int  # damaged segments taken out of service (tests, metrics)

    # -- bounds --------------------------------------------------------------
    @property
    def next_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._next_offset

    def _oldest_segment(self) -> Segment | None:
        """The first segment holding records; None when all are empty (a fresh
        or purged partition, or one whose records are all still pending)."""
        return next((seg for seg in self._segments if seg.index.count), None)

    @property
    def first_offset(self) -> int:
        """Oldest offset still held (== next_offset when the partition is empty)."""
        seg = self._oldest_segment()
        if seg is not None:
            return seg.base_offset
        return self._calls[0].base_offset if self._calls else self._next_offset

    @property
    def last_offset(self) -> int | None:
        """Newest offset held, None when the partition is empty."""
        return self._next_offset - 1 if self._next_offset > self.first_offset else None

    @property
    def byte_start(self) -> int:
        """Pravega byte position of the oldest record still held."""
        seg = self._oldest_segment()
        if seg is not None:
            return seg.start_byte
        return self._calls[0].byte_pos if self._calls else self._byte_end

    @property
    def byte_end(self) -> int:
        """Length of the Pravega byte view: each record counts 8 + payload bytes."""
        return self._byte_end

    # -- reads ---------------------------------------------------------------
    def read(self, offset: int, count: int, max_bytes: int | None = None) -> ReadBatch:
        """Up to ``count`` records from ``offset`` (raised to ``first_offset`` when
        below it), and at most ``max_bytes`` of record bytes, but always at least
        one record when any is there, as Kafka's fetch.max.bytes does, so a large
        record cannot stall a consumer. An offset at or past the end gives an empty
        batch. Pending (not yet durable) records are included.

        Raises InvalidOffset (negative offset), InvalidArgument (negative count or
        max_bytes), CorruptSegment (a sealed segment failed its CRC: it is
        quarantined, later reads skip it), StorageError (the disk failed)."""
        if offset < 0:
            raise InvalidOffset(f"offset {offset} is negative", offset=offset)
        if count < 0:
            raise InvalidArgument(f"count {count} is negative")
        budget = _UNLIMITED if max_bytes is None else max_bytes
        if budget < 0:
            raise InvalidArgument(f"max_bytes {max_bytes} is negative")
        off = max(offset, self.first_offset)
        batch = ReadBatch(self.partition_id, off)
        if count == 0 or off >= self._next_offset:
            return batch
        segs = self._segments
        i = max(bisect_right(segs, off, key=_BASE) - 1, 0)
        while i < len(segs) and count:
            seg = segs[i]
            if off < seg.base_offset:
                if batch.sizes:
                    return batch  # a gap: the batch must stay contiguous
                off = batch.first_offset = seg.base_offset
            if off < seg.next_offset:
                chunks, sizes = self._read_segment(seg, off, count, budget, need_one=not batch.sizes)
                batch.chunks += chunks
                batch.sizes += sizes
                off += len(sizes)
                count -= len(sizes)
                budget -= sum(sizes)
                if off < seg.next_offset:
                    return batch  # count or byte budget reached inside this segment
            i += 1
        if count and self._calls:
            self._read_pending(batch, off, count, budget)
        return batch

    def _read_segment(self, seg: Segment, off: int, count: int, budget: int, need_one: bool):
        try:
            try:
                return seg.read(off - seg.base_offset, count, budget, need_one)
            except CorruptSegment as exc:
                if not (seg.sealed and self._rebuild_indexes(seg, exc)):
                    raise
            return seg.read(off - seg.base_offset, count, budget, need_one)  # the log was fine
        except CorruptSegment as exc:
            self._replace_damaged(seg, exc)
            raise
        except OSError as exc:
            raise StorageError(f"reading {seg.path(LOG_SUFFIX)} failed: {exc}", errno=exc.errno) from exc

    def _rebuild_indexes(self, seg: Segment, exc: CorruptSegment) -> bool:
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

    def _read_pending(self, batch: ReadBatch, off: int, count: int, budget: int) -> None:
        calls = self._calls
        if off < calls[0].base_offset:
            if batch.sizes:
                return
            off = batch.first_offset = calls[0].base_offset
        ci = bisect_right(calls, off, key=_BASE) - 1
        skip = off - calls[ci].base_offset
        chunks, sizes = batch.chunks, batch.sizes
        for k in range(ci, len(calls)):
            call = calls[k]
            if call.sizes is not None:  # an encoded block: one view over the records taken
                count, budget = _read_block(call, skip, count, budget, chunks, sizes)
                if not count:
                    return
                skip = 0
                continue
            for record in call.records[skip:] if skip else call.records:
                size = len(record)
                if not count or (size > budget and sizes):
                    return
                chunks.append(record)
                sizes.append(size)
                count -= 1
                budget -= size
            skip = 0

    def _replace_damaged(self, seg: Segment, exc: BaseException) -> None:
        """Take a sealed segment whose log failed its checks out of service for
        good, keeping its good batches as segments of their own (salvage.py)."""
        if not seg.sealed or seg not in self._segments:  # the active one is checked at open
            return
        i = self._segments.index(seg)
        self._segments[i : i + 1] = self._salvage(seg, exc, seg.next_offset)[0]

    def _salvage(
        self, seg: Segment, exc: BaseException, seg_next: int
    ) -> tuple[list[Segment], list[tuple[str, int, int]]]:
        """Quarantine ``seg``; return the segments its good runs became (maybe
        none) and the dedup entries those carry, in file order. Logs what was
        lost; a disk error leaves the segment out of service."""
        qdir = self.path / QUARANTINE_DIR
        try:
            kept, found, moved = salvage(seg, qdir, self.cfg.fsyncs)
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
        self.salvaged += 1
        return kept, found.producers

    # -- lookups ---------------------------------------------------------------
    def _filled_segments(self) -> list[Segment]:
        segs = self._segments
        return segs if segs and segs[-1].index.count else segs[:-1]

    def offset_for_timestamp(self, ts_us: int) -> int:
        """First offset whose append time is >= ``ts_us`` (timestamps never
        decrease within a partition); ``next_offset`` when there is none."""
        segs = self._filled_segments()
        i = bisect_left(segs, ts_us, key=_max_ts)
        if i < len(segs):
            seg = segs[i]
            k = seg.times.bisect_left(T_MAXTS, ts_us)  # the first batch reaching ts_us
            _max, _pos, first, cnt = seg.times.get(k)
            return seg.base_offset + seg.index.bisect_left(I_TS, ts_us, first, first + cnt)
        calls = self._calls
        j = bisect_left(calls, ts_us, key=_TIMESTAMP)
        return calls[j].base_offset if j < len(calls) else self._next_offset

    def offset_for_byte_pos(self, pos: int) -> int:
        """The offset of the record whose Pravega event covers byte ``pos``
        (``next_offset`` for ``pos == byte_end``). InvalidOffset outside
        ``byte_start..byte_end`` (truncated by retention, or not written yet)."""
        start, end = self.byte_start, self._byte_end
        if not start <= pos <= end:
            raise InvalidOffset(f"byte position {pos} is outside {start}..{end}", position=pos)
        if pos == end:
            return self._next_offset
        segs = self._filled_segments()
        i = bisect_right(segs, pos, key=_START_BYTE) - 1
        if i >= 0 and pos < segs[i].end_byte:
            seg = segs[i]
            return seg.base_offset + seg.index.bisect_right(I_BYTE, pos) - 1
        if i + 1 < len(segs):  # inside a quarantined gap: the next record held
            return segs[i + 1].base_offset
        calls = self._calls
        if not calls:
            return self._next_offset
        call = calls[max(bisect_right(calls, pos, key=_BYTE_POS) - 1, 0)]
        if pos < call.byte_pos:
            return call.base_offset
        byte = call.byte_pos
        for n, record in enumerate(call.record_list()):
            byte += _event_bytes(record)
            if pos < byte:
                return call.base_offset + n
        return call.base_offset + call.count  # unreachable while byte_end is consistent

    def byte_pos_of(self, offset: int) -> int:
        """Pravega byte position where record ``offset`` starts (``byte_end`` for
        ``next_offset``). InvalidOffset outside ``first_offset..next_offset``."""
        if offset == self._next_offset:
            return self._byte_end
        first = self.first_offset
        if not first <= offset < self._next_offset:
            raise InvalidOffset(f"offset {offset} is outside {first}..{self._next_offset}", offset=offset)
        segs = self._segments
        i = bisect_right(segs, offset, key=_BASE) - 1
        if i >= 0 and offset < segs[i].next_offset:
            seg = segs[i]
            return seg.index.get(offset - seg.base_offset)[I_BYTE]
        calls = self._calls
        j = bisect_right(calls, offset, key=_BASE) - 1
        if j < 0 or offset >= calls[j].base_offset + calls[j].count:
            raise InvalidOffset(f"offset {offset} was in a quarantined segment", offset=offset)
        call = calls[j]
        byte = call.byte_pos
        for record in call.record_list()[: offset - call.base_offset]:
            byte += _event_bytes(record)
        return byte

    def segment_positions(self) -> list[tuple[int, int, int]]:
        """``(base_offset, records, file bytes)`` of each segment (diagnostics, CLI)."""
        return [(s.base_offset, s.index.count, s.size) for s in self._segments]


__all__ = ["QUARANTINE_DIR", "PartitionReads"]
