"""Kafka's classic consumer-group protocol: a sans-I/O group coordinator.

Theory of operation
-------------------
One :class:`Coordinator` per listener holds every classic group in memory
(membership is runtime state: after a restart members rejoin, as they do when
Kafka moves a coordinator). The states and transitions are Kafka's
(``ClassicGroup``, ``GroupMetadataManager.classicGroupJoin/Sync/Heartbeat/
Leave`` in apache/kafka's group-coordinator):

* **Empty** -> a JoinGroup -> **PreparingRebalance**: joins park until every
  known member has rejoined, or the rebalance timeout (the largest of the
  members') passes; a new group waits ``initial_rebalance_delay_ms`` first for
  more members (``group.initial.rebalance.delay.ms``). Then the generation
  moves, members that did not rejoin are removed, the protocol is chosen by
  vote among those every member supports (``ClassicGroup.selectProtocol``),
  and every parked join is answered: the leader with every member's metadata.
* **CompletingRebalance**: SyncGroups park until the leader's, which carries
  the assignment; then every parked sync is answered with its member's part
  and the group is **Stable**.
* A join while CompletingRebalance or Stable starts a new rebalance; parked
  syncs then answer REBALANCE_IN_PROGRESS. Heartbeats answer
  REBALANCE_IN_PROGRESS during PreparingRebalance so members rejoin.
* A member not heard from (join, sync, heartbeat, commit) within its session
  timeout is removed and the group rebalances; LeaveGroup does the same at
  once. :meth:`tick` runs those clocks; :meth:`next_deadline` says when.

JoinGroup v4+ with an empty member id answers MEMBER_ID_REQUIRED with a new
id (KIP-394), which the client sends back. Static members (KIP-345,
``group_instance_id``) keep their place: a rejoin under the same instance id
replaces the old member id.

Every call takes the time (``now`` in ms) and an opaque ``token`` naming the
request; a parked request is answered later through the completions a call
returns: ``(token, fields)`` with the response's fields as a dict (the group
API turns them into the response of the request's version).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Callable

from .errors import ErrorCode as E

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"
MIN_SESSION_TIMEOUT_MS = 6_000  # Kafka's group.min.session.timeout.ms
MAX_SESSION_TIMEOUT_MS = 1_800_000  # group.max.session.timeout.ms (30 min)
# Bounds on what a misbehaving client can make us keep: Kafka's group.max.size is
# unbounded by default; 1,000 members is far past one gateway's consumers.
MAX_GROUPS = 10_000
MAX_MEMBERS_PER_GROUP = 1_000
MAX_GROUP_ID_BYTES = 255  # Kafka allows longer; 255 keeps table names and logs sane
MAX_PENDING_MEMBERS = 1_000  # ids handed out by MEMBER_ID_REQUIRED, not yet joined


@dataclass(eq=False)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    session_ms: int
    rebalance_ms: int
    protocol_type: str
    protocols: list  # [(name, metadata bytes)]
    last_seen: int
    join_token: object = None
    join_version: int = 0
    sync_token: object = None
    assignment: bytes = b""


@dataclass(eq=False)
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict = field(default_factory=dict)  # member id -> Member, join order
    pending: set = field(default_factory=set)  # ids from MEMBER_ID_REQUIRED
    static: dict = field(default_factory=dict)  # instance id -> member id
    rebalance_deadline: int | None = None
    initial_until: int = 0  # a new group's joins wait until then for more members


def default_member_id(client_id: str) -> str:
    return f"{client_id}-{uuid.uuid4()}"


class Coordinator:
    """Every classic group of a listener (module docstring)."""

    def __init__(self, *, initial_rebalance_delay_ms: int = 3000,
                 new_member_id: Callable[[str], str] = default_member_id) -> None:
        self.initial_delay_ms = initial_rebalance_delay_ms
        self.new_member_id = new_member_id
        self.groups: dict[str, Group] = {}

    # -- joining ---------------------------------------------------------------------------
    def join(self, group_id: str, member_id: str, instance_id: str | None, protocol_type: str, protocols: list,
             session_ms: int, rebalance_ms: int, *, version: int, client_id: str, now: int, token):
        """``(fields or None, completions)``: None when the join parked."""
        if not group_id or len(group_id.encode()) > MAX_GROUP_ID_BYTES:
            return {"error_code": int(E.INVALID_GROUP_ID), "member_id": member_id}, []
        if not MIN_SESSION_TIMEOUT_MS <= session_ms <= MAX_SESSION_TIMEOUT_MS:
            return {"error_code": int(E.INVALID_SESSION_TIMEOUT), "member_id": member_id}, []
        group = self.groups.get(group_id)
        if group is None:
            if len(self.groups) >= MAX_GROUPS:
                return {"error_code": int(E.COORDINATOR_NOT_AVAILABLE), "member_id": member_id}, []
            group = self.groups[group_id] = Group(group_id)
        names = [name for name, _ in protocols]
        if not protocol_type or not names or (group.members and (
                protocol_type != group.protocol_type or not self._common(group, names, exclude=member_id))):
            return {"error_code": int(E.INCONSISTENT_GROUP_PROTOCOL), "member_id": member_id}, []
        if instance_id is not None and instance_id in group.static:
            old = group.static[instance_id]
            if member_id and member_id != old:
                return {"error_code": int(E.FENCED_INSTANCE_ID), "member_id": member_id}, []
            member_id = old
        if not member_id:
            member_id = self.new_member_id(client_id)
            if version >= 4 and instance_id is None:  # KIP-394: the client must come back with it
                if len(group.pending) >= MAX_PENDING_MEMBERS:
                    return {"error_code": int(E.GROUP_MAX_SIZE_REACHED), "member_id": ""}, []
                group.pending.add(member_id)
                return {"error_code": int(E.MEMBER_ID_REQUIRED), "member_id": member_id}, []
        elif member_id not in group.members and member_id not in group.pending:
            return {"error_code": int(E.UNKNOWN_MEMBER_ID), "member_id": member_id}, []
        member = group.members.get(member_id)
        if member is None:
            if len(group.members) >= MAX_MEMBERS_PER_GROUP:
                return {"error_code": int(E.GROUP_MAX_SIZE_REACHED), "member_id": member_id}, []
            group.pending.discard(member_id)
            member = group.members[member_id] = Member(member_id, instance_id, client_id, session_ms, rebalance_ms,
                                                       protocol_type, list(protocols), now)
            if instance_id is not None:
                group.static[instance_id] = member_id
        completions = []
        if member.join_token is not None:  # a second join from the same member replaces the first
            completions.append((member.join_token, self._join_error(member, E.REBALANCE_IN_PROGRESS)))
        member.protocols, member.session_ms, member.rebalance_ms = list(protocols), session_ms, rebalance_ms
        member.join_token, member.join_version, member.last_seen = token, version, now
        group.protocol_type = protocol_type
        if group.state != PREPARING:
            completions += self._prepare(group, now, initial=group.state == EMPTY)
        if group.state == PREPARING and self._all_joined(group) and (
                group.rebalance_deadline is None or not self._in_initial_delay(group, now)):
            completions += self._complete_join(group, now)
        return None, completions

    def _common(self, group: Group, names: list, exclude: str = "") -> set:
        common = set(names)
        for m in group.members.values():
            if m.member_id != exclude:
                common &= {name for name, _ in m.protocols}
        return common

    @staticmethod
    def _join_error(member: Member, code) -> dict:
        return {"error_code": int(code), "member_id": member.member_id}

    def _prepare(self, group: Group, now: int, *, initial: bool) -> list:
        """Start a rebalance; parked syncs answer REBALANCE_IN_PROGRESS."""
        completions = []
        for m in group.members.values():
            if m.sync_token is not None:
                completions.append((m.sync_token, {"error_code": int(E.REBALANCE_IN_PROGRESS)}))
                m.sync_token = None
        group.state = PREPARING
        timeout = max((m.rebalance_ms for m in group.members.values()), default=0)
        delay = self.initial_delay_ms if initial else 0
        group.rebalance_deadline = now + max(delay, 0) + (0 if initial else timeout)
        group.initial_until = now + delay if initial else now
        return completions

    def _in_initial_delay(self, group: Group, now: int) -> bool:
        return now < group.initial_until

    @staticmethod
    def _all_joined(group: Group) -> bool:
        return bool(group.members) and all(m.join_token is not None for m in group.members.values())

    def _complete_join(self, group: Group, now: int) -> list:
        for gone in [m for m in group.members.values() if m.join_token is None]:
            self._remove(group, gone)
        group.rebalance_deadline = None
        group.generation += 1
        if not group.members:
            group.state, group.protocol, group.protocol_type, group.leader = EMPTY, None, None, None
            return []
        group.protocol = self._vote(group)
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.state = COMPLETING
        everyone = [(m.member_id, m.instance_id, dict(m.protocols)[group.protocol]) for m in group.members.values()]
        completions = []
        for m in group.members.values():
            completions.append((m.join_token, {
                "error_code": 0, "generation_id": group.generation, "protocol_type": group.protocol_type,
                "protocol_name": group.protocol, "leader": group.leader, "member_id": m.member_id,
                "members": everyone if m.member_id == group.leader else []}))
            m.join_token, m.last_seen = None, now
        return completions

    @staticmethod
    def _vote(group: Group) -> str:
        """Each member votes for its most preferred protocol that every member supports."""
        members = list(group.members.values())
        common = set.intersection(*({name for name, _ in m.protocols} for m in members))
        votes: dict[str, int] = {}
        for m in members:
            choice = next(name for name, _ in m.protocols if name in common)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def _remove(self, group: Group, member: Member) -> None:
        del group.members[member.member_id]
        if member.instance_id is not None:
            group.static.pop(member.instance_id, None)
        if group.leader == member.member_id:
            group.leader = None

    # -- syncing, heartbeats, leaving ---------------------------------------------------------
    def _member(self, group_id: str, member_id: str, generation: int, now: int):
        """(group, member, error code)"""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is None:
            return group, None, int(E.UNKNOWN_MEMBER_ID)
        member.last_seen = now
        if generation != group.generation:
            return group, member, int(E.ILLEGAL_GENERATION)
        return group, member, 0

    def sync(self, group_id: str, generation: int, member_id: str, protocol_type: str | None,
             protocol_name: str | None, assignments: list, *, now: int, token):
        group, member, err = self._member(group_id, member_id, generation, now)
        if err:
            return {"error_code": err}, []
        if group.state == PREPARING:
            return {"error_code": int(E.REBALANCE_IN_PROGRESS)}, []
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol):
            return {"error_code": int(E.INCONSISTENT_GROUP_PROTOCOL)}, []
        done = {"error_code": 0, "protocol_type": group.protocol_type, "protocol_name": group.protocol}
        if group.state == STABLE:
            return {**done, "assignment": member.assignment}, []
        member.sync_token = token
        if member_id != group.leader:
            return None, []
        given = dict(assignments)
        completions = []
        for m in group.members.values():
            m.assignment = given.get(m.member_id, b"")
            if m.sync_token is not None:
                completions.append((m.sync_token, {**done, "assignment": m.assignment}))
                m.sync_token = None
        group.state = STABLE
        return None, completions

    def heartbeat(self, group_id: str, generation: int, member_id: str, *, now: int) -> dict:
        group, member, err = self._member(group_id, member_id, generation, now)
        if err:
            return {"error_code": err}
        if group.state == PREPARING:
            return {"error_code": int(E.REBALANCE_IN_PROGRESS)}
        return {"error_code": 0}

    def leave(self, group_id: str, members: list, *, now: int):
        """``members``: [(member id, instance id)] -> ([error code per member], completions)."""
        group = self.groups.get(group_id)
        errors = []
        for member_id, instance_id in members:
            if group is not None and instance_id is not None and not member_id:
                member_id = group.static.get(instance_id, "")
            member = group.members.get(member_id) if group is not None else None
            if member is None:
                errors.append(int(E.UNKNOWN_MEMBER_ID))
                continue
            errors.append(0)
            self._remove(group, member)
        return errors, (self._rebalance_after_loss(group, now) if group is not None and 0 in errors else [])

    def _rebalance_after_loss(self, group: Group, now: int) -> list:
        if not group.members:
            completions = self._prepare(group, now, initial=False)
            return completions + self._complete_join(group, now)
        completions = [] if group.state == PREPARING else self._prepare(group, now, initial=False)
        if self._all_joined(group):
            completions += self._complete_join(group, now)
        return completions

    def cancel(self, token) -> None:
        """Forget a parked request whose connection closed."""
        for group in self.groups.values():
            for m in group.members.values():
                if m.join_token is token:
                    m.join_token = None
                if m.sync_token is token:
                    m.sync_token = None

    # -- clocks --------------------------------------------------------------------------------
    def tick(self, now: int) -> list:
        completions = []
        for group in list(self.groups.values()):
            expired = [m for m in group.members.values()
                       if m.join_token is None and m.sync_token is None and m.last_seen + m.session_ms <= now]
            for m in expired:
                self._remove(group, m)
            if expired:
                completions += self._rebalance_after_loss(group, now)
            if group.state == PREPARING and group.rebalance_deadline is not None and (
                    group.rebalance_deadline <= now or (self._all_joined(group)
                                                        and not self._in_initial_delay(group, now))):
                completions += self._complete_join(group, now)
        return completions

    def next_deadline(self) -> int | None:
        times = []
        for group in self.groups.values():
            if group.rebalance_deadline is not None:
                times.append(min(group.rebalance_deadline, group.initial_until) if self._all_joined(group)
                             else group.rebalance_deadline)
            times += [m.last_seen + m.session_ms for m in group.members.values()
                      if m.join_token is None and m.sync_token is None]  # parked members do not expire
        return min(times) if times else None

    # -- offsets, admin ---------------------------------------------------------------------------
    def check_commit(self, group_id: str, generation: int, member_id: str, *, now: int) -> int:
        """The error code of an offset commit from (generation, member) (Kafka's
        ``OffsetMetadataManager.validateOffsetCommit`` for classic groups)."""
        group = self.groups.get(group_id)
        if generation < 0 and not member_id:
            return 0 if group is None or not group.members else int(E.ILLEGAL_GENERATION)
        group, member, err = self._member(group_id, member_id, generation, now)
        if err:
            return err
        return int(E.REBALANCE_IN_PROGRESS) if group.state == PREPARING else 0

    def describe(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def delete(self, group_id: str) -> int:
        group = self.groups.get(group_id)
        if group is not None and group.members:
            return int(E.NON_EMPTY_GROUP)
        self.groups.pop(group_id, None)
        return 0
