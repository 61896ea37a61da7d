"""core.flusher: group commit under the three fsync policies, callback order,
write failures, and Partition.flush() racing a write in flight."""

from __future__ import annotations

import errno
import os
import threading
from types import SimpleNamespace

import pytest
import trio
from log_helpers import Acks, items, numbered, offsets, open_part, read_all

from core.errors import StorageError
from core.flusher import run_broker_tasks, run_flusher, run_retention
from core.log import AppendResult, LogConfig, PartitionSet
from core.log import pending as pending_mod


async def _start(nursery, parts, **cfg) -> LogConfig:
    cfg.setdefault("fsync", "always")
    config = LogConfig(**cfg)
    await nursery.start(run_flusher, PartitionSet(parts), config)
    return config


async def test_concurrent_appenders_are_acked_in_order_after_fsync(tmp_path):
    part = open_part(tmp_path)
    fired: list[AppendResult] = []

    def record(outcome):
        assert isinstance(outcome, AppendResult)
        assert part.fsync_count >= 1  # durable before the ack
        fired.append(outcome)

    async def producer(name: str, n: int) -> None:
        for i in range(n):
            done = trio.Event()
            part.append(items(f"{name}-{i}"), on_durable=lambda r, d=done: (record(r), d.set()))
            await done.wait()

    async with trio.open_nursery() as nursery:
        await _start(nursery, [part])
        async with trio.open_nursery() as appenders:
            for k in range(8):
                appenders.start_soon(producer, f"p{k}", 5)
        nursery.cancel_scope.cancel()
    assert [r.base_offset for r in fired] == list(range(40))  # callbacks in offset order
    assert part.fsync_count < 40  # appenders that met during an fsync shared the next one
    assert part.pending_bytes == 0
    assert len(read_all(part)) == 40


async def test_appends_of_one_tick_share_one_fsync(tmp_path):
    part = open_part(tmp_path)
    acks = Acks()
    async with trio.open_nursery() as nursery:
        await _start(nursery, [part])
        for i in range(50):
            part.append(numbered(i, 1), on_durable=acks)
        await acks.wait(50)
        nursery.cancel_scope.cancel()
    assert (part.fsync_count, part.write_count) == (1, 1)
    assert [r.base_offset for r in acks.outcomes] == list(range(50))


def _slow_jobs(monkeypatch, seconds: float) -> None:
    """Every FlushJob.run (write + fdatasync, in the worker thread) takes ``seconds`` more:
    a slow disk, so appends made meanwhile find a round in flight."""
    run = pending_mod.FlushJob.run

    def slow(self):
        threading.Event().wait(seconds)
        return run(self)

    monkeypatch.setattr(pending_mod.FlushJob, "run", slow)


async def test_batch_policy_never_waits_for_the_window_when_the_disk_is_idle(tmp_path):
    """A lone client that waits for each ack (every Iggy client) gets each round at
    once: with a 60 s window the 20 acks below would take 20 minutes otherwise."""
    part = open_part(tmp_path, fsync="batch")
    acks = Acks()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await _start(nursery, [part], fsync="batch", fsync_interval_ms=60_000)
            for i in range(20):
                part.append(items(f"m{i}"), on_durable=acks)
                await acks.wait(i + 1)
            nursery.cancel_scope.cancel()
    assert part.fsync_count == 20  # one durable round per lockstep append


async def test_batch_policy_coalesces_appends_that_meet_a_busy_round(tmp_path, monkeypatch):
    """Appends that arrive while a round runs share the next one, which waits as long as
    the busy round took (capped by fsync_interval_ms, here far longer) and gathers
    what arrives meanwhile."""
    _slow_jobs(monkeypatch, 0.2)
    part = open_part(tmp_path, fsync="batch")
    acks = Acks()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await _start(nursery, [part], fsync="batch", fsync_interval_ms=60_000)
            part.append(items("first"), on_durable=acks)   # the disk is idle: round 1 starts at once
            await trio.sleep(0.05)                          # round 1 in flight
            part.append(items("during"), on_durable=acks)  # busy: waits for round 1, then the window
            await acks.wait(1)
            assert part.fsync_count == 1
            part.append(items("window"), on_durable=acks)  # made during the window: same round as "during"
            await acks.wait(3)
            nursery.cancel_scope.cancel()
    assert part.fsync_count == 2
    assert [r.base_offset for r in acks.outcomes] == [0, 1, 2]


