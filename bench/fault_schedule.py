"""Scale-out under a fault schedule (issue 30): gateways over a 3-node JetStream cluster while a
seeded schedule kills, freezes and restarts nats-server nodes and gateways; every client outcome
goes to a history file that bench/history_check.py judges.

What runs
---------
* a 3-node nats-server cluster (tests/support/nats_cluster.py), JetStream R3;
* ``--gateways`` ``ferry serve --store nats://<the 3 nodes>`` processes (NATS, HTTP and Kafka
  listeners on fixed ports, so a restarted gateway comes back at the address its clients know);
* the clients of bench/fault_workload.py: one Kafka idempotent producer and one JetStream
  publisher per gateway (``--writers`` per gateway), a Kafka consumer group with a member
  bootstrapped at every gateway, and a JetStream durable pull consumer fetched through every
  gateway.

The schedule
------------
``plan(seed, minutes, gateways)`` draws two lanes of faults from ``random.Random(seed)``: a
node lane (nats-server n0..n2) and a gateway lane. Each lane is sequential: a fault, its hold,
its heal, a gap, the next. Faults: ``kill`` (SIGKILL, restarted after the hold), ``freeze``
(SIGSTOP, SIGCONT after the hold: to the rest it looks like a partition, and a gateway frozen
past the 7 s lease is declared dead and later comes back), ``restart`` (SIGTERM, start again).
**At most one nats-server node is down or frozen at a time**, and a healed node must be ready
(``NatsCluster.wait_ready``: JetStream current, one meta leader) before the next node fault, so
the R3 cluster keeps a quorum throughout; a node fault that took two of three would stop every
write, which is JetStream's documented limit, not a Ferry finding. The gateway lane faults one
gateway at a time, every gateway in turn as the dice fall. The plan is the same for a seed; the
times it is applied at drift with how long heals take (each ``fault`` event has its wall time).

At the end: every fault healed, writers stopped (their last messages retried or reported),
consumers given ``DRAIN_S`` to catch up, then the final logs are read (Kafka partitions from
offset 0; the JetStream stream through every gateway) and every gateway's metadata listing is
taken until they agree (``CONVERGE_S``). ``history_check.check`` then gives the figures.

Usage: ``nice -n 10 .venv/bin/python bench/fault_schedule.py --seed 1 [--minutes 10]
[--gateways 2] [--writers 1] [--out DIR]``; exit code 0 when the checker finds nothing. Every
process started is killed at the end, on a failure and on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(BENCH), str(ROOT / "tests" / "support")]

import httpx  # noqa: E402
from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import history_check  # noqa: E402
from fault_workload import (  # noqa: E402
    History,
    KafkaMember,
    KafkaWriter,
    in_thread,
    js_fetcher,
    js_writer,
    kafka_conf,
    nats_connect,
    parse,
)
from ferry_harness import free_ports, serve_process  # noqa: E402
from nats_cluster import NatsCluster, NatsClusterError  # noqa: E402

USER, PASSWORD = "iggy", "iggy"        # the root user a fresh store gets (docs/security.md)
TOPIC, PARTITIONS, GROUP = "fs.k", 4, "fs-g"
JS_STREAM, JS_SUBJECT, JS_DURABLE = "FS", "fs.js", "FSD"
DEDUP_WINDOW_S = 120                   # nats-server's default duplicate_window, set explicitly
WARMUP_S = 5.0                         # writes flow before the first fault
HOLD_S = {"kill": (2.0, 12.0), "freeze": (1.0, 10.0), "restart": (0.0, 0.0)}
GAP_S = (3.0, 10.0)                    # between the heal of one fault and the next in a lane
DRAIN_S = 90.0                         # consumers catching up after the last fault (a hang guard)
CONVERGE_S = 60.0                      # gateways' metadata agreeing after healing (a hang guard)
START_LIMIT_S = 90.0                   # a gateway start waits for the cluster (elections)
WRITE_PAUSE_S = 0.02                   # between one writer's messages (~50/s per writer, 2 cores shared)
_STARTED: list = []


@atexit.register
def _kill_leftovers() -> None:
    for gw in _STARTED:
        gw.kill()


def plan(seed: int, minutes: float, gateways: int) -> list[dict]:
    """The fault schedule for a seed: dicts with ``at`` (s after the start), ``lane``,
    ``target`` (``n<i>`` or ``gw<i>``), ``action`` and ``hold`` (s), in ``at`` order."""
    rng = random.Random(seed)
    end = minutes * 60
    steps = []
    for lane, targets in (("node", [f"n{i}" for i in range(3)]), ("gw", [f"gw{i}" for i in range(gateways)])):
        t = WARMUP_S + rng.uniform(0, GAP_S[1])
        while t < end:
            action = rng.choice(sorted(HOLD_S))
            hold = round(rng.uniform(*HOLD_S[action]), 1)
            steps.append({"at": round(t, 1), "lane": lane, "target": rng.choice(targets), "action": action,
                          "hold": hold})
            t += hold + rng.uniform(*GAP_S)
    return sorted(steps, key=lambda s: s["at"])


class Gateway:
    """One ``ferry serve --store`` process on fixed ports (nats, http, kafka)."""

    def __init__(self, name: str, root: Path, store_url: str, prefix: str) -> None:
        self.name, self.cwd, self.store_url = name, root / name, store_url
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.ports = dict(zip(("nats", "http", "kafka"), free_ports(3)))
        (self.cwd / "ferry.toml").write_text(
            f'[store]\nprefix = "{prefix}"\nconnect_timeout_seconds = 60\n\n'
            '[listeners.kafka]\ninitial_rebalance_delay_ms = 0\n')
        self.proc = None
        _STARTED.append(self)

    def start(self) -> None:
        self.proc, _banner = serve_process(
            self.cwd, self.cwd / "data", "--config", "ferry.toml", "--store", self.store_url,
            "--only", "nats,http,kafka", "--nats-port", str(self.ports["nats"]),
            "--http-port", str(self.ports["http"]), "--kafka-port", str(self.ports["kafka"]),
            "--grace-seconds", "2", limit_s=START_LIMIT_S, busy_port_wait_s=30)
        # Later stdout must not fill the pipe and block the server.
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        if self.proc is not None:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGKILL)
            self.proc.wait()

    def term(self) -> None:
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except Exception:  # noqa: BLE001 - a shutdown past its grace: finish it
            self.kill()

    @property
    def nats_url(self) -> str:
        return f"nats://127.0.0.1:{self.ports['nats']}"


class Faults:
    """Applies one lane of the plan; every action is a ``fault`` event."""

    def __init__(self, cluster: NatsCluster, gws: list[Gateway], hist: History, t0: float) -> None:
        self.cluster, self.gws, self.hist, self.t0 = cluster, gws, hist, t0
        self.applied = 0
        self.errors: list[str] = []

    def run_lane(self, steps: list[dict], stop: threading.Event) -> None:
        for step in steps:
            wait = self.t0 + step["at"] - time.monotonic()
            if stop.wait(max(wait, 0)):
                return
            try:
                self.apply(step, stop)
            except Exception as err:  # noqa: BLE001 - recorded; the next fault waits for a heal
                self.errors.append(f"{step}: {err!r}")
                self.hist.emit("note", what="fault step failed", step=step, error=repr(err))
                self.heal_one(step["target"])  # only its own lane's target: the other lane may hold one down

    def _event(self, step: dict, action: str) -> None:
        self.hist.emit("fault", target=step["target"], action=action, planned_at=step["at"])

    def apply(self, step: dict, stop: threading.Event) -> None:
        target, action, hold = step["target"], step["action"], step["hold"]
        node = target.startswith("n")
        idx = int(target[1:] if node else target[2:])
        sig = {"kill": signal.SIGKILL, "freeze": signal.SIGSTOP, "restart": signal.SIGTERM}[action]
        self._event(step, action)
        self.applied += 1
        if node:
            if action == "restart":
                self.cluster.stop(idx)
            elif action == "kill":
                self.cluster.kill(idx)
            else:
                os.kill(self.cluster.pid(idx), sig)
        else:
            gw = self.gws[idx]
            {"kill": gw.kill, "restart": gw.term, "freeze": lambda: gw.signal(signal.SIGSTOP)}[action]()
        stop.wait(hold)  # the hold runs out even when the run is stopping: the heal must happen
        heal = "cont" if action == "freeze" else "start"
        self._event(step, heal)
        if node:
            if heal == "cont":
                os.kill(self.cluster.pid(idx), signal.SIGCONT)
            else:
                self.cluster.start(idx)
            self.cluster.wait_ready()   # caught up before the next node fault: quorum is kept
        elif heal == "cont":
            self.gws[idx].signal(signal.SIGCONT)
        else:
            self.gws[idx].start()
        self._event(step, "healed")

    def heal_one(self, target: str) -> None:
        """Bring one node or gateway back after a step that failed half-way (best effort: the
        next step of the lane, or the final heal_all, tries again)."""
        try:
            if target.startswith("n"):
                i = int(target[1:])
                pid = self.cluster.pid(i)
                if pid is not None:
                    os.kill(pid, signal.SIGCONT)
                else:
                    self.cluster.start(i)
                self.cluster.wait_ready()
            else:
                gw = self.gws[int(target[2:])]
                gw.signal(signal.SIGCONT)
                if gw.proc is None or gw.proc.poll() is not None:
                    gw.start()
        except Exception as err:  # noqa: BLE001 - recorded; heal_all at the end is the last word
            self.errors.append(f"heal {target}: {err!r}")

    def heal_all(self) -> None:
        for i in range(self.cluster.size):
            pid = self.cluster.pid(i)
            if pid is not None:
                os.kill(pid, signal.SIGCONT)
            elif not self.cluster.running(i):
                self.cluster.start(i)
        try:
            self.cluster.wait_ready()
        except NatsClusterError as err:
            self.errors.append(f"cluster not ready after healing: {str(err)[:300]}")
        for gw in self.gws:
            gw.signal(signal.SIGCONT)
            if gw.proc is None or gw.proc.poll() is not None:
                gw.start()


# -- set-up and end-state reads -----------------------------------------------------------------------
def retry(what: str, fn, limit_s: float = 60.0):
    deadline = time.monotonic() + limit_s
    while True:
        try:
            return fn()
        except Exception as err:  # noqa: BLE001 - the cluster may be electing: again, within limit_s
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what}: {err!r}") from err
            time.sleep(0.5)


def create_topic(gw: Gateway) -> None:
    admin = AdminClient(kafka_conf(gw.ports["kafka"], USER, PASSWORD))
    fut = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC]
    try:
        fut.result(30)
    except Exception as err:  # noqa: BLE001 - a retry after a lost answer finds it made
        if "TOPIC_ALREADY_EXISTS" not in str(err):
            raise


async def _js_setup(servers: list[str]) -> None:
    from nats.js.api import AckPolicy, ConsumerConfig

    nc = await nats_connect(servers, USER, PASSWORD)
    try:
        js = nc.jetstream(timeout=10)
        await js.add_stream(name=JS_STREAM, subjects=[JS_SUBJECT], duplicate_window=DEDUP_WINDOW_S)
        await js.add_consumer(JS_STREAM, ConsumerConfig(durable_name=JS_DURABLE, ack_policy=AckPolicy.EXPLICIT,
                                                        ack_wait=10, max_ack_pending=2000))
    finally:
        await nc.close()


def kafka_final(gw: Gateway, hist: History) -> int:
    """Every record of every partition from offset 0 to the high watermark: ``final`` events."""
    c = Consumer({**kafka_conf(gw.ports["kafka"], USER, PASSWORD), "group.id": "fs-final",
                  "enable.auto.commit": False})
    try:
        ends = {p: retry("watermarks", lambda p=p: c.get_watermark_offsets(TopicPartition(TOPIC, p), 10))[1]
                for p in range(PARTITIONS)}
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        got = {p: 0 for p in range(PARTITIONS)}
        deadline = time.monotonic() + DRAIN_S
        while any(got[p] < ends[p] for p in got) and time.monotonic() < deadline:
            m = c.poll(1)
            if m is None or m.error() is not None:
                continue
            producer, seq = parse(m.value())
            hist.emit("final", path="kafka", gateway=gw.name, partition=m.partition(), offset=m.offset(),
                      producer=producer, seq=seq)
            got[m.partition()] = m.offset() + 1
        return sum(got.values())
    finally:
        c.close()


async def _js_final(gw: Gateway, hist: History) -> int:
    """The whole JetStream stream through one gateway (an ephemeral consumer, no acks)."""
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    nc = await nats_connect([gw.nats_url], USER, PASSWORD)
    try:
        js = nc.jetstream(timeout=10)
        last = (await js.stream_info(JS_STREAM)).state.last_seq
        sub = await js.pull_subscribe(JS_SUBJECT, stream=JS_STREAM, config=ConsumerConfig(
            ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL, inactive_threshold=60))
        n, seq = 0, 0
        deadline = time.monotonic() + DRAIN_S
        while seq < last and time.monotonic() < deadline:
            try:
                msgs = await sub.fetch(500, timeout=2)
            except asyncio.TimeoutError:
                continue
            for m in msgs:
                producer, s = parse(m.data)
                seq = m.metadata.sequence.stream
                hist.emit("final", path="js", gateway=gw.name, partition=0, offset=seq, producer=producer, seq=s)
                n += 1
        return n
    finally:
        await nc.close()


def meta_view(gw: Gateway) -> dict:
    """What one gateway lists: Ferry streams/topics (HTTP), Kafka topics, brokers, groups and
    committed offsets (through this gateway only), the JetStream stream and consumer."""
    view: dict = {}
    with httpx.Client(base_url=f"http://127.0.0.1:{gw.ports['http']}", timeout=10) as h:
        r = h.post("/users/login", json={"username": USER, "password": PASSWORD})
        h.headers["authorization"] = f"Bearer {r.json()['access_token']['token']}"
        for s in sorted(h.get("/streams").json(), key=lambda s: s["name"]):
            topics = h.get(f"/streams/{s['id']}/topics").json()
            view[f"stream {s['name']}"] = {t["name"]: [t["partitions_count"], t["messages_count"]] for t in topics}
    admin = AdminClient(kafka_conf(gw.ports["kafka"], USER, PASSWORD))
    md = admin.list_topics(timeout=10)
    view["kafka brokers"] = sorted(b.port for b in md.brokers.values())
    view["kafka topics"] = {t: {p: pm.leader for p, pm in tm.partitions.items()} for t, tm in sorted(md.topics.items())}
    groups = admin.list_consumer_groups().result(10)
    view["kafka groups"] = sorted(g.group_id for g in groups.valid)
    from confluent_kafka import ConsumerGroupTopicPartitions

    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])[GROUP].result(10)
    view["kafka committed"] = {tp.partition: tp.offset for tp in res.topic_partitions}

    async def js_view() -> dict:
        nc = await nats_connect([gw.nats_url], USER, PASSWORD)
        try:
            js = nc.jetstream(timeout=10)
            st = (await js.stream_info(JS_STREAM)).state
            ci = await js.consumer_info(JS_STREAM, JS_DURABLE)
            return {"js stream": [st.messages, st.first_seq, st.last_seq],
                    "js consumer": [ci.delivered.stream_seq, ci.ack_floor.stream_seq, ci.num_pending,
                                    ci.num_ack_pending]}
        finally:
            await nc.close()

    view.update(asyncio.run(js_view()))
    return view


def converge(gws: list[Gateway], hist: History, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while True:
        views = {gw.name: retry(f"{gw.name} metadata", lambda gw=gw: meta_view(gw)) for gw in gws}
        if len({json.dumps(v, sort_keys=True) for v in views.values()}) == 1 or time.monotonic() > deadline:
            break
        time.sleep(2)
    for name, view in views.items():
        hist.emit("meta", gateway=name, view=json.loads(json.dumps(view)))


# -- the run ------------------------------------------------------------------------------------------
def run(a, out: Path) -> history_check.Report:
    hist = History(out / "history.jsonl")
    steps = plan(a.seed, a.minutes, a.gateways)
    (out / "plan.json").write_text(json.dumps(steps, indent=1))
    hist.emit("config", seed=a.seed, minutes=a.minutes, gateways=a.gateways, writers=a.writers,
              dedup_window_s=DEDUP_WINDOW_S, planned_faults=len(steps))
    with NatsCluster(out) as cluster:
        gws = [Gateway(f"gw{i}", out, cluster.url, "FS") for i in range(a.gateways)]
        for gw in gws:
            gw.start()
        retry("create the Kafka topic", lambda: create_topic(gws[0]))
        urls = [gw.nats_url for gw in gws]
        retry("create the JetStream stream", lambda: asyncio.run(_js_setup(urls)))
        creds = (USER, PASSWORD)
        stop_writers, stop_readers, stop_faults = threading.Event(), threading.Event(), threading.Event()
        writers, readers = [], []
        for i, gw in enumerate(gws):
            others = urls[i:] + urls[:i]   # its own gateway first, the others as nats-py reconnects
            conf = kafka_conf(gw.ports["kafka"], USER, PASSWORD)
            for w in range(a.writers):
                kw = KafkaWriter(f"k{i}w{w}", conf, TOPIC, PARTITIONS, hist, stop_writers, WRITE_PAUSE_S)
                kw.start()
                writers.append(kw)
                writers.append(in_thread(f"j{i}w{w}", js_writer, f"j{i}w{w}", others, creds, JS_SUBJECT, hist,
                                         stop_writers, WRITE_PAUSE_S))
            member = KafkaMember(f"m{i}", conf, TOPIC, GROUP, hist, stop_readers)
            member.start()
            readers.append(member)
            readers.append(in_thread(f"f{i}", js_fetcher, f"f{i}", others, creds, JS_STREAM, JS_DURABLE, hist,
                                     stop_readers))
        t0 = time.monotonic()
        faults = Faults(cluster, gws, hist, t0)
        lanes = [threading.Thread(target=faults.run_lane, args=([s for s in steps if s["lane"] == lane], stop_faults),
                                  daemon=True) for lane in ("node", "gw")]
        for lane in lanes:
            lane.start()
        stop_faults.wait(a.minutes * 60)
        stop_faults.set()
        for lane in lanes:
            lane.join()
        faults.heal_all()
        hist.emit("note", what="healed", faults_applied=faults.applied)
        stop_writers.set()
        for w in writers:
            w.join()
        time.sleep(5)  # the consumers see the writers' last messages
        finals = {"kafka": retry("kafka final read", lambda: kafka_final(gws[0], hist), 120)}
        for gw in gws:
            finals[f"js@{gw.name}"] = retry("js final read", lambda gw=gw: asyncio.run(_js_final(gw, hist)), 120)
        _drain(hist, readers, stop_readers)
        converge(gws, hist, a.converge_seconds)
        for gw in gws:
            gw.term()
    hist.close()
    rep = history_check.check(history_check.load(out / "history.jsonl"))
    summary = {"seed": a.seed, "minutes": a.minutes, "gateways": a.gateways, "faults_applied": faults.applied,
               "fault_errors": faults.errors, "final_reads": finals, **rep.figures(),
               "by_path": by_path(history_check.load(out / "history.jsonl"), rep), "samples": rep.samples()}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1), flush=True)
    return rep


def by_path(events: list[dict], rep: history_check.Report) -> dict:
    """Per path: acked, unacknowledged (``fail``), read, and each violation list's length."""
    out: dict = {}
    for path in ("kafka", "js"):
        out[path] = {
            "acked": sum(1 for e in events if e["ev"] == "ack" and e["path"] == path),
            "failed": sum(1 for e in events if e["ev"] == "fail" and e["path"] == path),
            "read": sum(1 for e in events if e["ev"] == "read" and e["path"] == path),
            **{name: sum(1 for v in getattr(rep, name) if v.get("path", "kafka") == path)
               for name in ("lost", "reordered", "duplicated", "misplaced", "unread")}}
    return out


