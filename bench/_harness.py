"""Helpers the bench scripts share (not a bench: nothing here runs on its own).

Server processes (a Ferry or nats-server subprocess: free ports, waiting until it
listens or prints its ``ready`` banner, its log's new error lines, stopping it), client
processes that set up, report ``ready`` and start on one ``go`` (subprocesses speaking
JSON lines, or forked asyncio coroutines) and the timed cell that runs them, CPU time
from /proc, percentiles, py-spy profiles of a server, a table printed row by row and
again as Markdown, and a bench's temp dir. The benches import it as ``_harness``:
their own directory is on ``sys.path`` when they run as scripts.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path


class BenchFailure(Exception):
    """A server or a client misbehaved (error, hang, wrong count): the bench stops here."""


# -- server processes ---------------------------------------------------------------------------
# The benchmarks' clients (nats-py, the raw JetStream API helper, the pravega client)
# talk to Ferry and to the reference servers alike, without credentials: the gateway
# under test admits them as the root user (docs/security.md "Opening a door on
# purpose"). Root's connections skip the permission checks, as a logged-in root's do,
# so this measures the same path a client logging in as root takes.
BENCH_DOORS = {"FERRY_NATS_ANONYMOUS_USER": "iggy", "FERRY_PRAVEGA_ANONYMOUS_USER": "iggy",
               "FERRY_PRAVEGA_CONTROLLER_ANONYMOUS_USER": "iggy"}


def ferry_env(**extra: str) -> dict[str, str]:
    """This process's environment without ``FERRY_*`` settings, plus the benchmark's
    open doors (:data:`BENCH_DOORS`) and ``extra``."""
    return {k: v for k, v in os.environ.items() if not k.startswith("FERRY_")} | BENCH_DOORS | extra


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen, limit_s: float, pause: float = 0.05,
                   connect_timeout: float = 0.2) -> bool:
    """True once 127.0.0.1:``port`` accepts a connection; False when ``proc`` exited first
    (``proc.poll()`` says so) or ``limit_s`` passed."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=connect_timeout).close()
            return True
        except OSError:
            time.sleep(pause)
    return False


def wait_banner(proc: subprocess.Popen, log: Path, limit_s: float, fail: type[BaseException] = BenchFailure,
                who: str = "gateway", log_tail: int | None = 4000) -> str:
    """The banner ``ferry serve`` prints on its stdout (a pipe), up to its ``ready`` line.
    ``fail`` is raised when it exits first (with the end of its log) or is not ready
    within ``limit_s`` (then it is stopped)."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    buf, deadline = b"", time.monotonic() + limit_s
    try:
        while not buf.endswith(b"\nready\n"):
            if not sel.select(max(deadline - time.monotonic(), 0)):
                stop(proc)
                raise fail(f"{who} did not start: {buf!r}")
            got = os.read(proc.stdout.fileno(), 65536)
            if not got:  # it exited (a config error, say)
                text = log.read_text(errors="replace")
                raise fail(f"{who} exited with {proc.wait()} before it was ready: {buf!r}\n"
                           f"{text[-log_tail:] if log_tail else text}")
            buf += got
    finally:
        sel.close()
    return buf.decode()


def stop(*procs: subprocess.Popen, sig: int = signal.SIGTERM, group: bool = False, timeout: float = 30) -> None:
    """``sig`` to every process still running (with ``group``, to its whole process group:
    started with ``start_new_session``), then wait up to ``timeout`` s for each before SIGKILL."""
    def send(proc: subprocess.Popen, s: int) -> None:
        if group:
            os.killpg(proc.pid, s)
        else:
            proc.send_signal(s)

    running = [p for p in procs if p.poll() is None]
    for proc in running:
        send(proc, sig)
    for proc in running:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            send(proc, signal.SIGKILL)
            proc.wait()


def cpu_seconds(pid: int | None) -> float:
    """utime + stime of a process (Linux /proc; 0 elsewhere or without a pid)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


class ServerProcess:
    """A server subprocess whose output goes to the file ``log``: ``problems()`` (the lines
    that ``problem`` flags among those logged since the last call), ``tail()``, ``stop()``.
    A subclass starts ``proc`` and then calls ``__init__``."""

    log_pos = 0

    def __init__(self, name: str, proc: subprocess.Popen, log: Path, problem: Callable[[str], bool],
                 group: bool = False) -> None:
        self.name, self.proc, self.log, self.problem, self.group = name, proc, log, problem, group

    @property
    def pid(self) -> int:
        return self.proc.pid

    def problems(self) -> list[str]:
        data = self.log.read_bytes()
        new, self.log_pos = data[self.log_pos:].decode(errors="replace"), len(data)
        return [ln for ln in new.splitlines() if self.problem(ln)]

    def tail(self, n: int = 40) -> str:
        lines = self.log.read_text(errors="replace").splitlines()
        return "\n".join(f"  | {ln}" for ln in lines[-n:])

    def stop(self) -> None:
        stop(self.proc, group=self.group)


