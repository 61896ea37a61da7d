"""Purges and message deletes made through one scale-out gateway, seen live on the other
(docs/scale-out.md "JetStream consumers"; adapters/nats/jetstream/replicated.py).

Two gateways share one store (the store pass's 3-node nats-server cluster, one store
prefix). The same script runs against them and against the real ``nats-server -js``
(one server: both "gateways" are the same server there): messages published through
A, then, one step at a time and alternating between the gateways, a secure-erase
``STREAM.MSG.DELETE``, a ``no_erase`` one, filtered purges with ``keep`` and with
``seq``, an unfiltered purge with ``keep``, whole-stream purges (a stream with and
one without a subject index), a KV delete and purge, and ``purge_deletes`` (filtered
purges of the markers' subjects). After each step, *both* gateways must show what nats-server shows,
within a deadline (no restart in between): STREAM.INFO's state (messages, first and
last seq, num_deleted, num_subjects, per-subject counts), MSG.GET of every seq
(nats-server's 10037 "no message found" for the removed ones), KV gets, a durable
consumer's num_pending (it was made before the removals), and at the end what new
durable consumers made on either gateway deliver.

Runs only in the store pass (FERRY_TEST_STORE=jetstream, `make test`'s second run)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from contextlib import ExitStack

import pytest
from ferry_harness import TEST_STORE, running_gateway, store_env
from test_nats_jetstream_streams import NATS_SERVER, nats_server_js

nats = pytest.importorskip("nats")
from nats.errors import TimeoutError as NatsTimeout  # noqa: E402
from nats.js.api import AckPolicy, ConsumerConfig  # noqa: E402
from nats.js.errors import KeyDeletedError, KeyNotFoundError  # noqa: E402

pytestmark = [pytest.mark.store,
              pytest.mark.skipif(TEST_STORE != "jetstream", reason="two gateways need the JetStream store pass"),
              pytest.mark.skipif(not NATS_SERVER, reason="nats-server binary not installed (the reference)")]
WAIT_S = 30.0      # a step's limit: guards a hang only (the metadata log takes milliseconds)
STATE_KEYS = ("messages", "first_seq", "last_seq", "num_deleted", "num_subjects", "subjects")
KEYS = ("k1", "k2", "k3")


async def request(nc, subject: str, body: dict | None = None) -> dict:
    msg = await nc.request(subject, json.dumps(body or {}).encode(), timeout=10)
    return json.loads(msg.data)


async def observe(nc, js, stream: str, bucket: str) -> dict:
    """What one gateway shows of the stream, the bucket and the durable consumer "pre"."""
    out: dict = {}
    for name in (stream, f"{stream}T", f"KV_{bucket}"):
        info = await request(nc, f"$JS.API.STREAM.INFO.{name}", {"subjects_filter": ">"})
        state = info["state"]
        out[name] = {k: state.get(k) for k in STATE_KEYS}
        gets = []
        for seq in range(1, state["last_seq"] + 1):
            got = await request(nc, f"$JS.API.STREAM.MSG.GET.{name}", {"seq": seq})
            gets.append(got["message"]["subject"] if "message" in got else
                        (got["error"]["err_code"], got["error"]["description"]))
        out[name]["gets"] = gets
    kv = await js.key_value(bucket)
    for key in KEYS:
        try:
            entry = await kv.get(key)                # a direct get (KV buckets allow direct)
            out[key] = (entry.value.decode(), entry.revision)
        except KeyDeletedError:
            out[key] = "deleted"
        except KeyNotFoundError:
            out[key] = "not found"
    out["pre"] = (await js.consumer_info(stream, "pre")).num_pending
    return out


async def delivered(js, stream: str, durable: str, new: bool = True) -> list[int]:
    """The stream seqs a durable pull consumer delivers, each acked (every one, then a
    wait of a second for an extra); ``new``: made here first and deleted after."""
    if new:
        await js.add_consumer(stream, ConsumerConfig(durable_name=durable, ack_policy=AckPolicy.EXPLICIT))
    psub = await js.pull_subscribe_bind(durable=durable, stream=stream)
    seqs: list[int] = []
    while True:
        try:
            msgs = await psub.fetch(100, timeout=1)
        except (NatsTimeout, asyncio.TimeoutError):
            break
        for m in msgs:
            seqs.append(m.metadata.sequence.stream)
            await m.ack_sync()
    await psub.unsubscribe()
    if new:
        await js.delete_consumer(stream, durable)
    return seqs


async def consumers_view(ja, jb, stream: str, bucket: str, tag: str) -> list:
    """What new durable consumers made on A and on B deliver (the stream, the bucket's stream)."""
    return [f"new consumers {tag}", await delivered(ja, stream, f"a{tag}"), await delivered(jb, stream, f"b{tag}"),
            await delivered(ja, f"KV_{bucket}", f"a{tag}"), await delivered(jb, f"KV_{bucket}", f"b{tag}")]


async def script(url_a: str, url_b: str, tag: str, expected: list | None) -> list:
    """The steps, through A or B as named; after each, both gateways' views. With
    ``expected`` (nats-server's list), each view is awaited until it equals that step's."""
    na, nb = await nats.connect(url_a), await nats.connect(url_b)
    ja, jb = na.jetstream(timeout=10), nb.jetstream(timeout=10)
    stream, bucket = f"RM{tag}", f"rm{tag}"
    views: list = []

    async def check(label: str) -> None:
        want = None if expected is None else expected[len(views)]
        deadline = time.monotonic() + WAIT_S
        while True:
            got = (label, await observe(na, ja, stream, bucket), await observe(nb, jb, stream, bucket))
            if want is None or got == tuple(want):
                break
            if time.monotonic() > deadline:
                sides = ((1, "A", got[1]), (2, "B", got[2]))
                diff = {(side, k): (view.get(k), want[i].get(k)) for i, side, view in sides
                        for k in set(view) | set(want[i]) if view.get(k) != want[i].get(k)}
                raise AssertionError(f"after {want[0]!r}, (gateway, what): (Ferry, nats-server): {diff}")
            await asyncio.sleep(0.1)
        views.append(list(got))

    try:
        await ja.add_stream(name=stream, subjects=[f"{stream}.>"])
        await ja.add_stream(name=f"{stream}T", subjects=[f"{stream}T.>"])     # no index: whole purges only
        for i in range(4):
            for s in ("a", "b", "c"):
                await ja.publish(f"{stream}.{s}", f"{s}{i}".encode())         # seqs 1..12: a b c a b c ...
        for i in range(6):
            await ja.publish(f"{stream}T.x", b"t")
        kva = await ja.create_key_value(bucket=bucket, history=5)
        for key, value in [("k1", "1"), ("k2", "2"), ("k1", "3"), ("k3", "4"), ("k1", "5")]:
            await kva.put(key, value.encode())
        await jb.add_consumer(stream, ConsumerConfig(durable_name="pre", ack_policy=AckPolicy.EXPLICIT))
        await check("published through A")
        kvb = await jb.key_value(bucket)

        await jb.delete_msg(stream, 2)                                         # secure erase
        await check("B deletes seq 2")
        await request(na, f"$JS.API.STREAM.MSG.DELETE.{stream}", {"seq": 6, "no_erase": True})
        await check("A deletes seq 6 (no_erase)")
        await ja.purge_stream(stream, subject=f"{stream}.b", keep=1)
        await check("A purges subject b keeping 1")
        await jb.purge_stream(stream, subject=f"{stream}.a", seq=7)
        await check("B purges subject a below seq 7")
        await jb.purge_stream(f"{stream}T", seq=4)
        await check("B purges the unindexed stream below seq 4")
        await ja.delete_msg(f"{stream}T", 5)
        await check("A deletes seq 5 of the unindexed stream")
        await kvb.delete("k2")
        await kva.purge("k3")                                                  # a rollup: the records say it
        await check("B deletes key k2, A purges key k3")
        await kvb.purge_deletes(olderthan=0)                                   # filtered purges, keep 0
        await check("B purges the delete markers")
        views.append(await consumers_view(ja, jb, stream, bucket, "1"))
        views.append(["pre through B", await delivered(jb, stream, "pre", new=False)])
        await check("pre acked through B")
        await ja.purge_stream(stream, keep=3)
        await check("A purges all but 3")
        for i in range(3):
            await jb.publish(f"{stream}.c", f"late{i}".encode())
        await check("B publishes 3")
        await jb.purge_stream(stream)
        await ja.publish(f"{stream}.a", b"after")
        await check("B purges the whole stream, A publishes 1")
        views.append(await consumers_view(ja, jb, stream, bucket, "2"))
        return views
    finally:
        await na.close()
        await nb.close()


def test_purges_and_deletes_show_on_every_gateway_at_once(tmp_path):
    tag = uuid.uuid4().hex[:6]                   # the same names on both
    with nats_server_js(tmp_path / "real") as real_url:
        reference = asyncio.run(asyncio.wait_for(script(real_url, real_url, tag, None), 120))
    env = store_env()  # one prefix: the same store
    with ExitStack() as stack:
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
        a, b = (stack.enter_context(running_gateway(tmp_path / name, **env)) for name in ("a", "b"))
        ours = asyncio.run(asyncio.wait_for(script(a.url(), b.url(), tag, reference), 300))
    assert ours == reference
