"""adapters.nats.connection: the server-side state machine (time is an argument)."""

from __future__ import annotations

import json

import pytest

from adapters.nats.connection import (
    DeferredAuth,
    AWAIT_CONNECT,
    CLOSED,
    CONNECTED,
    ERROR,
    OPEN_TRANSITIONS,
    TRANSITIONS,
    NatsLimits,
    NatsServerConnection,
    ServerInfo,
    is_reserved_reply,
)
from adapters.nats.errors import NatsLocalProtocolError, NatsProtocolError
from adapters.nats.events import (
    NEED_DATA,
    Connect,
    ConnectionClosed,
    Err,
    HMsg,
    HPub,
    Info,
    Msg,
    Ok,
    Ping,
    Pong,
    Pub,
    Sub,
    Unsub,
)
from core.errors import InvalidArgument

from natsproto_helpers import NATS_PY_CONNECT, SERVER, connected, new_conn, pump

AUTH = ServerInfo("NAUTH", auth_required=True)


def creds(connect: Connect) -> bool:
    return connect.auth_token == "s3cret"


def info_json(frame: bytes) -> dict:
    assert frame.startswith(b"INFO ") and frame.endswith(b" \r\n")
    return json.loads(frame[5:-3])


# -- INFO --------------------------------------------------------------------------
def test_info_is_queued_first_with_required_fields():
    conn = NatsServerConnection(SERVER, client_id=3, client_ip="192.0.2.1")
    assert conn.state is AWAIT_CONNECT
    frame = conn.data_to_send()
    assert frame == (b'INFO {"server_id":"NTEST","server_name":"NTEST","version":"2.10.0","proto":1,'
                     b'"go":"go-test","host":"127.0.0.1","port":4222,"headers":true,'
                     b'"max_payload":1048576,"client_id":3,"client_ip":"192.0.2.1"} \r\n')
    assert conn.data_to_send() == b""


def test_info_optional_fields():
    info = ServerInfo("S", server_name="name", auth_required=True, tls_required=True, tls_verify=True,
                      git_commit="abc")
    conn = NatsServerConnection(info, NatsLimits(max_payload=512), client_id=1, client_ip="::1",
                                authenticate=creds, nonce="n0nce")
    fields = info_json(conn.data_to_send())
    assert list(fields) == ["server_id", "server_name", "version", "proto", "git_commit", "go", "host",
                            "port",
                            "headers", "auth_required", "tls_required", "tls_verify", "max_payload",
                            "client_id", "client_ip", "nonce"]
    assert (fields["max_payload"], fields["nonce"], fields["server_name"]) == (512, "n0nce", "name")
    assert "tls_available" not in fields and "connect_urls" not in fields


def test_constructor_checks():
    with pytest.raises(InvalidArgument):
        NatsServerConnection(SERVER, client_id=0, client_ip="x")
    with pytest.raises(InvalidArgument):
        NatsServerConnection(AUTH, client_id=1, client_ip="x")
    with pytest.raises(InvalidArgument):
        NatsLimits(max_payload=-1)
    with pytest.raises(InvalidArgument):
        NatsLimits(ping_interval=0)


def test_async_info_send():
    conn = connected()
    conn.send(Info({"ldm": True}))
    fields = info_json(conn.data_to_send())
    assert fields["ldm"] is True and list(fields)[-1] == "ldm"


# -- CONNECT, before and after ----------------------------------------------------------
def test_nats_py_handshake():
    """nats-py: CONNECT + PING back to back; the first line back must be PONG,
    then nats-server's connect_info INFO (protocol 1)."""
    conn = new_conn()
    events = pump(conn, NATS_PY_CONNECT + b"PING\r\n")
    assert [type(e) for e in events] == [Connect, Ping]
    assert conn.state is CONNECTED and conn.headers and conn.no_responders and conn.echo
    out = conn.data_to_send()
    assert out.startswith(b"PONG\r\nINFO ")
    fields = info_json(out[6:])
    assert fields["connect_info"] is True and fields["remote_account"] == "$G"
    pump(conn, b"PING\r\n")
    assert conn.data_to_send() == b"PONG\r\n"   # connect_info only once


def test_connect_info_not_sent_to_protocol_zero():
    conn = connected(b'CONNECT {"verbose":false,"protocol":0}\r\n')
    pump(conn, b"PING\r\n")
    assert conn.data_to_send() == b"PONG\r\n"


