"""Kafka's record batch format v2 (magic 2): decode Produce payloads, encode Fetch payloads.

Theory of operation
-------------------
A Produce partition carries, and a Fetch partition returns, a ``records``
byte string: record batches back to back. Each batch is a fixed 61-byte
header, then its records, compressed as one block when the compression
bits of ``attributes`` say so::

    base_offset int64 | length int32 (bytes after this field)
    partition_leader_epoch int32 | magic int8 (= 2) | crc uint32
    attributes int16 | last_offset_delta int32 | base_timestamp int64
    max_timestamp int64 | producer_id int64 | producer_epoch int16
    base_sequence int32 | record_count int32 | records ...

The CRC is CRC-32C (Castagnoli) over every byte from ``attributes`` to the
end of the batch: it leaves out the base offset and the leader epoch, which
a broker rewrites on append without recomputing it. A record is::

    length varint | attributes int8 | timestamp_delta varlong
    offset_delta varint | key_length varint | key
    value_length varint | value | header_count varint
    headers: [key_length varint | key (UTF-8) | value_length varint | value]

where every varint is zigzag-encoded (protobuf's sint32 / sint64) and a
length of -1 means null.

:func:`decode_batches` reads the format; :func:`decode_produce_batch` adds
the checks Kafka's broker makes on a client's Produce (exactly one batch,
base offset 0, a consistent offset range, no control batch, ...);
:func:`encode_batch` writes a batch (:func:`batch_header` alone, for records a
caller has encoded itself). Every refusal is a
:class:`RecordBatchError` carrying the Kafka error code a Produce response
answers with; which code follows where Kafka's broker raises which exception
(``ByteBufferLogInputStream``, ``DefaultRecordBatch``/``DefaultRecord``,
``ProduceRequest.validateRecords``, ``UnifiedLog.analyzeAndValidateRecords``
and ``LogValidator``):

* CORRUPT_MESSAGE (2): the batch framing is broken (a length below the
  header size, a batch running past the end of the buffer, an unknown magic
  byte) or the CRC does not match; ours also for a compressed block that
  does not decompress or decompresses past :data:`MAX_DECOMPRESSED_BYTES`.
* INVALID_RECORD (87): the CRC holds but what it covers is inconsistent (a
  negative record count, a record running past its length or the batch, an
  over-long varint, bytes left after the last record), and the Produce-only
  rules of :func:`decode_produce_batch`. Magic 0 or 1 is also INVALID_RECORD:
  a Produce v3+ may only carry magic 2, and Kafka refuses the older formats
  there with InvalidRecordException, not with UNSUPPORTED_FOR_MESSAGE_FORMAT
  (Ferry speaks Produce v3+ only, protocols/kafka.md section 2).
* UNSUPPORTED_COMPRESSION_TYPE (76): compression ids 5 to 7, zstd in a
  Produce below v7, and a codec whose library is not installed here.

Compression and the decompression bomb guard are adapters/kafka/compression.py's.

Nothing here does I/O or keeps time.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple, Sequence

from crc32c import crc32c

from adapters.wire.types import ONE_BYTE, uvarint_bytes

from .compression import (COMPRESSION_GZIP, COMPRESSION_LZ4, COMPRESSION_NAMES, COMPRESSION_NONE, COMPRESSION_SNAPPY,
                          COMPRESSION_ZSTD, MAX_DECOMPRESSED_BYTES, compress, decompress)
from .errors import ErrorCode, RecordBatchError

# -- the error codes a batch can get (the one table: errors.py)

CORRUPT_MESSAGE = ErrorCode.CORRUPT_MESSAGE
UNSUPPORTED_COMPRESSION_TYPE = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
INVALID_RECORD = ErrorCode.INVALID_RECORD


def _corrupt(message: str) -> RecordBatchError:
    return RecordBatchError(CORRUPT_MESSAGE, message)


def _invalid(message: str) -> RecordBatchError:
    return RecordBatchError(INVALID_RECORD, message)


# -- constants of the format

MAGIC = 2
TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1
# "none" for the producer fields, timestamps and the leader epoch
NO_PRODUCER_ID = NO_PRODUCER_EPOCH = NO_SEQUENCE = NO_TIMESTAMP = NO_PARTITION_LEADER_EPOCH = -1

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_DELETE_HORIZON_BIT = 0x40

# The header in two parts: what precedes the CRC, and what the CRC covers up to the records.
_PRE_CRC = struct.Struct(">qiibI")  # base_offset, length, leader_epoch, magic, crc
_POST_CRC = struct.Struct(">hiqqqhii")  # attributes ... record_count
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
_LOG_OVERHEAD = 12  # base_offset + length: the bytes `length` does not count
_CRC_START = _PRE_CRC.size  # 21: attributes onward
_MAGIC_AT = 16
_MIN_LENGTH = HEADER_SIZE - _LOG_OVERHEAD  # 49: a batch with no records
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

_INT32 = struct.Struct(">i")


# -- the decoded shapes

class Record(NamedTuple):
    """One record of a batch, as on the wire: times and offsets relative to the batch.

    A NamedTuple, not a dataclass: the decode loop builds one per record, and a tuple is
    much cheaper to create than a frozen dataclass."""

    attributes: int = 0
    timestamp_delta: int = 0
    offset_delta: int = 0
    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """One decoded record batch (magic 2); ``crc`` is the stored CRC, already checked."""

    base_offset: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: tuple[Record, ...] | StoredRecords

    @property
    def compression(self) -> int:
        return self.attributes & _COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return TIMESTAMP_LOG_APPEND_TIME if self.attributes & _TIMESTAMP_TYPE_BIT else TIMESTAMP_CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & _DELETE_HORIZON_BIT)

    @property
    def record_count(self) -> int:
        return len(self.records)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def last_sequence(self) -> int:
        """An idempotent batch's last record's sequence number."""
        return self.base_sequence + len(self.records) - 1

    def offset_of(self, record: Record) -> int:
        return self.base_offset + record.offset_delta

    def timestamp_of(self, record: Record) -> int:
        # Under log-append time every record takes the batch's max timestamp (the broker's
        # append time); the per-record deltas are the producer's and are ignored.
        if self.attributes & _TIMESTAMP_TYPE_BIT:
            return self.max_timestamp
        return self.base_timestamp + record.timestamp_delta


# -- varints

def _read_uvarint(data: bytes, pos: int, max_bits: int) -> tuple[int, int]:
    """An unsigned LEB128 varint of at most ``max_bits`` bits at ``pos``; (value, next pos).

    Callers decode the common one- and two-byte cases inline and come here for the rest. Java's
    reader gives up after 5 bytes (int) or 10 (long); we also refuse bits past the width,
    which Java silently shifts out (no encoder writes them).
    """
    result = shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result >> max_bits:
                raise _invalid(f"varint wider than {max_bits} bits")
            return result, pos
        shift += 7
        if shift >= max_bits:
            raise _invalid(f"varint longer than {(max_bits + 6) // 7} bytes")


def zigzag_bytes(n: int) -> bytes:
    """``n`` (an int64) as a zigzag varint."""
    return uvarint_bytes((n << 1) ^ (n >> 63))


# -- records

def _decode_records(data: bytes, pos: int, limit: int, count: int) -> tuple[Record, ...]:
    """``count`` records from ``data[pos:limit]``, which they must fill exactly.

    Written as one flat loop with the one- and two-byte varint cases inline: it runs once
    per record of every Produce. An IndexError can only mean a read past the end of ``data`` and
    becomes INVALID_RECORD like every other structural error of a record.
    """
    out: list[Record] = []
    append = out.append
    new = tuple.__new__
    uvarint = _read_uvarint
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                size = b
                pos += 1
            elif data[pos + 1] < 0x80:  # two bytes: records of 64 bytes to 8 KiB
                size = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                size, pos = uvarint(data, pos, 32)
            size = (size >> 1) ^ -(size & 1)
            end = pos + size
            if size <= 0 or end > limit:
                raise _invalid(f"record length {size} does not fit the batch")
            attributes = data[pos]
            pos += 1
            b = data[pos]
            if b < 0x80:
                ts = b
                pos += 1
            elif data[pos + 1] < 0x80:  # deltas 64 ms to 8 s
                ts = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                ts, pos = uvarint(data, pos, 64)
            ts = (ts >> 1) ^ -(ts & 1)
            b = data[pos]
            if b < 0x80:
                od = b
                pos += 1
            elif data[pos + 1] < 0x80:  # offset deltas 64 to 8191
                od = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                od, pos = uvarint(data, pos, 32)
            od = (od >> 1) ^ -(od & 1)
            b = data[pos]
            if b < 0x80:
                n = b
                pos += 1
            else:
                n, pos = uvarint(data, pos, 32)
            n = (n >> 1) ^ -(n & 1)
            if n == -1:
                key = None
            elif 0 <= n <= end - pos:
                key = data[pos:pos + n]
                pos += n
            else:
                raise _invalid(f"key length {n} does not fit its record")
            b = data[pos]
            if b < 0x80:
                n = b
                pos += 1
            elif data[pos + 1] < 0x80:  # values of 64 bytes to 8 KiB
                n = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                n, pos = uvarint(data, pos, 32)
            n = (n >> 1) ^ -(n & 1)
            if n == -1:
                value = None
            elif 0 <= n <= end - pos:
                value = data[pos:pos + n]
                pos += n
            else:
                raise _invalid(f"value length {n} does not fit its record")
            b = data[pos]
            if b == 0:
                headers = ()
                pos += 1
            else:
                headers, pos = _decode_headers(data, pos, end)
            if pos != end:
                raise _invalid(f"record is {size} bytes but its fields take {size + pos - end}")
            append(new(Record, (attributes, ts, od, key, value, headers)))
    except IndexError:
        raise _invalid("record runs past the end of the batch") from None
    if pos != limit:
        raise _invalid(f"{limit - pos} bytes left after the batch's {count} records")
    return tuple(out)


def _decode_headers(data: bytes, pos: int, end: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    count, pos = _read_uvarint(data, pos, 32)
    count = (count >> 1) ^ -(count & 1)
    # Each header takes at least two bytes (two empty lengths): refuse a count the
    # record cannot hold before looping on it.
    if count < 0 or 2 * count > end - pos:
        raise _invalid(f"header count {count} does not fit its record")
    headers = []
    for _ in range(count):
        n, pos = _read_uvarint(data, pos, 32)
        n = (n >> 1) ^ -(n & 1)
        if n < 0 or pos + n > end:
            raise _invalid(f"header key length {n} does not fit its record")
        try:
            # Java clients can only write UTF-8 keys (they are Strings); refusing other
            # bytes keeps every key Ferry stores representable as text.
            hkey = data[pos:pos + n].decode("utf-8")
        except UnicodeDecodeError:
            raise _invalid("header key is not UTF-8") from None
        pos += n
        n, pos = _read_uvarint(data, pos, 32)
        n = (n >> 1) ^ -(n & 1)
        if n == -1:
            hvalue = None
        elif 0 <= n <= end - pos:
            hvalue = data[pos:pos + n]
            pos += n
        else:
            raise _invalid(f"header value length {n} does not fit its record")
        headers.append((hkey, hvalue))
    return tuple(headers), pos


def _encode_record(record: Record) -> bytes:
    attributes, ts, od, key, value, headers = record
    if not 0 <= attributes <= 0xFF:
        raise ValueError(f"record attributes {attributes} do not fit a byte")
    if not _INT64_MIN <= ts <= _INT64_MAX:
        raise ValueError(f"timestamp delta {ts} does not fit an int64")
    if not _INT32_MIN <= od <= _INT32_MAX:
        raise ValueError(f"offset delta {od} does not fit an int32")
    zz = zigzag_bytes
    parts = [ONE_BYTE[attributes] if attributes < 0x80 else bytes((attributes,)), zz(ts), zz(od)]
    for blob in (key, value):
        if blob is None:
            parts.append(b"\x01")  # zigzag(-1)
        else:
            parts += (zz(len(blob)), blob)
    parts.append(zz(len(headers)))
    for hkey, hvalue in headers:
        raw = hkey.encode("utf-8")
        parts += (zz(len(raw)), raw)
        parts += (b"\x01",) if hvalue is None else (zz(len(hvalue)), hvalue)
    body = b"".join(parts)
    return zz(len(body)) + body


# -- batches

class StoredRecords(Sequence):
    """A Produce batch's records that a compiled loop already turned into Ferry's stored
    layout (``block``, ``nbytes``: adapters/kafka/translate.py ``to_block``): a record
    it accepts is one the Python loop accepts, so nothing is decoded unless asked.
    ``len`` is the batch's record count; indexing or iterating decodes them (once)."""

    __slots__ = ("_data", "_pos", "_limit", "_count", "_decoded", "block", "nbytes")

    def __init__(self, data: bytes, pos: int, limit: int, count: int, block: bytearray, nbytes: int) -> None:
        self._data, self._pos, self._limit, self._count = data, pos, limit, count
        self._decoded: tuple[Record, ...] | None = None
        self.block: bytearray | None = block
        self.nbytes = nbytes

    def _records(self) -> tuple[Record, ...]:
        if self._decoded is None:
            self._decoded = _decode_records(self._data, self._pos, self._limit, self._count)
        return self._decoded

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index):
        return self._records()[index]

    def __iter__(self):
        return iter(self._records())

    def __eq__(self, other) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, Sequence) else other)

    __hash__ = None