# -- client processes: set up, "ready", wait for "go", one result -----------------------------------
class Client:
    """One client subprocess running ``script`` with ``python`` (``cfg`` as JSON in argv[1]):
    JSON lines on stdout (the Rust clients also log there: only lines starting with ``{``
    are data), "go" on its stdin, its stderr in ``log``."""

    def __init__(self, python: Path, script: str, cfg: dict, log: Path) -> None:
        self.cfg, self.log, self.buf = cfg, log, b""
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"RUST_LOG": "warn",
                                                                           "RUST_BACKTRACE": "1"}
        self.err = open(log, "ab")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen([str(python), "-u", "-c", script, json.dumps(cfg)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, env=env)
        self.out_lines: list[str] = []

    def expect(self, key: str, deadline: float, server: ServerProcess) -> dict:
        """The next JSON line that has ``key``; BenchFailure on exit, past ``deadline``, or
        when ``server`` exits first (the client would retry for minutes)."""
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                text = line.decode(errors="replace")
                self.out_lines.append(text)
                if text.startswith("{"):
                    msg = json.loads(text)
                    if key in msg:
                        return msg
            if server.proc.poll() is not None:
                self.kill()
                raise BenchFailure(f"the {server.name} exited ({server.proc.returncode}) while client "
                                   f"{self.cfg['mode']} waited for '{key}'\n" + self.tail())
            if time.monotonic() >= deadline:
                self.kill()
                raise BenchFailure(f"client {self.cfg['mode']} {self.cfg} hung (no '{key}' within the limit)\n"
                                   + self.tail())
            with selectors.DefaultSelector() as sel:
                sel.register(fd, selectors.EVENT_READ)
                if not sel.select(min(max(deadline - time.monotonic(), 0), 1.0)):
                    continue
            got = os.read(fd, 1 << 20)
            if not got:
                code = self.proc.wait()
                raise BenchFailure(f"client {self.cfg['mode']} exited with {code} before '{key}'\n" + self.tail())
            self.buf += got

    def go(self) -> None:
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    def tail(self) -> str:
        self.err.flush()
        return ("stdout (tail):\n" + "\n".join(self.out_lines[-15:]) + "\nstderr (tail):\n"
                + self.log.read_text(errors="replace")[-3000:])

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()
        self.err.close()


def _forked(target, conn, cfg) -> None:
    """Run one client coroutine; whatever happens, one result dict goes back."""
    try:
        res = asyncio.run(target(conn, cfg))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        res = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-1500:]}
    try:
        conn.send(res)
    except (BrokenPipeError, OSError):
        pass
    os._exit(0)


def wait_go(conn) -> bool:
    """In a forked client, once set up: report ready, then wait for "go"."""
    conn.send({"ready": True})
    return conn.recv() == "go"


def client_failed(label: str, srv: ServerProcess, r: dict) -> str:
    what = r.get("error") or "; ".join(r.get("errors", [])[:5])
    return f"{label} on {srv.name}: {what}\n{r.get('trace', '')}\n{srv.name} log (tail):\n{srv.tail()}"


class ForkedClient:
    """A client forked from this process (``ctx``: a fork context): ``target(conn, cfg)``, a
    coroutine run by asyncio, calls ``wait_go(conn)`` once set up and returns one result dict
    (an exception: ``{"error", "trace"}``), sent back through a pipe."""

    def __init__(self, ctx, label: str, target, cfg: dict) -> None:
        self.label = label
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_forked, args=(target, child, cfg), daemon=True)
        self.proc.start()
        child.close()

    def expect(self, key: str | None, deadline: float, srv: ServerProcess) -> dict:
        """The client's next message, which must have ``key`` (None: any, an error too)."""
        while not self.conn.poll(0.5):
            if srv.proc.poll() is not None:
                raise BenchFailure(f"{self.label}: {srv.name} exited ({srv.proc.returncode})\n{srv.tail()}")
            if time.monotonic() > deadline:
                raise BenchFailure(f"{self.label}: a client on {srv.name} hung (no answer within the limit)\n"
                                   f"{srv.tail()}")
        try:
            msg = self.conn.recv()
        except EOFError:
            msg = {"error": "client process died without a result"}
        if key is not None and key not in msg:
            raise BenchFailure(client_failed(self.label, srv, msg))
        return msg

    def go(self) -> None:
        self.conn.send("go")

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()

    def close(self) -> None:
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        self.conn.close()


