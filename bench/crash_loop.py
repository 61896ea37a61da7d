"""Mixed-protocol crash loop: ``kill -9`` of ``ferry serve`` while five real clients write.

```
nice -n 10 .venv/bin/python bench/crash_loop.py --cycles 100 --seed 1
.venv/bin/python bench/crash_loop.py --cycles 3 --protocols jetstream,kafka --kill-after 0.2,0.5 --keep
```

One ``ferry serve`` process (the ``ferry`` console script, fixed free ports, one data
directory) and one writer process per protocol (bench/crash_loop_writers.py: apache-iggy
0.9 over Iggy's binary TCP, httpx over Iggy's HTTP API, nats-py ``js.publish`` with
``Nats-Msg-Id``, the pravega 0.3.8 ``EventStreamWriter``, confluent-kafka with
``enable.idempotence``). Each writer journals every acknowledged message as the ack
arrives and retries what was not acknowledged, as an application would.

A cycle restarts the server on the same data directory, waits until every writer had an
acknowledgement from it (so each kill lands in the middle of every protocol's traffic),
waits a seeded random time from ``--kill-after`` and sends SIGKILL. After the last cycle the
server starts once more, the writers finish what is outstanding and stop, the server stops
cleanly, and the data directory is opened with core's ``Broker`` (as
tests/gateway/test_gw_kill.py does) to compare what is stored with the journals.

Per protocol: acknowledged, stored (distinct messages), lost (acknowledged, not stored),
duplicated (stored more than once), out of order (a message stored before one its writer
sent earlier; duplicates are not counted again). Exit code 1 on any loss, and on a
duplicate where the protocol promises none: JetStream with ``Nats-Msg-Id`` (within the
stream's ``duplicate_window``), Kafka's idempotent producer, Pravega's writer (event
numbers). Iggy binary and HTTP make no such promise by default (Iggy's deduplication is
off unless the topic or server asks for it): a batch stored just before the kill and sent
again after it is stored twice, and is reported, not failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import crash_loop_writers as W  # noqa: E402 - the writers' names for streams and topics

from core.broker import Broker  # noqa: E402 - the data directory, read as tests/gateway/test_gw_kill.py does

PROTOCOLS = ("iggy", "http", "jetstream", "pravega", "kafka")
# The listeners each writer needs (ferry serve --only) and the port its writer dials.
LISTENERS = {"iggy": ("iggy_tcp",), "http": ("http",), "jetstream": ("nats",),
             "pravega": ("pravega", "pravega_controller"), "kafka": ("kafka",)}
DIAL = {"iggy": "iggy_tcp", "http": "http", "jetstream": "nats", "pravega": "pravega_controller", "kafka": "kafka"}
# Where each protocol's messages land in Ferry's log (docs/addressing.md, docs/nats.md).
TOPICS = {"iggy": (W.STREAM, W.IGGY_TOPIC), "http": (W.STREAM, W.HTTP_TOPIC), "kafka": (W.STREAM, W.KAFKA_TOPIC),
          "jetstream": ("jetstream", W.JS_STREAM), "pravega": (W.PV_SCOPE, W.PV_STREAM)}
# Paths that promise no duplicate across a crash: a duplicate there fails the run.
IDEMPOTENT = {"jetstream", "kafka", "pravega"}
# Messages per Iggy/HTTP send, JetStream publishes in flight, pravega events per awaited
# wave, Kafka records outstanding: enough in flight that a kill finds some of each unanswered.
BATCH = {"iggy": 100, "http": 100, "jetstream": 32, "pravega": 100, "kafka": 1000}
# Order is checked between these units of sequence numbers. The pravega 0.3.8 binding gives
# no order among write_event_async calls outstanding together (measured with no kill at all:
# 19,706 of 41,700 events of one routing key stored out of call order, each under a higher
# event number than the one before, so the client reordered them before numbering); a wave
# is awaited whole before the next starts, so waves must stay in order.
ORDER_UNIT = {"pravega": BATCH["pravega"]}
ROOT_USER = ("iggy", "iggy")     # ferry serve's root user until it is changed (docs/security.md)
START_LIMIT_S = 60               # a server not ready by then fails the run (a hung start, not timing)
BUSY_PORT_LIMIT_S = 30           # the killed server's sockets may hold a fixed port a moment longer
PROGRESS_LIMIT_S = 120           # a writer with no new ack from a restarted server by then fails the run
WRITER_END_LIMIT_S = W.DRAIN_LIMIT_S + 60   # writers finish what is outstanding, then exit
READ_CHUNK = 10_000              # records per read when checking the data directory


class CrashLoopFailure(Exception):
    """The server or a writer misbehaved (did not start, stopped acking, crashed)."""


@dataclass
class Result:
    protocol: str
    acked: int = 0
    stored: int = 0
    records: int = 0
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    foreign: int = 0           # stored records no writer sent (unparsable or never-sent sequence)
    no_dup: bool = False       # the path promises no duplicate (IDEMPOTENT, Iggy with --iggy-dedup)
    writer: dict = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.lost > 0 or self.foreign > 0 or (self.no_dup and self.duplicated > 0)


@dataclass
class Report:
    results: dict[str, Result]
    cycles: int
    elapsed_s: float
    server_errors: list[str]

    @property
    def ok(self) -> bool:
        return not any(r.failed for r in self.results.values())


def free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports, all bound at once and then released."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def ferry_command() -> list[str]:
    """The ``ferry`` console script next to this interpreter, else ``python -m gateway``."""
    script = Path(sys.executable).parent / "ferry"
    return [str(script)] if script.exists() else [sys.executable, "-m", "gateway"]


class Server:
    """``ferry serve`` on fixed ports over one data directory, started and killed again."""

    def __init__(self, work: Path, ports: dict[str, int], fsync: str, config: Path) -> None:
        self.work, self.ports, self.fsync, self.config = work, ports, fsync, config
        self.log = work / "ferry.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        args = [*ferry_command(), "serve", "--config", str(self.config), "--data", str(self.work / "data"),
                "--host", "127.0.0.1", "--fsync", self.fsync, "--only", ",".join(self.ports)]
        for name, port in self.ports.items():
            args += [f"--{name.replace('_', '-')}-port", str(port)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("FERRY_")} | {"PYTHONUNBUFFERED": "1"}
        deadline = time.monotonic() + BUSY_PORT_LIMIT_S
        while True:
            start = self.log.stat().st_size if self.log.exists() else 0
            with open(self.log, "ab") as err:
                self.proc = subprocess.Popen(args, cwd=self.work, env=env, stdout=subprocess.PIPE, stderr=err)
            problem = self._wait_ready()
            if problem is None:
                return
            tail = self.log.read_bytes()[start:].decode(errors="replace")
            if "cannot listen" in tail and time.monotonic() < deadline:
                time.sleep(0.2)  # a port still held by the killed process's sockets
                continue
            raise CrashLoopFailure(f"ferry serve did not start: {problem}\n{tail[-3000:]}")

    def _wait_ready(self) -> str | None:
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        buf, deadline = b"", time.monotonic() + START_LIMIT_S
        try:
            while not buf.endswith(b"\nready\n"):
                if not sel.select(max(deadline - time.monotonic(), 0)):
                    self.kill()
                    return f"no 'ready' within {START_LIMIT_S} s"
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    code = self.proc.wait()
                    self.proc.stdout.close()
                    return f"exited with {code}"
                buf += chunk
        finally:
            sel.close()
        return None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()
            if not self.proc.stdout.closed:
                self.proc.stdout.close()

    def stop(self) -> None:
        """SIGTERM: the graceful shutdown writes and fsyncs everything pending."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(START_LIMIT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise CrashLoopFailure("ferry serve did not stop on SIGTERM") from None
        self.proc.stdout.close()

    def errors(self) -> list[str]:
        """Tracebacks and ERROR lines in the server's log (every start appended to it)."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return [ln for ln in text.splitlines() if "Traceback" in ln or " ERROR " in ln or ln.startswith("ERROR")]


class WriterProcess:
    """One protocol's writer (bench/crash_loop_writers.py) in the interpreter with its client."""

    def __init__(self, protocol: str, python: str, work: Path, port: int, seed: int, size: int,
                 token: str) -> None:
        self.protocol = protocol
        self.journal = work / f"journal-{protocol}.txt"
        self.log = work / f"writer-{protocol}.log"
        cfg = {"port": port, "journal": str(self.journal), "stop": str(work / "stop"), "seed": seed,
               "size": size, "batch": BATCH[protocol], "user": ROOT_USER[0], "password": ROOT_USER[1],
               "token": token}
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {
            "RUST_LOG": "error", "RUST_BACKTRACE": "1",
            # the pravega client reads its Basic credentials from these (docs/pravega.md)
            "pravega_client_auth_method": "Basic", "pravega_client_auth_username": ROOT_USER[0],
            "pravega_client_auth_password": ROOT_USER[1]}
        self.journal.touch()
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([python, "-u", str(HERE / "crash_loop_writers.py"), protocol, json.dumps(cfg)],
                                         stdout=out, stderr=subprocess.STDOUT, env=env, cwd=work)

    def progress(self) -> int:
        return self.journal.stat().st_size

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise CrashLoopFailure(f"{self.protocol} writer exited ({self.proc.returncode}):\n{self.tail()}")

    def tail(self, n: int = 3000) -> str:
        return self.log.read_bytes()[-n:].decode(errors="replace")

    def finish(self, limit_s: float) -> dict:
        try:
            self.proc.wait(limit_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise CrashLoopFailure(f"{self.protocol} writer did not finish:\n{self.tail()}") from None
        for line in self.log.read_text(errors="replace").splitlines():
            if line.startswith('{"event": "done"'):
                return json.loads(line)
        raise CrashLoopFailure(f"{self.protocol} writer ended without its verdict:\n{self.tail()}")


def read_journal(path: Path) -> bytearray:
    """One byte per sequence number: 1 where the writer journaled an acknowledgement."""
    acked = bytearray()
    with open(path, encoding="ascii") as f:
        for line in f:
            first, last = (int(x) for x in line.split())
            if last >= len(acked):
                acked.extend(bytes(last + 1 - len(acked)))
            acked[first:last + 1] = b"\x01" * (last + 1 - first)
    return acked


def check(broker, protocol: str, acked: bytearray, sent: int) -> Result:
    """Compare what ``protocol``'s topic holds in ``broker`` (core's, opened on the data
    directory) with its writer's journal."""
    res = Result(protocol, acked=acked.count(1))
    counts = bytearray(max(sent, len(acked)))   # copies stored per sequence, saturating at 255
    stream, topic = TOPICS[protocol]
    try:
        info = broker.get_topic(stream, topic)
    except Exception:  # noqa: BLE001 - never created: the writer never got an ack either
        info = None
    for pid in range(info.partitions_count if info else 0):
        end, offset, highest = broker.partition(stream, topic, pid).next_offset, 0, -1
        unit = ORDER_UNIT.get(protocol, 1)
        while offset < end:
            msgs = broker.read_messages(stream, topic, pid, offset, READ_CHUNK)
            if not msgs:
                raise CrashLoopFailure(f"{protocol}: nothing readable at offset {offset} of {end}")
            for m in msgs:
                res.records += 1
                head, sep, _ = bytes(m.payload[:24]).partition(b":")
                if not sep or not head.isdigit() or int(head) >= len(counts):
                    res.foreign += 1
                    continue
                seq = int(head)
                if counts[seq]:
                    res.duplicated += 1
                elif seq // unit < highest // unit:
                    res.out_of_order += 1
                highest = max(highest, seq)
                counts[seq] = min(counts[seq] + 1, 255)
            offset = msgs[-1].offset + 1
    res.stored = len(counts) - counts.count(0)
    res.lost = sum(1 for seq, a in enumerate(acked) if a and not counts[seq])
    return res


def write_config(work: Path, protocols: list[str], iggy_dedup: bool) -> Path:
    # [iggy] message_deduplication: Iggy's per-partition window of message ids (off by
    # default, as upstream's [system.message_deduplication]; docs/iggy.md, docs/configuration.md)
    toml = ["[iggy]\nmessage_deduplication = true\n"] if iggy_dedup else []
    for proto in ("iggy", "http", "kafka"):
        if proto in protocols:
            toml.append(f'[[binding]]\nstream = "{W.STREAM}"\ntopic = "{TOPICS[proto][1]}"\ncreate = true\n')
    path = work / "ferry.toml"
    path.write_text("\n".join(toml))
    return path


def interpreters(args) -> dict[str, str]:
    clients = ROOT / ".venv" / "clients"
    pythons = {p: sys.executable for p in PROTOCOLS}
    pythons["iggy"] = args.iggy_python or str(clients / "apache-iggy__0.9.0" / "bin" / "python")
    pythons["pravega"] = args.pravega_python or str(clients / "pravega__0.3.8" / "bin" / "python")
    return pythons


def run(args: argparse.Namespace, work: Path, out=sys.stdout) -> Report:
    """The whole loop in ``work`` (data dir, journals, logs); the verdict per protocol."""
    protocols = args.protocols
    names = [n for p in protocols for n in LISTENERS[p]]
    ports = dict(zip(names, free_ports(len(names))))
    config = write_config(work, protocols, args.iggy_dedup)
    server = Server(work, ports, args.fsync, config)
    rng = random.Random(args.seed)
    pythons = interpreters(args)
    writers: dict[str, WriterProcess] = {}
    began = time.monotonic()
    # A personal access token of the root user for the Iggy and NATS writers, made before
    # the first start as tests/gateway/test_gw_kill.py does: logging in with it is a hash
    # lookup, with the password an argon2 verification at every reconnect (under load, long
    # enough for nats-py's connect to meet the server's authentication timeout).
    with Broker.open(work / "data") as broker:
        token = broker.meta.users.create_pat(0, f"crash-loop-{os.getpid()}-{int(time.time())}")
    try:
        server.start()
        for i, proto in enumerate(protocols):
            writers[proto] = WriterProcess(proto, pythons[proto], work, ports[DIAL[proto]], args.seed * 10 + i,
                                           args.size, token)
        for cycle in range(args.cycles):
            if cycle:
                server.start()
            took = _wait_for_acks(writers, server)
            time.sleep(rng.uniform(*args.kill_after))
            server.kill()
            if args.verbose:
                print(f"{time.monotonic() - began:6.1f} s cycle {cycle + 1}/{args.cycles}: killed, journal bytes "
                      + " ".join(f"{p}={w.progress()}" for p, w in writers.items()) + ", first ack after "
                      + " ".join(f"{p}={s:.1f}s" for p, s in took.items()), file=out, flush=True)
        server.start()   # the last start: writers finish what is outstanding, then stop
        (work / "stop").touch()
        verdicts = {p: w.finish(WRITER_END_LIMIT_S) for p, w in writers.items()}
        server.stop()
    finally:
        for w in writers.values():
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait()
        server.kill()
    results = {}
    with Broker.open(work / "data") as broker:
        for proto in protocols:
            res = check(broker, proto, read_journal(writers[proto].journal), verdicts[proto]["sent"])
            res.writer = verdicts[proto]
            res.no_dup = proto in IDEMPOTENT or (args.iggy_dedup and proto in ("iggy", "http"))
            results[proto] = res
    return Report(results, args.cycles, time.monotonic() - began, server.errors())


def _wait_for_acks(writers: dict[str, WriterProcess], server: Server) -> dict[str, float]:
    """Until every writer journaled an ack from the server just started; the seconds each took."""
    before = {p: w.progress() for p, w in writers.items()}
    began, took = time.monotonic(), {}
    deadline = time.monotonic() + PROGRESS_LIMIT_S
    waiting = set(writers)
    while waiting:
        for p in list(waiting):
            writers[p].check_alive()
            if writers[p].progress() > before[p]:
                waiting.discard(p)
                took[p] = time.monotonic() - began
        if server.proc.poll() is not None:
            raise CrashLoopFailure(f"ferry serve exited ({server.proc.returncode}) on its own")
        if waiting and time.monotonic() > deadline:
            raise CrashLoopFailure(f"no ack within {PROGRESS_LIMIT_S} s from {sorted(waiting)}:\n"
                                   + "\n".join(writers[p].tail(1500) for p in waiting))
        time.sleep(0.02)
    return took


def print_report(rep: Report, args, out=sys.stdout) -> None:
    print(f"\ncrash loop: {rep.cycles} kill -9 cycles, fsync {args.fsync}, seed {args.seed}, kill after "
          f"{args.kill_after[0]}-{args.kill_after[1]} s, Iggy dedup {'on' if args.iggy_dedup else 'off'}, "
          f"{rep.elapsed_s:.0f} s", file=out)
    head = ("protocol", "acked", "stored", "lost", "duplicated", "out of order", "resent", "reconnects",
            "unacked", "promise")
    rows = [head]
    for p, r in rep.results.items():
        wr = r.writer
        rows.append((p, f"{r.acked:,}", f"{r.stored:,}", f"{r.lost:,}", f"{r.duplicated:,}", f"{r.out_of_order:,}",
                     f"{wr.get('resent', 0):,}", f"{wr.get('reconnects', 0):,}", f"{wr.get('failed', 0):,}",
                     "no dup" if r.no_dup else "at least once"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    for row in rows:
        print("  ".join(c.rjust(wd) if i else c.ljust(wd) for i, (c, wd) in enumerate(zip(row, widths))), file=out)
    for p, r in rep.results.items():
        if r.foreign:
            print(f"{p}: {r.foreign} stored records no writer sent", file=out)
        if r.writer.get("duplicate_acks"):
            print(f"{p}: {r.writer['duplicate_acks']:,} resent publishes acknowledged as duplicates (stored "
                  "before a kill, recognised by their Nats-Msg-Id)", file=out)
        if r.writer.get("errors"):
            print(f"{p} writer errors (first kinds): {r.writer['errors']}", file=out)
    if rep.server_errors:
        print(f"server log: {len(rep.server_errors)} ERROR/Traceback lines, first: {rep.server_errors[:3]}", file=out)
    print("PASS" if rep.ok else "FAIL: " + ", ".join(p for p, r in rep.results.items() if r.failed), file=out)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=100, help="kill -9 cycles (default 100)")
    ap.add_argument("--seed", type=int, default=20261129, help="seeds the kill moments and the payloads")
    ap.add_argument("--fsync", choices=("batch", "always", "never"), default="batch")
    ap.add_argument("--protocols", default=",".join(PROTOCOLS),
                    type=lambda s: [p for p in s.split(",") if p], help=f"comma list of {','.join(PROTOCOLS)}")
    ap.add_argument("--kill-after", default="0.5,2", type=lambda s: tuple(float(x) for x in s.split(",")),
                    help="MIN,MAX seconds after every writer's first ack of the cycle (default 0.5,2)")
    ap.add_argument("--data", help="work in DIR (data, journals, logs; kept); default: a temp dir here")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument("--size", type=int, default=64, help="payload bytes (default 64)")
    ap.add_argument("--iggy-dedup", action="store_true",
                    help="turn on Iggy's message deduplication ([iggy] message_deduplication): Iggy binary "
                         "and HTTP then promise no duplicate too")
    ap.add_argument("--iggy-python", help="interpreter with apache-iggy 0.9 (default .venv/clients/...)")
    ap.add_argument("--pravega-python", help="interpreter with pravega 0.3.8 (default .venv/clients/...)")
    ap.add_argument("-v", "--verbose", action="store_true", help="a line per cycle")
    args = ap.parse_args(argv)
    unknown = set(args.protocols) - set(PROTOCOLS)
    if unknown or len(args.kill_after) != 2 or args.kill_after[0] > args.kill_after[1]:
        ap.error(f"bad --protocols {sorted(unknown)} or --kill-after {args.kill_after}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.data:
        work = Path(args.data).resolve()
        work.mkdir(parents=True, exist_ok=True)
        keep = True
    else:
        # Here, not in /tmp: a tmpfs would make fsync meaningless (bench/README.md).
        work, keep = Path(tempfile.mkdtemp(prefix="crash-loop-", dir=".")).resolve(), args.keep
    ok = False
    try:
        rep = run(args, work)
        print_report(rep, args)
        ok = rep.ok
    except CrashLoopFailure as exc:
        print(f"\nFAILED: {exc}", file=sys.stderr)
    finally:
        if keep or not ok:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