def producer_key(producer_id: int, producer_epoch: int) -> str:
    """The producer name Ferry's log keeps a Kafka producer's sequences under
    (``Partition.producer_sequence``, the ``producer=`` of an append): one per producer id
    and epoch, since Kafka's sequences start again with each epoch."""
    return f"kafka:{producer_id}:{producer_epoch}"


def sequence_error(batch: RecordBatch, stored: int | None) -> tuple[int, str | None] | None:
    """Kafka's rule for an idempotent batch against the last sequence stored for its
    producer and epoch (``ProducerAppendInfo.checkSequence``; None: nothing stored): None
    to take it, DUPLICATE_SEQUENCE_NUMBER for a batch already stored (the Java client
    and librdkafka treat it as success), OUT_OF_ORDER_SEQUENCE_NUMBER for a gap; as
    ``(error code, message or None)``."""
    if stored is None:
        return None
    if batch.last_sequence <= stored:
        return int(ErrorCode.DUPLICATE_SEQUENCE_NUMBER), None
    if batch.base_sequence != stored + 1:
        return int(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER), f"expected sequence {stored + 1}, got {batch.base_sequence}"
    return None


def decode_batches(buf: bytes | bytearray | memoryview, *,
                   max_decompressed: int = MAX_DECOMPRESSED_BYTES, block=None) -> list[RecordBatch]:
    """Every batch of ``buf`` (a Produce or Fetch partition's ``records``), checked.

    ``buf`` must end on a batch boundary: a partial trailing batch is CORRUPT_MESSAGE.
    (Kafka's broker silently drops such a tail; a Produce client never sends one, so
    here it means a broken client.) Empty ``buf`` gives no batches.

    ``block``, when given, is tried first on each batch's (decompressed) records:
    ``block(data, pos, limit, count, base_timestamp, log_append, max_timestamp)``
    answers ``(stored block, payload bytes)`` or None; a block makes the batch's
    records :class:`StoredRecords`, None decodes them here as without it.
    """
    data = buf if isinstance(buf, bytes) else bytes(buf)
    size = len(data)
    batches = []
    pos = 0
    while pos < size:
        if size - pos < _MAGIC_AT + 1:
            raise _corrupt(f"record batch header cut short at {size - pos} bytes")
        magic = data[pos + _MAGIC_AT]
        if magic != MAGIC:
            if magic in (0, 1):
                raise _invalid(f"magic {magic} record batches are not accepted (Produce v3+ needs magic 2)")
            raise _corrupt(f"unknown record batch magic {magic}")
        (length,) = _INT32.unpack_from(data, pos + 8)
        if length < _MIN_LENGTH:
            raise _corrupt(f"record batch length {length} is below the header's {_MIN_LENGTH}")
        end = pos + _LOG_OVERHEAD + length
        if end > size:
            raise _corrupt(f"record batch of {length} bytes is cut short at {size - pos - _LOG_OVERHEAD}")
        (base_offset, _, leader_epoch, _, crc, attributes, last_offset_delta, base_timestamp,
         max_timestamp, producer_id, producer_epoch, base_sequence, count) = _HEADER.unpack_from(data, pos)
        actual = crc32c(memoryview(data)[pos + _CRC_START:end])
        if actual != crc:
            raise _corrupt(f"record batch CRC-32C is {actual:#010x}, stored {crc:#010x}")
        compression = attributes & _COMPRESSION_MASK
        if compression > COMPRESSION_ZSTD:
            raise RecordBatchError(UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression id {compression}")
        if count < 0:
            raise _invalid(f"record count {count}")
        if compression == COMPRESSION_NONE:
            rdata, rpos, rend = data, pos + HEADER_SIZE, end
        else:
            rdata = decompress(compression, data[pos + HEADER_SIZE:end], max_decompressed)
            rpos, rend = 0, len(rdata)
        made = None if block is None else block(rdata, rpos, rend, count, base_timestamp,
                                                bool(attributes & _TIMESTAMP_TYPE_BIT), max_timestamp)
        if made is not None:
            records = StoredRecords(rdata, rpos, rend, count, *made)
        else:
            records = _decode_records(rdata, rpos, rend, count)
        batches.append(RecordBatch(
            base_offset, leader_epoch, magic, crc, attributes, last_offset_delta, base_timestamp,
            max_timestamp, producer_id, producer_epoch, base_sequence, records))
        pos = end
    return batches


def decode_produce_batch(buf: bytes | bytearray | memoryview, api_version: int, *,
                         max_decompressed: int = MAX_DECOMPRESSED_BYTES, block=None) -> RecordBatch:
    """The one batch of a Produce (v3+) partition, with the checks Kafka's broker makes.

    Beyond :func:`decode_batches`: exactly one batch (``ProduceRequest.validateRecords``),
    zstd only from Produce v7, base offset 0 (``UnifiedLog``), and ``LogValidator``'s rules
    for a client's batch: a positive record count equal to last_offset_delta + 1, no
    control batch, a base sequence for an idempotent producer. Kafka does not check the
    per-record offset deltas of a client batch (it renumbers a compressed one and
    overwrites the base offset of an uncompressed one), so neither does this.
    ``block``: as for :func:`decode_batches`.
    """
    batches = decode_batches(buf, max_decompressed=max_decompressed, block=block)
    if not batches:
        raise _invalid("a Produce partition needs one record batch")
    if len(batches) > 1:
        raise _invalid(f"a Produce partition may hold one record batch, not {len(batches)}")
    batch = batches[0]
    if batch.compression == COMPRESSION_ZSTD and api_version < 7:
        raise RecordBatchError(UNSUPPORTED_COMPRESSION_TYPE, f"zstd needs Produce v7+, not v{api_version}")
    if batch.base_offset != 0:
        raise _invalid(f"a client's batch must have base offset 0, not {batch.base_offset}")
    count = len(batch.records)
    if batch.last_offset_delta + 1 <= 0 or count <= 0 or batch.last_offset_delta + 1 != count:
        raise _invalid(f"last offset delta {batch.last_offset_delta} and record count {count} disagree")
    if batch.is_control:
        raise _invalid("clients may not write control batches")
    if batch.producer_id >= 0 and batch.base_sequence < 0:
        raise _invalid(f"producer id {batch.producer_id} with base sequence {batch.base_sequence}")
    return batch


def encode_batch(records: Sequence[Record], *, base_offset: int = 0, base_timestamp: int = NO_TIMESTAMP,
                 compression: int = COMPRESSION_NONE, timestamp_type: int = TIMESTAMP_CREATE_TIME,
                 transactional: bool = False, control: bool = False, delete_horizon: bool = False,
                 producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                 base_sequence: int = NO_SEQUENCE, partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                 max_timestamp: int | None = None, last_offset_delta: int | None = None) -> bytes:
    """One v2 batch of ``records`` (deltas relative to ``base_offset``/``base_timestamp``).

    Computed unless given: ``last_offset_delta`` (the largest record offset delta; 0 for
    no records) and ``max_timestamp`` (base + the largest timestamp delta under create
    time; under log-append time pass the append time, as a broker sets it; -1 for no
    records). Raises ValueError for values the format cannot carry, and
    RecordBatchError (UNSUPPORTED_COMPRESSION_TYPE) for a codec not installed.
    """
    if not 0 <= compression <= COMPRESSION_ZSTD:
        raise ValueError(f"unknown compression {compression}")
    if timestamp_type not in (TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME):
        raise ValueError(f"unknown timestamp type {timestamp_type}")
    attributes = (compression | (_TIMESTAMP_TYPE_BIT if timestamp_type else 0)
                  | (_TRANSACTIONAL_BIT if transactional else 0) | (_CONTROL_BIT if control else 0)
                  | (_DELETE_HORIZON_BIT if delete_horizon else 0))
    if last_offset_delta is None:
        last_offset_delta = max((r.offset_delta for r in records), default=0)
    if max_timestamp is None:
        max_timestamp = (base_timestamp + max(r.timestamp_delta for r in records)) if records else NO_TIMESTAMP
    plain = b"".join([_encode_record(r) for r in records])
    payload = plain if compression == COMPRESSION_NONE else compress(compression, plain)
    return batch_header(payload, len(records), base_offset=base_offset, base_timestamp=base_timestamp,
                        max_timestamp=max_timestamp, last_offset_delta=last_offset_delta, attributes=attributes,
                        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
                        partition_leader_epoch=partition_leader_epoch) + payload


def batch_header(payload: bytes, count: int, *, base_offset: int, base_timestamp: int, max_timestamp: int,
                 last_offset_delta: int, attributes: int = 0, producer_id: int = NO_PRODUCER_ID,
                 producer_epoch: int = NO_PRODUCER_EPOCH, base_sequence: int = NO_SEQUENCE,
                 partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """The 61-byte header of a batch whose ``count`` records (compressed as ``attributes``
    says) are ``payload``; the batch is this header, then ``payload``. The CRC runs over the
    header's tail, then ``payload``, without joining them (one copy fewer: translate.py's
    Fetch answers). Raises ValueError for a field the format cannot carry."""
    try:
        tail = _POST_CRC.pack(attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id,
                              producer_epoch, base_sequence, count)
        return _PRE_CRC.pack(base_offset, _MIN_LENGTH + len(payload), partition_leader_epoch, MAGIC,
                             crc32c(payload, crc32c(tail))) + tail
    except struct.error as exc:
        raise ValueError(f"a batch header field is out of range: {exc}") from None


__all__ = [
    "COMPRESSION_GZIP", "COMPRESSION_LZ4", "COMPRESSION_NAMES", "COMPRESSION_NONE", "COMPRESSION_SNAPPY",
    "COMPRESSION_ZSTD", "CORRUPT_MESSAGE", "HEADER_SIZE", "INVALID_RECORD", "MAGIC",
    "MAX_DECOMPRESSED_BYTES", "NO_PARTITION_LEADER_EPOCH", "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID",
    "NO_SEQUENCE", "NO_TIMESTAMP", "Record", "RecordBatch", "RecordBatchError", "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME", "UNSUPPORTED_COMPRESSION_TYPE", "batch_header", "decode_batches",
    "decode_produce_batch", "encode_batch", "zigzag_bytes",
]
