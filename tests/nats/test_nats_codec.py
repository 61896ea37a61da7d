"""adapters.nats.codec: client frames whole, byte by byte, split everywhere; encoders."""

from __future__ import annotations

import json

import pytest

from adapters.nats.codec import (
    MAX_PAYLOAD,
    OK_FRAME,
    PING_FRAME,
    PONG_FRAME,
    PreparedMessage,
    ServerCodec,
    encode_err,
    encode_hmsg,
    encode_info,
    encode_msg,
    join_frames,
    parse_connect,
    parse_size,
)
from adapters.nats.errors import NatsProtocolError
from adapters.nats.events import NEED_DATA, Connect, Err, HPub, Info, Ok, Ping, Pong, Pub, Sub, Unsub

from natsproto_helpers import NATS_PY_CONNECT, chunks_at, codec_run, one_byte_chunks, outcome

# (name, bytes, events): every client operation, in the spellings nats-server accepts.
SAMPLES = [
    ("pub", b"PUB foo 5\r\nhello\r\n", [Pub("foo", "", b"hello")]),
    ("pub_reply", b"PUB foo bar 2\r\nhi\r\n", [Pub("foo", "bar", b"hi")]),
    ("pub_nats_py_double_space", b"PUB subj  5\r\nhello\r\n", [Pub("subj", "", b"hello")]),
    ("pub_empty_payload", b"PUB foo 0\r\n\r\n", [Pub("foo", "", b"")]),
    ("pub_payload_with_crlf", b"PUB foo 6\r\na\r\nb\r\n\r\n", [Pub("foo", "", b"a\r\nb\r\n")]),
    ("pub_lower_case", b"pub foo 1\r\nx\r\n", [Pub("foo", "", b"x")]),
    ("pub_mixed_case_tabs", b"pUb\tfoo\t\t r  3\r\nabc\r\n", [Pub("foo", "r", b"abc")]),
    ("pub_bare_lf", b"PUB foo 2\nhi\r\n", [Pub("foo", "", b"hi")]),
    ("pub_leading_zeros", b"PUB foo 003\r\nabc\r\n", [Pub("foo", "", b"abc")]),
    ("pub_utf8_subject", "PUB é.ü 1\r\nx\r\n".encode(), [Pub("é.ü", "", b"x")]),
    ("pub_binary_payload", b"PUB b 4\r\n\x00\xff\r\n\r\n", [Pub("b", "", b"\x00\xff\r\n")]),
    ("hpub", b"HPUB h r 30 32\r\nNATS/1.0\r\nA: 1\r\na: 2\r\nA: 3\r\n\r\nok\r\n",
     [HPub("h", "r", b"NATS/1.0\r\nA: 1\r\na: 2\r\nA: 3\r\n\r\n", b"ok")]),
    ("hpub_no_reply", b"HPUB h 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", [HPub("h", "", b"NATS/1.0\r\n\r\n", b"hi")]),
    ("hpub_status", b"hpub h 18 18\r\nNATS/1.0 503 X\r\n\r\n\r\n",
     [HPub("h", "", b"NATS/1.0 503 X\r\n\r\n", b"")]),
    ("hpub_zero_header", b"HPUB h 0 2\r\nhi\r\n", [HPub("h", "", b"", b"hi")]),
    ("sub", b"SUB foo 1\r\n", [Sub("foo", "", b"1")]),
    ("sub_queue", b"SUB foo.* workers 22\r\n", [Sub("foo.*", "workers", b"22")]),
    ("sub_nats_py_empty_queue", b"SUB subj  7\r\n", [Sub("subj", "", b"7")]),
    ("sub_lower_tabs", b"sub\t>\t9\r\n", [Sub(">", "", b"9")]),
    ("unsub", b"UNSUB 1\r\n", [Unsub(b"1", 0)]),
    ("unsub_nats_py_trailing_space", b"UNSUB 7 \r\n", [Unsub(b"7", 0)]),
    ("unsub_max", b"UNSUB 1 5\r\n", [Unsub(b"1", 5)]),
    ("unsub_bad_max_means_now", b"unsub 1 x\r\n", [Unsub(b"1", 0)]),
    ("ping", b"PING\r\n", [Ping()]),
    ("ping_lower_junk", b"ping whatever\r\n", [Ping()]),
    ("ping_mixed_lf", b"PiNg\n", [Ping()]),
    ("pong", b"PONG\r\n", [Pong()]),
    ("pong_lower", b"pong\r\n", [Pong()]),
    ("ok", b"+OK\r\n", [Ok()]),
    ("ok_lower", b"+ok\r\n", [Ok()]),
    ("connect", b'CONNECT {"verbose":false}\r\n', [Connect(verbose=False, fields=frozenset({"verbose"}))]),
    ("connect_no_space", b'connect{"name":"x"}\r\n', [Connect(name="x", fields=frozenset({"name"}))]),
    ("connect_tabs", b'CONNECT\t \t{}\r\n', [Connect()]),
    ("info_from_client", b'INFO {"a":1}\r\n', [Info({"a": 1})]),
    ("info_null", b"info null\r\n", [Info({})]),
    ("err_from_client", b"-ERR 'boom'\r\n", [Err("'boom'")]),
]


