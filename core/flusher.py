"""The flusher: the one trio task in core, making appended records durable.

Theory of operation
-------------------
Partitions call a plain ``wake()`` (no trio in the rest of core) when they
turn dirty; it sets a ``trio.Event``. Each wake-up starts a *round*: every
partition reporting ``needs_flush`` fires its ready acks and hands over one
``FlushJob`` -- all its pending appends, coalesced into one batch -- whose
``os.write`` + ``fdatasync`` run in a worker thread (``trio.to_thread``), the
partitions of a round side by side. When a job returns, its partition fires
the ``on_durable`` callbacks, in append order, from this task.

Policies (``LogConfig.fsync``):
- ``always``: a round starts as soon as something is pending; appends made
  while an fsync runs wait for it and share the next one.
- ``batch`` (default): group commit without a throttle. A round starts at once
  when the disk is idle (nothing was appended while the last round ran), so a
  lone client that waits for each ack gets the ``always`` rate, and appends
  that meet a running fsync share the next one. With ``fsync_interval_ms`` > 0
  (default 0), a round after a *busy* one (appends arrived while it ran) first
  waits as long as that round took, at most ``fsync_interval_ms``: a commit
  delay that trades latency for fewer fsyncs under sustained concurrent load.
  (Until 2026-11 a 5 ms window opened before every round, which held a
  lockstep client to one batch per 5 ms: issue 17, docs/storage.md.)
- ``never``: like ``always`` but without fdatasync; acks follow the write(2).

The window and the round are the broker's; whether a partition's batch is
fdatasynced is the partition's own policy (``Partition.cfg.fsync``: a topic
created with its own policy, ``Broker.topic_log_config``). While a ``batch``
window is open, a dirty partition whose own policy is ``always`` or ``never``
ends it at once: such topics never wait for the group commit.

A job's thread call and the commit that follows are shielded from
cancellation: a round that started always ends with every callback fired, so
shutdown never half-acks. What is still pending when the task is cancelled is
written by ``Partition.flush()``/``close()`` (the broker's close does that).

``run_broker_tasks`` bundles what a broker needs in the background: this
flusher, the periodic retention sweep (``Broker.enforce_retention``) and the
runner of sliced jobs (:class:`SliceRunner`, installed as ``Broker.in_slices``):
work that grows with the data, which an adapter (trio-free) hands over as a
``step()`` to call until it says done, every other task running between two
steps (issue 30: no request stalls the gateway).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Callable, Protocol

import trio

from .log.config import FSYNC_BATCH, LogConfig
from .log.partition import Partition
from .log.registry import LogRegistry
from .metrics import FSYNC_SECONDS, Histogram, metrics_for

log = logging.getLogger("ferry.flusher")


class _Wakeup:
    """The ``wake()`` callable partitions get: sets the current round's event."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = trio.Event()

    def __call__(self) -> None:
        self.event.set()

    def rearm(self) -> None:
        if self.event.is_set():
            self.event = trio.Event()


def _nothing() -> None:
    return None


def fsync_histogram(registry: object) -> Histogram:
    """The broker's ``ferry_fsync_duration_seconds`` (core/metrics.py, one registry per broker)."""
    return metrics_for(registry).histogram(
        FSYNC_SECONDS, "Write + fdatasync of one coalesced batch of a partition, in seconds.")


class BrokerLike(LogRegistry, Protocol):
    """What :func:`run_broker_tasks` needs of ``core.broker.Broker``."""

    cfg: object  # BrokerConfig: .log (LogConfig) and .retention_interval_s
    in_slices: Callable[[Callable[[], bool], Callable[[bool], None]], None] | None

    def enforce_retention(self, now: int | None = None) -> int: ...


