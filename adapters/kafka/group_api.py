"""The group APIs: requests in, coordinator and committed offsets, responses out.

Theory of operation
-------------------
FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, OffsetDelete, ListGroups, DescribeGroups and DeleteGroups, on
:class:`~adapters.kafka.groups.Coordinator` (membership, sans-I/O) and
:class:`~adapters.kafka.offsets.GroupOffsets` (durable offsets). This gateway
is the coordinator of every group and transaction id (FindCoordinator always
names it). :meth:`GroupApi.handle` answers a request at once, or parks it
(JoinGroup, SyncGroup) and returns None; parked requests are answered through
the completions any call returns, ``(token, response value)``, where the
token (the session's ``GroupWait``) carries the API key and version its
response is built for.

Offsets need ``poll_messages`` on their topic (``topics.readable``, the
session's check); group membership itself needs a login only, as Ferry has no
group permission (docs/kafka.md "Security").
"""

from __future__ import annotations

from .errors import ErrorCode as E
from .groups import Coordinator
from .messages_groups import (DELETE_GROUPS, DESCRIBE_GROUPS, FIND_COORDINATOR, HEARTBEAT, JOIN_GROUP, LEAVE_GROUP,
                              LIST_GROUPS, OFFSET_COMMIT, OFFSET_DELETE, OFFSET_FETCH, SYNC_GROUP)
from .offsets import MAX_METADATA_BYTES, GroupOffsets

_S = {api.key: api.response.structs for api in (FIND_COORDINATOR, JOIN_GROUP, LEAVE_GROUP, OFFSET_COMMIT,
                                                  OFFSET_FETCH, LIST_GROUPS, DESCRIBE_GROUPS, DELETE_GROUPS,
                                                  OFFSET_DELETE)}
