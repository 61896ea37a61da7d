"""HttpServerConnection without sockets: bytes in, events out (STYLE.md section 6).

HTTP/1.1 requests are fed whole, one byte at a time and with a pipelined
request behind them; HTTP/2 runs back to back against h2's own client state
machine (aioquic's client_and_server pattern).
"""

from __future__ import annotations

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import h11
import pytest

from adapters.http.connection import H2_PREFACE, HttpServerConnection, State, StreamReset
from adapters.http.errors import Response
from adapters.http.events import NEED_DATA, ConnectionClosed, Request, RequestError
from adapters.http.limits import HttpLimits

GET = b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"
POST = b"POST /streams HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody"


def events(conn: HttpServerConnection) -> list:
    out = []
    while (ev := conn.next_event()) is not NEED_DATA:
        out.append(ev)
        if isinstance(ev, ConnectionClosed):
            break
    return out


def feed(conn, data: bytes, split: str) -> list:
    if split == "whole":
        conn.receive_data(data)
        return events(conn)
    got = []
    for i in range(len(data)):
        conn.receive_data(data[i:i + 1])
        got += events(conn)
    return got


@pytest.mark.parametrize("split", ["whole", "bytewise"])
def test_h1_request_detected_and_parsed(split):
    conn = HttpServerConnection()
    (req,) = feed(conn, POST, split)
    assert conn.state is State.HTTP1
    assert isinstance(req, Request) and (req.method, req.target, req.body) == ("POST", "/streams", b"body")
    assert req.header(b"host") == b"x" and req.http_version == "1.1"
    conn.send_response(req.stream_id, Response(200, ((b"content-type", b"text/plain"),), b"ok"))
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method="POST", target="/", headers=[("Host", "x"), ("Content-Length", "4")]))
    client.send(h11.Data(data=b"body"))
    client.send(h11.EndOfMessage())
    client.receive_data(conn.data_to_send())
    resp = client.next_event()
    assert resp.status_code == 200 and dict(resp.headers)[b"content-length"] == b"2"
    assert client.next_event().data == b"ok"


def test_h1_pipelined_requests_answered_in_order():
    conn = HttpServerConnection()
    conn.receive_data(GET + POST)
    (first,) = events(conn)
    assert first.target == "/ping" and conn.next_event() is NEED_DATA  # waits for our answer
    conn.send_response(first.stream_id, Response(200, (), b"pong"))
    (second,) = events(conn)
    assert second.target == "/streams" and second.stream_id == first.stream_id + 1


def test_h1_head_has_no_body():
    conn = HttpServerConnection()
    conn.receive_data(b"HEAD /ping HTTP/1.1\r\nHost: x\r\n\r\n")
    (req,) = events(conn)
    conn.send_response(req.stream_id, Response(200, (), b"pong"))
    out = conn.data_to_send()
    assert b"content-length: 4" in out.lower() and not out.endswith(b"pong")


