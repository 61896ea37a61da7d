"""GET /stats reports what the process and host really use (core/procstats.py).

The gateway runs in a thread of this test process, so /stats describes this
very process: its RSS, threads and CPU time can be read here from /proc and
os.times and compared. No timing thresholds: CPU work is measured in CPU
seconds the test itself consumed, and loops wait for a condition with a bound."""

from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path

import httpx
import pytest

from core.procstats import CPU_WINDOW_S, ProcessStats, process_cpu_seconds
from ferry_harness import running_gateway

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="figures are read from Linux /proc")

WAIT_LIMIT_S = 30  # bound on a wait loop; not a timing assertion


def size_bytes(text: str) -> int:
    number, unit = text.split()
    assert unit == "B"
    return int(number)


def proc_field(path: str, key: str) -> int:
    for line in Path(path).read_text().splitlines():
        if line.startswith(key + ":"):
            parts = line.split()
            return int(parts[1]) * (1024 if parts[-1] == "kB" else 1)
    raise AssertionError(f"{key} not in {path}")


def burn_cpu() -> None:
    """Spend CPU in this process for at least one CPU window (loop on CPU seconds
    and on the monotonic clock; neither is asserted on)."""
    start_cpu, start = process_cpu_seconds(), time.monotonic()
    x = 0
    while process_cpu_seconds() - start_cpu < 0.3 or time.monotonic() - start < CPU_WINDOW_S * 1.2:
        for i in range(20_000):
            x += i * i
    assert x > 0


def test_stats_report_real_cpu_memory_threads_disk_and_clients(tmp_path):
    with running_gateway(tmp_path) as gw, httpx.Client(base_url=f"http://127.0.0.1:{gw.ports['http']}",
                                                       timeout=10) as http:
        first = http.get("/stats").json()
        rss = proc_field("/proc/self/status", "VmRSS")
        memory = size_bytes(first["memory_usage"])
        assert memory > 1024 * 1024
        assert rss / 2 <= memory <= rss * 2, (memory, rss)  # the same process, read moments apart
        assert isinstance(first["cpu_usage"], float) and first["cpu_usage"] >= 0
        assert isinstance(first["total_cpu_usage"], float) and 0 <= first["total_cpu_usage"] <= 100
        assert size_bytes(first["total_memory"]) == proc_field("/proc/meminfo", "MemTotal")
        assert 0 < size_bytes(first["available_memory"]) <= size_bytes(first["total_memory"])
        assert first["threads_count"] >= 2  # this test's thread and the gateway's at least
        assert first["process_id"] == os.getpid()
        disk = shutil.disk_usage(gw.cfg.server.data_dir)
        assert size_bytes(first["total_disk_space"]) == disk.total
        assert 0 < size_bytes(first["free_disk_space"]) <= disk.total
        assert size_bytes(first["written_bytes"]) >= 0 and size_bytes(first["read_bytes"]) >= 0

        burn_cpu()
        after = http.get("/stats").json()
        assert after["cpu_usage"] > 0  # the window held the work just done
        assert after["run_time"] > first["run_time"]

        # clients_count: the Iggy clients connected (a TCP connection is a session at once).
        assert after["clients_count"] == 0
        with socket.create_connection(("127.0.0.1", gw.ports["iggy_tcp"])):
            deadline = time.monotonic() + WAIT_LIMIT_S
            while (count := http.get("/stats").json()["clients_count"]) == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert count == 1


def test_cpu_usage_is_measured_over_a_window_not_per_call():
    """Samples sooner than CPU_WINDOW_S apart repeat the last value; later ones move
    (a fake clock, so nothing here depends on how fast the machine is)."""
    now = [1000.0]
    stats = ProcessStats(clock=lambda: now[0])
    first = stats.cpu()[0]
    assert first > 0  # the first reading: the average since this process started
    burn_cpu()
    now[0] += CPU_WINDOW_S / 2
    assert stats.cpu()[0] == first  # inside the window: unchanged
    now[0] += CPU_WINDOW_S
    second = stats.cpu()[0]
    assert second > 0 and second != first
