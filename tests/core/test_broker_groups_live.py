"""Broker: consumer groups (join, leave, disconnect, rebalance, group polls),
live subscriptions over the subject trie (``*``, ``>``, queue groups), append
listeners, and wake-ups for readers waiting on a partition."""

from __future__ import annotations

import pytest
import trio
from broker_helpers import Inbox, items, offsets, open_broker

from core.consumers import Consumer, PollStrategy
from core.errors import (
    ConsumerGroupAlreadyExists,
    ConsumerGroupMemberNotFound,
    ConsumerGroupNotFound,
    InvalidSubject,
    PartitionNotFound,
)
from core.live import MAX_WAITERS_PER_PARTITION, Delivery

NEXT = PollStrategy("next")


@pytest.fixture
def broker(tmp_path):
    b = open_broker(tmp_path)
    b.create_stream("s")
    b.create_topic("s", "t", partitions=4)
    yield b
    b.close()


# -- consumer groups -------------------------------------------------------------
def test_group_create_get_list_delete(broker):
    g = broker.consumers.create_group("s", "t", "workers")
    assert (g.id, g.name) == (0, "workers")
    assert broker.consumers.get_group("s", "t", "workers") == broker.consumers.get_group("s", "t", 0) == g
    with pytest.raises(ConsumerGroupAlreadyExists):
        broker.consumers.create_group("s", "t", "workers")
    broker.consumers.create_group("s", "t", "audit", group_id=7)
    assert [x.name for x in broker.consumers.list_groups("s", "t")] == ["workers", "audit"]
    broker.consumers.delete_group("s", "t", "workers")
    with pytest.raises(ConsumerGroupNotFound):
        broker.consumers.get_group("s", "t", "workers")
    with pytest.raises(ConsumerGroupNotFound):
        broker.consumers.join_group("s", "t", "workers", 1)


def test_join_and_leave_rebalance_through_the_broker(broker):
    broker.consumers.create_group("s", "t", "g")
    assert broker.consumers.join_group("s", "t", "g", 100) == (0, 1, 2, 3)
    assert broker.consumers.join_group("s", "t", "g", 200) == (1, 3)
    assert broker.consumers.group_members("s", "t", "g") == {100: (0, 2), 200: (1, 3)}
    broker.consumers.join_group("s", "t", "g", 300)
    assert broker.consumers.group_members("s", "t", "g") == {100: (0, 3), 200: (1,), 300: (2,)}
    broker.consumers.leave_group("s", "t", "g", 200)
    assert broker.consumers.group_members("s", "t", "g") == {100: (0, 2), 300: (1, 3)}
    with pytest.raises(ConsumerGroupMemberNotFound):
        broker.consumers.leave_group("s", "t", "g", 200)


def test_disconnect_leaves_every_group_of_the_member(broker):
    broker.create_topic("s", "u", partitions=2)
    broker.consumers.create_group("s", "t", "g")
    broker.consumers.create_group("s", "u", "h")
    for member in (1, 2):
        broker.consumers.join_group("s", "t", "g", member)
        broker.consumers.join_group("s", "u", "h", member)
    broker.consumers.disconnect(1)
    assert broker.consumers.group_members("s", "t", "g") == {2: (0, 1, 2, 3)}
    assert broker.consumers.group_members("s", "u", "h") == {2: (0, 1)}
    broker.consumers.disconnect(1)  # twice is harmless


def test_partition_count_changes_rebalance_groups(broker):
    broker.consumers.create_group("s", "t", "g")
    broker.consumers.join_group("s", "t", "g", 1)
    broker.consumers.join_group("s", "t", "g", 2)
    broker.add_partitions("s", "t", 2)
    assert broker.consumers.group_members("s", "t", "g") == {1: (0, 2, 4), 2: (1, 3, 5)}
    broker.delete_partitions("s", "t", 5)
    assert broker.consumers.group_members("s", "t", "g") == {1: (0,), 2: ()}


def test_group_poll_cycles_assigned_partitions_and_commits_group_offsets(broker):
    broker.consumers.create_group("s", "t", "g")
    for pid in range(4):
        broker.append("s", "t", items(f"p{pid}-0", f"p{pid}-1"), partition=pid)
    broker.consumers.join_group("s", "t", "g", 1)
    broker.consumers.join_group("s", "t", "g", 2)  # member 1 now holds 0 and 2
    seen = []
    for _ in range(4):
        res = broker.consumers.poll_group("s", "t", "g", 1, NEXT, 1, auto_commit=True)
        seen.append((res.partition_id, offsets(res.batch)))
    assert seen == [(0, [0]), (2, [0]), (0, [1]), (2, [1])]
    group = Consumer("group", broker.consumers.get_group("s", "t", "g").id)
    assert broker.consumers.get_offset(group, "s", "t", 0) == 1 and broker.consumers.get_offset(group, "s", "t", 2) == 1
    assert broker.consumers.get_offset(group, "s", "t", 1) is None
    broker.consumers.leave_group("s", "t", "g", 2)  # member 1 takes 1 and 3 over, from the group's offsets
    polled = {broker.consumers.poll_group("s", "t", "g", 1, NEXT, 5).partition_id for _ in range(4)}
    assert polled == {0, 1, 2, 3}