def test_connect_defaults_are_verbose_pedantic_echo():
    conn = new_conn()
    [event] = pump(conn, b"CONNECT {}\r\n")
    assert (event.verbose, event.pedantic, event.echo, event.headers) == (True, True, True, False)
    assert conn.data_to_send() == b"+OK\r\n"


def test_telnet_ops_before_connect_use_default_options():
    """No auth: PING/SUB/PUB work before CONNECT (nats.md section 1), verbose on."""
    conn = new_conn()
    events = pump(conn, b"PING\r\nSUB foo 1\r\nPUB foo 2\r\nhi\r\n")
    assert [type(e) for e in events] == [Ping, Sub, Pub]
    assert conn.state is AWAIT_CONNECT
    assert conn.data_to_send() == b"PONG\r\n+OK\r\n+OK\r\n"   # no connect_info before CONNECT


def test_second_connect_merges_options():
    conn = connected(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"name":"a"}\r\n')
    [event] = pump(conn, b'CONNECT {"name":"b"}\r\n')
    assert (event.name, event.verbose, event.headers, event.fields) == ("b", False, True, frozenset({"name"}))
    assert conn.options is event and conn.data_to_send() == b""


def test_headers_need_server_support():
    conn = connected(b'CONNECT {"verbose":false,"headers":true}\r\n', info=ServerInfo("S", headers=False))
    assert not conn.headers
    with pytest.raises(NatsProtocolError) as info:
        pump(conn, b"HPUB a 12 12\r\nNATS/1.0\r\n\r\n\r\n")
    assert info.value.wire == b""


# -- auth --------------------------------------------------------------------------
def test_auth_success_then_traffic():
    conn = new_conn(info=AUTH, authenticate=creds)
    assert conn.next_deadline() == 2.0          # auth timeout before the ping timer
    events = pump(conn, b'CONNECT {"verbose":false,"auth_token":"s3cret"}\r\nPUB a 0\r\n\r\n', now=0.5)
    assert [type(e) for e in events] == [Connect, Pub]
    assert conn.state is CONNECTED and conn.permissions is None
    assert conn.next_deadline() == 2.5          # first ping 2 s after CONNECT, auth timer gone


def test_auth_verbose_ok_after_connect():
    conn = new_conn(info=AUTH, authenticate=creds)
    pump(conn, b'CONNECT {"auth_token":"s3cret"}\r\n')
    assert conn.data_to_send() == b"+OK\r\n"


def test_auth_failure_is_authorization_violation():
    conn = new_conn(info=AUTH, authenticate=creds)
    with pytest.raises(NatsProtocolError) as info:
        pump(conn, b'CONNECT {"auth_token":"nope"}\r\nPING\r\n')
    assert info.value.wire == b"-ERR 'Authorization Violation'\r\n"
    assert conn.state is ERROR and conn.next_deadline() is None
    assert conn.data_to_send() == b""


def _deferred(connect: Connect):
    """An authenticator that wants a worker thread: the test plays the driver."""
    return DeferredAuth(lambda: connect.auth_token, lambda token: token == "s3cret")


@pytest.mark.parametrize("split", [None, 1])
def test_deferred_auth_parses_nothing_more_until_resumed(split):
    """A slow credential check (DeferredAuth): the connection holds every byte after
    CONNECT, whole or fed one byte at a time, until resume_auth gives the verdict."""
    conn = new_conn(info=AUTH, authenticate=_deferred)
    data = b'CONNECT {"verbose":true,"auth_token":"s3cret"}\r\nPUB a 2\r\nhi\r\nPING\r\n'
    chunks = [data] if split is None else [data[i:i + 1] for i in range(len(data))]
    events = []
    for chunk in chunks:
        events += pump(conn, chunk)
    assert events == [] and conn.auth_pending is not None and conn.state is AWAIT_CONNECT
    assert conn.next_runs([]) == 0 and conn.data_to_send() == b""
    pending = conn.auth_pending
    connect = conn.resume_auth(pending.finish(pending.work()))
    assert isinstance(connect, Connect) and conn.state is CONNECTED and conn.auth_pending is None
    assert [type(e) for e in pump(conn, b"")] == [Pub, Ping]
    assert conn.data_to_send() == b"+OK\r\n+OK\r\nPONG\r\n"


