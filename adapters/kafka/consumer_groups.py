"""Kafka's consumer-group protocol (KIP-848): a sans-I/O coordinator with server-side assignment.

Theory of operation
-------------------
One :class:`ConsumerGroups` per listener holds every consumer-protocol group in
memory, beside the classic coordinator (:mod:`adapters.kafka.groups`); a group
id is one or the other (:mod:`adapters.kafka.group_api` keeps them apart).
Membership is runtime state, as for classic groups; committed offsets are
durable elsewhere (:mod:`adapters.kafka.offsets`). The model is Kafka's
(``GroupMetadataManager.consumerGroupHeartbeat``, ``ConsumerGroup``,
``ConsumerGroupMember``, ``CurrentAssignmentBuilder``):

* A member joins with member epoch 0 (its subscription, a rebalance timeout,
  no owned partitions), heartbeats with its current epoch, leaves with -1
  (a static member, ``instance_id``, with -2: it keeps its place until its
  session times out, and a new member under the same instance id takes over
  its assignment). The member id is the client's (v1, KIP-1082) or, when
  empty (v0), one made here.
* The **group epoch** moves whenever a member joins, leaves or changes its
  subscription or server assignor, or the subscribed topics change (a topic
  created, deleted or given partitions: the subscription metadata is read
  afresh at every heartbeat). When it passes the **target assignment**'s
  epoch, the group's assignor (:mod:`adapters.kafka.assignors`; the most named
  among the members' ``ServerAssignor``, else ``uniform``) computes a new
  target for every member.
* Each member then moves towards its target one heartbeat at a time
  (:meth:`_reconcile`, ``CurrentAssignmentBuilder``): partitions it must give up
  are revoked first, and the member keeps its epoch until a heartbeat no longer
  reports them as owned (UNREVOKED_PARTITIONS); partitions another member
  still holds (assigned or being revoked) are not handed out until it let go
  (UNRELEASED_PARTITIONS). So a partition never has two owners. A member that
  does not revoke within its rebalance timeout is fenced.
* A heartbeat with an epoch the coordinator does not expect answers
  FENCED_MEMBER_EPOCH, except the previous epoch with owned partitions inside
  the current assignment (the answer that bumped it was lost); an unknown member
  answers UNKNOWN_MEMBER_ID. librdkafka rejoins with epoch 0 on both. An epoch-0
  join under a known member id starts that member afresh.
* A member not heard from within :data:`SESSION_TIMEOUT_MS` is fenced (removed,
  group epoch bumped).

The clock is an argument (``now``, ms) of every call; :meth:`tick` runs the
deadlines (session expiry, revocation timeout) and :meth:`next_deadline`
says when it must run next. Nothing here parks: every heartbeat is answered
at once (``fields`` of the response as a dict; the API layer builds it).

Differences from Kafka, each for a reason:

* An epoch above 0 for a group this gateway does not hold answers
  UNKNOWN_MEMBER_ID (Kafka: GROUP_ID_NOT_FOUND, which librdkafka treats as
  fatal): groups are not kept across a restart here, so members must be told
  to rejoin instead.
* ``SubscribedTopicRegex`` (v1) is refused with INVALID_REQUEST, Kafka's own
  answer before it served regexes ("not supported yet"); an empty one, which
  librdkafka sends when it has none, is no regex. Rack ids are kept but no
  assignor uses them.
"""

from __future__ import annotations

import struct
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from .assignors import ASSIGNORS, DEFAULT_ASSIGNOR
from .errors import ErrorCode as E
from .groups import MAX_GROUP_ID_BYTES, MAX_GROUPS, MAX_MEMBERS_PER_GROUP

HEARTBEAT_INTERVAL_MS = 5_000  # Kafka's group.consumer.heartbeat.interval.ms
SESSION_TIMEOUT_MS = 45_000  # group.consumer.session.timeout.ms
LEAVE_EPOCH = -1  # ConsumerGroupHeartbeatRequest.LEAVE_GROUP_MEMBER_EPOCH
STATIC_LEAVE_EPOCH = -2  # LEAVE_GROUP_STATIC_MEMBER_EPOCH
# A subscription names at most this many topics: bounds what one heartbeat makes us
# resolve and keep (Kafka bounds it only by the request size).
MAX_SUBSCRIBED_TOPICS = 1_000

