"""Batch framing: what one group-commit write puts in a segment file.

Theory of operation
-------------------
Each flush of a partition writes exactly one batch: a 56-byte header, the
producer-dedup entries of that write, then the records back to back (each one
a ``core.record`` record, 64-byte header + payload + headers). Records are
never split or re-encoded, so a read slices them straight out of the file; the
batch header sits *between* runs of records and is simply skipped.

    offset size field
         0    4 magic            b"FRB1"
         4    4 length           u32, whole batch, header included
         8    4 crc              CRC-32 (zlib, IEEE 802.3) of bytes 12..length
        12    2 version          1
        14    2 flags            bit 0 = SNAPSHOT: the entries are the full dedup table;
                                 bit 1 = PRODUCER_TIMES: each entry ends with its write time
        16    8 base_offset      offset of the first record
        24    8 base_byte_pos    Pravega byte position of the first record
        32    8 max_timestamp    append time (µs) of the last record
        40    4 record_count     >= 1
        44    4 header_length    56 + size of the producer entries = where records start
        48    4 producer_count
        52    4 reserved         0
        56    .. producer entries: u8 id_len, id (UTF-8), i64 last sequence,
                 and with PRODUCER_TIMES an i64 last write (µs)
    header_length .. records

Producer write times (``core/log/producers.py``: idle producers expire) are
written by every batch that has entries; a batch without the flag (written
before the times existed) gives each entry its own ``max_timestamp``.

The CRC covers everything after its own field, like Kafka's record-batch CRC
(KIP-98), so a torn write, a zeroed page or a flipped bit anywhere in the batch
is caught before any record of it is served. ``base_byte_pos`` makes a
segment self-describing: its indexes can be rebuilt from the segment alone
even after retention removed every earlier one.

Pure functions only: bytes in, bytes out.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Iterable

from ..errors import CorruptSegment, InvalidArgument
from ..record import RECORD_HEADER_SIZE
from .index import INDEX_ENTRY, TIME_ENTRY

BATCH_MAGIC = b"FRB1"
BATCH_VERSION = 1
FLAG_SNAPSHOT = 0x1
FLAG_PRODUCER_TIMES = 0x2

BATCH_HEADER = struct.Struct("<4sIIHHQQQIIII")
BATCH_HEADER_SIZE = BATCH_HEADER.size  # 56
_CRC_FROM = 12  # the CRC covers bytes 12..length (everything after the CRC field)
_U32 = struct.Struct("<I")
_ID_LEN = struct.Struct("<B")
_SEQ = struct.Struct("<q")
_SEQ_TS = struct.Struct("<qq")

# A producer id is a short opaque string (a Pravega writer UUID is 36 chars, a
# NATS client name is rarely longer); one length byte keeps entries compact.
MAX_PRODUCER_ID = 255
_MIN_ENTRY = _ID_LEN.size + 1 + _SEQ.size  # a one-byte id
# offset, timestamp, headers_length, payload_length of a core.record header
_REC_FIELDS = struct.Struct("<24xQQ8xII")


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """A parsed batch header; ``position`` is where the batch starts in its segment."""

    position: int
    length: int
    crc: int
    flags: int
    base_offset: int
    base_byte_pos: int
    max_timestamp: int
    count: int
    header_length: int
    producer_count: int

    @property
    def end(self) -> int:
        return self.position + self.length

    @property
    def records_start(self) -> int:
        return self.position + self.header_length


def check_producer_id(pid: object) -> bytes:
    """The UTF-8 form of a producer id; InvalidArgument unless 1..255 bytes of text."""
    if not isinstance(pid, str):
        raise InvalidArgument(f"producer id must be a string, got {type(pid).__name__}")
    raw = pid.encode("utf-8", "surrogatepass")
    if not 1 <= len(raw) <= MAX_PRODUCER_ID:
        raise InvalidArgument(f"producer id must be 1..{MAX_PRODUCER_ID} bytes, got {len(raw)}")
    return raw


def encode_producers(entries: Iterable[tuple[str, int, int]]) -> tuple[bytes, int]:
    """The producer-entry block for ``(id, last_sequence, last_write_us)``
    entries (the layout of FLAG_PRODUCER_TIMES) and its entry count."""
    parts: list[bytes] = []
    n = 0
    for pid, seq, ts in entries:
        raw = pid.encode("utf-8", "surrogatepass")
        parts.append(_ID_LEN.pack(len(raw)))
        parts.append(raw)
        parts.append(_SEQ_TS.pack(seq, ts))
        n += 1
    return b"".join(parts), n


def batch_head(
    *, base_offset: int, base_byte_pos: int, max_timestamp: int, count: int,
    producers: bytes, producer_count: int, flags: int, records_len: int,
) -> bytes:  # fmt: skip
    """Header + producer entries with a zero CRC; :func:`seal_batch` fills it in."""
    header_length = BATCH_HEADER_SIZE + len(producers)
    length = header_length + records_len
    if length > 0xFFFFFFFF:
        raise InvalidArgument(f"batch of {length} bytes does not fit a u32 length")
    head = BATCH_HEADER.pack(
        BATCH_MAGIC, length, 0, BATCH_VERSION, flags, base_offset, base_byte_pos,
        max_timestamp, count, header_length, producer_count, 0,
    )  # fmt: skip
    return head + producers if producers else head


def seal_batch(head: bytes, chunks: list[bytes]) -> bytearray:
    """Join ``head`` and the record chunks once and fill in the CRC of bytes
    12..end: the single copy of the write path, and one CRC pass over it."""
    data = bytearray().join([head, *chunks])
    with memoryview(data) as view:
        _U32.pack_into(data, 8, zlib.crc32(view[_CRC_FROM:]))
    return data


def parse_batch_header(buf: bytes | memoryview, at: int, position: int) -> BatchInfo:
    """Parse the batch header found at ``buf[at:]``, which lies at ``position``
    in its segment. Checks framing only (not the CRC); raises CorruptSegment."""
    if len(buf) - at < BATCH_HEADER_SIZE:
        raise CorruptSegment("batch header truncated", position=position)
    (magic, length, crc, version, flags, base, base_byte, max_ts, count, hlen, nprod, _r) = (
        BATCH_HEADER.unpack_from(buf, at)
    )
    if magic != BATCH_MAGIC:
        raise CorruptSegment("bad batch magic", position=position)
    if version != BATCH_VERSION:
        raise CorruptSegment(f"unknown batch version {version}", position=position)
    if (
        count < 1
        or hlen < BATCH_HEADER_SIZE + nprod * _MIN_ENTRY
        or length < hlen + count * RECORD_HEADER_SIZE
    ):
        raise CorruptSegment("inconsistent batch header lengths", position=position)
    return BatchInfo(position, length, crc, flags, base, base_byte, max_ts, count, hlen, nprod)


def batch_crc_ok(buf: bytes | memoryview, at: int, info: BatchInfo) -> bool:
    """True when the whole batch is inside ``buf`` (from ``at``) and its CRC matches."""
    end = at + info.length
    if end > len(buf):
        return False
    with memoryview(buf)[at + _CRC_FROM : end] as body:
        return zlib.crc32(body) == info.crc


def decode_producers(buf: bytes | memoryview, at: int, info: BatchInfo) -> list[tuple[str, int, int]]:
    """The ``(producer id, last sequence, last write µs)`` entries of the batch
    whose header is at ``buf[at:]`` (without FLAG_PRODUCER_TIMES the write time
    is the batch's ``max_timestamp``). Raises CorruptSegment when they overrun
    the header."""
    out: list[tuple[str, int, int]] = []
    pos = at + BATCH_HEADER_SIZE
    end = at + info.header_length
    timed = info.flags & FLAG_PRODUCER_TIMES
    tail = _SEQ_TS.size if timed else _SEQ.size
    for _ in range(info.producer_count):
        if pos >= end:
            raise CorruptSegment("producer entries overrun the batch header", position=info.position)
        n = buf[pos]
        stop = pos + 1 + n
        if n == 0 or stop + tail > end:
            raise CorruptSegment("bad producer entry", position=info.position)
        try:
            pid = bytes(buf[pos + 1 : stop]).decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            raise CorruptSegment("producer id is not UTF-8", position=info.position) from None
        seq, ts = _SEQ_TS.unpack_from(buf, stop) if timed else (_SEQ.unpack_from(buf, stop)[0], info.max_timestamp)
        out.append((pid, seq, ts))
        pos = stop + tail
    return out


def batch_entries(
    batch: bytes | memoryview, info: BatchInfo, segment_base: int, position: int | None = None
) -> tuple[bytes, bytes, int]:
    """The offset-index entries and the time-index entry of one CRC-checked
    batch, and the Pravega byte position just past its last record.
    CorruptSegment when the records do not exactly fill the batch.
    ``position`` is where the batch lies in its file (``info.position`` unless
    the batch is being copied elsewhere, as salvage does)."""
    at = info.position if position is None else position
    parts = []
    pos = info.header_length
    byte_pos = info.base_byte_pos
    for i in range(info.count):
        if pos + RECORD_HEADER_SIZE > info.length:
            raise CorruptSegment("record overruns its batch", position=info.position)
        offset, ts, hlen, plen = _REC_FIELDS.unpack_from(batch, pos)
        if offset != info.base_offset + i:
            raise CorruptSegment("record offset does not match its batch", position=info.position)
        size = RECORD_HEADER_SIZE + hlen + plen
        parts.append(INDEX_ENTRY.pack(at + pos, size, byte_pos, ts))
        byte_pos += 8 + plen
        pos += size
    if pos != info.length:
        raise CorruptSegment("records do not fill their batch", position=info.position)
    time_entry = TIME_ENTRY.pack(info.max_timestamp, at, info.base_offset - segment_base, info.count)
    return b"".join(parts), time_entry, byte_pos
