"""The classic group coordinator (adapters/kafka/groups.py, sans-I/O: the clock is an
argument) and committed offsets on real key-value tables (adapters/kafka/offsets.py)."""

from __future__ import annotations

import itertools

import pytest

from adapters.kafka.errors import ErrorCode as E
from adapters.kafka.groups import COMPLETING, EMPTY, PREPARING, STABLE, Coordinator
from adapters.kafka.offsets import GroupOffsets
from core.broker import Broker

SESSION = 10_000
PROTOS = [("range", b"r"), ("roundrobin", b"rr")]


@pytest.fixture
def coord():
    ids = itertools.count()
    return Coordinator(initial_rebalance_delay_ms=0, new_member_id=lambda client: f"{client}-{next(ids)}")


def join(c, member="", *, now=0, version=5, protocols=PROTOS, ptype="consumer", client="c", token=None, inst=None):
    return c.join("g", member, inst, ptype, protocols, SESSION, 30_000, version=version, client_id=client, now=now,
                  token=token or object())


def joined(c, client, now=0):
    """A member id obtained the v4+ way (MEMBER_ID_REQUIRED, then a join with it)."""
    fields, _ = join(c, client=client, now=now)
    assert fields["error_code"] == E.MEMBER_ID_REQUIRED
    return fields["member_id"]


def test_one_member_joins_syncs_and_is_stable(coord):
    mid = joined(coord, "a")
    tok = object()
    fields, done = join(coord, mid, token=tok)
    assert fields is None and [t for t, _ in done] == [tok]
    answer = done[0][1]
    assert (answer["error_code"], answer["generation_id"], answer["leader"], answer["protocol_name"]) == (0, 1, mid, "range")
    assert [m for m, _i, _meta in answer["members"]] == [mid]
    sync_tok = object()
    fields, done = coord.sync("g", 1, mid, "consumer", "range", [(mid, b"assignment")], now=1, token=sync_tok)
    assert fields is None and done == [(sync_tok, {"error_code": 0, "protocol_type": "consumer", "protocol_name": "range",
                                                   "assignment": b"assignment"})]
    assert coord.groups["g"].state == STABLE
    assert coord.heartbeat("g", 1, mid, now=2) == {"error_code": 0}
    assert coord.heartbeat("g", 7, mid, now=2) == {"error_code": E.ILLEGAL_GENERATION}
    assert coord.heartbeat("g", 1, "nobody", now=2) == {"error_code": E.UNKNOWN_MEMBER_ID}


def test_a_second_member_triggers_a_rebalance_and_the_follower_waits_for_the_leader(coord):
    a = joined(coord, "a")
    _, done = join(coord, a)
    coord.sync("g", 1, a, None, None, [(a, b"all")], now=0, token=object())
    b = joined(coord, "b", now=5)
    b_tok = object()
    fields, done = join(coord, b, now=5, token=b_tok)
    assert fields is None and done == [] and coord.groups["g"].state == PREPARING
    assert coord.heartbeat("g", 1, a, now=6) == {"error_code": E.REBALANCE_IN_PROGRESS}
    a_tok = object()
    _, done = join(coord, a, now=7, token=a_tok)
    answers = dict(done)
    assert set(answers) == {a_tok, b_tok} and answers[a_tok]["generation_id"] == 2
    assert len(answers[a_tok]["members"]) == 2 and answers[b_tok]["members"] == []  # a stays the leader
    f_tok = object()
    assert coord.sync("g", 2, b, None, None, [], now=8, token=f_tok) == (None, [])
    assert coord.groups["g"].state == COMPLETING
    _, done = coord.sync("g", 2, a, None, None, [(a, b"p0"), (b, b"p1")], now=9, token=object())
    assert {t: f["assignment"] for t, f in done}[f_tok] == b"p1"


