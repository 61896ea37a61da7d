"""Pravega write/read throughput and ack latency through the real ``pravega`` 0.3.8 client,
with Ferry's own Iggy path (the real apache-iggy client) as the reference in the same run.

What it measures
----------------
``ferry serve --only pravega,pravega_controller,iggy_tcp`` runs in a subprocess (free
ports, ``--fsync batch`` unless ``--fsync`` says otherwise). Every client is a subprocess
of its own interpreter: the pravega 0.3.8 wheel (CPython 3.11 venv from
tests/support/pravega_clients.py) and apache-iggy (tests/support/iggy_clients.py). Client
processes set up (connect, create writers, warm every segment writer up, build every
payload), print ``ready``, and all start on one ``go``; a cell's time runs from the first
``go`` to the last process's end (CLOCK_MONOTONIC is system-wide). Per ``--sizes`` (event
bytes), the cells and their Iggy reference (same gateway, same fsync policy, the same
number of events of the same size, every payload unique):

* ``ack latency``: one writer, one event in flight: ``await write_event_async(e)`` in a
  loop for ``--latency-seconds``; the reference sends one message per ``send_messages``.
* ``write 1 writer``: ``--events`` events to a 1-segment stream through
  ``write_event_async`` with ``--window`` futures outstanding (the oldest is awaited when
  the window is full), then ``flush()``; p50/p99 is per event, from the call to its future's
  completion (ack latency under load). Reference: one producer, ``send_messages`` of
  ``--iggy-batch`` messages, lockstep (as Iggy clients are); p50/p99 per call. The reference
  sends its events once, then round again until ``--ref-seconds`` (at ~200k/s it would
  otherwise be timed over a fraction of a second).
* ``write 4 writers``: a 4-segment stream, ``--events`` in total, no routing key (the
  client picks a segment per event, so each writer keeps a block in flight per segment),
  as 4 writer objects in one process and as 4 processes with one writer each
  (``--four`` picks). Reference: 4 producer processes, one partition each.
* ``read``: what the write cells stored, read by a fresh reader group with one reader until
  every event was seen (``--read-rounds`` groups one after the other), counting distinct
  payloads; timed from ``create_reader`` (it starts fetching at once) to the last event.
  Reference: ``poll_messages`` of ``--iggy-batch`` from offset 0 up through the first pass
  (``--events``) of every partition of the Iggy topic the reference wrote.

pravega-client.md section 4: the 0.3.8 client keeps one block (up to 500 events) in flight
per segment writer, so a writer's throughput is about block / ack latency, and the ack
latency is the group commit (``batch``: a round at most every 5 ms). Columns: events/s,
payload MB/s, p50/p99 ms, ``srv us/ev`` (the gateway's CPU time per event, from /proc) and
``cli us/ev`` (the clients' own CPU time per event: when it is far above the server's, the
client is what limits the row), and ``x iggy``: Pravega events/s / reference events/s.
``--py-spy BIN --profile write1:128,read1:128`` records the gateway with py-spy during
those cells and prints where its event loop spends its time.

Usage: ``.venv/bin/python bench/pravega_bench.py [--quick] [--events 200000]
[--sizes 128,1024] [--window 1000] [--fsync batch] [--markdown]``. Temp data (in
``--dir``, the current directory by default: /tmp may be a tmpfs) is removed at the end.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
from functools import partial
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from _harness import (  # noqa: E402
    BenchFailure,
    Client,
    Profiler,
    ServerProcess,
    ferry_env,
    in_temp_dir,
    pct,
    run_cell,
    summarize_stacks,
    versus_iggy_table,
    wait_banner,
)
from iggy_bench import connect, frame, recv_reply  # noqa: E402  (puts ROOT, tests/support on sys.path)
from iggy_clients import client_python as iggy_python  # noqa: E402
from pravega_clients import client_python as pravega_python  # noqa: E402

START_LIMIT_S = 60  # the gateway must print "ready" by then
CELL_LIMIT_S = 180  # a client that has not finished by then is hung (pravega-client.md 4: hangs, not errors)
SCOPE, IGGY_STREAM = "pbench", "ibench"
ID_LEN = 14  # "PPWW" + 10 digits: the unique prefix of every payload
CELLS = ("latency", "write1", "write4", "read1", "read4")

# -- the client scripts (each runs in its client's venv; argv[1] is a JSON config) ------------
COMMON = r'''
import asyncio, collections, json, os, sys, time
cfg = json.loads(sys.argv[1])
def out(**kw):
    print(json.dumps(kw), flush=True)
def payload(tag, i, size):  # unique, exactly `size` bytes of ASCII
    return (f"{tag}{i:010d}" + "x" * size)[:size]
def wait_go():
    out(ready=True)
    if sys.stdin.readline().strip() != "go":
        os._exit(3)
def pct(lat, q):
    return lat[min(len(lat) - 1, int(len(lat) * q))] if lat else 0.0
'''

PRAVEGA_SCRIPT = COMMON + r'''
import pravega_client
# Ferry's controller requires a Ferry user's credentials: the root user's (docs/pravega.md).
os.environ.update(pravega_client_auth_method="Basic", pravega_client_auth_username="iggy",
                  pravega_client_auth_password="iggy")
m = pravega_client.StreamManager(f"tcp://127.0.0.1:{cfg['port']}", auth_enabled=True)

async def drive(w, events, window, lat):
    """write_event_async with at most `window` futures outstanding; per-event latency from
    the call to the future's completion (its done callback)."""
    now = time.perf_counter
    pending = collections.deque()
    for ev in events:
        if len(pending) >= window:
            await pending.popleft()
        t = now()
        f = w.write_event_async(ev)
        f.add_done_callback(lambda _f, t=t: lat.append(now() - t))
        pending.append(f)
    for f in pending:
        await f
    w.flush()

