"""The shared engine's versioned-layout features (adapters/wire/, added for Kafka), on a toy
wire that knows no Kafka: varints, counts with null and offset, the resolve hook, nested
structs, tagged fields and the load-time checks; then Kafka's primitive forms on them."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.kafka import types as kt
from adapters.wire import table
from adapters.wire import types as wt
from adapters.wire.table import Field, SpecError


class ToyError(Exception):
    pass


TOY = wt.Wire("toy", ">", ToyError, ToyError, lambda what="": ToyError(f"{what} short"), versions=(0, 1, 2))
U8 = wt.Int(TOY, "B", "u8")
I16 = wt.Int(TOY, "h", "i16")
UV = wt.UVarInt(TOY, 32)
SV = wt.VarInt(TOY, 32)
SL = wt.VarInt(TOY, 64, "varlong")
NAME = wt.Text(I16, "name", nullable=True)
COMPACT_NAME = wt.Text(UV, "compact_name", nullable=True, offset=1)


class Toy(table.Struct):
    wire = TOY


class _NotNullInV2(Toy):
    def resolve(self, field, version):
        return wt.Text(UV, "compact_name", offset=1) if version == 2 else field.type


class Resolving(Toy):
    """Names are int16-counted in v0-1 and compact in v2: the hook picks the form."""

    def resolve(self, field, version):
        if field.type is NAME and version == 2:
            return COMPACT_NAME
        return field.type


# --- varints ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value,hexed", [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"),
                                         (16384, "808001"), ((1 << 32) - 1, "ffffffff0f")])
def test_unsigned_varint_vectors(value, hexed):
    out: list[bytes] = []
    UV.write(out, value)
    assert out == [bytes.fromhex(hexed)]
    assert UV.read(bytes.fromhex(hexed) + b"\xaa", 0, len(hexed) // 2 + 1) == (value, len(hexed) // 2)


@pytest.mark.parametrize("t,value,hexed", [
    (SV, 0, "00"), (SV, -1, "01"), (SV, 1, "02"), (SV, -2, "03"), (SV, 63, "7e"), (SV, -64, "7f"), (SV, 64, "8001"),
    (SV, (1 << 31) - 1, "feffffff0f"), (SV, -(1 << 31), "ffffffff0f"),
    (SL, -(1 << 63), "ffffffffffffffffff01"), (SL, (1 << 63) - 1, "feffffffffffffffff01"),
])
def test_zigzag_varint_vectors(t, value, hexed):
    out: list[bytes] = []
    t.write(out, value)
    assert b"".join(out).hex() == hexed
    raw = bytes.fromhex(hexed)
    assert t.read(raw, 0, len(raw)) == (value, len(raw))


@given(st.integers(-(1 << 63), (1 << 63) - 1))
def test_varlong_round_trip(value):
    out: list[bytes] = []
    SL.write(out, value)
    raw = b"".join(out)
    assert SL.read(raw, 0, len(raw)) == (value, len(raw)) and SL.size(value) == len(raw)


@pytest.mark.parametrize("hexed,reason", [
    ("ffffffff1f", "exceeds 32 bits"),  # a fifth byte with more than 4 bits
    ("8080808080", "longer than 5 bytes"),  # a fifth byte that says more follow
    ("8080", "short"),  # the body ends inside it
])
def test_bad_varints(hexed, reason):
    raw = bytes.fromhex(hexed)
    with pytest.raises(ToyError, match=reason):
        UV.read(raw, 0, len(raw))


def test_varints_refuse_values_out_of_range():
    assert not UV.valid(-1) and not UV.valid(1 << 32) and not SV.valid(1 << 31) and not UV.valid(True)


# --- counts: null and offset -----------------------------------------------------------------

@pytest.mark.parametrize("t,value,hexed", [
    (NAME, None, "ffff"), (NAME, "", "0000"), (NAME, "ab", "00026162"),
    (COMPACT_NAME, None, "00"), (COMPACT_NAME, "", "01"), (COMPACT_NAME, "ab", "036162"),
    (wt.Bytes(UV, "cb", nullable=True, offset=1), None, "00"), (wt.Bytes(UV, "cb", offset=1), b"\x07", "0207"),
    (wt.ListOf(UV, U8, nullable=True, offset=1), None, "00"), (wt.ListOf(UV, U8, offset=1), (5, 6), "030506"),
    (wt.ListOf(I16, U8, nullable=True), None, "ffff"),
])
def test_count_forms(t, value, hexed):
    out: list[bytes] = []
    t.write(out, value)
    raw = bytes.fromhex(hexed)
    assert b"".join(out) == raw
    assert t.read(raw, 0, len(raw)) == (value, len(raw))


def test_null_is_refused_where_not_nullable():
    assert not wt.Text(I16, "s").valid(None)
    with pytest.raises(ToyError, match="negative length -1"):
        wt.Text(UV, "s", offset=1).read(b"\x00", 0, 1)
    with pytest.raises(ToyError, match="negative count -1"):
        wt.ListOf(UV, U8, offset=1).read(b"\x00", 0, 1)


def test_text_limits_and_utf8():
    t = wt.Text(I16, "s", max_bytes=3)
    with pytest.raises(ToyError, match="exceeds 3"):
        t.read(b"\x00\x04abcd", 0, 6)
    with pytest.raises(ToyError, match="invalid UTF-8"):
        t.read(b"\x00\x01\xff", 0, 3)
    assert not t.valid("abcd") and t.valid("é")


def test_a_list_of_zero_byte_items_cannot_claim_more_items_than_bytes():
    empty = Toy("empty", ()).at(0)
    assert empty.min_size == 0
    with pytest.raises(ToyError, match="cannot fit"):
        wt.ListOf(I16, empty).read(b"\x7f\xff", 0, 2)


# --- resolve, nested structs, tagged fields --------------------------------------------------

ITEM = Resolving("item", (Field("name", NAME, ""), Field("n", U8, 0, "1+"),
                          Field("note", NAME, "", "2", tag=0)), flexible="2")
OUTER = Resolving("outer", (
    Field("id", I16, 0),
    Field("items", wt.ListOf(I16, ITEM.at(0)), (), "0"),  # a protocol would resolve this too;
    Field("items", wt.ListOf(I16, ITEM.at(1)), (), "1"),  # the toy spells each version out
    Field("items", wt.ListOf(UV, ITEM.at(2), offset=1), (), "2"),
    Field("flag", U8, 7, "2", tag=5),
    Field("label", NAME, None, "2", tag=1, nullable="2"),
), flexible="2")


def test_resolve_picks_the_form_per_version():
    assert ITEM.plans[1].fields[0].type is NAME
    assert ITEM.plans[2].fields[0].type is COMPACT_NAME
    value = ITEM.make(name="ab", n=3)
    assert ITEM.encode(1, value).hex() == "0002616203"
    assert ITEM.encode(2, value).hex() == "03616203" + "00"  # compact name, n, empty tag section


def test_nested_structs_have_their_own_tag_sections():
    value = OUTER.make(id=1, items=(ITEM.make(name="a", n=2, note="z"),), label="L")
    raw = OUTER.encode(2, value)
    # id | items: count 1+1 | item: name, n, its tags (1: tag 0 size 2 "z") | outer tags: 1 (tag 1 "L")
    assert raw.hex() == "0001" + "02" + "0261" + "02" + "01" + "0002" + "027a" + "01" + "0102024c"
    assert OUTER.decode(2, raw) == value
    assert OUTER.decode(2, raw).flag == 7  # absent tag: its default


def test_tagged_fields_are_written_in_tag_order_only_when_not_default():
    assert OUTER.encode(2, OUTER.make()).hex() == "0000" + "01" + "00"
    # label None is its default, so only flag (tag 5) is written.
    assert OUTER.encode(2, OUTER.make(flag=9, label=None)).hex() == "0000" + "01" + "01" + "050109"
    three = OUTER.encode(2, OUTER.make(flag=9, label="x"))
    assert three.hex().endswith("02" + "01020278" + "050109")  # tag 1 before tag 5


def test_tagged_fields_do_not_exist_in_older_versions():
    old = OUTER.make(id=1, flag=9, label="x")
    assert OUTER.encode(1, old).hex() == "0001" + "0000"  # no tag section in v1
    assert OUTER.decode(1, OUTER.encode(1, old)) == OUTER.make(id=1)


@given(st.data())
def test_strategies_cover_tagged_and_nested_fields(data):
    for version in (0, 1, 2):
        value = data.draw(OUTER.strategy(version))
        assert OUTER.decode(version, OUTER.encode(version, value)) == value


@pytest.mark.parametrize("build,reason", [
    (lambda: Toy("t", (Field("a", U8, 0, tag=0),), flexible="2"), "without a tagged-field section"),
    (lambda: Toy("t", (Field("a", U8, 0, "2", tag=0), Field("b", U8, 0, "2", tag=0)), flexible="2"),
     "duplicate tag"),
    (lambda: Toy("t", (Field("a", U8, tag=0, versions="2"),), flexible="2"), "needs a default"),
    (lambda: Toy("t", (Field("a", U8, 0, "2", tagged="2"),), flexible="2"), "without a tag"),
    (lambda: Toy("t", (Field("a", U8, 0, "2", tag=-1),), flexible="2"), "non-negative"),
    (lambda: Toy("t", (Field("a", U8, 0, "2", tag=0, tagged="1-2"),), flexible="1-2"), "does not have"),
    (lambda: Toy("t", (Field("a", U8, 0, optional=True),), flexible="2"), "exclude each other"),
    (lambda: Toy("t", (Field("a", NAME, "", nullable="9"),)), "outside versions"),
    # The default is checked against the resolved form of every version: null fits v0-1 only.
    (lambda: _NotNullInV2("t", (Field("a", NAME, None),)), "does not fit compact_name"),
])
def test_bad_versioned_specs_are_refused_at_load(build, reason):
    with pytest.raises(SpecError, match=reason):
        build()


# --- Kafka's forms on the engine --------------------------------------------------------------

@pytest.mark.parametrize("placeholder,flexible,nullable,name", [
    (kt.STRING, False, False, "string"), (kt.STRING, True, True, "compact_nullable_string"),
    (kt.BYTES, True, False, "compact_bytes"), (kt.RECORDS, False, True, "nullable_records"),
])
def test_kafka_placeholders_resolve_to_their_forms(placeholder, flexible, nullable, name):
    assert placeholder.form(flexible, nullable, 0).name == name


def test_kafka_arrays_of_strings_go_compact_with_the_array():
    arr = kt.ARRAY(kt.STRING)
    compact = arr.form(True, False, 0)
    assert compact.count is kt.UVARINT and compact.item.name == "compact_string"
    out: list[bytes] = []
    compact.write(out, ("a",))
    assert b"".join(out).hex() == "02" + "0261"
    classic = arr.form(False, True, 0)
    out = []
    classic.write(out, None)
    assert b"".join(out).hex() == "ffffffff"


def test_kafka_strings_are_at_most_32767_bytes():
    s = kt.STRING.form(True, False, 0)
    assert s.valid("a" * kt.MAX_STRING) and not s.valid("a" * (kt.MAX_STRING + 1))
    with pytest.raises(kt.KafkaDecodeError, match="exceeds"):
        s.read(b"\x81\x80\x02", 0, 3)  # varint 32769: length 32768


def test_placeholders_are_never_read_or_written_unresolved():
    with pytest.raises(TypeError):
        kt.STRING.write([], "a")
    with pytest.raises(TypeError):
        kt.ARRAY(kt.INT32).read(b"", 0, 0)


def test_kafka_structs_resolve_fields_of_a_nested_struct_per_version():
    from adapters.kafka.messages import API

    fetch = API.by_name["Fetch"].response
    partition = fetch.structs["PartitionData"]
    assert partition.name == "FetchResponse.PartitionData" and partition.cls.__name__ == "FetchResponsePartitionData"
    default = partition.make()
    assert default.preferred_read_replica == -1 and default.records is None
    assert default.diverging_epoch == fetch.structs["EpochEndOffset"].make(epoch=-1, end_offset=-1)
    assert [f.spec_name for f in partition.plans[12].tagged] == ["DivergingEpoch", "CurrentLeader", "SnapshotId"]
    assert dataclasses.fields(partition.cls)[0].name == "partition_index"
