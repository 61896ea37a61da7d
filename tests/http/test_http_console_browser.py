"""The web console in a real headless Chromium, driven over the Chrome DevTools Protocol.

One scripted session against a gateway with every listener: log in through the form,
create a stream and a topic through the UI, publish through NATS (nats-py), watch the
overview's messages-in series for the ``nats`` listener rise, find the messages in the
message browser with their NATS origin (and HTTP-posted ones: markup shown as text,
control bytes as visible symbols), page older (by keyboard) and newer, filter by header
and payload text, switch the payload to hex and JSON, create and delete a user and a
token, log out. A PNG screenshot is saved at every step
into ``$FERRY_ARTIFACTS/console`` (default ``<repo>/.artifacts/console/``; tests/http/console_cdp.py).

No timing thresholds: every wait polls the page's own state (``window.ferryConsole``
and the DOM) until it holds, under one generous per-test deadline.
"""

from __future__ import annotations

import asyncio
import base64

import httpx
import nats
import pytest
import trio

from console_cdp import (SESSION_LIMIT_S, STEP_LIMIT_S, artifacts_dir, chromium_page, full_gateway, needs_chromium,
                         page_problems, publish_nats)

NATS_MESSAGES_IN = "(ferryConsole.series('messages_in').nats || [])"
# The browser's rows as data; a wait adds its condition and closes the function.
ROWS = ("(() => { const r = [...document.querySelectorAll('#message-table tbody tr')].map((x) => ({"
        "partition: Number(x.dataset.partition), offset: Number(x.dataset.offset), "
        "origin: x.querySelector('td.origin').textContent, key: x.querySelector('td.key span').textContent, "
        "headers: x.querySelector('ul.headers').textContent, size: x.querySelector('td.size').textContent, "
        "payload: x.querySelector('td.payload pre').textContent, "
        "view: x.querySelector('td.payload').dataset.view, "
        "note: [...x.querySelectorAll('td.payload .hint')].map((h) => h.textContent).join(' ')}))")


