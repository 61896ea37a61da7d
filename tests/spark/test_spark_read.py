"""Batch reads with the real pyspark (local[2]) from a live gateway."""

from __future__ import annotations

import asyncio

import pytest

from adapters.spark.headers import decode_value, header_double, header_long, header_string, header_text, header_values
from spark_helpers import as_rows, every_kind_headers, ferry_options, keyed, produce, read_rows

# store: also run with the gateway on a JetStream cluster (make test, docs/scale-out.md "Tests")
pytestmark = [pytest.mark.spark, pytest.mark.store]


def test_batch_read_equals_what_was_produced(spark, ferry, client, stream_name):
    client.ensure_topic(stream_name, "t", 3)
    sent = {}
    for p in range(3):
        n = 4 + p * 3
        ids = [(p << 100) + i + 1 for i in range(n)]
        produce(client, stream_name, "t", p, [b"p%d-%d" % (p, i) for i in range(n)], every_kind_headers, ids)
        for i in range(n):
            sent[(p, i)] = (b"p%d-%d" % (p, i), as_rows(every_kind_headers(i)), "%032x" % ids[i])
    rows = read_rows(spark, ferry, stream_name)
    got = {(r.partition, r.offset): (bytes(r.payload), [(h.key, h.kind, bytes(h.value)) for h in r.headers], r.id)
           for r in rows}
    assert got == sent
    assert len(rows) == len(sent)
    assert {(r.stream, r.topic) for r in rows} == {(stream_name, "t")}
    assert all(r.timestamp is not None for r in rows)


def test_offset_options_and_splitting(spark, ferry, client, stream_name):
    client.ensure_topic(stream_name, "t", 2)
    produce(client, stream_name, "t", 0, [b"a%d" % i for i in range(30)])
    produce(client, stream_name, "t", 1, [b"b%d" % i for i in range(10)])
    opts = ferry_options(ferry, stream_name, maxRecordsPerPartition=7)
    df = spark.read.format("ferry").options(**opts).load()
    assert df.rdd.getNumPartitions() == 5 + 2  # ceil(30/7) + ceil(10/7)
    assert keyed(df.collect()) == keyed(read_rows(spark, ferry, stream_name))
    rows = read_rows(spark, ferry, stream_name, startingOffsets='{"t": {"0": 25, "1": -1}}',
                     endingOffsets='{"t": {"0": 28}}')
    assert [(r.partition, r.offset) for r in sorted(rows, key=lambda r: r.offset)] == [(0, 25), (0, 26), (0, 27)]
    assert read_rows(spark, ferry, stream_name, startingOffsets="latest") == []
    beyond = read_rows(spark, ferry, stream_name, endingOffsets='{"t": {"0": 1000, "1": 1000}}')
    assert len(beyond) == 40  # an end past the data reads what is there


