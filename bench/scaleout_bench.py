"""Ferry gateways over a NATS JetStream cluster (issue 14) against JetStream itself, same run.

What it measures
----------------
A real 3-node nats-server cluster (tests/support/nats_cluster.py) runs for the whole bench,
its stores in the bench's temp dir (``--dir``, the current directory by default: /tmp may be
a tmpfs). Per payload size (``--sizes``) one round runs four configurations, one after the
other, with the same client code (nats-py, asyncio, forked processes set up first and started
on one ``go``, _harness.ForkedClient):

* ``direct``: requests to the subject of a JetStream stream created in the cluster with the
  configuration Ferry gives its partition streams (file storage, ``--replicas``, limits,
  direct gets), each answered by the cluster's PubAck: the reference (its publishes carry no
  ``Nats-Msg-Id``; Ferry's do, so JetStream's duplicate check is work only the ferry rows have);
* ``ferry-1``: ``ferry serve --store nats://<the 3 nodes> --only nats`` (gateway A), requests on
  ``bench.s<size>``, captured by ``[[binding]] stream="bench" topic="s<size>" partitions=1``:
  the reply is Ferry's PubAck, sent once JetStream acknowledged the message on a quorum and
  A's mirror applied it (docs/scale-out.md);
* ``ferry-2``: gateway B started beside A (same ``[store] prefix``, its own data dir), half the
  publishers on each, same topic;
* ``embedded``: one ``ferry serve --fsync batch`` without ``--store`` (its own log).

Only the processes of a configuration run during its cells (B is started for ferry-2, every
gateway stopped before the next configuration), so an idle gateway's mirror does not take CPU
from the row before. Each configuration has two cells of ``--seconds``:

* ``window``: ``--publishers`` publishers (a process and a connection each), each keeping
  ``--window`` requests in flight (a PUB with its own reply subject under one inbox
  subscription, the next as soon as an ack frees a slot); rate = acks / (go to last ack);
* ``seq``: one publisher, one request in flight (ferry-2: alternating between A and B);
  p50/p99 of the request to ack time.

Checks (the bench stops at the first failure with the logs' tails): every request answered by
a PubAck without ``error`` for the right stream, none left unanswered ``DRAIN_S`` after the
last send, no ack slot waiting ``STALL_S``; the sequences acked in a cell (warm-ups included)
unique and contiguous; after a configuration, its JetStream stream (``direct``) or the
partition's stream (``<PREFIX>_P_...``, ferry) holds exactly the acked messages; no gateway
logs ERROR/Traceback and no process exits. nats-server [WRN]/[ERR] lines are printed.

Columns: acks/s with the window, ``x direct`` and ``x embedded`` (ratios of acks/s measured in
the same round), seq p50/p99 and ``p50 x direct`` (direct p50 / this p50: above 1 is faster),
CPU per acked message (window cell, from /proc) of the gateways, of the 3 nats-servers
together and of the clients. ``uptime`` is printed before and after.

Usage: ``.venv/bin/python bench/scaleout_bench.py [--seconds 3] [--sizes 128,1024]
[--publishers 2] [--window 256] [--replicas 3] [--configs direct,ferry-1,ferry-2,embedded]
[--json PATH] [--dir .] [--keep]``. Every process it starts is stopped at the end, on a
failure, on Ctrl-C and on SIGTERM; the temp dir is removed (kept with ``--keep`` or on a
failure).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import datetime
import importlib.metadata
import json
import multiprocessing as mp
import os
import re
import signal
import subprocess
import sys
import threading
import time
from functools import partial
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(BENCH), str(ROOT / "tests" / "support")]

from _harness import (  # noqa: E402
    BenchFailure,
    ForkedClient,
    ServerProcess,
    Table,
    client_failed,
    cpu_seconds,
    ferry_env,
    in_temp_dir,
    pct,
    run_cell,
    wait_banner,
    wait_go,
)
from nats_cluster import NatsCluster, NatsClusterError  # noqa: E402

CONFIGS = ("direct", "ferry-1", "ferry-2", "embedded")
START_LIMIT_S = 90      # a gateway over the cluster waits for JetStream (store.connect_timeout_seconds 15 s)
DRAIN_S = 30            # Ferry re-sends an unacknowledged append for 30 s (docs/scale-out.md); past that it is lost
STALL_S = 20            # a full window with no ack for this long is a stall, reported as such
WARM_TIMEOUT_S = 30     # the first request may wait for a stream leader election
API_TIMEOUT_S = 10
FERRY_PROBLEM = re.compile(r"\b(ERROR|CRITICAL|Traceback)\b")
NATS_PROBLEM = re.compile(r"\[(ERR|WRN|FTL)\]|panic:")
_STARTED: list[subprocess.Popen] = []   # gateways still running, killed at exit whatever happened


@atexit.register
def _kill_leftovers() -> None:
    for proc in _STARTED:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -- the client (forked, asyncio) -----------------------------------------------------------------
async def requester(conn, cfg: dict) -> dict:
    """``cfg["servers"]``: one connection per entry (a list of URLs each), used in turn by one
    loop that keeps ``window`` requests in flight: a PUB with reply ``<inbox>.<n>`` per message,
    acks taken by one subscription on ``<inbox>.*`` per connection (what nats-py's request()
    does underneath, without a future and a timer per message). Returns t0/t1, cpu, the acked
    sequences (``seqs``, the warm-ups apart), ``lat`` (ns), ``lost`` and ``errors``."""
    import nats

    errors: list[str] = []
    clock = time.perf_counter_ns

    async def err_cb(exc):
        if len(errors) < 10:
            errors.append(f"connection error: {exc!r}")

    ncs = [await nats.connect(servers=s, allow_reconnect=False, error_cb=err_cb, max_outstanding_pings=100)
           for s in cfg["servers"]]
    payload, subject, stream, window = b"x" * cfg["size"], cfg["subject"], cfg["stream"], cfg["window"]
    warm = []
    for nc in ncs:  # warm-up, untimed: the topic exists and the stream has a leader
        doc = json.loads((await nc.request(subject, payload, timeout=WARM_TIMEOUT_S)).data)
        if "error" in doc or doc.get("stream") != stream:
            return {"error": f"warm-up request on {subject}: {doc}"}
        warm.append(doc["seq"])
    pending: dict[str, int] = {}
    lat: list[int] = []
    seqs: list[int] = []
    slot = asyncio.Event()
    inboxes = []

    async def on_ack(msg):
        t = pending.pop(msg.subject.rpartition(".")[2], None)
        if t is None:
            if len(errors) < 10:
                errors.append(f"an ack for no request: {msg.subject}")
            return
        lat.append(clock() - t)
        doc = json.loads(msg.data)
        if "error" in doc or doc.get("stream") != stream:
            if len(errors) < 10:
                errors.append(f"ack: {doc}")
        else:
            seqs.append(doc["seq"])
        if len(pending) < window:
            slot.set()

    for nc in ncs:
        inbox = nc.new_inbox()
        await nc.subscribe(inbox + ".*", cb=on_ack, pending_msgs_limit=1 << 20)
        await nc.flush()
        inboxes.append(inbox)
    if not wait_go(conn):
        return {"error": "no go"}
    t0, c0 = time.monotonic(), time.process_time()
    end, n, stalled = t0 + cfg["seconds"], 0, False
    while time.monotonic() < end:
        while len(pending) >= window:
            slot.clear()
            try:
                await asyncio.wait_for(slot.wait(), STALL_S)
            except TimeoutError:
                stalled = True
                break
        if stalled:
            errors.append(f"stall: {len(pending)} requests in flight and no ack for {STALL_S} s "
                          f"({len(seqs)} acked so far)")
            break
        k = n % len(ncs)
        pending[str(n)] = clock()
        await ncs[k].publish(subject, payload, reply=f"{inboxes[k]}.{n}")
        n += 1
    last_send = time.monotonic()
    for nc in ncs:
        await nc.flush()
    while pending and time.monotonic() < last_send + DRAIN_S:
        slot.clear()
        try:
            await asyncio.wait_for(slot.wait(), 0.5)
        except TimeoutError:
            pass
    t1, c1 = time.monotonic(), time.process_time()
    lost = len(pending)
    if lost:
        errors.append(f"{lost} of {n} requests unanswered {DRAIN_S} s after the last send "
                      f"(oldest in flight: #{min(pending, key=int)})")
    for nc in ncs:
        await nc.close()
    return {"t0": t0, "t1": t1, "cpu": c1 - c0, "sent": n, "msgs": len(seqs), "seqs": seqs, "warm": warm,
            "lat": lat, "lost": lost, "errors": errors}


# -- the servers ----------------------------------------------------------------------------------
class Gateway(ServerProcess):
    """``ferry serve --only nats --nats-port 0`` in its own dir (``ferry.toml``, ``data/``,
    ``server.log``); ``url`` from its banner."""

    def __init__(self, name: str, tmp: Path, toml: str, *args: str) -> None:
        cwd = tmp / name
        cwd.mkdir()
        (cwd / "ferry.toml").write_text(toml)
        log = cwd / "server.log"
        with open(log, "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "gateway", "serve", "--config", "ferry.toml", "--data", str(cwd / "data"),
                 "--host", "127.0.0.1", "--only", "nats", "--nats-port", "0", "--grace-seconds", "2", *args],
                cwd=cwd, env=ferry_env(PYTHONUNBUFFERED="1"), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=err)
        _STARTED.append(proc)
        super().__init__(name, proc, log, lambda ln: bool(FERRY_PROBLEM.search(ln)))
        banner = wait_banner(proc, log, START_LIMIT_S, who=name)
        port = re.search(r"^\s+nats +127\.0\.0\.1:(\d+)/tcp", banner, re.M)
        if not port:
            self.stop()
            raise BenchFailure(f"{name}: no nats port in its banner:\n{banner}")
        self.url = f"nats://127.0.0.1:{port.group(1)}"
        # Anything printed to stdout later must not fill the pipe and block the server.
        threading.Thread(target=proc.stdout.read, daemon=True).start()

    def stop(self) -> None:
        super().stop()
        if self.proc in _STARTED:
            _STARTED.remove(self.proc)


def node_processes(cluster: NatsCluster) -> list[ServerProcess]:
    """The cluster's nodes as ServerProcess (liveness, new [WRN]/[ERR] lines of their logs)."""
    nodes = []
    for i in range(cluster.size):
        srv = ServerProcess(cluster.name(i), cluster._procs[i], cluster.log_path(i),
                            lambda ln: bool(NATS_PROBLEM.search(ln)))
        srv.problems()  # from now on
        nodes.append(srv)
    return nodes


