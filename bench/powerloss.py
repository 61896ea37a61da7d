"""Power-loss cycles: ``ferry serve`` on lazyfs, real clients, SIGKILL, a simulated power cut.

Each cycle mounts lazyfs (tests/support/lazyfs.py) over the same backing directory,
starts ``ferry serve`` on it, and runs JetStream publishers (nats-py ``js.publish``,
several in flight) and a Kafka producer (confluent-kafka ``acks=all``) until a random
number of acknowledgements has come in; then the server gets SIGKILL and the filesystem
drops everything not fsynced (the cut). The next cycle starts on what the disk kept.
At the end the backing directory is opened with the core Broker and every
acknowledged message must be there (Kafka: at its acknowledged offset).

    .venv/bin/python bench/powerloss.py --cycles 5 --fsync batch --seed 1

Prints one row per cycle (acks of each client, seconds) and the totals; exits 1 when
an acknowledged message is missing. Needs /dev/fuse, fusermount and fusepy (root).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT_DIR = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT_DIR), str(ROOT_DIR / "tests" / "support")]

import lazyfs  # noqa: E402
import nats  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from ferry_harness import kill_process, serve_process  # noqa: E402

from core.broker import Broker  # noqa: E402

BINDING = '[[binding]]\nstream = "k"\ntopic = "t"\ncreate = true\npartitions = 2\n'
PORT_LINE = re.compile(r"^\s+(nats|kafka)\s+127\.0\.0\.1:(\d+)/tcp", re.M)
ROOT = ("iggy", "iggy")  # ferry serve's root user until changed
PUBLISHERS = 4  # concurrent js.publish loops
ACK_LIMIT_S = 60  # a cycle whose acks have not come by then is cut anyway (guard, not a figure)


def serve(cwd: Path, data: Path, fsync: str):
    proc, banner = serve_process(cwd, data, "--config", str(cwd / "ferry.toml"), "--only", "nats,kafka",
                                 "--nats-port", "0", "--kafka-port", "0", "--fsync", fsync)
    return proc, {name: int(port) for name, port in PORT_LINE.findall(banner)}


async def _quiet(_err) -> None:
    pass


async def publish(port: int, token: str, cycle: int, acked: dict, stop: asyncio.Event) -> None:
    try:  # a loaded machine may take seconds to log in (argon2): a connect bound, not a figure
        nc = await nats.connect(f"nats://127.0.0.1:{port}", token=token, allow_reconnect=False,
                                connect_timeout=30, error_cb=_quiet)  # the kill's UnexpectedEOF is expected
    except Exception:  # noqa: BLE001 - killed before it connected: no acks this cycle
        return
    js = nc.jetstream()
    try:
        await js.add_stream(name="PL", subjects=["pl.>"])
    except Exception:  # noqa: BLE001 - exists from an earlier cycle
        pass

    async def loop(w: int) -> None:
        n = 0
        while not stop.is_set():
            payload = f"js-{cycle}-{w}-{n}".encode()
            n += 1
            try:
                await js.publish("pl.x", payload, timeout=10)
            except Exception:  # noqa: BLE001 - killed: not acknowledged
                return
            acked["js"].add(payload)

    await asyncio.gather(*(loop(w) for w in range(PUBLISHERS)))
    try:
        await asyncio.wait_for(nc.close(), 1)
    except Exception:  # noqa: BLE001
        pass


def produce(port: int, cycle: int, acked: dict, stop: threading.Event) -> None:
    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "PLAIN", "sasl.username": ROOT[0], "sasl.password": ROOT[1],
                  "acks": "all", "message.timeout.ms": 5000,
                  "log_level": 2})  # the refused reconnects after the kill are expected

    def report(err, msg):
        if err is None:
            acked["kafka"][(msg.partition(), msg.offset())] = msg.value()

    n = 0
    while not stop.is_set():
        try:
            p.produce("k.t", f"kafka-{cycle}-{n}".encode(), partition=n % 2, on_delivery=report)
            n += 1
        except BufferError:
            pass
        p.poll(0.001)
    p.poll(0)
    p.purge(in_queue=True, in_flight=True, blocking=False)
    p.flush(10)


def cycle(args, work: Path, n: int, rng: random.Random, acked: dict, token: str) -> tuple[int, int, float]:
    t0 = time.monotonic()
    before_js, before_kafka = len(acked["js"]), len(acked["kafka"])
    fs = lazyfs.LazyFS(work / "disk", work / "mnt").start()
    try:
        proc, ports = serve(work, fs.mount / "data", args.fsync)
        try:
            stop_kafka = threading.Event()
            kafka = threading.Thread(target=produce, args=(ports["kafka"], n, acked, stop_kafka), daemon=True)
            kafka.start()
            want = before_js + rng.randrange(args.acks // 2, args.acks + 1)
            want_kafka = before_kafka + rng.randrange(args.acks // 2, args.acks + 1)

            async def run() -> None:
                stop = asyncio.Event()
                task = asyncio.ensure_future(publish(ports["nats"], token, n, acked, stop))
                deadline = time.monotonic() + ACK_LIMIT_S
                while (len(acked["js"]) < want or len(acked["kafka"]) < want_kafka) and time.monotonic() < deadline:
                    await asyncio.sleep(0.005)  # wait for acknowledgements, not for a time
                proc.kill()  # SIGKILL mid-traffic: publishes in flight, batches unwritten
                await asyncio.to_thread(proc.wait, 10)
                stop.set()
                await asyncio.wait_for(task, 30)

            try:
                asyncio.run(run())
            finally:
                stop_kafka.set()
                kafka.join(30)
        finally:
            kill_process(proc)
        fs.crash()  # the power goes
    finally:
        fs.stop()
    return len(acked["js"]) - before_js, len(acked["kafka"]) - before_kafka, time.monotonic() - t0


def check(data: Path, acked: dict) -> tuple[int, int]:
    """Missing acknowledged messages: (JetStream, Kafka)."""
    with Broker.open(data) as broker:
        js = set()
        for topic in broker.list_topics("jetstream"):
            if topic.name == "PL":
                offset = 0
                while msgs := broker.read_messages("jetstream", "PL", 0, offset, 1000):
                    js |= {bytes(m.payload) for m in msgs}
                    offset = msgs[-1].offset + 1
        kafka_missing = 0
        for (pid, offset), value in acked["kafka"].items():
            got = broker.read_messages("k", "t", pid, offset, 1)
            kafka_missing += not (got and got[0].offset == offset and bytes(got[0].payload) == value)
    return len(acked["js"] - js), kafka_missing


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=5)
    ap.add_argument("--fsync", choices=("always", "batch"), default="batch")
    ap.add_argument("--acks", type=int, default=400, help="JetStream acks per cycle before the cut (up to)")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--dir", type=Path, default=None, help="work directory (default: a temp dir)")
    args = ap.parse_args()
    reason = lazyfs.unavailable()
    if reason:
        print(f"powerloss: cannot run: {reason}", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    acked = {"js": set(), "kafka": {}}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        work = Path(tmp)
        (work / "ferry.toml").write_text(BINDING)
        # NATS logs in with a personal access token (a hash lookup): a password costs argon2
        # in the server at every connect, which a loaded machine answered 'Authentication Timeout'.
        with Broker.open(work / "disk" / "data") as broker:
            token = broker.meta.users.create_pat(0, "powerloss")
        print(f"{'cycle':>5} {'js acks':>8} {'kafka acks':>10} {'seconds':>8}")
        for n in range(args.cycles):
            js, kafka, secs = cycle(args, work, n, rng, acked, token)
            print(f"{n:>5} {js:>8} {kafka:>10} {secs:>8.1f}", flush=True)
        js_missing, kafka_missing = check(work / "disk" / "data", acked)
    print(f"fsync={args.fsync} cycles={args.cycles}: {len(acked['js'])} JetStream and {len(acked['kafka'])} "
          f"Kafka acknowledged; missing after the cuts: {js_missing} JetStream, {kafka_missing} Kafka")
    return 1 if js_missing or kafka_missing else 0


if __name__ == "__main__":
    sys.exit(main())