def test_starting_timestamp(spark, ferry, client, stream_name):
    client.ensure_topic(stream_name, "t", 1)
    produce(client, stream_name, "t", 0, [b"old"])
    first = next(client.poll(stream_name, "t", 0, 0, 1).records())
    produce(client, stream_name, "t", 0, [b"new"])
    second = next(client.poll(stream_name, "t", 0, 1, 1).records())
    if second.timestamp == first.timestamp:
        pytest.skip("both appends got the same microsecond")
    ms = second.timestamp // 1000 + (1 if second.timestamp % 1000 else 0)
    rows = read_rows(spark, ferry, stream_name, startingTimestamp=(first.timestamp // 1000) + 1)
    assert [bytes(r.payload) for r in rows] == ([b"new"] if second.timestamp >= ((first.timestamp // 1000) + 1) * 1000
                                                else [])
    assert read_rows(spark, ferry, stream_name, startingTimestamp=ms + 1) == []


def test_topic_lists_and_patterns(spark, ferry, client, stream_name):
    for t in ("orders", "orders-eu", "audit"):
        client.ensure_topic(stream_name, t, 1)
        produce(client, stream_name, t, 0, [t.encode()])
    listed = read_rows(spark, ferry, stream_name, topic="orders,audit")
    assert sorted(r.topic for r in listed) == ["audit", "orders"]
    matched = read_rows(spark, ferry, stream_name, topic=None, subscribePattern="orders.*")
    assert sorted((r.topic, bytes(r.payload)) for r in matched) == [("orders", b"orders"), ("orders-eu", b"orders-eu")]


def test_header_helpers_decode_every_kind(spark, ferry, client, stream_name):
    client.ensure_topic(stream_name, "t", 1)
    produce(client, stream_name, "t", 0, [b"x"], every_kind_headers)
    df = spark.read.format("ferry").options(**ferry_options(ferry, stream_name)).load()
    row = df.select(header_string("s"), header_values("s"), header_long("int8"), header_long("uint64"),
                    header_long("b"), header_double("f32"), header_text("int128"), header_text("uint128"),
                    header_text("raw"), header_long("missing")).first()
    assert row[0] == "v0" and [bytes(v) for v in row[1]] == [b"v0", b"repeated key"]
    assert (row[2], row[3], row[4], row[5]) == (-1, 1, 1, 1.5)
    assert (row[6], row[7], row[8], row[9]) == ("-1", "1", "AAD/", None)
    h = every_kind_headers(0)
    assert [decode_value(kind, value) for _k, kind, value in as_rows(h)] == [v.to_python() for _k, v in h]


@pytest.mark.parametrize("options,named", [
    ({"startingOffsets": "bogus"}, "startingOffsets"),
    ({"endingOffsets": "earliest"}, "endingOffsets"),
    ({"startingOffsets": '{"t": {"9": 0}}'}, "startingOffsets"),
    ({"servers": "nohost"}, "servers"),
    ({"maxRecordsPerPartition": "0"}, "maxRecordsPerPartition"),
    ({"pollCount": "many"}, "pollCount"),
    ({"maxOffsetsPerTrigger": "5"}, "maxOffsetsPerTrigger"),
    ({"startingOfsets": "earliest"}, "startingOfsets"),
    ({"topic": None}, "topic"),
    ({"topic": "missing"}, "topic"),
])
def test_bad_options_name_the_option(spark, ferry, client, stream_name, options, named):
    client.ensure_topic(stream_name, "t", 1)
    opts = {k: v for k, v in (ferry_options(ferry, stream_name) | options).items() if v is not None}
    with pytest.raises(Exception) as err:
        spark.read.format("ferry").options(**opts).load().collect()
    assert f"{named.lower()}: " in str(err.value).lower()


def test_nats_published_messages_are_read_with_headers(spark, ferry, client, stream_name):
    import nats

    client.ensure_topic(stream_name, "t", 1)

    async def publish():
        nc = await nats.connect(ferry.url("nats"))   # the root user's login in the URL
        await nc.publish(f"{stream_name}.t", b"from-nats", headers={"trace": "xyz", "n": "7"})
        await nc.flush()
        await nc.close()

    asyncio.run(publish())
    rows = read_rows(spark, ferry, stream_name)
    assert [bytes(r.payload) for r in rows] == [b"from-nats"]
    headers = {h.key: (h.kind, bytes(h.value)) for h in rows[0].headers}
    assert headers["trace"] == ("string", b"xyz") and headers["n"] == ("string", b"7")
    assert headers["ferry-nats-subject"] == ("string", f"{stream_name}.t".encode())  # docs/headers.md


def test_messages_sent_by_the_real_iggy_client_are_read_with_typed_headers(spark, ferry, client):
    import subprocess
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "iggy"))  # the real-client helpers live there
    from iggy_clients import SCENARIO_TIMEOUT_S, SCRIPTS, client_python

    client.ensure_topic("orders", "eu", 1)  # the stream and topic the shared scenario script sends to
    subprocess.run([str(client_python("apache-iggy==0.9.0")), str(SCRIPTS / "current_cross.py"),
                    str(ferry.ports["iggy_tcp"]), "send"], check=True, timeout=SCENARIO_TIMEOUT_S,
                   capture_output=True)
    rows = read_rows(spark, ferry, "orders", "eu")
    assert [bytes(r.payload) for r in rows] == [b"from-iggy"]
    headers = {h.key: (h.kind, bytes(h.value)) for h in rows[0].headers}
    assert headers["trace"] == ("string", b"abc")
    kind, value = headers["n"]
    assert kind.startswith(("int", "uint")) and int.from_bytes(value, "little", signed=True) == 7


def test_header_decoders_in_sql(spark, ferry, client, stream_name):
    from adapters.spark.headers import register_sql_functions

    client.ensure_topic(stream_name, "t", 1)
    produce(client, stream_name, "t", 0, [b"x"], every_kind_headers)
    register_sql_functions(spark)
    spark.read.format("ferry").options(**ferry_options(ferry, stream_name)).load().createOrReplaceTempView("m")
    row = spark.sql("select ferry_header_long(headers, 'int16'), ferry_header_double(headers, 'f64'), "
                    "ferry_header_text(headers, 'b'), ferry_header_text(headers, 'nope'), "
                    "cast(get(filter(headers, h -> h.key = 's'), 0).value as string) from m").first()
    assert tuple(row) == (-1, -2.25e300, "true", None, "v0")