async def _js_api(servers: list[str], calls: list[tuple[str, dict | None]]) -> list[dict]:
    import nats

    nc = await nats.connect(servers=servers, allow_reconnect=False)
    try:
        out = []
        for subject, body in calls:
            msg = await nc.request(subject, b"" if body is None else json.dumps(body).encode(),
                                   timeout=API_TIMEOUT_S)
            out.append(json.loads(msg.data))
        return out
    finally:
        await nc.close()


def js_api(cluster: NatsCluster, subject: str, body: dict | None = None) -> dict:
    # A fresh asyncio loop in the parent per call: it forks the clients, so it keeps no loop around.
    return asyncio.run(_js_api(cluster.urls, [(subject, body)]))[0]


# -- the bench ------------------------------------------------------------------------------------
class Round:
    """One payload size: the four configurations, one after the other."""

    def __init__(self, a, tmp: Path, cluster: NatsCluster, nodes: list[ServerProcess], size: int) -> None:
        self.a, self.tmp, self.cluster, self.nodes, self.size = a, tmp / f"s{size}", cluster, nodes, size
        self.tmp.mkdir()
        self.ctx = mp.get_context("fork")
        self.results: dict[str, dict] = {}
        self.prefix = f"BENCH{size}"
        self.toml = (f'[store]\nprefix = "{self.prefix}"\nreplicas = {a.replicas}\n\n[[binding]]\nstream = "bench"\n'
                     f'topic = "s{size}"\ncreate = true\npartitions = 1\n')

    def check(self, label: str, gateways: list[Gateway]) -> None:
        for srv in [*gateways, *self.nodes]:
            if srv.proc.poll() is not None:
                raise BenchFailure(f"{label}: {srv.name} exited ({srv.proc.returncode})\n{srv.tail()}")
        for gw in gateways:
            problems = gw.problems()
            if problems:
                raise BenchFailure(f"{label}: {gw.name} logged:\n" + "\n".join(f"  | {ln}" for ln in problems[-30:])
                                   + f"\n{gw.name} log (tail):\n{gw.tail()}")
        for node in self.nodes:
            for ln in node.problems()[-5:]:
                print(f"    ({label}: {node.name} logged: {ln.strip()[:200]})")

    def cell(self, label: str, watch: ServerProcess, gateways: list[Gateway], cfgs: list[dict]) -> dict:
        pids = [g.pid for g in gateways]
        node_pids = [n.pid for n in self.nodes]
        g0, n0 = sum(map(cpu_seconds, pids)), sum(map(cpu_seconds, node_pids))
        results, _, _ = run_cell((ForkedClient(self.ctx, label, requester, cfg) for cfg in cfgs), watch, 60, None,
                                 self.a.seconds + DRAIN_S + STALL_S + 30)
        g1, n1 = sum(map(cpu_seconds, pids)), sum(map(cpu_seconds, node_pids))
        for r in results:
            if "error" in r or r.get("errors"):
                raise BenchFailure(client_failed(label, watch, r))
        self.check(label, gateways)
        seqs = sorted(s for r in results for s in r["seqs"] + r["warm"])
        if len(set(seqs)) != len(seqs) or seqs[-1] - seqs[0] + 1 != len(seqs):
            dup = len(seqs) - len(set(seqs))
            holes = seqs[-1] - seqs[0] + 1 - len(set(seqs))
            raise BenchFailure(f"{label}: {len(seqs)} acked sequences {seqs[0]}..{seqs[-1]}: {dup} repeated, "
                               f"{holes} missing (stored but never acked, or acked twice)\n{watch.tail()}")
        msgs = sum(r["msgs"] for r in results)
        seconds = max(r["t1"] for r in results) - min(r["t0"] for r in results)
        lat = sorted(x for r in results for x in r["lat"])
        return {"acks": msgs, "warm": sum(len(r["warm"]) for r in results), "seconds": seconds,
                "rate": msgs / seconds, "p50": pct(lat, 0.5) / 1e9, "p99": pct(lat, 0.99) / 1e9,
                "gw_us": (g1 - g0) / max(msgs, 1) * 1e6, "js_us": (n1 - n0) / max(msgs, 1) * 1e6,
                "cli_us": sum(r["cpu"] for r in results) / max(msgs, 1) * 1e6}

    def measure(self, config: str, urls: list[list[str]], stream: str, watch: ServerProcess,
                gateways: list[Gateway]) -> dict:
        """The two cells: publisher i on ``urls[i % len(urls)]``; the seq cell on every entry in turn."""
        a, subject = self.a, self.subject(config)
        base = {"subject": subject, "stream": stream, "size": self.size, "seconds": a.seconds}
        cfgs = [base | {"servers": [urls[i % len(urls)]], "window": a.window} for i in range(a.publishers)]
        win = self.cell(f"{config} {self.size} B window", watch, gateways, cfgs)
        seq = self.cell(f"{config} {self.size} B seq", watch, gateways, [base | {"servers": urls, "window": 1}])
        return {"window": win, "seq": seq, "total_acks": win["acks"] + win["warm"] + seq["acks"] + seq["warm"]}

    def subject(self, config: str) -> str:
        return f"direct.s{self.size}" if config == "direct" else f"bench.s{self.size}"

    def stored(self, stream: str) -> tuple[int, int]:
        info = js_api(self.cluster, f"$JS.API.STREAM.INFO.{stream}")
        if "error" in info:
            raise BenchFailure(f"STREAM.INFO {stream}: {info['error']}")
        return info["state"]["messages"], info["state"]["last_seq"]

    def verify_stored(self, config: str, stream: str, res: dict, before: int) -> None:
        msgs, last = self.stored(stream)
        if msgs - before != res["total_acks"]:
            raise BenchFailure(f"{config} {self.size} B: {res['total_acks']} acks, but JetStream stream {stream} "
                               f"holds {msgs - before} new messages (last_seq {last})")

    def run_direct(self) -> dict:
        name = f"DIRECT_{self.size}"
        r = js_api(self.cluster, f"$JS.API.STREAM.CREATE.{name}", {
            "name": name, "subjects": [self.subject("direct")], "retention": "limits", "storage": "file",
            "num_replicas": self.a.replicas, "discard": "old", "max_msgs": -1, "max_bytes": -1,
            "allow_direct": True})
        if "error" in r:
            raise BenchFailure(f"STREAM.CREATE {name}: {r['error']}")
        res = self.measure("direct", [self.cluster.urls], name, self.nodes[0], [])
        self.verify_stored("direct", name, res, 0)
        js_api(self.cluster, f"$JS.API.STREAM.DELETE.{name}")
        return res

    def partition_stream(self) -> str:
        r = js_api(self.cluster, "$JS.API.STREAM.NAMES", {"subject": f"{self.prefix.lower()}.p.>"})
        names = r.get("streams") or []
        if len(names) != 1:
            raise BenchFailure(f"{self.prefix}: want one partition stream in the cluster, found {names} ({r})")
        return names[0]

    def run_ferry(self) -> None:
        store = ["--store", self.cluster.url]
        gws = [Gateway("gw-a", self.tmp, self.toml, *store)]
        try:
            stream, before = None, 0
            for config, n in (("ferry-1", 1), ("ferry-2", 2)):
                if config not in self.a.configs:
                    continue
                while len(gws) < n:
                    gws.append(Gateway("gw-b", self.tmp, self.toml, *store))
                res = self.measure(config, [[g.url] for g in gws], "bench/s%d" % self.size, gws[0], gws)
                stream = stream or self.partition_stream()
                self.verify_stored(config, stream, res, before)
                before += res["total_acks"]
                self.results[config] = res
        finally:
            for g in gws:
                g.stop()

    def run_embedded(self) -> dict:
        gw = Gateway("embedded", self.tmp, self.toml.split("\n\n", 1)[1], "--fsync", "batch")
        try:
            return self.measure("embedded", [[gw.url]], f"bench/s{self.size}", gw, [gw])
        finally:
            gw.stop()

    def run(self) -> dict[str, dict]:
        if "direct" in self.a.configs:
            self.results["direct"] = self.run_direct()
        if {"ferry-1", "ferry-2"} & self.a.configs:
            self.run_ferry()
        if "embedded" in self.a.configs:
            self.results["embedded"] = self.run_embedded()
        return {c: self.results[c] for c in CONFIGS if c in self.results}


