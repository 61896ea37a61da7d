"""Batch and streaming writes, and the idempotency of a replayed micro-batch."""

from __future__ import annotations

import pytest
import xxhash

from adapters.spark.client import WireMessage
from adapters.spark.headers import header_entry
from core.message import Headers
from spark_helpers import every_kind_headers, ferry_options, produce, read_rows

# store: also run with the gateway on a JetStream cluster (make test, docs/scale-out.md "Tests")
pytestmark = [pytest.mark.spark, pytest.mark.store]


def stored(client, stream, topic="t"):
    out = []
    for pid, end in client.next_offsets(stream, topic).items():
        for polled in client.poll_range(stream, topic, pid, 0, end):
            out += [(pid, r) for r in polled.records()]
    return out


def test_batch_write_round_trip_with_headers_and_keys(spark, ferry, client, stream_name):
    from pyspark.sql import functions as F

    client.ensure_topic(stream_name, "t", 3)
    df = (spark.range(20).select(
        F.format_string("m%d", "id").alias("payload"),
        F.format_string("k%d", F.col("id") % 4).alias("key"),
        F.array(header_entry("n", F.col("id").cast("string")), header_entry("raw", F.lit(b"\x00\x01"), "raw"),
                header_entry("u8", F.lit(b"\x07"), "uint8")).alias("headers")))
    df.write.format("ferry").options(**ferry_options(ferry, stream_name)).mode("append").save()
    got = stored(client, stream_name)
    assert sorted(r.payload for _p, r in got) == sorted(b"m%d" % i for i in range(20))
    for pid, r in got:
        i = int(r.payload[1:])
        assert pid == xxhash.xxh32_intdigest(b"k%d" % (i % 4)) % 3  # routed as the gateway routes keys
        h = Headers.decode(r.headers)
        assert [(k.as_str(), v.kind.json_name, v.data) for k, v in h] == [
            ("n", "string", str(i).encode()), ("raw", "raw", b"\x00\x01"), ("u8", "uint8", b"\x07")]
    # the gateway routes a key the same way
    client.send(stream_name, "t", None, [WireMessage(0, b"probe")], key=b"k1")
    assert [p for p, r in stored(client, stream_name) if r.payload == b"probe"] == [
        [p for p, r in got if r.payload == b"m1"][0]]


def test_read_then_write_copies_ids_headers_and_origin_time(spark, ferry, client, stream_name):
    client.ensure_topic(stream_name, "t", 2)
    client.ensure_topic(stream_name, "copy", 2)
    for p in range(2):
        produce(client, stream_name, "t", p, [b"%d-%d" % (p, i) for i in range(6)], every_kind_headers,
                [(p << 64) + i + 1 for i in range(6)])
    src = spark.read.format("ferry").options(**ferry_options(ferry, stream_name)).load()
    src.write.format("ferry").options(**ferry_options(ferry, stream_name, "copy")).mode("append").save()
    a = {(r.partition, r.offset): r for r in read_rows(spark, ferry, stream_name)}
    b = {(r.partition, r.offset): r for r in read_rows(spark, ferry, stream_name, "copy")}
    assert a.keys() == b.keys()
    for k in a:
        assert (b[k].id, bytes(b[k].payload)) == (a[k].id, bytes(a[k].payload))
        assert [tuple(h) for h in b[k].headers] == [tuple(h) for h in a[k].headers]
    appended = {(p, r.offset): r.timestamp for p, r in stored(client, stream_name, "t")}
    assert {(p, r.offset): r.origin_timestamp for p, r in stored(client, stream_name, "copy")} == appended


def test_stream_write_replayed_batch_is_not_duplicated(spark, ferry, client, stream_name, tmp_path):
    client.ensure_topic(stream_name, "t", 2)
    client.ensure_topic(stream_name, "out", 3)
    produce(client, stream_name, "t", 0, [b"a%d" % i for i in range(15)])
    produce(client, stream_name, "t", 1, [b"b%d" % i for i in range(9)])
    cp = tmp_path / "cp"

    def run():
        q = (spark.readStream.format("ferry").options(**ferry_options(ferry, stream_name, startingOffsets="earliest"))
             .load().select("payload", "headers")
             .writeStream.format("ferry").options(**ferry_options(ferry, stream_name, "out"))
             .option("checkpointLocation", str(cp)).trigger(availableNow=True).start())
        try:
            q.awaitTermination()
        finally:
            q.stop()
        return sum(p["numInputRows"] for p in q.recentProgress)

    assert run() == 24
    first = sorted(r.payload for _p, r in stored(client, stream_name, "out"))
    assert first == sorted([b"a%d" % i for i in range(15)] + [b"b%d" % i for i in range(9)])
    # As after a crash between the sink's writes and the checkpoint's commit: Spark
    # replays the last batch id on restart. The producer tags make the replay a no-op.
    commits = sorted((cp / "commits").iterdir(), key=lambda f: int(f.name) if f.name.isdigit() else -1)
    last = [f for f in commits if f.name.isdigit()][-1]
    last.unlink()
    (cp / "commits" / f".{last.name}.crc").unlink(missing_ok=True)  # Hadoop's checksum file goes with it
    assert run() == 24  # the whole batch was written again...
    assert sorted(r.payload for _p, r in stored(client, stream_name, "out")) == first  # ...and dropped
    produce(client, stream_name, "t", 1, [b"late"])
    run()
    assert sorted(r.payload for _p, r in stored(client, stream_name, "out")) == sorted(first + [b"late"])


@pytest.mark.parametrize("mode,df_expr,named", [
    ("overwrite", "'x' as payload", "mode"),
    ("append", "1 as value", "payload"),
    ("append", "'x' as payload, 'a' as partition", "partition"),
])
def test_bad_writes_name_the_problem(spark, ferry, client, stream_name, mode, df_expr, named):
    client.ensure_topic(stream_name, "t", 1)
    with pytest.raises(Exception) as err:
        spark.sql(f"select {df_expr}").write.format("ferry").options(**ferry_options(ferry, stream_name)) \
            .mode(mode).save()
    assert f"{named}: " in str(err.value)
