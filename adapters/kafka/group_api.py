"""The group APIs: requests in, coordinator and committed offsets, responses out.

Theory of operation
-------------------
FindCoordinator(10), JoinGroup(11), Heartbeat(12), LeaveGroup(13),
SyncGroup(14), DescribeGroups(15), ListGroups(16), OffsetCommit(8),
OffsetFetch(9), DeleteGroups(42), OffsetDelete(47), ConsumerGroupHeartbeat(68)
and ConsumerGroupDescribe(69), in the versions :mod:`adapters.kafka.messages_groups` declares, on
:class:`~adapters.kafka.groups.Coordinator` (classic membership, sans-I/O),
:class:`~adapters.kafka.consumer_groups.ConsumerGroups` (KIP-848 groups,
sans-I/O) and :class:`~adapters.kafka.offsets.GroupOffsets` (durable offsets,
shared by both). A group id is either classic or consumer-protocol, as in
Kafka: a JoinGroup for a consumer group with members answers
INCONSISTENT_GROUP_PROTOCOL and a ConsumerGroupHeartbeat for a classic group
with members GROUP_ID_NOT_FOUND ("not a consumer group"); an empty group of
the other kind is dropped and the id changes sides
(``maybeDeleteEmptyClassicGroup`` / ``maybeDeleteEmptyConsumerGroup``).
FindCoordinator names a group's coordinator as :mod:`adapters.kafka.placement`
decides (this gateway, unless several serve Kafka over the JetStream store),
and this gateway for a transactional id (key types 0 and 1; any other is
INVALID_REQUEST). A request about a group another gateway coordinates answers
NOT_COORDINATOR, as Kafka's ``isCoordinatorForGroup`` check does, and
ListGroups lists only the groups coordinated here.

:meth:`GroupApi.handle` answers a request at once, or parks it (JoinGroup,
SyncGroup) and returns None. Parked requests are answered through the
completions any call returns, ``(token, response value)``, for requests of
any connection. A token is the caller's handle of one request and must carry
``api_key`` and ``version`` (the session's ``GroupWait`` does): the response
is built for them. Like Kafka, the newest versions answer a parked request by
the same fields; older versions leave out what they lack.

Topics are checked as Kafka's ``KafkaApis`` does before the coordinator sees
a request, through the listener's :class:`TopicAccess` (``readable``: the
session's poll permission; Ferry has no group permission, so group
membership needs a login only, docs/kafka.md "Security"): OffsetCommit and
OffsetDelete answer TOPIC_AUTHORIZATION_FAILED or UNKNOWN_TOPIC_OR_PARTITION
per partition, the group's own error (``validateOffsetCommit``) only for the
rest; OffsetFetch answers TOPIC_AUTHORIZATION_FAILED for a topic the user may
not read, and a fetch of everything leaves out the topics the user may not
read or that no longer exist. A ConsumerGroupHeartbeat subscribing to a topic
the user may not read answers TOPIC_AUTHORIZATION_FAILED naming it, and the
member does not join (``KafkaApis.handleConsumerGroupHeartbeat`` checks the
subscribed names so, with Describe). OffsetFetch v7's ``require_stable`` is never
answered UNSTABLE_OFFSET_COMMIT: a transaction's offsets are staged apart and reach the
group only as its commit completes (adapters/kafka/txn.py; docs/kafka.md "Transactions").
"""

from __future__ import annotations

from typing import Protocol

from core.errors import FerryError

from .admin import topic_uuid
from .consumer_groups import ConsumerGroups, classic_view
from .errors import ErrorCode as E
from .groups import DEAD, EMPTY, STABLE, Coordinator, valid_group_id
from .messages_groups import (CONSUMER_GROUP_DESCRIBE, CONSUMER_GROUP_HEARTBEAT, DELETE_GROUPS, DESCRIBE_GROUPS,
                              FIND_COORDINATOR, HEARTBEAT, JOIN_GROUP, LEAVE_GROUP, LIST_GROUPS, OFFSET_COMMIT, OFFSET_DELETE,
                              OFFSET_FETCH, SYNC_GROUP)
from .offsets import NO_OFFSET, CommitTooLarge, GroupOffsets, metadata_too_large
from .placement import not_coordinator_fields

