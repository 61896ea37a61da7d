"""Iggy handlers for consumer groups, messages and consumer offsets (no trio).

The data-plane half of :mod:`adapters.iggy.handlers` (same contract: one
function per command, ``handler(session, value) -> bytes | Reply | Deferred``);
its ``HANDLERS`` table lists them.
"""

from __future__ import annotations

import struct

import xxhash

from core import errors as ce
from core.permissions import Action

from . import render
from . import replies as R
from .dedup import filter_send, hold_send
from .errors import CURRENT_DIALECT, IggyError, IggyStatus
from .events import Deferred, Reply
from .handler_rules import _not_found_is_empty, _partition_plane
from .messages import MAX_BATCH_PAYLOAD, StoredBatch
from .producer import take_producer_block

A = Action
_U32 = struct.Struct("<I")
# The empty poll's partition id that tells a dialect-3 group member to re-sync its
# assignment (apache/iggy core/common/src/lib.rs RESYNC_REQUIRED_PARTITION_SENTINEL).
RESYNC_PARTITION = 0xFFFF_FFFF



# -- consumer groups ------------------------------------------------------------------------------
def _group_body(s, t, g, *, members=True) -> bytes:
    m = s.broker.consumers.group_members(t.stream_id, t.id, g.id)
    return render.group_details(g, t, m, s.dialect, with_members=members)


def get_group(s, v):
    """A missing group is an empty OK; in dialect 3 a missing stream or topic is its
    error (apache/iggy core/server/src/responses.rs build_consumer_group_response:
    ``ensure_topic_exists`` first), in the others an empty OK too."""
    if s.dialect != CURRENT_DIALECT:
        return _get_group_or_empty(s, v)
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.READ_TOPIC, t.stream_id, t.id)
    try:
        g = s.group(t, v.group_id)
    except ce.ConsumerGroupNotFound:
        return b""
    return _group_body(s, t, g)


@_not_found_is_empty
def _get_group_or_empty(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.READ_TOPIC, t.stream_id, t.id)
    return _group_body(s, t, s.group(t, v.group_id))


def get_groups(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.READ_TOPIC, t.stream_id, t.id)
    return b"".join(_group_body(s, t, g, members=False) for g in s.broker.consumers.list_groups(t.stream_id, t.id))


def create_group(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.READ_TOPIC, t.stream_id, t.id)
    wanted = v.group_id - 1 if s.one_based and v.group_id else None
    g = s.broker.consumers.create_group(t.stream_id, t.id, v.name, wanted)
    return _group_body(s, t, g)


def delete_group(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.READ_TOPIC, t.stream_id, t.id)
    s.broker.consumers.delete_group(t.stream_id, t.id, s.group(t, v.group_id).id)
    return b""


def join_group(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.READ_TOPIC, t.stream_id, t.id)
    s.broker.consumers.join_group(t.stream_id, t.id, s.group(t, v.group_id).id, s.client_id)
    return b""


def leave_group(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.READ_TOPIC, t.stream_id, t.id)
    s.broker.consumers.leave_group(t.stream_id, t.id, s.group(t, v.group_id).id, s.client_id)
    return b""


def sync_group(s, v):
    """iggy-current.md 6.9: ``u64 generation, u32 n, n partitions``; empty = not a member,
    and also when the stream, topic or group does not exist (apache/iggy
    core/server/src/dispatch.rs handle_sync_consumer_group: no permission rule, any
    miss of ``consumer_group_member_assignment`` is an empty body)."""
    try:
        t = s.topic(v.stream_id, v.topic_id)
        gid = s.group(t, v.group_id).id
    except ce.NotFound:
        return b""
    found = s.broker.consumers.group_assignment(t.stream_id, t.id, gid, s.client_id)
    if found is None:
        return b""
    return R.SYNC_GROUP.encode(3, R.SYNC_GROUP.make(generation=found[0], partitions=found[1]))


