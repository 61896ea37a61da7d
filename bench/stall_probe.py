"""Does any API call stall the gateway on a long stream after a restart? (issue 30)

What it does
------------
1. Fills ``--data`` (unless ``--reuse`` finds it filled) straight through the core
   (``tests/support/bigstream.py``): JetStream stream BIG with ``--messages`` messages on
   subjects ``big.s0..s9``, each with a Nats-Msg-Id; KV bucket ``big`` with
   ``--kv-keys`` keys; Iggy topic ``bigiggy/t`` with ``--messages`` messages.
2. Starts ``ferry serve`` on it (nats, iggy_tcp, http on free ports): a restart, so
   every per-stream state the gateway keeps in memory starts cold.
3. Starts a probe process with three loops on their own connections: a NATS PING
   (nats-py ``flush``), an Iggy PING (raw TCP, code 1) and an HTTP ``GET /ping``, each
   every 20 ms; it reports the longest wait of each.
4. Calls every JetStream API with nats-py (raw ``$JS.API`` requests, a msg-id publish,
   KV get/keys/history, pull fetches), the Iggy commands with apache-iggy 0.9.0 (its
   venv, ``tests/support/iggy_clients.py``: streams, topics, stats, consumer offsets,
   polls first/last/by offset/by timestamp/next with auto-commit, a send with ids with
   deduplication on, whose first one rebuilds the window, consumer groups, partitions;
   in the last run delete segments and purge) and their HTTP equivalents with httpx
   (the login too). ``--skip js`` fills and probes only the Iggy topic;
   ``--iggy-dedup-entries`` sets the deduplication window (docs/iggy.md "Large topics").
   Each call's first answer after the restart is timed on its own (``first``), then
   ``--repeat`` more (p50/p99/max).

Prints one row per call and the probes' longest waits. Usage::

    .venv/bin/python bench/stall_probe.py                       # 1,000,000 messages
    .venv/bin/python bench/stall_probe.py --messages 300000 --data /tmp/s30 --reuse
    .venv/bin/python bench/stall_probe.py --messages 300000 --kill   # restarts after kill -9

The Pravega controller's stream and segment queries are not probed: they read
metadata and partition bounds only (no record is read; see docs/nats.md "Large streams").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT), str(BENCH), str(ROOT / "tests" / "support")]

from _harness import ferry_env, pct, stop, wait_banner  # noqa: E402

START_LIMIT_S = 300      # a start over a million records must still come up; not a measurement
REQUEST_TIMEOUT_S = 120  # a call this slow is reported (the run stops there), not waited on forever
PROBE_EVERY_S = 0.02
PROBE_WORST = 50         # the longest waits of each probe kept, to say which call was running
STREAMING = ("KV keys (all)", "KV history")   # client-side streams of many messages (docs/nats.md "Large streams")


# -- the probe process ---------------------------------------------------------------------------
async def _probe(nats_port: int, iggy_port: int, http_port: int) -> None:
    import httpx
    import nats

    waits: dict[str, list[float]] = {"nats_ping": [], "iggy_ping": [], "http_ping": []}
    worst: dict[str, list[tuple[float, float]]] = {k: [] for k in waits}   # (wait, wall clock at its start)
    nc = await nats.connect(f"nats://127.0.0.1:{nats_port}", max_reconnect_attempts=0)
    reader, writer = await asyncio.open_connection("127.0.0.1", iggy_port)
    # LoginUser (code 38: username, password, empty version and context): an Iggy
    # connection that has not logged in is closed after 30 s (docs/iggy.md)
    login = b"\x04iggy\x04iggy" + bytes(8)
    writer.write(struct.pack("<II", 4 + len(login), 38) + login)
    status, length = struct.unpack("<II", await reader.readexactly(8))
    await reader.readexactly(length)
    if status:
        raise SystemExit(f"iggy login failed: {status}")
    http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{http_port}", timeout=REQUEST_TIMEOUT_S)
    done = asyncio.Event()

    async def loop(name, once):
        while not done.is_set():
            t0, wall = time.perf_counter(), time.time()
            await once()
            waits[name].append(time.perf_counter() - t0)
            worst[name] = sorted(worst[name] + [(waits[name][-1], wall)], reverse=True)[:PROBE_WORST]
            await asyncio.sleep(PROBE_EVERY_S)

    async def iggy_ping():
        writer.write(struct.pack("<II", 4, 1))
        status, length = struct.unpack("<II", await reader.readexactly(8))
        await reader.readexactly(length)

    async def http_ping():
        (await http.get("/ping")).raise_for_status()

    async def until_eof():
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        done.set()

    print("ready", flush=True)
    await asyncio.gather(loop("nats_ping", lambda: nc.flush(REQUEST_TIMEOUT_S)), loop("iggy_ping", iggy_ping),
                         loop("http_ping", http_ping), until_eof())
    print(json.dumps({k: {"n": len(v), "max": max(v, default=0), "p99": pct(sorted(v), 0.99), "worst": worst[k]}
                      for k, v in waits.items()}), flush=True)


# -- the calls -----------------------------------------------------------------------------------
class Timings:
    def __init__(self) -> None:
        self.rows: dict[str, dict] = {}
        self.spans: list[tuple[float, float, str]] = []     # wall clock start, end, call name

    def during(self, wall: float) -> str:
        """The call that was running at wall clock ``wall`` (or "between calls")."""
        return next((name for start, end, name in self.spans if start <= wall <= end), "between calls")

    def add(self, name: str, seconds: list[float], first: float, note: str = "") -> None:
        self.rows[name] = {"first": first, "times": sorted(seconds), "note": note}

    def print(self) -> None:
        print(f"{'call':<44} {'first ms':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}  note")
        for name, r in self.rows.items():
            t = r["times"] or [r["first"]]
            print(f"{name:<44} {r['first'] * 1e3:>9.1f} {pct(t, 0.5) * 1e3:>8.1f} {pct(t, 0.99) * 1e3:>8.1f} "
                  f"{max(t) * 1e3:>8.1f}  {r['note']}")


async def _timed(timings: Timings, name: str, call, repeat: int, note: str = "") -> object:
    """``call(i)`` once (first), then ``repeat`` more times; returns the first result."""
    wall = time.time()
    t0 = time.perf_counter()
    result = await call(0)
    first = time.perf_counter() - t0
    times = []
    for i in range(1, repeat + 1):
        t0 = time.perf_counter()
        await call(i)
        times.append(time.perf_counter() - t0)
    timings.add(name, times, first, note)
    timings.spans.append((wall, time.time(), name))
    return result


async def jetstream_calls(port: int, repeat: int, timings: Timings, mutate: bool) -> None:
    import nats
    from bigstream import BIG_STREAM, KV_BUCKET

    nc = await nats.connect(f"nats://127.0.0.1:{port}", max_reconnect_attempts=0)
    js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)

    async def api(subject: str, body: dict | None = None) -> dict:
        msg = await nc.request("$JS.API." + subject, json.dumps(body or {}).encode(), timeout=REQUEST_TIMEOUT_S)
        doc = json.loads(msg.data)
        if "error" in doc:
            raise RuntimeError(f"{subject}: {doc['error']}")
        return doc

    async def raw(subject: str, body: dict | None = None):
        return await nc.request(subject, json.dumps(body or {}).encode(), timeout=REQUEST_TIMEOUT_S)

    s = BIG_STREAM
    info = await _timed(timings, "STREAM.INFO", lambda i: api(f"STREAM.INFO.{s}"), repeat)
    last = info["state"]["last_seq"]
    await _timed(timings, "STREAM.INFO subjects_filter", lambda i: api(f"STREAM.INFO.{s}", {"subjects_filter": ">"}),
                 repeat)
    await _timed(timings, "STREAM.NAMES", lambda i: api("STREAM.NAMES"), repeat)
    await _timed(timings, "STREAM.LIST", lambda i: api("STREAM.LIST"), repeat)
    await _timed(timings, "INFO (account)", lambda i: api("INFO"), repeat)
    await _timed(timings, "MSG.GET seq 1", lambda i: api(f"STREAM.MSG.GET.{s}", {"seq": 1 + i}), repeat)
    await _timed(timings, "MSG.GET last_by_subj", lambda i: api(f"STREAM.MSG.GET.{s}", {"last_by_subj": f"big.s{i % 10}"}),
                 repeat)
    await _timed(timings, "MSG.GET next_by_subj", lambda i: api(f"STREAM.MSG.GET.{s}",
                                                                {"next_by_subj": f"big.s{i % 10}", "seq": 1 + i}), repeat)
    await _timed(timings, "MSG.GET last_by_subj (no such subject)",
                 lambda i: raw(f"$JS.API.STREAM.MSG.GET.{s}", {"last_by_subj": f"big.none{i}"}), repeat)
    await _timed(timings, "DIRECT.GET first", lambda i: raw(f"$JS.API.DIRECT.GET.{s}", {"seq": 1 + i}), repeat)
    await _timed(timings, "DIRECT.GET last", lambda i: raw(f"$JS.API.DIRECT.GET.{s}", {"seq": last - i}), repeat)
    await _timed(timings, "DIRECT.GET by subject (last)",
                 lambda i: raw(f"$JS.API.DIRECT.GET.{s}.big.s{i % 10}", None), repeat)
    cfg = {"durable_name": "", "deliver_policy": "all", "ack_policy": "explicit", "filter_subject": "big.s3"}
    await _timed(timings, "CONSUMER.CREATE filtered, deliver all",
                 lambda i: api(f"CONSUMER.CREATE.{s}.c{i}", {"stream_name": s, "config": {**cfg, "durable_name": f"c{i}"}}),
                 repeat)
    await _timed(timings, "CONSUMER.INFO", lambda i: api(f"CONSUMER.INFO.{s}.c{i}"), repeat)
    await _timed(timings, "CONSUMER.LIST", lambda i: api(f"CONSUMER.LIST.{s}"), repeat)
    await _timed(timings, "CONSUMER.NAMES", lambda i: api(f"CONSUMER.NAMES.{s}"), repeat)
    await _timed(timings, "CONSUMER.DELETE", lambda i: api(f"CONSUMER.DELETE.{s}.c{i}"), repeat)
    await _timed(timings, "js.publish with Nats-Msg-Id (dedup refill)",
                 lambda i: js.publish(f"big.s{i % 10}", b"new", headers={"Nats-Msg-Id": f"new-{time.time_ns()}"}), repeat)
    await _timed(timings, "js.publish duplicate Nats-Msg-Id",
                 lambda i: js.publish("big.s1", b"dup", headers={"Nats-Msg-Id": f"m{last - 1 - i}"}), repeat)

    async def fetch(i: int, policy: str):
        name = f"f{policy}{i}"
        await api(f"CONSUMER.CREATE.{s}.{name}", {"stream_name": s, "config": {
            "durable_name": name, "deliver_policy": policy, "ack_policy": "none"}})
        sub = await js.pull_subscribe_bind(name, s)
        try:
            msgs = await sub.fetch(1, timeout=REQUEST_TIMEOUT_S)
        finally:
            await api(f"CONSUMER.DELETE.{s}.{name}")
        return msgs
    await _timed(timings, "pull fetch from the start (create+fetch+delete)", lambda i: fetch(i, "all"), repeat)
    await _timed(timings, "pull fetch at the end (create+fetch+delete)", lambda i: fetch(i, "last"), repeat)

    kv = await js.key_value(KV_BUCKET)
    await _timed(timings, "KV get", lambda i: kv.get(f"k{i}"), repeat)
    await _timed(timings, "KV history", lambda i: kv.history(f"k{i}"), repeat)
    keys = await _timed(timings, "KV keys (all)", lambda i: kv.keys(), min(repeat, 2), "streams every key")
    timings.rows["KV keys (all)"]["note"] += f": {len(keys)}"
    if not mutate:
        await nc.close()
        return
    await _timed(timings, "STREAM.PURGE filter (a few)",
                 lambda i: api(f"STREAM.PURGE.{s}", {"filter": "big.s9", "seq": 40 + 10 * i}), repeat)
    await _timed(timings, "STREAM.MSG.DELETE", lambda i: api(f"STREAM.MSG.DELETE.{s}", {"seq": 2 + 10 * i}), repeat)
    await _timed(timings, "STREAM.INFO after purge/delete", lambda i: api(f"STREAM.INFO.{s}"), repeat)
    await nc.close()


IGGY_SCRIPT = r"""
import asyncio, json, struct, sys, time
import apache_iggy as lib
port, repeat, phase = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]