@pytest.mark.parametrize(("name", "data", "expected"), SAMPLES, ids=[s[0] for s in SAMPLES])
def test_sample_whole(name, data, expected):
    assert outcome([data]) == (expected, None, False)


@pytest.mark.parametrize(("name", "data", "expected"), SAMPLES, ids=[s[0] for s in SAMPLES])
def test_sample_one_byte_at_a_time(name, data, expected):
    assert outcome(one_byte_chunks(data)) == (expected, None, False)


@pytest.mark.parametrize(("name", "data", "expected"), SAMPLES, ids=[s[0] for s in SAMPLES])
def test_sample_split_at_every_offset(name, data, expected):
    for cut in range(1, len(data)):
        assert outcome([data[:cut], data[cut:]]) == (expected, None, False), cut


@pytest.mark.parametrize(("name", "data", "expected"), SAMPLES, ids=[s[0] for s in SAMPLES])
def test_sample_with_trailing_bytes_kept(name, data, expected):
    """Bytes of the next operation stay buffered until it completes."""
    trailing = b"PUB next 3\r\nab"
    codec = ServerCodec()
    codec.allow_headers = True
    codec.receive_data(data + trailing)
    got = []
    while (event := codec.next_event()) is not NEED_DATA:
        got.append(event)
    assert got == expected
    assert 0 < codec.buffered <= len(trailing)
    codec.receive_data(b"c\r\n")
    assert codec.next_event() == Pub("next", "", b"abc")
    assert codec.next_event() is NEED_DATA
    assert codec.buffered == 0


def test_all_samples_back_to_back_split_everywhere():
    stream = b"".join(s[1] for s in SAMPLES)
    expected = [e for s in SAMPLES for e in s[2]]
    assert outcome([stream]) == (expected, None, False)
    assert outcome(one_byte_chunks(stream)) == (expected, None, False)
    for cut in range(1, len(stream), 7):
        assert outcome([stream[:cut], stream[cut:]]) == (expected, None, False), cut


def test_consumed_prefix_dropped_at_need_data():
    codec = ServerCodec()
    codec.receive_data(b"PUB a 1\r\nx\r\nPUB b 1\r\ny\r\nPI")
    assert codec.next_event() == Pub("a", "", b"x")
    assert codec.next_event() == Pub("b", "", b"y")
    assert codec.next_event() is NEED_DATA
    assert codec._pos == 0 and bytes(codec._buf) == b"PI"


def test_ignored_ping_tail_does_not_accumulate():
    """PING ignores the rest of its line (parser.go OP_PING) with no limit; the
    ignored bytes are dropped as they arrive instead of being buffered."""
    codec = ServerCodec()
    codec.receive_data(b"PING")
    for _ in range(100):
        codec.receive_data(b"x" * 1000)
        assert codec.next_event() is NEED_DATA
        assert codec.buffered == 0
    codec.receive_data(b"\r\n")
    assert codec.next_event() == Ping()


def test_whitespace_after_verb_is_consumed_as_it_arrives():
    codec = ServerCodec()
    codec.receive_data(b"PUB")
    for _ in range(10):
        codec.receive_data(b" \t" * 1000)
        assert codec.next_event() is NEED_DATA
        assert codec.buffered == 0
    codec.receive_data(b"foo 1\r\nz\r\n")
    assert codec.next_event() == Pub("foo", "", b"z")


def test_large_payload_in_pieces_copied_once_as_bytes():
    payload = bytes(range(256)) * 4096  # 1 MiB
    head = b"PUB big %d\r\n" % len(payload)
    events, err = codec_run(chunks_at(head + payload + b"\r\n", range(0, len(payload), 65536)))
    assert err is None
    assert events == [Pub("big", "", payload)]
    assert type(events[0].payload) is bytes


