"""``df.write.format("ferry")`` and ``writeStream.format("ferry")``: idempotent appends.

Theory of operation
-------------------
Each Spark task writes its rows with its own connection, grouped per Ferry
partition and sent in chunks (:func:`adapters.spark.client.chunked` bounds).
Every chunk carries a producer tag (adapters/iggy/producer.py): producer id
``spark:<run>:<task partition>`` and sequence ``batch id << 20 | chunk
number within that Ferry partition``. The gateway's core stores the highest
sequence per producer and partition with the data and drops any append whose
sequence is not above it (core/log). So when Spark re-runs a micro-batch
after a crash (it replays the last uncommitted batch id, spark-datasource.md
section 5) or retries a task, chunks that already reached the log are
acknowledged and dropped, and the ones that did not are written: the topic
holds each row once.

``<run>`` is the streaming query id, stable across restarts of one
checkpoint (TaskContext local property ``sql.streaming.queryId``), with the
micro-batch id from ``streaming.sql.batchId``; a batch write draws a fresh
UUID when it is planned (batch id 0), so task retries within the job are
de-duplicated while two separate jobs both append.

This relies on a task seeing the same rows in the same order when it is
re-run, which holds for plans without a shuffle before the sink (a source ->
project/filter -> sink pipeline); after a shuffle whose order is not fixed,
a replay may drop or repeat rows of a partly written batch (docs/spark.md).

Rows are routed explicitly so a replay lands where the first attempt did: a
``partition`` column wins; else a ``key`` column hashes as the gateway does
(xxh32 modulo the partition count, core/broker.py ``choose_partition``);
else rows go round robin starting at the task's partition number.
"""

from __future__ import annotations

import logging
import struct
import uuid
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
import xxhash
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType, BinaryType, IntegerType, LongType, ShortType, StringType, StructType, TimestampType,
)

from adapters.iggy.producer import PRODUCER_ID_KEY, PRODUCER_SEQ_KEY
from core.compiled import load
from core.header_value import HeaderKind, HeaderValue
from core.message import Headers

from .client import DEFAULT_SEND_COUNT, MAX_SEND_BYTES, FerryClientError
from .options import FerryOptionError, SinkOptions, sink_options

log = logging.getLogger("ferry.spark")

SEQ_CHUNK_BITS = 20  # chunks per (task, Ferry partition, batch) before the sequence would collide
MAX_CHUNKS = 1 << SEQ_CHUNK_BITS  # ~1M chunks of up to 5000 messages: far above any one task's batch
MAX_BATCH_ID = (1 << (63 - SEQ_CHUNK_BITS)) - 1  # the core stores sequences as i64
_INTS = (IntegerType, LongType, ShortType)


@dataclass(frozen=True)
class Sink:
    """Everything a writing task needs: plain data, pickled to executors."""

    opts: SinkOptions
    run: str  # batch writes: a UUID drawn at planning; streaming: "" (the query id is read on the executor)
    columns: tuple[str, ...]


@dataclass
class FerryCommit(WriterCommitMessage):
    task: int
    count: int


def _check_schema(schema: StructType) -> tuple[str, ...]:
    fields = {f.name: f.dataType for f in schema.fields}
    payload = fields.get("payload")
    if not isinstance(payload, (BinaryType, StringType)):
        raise FerryOptionError("payload: the DataFrame needs a 'payload' column of binary or string type")
    checks = {
        "partition": lambda t: isinstance(t, _INTS),
        "key": lambda t: isinstance(t, (BinaryType, StringType)),
        "id": lambda t: isinstance(t, StringType),
        "timestamp": lambda t: isinstance(t, TimestampType),
        "headers": lambda t: isinstance(t, ArrayType) and isinstance(t.elementType, StructType)
        and {"key", "value"} <= set(t.elementType.fieldNames()),
    }
    for name, ok in checks.items():
        if name in fields and not ok(fields[name]):
            raise FerryOptionError(f"{name}: column has type {fields[name].simpleString()}, "
                                   "see docs/spark.md for the columns a write understands")
    return tuple(fields)


