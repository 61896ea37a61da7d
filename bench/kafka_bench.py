"""Kafka produce/fetch throughput and ack latency through confluent-kafka, with Ferry's
own Iggy path (the real apache-iggy client moving the same data) as the reference in the
same run, and the resident bytes an idle authenticated Kafka connection costs.

What it measures
----------------
``ferry serve --only kafka,iggy_tcp`` runs in a subprocess (free ports, ``--fsync batch``
unless ``--fsync`` says otherwise: one policy for both paths). Every client is a
subprocess that sets up, prints ``ready`` and starts on one ``go`` (bench/_harness.py);
a cell's time runs from the first ``go`` to the last process's end. Per ``--sizes``
(payload bytes) and ``--producers`` count:

* ``produce``: N confluent-kafka ``Producer`` processes (one per producer: the Python side
  of ``produce()`` and of every delivery callback holds the GIL, so threads in one process
  would share one core's worth of Python, and the Iggy reference is one process per producer
  too), each logged in with SASL/PLAIN as the root user and writing its own partition of a
  topic with N partitions for ``--seconds``, then ``flush()``. Settings: ``acks=all``,
  ``enable.idempotence=True``, ``linger.ms`` :data:`LINGER_MS`, ``compression.type`` none
  and lz4 (``--compressions``), everything else librdkafka's defaults. The ack latency of a
  message is its delivery callback's time minus its ``produce()`` call's time, as Kafka's
  own ProducerPerformance measures it (apache/kafka tools/.../ProducerPerformance.java,
  ``PerfCallback``), so it includes the time a record waits in the client's queue.
  Reference: N apache-iggy processes (``--iggy-client``), one partition each, sending
  ``send_messages`` batches of ``--iggy-batch`` lockstep for ``--seconds``; its latency is
  the call's, which every message of the batch waits.
* ``produce`` with kcat (the Debian package: C, librdkafka; rows left out when it is not
  installed): the same payloads, settings and partitions, ``kcat -P -l`` over a file of one
  payload per line, as many messages as the reference sent per producer in ``--seconds``;
  the partition's high watermark must move by exactly that count. No ack latency (kcat
  does not report it); ``cli us/msg`` is kcat's CPU. These rows show the gateway's own
  limit, which the confluent-kafka rows hide behind the Python client's CPU.
* ``fetch``: one confluent-kafka ``Consumer`` reading everything the 1-producer, uncompressed
  produce cell stored, from the beginning, by ``assign`` (no group, so no coordinator
  round trips: fetch alone), counting every record. Reference: one apache-iggy process
  polling what its 1-producer send cell stored, ``poll_messages`` of ``--iggy-batch`` from
  offset 0 up.
* ``idle conn``: a fresh ``ferry serve --only kafka``; :data:`WARM_CONNS` connections log in
  first (so the worker threads that check passwords exist), then ``--idle-conns`` raw sockets
  each send ApiVersions, SaslHandshake and SaslAuthenticate (SASL/PLAIN, the frames built
  from Ferry's own message table) and stay open; the gateway's VmRSS (/proc/PID/status)
  settled before and after gives bytes per connection.

Payloads are :data:`PAYLOADS` distinct seeded strings of capital letters per process (what
ProducerPerformance fills its records with: compressible, as real text is), the same bytes
for both paths. Columns: msgs/s and payload MB/s (uncompressed), p50/p99 ack latency,
``srv us/msg`` (the gateway's CPU per message from /proc), ``cli us/msg`` (the client
processes' own CPU per message: when it is far above the gateway's, the client is what
limits the row) and ``x iggy`` (Kafka msgs/s / the reference's, same run). Issue 25's
goal: produce and fetch >= 0.8x of the Iggy path. Counts are checked:
every acknowledged record is read back, the high watermark equals what was acknowledged,
and a gateway ERROR/Traceback stops the bench with the logs.

Usage: ``.venv/bin/python bench/kafka_bench.py [--seconds 5] [--sizes 128,1024]
[--producers 1,4] [--compressions none,lz4] [--fsync batch] [--idle-conns 200]
[--cprofile FILE] [--markdown]``. Temp data (in ``--dir``, the current directory by default:
/tmp may be a tmpfs) is removed at the end.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import platform
import re
import socket
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
    ServerProcess,
    ferry_env,
    in_temp_dir,
    pct,
    run_cell,
    versus_iggy_table,
    wait_banner,
)
from iggy_bench import _recv_exactly, connect, frame, recv_reply  # noqa: E402  (puts ROOT, tests/support on sys.path)
from iggy_clients import client_python as iggy_python  # noqa: E402
from memory import settled_rss  # noqa: E402

from adapters.kafka import frames  # noqa: E402
from adapters.kafka.messages import API_VERSIONS  # noqa: E402
from adapters.kafka.messages_admin import SASL_AUTHENTICATE, SASL_HANDSHAKE  # noqa: E402

SEED = 20261129
START_LIMIT_S = 60   # the gateway must print "ready" by then
CELL_LIMIT_S = 300   # a client that has not finished by then is hung
IO_LIMIT_S = 60      # a batch of Kafka logins must be answered by then
PAYLOADS = 256       # distinct payloads per process, cycled
# librdkafka's default since 1.5.0 (it was 0.5 ms) and the Java client's since Kafka 4.0
# (KIP-1030): long enough to fill batches under load, short enough not to pad the latency.
LINGER_MS = 5
# Logins made before the baseline RSS: the gateway checks passwords (argon2) in trio's
# worker threads, each of which keeps its own malloc arena; these are opened first so
# the baseline already holds the threads the measured logins use.
WARM_CONNS = 8
LOGIN_BATCH = 8      # connections logging in at once (argon2 takes 64 MiB per check in flight)
USER = PASSWORD = "iggy"  # the root user a fresh gateway starts with (docs/security.md)
IGGY_STREAM = "kbench"

# -- the client scripts (each runs in its client's interpreter; argv[1] is a JSON config) ------
COMMON = r'''
import json, os, random, sys, time
cfg = json.loads(sys.argv[1])
def out(**kw):
    print(json.dumps(kw), flush=True)
def wait_go():
    out(ready=True)
    if sys.stdin.readline().strip() != "go":
        os._exit(3)
def payloads(seed, size, n):  # capital letters, as Kafka's ProducerPerformance fills records
    rng = random.Random(seed)
    return [bytes(rng.choices(range(65, 91), k=size)) for _ in range(n)]
def pct(lat, q):
    return lat[min(len(lat) - 1, int(len(lat) * q))] if lat else 0.0
def report(t0, t1, c0, n, nbytes, lat, bad):
    lat.sort()
    out(t0=t0, t1=t1, cpu=time.process_time() - c0, msgs=n, bytes=nbytes, bad=bad, n_lat=len(lat),
        lat_us=[round(x * 1e6) for x in lat[::max(1, len(lat) // 20000)]], p50=pct(lat, 0.5), p99=pct(lat, 0.99))
'''

KAFKA_SCRIPT = COMMON + r'''
from functools import partial
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
conf = {"bootstrap.servers": f"127.0.0.1:{cfg['port']}", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": cfg["user"], "sasl.password": cfg["password"]}
topic = cfg["topic"]

def produce():
    p = Producer({**conf, "acks": "all", "enable.idempotence": True, "linger.ms": cfg["linger_ms"],
                  "compression.type": cfg["compression"], **cfg["extra"]})
    # Connect, log in, get a producer id and the topic's metadata before the clock starts:
    # one record to the warm-up topic (not the measured one, so its count stays exact).
    p.produce(cfg["warm_topic"], b"warm-up")
    if p.flush(60) or not p.list_topics(topic, timeout=60).topics[topic].partitions:
        out(error="warm-up failed")
        return
    pool = payloads(cfg["seed"], cfg["size"], cfg["payloads"])
    lat, bad = [], []
    now = time.perf_counter
    def done(t, err, msg):
        if err is None:
            lat.append(now() - t)
        elif len(bad) < 5:
            bad.append(str(err))
    part, n, k = cfg["partition"], 0, len(pool)
    produce_one, poll = p.produce, p.poll
    wait_go()
    t0, c0 = time.monotonic(), time.process_time()
    end = now() + cfg["seconds"]
    while now() < end:
        try:
            produce_one(topic, pool[n % k], partition=part, on_delivery=partial(done, now()))
        except BufferError:  # the local queue is full (queue.buffering.max.messages): serve callbacks
            poll(0.001)
            continue
        n += 1
        if not n % 1000:
            poll(0)
    left = p.flush(cfg["limit_s"])
    t1 = time.monotonic()
    if left:
        bad.append(f"{left} records not delivered within {cfg['limit_s']} s")
    report(t0, t1, c0, len(lat), len(lat) * cfg["size"], lat, bad)

def fetch():
    c = Consumer({**conf, "group.id": "kafka-bench-unused", "enable.auto.commit": False, **cfg["extra"]})
    parts = [TopicPartition(topic, p) for p in range(cfg["partitions"])]
    # Log in to the partition leader and learn how much there is before the clock starts.
    expect = sum(c.get_watermark_offsets(tp, timeout=60)[1] for tp in parts)
    if expect != cfg["expect"]:
        out(error=f"high watermark {expect}, but {cfg['expect']} records were acknowledged")
        return
    wait_go()
    t0, c0 = time.monotonic(), time.process_time()
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(cfg["partitions"])])
    n = nbytes = 0
    bad = []
    deadline = t0 + cfg["limit_s"]
    while n < expect and time.monotonic() < deadline:
        # consume() returns once it has num_messages or at its timeout: never ask for more
        # than is left, or the last call would wait out the timeout for records never coming.
        for m in c.consume(num_messages=min(10000, expect - n), timeout=1.0):
            if m.error() is not None:
                if len(bad) < 5:
                    bad.append(str(m.error()))
                continue
            n += 1
            nbytes += len(m.value())
    t1 = time.monotonic()
    if n != expect:
        bad.append(f"read {n} records of {expect}")
    c.close()
    report(t0, t1, c0, n, nbytes, [], bad)

produce() if cfg["mode"] == "produce" else fetch()
sys.stdout.flush()
os._exit(0)
'''

# kcat (C, librdkafka) as the producer: the Python client's own CPU per message (its
# produce() call and delivery callback) was the larger cost of the confluent-kafka rows, so
# these rows show what the gateway takes when the client is not the limit. The wrapper
# writes the payloads as lines (kcat -l sends each line as one record), waits for go, runs
# kcat for a count of messages sized to the Iggy reference's rate over --seconds, and
# checks the partition's high watermark moved by exactly that count.
KCAT_SCRIPT = COMMON + r'''
import resource, subprocess
from confluent_kafka import Consumer, TopicPartition
path = cfg["file"]
pool = payloads(cfg["seed"], cfg["size"], cfg["payloads"])
with open(path, "wb") as f:
    for i in range(cfg["count"]):
        f.write(pool[i % len(pool)] + b"\n")
conf = {"bootstrap.servers": f"127.0.0.1:{cfg['port']}", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": cfg["user"], "sasl.password": cfg["password"]}
c = Consumer({**conf, "group.id": "kafka-bench-unused", "enable.auto.commit": False})
tp = TopicPartition(cfg["topic"], cfg["partition"])
before = c.get_watermark_offsets(tp, timeout=60)[1]
argv = ["kcat", "-P", "-b", conf["bootstrap.servers"], "-t", cfg["topic"], "-p", str(cfg["partition"]),
        "-z", cfg["compression"], "-l", path, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
        "-X", f"sasl.username={cfg['user']}", "-X", f"sasl.password={cfg['password']}", "-X", "acks=all",
        "-X", "enable.idempotence=true", "-X", f"linger.ms={cfg['linger_ms']}"]
wait_go()
t0 = time.monotonic()
done = subprocess.run(argv, capture_output=True, timeout=cfg["limit_s"])
t1 = time.monotonic()
cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
os.unlink(path)
bad = [] if done.returncode == 0 else [f"kcat exited {done.returncode}: {done.stderr.decode()[-300:]}"]
after = c.get_watermark_offsets(tp, timeout=60)[1]
c.close()
if after - before != cfg["count"]:
    bad.append(f"high watermark moved {after - before}, {cfg['count']} records sent")
out(t0=t0, t1=t1, cpu=cpu.ru_utime + cpu.ru_stime, msgs=cfg["count"], bytes=cfg["count"] * cfg["size"], bad=bad,
    n_lat=0, lat_us=[], p50=0.0, p99=0.0)
sys.stdout.flush()
os._exit(0)
'''

IGGY_SCRIPT = COMMON + r'''
import asyncio
import apache_iggy as lib

async def main():
    c = lib.IggyClient(f"127.0.0.1:{cfg['port']}")
    await c.connect()
    await c.login_user(cfg["user"], cfg["password"])
    stream, topic, part, batch = cfg["stream"], cfg["topic"], cfg["partition"], cfg["batch"]
    lat, bad, n, nbytes = [], [], 0, 0
    if cfg["mode"] == "send":
        pool = payloads(cfg["seed"], cfg["size"], cfg["payloads"])
        msgs = [lib.SendMessage(pool[i % len(pool)]) for i in range(batch)]
        wait_go()
        t0, c0 = time.monotonic(), time.process_time()
        end = time.perf_counter() + cfg["seconds"]
        while time.perf_counter() < end:
            a = time.perf_counter()
            await c.send_messages(stream, topic, part, msgs)
            lat.append(time.perf_counter() - a)
            n += batch
        nbytes = n * cfg["size"]  # lat: one entry per call, which every message of the batch waits
    else:
        if hasattr(lib, "Consumer"):  # 0.9: keyword arguments and an explicit consumer
            one = lib.Consumer.Single(1)
            def poll(offset, count):
                return c.poll_messages(stream, topic, consumer=one, polling_strategy=lib.PollingStrategy.Offset(offset),
                                       count=count, auto_commit=False, partition_id=part)
        else:
            def poll(offset, count):
                return c.poll_messages(stream, topic, part, lib.PollingStrategy.Offset(offset), count, False)
        expect = cfg["expect"]
        wait_go()
        t0, c0 = time.monotonic(), time.process_time()
        deadline = t0 + cfg["limit_s"]
        while n < expect and time.monotonic() < deadline:
            got = await poll(n, min(batch, expect - n))
            for msg in got:
                nbytes += len(msg.payload())
            n += len(got)
        if n != expect:
            bad.append(f"read {n} messages of {expect}")
    report(t0, time.monotonic(), c0, n, nbytes, lat, bad)

asyncio.run(main())
sys.stdout.flush()
os._exit(0)  # the Rust client's runtime can abort at interpreter teardown; the result is printed
'''


# -- the gateway ------------------------------------------------------------------------------
def _problem(line: str) -> bool:
    return bool(re.search(r"\b(ERROR|CRITICAL|Traceback)\b", line)) or (
        " WARNING " in line and "default password" not in line)


class Gateway(ServerProcess):
    """``ferry serve --only LISTENERS`` in a subprocess (optionally under cProfile):
    ``ports`` from its banner, ``log`` its stderr."""

    def __init__(self, tmp: Path, name: str, only: str, fsync: str, cprofile: str | None = None) -> None:
        log = tmp / f"{name}.log"
        python = [sys.executable] + (["-m", "cProfile", "-o", cprofile] if cprofile else [])
        ports = [f"--{listener.replace('_', '-')}-port" for listener in only.split(",")]
        argv = [*python, "-m", "gateway", "serve", "--data", str(tmp / f"{name}-data"), "--host", "127.0.0.1",
                "--only", only, "--fsync", fsync, *itertools.chain.from_iterable((p, "0") for p in ports)]
        super().__init__(name, subprocess.Popen(argv, cwd=tmp, env=ferry_env(PYTHONUNBUFFERED="1"),
                                                stdout=subprocess.PIPE, stderr=open(log, "wb")), log, _problem)
        banner = wait_banner(self.proc, self.log, START_LIMIT_S)
        listed = re.findall(r"^\s+(kafka|iggy_tcp) +127\.0\.0\.1:(\d+)/tcp", banner, re.M)
        self.ports = {listener: int(port) for listener, port in listed}
        # Anything printed to stdout later must not fill the pipe and block the server.
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()


# -- RSS per idle Kafka connection --------------------------------------------------------------
_LOGIN = ((API_VERSIONS, 3, {"client_software_name": "ferry-kafka-bench", "client_software_version": "1"}),
          (SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}),
          (SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0" + USER.encode() + b"\0" + PASSWORD.encode()}))


def _read_frame(sock: socket.socket) -> bytes:
    (size,) = frames.SIZE.unpack(_recv_exactly(sock, frames.SIZE.size))
    return _recv_exactly(sock, size)


def open_kafka(port: int, n: int) -> list[socket.socket]:
    """``n`` Kafka connections, :data:`LOGIN_BATCH` at a time, each through ApiVersions,
    SaslHandshake v1 and SaslAuthenticate (SASL/PLAIN) with every answer's error 0."""
    socks: list[socket.socket] = []
    while len(socks) < n:
        batch = [socket.create_connection(("127.0.0.1", port), timeout=IO_LIMIT_S)
                 for _ in range(min(LOGIN_BATCH, n - len(socks)))]
        socks += batch
        for corr, (api, version, fields) in enumerate(_LOGIN, 1):
            request = frames.encode_request(api.key, version, corr, "ferry-kafka-bench", api.request.make(**fields))
            for s in batch:
                s.sendall(request)
            for s in batch:
                _corr, body = frames.decode_response(api.key, version, _read_frame(s))
                if body.error_code:
                    raise BenchFailure(f"{api.name} answered error {body.error_code}")
    return socks


