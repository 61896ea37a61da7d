"""The classic group coordinator (adapters/kafka/groups.py), sans-I/O: the clock is an
argument, member ids come from a counter. Behaviour as Kafka's GroupMetadataManager /
ClassicGroup / OffsetMetadataManager answer it."""

from __future__ import annotations

import itertools
import struct

import pytest

from adapters.kafka import groups
from adapters.kafka.errors import ErrorCode as E
from adapters.kafka.groups import COMPLETING, EMPTY, PREPARING, STABLE, Coordinator, subscribed_topics

SESSION = 10_000
REBALANCE = 30_000
PROTOS = [("range", b"r"), ("roundrobin", b"rr")]


def make(delay=0):
    ids = itertools.count()
    return Coordinator(initial_rebalance_delay_ms=delay, new_member_id=lambda prefix: f"{prefix}-{next(ids)}")


@pytest.fixture
def coord():
    return make()


def join(c, member="", *, now=0, version=5, protocols=PROTOS, ptype="consumer", client="c", token=None, inst=None,
         group="g", session=SESSION):
    return c.join(group, member, inst, ptype, protocols, session, REBALANCE, version=version, client_id=client,
                  now=now, token=token or object())


def new_id(c, client, now=0, group="g"):
    """A member id obtained the v4+ way: MEMBER_ID_REQUIRED (the join that uses it comes next)."""
    fields, done = join(c, client=client, now=now, group=group)
    assert fields["error_code"] == E.MEMBER_ID_REQUIRED and done == []
    return fields["member_id"]


def sync(c, member, generation, assignments=(), *, now=0, token=None, inst=None, ptype=None, name=None):
    return c.sync("g", generation, member, ptype, name, list(assignments), now=now, token=token or object(),
                  instance_id=inst)


def hb(c, member, generation, *, now=0, inst=None, group="g"):
    return c.heartbeat(group, generation, member, now=now, instance_id=inst)["error_code"]


def stable_one(c, client="a"):
    """One member, generation 1, Stable."""
    a = new_id(c, client)
    join(c, a)
    sync(c, a, 1, [(a, b"all")])
    assert c.groups["g"].state == STABLE
    return a


def two_members(c):
    """Members a (leader) and b in generation 2, CompletingRebalance."""
    a = stable_one(c)
    b = new_id(c, "b")
    assert join(c, b) == (None, [])  # parked until a rejoins
    _, done = join(c, a)
    assert len(done) == 2 and c.groups["g"].generation == 2 and c.groups["g"].state == COMPLETING
    return a, b


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def test_member_id_required_join_sync_heartbeat(coord):
    mid = new_id(coord, "a")
    assert mid == "a-0" and coord.groups["g"].pending
    tok = object()
    fields, done = join(coord, mid, token=tok)
    assert fields is None and [t for t, _ in done] == [tok]
    answer = done[0][1]
    assert (answer["error_code"], answer["generation_id"], answer["leader"], answer["protocol_name"],
            answer["protocol_type"]) == (0, 1, mid, "range", "consumer")
    assert answer["members"] == [(mid, None, b"r")]  # the chosen protocol's metadata
    sync_tok = object()
    fields, done = sync(coord, mid, 1, [(mid, b"assignment")], token=sync_tok)
    assert fields is None and done == [(sync_tok, {"error_code": 0, "protocol_type": "consumer",
                                                   "protocol_name": "range", "assignment": b"assignment"})]
    assert coord.groups["g"].state == STABLE and not coord.groups["g"].pending
    assert hb(coord, mid, 1, now=2) == 0
    # A sync after Stable answers the stored assignment at once.
    assert sync(coord, mid, 1, now=3) == ({"error_code": 0, "protocol_type": "consumer", "protocol_name": "range",
                                           "assignment": b"assignment"}, [])


