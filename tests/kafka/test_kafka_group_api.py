"""The group APIs (adapters/kafka/group_api.py) and committed offsets (adapters/kafka/offsets.py)
on a real key-value store in a temporary directory. Requests are built from the message
tables and go through the wire (encoded, decoded) before ``handle``; every response, at
once or completed later, is encoded and decoded again at its request's version, which
proves it valid for that version."""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass

import pytest

from adapters.kafka import frames
from adapters.kafka.errors import ErrorCode as E
from adapters.kafka.group_api import GroupApi
from adapters.kafka.groups import Coordinator
from adapters.kafka.messages_groups import (DELETE_GROUPS, DESCRIBE_GROUPS, FIND_COORDINATOR, HEARTBEAT, JOIN_GROUP,
                                            LEAVE_GROUP, LIST_GROUPS, OFFSET_COMMIT, OFFSET_DELETE, OFFSET_FETCH,
                                            SYNC_GROUP)
from adapters.kafka.offsets import PREFIX, CommitTooLarge, GroupOffsets, metadata_too_large
from core.kvtables import MAX_BATCH_ENTRIES, KvTables
from core.metadb import MetaDb
from metalog import MemoryMetaLog

NODE = (1, "gw.example", 9092)
SESSION = 10_000


@dataclass(eq=False)
class Wait:
    """A parked request's token, as the session's GroupWait: the key and version to answer."""

    api_key: int
    version: int


class Topics:
    """TopicAccess: topic -> partition count; ``denied`` topics exist but may not be read."""

    def __init__(self, parts: dict[str, int], denied: tuple[str, ...] = ()) -> None:
        self.parts = {**parts, **{t: 1 for t in denied}}
        self.denied = set(denied)

    def readable(self, topic: str) -> int:
        if topic not in self.parts:
            return int(E.UNKNOWN_TOPIC_OR_PARTITION)
        return int(E.TOPIC_AUTHORIZATION_FAILED) if topic in self.denied else 0

    def partitions(self, topic: str) -> int | None:
        return self.parts.get(topic)


TOPICS = Topics({"t": 2, "u": 1}, denied=("secret",))


def open_tables(path):
    db = MetaDb(path / "metadata.sqlite")
    db.migrate()
    return db, KvTables(db)


@pytest.fixture
def tables(tmp_path):
    db, tables = open_tables(tmp_path)
    yield tables
    db.close()


@pytest.fixture
def api(tables):
    ids = itertools.count()
    coord = Coordinator(initial_rebalance_delay_ms=0, new_member_id=lambda prefix: f"{prefix}-{next(ids)}")
    return GroupApi(coord, GroupOffsets(tables), NODE)


def wire_response(key: int, version: int, value):
    frame = frames.encode_response(key, version, 7, value)
    corr, decoded = frames.decode_response(key, version, frame[4:])
    assert corr == 7
    return decoded


def call(api, which, version, *, now=0, client="c", access=TOPICS, **fields):
    """``(response or None, token, {token: response})`` with every response through the wire."""
    request = which.request.make(**fields)
    header, body = frames.decode_request(frames.encode_request(which.key, version, 1, client, request)[4:])
    token = Wait(which.key, version)
    value, done = api.handle(which.key, version, body, now_ms=now, token=token, client_id=header.client_id,
                             topics=access)
    answers = {t: wire_response(t.api_key, t.version, v) for t, v in done}
    return (None if value is None else wire_response(which.key, version, value)), token, answers


def protocols(*pairs):
    make = JOIN_GROUP.request.structs["JoinGroupRequestProtocol"].make
    return tuple(make(name=n, metadata=m) for n, m in pairs)


PROTOS = protocols(("range", b"r"), ("roundrobin", b"rr"))


def join(api, version, member="", *, group="g", now=0, client="c", protos=PROTOS, ptype="consumer", inst=None):
    return call(api, JOIN_GROUP, version, now=now, client=client, group_id=group, session_timeout_ms=SESSION,
                rebalance_timeout_ms=20_000, member_id=member, group_instance_id=inst, protocol_type=ptype,
                protocols=protos)