def idle_rss(a, tmp: Path) -> dict:
    gw = Gateway(tmp, "rss", "kafka", a.fsync)
    socks: list[socket.socket] = []
    try:
        socks += open_kafka(gw.ports["kafka"], WARM_CONNS)
        before = settled_rss(gw.pid, a.settle)[0]
        socks += open_kafka(gw.ports["kafka"], a.idle_conns)
        after = settled_rss(gw.pid, a.settle)[0]
        problems = gw.problems()
        if problems:
            raise BenchFailure("gateway log:\n" + "\n".join(problems[-30:]))
    finally:
        for s in socks:
            s.close()
        gw.stop()
    return {"before": before, "after": after, "n": a.idle_conns, "per": (after - before) / a.idle_conns}


# -- the throughput cells ---------------------------------------------------------------------
class Bench:
    def __init__(self, a, gw: Gateway, tmp: Path) -> None:
        self.a, self.gw, self.tmp = a, gw, tmp
        self.iggy_spec = f"apache-iggy=={a.iggy_client}"
        self.iggy = iggy_python(self.iggy_spec)
        self.rows: list[dict] = []
        self.stored: dict[str, list[int]] = {}  # topic -> messages acknowledged per partition
        self.logs = itertools.count(1)

    def run(self, label: str, python: Path, script: str, cfgs: list[dict]) -> dict:
        clients = (Client(python, script, cfg, self.tmp / f"client-{next(self.logs):03d}.log") for cfg in cfgs)
        results, srv_cpu, _ = run_cell(clients, self.gw, CELL_LIMIT_S, "t1", CELL_LIMIT_S)
        problems = self.gw.problems()
        bad = [b for r in results for b in r.get("bad", [])]
        if bad or problems:
            raise BenchFailure(f"{label}: " + (f"{bad}\n" if bad else "")
                               + ("gateway log:\n" + "\n".join(problems[-30:]) if problems else ""))
        seconds = max(r["t1"] for r in results) - min(r["t0"] for r in results)
        msgs = sum(r["msgs"] for r in results)
        lat = sorted(x for r in results for x in r["lat_us"])
        return {"msgs": msgs, "per": [r["msgs"] for r in results], "seconds": seconds, "rate": msgs / seconds,
                "mbs": sum(r["bytes"] for r in results) / seconds / 1e6, "n_lat": sum(r["n_lat"] for r in results),
                # one process: its exact percentiles; more: from the pooled thinned samples (<= 20k each)
                "p50": results[0]["p50"] if len(results) == 1 else (statistics.median(lat) / 1e6 if lat else 0),
                "p99": results[0]["p99"] if len(results) == 1 else pct(lat, 0.99) / 1e6,
                "srv": srv_cpu / max(msgs, 1) * 1e6, "cli": sum(r["cpu"] for r in results) / max(msgs, 1) * 1e6}

    def common(self, **kw) -> dict:
        return {"user": USER, "password": PASSWORD, "limit_s": CELL_LIMIT_S / 2, "payloads": PAYLOADS,
                "extra": self.a.client_config} | kw

    def add(self, size: int, cell: str, side: str, row: dict, ref: dict | None) -> None:
        self.rows.append({"size": size, "cell": cell, "side": side, **row,
                          "ratio": None if ref is None else row["rate"] / ref["rate"]})
        print(TABLE.row(self.rows[-1]), flush=True)

    def setup(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic
        a = self.a
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{self.gw.ports['kafka']}",
                             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                             "sasl.username": USER, "sasl.password": PASSWORD})
        topics = [NewTopic("warm-up", num_partitions=1, replication_factor=1)]
        # (the fetch cells read the 1-producer uncompressed topics, filled when their produce cell is not run)
        topics += [NewTopic(self.kafka_topic(size, comp, n), num_partitions=n, replication_factor=1)
                   for size in a.sizes for comp in {*a.compressions, "none"} for n in {*a.producers, 1}]
        for name, fut in admin.create_topics(topics, operation_timeout=60).items():
            fut.result(60)
        sock, _ = connect(self.gw.ports["iggy_tcp"])
        sock.sendall(frame("stream.create", name=IGGY_STREAM))
        if recv_reply(sock)[0]:
            raise BenchFailure("could not create the Iggy stream")
        for size in a.sizes:
            for n in {*a.producers, 1}:
                sock.sendall(frame("topic.create", stream_id=IGGY_STREAM, partitions_count=n,
                                   name=self.iggy_topic(size, n)))
                if recv_reply(sock)[0]:
                    raise BenchFailure("could not create an Iggy topic")
        sock.close()

    @staticmethod
    def kafka_topic(size: int, compression: str, producers: int) -> str:
        return f"bench-{size}-{compression}-p{producers}"

    @staticmethod
    def iggy_topic(size: int, producers: int) -> str:
        return f"t-{size}-p{producers}"

    def iggy_send(self, size: int, producers: int) -> dict:
        a, topic = self.a, self.iggy_topic(size, producers)
        row = self.run(f"iggy send {topic}", self.iggy, IGGY_SCRIPT, [self.common(
            mode="send", port=self.gw.ports["iggy_tcp"], stream=IGGY_STREAM, topic=topic, partition=p, size=size,
            batch=a.iggy_batch, seconds=a.seconds, seed=SEED + p) for p in range(producers)])
        self.stored[topic] = row["per"]
        return row

    def kafka_produce(self, size: int, compression: str, producers: int) -> dict:
        a, topic = self.a, self.kafka_topic(size, compression, producers)
        row = self.run(f"kafka produce {topic}", Path(sys.executable), KAFKA_SCRIPT, [self.common(
            mode="produce", port=self.gw.ports["kafka"], topic=topic, warm_topic="warm-up", partition=p,
            size=size, compression=compression, linger_ms=LINGER_MS, seconds=a.seconds, seed=SEED + p)
            for p in range(producers)])
        self.stored[topic] = row["per"]
        return row

    def kcat_produce(self, size: int, compression: str, producers: int, ref: dict) -> dict:
        a, topic = self.a, self.kafka_topic(size, compression, producers)
        count = max(1000, int(ref["rate"] * a.seconds / producers))  # about --seconds at the reference's rate
        return self.run(f"kcat produce {topic}", Path(sys.executable), KCAT_SCRIPT, [self.common(
            port=self.gw.ports["kafka"], topic=topic, partition=p, size=size, compression=compression,
            linger_ms=LINGER_MS, count=count, seed=SEED + p, file=str(self.tmp / f"kcat-{p}.txt"))
            for p in range(producers)])

    def produce_cells(self, size: int, producers: int) -> None:
        ref = self.iggy_send(size, producers)
        cell = f"produce, {producers} producer{'s' if producers > 1 else ''}"
        self.add(size, cell, f"{self.iggy_spec}, batches of {self.a.iggy_batch} (ref)", ref, None)
        for comp in self.a.compressions:
            row = self.kafka_produce(size, comp, producers)
            self.add(size, "", f"confluent-kafka {CONFLUENT}, acks=all, {comp}", row, ref)
        if KCAT:
            for comp in self.a.compressions:
                self.add(size, "", f"{KCAT}, acks=all, {comp}", self.kcat_produce(size, comp, producers, ref), ref)

    def fetch_cells(self, size: int) -> None:
        a = self.a
        itopic, ktopic = self.iggy_topic(size, 1), self.kafka_topic(size, "none", 1)
        if itopic not in self.stored:  # its produce cell was skipped: fill it, untimed
            self.iggy_send(size, 1)
        if ktopic not in self.stored:
            self.kafka_produce(size, "none", 1)
        ref = self.run(f"iggy poll {itopic}", self.iggy, IGGY_SCRIPT, [self.common(
            mode="poll", port=self.gw.ports["iggy_tcp"], stream=IGGY_STREAM, topic=itopic, partition=0,
            batch=a.iggy_batch, expect=self.stored[itopic][0])])
        self.add(size, "fetch everything, 1 partition", f"{self.iggy_spec}, polls of {a.iggy_batch} (ref)", ref, None)
        row = self.run(f"kafka fetch {ktopic}", Path(sys.executable), KAFKA_SCRIPT, [self.common(
            mode="fetch", port=self.gw.ports["kafka"], topic=ktopic, partitions=1, expect=self.stored[ktopic][0])])
        self.add(size, "", f"confluent-kafka {CONFLUENT}, assign from the beginning", row, ref)


