"""``ferry pipeline archive|replay`` (adapters/spark/pipeline.py) on the shared SparkSession."""

from __future__ import annotations

import io
import re

import pytest

from adapters.spark.pipeline import archive, replay, track_tasks
from gateway.cli import build_parser
from spark_helpers import every_kind_headers, produce, read_rows

pytestmark = pytest.mark.spark


def args(*argv):
    return build_parser().parse_args(["pipeline", *argv])


def test_archive_then_replay_round_trip(spark, ferry, client, stream_name, tmp_path):
    servers = f"127.0.0.1:{ferry.ports['iggy_tcp']}"
    for topic in ("a", "b"):
        client.ensure_topic(stream_name, topic, 2)
        for p in range(2):
            produce(client, stream_name, topic, p, [b"%s%d-%d" % (topic.encode(), p, i) for i in range(5)],
                    every_kind_headers)
    out = tmp_path / "archive"
    base = ["--servers", servers, "--stream", stream_name]
    archive(spark, args("archive", *base, "--topic", "a,b", "--out", str(out), "--trigger", "available-now"))
    produce(client, stream_name, "a", 0, [b"late"])
    archive(spark, args("archive", *base, "--topic", "a,b", "--out", str(out), "--trigger", "available-now"))
    assert sorted(d.name for d in out.iterdir() if not d.name.startswith("_")) == ["topic=a", "topic=b"]
    archived = spark.read.parquet(str(out)).collect()
    keys = sorted((r.topic, r.partition, r.offset) for r in archived)
    assert keys == sorted(set(keys)) and len(keys) == 21  # each message once, none missing

    # through the progress bar a terminal gets (track_tasks): same result, and the tasks it saw
    bar = io.StringIO()
    replay_args = args("replay", *base, "--in", str(out), "--from-topic", "a", "--topic", "restored",
                       "--partitions", "2", "--keep-partitions", "--progress")
    n = track_tasks(spark, lambda: replay(spark, replay_args), "replay", out=bar, poll_s=0.05)
    assert n == 11
    summary = bar.getvalue().splitlines()[-1]
    done, total = map(int, re.search(r"replay: (\d+)/(\d+) Spark tasks", summary).groups())
    assert done == total > 0, summary
    original = {(r.partition, r.offset): r for r in read_rows(spark, ferry, stream_name, "a")}
    restored = {(r.partition, r.offset): r for r in read_rows(spark, ferry, stream_name, "restored")}
    assert original.keys() == restored.keys()
    for k, r in original.items():
        assert (restored[k].payload, restored[k].id, restored[k].headers) == (r.payload, r.id, r.headers)


def test_pipeline_parser():
    a = args("archive", "--stream", "s", "--pattern", "o.*", "--out", "/x")
    assert (a.trigger, a.master, a.checkpoint, a.pattern) == ("continuous", "local[*]", None, "o.*")
    with pytest.raises(SystemExit):
        args("archive", "--stream", "s", "--out", "/x")  # a topic or a pattern is required
