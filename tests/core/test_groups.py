"""core.groups: Iggy round-robin assignment, rebalancing and poll cursors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import ConsumerGroupMemberNotFound, InvalidArgument
from core.groups import GroupState


def assignments(state: GroupState) -> dict:
    return {m: state.assignment(m) for m in state.members}


@pytest.mark.parametrize(
    "partitions, members, expected",
    [
        (3, ["a"], {"a": (0, 1, 2)}),
        (4, ["a", "b"], {"a": (0, 2), "b": (1, 3)}),
        (5, ["a", "b"], {"a": (0, 2, 4), "b": (1, 3)}),
        (7, ["a", "b", "c"], {"a": (0, 3, 6), "b": (1, 4), "c": (2, 5)}),
        (2, ["a", "b", "c", "d"], {"a": (0,), "b": (1,), "c": (), "d": ()}),  # more members than partitions
        (1, ["a", "b"], {"a": (0,), "b": ()}),
        (0, ["a", "b"], {"a": (), "b": ()}),
    ],
)
def test_assignment_table(partitions, members, expected):
    state = GroupState(partitions)
    for m in members:
        assert state.join(m)
    assert assignments(state) == expected


def test_rebalance_on_join_and_leave_keeps_join_order():
    state = GroupState(6)
    state.join(10)
    assert assignments(state) == {10: (0, 1, 2, 3, 4, 5)}
    state.join(20)
    state.join(30)
    assert assignments(state) == {10: (0, 3), 20: (1, 4), 30: (2, 5)}
    state.leave(20)
    assert state.members == (10, 30)
    assert assignments(state) == {10: (0, 2, 4), 30: (1, 3, 5)}
    state.join(20)  # re-joining goes to the back of the line
    assert state.members == (10, 30, 20)
    assert assignments(state) == {10: (0, 3), 30: (1, 4), 20: (2, 5)}


def test_leaving_gives_partitions_to_idle_members():
    state = GroupState(2)
    for m in "abc":
        state.join(m)
    assert state.assignment("c") == ()
    state.leave("a")
    assert assignments(state) == {"b": (0,), "c": (1,)}


def test_partition_count_change():
    state = GroupState(2)
    state.join("a")
    state.join("b")
    gen = state.generation
    assert state.set_partitions(5)
    assert state.generation == gen + 1
    assert state.partitions == 5
    assert assignments(state) == {"a": (0, 2, 4), "b": (1, 3)}
    assert state.set_partitions(1)
    assert assignments(state) == {"a": (0,), "b": ()}
    assert not state.set_partitions(1)  # unchanged: no rebalance
    assert state.generation == gen + 2


def test_generation_moves_only_on_real_changes():
    state = GroupState(3)
    assert state.generation == 0
    assert state.join("a") and state.generation == 1
    assert not state.join("a") and state.generation == 1
    assert not state.leave("zzz") and state.generation == 1
    assert state.leave("a") and state.generation == 2
    assert len(state) == 0


def test_every_partition_has_exactly_one_owner():
    state = GroupState(10)
    for m in range(4):
        state.join(m)
    owners = {}
    for m in state.members:
        for p in state.assignment(m):
            assert p not in owners
            owners[p] = m
    assert sorted(owners) == list(range(10))
    for p, m in owners.items():
        assert state.owner(p) == m
        assert state.owns(m, p)
        assert not state.owns((m + 1) % 4, p)
    assert state.owner(10) is None and state.owner(-1) is None
    assert GroupState(3).owner(0) is None  # nobody joined


def test_next_partition_cycles_and_resets_on_rebalance():
    state = GroupState(5)
    state.join("a")
    assert [state.next_partition("a") for _ in range(7)] == [0, 1, 2, 3, 4, 0, 1]
    state.join("b")  # rebalance: cursors restart at the first partition (Iggy)
    assert [state.next_partition("a") for _ in range(4)] == [0, 2, 4, 0]
    assert [state.next_partition("b") for _ in range(3)] == [1, 3, 1]


def test_next_partition_none_without_partitions():
    state = GroupState(1)
    state.join("a")
    state.join("b")
    assert state.next_partition("b") is None
    assert state.next_partition("a") == 0


def test_unknown_member_raises():
    state = GroupState(2)
    with pytest.raises(ConsumerGroupMemberNotFound):
        state.assignment("ghost")
    with pytest.raises(ConsumerGroupMemberNotFound):
        state.next_partition("ghost")
    assert "ghost" not in state


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True, None])
def test_bad_partition_counts(bad):
    with pytest.raises(InvalidArgument):
        GroupState(bad)
    state = GroupState(1)
    with pytest.raises(InvalidArgument):
        state.set_partitions(bad)
    assert state.partitions == 1


ops = st.lists(
    st.one_of(
        st.tuples(st.just("join"), st.integers(0, 6)),
        st.tuples(st.just("leave"), st.integers(0, 6)),
        st.tuples(st.just("resize"), st.integers(0, 12)),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.integers(0, 12), ops)
def test_assignment_is_a_function_of_join_order_and_count(partitions, steps):
    state = GroupState(partitions)
    order: list[int] = []
    n = partitions
    for op, arg in steps:
        if op == "join":
            state.join(arg)
            if arg not in order:
                order.append(arg)
        elif op == "leave":
            state.leave(arg)
            if arg in order:
                order.remove(arg)
        else:
            state.set_partitions(arg)
            n = arg
    assert state.members == tuple(order)
    expected = {m: tuple(p for p in range(n) if p % len(order) == i) for i, m in enumerate(order)}
    assert assignments(state) == expected
    # deterministic: replaying the same final state from scratch gives the same answer
    fresh = GroupState(n)
    for m in order:
        fresh.join(m)
    assert assignments(fresh) == expected