async def run_broker_tasks(broker: BrokerLike, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
    """Run the flusher and the retention sweep for ``broker`` until cancelled.
    Supports ``nursery.start``: ``started()`` (no value) once the flusher's hook is installed."""
    async with trio.open_nursery() as nursery:
        await nursery.start(run_flusher, broker, broker.cfg.log)
        nursery.start_soon(run_retention, broker, broker.cfg.retention_interval_s)
        async with trio.open_nursery() as jobs:
            broker.in_slices = SliceRunner(jobs)
            try:
                task_status.started()
                await trio.sleep_forever()
            finally:
                broker.in_slices = None


class SliceRunner:
    """``Broker.in_slices(step, done)``: call ``step()`` until it returns True, letting
    every other task run between two calls, then ``done(True)``; ``done(False)`` if a
    step raised (logged) or the broker's tasks stopped first. Each job is its own task,
    so one partition's long rebuild does not hold another's. What a job holds is the
    submitter's to bound (Iggy's dedup: one rebuild per partition at a time)."""

    __slots__ = ("_nursery",)

    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery

    def __call__(self, step: Callable[[], bool], done: Callable[[bool], None]) -> None:
        self._nursery.start_soon(self._run, step, done)

    @staticmethod
    async def _run(step: Callable[[], bool], done: Callable[[bool], None]) -> None:
        finished = False
        try:
            while not step():
                await trio.sleep(0)
            finished = True
        except Exception:  # noqa: BLE001 - the submitter falls back (done(False)); never fatal here
            log.exception("a sliced background job failed")
        finally:
            done(finished)


async def run_retention(broker: BrokerLike, interval_s: float) -> None:
    """Apply every topic's expiry and size cap each ``interval_s`` seconds."""
    while True:
        await trio.sleep(interval_s)
        try:
            removed = broker.enforce_retention()
        except Exception:  # noqa: BLE001 - a failed sweep is retried next interval, never fatal
            log.exception("retention sweep failed")
            continue
        if removed:
            log.info("retention removed %d segments", removed)


async def run_flusher(
    registry: LogRegistry, cfg: LogConfig, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED
) -> None:
    """Flush dirty partitions of ``registry`` forever: rounds as ``cfg.fsync`` says
    (``batch``: after a busy round, a window of the last round's duration capped
    at ``cfg.fsync_interval_ms``; none when idle), each partition's batch
    fdatasynced under its own ``Partition.cfg`` (a topic's policy may differ).

    Supports ``nursery.start``: ``started()`` is called (with no value) once the
    wake-up hook is installed, so appends made after ``start`` returns are seen.
    Runs until cancelled; uninstalls its hook on the way out."""
    wakeup = _Wakeup()
    registry.set_flusher_wakeup(wakeup)
    interval = cfg.fsync_interval_ms / 1000 if cfg.fsync == FSYNC_BATCH else 0.0
    task_status.started()
    try:
        busy, last_end, last_took = False, -math.inf, 0.0
        while True:
            await wakeup.event.wait()
            if interval and busy:
                await _window(registry, wakeup, last_end + min(interval, last_took))
            started = trio.current_time()
            wakeup.rearm()  # wakes from now on start the next round
            await flush_round(registry)
            last_end = trio.current_time()
            last_took = last_end - started
            # Appends made while the round ran set the event again. None: the disk
            # went idle (a lockstep client is still reading its ack), and its next
            # append starts a round at once. No checkpoint between the acks fired
            # in flush_round and this test, so a lone client always reads idle.
            busy = wakeup.event.is_set()
    finally:
        registry.set_flusher_wakeup(_nothing)


async def _window(registry: LogRegistry, wakeup: _Wakeup, deadline: float) -> None:
    """Wait out the group-commit window, unless a partition whose own policy is not
    ``batch`` is dirty or turns dirty meanwhile (each wake-up checks only those; a
    partition opened during the window waits for its end)."""
    own = [part for part in registry.partitions() if part.cfg.fsync != FSYNC_BATCH]
    if not own:
        await trio.sleep_until(deadline)
        return
    while trio.current_time() < deadline and not any(part.needs_flush for part in own):
        wakeup.rearm()
        with trio.move_on_at(deadline):
            await wakeup.event.wait()


# Worker threads a round may use at once: enough to overlap the fdatasyncs of
# several partitions on one disk, bounded so a round over thousands of dirty
# partitions queues them rather than spawning a thread each (trio's own default
# limiter is 40; this one is the flusher's alone, so a busy to_thread user
# elsewhere -- a remote store, argon2 checks -- never holds a flush back).
FLUSH_THREADS = 16


async def flush_round(registry: LogRegistry) -> None:
    """One round: flush every partition that needs it, concurrently, each
    fdatasynced or not under its own policy (``part.cfg.fsyncs``)."""
    dirty = [part for part in registry.partitions() if part.needs_flush]
    observe = fsync_histogram(registry).observe if dirty else None
    if len(dirty) == 1:
        await _flush_partition(dirty[0], observe)
    elif dirty:
        limiter = trio.CapacityLimiter(FLUSH_THREADS)
        async with trio.open_nursery() as nursery:
            for part in dirty:
                nursery.start_soon(_flush_partition, part, observe, limiter)


async def _flush_partition(
    part: Partition, observe: Callable[[float], None] | None = None, limiter: trio.CapacityLimiter | None = None
) -> None:
    if limiter is not None:
        async with limiter:
            await _flush_partition(part, observe)
        return
    fsync = part.cfg.fsyncs
    if not fsync:
        observe = None  # the histogram times write + fdatasync only
    try:
        part.fire_ready_acks()
        job = part.begin_flush(fsync)
    except Exception:  # noqa: BLE001 - a bug in one partition must not stop the others
        log.exception("preparing a flush of %r failed", part)
        return
    if job is None:
        return
    with trio.CancelScope(shield=True):
        started = time.perf_counter()
        # The thread starts before this task yields: from begin_flush on, the job
        # is the partition's write in flight, and Partition._settle (a delete, a
        # purge, a sync flush from another task) blocks the trio thread until
        # job.run ends. trio.to_thread.run_sync checkpoints before it starts its
        # thread, and a _settle in that gap waited for a run that could never
        # begin: a deadlock (seen on a purge in store mode, 2026-11).
        await _run_in_thread(job.run)  # job.run never raises; errors go to its callbacks
        if observe is not None:  # write + fdatasync of one coalesced batch (GET /metrics)
            observe(time.perf_counter() - started)
        try:
            part.complete_flush(job)
        except Exception:  # noqa: BLE001
            log.exception("completing a flush of %r failed", part)


async def _run_in_thread(fn: Callable[[], None]) -> None:
    """Run ``fn`` in a worker thread started *now*, then wait for it (the caller
    shields the wait: the thread cannot be abandoned)."""
    token = trio.lowlevel.current_trio_token()
    finished = trio.Event()
    trio.lowlevel.start_thread_soon(fn, lambda _outcome: token.run_sync_soon(finished.set))
    await finished.wait()