def run_cell(clients: Iterable, server: ServerProcess, ready_s: float, result_key: str | None, result_s: float,
             profiler: Callable[[], Profiler] | None = None) -> tuple[list[dict], float, str | None]:
    """One timed cell: the ``clients`` (Client or ForkedClient, started as the iterable is
    walked) all ``ready`` within ``ready_s``, then ``profiler()`` attached to the server, then
    "go" to every one, and each one's message with ``result_key`` within ``result_s`` of "go".
    Returns the results, the server's CPU seconds from "go" to the last result, and the
    profile (None without a profiler). On a failure the clients are killed."""
    started, prof, profile = [], None, None
    try:
        started.extend(clients)  # on a failure to start one, those started before are in the list
        deadline = time.monotonic() + ready_s
        for c in started:
            c.expect("ready", deadline, server)
        if profiler:
            prof = profiler()
        cpu0 = cpu_seconds(server.pid)
        for c in started:
            c.go()
        deadline = time.monotonic() + result_s
        results = [c.expect(result_key, deadline, server) for c in started]
        srv_cpu = cpu_seconds(server.pid) - cpu0
    except BaseException:
        for c in started:
            c.kill()
        raise
    finally:
        if prof:
            profile = prof.stop()
        for c in started:
            c.close()
    return results, srv_cpu, profile


# -- numbers ------------------------------------------------------------------------------------
def pct(vals: list, q: float) -> float:
    """The ``q`` quantile of sorted ``vals`` (0.0 when empty)."""
    return vals[min(len(vals) - 1, int(len(vals) * q))] if vals else 0.0


class Table:
    """Rows printed one by one as a fixed-width table, and at the end again as Markdown.
    A column: ``(head, width, text, md_head, md_align, md)``: ``f"{head:>{width}}"`` (a
    head starting with ``<`` is left-aligned, the ``<`` dropped) above ``text(row)``
    padded the same way; ``md_head`` (None: not in the Markdown table, a gap), ``md_align``
    ``---`` or ``---:`` and ``md(row)`` in the Markdown one."""

    def __init__(self, *cols: tuple) -> None:
        self.cols = cols

    @staticmethod
    def gap(width: int = 2) -> tuple:
        """Spaces between two columns of the text table."""
        return ("", width, lambda r: "", None, None, None)

    @staticmethod
    def ms(key: str, dash: str) -> Callable[[dict], str]:
        """A row's ``key`` (seconds) in milliseconds, or ``dash`` when it measured no latency."""
        return lambda r: f"{r[key] * 1e3:.2f}" if r["n_lat"] else dash

    @staticmethod
    def ratio(fmt: str) -> Callable[[dict], str]:
        """A row's ``ratio`` through ``fmt``, empty for a reference row (ratio None)."""
        return lambda r: fmt.format(r["ratio"]) if r["ratio"] is not None else ""

    @staticmethod
    def _pad(head: str, width: int, text: str) -> str:
        return f"{text:<{width}}" if head.startswith("<") else f"{text:>{width}}"

    def header(self) -> str:
        return "".join(self._pad(head, width, head.removeprefix("<")) for head, width, *_ in self.cols)

    def row(self, r: dict) -> str:
        return "".join(self._pad(head, width, text(r)) for head, width, text, *_ in self.cols)

    def markdown(self, rows: list[dict]) -> str:
        cols = [c for c in self.cols if c[3] is not None]
        lines = ["| " + " | ".join(c[3] for c in cols) + " |", "|" + "|".join(c[4] for c in cols) + "|"]
        lines += ["| " + " | ".join(c[5](r) for c in cols) + " |" for r in rows]
        return "\n".join(lines)


def versus_iggy_table(*, unit: str, rate: str, cell_width: int, lat_width: int, cpu_width: int,
                      cpu_digits: int) -> Table:
    """The table of a protocol's benchmark against the Iggy path on the same gateway: size,
    cell, client, ``rate`` (msgs/s, events/s), MB/s, ack latency p50/p99, the server's and
    the client's CPU per ``unit`` and the ratio to the Iggy reference row."""
    cpu = f"{{:.{cpu_digits}f}}"
    return Table(
        ("size", 5, lambda r: str(r["size"]) if r["cell"] else "", "size", "---:",
         lambda r: str(r["size"]) if r["cell"] else ""),
        Table.gap(),
        ("<cell", cell_width, lambda r: r["cell"], "cell", "---", lambda r: r["cell"]),
        ("<client", 52, lambda r: r["side"], "client", "---", lambda r: r["side"]),
        (rate, 10, lambda r: f"{r['rate']:,.0f}", rate, "---:", lambda r: f"{r['rate']:,.0f}"),
        ("MB/s", 8, lambda r: f"{r['mbs']:.1f}", "MB/s", "---:", lambda r: f"{r['mbs']:.1f}"),
        ("p50 ms", lat_width, Table.ms("p50", "-"), "p50 ms", "---:", Table.ms("p50", "–")),
        ("p99 ms", lat_width, Table.ms("p99", "-"), "p99 ms", "---:", Table.ms("p99", "–")),
        (f"srv us/{unit}", cpu_width, lambda r: cpu.format(r["srv"]), f"srv µs/{unit}", "---:",
         lambda r: cpu.format(r["srv"])),
        (f"cli us/{unit}", cpu_width, lambda r: cpu.format(r["cli"]), f"cli µs/{unit}", "---:",
         lambda r: cpu.format(r["cli"])),
        ("x iggy", 8, Table.ratio("{:.2f}"), "× iggy", "---:", Table.ratio("**{:.2f}**")),
    )


