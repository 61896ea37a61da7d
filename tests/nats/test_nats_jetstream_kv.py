"""JetStream key-value buckets, the object store and the stream features under them, against the real nats-server.

The same nats-py steps run against a Ferry gateway and ``nats-server -js``
(``assert_same_results``): KV put/get/create/update with revision checks,
delete and purge markers, history, keys, watch (deliver last per subject,
headers only), purge_deletes (filtered purge with keep), bucket status; the
object store with a 5 MiB object (chunks, digest, overwrite, delete); and
raw requests for max_msgs_per_subject, Nats-Rollup, STREAM.MSG.DELETE,
DIRECT.GET, filtered purges, discard new and Nats-TTL. Ferry-only tests
cover kill -9 of the gateway with a KV bucket and a watcher's durable state.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json

import pytest
from ferry_harness import running_gateway
from test_nats_jetstream_streams import (  # noqa: F401 - real_js is a fixture
    WAIT,
    api_error,
    assert_same_results,
    killed_gateway,
    needs_server,
    norm,
    raw,
    real_js,
    run,
)

nats = pytest.importorskip("nats")
from nats.js.errors import APIError, KeyNotFoundError, KeyWrongLastSequenceError, NoKeysError  # noqa: E402


async def _try(coro):
    try:
        return await coro
    except (KeyNotFoundError, NoKeysError) as exc:
        return ("missing", type(exc).__name__)
    except APIError as exc:
        return api_error(exc)


def entry(e) -> tuple | None:
    if e is None:
        return None
    return (e.key, e.value, e.revision, e.operation)


async def kv_steps(url: str) -> list:
    nc = await nats.connect(url)
    js = nc.jetstream()
    out: list = []
    kv = await js.create_key_value(bucket="CFG", history=3)
    status = await kv.status()
    out.append(("bucket", status.bucket, status.history, status.values))
    out.append(norm((await js.stream_info("KV_CFG")).config.as_dict()))
    out.append(await kv.put("color", b"red"))
    out.append(await kv.put("color", b"blue"))
    out.append(await kv.put("size", b"L"))
    out.append(entry(await kv.get("color")))
    out.append(entry(await kv.get("color", revision=1)))
    try:
        await kv.update("color", b"green", last=1)
        out.append("update with a stale revision accepted")
    except KeyWrongLastSequenceError as exc:
        out.append(("wrong last", exc.description))
    out.append(await kv.update("color", b"green", last=2))
    try:
        await kv.create("size", b"XL")
        out.append("create over a live key accepted")
    except KeyWrongLastSequenceError as exc:
        out.append(("create refused", exc.description))
    for value in (b"red", b"pink", b"teal"):          # history 3: the oldest go
        await kv.put("color", value)
    out.append([entry(e) for e in await kv.history("color")])
    out.append(await _try(kv.get("color", revision=2)))    # past history: gone
    await kv.delete("size")
    out.append(await _try(kv.get("size")))
    out.append(await kv.create("size", b"S"))              # create over a delete marker
    await kv.purge("color")
    out.append([entry(e) for e in await kv.history("color")])
    out.append(sorted(await kv.keys()))
    await kv.put("shape", b"round")
    watcher = await kv.watchall()
    seen = []
    while True:
        e = await watcher.updates(timeout=WAIT)
        seen.append(entry(e))
        if e is None:
            break
    await kv.put("shape", b"square")
    seen.append(entry(await watcher.updates(timeout=WAIT)))
    await watcher.stop()
    out.append(seen)
    meta = await kv.watchall(meta_only=True)
    first = await meta.updates(timeout=WAIT)
    out.append(("meta only", first.key, first.value))
    await meta.stop()
    await kv.purge_deletes(olderthan=-1)
    status = await kv.status()
    out.append(("values", status.values))
    state = (await js.stream_info("KV_CFG")).state
    out.append(("state", state.messages, state.first_seq, state.last_seq))
    await js.delete_key_value("CFG")
    await nc.close()
    return out


async def object_steps(url: str) -> list:
    nc = await nats.connect(url)
    js = nc.jetstream()
    out: list = []
    obs = await js.create_object_store("FILES")
    blob = bytes(range(256)) * (5 * 1024 * 4)                     # 5 MiB
    info = await obs.put("big.bin", blob)
    out.append((info.name, info.size, info.chunks, info.digest))
    got = await obs.get("big.bin")
    out.append((len(got.data), hashlib.sha256(got.data).hexdigest() == hashlib.sha256(blob).hexdigest(),
                got.info.digest))
    await obs.put("big.bin", b"small now")                        # overwrite: old chunks purged
    out.append((await obs.get("big.bin")).data)
    state = (await js.stream_info("OBJ_FILES")).state
    out.append(("after overwrite", state.messages))
    await obs.put("other", b"x" * 1000)
    out.append(sorted(i.name for i in await obs.list()))
    await obs.delete("other")
    out.append(sorted(i.name for i in await obs.list(ignore_deletes=True)))
    out.append(await _try(obs.get("nope")))
    await nc.close()
    return out


def _b64(text: str | None) -> str | None:
    return base64.b64decode(text).decode() if text else None


async def feature_steps(url: str) -> list:
    """Raw requests for each stream feature KV and the object store build on."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    out: list = []

    async def pub(subject, data=b"", headers=None):
        msg = await nc.request(subject, data, headers=headers, timeout=WAIT)
        return json.loads(msg.data)

    async def direct(subject, body=b""):
        msg = await nc.request(subject, body, timeout=WAIT)
        hdrs = {k: v for k, v in (msg.headers or {}).items() if k != "Nats-Time-Stamp"}
        return (hdrs, msg.data)

    await js.add_stream(name="F", subjects=["f.>"], max_msgs_per_subject=2, allow_rollup_hdrs=True,
                        allow_direct=True)
    for i in range(3):
        out.append(await pub("f.a", b"a%d" % i))
    out.append(await pub("f.b", b"b0"))
    out.append(norm(await raw(nc, "$JS.API.STREAM.INFO.F")))
    out.append(await raw(nc, "$JS.API.STREAM.MSG.GET.F", {"seq": 1}))
    out.append(await raw(nc, "$JS.API.STREAM.MSG.GET.F", {"last_by_subj": "f.a"}))
    out.append(await direct("$JS.API.DIRECT.GET.F.f.a"))
    out.append(await direct("$JS.API.DIRECT.GET.F", b'{"seq": 2}'))
    out.append(await direct("$JS.API.DIRECT.GET.F", b'{"next_by_subj": "f.b", "seq": 1}'))
    out.append(await direct("$JS.API.DIRECT.GET.F", b'{"seq": 1}'))
    out.append(await direct("$JS.API.DIRECT.GET.F", b""))
    out.append(await direct("$JS.API.DIRECT.GET.F", b"{bad"))
    out.append(await pub("f.c", b"c0"))
    out.append(await pub("f.a", b"roll", {"Nats-Rollup": "sub"}))
    out.append(await pub("f.a", b"x", {"Nats-Rollup": "bogus"}))
    out.append(norm(await raw(nc, "$JS.API.STREAM.INFO.F"))["state"])
    out.append(await raw(nc, "$JS.API.STREAM.MSG.DELETE.F", {"seq": 4}))
    out.append(await raw(nc, "$JS.API.STREAM.MSG.DELETE.F", {"seq": 4}))
    out.append(await raw(nc, "$JS.API.STREAM.MSG.DELETE.F", b""))
    out.append(await raw(nc, "$JS.API.STREAM.MSG.DELETE.F", {"seq": 999}))
    out.append(await raw(nc, "$JS.API.STREAM.MSG.DELETE.F", {"seq": 1}))
    out.append(await raw(nc, "$JS.API.STREAM.MSG.GET.F", {"seq": 4}))
    out.append(norm(await raw(nc, "$JS.API.STREAM.INFO.F"))["state"])
    out.append(await pub("f.all", b"everything", {"Nats-Rollup": "all"}))
    out.append(norm(await raw(nc, "$JS.API.STREAM.INFO.F"))["state"])
    for s in ("f.x", "f.y", "f.x", "f.y", "f.z"):
        await pub(s, s.encode())
    out.append(await raw(nc, "$JS.API.STREAM.PURGE.F", {"filter": "f.x"}))
    out.append(await raw(nc, "$JS.API.STREAM.PURGE.F", {"filter": "f.*", "keep": 2}))
    out.append(norm(await raw(nc, "$JS.API.STREAM.INFO.F"))["state"])
    sub = await js.pull_subscribe("f.>", "all", stream="F")
    msgs = await sub.fetch(10, timeout=WAIT)
    out.append([(m.subject, m.data, m.metadata.sequence.stream, m.metadata.num_pending) for m in msgs])

    await js.add_stream(name="N", subjects=["n.*"], discard="new", max_msgs=2, max_msgs_per_subject=1,
                        discard_new_per_subject=True)
    out.append(await pub("n.a", b"1"))
    out.append(await pub("n.a", b"2"))
    out.append(await pub("n.b", b"3"))
    out.append(await pub("n.c", b"4"))
    out.append(await raw(nc, "$JS.API.STREAM.CREATE.P", {"name": "P", "discard_new_per_subject": True}))

    await js.add_stream(name="T", subjects=["t.*"])
    out.append(await pub("t.a", b"ttl", {"Nats-TTL": "1s"}))
    await js.add_stream(name="TT", subjects=["tt.*"], allow_msg_ttl=True)
    out.append(await pub("tt.a", b"ttl", {"Nats-TTL": "1s"}))
    out.append(await pub("tt.a", b"ttl", {"Nats-TTL": "bad"}))
    out.append(await pub("tt.b", b"stays"))
    out.append(norm(await raw(nc, "$JS.API.STREAM.INFO.TT"))["state"]["messages"])
    await asyncio.sleep(2.2)
    out.append(norm(await raw(nc, "$JS.API.STREAM.INFO.TT"))["state"])
    out.append(await raw(nc, "$JS.API.STREAM.MSG.GET.TT", {"seq": 1}))

    out.append(await raw(nc, "$JS.API.STREAM.CREATE.RP", {"name": "RP", "deny_purge": True,
                                                           "allow_rollup_hdrs": True}))
    try:
        await nc.request("$JS.API.DIRECT.GET.T.t.a", b"", timeout=WAIT)
        out.append("direct get answered without allow_direct")
    except nats.errors.NoRespondersError:
        out.append("no responders")
    await js.add_stream(name="NA", subjects=["na.*"], no_ack=True)
    try:
        await nc.request("na.a", b"quiet", timeout=0.5)
        out.append("no_ack stream acked")
    except nats.errors.TimeoutError:
        out.append("no ack")
    out.append(norm(await raw(nc, "$JS.API.STREAM.INFO.NA"))["state"]["messages"])

    ordered = await js.subscribe("f.>", ordered_consumer=True, deliver_policy="last_per_subject", headers_only=True)
    got = []
    while not got or got[-1][-1]:
        m = await ordered.next_msg(timeout=WAIT)
        got.append((m.subject, m.data, m.headers.get("Nats-Msg-Size"), m.metadata.num_pending))
    out.append(got)
    await nc.close()
    return out