def sink_for(options, schema: StructType, overwrite: bool) -> Sink:
    if overwrite:
        raise FerryOptionError("mode: Ferry topics are append-only; use mode('append')")
    return Sink(sink_options(options), "", _check_schema(schema))


_KIND_LEN = struct.Struct("<BI")  # one TLV field head (core/message.py, Headers.encode)
_KIND_CODES = {k.json_name: k for k in HeaderKind}
MAX_FIELD = 255  # a header key or value is 1..255 bytes (core/header_value.py)


def _field(kind: HeaderKind, data: bytes) -> bytes:
    """One TLV field, checked as the gateway will check it (so a bad row fails with
    a message naming the column, not with an Iggy status from the gateway)."""
    size = kind.fixed_size
    if not 1 <= len(data) <= MAX_FIELD or (size is not None and len(data) != size):
        HeaderValue(kind, data)  # raises the precise InvalidHeaderKey/Value error
    return _KIND_LEN.pack(kind, len(data)) + data


def _header_blocks(col, n: int) -> list[bytes]:
    """The TLV block of every row of an ``array<struct<key, kind?, value>>`` column.

    Works on the flattened child arrays (one ``to_pylist`` per field, not a dict
    per header): about three times faster than converting each row's list."""
    offs = col.offsets.to_pylist()
    child = col.values
    names = [child.type.field(i).name for i in range(child.type.num_fields)]
    keys = child.field("key").to_pylist()
    values = child.field("value").to_pylist()
    kinds = child.field("kind").to_pylist() if "kind" in names else [None] * len(keys)
    string = HeaderKind.STRING
    out = []
    for i in range(n):
        parts = []
        for j in range(offs[i], offs[i + 1]):
            value, key = values[j], keys[j]
            if value is None or key is None:
                continue
            name = kinds[j] or ("string" if isinstance(value, str) else "raw")
            kind = _KIND_CODES.get(name)
            if kind is None:
                raise FerryOptionError(f"headers: unknown kind {name!r} (use the Iggy JSON names: string, uint64...)")
            data = value.encode("utf-8") if isinstance(value, str) else value
            parts.append(_field(string, key.encode("utf-8")))
            parts.append(_field(kind, data))
        out.append(b"".join(parts))
    return out


def _message_id(text: str) -> int:
    try:
        value = int(text, 16)
    except ValueError:
        value = -1
    if not 0 <= value < 1 << 128:
        raise FerryOptionError(f"id: {text!r} is not a u128 in hex (32 hex digits, as the source produces)")
    return value


def _tag(producer: str, seq: int, headers: bytes) -> bytes:
    return Headers([(PRODUCER_ID_KEY, producer), (PRODUCER_SEQ_KEY, HeaderValue.int64(seq))]).encode() + headers


def _rows(batch, columns: tuple[str, ...]) -> Iterator[tuple]:
    """``(payload, headers, id, origin, partition, key)`` per row of one Arrow batch."""
    n = batch.num_rows
    col = {name: batch.column(i) for i, name in enumerate(batch.schema.names)}
    none = [None] * n
    payloads = col["payload"].to_pylist()
    headers = _header_blocks(col["headers"], n) if "headers" in col else [b""] * n
    ids = col["id"].to_pylist() if "id" in col else none
    stamps = col["timestamp"].cast("int64").to_pylist() if "timestamp" in col else none
    parts = col["partition"].to_pylist() if "partition" in col else none
    keys = col["key"].to_pylist() if "key" in col else none
    for i in range(n):
        p = payloads[i]
        if p is None:
            raise FerryOptionError("payload: a row has a null payload")
        yield (p.encode("utf-8") if isinstance(p, str) else p, headers[i],
               _message_id(ids[i]) if ids[i] else 0, stamps[i] or 0, parts[i],
               keys[i].encode("utf-8") if isinstance(keys[i], str) else keys[i])