def sid(name_or_id) -> bytes:   # an Identifier: 1 numeric (u32), 2 string
    if isinstance(name_or_id, int):
        return bytes([1, 4]) + struct.pack("<I", name_or_id)
    raw = name_or_id.encode()
    return bytes([2, len(raw)]) + raw


def offset_body(stream, topic, partition, consumer=1) -> bytes:   # dialect 3 (apache-iggy 0.9.0)
    return bytes([1]) + sid(consumer) + sid(stream) + sid(topic) + bytes([1]) + struct.pack("<I", partition)


async def main():
    c = lib.IggyClient(f"127.0.0.1:{port}")
    await c.connect()
    await c.login_user("iggy", "iggy")
    one = lib.Consumer.Single(1)
    ts = int(time.time() * 1e6) - 10**9
    poll = lambda strategy, auto=False: c.poll_messages("bigiggy", "t", consumer=one, polling_strategy=strategy,
                                                        count=10, auto_commit=auto, partition_id=0)
    sent = [0]

    async def send_with_ids(i):   # with deduplication on, the first one rebuilds the window (iddedup.rebuild)
        sent[0] += 1
        await c.send_messages("bigiggy", "t", 0, [lib.SendMessage(b"y" * 64, id=(sent[0] << 32) + k + 1)
                                                  for k in range(10)])

    async def group_join_info(i):
        await c.join_consumer_group("bigiggy", "t", "g")
        await c.get_consumer_group("bigiggy", "t", "g")
        await c.leave_consumer_group("bigiggy", "t", "g")

    calls = {}
    if phase == "read":
        calls = {
            "iggy get_stream": lambda i: c.get_stream("bigiggy"),
            "iggy get_streams": lambda i: c.get_streams(),
            "iggy get_topic": lambda i: c.get_topic("bigiggy", "t"),
            "iggy get_topics": lambda i: c.get_topics("bigiggy"),
            "iggy get_stats": lambda i: c.get_stats(),
            "iggy store consumer offset": lambda i: c.send_binary_request(
                121, offset_body("bigiggy", "t", 0) + struct.pack("<QB", 1000 + i, 1)),
            "iggy get consumer offset": lambda i: c.send_binary_request(120, offset_body("bigiggy", "t", 0)),
            "iggy poll first": lambda i: poll(lib.PollingStrategy.First()),
            "iggy poll last": lambda i: poll(lib.PollingStrategy.Last()),
            "iggy poll by offset (middle)": lambda i: poll(lib.PollingStrategy.Offset(500_000 + 1000 * i)),
            "iggy poll by timestamp": lambda i: poll(lib.PollingStrategy.Timestamp(ts)),
            "iggy poll next, auto-commit": lambda i: poll(lib.PollingStrategy.Next(), True),
            "iggy send 10 with ids (dedup on)": send_with_ids,
            "iggy create consumer group": lambda i: c.create_consumer_group("bigiggy", "t", f"g{i}"),
            "iggy join + info + leave group": group_join_info,
            "iggy create partitions (1)": lambda i: c.create_partitions("bigiggy", "t", 1),
            "iggy delete partitions (1)": lambda i: c.delete_partitions("bigiggy", "t", 1),
        }
        await c.create_consumer_group("bigiggy", "t", "g")
    elif phase == "mutate":   # last run only: they drop the data
        calls = {
            "iggy delete segments (1)": lambda i: c.send_binary_request(
                503, sid("bigiggy") + sid("t") + struct.pack("<II", 0, 1)),
            "iggy purge topic": lambda i: c.purge_topic("bigiggy", "t"),
        }
    out = {}
    for name, call in calls.items():
        times = []
        for i in range(repeat + 1):
            wall, t0 = time.time(), time.perf_counter()
            await call(i)
            times.append(time.perf_counter() - t0)
            if i == 0:
                first_wall = (wall, time.time())
        out[name] = {"times": times, "span": [first_wall[0], time.time()]}
    if phase == "read":
        for i in range(repeat + 1):
            await c.delete_consumer_group("bigiggy", "t", f"g{i}")
        await c.delete_consumer_group("bigiggy", "t", "g")
    print(json.dumps(out), flush=True)
