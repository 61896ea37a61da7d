"""Kafka records <-> Ferry's canonical messages, both directions, sans-I/O.

Theory of operation
-------------------
A Kafka record is ``(key, value, headers, timestamp)``; a canonical message is
``(id, timestamp, origin timestamp, typed headers, payload)`` (core/message.py),
whose header keys and values are 1..255 bytes each and whose encoded header
block is at most ``MAX_HEADERS_SIZE`` bytes. The rules are docs/headers.md
"Kafka" (the contract; keep the two in step).

Kafka -> canonical (:func:`to_inputs`, a Produce batch), per record:

* payload = the value; a null value (a tombstone) is an empty payload plus the
  header (:data:`TOMBSTONE_HEADER`, bool true), placed last;
* a non-empty key is stored first, as :data:`KEY_HEADER` raw headers of at most
  255 bytes each, in order (a longer key is chunked: each chunk costs 25 bytes
  of framing, so keys up to 91 050 bytes fit the block); a null or empty key
  stores nothing (an empty key reads back null);
* each Kafka header, order and repeats kept: the key as a string, the value as
  a string when it is UTF-8, else raw. A header with a null or empty value or an
  empty key is dropped (canonical fields cannot be empty; NATS loses an empty
  value the same way). Of the rest, a key or value over 255 bytes, a key
  starting with :data:`RESERVED_PREFIX` (any case), or a block over the limit
  refuses the whole batch with INVALID_RECORD naming the record index: Kafka
  answers INVALID_RECORD for a record its broker will not store
  (``validateRecord``'s ``RecordError(recordIndex, ...)`` in apache/kafka
  storage/src/main/java/org/apache/kafka/storage/internals/log/LogValidator.java);
* origin timestamp = the record's time (``RecordBatch.timestamp_of``) in µs; a
  negative time (-1 is Kafka's ``NO_TIMESTAMP``) and 0 leave it to the append
  time. A time whose µs do not fit the stored u64 answers INVALID_TIMESTAMP,
  Kafka's code for an out-of-range CreateTime (``validateTimestamp``, same file);
* id = 0: the core assigns one.

The header block is written here directly in the canonical TLV layout
(``u8 kind, u32 len, bytes`` for key then value; core/message.py) from fields
already checked above, without building ``Headers`` objects.

Canonical -> Kafka (:func:`encode_fetch`, a Fetch answer): consecutive stored
records become v2 batches (CreateTime, uncompressed, producer id -1) whose base
offset is the first record's stored offset, of at most
:data:`MAX_RECORDS_PER_BATCH` records. The time is the origin timestamp, else
the append time, in ms. The key is the :data:`KEY_HEADER` values joined (null
when there are none); the value is the payload, or null when a
:data:`TOMBSTONE_HEADER` reads ``true`` (bool true, or the text ``true`` that a
NATS or HTTP client writes). Every other pair becomes a Kafka header, order
kept: the key's text (``HeaderValue.to_text`` for a non-string key), the value's
UTF-8 (string), bytes (raw) or text form (other kinds, whose kind is lost).

Byte limits: each record's encoded size is computed exactly as it is built
(the v2 record layout, adapters/kafka/records.py), so the answer stays within
``max_bytes``; with ``whole_first`` the first record is sent even when it alone
is over, so a consumer always progresses. That is KIP-74's rule ("the first
record batch in the first non-empty partition is returned even if it exceeds
the limit") at its tightest: Ferry forms its batches itself, so the oversize
batch holds that one record. The per-record path builds no Message or Headers
objects: an empty header block costs nothing, others are walked once.
"""

from __future__ import annotations

import struct
from typing import Iterable, NamedTuple

from core.errors import MalformedHeaders
from core.header_value import MAX_HEADER_FIELD, HeaderKind, HeaderValue
from core.log.partition import AppendInput
from core.message import MAX_HEADERS_SIZE
from core.record import RecordView

from .errors import ErrorCode
from .records import HEADER_SIZE, Record, RecordBatch, RecordBatchError, encode_batch

KEY_HEADER = "ferry-kafka-key"
TOMBSTONE_HEADER = "ferry-kafka-tombstone"
# Every name under this prefix is Ferry's (docs/addressing.md "Reserved headers"), so a
# later reserved name cannot collide with a header some producer already stored.
RESERVED_PREFIX = "ferry-kafka-"
# Records per Fetch batch: a consumer decodes a batch whole before handing out its
# first record, and smaller batches let a byte limit cut closer. The Java producer's
# default batch.size (16 KiB) holds a few hundred small records; this is that order.
MAX_RECORDS_PER_BATCH = 500
# The latest record time (ms) whose µs fit the stored u64 origin timestamp (core/record.py).
MAX_TIMESTAMP_MS = ((1 << 64) - 1) // 1000

