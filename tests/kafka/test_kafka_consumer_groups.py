"""KIP-848 consumer groups (adapters/kafka/consumer_groups.py, assignors.py) fed directly:
heartbeats built from the ConsumerGroupHeartbeat table, the clock an argument. Simulated
members behave as librdkafka does: they adopt an assignment when one comes (revoking what
it leaves out) and report what they own on the next heartbeat. Then the same through
GroupApi (adapters/kafka/group_api.py) on a real key-value store: the classic/consumer
split, topic permissions and OffsetCommit's member-epoch checks."""

from __future__ import annotations

import itertools
import uuid
from types import SimpleNamespace

import pytest

from adapters.kafka import frames
from adapters.kafka.admin import topic_uuid
from adapters.kafka.assignors import range_, uniform
from adapters.kafka.consumer_groups import (ASSIGNING, EMPTY, M_UNRELEASED, M_UNREVOKED, RECONCILING,
                                            SESSION_TIMEOUT_MS, STABLE, ConsumerGroups)
from adapters.kafka.errors import ErrorCode as E
from adapters.kafka.group_api import GroupApi
from adapters.kafka.groups import Coordinator, subscribed_topics
from adapters.kafka.messages_groups import (CONSUMER_GROUP_DESCRIBE, CONSUMER_GROUP_HEARTBEAT, DELETE_GROUPS,
                                            DESCRIBE_GROUPS, JOIN_GROUP, LIST_GROUPS, OFFSET_COMMIT, OFFSET_FETCH)
from adapters.kafka.offsets import GroupOffsets
from core.kvtables import KvTables
from core.metadb import MetaDb

REQ = CONSUMER_GROUP_HEARTBEAT.request
TP = REQ.structs["TopicPartitions"].cls
ORDERS, AUDIT = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"orders": (ORDERS, 4), "audit": (AUDIT, 3)}
TOPICS_IDS = (ORDERS, AUDIT)
REBALANCE_MS = 30_000  # below the session timeout, so the revocation deadline comes first


def lookup(name):
    return TOPICS.get(name)


def body(member_id: str, epoch: int, *, group="g", subscribed=None, owned=None, rebalance=-1, instance=None,
         assignor=None, regex=None):
    tps = None if owned is None else tuple(TP(topic_id=t, partitions=tuple(sorted(p))) for t, p in owned.items())
    value = REQ.make(group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance,
                     rebalance_timeout_ms=rebalance, subscribed_topic_names=subscribed, server_assignor=assignor,
                     subscribed_topic_regex=regex, topic_partitions=tps)
    return REQ.decode(1, REQ.encode(1, value))  # through the wire, as a request comes


class Client:
    """One member as librdkafka drives it (module docstring)."""

    def __init__(self, cg: ConsumerGroups, member_id: str, topics=("orders",), instance=None) -> None:
        self.cg, self.member_id, self.topics, self.instance = cg, member_id, list(topics), instance
        self.epoch, self.owned, self.last = 0, {}, None

    def send(self, b, now: int) -> dict:
        self.last = self.cg.heartbeat(b, client_id="cli", now=now, topics=lookup)
        if self.last["error_code"] == 0:
            self.epoch = self.last["member_epoch"]
            if self.last["assignment"] is not None:
                self.owned = {t: frozenset(p) for t, p in self.last["assignment"] if p}
        return self.last

    def join(self, now: int = 0) -> dict:
        return self.send(body(self.member_id, 0, subscribed=self.topics, owned={}, rebalance=REBALANCE_MS,
                              instance=self.instance), now)

    def beat(self, now: int = 0) -> dict:
        return self.send(body(self.member_id, self.epoch, owned=self.owned, instance=self.instance), now)

    def leave(self, now: int = 0, epoch: int = -1) -> dict:
        return self.cg.heartbeat(body(self.member_id, epoch, instance=self.instance), client_id="cli", now=now,
                                 topics=lookup)

    def count(self) -> int:
        return sum(len(p) for p in self.owned.values())


def owners_ok(*clients) -> None:
    """No partition is owned by two members at once."""
    seen = set()
    for c in clients:
        for t, parts in c.owned.items():
            for p in parts:
                assert (t, p) not in seen, f"{t}/{p} owned twice"
                seen.add((t, p))


