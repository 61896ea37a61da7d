"""The protobuf codec and the controller's message tables (STYLE.md 4, 6.2, 6.4).

Golden bytes are worked out by hand from the protobuf encoding guide: a tag is
the varint ``number << 3 | wire type`` (0 varint, 1 I64, 2 LEN, 5 I32).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.pravega import controller_proto as cp
from adapters.pravega.protobuf import Field, Map, Message, ProtobufError, SpecError, strategy


class AllKinds(Message):
    """The kinds the controller proto does not use, plus repeated/map variants."""

    FIELDS = (Field(1, "u32", "uint32"), Field(2, "u64", "uint64"), Field(3, "f", "float"),
              Field(4, "raw", "bytes"), Field(5, "ints", "int32", repeated=True),
              Field(6, "flags", "bool", repeated=True), Field(7, "doubles", "double", repeated=True),
              Field(8, "blobs", Map("string", "bytes")), Field(9, "texts", "string", repeated=True),
              Field(10, "statuses", cp.CreateScopeStatus.Status, repeated=True),
              Field(11, "floats", "float", repeated=True))


ALL = (*cp.MESSAGES, AllKinds)


def _name(cls) -> str:
    return cls.__qualname__


# -- properties derived from the tables --------------------------------------------
@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@pytest.mark.parametrize("cls", ALL, ids=_name)
@given(data=st.data())
def test_round_trip_every_message(cls, data):
    value = data.draw(strategy(cls))
    wire = value.encode()
    assert cls.decode(wire) == value
    assert cls.decode(wire).encode() == wire  # one canonical encoding per value


@settings(max_examples=60, deadline=None)
@pytest.mark.parametrize("cls", ALL, ids=_name)
@given(junk=st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_protobuf_error(cls, junk):
    try:
        cls.decode(junk)
    except ProtobufError:
        pass


@settings(max_examples=30, deadline=None)
@pytest.mark.parametrize("cls", [cp.StreamConfig, cp.SegmentRanges, cp.SuccessorResponse, cp.StreamCut], ids=_name)
@given(data=st.data())
def test_every_proper_prefix_is_either_valid_or_a_protobuf_error(cls, data):
    wire = data.draw(strategy(cls)).encode()
    for cut in range(len(wire)):
        try:
            cls.decode(wire[:cut])
        except ProtobufError:
            pass


def test_messages_are_collected_from_the_module_nested_ones_included():
    names = {c.__qualname__ for c in cp.MESSAGES}
    assert {"ScopeInfo", "StreamConfig", "SegmentsAtTime.SegmentLocation", "SuccessorResponse.SegmentEntry",
            "ScaleRequest.KeyRangeEntry"} <= names
    assert len(names) == len(cp.MESSAGES) == 76  # 69 in the Rust copy + 7 Java-only


def test_rpc_table_covers_the_service_with_declared_classes():
    assert cp.SERVICE == "io.pravega.controller.stream.api.grpc.v1.ControllerService"
    assert len(cp.RPCS) == 47 and cp.JAVA_ONLY_RPCS < set(cp.RPCS)  # 43 Rust RPCs + 4 Java-only
    for request, response in cp.RPCS.values():
        assert request in cp.MESSAGES and response in cp.MESSAGES
    # pravega-client.md section 3: the six RPCs of the create/write/read flow
    assert cp.RPCS["createScope"] == (cp.ScopeInfo, cp.CreateScopeStatus)
    assert cp.RPCS["createStream"] == (cp.StreamConfig, cp.CreateStreamStatus)
    assert cp.RPCS["getCurrentSegments"] == (cp.StreamInfo, cp.SegmentRanges)
    assert cp.RPCS["getURI"] == (cp.SegmentId, cp.NodeUri)
    assert cp.RPCS["getSegments"] == (cp.GetSegmentsRequest, cp.SegmentsAtTime)
    assert cp.RPCS["getSegmentsImmediatelyFollowing"] == (cp.SegmentId, cp.SuccessorResponse)


# -- golden bytes ---------------------------------------------------------------
GOLDEN = [
    (cp.ScopeInfo(scope="sc1"), "0a 03 73 63 31"),
    (cp.StreamInfo("sc1", "st1"), "0a 03 73 63 31 12 03 73 74 31"),
    (cp.StreamInfo("s", "t", cp.StreamInfo.AccessOperation.READ_WRITE), "0a 01 73 12 01 74 18 05"),
    (cp.CreateScopeStatus(cp.CreateScopeStatus.Status.SCOPE_EXISTS), "08 02"),
    (cp.CreateScopeStatus(cp.CreateScopeStatus.Status.SUCCESS), ""),  # proto3 defaults are not written
    (cp.ExistsResponse(exists=True), "08 01"),
    (cp.NodeUri("localhost", 12345), "0a 09 6c 6f 63 61 6c 68 6f 73 74 10 b9 60"),  # 12345 = 0x3039
    # int64 -1 is 2**64-1 as a varint: nine 0xff groups and a final 0x01
    (cp.SegmentId(segment_id=-1), "10 ff ff ff ff ff ff ff ff ff 01"),
    # int32 negatives are sign-extended to 64 bits: ten bytes too
    (cp.NodeUri(port=-2), "10 fe ff ff ff ff ff ff ff ff 01"),
    (cp.SegmentId(cp.StreamInfo("a", "b"), 2**32 + 1), "0a 06 0a 01 61 12 01 62 10 81 80 80 80 10"),
    # double fields: wire type 1, little-endian IEEE 754; minKey 0.0 is left out
    (cp.SegmentRange(None, 0.0, 1.0), "19 00 00 00 00 00 00 f0 3f"),
    (cp.SegmentRange(None, 0.5, 1.0), "11 00 00 00 00 00 00 e0 3f 19 00 00 00 00 00 00 f0 3f"),
    (cp.SegmentRange(None, -0.0, 1.0), "11 00 00 00 00 00 00 00 80 19 00 00 00 00 00 00 f0 3f"),
    # a present but empty sub-message is written as an empty LEN field
    (cp.StreamConfig(stream_info=cp.StreamInfo()), "0a 00"),
    # packed repeated int64 (field 2, LEN): 1, 2, 300 = 01 02 ac 02
    (cp.SuccessorResponse.SegmentEntry(value=(1, 2, 300)), "12 04 01 02 ac 02"),
    (cp.ScopesResponse(scopes=("a", "b")), "0a 01 61 0a 01 62"),
    # map<int64, int64> entries are messages {1: key, 2: value}, defaults left out
    (cp.StreamCut(cut={1: 100}), "12 04 08 01 10 64"),
    (cp.StreamCut(cut={0: 5}), "12 02 10 05"),
    (cp.StreamCutRange(from_={3: 4}), "12 04 08 03 10 04"),
    (cp.Tags(tag=("x",)), "0a 01 78"),
    # map<string, BucketIds>: entry {1: "a", 2: BucketIds{1: packed [1, 2]}}
    (cp.ControllerToBucketMappingResponse({"a": cp.BucketIds((1, 2))}), "0a 09 0a 01 61 12 04 0a 02 01 02"),
    (AllKinds(u64=2**64 - 1), "10 ff ff ff ff ff ff ff ff ff 01"),
    (AllKinds(f=1.5, ints=(-1,)), "1d 00 00 c0 3f 2a 0a ff ff ff ff ff ff ff ff ff 01"),
    (AllKinds(flags=(True, False)), "32 02 01 00"),
]


@pytest.mark.parametrize("value,hex_", GOLDEN, ids=[type(v).__qualname__ for v, _ in GOLDEN])
def test_golden_bytes(value, hex_):
    wire = bytes.fromhex(hex_)
    assert value.encode() == wire
    assert type(value).decode(wire) == value


def test_enum_values_follow_the_proto():
    # values are positional in controller_proto._enum: pin the ends of the longer ones
    assert cp.PingTxnStatus.Status.UNKNOWN == 7 and cp.PingTxnStatus.Status.DISCONNECTED == 4
    assert cp.UpdateSubscriberStatus.Status.GENERATION_MISMATCH == 5
    assert cp.StreamInfo.AccessOperation.READ_WRITE == 5 and cp.TxnState.State.ABORTED == 5
    assert cp.ScalingPolicy.ScalingPolicyType.BY_RATE_IN_EVENTS_PER_SEC == 2
    assert cp.RetentionPolicy.RetentionPolicyType.SIZE == 2
    assert cp.ScaleStatusResponse.ScaleStatus.INTERNAL_ERROR == 3
    assert cp.CreateKeyValueTableStatus.Status.INVALID_TABLE_NAME == 4
    assert cp.ControllerToBucketMappingRequest.BucketType.WatermarkingService == 1
    assert cp.CreateScopeStatus.Status.__qualname__ == "CreateScopeStatus.Status"


def test_attribute_names_are_snake_case_of_the_proto_names():
    assert [f.attr for f in cp.StreamCutRange.FIELDS] == ["stream_info", "from_", "to"]
    assert cp.ServerResponse.FIELDS[0].attr == "node_uri"
    assert cp.SegmentRanges().segment_ranges == () and cp.SegmentRanges().delegation_token == ""
    assert cp.StreamConfig().stream_info is None and cp.StreamCut().cut == {}


# -- decoding rules -------------------------------------------------------------
def test_unpacked_and_packed_repeated_decode_alike():
    packed = bytes.fromhex("12 04 01 02 ac 02")
    unpacked = bytes.fromhex("10 01 10 02 10 ac 02")
    mixed = bytes.fromhex("10 01 12 03 02 ac 02")
    expected = cp.SuccessorResponse.SegmentEntry(value=(1, 2, 300))
    for wire in (packed, unpacked, mixed):
        assert cp.SuccessorResponse.SegmentEntry.decode(wire) == expected


def test_packed_enums_and_doubles_decode_unpacked_too():
    assert AllKinds.decode(bytes.fromhex("50 01 50 02")).statuses == (1, 2)
    assert AllKinds.decode(bytes.fromhex("39 00 00 00 00 00 00 f0 3f")).doubles == (1.0,)


def test_unknown_fields_of_every_wire_type_are_skipped():
    wire = bytes.fromhex(
        "48 96 01"                      # field 9, varint 150
        "51 01 02 03 04 05 06 07 08"    # field 10, I64
        "0a 03 73 63 31"                # field 1 = "sc1"
        "5a 02 ff ff"                   # field 11, LEN
        "65 01 02 03 04")               # field 12, I32
    assert cp.ScopeInfo.decode(wire) == cp.ScopeInfo("sc1")


def test_java_only_fields_are_unknown_to_a_rust_sized_message():
    java = cp.StreamConfig(stream_info=cp.StreamInfo("s", "t"), rollover_size_bytes=1 << 20)
    assert cp.StreamConfig.decode(java.encode()).rollover_size_bytes == 1 << 20
    assert cp.StreamInfo.decode(bytes.fromhex("0a 01 73 68 05")) == cp.StreamInfo("s")  # field 13 skipped


def test_last_scalar_wins_and_sub_messages_merge():
    assert cp.ScopeInfo.decode(bytes.fromhex("0a 01 61 0a 01 62")).scope == "b"
    merged = cp.SegmentId.decode(bytes.fromhex("0a 03 0a 01 61 10 07 0a 03 12 01 62"))
    assert merged == cp.SegmentId(cp.StreamInfo("a", "b"), 7)


def test_enums_are_members_when_named_and_ints_otherwise():
    status = cp.CreateScopeStatus.decode(b"\x08\x02").status
    assert status is cp.CreateScopeStatus.Status.SCOPE_EXISTS
    assert cp.CreateScopeStatus.decode(b"\x08\x09").status == 9  # proto3 enums are open
    assert cp.CreateScopeStatus(9).encode() == b"\x08\x09"


def test_map_later_keys_win_and_missing_message_values_default():
    assert cp.StreamCut.decode(bytes.fromhex("12 04 08 01 10 01 12 04 08 01 10 02")).cut == {1: 2}
    assert cp.ControllerToBucketMappingResponse.decode(bytes.fromhex("0a 03 0a 01 61")).mapping == {
        "a": cp.BucketIds()}


MALFORMED = [
    ("truncated tag", cp.ScopeInfo, "80"),
    ("truncated varint value", cp.CreateScopeStatus, "08"),
    ("truncated varint continuation", cp.CreateScopeStatus, "08 80"),
    ("varint of 11 bytes", cp.CreateScopeStatus, "08 ff ff ff ff ff ff ff ff ff ff 01"),
    ("length past the end", cp.ScopeInfo, "0a 05 61 62"),
    ("huge length", cp.ScopeInfo, "0a ff ff ff ff 0f"),
    ("string given as varint", cp.ScopeInfo, "08 01"),
    ("enum given as LEN", cp.CreateScopeStatus, "0a 00"),
    ("double given as varint", cp.SegmentRange, "10 01"),
    ("sub-message given as I32", cp.SegmentId, "0d 00 00 00 00"),
    ("truncated double", cp.SegmentRange, "11 00 00"),
    ("invalid UTF-8", cp.ScopeInfo, "0a 01 ff"),
    ("field number 0", cp.ScopeInfo, "00 01"),
    ("start group", cp.ScopeInfo, "4b"),
    ("end group", cp.ScopeInfo, "4c"),
    ("wire type 7", cp.ScopeInfo, "4f"),
    ("truncated unknown I64", cp.ScopeInfo, "51 00"),
    ("truncated unknown I32", cp.ScopeInfo, "55 00 00 00"),
    ("unknown LEN past the end", cp.ScopeInfo, "5a 03 00"),
    ("bad nested message", cp.SegmentId, "0a 02 0a 05"),
    ("bad message in a repeated field", cp.SegmentRanges, "0a 01 80"),
    ("truncated varint inside a packed field", cp.SuccessorResponse.SegmentEntry, "12 01 80"),
    ("truncated double inside a packed field", AllKinds, "3a 03 00 00 00"),
    ("bad map entry", cp.StreamCut, "12 02 08 80"),
]


@pytest.mark.parametrize("why,cls,hex_", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_inputs_raise_protobuf_error(why, cls, hex_):
    with pytest.raises(ProtobufError):
        cls.decode(bytes.fromhex(hex_))


@pytest.mark.parametrize("value", [
    cp.NodeUri(port=2**31), cp.SegmentId(segment_id=2**63), AllKinds(u32=-1), AllKinds(u64=2**64),
    cp.ScopeInfo(scope=b"bytes"), AllKinds(raw="text"), cp.StreamConfig(stream_info=cp.ScopeInfo("x")),
    AllKinds(f=1e300), cp.ScopeInfo(scope="\ud800"), cp.StreamCut(cut=[(1, 2)]), cp.Tags(tag="abc"),
], ids=repr)
def test_unencodable_values_raise_protobuf_error(value):
    with pytest.raises(ProtobufError):
        value.encode()


@pytest.mark.parametrize("fields", [
    (Field(1, "a", "int32"), Field(1, "b", "int32")),
    (Field(1, "a", "int32"), Field(2, "a", "int64")),
], ids=["duplicate number", "duplicate name"])
def test_bad_tables_are_refused_when_the_class_is_made(fields):
    with pytest.raises(SpecError):
        type("Bad", (Message,), {"FIELDS": fields})


@pytest.mark.parametrize("make", [
    lambda: Field(0, "a", "int32"), lambda: Field(19000, "a", "int32"), lambda: Field(1, "a", "sint32"),
    lambda: Field(1, "a", Map("double", "int32")), lambda: Field(1, "a", Map("int32", "int32"), repeated=True),
], ids=["number 0", "reserved number", "unknown kind", "double map key", "repeated map"])
def test_bad_fields_are_refused(make):
    with pytest.raises(SpecError):
        make()
