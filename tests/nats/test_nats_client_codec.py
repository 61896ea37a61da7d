"""adapters.nats.client_codec: server frames whole, byte by byte, with trailing bytes;
malformed input; encoders; round trips against the server-side codec."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.nats.client_codec import (
    MAX_CONTROL_LINE,
    MAX_INFO_LINE,
    NEED_DATA,
    PING,
    PONG,
    ClientCodec,
    NatsClientProtocolError,
    ServerErr,
    ServerInfo,
    ServerMsg,
    ServerOk,
    ServerPing,
    ServerPong,
    encode_connect,
    encode_pub,
    encode_sub,
    encode_unsub,
    headers_of,
    status_of,
)
from adapters.nats.codec import ServerCodec, encode_err, encode_hmsg, encode_info, encode_msg, join_frames
from adapters.nats.errors import NatsHeaderError
from adapters.nats.events import HPub, Ping, Pong, Pub, Sub, Unsub
from adapters.nats.headers import HeaderBlock, no_responders_block

from natsproto_helpers import chunks_at, one_byte_chunks

HDR = b"NATS/1.0\r\nA: 1\r\n\r\n"   # 18 bytes
SAMPLES = [
    ("info", b'INFO {"server_id":"N","max_payload":1048576,"headers":true} \r\n',
     [ServerInfo({"server_id": "N", "max_payload": 1048576, "headers": True})]),
    ("info_lower_tab", b"info\t{}\r\n", [ServerInfo({})]),
    ("msg", b"MSG foo 1 5\r\nhello\r\n", [ServerMsg("foo", 1, None, None, b"hello")]),
    ("msg_reply", b"MSG foo.bar 22 _INBOX.x.1 2\r\nhi\r\n",
     [ServerMsg("foo.bar", 22, "_INBOX.x.1", None, b"hi")]),
    ("msg_empty", b"MSG a 3 0\r\n\r\n", [ServerMsg("a", 3, None, None, b"")]),
    ("msg_crlf_in_payload", b"MSG a 3 6\r\na\r\nb\r\n\r\n", [ServerMsg("a", 3, None, None, b"a\r\nb\r\n")]),
    ("msg_lower_tabs_bare_lf", b"msg\ta\t\t7  r  1\nx\r\n", [ServerMsg("a", 7, "r", None, b"x")]),
    ("msg_utf8_subject", "MSG é.ü 1 1\r\nx\r\n".encode(), [ServerMsg("é.ü", 1, None, None, b"x")]),
    ("msg_binary", b"MSG b 1 3\r\n\x00\xff\n\r\n", [ServerMsg("b", 1, None, None, b"\x00\xff\n")]),
    ("hmsg", b"HMSG h 2 18 20\r\n" + HDR + b"ok\r\n", [ServerMsg("h", 2, None, HDR, b"ok")]),
    ("hmsg_reply", b"HMSG h 2 r 18 18\r\n" + HDR + b"\r\n", [ServerMsg("h", 2, "r", HDR, b"")]),
    ("hmsg_503", b"HMSG _INBOX.a.1 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n",
     [ServerMsg("_INBOX.a.1", 1, None, b"NATS/1.0 503\r\n\r\n", b"")]),
    ("ping", b"PING\r\n", [ServerPing()]),
    ("ping_lower_junk", b"ping whatever\r\n", [ServerPing()]),
    ("pong", b"PONG\r\n", [ServerPong()]),
    ("pong_mixed_lf", b"PoNg\n", [ServerPong()]),
    ("ok", b"+OK\r\n", [ServerOk()]),
    ("err", b"-ERR 'Authorization Violation'\r\n", [ServerErr("Authorization Violation")]),
    ("err_permissions", b'-ERR \'Permissions Violation for Publish to "x"\'\r\n',
     [ServerErr('Permissions Violation for Publish to "x"')]),
    ("err_unquoted_lower", b"-err  Stale Connection \r\n", [ServerErr("Stale Connection")]),
    ("several", b"PING\r\nMSG a 1 1\r\nx\r\nPONG\r\n",
     [ServerPing(), ServerMsg("a", 1, None, None, b"x"), ServerPong()]),
]


def run(chunks, **limits):
    """Feed ``chunks`` to a fresh codec, draining after each; (events, error text, codec)."""
    codec = ClientCodec(**limits)
    events = []
    try:
        for chunk in chunks:
            codec.receive_data(chunk)
            while (event := codec.next_event()) is not NEED_DATA:
                events.append(event)
    except NatsClientProtocolError as exc:
        return events, str(exc), codec
    return events, None, codec


@pytest.mark.parametrize("name,data,events", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_sample_whole_and_one_byte_at_a_time(name, data, events):
    assert run([data])[:2] == (events, None)
    got, err, codec = run(one_byte_chunks(data))
    assert (got, err) == (events, None)
    assert codec.buffered == 0


@pytest.mark.parametrize("name,data,events", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_sample_with_trailing_bytes(name, data, events):
    # The start of another frame after the sample stays buffered, unparsed.
    tail = b"MSG next 9 10\r\n12345"
    got, err, codec = run([data + tail])
    assert (got, err) == (events, None)
    assert codec.next_event() is NEED_DATA
    codec.receive_data(b"67890\r\n")
    assert codec.next_event() == ServerMsg("next", 9, None, None, b"1234567890")
    assert codec.next_event() is NEED_DATA and codec.buffered == 0


def test_all_samples_in_one_stream_cut_everywhere():
    data = b"".join(s[1] for s in SAMPLES)
    events = [e for s in SAMPLES for e in s[2]]
    for step in (2, 3, 7, 64):
        assert run(chunks_at(data, range(step, len(data), step)))[:2] == (events, None)


# (name, bytes, exact error); also checked fed one byte at a time.
MALFORMED = [
    ("unknown_verb", b"FOO bar\r\n", "unknown protocol operation b'f'"),
    ("empty_line", b"\r\n", "unknown protocol operation b'\\r'"),
    ("pub_from_server", b"PUB a 1\r\nx\r\n", "unknown protocol operation b'pu'"),
    ("msg_glued", b"MSGa 1 1\r\n", "unknown protocol operation b'msga'"),
    ("msg_no_args", b"MSG\r\n", "MSG without arguments"),
    ("info_no_blank", b"INFO{}\r\n", "unknown protocol operation b'info{'"),
    ("msg_two_args", b"MSG a 1\r\n", "MSG with 2 arguments: b'a 1'"),
    ("msg_five_args", b"MSG a 1 r x 1\r\n", "MSG with 5 arguments: b'a 1 r x 1'"),
    ("hmsg_three_args", b"HMSG a 1 5\r\n", "HMSG with 3 arguments: b'a 1 5'"),
    ("msg_bad_sid", b"MSG a x 1\r\nx\r\n", "MSG with a bad sid b'x'"),
    ("msg_long_sid", b"MSG a 12345678901234567890 1\r\n", "MSG with a bad sid b'12345678901234567890'"),
    ("msg_bad_size", b"MSG a 1 -1\r\n", "MSG with a bad size (1 to 9 digits): b'a 1 -1'"),
    ("msg_size_10_digits", b"MSG a 1 0000000001\r\n",
     "MSG with a bad size (1 to 9 digits): b'a 1 0000000001'"),
    ("hmsg_hdr_over_total", b"HMSG a 1 20 18\r\n", "HMSG header size 20 > total size 18"),
    ("hmsg_tiny_header", b"HMSG a 1 2 4\r\nhixx\r\n", "HMSG header size 2 is too small for a header block"),
    ("hmsg_not_nats_header", b"HMSG a 1 12 12\r\nHTTP/1.1\r\n\r\n\r\n",
     "HMSG header block does not start with NATS/1.0: b'HTTP/1.1\\r\\n\\r\\n'"),
    ("payload_no_crlf", b"MSG a 1 1\r\nxyz\r\n", "message payload not followed by CRLF"),
    ("payload_cr_no_lf", b"MSG a 1 1\r\nx\rz", "message payload not followed by CRLF"),
    ("info_not_json", b"INFO {nope}\r\n",
     "INFO is not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
    ("info_not_object", b"INFO [1]\r\n", "INFO is not a JSON object"),
    ("max_payload", b"MSG a 1 21\r\n", "MSG of 21 bytes passes max_payload 20"),
]


@pytest.mark.parametrize("name,data,error", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_raises_the_same_error_whole_or_byte_by_byte(name, data, error):
    assert run([data], max_payload=20)[1] == error
    assert run(one_byte_chunks(data), max_payload=20)[1] == error


def test_bad_verb_fails_at_its_first_byte():
    codec = ClientCodec()
    codec.receive_data(b"X")
    with pytest.raises(NatsClientProtocolError, match="unknown protocol operation b'x'"):
        codec.next_event()


@pytest.mark.parametrize("verb,limit_kw,default", [
    (b"MSG", "max_control_line", MAX_CONTROL_LINE),
    (b"PING", "max_control_line", MAX_CONTROL_LINE),
    (b"INFO", "max_info_line", MAX_INFO_LINE),
])
def test_line_limits_hold_whether_or_not_the_line_ended(verb, limit_kw, default):
    limit = 50
    at_limit = verb + b" " + b"a" * limit   # the verb, one blank, then `limit` bytes
    over = at_limit + b"a"
    for end in (b"", b"\r", b"\r\n"):
        for chunks in ([over + end], one_byte_chunks(over + end)):
            err = run(chunks, **{limit_kw: limit})[1]
            assert err == f"{verb.decode()} line of {len(over)} bytes passes the limit of {limit}"
        err = run([at_limit + end], **{limit_kw: limit})[1]
        assert err is None or "limit" not in err
    assert getattr(ClientCodec(), limit_kw) == default


def test_info_may_be_longer_than_a_control_line():
    urls = [f"10.0.{i // 256}.{i % 256}:4222" for i in range(2000)]
    line = b"INFO " + json.dumps({"connect_urls": urls}).encode() + b"\r\n"
    assert len(line) > MAX_CONTROL_LINE
    assert run([line])[:2] == ([ServerInfo({"connect_urls": urls})], None)


def test_large_payload_split_across_reads():
    payload = bytes(range(256)) * 1024
    data = b"MSG big 4 %d\r\n" % len(payload) + payload + b"\r\n"
    got, err, _ = run(chunks_at(data, range(1000, len(data), 65536)))
    assert (got, err) == ([ServerMsg("big", 4, None, None, payload)], None)


def test_limits_must_be_sane():
    with pytest.raises(ValueError):
        ClientCodec(max_control_line=0)
    with pytest.raises(ValueError):
        ClientCodec(max_payload=-1)


# -- encoders -------------------------------------------------------------------
def test_encoders_exact_bytes():
    assert encode_pub("a.b", b"hi") == b"PUB a.b 2\r\nhi\r\n"
    assert encode_pub("a", b"", "r.1") == b"PUB a r.1 0\r\n\r\n"
    assert encode_pub("a", b"xy", "r", HDR) == b"HPUB a r 18 20\r\n" + HDR + b"xy\r\n"
    assert encode_pub("a", b"xy", None, HeaderBlock((("A", "1"),))) == b"HPUB a 18 20\r\n" + HDR + b"xy\r\n"
    assert encode_pub("é", bytearray(b"x")) == "PUB é 1\r\nx\r\n".encode()
    assert encode_sub("a.*", 7) == b"SUB a.* 7\r\n"
    assert encode_sub(">", 8, "workers") == b"SUB > workers 8\r\n"
    assert encode_unsub(7) == b"UNSUB 7\r\n"
    assert encode_unsub(7, 3) == b"UNSUB 7 3\r\n"
    assert PING == b"PING\r\n" and PONG == b"PONG\r\n"
    assert encode_connect({"verbose": False, "name": "g"}) == b'CONNECT {"verbose":false,"name":"g"}\r\n'


@pytest.mark.parametrize("call,error", [
    (lambda: encode_pub("", b""), "invalid subject ''"),
    (lambda: encode_pub("a b", b""), "invalid subject 'a b'"),
    (lambda: encode_pub("a\tb", b""), "invalid subject 'a\\tb'"),
    (lambda: encode_pub("a", b"", "r\r\n"), "invalid reply subject 'r\\r\\n'"),
    (lambda: encode_sub("a\n", 1), "invalid subject 'a\\n'"),
    (lambda: encode_sub("a", 1, "q q"), "invalid queue group 'q q'"),
    (lambda: encode_pub("a", b"", None, b"HTTP/1.1\r\n\r\n"), "not a NATS header block"),
    (lambda: encode_pub("a", b"", None, b"NATS/1.0\r\n"), "not a NATS header block"),
    (lambda: encode_unsub(1, 0), "max_msgs must be positive"),
])
def test_encoders_refuse_what_the_server_would_misread(call, error):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value).startswith(error)


def test_status_of_and_headers_of():
    def msg(header):
        return ServerMsg("s", 1, None, header, b"")

    assert status_of(msg(None)) == ("", "")
    assert status_of(msg(b"NATS/1.0\r\nA: 1\r\n\r\n")) == ("", "")
    assert status_of(msg(no_responders_block("x"))) == ("503", "")
    assert status_of(msg(b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 1\r\n\r\n")) == \
        ("408", "Request Timeout")
    # Only the status line is read: a header line this side refuses does not hide it.
    assert status_of(msg(b"NATS/1.0 409 Consumer Deleted\r\nbad line\r\n\r\n")) == ("409", "Consumer Deleted")
    assert headers_of(msg(None)) is None
    assert headers_of(msg(HDR)) == HeaderBlock((("A", "1"),))
    with pytest.raises(NatsHeaderError):
        headers_of(msg(b"NATS/1.0 409 X\r\nbad line\r\n\r\n"))


# -- round trips against the server-side codec ----------------------------------
SUBJECT_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters=" \t\r\n")
SUBJECTS = st.text(SUBJECT_CHARS, min_size=1, max_size=24)
PAYLOADS = st.binary(max_size=300)
HEADERS = st.none() | st.builds(
    lambda items, status: HeaderBlock(tuple(items), status),
    st.lists(st.tuples(st.text(st.characters(min_codepoint=33, max_codepoint=126, blacklist_characters=":"),
                               min_size=1, max_size=8),
                       st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=8)),
             max_size=3),
    st.sampled_from(["", "503", "408", "100"]))
CUTS = st.lists(st.integers(min_value=1, max_value=2000), max_size=6)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(SUBJECTS, st.none() | SUBJECTS, PAYLOADS, HEADERS, CUTS)
def test_encode_pub_is_read_back_by_the_server_codec(subject, reply, payload, header, cuts):
    data = encode_pub(subject, payload, reply, header) + encode_sub(subject, 5) + PING + encode_unsub(5, 2)
    codec = ServerCodec()
    codec.allow_headers = True
    events = []
    for chunk in chunks_at(data, cuts):
        codec.receive_data(chunk)
        while (event := codec.next_event()) is not NEED_DATA:
            events.append(event)
    first = (Pub(subject, reply or "", payload) if header is None
             else HPub(subject, reply or "", _block(header), payload))
    assert events == [first, Sub(subject, "", b"5"), Ping(), Unsub(b"5", 2)]


def _block(header: HeaderBlock) -> bytes:
    return encode_pub("x", b"", None, header).split(b"\r\n", 1)[1][:-2]


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(SUBJECTS, st.integers(min_value=1, max_value=2**40), st.none() | SUBJECTS, PAYLOADS, HEADERS, CUTS)
def test_server_msg_frames_are_read_by_the_client_codec(subject, sid, reply, payload, header, cuts):
    subj, rep = subject.encode("utf-8", "surrogateescape"), (reply or "").encode()
    block = None if header is None else _block(header)
    frames = (encode_msg(subj, b"%d" % sid, rep, payload) if block is None
              else encode_hmsg(subj, b"%d" % sid, rep, block, payload))
    data = (encode_info({"server_id": "S", "max_payload": 1024}) + join_frames(frames)
            + b"PING\r\n" + encode_err("Stale Connection"))
    events, err, codec = run(chunks_at(data, cuts))
    assert err is None and codec.buffered == 0
    assert events == [ServerInfo({"server_id": "S", "max_payload": 1024}),
                      ServerMsg(subject, sid, reply, block, payload), ServerPing(),
                      ServerErr("Stale Connection")]


def test_pong_answers_are_what_the_server_codec_reads():
    codec = ServerCodec()
    codec.receive_data(PONG + PING)
    assert [codec.next_event(), codec.next_event()] == [Pong(), Ping()]
