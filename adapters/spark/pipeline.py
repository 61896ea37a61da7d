"""``ferry pipeline archive|replay``: ready-made Spark jobs over the data source.

* ``archive``: a Structured Streaming query from ``format("ferry")`` to Parquet,
  partitioned by ``topic`` and ``date`` (the append date, UTC). Exactly once:
  the stream's offsets and the file sink's own log (``_spark_metadata``) both
  live under the checkpoint/output, so a restart, even after ``kill -9``,
  neither skips nor repeats a message. ``--trigger available-now`` archives the
  backlog and exits (for cron); ``continuous`` runs until interrupted.
* ``replay``: a batch job from such a Parquet tree back into a topic, through the
  idempotent sink (docs/spark.md): ids, headers and the original append time (as
  origin timestamp) are kept; with ``--keep-partitions`` each message goes back to
  its partition number, in offset order.

Both work with ``--master local[*]`` (the default) or ``spark://...`` unchanged:
the data source holds no local state. The parser is built without importing
pyspark (``ferry --help`` stays fast); the jobs import it when they run.
"""

from __future__ import annotations

import argparse
import sys

DEFAULT_MASTER = "local[*]"
DEFAULT_INTERVAL = "10 seconds"  # continuous archive: one micro-batch at most this often
# How often the progress bar asks Spark's status tracker (a JVM call each): a human's refresh rate.
PROGRESS_POLL_S = 0.25


def add_parser(sub) -> None:
    """Register ``pipeline archive|replay`` on the ``ferry`` sub-command parser."""
    pipeline = sub.add_parser("pipeline", help="Spark jobs: archive topics to Parquet, replay them back")
    psub = pipeline.add_subparsers(dest="action", required=True, metavar="{archive,replay}")

    def common(p) -> None:
        p.add_argument("--servers", default="127.0.0.1:8090", help="gateway Iggy TCP host:port[,host:port]")
        p.add_argument("--username", default="iggy")
        p.add_argument("--password", default="iggy")
        p.add_argument("--stream", required=True, help="the Ferry stream")
        p.add_argument("--master", default=DEFAULT_MASTER, help="Spark master URL (default local[*])")
        p.add_argument("--progress", action="store_true",
                       help="show the Spark task progress bar even when stderr is not a terminal")

    p = psub.add_parser("archive", help="continuously archive topics to Parquet (topic/date partitions)")
    common(p)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--topic", help="a topic or a comma-separated list")
    what.add_argument("--pattern", help="a regular expression over the stream's topic names")
    p.add_argument("--out", required=True, help="Parquet output directory (local path or any Hadoop URI)")
    p.add_argument("--checkpoint", help="checkpoint directory (default: <out>/_checkpoint)")
    p.add_argument("--trigger", choices=("available-now", "continuous"), default="continuous")
    p.add_argument("--interval", default=DEFAULT_INTERVAL, help="continuous: micro-batch interval")
    p.add_argument("--starting-offsets", default="earliest", help="for a new checkpoint: earliest|latest|JSON")
    p.add_argument("--max-offsets-per-trigger", type=int, help="messages per micro-batch")
    p.set_defaults(func=cmd_pipeline)

    p = psub.add_parser("replay", help="write an archive (Parquet) back into a topic")
    common(p)
    p.add_argument("--in", dest="inp", required=True, help="archive directory written by 'pipeline archive'")
    p.add_argument("--topic", required=True, help="target topic (created if missing)")
    p.add_argument("--from-topic", help="replay only this archived topic")
    p.add_argument("--partitions", type=int, default=1, help="partitions when the target topic is created")
    p.add_argument("--keep-partitions", action="store_true",
                   help="send each message to its archived partition number, in offset order")
    p.set_defaults(func=cmd_pipeline)


def _options(args) -> dict[str, str]:
    return {"servers": args.servers, "username": args.username, "password": args.password, "stream": args.stream}


