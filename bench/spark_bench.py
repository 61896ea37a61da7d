"""Spark data source throughput: batch read (Arrow and tuples) and write, rows/s.

What it measures
----------------
A gateway (``ferry serve --only iggy_tcp``, its own process, ``--fsync
never`` so the disk is not what is measured) holds ``--rows`` messages of
``--size`` bytes with one string header, spread over ``--partitions``
partitions. A SparkSession on ``local[2]`` then runs, each timed from the
action's start to its end, best of ``--repeat``:

* ``synthetic``: a Python data source with the same schema that yields one
  Arrow batch of that shape, built once per task and sliced, with no I/O and
  no per-row Python: Spark's own cost of taking such batches from a Python
  source, the ceiling here (the denominator of every ``x ceiling`` ratio,
  measured in the same run). Before 2026-11-25 it built every batch row by
  row in Python, which made it a lower, flattering ceiling;
* ``ferry read, arrow``: ``spark.read.format("ferry")`` (Arrow batches from read());
* ``synthetic stream``: the synthetic batches as a streaming source (offsets are
  row numbers, ``parts`` tasks per micro-batch, admission control and
  availableNow as Ferry's reader), run as the Ferry stream below: the streaming
  ceiling, i.e. what Spark's micro-batch machinery leaves of the batch ceiling
  (the ``x stream`` column divides the Ferry stream's whole-query rate by the
  synthetic stream's, and its micro-batch rate by the synthetic's micro-batch rate);
* ``ferry stream, arrow``: ``readStream.format("ferry")`` from ``earliest`` in
  micro-batches of ``STREAM_BATCH`` rows (``Trigger.AvailableNow``) into the
  streaming ``noop`` sink, timed from ``start()`` to the end of the query; the
  ``its micro-batches`` rows are the same rows over the sum of Spark's own
  ``triggerExecution`` times (query progress), without the per-query start
  (a new Python source runner, planning, checkpoint setup). One query of each
  stream runs first as a warm-up (the JVM's JIT, as the batch warm-up read);
* ``ferry read, tuples``: the batch read yielding one tuple per row (what a
  naive source does), for comparison (``--skip-tuples`` skips it);
* ``synthetic write (no I/O)``: the same DataFrame written to a Python Arrow writer
  that only counts the batches Spark hands it: the ceiling of any Python data source's
  write here (the write row's ``x stream`` column divides by it);
* ``ferry write, arrow``: ``df.write.format("ferry")`` of a DataFrame of the same
  shape (``spark.range`` + payload + header), Arrow writer.

Each read job ends in the ``noop`` sink, so Spark materialises every row but
writes nothing. Targets (issue 17): >= 1M rows/s and >= 0.8x the ceiling for
the batch read and the micro-batches, >= 0.3M rows/s for the write, on
local[2]. Figures on a shared 2-core machine move with its load (printed); the
ratio to the ceiling, measured in the same run, is the steadier number.

``CPU µs/row`` is the CPU time (from /proc) per row in the best run of the
gateway process, the JVM and the Python processes below this one (Spark's
workers, the streaming source runner), reaped children included: the JVM's
reaped children (the source runner of a finished query) count as workers.

Usage: ``.venv/bin/python bench/spark_bench.py [--rows 1000000] [--repeat 2]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers must import Ferry and pyarrow
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import pyarrow as pa  # noqa: E402
from _harness import free_port, stop, wait_listening  # noqa: E402
from pyspark.sql.datasource import (  # noqa: E402
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow  # noqa: E402

from adapters.spark.batches import ARROW_SCHEMA, COMPILED, SCHEMA_DDL, polled_to_batch  # noqa: E402
from adapters.spark.client import FerryClient, WireMessage  # noqa: E402
from adapters.spark.source import FerryBatchReader, FerryDataSource, FerryRange  # noqa: E402
from core.message import Headers  # noqa: E402

SEED = 20261123
STREAM_BATCH = 250_000  # maxOffsetsPerTrigger of the streaming row: 4 micro-batches of 1M rows
START_LIMIT_S = 30
SYNTH_BATCH = 45_000  # rows per synthetic Arrow batch: about one poll of 100 B messages (client.TARGET_POLL_BYTES)


# -- the no-I/O ceiling -----------------------------------------------------------------
class SynthRange(InputPartition):
    def __init__(self, rows: int, size: int) -> None:
        self.rows, self.size = rows, size


class SynthReader(DataSourceReader):
    def __init__(self, rows: int, size: int, parts: int) -> None:
        self.rows, self.size, self.parts = rows, size, parts

    def partitions(self):
        per = -(-self.rows // self.parts)
        return [SynthRange(min(per, self.rows - i * per), self.size) for i in range(self.parts)]

    def read(self, r):
        return synthetic_read(r)


def synthetic_read(r: SynthRange):
    # One batch built once per task (offsets and ids repeat: the noop sink does not
    # care), then sliced: no per-row Python at all, so this is Spark's own cost of
    # taking Arrow batches of this shape from a Python source.
    if r.rows <= 0:
        return
    n0 = min(SYNTH_BATCH, r.rows)
    template = synthetic_batch(n0, r.size)
    for lo in range(0, r.rows, n0):
        yield template.slice(0, min(n0, r.rows - lo))


class SynthStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The same batches as a stream: offsets ``{"row": n}`` up to ``rows``, admission
    control and availableNow as Ferry's reader, ``parts`` tasks per micro-batch (Ferry's
    reader makes one per partition). The streaming ceiling: what Spark's micro-batch
    machinery leaves of the batch ceiling, with no I/O and no per-row Python."""

    def __init__(self, rows: int, size: int, parts: int, max_rows: int | None) -> None:
        self.rows, self.size, self.parts, self.max_rows = rows, size, parts, max_rows

    def initialOffset(self):
        return {"row": 0}

    def prepareForTriggerAvailableNow(self):
        pass

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.max_rows) if self.max_rows else ReadAllAvailable()

    def latestOffset(self, start, limit):
        lo = start["row"]
        n = self.rows - lo
        if isinstance(limit, ReadMaxRows):
            n = min(n, limit.max_rows)
        return {"row": lo + n}

    def partitions(self, start, end):
        lo, hi = start["row"], end["row"]
        per = -(-(hi - lo) // self.parts)
        return [SynthRange(min(per, hi - a), self.size) for a in range(lo, hi, per)] if hi > lo else []

    def read(self, r):
        return synthetic_read(r)

    def commit(self, end):
        pass


def synthetic_batch(n: int, size: int) -> pa.RecordBatch:
    """``n`` rows of Ferry's schema, one string header each, built with Arrow calls."""
    header = pa.array([[{"key": "trace", "kind": "string", "value": b"abcdefgh"}]],
                      ARROW_SCHEMA.field("headers").type)
    ids = pa.array(["%032x" % i for i in range(n)], pa.string())  # once per task
    return pa.RecordBatch.from_arrays([
        pa.repeat(pa.scalar("bench", pa.string()), n), pa.repeat(pa.scalar("t", pa.string()), n),
        pa.repeat(pa.scalar(0, pa.int32()), n), pa.array(range(n), pa.int64()),
        pa.repeat(pa.scalar(1_700_000_000_000_000, pa.timestamp("us", tz="UTC")), n), ids,
        pa.repeat(header[0], n), pa.repeat(pa.scalar(bytes(size), pa.binary()), n),
    ], schema=ARROW_SCHEMA)


class SynthCommit(WriterCommitMessage):
    def __init__(self, rows: int) -> None:
        self.rows = rows


class SynthWriter(DataSourceArrowWriter):
    """Takes the Arrow batches Spark hands a Python writer and drops them: the
    ceiling of any Python data source's write (the denominator of the write's
    ``x stream`` column)."""

    def write(self, iterator):
        return SynthCommit(sum(batch.num_rows for batch in iterator))


class SynthSource(DataSource):
    @classmethod
    def name(cls):
        return "ferry_synthetic"

    def schema(self):
        return SCHEMA_DDL

    def reader(self, schema):
        o = self.options
        return SynthReader(int(o["rows"]), int(o["size"]), int(o["parts"]))

    def writer(self, schema, overwrite):
        return SynthWriter()

    def streamReader(self, schema):
        o = self.options
        return SynthStreamReader(int(o["rows"]), int(o["size"]), int(o["parts"]),
                                 int(o["maxOffsetsPerTrigger"]) if "maxOffsetsPerTrigger" in o else None)


# -- the same Ferry read, one tuple per row ------------------------------------------------
class TupleReader(FerryBatchReader):
    def read(self, r):
        if not isinstance(r, FerryRange):
            return
        with self.opts.conn.session() as client:
            for polled in client.poll_range(self.opts.stream, r.topic, r.partition, r.start, r.end,
                                            self.opts.poll_count):
                batch = polled_to_batch(self.opts.stream, r.topic, polled, r.end)
                if batch is not None:
                    yield from zip(*(c.to_pylist() for c in batch.columns))


class TupleSource(FerryDataSource):
    @classmethod
    def name(cls):
        return "ferry_tuples"

    def reader(self, schema):
        from adapters.spark.options import source_options

        return TupleReader(source_options(self.options, streaming=False))


# -- harness -------------------------------------------------------------------------------
def start_gateway(data: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from gateway.cli import main; sys.exit(main())", "serve", "--only", "iggy_tcp", "--host",
                             "127.0.0.1", "--iggy-tcp-port", str(port), "--data", str(data), "--fsync", "never",
                             "--log-level", "warning"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if wait_listening(port, proc, START_LIMIT_S, pause=0.1, connect_timeout=1):
        return proc, port
    if proc.poll() is not None:
        raise RuntimeError(f"gateway exited: {proc.stderr.read().decode()[-2000:]}")
    proc.kill()
    raise RuntimeError("gateway did not listen in time")


def produce(port: int, rows: int, size: int, partitions: int) -> float:
    payload = bytes((SEED + i) % 256 for i in range(size))
    headers = Headers({"trace": "abcdefgh"}).encode()
    t0 = time.perf_counter()
    with FerryClient("127.0.0.1", port) as c:
        c.ensure_topic("bench", "t", partitions)
        per = rows // partitions
        for p in range(partitions):
            n = per + (1 if p < rows % partitions else 0)
            c.send_many("bench", "t", p, (WireMessage(0, payload, headers) for _ in range(n)))
    return rows / (time.perf_counter() - t0)


def _stat(pid: int) -> tuple[int, str, float, float] | None:
    """(parent pid, command name, own CPU seconds, its reaped children's) from /proc."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = text[text.index("(") + 1 : text.rindex(")")]
    f = text.rsplit(")", 1)[1].split()
    tck = os.sysconf("SC_CLK_TCK")
    return int(f[1]), comm, (int(f[11]) + int(f[12])) / tck, (int(f[13]) + int(f[14])) / tck


def tree_cpu(gateway: int) -> dict[str, float]:
    """CPU seconds so far of the gateway, the JVM and the Python workers (every
    Python process below this one but the gateway). Workers are reused between
    jobs (spark.python.worker.reuse), and one that exits is counted by its
    parent's reaped-children time, so differences of two calls are per job."""
    procs = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (st := _stat(int(d.name))) is not None:
            procs[int(d.name)] = st
    out = {"gateway": procs.get(gateway, (0, "", 0.0, 0.0))[2], "jvm": 0.0, "workers": 0.0}
    me = os.getpid()
    for pid, (ppid, comm, own, reaped) in procs.items():
        if pid == gateway:
            continue
        up, seen = ppid, 0
        while up not in (me, 0, 1) and up in procs and seen < 64:
            up, seen = procs[up][0], seen + 1
        if up == me:
            # The JVM's reaped children are Python processes it started itself (the
            # streaming source runner, one per query, and planner workers): their CPU
            # lands in the JVM's cutime when they exit, but it is Python's, not Java's
            # (before 2026-11-27 it was counted as the JVM's: ~2 s per streaming query).
            out["jvm" if comm == "java" else "workers"] += own
            out["workers"] += reaped
    return out


def timed(fn, repeat: int, pid: int) -> tuple[float, dict[str, float]]:
    """Best wall time of ``repeat`` runs, and CPU seconds per process group in that run."""
    best, cpu = float("inf"), {}
    for _ in range(repeat):
        c0, t0 = tree_cpu(pid), time.perf_counter()
        fn()
        took = time.perf_counter() - t0
        if took < best:
            c1 = tree_cpu(pid)
            best, cpu = took, {k: c1[k] - c0[k] for k in c0}
    return best, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--skip-tuples", action="store_true", help="the tuple read is slow; skip it")
    ap.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                    help="an extra read option, e.g. pollCount=50000 (repeatable)")
    args = ap.parse_args()

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    tmp = Path(tempfile.mkdtemp(prefix="ferry-spark-bench-", dir=".")).resolve()
    proc = None
    spark = None
    try:
        proc, port = start_gateway(tmp / "data")
        load0 = os.getloadavg()[0]
        produce_rate = produce(port, args.rows, args.size, args.partitions)
        spark = (SparkSession.builder.master("local[2]").appName("ferry-bench")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "2g")
                 .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                 .config("spark.local.dir", str(tmp / "spark")).getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        for src in (FerryDataSource, SynthSource, TupleSource):
            spark.dataSource.register(src)
        opts = {"servers": f"127.0.0.1:{port}", "stream": "bench", "topic": "t"}
        opts |= dict(o.split("=", 1) for o in args.option)
        n = args.rows

        def read(fmt, **o):
            return lambda: spark.read.format(fmt).options(**o).load().write.format("noop").mode("overwrite").save()

        results = []
        read("ferry", **opts)()  # warm-up: Python workers, first data-source job
        gw = proc.pid

        def add(name, took_cpu):
            took, cpu = took_cpu
            results.append((name, n / took, {k: v / n * 1e6 for k, v in cpu.items()}))

        runs = iter(range(1_000_000))

        def stream(fmt, batch_s: list[float], **o):
            def run():
                # Micro-batches of at most STREAM_BATCH rows, all there is (availableNow), into
                # the streaming noop sink; a fresh checkpoint each time so every run reads it all.
                q = (spark.readStream.format(fmt).options(**o).option("maxOffsetsPerTrigger", str(STREAM_BATCH))
                     .load().writeStream.format("noop").trigger(availableNow=True)
                     .option("checkpointLocation", str(tmp / f"ckpt{next(runs)}")).start())
                q.awaitTermination()
                if q.exception() is not None:
                    raise RuntimeError(f"streaming read failed: {q.exception()}")
                # Spark's own per-micro-batch timing, without the query's start and stop
                # (a new Python source runner per query, planning, checkpoint setup).
                progress = [b for b in q.recentProgress if b["numInputRows"]]
                assert sum(b["numInputRows"] for b in progress) == n, progress
                batch_s.append(sum(b["durationMs"]["triggerExecution"] for b in progress) / 1000)
            return run

        synth = {"rows": str(n), "size": str(args.size), "parts": str(args.partitions)}
        # Warm-up of the streaming path too: the first streaming queries of a JVM spend
        # seconds of C2 compiling Spark's own per-micro-batch code (JFR: most of it in the
        # closure cleaner's ASM ClassReader.readCode), which would otherwise land on
        # whichever streaming row runs first.
        stream("ferry_synthetic", [], **synth)()
        stream("ferry", [], **opts, startingOffsets="earliest")()
        add("synthetic (no I/O)", timed(read("ferry_synthetic", **synth), args.repeat, gw))
        add("ferry read, arrow", timed(read("ferry", **opts), args.repeat, gw))
        synth_s: list[float] = []
        add("synthetic stream", timed(stream("ferry_synthetic", synth_s, **synth), args.repeat, gw))
        results.append(("  its micro-batches", n / min(synth_s), None))
        ferry_s: list[float] = []
        add("ferry stream, arrow", timed(stream("ferry", ferry_s, **opts, startingOffsets="earliest"), args.repeat, gw))
        results.append(("  its micro-batches", n / min(ferry_s), None))
        if not args.skip_tuples:
            add("ferry read, tuples", timed(read("ferry_tuples", **opts), 1, gw))
        with FerryClient("127.0.0.1", port) as c:
            c.ensure_topic("bench", "w", args.partitions)
        df = spark.range(n, numPartitions=2).select(
            F.lit(bytes(args.size)).alias("payload"),
            F.array(F.struct(F.lit("trace").alias("key"), F.lit("string").alias("kind"),
                             F.lit(b"abcdefgh").alias("value"))).alias("headers"))
        wopts = {k: v for k, v in opts.items() if k not in ("pollCount", "maxRecordsPerPartition")} | {"topic": "w"}
        # Warm-up of the write path (JIT of Spark's Python-writer plan, the workers' imports):
        # whichever write row runs first would otherwise pay it.
        df.limit(100_000).write.format("ferry_synthetic").mode("append").save()
        df.limit(100_000).write.format("ferry").options(**wopts).mode("append").save()
        add("synthetic write (no I/O)",
            timed(lambda: df.write.format("ferry_synthetic").mode("append").save(), 1, gw))
        add("ferry write, arrow", timed(lambda: df.write.format("ferry").options(**wopts).mode("append").save(), 1, gw))

        ceiling = results[0][1]
        print(f"\n{n} rows, {args.size} B payload, 1 header, {args.partitions} partitions, local[2], "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} "
              f"(at the start: {load0:.1f}), {'compiled loops' if COMPILED else 'pure Python'}")
        print(f"(producing them through the client: {produce_rate:,.0f} msgs/s; "
              f"streaming: micro-batches of {STREAM_BATCH:,} rows)\n")
        # The streaming rows also against the synthetic stream (same row kind: whole
        # query or micro-batches): what is left once Spark's micro-batch machinery is paid.
        # The write also against the synthetic write: what is left once Spark's own
        # hand-over of Arrow batches to a Python writer is paid.
        head = (f"{'path':<24}{'rows/s':>12}{'x ceiling':>11}{'x stream':>10}  "
                f"CPU µs/row: {'gateway':>8}{'JVM':>8}{'workers':>9}")
        print(head)
        for i, (name, rate, us) in enumerate(results):
            cpu = f"{us['gateway']:>8.2f}{us['jvm']:>8.2f}{us['workers']:>9.2f}" if us else ""
            vs = {4: results[2][1], 5: results[3][1], len(results) - 1: results[-2][1]}.get(i)
            rel = f"{rate / vs:>10.2f}" if vs else f"{'':>10}"
            print(f"{name:<24}{rate:>12,.0f}{rate / ceiling:>11.2f}{rel}  {'':12}{cpu}")
        arrow, streamed, write = results[1][1], results[5][1], results[-1][1]
        for what, rate, goal in (("Arrow batch read", arrow, 1_000_000), ("streaming micro-batches", streamed, 1_000_000),
                                 ("write", write, 300_000)):
            if what == "write":
                print(f"the write is {write / results[-2][1]:.2f}x the synthetic write's rate")
            print(f"target >= {goal:,} rows/s for the {what}: {'met' if rate >= goal else 'NOT met'}"
                  + (f" (and >= 0.8x ceiling: {'met' if rate >= 0.8 * ceiling else 'NOT met'}"
                     if goal == 1_000_000 else "")
                  + (f"; >= 0.8x the synthetic stream's: {'met' if rate >= 0.8 * results[3][1] else 'NOT met'}"
                     if what.startswith("streaming") else "") + (")" if goal == 1_000_000 else ""))
    finally:
        if spark is not None:
            spark.stop()
        if proc is not None:
            stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
