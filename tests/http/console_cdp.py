"""Driving the web console in a real headless Chromium over the Chrome DevTools Protocol:
the pieces every console test shares (tests/http/test_http_console_*.py).

No timing thresholds: every wait polls the page's own state (``window.ferryConsole``
and the DOM) until it holds, under one generous deadline per step.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import shutil
import subprocess
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import nats
import pytest
import trio
from trio_websocket import open_websocket_url

from ferry_harness import gateway_config
from gateway.server import run_gateway

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
REPO = Path(__file__).resolve().parents[2]
SESSION_LIMIT_S = 180  # the whole scripted session; guards a hang only
STEP_LIMIT_S = 60  # one wait for the page to reach a state
SCREENSHOT_BYTES = 64 * 1024 * 1024  # CDP answers a PNG as one base64 websocket message


def artifacts_dir(name: str = "console") -> Path:
    """Where one test's screenshots go: ``$FERRY_ARTIFACTS/<name>`` (default
    ``<repo>/.artifacts/<name>``), emptied of older PNGs."""
    root = Path(os.environ["FERRY_ARTIFACTS"]) if os.environ.get("FERRY_ARTIFACTS") else REPO / ".artifacts"
    path = root / name
    path.mkdir(parents=True, exist_ok=True)
    for old in path.glob("*.png"):
        old.unlink()
    return path


class CdpError(Exception):
    pass


class Page:
    """One page target over CDP: commands by id; events are kept in ``events``."""

    def __init__(self, ws, shots: Path) -> None:
        self.ws, self.shots = ws, shots
        self.next_id = 0
        self.events: list[dict] = []
        self.saved: list[Path] = []

    async def send(self, method: str, **params) -> dict:
        self.next_id += 1
        mine = self.next_id
        await self.ws.send_message(json.dumps({"id": mine, "method": method, "params": params}))
        while True:
            msg = json.loads(await self.ws.get_message())
            if msg.get("id") == mine:
                if "error" in msg:
                    raise CdpError(f"{method}: {msg['error']}")
                return msg["result"]
            if "method" in msg:
                self.events.append(msg)

    async def eval(self, expression: str):
        """The JSON value of ``expression`` (promises awaited); page exceptions raise."""
        got = await self.send("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in got:
            raise CdpError(f"{expression}: {got['exceptionDetails']}")
        return got["result"].get("value")

    async def wait_for(self, expression: str, what: str):
        """Poll until ``expression`` is truthy; its value. Fails (naming ``what``) at STEP_LIMIT_S."""
        with trio.move_on_after(STEP_LIMIT_S):
            while True:
                value = await self.eval(expression)
                if value:
                    return value
                await trio.sleep(0.1)
        err = await self.eval("document.getElementById('err') && document.getElementById('err').textContent")
        raise AssertionError(f"page never reached: {what} (page error line: {err!r})")

    async def type_into(self, selector: str, text: str) -> None:
        """Focus ``selector``, clear it, and type ``text`` as keyboard input (Input.insertText)."""
        await self.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.focus(); "
                        f"e.value = ''; }})()")
        await self.send("Input.insertText", text=text)

    async def click(self, selector: str) -> None:
        found = await self.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
                                f"if (!e) return false; e.click(); return true; }})()")
        assert found, f"nothing to click at {selector}"

    async def screenshot(self, name: str) -> None:
        shot = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path = self.shots / f"{len(self.saved) + 1:02d}-{name}.png"
        path.write_bytes(base64.b64decode(shot["data"]))
        self.saved.append(path)


@asynccontextmanager
async def chromium_page(profile: Path, shots: Path):
    """Headless Chromium with a DevTools port of its own choosing; yields its first page."""
    profile.mkdir(parents=True)
    async with trio.open_nursery() as nursery:
        proc = await nursery.start(lambda task_status: trio.run_process(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--remote-debugging-port=0", f"--user-data-dir={profile}",
             "--window-size=1280,900", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, task_status=task_status))
        try:
            active = profile / "DevToolsActivePort"  # "<port>\n<browser ws path>", written once listening
            with trio.fail_after(STEP_LIMIT_S):
                while not (active.exists() and active.read_text().count("\n") >= 1):
                    await trio.sleep(0.05)
            port = int(active.read_text().split("\n")[0])
            async with httpx.AsyncClient() as http:
                targets = (await http.get(f"http://127.0.0.1:{port}/json/list")).json()
            url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
            async with open_websocket_url(url, max_message_size=SCREENSHOT_BYTES) as ws:
                page = Page(ws, shots)
                await page.send("Runtime.enable")
                await page.send("Log.enable")
                await page.send("Page.enable")
                yield page
        finally:
            proc.terminate()


@asynccontextmanager
async def full_gateway(tmp_path: Path):
    """Every listener on 127.0.0.1 port 0, in this trio run (``running_gateway`` runs its own
    trio thread, which a trio test cannot stop); yields the bound ports."""
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        ports = await nursery.start(lambda task_status: run_gateway(gateway_config(tmp_path), stop, out=io.StringIO(),
                                                                    task_status=task_status))
        try:
            yield ports
        finally:
            stop.set()


def publish_nats(url: str, subject: str, count: int) -> None:
    """nats-py (asyncio), run in a worker thread by the trio test."""
    async def main():
        nc = await nats.connect(url)
        for i in range(count):
            await nc.publish(subject, b"hello from nats %d" % i, headers={"trace": "console-%d" % i})
        await nc.flush()
        await nc.close()

    asyncio.run(asyncio.wait_for(main(), STEP_LIMIT_S))



needs_chromium = pytest.mark.skipif(CHROMIUM is None,
                                    reason="Chromium is not installed (Debian: apt-get install chromium)")


async def log_in(page: Page, base: str, user: str = "iggy", password: str = "iggy") -> str:
    """Open the console at ``base``, log in through the form; the session's JWT."""
    await page.send("Page.navigate", url=base + "/")
    await page.wait_for("document.readyState === 'complete' && window.ferryConsole !== undefined",
                        "the console script loaded (CSP allows it)")
    await page.type_into("#u", user)
    await page.type_into("#p", password)
    await page.click("#login button")
    await page.wait_for("!document.getElementById('nav').hidden && sessionStorage.getItem('ferry-token')",
                        "logged in")
    return await page.eval("sessionStorage.getItem('ferry-token')")


def page_problems(page: Page) -> tuple[list, list]:
    """(CSP violations, uncaught exceptions) the page reported: both must stay empty."""
    csp = [e for e in page.events if e["method"] == "Log.entryAdded"
           and "Content Security Policy" in e["params"]["entry"].get("text", "")]
    thrown = [e for e in page.events if e["method"] == "Runtime.exceptionThrown"]
    return csp, thrown
