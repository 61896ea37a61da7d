"""Messages acknowledged to an Iggy producer survive kill -9 of the server (issue 5).

``ferry serve`` runs as a real process with ``--fsync always``; the real
apache-iggy 0.8.0 client sends batches and reports each ack; the server is
killed with SIGKILL right after the last ack, restarted on the same data
directory, and every acknowledged message must be there, in order."""

from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gateway.registry import default_registry
from iggy_clients import SCENARIO_TIMEOUT_S, SCRIPTS, client_python

pytestmark = pytest.mark.slow
START_LIMIT_S = 60  # bounds a hung start; not a timing assertion


def start_server(tmp_path: Path, data: Path) -> tuple[subprocess.Popen, int]:
    ports = [a for name in default_registry().known() for a in (f"--{name.replace('_', '-')}-port", "0")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FERRY_")} | {"PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--data", str(data), "--host", "127.0.0.1",
                             "--fsync", "always", *ports], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline, buf = time.monotonic() + START_LIMIT_S, b""
    while not buf.endswith(b"\nready\n"):
        if not sel.select(max(deadline - time.monotonic(), 0)):
            proc.kill()
            raise AssertionError(f"server did not start: {buf!r}")
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            raise AssertionError(f"server exited: {buf!r}")
        buf += chunk
    sel.close()
    port = re.search(r"^\s+iggy_tcp +127\.0\.0\.1:(\d+)/tcp", buf.decode(), re.M)
    assert port, buf.decode()
    return proc, int(port.group(1))


def client(port: int, mode: str) -> list[dict]:
    proc = subprocess.run([str(client_python("apache-iggy==0.8.0")), str(SCRIPTS / "middle_durability.py"),
                           str(port), mode], capture_output=True, text=True, timeout=SCENARIO_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_acked_messages_survive_kill_9(tmp_path):
    data = tmp_path / "data"
    proc, port = start_server(tmp_path, data)
    try:
        acks = client(port, "send")
    finally:
        proc.kill()  # SIGKILL: no flush, no close
        proc.wait()
        proc.stdout.close()
    assert [a["acked"] for a in acks] == list(range(20))
    proc, port = start_server(tmp_path, data)
    try:
        payloads = client(port, "poll")[0]["payloads"]
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    assert payloads == [f"m-{b}-{i}" for b in range(20) for i in range(50)]
