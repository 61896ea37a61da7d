"""Streaming reads (micro-batches, Trigger.AvailableNow) with restarts from a checkpoint."""

from __future__ import annotations

import json
import time

import pytest

from spark_helpers import ferry_options, produce

pytestmark = pytest.mark.spark
WAIT_S = 120  # guards a hang only; the test passes as soon as the rows are there


def run_available_now(spark, gw, stream, sink, checkpoint, **extra):
    """One availableNow run from ``checkpoint`` into parquet at ``sink``; returns the query."""
    q = (spark.readStream.format("ferry").options(**ferry_options(gw, stream, **extra)).load()
         .writeStream.format("parquet").option("path", str(sink)).option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    try:
        q.awaitTermination()
    finally:
        q.stop()
    return q


def sink_keys(spark, sink) -> list[tuple]:
    rows = spark.read.parquet(str(sink)).select("partition", "offset", "payload").collect()
    return sorted((r.partition, r.offset, bytes(r.payload)) for r in rows)


def expected(counts: dict[int, int]) -> list[tuple]:
    return sorted((p, i, b"%d-%d" % (p, i)) for p, n in counts.items() for i in range(n))


def fill(client, stream, counts: dict[int, int], already: dict[int, int]) -> None:
    for p, n in counts.items():
        lo = already.get(p, 0)
        if n > lo:
            produce(client, stream, "t", p, [b"%d-%d" % (p, i) for i in range(lo, n)])


def test_restart_from_checkpoint_no_duplicates_no_gaps_with_a_new_partition(spark, ferry, client, stream_name,
                                                                             tmp_path):
    client.ensure_topic(stream_name, "t", 2)
    sink, cp = tmp_path / "sink", tmp_path / "cp"
    counts = {0: 12, 1: 5}
    fill(client, stream_name, counts, {})
    run_available_now(spark, ferry, stream_name, sink, cp, startingOffsets="earliest")
    assert sink_keys(spark, sink) == expected(counts)

    run_available_now(spark, ferry, stream_name, sink, cp, startingOffsets="earliest")  # nothing new
    assert sink_keys(spark, sink) == expected(counts)

    client.create_partitions(stream_name, "t", 1)  # partition 2 appears mid-run
    more = {0: 20, 1: 5, 2: 7}
    fill(client, stream_name, more, counts)
    run_available_now(spark, ferry, stream_name, sink, cp, startingOffsets="earliest")
    assert sink_keys(spark, sink) == expected(more)


def test_max_offsets_per_trigger_splits_the_backlog(spark, ferry, client, stream_name, tmp_path):
    client.ensure_topic(stream_name, "t", 2)
    counts = {0: 30, 1: 10}
    fill(client, stream_name, counts, {})
    q = run_available_now(spark, ferry, stream_name, tmp_path / "sink", tmp_path / "cp",
                          startingOffsets="earliest", maxOffsetsPerTrigger=15)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 40 and max(sizes) <= 15 and len(sizes) == 3
    first = next(p for p in q.recentProgress if p["numInputRows"])["sources"][0]
    assert json.loads(first["latestOffset"]) == {"t": {"0": 30, "1": 10}}  # reportLatestOffset: the backlog
    assert sum(json.loads(first["endOffset"])["t"].values()) == 15
    assert sink_keys(spark, tmp_path / "sink") == expected(counts)


def test_stream_starts_at_latest_by_default(spark, ferry, client, stream_name, tmp_path):
    client.ensure_topic(stream_name, "t", 1)
    produce(client, stream_name, "t", 0, [b"before"])
    sink, cp = tmp_path / "sink", tmp_path / "cp"
    run_available_now(spark, ferry, stream_name, sink, cp)
    produce(client, stream_name, "t", 0, [b"after"])
    run_available_now(spark, ferry, stream_name, sink, cp)
    assert [p for _part, _off, p in sink_keys(spark, sink)] == [b"after"]


def test_continuous_query_sees_live_appends(spark, ferry, client, stream_name, tmp_path):
    client.ensure_topic(stream_name, "t", 1)
    q = (spark.readStream.format("ferry").options(**ferry_options(ferry, stream_name)).load()
         .writeStream.format("memory").queryName(f"live_{stream_name}").trigger(processingTime="200 milliseconds")
         .start())
    try:
        q.processAllAvailable()  # the initial (empty) batch: offsets pinned at "latest"
        produce(client, stream_name, "t", 0, [b"x%d" % i for i in range(5)])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            q.processAllAvailable()
            got = spark.sql(f"select offset from live_{stream_name}").collect()
            if len(got) >= 5:
                break
            time.sleep(0.2)
        assert sorted(r.offset for r in got) == [0, 1, 2, 3, 4]
    finally:
        q.stop()


def test_pattern_stream_picks_up_a_topic_created_mid_run(spark, ferry, client, stream_name, tmp_path):
    client.ensure_topic(stream_name, "ev-a", 1)
    produce(client, stream_name, "ev-a", 0, [b"a0"])
    sink, cp = tmp_path / "sink", tmp_path / "cp"
    run_available_now(spark, ferry, stream_name, sink, cp, topic=None, subscribePattern="ev-.*",
                      startingOffsets="earliest")
    client.ensure_topic(stream_name, "ev-b", 2)
    produce(client, stream_name, "ev-b", 1, [b"b0", b"b1"])
    produce(client, stream_name, "ev-a", 0, [b"a1"])
    run_available_now(spark, ferry, stream_name, sink, cp, topic=None, subscribePattern="ev-.*",
                      startingOffsets="earliest")
    rows = spark.read.parquet(str(sink)).select("topic", "partition", "offset", "payload").collect()
    assert sorted((r.topic, r.partition, r.offset, bytes(r.payload)) for r in rows) == [
        ("ev-a", 0, 0, b"a0"), ("ev-a", 0, 1, b"a1"), ("ev-b", 1, 0, b"b0"), ("ev-b", 1, 1, b"b1")]