# -- py-spy -------------------------------------------------------------------------------------
class Profiler:
    """``py-spy record`` of a server while a cell runs (attached before "go", stopped by
    SIGINT to its own pid after the cell), raw collapsed stacks in ``out``; ``stop()``
    returns ``summarize(out)``."""

    def __init__(self, py_spy: str, pid: int, out: Path, rate: int, flags: Iterable[str],
                 summarize: Callable[[Path], str]) -> None:
        self.out, self.summarize = out, summarize
        self.proc = subprocess.Popen([py_spy, "record", "-p", str(pid), "-r", str(rate), "-f", "raw", *flags,
                                      "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)  # attached before the clients start

    def stop(self) -> str:
        stop(self.proc, sig=signal.SIGINT)
        return self.summarize(self.out) if self.out.exists() else self.proc.stderr.read().decode()


def summarize_stacks(path: Path, *, project: re.Pattern, skip: str, threads: bool, top: int, head: str,
                     others: str, idle: str | None = None) -> str:
    """Where a server's event loop (its main thread) spends the samples of a py-spy raw
    profile: the innermost ``project`` frame of each (its own time plus the trio/stdlib
    calls under it; ``skip``: frames that do not count) and inclusive counts per project
    function, then the innermost project frames of the other threads' samples. ``threads``:
    stacks start with the thread (py-spy ``--threads``), else the main thread's start with
    ``_run_module_as_main``. ``idle``: a main-thread sample whose innermost frame has it is
    idle. ``head`` and ``others`` are the first and last lines (``str.format`` fields: main,
    idle (a fraction of main), busy; the other threads' sample count)."""
    own, incl, workers = Counter(), Counter(), Counter()
    main = idle_n = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n, frames = int(count), stack.split(";")
        if threads:
            on_main, frames = "MainThread" in frames[0], frames[1:]
        else:
            on_main = frames[0].startswith("_run_module_as_main")
        frames = [re.sub(r":\d+\)", ")", f) for f in frames] or ["?"]
        if not on_main:
            ferry = [f for f in frames if project.search(f)]
            workers[ferry[-1] if ferry else frames[-1]] += n
            continue
        main += n
        if idle and idle in frames[-1]:
            idle_n += n
            continue
        names = [f for f in frames if project.search(f) and not re.search(skip, f)]
        own[names[-1] if names else "(trio / stdlib only) " + frames[-1]] += n
        for f in set(names):
            incl[f] += n
    busy = max(main - idle_n, 1)
    lines = [head.format(main=main, idle=idle_n / max(main, 1), busy=main - idle_n)]
    lines += [f"    {n / busy:6.1%}  {f}" for f, n in own.most_common(top)]
    lines += ["  inclusive (Ferry functions on the stack):"]
    lines += [f"    {n / busy:6.1%}  {f}" for f, n in incl.most_common(top)]
    lines += [others.format(sum(workers.values())) + ", ".join(f"{f} {n}" for f, n in workers.most_common(3))]
    return "\n".join(lines)


# -- a bench's run ------------------------------------------------------------------------------
def in_temp_dir(prefix: str, where: str, keep: bool, body: Callable[[Path], None],
                failure_note: Callable[[Path], str] | None = None) -> int:
    """``body(tmp)`` with a new temp dir under ``where``: 0, or 1 after printing its
    BenchFailure (and ``failure_note(tmp)``) to stderr. The dir is removed at the end,
    unless ``keep`` or on a failure."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=where)).resolve()
    try:
        body(tmp)
        return 0
    except BenchFailure as exc:
        print(f"\nFAILED: {exc}{failure_note(tmp) if failure_note else ''}", file=sys.stderr)
        keep = True
        return 1
    finally:
        if keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
