"""core/log/durable.py: a partition's durable end as a read bound, and readers
woken when it moves -- on the write, never on the append (issue 30)."""

from __future__ import annotations

from broker_helpers import open_broker
from log_helpers import items, open_part

from core.log import LogConfig
from core.log.durable import MAX_DURABLE_WAITERS, DurableEnd
from gateway.jetstream_store.partition import RemotePartition


def test_the_end_only_moves_forward_and_wakes_only_when_told():
    end = DurableEnd(3, 40)
    woken = []
    end.add_waiter(lambda: woken.append("a"))
    assert not end.advance(3, 40) and not end.advance(2, 30)
    assert (end.offset, end.byte_end) == (3, 40)
    assert end.advance(5, 60) and (end.offset, end.byte_end) == (5, 60)
    assert woken == []  # advance() leaves the wake-up to the caller (after the writers' acks)
    end.wake()
    end.wake()
    assert woken == ["a"]  # one-shot
    assert end.waiting == 0


def test_a_cancelled_waiter_is_not_woken_and_cancel_after_firing_is_harmless():
    end = DurableEnd()
    woken = []
    cancel_a = end.add_waiter(lambda: woken.append("a"))
    end.add_waiter(lambda: woken.append("b"))
    cancel_a()
    end.wake()
    cancel_a()
    assert woken == ["b"]


def test_waiters_are_bounded_the_oldest_is_woken_early():
    end = DurableEnd()
    woken = []
    for i in range(MAX_DURABLE_WAITERS + 2):
        end.add_waiter(lambda i=i: woken.append(i))
    assert woken == [0, 1] and end.waiting == MAX_DURABLE_WAITERS
    end.wake()
    assert len(woken) == MAX_DURABLE_WAITERS + 2


def test_a_partition_wakes_durable_waiters_on_the_write_not_on_the_append(tmp_path):
    part = open_part(tmp_path)
    seen = []
    part.durable.add_waiter(lambda: seen.append(("reader", part.durable_next_offset, part.durable.byte_end)))
    part.append(items("abc", "de"), on_durable=lambda r: seen.append(("writer", r.base_offset)))
    assert seen == [] and part.next_offset == 2 and part.durable_next_offset == 0
    assert part.durable.byte_end == 0 < part.byte_end
    part.flush()
    # the writer's ack first, then the reader, which finds the whole call durable
    assert seen == [("writer", 0), ("reader", 2, 8 + 3 + 8 + 2)]
    assert part.durable.byte_end == part.byte_end


def test_fsync_never_counts_what_was_written(tmp_path):
    part = open_part(tmp_path, fsync="never")
    woken = []
    part.durable.add_waiter(lambda: woken.append(part.durable_next_offset))
    part.append(items("x"))
    assert woken == []
    part.flush(fsync=False)
    assert woken == [1] and part.fsync_count == 0


def test_reopen_purge_and_close_keep_the_end_true_and_wake_readers(tmp_path):
    part = open_part(tmp_path)
    part.append(items("a", "b", "c"))
    part.close()
    part = open_part(tmp_path)
    assert (part.durable_next_offset, part.durable.byte_end) == (3, 27)  # recovered = on disk
    woken = []
    part.durable.add_waiter(lambda: woken.append("purge"))
    part.purge()
    assert woken == ["purge"] and (part.durable_next_offset, part.durable.byte_end) == (0, 0)
    part.durable.add_waiter(lambda: woken.append("close"))
    part.close()
    assert woken == ["purge", "close"]


def test_a_remote_partition_is_durable_when_the_cluster_stored_it(tmp_path):
    """gateway/jetstream_store: the mirror applies only what the stream stored, so the
    durable end is what was applied; the local cache's own flush never moves it back."""
    part = RemotePartition.open(tmp_path / "p", 0, LogConfig(fsync="never"))
    woken = []
    part.durable.add_waiter(lambda: woken.append(part.durable_next_offset))
    part.append(items("queued"))  # in the outbox: not stored anywhere yet
    assert part.durable_next_offset == 0 and woken == []
    part.take_outbox()
    part.apply(1, 11, 1_000, 0, b"", b"queued")
    assert woken == [1] and part.durable.byte_end == 8 + 6
    part.flush(fsync=False)  # the cache writes what it holds: the end stays
    assert (part.durable_next_offset, part.durable.byte_end) == (1, 14)


def test_broker_wait_for_durable_wakes_on_the_flush_and_a_deleted_partition_wakes_too(tmp_path):
    broker = open_broker(tmp_path / "d")
    try:
        broker.create_stream("s")
        topic = broker.create_topic("s", "t", 2)
        woken = []
        broker.wait_for_durable(topic.stream_id, topic.id, 0, lambda: woken.append("p0"))
        broker.wait_for_durable(topic.stream_id, topic.id, 1, lambda: woken.append("p1"))
        cancel = broker.wait_for_durable(topic.stream_id, topic.id, 1, lambda: woken.append("cancelled"))
        cancel()
        # a partition not open here: woken as wait_for_append is (not by partition 0's write)
        broker.wait_for_durable(topic.stream_id, topic.id, 5, lambda: woken.append("no such"))
        broker.append("s", "t", [items("a")[0]], partition=0)
        assert woken == []  # appended (readable to Iggy and NATS readers), not durable
        broker.flush()
        assert woken == ["p0"]
        broker.delete_partitions("s", "t", 1)  # partition 1 goes: its readers look again
        assert woken == ["p0", "p1"]
    finally:
        broker.close()
