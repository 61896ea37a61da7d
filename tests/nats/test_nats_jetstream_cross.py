"""JetStream across protocols with real clients: apache-iggy 0.9.0, nats-py and Spark, one gateway.

A JetStream stream ``NAME`` is the Ferry topic ``jetstream/NAME`` (one partition, stream
sequence = offset + 1, docs/addressing.md "JetStream streams"); a message another protocol
appends there has no ``ferry-nats-subject`` and reaches JetStream consumers on the stream's
first subject (docs/nats.md "Pull consumers"). Headers are translated as docs/headers.md's
table says: canonical -> NATS writes every pair that is not a plain string/string one as
text and lists it in ``Ferry-Header-Kinds``; NATS -> canonical restores the kinds it lists.

apache-iggy 0.9.0 numbers partitions from 0 (tests/iggy/clients/current_cross.py), so the
JetStream topic's only partition is partition 0 for it. The HTTP -> JetStream cases
(a waiting pull, a push consumer) are in test_nats_jetstream_consumers.py and
test_nats_jetstream_push.py; these tests use the Iggy binary protocol and Spark instead.
"""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from ferry_harness import running_gateway
from iggy_clients import run_scenario as run_iggy

nats = pytest.importorskip("nats")
from nats.js.api import ConsumerConfig, DeliverPolicy

IGGY = "apache-iggy==0.9.0"
WAIT = 10.0  # guards a hang only
KINDS = "Ferry-Header-Kinds"


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


# -- the apache-iggy half: one script, written next to the test's data, run in the client's venv --

def iggy(gw, tmp_path, cmd: dict) -> list[dict]:
    """Run one apache-iggy 0.9.0 command (tests/iggy/clients/typed_headers.py) against the
    gateway's Iggy TCP listener; its JSON lines."""
    return run_iggy(IGGY, "typed_headers.py", gw.ports["iggy_tcp"], json.dumps(cmd))


def iggy_send(gw, tmp_path, topic: str, messages: list[tuple[bytes, list]]) -> None:
    """Send ``(payload, [[key kind, key, value kind, value], ...])`` messages to ``jetstream/<topic>``."""
    cmd = {"op": "send", "stream": "jetstream", "topic": topic, "partition": 0,
           "messages": [{"payload": base64.b64encode(p).decode(), "headers": h} for p, h in messages]}
    assert iggy(gw, tmp_path, cmd) == [{"sent": len(messages)}]


def iggy_poll(gw, tmp_path, topic: str, count: int = 100) -> list[dict]:
    return iggy(gw, tmp_path, {"op": "poll", "stream": "jetstream", "topic": topic, "partition": 0, "count": count})


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# Every Iggy value kind, a typed key, a string value NATS headers cannot carry as it is
# (surrounding blanks) and a key that is not a NATS header name (a space): with what a
# NATS client must see for each, per docs/headers.md (key text, value text, kinds entry).
TYPED = [
    # (key kind, key, value kind, value,         NATS key,  NATS value,          kinds entry or None)
    ("String", "trace", "String", "abc",          "trace", "abc", None),
    ("String", "raw", "Raw", b64(b"\x00\x01\xff"), "raw", "AAH/", "string:raw"),
    ("String", "flag", "Bool", True,              "flag", "true", "string:bool"),
    ("String", "i8", "Int8", -8,                  "i8", "-8", "string:int8"),
    ("String", "i16", "Int16", -16,               "i16", "-16", "string:int16"),
    ("String", "i32", "Int32", -32,               "i32", "-32", "string:int32"),
    ("String", "i64", "Int64", -(2 ** 63),        "i64", str(-(2 ** 63)), "string:int64"),
    ("String", "i128", "Int128", -(2 ** 100),     "i128", str(-(2 ** 100)), "string:int128"),
    ("String", "u8", "UnsignedInt8", 8,           "u8", "8", "string:uint8"),
    ("String", "u16", "UnsignedInt16", 16,        "u16", "16", "string:uint16"),
    ("String", "u32", "UnsignedInt32", 32,        "u32", "32", "string:uint32"),
    ("String", "u64", "UnsignedInt64", 2 ** 63,   "u64", str(2 ** 63), "string:uint64"),
    ("String", "u128", "UnsignedInt128", 2 ** 127, "u128", str(2 ** 127), "string:uint128"),
    ("String", "f32", "Float32", 0.5,             "f32", "0.5", "string:float32"),
    ("String", "f64", "Float64", -2.25,           "f64", "-2.25", "string:float64"),
    ("Int32", 5, "String", "typed key",           "5", "typed key", "int32:string"),
    ("String", "pad", "String", " padded ",       "pad", b64(b" padded "), "string:string:v"),
    ("String", "bad key", "String", "v",          base64.urlsafe_b64encode(b"bad key").decode(), "v",
     "string:string:k"),
]


def expected_kinds_line(nats_keys: list[str]) -> str:
    """The ``Ferry-Header-Kinds`` value for TYPED's headers delivered in the order ``nats_keys``
    (the client sends a dict; its wire order is the client's business, the indexes follow it)."""
    entry = {row[4]: row[6] for row in TYPED}
    return ",".join(f"{i}:{entry[k]}" for i, k in enumerate(nats_keys) if entry[k] is not None)