def group(cg, gid="g"):
    return cg.get(gid)


def test_first_member_joins_and_gets_every_partition():
    cg = ConsumerGroups()
    a = Client(cg, "a")
    r = a.join()
    assert r["error_code"] == 0 and r["member_id"] == "a" and r["member_epoch"] == 1
    assert r["heartbeat_interval_ms"] == 5_000
    assert r["assignment"] == [(ORDERS, [0, 1, 2, 3])]
    assert group(cg).state == STABLE and group(cg).epoch == 1
    assert a.beat(100)["assignment"] is None  # unchanged: not sent again


def test_empty_member_id_gets_one_made_here_v0():
    cg = ConsumerGroups(new_member_id=lambda: "made")
    r = cg.heartbeat(body("", 0, subscribed=["orders"], owned={}, rebalance=REBALANCE_MS), client_id="c", now=0,
                     topics=lookup)
    assert r["member_id"] == "made" and r["member_epoch"] == 1


def test_second_member_gets_partitions_only_after_the_first_revoked_them():
    cg = ConsumerGroups()
    a, b = Client(cg, "a"), Client(cg, "b")
    a.join(0)
    r = b.join(10)
    assert r["member_epoch"] == 2 and r["assignment"] == []  # everything still held by a
    assert group(cg).members["b"].state == M_UNRELEASED and group(cg).state == RECONCILING
    r = a.beat(20)  # a learns it must give up two partitions; keeps its epoch meanwhile
    assert r["member_epoch"] == 1 and a.count() == 2
    assert group(cg).members["a"].state == M_UNREVOKED
    a.owned = {ORDERS: frozenset(range(4))}  # ... but has not revoked yet
    a.beat(30)
    assert b.beat(40)["assignment"] is None and b.count() == 0
    a.owned = {ORDERS: frozenset(group(cg).members["a"].assigned[ORDERS])}
    r = a.beat(50)  # revoked: a moves to the group epoch
    assert r["member_epoch"] == 2 and group(cg).members["a"].state == "STABLE"
    r = b.beat(60)
    assert b.count() == 2 and r["member_epoch"] == 2
    owners_ok(a, b)
    assert group(cg).state == STABLE
    assert {p for c in (a, b) for p in c.owned[ORDERS]} == {0, 1, 2, 3}


def converge(clients, now: int, rounds: int = 6) -> int:
    for _ in range(rounds):
        for c in clients:
            now += 10
            c.beat(now)
            owners_ok(*clients)
    return now


def test_leave_hands_the_partitions_to_the_others():
    cg = ConsumerGroups()
    a, b = Client(cg, "a"), Client(cg, "b")
    a.join(0)
    b.join(1)
    now = converge([a, b], 2)
    assert a.count() == b.count() == 2
    epoch = group(cg).epoch
    r = a.leave(now)
    assert r["error_code"] == 0 and r["member_epoch"] == -1
    assert group(cg).epoch == epoch + 1 and "a" not in group(cg).members
    b.beat(now + 10)
    assert b.owned == {ORDERS: frozenset(range(4))}
    b.leave(now + 20)
    assert group(cg).state == EMPTY


def test_session_timeout_removes_a_silent_member():
    cg = ConsumerGroups()
    a, b = Client(cg, "a"), Client(cg, "b")
    a.join(0)
    b.join(0)
    now = converge([a, b], 0)
    assert cg.next_deadline() == now - 10 + SESSION_TIMEOUT_MS  # a spoke first in the last round
    for t in range(now, now + SESSION_TIMEOUT_MS, 5_000):
        b.beat(t)  # b keeps talking, a is silent
    cg.tick(now + SESSION_TIMEOUT_MS)
    assert list(group(cg).members) == ["b"]
    b.beat(now + SESSION_TIMEOUT_MS + 1)
    assert b.count() == 4
    assert a.beat(now + SESSION_TIMEOUT_MS + 2)["error_code"] == E.UNKNOWN_MEMBER_ID


def test_a_member_that_does_not_revoke_in_its_rebalance_timeout_is_fenced():
    cg = ConsumerGroups()
    a, b = Client(cg, "a"), Client(cg, "b")
    a.join(0)
    b.join(0)
    a.beat(10)
    assert group(cg).members["a"].state == M_UNREVOKED
    assert cg.next_deadline() == 10 + REBALANCE_MS
    cg.tick(10 + REBALANCE_MS)
    assert list(group(cg).members) == ["b"]
    b.beat(20 + REBALANCE_MS)
    assert b.count() == 4