# -- encoding: rows -> dialect-2 SendMessages chunks ----------------------------------------
# The open chunk of each Ferry partition is kept as the bytes client.send would put on the
# wire for it (adapters/iggy/messages.py ``_MessagesV2.write``: u32 count, one index entry
# ``u32 0, u32 end, u64 0`` per message, then per message the 64-byte head of core/record.py,
# the payload and the TLV headers): index entries and records in two bytearrays per
# partition, written once and sent as they are (client ``send_encoded``), with no Python
# object per message. The bytearrays are reused chunk after chunk (a fresh one per chunk
# put every chunk on new pages: page faults cost more than the encoding, _sinkenc.c). The
# Python loop below and its compiled twin (adapters/spark/_sinkenc.c) write the same state;
# tests/spark/test_spark_sink_encode.py checks both send the bytes client.send sent for the
# WireMessages the loop used to build.
_HEAD = struct.Struct("<QQQQQQIIQ")  # adapters/iggy/messages.py MIDDLE_HEADER (core/record.py)
_INDEX = struct.Struct("<IIQ")
_U32 = struct.Struct("<I")
_U64_MASK = (1 << 64) - 1
SIZE_OVERHEAD = 80  # a message's stored head and index entry, as client.chunked counts a send
_KIND_TABLE = tuple((k.json_name.encode(), int(k), k.fixed_size or 0) for k in HeaderKind)  # for the C twin
_C = load("adapters.spark._sinkenc")
COMPILED = _C is not None


class Chunks:
    """One task's open chunks, per Ferry partition: message count, size as the
    chunking limits count it (``SIZE_OVERHEAD`` + payload + row headers, the tag not
    counted), chunks closed so far, record bytes written, and the index entries and
    records in two reused bytearrays (their length is a high-water mark, not the
    chunk's). ``send(pid, chunk number, parts)`` gets each closed chunk's messages
    field as ``(u32 count, index entries, records)``, in the order chunks fill; the
    views in ``parts`` are released when it returns."""

    def __init__(self, n: int, producer: str, batch_id: int, where: str, send) -> None:
        self.n, self.producer, self.where, self.send = n, producer, where, send
        self.seq_base = batch_id << SEQ_CHUNK_BITS
        self.counts, self.sizes, self.chunks, self.lengths = [0] * n, [0] * n, [0] * n, [0] * n
        self.index = [bytearray() for _ in range(n)]
        self.body = [bytearray() for _ in range(n)]
        self._template: bytes | None = None

    def tag_template(self) -> bytes:
        """``_tag(producer, seq, b"")`` with the int64 sequence as its last 8 bytes (what
        the C loop patches per chunk); checked against _tag once per task."""
        if self._template is None:
            t = _tag(self.producer, 0, b"")
            probe = (1 << 62) | 5
            if _tag(self.producer, probe, b"") != t[:-8] + probe.to_bytes(8, "little"):
                raise AssertionError("producer tag: the sequence is not the block's last 8 bytes")
            self._template = t
        return self._template

    def add(self, pid: int, mid: int, payload: bytes, headers: bytes, origin: int) -> None:
        count = self.counts[pid]
        hdr = _tag(self.producer, self.seq_base | self.chunks[pid], headers) if count == 0 else headers
        at = self.lengths[pid]
        rec = _HEAD.pack(0, mid & _U64_MASK, mid >> 64, 0, 0, origin, len(hdr), len(payload), 0) + payload + hdr
        end = self.lengths[pid] = at + len(rec)
        self.body[pid][at:end] = rec  # overwrites the last chunk's bytes, grows past them
        self.index[pid][count * _INDEX.size:(count + 1) * _INDEX.size] = _INDEX.pack(0, end, 0)
        self.counts[pid] = count + 1
        size = self.sizes[pid] = self.sizes[pid] + SIZE_OVERHEAD + len(payload) + len(headers)
        if count + 1 >= DEFAULT_SEND_COUNT or size >= MAX_SEND_BYTES:
            self.close(pid)

    def close(self, pid: int) -> None:
        k, count, used = self.chunks[pid], self.counts[pid], self.lengths[pid]
        self.chunks[pid] = k + 1
        self.counts[pid] = self.sizes[pid] = self.lengths[pid] = 0
        self.emit(pid, k, count, self.index[pid], self.body[pid], used)

    def emit(self, pid: int, k: int, count: int, index: bytearray, body: bytearray, used: int) -> None:
        """Send a closed chunk from its buffers (the C loop calls this too)."""
        iv, bv = memoryview(index)[:count * _INDEX.size], memoryview(body)[:used]
        try:
            self.send(pid, k, (_U32.pack(count), iv, bv))
        finally:  # the buffers are written again next: no view may outlive the send
            iv.release()
            bv.release()

    def finish(self) -> None:
        for pid in range(self.n):
            if self.counts[pid]:
                self.close(pid)


