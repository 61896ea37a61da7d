"""Spark data source throughput: batch read (Arrow and tuples) and write, rows/s.

What it measures
----------------
A gateway (``ferry serve --only iggy_tcp``, its own process, ``--fsync
never`` so the disk is not what is measured) holds ``--rows`` messages of
``--size`` bytes with one string header, spread over ``--partitions``
partitions. A SparkSession on ``local[2]`` then runs, each timed from the
action's start to its end, best of ``--repeat``:

* ``synthetic``: a Python data source with the same schema that builds the
  same number of rows in memory as Arrow batches, with no I/O: the ceiling
  this machine's Spark + Python workers allow (the denominator of every
  ``x ceiling`` ratio, measured in the same run);
* ``ferry arrow``: ``spark.read.format("ferry")`` (Arrow batches from read());
* ``ferry tuples``: the same reads, yielding one tuple per row (what a naive
  source does), for comparison;
* ``ferry write``: ``df.write.format("ferry")`` of a DataFrame of the same
  shape (``spark.range`` + payload + header), Arrow writer.

Each read job ends in the ``noop`` sink, so Spark materialises every row but
writes nothing. Target (issue 7): >= 0.5M rows/s for the Arrow batch read on
local[2]. Figures on a shared 2-core machine move between runs; the ratio to
the synthetic ceiling, measured in the same run, is the steadier number.

``gateway µs/row`` is the gateway process's CPU time (from /proc) per row in the best run.

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
from _harness import cpu_seconds, free_port, stop, wait_listening  # noqa: E402
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition  # noqa: E402

from adapters.spark.batches import ARROW_SCHEMA, SCHEMA_DDL, polled_to_batch  # noqa: E402
from adapters.spark.client import FerryClient, WireMessage  # noqa: E402
from adapters.spark.source import FerryBatchReader, FerryDataSource, FerryRange  # noqa: E402
from core.message import Headers  # noqa: E402

SEED = 20261123
START_LIMIT_S = 30
SYNTH_BATCH = 10_000  # rows per synthetic Arrow batch: the same as one default poll


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
        payload = bytes(r.size)
        header = pa.array([[{"key": "trace", "kind": "string", "value": b"abcdefgh"}]] * SYNTH_BATCH,
                          ARROW_SCHEMA.field("headers").type)
        for lo in range(0, r.rows, SYNTH_BATCH):
            n = min(SYNTH_BATCH, r.rows - lo)
            yield pa.RecordBatch.from_arrays([
                pa.array(["bench"] * n, pa.string()), pa.array(["t"] * n, pa.string()),
                pa.array([0] * n, pa.int32()), pa.array(range(lo, lo + n), pa.int64()),
                pa.array([1_700_000_000_000_000] * n, pa.timestamp("us", tz="UTC")),
                pa.array(["%032x" % i for i in range(lo, lo + n)], pa.string()),
                header.slice(0, n), pa.array([payload] * n, pa.binary()),
            ], schema=ARROW_SCHEMA)


class SynthSource(DataSource):
    @classmethod
    def name(cls):
        return "ferry_synthetic"

    def schema(self):
        return SCHEMA_DDL

    def reader(self, schema):
        o = self.options
        return SynthReader(int(o["rows"]), int(o["size"]), int(o["parts"]))


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


def timed(fn, repeat: int, pid: int | None = None) -> tuple[float, float]:
    """Best wall time of ``repeat`` runs, and the gateway's CPU seconds in that run."""
    best, cpu = float("inf"), 0.0
    for _ in range(repeat):
        c0, t0 = cpu_seconds(pid), time.perf_counter()
        fn()
        took = time.perf_counter() - t0
        if took < best:
            best, cpu = took, cpu_seconds(pid) - c0
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
            results.append((name, n / took, cpu / n * 1e6))

        add("synthetic (no I/O)", timed(read("ferry_synthetic", rows=str(n), size=str(args.size), parts="2"),
                                        args.repeat, gw))
        add("ferry read, arrow", timed(read("ferry", **opts), args.repeat, gw))
        if not args.skip_tuples:
            add("ferry read, tuples", timed(read("ferry_tuples", **opts), 1, gw))
        with FerryClient("127.0.0.1", port) as c:
            c.ensure_topic("bench", "w", args.partitions)
        df = spark.range(n, numPartitions=2).select(
            F.lit(bytes(args.size)).alias("payload"),
            F.array(F.struct(F.lit("trace").alias("key"), F.lit("string").alias("kind"),
                             F.lit(b"abcdefgh").alias("value"))).alias("headers"))
        wopts = {k: v for k, v in opts.items() if k not in ("pollCount", "maxRecordsPerPartition")} | {"topic": "w"}
        add("ferry write, arrow", timed(lambda: df.write.format("ferry").options(**wopts).mode("append").save(), 1, gw))

        ceiling = results[0][1]
        print(f"\n{n} rows, {args.size} B payload, 1 header, {args.partitions} partitions, local[2], "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
        print(f"(producing them through the client: {produce_rate:,.0f} msgs/s)\n")
        print(f"{'path':<22}{'rows/s':>14}{'x ceiling':>12}{'gateway µs/row':>17}")
        for name, rate, gw_us in results:
            print(f"{name:<22}{rate:>14,.0f}{rate / ceiling:>12.2f}{gw_us:>17.2f}")
        arrow = results[1][1]
        print(f"\ntarget >= 500,000 rows/s for the Arrow batch read: {'met' if arrow >= 500_000 else 'NOT met'}")
    finally:
        if spark is not None:
            spark.stop()
        if proc is not None:
            stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