def _drain(hist: History, readers: list, stop_readers: threading.Event) -> None:
    """Consumers keep reading until they have every message of the final logs (``DRAIN_S`` bound)."""
    deadline = time.monotonic() + DRAIN_S
    while time.monotonic() < deadline:
        evs = history_check.load(hist.path)
        final = {(e["path"], e["producer"], e["seq"]) for e in evs if e["ev"] == "final"}
        read = {(e["path"], e["producer"], e["seq"]) for e in evs if e["ev"] == "read"}
        if final <= read:
            break
        time.sleep(2)
    stop_readers.set()
    for r in readers:
        r.join(30)
    for path in ("kafka", "js"):
        hist.emit("drained", path=path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--gateways", type=int, default=2)
    ap.add_argument("--writers", type=int, default=1, help="Kafka and JetStream writers per gateway")
    ap.add_argument("--converge-seconds", type=float, default=CONVERGE_S,
                    help="how long the gateways' metadata listings may take to agree after healing")
    ap.add_argument("--out", type=Path, help="run directory (default: a new temp dir); history.jsonl, "
                                             "plan.json, summary.json, the servers' logs")
    a = ap.parse_args()
    out = a.out or Path(tempfile.mkdtemp(prefix=f"fault-schedule-s{a.seed}-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"fault_schedule: seed {a.seed}, {a.minutes} min, {a.gateways} gateways, out {out}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    rep = run(a, out)
    return 0 if rep.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
