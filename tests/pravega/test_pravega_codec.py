"""adapters.pravega: the command table, the wire types and the frame decoder (pravega.md 1-5.2).

Round trips are derived from the table (every command, no list kept here); each sample is fed
whole, one byte at a time and followed by the prefix of a next frame (STYLE.md section 6).
"""

from __future__ import annotations

import dataclasses
import struct
import time
import uuid

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from adapters.pravega import codec, commands
from adapters.pravega.codec import MAX_FRAME, MAX_PAYLOAD, NEED_DATA, Append, FrameDecoder, event_frame, split_events
from adapters.pravega.commands import TABLE, Command, F, Opt, decode_payload, encode
from adapters.pravega.errors import PravegaProtocolError
from adapters.pravega.types import I32, I64, NO_VERSION, Rest, TableEntry, TableKey, Utf
from adapters.wire.table import CommandTable, SpecError

W1 = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
W2 = uuid.UUID("ffeeddcc-bbaa-9988-7766-554433221100")
HELLO = encode(commands.Hello(15, 5))
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOP_LEVEL = [c for c in TABLE if not c.block_only and c.name != "AppendBlock"]


def _id(spec: Command) -> str:
    return spec.name


def frame(code: int, payload: bytes, length: int | None = None) -> bytes:
    return struct.pack(">ii", code, len(payload) if length is None else length) + payload


def drain(dec: FrameDecoder) -> list:
    out = []
    while (ev := dec.next_event()) is not NEED_DATA:
        out.append(ev)
    return out


def feed_whole(data: bytes) -> list:
    dec = FrameDecoder()
    dec.receive_data(data)
    return drain(dec)


def feed_bytewise(data: bytes) -> list:
    dec = FrameDecoder()
    out = []
    for i in range(len(data)):
        dec.receive_data(data[i : i + 1])
        out += drain(dec)
    return out


def feed_with_trailing(data: bytes) -> list:
    """``data`` plus most of a Hello frame: the Hello must wait in the buffer, then complete."""
    dec = FrameDecoder()
    dec.receive_data(data + HELLO[:-1])
    out = drain(dec)
    dec.receive_data(HELLO[-1:])
    assert drain(dec) == [commands.Hello(15, 5)]
    return out


FEEDS = [feed_whole, feed_bytewise, feed_with_trailing]


def expected(cmd):
    """What the decoder returns for a top-level command: itself, or an Append for a block end."""
    if isinstance(cmd, commands.AppendBlockEnd):
        return Append(cmd.writer_id, cmd.data, cmd.num_events, cmd.last_event_number, cmd.request_id)
    return cmd


def fails(data: bytes, feed=feed_whole) -> str:
    with pytest.raises(PravegaProtocolError) as info:
        feed(data)
    assert type(info.value) is PravegaProtocolError
    return info.value.reason


# -- the table ------------------------------------------------------------------------------------
def test_every_code_of_the_doc_table_is_declared():
    doc = {-127, -1, -2, -3, -4, -5, -6, 0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 20, 21, *range(28, 43),
           50, 51, 52, 53, *range(55, 62), 68, 69, 70, 71, *range(74, 92), 100}  # pravega.md section 3
    assert set(commands.BY_CODE) == doc
    assert 72 not in commands.BY_CODE and 73 not in commands.BY_CODE  # retired


def test_classes_are_module_attributes_with_codes():
    for spec in TABLE:
        cls = getattr(commands, spec.name)
        assert cls is spec.cls is commands.BY_CODE[spec.code]
        assert commands.CODE_OF[cls] == spec.code
        assert cls.__module__ == "adapters.pravega.commands" and cls.__name__ == spec.name


@pytest.mark.parametrize("cls,names", [
    (commands.SetupAppend, "request_id writer_id segment delegation_token"),
    (commands.AppendBlockEnd, "writer_id size_of_whole_events data num_events last_event_number request_id"),
    (commands.DataAppended, "writer_id event_number previous_event_number request_id current_segment_write_offset"),
    (commands.ReadSegment, "segment offset suggested_length delegation_token request_id"),
    (commands.SegmentRead, "segment offset at_tail end_of_segment data request_id"),
    (commands.InvalidEventNumber, "writer_id request_id server_stack_trace event_number"),
    (commands.UpdateTableEntries, "request_id segment delegation_token entries table_segment_offset"),
    (commands.ReadTableEntries, "request_id segment delegation_token suggested_entry_count continuation_token "
                                "prefix from_key to_key"),
    (commands.ReadTableEntriesDelta, "request_id segment delegation_token from_position suggested_entry_count"),
    (commands.StreamSegmentInfo, "request_id segment_name exists is_sealed is_deleted last_modified write_offset "
                                 "start_offset"),
    (commands.KeepAlive, ""),
])
def test_field_names_are_the_doc_names_in_snake_case(cls, names):
    assert [f.name for f in dataclasses.fields(cls)] == names.split()


