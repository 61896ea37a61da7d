"""Shared fixtures: a real gateway in a background thread, for real-client tests.

Clients such as nats-py run on asyncio (or in subprocesses), so the gateway
runs under ``trio.run`` in its own thread, listeners on 127.0.0.1 port 0, and
the test talks to it over loopback exactly as a user's client would.
"""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
from urllib.parse import quote

import pytest
import trio
from serve_banner import read_until_ready  # noqa: F401 - also for the tests that import it from here

from gateway.config import load_config
from gateway.server import run_gateway

START_LIMIT_S = 30  # a gateway that has not bound its ports by then is a failure


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for servers that need a fixed port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports: all bound at once, then released (one
    free_port() after another can hand out the same port twice)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def wait_for_port(port: int, *, timeout: float, proc=None, interval: float = 0.02) -> bool:
    """True once 127.0.0.1:``port`` accepts a connection; False when ``proc``
    (a Popen) exits first or ``timeout`` seconds pass. Callers say what failed."""
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(interval)


def serve_process(cwd: Path, data: Path, *args: str, limit_s: float = 60,
                  busy_port_wait_s: float = 0) -> tuple[subprocess.Popen, str]:
    """``ferry serve --data DATA --host 127.0.0.1 ARGS`` as a real process (for kill -9
    tests), no FERRY_* variables inherited; returns it and its banner once it printed
    ``ready``. ``limit_s`` bounds a hung start (not a timing assertion).

    ``busy_port_wait_s``: a restart on the fixed ports of a process just killed may find
    a port still held by the old connections' sockets (Linux lets SO_REUSEADDR rebind
    past TIME_WAIT, not past FIN_WAIT); the server then exits with "cannot listen" and
    is started again until this many seconds pass."""
    deadline = time.monotonic() + busy_port_wait_s
    while True:
        try:
            return _serve_once(cwd, data, args, limit_s)
        except _PortBusy:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class _PortBusy(AssertionError):
    pass


def _serve_once(cwd: Path, data: Path, args, limit_s: float) -> tuple[subprocess.Popen, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FERRY_")} | {"PYTHONUNBUFFERED": "1"}
    log_path = Path(cwd) / "serve-stderr.log"
    with open(log_path, "ab") as errors:  # every attempt kept, for the failure message
        proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--data", str(data), "--host",
                                 "127.0.0.1", *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=errors)
    def exited(code: int, buf: bytes) -> Exception:
        proc.stdout.close()
        tail = log_path.read_bytes()[-3000:].decode(errors="replace")  # this attempt's end
        error = _PortBusy if "cannot listen" in tail else AssertionError
        return error(f"server exited ({code}): {buf!r}\nstderr (tail):\n{tail}")

    try:
        return proc, read_until_ready(proc, limit_s, exited)
    except TimeoutError as hung:
        proc.kill()
        raise AssertionError(f"server did not start: {hung}") from None


def kill_process(proc: subprocess.Popen) -> None:
    """SIGKILL (no flush, no close) and reap a :func:`serve_process` process."""
    proc.kill()
    proc.wait()
    proc.stdout.close()


