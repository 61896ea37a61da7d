"""Consumer-group membership and partition assignment (runtime state only).

Theory of operation
-------------------
A consumer group's *members* are live connections, so membership is never
stored: it is rebuilt as clients re-join after a restart (the group itself,
its name and its stored offsets live in the metadata store). One
:class:`GroupState` per group holds the members in join order and the
topic's partition count, and recomputes every member's assignment on each
change: a join, a leave, or a new partition count.

The assignment is Iggy's: partitions are dealt round-robin over the members,
partition ``p`` (0-based) going to the member at index ``p % members`` in
join order, so member 0 gets ``0, m, 2m, ...``, member 1 gets
``1, m+1, ...`` and, when there are more members than partitions, the last
joiners get nothing. Sources: apache/iggy
``core/server/src/streaming/topics/helpers.rs`` (``assign_partitions_to_members``
deals ``partitions[idx]`` to ``members[idx % count]``; ``mimic_members``
rebuilds every member with a fresh cursor on each rebalance;
``calculate_partition_id_unchecked`` returns ``partitions[cursor]`` and
advances the cursor modulo the member's partition count), and the seed-era
description in ../shared/protocols/iggy.md section 4.9 ("partition p (1-based)
goes to member index (p-1) mod members"). Upstream keeps members in a slab
whose compaction moves the last member into a vacated slot; we keep strict
join order instead, which is as deterministic and easier to reason about.

``generation`` moves on every change that can alter an assignment. The
current Iggy generation reports it in SyncConsumerGroup (606) so a client
knows when to re-sync (../shared/protocols/iggy-current.md section 6.9).

``next_partition(member)`` is the cursor behind a group poll without an
explicit partition: it cycles through the member's own partitions, one per
call, restarting from the first after every rebalance (as upstream does).

Pure and synchronous; no trio, no I/O.
"""

from __future__ import annotations

from typing import Hashable

from .errors import ConsumerGroupMemberNotFound, InvalidArgument

MemberId = Hashable

class GroupState:
    """Members (in join order), their partitions and their poll cursors."""

    __slots__ = ("_partitions", "_members", "_order", "_assigned", "_cursor", "generation")

    def __init__(self, partitions: int) -> None:
        self._partitions = _check_count(partitions)
        self._members: dict[MemberId, None] = {}  # insertion-ordered set
        self._order: tuple[MemberId, ...] = ()  # the same, as of the last rebalance
        self._assigned: dict[MemberId, tuple[int, ...]] = {}
        self._cursor: dict[MemberId, int] = {}
        self.generation = 0

    # -- views ---------------------------------------------------------------
    @property
    def partitions(self) -> int:
        """The topic's partition count this group is dealt from."""
        return self._partitions

    @property
    def members(self) -> tuple[MemberId, ...]:
        """Member ids in join order."""
        return self._order

    def __contains__(self, member_id: object) -> bool:
        return member_id in self._members

    def __len__(self) -> int:
        return len(self._members)

    def assignment(self, member_id: MemberId) -> tuple[int, ...]:
        """The member's partition ids, ascending (empty when it has none).

        Raises :class:`~core.errors.ConsumerGroupMemberNotFound`."""
        try:
            return self._assigned[member_id]
        except KeyError:
            raise _not_member(member_id) from None

    def owner(self, partition_id: int) -> MemberId | None:
        """The member that owns ``partition_id`` now, or ``None``."""
        if not 0 <= partition_id < self._partitions or not self._order:
            return None
        return self._order[partition_id % len(self._order)]

    def owns(self, member_id: MemberId, partition_id: int) -> bool:
        """True if ``partition_id`` is currently assigned to ``member_id``."""
        return member_id in self._members and self.owner(partition_id) == member_id

    # -- changes -------------------------------------------------------------
    def join(self, member_id: MemberId) -> bool:
        """Add a member and rebalance; ``False`` (and no change) if already in."""
        if member_id in self._members:
            return False
        self._members[member_id] = None
        self._rebalance()
        return True

    def leave(self, member_id: MemberId) -> bool:
        """Remove a member and rebalance; ``False`` (and no change) if not in.

        Leaving is idempotent so that a disconnect racing an explicit
        LeaveConsumerGroup is harmless; callers that must report Iggy's
        ConsumerGroupMemberNotFound check membership first."""
        if member_id not in self._members:
            return False
        del self._members[member_id]
        self._rebalance()
        return True

    def replace_members(self, ordered: "list[MemberId] | tuple[MemberId, ...]") -> bool:
        """Make ``ordered`` the membership, in that order (scale-out: every gateway
        builds the same order from the cluster's view, gateway/jetstream_store/groups.py);
        rebalance only if it differs. Returns whether it changed."""
        if tuple(ordered) == self._order and len(self._members) == len(self._order):
            return False
        self._members = dict.fromkeys(ordered)
        self._rebalance()
        return True

    def set_partitions(self, n: int) -> bool:
        """The topic's partition count changed: rebalance; ``False`` if it did not change."""
        n = _check_count(n)
        if n == self._partitions:
            return False
        self._partitions = n
        self._rebalance()
        return True

    def next_partition(self, member_id: MemberId) -> int | None:
        """The partition this member's next group poll reads, advancing its cursor.

        ``None`` when the member has no partitions (more members than
        partitions). Raises :class:`~core.errors.ConsumerGroupMemberNotFound`."""
        parts = self.assignment(member_id)
        if not parts:
            return None
        i = self._cursor[member_id]
        self._cursor[member_id] = (i + 1) % len(parts)
        return parts[i]

    def _rebalance(self) -> None:
        members = self._order = tuple(self._members)
        m = len(members)
        # Partition p goes to members[p % m]: member i holds i, i+m, i+2m, ...
        self._assigned = {mid: tuple(range(i, self._partitions, m)) for i, mid in enumerate(members)}
        self._cursor = dict.fromkeys(members, 0)
        self.generation += 1


def _check_count(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidArgument(f"partition count must be an int, got {type(n).__name__}")
    # No upper bound here: the metadata store enforces the topic's limits, and
    # a group must follow whatever count the topic really has.
    if n < 0:
        raise InvalidArgument(f"partition count must not be negative, got {n}")
    return n


def _not_member(member_id: object) -> ConsumerGroupMemberNotFound:
    return ConsumerGroupMemberNotFound(
        f"member {member_id!r} is not in the consumer group", member_id=member_id
    )


__all__ = ["GroupState"]
