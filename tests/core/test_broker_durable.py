"""Broker + core.flusher: on_durable fires only after the batch is written
(and fdatasync'd, unless fsync="never"), under each policy; close() flushes;
reopen keeps every acknowledged record."""

from __future__ import annotations

import errno

import pytest
import trio
from broker_helpers import Acks, items, open_broker, payloads

from core.errors import StorageError
from core.flusher import run_broker_tasks
from core.log import AppendResult
from core.log import pending as pending_mod


def _topic(broker, partitions=1):
    broker.create_stream("s")
    broker.create_topic("s", "t", partitions=partitions)


@pytest.mark.parametrize("policy", ["always", "batch", "never"])
async def test_on_durable_fires_after_the_write_under_each_policy(tmp_path, policy):
    broker = open_broker(tmp_path, fsync=policy, fsync_interval_ms=2)
    _topic(broker, partitions=2)
    parts = [broker.partition("s", "t", pid) for pid in (0, 1)]
    acks = Acks()
    states = []

    def on_durable(outcome):
        part = parts[outcome.partition_id]
        # what is acked is on disk: below the durable mark, and never read back from memory
        states.append((outcome.base_offset + outcome.count <= part.durable_next_offset, part.fsync_count))
        acks(outcome)

    async with trio.open_nursery() as nursery:
        await nursery.start(run_broker_tasks, broker)
        for i in range(20):
            broker.append("s", "t", items(f"m{i}"), partition=i % 2, on_durable=on_durable)
        assert acks.outcomes == []  # never acked inline, before the flusher ran
        with trio.fail_after(10):
            await acks.wait(20)
        nursery.cancel_scope.cancel()
    assert all(isinstance(o, AppendResult) for o in acks.outcomes)
    assert all(durable for durable, _ in states)
    fsyncs = sum(p.fsync_count for p in parts)
    if policy == "never":
        assert fsyncs == 0 and all(n == 0 for _, n in states)
    else:
        assert all(n >= 1 for _, n in states) and 1 <= fsyncs <= 20
    for pid in (0, 1):  # per partition, acks come in offset order
        assert [o.base_offset for o in acks.outcomes if o.partition_id == pid] == list(range(10))
    broker.close()


async def test_concurrent_producers_share_fsyncs(tmp_path):
    broker = open_broker(tmp_path, fsync="always")
    _topic(broker)
    part = broker.partition("s", "t", 0)

    async def producer(k: int) -> None:
        for i in range(10):
            done = trio.Event()
            broker.append("s", "t", items(f"{k}-{i}"), partition=0, on_durable=lambda _r, d=done: d.set())
            await done.wait()

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(run_broker_tasks, broker)
            async with trio.open_nursery() as producers:
                for k in range(8):
                    producers.start_soon(producer, k)
            nursery.cancel_scope.cancel()
    assert part.durable_next_offset == 80
    assert part.fsync_count < 80  # producers waiting together were acked by one fsync
    broker.close()


async def test_duplicate_ack_waits_for_the_original(tmp_path):
    broker = open_broker(tmp_path, fsync="always")
    _topic(broker)
    acks = Acks()
    async with trio.open_nursery() as nursery:
        await nursery.start(run_broker_tasks, broker)
        broker.append("s", "t", items("a"), partition=0, producer=("w", 1), on_durable=acks)
        broker.append("s", "t", items("a"), partition=0, producer=("w", 1), on_durable=acks)
        with trio.fail_after(5):
            first, dup = await acks.wait(2)
        nursery.cancel_scope.cancel()
    assert not first.duplicate and dup.duplicate
    broker.close()


async def test_acknowledged_appends_survive_close_and_reopen(tmp_path):
    broker = open_broker(tmp_path, fsync="batch", fsync_interval_ms=1, segment_bytes=2048)
    _topic(broker, partitions=2)
    acks = Acks()
    async with trio.open_nursery() as nursery:
        await nursery.start(run_broker_tasks, broker)
        for i in range(200):
            broker.append("s", "t", items(f"msg-{i:04d}".ljust(40, ".")), partition=i % 2, on_durable=acks)
            if i % 16 == 0:
                await trio.sleep(0)
        with trio.fail_after(10):
            await acks.wait(200)
        nursery.cancel_scope.cancel()
    late = broker.append("s", "t", items("pending at close"), partition=0, on_durable=acks)
    broker.close()  # writes and fsyncs what the flusher had not taken yet
    assert acks.outcomes[-1] == late
    again = open_broker(tmp_path, segment_bytes=2048)
    try:
        assert again.partition("s", "t", 0).segment_count > 1  # rolled segments were reopened
        p0 = payloads(again.read("s", "t", 0, 0, 1000))
        p1 = payloads(again.read("s", "t", 1, 0, 1000))
        assert len(p0) == 101 and len(p1) == 100
        assert p0[:3] == [f"msg-{i:04d}".ljust(40, ".").encode() for i in (0, 2, 4)]
        assert p0[-1] == b"pending at close"
    finally:
        again.close()


def test_close_flushes_every_partition_even_when_one_write_fails_issue_3(tmp_path, monkeypatch):
    """Broker.close() stopped at the first partition whose final flush failed:
    later partitions were neither flushed nor closed and the metadata store
    stayed open."""
    broker = open_broker(tmp_path)
    _topic(broker, partitions=3)
    bad = broker.partition("s", "t", 0)
    real_write = pending_mod.write_all

    def failing_write(fd, data):
        if fd == bad._segments[-1].fd:
            raise OSError(errno.EIO, "Input/output error")
        real_write(fd, data)

    monkeypatch.setattr(pending_mod, "write_all", failing_write)
    outcomes = {}
    for pid in range(3):
        broker.append("s", "t", items(f"p{pid}"), partition=pid, on_durable=lambda o, pid=pid: outcomes.setdefault(pid, o))
    with pytest.raises(StorageError):
        broker.close()
    assert isinstance(outcomes[0], StorageError)
    assert isinstance(outcomes[1], AppendResult) and isinstance(outcomes[2], AppendResult)
    assert broker.meta.closed and broker.closed
    monkeypatch.setattr(pending_mod, "write_all", real_write)
    again = open_broker(tmp_path)
    try:
        assert [payloads(again.read("s", "t", pid, 0, 10)) for pid in range(3)] == [[], [b"p1"], [b"p2"]]
    finally:
        again.close()