# -- output ---------------------------------------------------------------------------------------
def ms(seconds: float) -> str:
    x = seconds * 1e3
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


TABLE = Table(
    ("size", 5, lambda r: str(r["size"]), "size", "---:", lambda r: str(r["size"])),
    Table.gap(),
    ("<config", 9, lambda r: r["config"], "config", "---", lambda r: r["config"]),
    ("acks/s", 9, lambda r: f"{r['window']['rate']:,.0f}", "acks/s (window)", "---:",
     lambda r: f"{r['window']['rate']:,.0f}"),
    ("x direct", 9, lambda r: ratio(r["x_direct"]), "× direct", "---:", lambda r: f"**{ratio(r['x_direct'])}**"),
    ("x embed", 8, lambda r: ratio(r["x_embedded"]), "× embedded", "---:", lambda r: ratio(r["x_embedded"])),
    ("win p50", 8, lambda r: ms(r["window"]["p50"]), "window p50 ms", "---:", lambda r: ms(r["window"]["p50"])),
    ("seq p50", 8, lambda r: ms(r["seq"]["p50"]), "seq p50 ms", "---:", lambda r: ms(r["seq"]["p50"])),
    ("seq p99", 8, lambda r: ms(r["seq"]["p99"]), "seq p99 ms", "---:", lambda r: ms(r["seq"]["p99"])),
    ("p50 x dir", 10, lambda r: ratio(r["p50_x_direct"]), "p50 × direct", "---:", lambda r: ratio(r["p50_x_direct"])),
    ("gw us", 7, lambda r: f"{r['window']['gw_us']:.0f}", "gateways µs/ack", "---:",
     lambda r: f"{r['window']['gw_us']:.0f}"),
    ("js us", 7, lambda r: f"{r['window']['js_us']:.0f}", "nats-servers µs/ack", "---:",
     lambda r: f"{r['window']['js_us']:.0f}"),
    ("cli us", 7, lambda r: f"{r['window']['cli_us']:.0f}", "clients µs/ack", "---:",
     lambda r: f"{r['window']['cli_us']:.0f}"),
)