def test_group_poll_errors(broker):
    broker.consumers.create_group("s", "t", "g")
    with pytest.raises(ConsumerGroupMemberNotFound):
        broker.consumers.poll_group("s", "t", "g", 9, NEXT, 1)
    with pytest.raises(PartitionNotFound):  # the member, not the caller, picks the partition
        broker.consumers.poll("s", "t", Consumer("group", 0), NEXT, 1)
    broker.create_topic("s", "one", partitions=1)
    broker.consumers.create_group("s", "one", "g")
    broker.consumers.join_group("s", "one", "g", 1)
    broker.consumers.join_group("s", "one", "g", 2)
    assert broker.consumers.poll_group("s", "one", "g", 2, NEXT, 1) is None  # more members than partitions


def test_deleting_a_group_drops_its_offsets_and_members(broker):
    g = broker.consumers.create_group("s", "t", "g")
    broker.append("s", "t", items("a"), partition=0)
    broker.consumers.join_group("s", "t", "g", 1)
    broker.consumers.poll_group("s", "t", "g", 1, NEXT, 1, auto_commit=True)
    broker.consumers.delete_group("s", "t", "g")
    again = broker.consumers.create_group("s", "t", "g")
    assert again.id == g.id
    assert broker.consumers.get_offset(Consumer("group", again.id), "s", "t", 0) is None
    assert broker.consumers.group_members("s", "t", "g") == {}


def test_groups_survive_reopen_members_do_not(tmp_path, broker):
    broker.consumers.create_group("s", "t", "g")
    broker.consumers.join_group("s", "t", "g", 1)
    broker.close()
    again = open_broker(tmp_path)
    try:
        assert [g.name for g in again.consumers.list_groups("s", "t")] == ["g"]
        assert again.consumers.group_members("s", "t", "g") == {}  # members are connections
    finally:
        again.close()


# -- live subscriptions --------------------------------------------------------------
def test_stored_appends_reach_matching_subscribers(broker):
    exact, star, tail, other = Inbox("exact"), Inbox("star"), Inbox("tail"), Inbox("other")
    broker.live.subscribe("s.t", exact)
    broker.live.subscribe("s.*", star)
    broker.live.subscribe(">", tail)
    broker.live.subscribe("s.t.x", other)  # more tokens: no match
    broker.append("s", "t", items("a", "b"), partition=3)
    for inbox in (exact, star, tail):
        assert inbox.payloads == [b"a", b"b"]
    assert other.got == []
    d = exact.got[1]
    assert (d.subject, d.stream_id, d.topic_id, d.partition_id, d.offset) == ("s.t", 0, 0, 3, 1)


def test_live_subject_override_and_wildcards_below_the_topic(broker):
    star, tail, topic_only = Inbox(), Inbox(), Inbox()
    broker.live.subscribe("s.t.*", star)
    broker.live.subscribe("s.t.>", tail)
    broker.live.subscribe("s.t", topic_only)
    broker.append("s", "t", items("deep"), live_subject="s.t.a.b")
    broker.append("s", "t", items("one"), live_subject="s.t.a")
    assert star.payloads == [b"one"]  # * is exactly one token
    assert tail.payloads == [b"deep", b"one"]  # > is one or more
    assert topic_only.got == []


def test_queue_group_members_get_each_message_once(broker):
    a, b, plain = Inbox("a"), Inbox("b"), Inbox("plain")
    broker.live.subscribe("s.t", a, queue="q")
    broker.live.subscribe("s.*", b, queue="q")
    broker.live.subscribe("s.t", plain)
    n = 60
    for i in range(n):
        broker.append("s", "t", items(f"m{i}"))
    got = a.payloads + b.payloads
    assert sorted(got) == sorted(f"m{i}".encode() for i in range(n))  # each once, none lost
    assert len(plain.got) == n  # plain subscribers still see everything
    assert a.got and b.got  # both members are used (random pick, 2**-59 odds of failing)


def test_unsubscribe_and_slow_subscribers(broker):
    gone, slow = Inbox(), Inbox(room=1)
    broker.live.subscribe("s.t", gone)
    broker.live.subscribe("s.t", slow)
    broker.live.unsubscribe("s.t", gone)
    broker.append("s", "t", items("a"))
    stats = broker.publish(Delivery(subject="s.t", payload=b"not stored"))
    assert gone.got == [] and slow.payloads == [b"a"]
    assert stats.delivered == 0 and stats.slow == [slow]  # the adapter applies its policy
    assert broker.read("s", "t", 0, 0, 10).count == 1  # publish() never stores