def test_stale_and_future_epochs_are_fenced_but_a_lost_answer_is_forgiven():
    cg = ConsumerGroups()
    a, b = Client(cg, "a"), Client(cg, "b")
    a.join(0)
    b.join(0)
    now = converge([a, b], 0)
    m = group(cg).members["a"]
    assert (m.epoch, m.previous_epoch) == (2, 1)
    ahead = cg.heartbeat(body("a", 3, owned=a.owned), client_id="c", now=now, topics=lookup)
    assert ahead["error_code"] == E.FENCED_MEMBER_EPOCH and ahead["member_id"] is None
    older = cg.heartbeat(body("a", 0 + 1, owned={ORDERS: frozenset(range(4))}), client_id="c", now=now,
                         topics=lookup)
    assert older["error_code"] == E.FENCED_MEMBER_EPOCH  # the previous epoch, but owning more than assigned
    lost = cg.heartbeat(body("a", 1, owned=a.owned), client_id="c", now=now, topics=lookup)
    assert lost["error_code"] == 0 and lost["member_epoch"] == 2
    r = a.join(now + 1)  # librdkafka rejoins with epoch 0 after a fence: starts afresh
    assert r["error_code"] == 0 and r["member_epoch"] == group(cg).epoch


@pytest.mark.parametrize("b, code", [
    (dict(member_id="a", epoch=5, group=""), E.INVALID_REQUEST),
    (dict(member_id="", epoch=5), E.INVALID_REQUEST),
    (dict(member_id="a", epoch=0, subscribed=["orders"], owned={}), E.INVALID_REQUEST),  # no rebalance timeout
    (dict(member_id="a", epoch=0, subscribed=[], owned={}, rebalance=1), E.INVALID_REQUEST),
    (dict(member_id="a", epoch=0, subscribed=["orders"], owned={ORDERS: {0}}, rebalance=1), E.INVALID_REQUEST),
    (dict(member_id="a", epoch=-3), E.INVALID_REQUEST),
    (dict(member_id="a", epoch=-2), E.INVALID_REQUEST),  # a static leave needs the instance id
    (dict(member_id="a", epoch=0, subscribed=["orders"], owned={}, rebalance=1, regex="o.*"), E.INVALID_REQUEST),
    (dict(member_id="a", epoch=0, subscribed=["orders"], owned={}, rebalance=1, assignor="sticky"),
     E.UNSUPPORTED_ASSIGNOR),
    (dict(member_id="a", epoch=4), E.UNKNOWN_MEMBER_ID),  # a group this gateway does not hold
    (dict(member_id="a", epoch=-1), E.GROUP_ID_NOT_FOUND),
])
def test_bad_heartbeats_get_kafkas_error(b, code):
    cg = ConsumerGroups()
    b = dict(b)
    r = cg.heartbeat(body(b.pop("member_id"), b.pop("epoch"), **b), client_id="c", now=0, topics=lookup)
    assert r["error_code"] == code and r["error_message"]
    assert r["member_id"] is None and r["assignment"] is None
    assert cg.get("g") is None  # a refused join leaves no group behind


def test_empty_subscribed_topic_regex_is_no_regex_librdkafka_2_16():
    """librdkafka 2.16 sends SubscribedTopicRegex "" (not null) with a list of names."""
    cg = ConsumerGroups()
    r = cg.heartbeat(body("a", 0, subscribed=["orders"], owned={}, rebalance=REBALANCE_MS, regex=""), client_id="c",
                     now=0, topics=lookup)
    assert r["error_code"] == 0 and r["assignment"] == [(ORDERS, [0, 1, 2, 3])]