def _confluent_version() -> str:
    import confluent_kafka
    return confluent_kafka.__version__


CONFLUENT = _confluent_version()


def _kcat_version() -> str | None:
    """"kcat 1.7.1 (librdkafka 2.0.2)", or None when kcat is not installed (its rows are left out)."""
    try:
        text = subprocess.run(["kcat", "-V"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"Version (\S+) .*?librdkafka (\S+)", text)
    return f"kcat {m.group(1)} (librdkafka {m.group(2)})" if m else None


KCAT = _kcat_version()


TABLE = versus_iggy_table(unit="msg", rate="msgs/s", cell_width=31, lat_width=9, cpu_width=11, cpu_digits=2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="length of each produce cell")
    ap.add_argument("--sizes", default="128,1024", help="payload sizes in bytes, comma-separated")
    ap.add_argument("--producers", default="1,4", help="producer counts, comma-separated")
    ap.add_argument("--compressions", default="none,lz4", help="Kafka compression.type values, comma-separated")
    ap.add_argument("--cells", default="produce,fetch,idle", help="subset of produce,fetch,idle")
    ap.add_argument("--iggy-client", default="0.8.0", help="apache-iggy version of the reference")
    ap.add_argument("--iggy-batch", type=int, default=1000, help="messages per send_messages / poll_messages")
    ap.add_argument("--fsync", default="batch", choices=["always", "batch", "never"])
    ap.add_argument("--client-config", default="",
                    help="more librdkafka settings for every Kafka client, KEY=VALUE,... (to try one out)")
    ap.add_argument("--idle-conns", type=int, default=200, help="idle authenticated Kafka connections to measure")
    ap.add_argument("--settle", type=float, default=0.5, help="seconds between two RSS reads that must agree")
    ap.add_argument("--cprofile", help="run the throughput gateway under cProfile, its stats written to this file "
                                       "at the end (slower: compare rows within one profiled run only)")
    ap.add_argument("--dir", default=".", help="where the temp data dir goes (default: here; /tmp may be tmpfs)")
    ap.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs)")
    a = ap.parse_args()
    a.sizes = [int(s) for s in a.sizes.split(",")]
    a.producers = [int(s) for s in a.producers.split(",")]
    a.compressions = [c.strip() for c in a.compressions.split(",")]
    a.cells = set(a.cells.split(","))
    a.client_config = dict(kv.split("=", 1) for kv in a.client_config.split(",") if kv)
    if a.cells - {"produce", "fetch", "idle"} or min(a.producers) < 1 or min(a.sizes) < 1:
        ap.error("bad --cells / --producers / --sizes")
    if a.cprofile:
        a.cprofile = str(Path(a.cprofile).resolve())
    return in_temp_dir("kafka-bench-", a.dir, a.keep, partial(run, a), gateway_log)


