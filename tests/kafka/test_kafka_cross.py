"""Kafka <-> apache-iggy, Pravega, JetStream and Spark with real clients, one gateway (issue 25).

Each peer gets its own topic. confluent-kafka produces two records to it: one with a key,
a string header and a binary (non-UTF-8) header, and a null-value tombstone with a key.
The peer's real client reads them with key and headers as docs/headers.md says it sees
them ("Kafka -> canonical", then "canonical -> <peer>": the key as ``ferry-kafka-key``
raw headers, the tombstone as ``ferry-kafka-tombstone`` bool true with an empty payload);
then the peer writes a message and a confluent-kafka consumer reads it with the headers
"canonical -> Kafka" promises. Addressing (docs/addressing.md): the Kafka topic ``S.T``
is Ferry stream ``S``, topic ``T``: Iggy stream/topic ``S``/``T``, Pravega scope/stream
``S``/``T``, JetStream stream ``NAME`` is ``jetstream.NAME``. NATS core is covered by
test_kafka_clients.py (test_kafka_records_are_nats_messages_and_back).
"""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from ferry_harness import running_gateway
from iggy_clients import run_scenario as run_iggy
from test_kafka_clients import WAIT_S, read_all, sasl

nats = pytest.importorskip("nats")

IGGY = "apache-iggy==0.9.0"
KINDS = "Ferry-Header-Kinds"
KEY, TOMB = "ferry-kafka-key", "ferry-kafka-tombstone"


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with running_gateway(tmp_path_factory.mktemp("kafka-cross"), FERRY_PRAVEGA_TAIL_PARK_MS="500") as gw:
        yield gw


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def produce_two(gw, topic: str, value: bytes, create: bool = True, tombstone: bool = True) -> None:
    """Offset 0: ``value`` with key ``k1`` and headers trace=abc (UTF-8), bin=ff 00 (not UTF-8);
    offset 1 (``tombstone``): a null value with key ``gone``. ``create``: on a new
    one-partition topic (created with confluent-kafka's AdminClient)."""
    if create:
        admin = AdminClient(sasl(gw))  # kept referenced until the answer: a destroyed handle fails its futures
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(WAIT_S)
    p = Producer(sasl(gw))
    p.produce(topic, value=value, key=b"k1", headers=[("trace", b"abc"), ("bin", b"\xff\x00")])
    if tombstone:
        p.produce(topic, value=None, key=b"gone")
    assert p.flush(WAIT_S) == 0


def kafka_view(m) -> tuple:
    return m.offset(), m.key(), m.value(), m.headers()


# -- apache-iggy 0.9.0: one script written next to the test's data, run in the client's venv --

def iggy(gw, tmp_path, cmd: dict) -> list[dict]:
    """Run one apache-iggy 0.9.0 command (tests/iggy/clients/typed_headers.py) against the
    gateway's Iggy TCP listener; its JSON lines."""
    return run_iggy(IGGY, "typed_headers.py", gw.ports["iggy_tcp"], json.dumps(cmd))


