"""`ferry serve` as a real process: banner, signals, exit codes, the data-dir lock."""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import subprocess
import time
from pathlib import Path

import pytest

from gateway.registry import default_registry
from gw_helpers import clean_env, ferry_cmd, run_ferry

pytestmark = pytest.mark.slow  # real subprocesses (the marker is informational; they run by default)

# Hard caps so a hung child fails the test instead of stalling the suite.
START_LIMIT_S = 30
EXIT_LIMIT_S = 30


def all_ports_zero() -> list[str]:
    """Port 0 for every listener this build knows, so nothing collides with the host."""
    return [arg for name in default_registry().known() for arg in (f"--{name.replace('_', '-')}-port", "0")]


class Server:
    def __init__(self, tmp_path: Path, *extra: str, data: Path | None = None) -> None:
        self.data = data or tmp_path / "data"
        self.stderr_path = tmp_path / f"stderr-{time.monotonic_ns()}.log"
        args = ["serve", "--data", str(self.data), "--host", "127.0.0.1", *all_ports_zero(), *extra]
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(ferry_cmd(*args), cwd=tmp_path, env=clean_env(),
                                         stdout=subprocess.PIPE, stderr=err)
        self.banner = self._read_until_ready()

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def _read_until_ready(self) -> str:
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + START_LIMIT_S
        buf = b""
        while not buf.endswith(b"\nready\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not sel.select(remaining):
                self.proc.kill()
                raise AssertionError(f"no 'ready' line; stdout={buf!r} stderr={self.stderr}")
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                raise AssertionError(f"exited with {self.proc.wait()}; stderr={self.stderr}")
            buf += chunk
        sel.close()
        return buf.decode()

    def stop(self, signum: int) -> int:
        self.proc.send_signal(signum)
        try:
            return self.proc.wait(timeout=EXIT_LIMIT_S)
        finally:
            self.proc.stdout.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


@pytest.fixture
def servers():
    started: list[Server] = []
    yield started
    for server in started:
        server.kill()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_prints_banner_and_exits_0_on_signal(tmp_path, servers, signum):
    server = Server(tmp_path)
    servers.append(server)
    banner = server.banner
    assert banner.startswith("Ferry ")
    assert f"data dir     {server.data}" in banner
    assert "fsync        batch" in banner
    assert "WARNING: the root user 'iggy' uses the default password" in banner
    for name in default_registry().known():
        row = re.search(rf"^    {name} +(.+)$", banner, re.M)
        assert row, name
        status = row.group(1)
        # A listener without a login says what it shows after its address (gateway/banner.py).
        assert status == "not available in this build" or re.fullmatch(r"127\.0\.0\.1:[1-9]\d*/(tcp|udp)( +\(no login: .*\))?", status)
    assert server.stop(signum) == 0
    assert "shutting down" in server.stderr and "broker closed" in server.stderr
    assert (server.data / "metadata.sqlite").exists()


def test_bench_harness_flags_and_json_logs(tmp_path, servers):
    # bench/ calls: ferry serve --nats-port {port} --data {store_dir} --fsync {default|always|none}
    server = Server(tmp_path, "--fsync", "none", "--log-format", "json")
    servers.append(server)
    assert "fsync        never" in server.banner
    assert server.stop(signal.SIGTERM) == 0
    records = [json.loads(line) for line in server.stderr.splitlines()]
    assert {"ts", "level", "logger", "msg"} <= set(records[0])
    assert any(r["msg"] == "shutting down" and r["grace_seconds"] == 5.0 for r in records)


def test_second_server_and_admin_commands_are_refused_while_one_runs(tmp_path, servers):
    server = Server(tmp_path)
    servers.append(server)
    second = run_ferry("serve", "--data", str(server.data), *all_ports_zero(), cwd=tmp_path)
    assert second.returncode == 2
    err = second.stderr.decode()
    assert err.startswith("ferry: error: data directory") and f"in use by process {server.proc.pid}" in err
    admin = run_ferry("stream", "list", "--data", str(server.data), cwd=tmp_path)
    assert admin.returncode == 2 and "stop the server first" in admin.stderr.decode()
    assert server.stop(signal.SIGINT) == 0
    # once the server is gone, the admin command works
    assert run_ferry("stream", "list", "--data", str(server.data), cwd=tmp_path).returncode == 0


def test_default_credentials_warning_disappears_with_a_password(tmp_path, servers):
    path = tmp_path / "ferry.toml"
    path.write_text('[auth]\nroot_password = "a-real-password"\n')
    server = Server(tmp_path, "--config", str(path))
    servers.append(server)
    assert "WARNING" not in server.banner and f"config       {path}" in server.banner
    assert server.stop(signal.SIGTERM) == 0