def test_static_member_leaves_with_minus_two_and_a_new_instance_takes_over():
    cg = ConsumerGroups()
    a, b = Client(cg, "a", instance="i1"), Client(cg, "b")
    a.join(0)
    b.join(0)
    now = converge([a, b], 0)
    kept = dict(a.owned)
    epoch = group(cg).epoch
    assert a.leave(now, epoch=-2)["member_epoch"] == -2
    assert group(cg).epoch == epoch  # its place is kept: no rebalance
    busy = Client(cg, "c", instance="i1")
    a2 = Client(cg, "a2", instance="i1")
    r = a2.join(now + 1)
    assert r["error_code"] == 0 and a2.owned == kept and group(cg).epoch == epoch
    assert busy.join(now + 2)["error_code"] == E.UNRELEASED_INSTANCE_ID  # i1 is in use again
    assert a.beat(now + 3)["error_code"] in (E.FENCED_INSTANCE_ID, E.UNKNOWN_MEMBER_ID)


def test_a_new_partition_and_a_new_subscription_move_the_group_epoch():
    cg = ConsumerGroups()
    a = Client(cg, "a", topics=("orders", "missing"))
    a.join(0)
    assert a.owned == {ORDERS: frozenset(range(4))}
    TOPICS["missing"] = (uuid.UUID(int=3), 2)  # created meanwhile
    try:
        a.beat(10)
        assert group(cg).epoch == 2 and a.owned[uuid.UUID(int=3)] == {0, 1}
    finally:
        del TOPICS["missing"]
    a.send(body("a", a.epoch, subscribed=["audit"], owned=a.owned), 20)
    assert group(cg).epoch == 3  # the topic went and the subscription changed: one move
    assert a.owned == {} and group(cg).members["a"].state == M_UNREVOKED
    a.beat(30)
    assert a.owned == {AUDIT: frozenset(range(3))}


def test_uniform_is_balanced_and_sticky():
    members = {m: frozenset({"orders", "audit"}) for m in "abc"}
    first = uniform(members, TOPICS, {})
    counts = sorted(sum(len(p) for p in a.values()) for a in first.values())
    assert counts == [2, 2, 3]
    every = [(t, p) for a in first.values() for t, ps in a.items() for p in ps]
    assert sorted(every, key=str) == sorted([(ORDERS, p) for p in range(4)] + [(AUDIT, p) for p in range(3)],
                                            key=str)
    members["d"] = frozenset({"orders", "audit"})
    second = uniform(members, TOPICS, first)
    assert sorted(sum(len(p) for p in a.values()) for a in second.values()) == [1, 2, 2, 2]
    moved = sum(len(first[m].get(t, frozenset()) - second[m].get(t, frozenset())) for m in "abc" for t in TOPICS_IDS)
    assert moved == 1  # only what the newcomer needs for balance


def test_uniform_with_different_subscriptions_gives_each_topic_to_its_subscribers():
    members = {"a": frozenset({"orders"}), "b": frozenset({"orders", "audit"}), "c": frozenset({"audit"})}
    out = uniform(members, TOPICS, {})
    assert AUDIT not in out["a"] and ORDERS not in out["c"]
    assert sum(len(p) for a in out.values() for p in a.values()) == 7
    assert max(sum(len(p) for p in a.values()) for a in out.values()) == 3


def test_range_gives_contiguous_ranges_in_member_order():
    out = range_({"b": frozenset({"orders"}), "a": frozenset({"orders"}), "c": frozenset({"orders"})}, TOPICS, {})
    assert (out["a"][ORDERS], out["b"][ORDERS], out["c"][ORDERS]) == ({0, 1}, {2}, {3})


# -- through GroupApi -----------------------------------------------------------------------------
NODE = (1, "gw.example", 9092)


class Topics:
    """TopicAccess with a ``ctx`` naming TopicInfos; ``denied`` topics exist but may not be read."""

    def __init__(self, parts: dict[str, int], denied=()) -> None:
        self.infos = {name: SimpleNamespace(stream_id=1, id=i, created_at=7, partitions_count=n)
                      for i, (name, n) in enumerate({**parts, **{d: 1 for d in denied}}.items())}
        self.denied = set(denied)
        self.ctx = SimpleNamespace(topic=self.infos.get)

    def readable(self, topic: str) -> int:
        if topic not in self.infos:
            return int(E.UNKNOWN_TOPIC_OR_PARTITION)
        return int(E.TOPIC_AUTHORIZATION_FAILED) if topic in self.denied else 0

    def partitions(self, topic: str) -> int | None:
        info = self.infos.get(topic)
        return None if info is None else info.partitions_count


