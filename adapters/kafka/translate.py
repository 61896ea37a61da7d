"""Kafka records <-> Ferry's canonical messages, both directions, sans-I/O.

Theory of operation
-------------------
A Kafka record is ``(key, value, headers, timestamp)``; a canonical message is
``(id, timestamp, origin timestamp, typed headers, payload)`` (core/message.py),
whose header keys and values are 1..255 bytes each and whose encoded header
block is at most ``MAX_HEADERS_SIZE`` bytes. The rules are docs/headers.md
"Kafka" (the contract; keep the two in step).

Kafka -> canonical (:func:`to_block`, a Produce batch), per record:

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
already checked above, without building ``Headers`` objects, and each record
goes straight into the stored layout (core/record.py) with the fields the
core owns left 0: one block per batch, stamped by ``Partition.append_encoded``
in one pass (its compiled loop where built), as an Iggy send is.

Canonical -> Kafka (:func:`encode_read` of a partition read, :func:`encode_fetch`
of record views; a Fetch answer): consecutive stored records become v2 batches
(CreateTime, uncompressed, producer id -1) whose base offset is the first
record's stored offset, of at most :data:`MAX_RECORDS_PER_BATCH` records. The
time is the origin timestamp, else the append time, in ms. The key is the
:data:`KEY_HEADER` values joined (null when there are none); the value is the
payload, or null when a :data:`TOMBSTONE_HEADER` reads ``true`` (bool true, or
the text ``true`` that a NATS or HTTP client writes). Every other pair becomes
a Kafka header, order kept: the key's text (``HeaderValue.to_text`` for a
non-string key), the value's UTF-8 (string), bytes (raw) or text form (other
kinds, whose kind is lost).

Byte limits: each record's encoded size is computed exactly as it is built
(the v2 record layout, adapters/kafka/records.py), so the answer stays within
``max_bytes``; with ``whole_first`` the first record is sent even when it alone
is over, so a consumer always progresses. That is KIP-74's rule ("the first
record batch in the first non-empty partition is returned even if it exceeds
the limit") at its tightest: Ferry forms its batches itself, so the oversize
batch holds that one record. The per-record path builds no Message or Headers
objects: an empty header block costs nothing, others are walked once; each
record's bytes are written once into its batch's parts, joined once per batch,
and the batch's CRC-32C runs over that join (``records.batch_header``).
"""

from __future__ import annotations

import struct
from typing import Iterable, NamedTuple

from core.compiled import load as load_compiled
from core.errors import CorruptSegment, MalformedHeaders
from core.header_value import MAX_HEADER_FIELD, HeaderKind, HeaderValue
from core.log.encoded import records_of
from core.log.partition import AppendInput
from core.log.readbatch import ReadBatch
from core.message import MAX_HEADERS_SIZE
from core.record import RECORD_HEADER, RECORD_HEADER_SIZE, RecordView, encode_record

from .errors import ErrorCode
from .records import (HEADER_SIZE, TIMESTAMP_LOG_APPEND_TIME, Record, RecordBatch, RecordBatchError, StoredRecords,
                      batch_header, zigzag_bytes as _zigzag)

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
# A stored record's header (core/record.py) as the Produce path writes it: checksum, id,
# offset and timestamp left 0 for Partition.append_encoded to stamp; origin, header and
# payload lengths; reserved 0. Three fields packed, the zeros come from the format.
_STORED_HEAD = struct.Struct("<40xQII8x")
# What the Fetch path reads of a stored record: offset, timestamp, origin, lengths.
_STORED_FIELDS = struct.Struct("<24xQQQII")
if (RECORD_HEADER.unpack(_STORED_HEAD.pack(1, 2, 3)) != (0, 0, 0, 0, 0, 1, 2, 3, 0)
        or _STORED_FIELDS.unpack_from(RECORD_HEADER.pack(0, 0, 0, 4, 5, 6, 7, 8, 0)) != (4, 5, 6, 7, 8)):
    raise ImportError("translate.py's stored-record structs disagree with core/record.py's layout")
# Zigzag varints looked up, not computed, per Fetch record: the time delta by value + 64
# (-64..63, one byte: records appended together lie within a few ms), and the offset
# delta, which runs 0..MAX_RECORDS_PER_BATCH - 1 within a batch of consecutive offsets.
_ZIGZAG1 = tuple(_zigzag(n) for n in range(-64, 64))
_OFFSET_DELTAS = tuple(_zigzag(n) for n in range(MAX_RECORDS_PER_BATCH))


def _refuse(index: int, why: str, code: int = _INVALID_RECORD) -> RecordBatchError:
    return RecordBatchError(code, f"record {index}: {why}")


