"""Kafka's classic consumer-group protocol: a sans-I/O group coordinator.

Theory of operation
-------------------
One :class:`Coordinator` per listener holds every classic group in memory
(membership is runtime state: after a restart members rejoin, as they do when
Kafka moves a coordinator; committed offsets are durable elsewhere,
:mod:`adapters.kafka.offsets`). States and transitions are Kafka's
(``ClassicGroup``; ``GroupMetadataManager.classicGroupJoin/Sync/Heartbeat/
Leave``, ``completeClassicGroupJoin``, ``prepareRebalance`` in apache/kafka's
group-coordinator):

* **Empty** -> a JoinGroup -> **PreparingRebalance**. A group that starts
  from Empty waits ``initial_rebalance_delay_ms`` (Kafka's
  ``group.initial.rebalance.delay.ms``), again each time a new member arrived
  meanwhile, within the rebalance timeout (``tryCompleteInitialRebalance
  ElseSchedule``). Otherwise the join phase ends when every member has
  rejoined and no MEMBER_ID_REQUIRED id is outstanding
  (``hasAllMembersJoined``), or at the rebalance timeout (the largest of the
  members'). Then dynamic members that did not rejoin are removed (static ones
  stay), the generation moves, the protocol is voted among those every member
  supports (``selectProtocol``), the leader is kept if it rejoined and every
  parked join is answered: the leader with every member's metadata, the others
  with an empty list.
* **CompletingRebalance**: SyncGroups park until the leader's, which carries
  the assignment; then every parked sync is answered and the group is
  **Stable**. A member that sends no SyncGroup within the rebalance timeout is
  removed and the group rebalances (``expirePendingSync``).
* A new member, a leader's rejoin or a rejoin with changed protocols starts a
  new rebalance (parked syncs answer REBALANCE_IN_PROGRESS); a follower that
  rejoins unchanged is answered at once with the current generation.
  Heartbeats answer REBALANCE_IN_PROGRESS during PreparingRebalance.
* A member not heard from (join, sync, heartbeat, commit) within its session
  timeout is removed and the group rebalances; members parked in a join or
  sync do not expire (``hasSatisfiedHeartbeat``). LeaveGroup removes at once.
* JoinGroup v4+ with an empty member id answers MEMBER_ID_REQUIRED with a new
  id (KIP-394), pending until the client joins with it or its session timeout
  passes. Static members (KIP-345, ``group_instance_id``): a join under a known
  instance id with an empty member id replaces the old member id by a new one
  (a request still using the old one gets FENCED_INSTANCE_ID); in a Stable
  group whose protocol does not change, without a rebalance.
* **Dead** is what a group that does not exist reads as; deleted groups go.

The clock is an argument (``now``, ms) of every call; :meth:`tick` runs the
deadlines (session expiry, the join phase, pending syncs) and
:meth:`next_deadline` says when it must run next. A deadline already passed is
also acted on by the next join that touches the group (a zero initial delay
completes in the join itself). Each request carries an opaque ``token``; a
request that parks returns None and is answered later through the
completions a call returns, ``(token, fields)``, ``fields`` the response's
fields as a dict (:mod:`adapters.kafka.group_api` builds the response of the
request's version). :meth:`cancel` forgets a parked request.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import Callable

from .errors import ErrorCode as E

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"
CONSUMER = "consumer"  # ConsumerProtocol.PROTOCOL_TYPE: the protocol type whose metadata lists topics
MIN_SESSION_TIMEOUT_MS = 6_000  # Kafka's group.min.session.timeout.ms
MAX_SESSION_TIMEOUT_MS = 1_800_000  # group.max.session.timeout.ms (30 min)
DEFAULT_INITIAL_REBALANCE_DELAY_MS = 3_000  # group.initial.rebalance.delay.ms
# Bounds on what misbehaving clients can make us keep. Kafka's group.max.size
# defaults to Integer.MAX_VALUE; 1,000 members (counting ids handed out by
# MEMBER_ID_REQUIRED) is far past one gateway's consumers of one group.
MAX_MEMBERS_PER_GROUP = 1_000
# Groups held in memory; when full, Empty groups are forgotten first (their
# offsets stay in the key-value tables). Kafka has no such bound.
MAX_GROUPS = 10_000
# Kafka bounds a group id only by the request size; 255 bytes keeps the offsets'
# table name (offsets.PREFIX + id) far inside core.kvtables.MAX_TABLE_NAME_BYTES.
MAX_GROUP_ID_BYTES = 255

Completion = tuple  # (token, fields dict)


def default_member_id(prefix: str) -> str:
    """Kafka's form (``ClassicGroup.generateMemberId``): client id, or instance id, "-" a UUID."""
    return f"{prefix}-{uuid.uuid4()}"