asyncio.run(main())
import os; os._exit(0)
"""


def iggy_calls(port: int, repeat: int, timings: Timings, phase: str) -> None:
    from iggy_clients import client_python

    started = time.time()
    proc = subprocess.run([str(client_python("apache-iggy==0.9.0")), "-c", IGGY_SCRIPT, str(port), str(repeat), phase],
                          capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": ""})
    ended = time.time()
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise SystemExit(f"iggy client failed: {proc.stderr[-2000:]}")
    rows = json.loads(lines[-1])
    for name, r in rows.items():
        timings.add(name, r["times"][1:], r["times"][0])
        timings.spans.append((*r["span"], name))
    # what the probes' waits outside the calls overlapped: the client process starting
    # (imports, its runtime, connect, login) and ending (group deletes, exit)
    first = min((r["span"][0] for r in rows.values()), default=ended)
    last = max((r["span"][1] for r in rows.values()), default=started)
    timings.spans += [(started, first, "iggy client start-up"), (last, ended, "iggy client clean-up and exit")]


async def http_calls(port: int, repeat: int, timings: Timings, mutate: bool) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=REQUEST_TIMEOUT_S) as http:
        async def login(i):
            r = await http.post("/users/login", json={"username": "iggy", "password": "iggy"})
            r.raise_for_status()
            return r
        r = await _timed(timings, "http POST /users/login", login, repeat)
        http.headers["Authorization"] = "Bearer " + r.json()["access_token"]["token"]

        async def get(path: str, **params):
            resp = await http.get(path, params=params)
            if resp.status_code >= 500:
                raise RuntimeError(f"{path}: {resp.status_code} {resp.text}")
            return resp

        def ok(method: str):   # a write refused is a failed probe, not a fast answer
            async def call(path: str, **kw):
                resp = await http.request(method, path, **kw)
                if resp.status_code >= 400:
                    raise RuntimeError(f"{method} {path}: {resp.status_code} {resp.text}")
                return resp
            return call
        post, put, delete = ok("POST"), ok("PUT"), ok("DELETE")
        t = "/streams/bigiggy/topics/t"
        ts = int(time.time() * 1e6) - 10**9
        await _timed(timings, "http GET /streams/bigiggy", lambda i: get("/streams/bigiggy"), repeat)
        await _timed(timings, "http GET /streams", lambda i: get("/streams"), repeat)
        await _timed(timings, "http GET topic", lambda i: get(t), repeat)
        await _timed(timings, "http GET /stats", lambda i: get("/stats"), repeat)
        await _timed(timings, "http GET consumer-offsets", lambda i: get(t + "/consumer-offsets", consumer_id=1,
                                                                        partition_id=0), repeat)
        await _timed(timings, "http PUT consumer-offsets", lambda i: put(t + "/consumer-offsets", json={
            "consumer_id": "1", "partition_id": 0, "offset": 2000 + i}), repeat)
        for kind, value in (("first", 0), ("last", 0), ("offset", 500_000), ("timestamp", ts)):
            await _timed(timings, f"http poll {kind}", lambda i, k=kind, v=value: get(
                t + "/messages", consumer_id=1, partition_id=0, kind=k, value=v, count=10, auto_commit="false"), repeat)
        await _timed(timings, "http poll next, auto-commit", lambda i: get(
            t + "/messages", consumer_id=1, partition_id=0, kind="next", value=0, count=10, auto_commit="true"), repeat)
        await _timed(timings, "http send 10 with ids (dedup on)", lambda i: post(t + "/messages", json={
            "partitioning": {"kind": "partition_id", "value": "AAAAAA=="},
            "messages": [{"id": (1 << 40) + i * 16 + k + 1, "payload": "eXl5"} for k in range(10)]}), repeat)
        await _timed(timings, "http create consumer group", lambda i: post(t + "/consumer-groups",
                                                                                json={"name": f"hg{i}"}), repeat)
        await _timed(timings, "http GET consumer group", lambda i: get(t + "/consumer-groups/hg0"), repeat)
        await _timed(timings, "http create partitions (1)", lambda i: post(t + "/partitions",
                                                                                json={"partitions_count": 1}), repeat)
        await _timed(timings, "http delete partitions (1)", lambda i: delete(t + "/partitions",
                                                                                  params={"partitions_count": 1}), repeat)
        await _timed(timings, "http DELETE consumer group", lambda i: delete(t + f"/consumer-groups/hg{i}"), repeat)
        if mutate:   # the last run only: they drop the data
            await _timed(timings, "http DELETE segments", lambda i: delete(t + "/partitions/0",
                                                                               params={"segments_count": 1}), repeat)


def fill_iggy(data: Path, messages: int) -> None:
    """Only the Iggy topic ``bigiggy/t`` of ``bigstream.fill`` (for ``--skip js``)."""
    from bigstream import IGGY_STREAM, IGGY_TOPIC, _append, _records

    from core.broker import Broker
    broker = Broker.open(data)
    try:
        broker.create_stream(IGGY_STREAM)
        broker.create_topic(IGGY_STREAM, IGGY_TOPIC, 1)
        _append(broker, IGGY_STREAM, IGGY_TOPIC, _records(messages, lambda i: None, False, 64))
    finally:
        broker.close()


# -- the run -------------------------------------------------------------------------------------
def start_server(data: Path, src: Path, dedup_entries: int | None = None) -> tuple[subprocess.Popen, dict[str, int]]:
    log = data.parent / "stall-server.log"
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--only", "nats,iggy_tcp,http", "--data", str(data),
                             "--host", "127.0.0.1", "--nats-port", "0", "--iggy-tcp-port", "0", "--http-port", "0"],
                            cwd=src, stdout=subprocess.PIPE, stderr=open(log, "wb"),
                            # Iggy deduplication on: the first send with ids rebuilds the window from the log
                            env=ferry_env(FERRY_IGGY_MESSAGE_DEDUPLICATION="true", **(
                                {"FERRY_IGGY_DEDUPLICATION_MAX_ENTRIES": str(dedup_entries)} if dedup_entries else {})))
    banner = wait_banner(proc, log, START_LIMIT_S, SystemExit, "server", None)
    ports = {name: int(re.search(rf"{name} +127\.0\.0\.1:(\d+)/tcp", banner).group(1))
             for name in ("nats", "iggy_tcp", "http")}
    return proc, ports


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--kv-keys", type=int, default=None, help="keys in the KV bucket (default: messages / 10)")
    ap.add_argument("--data", type=Path, default=Path("stall-data"), help="data directory (default ./stall-data)")
    ap.add_argument("--reuse", action="store_true", help="keep a filled --data as it is (else it is refilled)")
    ap.add_argument("--repeat", type=int, default=20, help="calls after the first, per API")
    ap.add_argument("--skip", default="", help="comma list of: js, iggy, http")
    ap.add_argument("--runs", type=int, default=2, help="server lifetimes: the first after a fill starts cold, "
                    "later ones restart after a clean stop; the last also purges with a filter and deletes")
    ap.add_argument("--ferry-src", type=Path, default=ROOT, help="the Ferry tree whose `ferry serve` runs (e.g. "
                    "`git archive HEAD` unpacked, for figures before a change); the fill always uses this tree")
    ap.add_argument("--kill", action="store_true", help="end each server lifetime with SIGKILL (kill -9) instead "
                    "of a clean stop: later runs start from the last checkpoint, not from a save at shutdown")
    ap.add_argument("--iggy-dedup-entries", type=int, default=None, help="the gateway's Iggy deduplication "
                    "max_entries (default 10000): the window the first send with ids rebuilds from the log")
    ap.add_argument("--probe", nargs=3, type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.probe:
        asyncio.run(_probe(*args.probe))
        return
    data = args.data.resolve()
    stamp = data / "stall-filled"
    if not (args.reuse and stamp.exists()):
        from bigstream import fill
        shutil.rmtree(data, ignore_errors=True)
        t0 = time.perf_counter()
        kv_keys = args.messages // 10 if args.kv_keys is None else args.kv_keys
        if "js" in set(filter(None, args.skip.split(","))):
            fill_iggy(data, args.messages)   # the JetStream side is not probed: the Iggy topic only
            kv_keys = 0
        else:
            fill(data, args.messages, kv_keys=kv_keys)
        stamp.write_text(f"{args.messages} {kv_keys}\n")
        print(f"filled {0 if kv_keys == 0 and 'js' in args.skip else args.messages:,} JetStream + {args.messages:,} "
              f"Iggy messages, {kv_keys:,} KV keys "
              f"in {time.perf_counter() - t0:.1f} s")
    for run in range(1, args.runs + 1):
        print(f"\n== run {run} of {args.runs}: " + ("the first start on this data (after a fill: nothing saved)"
              if run == 1 else "a restart after kill -9" if args.kill else "a restart after a clean stop")
              + (", then filtered purge and msg delete"
              if run == args.runs else ""), flush=True)
        one_run(data, args, mutate=run == args.runs)


def one_run(data: Path, args, mutate: bool) -> None:
    t0 = time.perf_counter()
    proc, ports = start_server(data, args.ferry_src.resolve(), args.iggy_dedup_entries)
    print(f"ferry serve ready in {time.perf_counter() - t0:.1f} s (pid {proc.pid})", flush=True)
    probe = subprocess.Popen([sys.executable, __file__, "--probe", str(ports["nats"]), str(ports["iggy_tcp"]),
                              str(ports["http"])], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env=ferry_env())
    try:
        if probe.stdout.readline().strip() != "ready":
            raise SystemExit("the probe did not start")
        timings = Timings()
        skip = set(filter(None, args.skip.split(",")))
        if "js" not in skip:
            asyncio.run(jetstream_calls(ports["nats"], args.repeat, timings, mutate))
        if "iggy" not in skip:
            iggy_calls(ports["iggy_tcp"], args.repeat, timings, "read")
        if "http" not in skip:
            asyncio.run(http_calls(ports["http"], args.repeat, timings, mutate))
        if "iggy" not in skip and mutate:
            iggy_calls(ports["iggy_tcp"], args.repeat, timings, "mutate")
        out, _ = probe.communicate("", timeout=60)
        timings.print()
        waits = json.loads(out.strip().splitlines()[-1])
        for name, w in waits.items():
            print(f"probe {name:<10} {w['n']:>6} pings, p99 {w['p99'] * 1e3:7.1f} ms, longest wait {w['max'] * 1e3:7.1f} ms"
                  + "; longest during: " + ", ".join(f"{t * 1e3:.0f} ms {timings.during(at)}" for t, at in w["worst"][:3])
                  + "; longest outside KV keys/history: " + next((f"{t * 1e3:.0f} ms {timings.during(at)}"
                                                                  for t, at in w["worst"]
                                                                  if timings.during(at) not in STREAMING), f"none among the {PROBE_WORST} longest"))
    finally:
        stop(probe)
        t0 = time.perf_counter()
        stop(proc, sig=signal.SIGKILL if args.kill else signal.SIGTERM)
        print(f"ferry serve {'killed' if args.kill else 'stopped'} in {time.perf_counter() - t0:.1f} s", flush=True)

if __name__ == "__main__":
    main()