def test_h1_content_length_over_limit_is_413_then_close():
    conn = HttpServerConnection(HttpLimits(max_body_bytes=10))
    conn.receive_data(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n")
    (err,) = events(conn)
    assert isinstance(err, RequestError) and err.error.status == 413 and err.error.field == "body"
    conn.send_response(err.stream_id, err.error.response())
    out = conn.data_to_send()
    assert out.startswith(b"HTTP/1.1 413") and b"connection: close" in out.lower()
    assert isinstance(conn.next_event(), ConnectionClosed)


def test_h1_chunked_body_over_limit_is_413():
    conn = HttpServerConnection(HttpLimits(max_body_bytes=10))
    conn.receive_data(b"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert events(conn) == []
    conn.receive_data(b"b\r\n" + b"x" * 11 + b"\r\n")
    (err,) = events(conn)
    assert err.error.status == 413


@pytest.mark.parametrize("raw", [b"GARBAGE\r\n\r\n", b"GET / HTTP/1.1\r\nBad Header\r\n\r\n",
                                 b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n"])
def test_h1_malformed_head_is_400_then_close(raw):
    conn = HttpServerConnection()
    conn.receive_data(raw)
    (err,) = events(conn)
    assert isinstance(err, RequestError) and err.error.status == 400
    conn.send_response(err.stream_id, err.error.response())
    assert conn.data_to_send().startswith(b"HTTP/1.1 400")
    assert isinstance(conn.next_event(), ConnectionClosed)


def test_h1_headers_too_large_is_431():
    conn = HttpServerConnection(HttpLimits(max_header_bytes=100))
    conn.receive_data(b"GET / HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 200)
    (err,) = events(conn)
    assert err.error.status == 431


def test_h1_expect_100_continue():
    conn = HttpServerConnection()
    conn.receive_data(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
    assert events(conn) == []
    assert conn.data_to_send().startswith(b"HTTP/1.1 100")


def test_prefix_of_preface_waits_then_mismatch_means_h1():
    conn = HttpServerConnection()
    conn.receive_data(b"P")
    assert conn.state is State.DETECTING and conn.next_event() is NEED_DATA
    conn.receive_data(b"OST /streams HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    (req,) = events(conn)
    assert conn.state is State.HTTP1 and req.method == "POST"


def test_eof_before_any_byte_closes():
    conn = HttpServerConnection()
    conn.receive_data(b"")
    assert isinstance(conn.next_event(), ConnectionClosed)


# -- HTTP/2 ---------------------------------------------------------------------------
def h2_client(settings: dict | None = None) -> h2.connection.H2Connection:
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
    client.initiate_connection()
    if settings:
        client.update_settings(settings)
    return client


def pump(client, server) -> list:
    """Exchange bytes until both sides are quiet; returns the client's events."""
    got = []
    while True:
        moved = False
        data = client.data_to_send()
        if data:
            server.receive_data(data)
            moved = True
        data = server.data_to_send()
        if data:
            got += client.receive_data(data)
            moved = True
        if not moved:
            return got


def h2_request(client, sid, method=b"GET", path=b"/ping", body=b"", end=True):
    headers = [(b":method", method), (b":path", path), (b":scheme", b"http"), (b":authority", b"x")]
    client.send_headers(sid, headers, end_stream=not body and end)
    if body:
        client.send_data(sid, body, end_stream=end)


@pytest.mark.parametrize("split", ["whole", "bytewise"])
def test_h2_prior_knowledge(split):
    server = HttpServerConnection()
    client = h2_client()
    h2_request(client, 1, b"POST", b"/streams", b'{"name":"a"}')
    data = client.data_to_send()
    assert data.startswith(H2_PREFACE)
    (req,) = [e for e in feed(server, data, split) if isinstance(e, Request)]
    assert server.state is State.HTTP2 and server.protocol == "h2"
    assert (req.stream_id, req.method, req.target, req.body, req.http_version) == (
        1, "POST", "/streams", b'{"name":"a"}', "2")
    server.send_response(1, Response(200, (), b"done"))
    got = pump(client, server)
    resp = next(e for e in got if isinstance(e, h2.events.ResponseReceived))
    assert dict(resp.headers)[b":status"] == b"200"
    assert b"".join(e.data for e in got if isinstance(e, h2.events.DataReceived)) == b"done"
    assert any(isinstance(e, h2.events.StreamEnded) for e in got)


def test_h2_response_respects_flow_control():
    server = HttpServerConnection()
    client = h2_client({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 100})
    h2_request(client, 1)
    pump(client, server)
    (req,) = events(server)
    body = bytes(range(256)) * 20  # 5120 bytes against a 100-byte stream window
    server.send_response(req.stream_id, Response(200, (), body))
    received = b""
    for _ in range(200):
        got = pump(client, server)
        chunks = [e for e in got if isinstance(e, h2.events.DataReceived)]
        assert sum(len(e.data) for e in chunks) <= 100  # never past the window we gave
        for e in chunks:
            received += e.data
            client.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
        if any(isinstance(e, h2.events.StreamEnded) for e in got):
            break
    assert received == body


def test_h2_concurrent_streams_interleave():
    server = HttpServerConnection()
    client = h2_client()
    for sid in (1, 3, 5):
        h2_request(client, sid, path=f"/p{sid}".encode())
    pump(client, server)
    reqs = events(server)
    assert [r.stream_id for r in reqs] == [1, 3, 5]
    server.send_response(5, Response(200, (), b"five"))  # answered out of order
    server.send_response(1, Response(200, (), b"one"))
    got = pump(client, server)
    ended = [e.stream_id for e in got if isinstance(e, h2.events.StreamEnded)]
    assert sorted(ended) == [1, 5]


def test_h2_body_over_limit_is_413_and_reset():
    server = HttpServerConnection(HttpLimits(max_body_bytes=10))
    client = h2_client()
    h2_request(client, 1, b"POST", b"/x", b"x" * 11, end=False)
    pump(client, server)
    (err,) = events(server)
    assert isinstance(err, RequestError) and err.error.status == 413 and err.stream_id == 1
    server.send_response(1, err.error.response())
    got = pump(client, server)
    assert dict(next(e for e in got if isinstance(e, h2.events.ResponseReceived)).headers)[b":status"] == b"413"
    reset = next(e for e in got if isinstance(e, h2.events.StreamReset))
    assert reset.error_code == 0  # NO_ERROR (RFC 9113 8.1)
    h2_request(client, 3)  # the connection lives on
    pump(client, server)
    assert [type(e) for e in events(server)] == [Request]


@pytest.mark.parametrize("length, body, end, detail", [
    (b"5", b"abc", True, "body of 3 bytes does not match content-length 5"),    # short at END_STREAM
    (b"2", b"abcd", False, "body is longer than content-length 2"),            # over it mid-stream
    (b"2", b"abcd", True, "body is longer than content-length 2"),
    (b"x1", b"ab", True, "content-length must be one decimal number"),         # not 1*DIGIT
])
def test_h2_content_length_mismatch_is_a_stream_error_not_a_connection_error(length, body, end, detail):
    """RFC 9113 8.1.1: a malformed request is a stream error (PROTOCOL_ERROR); h2 alone
    would tear the whole connection down. Here: 400 naming the field, RST_STREAM, and
    the connection serves the next stream."""
    server = HttpServerConnection()
    client = h2.connection.H2Connection(h2.config.H2Configuration(
        client_side=True, header_encoding=None, validate_outbound_headers=False))
    client.initiate_connection()
    client.send_headers(1, [(b":method", b"POST"), (b":path", b"/x"), (b":scheme", b"http"), (b":authority", b"x"),
                            (b"content-length", length)])
    client.send_data(1, body, end_stream=end)
    pump(client, server)
    (err,) = events(server)
    assert isinstance(err, RequestError) and err.stream_id == 1
    assert err.error.status == 400 and detail in err.error.reason and err.error.field == "content-length"
    server.send_response(1, err.error.response())
    got = pump(client, server)
    assert dict(next(e for e in got if isinstance(e, h2.events.ResponseReceived)).headers)[b":status"] == b"400"
    assert not any(isinstance(e, h2.events.ConnectionTerminated) for e in got)
    resets = [e for e in got if isinstance(e, h2.events.StreamReset)]
    if not end:  # the peer may still be sending: the stream is reset with PROTOCOL_ERROR
        assert [r.error_code for r in resets] == [h2.errors.ErrorCodes.PROTOCOL_ERROR]
    h2_request(client, 3)  # the connection lives on
    pump(client, server)
    assert [type(e) for e in events(server)] == [Request]


def test_h2_matching_content_length_and_head_are_accepted():
    server = HttpServerConnection()
    client = h2_client()
    client.send_headers(1, [(b":method", b"POST"), (b":path", b"/x"), (b":scheme", b"http"), (b":authority", b"x"),
                            (b"content-length", b"4")])
    client.send_data(1, b"abcd", end_stream=True)
    h2_request(client, 3, b"HEAD", b"/ping")
    pump(client, server)
    assert [(type(e), e.stream_id) for e in events(server)] == [(Request, 1), (Request, 3)]


def test_h2_peer_reset_is_reported_and_late_answer_ignored():
    server = HttpServerConnection()
    client = h2_client()
    h2_request(client, 1)
    pump(client, server)
    (req,) = events(server)
    client.reset_stream(1)
    pump(client, server)
    assert events(server) == [StreamReset(1)]
    server.send_response(1, Response(200, (), b"late"))  # must not raise
    assert server.data_to_send() == b""


def test_h2_garbage_after_preface_closes_with_goaway():
    server = HttpServerConnection()
    server.receive_data(H2_PREFACE + b"\x00\x00\x04\x09\x00\x00\x00\x00\x01abcd")  # CONTINUATION out of place
    assert isinstance(events(server)[-1], ConnectionClosed)
    assert server.data_to_send()  # our SETTINGS and the GOAWAY


# -- h2c upgrade ------------------------------------------------------------------------
def upgrade_request(settings: bytes, body: bytes = b"") -> bytes:
    head = (b"POST /users/login HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\n"
            b"Upgrade: h2c\r\nHTTP2-Settings: " + settings + b"\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n")
    return head + body


def test_h2c_upgrade_becomes_stream_1():
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
    settings = client.initiate_upgrade_connection()
    server = HttpServerConnection()
    server.receive_data(upgrade_request(settings, b"{}") + client.data_to_send())
    (req,) = events(server)
    assert server.state is State.HTTP2 and req.stream_id == 1 and req.body == b"{}"
    out = server.data_to_send()
    assert out.startswith(b"HTTP/1.1 101 ")
    server.send_response(1, Response(200, (), b"ok"))
    got = client.receive_data(out.split(b"\r\n\r\n", 1)[1] + server.data_to_send())
    assert b"".join(e.data for e in got if isinstance(e, h2.events.DataReceived)) == b"ok"


def test_h2c_upgrade_refused_over_tls_and_with_bad_settings():
    conn = HttpServerConnection(tls=True)
    conn.receive_data(upgrade_request(b"AAMAAABkAAQAAP__"))
    (req,) = events(conn)
    assert conn.state is State.HTTP1 and isinstance(req, Request)  # answered as plain HTTP/1.1
    bad = HttpServerConnection()
    bad.receive_data(upgrade_request(b"!!notbase64!!"))
    assert isinstance(events(bad)[-1], ConnectionClosed)


@pytest.mark.parametrize("digits", [19, 5000])
def test_content_length_with_many_digits_is_413_not_a_crash(digits):
    conn = HttpServerConnection(HttpLimits(max_header_bytes=8000))
    conn.receive_data(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: " + b"9" * digits + b"\r\n\r\n")
    (err,) = events(conn)
    assert isinstance(err, RequestError) and err.error.status in (400, 413)


def test_h1_streamed_response_is_chunked():
    conn = HttpServerConnection()
    conn.receive_data(GET)
    (req,) = events(conn)
    assert conn.start_response(req.stream_id, 200, ((b"content-type", b"text/event-stream"),))
    conn.send_body(req.stream_id, b"data: 1\n\n")
    conn.send_body(req.stream_id, b"data: 2\n\n")
    conn.end_response(req.stream_id)
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    client.send(h11.EndOfMessage())
    client.receive_data(conn.data_to_send())
    head = client.next_event()
    assert dict(head.headers)[b"transfer-encoding"] == b"chunked"
    body = b""
    while not isinstance(ev := client.next_event(), h11.EndOfMessage):
        body += ev.data
    assert body == b"data: 1\n\ndata: 2\n\n"
    conn.receive_data(GET)  # keep-alive: the next request is served
    assert isinstance(events(conn)[0], Request)


def test_h2_streamed_response_waits_for_window():
    server = HttpServerConnection()
    client = h2_client({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 10})
    h2_request(client, 1)
    pump(client, server)
    (req,) = events(server)
    assert server.start_response(1, 200, ())
    server.send_body(1, b"x" * 25)
    got = pump(client, server)
    assert sum(len(e.data) for e in got if isinstance(e, h2.events.DataReceived)) == 10
    assert server.pending_bytes(1) == 15
    server.end_response(1)
    received = 10
    for e in got:
        if isinstance(e, h2.events.DataReceived):
            client.acknowledge_received_data(e.flow_controlled_length, 1)
    for _ in range(10):
        got = pump(client, server)
        for e in got:
            if isinstance(e, h2.events.DataReceived):
                received += len(e.data)
                client.acknowledge_received_data(e.flow_controlled_length, 1)
        if any(isinstance(e, h2.events.StreamEnded) for e in got):
            break
    assert received == 25 and server.pending_bytes(1) == 0
