"""Messages acknowledged to an Iggy producer survive kill -9 of the server (issue 5).

``ferry serve`` runs as a real process with ``--fsync always``; the real
apache-iggy 0.8.0 client sends batches and reports each ack; the server is
killed with SIGKILL right after the last ack, restarted on the same data
directory, and every acknowledged message must be there, in order."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from ferry_harness import kill_process, serve_process
from gateway.registry import default_registry
from iggy_clients import SCENARIO_TIMEOUT_S, SCRIPTS, client_python

pytestmark = pytest.mark.slow
START_LIMIT_S = 60  # bounds a hung start; not a timing assertion


def start_server(tmp_path: Path, data: Path) -> tuple[subprocess.Popen, int]:
    ports = [a for name in default_registry().known() for a in (f"--{name.replace('_', '-')}-port", "0")]
    proc, banner = serve_process(tmp_path, data, "--fsync", "always", *ports)
    port = re.search(r"^\s+iggy_tcp +127\.0\.0\.1:(\d+)/tcp", banner, re.M)
    assert port, banner
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
        kill_process(proc)
    assert [a["acked"] for a in acks] == list(range(20))
    proc, port = start_server(tmp_path, data)
    try:
        payloads = client(port, "poll")[0]["payloads"]
    finally:
        kill_process(proc)
    assert payloads == [f"m-{b}-{i}" for b in range(20) for i in range(50)]