# -- messages and offsets ---------------------------------------------------------------------------
def send_messages(s, v):
    with _partition_plane(s):  # dialect 3: a missing stream, topic or partition is 20
        t = s.topic(v.stream_id, v.topic_id)
    s.require(A.SEND_MESSAGES, t.stream_id, t.id)
    if not v.messages:
        raise IggyStatus(IggyError.INVALID_MESSAGES_COUNT)
    partition, key = _partitioning(s, v.partitioning, t.partitions_count)
    pending = Deferred(lambda outcome: _sent(s, t, outcome))
    msgs = v.messages
    # Dialects 2 and 3 decode to the stored layout already (messages.StoredBatch); 1, 4 and
    # 5 (seed-era header maps) convert here. The block is then stored as it is (core/log/encoded.py).
    batch = msgs if isinstance(msgs, StoredBatch) else s.to_stored_batch(msgs)
    if batch.payload_bytes > MAX_BATCH_PAYLOAD:
        raise IggyStatus(IggyError.TOO_BIG_MESSAGE_PAYLOAD, "batch payload too large")
    block, producer = take_producer_block(batch)  # Ferry's idempotent-send tag (producer.py)
    count = batch.count

    def go(partition, key) -> None:
        with _partition_plane(s):
            # Iggy's message deduplication, when on for the topic (dedup.py): repeated ids dropped.
            kept = filter_send(s.broker, t, partition, key, block, count)
            if kept is not None and not kept.count:  # every message was a duplicate: the send still succeeds
                kept.part.ack_after_pending(pending.fire)
                return
            if kept is not None:
                partition, key = kept.partition, None
            s.broker.append_records(t.stream_id, t.id, kept.block if kept else block, kept.count if kept else count,
                                    partition=partition, key=key, producer=producer,
                                    on_durable=pending.fire if kept is None else kept.on_durable(pending.fire),
                                    origin="iggy")
        if kept is not None:
            kept.stored()
    with _partition_plane(s):
        # The first deduplicated send after a start waits while its partition's window is
        # rebuilt in slices (dedup.hold_send): the event loop is not held meanwhile.
        held, partition, key = hold_send(s.broker, t, partition, key, go, pending.fire)
    if not held:
        go(partition, key)
    return pending


def _partitioning(s, p, partitions: int) -> tuple[int | None, bytes | None]:
    """Iggy Partitioning -> (explicit canonical partition, key for the core's rule)."""
    if p.kind == 1:
        return None, None
    if p.kind == 2:
        if len(p.value) != 4:
            raise IggyStatus(IggyError.INVALID_KEY_VALUE_LENGTH, "partition id must be 4 bytes")
        pid = s.partition_in(_U32.unpack(p.value)[0])
        if pid is None:
            raise IggyStatus(IggyError.PARTITION_NOT_FOUND)
        return pid, None
    if not 1 <= len(p.value) <= 255:
        raise IggyStatus(IggyError.INVALID_KEY_VALUE_LENGTH)
    if s.one_based and partitions > 0:
        # The 0.4 server (and 0.5, still 1-based: iggy-middle.md 5) maps XXH32(key) mod n
        # to a 1-based partition with 0 -> n (iggy.md 3.3): canonically (h mod n) - 1,
        # wrapping to n - 1. Later servers use h mod n 0-based, which is the core's own
        # rule (broker.choose_partition).
        return (xxhash.xxh32_intdigest(p.value) % partitions - 1) % partitions, None
    return None, p.value


def _sent(s, t, outcome):
    if isinstance(outcome, BaseException):
        raise outcome
    if s.dialect != 3:
        return Reply(0)
    body = _U32.pack(1) + R.SEND_CONFIRMATION.encode(3, R.SEND_CONFIRMATION.make(
        stream_id=t.stream_id, topic_id=t.id, partition_id=outcome.partition_id, base_offset=outcome.base_offset))
    return Reply(0, body)