# -- Kafka -> canonical ------------------------------------------------------------

def to_block(batch: RecordBatch) -> tuple[bytearray, int]:
    """The canonical records of a Produce batch (module docstring), one per Kafka record,
    as one block in the stored layout (core/record.py) for ``Broker.append_records``, which
    stamps ids, offsets, times and checksums into it in one pass; and the payload bytes.

    Raises RecordBatchError (INVALID_RECORD, INVALID_TIMESTAMP) naming the first
    record that cannot be stored as sent; then nothing of the batch is stored.

    A batch decoded with :data:`COMPILED_BLOCK` (``records.decode_produce_batch``'s
    ``block``) already holds its block, made by the compiled twin of this loop; it is
    handed out once (the append stamps it in place), a second call builds another."""
    made = batch.records
    if isinstance(made, StoredRecords) and made.block is not None:
        block, made.block = made.block, None
        return block, made.nbytes
    parts: list = []
    head = _STORED_HEAD.pack
    nbytes = 0
    # Under log-append time every record takes the batch's max timestamp (RecordBatch.timestamp_of).
    fixed_ts = batch.max_timestamp if batch.timestamp_type == TIMESTAMP_LOG_APPEND_TIME else None
    base_ts = batch.base_timestamp
    for index, record in enumerate(batch.records):
        _, td, _, key, payload, headers = record
        if key or headers or payload is None:
            block = _header_block(index, record)
            if payload is None:
                payload = b""
        else:
            block = b""  # the common bare record: no key, no headers
        ts = base_ts + td if fixed_ts is None else fixed_ts
        if ts > MAX_TIMESTAMP_MS:
            raise _refuse(index, f"timestamp {ts} ms is past {MAX_TIMESTAMP_MS}, the last time Ferry can store",
                          _INVALID_TIMESTAMP)
        parts += (head(ts * 1000 if ts > 0 else 0, len(block), len(payload)), payload, block)
        nbytes += len(payload)
    return bytearray().join(parts), nbytes


# The compiled twin of the record decode and the loop above (adapters/kafka/_speedups.c),
# for records.decode_produce_batch(..., block=COMPILED_BLOCK); None without the build
# or under FERRY_PURE_PYTHON=1, and the Python loops run.
def configure_compiled(module):
    """Give the compiled module this file's constants of the canonical layout; its ``block``."""
    module.configure(_KEY_HEAD, _TOMBSTONE_ENTRY, _RAW, _STRING, MAX_HEADER_FIELD, MAX_HEADERS_SIZE,
                     MAX_TIMESTAMP_MS, RESERVED_PREFIX.encode())
    return module.block


_compiled = load_compiled("adapters.kafka._speedups")
COMPILED_BLOCK = None if _compiled is None else configure_compiled(_compiled)


def to_inputs(batch: RecordBatch) -> list[AppendInput]:
    """What :func:`to_block` stores, as one ``AppendInput`` per record (for callers that
    need per-message objects). Raises what :func:`to_block` raises."""
    return [AppendInput(bytes(rv.payload), bytes(rv.headers), 0, rv.origin_timestamp)
            for rv in records_of(to_block(batch)[0])]


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

def _text(kind: int, data: bytes) -> str:
    """The text form of a stored field (``HeaderValue.to_text``), checked as it is built."""
    return data.decode("utf-8") if kind == _STRING else HeaderValue(HeaderKind.from_code(kind), data).to_text()


def _kafka_bytes(kind: int, data: bytes) -> bytes:
    return data if kind == _STRING or kind == _RAW else _text(kind, data).encode("utf-8")


