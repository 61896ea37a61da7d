"""The group APIs: requests in, coordinator and committed offsets, responses out.

Theory of operation
-------------------
FindCoordinator(10), JoinGroup(11), Heartbeat(12), LeaveGroup(13),
SyncGroup(14), DescribeGroups(15), ListGroups(16), OffsetCommit(8),
OffsetFetch(9), DeleteGroups(42) and OffsetDelete(47), in the versions
:mod:`adapters.kafka.messages_groups` declares, on
:class:`~adapters.kafka.groups.Coordinator` (membership, sans-I/O) and
:class:`~adapters.kafka.offsets.GroupOffsets` (durable offsets). This gateway
is the coordinator of every group and transactional id: FindCoordinator
always names it (key types 0 and 1; any other is INVALID_REQUEST).

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
read or that no longer exist. OffsetFetch v7's ``require_stable`` needs nothing:
Ferry keeps no transactional offsets, so none is ever pending
(UNSTABLE_OFFSET_COMMIT).
"""

from __future__ import annotations

from typing import Protocol

from core.errors import FerryError

from .errors import ErrorCode as E
from .groups import DEAD, EMPTY, STABLE, Coordinator, valid_group_id
from .messages_groups import (DELETE_GROUPS, DESCRIBE_GROUPS, FIND_COORDINATOR, HEARTBEAT, JOIN_GROUP, LEAVE_GROUP,
                              LIST_GROUPS, OFFSET_COMMIT, OFFSET_DELETE, OFFSET_FETCH, SYNC_GROUP)
from .offsets import NO_OFFSET, CommitTooLarge, GroupOffsets, metadata_too_large

GROUP, TRANSACTION = 0, 1  # FindCoordinator key types (CoordinatorType)
_APIS = (FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP, OFFSET_COMMIT, OFFSET_FETCH, LIST_GROUPS,
         DESCRIBE_GROUPS, DELETE_GROUPS, OFFSET_DELETE)
_BY_KEY = {api.key: api for api in _APIS}
_S = {api.key: api.response.structs for api in _APIS}
API_KEYS = frozenset(_BY_KEY)


class TopicAccess(Protocol):
    """What the listener tells the group API about a topic, for this connection's user."""

    def readable(self, topic: str) -> int:
        """0, or the Kafka error: UNKNOWN_TOPIC_OR_PARTITION (3), TOPIC_AUTHORIZATION_FAILED (29)."""

    def partitions(self, topic: str) -> int | None:
        """The topic's partition count; None when there is no such topic."""


class GroupApi:
    """The group APIs of one listener (module docstring); ``node`` is (id, host, port)."""

    def __init__(self, coordinator: Coordinator, offsets: GroupOffsets, node: tuple[int, str, int]) -> None:
        self.coordinator = coordinator
        self.offsets = offsets
        self.node = node

    # -- the coordinator's clock, passed through ------------------------------------------------
    def tick(self, now_ms: int) -> list:
        return self._values(self.coordinator.tick(now_ms))

    def next_deadline(self) -> int | None:
        return self.coordinator.next_deadline()

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
        c = self.coordinator
        if api_key == JOIN_GROUP.key:
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
                   DELETE_GROUPS.key: self._delete_groups}[api_key]
        return handler(version, body, now_ms, topics), []

    def _find(self, version: int, body, now_ms: int, topics):
        node_id, host, port = self.node
        key_type = body.key_type if version >= 1 else GROUP
        err = 0 if key_type in (GROUP, TRANSACTION) else int(E.INVALID_REQUEST)
        message = None if not err else f"unknown coordinator key type {key_type}"
        where = (node_id, host, port) if not err else (-1, "", -1)
        if version < 4:
            return FIND_COORDINATOR.response.make(error_code=err, error_message=message, node_id=where[0],
                                                  host=where[1], port=where[2])
        coord = _S[FIND_COORDINATOR.key]["Coordinator"]
        return FIND_COORDINATOR.response.make(coordinators=tuple(
            coord.make(key=k, node_id=where[0], host=where[1], port=where[2], error_code=err, error_message=message)
            for k in body.coordinator_keys))

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

    def _store(self, version: int, body, now_ms: int, valid: list) -> None:
        """The coordinator's part of a commit (``OffsetMetadataManager.commitOffset``)."""
        err = self.coordinator.check_commit(
            body.group_id, body.generation_id_or_member_epoch if version >= 1 else -1,
            body.member_id if version >= 1 else "", now=now_ms, instance_id=body.group_instance_id)
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
        if self.coordinator.describe(gid) is None and not self.offsets.has(gid):
            return OFFSET_DELETE.response.make(error_code=int(E.GROUP_ID_NOT_FOUND), topics=())
        err = self.coordinator.check_offset_delete(gid)
        if err:
            return OFFSET_DELETE.response.make(error_code=err, topics=())
        out = []
        for t in body.topics:
            code = topics.readable(t.name)
            count = topics.partitions(t.name) if not code else None
            if not code and count is None:
                code = int(E.UNKNOWN_TOPIC_OR_PARTITION)
            if not code and self.coordinator.is_subscribed(gid, t.name):
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
        for gid, ptype, state in self.coordinator.listing():
            out[gid] = (ptype, state)
        return out

    def _list(self, version: int, body, now_ms: int, topics):
        wanted = {s.lower() for s in body.states_filter} if version >= 4 else set()
        listed = _S[LIST_GROUPS.key]["ListedGroup"]
        return LIST_GROUPS.response.make(error_code=0, groups=tuple(
            listed.make(group_id=gid, protocol_type=ptype, group_state=state)
            for gid, (ptype, state) in sorted(self._states().items()) if not wanted or state.lower() in wanted))

    def _describe(self, version: int, body, now_ms: int, topics):
        """``GroupMetadataManager.describeGroups``: members' metadata and the protocol
        only when Stable; an unknown group is Dead."""
        S = _S[DESCRIBE_GROUPS.key]
        out = []
        for gid in body.groups:
            if not valid_group_id(gid):
                out.append(S["DescribedGroup"].make(error_code=int(E.INVALID_GROUP_ID), group_id=gid,
                                                    group_state=DEAD))
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

    def _delete_groups(self, version: int, body, now_ms: int, topics):
        """Empty (or offsets-only) groups go with their offsets; live ones answer NON_EMPTY_GROUP."""
        result = _S[DELETE_GROUPS.key]["DeletableGroupResult"]
        out = []
        for gid in body.groups_names:
            if not valid_group_id(gid):
                out.append(result.make(group_id=gid, error_code=int(E.INVALID_GROUP_ID)))
                continue
            live = self.coordinator.describe(gid) is not None
            code = self.coordinator.delete(gid)
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