def test_exact_max_payload_is_accepted():
    """nats.md section 11: a payload of exactly max_payload is fine."""
    events, err = codec_run([b"PUB p 10\r\n0123456789\r\n"], max_payload=10)
    assert err is None and events == [Pub("p", "", b"0123456789")]
    events, err = codec_run([b"HPUB p 12 20\r\nNATS/1.0\r\n\r\n01234567\r\n"], max_payload=20)
    assert err is None and len(events) == 1


def test_control_line_limit_counts_argument_only():
    """The limit applies to the argument part (parser.go overMaxControlLineLimit)."""
    arg = b"s " + b"r" * 4092 + b" 0"          # exactly 4096 bytes
    assert len(arg) == 4096
    assert codec_run([b"PUB   " + arg + b"\r\n\r\n"])[1] is None
    events, err = codec_run([b"PUB " + arg + b"x\r\n\r\n"])
    assert err is not None and err.text == "maximum control line exceeded"


def test_arg_starts_at_first_non_blank_even_if_lf():
    """parser.go: the byte ending the blanks starts the argument, even a LF;
    the line then ends at the next LF."""
    assert outcome([b"SUB \nfoo 1\r\n"]) == ([Sub("foo", "", b"1")], None, False)
    # nats-server drops the argument's last byte when a CR appeared in it (c.drop).
    # SUB also splits on CR (splitArg), so the sid is "12"; PUB does not, so its size is "1\r".
    assert outcome([b"SUB foo 12\r3\n"]) == ([Sub("foo", "", b"12")], None, False)
    assert outcome([b"PUB foo 1\r2\nx\r\n"]) == ([], None, True)


def test_connect_only_refuses_other_verbs_at_first_byte():
    events, text, stopped = outcome([b"P"], connect_only=True)
    assert (events, text, stopped) == ([], "Authorization Violation", True)
    events, err = codec_run([b'CONNECT {}\r\n'], connect_only=True)
    assert err is None and events == [Connect()]


def test_eof_flag():
    codec = ServerCodec()
    codec.receive_data(b"PUB a 1\r\n")
    codec.receive_data(b"")
    assert codec.eof
    assert codec.next_event() is NEED_DATA


def test_codec_rejects_bad_limits():
    with pytest.raises(ValueError):
        ServerCodec(max_control_line=0)


@pytest.mark.parametrize(("digits", "value"), [
    (b"0", 0), (b"5", 5), (b"007", 7), (b"999999999", 999999999),
    (b"", -1), (b"1234567890", -1), (b"-1", -1), (b"+1", -1), (b"1a", -1), (b" 1", -1), (b"\xd9\xa1", -1),
])
def test_parse_size(digits, value):
    assert parse_size(digits) == value


# -- CONNECT JSON as Go's encoding/json reads it into ClientOpts ---------------------
def test_parse_connect_nats_py_line():
    event = parse_connect(NATS_PY_CONNECT[len(b"CONNECT "):-2])
    assert event == Connect(verbose=False, pedantic=False, echo=True, headers=True, no_responders=True,
                            protocol=1, lang="python3", version="2.16.0",
                            fields=frozenset({"echo", "headers", "lang", "no_responders", "pedantic",
                                              "protocol", "verbose", "version"}))


def test_parse_connect_case_insensitive_last_wins_unknown_ignored():
    event = parse_connect(b'{"VERBOSE":false,"verbose":true,"Verbose":false,"zzz":[1],"PASS":"pw",'
                          b'"user":"u","auth_token":"t"}')
    assert event.verbose is False
    assert (event.user, event.password, event.auth_token) == ("u", "pw", "t")
    assert event.fields == {"verbose", "password", "user", "auth_token"}


def test_parse_connect_null_values_and_document():
    assert parse_connect(b"null") == Connect()
    assert parse_connect(b'{"verbose":null,"protocol":null}') == Connect()


def test_parse_connect_secrets_not_in_repr():
    event = parse_connect(b'{"pass":"hunter2","auth_token":"s3cr3t","jwt":"J","sig":"S"}')
    assert "hunter2" not in repr(event) and "s3cr3t" not in repr(event) and "'J'" not in repr(event)


def test_parse_connect_invalid_utf8_is_replaced():
    assert parse_connect(b'{"name":"a\xffb"}').name == "a\ufffdb"


