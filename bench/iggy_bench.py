"""Iggy send/poll throughput: a raw-socket generator and the real apache-iggy clients.

What it measures
----------------
``ferry serve --only iggy_tcp`` runs in a subprocess. Then, per scenario, for
``--seconds``:

* ``raw send``: ``--producers`` processes, each one TCP connection speaking the
  apache-iggy 0.8 dialect (iggy-middle.md 6.11) with frames encoded once from
  Ferry's own command table, sending batches of ``--batch`` messages of
  ``--size`` bytes and waiting for each reply (Iggy clients are lockstep); a
  reply means durable under ``--fsync``;
* ``raw poll``: the same connections polling ``--batch`` messages from random
  offsets of what was sent;
* ``apache-iggy 0.8.0 send`` / ``0.9.0 send``: the real clients (their venvs
  from tests/iggy/iggy_clients.py), one process per producer, each sending
  the same batches through ``send_messages``.

Each row: messages/s, payload MB/s, p50/p99 latency per batch, and ``x raw``
(msgs/s as a ratio of the raw generator's send in this run, on this machine).
Usage: ``.venv/bin/python bench/iggy_bench.py [--seconds 3] [--batch 1000]
[--size 128] [--producers 1] [--fsync batch]``. Seeds fixed; temp data removed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import re
import selectors
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
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "iggy")]

from adapters.iggy.codec import legacy_request  # noqa: E402
from adapters.iggy.messages import WireMessage  # noqa: E402
from adapters.iggy.spec import COMMANDS  # noqa: E402
from adapters.iggy.types import ConsumerId, PartitioningValue, Strategy  # noqa: E402

SEED = 20261123
START_LIMIT_S = 60


def frame(name: str, /, **values) -> bytes:
    cmd = COMMANDS.by_name[name]
    return legacy_request(cmd.code, cmd.encode(2, cmd.make(**values)))


def recv_reply(sock: socket.socket) -> tuple[int, bytes]:
    head = b""
    while len(head) < 8:
        chunk = sock.recv(8 - len(head))
        if not chunk:
            raise ConnectionError("server closed")
        head += chunk
    status, length = struct.unpack("<II", head)
    body = bytearray()
    while len(body) < length:
        chunk = sock.recv(min(1 << 20, length - len(body)))
        if not chunk:
            raise ConnectionError("server closed")
        body += chunk
    return status, bytes(body)


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(frame("user.login", username="iggy", password="iggy", version="0.10.0"))
    assert recv_reply(sock)[0] == 0
    return sock


def raw_worker(args) -> dict:
    port, mode, seconds, batch, size, partition, sent_total = args
    rng = random.Random(SEED + partition)
    sock = connect(port)
    payload = bytes(rng.getrandbits(8) for _ in range(size))
    send = frame("message.send", stream_id="bench", topic_id="t", partitioning=PartitioningValue(2, struct.pack("<I", partition)),
                 messages=tuple(WireMessage(0, payload, b"", 1) for _ in range(batch)))
    lat, msgs = [], 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        if mode == "send":
            req = send
        else:
            off = rng.randrange(max(sent_total - batch, 1))
            req = frame("message.poll", consumer=ConsumerId(1, 1), stream_id="bench", topic_id="t",
                        partition_id=partition, strategy=Strategy(1, off), count=batch)
        t0 = time.perf_counter()
        sock.sendall(req)
        status, body = recv_reply(sock)
        lat.append(time.perf_counter() - t0)
        assert status == 0, status
        msgs += batch if mode == "send" else struct.unpack_from("<I", body, 12)[0]
    sock.close()
    return {"msgs": msgs, "lat": lat}


CLIENT_SCRIPT = r'''
import asyncio, json, sys, time
from apache_iggy import IggyClient, SendMessage
port, seconds, batch, size, partition = map(int, sys.argv[1:6])
async def main():
    c = IggyClient(f"127.0.0.1:{port}")
    await c.connect()
    await c.login_user("iggy", "iggy")
    msgs = [SendMessage(b"x" * size) for _ in range(batch)]
    lat, n = [], 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        await c.send_messages("bench", "t", partition, msgs)
        lat.append(time.perf_counter() - t0)
        n += batch
    print(json.dumps({"msgs": n, "lat": lat}), flush=True)
asyncio.run(main())
import os; os._exit(0)
'''


def client_run(spec: str, port: int, seconds: float, batch: int, size: int, producers: int) -> list[dict]:
    from iggy_clients import client_python

    python = str(client_python(spec))
    procs = [subprocess.Popen([python, "-c", CLIENT_SCRIPT, str(port), str(int(seconds)), str(batch), str(size), str(p)],
                              stdout=subprocess.PIPE, text=True) for p in range(producers)]
    return [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]


def summarize(name: str, results: list[dict], seconds: float, size: int, raw_rate: float | None) -> float:
    msgs = sum(r["msgs"] for r in results)
    lat = sorted(x for r in results for x in r["lat"]) or [0.0]
    rate = msgs / seconds
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    ratio = f"{rate / raw_rate:6.2f}" if raw_rate else "   1.00"
    print(f"{name:<28} {rate:>12,.0f} {rate * size / 1e6:>9.1f} {statistics.median(lat) * 1e3:>9.2f} "
          f"{p99 * 1e3:>9.2f} {ratio}")
    return rate


def start_server(data: Path, fsync: str) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--only", "iggy_tcp", "--data", str(data),
                             "--host", "127.0.0.1", "--iggy-tcp-port", "0", "--fsync", fsync], cwd=data.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={k: v for k, v in os.environ.items() if not k.startswith("FERRY_")})
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    buf, deadline = b"", time.monotonic() + START_LIMIT_S
    while not buf.endswith(b"\nready\n"):
        if not sel.select(max(deadline - time.monotonic(), 0)):
            proc.kill()
            raise SystemExit(f"server did not start: {buf!r}")
        buf += os.read(proc.stdout.fileno(), 65536)
    port = int(re.search(rb"iggy_tcp +127\.0\.0\.1:(\d+)/tcp", buf).group(1))
    return proc, port


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--producers", type=int, default=1)
    ap.add_argument("--fsync", default="batch")
    ap.add_argument("--no-clients", action="store_true", help="skip the real-client rows")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="iggy-bench-", dir="."))
    proc, port = start_server(tmp / "data", a.fsync)
    try:
        sock = connect(port)
        sock.sendall(frame("stream.create", name="bench"))
        recv_reply(sock)
        sock.sendall(frame("topic.create", stream_id="bench", partitions_count=max(a.producers, 1), name="t"))
        recv_reply(sock)
        sock.close()
        print(f"batch {a.batch} x {a.size} B, {a.producers} producer(s), fsync {a.fsync}, {a.seconds:.0f} s per row")
        print(f"{'scenario':<28} {'msgs/s':>12} {'MB/s':>9} {'p50 ms':>9} {'p99 ms':>9} {'x raw':>7}")
        with mp.get_context("fork").Pool(a.producers) as pool:
            sent = pool.map(raw_worker, [(port, "send", a.seconds, a.batch, a.size, p, 0) for p in range(a.producers)])
            raw = summarize("raw send", sent, a.seconds, a.size, None)
            polled = pool.map(raw_worker, [(port, "poll", a.seconds, a.batch, a.size, p, sent[p]["msgs"])
                                           for p in range(a.producers)])
            summarize("raw poll", polled, a.seconds, a.size, raw)
        if not a.no_clients:
            for spec in ("apache-iggy==0.8.0", "apache-iggy==0.9.0"):
                res = client_run(spec, port, a.seconds, a.batch, a.size, a.producers)
                summarize(f"{spec} send", res, a.seconds, a.size, raw)
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
