"""The command table: load-time checks and round trips derived from it (STYLE.md 4, 6.4)."""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.iggy import replies
from adapters.iggy.errors import IggyError, IggyStatus
from adapters.iggy.spec import COMMANDS
from adapters.iggy.table import Command, CommandTable, Struct, parse_versions
from adapters.iggy.types import U8, U32, Identifier, Str8
from adapters.wire.table import Field, SpecError
from adapters.wire.types import Rest

CASES = [(c, d) for c in COMMANDS for d in sorted(c.dialects)]
RECORD_CASES = [(r, d) for r in replies.RECORDS for d in sorted(r.dialects)]


def _id(case):
    return f"{case[0].name}@{case[1]}"


@cache
def _strategy(struct, dialect):
    """``struct.strategy(dialect)``, built once per case: strategies are immutable, and
    building one (a ``st.builds`` over every field's strategy) cost more than drawing
    from it, when it was rebuilt for every example."""
    return struct.strategy(dialect)


# -- load-time checks ---------------------------------------------------------------
def test_every_seed_code_and_later_codes_are_declared():
    seed = {1, 10, 11, 20, 21, 22, 31, 32, 33, 34, 35, 36, 37, 38, 39, 41, 42, 43, 44, 100, 101, 102, 120, 121,
            200, 201, 202, 203, 204, 205, 300, 301, 302, 303, 304, 305, 402, 403, 600, 601, 602, 603, 604, 605}
    later = {12, 13, 40, 45, 122, 503, 606}  # iggy.md 2, iggy-middle.md 6, iggy-current.md 5
    assert seed | later <= set(COMMANDS.by_code)


@pytest.mark.parametrize("text,expected", [("1", {1}), ("2+", {2, 3, 4, 5}), ("1-2", {1, 2}), (None, {1, 2, 3, 4, 5}),
                                           ("1,5", {1, 5}), ("1-2,4-5", {1, 2, 4, 5}), ("2-4", {2, 3, 4})])
def test_version_ranges(text, expected):
    assert parse_versions(text) == expected


@pytest.mark.parametrize("text", ["0", "6", "3-1", "x", "2-9", "+", "1,", ",", "1,6"])
def test_bad_version_ranges_refused(text):
    with pytest.raises(SpecError):
        parse_versions(text)


def test_duplicate_codes_and_names_refused():
    a = Command(900, "x.a")
    with pytest.raises(SpecError, match="code"):
        CommandTable([a, Command(900, "x.b")])
    with pytest.raises(SpecError, match="name"):
        CommandTable([a, Command(901, "x.a")])


def test_overlapping_ranges_for_one_field_refused():
    with pytest.raises(SpecError, match="overlapping"):
        Command(900, "x.a", (Field("f", U8, versions="1-2"), Field("f", U32, versions="2+")))


def test_rest_field_must_be_last():
    with pytest.raises(SpecError, match="last"):
        Command(900, "x.a", (Field("tail", Rest), Field("name", Str8)))
    Command(900, "x.a", (Field("tail", Rest, versions="1"), Field("name", Str8, versions="2")))


def test_default_outside_type_refused():
    with pytest.raises(SpecError, match="default"):
        Command(900, "x.a", (Field("f", U8, default=256),))
    with pytest.raises(SpecError, match="default"):
        Command(900, "x.a", (Field("f", Identifier, default=""),))


def test_fixed_runs_are_fused():
    cmd = COMMANDS.by_name["topic.create"]
    kinds = [s[0] for s in cmd.plans[1].steps]
    assert kinds == ["var", "fixed", "var"]  # stream Id | topic_id..replication_factor | name
    assert cmd.plans[1].steps[1][1].size == 4 + 4 + 1 + 8 + 8 + 1


# -- round trips ----------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=_id)
@settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_command_round_trip(case, data):
    cmd, dialect = case
    value = data.draw(_strategy(cmd, dialect))
    wire = cmd.encode(dialect, value)
    assert cmd.decode(dialect, wire) == value


@pytest.mark.parametrize("case", RECORD_CASES, ids=_id)
@settings(max_examples=15, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_reply_record_round_trip(case, data):
    rec, dialect = case
    value = data.draw(_strategy(rec, dialect))
    assert rec.decode(dialect, rec.encode(dialect, value)) == value


@pytest.mark.parametrize("case", CASES, ids=_id)
@settings(max_examples=10, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_truncated_bodies_give_a_status_never_an_exception(case, data):
    """Every prefix of a valid body decodes or raises IggyStatus (never IndexError)."""
    cmd, dialect = case
    wire = cmd.encode(dialect, data.draw(_strategy(cmd, dialect)))
    for cut in range(len(wire)):
        try:
            cmd.decode(dialect, wire[:cut])
        except IggyStatus as err:
            assert err.code in IggyError
    fields = cmd.plans[dialect].fields
    if fields and getattr(fields[-1].type, "rest", False):
        return  # a rest-of-body field owns any trailing bytes
    with pytest.raises(IggyStatus) as info:
        cmd.decode(dialect, wire + b"\x00")
    assert info.value.code in IggyError


def test_json_form_is_derived():
    cmd = COMMANDS.by_name["message.poll"]
    wire = bytes.fromhex("01010400000000 020273 31 02027431 0100000000 010000000000000000 0a000000 00".replace(" ", ""))
    value = cmd.decode(2, wire)
    js = cmd.to_json(value)
    assert set(js) >= {"consumer", "stream_id", "topic_id", "partition_id", "strategy", "count", "auto_commit"}


def test_struct_classes_have_readable_names():
    assert COMMANDS.by_name["stream.create"].cls.__name__ == "StreamCreate"
    assert isinstance(replies.STREAM, Struct)