_TLV = struct.Struct("<BI")  # u8 kind, u32 length: the head of each canonical TLV field
_TLV_SIZE = _TLV.size
_RAW, _STRING, _BOOL = int(HeaderKind.RAW), int(HeaderKind.STRING), int(HeaderKind.BOOL)
_KEY_NAME = KEY_HEADER.encode()
_TOMBSTONE_NAME = TOMBSTONE_HEADER.encode()
_KEY_HEAD = _TLV.pack(_STRING, len(_KEY_NAME)) + _KEY_NAME  # each key chunk's header key
_KEY_CHUNK_COST = 2 * _TLV_SIZE + len(_KEY_NAME)  # block bytes per key chunk beside the chunk
_TOMBSTONE_ENTRY = _TLV.pack(_STRING, len(_TOMBSTONE_NAME)) + _TOMBSTONE_NAME + _TLV.pack(_BOOL, 1) + b"\x01"
_INVALID_RECORD = int(ErrorCode.INVALID_RECORD)
_INVALID_TIMESTAMP = int(ErrorCode.INVALID_TIMESTAMP)
_new_tuple = tuple.__new__


def _refuse(index: int, why: str, code: int = _INVALID_RECORD) -> RecordBatchError:
    return RecordBatchError(code, f"record {index}: {why}")


# -- Kafka -> canonical ------------------------------------------------------------

def to_inputs(batch: RecordBatch) -> list[AppendInput]:
    """The canonical appends of a Produce batch (module docstring), one per record.

    Raises RecordBatchError (INVALID_RECORD, INVALID_TIMESTAMP) naming the first
    record that cannot be stored as sent; then nothing of the batch is stored."""
    out = []
    timestamp_of = batch.timestamp_of
    for index, record in enumerate(batch.records):
        payload = record.value
        if record.key or record.headers or payload is None:
            block = _header_block(index, record)
            if payload is None:
                payload = b""
        else:
            block = b""  # the common bare record: no key, no headers
        ts = timestamp_of(record)
        if ts > MAX_TIMESTAMP_MS:
            raise _refuse(index, f"timestamp {ts} ms is past {MAX_TIMESTAMP_MS}, the last time Ferry can store",
                          _INVALID_TIMESTAMP)
        out.append(AppendInput(payload, block, 0, ts * 1000 if ts > 0 else 0))
    return out