def poll_messages(s, v):
    if s.dialect == CURRENT_DIALECT:
        return _poll_current(s, v)
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.POLL_MESSAGES, t.stream_id, t.id)
    if v.count == 0:
        raise IggyStatus(IggyError.INVALID_MESSAGES_COUNT)
    consumer = s.consumer(t, v.consumer)
    strategy = s.poll_strategy(v.strategy)
    partition = s.partition_in(v.partition_id)
    b = s.broker
    if consumer.kind == "group" and partition is None:
        res = b.consumers.poll_group(t.stream_id, t.id, consumer.id, s.client_id, strategy, v.count,
                                     auto_commit=v.auto_commit)
        if res is None:  # a member without partitions (iggy.md 4.9)
            return render.polled(s.dialect, -s.edge, 0, None)  # wire partition 0
    else:
        if consumer.kind == "group":
            found = b.consumers.group_assignment(t.stream_id, t.id, consumer.id, s.client_id)
            if found is None:
                raise IggyStatus(IggyError.CONSUMER_GROUP_MEMBER_NOT_FOUND)
            if partition not in found[1]:
                # A member polls only its own partitions; older clients get the empty
                # answer of the 0.8 server (iggy-middle.md 6.8).
                return render.polled(s.dialect, -s.edge, 0, None)  # wire partition 0
        res = b.consumers.poll(t.stream_id, t.id, consumer, strategy, v.count,
                               partition=partition, auto_commit=v.auto_commit)
    return render.polled(s.dialect, res.partition_id, res.current_offset, res.batch)


def _poll_current(s, v):
    """PollMessages of dialect 3, as apache/iggy core/server/src/dispatch.rs
    handle_poll_messages and resolve_poll_request answer it:

    * a group poll names its partition (the 0.9.0 client always does) and is fenced
      first: unless the stream, topic and group resolve and this client is a member
      owning that partition, the answer is an empty poll whose partition is
      RESYNC_PARTITION (the client re-syncs), not 5000/5006/5009;
    * a single consumer's poll: missing stream/topic/partition are 1009/2010/3007
      (id variants, ``_current_codes``); no partition reads partition 0;
    * ``count`` 0 is an empty poll, not 4009 (the partition's poll plan is empty).

    A group poll without a partition is served as for the other dialects (the server
    picks the member's next partition), which the reference server answers empty."""
    fenced = v.consumer.kind == 2 and v.partition_id is not None
    resync = render.polled(CURRENT_DIALECT, RESYNC_PARTITION, 0, None)
    try:
        t = s.topic(v.stream_id, v.topic_id)
    except ce.NotFound:
        if fenced:
            return resync
        raise
    s.require(A.POLL_MESSAGES, t.stream_id, t.id)
    b = s.broker
    if fenced:
        try:
            gid = s.group(t, v.consumer.id).id
        except ce.ConsumerGroupNotFound:
            return resync
        found = b.consumers.group_assignment(t.stream_id, t.id, gid, s.client_id)
        if found is None or v.partition_id not in found[1]:
            return resync
    consumer = s.consumer(t, v.consumer)
    strategy = s.poll_strategy(v.strategy)
    if consumer.kind == "group" and v.partition_id is None:
        if v.count == 0:
            return render.polled(CURRENT_DIALECT, 0, 0, None)
        res = b.consumers.poll_group(t.stream_id, t.id, consumer.id, s.client_id, strategy, v.count,
                                     auto_commit=v.auto_commit)
        if res is None:  # a member without partitions
            return render.polled(CURRENT_DIALECT, 0, 0, None)
        return render.polled(CURRENT_DIALECT, res.partition_id, res.current_offset, res.batch)
    partition = 0 if v.partition_id is None else v.partition_id
    if v.count == 0:
        b.partition(t.stream_id, t.id, partition)  # 3007 when it does not exist
        _segments, current, _size, _n = render.partition_stats(b, t.stream_id, t.id, partition)
        return render.polled(CURRENT_DIALECT, partition, current, None)
    res = b.consumers.poll(t.stream_id, t.id, consumer, strategy, v.count,
                           partition=partition, auto_commit=v.auto_commit)
    return render.polled(CURRENT_DIALECT, res.partition_id, res.current_offset, res.batch)