def sync(api, version, member, generation, assignments=(), *, group="g", now=0, ptype=None, name=None):
    make = SYNC_GROUP.request.structs["SyncGroupRequestAssignment"].make
    return call(api, SYNC_GROUP, version, now=now, group_id=group, generation_id=generation, member_id=member,
                protocol_type=ptype, protocol_name=name,
                assignments=tuple(make(member_id=m, assignment=a) for m, a in assignments))


def commit(api, version, parts, *, group="g", generation=-1, member="", now=0, topics=TOPICS):
    """``parts``: {topic: [(partition, offset, metadata, leader epoch)]} -> {(topic, partition): error}."""
    T = OFFSET_COMMIT.request.structs
    body = tuple(T["OffsetCommitRequestTopic"].make(name=t, partitions=tuple(
        T["OffsetCommitRequestPartition"].make(partition_index=p, committed_offset=o, committed_metadata=m,
                                               committed_leader_epoch=e) for p, o, m, e in rows))
        for t, rows in parts.items())
    resp, _, _ = call(api, OFFSET_COMMIT, version, now=now, access=topics, group_id=group,
                      generation_id_or_member_epoch=generation, member_id=member, topics=body)
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def fetch(api, version, wanted, *, group="g", topics=TOPICS, stable=False):
    """``wanted``: {topic: [partitions]} or None -> (top error, {(t, p): (offset, epoch, metadata, error)})."""
    make = OFFSET_FETCH.request.structs["OffsetFetchRequestTopic"].make
    body = None if wanted is None else tuple(make(name=t, partition_indexes=tuple(ps)) for t, ps in wanted.items())
    resp, _, _ = call(api, OFFSET_FETCH, version, access=topics, group_id=group, topics=body, require_stable=stable)
    return resp.error_code, {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata,
                                                           p.error_code) for t in resp.topics for p in t.partitions}


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def stable_member(api, *, group="g", client="a", protos=PROTOS, ptype="consumer", assignment=b"A"):
    """One member at JoinGroup v5 / SyncGroup v3: (member id, generation), Stable."""
    first, _, _ = join(api, 5, group=group, client=client, protos=protos, ptype=ptype)
    mid = first.member_id
    _, tok, answers = join(api, 5, mid, group=group, client=client, protos=protos, ptype=ptype)
    gen = answers[tok].generation_id
    _, tok, answers = sync(api, 3, mid, gen, [(mid, assignment)], group=group)
    assert answers[tok].error_code == 0
    return mid, gen


def test_find_coordinator_names_this_gateway_in_every_version(api):
    for v in range(0, 4):
        resp, _, _ = call(api, FIND_COORDINATOR, v, key="g", key_type=0)
        assert (resp.error_code, resp.node_id, resp.host, resp.port) == (0, *NODE)
    resp, _, _ = call(api, FIND_COORDINATOR, 4, key_type=1, coordinator_keys=("txn-1", "txn-2"))
    assert [(c.key, c.node_id, c.host, c.port, c.error_code) for c in resp.coordinators] == [
        ("txn-1", *NODE, 0), ("txn-2", *NODE, 0)]
    resp, _, _ = call(api, FIND_COORDINATOR, 3, key="g", key_type=2)
    assert (resp.error_code, resp.node_id) == (E.INVALID_REQUEST, -1)
    resp, _, _ = call(api, FIND_COORDINATOR, 4, key_type=2, coordinator_keys=("g",))
    assert resp.coordinators[0].error_code == E.INVALID_REQUEST