async def retention_steps(url: str) -> list:
    """Work-queue and interest retention: acked messages leave the stream."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    out: list = []

    async def state(name):
        st = (await js.stream_info(name)).state
        return (st.messages, st.first_seq, st.last_seq)

    async def create(stream, cfg):
        name = cfg["durable_name"]
        return norm(await raw(nc, f"$JS.API.CONSUMER.CREATE.{stream}.{name}", {"stream_name": stream, "config": cfg}))

    out.append(norm((await js.add_stream(name="WQ", subjects=["wq.*"], retention="workqueue")).config.as_dict()))
    for i in range(4):
        await js.publish("wq.a" if i % 2 == 0 else "wq.b", b"w%d" % i)
    out.append(await state("WQ"))
    out.append((await create("WQ", {"durable_name": "X", "ack_policy": "none"}))["error"])
    out.append((await create("WQ", {"durable_name": "X", "ack_policy": "explicit", "deliver_policy": "new"}))["error"])
    sub = await js.pull_subscribe("wq.a", "A", stream="WQ")
    out.append((await create("WQ", {"durable_name": "U", "ack_policy": "explicit"}))["error"])
    out.append((await create("WQ", {"durable_name": "B2", "ack_policy": "explicit", "filter_subject": "wq.*"}))
               ["error"])
    msgs = await sub.fetch(2, timeout=WAIT)
    out.append([m.data for m in msgs])
    await msgs[0].ack_sync()
    out.append(await state("WQ"))
    await msgs[1].nak()
    again = await sub.fetch(1, timeout=WAIT)
    await again[0].ack_sync()
    out.append(await state("WQ"))
    bsub = await js.pull_subscribe("wq.b", "B", stream="WQ")
    for m in await bsub.fetch(2, timeout=WAIT):
        await m.ack_sync()
    out.append(await state("WQ"))
    out.append(await raw(nc, "$JS.API.STREAM.UPDATE.WQ", {"name": "WQ", "subjects": ["wq.*"]}))

    await js.add_stream(name="IN", subjects=["in.*"], retention="interest")
    await js.publish("in.a", b"nobody")                     # no consumer: not kept
    out.append(await state("IN"))
    one = await js.pull_subscribe("in.*", "ONE", stream="IN")
    two = await js.pull_subscribe("in.a", "TWO", stream="IN")
    await js.publish("in.a", b"both")
    await js.publish("in.b", b"one only")
    out.append(await state("IN"))
    for m in await one.fetch(2, timeout=WAIT):
        await m.ack_sync()
    out.append(await state("IN"))                           # in.a still wanted by TWO
    for m in await two.fetch(1, timeout=WAIT):
        await m.ack_sync()
    out.append(await state("IN"))
    await js.publish("in.a", b"left behind")
    out.append(await state("IN"))
    await js.delete_consumer("IN", "TWO")
    await js.delete_consumer("IN", "ONE")
    out.append(await state("IN"))
    await nc.close()
    return out


async def direct_steps(url: str) -> list:
    """DIRECT.GET batches, multi_last, no_hdr and start_time: every message and status as data."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="D", subjects=["d.>"], allow_direct=True)
    for i, s in enumerate(["d.a", "d.b", "d.a", "d.c.x", "d.b", "d.c.y"]):
        await js.publish(s, b"m%d" % i, headers={"H": str(i)} if i % 2 else None)
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)

    async def ask(body) -> list:
        await nc.publish("$JS.API.DIRECT.GET.D", json.dumps(body).encode() if isinstance(body, dict) else body,
                         reply=inbox)
        got = []
        while True:
            try:
                m = await sub.next_msg(timeout=1.0)
            except nats.errors.TimeoutError:
                got.append("silence")
                return got
            hdrs = {k: v for k, v in (m.headers or {}).items() if k != "Nats-Time-Stamp"}
            got.append((hdrs, m.data))
            if not m.data and hdrs.get("Status") in ("204", "404", "408", "413") or not m.data and "Status" in hdrs:
                return got
            if "Nats-Num-Pending" not in hdrs:
                return got                                   # a single message

    out = [await ask({"seq": 1, "batch": 3}),
           await ask({"seq": 2, "batch": 10, "next_by_subj": "d.a"}),
           await ask({"seq": 1, "batch": 2, "next_by_subj": "d.c.*"}),
           await ask({"seq": 1, "batch": 5, "max_bytes": 5}),
           await ask({"multi_last": ["d.a", "d.c.>"]}),
           await ask({"multi_last": [">"], "up_to_seq": 3}),
           await ask({"multi_last": [">"], "batch": 2}),
           await ask({"multi_last": ["d.zzz"]}),
           await ask({"seq": 2, "no_hdr": True}),
           await ask({"start_time": "2000-01-01T00:00:00Z"}),
           await ask({"seq": 99, "batch": 2}),
           await ask({"last_by_subj": "d.a", "batch": 2}),
           await ask({"next_by_subj": "d.a", "multi_last": ["d.a"]})]
    await nc.close()
    return out