def test_kafka_and_iggy_both_ways(gw, tmp_path):
    produce_two(gw, "kx.iggy", b"v-iggy")
    polled = iggy(gw, tmp_path, {"op": "poll", "stream": "kx", "topic": "iggy", "count": 10})
    # canonical -> Iggy (apache-iggy 0.9, dialect 3): typed keys and typed values, lossless
    assert polled == [
        {"offset": 0, "payload": b64(b"v-iggy"),
         "headers": sorted([["String", KEY, "Raw", b64(b"k1")], ["String", "trace", "String", "abc"],
                            ["String", "bin", "Raw", b64(b"\xff\x00")]])},
        {"offset": 1, "payload": "",
         "headers": sorted([["String", KEY, "Raw", b64(b"gone")], ["String", TOMB, "Bool", True]])}]

    sent = iggy(gw, tmp_path, {"op": "send", "stream": "kx", "topic": "iggy", "messages": [
        {"payload": b64(b"from-iggy"), "headers": [["String", KEY, "Raw", b64(b"ik")],
                                                   ["String", "trace", "String", "xyz"],
                                                   ["String", "n", "UnsignedInt32", 7],
                                                   ["String", "raw", "Raw", b64(b"\x00\x01")]]},
        {"payload": b64(b"dropped"), "headers": [["String", KEY, "String", "gone2"], ["String", TOMB, "Bool", True]]},
        {"payload": b64(b"plain"), "headers": [["String", "only", "String", "h"]]}]})
    assert sent == [{"sent": 3}]
    got = read_all(sasl(gw), "kx.iggy", 5)
    # canonical -> Kafka: key = the ferry-kafka-key values (raw, or a string another protocol
    # wrote); a tombstone that is bool true makes the value null; every other pair is a
    # header, raw as its bytes, other kinds as their text form (uint32 7 -> "7")
    assert [(m.offset(), m.key(), m.value()) for m in got] == [
        (0, b"k1", b"v-iggy"), (1, b"gone", None), (2, b"ik", b"from-iggy"), (3, b"gone2", None),
        (4, None, b"plain")]
    assert got[0].headers() == [("trace", b"abc"), ("bin", b"\xff\x00")]  # Kafka -> Kafka, order kept
    assert not got[1].headers()
    # apache-iggy sends a map: its wire order is the client's, so compare as a set
    assert sorted(got[2].headers()) == [("n", b"7"), ("raw", b"\x00\x01"), ("trace", b"xyz")]
    assert not got[3].headers()  # neither reserved header is sent as a Kafka header
    assert got[4].headers() == [("only", b"h")]


# -- Pravega 0.3.8: a reader group and a writer, in the client's own venv --

PRAVEGA_SCRIPT = r'''
import base64, sys, uuid

from pvcommon import manager, out, read_texts, run

PORT, MODE, SCOPE, STREAM = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]


async def main():
    m = manager(PORT)
    if MODE == "write":
        w = m.create_writer(SCOPE, STREAM)
        w.write_event("from-pravega", "routing-key")
        w.flush()
        out("written", value=1)
        return
    rg = m.create_reader_group("rg" + uuid.uuid4().hex[:8], SCOPE, STREAM)
    r = rg.create_reader("r")
    out("read", got=await read_texts(r, int(sys.argv[5]), decode=lambda b: base64.b64encode(b).decode()))
    r.reader_offline()


run(main)
'''


def pravega(gw, tmp_path, *args: str) -> dict:
    from pravega_clients import SCRIPTS, run_scenario

    script = tmp_path / "pravega_kafka.py"
    script.write_text(PRAVEGA_SCRIPT)
    # the script imports pvcommon from tests/pravega/clients
    return run_scenario(str(script), str(gw.ports["pravega_controller"]), *args, env={"PYTHONPATH": str(SCRIPTS)})


def test_kafka_and_pravega_both_ways(gw, tmp_path):
    # No tombstone here: a Kafka tombstone is stored as an empty payload, and the pravega
    # 0.3.8 reader treats a zero-length event frame as "no event" ("Found a header with
    # length as zero" in its SegmentSlice::extract_event), so it never reads that event nor
    # any after it in the segment (reported with this test, issue 25).
    produce_two(gw, "kx.pravega", b"v-pravega", tombstone=False)  # Pravega scope kx, stream pravega
    # canonical -> Pravega: payload only (key and headers are not visible to Pravega readers)
    assert pravega(gw, tmp_path, "read", "kx", "pravega", "1")["read"] == {"got": [b64(b"v-pravega")]}
    assert pravega(gw, tmp_path, "write", "kx", "pravega")["written"] == {"value": 1}
    got = read_all(sasl(gw), "kx.pravega", 2)
    assert kafka_view(got[0]) == (0, b"k1", b"v-pravega", [("trace", b"abc"), ("bin", b"\xff\x00")])
    # Pravega -> canonical: payload only (the routing key never reaches the server): no key, no headers
    assert kafka_view(got[1]) == (1, None, b"from-pravega", None)


# -- JetStream: nats-py's pull consumer and js.publish --