@needs_chromium
async def test_console_session_in_headless_chromium(tmp_path):
    shots = artifacts_dir()
    with trio.fail_after(SESSION_LIMIT_S):
        async with full_gateway(tmp_path) as ports, chromium_page(tmp_path / "chromium", shots) as page, \
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{ports['http']}", timeout=STEP_LIMIT_S) as api:
            base = str(api.base_url).rstrip("/")
            # -- login through the form
            await page.send("Page.navigate", url=base + "/")
            await page.wait_for("document.readyState === 'complete' && window.ferryConsole !== undefined",
                                "the console script loaded (CSP allows it)")
            await page.screenshot("login")
            await page.type_into("#u", "iggy")
            await page.type_into("#p", "iggy")
            await page.click("#login button")
            await page.wait_for("!document.getElementById('nav').hidden && sessionStorage.getItem('ferry-token')",
                                "logged in")
            token = await page.eval("sessionStorage.getItem('ferry-token')")
            api.headers["authorization"] = "Bearer " + token
            await page.wait_for("ferryConsole.state.samples.length >= 3", "three metrics snapshots")
            await page.wait_for("!!document.querySelector('#chart-messages_in polyline[data-series=\"http\"]')",
                                "the messages-in chart draws the http listener")
            await page.screenshot("overview")

            # -- a stream and a topic created through the UI
            await page.click("#nav button[data-view=streams]")
            await page.type_into("#new-stream-name", "shop")
            await page.click("#new-stream button")
            await page.wait_for("!!document.querySelector('#stream-list li[data-stream=\"shop\"]')", "stream shop listed")
            form = "#stream-list li[data-stream=\"shop\"] form.new-topic"
            await page.type_into(form + " input[name=name]", "orders")
            await page.type_into(form + " input[name=partitions]", "2")
            await page.click(form + " button")
            await page.wait_for("!!document.querySelector('li[data-topic=\"orders\"]')", "topic orders listed")
            topic = (await api.get("/streams/shop/topics/orders")).json()
            assert topic["partitions_count"] == 2  # the UI really created it
            await page.click("li[data-topic=\"orders\"] a.topic-name")
            await page.wait_for("document.getElementById('topic-addresses').textContent.includes('shop.orders')",
                                "the topic's NATS subject shown")
            await page.screenshot("topic-created")

            # -- publish through NATS; the overview's nats series must move
            await page.click("#nav button[data-view=overview]")
            assert not await page.eval(f"{NATS_MESSAGES_IN}.some(p => p[1] > 0)")  # nothing from NATS yet
            await trio.to_thread.run_sync(publish_nats, f"nats://iggy:iggy@127.0.0.1:{ports['nats']}", "shop.orders", 20)
            await page.wait_for(f"{NATS_MESSAGES_IN}.some(p => p[1] > 0)", "a positive nats messages-in rate")
            await page.wait_for("!!document.querySelector('#chart-messages_in polyline[data-series=\"nats\"]')",
                                "the chart draws the nats listener")
            rates = await page.eval(f"{NATS_MESSAGES_IN}.map(p => p[1])")
            # the page's rates are counter differences over time: 20 messages in all, whatever the spacing
            spans = await page.eval("(() => { const s = ferryConsole.state.samples; const n = (x) => "
                                    "((x.listeners.nats || {}).messages_in || 0); "
                                    "return n(s[s.length - 1]) - n(s[0]); })()")
            assert spans == 20 and max(rates) > 0
            await page.wait_for("[...document.querySelectorAll('#listeners tbody tr')]"
                                ".some(r => r.dataset.listener === 'nats')", "the listener table has nats")
            await page.screenshot("overview-after-nats")

            # -- HTTP messages (markup, control bytes, JSON), then the browser shows both writers
            def http_message(payload: bytes, **headers: str) -> dict:
                return {"payload": base64.b64encode(payload).decode(), "headers": {
                    k: {"kind": "string", "value": base64.b64encode(v.encode()).decode()} for k, v in headers.items()}}

            r = await api.post("/streams/shop/topics/orders/messages", json={
                "partitioning": {"kind": "partition_id", "value": base64.b64encode(b"\0\0\0\0").decode()},
                "messages": [http_message(b"<b>hello from http</b>", source="pytest"),
                             http_message(b"bell\x07 nul\x00 esc\x1b[1m\xff", source="binary"),
                             http_message(b'{"order":7,"lines":[{"sku":"a-1","qty":2}],"big":12345678901234567890}',
                                          source="json")]})
            assert r.status_code == 201, r.text
            await page.click("#nav button[data-view=messages]")
            await page.wait_for("[...document.getElementById('b-stream').options].some(o => o.value === 'shop')",
                                "stream choices loaded")
            await page.eval("(() => { const s = document.getElementById('b-stream'); s.value = 'shop'; "
                            "s.dispatchEvent(new Event('change')); const t = document.getElementById('b-topic'); "
                            "t.value = 'orders'; t.dispatchEvent(new Event('change')); })()")
            await page.type_into("#b-count", "50")
            await page.click("#b-show")
            rows = await page.wait_for(ROWS + "; return r.length === 23 && r; })()", "23 messages in the browser")
            nats_rows = [r for r in rows if r["origin"] == "NATS"]
            assert len(nats_rows) == 20 and {r["payload"] for r in nats_rows} == {f"hello from nats {i}" for i in range(20)}
            assert all("ferry-nats-subject=shop.orders" in r["headers"] and "trace=console-" in r["headers"]
                       for r in nats_rows)
            assert all(r["key"].startswith("shop.orders") for r in nats_rows)  # a NATS message's key: its subject
            # newest first: the three HTTP messages, last posted on top
            assert [(r["origin"], r["headers"]) for r in rows[:3]] == [
                ("Iggy/HTTP", "source=json"), ("Iggy/HTTP", "source=binary"), ("Iggy/HTTP", "source=pytest")]
            assert rows[2]["payload"] == "<b>hello from http</b>"
            assert await page.eval("document.querySelector('#message-table td.payload b')") is None  # text, not markup
            # control bytes and a byte that is not UTF-8 as marked ASCII escapes: never a box or nothing
            assert rows[1]["payload"] == r"bell\x07 nul\x00 esc\x1b[1m\xff"
            assert await page.eval("[...document.querySelectorAll('#message-table tbody tr')][1]"
                                   ".querySelectorAll('td.payload span.esc').length") == 4
            assert rows[1]["size"] == "19 B"
            assert await page.eval("document.getElementById('title').textContent") == "Messages of shop/orders"
            await page.screenshot("messages")

            # -- pages of 8: older, older, then newer, by keyboard as well as by click
            every = [(r["partition"], r["offset"]) for r in rows]
            await page.type_into("#b-count", "8")
            await page.click("#b-show")
            await page.wait_for(ROWS + "; return r.length === 8 && r[0].headers === 'source=json'; })()",
                                "the newest page of 8")
            assert await page.eval("document.getElementById('b-newer').disabled")  # nothing newer yet
            await page.eval("document.getElementById('b-older').focus()")
            await page.send("Input.dispatchKeyEvent", type="keyDown", key="Enter", code="Enter",
                            windowsVirtualKeyCode=13, text="\r")
            await page.send("Input.dispatchKeyEvent", type="keyUp", key="Enter", code="Enter", windowsVirtualKeyCode=13)
            second = await page.wait_for(ROWS + "; return r.length === 8 && r[0].headers !== 'source=json' && r; })()",
                                         "the second page (Enter on older)")
            assert [(r["partition"], r["offset"]) for r in second] == every[8:16]
            await page.click("#b-older")
            third = await page.wait_for(ROWS + "; return r.length === 7 && r; })()", "the last 7 messages")
            assert [(r["partition"], r["offset"]) for r in third] == every[16:]
            assert await page.eval("document.getElementById('b-older').disabled")  # the oldest page
            await page.screenshot("messages-oldest-page")
            await page.click("#b-newer")
            back = await page.wait_for(ROWS + "; return r.length === 8 && r; })()", "back to the second page")
            assert [(r["partition"], r["offset"]) for r in back] == every[8:16]

            # -- a filter: NATS messages whose payload contains "nats 1" (1, 10..19), oldest first
            await page.type_into("#b-count", "20")
            await page.type_into("#b-header", "trace")
            await page.type_into("#b-text", "NATS 1")
            await page.eval("(() => { const o = document.getElementById('b-order'); o.value = 'oldest'; })()")
            await page.click("#b-show")
            found = await page.wait_for(ROWS + "; return r.length === 11 && r; })()", "11 matches")
            assert sorted(r["payload"] for r in found) == sorted(f"hello from nats {i}" for i in (1, *range(10, 20)))
            status = await page.eval("document.getElementById('b-status').textContent")
            assert status.startswith("11 messages matching, 23 scanned"), status
            await page.screenshot("messages-filtered")
            for field in ("#b-header", "#b-text"):
                await page.type_into(field, "")

            # -- the payload as hex and as JSON
            await page.eval("(() => { const o = document.getElementById('b-order'); o.value = 'newest'; })()")
            await page.type_into("#b-count", "3")
            await page.click("#b-show")
            await page.wait_for(ROWS + "; return r.length === 3 && r[0].headers === 'source=json'; })()",
                                "the three HTTP messages")
            await page.eval("(() => { const v = document.getElementById('b-view'); v.value = 'hex'; "
                            "v.dispatchEvent(new Event('change')); })()")
            hexed = await page.wait_for(ROWS + "; return r[0].view === 'hex' && r; })()", "the hex view")
            assert hexed[2]["payload"].startswith("00000000  3c 62 3e 68 65 6c 6c 6f  20 66 72 6f 6d 20 68 74  "
                                                  "|<b>hello from ht|")
            assert hexed[1]["payload"] == ("00000000  62 65 6c 6c 07 20 6e 75  6c 00 20 65 73 63 1b 5b  |bell. nul. esc.[|\n"
                                           "00000010  31 6d ff" + " " * 42 + "|1m.|")
            await page.screenshot("messages-hex")
            await page.eval("(() => { const v = document.getElementById('b-view'); v.value = 'base64'; "
                            "v.dispatchEvent(new Event('change')); })()")
            b64ed = await page.wait_for(ROWS + "; return r[0].view === 'base64' && r; })()", "the base64 view")
            assert [base64.b64decode(r["payload"]) for r in b64ed[1:]] == [
                b"bell\x07 nul\x00 esc\x1b[1m\xff", b"<b>hello from http</b>"]
            await page.eval("(() => { const v = document.getElementById('b-view'); v.value = 'json'; "
                            "v.dispatchEvent(new Event('change')); })()")
            jsoned = await page.wait_for(ROWS + "; return r[0].view === 'json' && r; })()", "the JSON view")
            assert jsoned[0]["payload"] == ('{\n  "order": 7,\n  "lines": [\n    {\n      "sku": "a-1",\n'
                                            '      "qty": 2\n    }\n  ],\n  "big": 12345678901234567890\n}')
            assert jsoned[2]["view"] == "text" and "not JSON" in jsoned[2]["note"]  # the others say why
            await page.screenshot("messages-json")
            await page.eval("(() => { const v = document.getElementById('b-view'); v.value = 'text'; "
                            "v.dispatchEvent(new Event('change')); })()")

            # -- users and personal access tokens
            await page.click("#nav button[data-view=users]")
            await page.type_into("#nu-name", "alice")
            await page.type_into("#nu-pass", "alice-secret-1")
            await page.click("#new-user button")
            await page.wait_for("!!document.querySelector('#user-table tr[data-user=\"alice\"]')", "user alice listed")
            assert "alice" in [u["username"] for u in (await api.get("/users")).json()]
            await page.type_into("#pat-name", "console-pat")
            await page.click("#new-pat button")
            await page.wait_for("!!document.querySelector('#pat-table tr[data-pat=\"console-pat\"]')", "token listed")
            secret = (await page.eval("document.getElementById('pat-secret').textContent")).rsplit(" ", 1)[1]
            r = await api.post("/personal-access-tokens/login", json={"token": secret})
            assert r.status_code == 200  # the token the page showed once really logs in
            await page.screenshot("users-and-tokens")
            for _ in range(2):  # delete asks once more, then deletes
                await page.click("#pat-table tr[data-pat=\"console-pat\"] button.danger")
            await page.wait_for("!document.querySelector('#pat-table tr[data-pat=\"console-pat\"]')", "token deleted")
            assert (await api.get("/personal-access-tokens")).json() == []
            for _ in range(2):
                await page.click("#user-table tr[data-user=\"alice\"] button.danger")
            await page.wait_for("!document.querySelector('#user-table tr[data-user=\"alice\"]')", "user deleted")

            # -- logout ends the session: the form is back and the JWT no longer works
            await page.click("#logout")
            await page.wait_for("!document.getElementById('login-view').hidden && "
                                "sessionStorage.getItem('ferry-token') === null", "logged out")
            assert (await api.get("/streams")).status_code == 401
            await page.screenshot("logged-out")

            csp, thrown = page_problems(page)
            assert not csp and not thrown, (csp, thrown)
    assert [p.name for p in page.saved] == [
        "01-login.png", "02-overview.png", "03-topic-created.png", "04-overview-after-nats.png",
        "05-messages.png", "06-messages-oldest-page.png", "07-messages-filtered.png", "08-messages-hex.png",
        "09-messages-json.png", "10-users-and-tokens.png", "11-logged-out.png"]
    assert all(p.stat().st_size > 1000 and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in page.saved)
