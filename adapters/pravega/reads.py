"""Reading a partition as a Pravega segment: a byte stream of event frames.

Theory of operation
-------------------
A Pravega segment is bytes, and every offset a client holds (read
positions, stream cuts, reader-group positions) is a byte offset into it
(pravega.md section 6). Ferry stores messages, not frames, but the log keeps
each record's position in that byte view: record *i* covers ``8 +
payload_length`` bytes, the frame ``[type 0: i32][length: i32][payload]``
(docs/storage.md "Byte positions"). So a read at any byte offset is:

1. the record whose frame covers the offset (``offset_for_byte_pos``) and
   where that frame starts (``byte_pos_of``);
2. frames synthesised from the stored records from there (payload only: a
   Pravega event has no headers), the first one cut where the offset falls
   inside it -- a reply may cut an event anywhere and the client reassembles
   (pravega.md section 6);
3. at most ``MAX_READ`` bytes, the upstream server's clamp (section 7), and
   never past the durable end (:func:`durable_end`).

The same arithmetic serves byte streams (``create_byte_stream``), whose
writes are raw bytes with no frame: each write is stored as one record and
the raw view drops the 8 bytes per record (:func:`read_raw`). Pure: core
partition objects in, bytes out; no I/O besides the partition's own reads.
"""

from __future__ import annotations

import struct

from core.compiled import load
from core.log.partition import Partition

# The compiled twin of the record loop of _frames (adapters/pravega/_speedups.c;
# None: the Python loop runs, same bytes; docs/internals.md "Compiled loops").
_compiled = load("adapters.pravega._speedups")

MAX_READ = 2 * 1024 * 1024  # upstream clamps reads to 2 MiB (pravega.md section 7)
MIN_READ = 8  # ... and to at least one frame header
_RECORDS_PER_READ = 4096  # records fetched per core read while filling one reply
_FRAME = struct.Struct(">ii")
_LENGTHS = struct.Struct("<II")  # core.record: headers_length, payload_length at byte 48
_PAYLOAD_AT = 64  # core.record: the payload follows the 64-byte header


def clamp(suggested: int) -> int:
    """The number of bytes one SegmentRead carries at most for ``suggested``."""
    return min(max(suggested, MIN_READ), MAX_READ)


def _frames(part: Partition, offset: int, need: int, framed: bool) -> list:
    """Pieces whose concatenation is the view from record ``offset`` on, at least
    ``need`` bytes of it when the partition holds them: for each record an 8-byte frame
    header (``framed``) and its payload (views into the stored bytes in the Python loop;
    one bytes object per core read from the compiled twin)."""
    pieces: list = []
    got = 0
    while got < need:
        batch = part.read(offset, _RECORDS_PER_READ, max_bytes=need - got + _PAYLOAD_AT * 64)
        if not batch.sizes:
            break
        if _compiled is not None:
            data, n = _compiled.frames(batch.chunks, need - got, framed)
            pieces.append(data)
            got += n
        else:
            got += _frames_python(batch.chunks, need - got, framed, pieces)
        offset = batch.next_offset
    return pieces


def _frames_python(chunks, need: int, framed: bool, pieces: list) -> int:
    """The Python twin of ``_speedups.frames``: appends the pieces of the view of the
    records in ``chunks`` until at least ``need`` bytes; returns how many bytes."""
    frame, lengths = _FRAME.pack, _LENGTHS.unpack_from
    per_record = 8 if framed else 0
    got = 0
    for chunk in chunks:  # whole records back to back: 64-byte header, payload, headers
        view = memoryview(chunk)
        pos, end = 0, len(view)
        while pos < end and got < need:
            hlen, plen = lengths(view, pos + 48)
            if framed:
                pieces.append(frame(0, plen))
            pieces.append(view[pos + _PAYLOAD_AT: pos + _PAYLOAD_AT + plen])
            got += per_record + plen
            pos += _PAYLOAD_AT + plen + hlen
        if got >= need:
            break
    return got


def _cut(pieces: list, skip: int, length: int) -> bytes:
    data = b"".join(pieces)  # the one copy out of the stored bytes
    return data if skip == 0 and len(data) <= length else data[skip: skip + length]


def read_events(part: Partition, pos: int, length: int) -> bytes:
    """Up to ``length`` bytes of the event-frame view of ``part`` from byte ``pos``
    (``byte_start <= pos <= byte_end``; fewer bytes at the tail)."""
    offset = part.offset_for_byte_pos(pos)
    skip = pos - part.byte_pos_of(offset)
    return _cut(_frames(part, offset, skip + length, True), skip, length)


def events_started(part: Partition, pos: int, n: int) -> int:
    """How many events' frames start in bytes ``pos .. pos + n`` of the event view: the
    events a read of those bytes delivers (a frame cut at either end counts where it
    starts), for the listener's ``messages_out``. Two index lookups, no walk."""
    if n <= 0:
        return 0
    first = part.offset_for_byte_pos(pos)
    begin = first if part.byte_pos_of(first) == pos else first + 1
    return max(0, part.offset_for_byte_pos(pos + n - 1) - begin + 1)


def raw_pos_of(part: Partition, offset: int) -> int:
    """Byte-stream position where record ``offset`` starts: its frame position
    minus 8 per record before it (records are dense from offset 0)."""
    return part.byte_pos_of(offset) - 8 * offset


def raw_end(part: Partition) -> int:
    """Length of a byte stream stored as one record per write."""
    return part.byte_end - 8 * part.next_offset


def durable_end(part: Partition, raw: bool) -> int:
    """Where a reader's view of the segment ends: after its durable prefix only
    (``Partition.durable``, core/log/durable.py), in the raw view of a byte stream (8
    bytes less per record) or the event view. Upstream serves only what its durable
    log holds (protocols/pravega.md section 5.4), so a position a reader was given is
    never past the end a crash leaves; pending appends are the writer's business."""
    end = part.durable
    return end.byte_end - 8 * end.offset if raw else end.byte_end


def raw_start(part: Partition) -> int:
    return part.byte_start - 8 * part.first_offset


def raw_offset_for(part: Partition, pos: int) -> int:
    """The record holding raw byte ``pos`` (``next_offset`` at the end)."""
    lo, hi = part.first_offset, part.next_offset
    while lo < hi:  # the last record whose raw start is <= pos
        mid = (lo + hi + 1) // 2
        if raw_pos_of(part, mid) <= pos:
            lo = mid
        else:
            hi = mid - 1
    return lo


def read_raw(part: Partition, pos: int, length: int) -> bytes:
    """Up to ``length`` bytes of the raw (byte-stream) view from ``pos``."""
    offset = raw_offset_for(part, pos)
    if offset >= part.next_offset:
        return b""
    skip = pos - raw_pos_of(part, offset)
    return _cut(_frames(part, offset, skip + length, False), skip, length)


__all__ = ["MAX_READ", "clamp", "durable_end", "raw_end", "raw_offset_for", "raw_pos_of", "raw_start", "read_events",
           "read_raw"]
