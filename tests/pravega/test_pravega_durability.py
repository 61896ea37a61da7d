"""kill -9 of the gateway mid-write: the same pravega 0.3.8 writer continues after a
restart, and every event is stored exactly once (issue 12, "Definition of done").

``ferry serve`` runs as a real process on fixed ports (the client keeps the
controller URI and the segment store address it was given) with ``--fsync
always``. The writer script awaits its acks in waves; once a third of them are
in, the server gets SIGKILL and is restarted on the same data directory. The
client reconnects, re-runs SetupAppend, learns the last event number stored for
its writer id (kept in the log's batches, replayed on recovery) and resends only
what is missing; a reader group then reads each event exactly once."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from ferry_harness import free_port, kill_process, serve_process
from pravega_clients import SCENARIO_TIMEOUT_S, finish, json_head, start_scenario

pytestmark = pytest.mark.slow
EVENTS = 600


def start_server(tmp_path: Path, data: Path, seg_port: int, ctl_port: int) -> subprocess.Popen:
    # Fixed ports (the client keeps the addresses it was given): a restart may wait for the
    # killed server's sockets to let go of them.
    return serve_process(tmp_path, data, "--fsync", "always", "--only", "pravega,pravega_controller",
                         "--pravega-port", str(seg_port), "--pravega-controller-port", str(ctl_port),
                         busy_port_wait_s=30)[0]


def test_writer_survives_kill_9_without_loss_or_duplicates(tmp_path):
    data = tmp_path / "data"
    seg_port, ctl_port = free_port(), free_port()
    server = start_server(tmp_path, data, seg_port, ctl_port)
    client = start_scenario("killwrite.py", str(ctl_port), str(EVENTS), rust_log="warn")
    killed_at = None
    try:
        deadline = time.monotonic() + SCENARIO_TIMEOUT_S
        for line in client.stdout:  # the client's JSON lines, among its own log lines
            if line.startswith("{") and json_head(line).get("step") == "acked":
                n = json_head(line)["n"]
                if n >= EVENTS // 3:
                    killed_at = n
                    break
            assert time.monotonic() < deadline, "writer made no progress"
        assert killed_at is not None, "the writer ended before the kill"
        kill_process(server)
        server = start_server(tmp_path, data, seg_port, ctl_port)
        rest = finish(client, "killwrite.py")
    finally:
        if client.poll() is None:
            client.kill()
        kill_process(server)
    read = [line for line in rest if line["step"] == "read"][0]
    acked = [line["n"] for line in rest if line["step"] == "acked"]
    assert acked[-1] == EVENTS and acked[0] > killed_at
    assert read == {"step": "read", "count": EVENTS, "distinct": EVENTS, "missing": []}