async def consumer_state(js, stream: str, name: str) -> dict:
    ci = await js.consumer_info(stream, name)
    return {"num_pending": ci.num_pending, "num_ack_pending": ci.num_ack_pending,
            "delivered": ci.delivered.stream_seq, "ack_floor": ci.ack_floor.stream_seq}


# -- 1. apache-iggy send -> JetStream pull consumer --

def test_iggy_send_is_fetched_by_a_pull_consumer_with_translated_headers(tmp_path):
    with running_gateway(tmp_path) as gw:
        async def setup():
            nc = await nats.connect(gw.url())
            js = nc.jetstream()
            await js.add_stream(name="ORD", subjects=["ord.in", "ord.more.*"])
            await js.pull_subscribe("ord.in", durable="C", stream="ORD")
            await js.pull_subscribe("ord.more.*", durable="M", stream="ORD")   # matches none of Iggy's
            before = await consumer_state(js, "ORD", "C")
            await nc.close()
            return before

        assert run(setup()) == {"num_pending": 0, "num_ack_pending": 0, "delivered": 0, "ack_floor": 0}
        iggy_send(gw, tmp_path, "ORD", [(b"first", [list(row[:4]) for row in TYPED]),
                                        (b"second", [["String", "n", "String", "2"]]),
                                        (b"third", [])])

        async def consume():
            nc = await nats.connect(gw.url())
            js = nc.jetstream()
            out = {"after_send": await consumer_state(js, "ORD", "C"),
                   "other_filter": await consumer_state(js, "ORD", "M")}
            psub = await js.pull_subscribe_bind("C", "ORD")
            first = (await psub.fetch(1, timeout=WAIT))[0]
            out["first"] = (first.subject, first.data, first.metadata.sequence.stream,
                            first.metadata.num_pending, first.metadata.num_delivered)
            out["first_headers"] = dict(first.headers or {})
            out["unacked"] = await consumer_state(js, "ORD", "C")
            await first.ack_sync()
            out["acked_one"] = await consumer_state(js, "ORD", "C")
            rest = await psub.fetch(2, timeout=WAIT)
            out["rest"] = [(m.subject, m.data, m.metadata.sequence.stream, m.metadata.num_pending,
                            dict(m.headers or {})) for m in rest]
            for m in rest:
                await m.ack_sync()
            out["acked_all"] = await consumer_state(js, "ORD", "C")
            out["stream"] = (await js.stream_info("ORD")).state.messages
            await nc.close()
            return out

        out = run(consume())

    assert out["after_send"] == {"num_pending": 3, "num_ack_pending": 0, "delivered": 0, "ack_floor": 0}
    assert out["other_filter"]["num_pending"] == 0
    assert out["first"] == ("ord.in", b"first", 1, 2, 1)       # the stream's first subject; seq = offset + 1
    headers = out["first_headers"]
    keys = [k for k in headers if k != KINDS]
    assert {k: headers[k] for k in keys} == {row[4]: row[5] for row in TYPED}
    assert headers[KINDS] == expected_kinds_line(keys)
    assert list(headers)[-1] == KINDS and "ferry-nats-subject" not in headers
    assert out["unacked"] == {"num_pending": 2, "num_ack_pending": 1, "delivered": 1, "ack_floor": 0}
    assert out["acked_one"] == {"num_pending": 2, "num_ack_pending": 0, "delivered": 1, "ack_floor": 1}
    assert out["rest"] == [("ord.in", b"second", 2, 1, {"n": "2"}), ("ord.in", b"third", 3, 0, {})]
    assert out["acked_all"] == {"num_pending": 0, "num_ack_pending": 0, "delivered": 3, "ack_floor": 3}
    assert out["stream"] == 3


# -- 2. js.publish -> apache-iggy poll --

def test_js_publish_is_polled_by_iggy_with_headers_translated_back(tmp_path):
    with running_gateway(tmp_path) as gw:
        async def publish():
            nc = await nats.connect(gw.url())
            js = nc.jetstream()
            await js.add_stream(name="PUB", subjects=["pub.*"])
            acks = [await js.publish("pub.a", b"one", headers={"trace": "xyz"}),
                    # what Ferry writes for typed headers: the kinds come back (docs/headers.md)
                    await js.publish("pub.b", b"two", headers={"trace": "t2", "n": "7", "bin": "AP8=",
                                                                KINDS: "1:string:uint32,2:string:raw"})]
            await nc.close()
            return [(a.stream, a.seq) for a in acks]

        acks = run(publish())
        got = iggy_poll(gw, tmp_path, "PUB")

    assert acks == [("PUB", 1), ("PUB", 2)]
    assert [(g["offset"], base64.b64decode(g["payload"])) for g in got] == [(0, b"one"), (1, b"two")]
    assert got[0]["headers"] == sorted([["String", "trace", "String", "xyz"],
                                        ["String", "ferry-nats-subject", "String", "pub.a"]])
    assert got[1]["headers"] == sorted([["String", "trace", "String", "t2"],
                                        ["String", "n", "UnsignedInt32", 7],
                                        ["String", "bin", "Raw", b64(b"\x00\xff")],
                                        ["String", "ferry-nats-subject", "String", "pub.b"]])


