"""The stored record: one canonical message as it lies in a segment file.

Theory of operation
-------------------
A record is the 64-byte message header of the Iggy 0.7/0.8 generation
(../shared/protocols/iggy-middle.md section 7.1), then the payload, then the
user headers as a TLV block with key kinds (section 7.2), with the XXH3-64
checksum of bytes 8..end (section 8). Choosing that exact layout means a poll
from that generation is answered by slicing stored bytes, and every other
dialect re-frames from the same fields without re-parsing headers.

    offset size field
         0    8 checksum          XXH3-64 (seed 0) of bytes 8..end
         8   16 id                u128 little-endian
        24    8 offset            partition offset, from 0
        32    8 timestamp         append time, microseconds since the epoch
        40    8 origin_timestamp  producer's clock, microseconds
        48    4 headers_length    H
        52    4 payload_length    P
        56    8 reserved          always 0 (the 0.8 client rejects anything else)
        64    P payload
      64+P    H user headers      core.message.Headers.encode()

This module is pure: bytes in, bytes out, no I/O.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import xxhash

from .errors import CorruptSegment, InvalidArgument, PayloadTooLarge

RECORD_HEADER = struct.Struct("<QQQQQQIIQ")
RECORD_HEADER_SIZE = RECORD_HEADER.size  # 64

# The header after its checksum field: packed straight, not packed whole and
# sliced (a slice is one more allocation per record on the append path).
_HEAD_AFTER_CHECKSUM = struct.Struct("<QQQQQIIQ")
# Per-field structs used to patch or peek at one field without a full unpack.
_U64 = struct.Struct("<Q")
_LENGTHS = struct.Struct("<II")  # headers_length, payload_length at byte 48

# A single payload above 64 MiB is refused: Iggy's default max batch is far
# below that, NATS' max_payload defaults to 1 MiB, and one record must fit in
# one segment write. Adapters enforce their own smaller limits first.
MAX_PAYLOAD = 64 * 1024 * 1024

_U64_MASK = (1 << 64) - 1
_U128_LIMIT = 1 << 128
_xxh3 = xxhash.xxh3_64_intdigest
_xxh3_stream = xxhash.xxh3_64


@dataclass(frozen=True, slots=True)
class RecordView:
    """The fields of one stored record; ``payload``/``headers`` are memoryviews
    into the buffer they were parsed from (copy at the edge if they must outlive it)."""

    checksum: int
    id: int
    offset: int
    timestamp: int
    origin_timestamp: int
    payload: memoryview
    headers: memoryview
    size: int


def encode_record(
    id: int, offset: int, timestamp: int, origin_timestamp: int, headers: bytes, payload: bytes
) -> bytes:
    """Return the stored bytes of one record, checksum included.

    Raises PayloadTooLarge, or InvalidArgument when a field does not fit its
    slot (id outside u128, offset or a timestamp outside u64)."""
    if len(payload) > MAX_PAYLOAD:
        raise PayloadTooLarge(f"payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    if not 0 <= id < _U128_LIMIT:
        raise InvalidArgument(f"message id {id} is not a u128")
    try:
        head = _HEAD_AFTER_CHECKSUM.pack(
            id & _U64_MASK, id >> 64, offset, timestamp, origin_timestamp, len(headers), len(payload), 0,
        )  # fmt: skip
    except struct.error as exc:  # negative or > u64 offset/timestamp
        raise InvalidArgument(f"record field out of range: {exc}") from exc
    # Hash the parts as they are and join once: the payload is copied a single
    # time (STYLE.md section 7), not once into a body and again behind the checksum.
    digest = _xxh3_stream(head)
    digest.update(payload)
    digest.update(headers)
    return b"".join((_U64.pack(digest.intdigest()), head, payload, headers))


def record_size(view: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """Total size of the record starting at ``pos``; CorruptSegment when fewer
    than the 64 header bytes are there."""
    if pos < 0:
        raise InvalidArgument(f"negative record position {pos}")
    if len(view) - pos < RECORD_HEADER_SIZE:
        raise CorruptSegment("record header truncated", position=pos)
    h, p = _LENGTHS.unpack_from(view, pos + 48)
    return RECORD_HEADER_SIZE + h + p


def parse_record(view: bytes | bytearray | memoryview, pos: int = 0, *, verify: bool = True) -> RecordView:
    """Parse the record at ``pos``. Raises :class:`CorruptSegment` when it is
    truncated or its checksum does not match (with ``verify``)."""
    if pos < 0:  # unpack_from would count a negative position from the end
        raise InvalidArgument(f"negative record position {pos}")
    size = len(view)
    if size - pos < RECORD_HEADER_SIZE:
        raise CorruptSegment("record header truncated", position=pos)
    csum, id_lo, id_hi, offset, ts, origin, hlen, plen, _reserved = RECORD_HEADER.unpack_from(view, pos)
    end = pos + RECORD_HEADER_SIZE + plen + hlen
    if end > size:
        raise CorruptSegment("record body truncated", position=pos)
    # The views are made only once the record is known good: a view kept alive by
    # an exception's traceback would stop the caller from resizing a bytearray.
    mv = memoryview(view)
    if verify:
        with mv[pos + 8 : end] as checked:
            ok = _xxh3(checked) == csum
        if not ok:
            mv.release()
            raise CorruptSegment("record checksum mismatch", position=pos, offset=offset)
    pstart = pos + RECORD_HEADER_SIZE
    return RecordView(
        checksum=csum,
        id=id_lo | (id_hi << 64),
        offset=offset,
        timestamp=ts,
        origin_timestamp=origin,
        payload=mv[pstart : pstart + plen],
        headers=mv[pstart + plen : end],
        size=end - pos,
    )


def record_checksum_ok(view: bytes | bytearray | memoryview, pos: int = 0) -> bool:
    """True when the record at ``pos`` is complete and its checksum matches."""
    try:
        parse_record(view, pos)
    except CorruptSegment:
        return False
    return True
