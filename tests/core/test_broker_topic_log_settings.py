"""Per-topic segment size and fsync policy (metadata migration 3, Broker.topic_log_config):
a topic's own settings reach its partitions, survive a restart, and the flusher
fdatasyncs each partition under its own policy."""

from __future__ import annotations

import pytest
import trio
from broker_helpers import Acks, items, open_broker

from core.errors import InvalidArgument
from core.flusher import run_broker_tasks


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


async def test_an_always_topic_does_not_wait_for_the_batch_window(tmp_path):
    broker = open_broker(tmp_path, fsync="batch", fsync_interval_ms=60_000)
    broker.create_stream("s")
    broker.create_topic("s", "fast", 1, fsync="always")
    broker.create_topic("s", "slow", 1)
    fast, slow = Acks(), Acks()
    async with trio.open_nursery() as nursery:
        await nursery.start(run_broker_tasks, broker)
        broker.append("s", "slow", items("first"), on_durable=slow)
        with trio.fail_after(10):
            await slow.wait(1)  # the first round runs at once; the next window is a minute long
        broker.append("s", "slow", items("second"), on_durable=slow)
        await trio.sleep(0.2)
        assert len(slow.outcomes) == 1  # waits for the window
        broker.append("s", "fast", items("now"), on_durable=fast)
        with trio.fail_after(10):  # well within the minute: the always topic ended the window
            await fast.wait(1)
        nursery.cancel_scope.cancel()
    assert broker.partition("s", "fast", 0).fsync_count == 1
    broker.close()