def _encode_python(ch: Chunks, batch, columns: tuple[str, ...], rr: int) -> int:
    """Route and append one batch's rows; returns the round-robin counter after it."""
    n = ch.n
    for payload, headers, mid, origin, part, key in _rows(batch, columns):
        if part is not None:
            pid = part
            if not 0 <= pid < n:
                raise FerryOptionError(f"partition: {pid} is not a partition of {ch.where} (it has {n})")
        elif key is not None:
            pid = xxhash.xxh32_intdigest(key) % n  # as the gateway would (core/broker.py)
        else:
            pid = rr % n
            rr += 1
        ch.add(pid, mid, payload, headers, origin)
    return rr


_LARGE = (pa.large_string(), pa.large_binary())  # 64-bit offsets (spark.sql.execution.arrow.useLargeVarTypes)
_STRINGS = (pa.string(), pa.large_string())
_VAR = (pa.string(), pa.binary(), *_LARGE)


def _var(arr, allowed=_VAR):
    """A string/binary column as _sinkenc.c reads it, or None for any other layout."""
    if not isinstance(arr, pa.Array) or arr.type not in allowed:
        return None
    b = arr.buffers()
    return (b[0] if arr.null_count else None, b[1], b[2], arr.offset, 8 if arr.type in _LARGE else 4)


def _int64(arr):
    if not isinstance(arr, pa.Array):
        return None
    arr = arr.cast(pa.int64())
    b = arr.buffers()
    return (b[0] if arr.null_count else None, b[1], arr.offset)


def _headers_col(col):
    if not isinstance(col, pa.Array) or not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)):
        return None
    child = col.values
    if not pa.types.is_struct(child.type):
        return None
    names = {child.type.field(i).name for i in range(child.type.num_fields)}
    key, value = child.field("key"), child.field("value")
    kind = _var(child.field("kind"), _STRINGS) if "kind" in names else None
    cols = (_var(key, _STRINGS), _var(value), kind)
    if None in cols[:2] or ("kind" in names and kind is None):
        return None
    return (col.buffers()[1], col.offset, 4 if pa.types.is_list(col.type) else 8, *cols, value.type in _STRINGS)


def _encode_compiled(ch: Chunks, batch, columns: tuple[str, ...], rr: int) -> int | None:
    """The C twin of _encode_python; None (state untouched) when the batch needs the
    Python loop: a layout it does not read, or a row it does not take simply (bad
    header, null payload, odd id, partition out of range), so errors keep their text."""
    col = {name: batch.column(i) for i, name in enumerate(batch.schema.names)}
    if ch.n <= 0 or "payload" not in col:
        return None
    opt = {"id": lambda a: _var(a, _STRINGS), "key": _var, "timestamp": _int64, "partition": _int64,
           "headers": _headers_col}
    cols = {name: (fn(col[name]) if name in col else None) for name, fn in opt.items()}
    payload = _var(col["payload"])
    if payload is None or any(cols[name] is None for name in opt if name in col):
        return None
    return _C.encode_rows(batch.num_rows, payload, cols["headers"], cols["id"], cols["timestamp"],
                          cols["partition"], cols["key"], ch.n, rr, _KIND_TABLE, ch.tag_template(), ch.seq_base,
                          DEFAULT_SEND_COUNT, MAX_SEND_BYTES, ch.counts, ch.sizes, ch.chunks, ch.lengths,
                          ch.index, ch.body, ch.emit)


