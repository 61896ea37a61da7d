"""Reading ``ferry serve``'s banner from its stdout, and stopping it, with no dependency
beyond the standard library: the test harness (ferry_harness.py) and the runners of the clients'
own suites (tests/kafka/librdkafka/run_suite.py, tests/pravega/client_suite/run_suite.py),
which are plain scripts, share it."""

from __future__ import annotations

import os
import selectors
import subprocess
import time
from typing import Callable


def read_until_ready(proc: subprocess.Popen, limit_s: float,
                     exited: Callable[[int, bytes], Exception]) -> str:
    """``ferry serve``'s stdout up to its final ``ready`` line (the banner). ``limit_s``
    bounds a hung start (TimeoutError with the output so far; no timing is asserted); a
    process that exits first raises what ``exited(exit code, output so far)`` makes."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline, buf = time.monotonic() + limit_s, b""
    try:
        while not buf.endswith(b"\nready\n"):
            if not sel.select(max(deadline - time.monotonic(), 0)):
                raise TimeoutError(f"no 'ready' within {limit_s} s: {buf!r}")
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                raise exited(proc.wait(), buf)
            buf += chunk
    finally:
        sel.close()
    return buf.decode()


def banner_or_exit(proc: subprocess.Popen, limit_s: float, log, stop: Callable[[], object]) -> str:
    """:func:`read_until_ready` for a plain script (the suite runners): a server that exits
    or hangs first is stopped with ``stop()`` and the script exits with a one-line reason
    naming ``log`` (the server's stderr)."""
    def exited(code: int, buf: bytes) -> SystemExit:
        stop()
        return SystemExit(f"ferry serve did not start (exit {code}, see {log}):\n{buf.decode(errors='replace')}")
    try:
        return read_until_ready(proc, limit_s, exited)
    except TimeoutError as hung:
        stop()
        raise SystemExit(f"ferry serve did not start (see {log}): {hung}") from None


def terminate(proc: subprocess.Popen, grace_s: float = 30) -> None:
    """SIGTERM (a clean stop), then SIGKILL if it is not gone within ``grace_s``."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