def valid_group_id(group_id: str) -> bool:
    """Non-empty (``GroupCoordinatorService.isGroupIdNotEmpty``) and within MAX_GROUP_ID_BYTES."""
    return bool(group_id) and len(group_id.encode()) <= MAX_GROUP_ID_BYTES


@dataclass(eq=False)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    session_ms: int
    rebalance_ms: int
    protocol_type: str
    protocols: list  # [(name, metadata bytes)], the member's preference order
    last_seen: int
    join_token: object = None  # a parked JoinGroup
    sync_token: object = None  # a parked SyncGroup
    assignment: bytes = b""

    def metadata(self, protocol: str | None) -> bytes | None:
        return next((meta for name, meta in self.protocols if name == protocol), None)


@dataclass(eq=False)
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict = field(default_factory=dict)  # member id -> Member, join order
    pending: dict = field(default_factory=dict)  # MEMBER_ID_REQUIRED id -> when it expires
    static: dict = field(default_factory=dict)  # instance id -> member id
    rebalance_deadline: int | None = None  # PreparingRebalance: when the join phase (or a delay step) ends
    initial: bool = False  # this rebalance started from Empty (delayed, see the module docstring)
    initial_step: int = 0  # the delay step running, and what remains of the rebalance timeout
    initial_remaining: int = 0
    new_member_added: bool = False
    pending_sync: set = field(default_factory=set)  # members yet to send SyncGroup this generation
    sync_deadline: int | None = None

    def rebalance_timeout(self) -> int:
        return max((m.rebalance_ms for m in self.members.values()), default=0)