def test_a_group_of_two_at_the_oldest_versions(api):
    resp, tok_a, answers = join(api, 0, client="a")  # v0-3: no MEMBER_ID_REQUIRED
    a = answers[tok_a]
    assert resp is None and (a.error_code, a.generation_id, a.member_id, a.leader) == (0, 1, "a-0", "a-0")
    assert [(m.member_id, m.metadata) for m in a.members] == [("a-0", b"r")] and a.protocol_name == "range"
    resp, tok, answers = sync(api, 0, "a-0", 1, [("a-0", b"all")])
    assert resp is None and answers[tok].assignment == b"all"
    assert call(api, HEARTBEAT, 0, group_id="g", generation_id=1, member_id="a-0")[0].error_code == 0
    resp, tok_b, answers = join(api, 0, client="b")
    assert resp is None and answers == {}  # parked until a rejoins
    assert call(api, HEARTBEAT, 0, group_id="g", generation_id=1, member_id="a-0")[0].error_code == \
        E.REBALANCE_IN_PROGRESS
    _, tok_a, answers = join(api, 0, "a-0")
    assert set(answers) == {tok_a, tok_b} and answers[tok_b].members == () and answers[tok_b].generation_id == 2
    b = answers[tok_b].member_id
    _, tok_fb, answers = sync(api, 0, b, 2)
    assert answers == {}
    _, tok_fa, answers = sync(api, 0, "a-0", 2, [("a-0", b"p0"), (b, b"p1")])
    assert {answers[tok_fa].assignment, answers[tok_fb].assignment} == {b"p0", b"p1"}
    assert call(api, LEAVE_GROUP, 0, group_id="g", member_id=b)[0].error_code == 0
    assert call(api, LEAVE_GROUP, 0, group_id="g", member_id=b)[0].error_code == E.UNKNOWN_MEMBER_ID


def test_the_newest_versions_member_id_required_protocols_and_a_batch_leave(api):
    resp, _, _ = join(api, 7, client="a")
    assert (resp.error_code, resp.member_id, resp.protocol_name, resp.protocol_type) == (
        E.MEMBER_ID_REQUIRED, "a-0", "", None)  # Kafka's JoinGroupResponseData defaults
    resp4, _, _ = join(api, 4, client="a")
    assert resp4.error_code == E.MEMBER_ID_REQUIRED and resp4.protocol_name == ""  # not nullable before v7
    _, tok, answers = join(api, 7, "a-0")
    j = answers[tok]
    assert (j.protocol_type, j.protocol_name, j.generation_id, j.leader) == ("consumer", "range", 1, "a-0")
    resp, _, _ = sync(api, 5, "a-0", 1, name="roundrobin")
    assert resp.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    _, tok, answers = sync(api, 5, "a-0", 1, [("a-0", b"x")], ptype="consumer", name="range")
    s = answers[tok]
    assert (s.error_code, s.protocol_type, s.protocol_name, s.assignment) == (0, "consumer", "range", b"x")
    hb = call(api, HEARTBEAT, 4, group_id="g", generation_id=1, member_id="a-0", group_instance_id="i")[0]
    assert hb.error_code == E.UNKNOWN_MEMBER_ID  # an instance id the group does not know
    assert call(api, HEARTBEAT, 4, group_id="g", generation_id=1, member_id="a-0")[0].error_code == 0
    who = LEAVE_GROUP.request.structs["MemberIdentity"].make
    resp, _, _ = call(api, LEAVE_GROUP, 4, group_id="g", members=(who(member_id="a-0"), who(member_id="ghost")))
    assert resp.error_code == 0 and [(m.member_id, m.error_code) for m in resp.members] == [
        ("a-0", 0), ("ghost", E.UNKNOWN_MEMBER_ID)]
    resp, _, _ = call(api, LEAVE_GROUP, 3, group_id="nowhere", members=(who(member_id="a-0"),))
    assert (resp.error_code, resp.members) == (E.UNKNOWN_MEMBER_ID, ())


def test_offsets_commit_fetch_and_fetch_all_survive_a_reopen(tmp_path):
    db, tables = open_tables(tmp_path)
    api = GroupApi(Coordinator(initial_rebalance_delay_ms=0), GroupOffsets(tables), NODE)
    assert commit(api, 2, {"t": [(0, 5, "m", -1), (1, 7, None, -1)], "u": [(0, 9, "", -1)]}) == {
        ("t", 0): 0, ("t", 1): 0, ("u", 0): 0}
    assert fetch(api, 1, {"t": [0, 1]}) == (0, {("t", 0): (5, -1, "m", 0), ("t", 1): (7, -1, "", 0)})
    assert fetch(api, 0, {"u": [0, 3]})[1] == {("u", 0): (9, -1, "", 0), ("u", 3): (-1, -1, "", 0)}
    assert commit(api, 8, {"t": [(1, 8, "new", 4)]}) == {("t", 1): 0}  # leader epochs from v6
    top, got = fetch(api, 7, None, stable=True)  # v2+: every committed partition
    assert top == 0 and got == {("t", 0): (5, -1, "m", 0), ("t", 1): (8, 4, "new", 0), ("u", 0): (9, -1, "", 0)}
    assert fetch(api, 4, {"t": [1]})[1] == {("t", 1): (8, -1, "new", 0)}  # no epoch before v5
    db.close()
    db, tables = open_tables(tmp_path)  # durable: a new connection reads what was committed
    assert GroupOffsets(tables).fetch("g", None) == {("t", 0): (5, -1, "m"), ("t", 1): (8, 4, "new"),
                                                      ("u", 0): (9, -1, "")}
    db.close()