# ConsumerGroup.ConsumerGroupState names (ListGroups / DescribeGroups), and MemberState
EMPTY, ASSIGNING, RECONCILING, STABLE, DEAD = "Empty", "Assigning", "Reconciling", "Stable", "Dead"
M_STABLE, M_UNREVOKED, M_UNRELEASED = "STABLE", "UNREVOKED_PARTITIONS", "UNRELEASED_PARTITIONS"

Partitions = dict  # {topic id (uuid.UUID): frozenset[int]}
TopicLookup = Callable[[str], "tuple[uuid.UUID, int] | None"]  # name -> (topic id, partition count)


@dataclass(eq=False)
class Member:
    member_id: str
    instance_id: str | None = None
    client_id: str = ""
    rack_id: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    state: str = M_STABLE
    subscribed: frozenset = frozenset()
    assignor: str | None = None
    rebalance_ms: int = 0
    assigned: dict = field(default_factory=dict)  # Partitions it may use now
    revoking: dict = field(default_factory=dict)  # Partitions it must give up
    last_seen: int = 0
    revoke_deadline: int | None = None

    def reconciled_to(self, epoch: int) -> bool:
        return self.state == M_STABLE and self.epoch == epoch


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    epoch: int = 0  # the group epoch
    assignment_epoch: int = 0  # the target assignment's epoch
    members: dict = field(default_factory=dict)  # member id -> Member, join order
    static: dict = field(default_factory=dict)  # instance id -> member id
    target: dict = field(default_factory=dict)  # member id -> Partitions
    metadata: dict = field(default_factory=dict)  # subscribed name -> (topic id, partitions): what exists

    @property
    def state(self) -> str:
        """``ConsumerGroup.maybeUpdateGroupState``."""
        if not self.members:
            return EMPTY
        if self.epoch > self.assignment_epoch:
            return ASSIGNING
        if any(not m.reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return RECONCILING
        return STABLE

    def subscribed_names(self) -> set[str]:
        return set().union(*(m.subscribed for m in self.members.values())) if self.members else set()

    def assignor(self) -> str:
        """``computePreferredServerAssignor``: the most named by members (ties: by name)."""
        named = Counter(m.assignor for m in self.members.values() if m.assignor is not None)
        if not named:
            return DEFAULT_ASSIGNOR
        return min(named, key=lambda name: (-named[name], name))


def _str16(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def classic_view(group: ConsumerGroup, member: Member) -> tuple[bytes, bytes]:
    """A member as DescribeGroups shows a classic consumer: its subscription and assignment
    encoded as ConsumerProtocolSubscription and ConsumerProtocolAssignment v0 (version
    int16, int16-length topic names, int32 partitions, null user data), so admin tools that
    decode those bytes (librdkafka's, kafka-python's) show what the member holds."""
    names = {tid: name for name, (tid, _n) in group.metadata.items()}
    topics = sorted(member.subscribed)
    subscription = b"".join([struct.pack(">hi", 0, len(topics)), *map(_str16, topics), struct.pack(">i", -1)])
    held = sorted((names[tid], sorted(ps)) for tid, ps in member.assigned.items() if tid in names and ps)
    parts = [struct.pack(">hi", 0, len(held))]
    for name, ps in held:
        parts += [_str16(name), struct.pack(f">i{len(ps)}i", len(ps), *ps)]
    parts.append(struct.pack(">i", -1))
    return subscription, b"".join(parts)


class HeartbeatError(Exception):
    """A heartbeat answered with an error alone (Kafka's ``getErrorResponse``)."""

    def __init__(self, code: E, message: str | None = None) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message


def _error(code: int, message: str | None) -> dict:
    return {"error_code": code, "error_message": message, "member_id": None, "member_epoch": 0,
            "heartbeat_interval_ms": 0, "assignment": None}


def _owned(body) -> dict | None:
    """The request's owned partitions as Partitions, or None when not sent."""
    if body.topic_partitions is None:
        return None
    owned: dict = {}
    for tp in body.topic_partitions:
        owned[tp.topic_id] = owned.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return owned


def _subset(owned: dict | None, of: dict) -> bool:
    """``GroupMetadataManager.isSubset``: None is not a subset."""
    if owned is None:
        return False
    return all(parts <= of.get(tid, frozenset()) for tid, parts in owned.items() if parts)


def _overlaps(owned: dict | None, parts: dict) -> bool:
    """``CurrentAssignmentBuilder.ownsRevokedPartitions``: None counts as still owning."""
    if owned is None:
        return True
    return any(owned.get(tid, frozenset()) & ps for tid, ps in parts.items())


class ConsumerGroups:
    """Every consumer-protocol group of a listener (module docstring)."""

    def __init__(self, *, heartbeat_interval_ms: int | None = None, session_timeout_ms: int | None = None,
                 new_member_id: Callable[[], str] = lambda: str(uuid.uuid4())) -> None:
        # Read at construction, so a test can shorten the module defaults for a gateway it starts.
        self.heartbeat_ms = heartbeat_interval_ms or HEARTBEAT_INTERVAL_MS
        self.session_ms = session_timeout_ms or SESSION_TIMEOUT_MS
        self.new_member_id = new_member_id
        self.groups: dict[str, ConsumerGroup] = {}

    # -- the heartbeat ---------------------------------------------------------------------
    def heartbeat(self, body, *, client_id: str, now: int, topics: TopicLookup) -> dict:
        """The response fields of one ConsumerGroupHeartbeat (``body``: the decoded request);
        ``topics`` resolves a subscribed name to (topic id, partitions), None when absent."""
        try:
            self._validate(body)
            if body.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return self._leave(body)
            return self._heartbeat(body, client_id, now, topics)
        except HeartbeatError as err:
            return _error(err.code, err.message)

    @staticmethod
    def _validate(body) -> None:
        """``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
        if not body.group_id:
            raise HeartbeatError(E.INVALID_REQUEST, "GroupId can't be empty.")
        if len(body.group_id.encode()) > MAX_GROUP_ID_BYTES:
            raise HeartbeatError(E.INVALID_GROUP_ID, f"GroupId is longer than {MAX_GROUP_ID_BYTES} bytes.")
        if body.instance_id == "":
            raise HeartbeatError(E.INVALID_REQUEST, "InstanceId can't be empty.")
        if body.rack_id == "":
            raise HeartbeatError(E.INVALID_REQUEST, "RackId can't be empty.")
        if getattr(body, "subscribed_topic_regex", None):  # "" means none: librdkafka sends it so
            raise HeartbeatError(E.INVALID_REQUEST, "SubscribedTopicRegex is not supported by Ferry.")
        epoch = body.member_epoch
        if epoch > 0 or epoch == LEAVE_EPOCH:
            if not body.member_id:
                raise HeartbeatError(E.INVALID_REQUEST, "MemberId can't be empty.")
        elif epoch == 0:
            if body.rebalance_timeout_ms == -1:
                raise HeartbeatError(E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if body.topic_partitions is None or body.topic_partitions:
                raise HeartbeatError(E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if not body.subscribed_topic_names:
                raise HeartbeatError(E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        elif epoch == STATIC_LEAVE_EPOCH:
            if not body.member_id:
                raise HeartbeatError(E.INVALID_REQUEST, "MemberId can't be empty.")
            if body.instance_id is None:
                raise HeartbeatError(E.INVALID_REQUEST, "InstanceId can't be null.")
        else:
            raise HeartbeatError(E.INVALID_REQUEST, "MemberEpoch is invalid.")
        if body.subscribed_topic_names is not None and len(body.subscribed_topic_names) > MAX_SUBSCRIBED_TOPICS:
            raise HeartbeatError(E.INVALID_REQUEST, f"more than {MAX_SUBSCRIBED_TOPICS} subscribed topics")
        if body.server_assignor is not None and body.server_assignor not in ASSIGNORS:
            raise HeartbeatError(E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {body.server_assignor} is not supported. "
                                 f"Supported assignors: {', '.join(ASSIGNORS)}.")

    def _heartbeat(self, body, client_id: str, now: int, topics: TopicLookup) -> dict:
        joining = body.member_epoch == 0
        group = self.groups.get(body.group_id)
        if group is None:
            if not joining:  # not GROUP_ID_NOT_FOUND: see the module docstring
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Group {body.group_id} is not known here.")
            if not self._room_for_a_group():
                raise HeartbeatError(E.COORDINATOR_NOT_AVAILABLE, "too many groups")
            group = ConsumerGroup(body.group_id)
        member_id = body.member_id or self.new_member_id()
        try:
            member, bump = self._member(group, body, member_id, joining, now)
        finally:
            if group.members and body.group_id not in self.groups:
                self.groups[body.group_id] = group
        before = member.assigned
        if body.subscribed_topic_names is not None:
            names = frozenset(body.subscribed_topic_names)
            bump |= names != member.subscribed
            member.subscribed = names
        if body.server_assignor is not None:
            bump |= body.server_assignor != member.assignor
            member.assignor = body.server_assignor
        if body.rebalance_timeout_ms != -1:
            member.rebalance_ms = body.rebalance_timeout_ms
        if body.rack_id is not None:
            member.rack_id = body.rack_id
        member.client_id = client_id
        metadata = self._metadata(group, topics)
        if bump or metadata != group.metadata:
            group.metadata = metadata
            group.epoch += 1
        if group.epoch > group.assignment_epoch:
            self._assign(group)
        self._reconcile(group, member, _owned(body), now)
        member.last_seen = now
        full = joining or (body.rebalance_timeout_ms != -1 and body.subscribed_topic_names is not None
                           and body.topic_partitions is not None)
        changed = member.assigned != before  # hasAssignedPartitionsChanged
        return {"error_code": 0, "error_message": None, "member_id": member.member_id,
                "member_epoch": member.epoch, "heartbeat_interval_ms": self.heartbeat_ms,
                "assignment": self._answer(member.assigned) if full or changed else None}

    def _member(self, group: ConsumerGroup, body, member_id: str, joining: bool, now: int) -> tuple[Member, bool]:
        """The member the heartbeat is from, new or known, and whether the group epoch must
        move (``getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember``)."""
        iid = body.instance_id
        if iid is not None:
            known_id = group.static.get(iid)
            if not joining:
                if known_id is None:
                    raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Instance id {iid} is unknown.")
                if known_id != member_id:
                    raise HeartbeatError(E.FENCED_INSTANCE_ID, f"Instance id {iid} is used by another member.")
            elif known_id is not None and known_id != member_id:
                old = group.members[known_id]
                if old.epoch != STATIC_LEAVE_EPOCH:
                    raise HeartbeatError(E.UNRELEASED_INSTANCE_ID, f"Instance id {iid} is still in use.")
                # The new member takes the departed one's place and assignment, no group epoch bump.
                del group.members[known_id]
                group.target[member_id] = group.target.pop(known_id, {})
                new = Member(member_id, iid, subscribed=old.subscribed, assignor=old.assignor,
                             rebalance_ms=old.rebalance_ms, assigned=dict(old.assigned), last_seen=now)
                group.members[member_id] = new
                group.static[iid] = member_id
                return new, False
        member = group.members.get(member_id)
        if joining:
            if member is None and len(group.members) >= MAX_MEMBERS_PER_GROUP:
                raise HeartbeatError(E.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum "
                                     f"capacity of {MAX_MEMBERS_PER_GROUP} members.")
            if member is not None:  # a rejoin: it gave up everything (TopicPartitions is empty)
                self._remove(group, member)
            member = group.members[member_id] = Member(member_id, iid, last_seen=now)
            if iid is not None:
                group.static[iid] = member_id
            return member, True
        if member is None:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                                 f"{group.group_id}.")
        self._check_epoch(member, body.member_epoch, _owned(body))
        return member, False

    @staticmethod
    def _check_epoch(member: Member, epoch: int, owned: dict | None) -> None:
        """``throwIfConsumerGroupMemberEpochIsInvalid``."""
        if epoch > member.epoch:
            raise HeartbeatError(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member epoch "
                                 f"({epoch}) than the one known by the group coordinator ({member.epoch}).")
        if epoch < member.epoch and (epoch != member.previous_epoch or not _subset(owned, member.assigned)):
            raise HeartbeatError(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member epoch "
                                 f"({epoch}) than the one known by the group coordinator ({member.epoch}).")

    def _room_for_a_group(self) -> bool:
        if len(self.groups) >= MAX_GROUPS:
            for gid in [g.group_id for g in self.groups.values() if not g.members]:
                del self.groups[gid]
        return len(self.groups) < MAX_GROUPS

    @staticmethod
    def _metadata(group: ConsumerGroup, topics: TopicLookup) -> dict:
        out = {}
        for name in sorted(group.subscribed_names()):
            found = topics(name)
            if found is not None:
                out[name] = found
        return out

    @staticmethod
    def _answer(assigned: dict) -> list:
        return [(tid, sorted(parts)) for tid, parts in sorted(assigned.items(), key=lambda kv: str(kv[0]))]

    # -- assignment ------------------------------------------------------------------------------
    @staticmethod
    def _assign(group: ConsumerGroup) -> None:
        """A new target assignment at the group epoch (``TargetAssignmentBuilder``); a static
        member away (epoch -2) keeps its share, for the one who takes its place."""
        assignor = ASSIGNORS[group.assignor()]
        members = {mid: m.subscribed for mid, m in group.members.items()}
        group.target = assignor(members, group.metadata, group.target)
        group.assignment_epoch = group.epoch

    def _reconcile(self, group: ConsumerGroup, member: Member, owned: dict | None, now: int) -> None:
        """``CurrentAssignmentBuilder.build`` for ``member``, then its revocation deadline."""
        target_epoch = group.assignment_epoch
        if member.reconciled_to(target_epoch):
            return
        was = (member.state, member.epoch, member.assigned, member.revoking)
        if member.state == M_UNREVOKED:
            if not _overlaps(owned, member.revoking):
                self._next(group, member, member.epoch + 1, owned)
        else:
            self._next(group, member, member.epoch, owned)
        if (member.state, member.epoch, member.assigned, member.revoking) != was:
            member.revoke_deadline = now + member.rebalance_ms if member.state == M_UNREVOKED else None

    @staticmethod
    def _held(group: ConsumerGroup) -> set:
        """Every (topic id, partition) some member holds or is giving up (its "partition epoch")."""
        held = set()
        for m in group.members.values():
            for parts in (m.assigned, m.revoking):
                for tid, ps in parts.items():
                    held.update((tid, p) for p in ps)
        return held

    def _next(self, group: ConsumerGroup, member: Member, epoch: int, owned: dict | None) -> None:
        """``CurrentAssignmentBuilder.computeNextAssignment``."""
        target = group.target.get(member.member_id, {})
        held = self._held(group)
        assigned, revoking, adding = {}, {}, {}
        unreleased = False
        for tid in set(target) | set(member.assigned):
            want = target.get(tid, frozenset())
            have = member.assigned.get(tid, frozenset())
            keep = have & want
            gone = have - keep
            new = {p for p in want - keep if (tid, p) not in held}
            unreleased |= len(new) < len(want - keep)
            if keep:
                assigned[tid] = keep
            if gone:
                revoking[tid] = gone
            if new:
                adding[tid] = frozenset(new)
        if revoking and _overlaps(owned, revoking):
            self._set_epoch(member, epoch)
            member.state, member.assigned, member.revoking = M_UNREVOKED, assigned, revoking
            return
        for tid, ps in adding.items():
            assigned[tid] = assigned.get(tid, frozenset()) | ps
        self._set_epoch(member, group.assignment_epoch)
        member.state = M_UNRELEASED if unreleased else M_STABLE
        member.assigned, member.revoking = assigned, {}

    @staticmethod
    def _set_epoch(member: Member, epoch: int) -> None:
        """``ConsumerGroupMember.Builder.updateMemberEpoch``."""
        member.previous_epoch, member.epoch = member.epoch, epoch

    # -- leaving, fencing, clocks ----------------------------------------------------------------
    def _leave(self, body) -> dict:
        """``consumerGroupLeave``: -1 removes the member, -2 keeps a static member's place."""
        group = self.groups.get(body.group_id)
        if group is None:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {body.group_id} not found.")
        if body.instance_id is None:
            member = group.members.get(body.member_id)
            if member is None:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {body.member_id} is not a member of group "
                                     f"{body.group_id}.")
        else:
            known_id = group.static.get(body.instance_id)
            if known_id is None:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Instance id {body.instance_id} is unknown.")
            if known_id != body.member_id:
                raise HeartbeatError(E.FENCED_INSTANCE_ID, f"Instance id {body.instance_id} is used by another "
                                     "member.")
            member = group.members[known_id]
            if body.member_epoch == STATIC_LEAVE_EPOCH:  # consumerGroupStaticMemberGroupLeave
                member.epoch, member.revoking, member.revoke_deadline = STATIC_LEAVE_EPOCH, {}, None
                return {"error_code": 0, "error_message": None, "member_id": member.member_id,
                        "member_epoch": STATIC_LEAVE_EPOCH, "heartbeat_interval_ms": 0, "assignment": None}
        self._fence(group, member)
        return {"error_code": 0, "error_message": None, "member_id": body.member_id,
                "member_epoch": body.member_epoch, "heartbeat_interval_ms": 0, "assignment": None}

    @staticmethod
    def _remove(group: ConsumerGroup, member: Member) -> None:
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        if member.instance_id is not None and group.static.get(member.instance_id) == member.member_id:
            del group.static[member.instance_id]

    def _fence(self, group: ConsumerGroup, member: Member) -> None:
        """``consumerGroupFenceMember``: gone, and the group epoch moves (a new target is
        computed at the next heartbeat, as Kafka does)."""
        self._remove(group, member)
        group.epoch += 1

    def tick(self, now: int) -> None:
        """Fence every member past its session timeout or its revocation deadline."""
        for group in list(self.groups.values()):
            for m in list(group.members.values()):
                late = m.revoke_deadline is not None and m.revoke_deadline <= now
                if late or m.last_seen + self.session_ms <= now:
                    self._fence(group, m)

    def next_deadline(self) -> int | None:
        """When :meth:`tick` must run next (ms), or None when no member is held."""
        times = []
        for group in self.groups.values():
            for m in group.members.values():
                times.append(m.last_seen + self.session_ms)
                if m.revoke_deadline is not None:
                    times.append(m.revoke_deadline)
        return min(times) if times else None

    # -- offsets, admin ---------------------------------------------------------------------------
    def get(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def check_commit(self, group_id: str, epoch: int, member_id: str, *, version: int,
                     transactional: bool = False) -> int:
        """``ConsumerGroup.validateOffsetCommit`` for a group held here: 0, UNKNOWN_MEMBER_ID,
        UNSUPPORTED_VERSION (a KIP-848 member commits with OffsetCommit v9+; a transactional
        commit, TxnOffsetCommit, has no such rule) or STALE_MEMBER_EPOCH."""
        group = self.groups[group_id]
        if epoch < 0 and not group.members:
            return 0  # a simple commit: an admin client, or a consumer assigning partitions itself
        member = group.members.get(member_id)
        if member is None:
            return int(E.UNKNOWN_MEMBER_ID)
        if version < 9 and not transactional:
            return int(E.UNSUPPORTED_VERSION)
        return 0 if epoch == member.epoch else int(E.STALE_MEMBER_EPOCH)

    def is_subscribed(self, group_id: str, topic: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and topic in group.subscribed_names()

    def listing(self) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group held."""
        return [(g.group_id, "consumer", g.state) for g in self.groups.values()]

    def delete(self, group_id: str) -> int:
        """``ConsumerGroup.validateDeleteGroup``: NON_EMPTY_GROUP unless Empty (0; unknown is 0)."""
        group = self.groups.get(group_id)
        if group is not None and group.members:
            return int(E.NON_EMPTY_GROUP)
        self.groups.pop(group_id, None)
        return 0


__all__ = [
    "ASSIGNING", "ConsumerGroup", "ConsumerGroups", "DEAD", "EMPTY", "classic_view", "HEARTBEAT_INTERVAL_MS", "HeartbeatError",
    "LEAVE_EPOCH", "M_STABLE", "M_UNRELEASED", "M_UNREVOKED", "Member", "RECONCILING", "SESSION_TIMEOUT_MS",
    "STABLE", "STATIC_LEAVE_EPOCH",
]
