"""Hold the log's fdatasync in a test: appends arrive, nothing becomes durable (issue 30).

``running_gateway`` runs the gateway in a thread of the test process, so a test can
replace the sync the flusher's jobs call (``core.log.pending.fdatasync``, run in a
worker thread by ``FlushJob.run``) with a :class:`HeldFsync`: while ``hold()`` is on,
each sync waits for ``release()``. The flusher's round, and with it every
``on_durable`` ack and every durable-end move, waits with it; appends go on.
"""

from __future__ import annotations

import threading

import pytest

import core.log.pending
from ferry_harness import running_gateway

# A held sync gives up after this long and syncs anyway, so a failed test never leaves
# the gateway's flusher stuck (its stop would then wait for ever); not a threshold the
# test asserts on.
HOLD_LIMIT_S = 120.0


class HeldFsync:
    """A stand-in for ``fdatasync``: passes through until :meth:`hold`."""

    def __init__(self, real) -> None:
        self.real = real
        self.holding = False
        self.entered = threading.Event()  # a sync started while held: an append is being written
        self._release = threading.Event()

    def __call__(self, fd: int) -> None:
        if self.holding:
            self.entered.set()
            self._release.wait(HOLD_LIMIT_S)
        self.real(fd)

    def hold(self) -> None:
        self.entered.clear()
        self._release.clear()
        self.holding = True

    def release(self) -> None:
        self.holding = False
        self._release.set()


@pytest.fixture
def held_fsync(monkeypatch):
    """The log's fdatasync, held on demand (released at the end whatever happened)."""
    held = HeldFsync(core.log.pending.fdatasync)
    monkeypatch.setattr(core.log.pending, "fdatasync", held)
    try:
        yield held
    finally:
        held.release()


@pytest.fixture
def held_gateway(tmp_path, held_fsync):  # noqa: F811 - the fixture above
    """A gateway in this process whose fdatasync ``held_fsync`` holds on demand."""
    with running_gateway(tmp_path) as gw:
        try:
            yield gw
        finally:
            held_fsync.release()  # before the gateway's stop flushes
