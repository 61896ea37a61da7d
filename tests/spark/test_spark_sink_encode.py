"""adapters/spark/_sinkenc.c and the sink's Python loop (sink.py ``_encode_python``)
against the loop the sink had before them, which built a WireMessage per row and
sent each chunk with ``FerryClient.send`` (the Iggy command table encodes it).

All three run over the same Arrow batches with a client whose socket records
what it is given: the request bytes must be identical (chunk boundaries, producer
tags, ids, origin times, header blocks, routing by partition / key / round
robin), and so must the row count, or the exception and the bytes sent before it
(bad header kinds and sizes, null payloads, bad ids, partitions out of range).
No JVM: the batches are what Spark's Arrow writer hands the sink."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
import xxhash
from header_strategies import PROPS
from hypothesis import given
from hypothesis import strategies as st

from adapters.spark import _sinkenc
from adapters.spark import sink
from adapters.spark.client import FerryClient, FerryClientError, WireMessage
from adapters.spark.options import FerryOptionError
from core.header_value import HeaderKind
from core.message import Headers, HeaderValue

PRODUCER = "spark:0f8e2c5d9a7b4e61a3c2d1e0f9a8b7c6:1"


# -- the sink's loop before the compiled twin (the reference) ------------------------------
def _reference(client, batches, n: int, task: int, batch_id: int) -> int:
    pending: dict[int, list[WireMessage]] = {}
    sizes: dict[int, int] = {}
    chunks: dict[int, int] = {}

    def flush(pid: int) -> None:
        msgs = pending.pop(pid, None)
        sizes.pop(pid, None)
        if not msgs:
            return
        k = chunks.get(pid, 0)
        if k >= sink.MAX_CHUNKS:
            raise FerryClientError(f"task {task} wrote more than {sink.MAX_CHUNKS} chunks to partition {pid}")
        chunks[pid] = k + 1
        msgs[0] = msgs[0]._replace(headers=sink._tag(PRODUCER, (batch_id << sink.SEQ_CHUNK_BITS) | k, msgs[0].headers))
        client.send("s", "t", pid, msgs)

    rr, total = task, 0
    for batch in batches:
        for payload, headers, mid, origin, part, key in sink._rows(batch, ()):
            if part is not None:
                pid = part
                if not 0 <= pid < n:
                    raise FerryOptionError(f"partition: {pid} is not a partition of s/t (it has {n})")
            elif key is not None:
                pid = xxhash.xxh32_intdigest(key) % n
            else:
                pid = rr % n
                rr += 1
            buf = pending.setdefault(pid, [])
            buf.append(WireMessage(mid, payload, headers, origin))
            sizes[pid] = sizes.get(pid, 0) + 80 + len(payload) + len(headers)
            total += 1
            if len(buf) >= sink.DEFAULT_SEND_COUNT or sizes[pid] >= sink.MAX_SEND_BYTES:
                flush(pid)
    for pid in sorted(pending):
        flush(pid)
    return total


class _Wire:
    """A socket that keeps what is sent (copied: the sink reuses its buffers)."""

    def __init__(self) -> None:
        self.data = bytearray()

    def sendall(self, b) -> None:
        self.data += b


def _client() -> FerryClient:
    c = FerryClient("127.0.0.1", 1)
    c._sock = _Wire()
    c._reply = lambda cmd: b""  # every send acknowledged
    return c


def _run(mode: str, batches, n: int, task: int = 1, batch_id: int = 3):
    """(bytes sent, row count or None, (exception type, text) or None)."""
    c = _client()
    try:
        if mode == "reference":
            total = _reference(c, batches, n, task, batch_id)
        else:  # the C twin imported directly, so it runs under FERRY_PURE_PYTHON=1 as well
            ch = sink.Chunks(n, PRODUCER, batch_id, "s/t", sink.sender(c, "s", "t", task))
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(sink, "_C", _sinkenc)
                total = sink.encode_task(ch, iter(batches), (), task, compiled=mode == "compiled")
        return bytes(c._sock.data), total, None
    except Exception as exc:  # noqa: BLE001 - compared below, type and text
        return bytes(c._sock.data), None, (type(exc), str(exc))


def _agree(batches, n: int, task: int = 1, batch_id: int = 3):
    ref = _run("reference", batches, n, task, batch_id)
    py = _run("python", batches, n, task, batch_id)
    c = _run("compiled", batches, n, task, batch_id)
    assert py[2] == ref[2] and c[2] == ref[2], (ref[2], py[2], c[2])
    assert py[1] == ref[1] and c[1] == ref[1]
    assert py[0] == ref[0], "the Python loop's bytes differ from client.send's"
    assert c[0] == ref[0], "the compiled loop's bytes differ from client.send's"
    return ref


# -- batches ------------------------------------------------------------------------------------
FIXED = {k.json_name: k.fixed_size for k in HeaderKind if k.fixed_size}
NAMES = [k.json_name for k in HeaderKind]


@st.composite
def _header(draw, valid: bool, value_str: bool, with_kind: bool):
    key = draw(st.one_of(st.none(), st.text(min_size=1, max_size=6),
                         *([st.just(""), st.just("k" * 256)] if not valid else [])))
    kind = draw(st.one_of(st.none(), st.just(""), st.sampled_from(NAMES),
                          *([st.just("u16")] if not valid else []))) if with_kind else None
    size = FIXED.get(kind or "")
    if size is None:
        lo, hi = (1, 12) if valid else (0, 260)
    else:
        lo = hi = size if valid or draw(st.booleans()) else size + 1
    if value_str:
        value = draw(st.one_of(st.none(), st.text("ab\u00e9", min_size=lo, max_size=hi)))
        if value is not None and not lo <= len(value.encode()) <= hi:
            value = "a" * lo  # é is two bytes: keep the length the kind needs
    else:
        value = draw(st.one_of(st.none(), st.binary(min_size=lo, max_size=hi)))
    entry = {"key": key, "value": value}
    if with_kind:
        entry["kind"] = kind
    return None if draw(st.integers(0, 15)) == 0 else entry  # a null struct now and then


def _ids(valid: bool):
    good = st.one_of(st.none(), st.just(""), st.integers(0, (1 << 128) - 1).map(lambda v: "%032x" % v),
                     st.integers(0, 1 << 70).map(lambda v: "%X" % v), st.integers(0, 99).map(lambda v: "000%x" % v))
    # int(text, 16) takes "0x1f", " 1f" and "1_f" (the C loop leaves them to Python); it refuses the rest
    bad = st.sampled_from(["0x1f", " 1f", "1_f", "zz", "-1", "1" + "0" * 32, "+5"])
    return good if valid else st.one_of(good, bad)


@st.composite
def batches(draw, n: int):
    valid = draw(st.booleans())
    rows = draw(st.integers(0, 14))
    cols: dict[str, pa.Array] = {}
    pstr = draw(st.booleans())
    pay = st.text(max_size=20) if pstr else st.binary(max_size=40)
    if not valid:
        pay = st.one_of(pay, st.none())
    cols["payload"] = pa.array(draw(st.lists(pay, min_size=rows, max_size=rows)), pa.string() if pstr else pa.binary())
    if draw(st.booleans()):
        vstr, wkind = draw(st.booleans()), draw(st.booleans())
        fields = [("key", pa.string())] + ([("kind", pa.string())] if wkind else []) \
            + [("value", pa.string() if vstr else pa.binary())]
        lists = st.one_of(st.none(), st.lists(_header(valid, vstr, wkind), max_size=3))
        cols["headers"] = pa.array(draw(st.lists(lists, min_size=rows, max_size=rows)), pa.list_(pa.struct(fields)))
    if draw(st.booleans()):
        cols["id"] = pa.array(draw(st.lists(_ids(valid), min_size=rows, max_size=rows)), pa.string())
    if draw(st.booleans()):
        stamps = draw(st.lists(st.one_of(st.none(), st.integers(0, 1 << 52)), min_size=rows, max_size=rows))
        cols["timestamp"] = pa.array(stamps, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    if draw(st.booleans()):
        part = st.integers(0, n - 1) if valid else st.integers(-1, n)
        cols["partition"] = pa.array(draw(st.lists(st.one_of(st.none(), part), min_size=rows, max_size=rows)),
                                     draw(st.sampled_from([pa.int16(), pa.int32(), pa.int64()])))
    if draw(st.booleans()):
        kstr = draw(st.booleans())
        key = st.text(max_size=6) if kstr else st.binary(max_size=20)
        cols["key"] = pa.array(draw(st.lists(st.one_of(st.none(), key), min_size=rows, max_size=rows)),
                               pa.string() if kstr else pa.binary())
    batch = pa.RecordBatch.from_pydict(cols)
    if rows and draw(st.booleans()):  # Arrow slices: every column then starts at an offset
        start = draw(st.integers(0, rows - 1))
        batch = batch.slice(start, draw(st.integers(0, rows - start)))
    return batch


@st.composite
def tasks(draw):
    n = draw(st.integers(1, 4))
    return n, draw(st.lists(batches(n), min_size=1, max_size=3))


@PROPS
@given(task=tasks(), t=st.integers(0, 3), batch_id=st.integers(0, 5),
       max_count=st.integers(1, 6), max_bytes=st.integers(120, 1500))
def test_compiled_python_and_reference_send_the_same_bytes(task, t, batch_id, max_count, max_bytes):
    n, bs = task
    with pytest.MonkeyPatch.context() as mp:  # small chunks: several per partition and per batch
        mp.setattr(sink, "DEFAULT_SEND_COUNT", max_count)
        mp.setattr(sink, "MAX_SEND_BYTES", max_bytes)
        _agree(bs, n, t, batch_id)


HEADER = pa.struct([("key", pa.string()), ("kind", pa.string()), ("value", pa.binary())])


def _bench_batch(rows: int, start: int = 0) -> pa.RecordBatch:
    """The bench's shape (bench/spark_bench.py): 100 B payloads, one string header."""
    return pa.RecordBatch.from_pydict({
        "payload": pa.array([bytes([i % 251]) * 100 for i in range(start, start + rows)], pa.binary()),
        "headers": pa.array([[{"key": "trace", "kind": "string", "value": b"abcdefgh"}]] * rows, pa.list_(HEADER)),
    })