@pytest.fixture
def api(tmp_path):
    db = MetaDb(tmp_path / "metadata.sqlite")
    db.migrate()
    ids = itertools.count()
    yield GroupApi(Coordinator(initial_rebalance_delay_ms=0, new_member_id=lambda p: f"{p}-{next(ids)}"),
                   GroupOffsets(KvTables(db)), NODE)
    db.close()


def call(api, api_def, version: int, access: Topics, now: int = 0, **fields):
    """One request through the wire and the API; the response decoded again at its version."""
    req = api_def.request
    value = req.decode(version, req.encode(version, req.make(**fields)))
    answer, _done = api.handle(api_def.key, version, value, now_ms=now, token=object(), client_id="cli",
                               topics=access)
    frame = frames.encode_response(api_def.key, version, 3, answer)
    return frames.decode_response(api_def.key, version, frame[4:])[1]


def cg_join(api, topics, gid="g", member="m1", subscribed=("t",), now=0):
    return call(api, CONSUMER_GROUP_HEARTBEAT, 1, topics, now, group_id=gid, member_id=member, member_epoch=0,
                rebalance_timeout_ms=REBALANCE_MS, subscribed_topic_names=list(subscribed), topic_partitions=())


def test_heartbeat_through_the_api_assigns_by_topic_id(api):
    topics = Topics({"t": 2})
    r = cg_join(api, topics)
    assert r.error_code == 0 and r.member_epoch == 1 and r.heartbeat_interval_ms == 5_000
    (tp,) = r.assignment.topic_partitions
    assert tp.topic_id == topic_uuid(topics.infos["t"]) and list(tp.partitions) == [0, 1]
    listed = call(api, LIST_GROUPS, 4, topics)
    assert [(g.group_id, g.protocol_type, g.group_state) for g in listed.groups] == [("g", "consumer", "Stable")]
    (d,) = call(api, DESCRIBE_GROUPS, 5, topics, groups=["g"]).groups
    assert (d.group_state, d.protocol_type, d.protocol_data, [m.member_id for m in d.members]) == \
        ("Stable", "consumer", "uniform", ["m1"])
    (m,) = d.members  # shown as a classic consumer: ConsumerProtocolSubscription / Assignment v0
    assert subscribed_topics(m.member_metadata) == {"t"}
    assert m.member_assignment == bytes.fromhex("0000 00000001 0001") + b"t" + bytes.fromhex(
        "00000002 00000000 00000001 ffffffff")
    assert api.next_deadline() == SESSION_TIMEOUT_MS


def test_consumer_group_describe_answers_consumer_groups_only(api):
    topics = Topics({"t": 2, "u": 1})
    cg_join(api, topics, subscribed=("t", "u", "later"))
    api.coordinator.join("old", "", None, "consumer", [("range", b"")], 10_000, 10_000, version=3, client_id="x",
                         now=0, token=object())
    g, old, nowhere, bad = call(api, CONSUMER_GROUP_DESCRIBE, 0, topics, group_ids=["g", "old", "nowhere", ""]).groups
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (0, "Stable", 1, 1,
                                                                                                  "uniform")
    (m,) = g.members
    assert (m.member_id, m.member_epoch, m.subscribed_topic_names) == ("m1", 1, ("later", "t", "u"))
    assert [(tp.topic_name, tp.topic_id, list(tp.partitions)) for tp in m.assignment.topic_partitions] == [
        ("t", topic_uuid(topics.infos["t"]), [0, 1]), ("u", topic_uuid(topics.infos["u"]), [0])]
    assert m.target_assignment == m.assignment
    assert (old.error_code, nowhere.error_code, bad.error_code) == (E.GROUP_ID_NOT_FOUND, E.GROUP_ID_NOT_FOUND,
                                                                   E.INVALID_GROUP_ID)
    hidden = Topics({"t": 2}, denied=("u",))  # another user, who may not read u
    (g,) = call(api, CONSUMER_GROUP_DESCRIBE, 0, hidden, group_ids=["g"]).groups
    assert g.error_code == E.TOPIC_AUTHORIZATION_FAILED and g.members == ()


def test_a_subscription_to_a_topic_the_user_may_not_read_is_refused(api):
    topics = Topics({"t": 2}, denied=("secret",))
    r = cg_join(api, topics, subscribed=("t", "secret"))
    assert r.error_code == E.TOPIC_AUTHORIZATION_FAILED and "secret" in r.error_message
    assert r.assignment is None and api.consumer.get("g") is None