GROUP, TRANSACTION = 0, 1  # FindCoordinator key types (CoordinatorType)
_APIS = (FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP, OFFSET_COMMIT, OFFSET_FETCH, LIST_GROUPS,
         DESCRIBE_GROUPS, DELETE_GROUPS, OFFSET_DELETE, CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE)
_BY_KEY = {api.key: api for api in _APIS}
_S = {api.key: api.response.structs for api in _APIS}
_CGH = CONSUMER_GROUP_HEARTBEAT.response.structs  # its Assignment and TopicPartitions
API_KEYS = frozenset(_BY_KEY)


class TopicAccess(Protocol):
    """What the listener tells the group API about a topic, for this connection's user."""

    def readable(self, topic: str) -> int:
        """0, or the Kafka error: UNKNOWN_TOPIC_OR_PARTITION (3), TOPIC_AUTHORIZATION_FAILED (29)."""

    def partitions(self, topic: str) -> int | None:
        """The topic's partition count; None when there is no such topic."""

    # ``ctx``: the listener's KafkaContext; the consumer protocol (KIP-848) names topics by id,
    # derived from the TopicInfo (admin.topic_uuid, what Metadata v10+ answers).
    ctx: object


def _topic_lookup(topics: TopicAccess):
    """name -> (topic id, partition count), or None: the consumer groups' view of a topic."""
    ctx = topics.ctx

    def lookup(name: str):
        info = ctx.topic(name)
        return None if info is None else (topic_uuid(info), info.partitions_count)
    return lookup


