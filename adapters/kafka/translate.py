"""Kafka records <-> Ferry's canonical messages, both directions, sans-I/O.

Theory of operation
-------------------
A Kafka record is ``(key, value, headers, timestamp)``; a canonical message is
``(id, timestamp, origin timestamp, typed headers, payload)`` (core/message.py).
The rules (docs/headers.md "Kafka", the contract):

Kafka -> canonical (:func:`to_inputs`, a Produce batch):

* payload = the value; a null value (a tombstone) is an empty payload plus
  the header (:data:`TOMBSTONE_HEADER`, bool true);
* a non-empty key is stored first, as one or more :data:`KEY_HEADER` raw
  headers of at most 255 bytes each, in order (canonical values are 1..255
  bytes, so a longer key is chunked; keys up to the 100 KB header block fit);
  a null or empty key stores nothing (an empty key reads back as null);
* each Kafka header, order and repeats kept: the key as a string, the value as
  a string when it is UTF-8, else raw. A header with a null or empty value or
  an empty key is not stored (canonical values cannot be empty; NATS loses an
  empty value the same way). A key or value over 255 bytes, a header using a
  reserved ``ferry-kafka-`` name, or a header block over the limit refuses the
  whole batch with INVALID_RECORD, naming the record;
* origin timestamp = the record's CreateTime in µs; a negative time ("none")
  leaves it to the append time.

Canonical -> Kafka (:func:`to_batches`, a Fetch answer): consecutive stored
records become v2 batches (CreateTime, uncompressed, no producer) of at most
:data:`MAX_RECORDS_PER_BATCH`; the timestamp is the origin timestamp (else
the append time) in ms; the key is the concatenated key headers (null when
none); the value is the payload (null for a tombstone); every other header
becomes a Kafka header whose key is its text and whose value is the string's
UTF-8, the raw bytes, or the text form of other kinds (their kind is lost).
"""

from __future__ import annotations

from typing import Iterable

from core.errors import FerryError
from core.header_value import HeaderKind, HeaderValue
from core.log.partition import AppendInput
from core.message import MAX_HEADERS_SIZE, Headers

from .errors import ErrorCode
from .records import HEADER_SIZE, Record, RecordBatchError, encode_batch

KEY_HEADER = "ferry-kafka-key"
TOMBSTONE_HEADER = "ferry-kafka-tombstone"
RESERVED_PREFIX = "ferry-kafka-"
MAX_FIELD = 255  # canonical header keys and values are 1..255 bytes (core/header_value.py)
# Records per Fetch batch: a consumer decodes a batch whole, and smaller batches let
# the byte limits cut closer; Kafka producers' batches are of this order too.
MAX_RECORDS_PER_BATCH = 500

_KEY = HeaderValue.string(KEY_HEADER)
_TOMBSTONE = HeaderValue.string(TOMBSTONE_HEADER)
_TRUE = HeaderValue.bool(True)
_RAW, _STRING, _BOOL = HeaderKind.RAW, HeaderKind.STRING, HeaderKind.BOOL


def _refuse(index: int, why: str) -> RecordBatchError:
    return RecordBatchError(int(ErrorCode.INVALID_RECORD), f"record {index}: {why}")


def to_inputs(batch) -> list[AppendInput]:
    """The canonical appends of a Produce batch (module docstring); RecordBatchError
    (INVALID_RECORD) when a record cannot be stored as sent."""
    out = []
    for index, record in enumerate(batch.records):
        pairs: list[tuple[HeaderValue, HeaderValue]] = []
        key = record.key
        if key:
            for start in range(0, len(key), MAX_FIELD):
                pairs.append((_KEY, HeaderValue.raw(key[start:start + MAX_FIELD])))
        for name, value in record.headers:
            if not name or not value:
                continue
            raw_name = name.encode("utf-8")
            if len(raw_name) > MAX_FIELD:
                raise _refuse(index, f"header key of {len(raw_name)} bytes (at most {MAX_FIELD} are stored)")
            if len(value) > MAX_FIELD:
                raise _refuse(index, f"header {name!r} has a value of {len(value)} bytes (at most {MAX_FIELD} "
                                     "are stored)")
            if name.lower().startswith(RESERVED_PREFIX):
                raise _refuse(index, f"header {name!r} uses a name reserved by Ferry")
            try:
                hv = HeaderValue.string(value.decode("utf-8"))
            except UnicodeDecodeError:
                hv = HeaderValue.raw(value)
            pairs.append((HeaderValue.string(name), hv))
        if record.value is None:
            pairs.append((_TOMBSTONE, _TRUE))
        try:
            block = Headers(pairs).encode() if pairs else b""
        except FerryError as exc:
            raise _refuse(index, str(exc)) from None
        if len(block) > MAX_HEADERS_SIZE:
            raise _refuse(index, f"key and headers take {len(block)} bytes, over {MAX_HEADERS_SIZE}")
        ts = batch.timestamp_of(record)
        out.append(AppendInput(record.value or b"", block, 0, ts * 1000 if ts >= 0 else 0))
    return out


def _text(hv: HeaderValue) -> str:
    return hv.as_str() if hv.kind is _STRING else hv.to_text()


def _bytes(hv: HeaderValue) -> bytes:
    if hv.kind is _RAW:
        return hv.data
    if hv.kind is _STRING:
        return hv.data
    return hv.to_text().encode("utf-8")


def to_record(view, base_offset: int, base_ts: int) -> tuple[Record, int]:
    """One stored record as a Kafka record relative to a batch; and its time in ms."""
    ts = (view.origin_timestamp or view.timestamp) // 1000
    value = bytes(view.payload)
    key = None
    headers: tuple = ()
    if len(view.headers):
        parts, kafka_headers, tombstone = [], [], False
        for k, v in Headers.decode(view.headers):
            if k == _KEY and v.kind is _RAW:
                parts.append(v.data)
            elif k == _TOMBSTONE and v.kind is _BOOL:
                tombstone = v.as_bool()
            else:
                kafka_headers.append((_text(k), _bytes(v)))
        key = b"".join(parts) if parts else None
        headers = tuple(kafka_headers)
        if tombstone:
            value = None
    return Record(0, ts - base_ts, view.offset - base_offset, key, value, headers), ts


def to_batches(views: Iterable, *, max_bytes: int, first: bool = True) -> bytes:
    """Record batches of consecutive stored records (module docstring), at most
    ``max_bytes`` of them, except that with ``first`` the first batch is whole even
    past the limit, so a consumer always progresses (KIP-74)."""
    out: list[bytes] = []
    size = 0
    pending: list[Record] = []
    base_offset = base_ts = 0
    approx = HEADER_SIZE

    def flush() -> bool:
        nonlocal size, approx
        data = encode_batch(pending, base_offset=base_offset, base_timestamp=base_ts)
        if size + len(data) > max_bytes and not (first and not out):
            return False
        out.append(data)
        size += len(data)
        pending.clear()
        approx = HEADER_SIZE
        return True

    for view in views:
        if not pending:
            base_offset = view.offset
            base_ts = (view.origin_timestamp or view.timestamp) // 1000
        record, _ts = to_record(view, base_offset, base_ts)
        pending.append(record)
        approx += view.size
        if len(pending) >= MAX_RECORDS_PER_BATCH or size + approx > max_bytes:
            if not flush():  # the last record took it past the limit: send the rest, stop
                pending.pop()
                if pending:
                    flush()
                return b"".join(out)
    if pending:
        flush()
    return b"".join(out)