def run(a, tmp: Path) -> None:
    started = time.monotonic()
    print(f"{datetime.date.today()} {platform.node()}, {os.cpu_count()} CPUs, load "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; fsync {a.fsync}; {a.seconds:g} s per produce cell; "
          f"linger.ms {LINGER_MS}", flush=True)
    if a.cells & {"produce", "fetch"}:
        gw = Gateway(tmp, "gateway", "kafka,iggy_tcp", a.fsync, a.cprofile)
        try:
            bench = Bench(a, gw, tmp)
            bench.setup()
            print(TABLE.header(), flush=True)
            for size in a.sizes:
                if "produce" in a.cells:
                    for n in a.producers:
                        bench.produce_cells(size, n)
                if "fetch" in a.cells:
                    bench.fetch_cells(size)
            if a.markdown:
                print("\n" + TABLE.markdown(bench.rows))
        finally:
            gw.stop()  # SIGTERM: a clean exit, so cProfile writes its stats
    if "idle" in a.cells:
        r = idle_rss(a, tmp)
        print(f"\nidle Kafka connections (SASL/PLAIN, fresh gateway): {r['n']} after {WARM_CONNS} warm-up ones, "
              f"VmRSS {r['before'] / 2**20:.1f} -> {r['after'] / 2**20:.1f} MiB: {r['per']:,.0f} B per connection")
    print(f"\n{time.monotonic() - started:.0f} s, load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def gateway_log(tmp: Path) -> str:
    text = ""
    for log in sorted(tmp.glob("*.log")):
        if not log.name.startswith("client-"):
            text += f"\n--- {log.name} (tail) ---\n" + log.read_text(errors="replace")[-4000:]
    return text


if __name__ == "__main__":
    sys.exit(main())
