"""The console's Connections and Errors views in a real headless Chromium (tests/http/console_cdp.py).

Against a gateway with every listener, three real clients stay connected: a nats-py
subscriber that publishes to its own subject, apache-iggy 0.9.0 over TCP and the pravega
0.3.8 client (each SDK in its own venv, tests/support). The Connections table must show each
with the counts the clients themselves report, equal to /connz and /metrics; closing the
NATS connection through the table must disconnect the client; errors provoked on NATS, Iggy
and HTTP must appear in the Errors view. Screenshots go to ``$FERRY_ARTIFACTS/connections``.
No timing thresholds: every wait polls the page or the client until it holds.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
from pathlib import Path

import httpx
import nats
import trio

from console_cdp import (SESSION_LIMIT_S, STEP_LIMIT_S, artifacts_dir, chromium_page, full_gateway, log_in,
                         needs_chromium, page_problems)
from iggy_clients import client_python as iggy_python
from pravega_clients import ROOT_CREDENTIALS, client_python as pravega_python

CLIENTS = Path(__file__).parent / "clients"
NATS_COUNT, IGGY_COUNT, PRAVEGA_COUNT = 10, 7, 5
PAYLOAD = b"console connections %02d"


class NatsHolder:
    """A nats-py connection (its own asyncio loop, in a worker thread) that subscribes to
    ``subject``, publishes ``NATS_COUNT`` messages to it, receives them all, then stays
    connected until the server closes it."""

    def __init__(self, url: str, subject: str) -> None:
        self.url, self.subject = url, subject
        self.ready = threading.Event()
        self.closed = threading.Event()
        self.stop = threading.Event()   # the test ends early: disconnect
        self.received = 0

    def run(self) -> None:
        async def main():
            nc = await nats.connect(self.url, name="console-sub", allow_reconnect=False,
                                    closed_cb=self._closed)

            async def got(msg):
                self.received += 1

            await nc.subscribe(self.subject, cb=got)
            for i in range(NATS_COUNT):
                await nc.publish(self.subject, PAYLOAD % i)
            await nc.flush()
            while self.received < NATS_COUNT:
                await asyncio.sleep(0.02)
            self.ready.set()
            while not nc.is_closed and not self.stop.is_set():   # until the console closes it
                await asyncio.sleep(0.02)
            if not nc.is_closed:
                await nc.close()

        asyncio.run(asyncio.wait_for(main(), SESSION_LIMIT_S))

    async def _closed(self):
        self.closed.set()


def start_client(python: Path, script: str, *args) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": "", "RUST_LOG": "warn", **ROOT_CREDENTIALS}
    return subprocess.Popen([str(python), "-u", str(CLIENTS / script), *map(str, args)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)


def ready_line(proc: subprocess.Popen) -> dict:
    for line in proc.stdout:
        if line.startswith("{"):
            return json.JSONDecoder().raw_decode(line)[0]
    raise AssertionError(f"client exited ({proc.wait()}) before it was ready")


def metric(text: str, family: str, listener: str) -> float:
    for line in text.splitlines():
        if line.startswith(f'{family}{{listener="{listener}"}} '):
            return float(line.split()[-1])
    return 0.0


ROWS = ("[...document.querySelectorAll('#conn-table tbody tr')].map(r => Object.assign({id: r.dataset.id, "
        "listener: r.dataset.listener}, Object.fromEntries([...r.cells].filter(c => c.dataset.key)"
        ".map(c => [c.dataset.key, c.textContent]))))")


async def wait_until(predicate, what: str):
    with trio.move_on_after(STEP_LIMIT_S):
        while not predicate():
            await trio.sleep(0.05)
        return
    raise AssertionError(f"never happened: {what}")


@needs_chromium
async def test_connections_and_errors_views_in_headless_chromium(tmp_path):
    shots = artifacts_dir("connections")
    iggy_py, pravega_py = iggy_python("apache-iggy==0.9.0"), pravega_python()
    procs: list[subprocess.Popen] = []
    with trio.fail_after(SESSION_LIMIT_S):
        async with full_gateway(tmp_path) as ports, chromium_page(tmp_path / "chromium", shots) as page, \
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{ports['http']}", timeout=STEP_LIMIT_S) as api, \
                trio.open_nursery() as nursery:
            base = str(api.base_url).rstrip("/")
            api.headers["authorization"] = "Bearer " + await log_in(page, base)
            assert (await api.post("/streams", json={"name": "conns"})).status_code == 200
            r = await api.post("/streams/conns/topics", json={"name": "t", "partitions_count": 1, "message_expiry": 0,
                                                              "compression_algorithm": "none", "max_topic_size": 0})
            assert r.status_code == 200, r.text

            # -- three real clients, connected and kept so
            # a subject no topic is bound to: live only, so the Iggy client's sends to conns/t are not delivered here
            holder = NatsHolder(f"nats://iggy:iggy@127.0.0.1:{ports['nats']}", "chat.console")
            nursery.start_soon(trio.to_thread.run_sync, holder.run)
            try:
                procs.append(start_client(iggy_py, "hold_iggy.py", ports["iggy_tcp"], "conns", "t", IGGY_COUNT))
                procs.append(start_client(pravega_py, "hold_pravega.py", ports["pravega_controller"], "pv", "events",
                                          PRAVEGA_COUNT))
                iggy, pravega = [await trio.to_thread.run_sync(ready_line, p) for p in procs]
                await wait_until(holder.ready.is_set, "the NATS client received its own messages")
                assert iggy["sent"] == iggy["polled"] == IGGY_COUNT and iggy["duplicate"] != "accepted"
                assert pravega["sent"] == PRAVEGA_COUNT and holder.received == NATS_COUNT

                await page.click("#nav button[data-view=connections]")
                rows = await page.wait_for(
                    f"(() => {{ const rows = {ROWS}; const l = new Set(rows.map(r => r.listener)); "
                    "return ['nats', 'iggy_tcp', 'pravega', 'pravega_controller', 'http'].every(x => l.has(x)) "
                    "&& rows.some(r => r.listener === 'pravega' && r.messages_in !== '0') && rows; })()",
                    "a row per client's listener")
                await page.screenshot("connections")
                by = {}
                for row in rows:
                    by.setdefault(row["listener"], []).append(row)
                nats_bytes = sum(len(PAYLOAD % i) for i in range(NATS_COUNT))
                (n,) = by["nats"]
                assert (n["client"], n["user"], n["messages_in"], n["messages_out"]) == \
                    ("console-sub", "iggy", str(NATS_COUNT), str(NATS_COUNT))
                assert n["subscriptions"] == "1: chat.console" and n["version"].startswith("python3 ")
                (i,) = by["iggy_tcp"]
                assert (i["user"], i["messages_in"], i["messages_out"], i["errors"]) == \
                    ("iggy", str(IGGY_COUNT), str(IGGY_COUNT), "1")
                assert sum(int(p["messages_in"]) for p in by["pravega"]) == PRAVEGA_COUNT
                assert all(p["user"] == "iggy" for p in by["pravega"] + by["pravega_controller"])
                assert any(p["version"].startswith("wire ") for p in by["pravega"])

                # -- the same numbers as /connz and /metrics (JSON: exact bytes, which the table abbreviates)
                conns = (await api.get("/console/api/connections")).json()["connections"]
                api_n = next(c for c in conns if c["listener"] == "nats")
                assert (api_n["bytes_in"], api_n["bytes_out"]) == (nats_bytes, nats_bytes)
                connz = (await api.get(f"http://127.0.0.1:{ports['nats_monitor']}/connz")).json()["connections"]
                (z,) = connz
                assert (z["in_msgs"], z["out_msgs"], z["in_bytes"], z["out_bytes"], z["name"]) == \
                    (NATS_COUNT, NATS_COUNT, nats_bytes, nats_bytes, "console-sub")
                text = (await api.get("/metrics")).text
                for listener, want in (("nats", NATS_COUNT), ("iggy_tcp", IGGY_COUNT), ("pravega", PRAVEGA_COUNT)):
                    rows_of = [c for c in conns if c["listener"] == listener]
                    assert metric(text, "ferry_messages_in_total", listener) == sum(
                        c["messages_in"] for c in rows_of) == want
                    assert metric(text, "ferry_bytes_in_total", listener) == sum(c["bytes_in"] for c in rows_of)
                    assert metric(text, "ferry_messages_out_total", listener) == sum(
                        c["messages_out"] for c in rows_of)
                api_i = next(c for c in conns if c["listener"] == "iggy_tcp")
                assert api_i["bytes_in"] == iggy["sent_bytes"]
                assert sum(c["bytes_in"] for c in conns if c["listener"] == "pravega") == pravega["sent_bytes"]

                # -- close the NATS connection from the table (a second press confirms)
                button = f"#conn-table tr[data-id='{n['id']}'] button.danger"
                await page.eval(f"document.querySelector({json.dumps(button)}).focus()")
                await page.click(button)
                assert await page.eval(f"document.querySelector({json.dumps(button)}).textContent") == "really close?"
                await page.screenshot("close-armed")
                await page.click(button)
                await wait_until(holder.closed.is_set, "the NATS client saw the server close it")
                await page.wait_for(f"!document.querySelector(\"#conn-table tr[data-id='{n['id']}']\")",
                                    "the closed connection left the table")
                await page.screenshot("after-close")

                # -- errors on NATS (a raw client's unknown operation), Iggy (hold_iggy's duplicate) and HTTP
                raw = await trio.open_tcp_stream("127.0.0.1", ports["nats"])
                await raw.receive_some(4096)   # INFO
                await raw.send_all(b"NOT_A_NATS_OP\r\n")
                while await raw.receive_some(4096):   # -ERR, then the server closes
                    pass
                await raw.aclose()
                assert (await api.get("/streams/no-such-stream")).status_code == 404
                await page.click("#nav button[data-view=errors]")
                errs = await page.wait_for(
                    "(() => { const r = [...document.querySelectorAll('#error-table tbody tr')].map(x => "
                    "[x.dataset.listener, x.cells[3].textContent, x.cells[2].textContent]); "
                    "const l = new Set(r.map(x => x[0])); "
                    "return ['nats', 'iggy_tcp', 'http'].every(x => l.has(x)) && r; })()",
                    "errors of nats, iggy_tcp and http listed")
                await page.screenshot("errors")
                assert any(e[0] == "iggy_tcp" and "already_exists" in e[1] and e[2] == i["remote"] for e in errs)
                assert any(e[0] == "http" and e[1].startswith("404") for e in errs)
                assert any(e[0] == "nats" and "connection closed" in e[1] for e in errs)
                csp, thrown = page_problems(page)
                assert csp == [] and thrown == []
            finally:
                holder.stop.set()
                for proc in procs:
                    proc.stdin.close()
                for proc in procs:
                    await trio.to_thread.run_sync(proc.wait, STEP_LIMIT_S)