def test_deferred_auth_refused_is_authorization_violation():
    conn = new_conn(info=AUTH, authenticate=_deferred)
    assert pump(conn, b'CONNECT {"auth_token":"nope"}\r\nPING\r\n') == []
    pending = conn.auth_pending
    with pytest.raises(NatsProtocolError) as info:
        conn.resume_auth(pending.finish(pending.work()))
    assert info.value.wire == b"-ERR 'Authorization Violation'\r\n" and conn.state is ERROR
    with pytest.raises(NatsLocalProtocolError):
        conn.resume_auth(True)   # nothing pending any more


def test_auth_timeout():
    conn = new_conn(info=AUTH, authenticate=creds, now=100.0)
    conn.handle_deadline(101.9)
    assert conn.state is AWAIT_CONNECT
    with pytest.raises(NatsProtocolError) as info:
        conn.handle_deadline(102.0)
    assert info.value.wire == b"-ERR 'Authentication Timeout'\r\n"
    assert conn.state is ERROR
    with pytest.raises(NatsProtocolError):
        conn.next_event()


def test_auth_permissions_returned_by_authenticator():
    class Perms:
        def can_publish(self, subject):
            return False

        def can_subscribe(self, subject, queue):
            return True

    perms = Perms()
    conn = new_conn(info=AUTH, authenticate=lambda c: perms)
    pump(conn, b'CONNECT {"verbose":false}\r\n')
    assert conn.permissions is perms
    assert pump(conn, b"PUB a 0\r\n\r\nSUB a 1\r\n") == [Sub("a", "", b"1")]
    assert conn.data_to_send() == b"-ERR 'Permissions Violation for Publish to \"a\"'\r\n"


# -- verbose ----------------------------------------------------------------------
def test_verbose_ok_after_each_operation():
    conn = connected(b'CONNECT {"headers":true}\r\n')
    events = pump(conn, b"SUB a 1\r\nPUB a 1\r\nx\r\nHPUB a 12 12\r\nNATS/1.0\r\n\r\n\r\n"
                        b"UNSUB 1\r\nUNSUB 99\r\nPING\r\nPONG\r\n+OK\r\nINFO {}\r\n")
    assert [type(e) for e in events] == [Sub, Pub, HPub, Unsub, Ping, Pong]
    out = conn.data_to_send()
    assert out == b"+OK\r\n" * 5 + b"PONG\r\n"   # UNSUB of an unknown sid gets +OK too


def test_duplicate_sid_ignored_with_ok_invalid_subject_without():
    conn = connected(b"CONNECT {}\r\n")
    events = pump(conn, b"SUB a 1\r\nSUB b 1\r\nSUB a..b 2\r\n")
    assert [e.subject for e in events] == ["a"]
    assert conn.subscriptions.get(b"1").subject == "a"
    assert conn.data_to_send() == b"+OK\r\n+OK\r\n-ERR 'Invalid Subject'\r\n"


# -- subscriptions ----------------------------------------------------------------
def test_sub_and_unsub_carry_the_subscription():
    conn = connected()
    [sub_event] = pump(conn, b"SUB orders.* workers 5\r\n")
    sub = sub_event.subscription
    assert (sub.sid, sub.subject, sub.queue, sub.closed) == (b"5", "orders.*", "workers", False)
    [unsub_event] = pump(conn, b"UNSUB 5\r\n")
    assert unsub_event.subscription is sub and sub.closed
    assert b"5" not in conn.subscriptions
    assert pump(conn, b"UNSUB 5\r\n") == []        # unknown sid: no event, no error
    assert conn.data_to_send() == b""


def test_unsub_with_max_is_auto_unsubscribe():
    """nats.md section 7: UNSUB 1 2 then three messages -> two deliveries."""
    conn = connected()
    [sub_event] = pump(conn, b"SUB inbox 1\r\n")
    sub = sub_event.subscription
    [unsub_event] = pump(conn, b"UNSUB 1 2\r\n")
    assert unsub_event.max_msgs == 2 and not sub.closed
    delivered = 0
    for _ in range(3):
        if sub.closed:
            break
        delivered += 1
        if sub.record_delivery():
            conn.subscriptions.remove(sub)
    assert delivered == 2 and sub.closed and len(conn.subscriptions) == 0