def test_invalid_subscription_pattern_is_a_typed_error(broker):
    for bad in ("", "s..t", "s.>.t", "a b"):
        with pytest.raises(InvalidSubject):
            broker.live.subscribe(bad, Inbox())


def test_append_listeners_see_every_append_and_can_be_removed(broker):
    seen = []
    remove = broker.add_append_listener(lambda info, pid, res, its: seen.append((info.name, pid, res.count)))
    broker.append("s", "t", items("a", "b"), partition=1)
    remove()
    broker.append("s", "t", items("c"), partition=1)
    assert seen == [("t", 1, 2)]


def test_topic_for_subject_follows_the_addressing_rule(broker):
    assert broker.topic_for_subject("s.t").name == "t"
    assert broker.topic_for_subject("s.t.deeper").name == "t"
    assert broker.topic_for_subject("s.nope") is None
    assert broker.topic_for_subject("other") is None


# -- wake-ups ------------------------------------------------------------------------
def test_waiter_fires_once_after_the_next_append(broker):
    woken = []
    broker.wait_for_append(0, 0, 1, lambda: woken.append("p1"))
    broker.wait_for_append(0, 0, 2, lambda: woken.append("p2"))
    broker.append("s", "t", items("a"), partition=1)
    broker.append("s", "t", items("b"), partition=1)
    assert woken == ["p1"]
    cancel = broker.wait_for_append(0, 0, 1, lambda: woken.append("cancelled"))
    cancel()
    cancel()  # safe twice
    broker.append("s", "t", items("c"), partition=1)
    assert woken == ["p1"]


def test_duplicates_do_not_wake_waiters(broker):
    broker.append("s", "t", items("a"), partition=0, producer=("w", 1))
    woken = []
    broker.wait_for_append(0, 0, 0, lambda: woken.append(1))
    broker.append("s", "t", items("a"), partition=0, producer=("w", 1))
    assert woken == []


def test_waiters_are_woken_on_topic_deletion_and_close(tmp_path, broker):
    woken = []
    broker.wait_for_append(0, 0, 0, lambda: woken.append("deleted"))
    broker.create_topic("s", "u")
    broker.wait_for_append(0, 1, 0, lambda: woken.append("closed"))
    broker.delete_topic("s", "t")
    assert woken == ["deleted"]
    broker.close()
    assert woken == ["deleted", "closed"]


def test_waiters_per_partition_are_bounded(broker):
    woken = []
    for i in range(MAX_WAITERS_PER_PARTITION + 2):
        broker.wait_for_append(0, 0, 0, lambda i=i: woken.append(i))
    assert woken == [0, 1]  # the oldest are woken early (they re-park), never leaked


async def test_long_poll_reader_wakes_on_append(broker):
    got = []

    async def reader():
        offset = 0
        while len(got) < 3:
            batch = broker.read("s", "t", 2, offset, 10)
            if not batch.count:
                event = trio.Event()
                cancel = broker.wait_for_append(0, 0, 2, event.set)
                try:
                    await event.wait()
                finally:
                    cancel()
                continue
            got.extend(bytes(rv.payload) for rv in batch.records())
            offset = batch.next_offset

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            for word in ("one", "two", "three"):
                await trio.sleep(0.01)
                broker.append("s", "t", items(word), partition=2)
    assert got == [b"one", b"two", b"three"]


def test_group_offsets_need_an_existing_group_issue_3(broker):
    """store_offset for a "group" consumer took any id: the row outlived no
    group, and a group created later under that id started from it, skipping
    messages it never read."""
    broker.append("s", "t", items("a", "b", "c"), partition=0)
    ghost = Consumer("group", 5)
    for call in (
        lambda: broker.consumers.store_offset(ghost, "s", "t", 0, 2),
        lambda: broker.consumers.get_offset(ghost, "s", "t", 0),
        lambda: broker.consumers.delete_offset(ghost, "s", "t", 0),
    ):
        with pytest.raises(ConsumerGroupNotFound):
            call()
    g = broker.consumers.create_group("s", "t", "late", group_id=5)
    broker.consumers.join_group("s", "t", "late", 1)
    assert offsets(broker.consumers.poll_group("s", "t", "late", 1, NEXT, 10).batch) == [0, 1, 2]
    broker.consumers.store_offset(Consumer("group", g.id), "s", "t", 0, 1)  # an existing group: fine
    assert broker.consumers.get_offset(Consumer("group", g.id), "s", "t", 0) == 1