def test_protocols_are_voted_and_a_member_with_none_in_common_is_refused(coord):
    a = joined(coord, "a")
    join(coord, a, protocols=[("roundrobin", b""), ("range", b"")])
    fields, _ = join(coord, joined(coord, "b"), protocols=[("sticky", b"")])
    assert fields["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    fields, _ = join(coord, joined(coord, "c"), ptype="connect")
    assert fields["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert coord.groups["g"].protocol == "roundrobin"


def test_old_clients_join_without_a_member_id_round_trip_and_unknown_ids_are_refused(coord):
    fields, done = join(coord, version=3)
    assert fields is None and done[0][1]["member_id"].startswith("c-")
    fields, _ = join(coord, "stranger")
    assert fields["error_code"] == E.UNKNOWN_MEMBER_ID
    fields, _ = coord.join("g", "", None, "consumer", PROTOS, 100, 100, version=5, client_id="c", now=0, token=object())
    assert fields["error_code"] == E.INVALID_SESSION_TIMEOUT


def two_members(c):
    """Members a and b in generation 2 (a alone first: no initial delay here)."""
    a = joined(c, "a")
    join(c, a)
    b = joined(c, "b")
    assert join(c, b) == (None, [])  # parked until a rejoins
    _, done = join(c, a)
    assert len(done) == 2 and c.groups["g"].generation == 2
    return a, b


def test_a_silent_member_expires_and_the_group_rebalances_on_the_clock(coord):
    a, b = two_members(coord)
    assert coord.next_deadline() == SESSION
    coord.heartbeat("g", 2, a, now=SESSION - 1)  # a stays alive, b does not
    assert coord.tick(SESSION - 1) == []
    assert coord.tick(SESSION + 1) == []
    group = coord.groups["g"]
    assert b not in group.members and group.state == PREPARING
    tok = object()
    _, done = join(coord, a, now=SESSION + 2, token=tok)
    assert done[0][0] is tok and done[0][1]["generation_id"] == 3 and len(done[0][1]["members"]) == 1


def test_leave_rebalances_and_the_last_one_out_empties_the_group(coord):
    a = joined(coord, "a")
    join(coord, a)
    errors, _ = coord.leave("g", [(a, None), ("ghost", None)], now=1)
    assert errors == [0, E.UNKNOWN_MEMBER_ID]
    assert coord.groups["g"].state == EMPTY and coord.delete("g") == 0


def test_a_parked_join_that_never_completes_is_answered_at_the_rebalance_timeout(coord):
    a, b = two_members(coord)
    coord.sync("g", 2, a, None, None, [], now=0, token=object())
    tok = object()
    join(coord, a, now=100, token=tok)  # b keeps heartbeating but never rejoins
    for t in (9_000, 18_000, 27_000):
        assert coord.heartbeat("g", 2, b, now=t) == {"error_code": E.REBALANCE_IN_PROGRESS}
    assert coord.next_deadline() == 100 + 30_000
    done = coord.tick(100 + 30_000)
    assert [t for t, _ in done] == [tok] and b not in coord.groups["g"].members


def test_commits_are_checked_against_the_generation(coord):
    assert coord.check_commit("g", -1, "", now=0) == 0  # a simple commit to an empty group
    a = joined(coord, "a")
    join(coord, a)
    assert coord.check_commit("g", -1, "", now=0) == E.ILLEGAL_GENERATION
    assert coord.check_commit("g", 1, a, now=0) == 0
    assert coord.check_commit("g", 2, a, now=0) == E.ILLEGAL_GENERATION
    assert coord.check_commit("g", 1, "x", now=0) == E.UNKNOWN_MEMBER_ID
    assert coord.delete("g") == E.NON_EMPTY_GROUP


def test_static_members_keep_their_place(coord):
    fields, done = join(coord, inst="i-1")
    mid = done[0][1]["member_id"]
    _, done = join(coord, "", inst="i-1", now=1)
    assert done[0][1]["member_id"] == mid
    fields, _ = join(coord, "other-id", inst="i-1", now=2)
    assert fields["error_code"] == E.FENCED_INSTANCE_ID


def test_offsets_round_trip_on_the_key_value_tables(tmp_path):
    with Broker.open(tmp_path / "data") as broker:
        offsets = GroupOffsets(broker.tables)
        offsets.commit("g", [("t", 0, 5, -1, "meta"), ("t", 1, 7, 3, None), ("a.b", 256, 9, -1, "")], now_ms=1)
        assert offsets.fetch("g", [("t", 0), ("t", 2)]) == {("t", 0): (5, -1, "meta")}
        assert offsets.fetch("g", None) == {("t", 0): (5, -1, "meta"), ("t", 1): (7, 3, ""), ("a.b", 256): (9, -1, "")}
        offsets.forget_topic("t")
        assert offsets.fetch("g", None) == {("a.b", 256): (9, -1, "")}
        assert offsets.groups() == ["g"]
        assert offsets.delete_group("g") and offsets.fetch("other", None) == {}