def test_unsub_max_at_or_below_delivered_removes_now():
    conn = connected()
    [sub_event] = pump(conn, b"SUB a 1\r\n")
    sub = sub_event.subscription
    sub.record_delivery()
    sub.record_delivery()
    [unsub_event] = pump(conn, b"UNSUB 1 2\r\n")
    assert unsub_event.subscription.closed and b"1" not in conn.subscriptions


def test_subscription_limit():
    conn = connected(limits=NatsLimits(max_subscriptions=2))
    pump(conn, b"SUB a 1\r\nSUB b 2\r\nSUB c 3\r\n")
    assert conn.data_to_send() == b"-ERR 'maximum subscriptions exceeded'\r\n"
    pump(conn, b"UNSUB 1\r\nSUB c 3\r\n")
    assert b"3" in conn.subscriptions and conn.data_to_send() == b""


def test_subscriptions_clear_on_close():
    conn = connected()
    pump(conn, b"SUB a 1\r\nSUB b 2\r\n")
    dropped = conn.subscriptions.clear()
    assert [s.sid for s in dropped] == [b"1", b"2"] and all(s.closed for s in dropped)


# -- ping / pong deadlines ----------------------------------------------------------------
def test_ping_timer_before_connect_is_ping_interval():
    conn = new_conn(now=10.0)
    assert conn.next_deadline() == 130.0


def test_first_ping_after_connect_with_jitter():
    conn = new_conn(rng=lambda: 1.0)
    pump(conn, b"CONNECT {}\r\n", now=5.0)
    assert conn.next_deadline() == pytest.approx(5.0 + 2.0 * 1.2)


def test_ping_then_stale_connection():
    conn = connected(now=0.0)
    assert conn.next_deadline() == 2.0
    conn.handle_deadline(1.0)                        # not due yet: nothing happens
    assert conn.data_to_send() == b""
    conn.handle_deadline(2.0)
    assert conn.data_to_send() == b"PING\r\n" and conn.pings_out == 1
    assert conn.next_deadline() == 122.0
    conn.handle_deadline(122.0)
    assert conn.data_to_send() == b"PING\r\n" and conn.pings_out == 2
    with pytest.raises(NatsProtocolError) as info:
        conn.handle_deadline(242.0)
    assert info.value.wire == b"-ERR 'Stale Connection'\r\n"
    assert conn.state is ERROR and conn.next_deadline() is None


def test_pong_resets_outstanding_pings():
    conn = connected(now=0.0)
    conn.handle_deadline(2.0)
    conn.handle_deadline(122.0)
    assert conn.pings_out == 2
    assert pump(conn, b"PONG\r\n", now=123.0) == [Pong()]
    assert conn.pings_out == 0
    conn.handle_deadline(242.0)
    conn.handle_deadline(362.0)
    assert conn.state is CONNECTED and conn.pings_out == 2


def test_ping_skipped_while_client_is_active():
    """processPingTimer: no PING when the client sent messages within the
    interval and the RTT is fresh (measured within the hour)."""
    conn = connected(now=0.0)
    conn.handle_deadline(2.0)
    pump(conn, b"PONG\r\n", now=2.1)
    conn.data_to_send()
    pump(conn, b"PUB a 0\r\n\r\n", now=100.0)
    conn.handle_deadline(122.0)
    assert conn.data_to_send() == b"" and conn.next_deadline() == 242.0
    conn.handle_deadline(242.0)                       # idle for a whole interval: PING
    assert conn.data_to_send() == b"PING\r\n"


def test_pong_alone_is_not_activity():
    conn = connected(now=0.0)
    conn.handle_deadline(2.0)
    pump(conn, b"PONG\r\n", now=2.1)
    conn.data_to_send()
    pump(conn, b"PONG\r\n", now=100.0)
    conn.handle_deadline(122.0)
    assert conn.data_to_send() == b"PING\r\n"


def test_ping_sent_when_rtt_is_stale_despite_activity():
    conn = connected(now=0.0)
    conn.handle_deadline(2.0)
    pump(conn, b"PONG\r\nPING\r\n", now=2.1)   # the first PING's connect_info INFO is drained here
    conn.data_to_send()
    t = 2.0
    while t < 3700:
        t += 120.0
        pump(conn, b"PING\r\n", now=t - 1.0)
        conn.handle_deadline(t)
        out = conn.data_to_send().replace(b"PONG\r\n", b"")
        if out:
            break
    assert out.startswith(b"PING\r\n") and t > 3600


