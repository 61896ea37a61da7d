"""Consumers: polling strategies, consumer offsets and consumer groups.

:class:`Consumers` is the broker's collaborator for them (``broker.consumers``):
it owns the group membership (runtime state) and reads the metadata store,
the broker's partitions and the store it is given. Semantics follow Iggy,
the protocol whose model this is:

* A *consumer* is ``(kind, id)``: ``"consumer"`` (a single consumer) or
  ``"group"`` (a consumer group). Stored offsets are per consumer and
  partition and name the **last consumed** offset, so ``next`` resumes at
  ``stored + 1`` (or at the first offset when nothing is stored).
* Polling strategies: ``offset`` (value = offset), ``timestamp`` (value = µs,
  first record at or after it), ``first``, ``last`` (the last ``count``
  records), ``next``.
* Group members are runtime state (they are connections); partitions are
  assigned by :class:`core.groups.GroupState` and reassigned whenever a
  member joins, leaves or disconnects, or the topic's partition count changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from .errors import ConsumerGroupMemberNotFound, FerryError, InvalidArgument, InvalidOffset, PartitionNotFound
from .groups import GroupState

if TYPE_CHECKING:  # pragma: no cover
    from .log import Partition
    from .metadata import Metadata
    from .metadb import Ident
    from .model import TopicInfo
    from .store import Store

POLL_KINDS = ("offset", "timestamp", "first", "last", "next")
CONSUMER_KINDS = ("consumer", "group")


@dataclass(frozen=True, slots=True)
class Consumer:
    kind: str  # "consumer" | "group"
    id: int


@dataclass(frozen=True, slots=True)
class PollStrategy:
    kind: str
    value: int = 0

    def __post_init__(self) -> None:
        if self.kind not in POLL_KINDS:
            raise InvalidArgument(f"unknown polling strategy {self.kind!r}")


@dataclass(slots=True)
class PollResult:
    partition_id: int
    current_offset: int  # the partition's last offset (-1 when empty), as Iggy reports
    batch: object  # core.log ReadBatch


class Consumers:
    """Offsets, groups and polling of one broker (``broker.consumers``).

    ``meta`` is the metadata store (offsets and groups are rows there);
    ``partition(info, pid)`` is the broker's open partition of a topic (raises
    PartitionNotFound); ``store`` hears of local group joins and leaves
    (``Store.group_changed``, shared with other gateways in scale-out). The broker
    tells it when a topic's partitions change or the topic goes
    (:meth:`partitions_changed`, :meth:`forget_topic`)."""

    def __init__(self, meta: "Metadata", partition: Callable[["TopicInfo", int], "Partition"],
                 store: "Store") -> None:
        self.meta = meta
        self._partition = partition
        self.store = store
        self._groups: dict[tuple[int, int, int], GroupState] = {}
        self._member_groups: dict[int, set[tuple[int, int, int]]] = {}

    # -- offsets -------------------------------------------------------------
    def _check_consumer(self, consumer: Consumer, info: "TopicInfo") -> None:
        """A group consumer's id must name an existing group of the topic
        (ConsumerGroupNotFound): an offset stored for no group would be
        inherited by the next group created under that id."""
        if consumer.kind == "group":
            self.meta.get_group(info.stream_id, info.id, consumer.id)

    def store_offset(self, consumer: Consumer, stream: "Ident", topic: "Ident", partition: int, offset: int) -> None:
        info = self.meta.get_topic(stream, topic)
        self._check_consumer(consumer, info)
        part = self._partition(info, partition)
        if offset < 0 or offset >= part.next_offset:
            # InvalidOffset (an InvalidArgument), so adapters answer Iggy's INVALID_OFFSET
            raise InvalidOffset(f"offset {offset} is outside partition {partition} (next is {part.next_offset})",
                                offset=offset)
        self.meta.store_offset(consumer.kind, consumer.id, info.stream_id, info.id, partition, offset)

    def get_offset(self, consumer: Consumer, stream: "Ident", topic: "Ident", partition: int) -> int | None:
        info = self.meta.get_topic(stream, topic)
        self._check_consumer(consumer, info)
        self._partition(info, partition)
        return self.meta.get_offset(consumer.kind, consumer.id, info.stream_id, info.id, partition)

    def delete_offset(self, consumer: Consumer, stream: "Ident", topic: "Ident", partition: int) -> None:
        info = self.meta.get_topic(stream, topic)
        self._check_consumer(consumer, info)
        self.meta.delete_offset(consumer.kind, consumer.id, info.stream_id, info.id, partition)

    # -- groups --------------------------------------------------------------
    def create_group(self, stream: "Ident", topic: "Ident", name: str, group_id: int | None = None):
        info = self.meta.get_topic(stream, topic)
        return self.meta.create_group(info.stream_id, info.id, name, group_id)

    def get_group(self, stream: "Ident", topic: "Ident", group: "Ident"):
        return self.meta.get_group(stream, topic, group)

    def list_groups(self, stream: "Ident", topic: "Ident"):
        return self.meta.list_groups(stream, topic)

    def delete_group(self, stream: "Ident", topic: "Ident", group: "Ident") -> None:
        g = self.meta.get_group(stream, topic, group)
        self.meta.delete_group(g.stream_id, g.topic_id, g.id)
        key = (g.stream_id, g.topic_id, g.id)
        state = self._groups.pop(key, None)
        if state is not None:
            for members in self._member_groups.values():
                members.discard(key)

    def group_members(self, stream: "Ident", topic: "Ident", group: "Ident") -> dict[int, tuple[int, ...]]:
        """member id -> assigned partitions, for reporting (Iggy's GetConsumerGroup)."""
        g = self.meta.get_group(stream, topic, group)
        state = self._groups.get((g.stream_id, g.topic_id, g.id))
        if state is None:
            return {}
        return {m: state.assignment(m) for m in state.members}

    def group_assignment(self, stream: "Ident", topic: "Ident", group: "Ident",
                         member_id: int) -> tuple[int, tuple[int, ...]] | None:
        """``(generation, partitions)`` of a member, or ``None`` when it is not in the
        group (Iggy's SyncConsumerGroup, iggy-current.md section 6.9)."""
        g = self.meta.get_group(stream, topic, group)
        state = self._groups.get((g.stream_id, g.topic_id, g.id))
        if state is None or member_id not in state:
            return None
        return state.generation, state.assignment(member_id)

    def join_group(self, stream: "Ident", topic: "Ident", group: "Ident", member_id: int) -> tuple[int, ...]:
        g = self.meta.get_group(stream, topic, group)
        info = self.meta.get_topic(g.stream_id, g.topic_id)
        key = (g.stream_id, g.topic_id, g.id)
        state = self._groups.get(key)
        if state is None:
            state = self._groups[key] = GroupState(info.partitions_count)
        state.join(member_id)
        self._member_groups.setdefault(member_id, set()).add(key)
        self.store.group_changed(key, member_id, True)  # shared with other gateways (core/store.py)
        return state.assignment(member_id)

    def leave_group(self, stream: "Ident", topic: "Ident", group: "Ident", member_id: int) -> None:
        g = self.meta.get_group(stream, topic, group)
        key = (g.stream_id, g.topic_id, g.id)
        state = self._groups.get(key)
        if state is None or member_id not in state.members:
            raise ConsumerGroupMemberNotFound(f"member {member_id} is not in group {g.name!r}")
        state.leave(member_id)
        self._member_groups.get(member_id, set()).discard(key)
        self.store.group_changed(key, member_id, False)

    def groups_of(self, member_id: int) -> list[tuple[int, int, int]]:
        """``(stream, topic, group)`` ids of every group ``member_id`` is in, sorted
        (Iggy's ClientInfoDetails lists them, iggy.md 5.8)."""
        return sorted(self._member_groups.get(member_id, ()))

    def disconnect(self, member_id: int) -> None:
        """A connection closed: leave every group it joined (rebalances the others)."""
        for key in self._member_groups.pop(member_id, set()):
            state = self._groups.get(key)
            if state is not None:
                state.leave(member_id)
                self.store.group_changed(key, member_id, False)

    def set_group_members(self, key: tuple[int, int, int], ordered: list) -> None:
        """Scale-out (``StoreEvents.group_members``, told of local joins and leaves by
        ``Store.group_changed``): the group's members across every gateway, in the order all of
        them use (local members by their own ids, the others' by ids gateway/jetstream_store/groups.py
        derives for them)."""
        state = self._groups.get(key)
        if state is None:
            if not ordered:
                return
            try:
                info = self.meta.get_topic(key[0], key[1])
            except FerryError:
                return
            state = self._groups[key] = GroupState(info.partitions_count)
        state.replace_members(ordered)

    def partitions_changed(self, sid: int, tid: int) -> None:
        """The topic's partition count changed: its groups reassign."""
        info = self.meta.get_topic(sid, tid)
        for (gs, gt, _gid), state in self._groups.items():
            if gs == sid and gt == tid:
                state.set_partitions(info.partitions_count)

    def forget_topic(self, sid: int, tid: int) -> None:
        """The topic was deleted: its groups' runtime state goes."""
        for key in [k for k in self._groups if k[0] == sid and k[1] == tid]:
            del self._groups[key]
            for members in self._member_groups.values():
                members.discard(key)

    # -- polling -------------------------------------------------------------
    def poll(
        self,
        stream: "Ident",
        topic: "Ident",
        consumer: Consumer,
        strategy: PollStrategy,
        count: int,
        *,
        partition: int | None = None,
        auto_commit: bool = False,
        max_bytes: int | None = None,
    ) -> PollResult:
        """Read up to ``count`` records for ``consumer`` (Iggy PollMessages semantics)."""
        if count <= 0:
            raise InvalidArgument("count must be greater than 0")
        info = self.meta.get_topic(stream, topic)
        stored_key_id = consumer.id
        if consumer.kind == "group":
            g = self.meta.get_group(info.stream_id, info.id, consumer.id)
            stored_key_id = g.id
            if partition is None:
                # The member, not the group id, decides the partition: sessions use poll_group().
                raise PartitionNotFound("a consumer-group poll without a partition needs poll_group()")
        elif consumer.kind != "consumer":
            raise InvalidArgument(f"unknown consumer kind {consumer.kind!r}")
        if partition is None:
            partition = 0
        part = self._partition(info, partition)
        offset = self._start_offset(part, strategy, count, consumer.kind, stored_key_id, info, partition)
        batch = part.read(offset, count, max_bytes)
        if auto_commit and batch.count:
            self.meta.store_offset(consumer.kind, stored_key_id, info.stream_id, info.id, partition, batch.last_offset)
        return PollResult(partition, part.next_offset - 1, batch)

    def poll_group(
        self,
        stream: "Ident",
        topic: "Ident",
        group: "Ident",
        member_id: int,
        strategy: PollStrategy,
        count: int,
        *,
        auto_commit: bool = False,
        max_bytes: int | None = None,
    ) -> PollResult | None:
        """A group member polls its next assigned partition; ``None`` when it has none."""
        g = self.meta.get_group(stream, topic, group)
        state = self._groups.get((g.stream_id, g.topic_id, g.id))
        if state is None or member_id not in state.members:
            raise ConsumerGroupMemberNotFound(f"member {member_id} is not in group {g.name!r}")
        pid = state.next_partition(member_id)
        if pid is None:
            return None
        return self.poll(
            g.stream_id,
            g.topic_id,
            Consumer("group", g.id),
            strategy,
            count,
            partition=pid,
            auto_commit=auto_commit,
            max_bytes=max_bytes,
        )

    def _start_offset(self, part, strategy: PollStrategy, count: int, kind: str, cid: int, info, pid: int) -> int:
        k = strategy.kind
        if k == "offset":
            return max(strategy.value, part.first_offset)
        if k == "timestamp":
            return part.offset_for_timestamp(strategy.value)
        if k == "first":
            return part.first_offset
        if k == "last":
            return max(part.first_offset, part.next_offset - count)
        stored = self.meta.get_offset(kind, cid, info.stream_id, info.id, pid)
        return part.first_offset if stored is None else max(stored + 1, part.first_offset)
