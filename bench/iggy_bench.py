"""Iggy send/poll throughput: a raw-socket generator and the real apache-iggy clients.

What it measures
----------------
``ferry serve --only iggy_tcp,iggy_ws`` runs in a subprocess. Then, per scenario, for
``--seconds``:

* ``raw send``: ``--producers`` processes, each one TCP connection speaking the
  apache-iggy 0.8 dialect (iggy-middle.md 6.11; ``--dialect 3``: 0.9's VSR
  framing) with frames encoded once from Ferry's own command table, sending
  batches of ``--batch`` messages of ``--size`` bytes, ``--window`` requests in
  flight (1 = lockstep, as Iggy clients are); a reply means durable under
  ``--fsync``;
* ``raw poll``: the same connections (same dialect) polling ``--batch`` messages from random
  offsets of what was sent;
* ``apache-iggy 0.8.0 send`` / ``0.9.0 send``: the real clients (their venvs
  from tests/support/iggy_clients.py), one process per producer, each sending
  the same batches through ``send_messages``;
* ``apache-iggy 0.9.0 ws send`` / ``ws poll``: the same 0.9.0 client over the
  ``iggy_ws`` listener (``WebSocketConfig``, one request per binary message),
  with ``x tcp``: its msgs/s as a ratio of the 0.9.0 TCP row of this run.

Each row: messages/s, payload MB/s, p50/p99 latency per batch, and ``x raw``
(msgs/s as a ratio of the raw generator's send in this run, on this machine).
Usage: ``.venv/bin/python bench/iggy_bench.py [--seconds 3] [--batch 1000]
[--size 128] [--producers 1] [--fsync batch] [--window 1] [--dialect 2] [--no-ws]``. Seeds fixed; temp data removed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support")]

from _harness import ferry_env, pct, stop, wait_banner  # noqa: E402

from adapters.iggy.codec import VSR_HEADER_SIZE, legacy_request, parse_vsr_reply, vsr_request  # noqa: E402
from adapters.iggy.messages import WireMessage  # noqa: E402
from adapters.iggy.replies import LOGIN_REPLY  # noqa: E402
from adapters.iggy.spec import COMMANDS  # noqa: E402
from adapters.iggy.types import ConsumerId, PartitioningValue, Strategy  # noqa: E402

SEED = 20261123
START_LIMIT_S = 60


def frame(name: str, /, dialect: int = 2, session: int = 0, **values) -> bytes:
    """One request of Ferry's own command table, in the legacy framing (dialect 2,
    apache-iggy 0.8) or a VSR envelope (dialect 3, apache-iggy 0.9; iggy-current.md 4)."""
    cmd = COMMANDS.by_name[name]
    body = cmd.encode(dialect, cmd.make(**values))
    if dialect != 3:
        return legacy_request(cmd.code, body)
    if cmd.vsr_op == 2:
        return vsr_request(2, body, code=cmd.code, session=session)
    return vsr_request(cmd.vsr_op, body, session=session)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(1 << 20, n - len(buf)))
        if not chunk:
            raise ConnectionError("server closed")
        buf += chunk
    return bytes(buf)


def recv_reply(sock: socket.socket, dialect: int = 2) -> tuple[int, bytes]:
    """``(status, body)`` of one reply (a VSR reply's body keeps its result prefix)."""
    if dialect == 3:
        head = _recv_exactly(sock, VSR_HEADER_SIZE)
        (size,) = struct.unpack_from("<I", head, 48)
        _op, status, body = parse_vsr_reply(head + _recv_exactly(sock, size - VSR_HEADER_SIZE))
        return status, body
    status, length = struct.unpack("<II", _recv_exactly(sock, 8))
    return status, _recv_exactly(sock, length)


def connect(port: int, dialect: int = 2) -> tuple[socket.socket, int]:
    """A logged-in connection and its VSR session (0 in the legacy framing)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if dialect == 3:
        sock.sendall(frame("user.login_register", 3, protocol_version=0x2C00, sdk_name="bench", sdk_version="0.11.0",
                           username="iggy", password="iggy"))
        status, body = recv_reply(sock, 3)
        assert status == 0, status
        return sock, LOGIN_REPLY.decode(3, body[4:]).session  # after the u32 result count (table.py result_framed)
    sock.sendall(frame("user.login", username="iggy", password="iggy", version="0.10.0"))
    assert recv_reply(sock)[0] == 0
    return sock, 0


def raw_worker(args) -> dict:
    port, mode, seconds, batch, size, partition, sent_total, window, dialect = args
    rng = random.Random(SEED + partition)
    sock, session = connect(port, dialect)
    payload = bytes(rng.getrandbits(8) for _ in range(size))
    send = frame("message.send", dialect, session, stream_id="bench", topic_id="t",
                 partitioning=PartitioningValue(2, struct.pack("<I", partition)),
                 messages=tuple(WireMessage(0, payload, b"", 1) for _ in range(batch)))
    lat, msgs = [], 0
    end = time.perf_counter() + seconds
    if mode == "send" and window > 1:
        return _windowed_sends(sock, send, batch, window, end, dialect)
    while time.perf_counter() < end:
        if mode == "send":
            req = send
        else:
            off = rng.randrange(max(sent_total - batch, 1))
            req = frame("message.poll", dialect, session, consumer=ConsumerId(1, 1), stream_id="bench", topic_id="t",
                        partition_id=partition, strategy=Strategy(1, off), count=batch)
        t0 = time.perf_counter()
        sock.sendall(req)
        status, body = recv_reply(sock, dialect)
        lat.append(time.perf_counter() - t0)
        assert status == 0, status
        msgs += batch if mode == "send" else struct.unpack_from("<I", body, 12)[0]
    sock.close()
    return {"msgs": msgs, "lat": lat}


def _windowed_sends(sock: socket.socket, send: bytes, batch: int, window: int, end: float, dialect: int) -> dict:
    """Keep ``window`` sends in flight on one connection (the server answers in
    order, adapters/iggy/driver.py); latency is per request, send to reply."""
    sent, lat, msgs = [], [], 0
    for _ in range(window):
        sent.append(time.perf_counter())
        sock.sendall(send)
    head = 0
    while sent[head:]:
        status, _body = recv_reply(sock, dialect)
        assert status == 0, status
        now = time.perf_counter()
        lat.append(now - sent[head])
        head += 1
        msgs += batch
        if now < end:
            sent.append(time.perf_counter())
            sock.sendall(send)
    sock.close()
    return {"msgs": msgs, "lat": lat}


CLIENT_SCRIPT = r'''
import asyncio, json, random, sys, time
import apache_iggy as lib
port, seconds, batch, size, partition = map(int, sys.argv[1:6])
transport = sys.argv[6] if len(sys.argv) > 6 else "tcp"
async def main():
    if transport == "ws":  # apache-iggy 0.9: the WebSocket transport (iggy_ws listener)
        c = lib.IggyClient(lib.WebSocketConfig(server_address=f"127.0.0.1:{port}"))
    else:
        c = lib.IggyClient(f"127.0.0.1:{port}")
    await c.connect()
    await c.login_user("iggy", "iggy")
    msgs = [lib.SendMessage(b"x" * size) for _ in range(batch)]
    lat, n = [], 0
    cpu0 = time.process_time()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        await c.send_messages("bench", "t", partition, msgs)
        lat.append(time.perf_counter() - t0)
        n += batch
    cpu = time.process_time() - cpu0  # the client's own CPU for the sends (all threads of its process)
    if hasattr(lib, "Consumer"):  # 0.9: keyword arguments and an explicit consumer
        one = lib.Consumer.Single(1)
        def poll(offset):
            return c.poll_messages("bench", "t", consumer=one, polling_strategy=lib.PollingStrategy.Offset(offset),
                                   count=batch, auto_commit=False, partition_id=partition)
    else:
        def poll(offset):
            return c.poll_messages("bench", "t", partition, lib.PollingStrategy.Offset(offset), batch, False)
    rng = random.Random(partition)
    plat, pn = [], 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        got = await poll(rng.randrange(0, max(n - batch, 1)))
        plat.append(time.perf_counter() - t0)
        pn += len(got)
    print(json.dumps({"msgs": n, "lat": lat, "poll_msgs": pn, "poll_lat": plat, "cpu": cpu}), flush=True)
asyncio.run(main())
import os; os._exit(0)
'''


def client_run(spec: str, port: int, seconds: float, batch: int, size: int, producers: int,
               transport: str = "tcp") -> list[dict]:
    """Each producer process sends for ``seconds``, then polls random offsets of
    its partition for ``seconds``; one result dict per process. ``transport``:
    "tcp", or "ws" (0.9.0 only) for the WebSocket listener at ``port``."""
    from iggy_clients import client_python

    python = str(client_python(spec))
    procs = [subprocess.Popen([python, "-c", CLIENT_SCRIPT, str(port), str(int(seconds)), str(batch), str(size), str(p),
                              transport],
                              stdout=subprocess.PIPE, text=True) for p in range(producers)]
    return [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]


def summarize(name: str, results: list[dict], seconds: float, size: int, raw_rate: float | None) -> float:
    msgs = sum(r["msgs"] for r in results)
    lat = sorted(x for r in results for x in r["lat"]) or [0.0]
    rate = msgs / seconds
    p99 = pct(lat, 0.99)
    ratio = f"{rate / raw_rate:6.2f}" if raw_rate else "   1.00"
    print(f"{name:<28} {rate:>12,.0f} {rate * size / 1e6:>9.1f} {statistics.median(lat) * 1e3:>9.2f} "
          f"{p99 * 1e3:>9.2f} {ratio}")
    return rate


def client_bound(results: list[dict], batch: int, raw_rate: float | None) -> None:
    """The client's own CPU per batch (process time over its send loop) and the
    best ``x raw`` a lockstep client with that cost can reach against this server:
    the raw generator spends ~0 per batch, so a batch costs the client ``raw``'s
    round trip plus its own CPU, ratio <= t_raw / (t_raw + cpu). A faster server
    shrinks t_raw and so *lowers* that bound (docs/iggy.md "Performance")."""
    batches = sum(r["msgs"] for r in results) / batch
    cpu = sum(r.get("cpu", 0.0) for r in results)
    if not batches or not cpu:
        return
    per_batch = cpu / batches
    line = f"{'  client CPU per batch':<28} {per_batch * 1e3:>8.3f} ms"
    if raw_rate:
        t_raw = batch * len(results) / raw_rate   # one producer's round per batch in the raw run
        line += f"; bound for x raw: {t_raw / (t_raw + per_batch):.2f} (raw round {t_raw * 1e3:.3f} ms)"
    print(line)


def start_server(data: Path, fsync: str, pure_python: bool = False) -> tuple[subprocess.Popen, int, int]:
    env = ferry_env()
    if pure_python:  # core/log/encoded.py, adapters/iggy/_compiled.py: no compiled loops
        env["FERRY_PURE_PYTHON"] = "1"
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--only", "iggy_tcp,iggy_ws", "--data",
                             str(data), "--host", "127.0.0.1", "--iggy-tcp-port", "0", "--iggy-ws-port", "0",
                             "--fsync", fsync], cwd=data.parent,
                            stdout=subprocess.PIPE, stderr=open(data.parent / "server.log", "wb"), env=env)
    banner = wait_banner(proc, data.parent / "server.log", START_LIMIT_S, SystemExit, "server", None)
    port = int(re.search(r"iggy_tcp +127\.0\.0\.1:(\d+)/tcp", banner).group(1))
    ws_port = int(re.search(r"iggy_ws +127\.0\.0\.1:(\d+)/tcp", banner).group(1))
    return proc, port, ws_port


WS_CLIENT = "apache-iggy==0.9.0"  # the client generation with a WebSocket transport


def client_rows(spec: str, name: str, port: int, a, raw: float | None, transport: str = "tcp") -> tuple[float, float]:
    """Run the client rows (send, then poll) of ``spec``; their msgs/s."""
    res = client_run(spec, port, a.seconds, a.batch, a.size, a.producers, transport)
    sent = summarize(f"{name} send", res, a.seconds, a.size, raw)
    client_bound(res, a.batch, raw)
    polled = summarize(f"{name} poll", [{"msgs": r["poll_msgs"], "lat": r["poll_lat"]} for r in res], a.seconds,
                       a.size, raw)
    return sent, polled


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--producers", type=int, default=1)
    ap.add_argument("--fsync", default="batch")
    ap.add_argument("--dialect", type=int, choices=(2, 3), default=2,
                    help="raw framing: 2 = apache-iggy 0.8 layout (= stored), 3 = 0.9 VSR frames")
    ap.add_argument("--window", type=int, default=1,
                    help="raw send: requests in flight per connection (Iggy clients use 1)")
    ap.add_argument("--no-clients", action="store_true", help="skip the real-client rows")
    ap.add_argument("--clients", default="0.8.0,0.9.0", help="apache-iggy versions of the client rows")
    ap.add_argument("--no-raw", action="store_true", help="client rows only (no x raw column): for profiling")
    ap.add_argument("--no-ws", action="store_true", help="skip the apache-iggy 0.9.0 WebSocket rows")
    ap.add_argument("--pure-python", action="store_true",
                    help="the server without its compiled loops (FERRY_PURE_PYTHON=1), to measure what they give")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="iggy-bench-", dir="."))
    proc, port, ws_port = start_server(tmp / "data", a.fsync, a.pure_python)
    try:
        sock, _session = connect(port)
        sock.sendall(frame("stream.create", name="bench"))
        recv_reply(sock)
        sock.sendall(frame("topic.create", stream_id="bench", partitions_count=max(a.producers, 1), name="t"))
        recv_reply(sock)
        sock.close()
        print(f"batch {a.batch} x {a.size} B, {a.producers} producer(s), fsync {a.fsync}, {a.seconds:.0f} s per row, "
              f"raw send dialect {a.dialect}, window {a.window}, server {'pure Python' if a.pure_python else 'compiled loops'}")
        print(f"{'scenario':<28} {'msgs/s':>12} {'MB/s':>9} {'p50 ms':>9} {'p99 ms':>9} {'x raw':>7}")
        raw = None
        if not a.no_raw:
            with mp.get_context("fork").Pool(a.producers) as pool:
                sent = pool.map(raw_worker, [(port, "send", a.seconds, a.batch, a.size, p, 0, a.window, a.dialect)
                                             for p in range(a.producers)])
                raw = summarize("raw send", sent, a.seconds, a.size, None)
                polled = pool.map(raw_worker, [(port, "poll", a.seconds, a.batch, a.size, p, sent[p]["msgs"], 1,
                                                a.dialect) for p in range(a.producers)])
                summarize("raw poll", polled, a.seconds, a.size, raw)
        tcp_rates: dict[str, tuple[float, float]] = {}
        if not a.no_clients:
            for version in a.clients.split(","):
                spec = f"apache-iggy=={version.strip()}"
                tcp_rates[spec] = client_rows(spec, spec, port, a, raw)
        if not a.no_ws:
            ref = tcp_rates.get(WS_CLIENT) or client_rows(WS_CLIENT, WS_CLIENT, port, a, raw)  # the TCP reference
            ws = client_rows(WS_CLIENT, f"{WS_CLIENT} ws", ws_port, a, raw, "ws")
            print(f"{'WebSocket x tcp (0.9.0)':<28} send {ws[0] / ref[0]:.2f}, poll {ws[1] / ref[1]:.2f} "
                  f"(target >= 0.70)")
    finally:
        stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