def _join_error(code, member_id: str = "") -> dict:
    return {"error_code": int(code), "member_id": member_id}


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription (version int16, then an int32
    count of int16-length strings: the v0 prefix of every version), or None."""
    try:
        count = struct.unpack_from(">i", metadata, 2)[0]
        pos, topics = 6, set()
        for _ in range(count):
            size = struct.unpack_from(">h", metadata, pos)[0]
            if size < 0 or pos + 2 + size > len(metadata):
                return None
            topics.add(bytes(metadata[pos + 2:pos + 2 + size]).decode())
            pos += 2 + size
        return topics
    except (struct.error, UnicodeDecodeError, TypeError):
        return None


class Coordinator:
    """Every classic group of a listener (module docstring)."""

    def __init__(self, *, initial_rebalance_delay_ms: int = DEFAULT_INITIAL_REBALANCE_DELAY_MS,
                 new_member_id: Callable[[str], str] = default_member_id) -> None:
        self.initial_delay_ms = max(0, initial_rebalance_delay_ms)
        self.new_member_id = new_member_id
        self.groups: dict[str, Group] = {}

    # -- joining ---------------------------------------------------------------------------
    def join(self, group_id: str, member_id: str, instance_id: str | None, protocol_type: str, protocols: list,
             session_ms: int, rebalance_ms: int, *, version: int, client_id: str, now: int, token):
        """``(fields or None, completions)``: None when the join parked."""
        if not valid_group_id(group_id):
            return _join_error(E.INVALID_GROUP_ID, member_id), []
        if not MIN_SESSION_TIMEOUT_MS <= session_ms <= MAX_SESSION_TIMEOUT_MS:
            return _join_error(E.INVALID_SESSION_TIMEOUT, member_id), []
        group = self.groups.get(group_id)
        created = group is None
        if created:
            if member_id:  # Kafka: a member id for a group it does not have
                return _join_error(E.UNKNOWN_MEMBER_ID, member_id), []
            if not self._room_for_a_group():
                return _join_error(E.COORDINATOR_NOT_AVAILABLE), []
            group = self.groups[group_id] = Group(group_id)
        protocols = [(name, bytes(meta)) for name, meta in protocols]
        fields, completions = self._join(group, member_id, instance_id, protocol_type, protocols, session_ms,
                                         rebalance_ms, version, client_id, now, token)
        if created and not group.members and not group.pending:
            del self.groups[group_id]  # a refused join creates no group
        return fields, completions + self._due(group, now)

    def _room_for_a_group(self) -> bool:
        if len(self.groups) >= MAX_GROUPS:
            for gid in [g.group_id for g in self.groups.values() if g.state == EMPTY and not g.pending]:
                del self.groups[gid]
        return len(self.groups) < MAX_GROUPS

    def _join(self, group: Group, member_id, instance_id, ptype, protocols, session_ms, rebalance_ms, version,
              client_id, now, token):
        if not self._supports(group, ptype, protocols):
            return _join_error(E.INCONSISTENT_GROUP_PROTOCOL, member_id), []
        if not member_id:  # classicGroupJoinNewMember
            if len(group.members) + len(group.pending) >= MAX_MEMBERS_PER_GROUP:
                return _join_error(E.GROUP_MAX_SIZE_REACHED), []
            new_id = self.new_member_id(instance_id if instance_id is not None else client_id)
            if instance_id is not None and instance_id in group.static:
                return self._replace_static(group, group.static[instance_id], new_id, protocols, session_ms,
                                            rebalance_ms, now, token)
            if instance_id is None and version >= 4:  # KIP-394: the client must come back with the id
                group.pending[new_id] = now + session_ms
                return _join_error(E.MEMBER_ID_REQUIRED, new_id), []
            return self._add(group, new_id, instance_id, client_id, ptype, protocols, session_ms, rebalance_ms,
                             now, token)
        if member_id in group.pending:
            if instance_id is not None:  # ids handed out pending are dynamic (Kafka: IllegalStateException)
                return _join_error(E.UNKNOWN_MEMBER_ID, member_id), []
            del group.pending[member_id]
            return self._add(group, member_id, None, client_id, ptype, protocols, session_ms, rebalance_ms,
                             now, token)
        err = self._validate(group, member_id, instance_id)
        if err:
            return _join_error(err, member_id), []
        member = group.members[member_id]
        member.last_seen = now
        unchanged = member.protocols == protocols
        if group.state == COMPLETING and unchanged:  # it lost the answer: the current generation again
            return self._join_answer(group, member, group.leader == member_id), []
        if group.state == STABLE and unchanged and group.leader != member_id:
            return self._join_answer(group, member, False), []
        completions = self._park_join(member, protocols, session_ms, rebalance_ms, token)
        return None, completions + self._rebalance_or_complete(group, now)

    @staticmethod
    def _supports(group: Group, ptype: str, protocols: list) -> bool:
        """``ClassicGroup.supportsProtocols``: anything named while the group has no
        members, else the group's type and a protocol every member supports."""
        names = {name for name, _ in protocols}
        if not group.members:
            return bool(ptype) and bool(names)
        common = set.intersection(*({name for name, _ in m.protocols} for m in group.members.values()))
        return ptype == group.protocol_type and bool(names & common)

    @staticmethod
    def _validate(group: Group, member_id: str, instance_id: str | None) -> int:
        """``ClassicGroup.validateMember``: 0, UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID."""
        if instance_id is not None:
            known = group.static.get(instance_id)
            if known is None:
                return int(E.UNKNOWN_MEMBER_ID)
            if known != member_id:
                return int(E.FENCED_INSTANCE_ID)
        return 0 if member_id in group.members else int(E.UNKNOWN_MEMBER_ID)

    @staticmethod
    def _park_join(member: Member, protocols, session_ms, rebalance_ms, token) -> list:
        """``ClassicGroup.updateMember``; a join already parked is answered (superseded)."""
        completions = []
        if member.join_token is not None:
            completions.append((member.join_token, _join_error(E.REBALANCE_IN_PROGRESS, member.member_id)))
        member.protocols, member.session_ms, member.rebalance_ms = protocols, session_ms, rebalance_ms
        member.join_token = token
        return completions

    def _add(self, group: Group, member_id, instance_id, client_id, ptype, protocols, session_ms, rebalance_ms,
             now, token):
        """``addMemberThenRebalanceOrCompleteJoin``."""
        if not group.members:
            group.protocol_type = ptype
        if group.leader is None:
            group.leader = member_id
        if group.state == PREPARING and group.initial:
            group.new_member_added = True
        group.members[member_id] = Member(member_id, instance_id, client_id, session_ms, rebalance_ms, ptype,
                                          protocols, now, join_token=token)
        if instance_id is not None:
            group.static[instance_id] = member_id
        return None, self._rebalance_or_complete(group, now)

    def _replace_static(self, group: Group, old_id, new_id, protocols, session_ms, rebalance_ms, now, token):
        """``updateStaticMemberThenRebalanceOrCompleteJoin``: the new id takes the old one's place."""
        prior_leader = group.leader
        old = group.members.pop(old_id)
        completions = []
        if old.join_token is not None:
            completions.append((old.join_token, _join_error(E.FENCED_INSTANCE_ID, old_id)))
        if old.sync_token is not None:
            completions.append((old.sync_token, {"error_code": int(E.FENCED_INSTANCE_ID)}))
        member = group.members[new_id] = Member(new_id, old.instance_id, old.client_id, session_ms, rebalance_ms,
                                                old.protocol_type, protocols, now, assignment=old.assignment)
        group.static[old.instance_id] = new_id
        if group.leader == old_id:
            group.leader = new_id
        if old_id in group.pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        if group.state == STABLE and self._vote(group) == group.protocol:
            # No rebalance. Before JoinGroup v9 (skip assignment) Kafka names the leader
            # as it was, so a replaced leader acts as a follower and keeps its assignment.
            answer = self._join_answer(group, member, False)
            answer["leader"] = prior_leader or ""
            return answer, completions
        member.join_token = token
        if group.state in (STABLE, COMPLETING):
            return None, completions + self._prepare(group, now)
        return None, completions + self._maybe_complete_join(group, now)

    def _join_answer(self, group: Group, member: Member, leader: bool) -> dict:
        everyone = [(m.member_id, m.instance_id, m.metadata(group.protocol) or b"")
                    for m in group.members.values()] if leader else []
        return {"error_code": 0, "generation_id": group.generation, "protocol_type": group.protocol_type,
                "protocol_name": group.protocol, "leader": group.leader or "", "member_id": member.member_id,
                "members": everyone}

    # -- rebalancing -------------------------------------------------------------------------
    def _rebalance_or_complete(self, group: Group, now: int) -> list:
        """``maybePrepareRebalanceOrCompleteJoin``."""
        if group.state in (EMPTY, STABLE, COMPLETING):
            return self._prepare(group, now)
        return self._maybe_complete_join(group, now)

    def _prepare(self, group: Group, now: int) -> list:
        """``prepareRebalance``: parked syncs answer REBALANCE_IN_PROGRESS."""
        completions = []
        if group.state == COMPLETING:  # resetAndPropagateAssignmentWithError
            for m in group.members.values():
                m.assignment = b""
                if m.sync_token is not None:
                    completions.append((m.sync_token, {"error_code": int(E.REBALANCE_IN_PROGRESS)}))
                    m.sync_token = None
        group.pending_sync.clear()
        group.sync_deadline = None
        group.initial = group.state == EMPTY
        group.state = PREPARING
        if group.initial:
            group.new_member_added = False
            group.initial_step = self.initial_delay_ms
            group.initial_remaining = max(group.rebalance_timeout() - self.initial_delay_ms, 0)
            group.rebalance_deadline = now + self.initial_delay_ms
            return completions
        if self._all_joined(group):
            return completions + self._complete_join(group, now)
        group.rebalance_deadline = now + group.rebalance_timeout()
        return completions

    def _maybe_complete_join(self, group: Group, now: int) -> list:
        """``maybeCompleteJoinPhase``: not during an initial (delayed) rebalance."""
        if group.state == PREPARING and not group.initial and self._all_joined(group):
            return self._complete_join(group, now)
        return []

    @staticmethod
    def _all_joined(group: Group) -> bool:
        return not group.pending and all(m.join_token is not None for m in group.members.values())

    def _initial_step(self, group: Group, now: int) -> list:
        """``tryCompleteInitialRebalanceElseSchedule``: wait once more if someone new came."""
        if group.new_member_added and group.initial_remaining != 0:
            group.new_member_added = False
            step = min(self.initial_delay_ms, group.initial_remaining)
            group.initial_remaining = max(group.initial_remaining - group.initial_step, 0)
            group.initial_step = step
            group.rebalance_deadline = now + step
            return []
        return self._complete_join(group, now)

    def _complete_join(self, group: Group, now: int) -> list:
        """``completeClassicGroupJoin``."""
        completions = []
        for m in [m for m in group.members.values() if m.join_token is None and m.instance_id is None]:
            completions += self._remove(group, m)
        joined = [m for m in group.members.values() if m.join_token is not None]
        group.initial = False
        if group.members and not joined:  # only static members, none rejoined: wait again
            group.rebalance_deadline = now + group.rebalance_timeout()
            return completions
        group.rebalance_deadline = None
        if group.leader not in group.members or group.members[group.leader].join_token is None:
            group.leader = joined[0].member_id if joined else None  # maybeElectNewJoinedLeader
        group.generation += 1
        if not group.members:
            group.state, group.protocol = EMPTY, None
            return completions
        group.protocol = self._vote(group)
        group.state = COMPLETING
        for m in group.members.values():
            if m.join_token is not None:
                completions.append((m.join_token, self._join_answer(group, m, m.member_id == group.leader)))
                m.join_token = None
            m.last_seen = now
            group.pending_sync.add(m.member_id)
        group.sync_deadline = now + group.rebalance_timeout()
        return completions

    @staticmethod
    def _vote(group: Group) -> str:
        """``ClassicGroup.selectProtocol``: each member votes for its most preferred protocol
        that every member supports; the most votes win (ties: the first voted for)."""
        members = list(group.members.values())
        common = set.intersection(*({name for name, _ in m.protocols} for m in members))
        votes: dict[str, int] = {}
        for m in members:
            choice = next(name for name, _ in m.protocols if name in common)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def _remove(self, group: Group, member: Member) -> list:
        """Drop a member; its parked requests answer UNKNOWN_MEMBER_ID (Kafka's
        ``removeMemberAndUpdateClassicGroup`` does so for a parked join)."""
        del group.members[member.member_id]
        if member.instance_id is not None and group.static.get(member.instance_id) == member.member_id:
            del group.static[member.instance_id]
        group.pending_sync.discard(member.member_id)
        if group.leader == member.member_id:
            group.leader = next(iter(group.members), None)
        completions = []
        if member.join_token is not None:
            completions.append((member.join_token, _join_error(E.UNKNOWN_MEMBER_ID)))
        if member.sync_token is not None:
            completions.append((member.sync_token, {"error_code": int(E.UNKNOWN_MEMBER_ID)}))
        member.join_token = member.sync_token = None
        return completions

    def _after_loss(self, group: Group, now: int) -> list:
        if group.state in (STABLE, COMPLETING):
            return self._prepare(group, now)
        return self._maybe_complete_join(group, now)

    # -- syncing, heartbeats, leaving ---------------------------------------------------------
    def sync(self, group_id: str, generation: int, member_id: str, protocol_type: str | None,
             protocol_name: str | None, assignments: list, *, now: int, token, instance_id: str | None = None):
        """``(fields or None, completions)``: a follower's sync parks until the leader's."""
        if not group_id:
            return {"error_code": int(E.INVALID_GROUP_ID)}, []
        group = self.groups.get(group_id)
        if group is None or not group.members:
            return {"error_code": int(E.UNKNOWN_MEMBER_ID)}, []
        err = self._validate(group, member_id, instance_id)
        if not err and generation != group.generation:
            err = int(E.ILLEGAL_GENERATION)
        if not err and ((protocol_type is not None and group.protocol_type is not None
                         and protocol_type != group.protocol_type)
                        or (protocol_name is not None and group.protocol is not None
                            and protocol_name != group.protocol)):
            err = int(E.INCONSISTENT_GROUP_PROTOCOL)  # isProtocolInconsistent
        if err:
            return {"error_code": err}, []
        member = group.members[member_id]
        member.last_seen = now
        if group.state == PREPARING:
            return {"error_code": int(E.REBALANCE_IN_PROGRESS)}, []
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            group.sync_deadline = None
        done = {"error_code": 0, "protocol_type": group.protocol_type, "protocol_name": group.protocol}
        if group.state == STABLE:
            return {**done, "assignment": member.assignment}, []
        completions = []
        if member.sync_token is not None:  # superseded
            completions.append((member.sync_token, {"error_code": int(E.REBALANCE_IN_PROGRESS)}))
        member.sync_token = token
        if member_id != group.leader:
            return None, completions
        given = {mid: bytes(assignment) for mid, assignment in assignments}
        for m in group.members.values():
            m.assignment = given.get(m.member_id, b"")  # missing: an empty assignment, as Kafka
            if m.sync_token is not None:
                completions.append((m.sync_token, {**done, "assignment": m.assignment}))
                m.sync_token, m.last_seen = None, now
        group.state = STABLE
        return None, completions

    def heartbeat(self, group_id: str, generation: int, member_id: str, *, now: int,
                  instance_id: str | None = None) -> dict:
        if not group_id:
            return {"error_code": int(E.INVALID_GROUP_ID)}
        group = self.groups.get(group_id)
        if group is None:
            return {"error_code": int(E.UNKNOWN_MEMBER_ID)}
        err = self._validate(group, member_id, instance_id)
        if not err and generation != group.generation:
            err = int(E.ILLEGAL_GENERATION)
        if err or group.state == EMPTY:
            return {"error_code": err or int(E.UNKNOWN_MEMBER_ID)}
        group.members[member_id].last_seen = now
        return {"error_code": int(E.REBALANCE_IN_PROGRESS) if group.state == PREPARING else 0}

    def leave(self, group_id: str, members: list, *, now: int):
        """``members``: [(member id, instance id)] -> (top-level error, [error per member],
        completions) (``classicGroupLeaveToClassicGroup``). An empty member id with an
        instance id removes that static member (an administrator's removal)."""
        if not group_id:
            return int(E.INVALID_GROUP_ID), [], []
        group = self.groups.get(group_id)
        if group is None:
            return int(E.UNKNOWN_MEMBER_ID), [], []
        errors, completions = [], []
        for member_id, instance_id in members:
            if not member_id:
                target = group.static.get(instance_id) if instance_id is not None else None
                err = 0 if target is not None else int(E.UNKNOWN_MEMBER_ID)
            elif member_id in group.pending:
                del group.pending[member_id]
                target, err = None, 0
            else:
                target, err = member_id, self._validate(group, member_id, instance_id)
            if not err and target is not None:
                completions += self._remove(group, group.members[target])
            errors.append(err)
        if 0 in errors:
            completions += self._after_loss(group, now)
        return 0, errors, completions

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
        """Run every deadline that has passed; the completions of parked requests."""
        completions = []
        for group in list(self.groups.values()):
            completions += self._due(group, now)
        return completions

    def _due(self, group: Group, now: int) -> list:
        out = []
        expired = [mid for mid, until in group.pending.items() if until <= now]
        for mid in expired:  # expireClassicGroupMemberHeartbeat of a pending member
            del group.pending[mid]
        if expired:
            out += self._maybe_complete_join(group, now)
        silent = [m for m in group.members.values()
                  if m.join_token is None and m.sync_token is None and m.last_seen + m.session_ms <= now]
        for m in silent:
            out += self._remove(group, m)
        if silent:
            out += self._after_loss(group, now)
        if group.sync_deadline is not None and group.sync_deadline <= now:
            late = [group.members[mid] for mid in group.pending_sync if mid in group.members]
            group.pending_sync.clear()
            group.sync_deadline = None
            for m in late:
                out += self._remove(group, m)
            if late and group.state in (STABLE, COMPLETING):
                out += self._prepare(group, now)
        if group.state == PREPARING and group.rebalance_deadline is not None and group.rebalance_deadline <= now:
            out += self._initial_step(group, now) if group.initial else self._complete_join(group, now)
        return out

    def next_deadline(self) -> int | None:
        """When :meth:`tick` must run next (ms), or None when nothing waits on the clock."""
        times = []
        for group in self.groups.values():
            times += group.pending.values()
            times += [m.last_seen + m.session_ms for m in group.members.values()
                      if m.join_token is None and m.sync_token is None]  # parked members do not expire
            if group.sync_deadline is not None:
                times.append(group.sync_deadline)
            if group.state == PREPARING and group.rebalance_deadline is not None:
                times.append(group.rebalance_deadline)
        return min(times) if times else None

    # -- offsets, admin ---------------------------------------------------------------------------
    def check_commit(self, group_id: str, generation: int, member_id: str, *, now: int,
                     instance_id: str | None = None) -> int:
        """The error code of an offset commit from (generation, member): Kafka's
        ``OffsetMetadataManager.validateOffsetCommit`` and ``ClassicGroup.validateOffsetCommit``
        (OffsetCommit v0-8). Generation -1 is a "simple" commit (an admin client, or a
        consumer assigning partitions itself): accepted while the group has no members."""
        if not valid_group_id(group_id):
            return int(E.INVALID_GROUP_ID)
        group = self.groups.get(group_id)
        if group is None:
            return 0 if generation < 0 else int(E.ILLEGAL_GENERATION)  # GROUP_ID_NOT_FOUND from v9
        if generation < 0 and group.state == EMPTY:
            return 0
        if generation >= 0 or member_id or instance_id is not None:
            err = self._validate(group, member_id, instance_id)
            if err:
                return err
            if generation != group.generation:
                return int(E.ILLEGAL_GENERATION)
        elif group.state != EMPTY:
            return int(E.UNKNOWN_MEMBER_ID)
        if group.state == COMPLETING:
            return int(E.REBALANCE_IN_PROGRESS)
        if group.state in (STABLE, PREPARING):  # a commit keeps the session (commitOffset)
            group.members[member_id].last_seen = now
        return 0

    def check_offset_delete(self, group_id: str) -> int:
        """``ClassicGroup.validateOffsetDelete``: only an Empty group, or one of protocol
        type "consumer", may lose offsets (0 or NON_EMPTY_GROUP; an unknown group is 0)."""
        group = self.groups.get(group_id)
        if group is None or group.state == EMPTY or group.protocol_type == CONSUMER:
            return 0
        return int(E.NON_EMPTY_GROUP)

    def is_subscribed(self, group_id: str, topic: str) -> bool:
        """``ClassicGroup.isSubscribedToTopic``: from the members' consumer-protocol
        metadata; when it does not parse, a consumer group is taken as subscribed."""
        group = self.groups.get(group_id)
        if group is None or group.protocol_type != CONSUMER:
            return False
        if not group.members:
            return False
        for m in group.members.values():
            metadata = m.metadata(group.protocol)
            topics = subscribed_topics(metadata) if metadata is not None else None
            if topics is None or topic in topics:
                return True
        return False

    def describe(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def listing(self) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group held."""
        return [(g.group_id, g.protocol_type or "", g.state) for g in self.groups.values()]

    def delete(self, group_id: str) -> int:
        """``ClassicGroup.validateDeleteGroup``: NON_EMPTY_GROUP unless Empty (0; an unknown group is 0)."""
        group = self.groups.get(group_id)
        if group is not None and group.state != EMPTY:
            return int(E.NON_EMPTY_GROUP)
        self.groups.pop(group_id, None)
        return 0


__all__ = [
    "COMPLETING", "CONSUMER", "Coordinator", "DEAD", "EMPTY", "Group", "MAX_GROUPS", "MAX_GROUP_ID_BYTES",
    "MAX_MEMBERS_PER_GROUP", "Member", "PREPARING", "STABLE", "default_member_id", "subscribed_topics",
    "valid_group_id",
]