@pytest.mark.slow
@needs_server
@pytest.mark.parametrize("script", [kv_steps, object_steps, feature_steps, retention_steps, direct_steps],
                         ids=["kv", "object_store", "features", "retention", "direct_get"])
def test_same_results_as_nats_server(tmp_path, real_js, script):  # noqa: F811 - the fixture imported above
    assert_same_results(tmp_path, real_js, script)


def test_kv_bucket_survives_kill_9(tmp_path):
    """KV contents, deletes and purges come back after kill -9 of the gateway."""
    async def first(url):
        nc = await nats.connect(url)
        js = nc.jetstream()
        kv = await js.create_key_value(bucket="K", history=2)
        for i in range(5):
            await kv.put("a", b"a%d" % i)
        await kv.put("b", b"b")
        await kv.put("c", b"c")
        await kv.delete("b")
        await kv.purge("c")
        await js.purge_stream("KV_K", subject="$KV.K.a", keep=1)
        await nc.close()

    async def second(url):
        nc = await nats.connect(url)
        js = nc.jetstream()
        kv = await js.key_value("K")
        out = [[entry(e) for e in await kv.history("a")]]
        out.append(await _try(kv.get("b")))
        out.append(sorted(await kv.keys()))
        out.append((await kv.status()).values)
        await nc.close()
        return out

    with killed_gateway(tmp_path) as url:
        run(first(url))
    with killed_gateway(tmp_path) as url:
        out = run(second(url))
    assert out[0] == [("a", b"a4", 5, None)]
    assert out[1] == ("missing", "KeyNotFoundError")
    assert out[2] == ["a"]
    assert out[3] == 4            # a4; b and its delete marker (history 2); the purge marker of c