class GatewayThread:
    """A gateway running in a thread: ``ports``, ``url()`` and ``stop()``. Create
    topics with ``[[binding]] create = true`` in its TOML; read what it stored by
    opening its data directory after ``stop()``."""

    def __init__(self, cfg) -> None:
        self.cfg = cfg
        self.ports: dict[str, int] = {}
        self.out = io.StringIO()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="ferry-gateway", daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self._token = trio.lowlevel.current_trio_token()
            self._stop = trio.Event()
            async with trio.open_nursery() as nursery:
                self.ports = await nursery.start(
                    lambda task_status: run_gateway(self.cfg, self._stop, out=self.out, task_status=task_status))
                self._ready.set()
        try:
            trio.run(main)
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread
            self._error = exc
        finally:
            self._ready.set()

    def start(self) -> "GatewayThread":
        self._thread.start()
        if not self._ready.wait(START_LIMIT_S) or self._error is not None:
            raise RuntimeError(f"gateway did not start: {self._error!r}")
        return self

    def url(self, listener: str = "nats", scheme: str = "nats", *, login: bool = True) -> str:
        """The listener's URL. NATS clients log in as Ferry users under ``ferry
        serve`` (docs/nats.md "Authentication and permissions"): for the nats and
        nats_ws listeners the URL carries the root user's credentials (nats-py
        reads them from it) unless ``login`` is False or the listener runs in
        nats-server's model (``auth_mode = "nats-server"``)."""
        creds = self.nats_credentials() if login and listener in ("nats", "nats_ws") else None
        userinfo = f"{quote(creds[0], safe='')}:{quote(creds[1], safe='')}@" if creds else ""
        return f"{scheme}://{userinfo}127.0.0.1:{self.ports[listener]}"

    def nats_credentials(self) -> tuple[str, str] | None:
        """(user, password) NATS clients of this gateway log in with (the root
        user's), or None when the NATS listener uses nats-server's own model."""
        try:
            mode = self.cfg.listener("nats").options.get("auth_mode", "ferry")
        except KeyError:
            mode = "ferry"
        if mode != "ferry":
            return None
        return self.cfg.auth.root_username, self.cfg.auth.root_password

    def stop(self) -> None:
        if self._token is not None and self._stop is not None and self._thread.is_alive():
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(60)
        if self._thread.is_alive():
            raise RuntimeError("gateway did not stop within 60 s")


# FERRY_TEST_STORE=jetstream (`make test`'s second pass over the tests marked `store`):
# every gateway these helpers start keeps its state in one 3-node nats-server JetStream
# cluster shared by the test session, each under a store prefix of its own, so each
# still starts empty (docs/scale-out.md, "Tests").
TEST_STORE = os.environ.get("FERRY_TEST_STORE", "")
_shared_cluster = None
_prefixes = iter(range(1, 1 << 30))


def shared_cluster():
    """The session's JetStream cluster for FERRY_TEST_STORE=jetstream (started on first use,
    killed at exit by NatsCluster's own atexit hook)."""
    global _shared_cluster
    if _shared_cluster is None:
        import tempfile

        from nats_cluster import NatsCluster

        cluster = NatsCluster(Path(tempfile.mkdtemp(prefix="ferry-store-")), 3)
        cluster.__enter__()
        _shared_cluster = cluster
    return _shared_cluster


def store_env() -> dict[str, str]:
    """The FERRY_STORE_* settings of a gateway in this session's store mode."""
    if TEST_STORE == "jetstream":
        return {"FERRY_STORE_URL": shared_cluster().url, "FERRY_STORE_PREFIX": f"S{os.getpid()}x{next(_prefixes)}"}
    return {}


def gateway_config(tmp_path: Path, toml: str = "", **env: str):
    """A config with every listener on 127.0.0.1 port 0 and data under ``tmp_path``."""
    from gateway.registry import default_registry
    path = tmp_path / "ferry.toml"
    path.write_text(toml)
    base = {"FERRY_SERVER_DATA_DIR": str(tmp_path / "data"), "FERRY_SERVER_HOST": "127.0.0.1",
            "FERRY_SERVER_GRACE_SECONDS": "5", "FERRY_LOG_FSYNC": "batch"}
    for name in default_registry().specs:
        base[f"FERRY_{name.upper()}_PORT"] = "0"
    return load_config(path, env=base | store_env() | env)


@contextmanager
def running_gateway(tmp_path: Path, toml: str = "", **env: str) -> Iterator[GatewayThread]:
    """Start a gateway (every listener on a free port), yield it, stop it."""
    gw = GatewayThread(gateway_config(tmp_path, toml, **env)).start()
    try:
        yield gw
    finally:
        gw.stop()


@pytest.fixture
def gateway(tmp_path):
    """A running gateway with default settings (see :func:`running_gateway`)."""
    with running_gateway(tmp_path) as gw:
        yield gw
