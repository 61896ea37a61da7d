"""Message wire types: what SendMessages carries in each dialect.

Theory of operation
-------------------
Each dialect frames the messages of a send differently; each framing is a
field type (``WireType``) so ``SendMessages`` stays one table entry:

* :data:`MessagesV1` -- dialect 1 (iggy-py 0.4.0, protocols/iggy.md 4.7):
  messages to the end of the body, each ``u128 id, u32 H, H header bytes (seed
  map), u32 P, P payload bytes``.
* :data:`MessagesV2` -- dialect 2 (apache-iggy 0.8.0, iggy-middle.md 6.11 and
  7.1): ``u32 count``, ``count`` 16-byte index entries (``u32 0, u32 end
  position, u64 0``), then messages with the 64-byte header, payload, then
  TLV headers with key kinds. This is byte-for-byte the stored record layout
  (``core.record``), which is why dialect-2 polls are served by slicing.
* :data:`Messages56` -- dialects 4 and 5 (apache-iggy 0.6.0 and 0.5.0,
  iggy-middle.md 2 and 7.1): dialect 2's framing with the 56-byte header (no
  reserved field) and the seed-era header map after the payload. Decoded to
  :class:`WireMessage` like dialect 1: the session converts the header map.
* :data:`VsrBatch` -- dialect 3 (apache-iggy 0.9.0, iggy-current.md 6.11 and
  7): ``u32 count`` then one batch: a 256-byte batch header and frames of a
  48-byte header, payload, TLV headers; XXH3-64 checksums (section 7.3).

All three decode to a tuple of :class:`WireMessage` whose ``headers`` is the
header block *as that dialect encodes it* (seed map for dialect 1, TLV
otherwise): the codec checks framing only; the session validates and converts
headers (decoding is not validation, STYLE.md section 4).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import xxhash

from adapters.wire.types import WireType
from core.log.encoded import walk_records

from ._compiled import vsr_frames as _vsr_frames
from .errors import IggyError, IggyStatus

# Iggy's per-batch payload cap for the middle generation (iggy-middle.md 6.11:
# "payload > 64 000 000 -> 4022"); also bounds what one frame may ask us to hold.
MAX_BATCH_PAYLOAD = 64_000_000
MAX_MESSAGES_PER_BATCH = 1_000_000  # a count field larger than this is a lie or an attack

_U32 = struct.Struct("<I")
_V1_HEAD = struct.Struct("<QQI")  # id lo, id hi, headers length
_INDEX = struct.Struct("<IIQ")  # iggy-middle.md 6.11 index entry
MIDDLE_HEADER = struct.Struct("<QQQQQQIIQ")  # checksum, id lo/hi, offset, ts, origin, H, P, reserved
MIDDLE56_HEADER = struct.Struct("<QQQQQQII")  # the same without reserved (profiles 0.5/0.6)
VSR_BATCH_HEADER = struct.Struct("<QQQQQQI204x")  # partition, base off, base ts, origin, length, csum, count
VSR_FRAME_HEADER = struct.Struct("<QQQIIIIQ")  # checksum, id lo/hi, offset delta, ts delta, H, P, reserved
_U64_MASK = (1 << 64) - 1


class WireMessage(NamedTuple):
    id: int
    payload: bytes
    headers: bytes = b""  # the dialect's own header block
    origin_timestamp: int = 0


_REC_LENGTHS = struct.Struct("<48xIIQ")  # headers length, payload length, reserved of a 64-byte header


class StoredBatch:
    """The messages of a dialect 2 or 3 send, already in the stored record layout
    (``core.record``): 64-byte headers with id and origin timestamp as sent, the
    server's fields (checksum, offset, timestamp) still blank, then payload and
    TLV headers. ``Broker.append_records`` takes ``data`` as it is and stamps it
    (``core.log.encoded``), so a send never becomes per-message objects.

    It is also a sequence of :class:`WireMessage` (decoded on demand) so tests,
    the table's round trip and its encoders see the same value as before. After
    the append, ``data`` holds the stamped records (ids assigned)."""

    __slots__ = ("count", "data", "payload_bytes")

    def __init__(self, count: int, data: bytearray, payload_bytes: int) -> None:
        self.count = count
        self.data = data
        self.payload_bytes = payload_bytes

    def messages(self) -> tuple[WireMessage, ...]:
        out, pos, data = [], 0, self.data
        for _ in range(self.count):
            _c, lo, hi, _o, _t, origin, hlen, plen, _r = MIDDLE_HEADER.unpack_from(data, pos)
            body = pos + MIDDLE_HEADER.size
            out.append(WireMessage(lo | (hi << 64), bytes(data[body : body + plen]),
                                   bytes(data[body + plen : body + plen + hlen]), origin))
            pos = body + plen + hlen
        return tuple(out)

    def __len__(self) -> int:
        return self.count

    def __iter__(self):
        return iter(self.messages())

    def __getitem__(self, i):
        return self.messages()[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StoredBatch):
            return self.messages() == other.messages()
        if isinstance(other, (tuple, list)):
            return self.messages() == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # data is mutable

    def __repr__(self) -> str:
        return f"StoredBatch({self.messages()!r})"


def _owned(buf, start: int, end: int) -> bytearray:
    """A bytearray copy of ``buf[start:end]``: the one copy out of the receive buffer."""
    data = buf[start:end]
    return data if data.__class__ is bytearray else bytearray(data)


def _bad(code: IggyError, detail: str) -> IggyStatus:
    return IggyStatus(code, detail)


def _short(what: str) -> IggyStatus:
    return IggyStatus(IggyError.INVALID_COMMAND, f"{what}: frame ends early")


def _messages_strategy(with_origin: bool, min_payload: int = 1):
    from hypothesis import strategies as st

    origin = st.integers(1_700_000_000_000_000, 1_700_000_000_000_000 + 0xFFFF_FFFF) if with_origin else st.just(0)
    one = st.builds(
        WireMessage,
        st.integers(0, (1 << 128) - 1),
        st.binary(min_size=min_payload, max_size=64),
        st.binary(max_size=32),
        origin,
    )
    return st.lists(one, min_size=1, max_size=5).map(tuple)


class _MessagesV1(WireType):
    name = "messages_v1"
    rest = True

    def read(self, buf, pos, end):
        out = []
        total = 0
        while pos < end:
            if end - pos < _V1_HEAD.size:
                raise _short(self.name)
            lo, hi, hlen = _V1_HEAD.unpack_from(buf, pos)
            pos += _V1_HEAD.size
            if hlen > end - pos:
                raise _short(self.name)
            headers = bytes(buf[pos : pos + hlen])
            pos += hlen
            if end - pos < 4:
                raise _short(self.name)
            (plen,) = _U32.unpack_from(buf, pos)
            pos += 4
            if plen == 0:  # iggy.md 4.7: payload_length 0 is a decode failure
                raise _bad(IggyError.INVALID_COMMAND, "empty payload")
            if plen > end - pos:
                raise _short(self.name)
            total += plen
            out.append(WireMessage(lo | (hi << 64), bytes(buf[pos : pos + plen]), headers, 0))
            pos += plen
        return tuple(out), pos

    def write(self, out, value):
        for m in value:
            out.append(_V1_HEAD.pack(m.id & _U64_MASK, m.id >> 64, len(m.headers)))
            out.append(m.headers)
            out.append(_U32.pack(len(m.payload)))
            out.append(m.payload)

    def strategy(self):
        return _messages_strategy(False)


def _index_table(name: str, buf, pos: int, end: int) -> tuple[int, tuple[int, ...], int]:
    """The ``u32 count`` and index table that open a middle-generation send
    (iggy-middle.md 6.11): ``(count, each message's end position, where the
    messages start)``."""
    if end - pos < 4:
        raise _short(name)
    (count,) = _U32.unpack_from(buf, pos)
    pos += 4
    if count == 0:
        raise _bad(IggyError.INVALID_MESSAGES_COUNT, "no messages")
    if count > MAX_MESSAGES_PER_BATCH or count * _INDEX.size > end - pos:
        raise _short(name)
    # The index as one unpack: u32 0, u32 end position, u64 0 per entry.
    ends = struct.unpack_from(f"<{4 * count}I", buf, pos)[1::4]
    return count, ends, pos + count * _INDEX.size


def _write_indexed(out: list, value, header) -> None:
    """A middle-generation send's messages: count, index table, then each message
    as ``header(message)``, payload and header block (iggy-middle.md 6.11, 7.1)."""
    out.append(_U32.pack(len(value)))
    index, bodies, at = [], [], 0
    for m in value:
        head = header(m)
        at += len(head) + len(m.payload) + len(m.headers)
        index.append(_INDEX.pack(0, at, 0))
        bodies += (head, m.payload, m.headers)
    out.extend(index)
    out.extend(bodies)


# What core.log.encoded.walk_records reports, as _MessagesV2.read's Python loop raises it.
_WALK_PROBLEMS = {
    "short": (IggyError.TOO_SMALL_MESSAGE, "message shorter than its header"),
    "reserved": (IggyError.INVALID_RESERVED_FIELD, "reserved field is not zero"),
    "past_end": (IggyError.INVALID_MESSAGES_SIZE, "message runs past the frame"),
    "trailing": (IggyError.INVALID_MESSAGES_SIZE, "bytes after the last message"),
}


def _read_v2_compiled(buf, pos: int, end: int, count: int, ends: tuple[int, ...]):
    """The record walk of :meth:`_MessagesV2.read` done by ``walk_records`` (C):
    the same statuses for the same first fault (a record's index entry is
    checked before the next record is looked at, as in the loop)."""
    found = walk_records(buf, pos, end, count)
    if found[0] is not None:
        if found[0] != ends:
            raise _bad(IggyError.INVALID_MESSAGES_SIZE, "index does not match message sizes")
        return StoredBatch(count, _owned(buf, pos, end), found[1]), end
    _none, problem, index, before = found
    if before != ends[:index]:
        raise _bad(IggyError.INVALID_MESSAGES_SIZE, "index does not match message sizes")
    raise _bad(*_WALK_PROBLEMS[problem])


class _MessagesV2(WireType):
    name = "messages_v2"
    rest = True

    def read(self, buf, pos, end):
        """A :class:`StoredBatch`: the messages are already stored records, so
        the walk only checks the framing (one unpack per message) and copies
        the block out once."""
        count, ends, pos = _index_table(self.name, buf, pos, end)
        if walk_records is not None:  # core/_speedups.c: the same checks, in the same order
            return _read_v2_compiled(buf, pos, end, count, ends)
        base = at = pos
        lengths = _REC_LENGTHS.unpack_from
        payload = 0
        for stop_wanted in ends:
            if end - at < MIDDLE_HEADER.size:
                raise _bad(IggyError.TOO_SMALL_MESSAGE, "message shorter than its header")
            hlen, plen, reserved = lengths(buf, at)
            if reserved:  # iggy-middle.md 7.1: must be zero
                raise _bad(IggyError.INVALID_RESERVED_FIELD, "reserved field is not zero")
            at += MIDDLE_HEADER.size + plen + hlen
            if at > end:
                raise _bad(IggyError.INVALID_MESSAGES_SIZE, "message runs past the frame")
            if at - base != stop_wanted:
                raise _bad(IggyError.INVALID_MESSAGES_SIZE, "index does not match message sizes")
            payload += plen
        if at != end:
            raise _bad(IggyError.INVALID_MESSAGES_SIZE, "bytes after the last message")
        return StoredBatch(count, _owned(buf, base, end), payload), end

    def write(self, out, value):
        _write_indexed(out, value, lambda m: MIDDLE_HEADER.pack(
            0, m.id & _U64_MASK, m.id >> 64, 0, 0, m.origin_timestamp, len(m.headers), len(m.payload), 0))

    def strategy(self):
        return _messages_strategy(True, 0)


class _Messages56(WireType):
    name = "messages_56"
    rest = True

    def read(self, buf, pos, end):
        """Dialect 2's checks in the same order, on 56-byte headers (there is no
        reserved field to check)."""
        _count, ends, base = _index_table(self.name, buf, pos, end)
        at = base
        out = []
        for stop_wanted in ends:
            if end - at < MIDDLE56_HEADER.size:
                raise _bad(IggyError.TOO_SMALL_MESSAGE, "message shorter than its header")
            _c, lo, hi, _o, _t, origin, hlen, plen = MIDDLE56_HEADER.unpack_from(buf, at)
            body = at + MIDDLE56_HEADER.size
            at = body + plen + hlen
            if at > end:
                raise _bad(IggyError.INVALID_MESSAGES_SIZE, "message runs past the frame")
            if at - base != stop_wanted:
                raise _bad(IggyError.INVALID_MESSAGES_SIZE, "index does not match message sizes")
            out.append(WireMessage(lo | (hi << 64), bytes(buf[body : body + plen]),
                                   bytes(buf[body + plen : at]), origin))
        if at != end:
            raise _bad(IggyError.INVALID_MESSAGES_SIZE, "bytes after the last message")
        return tuple(out), end

    def write(self, out, value):
        _write_indexed(out, value, lambda m: MIDDLE56_HEADER.pack(
            0, m.id & _U64_MASK, m.id >> 64, 0, 0, m.origin_timestamp, len(m.headers), len(m.payload)))

    def strategy(self):
        return _messages_strategy(True, 0)


_VSR_BATCH_RESERVED = bytes(VSR_BATCH_HEADER.size - 52)  # the batch header's reserved tail: all zero
# What adapters.iggy._speedups.vsr_frames reports, as _VsrBatch.read's loop raises it.
_VSR_PROBLEMS = {
    "short": (IggyError.TOO_SMALL_MESSAGE, "frame shorter than its header"),
    "reserved": (IggyError.INVALID_RESERVED_FIELD, "frame reserved field is not zero"),
    "past_end": (IggyError.INVALID_MESSAGES_SIZE, "frame runs past the batch"),
    "origin": (IggyError.INVALID_COMMAND, "origin timestamp plus frame delta overflows u64"),
    "trailing": (IggyError.INVALID_MESSAGES_SIZE, "bytes after the last frame"),
}


class _VsrBatch(WireType):
    name = "vsr_batch"
    rest = True

    def read(self, buf, pos, end):
        """A :class:`StoredBatch`: each 48-byte frame header becomes the stored
        64-byte header (origin = batch origin + delta), payload and headers
        follow as they are (same order in both layouts); one join."""
        if end - pos < 4 + VSR_BATCH_HEADER.size:
            raise _short(self.name)
        (count,) = _U32.unpack_from(buf, pos)
        pos += 4
        _p, _b, _t, origin, length, _csum, n = VSR_BATCH_HEADER.unpack_from(buf, pos)
        if buf[pos + 52 : pos + VSR_BATCH_HEADER.size] != _VSR_BATCH_RESERVED:  # one memcmp, not 204 tests
            raise _bad(IggyError.INVALID_RESERVED_FIELD, "batch reserved bytes are not zero")
        if n != count or n == 0:
            raise _bad(IggyError.INVALID_MESSAGES_COUNT, "batch count mismatch")
        if length != end - pos:
            raise _bad(IggyError.INVALID_MESSAGES_SIZE, "batch length does not match the frame")
        pos += VSR_BATCH_HEADER.size
        if _vsr_frames is not None:  # adapters/iggy/_speedups.c: the same checks, in the same order
            out = _vsr_frames(buf, pos, end, n, origin)
            if out[0] is None:
                raise _bad(*_VSR_PROBLEMS[out[1]])
            return StoredBatch(n, out[0], out[1]), end
        frame, head = VSR_FRAME_HEADER.unpack_from, MIDDLE_HEADER.pack
        parts: list = []
        payload = 0
        view = memoryview(buf)
        try:
            for _ in range(n):
                if end - pos < VSR_FRAME_HEADER.size:
                    raise _bad(IggyError.TOO_SMALL_MESSAGE, "frame shorter than its header")
                _c, lo, hi, _od, tdelta, hlen, plen, reserved = frame(buf, pos)
                if reserved:
                    raise _bad(IggyError.INVALID_RESERVED_FIELD, "frame reserved field is not zero")
                body = pos + VSR_FRAME_HEADER.size
                stop = body + plen + hlen
                if stop > end:
                    raise _bad(IggyError.INVALID_MESSAGES_SIZE, "frame runs past the batch")
                if origin + tdelta > _U64_MASK:
                    raise _bad(*_VSR_PROBLEMS["origin"])
                parts.append(head(0, lo, hi, 0, 0, origin + tdelta, hlen, plen, 0))
                parts.append(view[body:stop])
                payload += plen
                pos = stop
            if pos != end:
                raise _bad(IggyError.INVALID_MESSAGES_SIZE, "bytes after the last frame")
            data = bytearray().join(parts)
        finally:  # no view may outlive the call: the receive buffer must stay resizable
            parts.clear()
            view.release()
        return StoredBatch(n, data, payload), pos

    def write(self, out, value):
        out.append(_U32.pack(len(value)))
        origin = min(m.origin_timestamp for m in value)
        out.append(encode_vsr_batch(0, 0, 0, origin, [
            (m.id, i, m.origin_timestamp - origin, m.payload, m.headers) for i, m in enumerate(value)
        ]))

    def strategy(self):
        return _messages_strategy(True, 0)


def encode_vsr_batch(partition_id: int, base_offset: int, base_timestamp: int, origin: int, frames) -> bytes:
    """One VSR batch record (iggy-current.md 7.1-7.3) from
    ``(id, offset_delta, timestamp_delta, payload, headers)`` tuples."""
    parts: list[bytes] = []
    sums: list[bytes] = []
    total = VSR_BATCH_HEADER.size
    for mid, odelta, tdelta, payload, headers in frames:
        head = VSR_FRAME_HEADER.pack(0, mid & _U64_MASK, mid >> 64, odelta, tdelta, len(headers), len(payload), 0)
        h = xxhash.xxh3_64(head[8:])
        h.update(payload)
        h.update(headers)
        csum = struct.pack("<Q", h.intdigest())
        sums.append(csum)
        parts += (csum, head[8:], payload, headers)
        total += len(head) + len(payload) + len(headers)
    bh = xxhash.xxh3_64(struct.pack("<QQQQQI", partition_id, base_offset, base_timestamp, origin, total, len(sums)))
    for s in sums:
        bh.update(s)
    header = VSR_BATCH_HEADER.pack(partition_id, base_offset, base_timestamp, origin, total,
                                   bh.intdigest(), len(sums))
    return header + b"".join(parts)


MessagesV1 = _MessagesV1()
MessagesV2 = _MessagesV2()
Messages56 = _Messages56()
VsrBatch = _VsrBatch()

__all__ = ["MIDDLE56_HEADER", "Messages56", "MessagesV1", "MessagesV2", "StoredBatch", "VsrBatch", "WireMessage",
           "encode_vsr_batch"]