def test_kafka_and_jetstream_both_ways(gw):
    async def setup():
        nc = await nats.connect(gw.url())
        js = nc.jetstream()
        await js.add_stream(name="KX", subjects=["kx.js"])
        await nc.close()

    asyncio.run(asyncio.wait_for(setup(), 60))
    produce_two(gw, "jetstream.KX", b"v-js", create=False)  # the JetStream stream KX is topic jetstream/KX

    async def consume_then_publish():
        nc = await nats.connect(gw.url())
        js = nc.jetstream()
        psub = await js.pull_subscribe("kx.js", durable="C", stream="KX")
        got = []
        for _ in range(WAIT_S):  # fetch until both came (a guard, not a timing check)
            try:
                got += await psub.fetch(2 - len(got), timeout=1)
            except nats.errors.TimeoutError:
                pass
            if len(got) >= 2:
                break
        for m in got:
            await m.ack_sync()
        ack = await js.publish("kx.js", b"from-js", headers={"x-origin": "js", KEY: "jk", "Nats-Msg-Id": "m1"})
        await nc.close()
        return [(m.subject, m.data, m.metadata.sequence.stream, dict(m.headers or {})) for m in got], ack.seq

    got, seq = asyncio.run(asyncio.wait_for(consume_then_publish(), 120))
    # canonical -> NATS: another protocol's message goes out on the stream's first subject;
    # the raw key and binary header as base64 and the bool tombstone as text, each listed in
    # Ferry-Header-Kinds (index:key kind:value kind)
    assert got == [
        ("kx.js", b"v-js", 1, {KEY: b64(b"k1"), "trace": "abc", "bin": b64(b"\xff\x00"),
                               KINDS: "0:string:raw,2:string:raw"}),
        ("kx.js", b"", 2, {KEY: b64(b"gone"), TOMB: "true", KINDS: "0:string:raw,1:string:bool"})]
    assert seq == 3
    out = read_all(sasl(gw), "jetstream.KX", 3)
    assert [(m.offset(), m.key(), m.value()) for m in out[:2]] == [(0, b"k1", b"v-js"), (1, b"gone", None)]
    # NATS -> canonical: string/string pairs in order, then ferry-nats-subject; on a Kafka
    # fetch a ferry-kafka-key string written by NATS is the key and is not sent as a header
    assert kafka_view(out[2]) == (2, b"jk", b"from-js", [("x-origin", b"js"), ("Nats-Msg-Id", b"m1"),
                                                         ("ferry-nats-subject", b"kx.js")])


# -- Spark: Ferry's PySpark data source, batch read and one written row --

@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    """A SparkSession with Ferry's data source, skipped as tests/spark/conftest.py skips."""
    from spark_session import session_or_skip

    # not stopped here: the Spark tests on this worker share it (tests/support/spark_session.py)
    yield session_or_skip(tmp_path_factory.mktemp("spark"), "ferry-kafka-cross")


@pytest.mark.spark
def test_kafka_and_spark_both_ways(gw, spark):
    from pyspark.sql import functions as F

    from adapters.spark.headers import header_entry

    produce_two(gw, "kx.spark", b"v-spark")

    def ferry(io):
        return (io.format("ferry").option("servers", f"127.0.0.1:{gw.ports['iggy_tcp']}")
                .option("stream", "kx").option("topic", "spark"))

    rows = ferry(spark.read).load().orderBy("offset").collect()
    # canonical -> Spark: array<struct<key string, kind string, value binary>>, lossless
    assert [(r.offset, bytes(r.payload), [(h.key, h.kind, bytes(h.value)) for h in r.headers]) for r in rows] == [
        (0, b"v-spark", [(KEY, "raw", b"k1"), ("trace", "string", b"abc"), ("bin", "raw", b"\xff\x00")]),
        (1, b"", [(KEY, "raw", b"gone"), (TOMB, "bool", b"\x01")])]

    row = spark.range(1).select(
        F.lit("from-spark").alias("payload"), F.lit(0).alias("partition"),
        F.array(header_entry(KEY, "sk"), header_entry("source", "spark"),
                header_entry("u8", F.lit(b"\x07"), "uint8"), header_entry("raw", F.lit(b"\x00\x01"), "raw"))
        .alias("headers"))
    ferry(row.write).mode("append").save()
    got = read_all(sasl(gw), "kx.spark", 3)
    assert [(m.offset(), m.key(), m.value()) for m in got[:2]] == [(0, b"k1", b"v-spark"), (1, b"gone", None)]
    # the string ferry-kafka-key Spark wrote is the key; uint8 7 crosses as its text form
    assert kafka_view(got[2]) == (2, b"sk", b"from-spark", [("source", b"spark"), ("u8", b"7"),
                                                            ("raw", b"\x00\x01")])
