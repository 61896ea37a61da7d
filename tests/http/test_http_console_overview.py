"""The console's overview in headless Chromium: what the second hour found wrong with it.

- a listener's colour is the same in every chart and on every page load (it once
  followed the order in which series appeared);
- the time window (1 min, 5 min, 1 h) is one choice that the caption and the x axis
  both follow (the caption once said "five minutes" over a 60 s axis), kept per tab;
- the header names the user after a deep link (``#token=...``), which never shows the
  login form the name used to come from.
"""

from __future__ import annotations

import httpx
import trio

from console_cdp import (SESSION_LIMIT_S, STEP_LIMIT_S, artifacts_dir, chromium_page, full_gateway, log_in,
                         needs_chromium, page_problems)

# What a listener's line is drawn in (chart.js LISTENER_COLOURS), as the page reports it.
COLOURS = ("(() => Object.fromEntries([...document.querySelectorAll('#overview polyline')]"
           ".map(p => [p.closest('.chart').id + '/' + p.dataset.series, p.getAttribute('stroke')])))()")
AXIS_LEFT = "document.querySelector('#chart-messages_in svg text:nth-of-type(2)').textContent"


@needs_chromium
async def test_colours_window_and_name_after_a_deep_link(tmp_path):
    shots = artifacts_dir("overview")
    with trio.fail_after(SESSION_LIMIT_S):
        async with full_gateway(tmp_path) as ports, chromium_page(tmp_path / "chromium", shots) as page:
            base = f"http://127.0.0.1:{ports['http']}"
            async with httpx.AsyncClient(base_url=base, timeout=STEP_LIMIT_S) as http:
                # an Iggy HTTP user other than root, so the name is not a lucky default
                root = (await http.post("/users/login", json={"username": "iggy", "password": "iggy"})).json()
                http.headers["authorization"] = "Bearer " + root["access_token"]["token"]
                r = await http.post("/users", json={"username": "olga", "password": "olga-secret-1",
                                                    "status": "active", "permissions": None})
                assert r.status_code in (200, 201), r.text
            await log_in(page, base)
            await page.wait_for("document.getElementById('who').textContent === 'iggy'", "the header names iggy")
            await page.wait_for("document.querySelectorAll('#chart-messages_in polyline').length >= 1",
                                "a series drawn")
            first = await page.eval(COLOURS)
            # every chart draws a listener in one colour
            by_listener: dict[str, set[str]] = {}
            for key, colour in first.items():
                by_listener.setdefault(key.split("/", 1)[1], set()).add(colour)
            assert by_listener and all(len(c) == 1 for c in by_listener.values()), by_listener
            assert by_listener["http"] == {"#009E73"}

            # the window: the caption and the axis say the same span, and the choice is kept
            assert await page.eval("document.getElementById('window').value") == "300"
            assert await page.eval("document.getElementById('window-caption').textContent") == "the last five minutes"
            assert await page.eval(AXIS_LEFT) == "5 min ago"
            await page.eval("(() => { const w = document.getElementById('window'); w.value = '60'; "
                            "w.dispatchEvent(new Event('change')); })()")
            await page.wait_for(f"{AXIS_LEFT} === '60 s ago'", "the axis follows the 1 min choice")
            assert await page.eval("document.getElementById('window-caption').textContent") == "the last minute"
            await page.screenshot("one-minute-window")

            # a reload keeps the window and gives every listener the colour it had
            await page.send("Page.reload")
            await page.wait_for("window.ferryConsole && document.querySelectorAll('#overview polyline').length >= 1",
                                "the overview is back after a reload")
            assert await page.eval(AXIS_LEFT) == "60 s ago"
            again = await page.eval(COLOURS)
            assert {k: v for k, v in again.items() if k in first} == {k: v for k, v in first.items() if k in again}

            # a deep link as another user: the header names that user
            async with httpx.AsyncClient(base_url=base, timeout=STEP_LIMIT_S) as http:
                olga = (await http.post("/users/login", json={"username": "olga", "password": "olga-secret-1"})).json()
            await page.eval("sessionStorage.clear()")
            await page.send("Page.navigate", url="about:blank")  # a new document, as a link opened in a new tab
            await page.send("Page.navigate", url=f"{base}/#token={olga['access_token']['token']}&view=overview")
            await page.wait_for("(document.getElementById('who') || {}).textContent === 'olga'",
                                "the header names olga after a deep link")
            assert await page.eval("location.hash") == ""  # the token left the address bar
            await page.screenshot("deep-link-as-olga")
            csp, thrown = page_problems(page)
            assert not csp and not thrown, (csp, thrown)