def test_whole_chunks_with_the_real_limits_and_no_fallback(monkeypatch):
    # 12,345 rows in Spark-sized batches over 3 partitions: chunks of DEFAULT_SEND_COUNT
    # that span batches, each partition's buffers reused chunk after chunk.
    bs = [_bench_batch(10_000), _bench_batch(2_345, 10_000)]
    python = _run("python", bs, 3)
    monkeypatch.setattr(sink, "_encode_python", None)  # the compiled loop takes every row itself
    compiled = _run("compiled", bs, 3)
    assert compiled == python and python[1] == 12_345
    assert compiled[0] == _run("reference", bs, 3)[0]


def test_the_byte_limit_closes_chunks_as_before():
    big = pa.RecordBatch.from_pydict({"payload": pa.array([b"x" * 700_000] * 30, pa.binary())})
    ref = _agree([big], 2)
    assert ref[1] == 30


def test_large_offsets_and_every_column_stay_compiled(monkeypatch):
    # spark.sql.execution.arrow.useLargeVarTypes hands 64-bit offsets
    rows = 50
    lhead = pa.large_list(pa.struct([("key", pa.large_string()), ("kind", pa.large_string()),
                                     ("value", pa.large_binary())]))
    batch = pa.RecordBatch.from_pydict({
        "payload": pa.array([b"p%d" % i for i in range(rows)], pa.large_binary()),
        "headers": pa.array([[{"key": "a", "kind": "uint16", "value": b"\x01\x02"},
                              {"key": "b", "kind": None, "value": b"raw"}]] * rows, lhead),
        "id": pa.array(["%032x" % (i << 70 | i) for i in range(rows)], pa.large_string()),
        "timestamp": pa.array(range(rows), pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        "key": pa.array([None if i % 3 else "k%d" % i for i in range(rows)], pa.large_string()),
    })
    want = _run("reference", [batch], 3)
    monkeypatch.setattr(sink, "_encode_python", None)
    assert _run("compiled", [batch], 3) == want


@pytest.mark.parametrize("column,values,error", [
    ("headers", [[{"key": "n", "kind": "uint16", "value": b"\x01"}]], "uint16 must be 2 bytes"),
    ("headers", [[{"key": "n", "kind": "u16", "value": b"\x01"}]], "unknown kind 'u16'"),
    ("headers", [[{"key": "", "kind": "raw", "value": b"\x01"}]], "is 0 bytes"),
    ("payload", [None], "null payload"),
    ("id", ["xyz"], "is not a u128"),
    ("partition", [7], "partition: 7 is not a partition of s/t (it has 2)"),
])
def test_bad_rows_fail_with_the_python_text_after_the_same_sends(column, values, error):
    good = _bench_batch(9)
    cols = {"payload": pa.array([b"a", b"b"] + [b"c"] * (len(values) - 1), pa.binary())}
    if column == "headers":
        cols["headers"] = pa.array([[]] + values, pa.list_(HEADER))
    elif column == "payload":
        cols["payload"] = pa.array([b"a"] + values, pa.binary())
    else:
        cols[column] = pa.array([None] + values, pa.string() if column == "id" else pa.int32())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sink, "DEFAULT_SEND_COUNT", 4)  # chunks of the good batch go out before the error
        sent, total, exc = _agree([good, pa.RecordBatch.from_pydict(cols)], 2)
    assert total is None and error in exc[1] and sent


