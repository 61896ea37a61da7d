"""The read side of a partition: reads by offset and the three lookups.

Functions over what a partition holds, given explicitly: its ``segments``
(sealed, then the active one), its pending ``calls`` (appended, not yet
written), and its ``next_offset`` and ``byte_end``. They change nothing;
:class:`core.log.partition.Partition` calls them from its read methods and
hands :func:`read` the one thing that may change the segments, its
``read_segment`` (which repairs or quarantines a damaged segment and raises).
Records come from sealed segments, then the active one, then the pending
calls, in offset order; a read never spans a gap left by a quarantined segment
(it stops there, or starts after it).
"""

from __future__ import annotations

import struct
import sys
from bisect import bisect_left, bisect_right
from operator import attrgetter
from typing import Callable

from ..errors import InvalidArgument, InvalidOffset
from .index import I_BYTE, I_TS, T_MAXTS
from .pending import PendingCall
from .readbatch import ReadBatch
from .segment import Segment

_UNLIMITED = sys.maxsize
_PAYLOAD_LEN = struct.Struct("<I")  # core.record payload_length, at byte 52
_PAYLOAD_LEN_AT = 52
_BASE = attrgetter("base_offset")
_START_BYTE = attrgetter("start_byte")
_BYTE_POS = attrgetter("byte_pos")
_TIMESTAMP = attrgetter("timestamp")

# ``read_segment(seg, off, count, budget, need_one)``: Segment.read with the
# partition's damage handling around it; returns (chunks, sizes).
ReadSegment = Callable[[Segment, int, int, int, bool], tuple[list, list]]


def _max_ts(seg: Segment) -> int:
    return seg.times.last()[T_MAXTS]


def _event_bytes(record: bytes) -> int:
    """Bytes a record occupies in the Pravega view: an 8-byte frame + payload."""
    return 8 + _PAYLOAD_LEN.unpack_from(record, _PAYLOAD_LEN_AT)[0]


# -- bounds ------------------------------------------------------------------------
def oldest_segment(segments: list[Segment]) -> Segment | None:
    """The first segment holding records; None when all are empty (a fresh
    or purged partition, or one whose records are all still pending)."""
    return next((seg for seg in segments if seg.index.count), None)


def first_offset(segments: list[Segment], calls: list[PendingCall], next_offset: int) -> int:
    """Oldest offset still held (== ``next_offset`` when the partition is empty)."""
    seg = oldest_segment(segments)
    if seg is not None:
        return seg.base_offset
    return calls[0].base_offset if calls else next_offset


def byte_start(segments: list[Segment], calls: list[PendingCall], byte_end: int) -> int:
    """Pravega byte position of the oldest record still held."""
    seg = oldest_segment(segments)
    if seg is not None:
        return seg.start_byte
    return calls[0].byte_pos if calls else byte_end


# -- reads ---------------------------------------------------------------------------
def read(
    segments: list[Segment], calls: list[PendingCall], first: int, next_offset: int, partition_id: int,
    read_segment: ReadSegment, offset: int, count: int, max_bytes: int | None,
) -> ReadBatch:  # fmt: skip
    """``Partition.read``: up to ``count`` records from ``offset`` (raised to
    ``first``, the first offset held, when below it), and at most ``max_bytes``
    of record bytes, but always at least one record when any is there, as
    Kafka's fetch.max.bytes does, so a large record cannot stall a consumer. An
    offset at or past the end gives an empty batch. Pending (not yet durable)
    records are included.

    Raises InvalidOffset (negative offset), InvalidArgument (negative count or
    max_bytes), and what ``read_segment`` raises."""
    if offset < 0:
        raise InvalidOffset(f"offset {offset} is negative", offset=offset)
    if count < 0:
        raise InvalidArgument(f"count {count} is negative")
    budget = _UNLIMITED if max_bytes is None else max_bytes
    if budget < 0:
        raise InvalidArgument(f"max_bytes {max_bytes} is negative")
    off = max(offset, first)
    batch = ReadBatch(partition_id, off)
    if count == 0 or off >= next_offset:
        return batch
    segs = segments
    i = max(bisect_right(segs, off, key=_BASE) - 1, 0)
    while i < len(segs) and count:
        seg = segs[i]
        if off < seg.base_offset:
            if batch.sizes:
                return batch  # a gap: the batch must stay contiguous
            off = batch.first_offset = seg.base_offset
        if off < seg.next_offset:
            chunks, sizes = read_segment(seg, off, count, budget, not batch.sizes)
            batch.chunks += chunks
            batch.sizes += sizes
            off += len(sizes)
            count -= len(sizes)
            budget -= sum(sizes)
            if off < seg.next_offset:
                return batch  # count or byte budget reached inside this segment
        i += 1
    if count and calls:
        _read_pending(calls, batch, off, count, budget)
    return batch