def test_commit_errors_per_partition_and_simple_versus_member_commits(api):
    errors = commit(api, 8, {"t": [(0, 1, "", -1), (5, 1, "", -1)], "nope": [(0, 1, "", -1)],
                             "secret": [(0, 1, "", -1)], "u": [(0, 1, "x" * 4097, -1)]})
    assert errors == {("t", 0): 0, ("t", 5): E.UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
                      ("secret", 0): E.TOPIC_AUTHORIZATION_FAILED, ("u", 0): E.OFFSET_METADATA_TOO_LARGE}
    assert commit(api, 8, {"u": [(0, 2, "x" * 4096, -1)]}) == {("u", 0): 0}
    assert fetch(api, 3, {"t": [0], "u": [0]})[1] == {("t", 0): (1, -1, "", 0), ("u", 0): (2, -1, "x" * 4096, 0)}
    a, gen = stable_member(api)
    simple = commit(api, 8, {"t": [(0, 3, "", -1)], "nope": [(0, 1, "", -1)]})
    assert simple == {("t", 0): E.UNKNOWN_MEMBER_ID, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert commit(api, 0, {"t": [(0, 3, "", -1)]}) == {("t", 0): E.UNKNOWN_MEMBER_ID}  # v0: no generation
    assert commit(api, 8, {"t": [(0, 3, "", -1)]}, generation=gen + 1, member=a) == {("t", 0): E.ILLEGAL_GENERATION}
    assert commit(api, 8, {"t": [(0, 4, "", -1)]}, generation=gen, member=a) == {("t", 0): 0}
    assert fetch(api, 6, {"t": [0]})[1][("t", 0)][0] == 4
    assert commit(api, 8, {"t": [(0, 1, "", -1)]}, group="") == {("t", 0): E.INVALID_GROUP_ID}


def test_offset_fetch_errors_by_version(api):
    assert fetch(api, 0, {"t": [0]}, group="") == (0, {("t", 0): (-1, -1, "", E.INVALID_GROUP_ID)})
    assert fetch(api, 2, {"t": [0]}, group="") == (E.INVALID_GROUP_ID, {})
    assert fetch(api, 7, None, group="") == (E.INVALID_GROUP_ID, {})
    commit(api, 8, {"t": [(0, 5, "", -1)], "u": [(0, 6, "", -1)]})
    hidden = Topics({"u": 1}, denied=("t",))
    assert fetch(api, 3, {"t": [0], "nope": [0]}, topics=hidden)[1] == {
        ("t", 0): (-1, -1, "", E.TOPIC_AUTHORIZATION_FAILED), ("nope", 0): (-1, -1, "", 0)}
    assert fetch(api, 7, None, topics=hidden)[1] == {("u", 0): (6, -1, "", 0)}
    assert fetch(api, 7, None, topics=Topics({"t": 2}))[1] == {("t", 0): (5, -1, "", 0)}  # u is gone


def test_offset_delete(api):
    T = OFFSET_DELETE.request.structs

    def delete(group, parts):
        body = tuple(T["OffsetDeleteRequestTopic"].make(name=t, partitions=tuple(
            T["OffsetDeleteRequestPartition"].make(partition_index=p) for p in ps)) for t, ps in parts.items())
        resp, _, _ = call(api, OFFSET_DELETE, 0, group_id=group, topics=body)
        return resp.error_code, {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    assert delete("nowhere", {"t": [0]}) == (E.GROUP_ID_NOT_FOUND, {})
    commit(api, 8, {"t": [(0, 5, "", -1), (1, 6, "", -1)], "u": [(0, 1, "", -1)]}, group="o")
    assert delete("o", {"t": [0, 7], "nope": [0], "secret": [0]}) == (0, {
        ("t", 0): 0, ("t", 7): E.UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("secret", 0): E.TOPIC_AUTHORIZATION_FAILED})
    assert fetch(api, 7, None, group="o")[1] == {("t", 1): (6, -1, "", 0), ("u", 0): (1, -1, "", 0)}
    a, gen = stable_member(api, group="o", protos=protocols(("range", subscription("t"))))
    assert delete("o", {"t": [1], "u": [0]}) == (0, {("t", 1): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): 0})
    assert fetch(api, 7, None, group="o")[1] == {("t", 1): (6, -1, "", 0)}
    stable_member(api, group="c", ptype="connect")
    assert delete("c", {"t": [0]}) == (E.NON_EMPTY_GROUP, {})


def test_list_describe_and_delete_groups(api):
    a, _gen = stable_member(api, client="a", protos=protocols(("range", subscription("t"))), assignment=b"A")
    commit(api, 8, {"t": [(0, 5, "", -1)]}, group="o")
    for v in (0, 4):
        resp, _, _ = call(api, LIST_GROUPS, v)
        assert [(g.group_id, g.protocol_type, g.group_state) for g in resp.groups] == [
            ("g", "consumer", "Stable" if v >= 4 else ""), ("o", "consumer", "Empty" if v >= 4 else "")]
    resp, _, _ = call(api, LIST_GROUPS, 4, states_filter=("stable",))
    assert [g.group_id for g in resp.groups] == ["g"]
    for v in (0, 5):
        resp, _, _ = call(api, DESCRIBE_GROUPS, v, groups=("g", "o", "none", ""))
        g, o, none, bad = resp.groups
        assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
        assert [(m.member_id, m.client_id, m.member_metadata, m.member_assignment) for m in g.members] == [
            (a, "a", subscription("t"), b"A")]
        assert (o.error_code, o.group_state, o.members) == (0, "Empty", ())
        assert (none.error_code, none.group_state) == (0, "Dead")
        assert bad.error_code == E.INVALID_GROUP_ID
    resp, _, _ = call(api, DELETE_GROUPS, 2, groups_names=("g", "o", "none"))
    assert [(r.group_id, r.error_code) for r in resp.results] == [
        ("g", E.NON_EMPTY_GROUP), ("o", 0), ("none", E.GROUP_ID_NOT_FOUND)]
    assert fetch(api, 7, None, group="o")[1] == {}
    call(api, LEAVE_GROUP, 0, group_id="g", member_id=a)
    resp, _, _ = call(api, DELETE_GROUPS, 0, groups_names=("g",))
    assert resp.results[0].error_code == 0 and call(api, DESCRIBE_GROUPS, 0, groups=("g",))[0].groups[0].group_state \
        == "Dead"


def test_tick_and_cancel_answer_parked_requests_in_their_version(api):
    a, gen = stable_member(api)
    _, tok_b, answers = join(api, 2, client="b", now=1)  # v2: joins at once, then waits for a
    assert answers == {} and api.next_deadline() == SESSION  # a's session ends first
    done = dict(api.tick(SESSION))  # a expires; b alone completes the join phase
    b = wire_response(JOIN_GROUP.key, 2, done[tok_b])
    assert (b.generation_id, b.leader, b.member_id) == (gen + 1, b.member_id, "b-1")
    _, tok_c, answers = join(api, 3, client="late", now=SESSION + 1)
    assert answers == {}
    api.cancel(tok_c)  # c's connection closed; b never rejoins either
    assert api.tick(SESSION + 1 + 20_000) == []
    assert api.coordinator.describe("g").state == "Empty"


def test_group_offsets_on_the_key_value_tables(tables):
    offsets = GroupOffsets(tables)
    offsets.commit("g", [("t", 0, 5, -1, "meta"), ("t", 1, 7, 3, None), ("t.x", 0, 1, -1, ""),
                         ("t2", 256, 9, -1, "")], now_ms=1)
    assert tables.list(PREFIX) == [PREFIX + "g"] and offsets.groups() == ["g"] and offsets.has("g")
    assert offsets.fetch("g", [("t", 0), ("t", 2)]) == {("t", 0): (5, -1, "meta")}
    assert offsets.fetch("g", None) == {("t", 0): (5, -1, "meta"), ("t", 1): (7, 3, ""), ("t.x", 0): (1, -1, ""),
                                        ("t2", 256): (9, -1, "")}
    offsets.forget_topic("t")  # only t: t.x and t2 share its first letter
    assert offsets.fetch("g", None) == {("t.x", 0): (1, -1, ""), ("t2", 256): (9, -1, "")}
    offsets.delete_partitions("g", "t.x", [0, 0, 5])
    offsets.delete_partitions("g", "t2", [256])
    assert offsets.groups() == [] and not offsets.has("g")  # the empty table went
    assert offsets.fetch("g", None) == {} and offsets.delete_group("g") is False
    offsets.commit("h", [("t", 0, 1, -1, "")], now_ms=2)
    assert offsets.delete_group("h") is True and offsets.fetch("h", [("t", 0)]) == {}
    with pytest.raises(ValueError):
        offsets.commit("x" * 256, [("t", 0, 1, -1, "")], now_ms=3)
    with pytest.raises(ValueError):
        offsets.commit("", [("t", 0, 1, -1, "")], now_ms=3)
    with pytest.raises(CommitTooLarge):
        offsets.commit("g", [("t", p, 1, -1, "") for p in range(MAX_BATCH_ENTRIES + 1)], now_ms=3)
    assert offsets.groups() == [] and offsets.fetch("x" * 256, None) == {}


def test_metadata_length_counts_as_kafka_does():
    assert not metadata_too_large(None) and not metadata_too_large("x" * 4096) and metadata_too_large("x" * 4097)
    assert metadata_too_large("\U0001d11e" * 4097) and not metadata_too_large("\U0001d11e" * 2048)
    assert not metadata_too_large("é" * 4096)  # 8192 bytes of UTF-8, 4096 chars: Kafka counts chars
    assert metadata_too_large("\U0001d11e" * 2049)  # 2049 code points, 4098 UTF-16 units


def test_a_deleted_topic_takes_its_offsets_along(api):
    commit(api, 8, {"t": [(0, 5, "", -1)], "u": [(0, 6, "", -1)]})
    commit(api, 8, {"t": [(1, 7, "", -1)]}, group="h")
    api.topic_deleted("t")
    assert fetch(api, 7, None)[1] == {("u", 0): (6, -1, "", 0)}
    assert fetch(api, 7, None, group="h")[1] == {}
    assert [g.group_id for g in call(api, LIST_GROUPS, 4)[0].groups] == ["g"]


@pytest.mark.parametrize("version", [1, 5, 7])
def test_offset_fetch_takes_in_commits_made_through_another_gateway_first(tmp_path, version):
    """Scale-out: a member that takes partitions over after a rebalance fetches the last
    commit made anywhere, not its gateway's copy (a fault-schedule run saw a gateway just
    back from a freeze answer offsets ~440 behind, and the group's commits went back);
    when the cluster cannot say, COORDINATOR_LOAD_IN_PROGRESS (retriable), never stale."""
    log = MemoryMetaLog()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    dba, ta = open_tables(tmp_path / "a")
    dbb, tb = open_tables(tmp_path / "b")
    dba.replicate(log)
    dbb.replicate(log)
    try:
        a = GroupApi(Coordinator(initial_rebalance_delay_ms=0), GroupOffsets(ta), NODE)
        b = GroupApi(Coordinator(initial_rebalance_delay_ms=0), GroupOffsets(tb), NODE)
        assert commit(a, 2, {"t": [(0, 10, "", -1)]}) == {("t", 0): 0}
        assert fetch(b, version, {"t": [0]})[1][("t", 0)][0] == 10
        assert commit(a, 2, {"t": [(0, 20, "", -1)]}) == {("t", 0): 0}     # b's copy now 10 behind
        assert fetch(b, version, {"t": [0]})[1][("t", 0)][0] == 20
        log.down = True
        top, rows = fetch(b, version, {"t": [0]})
        refused = int(E.COORDINATOR_LOAD_IN_PROGRESS)
        assert (top if version >= 2 else rows[("t", 0)][3]) == refused
        assert all(r[0] == -1 for r in rows.values())
    finally:
        dba.close()
        dbb.close()