def flush_unsaved_buffer(s, v):
    if s.dialect == CURRENT_DIALECT:
        # The reference server has no on-demand flush and says so for any target, even
        # a missing one (apache/iggy core/server/src/responses.rs
        # build_non_replicated_response, FLUSH_UNSAVED_BUFFER_CODE arm).
        raise IggyStatus(IggyError.FEATURE_UNAVAILABLE, "flush")
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.POLL_MESSAGES, t.stream_id, t.id)
    pid = s.partition_in(v.partition_id) if s.one_based else v.partition_id
    s.broker.partition(t.stream_id, t.id, 0 if pid is None else pid)
    return b""  # appends are already on their way to disk (the flusher owns fsync)


def _offset_target(s, v, *, write: bool = False):
    if s.dialect == CURRENT_DIALECT:
        return _current_offset_target(s, v, write)
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.POLL_MESSAGES, t.stream_id, t.id)
    pid = s.partition_in(v.partition_id)
    return t, s.consumer(t, v.consumer), 0 if pid is None else pid


def _current_offset_target(s, v, write: bool):
    """The consumer offset a dialect-3 request names, resolved as apache/iggy does.

    GetConsumerOffset (core/server/src/dispatch.rs resolve_consumer_offset_request): no
    partition reads partition 0; a missing partition of an existing topic is 3007; a
    missing stream, topic or group is an empty OK (get_offset's decorator).

    Store/DeleteConsumerOffset are partition-plane ops (core/server/src/responses.rs
    fence_and_resolve_offset_namespace, then dispatch_partition_request): no partition,
    a missing stream/topic/partition/group, or a group this client is not a member of
    owning that partition are all 20 ResourceNotFound."""
    b = s.broker
    if not write:
        t = s.topic(v.stream_id, v.topic_id)
        s.require(A.POLL_MESSAGES, t.stream_id, t.id)
        pid = 0 if v.partition_id is None else v.partition_id
        try:
            b.partition(t.stream_id, t.id, pid)
        except ce.PartitionNotFound:
            raise IggyStatus(IggyError.PARTITION_NOT_FOUND, f"partition {pid}") from None
        return t, s.consumer(t, v.consumer), pid
    pid = v.partition_id
    with _partition_plane(s):
        if pid is None:
            raise IggyStatus(IggyError.RESOURCE_NOT_FOUND, "no partition")
        t = s.topic(v.stream_id, v.topic_id)
        b.partition(t.stream_id, t.id, pid)
        consumer = s.consumer(t, v.consumer)
        if consumer.kind == "group":
            found = b.consumers.group_assignment(t.stream_id, t.id, consumer.id, s.client_id)
            if found is None or pid not in found[1]:
                raise IggyStatus(IggyError.RESOURCE_NOT_FOUND, f"partition {pid} is not this member's")
    s.require(A.POLL_MESSAGES, t.stream_id, t.id)
    return t, consumer, pid


@_not_found_is_empty
def get_offset(s, v):
    t, consumer, pid = _offset_target(s, v)
    stored = s.broker.consumers.get_offset(consumer, t.stream_id, t.id, pid)
    if stored is None:
        return b""
    _segs, current, _size, _n = render.partition_stats(s.broker, t.stream_id, t.id, pid)
    return R.OFFSET_INFO.encode(s.dialect, render.offset_value(pid, current, stored, s.edge))


def store_offset(s, v):
    t, consumer, pid = _offset_target(s, v, write=True)
    s.broker.consumers.store_offset(consumer, t.stream_id, t.id, pid, v.offset)  # past the end: InvalidOffset -> 4100
    return b""


def delete_offset(s, v):
    t, consumer, pid = _offset_target(s, v, write=True)
    if s.broker.consumers.get_offset(consumer, t.stream_id, t.id, pid) is None:
        raise IggyStatus(IggyError.CONSUMER_OFFSET_NOT_FOUND)
    s.broker.consumers.delete_offset(consumer, t.stream_id, t.id, pid)
    return b""
