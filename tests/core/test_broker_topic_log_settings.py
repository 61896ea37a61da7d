"""Per-topic segment size and fsync policy (metadata migration 3, Broker.topic_log_config):
a topic's own settings reach its partitions, survive a restart, and the flusher
fdatasyncs each partition under its own policy."""

from __future__ import annotations

import threading

import pytest
import trio
from broker_helpers import Acks, items, open_broker

from core.errors import InvalidArgument
from core.flusher import run_broker_tasks
from core.log import pending as pending_mod


def test_a_topic_keeps_its_own_segment_size_and_policy_across_a_restart(tmp_path):
    broker = open_broker(tmp_path, fsync="batch", segment_bytes=1 << 20)
    broker.create_stream("s")
    own = broker.create_topic("s", "own", 2, segment_bytes=300, fsync="always")
    plain = broker.create_topic("s", "plain", 1)
    assert (own.segment_bytes, own.fsync, plain.segment_bytes, plain.fsync) == (300, "always", 0, "")
    assert {broker.partition("s", "own", p).cfg.segment_bytes for p in (0, 1)} == {300}
    assert broker.partition("s", "own", 0).cfg.fsync == "always"
    assert broker.partition("s", "plain", 0).cfg is broker.cfg.log  # no settings of its own
    broker.add_partitions("s", "own", 1)
    assert broker.partition("s", "own", 2).cfg.segment_bytes == 300  # new partitions too
    for i in range(10):
        broker.append("s", "own", items(b"x" * 100), partition=0)
        broker.append("s", "plain", items(b"x" * 100), partition=0)
        broker.flush()
    assert broker.partition("s", "own", 0).segment_count >= 4  # rolled at ~300 bytes
    assert broker.partition("s", "plain", 0).segment_count == 1
    broker.close()

    again = open_broker(tmp_path, fsync="never")
    try:
        info = again.get_topic("s", "own")
        assert (info.segment_bytes, info.fsync) == (300, "always")
        assert again.partition("s", "own", 0).cfg.fsync == "always"
        assert again.partition("s", "plain", 0).cfg.fsync == "never"  # the broker's, as configured now
    finally:
        again.close()


@pytest.mark.parametrize("kwargs", [{"segment_bytes": -1}, {"segment_bytes": 1 << 32}, {"segment_bytes": "1"},
                                    {"fsync": "sometimes"}, {"fsync": None}])
def test_bad_topic_log_settings_are_refused(tmp_path, kwargs):
    broker = open_broker(tmp_path)
    try:
        broker.create_stream("s")
        with pytest.raises(InvalidArgument):
            broker.create_topic("s", "t", 1, **kwargs)
        assert broker.list_topics("s") == []
    finally:
        broker.close()


async def test_the_flusher_fsyncs_each_topic_under_its_own_policy(tmp_path):
    broker = open_broker(tmp_path, fsync="never")
    broker.create_stream("s")
    broker.create_topic("s", "synced", 1, fsync="always")
    broker.create_topic("s", "plain", 1)
    synced, plain = broker.partition("s", "synced", 0), broker.partition("s", "plain", 0)
    acks = Acks()
    async with trio.open_nursery() as nursery:
        await nursery.start(run_broker_tasks, broker)
        for i in range(5):
            broker.append("s", "synced", items(f"a{i}"), on_durable=acks)
            broker.append("s", "plain", items(f"b{i}"), on_durable=acks)
            with trio.fail_after(10):
                await acks.wait(2 * (i + 1))
        nursery.cancel_scope.cancel()
    assert synced.fsync_count >= 1 and synced.fsync_count == synced.write_count
    assert plain.fsync_count == 0 and plain.write_count >= 1
    broker.close()


SLOW_FIRST_ROUND_S = 4.0  # the first fsync's extra time, so the window after it is long to see


async def test_an_always_topic_does_not_wait_for_the_batch_window(tmp_path, monkeypatch):
    """A busy round opens a batch window as long as that round took (capped by
    fsync_interval_ms); a dirty partition of an ``always`` topic ends it at once."""
    run, calls = pending_mod.FlushJob.run, []

    def first_one_slow(job):  # a slow first fsync: the window after it is as long
        calls.append(job)
        if len(calls) == 1:
            threading.Event().wait(SLOW_FIRST_ROUND_S)
        return run(job)

    monkeypatch.setattr(pending_mod.FlushJob, "run", first_one_slow)
    broker = open_broker(tmp_path, fsync="batch", fsync_interval_ms=60_000)
    broker.create_stream("s")
    broker.create_topic("s", "fast", 1, fsync="always")
    broker.create_topic("s", "slow", 1)
    fast, slow = Acks(), Acks()
    async with trio.open_nursery() as nursery:
        await nursery.start(run_broker_tasks, broker)
        broker.append("s", "slow", items("first"), on_durable=slow)   # idle disk: round 1 at once
        await trio.sleep(0.1)
        broker.append("s", "slow", items("second"), on_durable=slow)  # meets round 1: busy
        with trio.fail_after(SLOW_FIRST_ROUND_S * 3):
            await slow.wait(1)
        await trio.sleep(0.2)
        assert len(slow.outcomes) == 1  # "second" waits in the window after the busy round
        broker.append("s", "fast", items("now"), on_durable=fast)
        with trio.fail_after(SLOW_FIRST_ROUND_S / 2):  # well before that window's end
            await fast.wait(1)
            await slow.wait(2)  # the round the always topic started took "second" along
        nursery.cancel_scope.cancel()
    assert broker.partition("s", "fast", 0).fsync_count == 1
    broker.close()