def encode_task(ch: Chunks, batches: Iterator, columns: tuple[str, ...], task: int,
                compiled: bool = COMPILED) -> int:
    """Encode and send a task's batches through ``ch``; returns the row count.
    Rows without a partition or key go round robin from the task's number."""
    rr, total = task, 0
    for batch in batches:
        out = _encode_compiled(ch, batch, columns, rr) if compiled and batch.num_rows else None
        rr = _encode_python(ch, batch, columns, rr) if out is None else out
        total += batch.num_rows
    ch.finish()
    return total


def sender(client, stream: str, topic: str, task: int):
    """What a task does with each closed chunk: refuse a chunk number the producer
    sequence has no room for, else send it."""

    def send(pid: int, chunk: int, parts) -> None:
        if chunk >= MAX_CHUNKS:
            raise FerryClientError(f"task {task} wrote more than {MAX_CHUNKS} chunks to partition {pid}")
        client.send_encoded(stream, topic, pid, parts)

    return send


def write_task(sink: Sink, batches: Iterator, run: str, batch_id: int) -> FerryCommit:
    """Write one task's rows; see the module docstring for the idempotency scheme."""
    if not 0 <= batch_id <= MAX_BATCH_ID:
        raise FerryOptionError(f"batch id {batch_id} is outside 0..{MAX_BATCH_ID}")
    ctx = TaskContext.get()
    task = ctx.partitionId() if ctx is not None else 0
    producer = f"spark:{run}:{task}"
    o = sink.opts
    with o.conn.session() as client:
        info = client.topic(o.stream, o.topic)
        if info is None:
            raise FerryClientError(f"topic {o.stream}/{o.topic} does not exist on the gateway")

        chunks = Chunks(len(info.partitions), producer, batch_id, f"{o.stream}/{o.topic}",
                        sender(client, o.stream, o.topic, task))
        total = encode_task(chunks, batches, sink.columns, task)
    return FerryCommit(task, total)


class FerryBatchWriter(DataSourceArrowWriter):
    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.run = uuid.uuid4().hex  # drawn once, on the planner; every task of this job shares it

    def write(self, iterator) -> FerryCommit:
        return write_task(self.sink, iterator, self.run, 0)

    def commit(self, messages) -> None:
        log.info("ferry write committed: %d rows", sum(m.count for m in messages if m is not None))

    def abort(self, messages) -> None:
        # Appends are not transactional: rows from tasks that succeeded stay in the topic.
        log.warning("ferry write aborted; %d rows from finished tasks remain",
                    sum(m.count for m in messages if m is not None))


class FerryStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, sink: Sink) -> None:
        self.sink = sink

    def write(self, iterator) -> FerryCommit:
        ctx = TaskContext.get()
        query = ctx.getLocalProperty("sql.streaming.queryId") if ctx is not None else None
        batch = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
        if not query or batch is None:
            raise FerryClientError("streaming write without a query id / batch id in the task context")
        return write_task(self.sink, iterator, query, int(batch))

    def commit(self, messages, batchId: int) -> None:
        pass  # each chunk was acknowledged durable when sent; nothing is staged

    def abort(self, messages, batchId: int) -> None:
        pass  # a re-run of this batch id is de-duplicated by the producer tags


__all__ = ["FerryBatchWriter", "FerryCommit", "FerryStreamWriter", "Sink", "sink_for"]