_BY_KEY = {api.key: api for api in (FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP, OFFSET_COMMIT,
                                    OFFSET_FETCH, LIST_GROUPS, DESCRIBE_GROUPS, DELETE_GROUPS, OFFSET_DELETE)}


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
        self.offsets.forget_topic(topic)

    def _values(self, completions) -> list:
        return [(token, self._response(token.api_key, token.version, fields)) for token, fields in completions]

    def _response(self, key: int, version: int, fields: dict):
        if key == JOIN_GROUP.key:
            member = _S[key]["JoinGroupResponseMember"]
            fields = {**fields, "members": tuple(member.make(member_id=m, group_instance_id=i, metadata=meta)
                                                 for m, i, meta in fields.get("members", ()))}
            fields.setdefault("protocol_name", None if version >= 7 else "")
            if fields["protocol_name"] is None and version < 7:
                fields["protocol_name"] = ""
            fields.setdefault("leader", "")
        return _BY_KEY[key].response.make(**fields)

    # -- requests ---------------------------------------------------------------------------------
    def handle(self, api_key: int, version: int, body, *, now_ms: int, token, client_id: str, topics):
        c = self.coordinator
        if api_key == JOIN_GROUP.key:
            fields, done = c.join(body.group_id, body.member_id, body.group_instance_id, body.protocol_type,
                                  [(p.name, p.metadata) for p in body.protocols], body.session_timeout_ms,
                                  body.rebalance_timeout_ms if body.rebalance_timeout_ms >= 0
                                  else body.session_timeout_ms, version=version, client_id=client_id,
                                  now=now_ms, token=token)
            return (None if fields is None else self._response(api_key, version, fields)), self._values(done)
        if api_key == SYNC_GROUP.key:
            fields, done = c.sync(body.group_id, body.generation_id, body.member_id, body.protocol_type,
                                  body.protocol_name, [(a.member_id, a.assignment) for a in body.assignments],
                                  now=now_ms, token=token)
            return (None if fields is None else self._response(api_key, version, fields)), self._values(done)
        if api_key == HEARTBEAT.key:
            fields = c.heartbeat(body.group_id, body.generation_id, body.member_id, now=now_ms)
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
        if version < 4:
            return FIND_COORDINATOR.response.make(error_code=0, error_message=None, node_id=node_id, host=host,
                                                  port=port)
        coord = _S[FIND_COORDINATOR.key]["Coordinator"]
        return FIND_COORDINATOR.response.make(coordinators=tuple(
            coord.make(key=k, node_id=node_id, host=host, port=port, error_code=0, error_message=None)
            for k in body.coordinator_keys))

    def _leave(self, version: int, body, now_ms: int):
        members = [(body.member_id, None)] if version < 3 else [(m.member_id, m.group_instance_id)
                                                               for m in body.members]
        errors, done = self.coordinator.leave(body.group_id, members, now=now_ms)
        if version < 3:
            return LEAVE_GROUP.response.make(error_code=errors[0]), self._values(done)
        resp = _S[LEAVE_GROUP.key]["MemberResponse"]
        return LEAVE_GROUP.response.make(error_code=0, members=tuple(
            resp.make(member_id=m, group_instance_id=i, error_code=e) for (m, i), e in zip(members, errors))), \
            self._values(done)

    def _commit(self, version: int, body, now_ms: int, topics):
        err = self.coordinator.check_commit(body.group_id, body.generation_id_or_member_epoch if version >= 1 else -1,
                                            body.member_id if version >= 1 else "", now=now_ms)
        S = _S[OFFSET_COMMIT.key]
        out, entries = [], []
        for t in body.topics:
            readable = err or topics.readable(t.name)
            count = topics.partitions(t.name) if not readable else None
            parts = []
            for p in t.partitions:
                code = readable
                if not code and not 0 <= p.partition_index < (count or 0):
                    code = int(E.UNKNOWN_TOPIC_OR_PARTITION)
                elif not code and p.committed_metadata and len(p.committed_metadata.encode()) > MAX_METADATA_BYTES:
                    code = int(E.OFFSET_METADATA_TOO_LARGE)
                if not code:
                    entries.append((t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                                    p.committed_metadata))
                parts.append([p.partition_index, code])
            out.append((t.name, parts))
        if entries:
            try:
                self.offsets.commit(body.group_id, entries, now_ms)
            except (ValueError, Exception) as exc:  # noqa: BLE001 - a failed write fails every partition
                failed = int(E.INVALID_GROUP_ID) if isinstance(exc, ValueError) else int(E.UNKNOWN_SERVER_ERROR)
                for _name, parts in out:
                    for part in parts:
                        part[1] = part[1] or failed
        return OFFSET_COMMIT.response.make(topics=tuple(
            S["OffsetCommitResponseTopic"].make(name=name, partitions=tuple(
                S["OffsetCommitResponsePartition"].make(partition_index=i, error_code=e) for i, e in parts))
            for name, parts in out))

    def _fetch(self, version: int, body, now_ms: int, topics):
        S = _S[OFFSET_FETCH.key]
        try:
            committed = self.offsets.fetch(body.group_id, None)
        except ValueError:
            committed = {}
        if body.topics is None:  # v2+: every committed partition of the group
            wanted: dict[str, list] = {}
            for (topic, part) in sorted(committed):
                if not topics.readable(topic):
                    wanted.setdefault(topic, []).append(part)
        else:
            wanted = {t.name: list(t.partition_indexes) for t in body.topics}
        out = []
        for name, parts in wanted.items():
            code = topics.readable(name) if body.topics is not None else 0
            rows = []
            for part in parts:
                offset, epoch, meta = committed.get((name, part), (-1, -1, ""))
                err = code if code == int(E.TOPIC_AUTHORIZATION_FAILED) else 0
                rows.append(S["OffsetFetchResponsePartition"].make(
                    partition_index=part, committed_offset=-1 if err else offset, committed_leader_epoch=epoch,
                    metadata="" if err else meta, error_code=err))
            out.append(S["OffsetFetchResponseTopic"].make(name=name, partitions=tuple(rows)))
        return OFFSET_FETCH.response.make(topics=tuple(out), error_code=0)

    def _delete_offsets(self, version: int, body, now_ms: int, topics):
        S = _S[OFFSET_DELETE.key]
        group = self.coordinator.describe(body.group_id)
        known = self.offsets.fetch(body.group_id, None) if body.group_id else {}
        if group is None and not known:
            return OFFSET_DELETE.response.make(error_code=int(E.GROUP_ID_NOT_FOUND), topics=())
        out = []
        for t in body.topics:
            code = topics.readable(t.name)
            if not code and group is not None and group.members:
                code = int(E.GROUP_SUBSCRIBED_TO_TOPIC)  # an active group may not lose its positions
            parts = [p.partition_index for p in t.partitions]
            if not code:
                self.offsets.delete_partitions(body.group_id, t.name, parts)
            out.append(S["OffsetDeleteResponseTopic"].make(name=t.name, partitions=tuple(
                S["OffsetDeleteResponsePartition"].make(partition_index=p, error_code=code) for p in parts)))
        return OFFSET_DELETE.response.make(error_code=0, topics=tuple(out))

    def _states(self) -> dict[str, tuple[str, str]]:
        """group id -> (protocol type, state) of every group, live or only committed."""
        out = {gid: ("consumer", "Empty") for gid in self.offsets.groups()}
        for gid, group in self.coordinator.groups.items():
            out[gid] = (group.protocol_type or "", group.state)
        return out

    def _list(self, version: int, body, now_ms: int, topics):
        wanted = {s.lower() for s in body.states_filter} if version >= 4 else set()
        listed = _S[LIST_GROUPS.key]["ListedGroup"]
        return LIST_GROUPS.response.make(error_code=0, groups=tuple(
            listed.make(group_id=gid, protocol_type=ptype, group_state=state)
            for gid, (ptype, state) in sorted(self._states().items()) if not wanted or state.lower() in wanted))

    def _describe(self, version: int, body, now_ms: int, topics):
        S = _S[DESCRIBE_GROUPS.key]
        states = self._states()
        out = []
        for gid in body.groups:
            group = self.coordinator.describe(gid)
            if group is None:
                state = "Empty" if gid in states else "Dead"
                out.append(S["DescribedGroup"].make(error_code=0, group_id=gid, group_state=state,
                                                    protocol_type=states.get(gid, ("", ""))[0], protocol_data=""))
                continue
            members = tuple(S["DescribedGroupMember"].make(
                member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id, client_host="",
                member_metadata=dict(m.protocols).get(group.protocol, b"") if group.state == "Stable" else b"",
                member_assignment=m.assignment if group.state == "Stable" else b"")
                for m in group.members.values())
            out.append(S["DescribedGroup"].make(error_code=0, group_id=gid, group_state=group.state,
                                                protocol_type=group.protocol_type or "",
                                                protocol_data=group.protocol or "", members=members))
        return DESCRIBE_GROUPS.response.make(groups=tuple(out))

    def _delete_groups(self, version: int, body, now_ms: int, topics):
        result = _S[DELETE_GROUPS.key]["DeletableGroupResult"]
        out = []
        for gid in body.groups_names:
            live = self.coordinator.describe(gid) is not None
            code = self.coordinator.delete(gid)
            if not code:
                try:
                    committed = self.offsets.delete_group(gid)
                except ValueError:
                    committed = False
                if not (live or committed):
                    code = int(E.GROUP_ID_NOT_FOUND)
            out.append(result.make(group_id=gid, error_code=code))
        return DELETE_GROUPS.response.make(results=tuple(out))