def _header_block(index: int, record: Record) -> bytes:
    """The canonical header block of record ``index``: key chunks, headers, tombstone."""
    pack = _TLV.pack
    parts: list[bytes] = []
    size = 0
    key = record.key
    if key:
        n = len(key)
        size = n + -(-n // MAX_HEADER_FIELD) * _KEY_CHUNK_COST
        if size > MAX_HEADERS_SIZE:  # checked before chunking a key of megabytes
            raise _refuse(index, f"a key of {n} bytes takes {size} header bytes, over {MAX_HEADERS_SIZE}")
        for start in range(0, n, MAX_HEADER_FIELD):
            chunk = key[start:start + MAX_HEADER_FIELD]
            parts += (_KEY_HEAD, pack(_RAW, len(chunk)), chunk)
    for name, value in record.headers:
        if not name or not value:
            continue  # documented loss: canonical keys and values are 1..255 bytes
        raw_name = name.encode("utf-8")
        if len(raw_name) > MAX_HEADER_FIELD:
            raise _refuse(index, f"header key of {len(raw_name)} bytes (at most {MAX_HEADER_FIELD} are stored)")
        if len(value) > MAX_HEADER_FIELD:
            raise _refuse(index, f"header {name!r} has a value of {len(value)} bytes "
                                 f"(at most {MAX_HEADER_FIELD} are stored)")
        if name[:len(RESERVED_PREFIX)].lower() == RESERVED_PREFIX:
            raise _refuse(index, f"header {name!r} uses a name reserved by Ferry ({RESERVED_PREFIX}*)")
        kind = _STRING
        if not value.isascii():
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                kind = _RAW
        parts += (pack(_STRING, len(raw_name)), raw_name, pack(kind, len(value)), value)
        size += 2 * _TLV_SIZE + len(raw_name) + len(value)
        if size > MAX_HEADERS_SIZE:
            raise _refuse(index, f"key and headers take more than {MAX_HEADERS_SIZE} header bytes")
    if record.value is None:
        parts.append(_TOMBSTONE_ENTRY)
        size += len(_TOMBSTONE_ENTRY)
        if size > MAX_HEADERS_SIZE:
            raise _refuse(index, f"key, headers and tombstone take {size} header bytes, over {MAX_HEADERS_SIZE}")
    return b"".join(parts)


# -- canonical -> Kafka ------------------------------------------------------------

def _zigzag_size(n: int) -> int:
    """Bytes of ``n`` as a zigzag varint (records.py's record fields)."""
    z = (n << 1) ^ (n >> 63)
    return 1 if z < 0x80 else (z.bit_length() + 6) // 7


def _text(kind: int, data: bytes) -> str:
    """The text form of a stored field (``HeaderValue.to_text``), checked as it is built."""
    return data.decode("utf-8") if kind == _STRING else HeaderValue(HeaderKind.from_code(kind), data).to_text()


def _kafka_bytes(kind: int, data: bytes) -> bytes:
    return data if kind == _STRING or kind == _RAW else _text(kind, data).encode("utf-8")


def kafka_fields(block: bytes) -> tuple[bytes | None, bool, tuple[tuple[str, bytes], ...], int]:
    """``(key, tombstone, headers, headers_size)`` of a stored canonical header block:
    the Kafka key (None without key headers), whether the value is null, the Kafka
    headers, and the bytes those headers take in a v2 record (count included).

    Raises MalformedHeaders (or another HeaderError) for a block that is not canonical."""
    unpack = _TLV.unpack_from
    key_parts: list[bytes] = []
    headers: list[tuple[str, bytes]] = []
    tombstone = False
    hsize = 0
    pos, end = 0, len(block)
    try:
        while pos < end:
            kkind, n = unpack(block, pos)
            pos += _TLV_SIZE
            kdata = block[pos:pos + n]
            pos += n
            vkind, n = unpack(block, pos)
            pos += _TLV_SIZE
            vdata = block[pos:pos + n]
            pos += n
            if kkind == _STRING and kdata == _KEY_NAME:
                key_parts.append(_kafka_bytes(vkind, vdata))
            elif kkind == _STRING and kdata == _TOMBSTONE_NAME:
                tombstone = tombstone or _text(vkind, vdata) == "true"
            else:
                name = kdata.decode("utf-8") if kkind == _STRING else _text(kkind, kdata)
                raw_name = kdata if kkind == _STRING else name.encode("utf-8")
                value = _kafka_bytes(vkind, vdata)
                headers.append((name, value))
                hsize += _zigzag_size(len(raw_name)) + len(raw_name) + _zigzag_size(len(value)) + len(value)
    except (struct.error, UnicodeDecodeError) as exc:
        raise MalformedHeaders(f"stored header block is not canonical: {exc}", position=pos) from None
    if pos != end:
        raise MalformedHeaders(f"stored header block runs past its end at byte {end}", position=end)
    if not key_parts:
        key = None
    else:
        key = key_parts[0] if len(key_parts) == 1 else b"".join(key_parts)
    return key, tombstone, tuple(headers), hsize + _zigzag_size(len(headers))


class Fetched(NamedTuple):
    """What :func:`encode_fetch` returns: ``data`` is record batches back to back,
    ``count`` the records in them, ``next_offset`` the offset after the last one
    (None when ``count`` is 0)."""

    data: bytes
    count: int
    next_offset: int | None


def encode_fetch(views: Iterable[RecordView], *, max_bytes: int, whole_first: bool = False) -> Fetched:
    """Record batches of the stored records ``views`` (consecutive, in offset order),
    taken from the front while they fit ``max_bytes``; with ``whole_first`` the first
    record is taken even when it alone is over (module docstring, KIP-74).

    Raises the HeaderError family for a stored header block that is not canonical."""
    batches: list[bytes] = []
    pending: list[Record] = []
    used = 0  # bytes of the batches so far, the open one's header included
    count = 0
    base_offset = base_ts = 0
    last = None
    for view in views:
        ts = (view.origin_timestamp or view.timestamp) // 1000
        if not pending:
            base_offset, base_ts = view.offset, ts
        td, od = ts - base_ts, view.offset - base_offset
        # 3 bytes: attributes, null key, no headers; the deltas take one byte each when
        # small (zigzag under 0x80), as they nearly always are within one batch.
        body = 3 + (1 if -64 <= td < 64 else _zigzag_size(td)) + (1 if 0 <= od < 64 else _zigzag_size(od))
        # The payload view goes into the batch as it is: encode_batch's join is its one copy.
        value: memoryview | None = view.payload
        plen = len(value)
        if len(view.headers):
            key, tombstone, headers, hsize = kafka_fields(bytes(view.headers))
            body += hsize - 1
            if key is not None:
                body += _zigzag_size(len(key)) + len(key) - 1
            if tombstone:
                value = None
                body += 1
            else:
                body += _zigzag_size(plen) + plen
        else:
            key, headers = None, ()
            body += _zigzag_size(plen) + plen
        need = _zigzag_size(body) + body + (0 if pending else HEADER_SIZE)
        if used + need > max_bytes and (count or not whole_first):
            break
        # (A view joins as bytes in encode_batch; tuple.__new__ skips NamedTuple's slower __new__.)
        pending.append(_new_tuple(Record, (0, td, od, key, value, headers)))
        used += need
        count += 1
        last = view.offset
        if len(pending) == MAX_RECORDS_PER_BATCH:
            batches.append(encode_batch(pending, base_offset=base_offset, base_timestamp=base_ts))
            pending = []
    if pending:
        batches.append(encode_batch(pending, base_offset=base_offset, base_timestamp=base_ts))
    return Fetched(b"".join(batches), count, None if last is None else last + 1)