# -- 3. Spark write -> JetStream pull consumer --

@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    """A SparkSession with Ferry's data source, skipped as tests/spark/conftest.py skips."""
    from spark_session import session_or_skip

    # not stopped here: the Spark tests on this worker share it (tests/support/spark_session.py)
    yield session_or_skip(tmp_path_factory.mktemp("spark"), "ferry-js-cross")


@pytest.mark.spark
def test_spark_write_is_fetched_by_a_pull_consumer(tmp_path, spark):
    from pyspark.sql import functions as F

    from adapters.spark.headers import header_entry

    with running_gateway(tmp_path) as gw:
        async def setup():
            nc = await nats.connect(gw.url())
            js = nc.jetstream()
            await js.add_stream(name="SP", subjects=["sp.in", "sp.x.*"])
            await js.pull_subscribe("sp.in", durable="C", stream="SP")
            await nc.close()

        run(setup())
        df = spark.range(4).select(
            F.format_string("row%d", "id").alias("payload"),
            F.array(header_entry("trace", F.format_string("t%d", "id")),
                    header_entry("raw", F.lit(b"\x00\x01"), "raw"),
                    header_entry("u8", F.lit(b"\x07"), "uint8")).alias("headers"))
        (df.write.format("ferry").option("servers", f"127.0.0.1:{gw.ports['iggy_tcp']}")
         .option("stream", "jetstream").option("topic", "SP").mode("append").save())

        async def consume():
            nc = await nats.connect(gw.url())
            js = nc.jetstream()
            pending = (await js.consumer_info("SP", "C")).num_pending
            psub = await js.pull_subscribe_bind("C", "SP")
            got = await psub.fetch(4, timeout=WAIT)
            for m in got:
                await m.ack_sync()
            after = await consumer_state(js, "SP", "C")
            await nc.close()
            return pending, [(m.subject, m.data, m.metadata.sequence.stream, dict(m.headers or {})) for m in got], after

        pending, got, after = run(consume())

    assert pending == 4
    # Spark's two tasks write concurrently: the order in the stream is theirs, the sequences are 1..4
    assert [seq for _s, _d, seq, _h in got] == [1, 2, 3, 4]
    assert sorted((s, d, h) for s, d, _seq, h in got) == [
        ("sp.in", b"row%d" % i, {"trace": f"t{i}", "raw": "AAE=", "u8": "7", KINDS: "1:string:raw,2:string:uint8"})
        for i in range(4)]
    assert after == {"num_pending": 0, "num_ack_pending": 0, "delivered": 4, "ack_floor": 4}


# -- 4. JetStream push consumer (durable, deliver group) <- apache-iggy, live --

def test_push_queue_consumer_receives_live_iggy_sends(tmp_path):
    with running_gateway(tmp_path) as gw:
        async def main():
            nc = await nats.connect(gw.url())
            js = nc.jetstream()
            await js.add_stream(name="PUSH", subjects=["push.in"])
            await asyncio.to_thread(iggy_send, gw, tmp_path, "PUSH", [(b"old", [])])   # before: not delivered
            seen: dict[str, list] = {"w1": [], "w2": []}
            done = asyncio.Event()

            def collect(key):
                async def cb(msg):
                    seen[key].append((msg.subject, msg.data, msg.metadata.sequence.stream, dict(msg.headers or {})))
                    await msg.ack()
                    if len(seen["w1"]) + len(seen["w2"]) >= 6:
                        done.set()
                return cb

            cfg = ConsumerConfig(deliver_policy=DeliverPolicy.NEW)
            for member in ("w1", "w2"):  # nats-py: the queue name is the durable's name and the deliver group
                await js.subscribe("push.in", durable="workers", queue="workers", stream="PUSH", cb=collect(member),
                                   config=cfg)
            await nc.flush()
            bound = await js.consumer_info("PUSH", "workers")
            await asyncio.to_thread(iggy_send, gw, tmp_path, "PUSH",
                                    [(b"live%d" % i, [["String", "i", "UnsignedInt16", i]]) for i in range(6)])
            await asyncio.wait_for(done.wait(), WAIT)
            await asyncio.sleep(0.3)                                    # nothing delivered twice
            await nc.flush()
            ci = await js.consumer_info("PUSH", "workers")
            await nc.close()
            return bound, seen, ci

        bound, seen, ci = run(main())

    assert (bound.config.deliver_group, bound.push_bound, bound.num_pending) == ("workers", True, 0)
    every = sorted(seen["w1"] + seen["w2"], key=lambda m: m[2])
    assert every == [("push.in", b"live%d" % i, i + 2, {"i": str(i), KINDS: "0:string:uint16"}) for i in range(6)]
    assert (ci.delivered.stream_seq, ci.num_pending, ci.num_ack_pending, ci.ack_floor.stream_seq) == (7, 0, 0, 7)