def test_acked_messages_stay_removed_after_a_restart(tmp_path):
    """Work-queue acks by a consumer that is gone, and interest acks before a
    switch to limits, are saved: a restart (an index rebuild) brings nothing back."""

    async def state(js, name):
        st = (await js.stream_info(name)).state
        return (st.messages, st.first_seq, st.last_seq)

    async def first(url):
        nc = await nats.connect(url)
        js = nc.jetstream()
        await js.add_stream(name="W", subjects=["w.*"], retention="workqueue")
        await js.add_stream(name="I", subjects=["i.*"], retention="interest")
        durable = await js.pull_subscribe("i.*", "C", stream="I")
        for i in range(3):
            await js.publish("w.a", b"w%d" % i)
            await js.publish("i.a", b"i%d" % i)
        eph = await js.pull_subscribe("w.*", stream="W")
        for m in await eph.fetch(2, timeout=WAIT):
            await m.ack_sync()
        await eph.unsubscribe()
        for m in await durable.fetch(3, timeout=WAIT):
            await m.ack_sync()
        await js.update_stream(name="I", subjects=["i.*"], retention="limits")
        await asyncio.sleep(0.6)                       # past the 0.2 s save interval
        out = [await state(js, "W"), await state(js, "I")]
        await nc.close()
        return out

    async def second(url):
        nc = await nats.connect(url)
        js = nc.jetstream()
        out = [await state(js, "W"), await state(js, "I")]
        await nc.close()
        return out

    with running_gateway(tmp_path) as gw:
        before = run(first(gw.url()))
    with running_gateway(tmp_path) as gw:
        after = run(second(gw.url()))
    assert before == [(1, 3, 3), (0, 4, 3)]
    assert after == before


def test_work_queue_deletes_fold_into_the_purge_floor(tmp_path):
    """Hundreds of acked work-queue messages leave a purge floor, not hundreds of saved deletes."""
    from core.broker import Broker

    async def work(url):
        nc = await nats.connect(url)
        js = nc.jetstream()
        await js.add_stream(name="WC", subjects=["wc.*"], retention="workqueue")
        for i in range(600):
            await js.publish("wc.a", b"%d" % i)
        sub = await js.pull_subscribe("wc.*", "C", stream="WC")
        done = 0
        while done < 600:
            for m in await sub.fetch(100, timeout=WAIT):
                await m.ack_sync()
                done += 1
        await asyncio.sleep(0.6)
        st = (await js.stream_info("WC")).state
        await nc.close()
        return (st.messages, st.first_seq, st.last_seq)

    with running_gateway(tmp_path) as gw:
        assert run(work(gw.url())) == (0, 601, 600)
    with Broker.open(tmp_path / "data") as broker:
        saved = broker.tables.entries("nats.jetstream.removed", None, 1000)
    assert len(saved) < 256, len(saved)