def test_too_many_chunks_is_refused_as_before():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sink, "DEFAULT_SEND_COUNT", 2)
        mp.setattr(sink, "MAX_CHUNKS", 3)
        sent, total, exc = _agree([_bench_batch(20)], 1)
    assert exc == (FerryClientError, "task 1 wrote more than 3 chunks to partition 0") and sent


def test_a_negative_origin_time_fails_in_both_loops_alike():
    # The reference failed when it encoded the chunk (struct.error from the command
    # table), the loops fail at the row with the same error: u64 cannot hold it.
    batch = pa.RecordBatch.from_pydict({
        "payload": pa.array([b"a", b"b"]),
        "timestamp": pa.array([5, -1], pa.int64()).cast(pa.timestamp("us", tz="UTC"))})
    assert _run("compiled", [batch], 1) == _run("python", [batch], 1)
    assert _run("python", [batch], 1)[2][1] == _run("reference", [batch], 1)[2][1]


def test_send_encoded_frames_as_send_does():
    msgs = [WireMessage(7, b"abc", Headers([("k", HeaderValue.string("v"))]).encode(), 9),
            WireMessage(1 << 100, b"", b"", 0)]
    a, b = _client(), _client()
    a.send("strm", 4, 2, msgs)
    body, index = bytearray(), bytearray()  # the layout Chunks writes
    for m in msgs:
        body += sink._HEAD.pack(0, m.id & sink._U64_MASK, m.id >> 64, 0, 0, m.origin_timestamp,
                                len(m.headers), len(m.payload), 0) + m.payload + m.headers
        index += sink._INDEX.pack(0, len(body), 0)
    b.send_encoded("strm", 4, 2, (sink._U32.pack(len(msgs)), memoryview(index), memoryview(body)))
    assert bytes(b._sock.data) == bytes(a._sock.data)


@PROPS
@given(data=st.binary(max_size=80))
def test_xxh32_matches_the_xxhash_wheel(data):
    assert _sinkenc.xxh32(data) == xxhash.xxh32_intdigest(data)


def test_the_encoder_in_use():
    pure = os.environ.get("FERRY_PURE_PYTHON", "") not in ("", "0")
    assert sink.COMPILED is not pure, "adapters.spark._sinkenc is not built"
