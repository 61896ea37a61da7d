"""The console's Consumers and JetStream views in a real headless Chromium (issue 28).

One gateway with every listener and one browser session. Real clients make readers of
every kind, each consuming only part of what was sent: an apache-iggy 0.9 consumer group,
a pravega 0.3.8 reader group (both in their own venvs, tests/support/), and nats-py with a
JetStream stream, a durable pull consumer that fetches some messages and acks fewer, a KV
bucket with several revisions of a key and an object store holding one object. The views
must show the counts and lags those numbers imply, and keep up while shown (two more
publishes move the pending count without a reload). Screenshots go to
``$FERRY_ARTIFACTS/readers`` (tests/http/console_cdp.py).
"""

from __future__ import annotations

import asyncio
import json

import nats
import pytest
import trio

import iggy_clients
import pravega_clients
from console_cdp import (SESSION_LIMIT_S, STEP_LIMIT_S, artifacts_dir, chromium_page, full_gateway, log_in,
                         needs_chromium, page_problems)

pytestmark = pytest.mark.slow  # two real clients' venvs and a browser

IGGY_SENT = (10, 6)          # messages per partition of shop/orders
IGGY_TAKEN = 7               # taken by the group, then stored
PV_WRITTEN, PV_READ = 10, 4  # events of pv/events ("e0".."e9": 2 bytes + an 8-byte frame header each)
JS_SENT, JS_FETCHED, JS_ACKED = 10, 6, 4
KV_COLORS = ("red", "blue", "green")  # three revisions of key "color", then one of "size"
OBJECT_BYTES = 3000


def jetstream_setup(url: str) -> None:
    """nats-py in its own event loop (a worker thread of the trio test)."""
    async def main():
        nc = await nats.connect(url)
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["orders.>"])
        for i in range(JS_SENT):
            await js.publish(f"orders.new.{i}", b"order %d" % i)
        sub = await js.pull_subscribe("orders.>", durable="worker")
        got = []
        while len(got) < JS_FETCHED:
            got += await sub.fetch(JS_FETCHED - len(got), timeout=STEP_LIMIT_S)
        for msg in got[:JS_ACKED]:
            await msg.ack_sync()
        kv = await js.create_key_value(bucket="config", history=5)
        for color in KV_COLORS:
            await kv.put("color", color.encode())
        await kv.put("size", b"L")
        store = await js.create_object_store("files")
        await store.put("hello.txt", b"x" * OBJECT_BYTES)
        await nc.close()

    asyncio.run(asyncio.wait_for(main(), STEP_LIMIT_S))


def publish_more(url: str, count: int) -> None:
    async def main():
        nc = await nats.connect(url)
        js = nc.jetstream()
        for i in range(count):
            await js.publish(f"orders.late.{i}", b"late")
        await nc.close()

    asyncio.run(asyncio.wait_for(main(), STEP_LIMIT_S))


def cells(table_id: str) -> str:
    """JS: {row key: [cell texts]} of a table the views drew."""
    return (f"(() => {{ const t = document.getElementById({json.dumps(table_id)}); if (!t) return null; "
            "const out = {}; for (const r of t.tBodies[0].rows) if (r.dataset.key) "
            "out[r.dataset.key] = [...r.cells].map(c => c.textContent); return out; })()")