def test_a_second_member_rebalances_and_the_follower_waits_for_the_leader(coord):
    a = stable_one(coord)
    b = new_id(coord, "b", now=5)
    b_tok = object()
    assert join(coord, b, now=5, token=b_tok) == (None, [])
    assert coord.groups["g"].state == PREPARING
    assert hb(coord, a, 1, now=6) == E.REBALANCE_IN_PROGRESS
    a_tok = object()
    _, done = join(coord, a, now=7, token=a_tok)
    answers = dict(done)
    assert set(answers) == {a_tok, b_tok} and answers[a_tok]["generation_id"] == 2
    assert [m for m, _i, _meta in answers[a_tok]["members"]] == [a, b] and answers[b_tok]["members"] == []
    assert answers[b_tok]["leader"] == a  # the leader that rejoined stays the leader
    f_tok = object()
    assert sync(coord, b, 2, now=8, token=f_tok) == (None, [])
    assert coord.groups["g"].state == COMPLETING and hb(coord, b, 2, now=8) == 0
    _, done = sync(coord, a, 2, [(a, b"p0"), (b, b"p1")], now=9)
    assert {t: f["assignment"] for t, f in done}[f_tok] == b"p1" and coord.groups["g"].state == STABLE


def test_three_members_in_the_initial_delay_which_extends_while_members_arrive():
    c = make(delay=3_000)
    ids = [new_id(c, n) for n in "abc"]
    toks = [object() for _ in ids]
    assert join(c, ids[0], now=0, token=toks[0]) == (None, [])
    assert c.next_deadline() == 3_000
    join(c, ids[1], now=100, token=toks[1])
    join(c, ids[2], now=200, token=toks[2])
    assert c.tick(2_999) == [] and c.tick(3_000) == []  # new members came: one more delay
    assert c.next_deadline() == 6_000 and c.groups["g"].state == PREPARING
    done = dict(c.tick(6_000))
    assert set(done) == set(toks)
    leader = done[toks[0]]
    assert leader["leader"] == ids[0] and [m for m, _i, _ in leader["members"]] == ids
    assert done[toks[1]]["members"] == [] == done[toks[2]]["members"]
    assert {f["generation_id"] for f in done.values()} == {1}
    parked = [object(), object(), object()]
    assert sync(c, ids[1], 1, token=parked[1], now=6_001) == (None, [])
    assert sync(c, ids[2], 1, token=parked[2], now=6_001) == (None, [])
    _, out = sync(c, ids[0], 1, [(i, i.encode()) for i in ids], now=6_002, token=parked[0])
    assert {t: f["assignment"] for t, f in out} == {p: i.encode() for p, i in zip(parked, ids)}
    assert c.groups["g"].state == STABLE


def test_the_protocol_is_voted_among_those_every_member_supports():
    c = make(delay=1_000)
    prefs = {"a": [("roundrobin", b"A"), ("range", b"a")], "b": [("sticky", b""), ("range", b"b"),
                                                                  ("roundrobin", b"B")],
             "c": [("range", b"c"), ("roundrobin", b"C")]}
    toks = {}
    for name, protos in prefs.items():
        toks[name] = object()
        join(c, new_id(c, name), protocols=protos, token=toks[name])
    assert c.tick(1_000) == []  # b and c came during the delay: it is extended once
    done = dict(c.tick(2_000))
    assert done[toks["a"]]["protocol_name"] == "range"  # sticky is not common; range 2 votes, roundrobin 1
    assert [meta for _m, _i, meta in done[toks["a"]]["members"]] == [b"a", b"b", b"c"]