def test_client_ping_gets_pong_in_order():
    conn = connected()
    pump(conn, b"PING\r\n")
    conn.data_to_send()
    pump(conn, b"SUB a 1\r\nPING\r\nPING\r\n")
    assert conn.data_to_send() == b"PONG\r\nPONG\r\n"


def test_sent_ping_counts_as_outstanding():
    conn = connected(now=7.0)
    conn.send(Ping())
    assert conn.pings_out == 1 and conn.data_to_send() == b"PING\r\n"


# -- sending ----------------------------------------------------------------------
def test_send_messages_and_controls():
    conn = connected()
    conn.send(Msg("foo", b"1", "", b"hello"))
    conn.send(Msg("foo", b"1", "bar", b"hi"))
    conn.send(HMsg("h", b"1", "r", b"NATS/1.0\r\nA: 1\r\na: 2\r\nA: 3\r\n\r\n", b"ok"))
    conn.send(HMsg("h", b"2", "", b"", b"plain"))
    conn.send(Pong())
    conn.send(Ok())
    conn.send(Err("Invalid Subject"))
    assert conn.data_to_send() == (
        b"MSG foo 1 5\r\nhello\r\nMSG foo 1 bar 2\r\nhi\r\n"
        b"HMSG h 1 r 30 32\r\nNATS/1.0\r\nA: 1\r\na: 2\r\nA: 3\r\n\r\nok\r\n"
        b"MSG h 2 5\r\nplain\r\nPONG\r\n+OK\r\n-ERR 'Invalid Subject'\r\n")


def test_hmsg_to_client_without_headers_is_msg_with_payload_only():
    conn = connected(b'CONNECT {"verbose":false}\r\n')
    conn.send(HMsg("h", b"1", "", b"NATS/1.0\r\nA: 1\r\n\r\n", b"ok"))
    assert conn.data_to_send() == b"MSG h 1 2\r\nok\r\n"


def test_send_refuses_client_events_and_closed_connections():
    conn = connected()
    with pytest.raises(NatsLocalProtocolError):
        conn.send(Pub("a", "", b""))
    conn.close()
    assert conn.state is CLOSED and conn.next_deadline() is None
    with pytest.raises(NatsLocalProtocolError):
        conn.send(Ping())
    conn.close()   # idempotent


# -- end of stream ----------------------------------------------------------------
def test_eof_returns_connection_closed_once_partial_dropped():
    conn = connected()
    conn.receive_data(b"PUB a 1\r\nx\r\nPUB b 5\r\nhel")
    conn.receive_data(b"")
    assert conn.next_event() == Pub("a", "", b"x")
    assert conn.next_event() == ConnectionClosed()
    assert conn.state is CLOSED
    assert conn.next_event() is NEED_DATA
    with pytest.raises(NatsLocalProtocolError):
        conn.receive_data(b"more")


def test_deadlines_ignored_after_close():
    conn = connected()
    conn.close()
    conn.handle_deadline(1e9)
    assert conn.data_to_send() == b""


# -- the transition table -------------------------------------------------------------
def test_transition_table_shape():
    client_ops = {Connect, Pub, HPub, Sub, Unsub, Ping, Pong, Ok, Info, Err}
    assert {k for (s, k) in TRANSITIONS if s is CONNECTED} == client_ops
    assert {k for (s, k) in TRANSITIONS if s is AWAIT_CONNECT} == {Connect}
    assert {k for (s, k) in OPEN_TRANSITIONS if s is AWAIT_CONNECT} == client_ops
    assert all(next_state in (CONNECTED, AWAIT_CONNECT) for _, next_state in OPEN_TRANSITIONS.values())
    assert not any(s in (CLOSED, ERROR) for s, _ in OPEN_TRANSITIONS)


def test_missing_row_refused_in_one_place():
    conn = new_conn(info=AUTH, authenticate=creds)
    with pytest.raises(NatsProtocolError) as info:
        conn._refuse(Pub("a", "", b""))
    assert info.value.text == "Authorization Violation"


@pytest.mark.parametrize(("reply", "reserved"), [
    ("_R_.x", True), ("_R_.", True), ("_R_", False), ("$JS.ACK.a", True), ("$JS.ACK.", False),
    ("_GR_.a", True), ("_GR_.", False), ("_INBOX.abc", False), ("$JS.API.x", False),
])
def test_reserved_replies(reply, reserved):
    assert is_reserved_reply(reply) is reserved
