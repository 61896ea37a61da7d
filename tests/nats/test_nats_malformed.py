"""Malformed and refused client input: the exact -ERR nats-server sends, and
whether it closes (protocols/nats.md sections 2, 3, 10; nats-server parser.go,
client.go). ``text=None`` means nats-server closes without any -ERR."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from adapters.nats.connection import ERROR, NatsLimits, ServerInfo
from adapters.nats.errors import FATAL_TEXTS, NatsProtocolError, err_frame
from adapters.nats.events import Connect, Pub

from natsproto_helpers import SERVER, connected, new_conn, one_byte_chunks, pump, run_conn

AUTH_INFO = ServerInfo("NAUTH", auth_required=True)
HDR_CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n'


class OnlyOk:
    """Permissions: publish and subscribe only under ``ok.``, queue group ``q`` only."""

    def can_publish(self, subject: str) -> bool:
        return subject.startswith("ok.")

    def can_subscribe(self, subject: str, queue: str) -> bool:
        return subject.startswith("ok.") and queue in ("", "q")


def check_user(connect: Connect):
    if (connect.user, connect.password) == ("u", "p"):
        return True
    if (connect.user, connect.password) == ("limited", "p"):
        return OnlyOk()
    return False


SETUPS = {
    "fresh": lambda: new_conn(),
    "connected": lambda: connected(),
    "pedantic": lambda: connected(b'CONNECT {"verbose":false,"headers":true}\r\n'),
    "noheaders": lambda: connected(b'CONNECT {"verbose":false,"pedantic":false}\r\n'),
    "auth": lambda: new_conn(info=AUTH_INFO, authenticate=check_user),
    "perms": lambda: connected(b'CONNECT {"verbose":false,"pedantic":false,"user":"limited","pass":"p"}\r\n',
                               info=AUTH_INFO, authenticate=check_user),
    "small": lambda: connected(limits=NatsLimits(max_payload=10)),
    "onesub": lambda: _with_sub(connected(limits=NatsLimits(max_subscriptions=1))),
}


def _with_sub(conn):
    pump(conn, b"SUB taken 1\r\n")
    conn.data_to_send()
    return conn


@dataclass(frozen=True)
class Bad:
    name: str
    data: bytes
    text: str | None
    closes: bool
    setup: str = "connected"
    extra: dict = field(default_factory=dict)


UNKNOWN = "Unknown Protocol Operation"
AUTHZ = "Authorization Violation"
MAXPAY = "Maximum Payload Violation"
MCL = "maximum control line exceeded"
CASES = [
    # -- unknown operations: -ERR, close (parser.go parseErr) --
    Bad("unknown_verb", b"FOO bar\r\n", UNKNOWN, True),
    Bad("client_msg", b"MSG foo 1 5\r\nhello\r\n", UNKNOWN, True),
    Bad("client_hmsg", b"HMSG foo 1 12 12\r\nNATS/1.0\r\n\r\n\r\n", UNKNOWN, True),
    Bad("empty_line", b"\r\n", UNKNOWN, True),
    Bad("leading_space", b" PING\r\n", UNKNOWN, True),
    Bad("pub_without_blank", b"PUB\r\n", UNKNOWN, True),
    Bad("pubx", b"PUBX foo 1\r\n", UNKNOWN, True),
    Bad("truncated_ping", b"PIN\r\n", UNKNOWN, True),
    Bad("sub_glued", b"SUBfoo 1\r\n", UNKNOWN, True),
    Bad("unsub_without_blank", b"UNSUB\r\n", UNKNOWN, True),
    Bad("err_without_blank", b"-ERR\r\n", UNKNOWN, True),
    Bad("plus_ox", b"+OX\r\n", UNKNOWN, True),
    Bad("route_sub", b"RS+ foo 1\r\n", UNKNOWN, True),
    Bad("leaf_sub", b"LS+ foo\r\n", UNKNOWN, True),
    Bad("account_sub", b"A+ foo\r\n", UNKNOWN, True),
    Bad("infx", b"INFX {}\r\n", UNKNOWN, True),
    Bad("connecx", b"CONNECX {}\r\n", UNKNOWN, True, setup="fresh"),
    Bad("payload_not_crlf", b"PUB foo 5\r\nhelloXX", UNKNOWN, True),
    Bad("size_too_small", b"PUB foo 3\r\nhello\r\n", UNKNOWN, True),
    Bad("payload_cr_without_lf", b"PUB foo 1\r\nx\rX", UNKNOWN, True),
    Bad("hpub_payload_not_crlf", b"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhiXX", UNKNOWN, True),
    Bad("binary_garbage", b"\x00\x01\x02", UNKNOWN, True),
    # -- limits --
    Bad("pub_over_max_payload", b"PUB foo 1048577\r\n", MAXPAY, True),
    Bad("hpub_total_over_max_payload", b"HPUB foo 12 1048577\r\n", MAXPAY, True),
    Bad("pub_over_configured_max", b"PUB foo 11\r\n01234567890\r\n", MAXPAY, True, setup="small"),
    Bad("max_payload_before_pedantic", b"PUB a.* 11\r\n", MAXPAY, True, setup="small"),
    Bad("long_pub_line", b"PUB " + b"a" * 4097 + b" 1\r\nx\r\n", MCL, True),
    Bad("long_unterminated_sub", b"SUB " + b"a" * 5000, MCL, True),
    Bad("long_connect", b'CONNECT {"name":"' + b"n" * 4100 + b'"}\r\n', MCL, True, setup="fresh"),
    Bad("long_err_line", b"-ERR " + b"e" * 4097 + b"\r\n", MCL, True),
    # -- CONNECT refused with -ERR (client.go processConnect) --
    Bad("protocol_2", b'CONNECT {"protocol":2}\r\n', "invalid client protocol", True, setup="fresh"),
    Bad("protocol_negative", b'CONNECT {"protocol":-1}\r\n', "invalid client protocol", True, setup="fresh"),
    Bad("no_responders_without_headers", b'CONNECT {"no_responders":true}\r\n',
        "no responders requires headers support", True, setup="fresh"),
    Bad("no_responders_headers_false", b'CONNECT {"no_responders":true,"headers":false}\r\n',
        "no responders requires headers support", True, setup="fresh"),
    Bad("obsolete_account", b'CONNECT {"account":"A"}\r\n', AUTHZ, True, setup="fresh"),
    Bad("obsolete_new_account", b'CONNECT {"new_account":true}\r\n', AUTHZ, True, setup="fresh"),
    # -- auth required: only CONNECT may come first --
    Bad("auth_pub_first", b"PUB foo 1\r\nx\r\n", AUTHZ, True, setup="auth"),
    Bad("auth_ping_first", b"PING\r\n", AUTHZ, True, setup="auth"),
    Bad("auth_ok_first", b"+OK\r\n", AUTHZ, True, setup="auth"),
    Bad("auth_lower_sub_first", b"sub foo 1\r\n", AUTHZ, True, setup="auth"),
    Bad("auth_bad_password", b'CONNECT {"user":"u","pass":"x"}\r\nPING\r\n', AUTHZ, True, setup="auth"),
    Bad("auth_no_credentials", b"CONNECT {}\r\nPING\r\n", AUTHZ, True, setup="auth"),
    Bad("auth_token_in_user", b'CONNECT {"user":"p"}\r\n', AUTHZ, True, setup="auth"),
    # -- closed without any -ERR --
    Bad("connect_bad_json", b"CONNECT {bad\r\n", None, True, setup="fresh"),
    Bad("connect_array", b"CONNECT []\r\n", None, True, setup="fresh"),
    Bad("connect_wrong_type", b'CONNECT {"verbose":"yes"}\r\n', None, True, setup="fresh"),
    Bad("connect_float_protocol", b'CONNECT {"protocol":1.0}\r\n', None, True, setup="fresh"),
    Bad("connect_nan", b'CONNECT {"protocol":NaN}\r\n', None, True, setup="fresh"),
    Bad("connect_empty", b"CONNECT\r\n", None, True, setup="fresh"),
    Bad("pub_one_arg", b"PUB foo\r\n", None, True),
    Bad("pub_four_args", b"PUB a b c 1\r\n", None, True),
    Bad("pub_negative_size", b"PUB foo -1\r\n", None, True),
    Bad("pub_non_numeric_size", b"PUB foo abc\r\n", None, True),
    Bad("pub_ten_digit_size", b"PUB foo 1234567890\r\n", None, True),
    Bad("pub_blank_arg", b"PUB \r\n", None, True),
    Bad("hpub_without_headers", b"HPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n", None, True, setup="noheaders"),
    Bad("hpub_before_connect", b"HPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n", None, True, setup="fresh"),
    Bad("hpub_without_headers_huge", b"HPUB foo 12 99999999\r\n", None, True, setup="noheaders"),
    Bad("hpub_header_over_total", b"HPUB foo 13 12\r\n", None, True),
    Bad("hpub_two_args", b"HPUB foo 12\r\n", None, True),
    Bad("hpub_bad_header_size", b"HPUB foo x 12\r\n", None, True),
    Bad("sub_one_arg", b"SUB foo\r\n", None, True),
    Bad("sub_four_args", b"SUB a b c d\r\n", None, True),
    Bad("unsub_blank", b"UNSUB \r\n", None, True),
    Bad("unsub_three_args", b"UNSUB 1 2 3\r\n", None, True),
    Bad("client_sends_err", b"-ERR 'boom'\r\n", None, True),
    Bad("client_info_array", b"INFO [1]\r\n", None, True),
    Bad("client_info_bad_json", b"INFO {bad\r\n", None, True),
    # -- refused, connection stays (replied with -ERR) --
    Bad("sub_double_dot", b"SUB foo..bar 1\r\n", "Invalid Subject", False),
    Bad("sub_fwc_not_last", b"SUB foo.>.bar 1\r\n", "Invalid Subject", False),
    Bad("sub_leading_dot", b"SUB .foo 1\r\n", "Invalid Subject", False),
    Bad("sub_trailing_dot", b"SUB foo. 1\r\n", "Invalid Subject", False),
    Bad("sub_queue_invalid_subject", b"SUB a..b q 1\r\n", "Invalid Subject", False),
    Bad("pedantic_wildcard_publish", b"PUB a.* 1\r\nx\r\n", "Invalid Publish Subject", False,
        setup="pedantic"),
    Bad("pedantic_empty_token", b"PUB a..b 1\r\nx\r\n", "Invalid Publish Subject", False, setup="pedantic"),
    Bad("pedantic_fwc_publish", b"HPUB > 12 12\r\nNATS/1.0\r\n\r\n\r\n", "Invalid Publish Subject", False,
        setup="pedantic"),
    Bad("pedantic_by_default_before_connect", b"PUB a.> 0\r\n\r\n", "Invalid Publish Subject", False,
        setup="fresh"),
    Bad("reserved_service_reply", b"PUB foo _R_.x 1\r\nx\r\n",
        'Permissions Violation for Publish with Reply of "_R_.x"', False),
    Bad("reserved_js_ack_reply", b"PUB foo $JS.ACK.s.c 1\r\nx\r\n",
        'Permissions Violation for Publish with Reply of "$JS.ACK.s.c"', False),
    Bad("reserved_gateway_reply", b"PUB foo _GR_.x 1\r\nx\r\n",
        'Permissions Violation for Publish with Reply of "_GR_.x"', False),
    Bad("gateway_prefix_subject", b"PUB _GR_.x 1\r\nx\r\n", 'Permissions Violation for Publish to "_GR_.x"',
        False),
    Bad("nrg_subject", b"PUB $NRG.x 1\r\nx\r\n", 'Permissions Violation for Publish to "$NRG.x"', False),
    Bad("quoted_subject_escapes", b'PUB _GR_."q\\ 1\r\nx\r\n',
        'Permissions Violation for Publish to "_GR_.\\"q\\\\"', False),
    Bad("sys_queue", b"SUB foo _sys_ 1\r\n",
        'Permissions Violation for Subscription to "foo" using queue "_sys_"', False),
    Bad("too_many_subscriptions", b"SUB more 2\r\n", "maximum subscriptions exceeded", False, setup="onesub"),
    Bad("publish_denied", b"PUB no.x 1\r\nx\r\n", 'Permissions Violation for Publish to "no.x"', False,
        setup="perms"),
    Bad("subscribe_denied", b"SUB no.x 1\r\n", 'Permissions Violation for Subscription to "no.x"', False,
        setup="perms"),
    Bad("queue_subscribe_denied", b"SUB ok.x other 1\r\n",
        'Permissions Violation for Subscription to "ok.x" using queue "other"', False, setup="perms"),
]


def run_case(case: Bad, chunks):
    conn = SETUPS[case.setup]()
    events, err = run_conn(conn, chunks)
    return conn, events, err, conn.data_to_send()


def test_table_is_big_enough():
    assert len(CASES) >= 40
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_malformed_input(case: Bad):
    conn, events, err, out = run_case(case, [case.data])
    assert (err is not None) == case.closes
    if case.closes:
        assert err.text == case.text
        assert err.wire == (err_frame(case.text) if case.text else b"")
        assert conn.state is ERROR
        with pytest.raises(NatsProtocolError) as again:   # the side stays in ERROR
            conn.next_event()
        assert again.value is err
        assert (case.text is None) or case.text in FATAL_TEXTS
        assert b"-ERR" not in out   # nothing but the final reply carries an error
    else:
        assert [f for f in out.split(b"\r\n") if f.startswith(b"-ERR")] == [err_frame(case.text)[:-2]]
        assert pump(conn, b"PING\r\n")[-1:]   # still open: the PING is answered
        assert conn.data_to_send().startswith(b"PONG\r\n")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_malformed_input_one_byte_at_a_time(case: Bad):
    whole = run_case(case, [case.data])
    split = run_case(case, one_byte_chunks(case.data))
    assert split[1] == whole[1]
    assert (split[2] and split[2].text, split[3]) == (whole[2] and whole[2].text, whole[3])


def test_pedantic_invalid_subject_is_still_delivered():
    """nats.md section 6: the -ERR is sent and the message delivered anyway."""
    conn = SETUPS["pedantic"]()
    assert pump(conn, b"PUB a.* 1\r\nx\r\n") == [Pub("a.*", "", b"x")]
    assert conn.data_to_send() == b"-ERR 'Invalid Publish Subject'\r\n"


def test_refused_publish_produces_no_event():
    conn = connected()
    assert pump(conn, b"PUB foo _R_.x 1\r\nx\r\nPUB ok 1\r\ny\r\n") == [Pub("ok", "", b"y")]


def test_verbose_pedantic_reply_order():
    """-ERR on the control line, then +OK once the message is processed (client.go)."""
    conn = connected(b"CONNECT {}\r\n")
    assert pump(conn, b"PUB a.* 0\r\n\r\n") == [Pub("a.*", "", b"")]
    assert conn.data_to_send() == b"-ERR 'Invalid Publish Subject'\r\n+OK\r\n"


def test_permission_refusal_has_no_ok_even_when_verbose():
    conn = connected(b'CONNECT {"user":"limited","pass":"p"}\r\n', info=AUTH_INFO, authenticate=check_user)
    assert pump(conn, b"SUB no.x 1\r\nPUB no.x 0\r\n\r\nSUB ok.x 2\r\n")[-1].sid == b"2"
    assert conn.data_to_send() == (b"-ERR 'Permissions Violation for Subscription to \"no.x\"'\r\n"
                                   b"-ERR 'Permissions Violation for Publish to \"no.x\"'\r\n+OK\r\n")


def test_setups_are_sane():
    assert SETUPS["fresh"]().info is SERVER