def rows_of(size: int, results: dict[str, dict]) -> list[dict]:
    direct, embedded = results.get("direct"), results.get("embedded")
    rows = []
    for config, res in results.items():
        rows.append({"size": size, "config": config, "window": res["window"], "seq": res["seq"],
                     "x_direct": res["window"]["rate"] / direct["window"]["rate"] if direct else None,
                     "x_embedded": res["window"]["rate"] / embedded["window"]["rate"] if embedded else None,
                     "p50_x_direct": direct["seq"]["p50"] / res["seq"]["p50"] if direct and res["seq"]["p50"]
                     else None})
    return rows


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def run(a, tmp: Path) -> None:
    started, up0 = time.monotonic(), uptime()
    print(f"{datetime.date.today()}, {os.cpu_count()} CPUs; nats-py {importlib.metadata.version('nats-py')}; "
          f"{a.seconds:g} s cells; {a.publishers} publishers x {a.window} in flight (window), 1 in flight (seq); "
          f"R{a.replicas}; stores in {tmp.parent}")
    print(f"uptime before: {up0}")
    rows: list[dict] = []
    try:
        with NatsCluster(tmp, 3) as cluster:  # its nodes SIGKILLed on the way out, whatever happened
            version = subprocess.run([cluster.binary, "--version"], capture_output=True, text=True, timeout=10,
                                     check=False).stdout.strip()
            print(f"{version}, 3 nodes: {cluster.url}")
            print("x direct / x embed: acks/s over the same round's direct / embedded row; p50 x dir: direct seq p50 / "
                  "this one (above 1 is faster); us: CPU per ack in the window cell")
            print(TABLE.header(), flush=True)
            nodes = node_processes(cluster)
            for size in a.sizes:
                for row in rows_of(size, Round(a, tmp, cluster, nodes, size).run()):
                    rows.append(row)
                    print(TABLE.row(row), flush=True)
    except NatsClusterError as exc:  # not ready, or a node died: its logs' tails are in the message
        raise BenchFailure(str(exc)) from None
    up1 = uptime()
    print("\n" + TABLE.markdown(rows))
    print(f"\nuptime after:  {up1}\n{time.monotonic() - started:.0f} s")
    if a.json:
        Path(a.json).write_text(json.dumps({
            "date": str(datetime.date.today()), "command": " ".join(sys.argv), "uptime_before": up0,
            "uptime_after": up1, "nats_server": version, "args": {k: sorted(v) if isinstance(v, set) else v
                                                                  for k, v in vars(a).items()},
            "rows": [{k: v for k, v in r.items()} for r in rows]}, indent=1))
        print(f"wrote {a.json}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="length of each cell")
    ap.add_argument("--sizes", default="128,1024", help="payload sizes in bytes, comma-separated")
    ap.add_argument("--publishers", type=int, default=2, help="window cell: publishers (a process each; even, "
                    "ferry-2 puts half on each gateway)")
    ap.add_argument("--window", type=int, default=256, help="window cell: requests in flight per publisher")
    ap.add_argument("--replicas", type=int, default=3, help="replicas of the direct stream and of Ferry's streams")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"subset of {','.join(CONFIGS)}")
    ap.add_argument("--json", help="write the results as JSON to this file")
    ap.add_argument("--dir", default=".", help="where the temp dir goes (cluster stores, gateway data, logs)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    a = ap.parse_args()
    a.sizes = [int(s) for s in a.sizes.split(",") if s]
    a.configs = set(filter(None, a.configs.split(",")))
    if a.configs - set(CONFIGS) or not a.sizes or min(a.sizes) < 1 or a.window < 1 or a.publishers < 1 \
            or ("ferry-2" in a.configs and a.publishers % 2) or not 1 <= a.replicas <= 3:
        ap.error("bad --configs / --sizes / --window / --publishers (even for ferry-2) / --replicas (1..3)")
    if a.json:
        a.json = str(Path(a.json).resolve())
    import nats  # noqa: F401  (imported once here, before the clients fork)

    # SIGTERM ends the bench like Ctrl-C: the finally blocks stop every gateway and node.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return in_temp_dir("scaleout-bench-", a.dir, a.keep, partial(run, a),
                           lambda tmp: "\n(cluster node logs: nats-cluster/n*.log; gateways: s*/*/server.log)")
    except KeyboardInterrupt as exc:  # every process stopped on the way out (finally blocks, atexit)
        print(f"\ninterrupted ({exc or 'Ctrl-C'})", file=sys.stderr)
        return 130


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    sys.exit(main())