class GroupApi:
    """The group APIs of one listener (module docstring); ``node`` is (id, host, port)."""

    def __init__(self, coordinator: Coordinator, offsets: GroupOffsets, node: tuple[int, str, int],
                 consumer_groups: ConsumerGroups | None = None, placement=None) -> None:
        # ``placement``: () -> adapters.kafka.placement.Placement (KafkaContext.placement);
        # None: this gateway coordinates every group, as ``node``
        self.placement = placement
        self.coordinator = coordinator
        self.consumer = consumer_groups if consumer_groups is not None else ConsumerGroups()
        self.offsets = offsets
        self.node = node

    # -- the coordinators' clocks, passed through ------------------------------------------------
    def tick(self, now_ms: int) -> list:
        self.consumer.tick(now_ms)  # KIP-848 heartbeats never park: nothing to complete
        return self._values(self.coordinator.tick(now_ms))

    def next_deadline(self) -> int | None:
        times = [t for t in (self.coordinator.next_deadline(), self.consumer.next_deadline()) if t is not None]
        return min(times) if times else None

    def cancel(self, token) -> None:
        self.coordinator.cancel(token)

    def topic_deleted(self, topic: str) -> None:
        """A topic was deleted: every group's offsets of it go (Kafka's ``onPartitionsDeleted``)."""
        self.offsets.forget_topic(topic)

    def _values(self, completions) -> list:
        return [(token, self._response(token.api_key, token.version, fields)) for token, fields in completions]

    @staticmethod
    def _response(key: int, version: int, fields: dict):
        if key == JOIN_GROUP.key:
            member = _S[key]["JoinGroupResponseMember"]
            fields = {**fields, "members": tuple(member.make(member_id=m, group_instance_id=i, metadata=meta)
                                                 for m, i, meta in fields.get("members", ()))}
            if fields.get("protocol_name") is None and version < 7:  # nullable from v7
                fields["protocol_name"] = ""
            fields.setdefault("leader", "")
        return _BY_KEY[key].response.make(**fields)

    # -- requests ---------------------------------------------------------------------------------
    def handle(self, api_key: int, version: int, body, *, now_ms: int, token, client_id: str, topics: TopicAccess):
        """``(response value or None, completions)``; None: the request parked (``token``)."""
        group_id = getattr(body, "group_id", None)  # the one-group APIs (not_coordinator_fields)
        if group_id is not None and not self._here(group_id):
            fields = not_coordinator_fields(api_key, version, body)
            if fields is not None:
                return self._response(api_key, version, fields), []
        c = self.coordinator
        if api_key == CONSUMER_GROUP_HEARTBEAT.key:
            return self._consumer_heartbeat(body, now_ms, client_id, topics), []
        if api_key == JOIN_GROUP.key:
            if not self._classic_may_use(body.group_id):
                return self._response(api_key, version, {"error_code": int(E.INCONSISTENT_GROUP_PROTOCOL),
                                                         "member_id": body.member_id}), []
            rebalance_ms = body.rebalance_timeout_ms  # v0 has none: the session timeout (JoinGroupRequest)
            if version == 0 or rebalance_ms < 0:
                rebalance_ms = body.session_timeout_ms
            fields, done = c.join(body.group_id, body.member_id, body.group_instance_id, body.protocol_type,
                                  [(p.name, p.metadata) for p in body.protocols], body.session_timeout_ms,
                                  rebalance_ms, version=version, client_id=client_id or "", now=now_ms, token=token)
            return (None if fields is None else self._response(api_key, version, fields)), self._values(done)
        if api_key == SYNC_GROUP.key:
            fields, done = c.sync(body.group_id, body.generation_id, body.member_id, body.protocol_type,
                                  body.protocol_name, [(a.member_id, a.assignment) for a in body.assignments],
                                  now=now_ms, token=token, instance_id=body.group_instance_id)
            return (None if fields is None else self._response(api_key, version, fields)), self._values(done)
        if api_key == HEARTBEAT.key:
            fields = c.heartbeat(body.group_id, body.generation_id, body.member_id, now=now_ms,
                                 instance_id=body.group_instance_id)
            return HEARTBEAT.response.make(**fields), []
        if api_key == LEAVE_GROUP.key:
            return self._leave(version, body, now_ms)
        handler = {FIND_COORDINATOR.key: self._find, OFFSET_COMMIT.key: self._commit,
                   OFFSET_FETCH.key: self._fetch, OFFSET_DELETE.key: self._delete_offsets,
                   LIST_GROUPS.key: self._list, DESCRIBE_GROUPS.key: self._describe,
                   DELETE_GROUPS.key: self._delete_groups,
                   CONSUMER_GROUP_DESCRIBE.key: self._consumer_describe}[api_key]
        return handler(version, body, now_ms, topics), []

    def _here(self, group_id: str) -> bool:
        """Does this gateway coordinate ``group_id`` (adapters/kafka/placement.py)?"""
        return self.placement is None or self.placement().coordinates(group_id)

    def _where(self, key_type: int, key: str) -> tuple[int, str, int]:
        """(node id, host, port) of the coordinator of ``key``: placement's for a group,
        this gateway for a transactional id (module docstring)."""
        if self.placement is None:
            return self.node
        placement = self.placement()
        b = placement.coordinator(key) if key_type == GROUP else placement.me
        return b.node_id, b.host, b.port

    def _find(self, version: int, body, now_ms: int, topics):
        key_type = body.key_type if version >= 1 else GROUP
        err = 0 if key_type in (GROUP, TRANSACTION) else int(E.INVALID_REQUEST)
        message = None if not err else f"unknown coordinator key type {key_type}"
        nowhere = (-1, "", -1)
        if version < 4:
            where = self._where(key_type, body.key) if not err else nowhere
            return FIND_COORDINATOR.response.make(error_code=err, error_message=message, node_id=where[0],
                                                  host=where[1], port=where[2])
        coord = _S[FIND_COORDINATOR.key]["Coordinator"]
        out = []
        for k in body.coordinator_keys:
            where = self._where(key_type, k) if not err else nowhere
            out.append(coord.make(key=k, node_id=where[0], host=where[1], port=where[2], error_code=err,
                                  error_message=message))
        return FIND_COORDINATOR.response.make(coordinators=tuple(out))

    def _leave(self, version: int, body, now_ms: int):
        members = [(body.member_id, None)] if version < 3 else [(m.member_id, m.group_instance_id)
                                                               for m in body.members]
        top, errors, done = self.coordinator.leave(body.group_id, members, now=now_ms)
        if version < 3:  # LeaveGroupResponse: the one member's error at the top
            return LEAVE_GROUP.response.make(error_code=top or errors[0]), self._values(done)
        resp = _S[LEAVE_GROUP.key]["MemberResponse"]
        return LEAVE_GROUP.response.make(error_code=top, members=tuple(
            resp.make(member_id=m, group_instance_id=i, error_code=e) for (m, i), e in zip(members, errors))), \
            self._values(done)

    # -- the consumer protocol (KIP-848) ------------------------------------------------------------
    def _classic_may_use(self, group_id: str) -> bool:
        """False when ``group_id`` is a consumer-protocol group with members; an empty one
        is dropped so the id becomes classic (``maybeDeleteEmptyConsumerGroup``)."""
        group = self.consumer.get(group_id)
        if group is None:
            return True
        if group.members:
            return False
        self.consumer.delete(group_id)
        return True

    def _consumer_heartbeat(self, body, now_ms: int, client_id: str, topics: TopicAccess):
        make = CONSUMER_GROUP_HEARTBEAT.response.make

        def refuse(code: E, message: str):
            return make(error_code=int(code), error_message=message, member_id=None, member_epoch=0,
                        heartbeat_interval_ms=0, assignment=None)

        classic = self.coordinator.describe(body.group_id) if body.group_id else None
        if classic is not None:
            if classic.members or classic.pending:
                return refuse(E.GROUP_ID_NOT_FOUND, f"Group {body.group_id} is not a consumer group.")
            if body.member_epoch == 0:  # maybeDeleteEmptyClassicGroup
                self.coordinator.delete(body.group_id)
        if body.subscribed_topic_names:
            denied = sorted({name for name in body.subscribed_topic_names
                             if topics.readable(name) == int(E.TOPIC_AUTHORIZATION_FAILED)})
            if denied:
                return refuse(E.TOPIC_AUTHORIZATION_FAILED,
                              f"The group has subscribed to topics that are not authorized: {', '.join(denied)}")
        fields = self.consumer.heartbeat(body, client_id=client_id, now=now_ms, topics=_topic_lookup(topics))
        assignment = fields.pop("assignment")
        if assignment is not None:
            part = _CGH["TopicPartitions"].cls
            assignment = _CGH["Assignment"].cls(topic_partitions=tuple(
                part(topic_id=tid, partitions=tuple(parts)) for tid, parts in assignment))
        return make(assignment=assignment, **fields)

    def _consumer_describe(self, version: int, body, now_ms: int, topics):
        """``GroupMetadataManager.consumerGroupDescribe`` after KafkaApis' checks: a group that
        is not a consumer-protocol one answers GROUP_ID_NOT_FOUND (librdkafka then asks
        DescribeGroups), one whose members name a topic the user may not read
        TOPIC_AUTHORIZATION_FAILED (``handleConsumerGroupDescribe``)."""
        S = _S[CONSUMER_GROUP_DESCRIBE.key]
        out = []
        for gid in body.group_ids:
            if valid_group_id(gid) and not self._here(gid):
                out.append(S["DescribedGroup"].make(error_code=int(E.NOT_COORDINATOR), group_id=gid,
                                                    group_state=""))
                continue
            group = self.consumer.get(gid) if valid_group_id(gid) else None
            if group is None:
                code = E.GROUP_ID_NOT_FOUND if valid_group_id(gid) else E.INVALID_GROUP_ID
                out.append(S["DescribedGroup"].make(error_code=int(code), group_id=gid, group_state=DEAD,
                                                    error_message=f"Group {gid} is not a consumer group."))
                continue
            names = {tid: name for name, (tid, _n) in group.metadata.items()}
            seen = set(names.values()) | group.subscribed_names()
            if any(topics.readable(name) == int(E.TOPIC_AUTHORIZATION_FAILED) for name in seen):
                out.append(S["DescribedGroup"].make(
                    error_code=int(E.TOPIC_AUTHORIZATION_FAILED), group_id=gid, group_state="",
                    error_message="The group has described topic(s) that the client is not authorized to read."))
                continue

            def assignment(parts: dict):
                return S["Assignment"].make(topic_partitions=tuple(
                    S["TopicPartitions"].make(topic_id=tid, topic_name=names[tid], partitions=tuple(sorted(ps)))
                    for tid, ps in sorted(parts.items(), key=lambda kv: names.get(kv[0], "")) if tid in names))
            members = tuple(S["Member"].make(
                member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.epoch,
                client_id=m.client_id, client_host="", subscribed_topic_names=tuple(sorted(m.subscribed)),
                assignment=assignment(m.assigned), target_assignment=assignment(group.target.get(m.member_id, {})))
                for m in group.members.values())
            out.append(S["DescribedGroup"].make(
                error_code=0, group_id=gid, group_state=group.state, group_epoch=group.epoch,
                assignment_epoch=group.assignment_epoch, assignor_name=group.assignor(), members=members))
        return CONSUMER_GROUP_DESCRIBE.response.make(groups=tuple(out))

    # -- offsets ------------------------------------------------------------------------------------
    def _commit(self, version: int, body, now_ms: int, topics):
        out, valid = [], []  # out: (topic, [[partition, error]]); valid: rows the coordinator decides
        for t in body.topics:
            code = topics.readable(t.name)
            count = topics.partitions(t.name) if not code else None
            if not code and count is None:
                code = int(E.UNKNOWN_TOPIC_OR_PARTITION)
            rows = []
            for p in t.partitions:
                row = [p.partition_index, code]
                if not code and not 0 <= p.partition_index < count:
                    row[1] = int(E.UNKNOWN_TOPIC_OR_PARTITION)
                elif not code:
                    valid.append((t.name, p, row))
                rows.append(row)
            out.append((t.name, rows))
        if valid:
            self._store(version, body, now_ms, valid)
        S = _S[OFFSET_COMMIT.key]
        return OFFSET_COMMIT.response.make(topics=tuple(
            S["OffsetCommitResponseTopic"].make(name=name, partitions=tuple(
                S["OffsetCommitResponsePartition"].make(partition_index=i, error_code=e) for i, e in rows))
            for name, rows in out))

    def check_commit(self, group_id: str, generation: int, member_id: str, *, now_ms: int,
                     instance_id: str | None = None, version: int, transactional: bool = False) -> int:
        """The error code of a commit from (generation or member epoch, member) to whichever
        coordinator holds ``group_id`` (``OffsetMetadataManager.validateOffsetCommit``):
        OffsetCommit's check, and TxnOffsetCommit's with ``transactional``."""
        if not self._here(group_id):  # TxnOffsetCommit's coordinator check (OffsetCommit's is in handle)
            return int(E.NOT_COORDINATOR)
        if self.consumer.get(group_id) is not None:
            return self.consumer.check_commit(group_id, generation, member_id, version=version,
                                              transactional=transactional)
        err = self.coordinator.check_commit(group_id, generation, member_id, now=now_ms, instance_id=instance_id)
        if err == int(E.ILLEGAL_GENERATION) and version >= 9 and not transactional \
                and self.coordinator.describe(group_id) is None:
            err = int(E.GROUP_ID_NOT_FOUND)  # OffsetCommit v9+ names a missing group
        return err

    def _store(self, version: int, body, now_ms: int, valid: list) -> None:
        """The coordinator's part of a commit (``OffsetMetadataManager.commitOffset``)."""
        err = self.check_commit(body.group_id, body.generation_id_or_member_epoch if version >= 1 else -1,
                                body.member_id if version >= 1 else "", now_ms=now_ms,
                                instance_id=body.group_instance_id, version=version)
        entries, stored = [], []
        for name, p, row in valid:
            if err:
                row[1] = err
            elif metadata_too_large(p.committed_metadata):
                row[1] = int(E.OFFSET_METADATA_TOO_LARGE)
            else:
                entries.append((name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                                p.committed_metadata))
                stored.append(row)
        if not entries:
            return
        try:
            self.offsets.commit(body.group_id, entries, now_ms)
        except CommitTooLarge:  # Kafka maps a record too large to this
            failed = int(E.INVALID_COMMIT_OFFSET_SIZE)
        except FerryError:  # the store failed: retriable, as Kafka's coordinator errors are
            failed = int(E.COORDINATOR_NOT_AVAILABLE)
        else:
            return
        for row in stored:
            row[1] = failed

    def _fetch(self, version: int, body, now_ms: int, topics):
        try:
            return self._fetch_committed(version, body, topics)
        except FerryError:
            # The commits made elsewhere could not be taken in (scale-out: the cluster did
            # not answer): a retriable error, as Kafka's coordinator answers while it loads
            # the offsets topic, never offsets that may be stale.
            return self._fetch_refused(version, body, int(E.COORDINATOR_LOAD_IN_PROGRESS))

    def _fetch_refused(self, version: int, body, err: int):
        S = _S[OFFSET_FETCH.key]
        if version >= 2 or body.topics is None:
            return OFFSET_FETCH.response.make(topics=(), error_code=err)
        part = S["OffsetFetchResponsePartition"]
        out = [S["OffsetFetchResponseTopic"].make(name=t.name, partitions=tuple(
            part.make(partition_index=p, committed_offset=NO_OFFSET[0], committed_leader_epoch=NO_OFFSET[1],
                      metadata=NO_OFFSET[2], error_code=err) for p in t.partition_indexes)) for t in body.topics]
        return OFFSET_FETCH.response.make(topics=tuple(out), error_code=0)

    def _fetch_committed(self, version: int, body, topics):
        S = _S[OFFSET_FETCH.key]
        part = S["OffsetFetchResponsePartition"]
        group_err = 0 if valid_group_id(body.group_id) else int(E.INVALID_GROUP_ID)
        if body.topics is None:  # v2+: every committed partition of topics the user may read
            if group_err:
                return OFFSET_FETCH.response.make(topics=(), error_code=group_err)
            wanted: dict[str, list] = {}
            committed = self.offsets.fetch(body.group_id, None)
            for topic, p in sorted(committed):
                wanted.setdefault(topic, []).append(p)
            codes = {name: topics.readable(name) for name in wanted}
            wanted = {name: parts for name, parts in wanted.items() if not codes[name]}
        else:
            wanted = {}
            for t in body.topics:
                wanted.setdefault(t.name, []).extend(t.partition_indexes)
            codes = {name: topics.readable(name) for name in wanted}
            if group_err and version >= 2:
                return OFFSET_FETCH.response.make(topics=(), error_code=group_err)
            lookups = [(name, p) for name, parts in wanted.items() if not codes[name] for p in parts]
            committed = self.offsets.fetch(body.group_id, lookups) if lookups and not group_err else {}
        out = []
        for name, parts in wanted.items():
            denied = codes[name] == int(E.TOPIC_AUTHORIZATION_FAILED)
            err = group_err or (int(E.TOPIC_AUTHORIZATION_FAILED) if denied else 0)
            rows = []
            for p in parts:
                offset, epoch, meta = NO_OFFSET if err else committed.get((name, p), NO_OFFSET)
                rows.append(part.make(partition_index=p, committed_offset=offset, committed_leader_epoch=epoch,
                                      metadata=meta, error_code=err))
            out.append(S["OffsetFetchResponseTopic"].make(name=name, partitions=tuple(rows)))
        return OFFSET_FETCH.response.make(topics=tuple(out), error_code=0)

    def _delete_offsets(self, version: int, body, now_ms: int, topics):
        """``OffsetMetadataManager.deleteOffsets`` after KafkaApis' topic checks."""
        S = _S[OFFSET_DELETE.key]
        gid = body.group_id
        if not valid_group_id(gid):
            return OFFSET_DELETE.response.make(error_code=int(E.INVALID_GROUP_ID), topics=())
        consumer = self.consumer.get(gid) is not None
        if self.coordinator.describe(gid) is None and not consumer and not self.offsets.has(gid):
            return OFFSET_DELETE.response.make(error_code=int(E.GROUP_ID_NOT_FOUND), topics=())
        err = 0 if consumer else self.coordinator.check_offset_delete(gid)  # ConsumerGroup.validateOffsetDelete
        if err:
            return OFFSET_DELETE.response.make(error_code=err, topics=())
        out = []
        for t in body.topics:
            code = topics.readable(t.name)
            count = topics.partitions(t.name) if not code else None
            if not code and count is None:
                code = int(E.UNKNOWN_TOPIC_OR_PARTITION)
            subscribed = self.consumer.is_subscribed if consumer else self.coordinator.is_subscribed
            if not code and subscribed(gid, t.name):
                code = int(E.GROUP_SUBSCRIBED_TO_TOPIC)
            codes = [code or (0 if 0 <= p.partition_index < count else int(E.UNKNOWN_TOPIC_OR_PARTITION))
                     for p in t.partitions]
            doomed = [p.partition_index for p, c in zip(t.partitions, codes) if not c]
            if doomed:
                self.offsets.delete_partitions(gid, t.name, doomed)
            out.append(S["OffsetDeleteResponseTopic"].make(name=t.name, partitions=tuple(
                S["OffsetDeleteResponsePartition"].make(partition_index=p.partition_index, error_code=c)
                for p, c in zip(t.partitions, codes))))
        return OFFSET_DELETE.response.make(error_code=0, topics=tuple(out))

    # -- admin ----------------------------------------------------------------------------------------
    def _states(self) -> dict[str, tuple[str, str]]:
        """group id -> (protocol type, state) of every group, live or with offsets only
        (those read as Empty consumer groups, as they were before a restart)."""
        out = {gid: ("consumer", EMPTY) for gid in self.offsets.groups()}
        for gid, ptype, state in self.coordinator.listing() + self.consumer.listing():
            out[gid] = (ptype, state)
        return out

    def _list(self, version: int, body, now_ms: int, topics):
        wanted = {s.lower() for s in body.states_filter} if version >= 4 else set()
        listed = _S[LIST_GROUPS.key]["ListedGroup"]
        return LIST_GROUPS.response.make(error_code=0, groups=tuple(
            listed.make(group_id=gid, protocol_type=ptype, group_state=state)
            for gid, (ptype, state) in sorted(self._states().items())
            if (not wanted or state.lower() in wanted) and self._here(gid)))

    def _describe(self, version: int, body, now_ms: int, topics):
        """``GroupMetadataManager.describeGroups``: members' metadata and the protocol
        only when Stable; an unknown group is Dead."""
        S = _S[DESCRIBE_GROUPS.key]
        out = []
        for gid in body.groups:
            if not valid_group_id(gid) or not self._here(gid):
                code = E.INVALID_GROUP_ID if not valid_group_id(gid) else E.NOT_COORDINATOR
                out.append(S["DescribedGroup"].make(error_code=int(code), group_id=gid,
                                                    group_state=DEAD if code == E.INVALID_GROUP_ID else ""))
                continue
            modern = self.consumer.get(gid)
            if modern is not None:
                out.append(self._describe_consumer_group(modern))
                continue
            group = self.coordinator.describe(gid)
            if group is None:
                known = self.offsets.has(gid)
                out.append(S["DescribedGroup"].make(error_code=0, group_id=gid, group_state=EMPTY if known else DEAD,
                                                    protocol_type="consumer" if known else "", protocol_data=""))
                continue
            stable = group.state == STABLE
            members = tuple(S["DescribedGroupMember"].make(
                member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id, client_host="",
                member_metadata=(m.metadata(group.protocol) or b"") if stable else b"",
                member_assignment=m.assignment) for m in group.members.values())
            out.append(S["DescribedGroup"].make(error_code=0, group_id=gid, group_state=group.state,
                                                protocol_type=group.protocol_type or "",
                                                protocol_data=group.protocol if stable else "", members=members))
        return DESCRIBE_GROUPS.response.make(groups=tuple(out))

    def _describe_consumer_group(self, group):
        """A KIP-848 group through DescribeGroups: its state, protocol type "consumer", the
        assignor as the protocol and its members with their subscription and assignment in
        the classic consumer protocol's bytes (``classic_view``). Kafka answers such a group
        only through ConsumerGroupDescribe, which Ferry does not serve; admin clients fall
        back to DescribeGroups."""
        S = _S[DESCRIBE_GROUPS.key]
        members = []
        for m in group.members.values():
            metadata, assignment = classic_view(group, m)
            members.append(S["DescribedGroupMember"].make(
                member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id, client_host="",
                member_metadata=metadata, member_assignment=assignment))
        members = tuple(members)
        return S["DescribedGroup"].make(error_code=0, group_id=group.group_id, group_state=group.state,
                                        protocol_type="consumer", protocol_data=group.assignor(), members=members)

    def _delete_groups(self, version: int, body, now_ms: int, topics):
        """Empty (or offsets-only) groups go with their offsets; live ones answer NON_EMPTY_GROUP."""
        result = _S[DELETE_GROUPS.key]["DeletableGroupResult"]
        out = []
        for gid in body.groups_names:
            if not valid_group_id(gid) or not self._here(gid):
                code = E.INVALID_GROUP_ID if not valid_group_id(gid) else E.NOT_COORDINATOR
                out.append(result.make(group_id=gid, error_code=int(code)))
                continue
            live = self.coordinator.describe(gid) is not None or self.consumer.get(gid) is not None
            code = self.coordinator.delete(gid) or self.consumer.delete(gid)
            if not code:
                try:
                    had_offsets = self.offsets.delete_group(gid)
                except FerryError:
                    code = int(E.COORDINATOR_NOT_AVAILABLE)
                else:
                    code = 0 if live or had_offsets else int(E.GROUP_ID_NOT_FOUND)
            out.append(result.make(group_id=gid, error_code=code))
        return DELETE_GROUPS.response.make(results=tuple(out))


__all__ = ["API_KEYS", "GROUP", "TRANSACTION", "GroupApi", "TopicAccess"]
