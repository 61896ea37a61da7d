"""Reading ``ferry serve``'s banner from its stdout, with no dependency beyond the
standard library: the test harness (ferry_harness.py) and the runners of the clients'
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