async def test_never_policy_acks_after_the_write_without_fsync(tmp_path):
    part = open_part(tmp_path, fsync="never")
    acks = Acks()
    async with trio.open_nursery() as nursery:
        await _start(nursery, [part], fsync="never")
        for i in range(3):
            part.append(items(f"m{i}"), on_durable=acks)
            await acks.wait(i + 1)
        nursery.cancel_scope.cancel()
    assert part.fsync_count == 0 and part.write_count == 3
    assert os.path.getsize(tmp_path / "00000000000000000000.log") > 0


async def test_one_round_flushes_several_partitions(tmp_path):
    parts = [open_part(tmp_path / str(i)) for i in range(4)]
    acks = Acks()
    async with trio.open_nursery() as nursery:
        await _start(nursery, parts)
        for part in parts:
            part.append(items("a", "b"), on_durable=acks)
        await acks.wait(4)
        nursery.cancel_scope.cancel()
    assert [p.fsync_count for p in parts] == [1, 1, 1, 1]
    assert sorted(r.partition_id for r in acks.outcomes) == [7, 7, 7, 7]


async def test_duplicate_acks_arrive_through_the_flusher(tmp_path):
    part = open_part(tmp_path)
    acks = Acks()
    async with trio.open_nursery() as nursery:
        await _start(nursery, [part])
        part.append(items("x"), producer=("w", 1), on_durable=acks)
        await acks.wait(1)
        part.append(items("x"), producer=("w", 1), on_durable=acks)
        (_first, dup) = await acks.wait(2)
        nursery.cancel_scope.cancel()
    assert dup.duplicate and part.write_count == 1