def archive(spark, args) -> object:
    """Start the archive query; returns the StreamingQuery (already finished for available-now)."""
    from pyspark.sql import functions as F

    opts = _options(args) | {"startingOffsets": args.starting_offsets}
    if args.topic:
        opts["topic"] = args.topic
    else:
        opts["subscribePattern"] = args.pattern
    if args.max_offsets_per_trigger:
        opts["maxOffsetsPerTrigger"] = str(args.max_offsets_per_trigger)
    checkpoint = args.checkpoint or args.out.rstrip("/") + "/_checkpoint"
    df = spark.readStream.format("ferry").options(**opts).load().withColumn("date", F.to_date("timestamp"))
    writer = (df.writeStream.format("parquet").option("path", args.out).option("checkpointLocation", checkpoint)
              .partitionBy("topic", "date"))
    if args.trigger == "available-now":
        q = writer.trigger(availableNow=True).start()
        q.awaitTermination()
    else:
        q = writer.trigger(processingTime=args.interval).start()
    return q


def replay(spark, args) -> int:
    """Write the archive back; returns the number of messages sent."""
    from pyspark.sql import functions as F

    from .options import conn_options

    df = spark.read.parquet(args.inp)
    if args.from_topic:
        df = df.where(F.col("topic") == args.from_topic)
    with conn_options(_options(args)).connect() as client:
        client.ensure_topic(args.stream, args.topic, args.partitions)
    cols = ["payload", "headers", "id", "timestamp"]
    if args.keep_partitions:
        # One task per archived partition, rows in offset order: the partition gets them in order.
        df = df.repartition("partition").sortWithinPartitions("partition", "offset")
        cols.append("partition")
    count = df.count()
    df.select(*cols).write.format("ferry").options(**_options(args) | {"topic": args.topic}).mode("append").save()
    return count


def track_tasks(spark, work, desc: str, *, out=None, poll_s: float = PROGRESS_POLL_S):
    """``work()``'s result, with a tqdm bar on ``out`` (stderr) showing the Spark
    tasks of the jobs it starts: completed / total over every stage seen
    (SparkStatusTracker), then one summary line. The bar is the only view of a
    long archive or replay a terminal gets. ``work`` runs in the calling thread
    (Spark's session, and with it the registered ``ferry`` source, is per thread
    on the JVM side); a watcher thread drives the bar."""
    import threading

    from tqdm import tqdm

    out = sys.stderr if out is None else out
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getActiveStageIds())  # stages of other work already running (tests share a session)
    stages: dict[int, tuple[int, int]] = {}
    finished = threading.Event()

    def sample() -> None:
        for sid in (set(tracker.getActiveStageIds()) - before) | set(stages):
            info = tracker.getStageInfo(sid)
            if info is not None:
                stages[sid] = (info.numCompletedTasks, info.numTasks)

    def watch(bar) -> None:
        while not finished.wait(poll_s):
            sample()
            bar.total = sum(total for _, total in stages.values())
            bar.n = sum(done for done, _ in stages.values())
            bar.refresh()

    with tqdm(total=0, unit="task", desc=desc, file=out, leave=False, dynamic_ncols=True) as bar:
        watcher = threading.Thread(target=watch, args=(bar,), name=f"ferry-{desc}-progress", daemon=True)
        watcher.start()
        try:
            value = work()
        finally:
            finished.set()
            watcher.join()
    sample()  # the last stages' final counts
    done, total = sum(d for d, _ in stages.values()), sum(t for _, t in stages.values())
    print(f"ferry: {desc}: {done}/{total} Spark tasks in {len(stages)} stages", file=out)
    return value


def cmd_pipeline(args: argparse.Namespace) -> int:
    import os

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need Ferry and pyarrow
    from pyspark.sql import SparkSession

    from .source import FerryDataSource

    spark = (SparkSession.builder.master(args.master).appName(f"ferry-pipeline-{args.action}")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.dataSource.register(FerryDataSource)
    show = args.progress or sys.stderr.isatty()

    def tracked(work, desc):
        return track_tasks(spark, work, desc) if show else work()

    try:
        if args.action == "archive":
            if args.trigger == "available-now":  # a finite job: worth a bar
                q = tracked(lambda: archive(spark, args), "archive")
            else:
                q = archive(spark, args)
            if args.trigger == "continuous":
                print(f"ferry: archiving into {args.out} (query {q.id}); Ctrl-C to stop", file=sys.stderr)
                try:
                    q.awaitTermination()
                except KeyboardInterrupt:
                    q.stop()
        else:
            n = tracked(lambda: replay(spark, args), "replay")
            print(f"ferry: replayed {n} messages into {args.stream}/{args.topic}", file=sys.stderr)
    finally:
        spark.stop()
    return 0


__all__ = ["add_parser", "archive", "cmd_pipeline", "replay", "track_tasks"]