@needs_chromium
async def test_consumers_and_jetstream_views(tmp_path):
    shots = artifacts_dir("readers")
    with trio.fail_after(SESSION_LIMIT_S + pravega_clients.SCENARIO_TIMEOUT_S):
        async with full_gateway(tmp_path) as ports, chromium_page(tmp_path / "chromium", shots) as page:
            base = f"http://127.0.0.1:{ports['http']}"
            nats_url = f"nats://iggy:iggy@127.0.0.1:{ports['nats']}"
            results = {}

            async def iggy():
                lines = await trio.to_thread.run_sync(
                    iggy_clients.run_scenario, "apache-iggy==0.9.0", "console_group.py", ports["iggy_tcp"],
                    "shop", "orders", *map(str, IGGY_SENT), str(IGGY_TAKEN))
                results["iggy"] = lines[-1]

            async def pravega():
                results["pravega"] = await trio.to_thread.run_sync(
                    pravega_clients.run_scenario, "console_readers.py", str(ports["pravega_controller"]), "pv",
                    "events", str(PV_WRITTEN), str(PV_READ))

            async with trio.open_nursery() as nursery:  # the three clients at once: the test's time is the slowest
                nursery.start_soon(iggy)
                nursery.start_soon(pravega)
                nursery.start_soon(trio.to_thread.run_sync, jetstream_setup, nats_url)
                await log_in(page, base)

            stored = {int(p): o for p, o in results["iggy"]["stored"].items()}
            assert results["iggy"]["taken"] == IGGY_TAKEN and sum(o + 1 for o in stored.values()) == IGGY_TAKEN
            assert results["pravega"]["read"]["got"] == [f"e{i}" for i in range(PV_READ)]

            # -- Consumers: one view of the three kinds of readers
            await page.click("#nav button[data-view=consumers]")
            groups = await page.wait_for(cells("iggy-groups"), "the Iggy group listed")
            assert list(groups) == ["shop/orders/console-group"]
            _, name, members, lag, per = groups["shop/orders/console-group"]
            assert (name, lag) == ("console-group", str(sum(IGGY_SENT) - IGGY_TAKEN))
            assert members == "0"  # the client's connection ended with its script
            lags = await page.eval("[...document.querySelectorAll('#iggy-groups li')].map(li => "
                                   "[Number(li.dataset.partition), Number(li.dataset.lag)])")
            # apache-iggy 0.9 numbers partitions from 0 as the core does (docs/internals.md)
            assert sorted(lags) == [[p, IGGY_SENT[p] - (stored[p] + 1 if p in stored else 0)] for p in (0, 1)]

            js_rows = await page.wait_for(cells("js-consumers"), "the JetStream consumer listed")
            assert js_rows["ORDERS/worker"] == ["ORDERS", "worker", "pull", "orders.>", str(JS_FETCHED),
                                                str(JS_ACKED), str(JS_FETCHED - JS_ACKED),
                                                str(JS_SENT - JS_FETCHED), "0"]
            pv = (await page.wait_for(cells("pv-groups"), "the Pravega reader group listed"))["pv/console-rg"]
            assert pv[:5] == ["pv/console-rg", "pv/events", "none", str(PV_WRITTEN - PV_READ),
                              f"{(PV_WRITTEN - PV_READ) * 10} B"]
            assert pv[5] == (f"pv/events/0.#epoch.0 (unassigned): position {PV_READ * 10} of {PV_WRITTEN * 10} "
                             f"bytes, lag {PV_WRITTEN - PV_READ} events / {(PV_WRITTEN - PV_READ) * 10} B")
            await page.screenshot("consumers")

            # refreshed while shown: two more publishes raise the consumer's pending count
            await trio.to_thread.run_sync(publish_more, nats_url, 2)
            await page.wait_for(f"({cells('js-consumers')} || {{}})['ORDERS/worker'][7] === "
                                f"'{JS_SENT - JS_FETCHED + 2}'", "the pending count refreshed")

            # -- JetStream: streams, consumers, KV keys, objects
            await page.click("#nav button[data-view=jetstream]")
            streams = await page.wait_for(cells("js-streams"), "the JetStream streams listed")
            assert set(streams) == {"ORDERS", "KV_config", "OBJ_files"}
            orders = streams["ORDERS"]
            assert orders[:5] == ["ORDERS", "stream", "orders.>", "limits", "file"]
            assert orders[6] == str(JS_SENT + 2) and orders[8:10] == ["1", str(JS_SENT + 2)]
            assert orders[11] == "1"  # one consumer
            assert streams["KV_config"][1] == "kv" and streams["KV_config"][6] == str(len(KV_COLORS) + 1)
            assert streams["OBJ_files"][1] == "object"
            kv = await page.wait_for(cells("kv-config"), "the KV keys listed")
            assert kv == {"color": ["color", KV_COLORS[-1], str(len(KV_COLORS)), str(len(KV_COLORS)), "PUT"],
                          "size": ["size", "L", str(len(KV_COLORS) + 1), "1", "PUT"]}
            objects = await page.wait_for(cells("obj-files"), "the object listed")
            assert objects["hello.txt"][:4] == ["hello.txt", "2.9 KiB", str(OBJECT_BYTES), "1"]
            consumers = await page.eval(cells("js-stream-consumers"))
            assert consumers["ORDERS/worker"][6:] == [str(JS_FETCHED), str(JS_ACKED), str(JS_FETCHED - JS_ACKED),
                                                      str(JS_SENT - JS_FETCHED + 2)]
            await page.screenshot("jetstream")

            # keyboard: the nav buttons are reachable and work with Enter
            await page.eval("document.querySelector('#nav button[data-view=consumers]').focus()")
            await page.send("Input.dispatchKeyEvent", type="keyDown", key="Enter", code="Enter", text="\r",
                            windowsVirtualKeyCode=13)
            await page.send("Input.dispatchKeyEvent", type="keyUp", key="Enter", code="Enter",
                            windowsVirtualKeyCode=13)
            await page.wait_for("!document.getElementById('consumers').hidden", "Consumers shown from the keyboard")

            csp, thrown = page_problems(page)
            assert not csp and not thrown, (csp, thrown)
    assert [p.name for p in page.saved] == ["01-consumers.png", "02-jetstream.png"]