async def test_failed_write_fails_every_pending_ack_and_makes_the_partition_read_only(tmp_path, monkeypatch):
    part = open_part(tmp_path)
    part.append(items("durable"))
    part.flush()

    def enospc(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    acks = Acks()
    async with trio.open_nursery() as nursery:
        await _start(nursery, [part])
        monkeypatch.setattr(pending_mod, "write_all", enospc)
        part.append(items("lost-1"), on_durable=acks)
        part.append(items("lost-2"), on_durable=acks)
        await acks.wait(2)
        nursery.cancel_scope.cancel()
    assert all(isinstance(o, StorageError) for o in acks.outcomes)
    assert part.failed is not None and part.failed.details["errno"] == errno.ENOSPC
    with pytest.raises(StorageError):
        part.append(items("more"))
    assert read_all(part) == [(0, b"durable")]  # never-durable records are not served
    assert part.next_offset == 1
    part.close()
    assert read_all(open_part(tmp_path)) == [(0, b"durable")]


async def test_cancelled_flusher_leaves_pending_data_to_close(tmp_path, monkeypatch):
    _slow_jobs(monkeypatch, 0.2)
    part = open_part(tmp_path, fsync="batch")
    acks = Acks()
    async with trio.open_nursery() as nursery:
        await _start(nursery, [part], fsync="batch", fsync_interval_ms=60_000)
        part.append(items("a"), on_durable=acks)
        await trio.sleep(0.05)                       # a's round in flight
        part.append(items("b"), on_durable=acks)    # busy: waits for the window after a's round
        await acks.wait(1)
        nursery.cancel_scope.cancel()                # during that window
    assert len(acks.outcomes) == 1
    part.close()  # what the broker does at shutdown
    assert len(acks.outcomes) == 2
    assert offsets(open_part(tmp_path).read(0, 5)) == [0, 1]


def test_sync_flush_waits_for_a_write_in_flight(tmp_path):
    part = open_part(tmp_path)
    order: list[int] = []
    part.append(items("a"), on_durable=lambda r: order.append(r.base_offset))
    job = part.begin_flush()
    assert job is not None and part.begin_flush() is None  # one write in flight at a time
    part.append(items("b"), on_durable=lambda r: order.append(r.base_offset))
    assert offsets(part.read(0, 5)) == [0, 1]  # in-flight and pending records stay readable
    worker = threading.Thread(target=job.run)
    worker.start()
    part.flush()
    worker.join()
    part.complete_flush(job)  # what the flusher does when its thread returns: a no-op now
    assert order == [0, 1]
    assert part.write_count == 2 and part.pending_bytes == 0


@pytest.mark.parametrize("parts", [1, 2], ids=["one partition", "a round of two"])
async def test_a_write_in_flight_has_its_thread_before_any_other_task_runs(tmp_path, monkeypatch, parts):
    """A delete (an Iggy purge, a resync in store mode) settles the write in flight
    by blocking on it. The flusher once yielded between begin_flush and starting the
    job's thread, and a delete in that gap waited for a thread that never came: a
    hang. Every token of trio's default thread limiter is taken here (busy to_thread
    users elsewhere), which is what held the flusher's thread back."""
    started = threading.Event()
    run = pending_mod.FlushJob.run

    def noted(self):
        started.set()
        return run(self)

    monkeypatch.setattr(pending_mod.FlushJob, "run", noted)
    partitions = [open_part(tmp_path / str(i)) for i in range(parts)]
    acks = Acks()
    limiter = trio.to_thread.current_default_thread_limiter()
    borrowers = [object() for _ in range(int(limiter.total_tokens))]
    for who in borrowers:
        limiter.acquire_on_behalf_of_nowait(who)
    async with trio.open_nursery() as nursery:
        try:
            await _start(nursery, partitions)
            for part in partitions:
                part.append(items("a"), on_durable=acks)
            victim = partitions[0]
            while victim._inflight is None:
                await trio.sleep(0)
            # Bounded wait: a regression fails here instead of hanging in delete().
            assert started.wait(10), "the flush job's thread was not started with the job"
            victim.delete()
        finally:
            for who in borrowers:
                limiter.release_on_behalf_of(who)
        await acks.wait(parts)
        nursery.cancel_scope.cancel()
    assert not (tmp_path / "0").exists()
    assert all(isinstance(o, AppendResult) for o in acks.outcomes)  # written before the delete


class FakeBroker(PartitionSet):
    def __init__(self, parts, retention_interval_s: float) -> None:
        super().__init__(parts)
        self.cfg = SimpleNamespace(log=LogConfig(fsync="always"), retention_interval_s=retention_interval_s)
        self.sweeps = 0

    def enforce_retention(self, now=None) -> int:
        self.sweeps += 1
        if self.sweeps == 2:
            raise StorageError("disk says no")  # logged; the next sweep still runs
        return 1


async def test_broker_tasks_run_the_flusher(tmp_path):
    part = open_part(tmp_path)
    broker = FakeBroker([part], retention_interval_s=3600)
    acks = Acks()
    async with trio.open_nursery() as nursery:
        await nursery.start(run_broker_tasks, broker)
        part.append(items("a"), on_durable=acks)
        await acks.wait(1)
        nursery.cancel_scope.cancel()
    assert part.fsync_count == 1 and broker.sweeps == 0


async def test_retention_sweeps_every_interval_and_survives_a_failure(autojump_clock):
    broker = FakeBroker([], retention_interval_s=30)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_retention, broker, 30)
        await trio.sleep(95)  # virtual time
        nursery.cancel_scope.cancel()
    assert broker.sweeps == 3