def _read_pending(calls: list[PendingCall], batch: ReadBatch, off: int, count: int, budget: int) -> None:
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


# -- lookups ---------------------------------------------------------------------------
def _filled_segments(segs: list[Segment]) -> list[Segment]:
    return segs if segs and segs[-1].index.count else segs[:-1]


def offset_for_timestamp(segments: list[Segment], calls: list[PendingCall], next_offset: int, ts_us: int) -> int:
    """First offset whose append time is >= ``ts_us`` (timestamps never
    decrease within a partition); ``next_offset`` when there is none."""
    segs = _filled_segments(segments)
    i = bisect_left(segs, ts_us, key=_max_ts)
    if i < len(segs):
        seg = segs[i]
        k = seg.times.bisect_left(T_MAXTS, ts_us)  # the first batch reaching ts_us
        _max, _pos, first, cnt = seg.times.get(k)
        return seg.base_offset + seg.index.bisect_left(I_TS, ts_us, first, first + cnt)
    j = bisect_left(calls, ts_us, key=_TIMESTAMP)
    return calls[j].base_offset if j < len(calls) else next_offset


def offset_for_byte_pos(
    segments: list[Segment], calls: list[PendingCall], start: int, end: int, next_offset: int, pos: int
) -> int:
    """The offset of the record whose Pravega event covers byte ``pos``
    (``next_offset`` for ``pos == end``, the partition's ``byte_end``).
    InvalidOffset outside ``start..end`` (``start`` is the partition's
    ``byte_start``: below it retention truncated, past ``end`` nothing is written yet)."""
    if not start <= pos <= end:
        raise InvalidOffset(f"byte position {pos} is outside {start}..{end}", position=pos)
    if pos == end:
        return next_offset
    segs = _filled_segments(segments)
    i = bisect_right(segs, pos, key=_START_BYTE) - 1
    if i >= 0 and pos < segs[i].end_byte:
        seg = segs[i]
        return seg.base_offset + seg.index.bisect_right(I_BYTE, pos) - 1
    if i + 1 < len(segs):  # inside a quarantined gap: the next record held
        return segs[i + 1].base_offset
    if not calls:
        return next_offset
    call = calls[max(bisect_right(calls, pos, key=_BYTE_POS) - 1, 0)]
    if pos < call.byte_pos:
        return call.base_offset
    byte = call.byte_pos
    for n, record in enumerate(call.record_list()):
        byte += _event_bytes(record)
        if pos < byte:
            return call.base_offset + n
    return call.base_offset + call.count  # unreachable while byte_end is consistent


def byte_pos_of(
    segments: list[Segment], calls: list[PendingCall], first: int, next_offset: int, byte_end: int, offset: int
) -> int:
    """Pravega byte position where record ``offset`` starts (``byte_end`` for
    ``next_offset``). InvalidOffset outside ``first..next_offset`` (``first``:
    the first offset held)."""
    if offset == next_offset:
        return byte_end
    if not first <= offset < next_offset:
        raise InvalidOffset(f"offset {offset} is outside {first}..{next_offset}", offset=offset)
    segs = segments
    i = bisect_right(segs, offset, key=_BASE) - 1
    if i >= 0 and offset < segs[i].next_offset:
        seg = segs[i]
        return seg.index.get(offset - seg.base_offset)[I_BYTE]
    j = bisect_right(calls, offset, key=_BASE) - 1
    if j < 0 or offset >= calls[j].base_offset + calls[j].count:
        raise InvalidOffset(f"offset {offset} was in a quarantined segment", offset=offset)
    call = calls[j]
    byte = call.byte_pos
    for record in call.record_list()[: offset - call.base_offset]:
        byte += _event_bytes(record)
    return byte


__all__ = ["byte_pos_of", "byte_start", "first_offset", "offset_for_byte_pos", "offset_for_timestamp", "read"]