async def main():
    mode, size = cfg["mode"], cfg.get("size", 0)
    if mode == "setup":
        m.create_scope(cfg["scope"])
        for name, segments in cfg["streams"]:
            m.create_stream(cfg["scope"], name, segments)
        out(done=True)
        return
    if mode in ("write", "latency"):
        ws = [m.create_writer(cfg["scope"], cfg["stream"]) for _ in range(cfg.get("writers", 1))]
        tags = [f"{cfg['proc']:02d}{k:02d}" for k in range(len(ws))]
        # Warm-up: set up every segment writer (SetupAppend) before the clock starts.
        await asyncio.gather(*(w.write_event_async(payload("W" + tag[1:], i, size))
                               for w, tag in zip(ws, tags) for i in range(cfg["warmup"])))
        if mode == "latency":
            w, lat, i = ws[0], [], 0
            wait_go()
            t0, c0 = time.monotonic(), time.process_time()
            while time.monotonic() - t0 < cfg["seconds"]:
                ev = payload(tags[0], i, size)
                a = time.perf_counter()
                await w.write_event_async(ev)
                lat.append(time.perf_counter() - a)
                i += 1
        else:
            data = [[payload(tag, i, size) for i in range(cfg["events"])] for tag in tags]
            lat = []
            wait_go()
            t0, c0 = time.monotonic(), time.process_time()
            await asyncio.gather(*(drive(w, evs, cfg["window"], lat) for w, evs in zip(ws, data)))
            i = len(ws) * cfg["events"]
        t1, c1 = time.monotonic(), time.process_time()
        lat.sort()
        out(t0=t0, t1=t1, cpu=c1 - c0, events=i, bytes=i * size, n_lat=len(lat),
            lat_us=[round(x * 1e6) for x in lat[::max(1, len(lat) // 20000)]], p50=pct(lat, 0.5), p99=pct(lat, 0.99))
        return
    if mode == "read":
        groups = [m.create_reader_group(f"{cfg['group']}-{k}", cfg["scope"], cfg["stream"])
                  for k in range(cfg["rounds"])]
        wait_go()
        t0, c0 = time.monotonic(), time.process_time()
        busy, total, nbytes, bad = 0.0, 0, 0, []
        for k, rg in enumerate(groups):
            a = time.monotonic()
            r = rg.create_reader("r0")
            ids = []
            deadline = a + cfg["limit_s"]
            while len(ids) < cfg["expect"] and time.monotonic() < deadline:
                try:
                    s = await asyncio.wait_for(r.get_segment_slice_async(),
                                               timeout=max(0.1, deadline - time.monotonic()))
                except asyncio.TimeoutError:
                    break
                for e in s:
                    d = e.data()
                    ids.append(d[:14])
                    nbytes += len(d)
                r.release_segment(s)
            busy += time.monotonic() - a
            total += len(ids)
            distinct = len(set(ids))
            if len(ids) != cfg["expect"] or distinct != len(ids):
                bad.append({"round": k, "read": len(ids), "distinct": distinct, "expect": cfg["expect"]})
            r.reader_offline()
        t1, c1 = time.monotonic(), time.process_time()
        out(t0=t0, t1=t0 + busy, cpu=c1 - c0, events=total, bytes=nbytes, bad=bad, lat_us=[], n_lat=0, p50=0, p99=0)

asyncio.run(main())
sys.stdout.flush()
os._exit(0)  # the Rust client's runtime can abort at interpreter teardown; the result is printed
'''

IGGY_SCRIPT = COMMON + r'''
import apache_iggy as lib

async def main():
    mode, size = cfg["mode"], cfg["size"]
    c = lib.IggyClient(f"127.0.0.1:{cfg['port']}")
    await c.connect()
    await c.login_user("iggy", "iggy")
    stream, topic = cfg["stream"], cfg["topic"]
    lat, n, nbytes, bad = [], 0, 0, []
    if mode == "latency":
        tag = f"{cfg['proc']:02d}00"
        await c.send_messages(stream, topic, 0, [lib.SendMessage(payload("W" + tag[1:], 0, size).encode())])
        wait_go()
        t0, c0 = time.monotonic(), time.process_time()
        while time.monotonic() - t0 < cfg["seconds"]:
            msgs = [lib.SendMessage(payload(tag, n, size).encode())]
            a = time.perf_counter()
            await c.send_messages(stream, topic, cfg["partition"], msgs)
            lat.append(time.perf_counter() - a)
            n += 1
    elif mode == "send":
        tag, batch = f"{cfg['proc']:02d}00", cfg["batch"]
        events = [lib.SendMessage(payload(tag, i, size).encode()) for i in range(cfg["events"])]
        batches = [events[i:i + batch] for i in range(0, len(events), batch)]
        wait_go()
        t0, c0 = time.monotonic(), time.process_time()
        # Every batch once, then round again until min_seconds: a reference much faster than
        # the Pravega row would otherwise be timed over a fraction of a second.
        while n < len(events) or time.monotonic() - t0 < cfg["min_seconds"]:
            msgs = batches[(n // batch) % len(batches)]
            a = time.perf_counter()
            await c.send_messages(stream, topic, cfg["partition"], msgs)
            lat.append(time.perf_counter() - a)
            n += len(msgs)
    else:  # poll
        if hasattr(lib, "Consumer"):  # 0.9: keyword arguments and an explicit consumer
            one = lib.Consumer.Single(1)
            def poll(p, offset, count):
                return c.poll_messages(stream, topic, consumer=one, polling_strategy=lib.PollingStrategy.Offset(offset),
                                       count=count, auto_commit=False, partition_id=p)
        else:
            def poll(p, offset, count):
                return c.poll_messages(stream, topic, p, lib.PollingStrategy.Offset(offset), count, False)
        wait_go()
        t0, c0 = time.monotonic(), time.process_time()
        for k in range(cfg["rounds"]):
            ids = []
            for p, want in enumerate(cfg["expect"]):
                got_p, deadline = 0, time.monotonic() + cfg["limit_s"]
                while got_p < want and time.monotonic() < deadline:
                    got = await poll(p, got_p, min(cfg["batch"], want - got_p))  # the first pass only
                    for msg in got:
                        d = msg.payload()
                        ids.append(d[:14])
                        nbytes += len(d)
                    got_p += len(got)
            n += len(ids)
            if len(ids) != sum(cfg["expect"]) or len(set(ids)) != len(ids):
                bad.append({"round": k, "read": len(ids), "distinct": len(set(ids)), "expect": sum(cfg["expect"])})
    t1, c1 = time.monotonic(), time.process_time()
    lat.sort()
    out(t0=t0, t1=t1, cpu=c1 - c0, events=n, bytes=nbytes or n * size, bad=bad, n_lat=len(lat),
        lat_us=[round(x * 1e6) for x in lat[::max(1, len(lat) // 20000)]], p50=pct(lat, 0.5), p99=pct(lat, 0.99))

asyncio.run(main())
sys.stdout.flush()
os._exit(0)
'''


# -- the gateway ------------------------------------------------------------------------------
class Gateway(ServerProcess):
    """``ferry serve`` in a subprocess: ``ports`` from its banner, ``log`` (its stderr)."""

    def __init__(self, tmp: Path, fsync: str) -> None:
        log = tmp / "server.log"
        super().__init__("gateway", subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve", "--data", str(tmp / "data"), "--host", "127.0.0.1",
             "--only", "pravega,pravega_controller,iggy_tcp", "--fsync", fsync, "--iggy-tcp-port", "0",
             "--pravega-port", "0", "--pravega-controller-port", "0"],
            cwd=tmp, env=ferry_env(PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE, stderr=open(log, "wb")),
            log, lambda ln: bool(re.search(r"\b(ERROR|CRITICAL|Traceback)\b", ln))
            or (" WARNING " in ln and "default password" not in ln))
        self.banner = wait_banner(self.proc, self.log, START_LIMIT_S)
        listed = re.findall(r"^\s+(iggy_tcp|pravega|pravega_controller) +127\.0\.0\.1:(\d+)/tcp", self.banner, re.M)
        self.ports = {name: int(port) for name, port in listed}
        # Anything printed to stdout later must not fill the pipe and block the server.
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()


# -- py-spy: _harness.Profiler ------------------------------------------------------------------
PROJECT_FRAME = re.compile(r"\((?:adapters/pravega|adapters/iggy|core|gateway)/[^:)]*")


def summarize_profile(path: Path, top: int = 8) -> str:
    """Where the gateway's event loop (main thread) spends its samples: idle in epoll, and the
    innermost Ferry frame of every busy sample (its own time plus the trio/stdlib calls under
    it) and inclusive counts per Ferry function; worker threads (fdatasync) apart."""
    return summarize_stacks(path, project=PROJECT_FRAME, skip=r"gateway/cli/|gateway/__main__", threads=False,
                            top=top, idle="get_events (trio/_core/_io_epoll.py",
                            head="  event loop: {main} samples, {idle:.0%} idle in epoll; of the {busy} busy ones:"
                                 "\n  innermost Ferry frame (own + trio/stdlib under it):",
                            others="  worker threads: {} samples: ")


# -- the bench ------------------------------------------------------------------------------------
class Bench:
    def __init__(self, args, gw: Gateway, tmp: Path) -> None:
        self.a, self.gw, self.tmp = args, gw, tmp
        self.pravega = Path(args.pravega_python) if args.pravega_python else pravega_python()
        self.iggy_spec = f"apache-iggy=={args.iggy_client}"
        self.iggy = iggy_python(self.iggy_spec)
        self.rows: list[dict] = []
        self.written: dict[str, int] = {}  # Pravega stream -> events stored (warm-up included)
        self.iggy_written: dict[str, list[int]] = {}  # Iggy topic -> events per partition
        self.profiles: dict[str, str] = {}
        self.logs = itertools.count(1)

    # one cell: start every client, wait for all ready, go, collect
    def run(self, label: str, python: Path, script: str, cfgs: list[dict], profile_key: str | None = None) -> dict:
        profile = profile_key in self.a.profile and (lambda: Profiler(
            self.a.py_spy, self.gw.pid, self.tmp / f"profile-{profile_key.replace(':', '-')}.txt", self.a.spy_rate,
            ("--nonblocking", *(["--gil"] if self.a.spy_gil else [])), summarize_profile))
        clients = (Client(python, script, cfg, self.tmp / f"client-{next(self.logs):03d}.log") for cfg in cfgs)
        results, srv_cpu, prof = run_cell(clients, self.gw, CELL_LIMIT_S, "t1", CELL_LIMIT_S, profile or None)
        if profile:
            self.profiles[f"{profile_key} ({label})"] = prof
        problems = self.gw.problems()
        if self.gw.proc.poll() is not None:
            raise BenchFailure(f"{label}: the gateway exited ({self.gw.proc.returncode})\n" + "\n".join(problems))
        bad = [b for r in results for b in r.get("bad", [])]
        if bad or problems:
            raise BenchFailure(f"{label}: " + (f"wrong counts {bad}\n" if bad else "")
                               + ("gateway log:\n" + "\n".join(problems[-30:]) if problems else ""))
        seconds = max(r["t1"] for r in results) - min(r["t0"] for r in results)
        events = sum(r["events"] for r in results)
        lat = sorted(x for r in results for x in r["lat_us"])
        n_lat = sum(r["n_lat"] for r in results)
        return {"events": events, "bytes": sum(r["bytes"] for r in results), "seconds": seconds,
                "rate": events / seconds, "mbs": sum(r["bytes"] for r in results) / seconds / 1e6,
                # per-process percentiles are exact; pooled ones come from a thinned sample (<= 20k a process)
                "p50": (results[0]["p50"] if len(results) == 1 else (statistics.median(lat) / 1e6 if lat else 0)),
                "p99": results[0]["p99"] if len(results) == 1 else pct(lat, 0.99) / 1e6,
                "n_lat": n_lat, "srv": srv_cpu / events * 1e6, "cli": sum(r["cpu"] for r in results) / events * 1e6}

    def pcfg(self, **kw) -> dict:
        return {"port": self.gw.ports["pravega_controller"], "scope": SCOPE} | kw

    def icfg(self, **kw) -> dict:
        return {"port": self.gw.ports["iggy_tcp"], "stream": IGGY_STREAM} | kw

    def add(self, size: int, cell: str, pravega: dict, label: str, iggy: dict, iggy_label: str) -> None:
        ratio = pravega["rate"] / iggy["rate"]
        self.rows.append({"size": size, "cell": cell, "side": label, **pravega, "ratio": ratio})
        self.rows.append({"size": size, "cell": "", "side": iggy_label, **iggy, "ratio": None})
        print(TABLE.row(self.rows[-2]), flush=True)
        print(TABLE.row(self.rows[-1]), flush=True)

    def setup(self) -> None:
        streams = []
        for size in self.a.sizes:
            streams += [[f"lat-{size}", 1], [f"w1-{size}", 1], [f"w4o-{size}", 4], [f"w4p-{size}", 4]]
        c = Client(self.pravega, PRAVEGA_SCRIPT, self.pcfg(mode="setup", streams=streams),
                   self.tmp / "client-setup.log")
        try:
            c.expect("done", time.monotonic() + CELL_LIMIT_S, self.gw)
        finally:
            c.close()
        sock, _ = connect(self.gw.ports["iggy_tcp"])
        sock.sendall(frame("stream.create", name=IGGY_STREAM))
        assert recv_reply(sock)[0] == 0
        for size in self.a.sizes:
            for topic, parts in ((f"lat-{size}", 1), (f"w1-{size}", 1), (f"w4-{size}", 4)):
                sock.sendall(frame("topic.create", stream_id=IGGY_STREAM, partitions_count=parts, name=topic))
                status, _ = recv_reply(sock)
                assert status == 0, (topic, status)
        sock.close()

    def iggy_send(self, size: int, topic: str, producers: int) -> dict:
        per = self.a.events // producers
        res = self.run(f"iggy send {topic}", self.iggy, IGGY_SCRIPT,
                       [self.icfg(mode="send", topic=topic, partition=p, proc=p, events=per, size=size,
                                  batch=self.a.iggy_batch, min_seconds=self.a.ref_seconds) for p in range(producers)])
        self.iggy_written[topic] = [per] * producers
        return res

    def pravega_write(self, size: int, stream: str, procs: int, writers: int, key: str | None = None) -> dict:
        per = self.a.events // (procs * writers)
        warmup = 8 if stream.startswith(("w1", "lat")) else 32
        res = self.run(f"pravega write {stream}", self.pravega, PRAVEGA_SCRIPT,
                       [self.pcfg(mode="write", stream=stream, writers=writers, proc=p, events=per, size=size,
                                  window=self.a.window, warmup=warmup) for p in range(procs)], key)
        self.written[stream] = procs * writers * (per + warmup)
        return res

    def size_cells(self, size: int) -> None:
        a, pv, ig = self.a, f"pravega {PRAVEGA_VERSION}", f"{self.iggy_spec} (ref)"
        if "latency" in a.cells:
            p = self.run("pravega latency", self.pravega, PRAVEGA_SCRIPT,
                         [self.pcfg(mode="latency", stream=f"lat-{size}", proc=0, size=size, warmup=8,
                                    seconds=a.latency_seconds)], f"latency:{size}")
            i = self.run("iggy latency", self.iggy, IGGY_SCRIPT,
                         [self.icfg(mode="latency", topic=f"lat-{size}", partition=0, proc=0, size=size,
                                    seconds=a.latency_seconds)])
            self.add(size, "ack latency, 1 event in flight", p, pv, i, ig + ", 1-message sends")
        if "write1" in a.cells:
            p = self.pravega_write(size, f"w1-{size}", 1, 1, f"write1:{size}")
            i = self.iggy_send(size, f"w1-{size}", 1)
            self.add(size, f"write, 1 writer, window {a.window}", p, pv, i, ig + f", batches of {a.iggy_batch}")
        if "write4" in a.cells:
            i = None
            for four in a.four:
                if four == "objects":
                    p = self.pravega_write(size, f"w4o-{size}", 1, 4, f"write4o:{size}")
                    cell = "write, 4 writer objects, 1 process"
                else:
                    p = self.pravega_write(size, f"w4p-{size}", 4, 1, f"write4p:{size}")
                    cell = "write, 4 writers, 4 processes"
                i = i or self.iggy_send(size, f"w4-{size}", 4)
                self.add(size, cell, p, pv, i, ig + f", 4 processes, batches of {a.iggy_batch}")
        for key, parts in (("read1", 1), ("read4", 4)):
            if key not in a.cells:
                continue
            stream = f"w1-{size}" if parts == 1 else next(
                (s for s in (f"w4o-{size}", f"w4p-{size}") if s in self.written), f"w4o-{size}")
            topic = f"w1-{size}" if parts == 1 else f"w4-{size}"
            if stream not in self.written:  # its write cell was skipped: fill it, untimed
                self.pravega_write(size, stream, 1, 1 if parts == 1 else 4)
            if topic not in self.iggy_written:
                self.iggy_send(size, topic, parts)
            p = self.run(f"pravega read {stream}", self.pravega, PRAVEGA_SCRIPT,
                         [self.pcfg(mode="read", stream=stream, group=f"rg-{stream}", expect=self.written[stream],
                                    rounds=a.read_rounds, limit_s=CELL_LIMIT_S / (2 * a.read_rounds))],
                         f"{key}:{size}")
            i = self.run(f"iggy poll {topic}", self.iggy, IGGY_SCRIPT,
                         [self.icfg(mode="poll", topic=topic, size=size, expect=self.iggy_written[topic],
                                    batch=a.iggy_batch, rounds=a.read_rounds,
                                    limit_s=CELL_LIMIT_S / (2 * a.read_rounds))])
            self.add(size, f"read, {parts} segment{'s' if parts > 1 else ''}, 1 reader", p, pv, i,
                     ig + f", polls of {a.iggy_batch}")


PRAVEGA_VERSION = "0.3.8"
TABLE = versus_iggy_table(unit="ev", rate="events/s", cell_width=36, lat_width=8, cpu_width=10, cpu_digits=1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=200_000, help="events per write cell (all writers together)")
    ap.add_argument("--sizes", default="128,1024", help="event sizes in bytes, comma-separated (>= 14)")
    ap.add_argument("--window", type=int, default=1000, help="write_event_async futures outstanding per writer")
    ap.add_argument("--latency-seconds", type=float, default=4.0, help="length of each ack-latency cell")
    ap.add_argument("--read-rounds", type=int, default=3, help="fresh reader groups read everything, one after another")
    ap.add_argument("--four", default="objects,processes",
                    help="4-writer cells: 'objects' (one process), 'processes' (one writer each), or both")
    ap.add_argument("--cells", default=",".join(CELLS), help=f"subset of {','.join(CELLS)}")
    ap.add_argument("--iggy-client", default="0.8.0", help="apache-iggy version of the reference")
    ap.add_argument("--iggy-batch", type=int, default=1000, help="messages per send_messages / poll_messages")
    ap.add_argument("--ref-seconds", type=float, default=3.0,
                    help="the Iggy send reference sends its events once, then again until this long")
    ap.add_argument("--fsync", default="batch", choices=["always", "batch", "never"])
    ap.add_argument("--quick", action="store_true", help="~1 minute: 40k events, 1.5 s latency cells, 1 read round")
    ap.add_argument("--dir", default=".", help="where the temp data dir goes (default: here; /tmp may be tmpfs)")
    ap.add_argument("--pravega-python", help="interpreter with pravega==0.3.8 (default: the test suite's venv)")
    ap.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    ap.add_argument("--py-spy", help="py-spy binary: record the gateway during the --profile cells")
    ap.add_argument("--profile", default="", help="cells to profile, e.g. write1:128,read1:128 (with --py-spy)")
    ap.add_argument("--spy-rate", type=int, default=250, help="py-spy samples per second")
    ap.add_argument("--spy-gil", action="store_true",
                    help="py-spy --gil: only samples holding the GIL (CPU, not waits for the GIL or the socket)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs, profiles)")
    a = ap.parse_args()
    if a.quick:
        a.events, a.latency_seconds, a.read_rounds, a.ref_seconds = min(a.events, 40_000), 1.5, 1, 1.0
    a.sizes = [int(s) for s in a.sizes.split(",")]
    a.cells = set(a.cells.split(","))
    a.four = [f.strip() for f in a.four.split(",") if f.strip()]
    a.profile = set(filter(None, a.profile.split(",")))
    if a.profile and not a.py_spy:
        ap.error("--profile needs --py-spy")
    if min(a.sizes) < ID_LEN or a.cells - set(CELLS) or set(a.four) - {"objects", "processes"}:
        ap.error("bad --sizes / --cells / --four")
    return in_temp_dir("pravega-bench-", a.dir, a.keep, partial(run, a), gateway_log)


def run(a, tmp: Path) -> None:
    started = time.monotonic()
    gw = Gateway(tmp, a.fsync)
    try:
        bench = Bench(a, gw, tmp)
        bench.setup()
        print(f"{datetime.date.today()} {platform.node()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; "
              f"fsync {a.fsync}; {a.events:,} events per write cell; window {a.window} per writer; "
              f"reference {bench.iggy_spec}; {a.read_rounds} read round(s)")
        print(TABLE.header())
        for size in a.sizes:
            bench.size_cells(size)
        if a.markdown:
            print("\n" + TABLE.markdown(bench.rows))
        for key, text in bench.profiles.items():
            print(f"\ngateway profile, {key}:\n{text}")
        print(f"\n{time.monotonic() - started:.0f} s, load {os.getloadavg()[0]:.2f}")
    finally:
        gw.stop()


def gateway_log(tmp: Path) -> str:
    log = (tmp / "server.log").read_text(errors="replace")[-6000:] if (tmp / "server.log").exists() else ""
    return f"\n--- gateway log (tail) ---\n{log}"

if __name__ == "__main__":
    sys.exit(main())