def test_classic_and_consumer_groups_do_not_share_an_id(api):
    topics = Topics({"t": 2})
    cg_join(api, topics, gid="modern")
    j = call(api, JOIN_GROUP, 5, topics, group_id="modern", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
             member_id="", protocol_type="consumer", protocols=[JOIN_GROUP.request.structs[
                 "JoinGroupRequestProtocol"].make(name="range", metadata=b"")])
    assert j.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    api.coordinator.join("old", "", None, "consumer", [("range", b"")], 10_000, 10_000, version=3, client_id="x",
                         now=0, token=object())
    r = cg_join(api, topics, gid="old")
    assert r.error_code == E.GROUP_ID_NOT_FOUND
    # an empty consumer group changes sides
    call(api, CONSUMER_GROUP_HEARTBEAT, 1, topics, 1, group_id="modern", member_id="m1", member_epoch=-1)
    assert api.consumer.get("modern").state == EMPTY
    j = call(api, JOIN_GROUP, 5, topics, group_id="modern", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
             member_id="", protocol_type="consumer", protocols=[JOIN_GROUP.request.structs[
                 "JoinGroupRequestProtocol"].make(name="range", metadata=b"")])
    assert j.error_code == E.MEMBER_ID_REQUIRED and api.consumer.get("modern") is None


def commit(api, topics, version, epoch, member="m1", gid="g", offset=5):
    S = OFFSET_COMMIT.request.structs
    r = call(api, OFFSET_COMMIT, version, topics, group_id=gid, generation_id_or_member_epoch=epoch,
             member_id=member, topics=[S["OffsetCommitRequestTopic"].make(name="t", partitions=[
                 S["OffsetCommitRequestPartition"].make(partition_index=0, committed_offset=offset,
                                                        committed_metadata="")])])
    return r.topics[0].partitions[0].error_code


def test_offset_commit_checks_the_member_epoch(api):
    topics = Topics({"t": 2})
    cg_join(api, topics)
    assert commit(api, topics, 8, 1) == E.UNSUPPORTED_VERSION  # ConsumerGroup.validateOffsetCommit
    assert commit(api, topics, 9, 2) == E.STALE_MEMBER_EPOCH
    assert commit(api, topics, 9, 1, member="nobody") == E.UNKNOWN_MEMBER_ID
    assert commit(api, topics, 9, -1, member="") == E.UNKNOWN_MEMBER_ID  # a simple commit needs an empty group
    assert commit(api, topics, 9, 1, offset=7) == 0
    assert commit(api, topics, 9, 3, gid="nowhere") == E.GROUP_ID_NOT_FOUND
    # TxnOffsetCommit's check (any version) through the same entry point
    assert api.check_commit("g", 1, "m1", now_ms=0, version=3, transactional=True) == 0
    assert api.check_commit("g", 2, "m1", now_ms=0, version=3, transactional=True) == E.STALE_MEMBER_EPOCH
    fetched = call(api, OFFSET_FETCH, 7, topics, group_id="g", topics=[
        OFFSET_FETCH.request.structs["OffsetFetchRequestTopic"].make(name="t", partition_indexes=[0])])
    assert fetched.topics[0].partitions[0].committed_offset == 7
    deleted = call(api, DELETE_GROUPS, 2, topics, groups_names=["g"])
    assert deleted.results[0].error_code == E.NON_EMPTY_GROUP
    call(api, CONSUMER_GROUP_HEARTBEAT, 1, topics, 1, group_id="g", member_id="m1", member_epoch=-1)
    assert commit(api, topics, 9, -1, member="") == 0  # empty now: a simple commit is accepted
    assert call(api, DELETE_GROUPS, 2, topics, groups_names=["g"]).results[0].error_code == 0
    assert api.consumer.get("g") is None


def test_assigning_state_until_someone_heartbeats():
    cg = ConsumerGroups()
    a, b = Client(cg, "a"), Client(cg, "b")
    a.join(0)
    b.join(0)
    converge([a, b], 0)
    b.leave(100)
    assert group(cg).state == ASSIGNING
    a.beat(110)
    assert group(cg).state == STABLE and a.count() == 4