def test_inconsistent_protocols_are_refused(coord):
    a = new_id(coord, "a")
    join(coord, a, protocols=[("roundrobin", b""), ("range", b"")])
    fields, _ = join(coord, new_id(coord, "b"), protocols=[("sticky", b"")])
    assert fields["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    fields, _ = join(coord, new_id(coord, "c"), ptype="connect")
    assert fields["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    fields, _ = join(coord, group="fresh", protocols=[])
    assert fields["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL and "fresh" not in coord.groups
    fields, _ = join(coord, group="fresh2", ptype="")
    assert fields["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert coord.groups["g"].protocol == "roundrobin" and list(coord.groups["g"].members) == [a]


def test_old_versions_join_without_a_member_id_and_bad_joins_are_refused(coord):
    fields, done = join(coord, version=3, client="old")
    assert fields is None and done[0][1]["member_id"] == "old-0"
    fields, _ = join(coord, "stranger")
    assert fields == {"error_code": E.UNKNOWN_MEMBER_ID, "member_id": "stranger"}
    fields, _ = join(coord, "stranger", group="nowhere")
    assert fields["error_code"] == E.UNKNOWN_MEMBER_ID and "nowhere" not in coord.groups
    fields, _ = join(coord, session=100)
    assert fields["error_code"] == E.INVALID_SESSION_TIMEOUT
    for bad in ("", "x" * (groups.MAX_GROUP_ID_BYTES + 1)):
        fields, _ = join(coord, group=bad)
        assert fields["error_code"] == E.INVALID_GROUP_ID


def test_a_silent_member_expires_and_the_group_rebalances_on_the_clock(coord):
    a, b = two_members(coord)
    sync(coord, b, 2)
    sync(coord, a, 2, [(a, b"x"), (b, b"y")])
    assert coord.next_deadline() == SESSION
    assert hb(coord, a, 2, now=SESSION - 1) == 0  # a stays alive, b does not
    assert coord.tick(SESSION - 1) == []
    assert coord.tick(SESSION) == []
    group = coord.groups["g"]
    assert b not in group.members and group.state == PREPARING
    assert hb(coord, b, 2, now=SESSION + 1) == E.UNKNOWN_MEMBER_ID
    tok = object()
    _, done = join(coord, a, now=SESSION + 2, token=tok)
    assert done[0][0] is tok and done[0][1]["generation_id"] == 3 and len(done[0][1]["members"]) == 1


def test_an_unused_member_id_expires_and_holds_the_join_phase_until_then(coord):
    a = stable_one(coord)
    ghost = new_id(coord, "ghost", now=100)
    tok = object()
    assert join(coord, a, now=200, token=tok) == (None, [])  # the leader rejoins: waits for the pending id
    assert coord.next_deadline() == 100 + SESSION
    done = coord.tick(100 + SESSION)
    assert [t for t, _ in done] == [tok] and done[0][1]["generation_id"] == 2
    fields, _ = join(coord, ghost, now=100 + SESSION + 1)
    assert fields["error_code"] == E.UNKNOWN_MEMBER_ID


def test_leave_rebalances_answers_a_parked_join_and_the_last_one_out_empties_the_group(coord):
    a, b = two_members(coord)
    sync(coord, b, 2)
    sync(coord, a, 2, [])
    top, errors, done = coord.leave("g", [(b, None), ("ghost", None)], now=1)
    assert (top, errors, done) == (0, [0, E.UNKNOWN_MEMBER_ID], [])
    assert coord.groups["g"].state == PREPARING and hb(coord, a, 2, now=2) == E.REBALANCE_IN_PROGRESS
    tok = object()
    _, done = join(coord, a, now=3, token=tok)
    assert done[0][1]["generation_id"] == 3
    c = new_id(coord, "c")
    c_tok = object()
    join(coord, c, now=4, token=c_tok)  # parked: a has not rejoined
    _, errors, done = coord.leave("g", [(c, None)], now=5)
    assert errors == [0] and done == [(c_tok, {"error_code": E.UNKNOWN_MEMBER_ID, "member_id": ""})]
    assert coord.delete("g") == E.NON_EMPTY_GROUP
    _, errors, _ = coord.leave("g", [(a, None)], now=6)
    assert errors == [0] and coord.groups["g"].state == EMPTY and coord.groups["g"].generation == 4
    assert coord.leave("nowhere", [(a, None)], now=7)[0] == E.UNKNOWN_MEMBER_ID
    assert coord.leave("", [(a, None)], now=7)[0] == E.INVALID_GROUP_ID
    assert coord.delete("g") == 0 and "g" not in coord.groups


def test_heartbeat_answers_per_state(coord):
    assert hb(coord, "m", 0, group="nowhere") == E.UNKNOWN_MEMBER_ID
    assert hb(coord, "m", 0, group="") == E.INVALID_GROUP_ID
    a, b = two_members(coord)  # CompletingRebalance
    assert hb(coord, a, 2) == 0 and hb(coord, b, 2) == 0
    assert hb(coord, a, 1) == E.ILLEGAL_GENERATION
    assert hb(coord, "nobody", 2) == E.UNKNOWN_MEMBER_ID
    assert hb(coord, a, 2, inst="unknown-instance") == E.UNKNOWN_MEMBER_ID
    sync(coord, b, 2)
    sync(coord, a, 2, [])
    assert coord.groups["g"].state == STABLE and hb(coord, b, 2) == 0
    join(coord, new_id(coord, "c"))
    assert coord.groups["g"].state == PREPARING and hb(coord, b, 2) == E.REBALANCE_IN_PROGRESS


def test_sync_errors_and_a_restarted_rebalance(coord):
    a, b = two_members(coord)
    assert sync(coord, b, 1)[0] == {"error_code": E.ILLEGAL_GENERATION}
    assert sync(coord, "nobody", 2)[0] == {"error_code": E.UNKNOWN_MEMBER_ID}
    assert sync(coord, b, 2, name="roundrobin")[0] == {"error_code": E.INCONSISTENT_GROUP_PROTOCOL}
    assert sync(coord, b, 2, ptype="connect")[0] == {"error_code": E.INCONSISTENT_GROUP_PROTOCOL}
    assert coord.sync("", 2, b, None, None, [], now=0, token=object())[0] == {"error_code": E.INVALID_GROUP_ID}
    parked = object()
    assert sync(coord, b, 2, token=parked, ptype="consumer", name="range") == (None, [])
    _, done = join(coord, new_id(coord, "c"))  # a new member restarts the rebalance
    assert done == [(parked, {"error_code": E.REBALANCE_IN_PROGRESS})]
    assert sync(coord, a, 2)[0] == {"error_code": E.REBALANCE_IN_PROGRESS}


def test_follower_rejoining_unchanged_is_answered_at_once_the_leader_rebalances(coord):
    a, b = two_members(coord)
    sync(coord, b, 2)
    sync(coord, a, 2, [(a, b"x"), (b, b"y")])
    fields, done = join(coord, b, now=1)
    assert done == [] and (fields["generation_id"], fields["leader"], fields["members"]) == (2, a, [])
    assert coord.groups["g"].state == STABLE
    assert join(coord, b, now=2, protocols=[("range", b"new")])[0] is None  # changed metadata: rebalance
    assert coord.groups["g"].state == PREPARING
    _, done = join(coord, a, now=3)
    assert {f["generation_id"] for _, f in done} == {3}
    fields, done = join(coord, a, now=4)  # CompletingRebalance, same protocols: this generation again
    assert done == [] and fields["generation_id"] == 3 and len(fields["members"]) == 2


def test_a_parked_join_that_never_completes_is_answered_at_the_rebalance_timeout(coord):
    a, b = two_members(coord)
    sync(coord, b, 2)
    sync(coord, a, 2, [])
    tok = object()
    join(coord, a, now=100, token=tok)  # a is the leader: a rebalance; b keeps heartbeating, never rejoins
    for t in (9_000, 18_000, 27_000):
        assert hb(coord, b, 2, now=t) == E.REBALANCE_IN_PROGRESS
    assert coord.next_deadline() == 100 + REBALANCE
    done = coord.tick(100 + REBALANCE)
    assert [t for t, _ in done] == [tok] and b not in coord.groups["g"].members


def test_a_member_that_never_syncs_is_removed_and_parked_syncs_restart(coord):
    a, b = two_members(coord)
    parked = object()
    sync(coord, b, 2, token=parked, now=10)  # the leader a never sends its SyncGroup
    assert coord.next_deadline() == SESSION  # a's session; b is parked; the pending-sync deadline is later
    assert coord.tick(SESSION - 1) == []
    done = coord.tick(SESSION)  # a is removed: the parked sync of b restarts
    assert done == [(parked, {"error_code": E.REBALANCE_IN_PROGRESS})] and list(coord.groups["g"].members) == [b]


def test_pending_sync_expiry_after_the_rebalance_timeout():
    c = make()
    a, b = two_members(c)
    for t in range(5_000, REBALANCE, 5_000):  # both heartbeat; only b syncs
        assert hb(c, a, 2, now=t) == 0 and hb(c, b, 2, now=t) == 0
    parked = object()
    sync(c, b, 2, token=parked, now=REBALANCE - 1)
    done = c.tick(REBALANCE)
    assert done == [(parked, {"error_code": E.REBALANCE_IN_PROGRESS})]
    assert list(c.groups["g"].members) == [b] and c.groups["g"].state == PREPARING


def test_static_members_are_replaced_and_the_old_id_is_fenced(coord):
    fields, done = join(coord, inst="i-1", client="x")  # v5 with an instance id: no MEMBER_ID_REQUIRED
    old = done[0][1]["member_id"]
    assert fields is None and old == "i-1-0"
    sync(coord, old, 1, [(old, b"mine")], inst="i-1")
    fields, done = join(coord, "", inst="i-1", now=1)  # a restart: a new id, no rebalance (Stable)
    new = fields["member_id"]
    assert done == [] and new == "i-1-1" and fields["generation_id"] == 1 and fields["leader"] == old
    assert coord.groups["g"].state == STABLE and coord.groups["g"].static == {"i-1": new}
    assert sync(coord, new, 1, inst="i-1")[0]["assignment"] == b"mine"
    assert hb(coord, old, 1, inst="i-1") == E.FENCED_INSTANCE_ID
    assert hb(coord, old, 1) == E.UNKNOWN_MEMBER_ID
    assert join(coord, old, inst="i-1", now=2)[0]["error_code"] == E.FENCED_INSTANCE_ID
    assert coord.check_commit("g", 1, old, now=2, instance_id="i-1") == E.FENCED_INSTANCE_ID
    assert coord.leave("g", [(old, "i-1")], now=2)[1] == [E.FENCED_INSTANCE_ID]
    _, errors, _ = coord.leave("g", [("", "i-1")], now=3)  # an administrator removes it by instance id
    assert errors == [0] and not coord.groups["g"].members


def test_a_static_member_that_does_not_rejoin_keeps_its_place(coord):
    _, done = join(coord, inst="s", client="x")
    s = done[0][1]["member_id"]
    sync(coord, s, 1, [(s, b"0")])
    d = new_id(coord, "d")
    d_tok = object()
    join(coord, d, token=d_tok, now=1)
    for t in (9_000, 18_000, 27_000):  # s is alive (heartbeats) but does not rejoin
        assert hb(coord, s, 1, now=t) == E.REBALANCE_IN_PROGRESS
    done = dict(coord.tick(1 + REBALANCE))  # s never rejoins: a dynamic member would be dropped
    group = coord.groups["g"]
    assert set(group.members) == {s, d} and group.generation == 2 and done[d_tok]["leader"] == d
    assert [m for m, _i, _ in done[d_tok]["members"]] == [s, d]


def test_a_superseded_join_and_a_cancelled_one(coord):
    a, b = two_members(coord)
    sync(coord, b, 2)
    sync(coord, a, 2, [])
    first, second = object(), object()
    join(coord, a, token=first, now=1)
    _, done = join(coord, a, token=second, now=2)
    assert done == [(first, {"error_code": E.REBALANCE_IN_PROGRESS, "member_id": a})]
    coord.cancel(second)  # a's connection closed
    join(coord, b, now=3)
    done = coord.tick(1 + REBALANCE)
    assert [f["member_id"] for _, f in done] == [b] and list(coord.groups["g"].members) == [b]


def test_limits(coord, monkeypatch):
    monkeypatch.setattr(groups, "MAX_MEMBERS_PER_GROUP", 2)
    a, b = two_members(coord)
    fields, _ = join(coord)
    assert fields == {"error_code": E.GROUP_MAX_SIZE_REACHED, "member_id": ""}
    monkeypatch.setattr(groups, "MAX_GROUPS", 2)
    new_id(coord, "e", group="other")  # two groups: g (live) and other (a pending id)
    fields, _ = join(coord, group="third")
    assert fields["error_code"] == E.COORDINATOR_NOT_AVAILABLE
    assert hb(coord, a, 2, now=SESSION - 1) == 0 == hb(coord, b, 2, now=SESSION - 1)
    coord.tick(SESSION)  # other's pending id expires: an Empty group may be forgotten
    assert new_id(coord, "f", group="third") and set(coord.groups) == {"g", "third"}
    assert join(coord, group="é" * 128)[0]["error_code"] == E.INVALID_GROUP_ID  # 256 bytes


def test_offset_commits_are_checked_against_the_group(coord):
    assert coord.check_commit("g", -1, "", now=0) == 0  # a simple commit: no group yet
    assert coord.check_commit("g", 3, "m", now=0) == E.ILLEGAL_GENERATION  # GROUP_ID_NOT_FOUND from v9
    assert coord.check_commit("", -1, "", now=0) == E.INVALID_GROUP_ID
    a, b = two_members(coord)  # CompletingRebalance
    assert coord.check_commit("g", 2, a, now=0) == E.REBALANCE_IN_PROGRESS
    sync(coord, b, 2)
    sync(coord, a, 2, [])
    assert coord.check_commit("g", -1, "", now=0) == E.UNKNOWN_MEMBER_ID  # simple commit, members present
    assert coord.check_commit("g", 2, a, now=0) == 0
    assert coord.check_commit("g", 1, a, now=0) == E.ILLEGAL_GENERATION
    assert coord.check_commit("g", 2, "x", now=0) == E.UNKNOWN_MEMBER_ID
    join(coord, a, now=1)  # PreparingRebalance: members still commit (before they revoke)
    assert coord.groups["g"].state == PREPARING
    assert coord.check_commit("g", 2, b, now=SESSION - 1) == 0
    assert coord.tick(SESSION) == [] and b in coord.groups["g"].members  # the commit kept b's session


def test_offset_delete_rules_and_the_consumer_subscription():
    assert subscribed_topics(subscription("t1", "t2")) == {"t1", "t2"}
    assert subscribed_topics(b"\x00") is None and subscribed_topics(struct.pack(">hi", 0, 5)) is None
    c = make()
    assert c.check_offset_delete("nowhere") == 0 and not c.is_subscribed("nowhere", "t1")
    a = new_id(c, "a")
    join(c, a, protocols=[("range", subscription("t1"))])
    assert c.check_offset_delete("g") == 0
    assert c.is_subscribed("g", "t1") and not c.is_subscribed("g", "t2")
    join(c, new_id(c, "b"), protocols=[("range", b"garbage")])
    assert c.is_subscribed("g", "t2")  # metadata that does not parse: taken as subscribed
    join(c, new_id(c, "x", group="h"), group="h", ptype="connect")
    assert c.check_offset_delete("h") == E.NON_EMPTY_GROUP and not c.is_subscribed("h", "t1")
