"""HTTP send/poll throughput over HTTP/1.1 and HTTP/2, against an h11 echo baseline.

What it measures
----------------
``ferry serve --only http`` runs in a subprocess (its own interpreter, so the
client never shares the server's event loop). httpx clients (trio) keep
``--concurrency`` requests in flight for ``--seconds`` per scenario:

* ``send``: POST .../messages, a batch of ``--batch`` messages of ``--size``
  bytes each (base64 in JSON); a 201 means durable under ``--fsync``;
* ``poll``: GET .../messages?kind=offset&count=<batch> from random offsets;
* ``echo``: the same POST body to a trivial h11 server (this file,
  ``--echo-server``, also a subprocess) that reads the request and answers
  ``204``: the cost of HTTP/1.1 itself in Python on this machine.

HTTP/1.1 scenarios use one connection per in-flight request; HTTP/2 ones
multiplex every request over one connection (prior knowledge, h2c). Each row
reports requests/s, messages/s, payload MB/s, p50/p99 latency, ``x echo``
(its requests/s as a ratio of the echo baseline's, both measured in this run
on this machine) and ``srv ms/req``, the server process's CPU time per
request (from /proc): when it is well below the latency, the Python client is
the bottleneck, not the server.

Usage: ``.venv/bin/python bench/http_bench.py [--seconds 3] [--batch 100]
[--size 128] [--concurrency 8] [--fsync batch]``. Seeds are fixed; the temp
data directory is removed at the end.
"""

from __future__ import annotations

import argparse
import base64
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio
from _harness import cpu_seconds, ferry_env, free_port, stop, wait_listening

ROOT = Path(__file__).resolve().parent.parent
SEED = 20261123
START_LIMIT_S = 30  # the subprocesses must listen by then


# -- the baseline server --------------------------------------------------------------
async def _echo_server(port: int) -> None:
    import h11

    async def handle(stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    conn.receive_data(data)
                elif isinstance(event, h11.EndOfMessage):
                    await stream.send_all(conn.send(h11.Response(status_code=204, headers=[])) +
                                          conn.send(h11.EndOfMessage()))
                    conn.start_next_cycle()
                elif isinstance(event, h11.ConnectionClosed):
                    return
        except (trio.BrokenResourceError, h11.ProtocolError):
            return

    await trio.serve_tcp(handle, port, host="127.0.0.1")


# -- helpers ----------------------------------------------------------------------------
def make_body(batch: int, size: int, rng: random.Random) -> bytes:
    import json

    payload = base64.b64encode(rng.randbytes(size)).decode()
    return json.dumps({"partitioning": {"kind": "balanced", "value": ""},
                       "messages": [{"payload": payload} for _ in range(batch)]}).encode()


async def run_scenario(name, base, http2, concurrency, seconds, make_request, msgs_per_req, bytes_per_req):
    import httpx

    latencies: list[float] = []
    done = 0
    headers = {"authorization": f"Bearer {base['token']}", "content-type": "application/json"}
    clients = ([httpx.AsyncClient(http1=False, http2=True, timeout=60)] if http2 else
               [httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=1)) for _ in range(concurrency)])
    end = trio.current_time() + seconds

    async def worker(i: int) -> None:
        nonlocal done
        client = clients[0 if http2 else i]
        while trio.current_time() < end:
            t0 = time.perf_counter()
            method, url, body = make_request()
            r = await client.request(method, base["url"] + url, content=body, headers=headers)
            if r.status_code >= 300 and r.status_code != 204:
                raise RuntimeError(f"{name}: HTTP {r.status_code} {r.text[:200]}")
            latencies.append(time.perf_counter() - t0)
            done += 1

    t_start, cpu_start = trio.current_time(), cpu_seconds(base["pid"])
    async with trio.open_nursery() as nursery:
        for i in range(concurrency):
            nursery.start_soon(worker, i)
    elapsed = trio.current_time() - t_start
    server_cpu = cpu_seconds(base["pid"]) - cpu_start
    for c in clients:
        await c.aclose()
    latencies.sort()
    rps = done / elapsed
    return {"name": name, "rps": rps, "msgs": rps * msgs_per_req, "mbs": rps * bytes_per_req / 1e6,
            "p50": statistics.median(latencies) * 1000, "p99": latencies[max(int(len(latencies) * 0.99) - 1, 0)] * 1000,
            "cpu": server_cpu / max(done, 1) * 1000}


