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

import xxhash
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType, BinaryType, IntegerType, LongType, ShortType, StringType, StructType, TimestampType,
)

from adapters.iggy.producer import PRODUCER_ID_KEY, PRODUCER_SEQ_KEY
from core.header_value import HeaderKind, HeaderValue
from core.message import Headers

from .client import DEFAULT_SEND_COUNT, MAX_SEND_BYTES, FerryClientError, WireMessage
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


def write_task(sink: Sink, batches: Iterator, run: str, batch_id: int) -> FerryCommit:
    """Write one task's rows; see the module docstring for the idempotency scheme."""
    if not 0 <= batch_id <= MAX_BATCH_ID:
        raise FerryOptionError(f"batch id {batch_id} is outside 0..{MAX_BATCH_ID}")
    ctx = TaskContext.get()
    task = ctx.partitionId() if ctx is not None else 0
    producer = f"spark:{run}:{task}"
    o = sink.opts
    total = 0
    with o.conn.session() as client:
        info = client.topic(o.stream, o.topic)
        if info is None:
            raise FerryClientError(f"topic {o.stream}/{o.topic} does not exist on the gateway")
        n = len(info.partitions)
        pending: dict[int, list[WireMessage]] = {}
        sizes: dict[int, int] = {}
        chunks: dict[int, int] = {}

        def flush(pid: int) -> None:
            msgs = pending.pop(pid, None)
            sizes.pop(pid, None)
            if not msgs:
                return
            k = chunks.get(pid, 0)
            if k >= MAX_CHUNKS:
                raise FerryClientError(f"task {task} wrote more than {MAX_CHUNKS} chunks to partition {pid}")
            chunks[pid] = k + 1
            first = msgs[0]
            msgs[0] = first._replace(headers=_tag(producer, (batch_id << SEQ_CHUNK_BITS) | k, first.headers))
            client.send(o.stream, o.topic, pid, msgs)

        rr = task
        for batch in batches:
            for payload, headers, mid, origin, part, key in _rows(batch, sink.columns):
                if part is not None:
                    pid = part
                    if not 0 <= pid < n:
                        raise FerryOptionError(f"partition: {pid} is not a partition of {o.stream}/{o.topic} "
                                               f"(it has {n})")
                elif key is not None:
                    pid = xxhash.xxh32_intdigest(key) % n  # as the gateway would (core/broker.py)
                else:
                    pid = rr % n
                    rr += 1
                msg = WireMessage(mid, payload, headers, origin)
                size = 80 + len(payload) + len(headers)
                buf = pending.setdefault(pid, [])
                buf.append(msg)
                sizes[pid] = sizes.get(pid, 0) + size
                total += 1
                if len(buf) >= DEFAULT_SEND_COUNT or sizes[pid] >= MAX_SEND_BYTES:
                    flush(pid)
        for pid in sorted(pending):
            flush(pid)
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
