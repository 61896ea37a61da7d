"""The web console in a real headless Chromium, driven over the Chrome DevTools Protocol.

One scripted session against a gateway with every listener: log in through the form,
create a stream and a topic through the UI, publish through NATS (nats-py), watch the
overview's messages-in series for the ``nats`` listener rise, find the messages in the
browser with their NATS origin (and an HTTP-posted one with markup shown as text),
create and delete a user and a token, log out. A PNG screenshot is saved at every step
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

            # -- an HTTP message with markup, then the browser shows both writers
            r = await api.post("/streams/shop/topics/orders/messages", json={
                "partitioning": {"kind": "partition_id", "value": base64.b64encode(b"\0\0\0\0").decode()},
                "messages": [{"payload": base64.b64encode(b"<b>hello from http</b>").decode(),
                              "headers": {"source": {"kind": "string", "value": base64.b64encode(b"pytest").decode()}}}]})
            assert r.status_code == 201, r.text
            await page.click("#nav button[data-view=messages]")
            await page.wait_for("[...document.getElementById('b-stream').options].some(o => o.value === 'shop')",
                                "stream choices loaded")
            await page.eval("(() => { const s = document.getElementById('b-stream'); s.value = 'shop'; "
                            "s.dispatchEvent(new Event('change')); const t = document.getElementById('b-topic'); "
                            "t.value = 'orders'; t.dispatchEvent(new Event('change')); })()")
            await page.type_into("#b-count", "50")
            await page.click("#browse button")
            rows = await page.wait_for(
                "(() => { const r = [...document.querySelectorAll('#message-table tbody tr')]; "
                "return r.length === 21 && r.map(x => [x.querySelector('td.origin').textContent, "
                "x.querySelector('td.payload').textContent, x.querySelector('ul.headers').textContent]); })()",
                "21 messages in the browser")
            nats_rows = [r for r in rows if r[0] == "NATS"]
            assert len(nats_rows) == 20 and {r[1] for r in nats_rows} == {f"hello from nats {i}" for i in range(20)}
            assert all("ferry-nats-subject=shop.orders" in r[2] and "trace=console-" in r[2] for r in nats_rows)
            (http_row,) = [r for r in rows if r[0] != "NATS"]
            assert http_row == ["Iggy/HTTP", "<b>hello from http</b>", "source=pytest"]
            assert await page.eval("document.querySelector('#message-table td.payload b')") is None  # text, not markup
            assert await page.eval("document.getElementById('title').textContent") == "Messages of shop/orders"
            await page.screenshot("messages")

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
        "05-messages.png", "06-users-and-tokens.png", "07-logged-out.png"]
    assert all(p.stat().st_size > 1000 and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in page.saved)