async def bench(args, ferry_port: int, echo_port: int, pids: tuple[int, int]) -> list[dict]:
    import httpx

    rng = random.Random(SEED)
    ferry = f"http://127.0.0.1:{ferry_port}"
    async with httpx.AsyncClient(base_url=ferry) as c:
        r = await c.post("/users/login", json={"username": "iggy", "password": "iggy"})
        token = r.json()["access_token"]["token"]
        h = {"authorization": f"Bearer {token}"}
        await c.post("/streams", json={"name": "bench"}, headers=h)
        await c.post("/streams/bench/topics", headers=h, json={
            "name": "t", "partitions_count": 1, "compression_algorithm": "none", "message_expiry": 0,
            "max_topic_size": 0})
    body = make_body(args.batch, args.size, rng)
    msgs_path = "/streams/bench/topics/t/messages"
    sent = {"count": 0}

    def send():
        sent["count"] += args.batch
        return "POST", msgs_path, body

    def poll():
        top = max(sent["count"] - args.batch, 0)
        return "GET", f"{msgs_path}?kind=offset&count={args.batch}&value={rng.randrange(top + 1)}", None

    base_f = {"url": ferry, "token": token, "pid": pids[0]}
    base_e = {"url": f"http://127.0.0.1:{echo_port}", "token": "-", "pid": pids[1]}
    per_req = args.batch * args.size
    rows = [await run_scenario("echo h11 (baseline)", base_e, False, args.concurrency, args.seconds,
                               lambda: ("POST", "/", body), args.batch, per_req)]
    for http2 in (False, True):
        proto = "h2c" if http2 else "http/1.1"
        rows.append(await run_scenario(f"send {proto}", base_f, http2, args.concurrency, args.seconds, send,
                                       args.batch, per_req))
        rows.append(await run_scenario(f"poll {proto}", base_f, http2, args.concurrency, args.seconds, poll,
                                       args.batch, per_req))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--batch", type=int, default=100, help="messages per send / poll")
    parser.add_argument("--size", type=int, default=128, help="payload bytes per message")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument("--fsync", default="batch", choices=["always", "batch", "never"])
    parser.add_argument("--echo-server", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.echo_server:
        trio.run(_echo_server, args.echo_server)
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="ferry-http-bench-"))
    ferry_port, echo_port = free_port(), free_port()
    env = ferry_env()
    procs = [
        subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--only", "http", "--http-port", str(ferry_port),
                          "--data", str(tmp / "data"), "--fsync", args.fsync, "--log-level", "warning"],
                         cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen([sys.executable, __file__, "--echo-server", str(echo_port)], cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    ]
    try:
        for port, proc in ((ferry_port, procs[0]), (echo_port, procs[1])):
            if not wait_listening(port, proc, START_LIMIT_S):
                raise RuntimeError(f"server exited with {proc.returncode}" if proc.poll() is not None
                                   else f"nothing listens on {port}")
        rows = trio.run(bench, args, ferry_port, echo_port, (procs[0].pid, procs[1].pid))
    finally:
        stop(*procs)
        shutil.rmtree(tmp, ignore_errors=True)
    echo = rows[0]["rps"]
    print(f"batch={args.batch} x {args.size} B, {args.concurrency} in flight, {args.seconds:g} s each, "
          f"fsync={args.fsync}")
    print(f"{'scenario':<22}{'req/s':>10}{'msgs/s':>12}{'MB/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'x echo':>8}"
          f"{'srv ms/req':>12}")
    for r in rows:
        print(f"{r['name']:<22}{r['rps']:>10.0f}{r['msgs']:>12.0f}{r['mbs']:>9.2f}{r['p50']:>9.2f}"
              f"{r['p99']:>9.2f}{r['rps'] / echo:>8.2f}{r['cpu']:>12.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
