"""What this process and its host use: the figures of Iggy's GetStats (HTTP ``/stats``).

Theory of operation
-------------------
Iggy's server fills its Stats from the ``sysinfo`` crate: the process's CPU
usage in percent of one core (so above 100 on several cores), the whole
system's CPU usage in percent of all cores, resident memory, total and
available memory, the process's storage read/written bytes, its threads and
the data directory's disk. Ferry reads the same figures from Linux's
``/proc`` (proc(5): ``/proc/self/stat``, ``status``, ``io``, ``/proc/stat``,
``/proc/meminfo``, ``/proc/uptime``) with no new dependency; where a file is
missing (not Linux) or unreadable (``/proc/self/io`` under some container
runtimes) it falls back to ``os``/``resource``, and a figure nothing can
give is 0.

CPU usage is a rate, so it needs two samples (sysinfo does the same: it
reports the usage between two refreshes). :class:`ProcessStats` keeps the
previous sample and computes the usage over the window since it once that
window is at least :data:`CPU_WINDOW_S` long; a request sooner gets the last
value, so a client polling quickly does not see the noise of a 1 ms window.
The very first request has no earlier sample and gets the average since the
process (for ``total_cpu_usage``: the system) started.

No trio, no threads: ``/proc`` reads are served from kernel memory, a few
microseconds each, cheap enough on the event loop for an admin request.
"""

from __future__ import annotations

import os
import resource
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

# The shortest window CPU usage is computed over. sysinfo asks for at least
# 200 ms between refreshes (MINIMUM_CPU_UPDATE_INTERVAL); 1 s smooths a
# dashboard's refresh without hiding a busy minute.
CPU_WINDOW_S = 1.0
# The server's start time (Stats' start_time/run_time, microseconds since the epoch): when
# the broker's modules were first imported, which is the process start to the second.
START_US = int(time.time() * 1_000_000)
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PROC = Path("/proc")


@dataclass(frozen=True, slots=True)
class Usage:
    """One reading. Bytes are bytes; CPU figures are percentages."""

    cpu_usage: float           # this process, percent of one core (sysinfo's Process::cpu_usage)
    total_cpu_usage: float     # the system, percent of all cores (sysinfo's global CPU usage)
    memory_usage: int          # resident set size of this process
    total_memory: int
    available_memory: int
    read_bytes: int            # bytes this process read from storage
    written_bytes: int         # bytes this process wrote to storage
    threads_count: int
    free_disk_space: int       # on the data directory's file system
    total_disk_space: int


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _fields(text: str | None, scale: int = 1) -> dict[str, int]:
    """``Key: value [kB]`` lines (status, meminfo, io) as ints, times ``scale``."""
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key.strip()] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else scale)
    return out


def process_cpu_seconds() -> float:
    """User + system CPU time of every thread of this process so far."""
    t = os.times()
    return t.user + t.system


def _process_age_s() -> float | None:
    """Seconds since this process started (proc(5) stat field 22, in clock ticks since boot)."""
    stat, uptime = _read(_PROC / "self" / "stat"), _read(_PROC / "uptime")
    if stat is None or uptime is None:
        return None
    after_name = stat[stat.rfind(")") + 2:].split()  # the command name may hold spaces
    start_ticks = int(after_name[19])  # field 22 counts from 1, and fields 1-2 are before ")"
    return max(float(uptime.split()[0]) - start_ticks / _TICKS, 0.0)


def _system_cpu() -> tuple[int, int] | None:
    """(busy, total) clock ticks of all CPUs since boot, from /proc/stat's ``cpu`` line."""
    text = _read(_PROC / "stat")
    if not text or not text.startswith("cpu "):
        return None
    ticks = [int(v) for v in text.split("\n", 1)[0].split()[1:9]]  # user..steal; guest is inside user
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    total = sum(ticks)
    return total - idle, total


def _percent(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 2) if whole > 0 else 0.0


class ProcessStats:
    """CPU usage over a recent window plus the instantaneous figures (module docstring).

    ``clock`` is monotonic seconds (tests may pass their own); one instance per
    process is enough (:func:`process_stats`)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()  # two gateways in one test process may ask at once
        self._prev: tuple[float, float, tuple[int, int] | None] | None = None
        self._cpu = 0.0
        self._total_cpu = 0.0

    def cpu(self) -> tuple[float, float]:
        """(process percent of one core, system percent of all cores)."""
        now, used, system = self._clock(), process_cpu_seconds(), _system_cpu()
        with self._lock:
            if self._prev is None:
                age = _process_age_s()
                self._cpu = _percent(used, age) if age else 0.0
                self._total_cpu = _percent(*system) if system else 0.0
                self._prev = (now, used, system)
            elif now - self._prev[0] >= CPU_WINDOW_S:
                t0, used0, system0 = self._prev
                self._cpu = _percent(used - used0, now - t0)
                if system and system0:
                    self._total_cpu = _percent(system[0] - system0[0], system[1] - system0[1])
                self._prev = (now, used, system)
            return self._cpu, self._total_cpu

    def read(self, data_dir: str | os.PathLike | None = None) -> Usage:
        """Every figure of :class:`Usage`; the disk is ``data_dir``'s (0 without one)."""
        cpu, total_cpu = self.cpu()
        status = _fields(_read(_PROC / "self" / "status"))
        meminfo = _fields(_read(_PROC / "meminfo"))
        io = _fields(_read(_PROC / "self" / "io"))
        usage = resource.getrusage(resource.RUSAGE_SELF)
        rss = status.get("VmRSS")
        if rss is None:  # not Linux: the peak is the best resource gives (KiB on Linux, bytes on macOS)
            rss = usage.ru_maxrss * (1 if os.uname().sysname == "Darwin" else 1024)
        total_mem = meminfo.get("MemTotal") or _sysconf_bytes("SC_PHYS_PAGES")
        avail_mem = meminfo.get("MemAvailable") or _sysconf_bytes("SC_AVPHYS_PAGES")
        # /proc/self/io counts storage I/O in bytes; rusage counts 512-byte blocks (getrusage(2)).
        read_b = io["read_bytes"] if "read_bytes" in io else usage.ru_inblock * 512
        written_b = io["write_bytes"] if "write_bytes" in io else usage.ru_oublock * 512
        free_disk = total_disk = 0
        if data_dir is not None:
            try:
                disk = shutil.disk_usage(data_dir)
                free_disk, total_disk = disk.free, disk.total
            except OSError:
                pass
        return Usage(cpu, total_cpu, rss, total_mem, avail_mem, read_b, written_b,
                     status.get("Threads") or threading.active_count(), free_disk, total_disk)


def _sysconf_bytes(name: str) -> int:
    try:
        return os.sysconf(name) * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


_SHARED = ProcessStats()


def process_stats() -> ProcessStats:
    """The process-wide sampler (CPU windows are per process, not per caller)."""
    return _SHARED


__all__ = ["CPU_WINDOW_S", "START_US", "ProcessStats", "Usage", "process_cpu_seconds", "process_stats"]