@pytest.mark.parametrize("arg", [
    b"", b"{", b"[]", b"1", b'"x"', b'{"verbose":"yes"}', b'{"verbose":1}', b'{"protocol":1.0}',
    b'{"protocol":true}', b'{"protocol":"1"}', b'{"protocol":9223372036854775808}', b'{"name":5}',
    b'{"protocol":NaN}', b'{"protocol":Infinity}', b'{"import":"x"}', b'{} x', b"{'a':1}",
])
def test_parse_connect_errors_are_silent_closes(arg):
    with pytest.raises(NatsProtocolError) as info:
        parse_connect(arg)
    assert info.value.text is None and info.value.wire == b""


# -- encoders ----------------------------------------------------------------------
def test_fixed_frames():
    assert (PING_FRAME, PONG_FRAME, OK_FRAME) == (b"PING\r\n", b"PONG\r\n", b"+OK\r\n")
    assert encode_err("Unknown Protocol Operation") == b"-ERR 'Unknown Protocol Operation'\r\n"


def test_encode_info_go_order_space_before_crlf():
    data = encode_info({"client_id": 5, "server_id": "S", "ldm": True, "proto": 1, "extra": "x",
                        "version": "2.10.0", "max_payload": 1048576, "headers": True})
    assert data == (b'INFO {"server_id":"S","version":"2.10.0","proto":1,"headers":true,'
                    b'"max_payload":1048576,"client_id":5,"ldm":true,"extra":"x"} \r\n')


def test_encode_info_escapes_like_go():
    data = encode_info({"server_name": "a<b>&c\u2028é"})
    assert data == b'INFO {"server_name":"a\\u003cb\\u003e\\u0026c\\u2028\xc3\xa9"} \r\n'
    assert json.loads(data[5:-3]) == {"server_name": "a<b>&c\u2028é"}


@pytest.mark.parametrize(("frames", "wire"), [
    (encode_msg(b"foo", b"1", b"", b"hello"), b"MSG foo 1 5\r\nhello\r\n"),
    (encode_msg(b"foo", b"1", b"bar", b"hi"), b"MSG foo 1 bar 2\r\nhi\r\n"),
    (encode_msg(b"foo", b"1", b"", b""), b"MSG foo 1 0\r\n\r\n"),
    (encode_hmsg(b"h", b"1", b"r", b"NATS/1.0\r\nA: 1\r\na: 2\r\nA: 3\r\n\r\n", b"ok"),
     b"HMSG h 1 r 30 32\r\nNATS/1.0\r\nA: 1\r\na: 2\r\nA: 3\r\n\r\nok\r\n"),
    (encode_hmsg(b"_INBOX.abc.tok", b"9", b"", b"NATS/1.0 503\r\nNats-Subject: svc.nobody\r\n\r\n", b""),
     b"HMSG _INBOX.abc.tok 9 42 42\r\nNATS/1.0 503\r\nNats-Subject: svc.nobody\r\n\r\n\r\n"),
])
def test_encode_msg_and_hmsg_exact_bytes(frames, wire):
    """nats.md section 3 examples, byte for byte."""
    assert join_frames(frames) == wire


def test_encode_msg_shares_payload():
    payload = memoryview(b"0123456789")[2:6]
    frames = encode_msg(b"s", b"1", b"", payload)
    assert frames[1] is payload
    assert join_frames(frames) == b"MSG s 1 4\r\n2345\r\n"


def test_prepared_message_fan_out():
    header = b"NATS/1.0\r\nK: v\r\n\r\n"
    prepared = PreparedMessage(b"orders.new", b"_INBOX.x", b"data", header)
    out: list = []
    sizes = [prepared.append_to(out, b"1", True), prepared.append_to(out, b"22", False)]
    wire = join_frames(out)
    assert wire == (b"HMSG orders.new 1 _INBOX.x 18 22\r\n" + header + b"data\r\n"
                    b"MSG orders.new 22 _INBOX.x 4\r\ndata\r\n")
    assert sum(sizes) == len(wire)
    assert out[2] is prepared.payload and out[1] is header


def test_prepared_message_without_header_is_plain_msg():
    prepared = PreparedMessage(b"a", b"", b"xy")
    out: list = []
    assert prepared.append_to(out, b"3", True) == len(b"MSG a 3 2\r\nxy\r\n")
    assert join_frames(out) == b"MSG a 3 2\r\nxy\r\n"


def test_default_max_payload_is_nats_server_default():
    assert MAX_PAYLOAD == 1048576