def test_commands_are_frozen_and_slotted():
    hello = commands.Hello(high_version=15, low_version=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        hello.high_version = 1
    assert not hasattr(hello, "__dict__")
    assert commands.DataAppended(W1, 3).request_id == -1  # optional fields default


@pytest.mark.parametrize("build,match", [
    (lambda: CommandTable([Command(1, "A"), Command(1, "B")]), "duplicate command code"),
    (lambda: CommandTable([Command(1, "A"), Command(2, "A")]), "duplicate command name"),
    (lambda: CommandTable([Command(128, "A")]), "signed byte"),
    (lambda: Command(1, "A", (F("data", Rest), F("x", I32))), "must be last"),
    (lambda: Command(1, "A", (Opt("x", I64, -1), F("y", I32))), "cannot follow an optional"),
    (lambda: Command(1, "A", (Opt("x", I32, 1 << 40),)), "does not fit"),
    (lambda: Command(1, "A", (Opt("x", Utf, b"bytes"),)), "does not fit"),
    (lambda: Command(1, "A", (F("x", I32), F("x", I64))), "duplicate or invalid field"),
    (lambda: Command(1, "A", (F("x", int),)), "not a WireType"),
    (lambda: Command(1, "not-a-name"), "not an identifier"),
])
def test_bad_specs_are_refused(build, match):
    with pytest.raises(SpecError, match=match):
        build()


# -- round trips derived from the table -------------------------------------------------------------
@pytest.mark.parametrize("spec", list(TABLE), ids=_id)
@SETTINGS
@given(data=st.data())
def test_every_command_round_trips(spec, data):
    cmd = data.draw(commands.strategy(spec.cls))
    wire = encode(cmd)
    code, length = struct.unpack_from(">ii", wire)
    assert (code, length) == (spec.code, len(wire) - 8)
    assert decode_payload(code, wire[8:]) == cmd
    assert decode_payload(code, memoryview(wire)[8:]) == cmd


@pytest.mark.parametrize("spec", TOP_LEVEL, ids=_id)
@SETTINGS
@given(data=st.data())
def test_every_top_level_command_through_the_decoder_three_ways(spec, data):
    cmd = data.draw(commands.strategy(spec.cls))
    if isinstance(cmd, commands.AppendBlockEnd):
        assume(cmd.num_events > 0)
    wire = encode(cmd)
    for feed in FEEDS:
        assert feed(wire) == [expected(cmd)], feed.__name__


@SETTINGS
@given(cmds=st.lists(st.sampled_from(TOP_LEVEL).flatmap(lambda s: commands.strategy(s.cls)), max_size=6),
       cuts=st.lists(st.integers(0, 400), max_size=6))
def test_splitting_a_stream_anywhere_changes_nothing(cmds, cuts):
    cmds = [c for c in cmds if not isinstance(c, commands.AppendBlockEnd) or c.num_events > 0]
    wire = b"".join(map(encode, cmds))
    dec, out, last = FrameDecoder(), [], 0
    for cut in sorted(c for c in cuts if c <= len(wire)) + [len(wire)]:
        if cut > last:  # b"" would mean EOF
            dec.receive_data(wire[last:cut])
            out += drain(dec)
        last = cut
    assert out == [expected(c) for c in cmds]


# -- Java-client tolerance: optional trailing fields may be absent ------------------------------------
OPTIONAL = [c for c in TABLE if any(f.optional for f in c.fields)]


@pytest.mark.parametrize("spec", OPTIONAL, ids=_id)
@SETTINGS
@given(data=st.data())
def test_frames_without_optional_tails_decode_with_defaults(spec, data):
    cmd = data.draw(commands.strategy(spec.cls))
    defaults = {f.name: f.default for f in spec.fields if f.optional}
    cmd = dataclasses.replace(cmd, **defaults)
    payload = encode(cmd)[8:]
    tail = 0
    for f in reversed(spec.fields):  # cut before each optional field in turn, last first
        if not f.optional:
            break
        out: list = []
        f.type.write(out, f.default)
        tail += sum(map(len, out))
        assert decode_payload(spec.code, payload[: len(payload) - tail]) == cmd


def test_java_and_rust_short_forms():
    rid = struct.pack(">q", 9)
    seg = struct.pack(">H", 3) + b"s/t"
    token = struct.pack(">H", 0)
    # pravega 0.3.8 CreateTableSegment: no optional fields (pravega.md 4.5).
    assert decode_payload(70, rid + seg + token) == commands.CreateTableSegment(9, "s/t", "")
    # Rust ReadTableEntries: only the continuation token after the count.
    args = struct.pack(">i", 10) + struct.pack(">i", 2) + b"ct"
    assert decode_payload(85, rid + seg + token + args) == commands.ReadTableEntries(9, "s/t", "", 10, b"ct")
    # MergeSegments without the attribute list (Rust, pre-v5 Java).
    merge = decode_payload(58, rid + seg + seg + token)
    assert merge.attribute_updates == () and merge.delegation_token == ""
    # Java AppendBlockEnd without requestId.
    end = decode_payload(4, W1.bytes + struct.pack(">ii", 0, 0) + struct.pack(">iq", 1, 5))
    assert end == commands.AppendBlockEnd(W1, 0, b"", 1, 5, -1)


def test_an_optional_field_cut_in_the_middle_is_refused():
    payload = encode(commands.AppendBlockEnd(W1, 0, b"", 1, 5, 7))[8:]
    with pytest.raises(PravegaProtocolError, match=r"^AppendBlockEnd.request_id: ends early$"):
        decode_payload(4, payload[:-3])


def test_keepalive_payload_is_ignored():
    assert feed_whole(frame(100, b"anything")) == [commands.KeepAlive()]
    assert encode(commands.KeepAlive()) == frame(100, b"")


# -- field types -------------------------------------------------------------------------------------
def _setup_append(segment: bytes) -> bytes:
    return frame(1, struct.pack(">q", 1) + W1.bytes + struct.pack(">H", len(segment)) + segment + b"\0\0")


@pytest.mark.parametrize("raw,text", [
    (b"a\xc0\x80b", "a\0b"),  # Java writes NUL as C0 80
    (b"\xed\xa0\xbd\xed\xb8\x80", "\U0001F600"),  # Java writes non-BMP as a surrogate pair
    ("\U0001F600\0é".encode(), "\U0001F600\0é"),  # Rust: standard UTF-8
    (b"x\xc0\x80\xf0\x9f\x98\x80", "x\0\U0001F600"),  # both at once
])
def test_utf_decodes_standard_and_modified_utf8(raw, text):
    assert feed_whole(_setup_append(raw))[0].segment == text


@pytest.mark.parametrize("raw", [b"\xff", b"\xed\xa0\xbd", b"\xc0", b"a\xc0\x80\xff"])
def test_bad_utf_is_refused(raw):
    assert fails(_setup_append(raw)) == "SetupAppend.segment: invalid UTF-8"


def test_utf_encoding_limits():
    assert len(encode(commands.SegmentCreated(1, "x" * 0xFFFF))) == 8 + 8 + 2 + 0xFFFF
    with pytest.raises(ValueError, match="exceeds 65535"):
        encode(commands.SegmentCreated(1, "x" * 0x10000))
    assert encode(commands.SegmentCreated(1, "\0"))[-3:] == b"\0\x01\0"  # we write standard UTF-8


def test_bool_reads_any_non_zero_byte_as_true():
    payload = struct.pack(">H", 1) + b"s" + struct.pack(">q", 0) + b"\x02\x00" + struct.pack(">i", 0)
    assert feed_whole(frame(10, payload))[0] == commands.SegmentRead("s", 0, True, False, b"")
    info = struct.pack(">q", 1) + struct.pack(">H", 1) + b"s" + b"\x07\x00\xff" + struct.pack(">qq", 1, 2)
    assert decode_payload(12, info) == commands.StreamSegmentInfo(1, "s", True, False, True, 1, 2)


def test_table_key_forms():
    head = struct.pack(">q", 1) + struct.pack(">H", 1) + b"t" + b"\0\0"
    java_empty = struct.pack(">ii", 4, 0)
    rust_empty = struct.pack(">iiq", 12, 0, 77)
    one = struct.pack(">ii", 13, 1) + b"k" + struct.pack(">q", -1)
    keys = struct.pack(">i", 3) + java_empty + rust_empty + one
    assert decode_payload(78, head + keys).keys == (TableKey(b"", NO_VERSION), TableKey(b"", 77), TableKey(b"k", -1))
    # We always write the version, even for an empty key (Rust decodes strictly).
    assert encode(commands.ReadTable(1, "t", "", (TableKey(b"", 5),)))[-16:] == rust_empty[:8] + struct.pack(">q", 5)
    entries = commands.TableRead(1, "t", (TableEntry(b"k", 3, b"value"),))
    assert encode(entries).endswith(struct.pack(">ii", 9, 5) + b"value")


def test_conditional_append_embeds_an_event_frame():
    cmd = commands.ConditionalAppend(W1, 4, 100, b"payload", 8)
    assert encode(cmd)[8 + 32 : 8 + 32 + 15] == event_frame(b"payload")
    assert feed_whole(encode(cmd)) == [cmd]


def test_encoder_refuses_values_the_wire_cannot_carry():
    with pytest.raises(ValueError, match="Hello"):
        encode(commands.Hello(1 << 31, 5))
    with pytest.raises(TypeError, match="str expected"):
        encode(commands.SegmentCreated(1, b"bytes"))
    with pytest.raises(TypeError, match="bytes expected"):
        encode(commands.AppendBlock(W1, 5))
    with pytest.raises(TypeError, match="not a Pravega command"):
        encode(Append(W1, b"", 1, 1, 1))
    with pytest.raises(TypeError):
        encode(commands.TableEntriesUpdated(1, ("7",)))
    with pytest.raises(TypeError, match="bool expected"):
        encode(commands.StorageChunksListed(1, (commands.ChunkInfo(1, 2, 3, "c", 1),)))
    with pytest.raises(ValueError, match="exceeds"):
        codec.encode(commands.SegmentRead("s", 0, False, False, bytes(MAX_PAYLOAD)))


def test_codec_encode_is_the_table_encoder_with_the_frame_limit():
    reply = commands.SegmentRead("s", 0, True, False, bytes(MAX_FRAME - 33), 3)  # 33: header + other fields
    assert codec.encode(reply) == encode(reply) and len(encode(reply)) == MAX_FRAME
    with pytest.raises(PravegaProtocolError, match="unknown command type 6"):
        decode_payload(6, b"")


# -- malformed input ----------------------------------------------------------------------------------
_TABLE_HEAD = struct.pack(">qH", 1, 1) + b"t\0\0"  # requestId, segment "t", token ""
MALFORMED = [
    ("negative_length", frame(1, b"", length=-1), "negative frame length -1"),
    ("oversized_length", frame(10, b"", length=MAX_PAYLOAD + 1),
     f"frame length {MAX_PAYLOAD + 1} exceeds {MAX_PAYLOAD}"),
    ("unknown_type", frame(6, b""), "unknown command type 6"),
    ("retired_type", frame(72, b""), "unknown command type 72"),
    ("declared_length_short_of_fields", frame(-127, struct.pack(">i", 15)), "Hello.low_version: ends early"),
    ("fused_run_cut", frame(-127, b"\0\0"), "Hello.high_version: ends early"),
    ("trailing_bytes_inside_frame", frame(-127, struct.pack(">iib", 15, 5, 0)), "Hello: 1 trailing bytes"),
    ("negative_blob_length", frame(10, struct.pack(">H", 1) + b"s" + struct.pack(">q??i", 0, 0, 0, -1)),
     "SegmentRead.data: negative length -1"),
    ("blob_past_end", frame(10, struct.pack(">H", 1) + b"s" + struct.pack(">q??i", 0, 0, 0, 5) + b"ab"),
     "SegmentRead.data: ends early"),
    ("utf_past_end", frame(1, struct.pack(">q", 1) + W1.bytes + struct.pack(">H", 9) + b"ab"),
     "SetupAppend.segment: ends early"),
    ("bad_utf", _setup_append(b"\xfe"), "SetupAppend.segment: invalid UTF-8"),
    ("negative_count", frame(75, struct.pack(">qi", 1, -1)), "TableEntriesUpdated.updated_versions: negative count -1"),
    ("count_cannot_fit", frame(75, struct.pack(">qi", 1, 1000) + bytes(8)),
     "TableEntriesUpdated.updated_versions: 1000 items cannot fit in 8 bytes"),
    ("event_type_not_zero", frame(5, W1.bytes + struct.pack(">qqii", 1, 0, 3, 0)),
     "ConditionalAppend.event: event frame type 3, expected 0"),
    ("event_past_end", frame(5, W1.bytes + struct.pack(">qqii", 1, 0, 0, 4) + b"ab"),
     "ConditionalAppend.event: ends early"),
    ("table_key_length_mismatch", frame(78, _TABLE_HEAD + struct.pack(">iii", 1, 6, 1) + b"k" + bytes(8)),
     "ReadTable.keys: key payload length 6 != 13"),
    ("table_value_length_mismatch", frame(79, struct.pack(">qH", 1, 1) + b"t" + struct.pack(">iii", 1, 13, 1) + b"k"
                                          + bytes(8) + struct.pack(">ii", 9, 1) + b"v"),
     "TableRead.entries: value payload length 9 != 5"),
    ("event_negative_length", frame(5, W1.bytes + struct.pack(">qqii", 1, 0, 0, -1)),
     "ConditionalAppend.event: negative length -1"),
    ("list_count_missing", frame(75, struct.pack(">q", 1)), "TableEntriesUpdated.updated_versions: ends early"),
    ("record_int_cut", frame(-6, struct.pack(">qiqqqH", 1, 2, 0, 0, 0, 10) + b"c" * 10 + b"\1" + bytes(17)),
     "StorageChunksListed.chunks: ends early"),
    ("event_header_cut", frame(5, W1.bytes + struct.pack(">qqi", 1, 0, 0)), "ConditionalAppend.event: ends early"),
    ("record_field_cut", frame(-6, struct.pack(">qiqqqH", 1, 1, 0, 0, 0, 1) + b"c"),
     "StorageChunksListed.chunks: ends early"),
    ("table_key_negative_length", frame(78, _TABLE_HEAD + struct.pack(">iii", 1, 12, -1) + bytes(8)),
     "ReadTable.keys: negative key length -1"),
    ("table_key_cut", frame(78, _TABLE_HEAD + struct.pack(">iii", 1, 13, 1) + b"k\0\0\0"),
     "ReadTable.keys: ends early"),
    ("table_value_header_missing", frame(79, struct.pack(">qH", 1, 1) + b"t" + struct.pack(">iiiq", 1, 12, 0, 5)),
     "TableRead.entries: ends early"),
    ("event_at_top_level", frame(0, b"x"), "Event outside an AppendBlock"),
    ("partial_event_at_top_level", frame(-2, b"x"), "PartialEvent outside an AppendBlock"),
    ("padding_at_top_level", frame(-1, b"\0"), "Padding outside an AppendBlock"),
    ("standalone_block_end_no_events", encode(commands.AppendBlockEnd(W1, 0, b"", 0, 1, 1)),
     "numEvents 0 is not positive"),
]


@pytest.mark.parametrize("feed", [feed_whole, feed_bytewise], ids=lambda f: f.__name__)
@pytest.mark.parametrize("name,data,reason", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_input(name, data, reason, feed):
    assert fails(data, feed) == reason


def test_header_errors_do_not_wait_for_the_payload():
    dec = FrameDecoder()
    dec.receive_data(struct.pack(">ii", 99, 1000))
    with pytest.raises(PravegaProtocolError, match="unknown command type 99"):
        dec.next_event()


def test_errors_are_sticky():
    dec = FrameDecoder()
    dec.receive_data(frame(6, b"") + HELLO)
    for _ in range(2):
        with pytest.raises(PravegaProtocolError, match="unknown command type 6"):
            dec.next_event()


def test_eof_between_frames_inside_a_frame_and_inside_a_block():
    dec = FrameDecoder()
    dec.receive_data(HELLO)
    dec.receive_data(b"")
    assert drain(dec) == [commands.Hello(15, 5)]
    with pytest.raises(RuntimeError):
        dec.receive_data(b"x")
    assert fails(HELLO[:5], _with_eof) == "connection closed inside a frame"
    block = encode(commands.AppendBlock(W1, event_frame(b"e")))
    assert fails(block, _with_eof) == "connection closed inside an AppendBlock"


def _with_eof(data: bytes) -> list:
    dec = FrameDecoder()
    dec.receive_data(data)
    dec.receive_data(b"")
    return drain(dec)


# -- append blocks (pravega.md 5.2) -----------------------------------------------------------------
E1, E2, E3 = event_frame(b"first"), event_frame(b"second event"), event_frame(b"third, the split one")


def block(writer, body: bytes) -> bytes:
    return encode(commands.AppendBlock(writer, body))


def block_end(writer, whole: int, data: bytes = b"", num: int = 1, last: int = 1, rid: int = 7) -> bytes:
    return encode(commands.AppendBlockEnd(writer, whole, data, num, last, rid))


def partial(prefix: bytes) -> bytes:
    return encode(commands.PartialEvent(prefix))


def padding(n: int) -> bytes:
    return encode(commands.Padding(bytes(n)))


@pytest.mark.parametrize("feed", FEEDS, ids=lambda f: f.__name__)
def test_unbatched_block_of_one_event(feed):
    wire = block(W1, E1) + block_end(W1, len(E1), num=1, last=1, rid=7)
    assert feed(wire) == [Append(W1, E1, 1, 1, 7)]


def test_the_block_alone_is_held():
    dec = FrameDecoder()
    dec.receive_data(block(W1, E1))
    assert dec.next_event() is NEED_DATA
    dec.receive_data(block_end(W1, len(E1)))
    assert drain(dec) == [Append(W1, E1, 1, 1, 7)]


@pytest.mark.parametrize("cut", range(len(E3) + 1))  # 0..7 split the 8-byte event header itself
def test_batched_block_with_partial_event(cut):
    wire = block(W1, E1 + E2 + partial(E3[:cut])) + block_end(W1, len(E1 + E2), E3[cut:], num=3, last=12, rid=4)
    for feed in FEEDS:
        assert feed(wire) == [Append(W1, E1 + E2 + E3, 3, 12, 4)]


@pytest.mark.parametrize("pad", [0, 1, 13])
def test_block_closed_by_padding(pad):
    wire = block(W1, E1 + E2 + padding(pad)) + block_end(W1, len(E1 + E2), num=2, last=2)
    for feed in FEEDS:
        assert feed(wire) == [Append(W1, E1 + E2, 2, 2, 7)]


def test_block_then_rust_style_block_end_then_more():
    wire = block(W1, E1) + block_end(W1, len(E1)) + block_end(W2, len(E2 + E3), E2 + E3, num=2, last=9, rid=8) + HELLO
    assert feed_whole(wire) == [Append(W1, E1, 1, 1, 7), Append(W2, E2 + E3, 2, 9, 8), commands.Hello(15, 5)]


BLOCK_ERRORS = [
    ("mismatched_writer", block(W1, E1) + block_end(W2, len(E1)),
     f"AppendBlockEnd writer {W2} does not match AppendBlock writer {W1}"),
    ("missing_end", block(W1, E1) + HELLO, "Hello after an AppendBlock, expected AppendBlockEnd"),
    ("block_after_block", block(W1, E1) + block(W1, E2), "AppendBlock after an AppendBlock, expected AppendBlockEnd"),
    ("partial_after_block", block(W1, E1) + partial(b"x"),
     "PartialEvent after an AppendBlock, expected AppendBlockEnd"),
    ("whole_events_past_block", block(W1, E1) + block_end(W1, len(E1) + 1),
     f"sizeOfWholeEvents {len(E1) + 1} outside the block's {len(E1)} bytes"),
    ("whole_events_negative", block(W1, E1) + block_end(W1, -1),
     f"sizeOfWholeEvents -1 outside the block's {len(E1)} bytes"),
    ("padding_with_data", block(W1, E1 + padding(3)) + block_end(W1, len(E1), b"tail"),
     "Padding closes the block but AppendBlockEnd carries data"),
    ("num_events_zero", block(W1, E1) + block_end(W1, len(E1), num=0), "numEvents 0 is not positive"),
    ("num_events_negative", block(W1, E1) + block_end(W1, len(E1), num=-3), "numEvents -3 is not positive"),
    ("remainder_is_an_event", block(W1, E1 + E2) + block_end(W1, len(E1)),
     "block ends with Event, expected PartialEvent or Padding"),
    ("remainder_unknown_type", block(W1, E1 + frame(6, b"")) + block_end(W1, len(E1)),
     "block ends with 6, expected PartialEvent or Padding"),
    ("remainder_shorter_than_header", block(W1, E1 + b"\xff\xff\xff") + block_end(W1, len(E1)),
     "block remainder of 3 bytes is not a PartialEvent or Padding frame"),
    ("remainder_two_frames", block(W1, E1 + partial(b"ab") + padding(1)) + block_end(W1, len(E1)),
     "block's final frame length 2, expected 11"),
    ("remainder_frame_too_long", block(W1, E1 + frame(-2, b"ab", length=5)) + block_end(W1, len(E1)),
     "block's final frame length 5, expected 2"),
]


@pytest.mark.parametrize("feed", [feed_whole, feed_bytewise], ids=lambda f: f.__name__)
@pytest.mark.parametrize("name,data,reason", BLOCK_ERRORS, ids=[b[0] for b in BLOCK_ERRORS])
def test_block_rules(name, data, reason, feed):
    assert fails(data, feed) == reason


def test_event_frames_in_an_append_are_not_checked_here():
    raw = b"raw byte-stream bytes, no headers"  # e.g. what ConditionalBlockEnd carries (5.5)
    assert feed_whole(block_end(W1, len(raw), raw))[0].data == raw


# -- event frames ------------------------------------------------------------------------------------
@SETTINGS
@given(st.lists(st.binary(max_size=40), max_size=6))
def test_split_events_inverts_event_frame(payloads):
    data = b"".join(map(event_frame, payloads))
    assert [bytes(v) for v in split_events(data)] == payloads


@pytest.mark.parametrize("data,reason", [
    (E1 + frame(3, b"x"), f"event frame type 3 at offset {len(E1)}, expected 0"),
    (frame(0, b"", length=-2), "negative event length -2 at offset 0"),
    (E1 + E2[:5], f"partial event header at offset {len(E1)}"),
    (E1 + E2[:-1], f"event of {len(E2) - 8} bytes at offset {len(E1)} is cut short"),
])
def test_split_events_refuses_bad_frames(data, reason):
    with pytest.raises(PravegaProtocolError) as info:
        split_events(data)
    assert info.value.reason == reason


# -- robustness --------------------------------------------------------------------------------------
def _random_frames():
    codes = st.sampled_from(sorted(commands.BY_CODE) + [6, 72, 127])
    return st.lists(st.builds(frame, codes, st.binary(max_size=60)), max_size=5).map(b"".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(st.binary(max_size=300), _random_frames()), chunk=st.integers(1, 64), eof=st.booleans())
def test_fuzz_only_protocol_errors(data, chunk, eof):
    dec = FrameDecoder()
    try:
        for i in range(0, len(data), chunk):
            dec.receive_data(data[i : i + chunk])
            drain(dec)
        if eof:
            dec.receive_data(b"")
            drain(dec)
    except PravegaProtocolError:
        pass


def test_byte_at_a_time_is_linear_and_the_buffer_is_compacted():
    big = encode(commands.SegmentRead("s", 0, True, False, bytes(200_000)))
    start = time.perf_counter()
    assert len(feed_bytewise(big)) == 1
    assert time.perf_counter() - start < 5  # quadratic buffering would take minutes
    dec = FrameDecoder()
    dec.receive_data(encode(commands.KeepAlive()) * 20_000 + HELLO[:3])
    assert len(drain(dec)) == 20_000
    assert len(dec._buf) == 3  # the consumed prefix is gone once NEED_DATA is returned


def test_max_frame_boundary_is_accepted():
    dec = FrameDecoder()
    dec.receive_data(frame(10, b"", length=MAX_PAYLOAD))
    assert dec.next_event() is NEED_DATA  # legal header: waits for the payload
    assert MAX_PAYLOAD + 8 == MAX_FRAME == 0x00FFFFFF