def kafka_fields(block: bytes) -> tuple[bytes | None, bool, tuple[tuple[str, bytes], ...]]:
    """``(key, tombstone, headers)`` of a stored canonical header block: the Kafka key
    (None without key headers), whether the value is null, and the Kafka headers.

    Raises MalformedHeaders (or another HeaderError) for a block that is not canonical."""
    unpack = _TLV.unpack_from
    key_parts: list[bytes] = []
    headers: list[tuple[str, bytes]] = []
    tombstone = False
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
                headers.append((name, _kafka_bytes(vkind, vdata)))
    except (struct.error, UnicodeDecodeError) as exc:
        raise MalformedHeaders(f"stored header block is not canonical: {exc}", position=pos) from None
    if pos != end:
        raise MalformedHeaders(f"stored header block runs past its end at byte {end}", position=end)
    if not key_parts:
        key = None
    else:
        key = key_parts[0] if len(key_parts) == 1 else b"".join(key_parts)
    return key, tombstone, tuple(headers)


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

    :func:`encode_read` is the same for a partition read, from its stored bytes; this
    form, for views from elsewhere, lays each view out again as stored first.
    Raises the HeaderError family for a stored header block that is not canonical."""
    return _encode([encode_record(v.id, v.offset, v.timestamp, v.origin_timestamp, bytes(v.headers), v.payload)
                    for v in views], max_bytes, whole_first)


def encode_read(read: ReadBatch, *, max_bytes: int, whole_first: bool = False) -> Fetched:
    """:func:`encode_fetch` of a partition read, straight from its stored bytes: the
    fields each record needs are unpacked where they lie, with no object per record.

    Raises CorruptSegment for stored lengths that run past their chunk, and what
    :func:`encode_fetch` raises."""
    return _encode(read.chunks, max_bytes, whole_first)


def _encode(chunks, max_bytes: int, whole_first: bool) -> Fetched:
    """The batches of :func:`encode_fetch` from ``chunks`` of stored records (core/record.py),
    back to back: each record's bytes are written once into its batch's parts, joined
    once per batch of at most :data:`MAX_RECORDS_PER_BATCH` records."""
    out: list[bytes] = []  # batch headers and bodies, joined once at the end
    parts: list = []  # the open batch's record bytes
    used = count = n = 0  # bytes so far (the open batch's header included), records, records in the open batch
    base_offset = base_ts = max_td = 0
    last = None
    unpack, head_size = _STORED_FIELDS.unpack_from, RECORD_HEADER_SIZE
    small, deltas, sizes = _ZIGZAG1, _OFFSET_DELTAS, {}  # sizes: zigzag varints of the lengths met so far
    full = False
    for chunk in chunks:
        view = memoryview(chunk)
        pos, end = 0, len(view)
        while pos < end:
            offset, ts, origin, hlen, plen = unpack(view, pos)
            start = pos + head_size
            stop = start + plen
            pos = stop + hlen
            if pos > end:
                raise CorruptSegment(f"stored record at offset {offset} runs past its chunk", position=start)
            ts = (origin or ts) // 1000  # the producer's time, else the append time; in ms
            if not n:
                base_offset, base_ts, max_td = offset, ts, 0
            td, od = ts - base_ts, offset - base_offset
            tdb = small[td + 64] if -64 <= td < 64 else _zigzag(td)
            odb = deltas[od] if 0 <= od < MAX_RECORDS_PER_BATCH else _zigzag(od)
            if hlen:
                fields, body = _fields(tdb, odb, view[start:stop], view[stop:pos])
            else:
                plb = sizes.get(plen) or sizes.setdefault(plen, _zigzag(plen))
                # attributes, deltas, a null key, the value, no headers
                fields = (b"\x00", tdb, odb, b"\x01", plb, view[start:stop], b"\x00")
                body = 3 + len(tdb) + len(odb) + len(plb) + plen
            lenb = sizes.get(body) or sizes.setdefault(body, _zigzag(body))
            need = len(lenb) + body + (0 if n else HEADER_SIZE)
            if used + need > max_bytes and (count or not whole_first):
                full = True
                break
            parts.append(lenb)
            parts += fields
            used += need
            count += 1
            n += 1
            last = offset
            if td > max_td:
                max_td = td
            if n == MAX_RECORDS_PER_BATCH:
                _close_batch(out, parts, n, base_offset, base_ts, max_td, od)
                parts, n = [], 0
        if full:
            break
    if n:
        _close_batch(out, parts, n, base_offset, base_ts, max_td, last - base_offset)
    return Fetched(b"".join(out), count, None if last is None else last + 1)


_NULL = b"\x01"  # a null key or value: length -1, zigzag-encoded


def _fields(tdb: bytes, odb: bytes, payload, headers) -> tuple[list, int]:
    """A record with a stored header block: its parts after the length, and its size."""
    key, tombstone, pairs = kafka_fields(bytes(headers))
    fields: list = [b"\x00", tdb, odb]
    fields += (_NULL,) if key is None else (_zigzag(len(key)), key)
    fields += (_NULL,) if tombstone else (_zigzag(len(payload)), payload)
    fields.append(_zigzag(len(pairs)))
    for name, value in pairs:
        raw = name.encode("utf-8")
        fields += (_zigzag(len(raw)), raw, _zigzag(len(value)), value)
    return fields, sum(map(len, fields))


def _close_batch(out: list, parts: list, n: int, base_offset: int, base_ts: int, max_td: int, od: int) -> None:
    """Append the batch of the ``n`` records in ``parts`` (the last one's offset delta ``od``)."""
    plain = b"".join(parts)
    out.append(batch_header(plain, n, base_offset=base_offset, base_timestamp=base_ts,
                            max_timestamp=base_ts + max_td, last_offset_delta=od))
    out.append(plain)
