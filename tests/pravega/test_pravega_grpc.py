"""The sans-I/O unary gRPC server, driven by an in-process h2 client (STYLE.md 6.1, 6.3)."""

from __future__ import annotations

from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.errors
import h2.events
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.pravega import controller_proto as cp
from adapters.pravega.grpc import (MAX_HEADER_LIST, MAX_MESSAGE, PREFIX, GrpcServerConnection, GrpcStatus,
                                   UnaryCall, percent_encode)

PATH = f"/{cp.SERVICE}/createScope".encode()


def frame(body: bytes, flag: int = 0) -> bytes:
    return PREFIX.pack(flag, len(body)) + body


@dataclass
class Response:
    headers: dict = field(default_factory=dict)
    data: bytearray = field(default_factory=bytearray)
    trailers: dict = field(default_factory=dict)
    ended: bool = False
    reset: int | None = None

    @property
    def status(self) -> dict:
        """grpc-status/grpc-message, from the trailers or a Trailers-Only HEADERS frame."""
        return self.trailers or self.headers


class Pair:
    """A GrpcServerConnection and an h2 client wired back to back."""

    def __init__(self, *, handshake: bool = True, client_acks: bool = True, **server_kw) -> None:
        self.server = GrpcServerConnection(**server_kw)
        self.server.initiate()
        self.client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
        self.client.initiate_connection()
        self.client_acks = client_acks
        self.responses: dict[int, Response] = {}
        self.goaway: int | None = None  # the error code of the server's GOAWAY
        if handshake:
            self.exchange()

    def request(self, sid: int, body: bytes = b"", *, path: bytes = PATH, method: bytes = b"POST",
                content_type: bytes | None = b"application/grpc", framed: bytes | None = None,
                end: bool = True, extra=()) -> None:
        headers = [(b":method", method), (b":scheme", b"http"), (b":path", path), (b":authority", b"localhost")]
        if content_type is not None:
            headers.append((b"content-type", content_type))
        headers += [(b"te", b"trailers"), *extra]
        data = frame(body) if framed is None else framed
        self.client.send_headers(sid, headers, end_stream=end and not data)
        step = self.client.max_outbound_frame_size
        for at in range(0, len(data), step):  # within the initial windows: tests stay under 64 KiB
            self.client.send_data(sid, data[at:at + step], end_stream=end and at + step >= len(data))

    def exchange(self, *, bytewise: bool = False) -> list[UnaryCall]:
        """Shuttle bytes both ways until both sides are quiet; the calls the server saw.
        ``bytewise`` feeds the server one byte at a time."""
        calls: list[UnaryCall] = []
        for _ in range(1000):
            data = self.client.data_to_send()
            if bytewise:
                calls += [call for i in range(len(data)) for call in self.server.receive_data(data[i:i + 1])]
            elif data:
                calls += self.server.receive_data(data)
            out = self.server.data_to_send()
            if not data and not out:
                return calls
            for ev in self.client.receive_data(out):
                self._record(ev)
        raise AssertionError("the pair did not settle")

    def _record(self, ev) -> None:
        if isinstance(ev, h2.events.ConnectionTerminated):
            self.goaway = ev.error_code
            return
        response = self.responses.setdefault(getattr(ev, "stream_id", 0), Response())
        if isinstance(ev, h2.events.ResponseReceived):
            response.headers = dict(ev.headers)
        elif isinstance(ev, h2.events.DataReceived):
            response.data += ev.data
            if self.client_acks:
                self.client.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.TrailersReceived):
            response.trailers = dict(ev.headers)
        elif isinstance(ev, h2.events.StreamEnded):
            response.ended = True
        elif isinstance(ev, h2.events.StreamReset):
            response.reset = ev.error_code


def assert_refused(response: Response, status: GrpcStatus, http: bytes = b"200", *, reset: bool = False) -> None:
    assert response.headers[b":status"] == http
    assert response.headers[b"content-type"] == b"application/grpc"
    assert response.headers[b"grpc-status"] == str(int(status)).encode()
    assert response.headers.get(b"grpc-message")
    assert not response.data and not response.trailers
    assert response.ended
    assert response.reset == (h2.errors.ErrorCodes.NO_ERROR if reset else None)


# -- the happy path ----------------------------------------------------------------
def test_unary_round_trip():
    pair = Pair()
    body = cp.ScopeInfo("sc1").encode()
    pair.request(1, body, extra=[(b"grpc-timeout", b"30S")])
    (call,) = pair.exchange()
    assert call == UnaryCall(1, cp.SERVICE, "createScope", body, (
        ("content-type", "application/grpc"), ("te", "trailers"), ("grpc-timeout", "30S")))
    request_cls, response_cls = cp.RPCS[call.method]
    assert request_cls.decode(call.body) == cp.ScopeInfo("sc1")
    reply = response_cls(cp.CreateScopeStatus.Status.SCOPE_EXISTS).encode()
    pair.server.reply(1, reply)
    pair.exchange()
    response = pair.responses[1]
    assert response.headers == {b":status": b"200", b"content-type": b"application/grpc"}
    assert bytes(response.data) == frame(reply) == bytes.fromhex("00 00000002 0802")
    assert response.trailers == {b"grpc-status": b"0"}
    assert response.ended and response.reset is None


def test_an_empty_message_is_a_call_with_an_empty_body():
    pair = Pair()
    pair.request(1, b"")
    (call,) = pair.exchange()
    assert call.body == b"" and cp.ScopeInfo.decode(call.body) == cp.ScopeInfo()
    pair.server.reply(1, b"")
    pair.exchange()
    assert bytes(pair.responses[1].data) == b"\x00\x00\x00\x00\x00"


def test_bytes_fed_one_at_a_time_give_the_same_calls():
    calls = {}
    for bytewise in (False, True):
        pair = Pair(handshake=False)  # the preface and SETTINGS travel with the requests
        pair.request(1, cp.ScopeInfo("sc1").encode())
        pair.request(3, cp.StreamInfo("sc1", "st1").encode(), path=f"/{cp.SERVICE}/getCurrentSegments".encode())
        calls[bytewise] = pair.exchange(bytewise=bytewise)
        for call in calls[bytewise]:
            pair.server.reply(call.stream_id, b"\x08\x01")
        pair.exchange()
        assert all(pair.responses[sid].trailers == {b"grpc-status": b"0"} for sid in (1, 3))
    assert calls[True] == calls[False] and [c.method for c in calls[True]] == ["createScope", "getCurrentSegments"]


@settings(max_examples=50, deadline=None)
@given(cuts=st.lists(st.integers(min_value=1, max_value=400), max_size=8))
def test_splitting_the_byte_stream_anywhere_gives_the_same_calls(cuts):
    pair = Pair(handshake=False)
    pair.request(1, cp.ScopeInfo("sc1").encode())
    pair.request(3, b"x" * 300, path=f"/{cp.SERVICE}/getURI".encode())
    data = pair.client.data_to_send()
    calls, last = [], 0
    for cut in sorted({min(c, len(data)) for c in cuts} | {len(data)}):  # never b"": that is EOF
        calls += pair.server.receive_data(data[last:cut])
        last = cut
    assert not pair.server.closed
    assert [(c.stream_id, c.method, c.body) for c in calls] == [
        (1, "createScope", cp.ScopeInfo("sc1").encode()), (3, "getURI", b"x" * 300)]


def test_two_concurrent_calls_answered_out_of_order():
    pair = Pair()
    pair.request(1, cp.ScopeInfo("a").encode())
    pair.request(3, cp.ScopeInfo("b").encode())
    calls = pair.exchange()
    assert [(c.stream_id, cp.ScopeInfo.decode(c.body).scope) for c in calls] == [(1, "a"), (3, "b")]
    pair.server.reply(3, b"\x08\x02")
    pair.exchange()
    assert pair.responses[3].ended and 1 not in pair.responses
    pair.server.fail(1, GrpcStatus.UNAVAILABLE, "later")
    pair.exchange()
    assert bytes(pair.responses[3].data) == frame(b"\x08\x02")
    assert pair.responses[1].headers[b"grpc-status"] == b"14"


def test_a_request_bigger_than_the_windows_arrives_whole():
    pair = Pair()
    body = cp.Tags(tag=tuple("x" * 1000 for _ in range(300))).encode()  # ~300 KB > 64 KiB windows
    framed = frame(body)
    pair.request(1, framed=b"", end=False)
    sent, calls = 0, []
    while sent < len(framed):
        size = min(pair.client.local_flow_control_window(1), pair.client.max_outbound_frame_size,
                   len(framed) - sent)
        assert size > 0, "the server stopped opening the window"
        pair.client.send_data(1, framed[sent:sent + size], end_stream=sent + size == len(framed))
        sent += size
        calls += pair.exchange()
    assert [c.body for c in calls] == [body]


def test_settings_advertise_the_stream_limit():
    pair = Pair(max_streams=7)
    assert pair.client.remote_settings.max_concurrent_streams == 7


# -- refusals the layer answers itself ------------------------------------------------
def test_compressed_flag_is_internal():
    pair = Pair()
    pair.request(1, framed=frame(b"\x0a\x01a", flag=1))
    assert pair.exchange() == []
    assert_refused(pair.responses[1], GrpcStatus.INTERNAL)


def test_unsupported_grpc_encoding_is_unimplemented_and_names_identity():
    pair = Pair()
    pair.request(1, b"", extra=[(b"grpc-encoding", b"gzip")])
    assert pair.exchange() == []
    assert_refused(pair.responses[1], GrpcStatus.UNIMPLEMENTED)
    assert pair.responses[1].headers[b"grpc-accept-encoding"] == b"identity"


def test_identity_encoding_is_accepted():
    pair = Pair()
    pair.request(1, b"\x0a\x01a", extra=[(b"grpc-encoding", b"identity")])
    assert len(pair.exchange()) == 1


def test_oversized_message_is_refused_from_its_prefix_while_the_client_still_sends():
    pair = Pair()
    pair.request(1, framed=PREFIX.pack(0, MAX_MESSAGE + 1) + b"x" * 100, end=False)
    assert pair.exchange() == []
    assert_refused(pair.responses[1], GrpcStatus.RESOURCE_EXHAUSTED, reset=True)
    assert b"4194304" in pair.responses[1].headers[b"grpc-message"]
    pair.request(3, b"\x0a\x01a")  # the connection goes on
    assert [c.stream_id for c in pair.exchange()] == [3]


def test_late_data_on_a_refused_stream_is_ignored():
    pair = Pair()
    pair.request(1, framed=PREFIX.pack(0, MAX_MESSAGE + 1), end=False)
    assert pair.server.receive_data(pair.client.data_to_send()) == []
    refusal = pair.server.data_to_send()  # trailers + RST_STREAM, not yet seen by the client
    for _ in range(4):  # already in flight when the refusal left
        pair.client.send_data(1, b"x" * 15_000)
    assert pair.server.receive_data(pair.client.data_to_send()) == []
    assert not pair.server.closed
    for ev in pair.client.receive_data(refusal):
        pair._record(ev)
    assert_refused(pair.responses[1], GrpcStatus.RESOURCE_EXHAUSTED, reset=True)
    pair.exchange()
    assert pair.client.outbound_flow_control_window > 30_005  # h2 gave the connection window back
    pair.request(3, b"y" * 30_000)
    assert [c.stream_id for c in pair.exchange()] == [3]


def test_headers_over_the_limit_end_the_connection():
    pair = Pair()
    pair.request(1, b"", extra=[(b"x-big", b"v" * (MAX_HEADER_LIST + 1))])
    assert pair.exchange() == []
    assert pair.server.closed and pair.goaway is not None


@pytest.mark.parametrize("size,accepted", [(100, True), (101, False)])
def test_max_message_is_inclusive(size, accepted):
    pair = Pair(max_message=100)
    pair.request(1, b"\x00" * size)
    assert len(pair.exchange()) == (1 if accepted else 0)
    if not accepted:
        assert_refused(pair.responses[1], GrpcStatus.RESOURCE_EXHAUSTED)


@pytest.mark.parametrize("content_type", [b"application/json", b"application/grpc+json", b"text/plain", None])
def test_wrong_content_type_is_415_internal(content_type):
    pair = Pair()
    pair.request(1, b"", content_type=content_type)
    assert pair.exchange() == []
    assert_refused(pair.responses[1], GrpcStatus.INTERNAL, b"415")


@pytest.mark.parametrize("content_type", [b"application/grpc+proto", b"application/grpc; charset=utf-8",
                                          b"Application/GRPC"])
def test_grpc_content_types_are_accepted(content_type):
    pair = Pair()
    pair.request(1, b"", content_type=content_type)
    assert len(pair.exchange()) == 1


def test_a_method_other_than_post_is_405_internal():
    pair = Pair()
    pair.request(1, framed=b"", method=b"GET")
    assert pair.exchange() == []
    assert_refused(pair.responses[1], GrpcStatus.INTERNAL, b"405")


@pytest.mark.parametrize("path", [b"/onlyone", b"/a/b/c", b"//createScope", b"/svc/", b"*", b"/svc/m\xc3\xa9"])
def test_a_path_that_is_not_service_and_method_is_unimplemented(path):
    pair = Pair()
    pair.request(1, b"", path=path)
    assert pair.exchange() == []
    assert_refused(pair.responses[1], GrpcStatus.UNIMPLEMENTED)


def test_an_unknown_method_is_handed_to_the_application():
    pair = Pair()
    pair.request(1, b"", path=b"/other.Service/whatever")
    (call,) = pair.exchange()
    assert (call.service, call.method) == ("other.Service", "whatever")
    pair.server.fail(1, GrpcStatus.UNIMPLEMENTED, "no such method")
    pair.exchange()
    assert pair.responses[1].headers[b"grpc-status"] == b"12"
    assert pair.responses[1].headers[b"grpc-message"] == b"no such method"


@pytest.mark.parametrize("framed,why", [
    (frame(b"\x08\x01") + frame(b"\x08\x02"), "two messages"),
    (frame(b"\x08\x01") + b"\x00", "a stray byte after the message"),
    (b"", "no message at all"),
    (b"\x00\x00\x00", "half a prefix"),
    (PREFIX.pack(0, 10) + b"abc", "half a message"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_framing_errors_are_internal(framed, why):
    pair = Pair()
    pair.request(1, framed=framed)
    assert pair.exchange() == [], why
    assert_refused(pair.responses[1], GrpcStatus.INTERNAL)


def test_a_second_message_still_in_flight_is_refused_with_a_reset():
    pair = Pair()
    pair.request(1, framed=frame(b"\x08\x01") + frame(b"\x08\x02"), end=False)
    assert pair.exchange() == []
    assert_refused(pair.responses[1], GrpcStatus.INTERNAL, reset=True)


def test_buffered_bytes_across_streams_are_capped():
    pair = Pair(max_message=1000, max_buffered=600)
    pair.request(1, framed=PREFIX.pack(0, 500) + b"a" * 200, end=False)  # 205 bytes held
    pair.request(3, framed=PREFIX.pack(0, 500) + b"b" * 400, end=False)  # 405 more: over 600
    assert pair.exchange() == []
    assert 1 not in pair.responses
    assert_refused(pair.responses[3], GrpcStatus.RESOURCE_EXHAUSTED, reset=True)
    pair.client.send_data(1, b"a" * 300, end_stream=True)
    (call,) = pair.exchange()  # the refused stream's bytes were released
    assert call.body == b"a" * 500


# -- replies ----------------------------------------------------------------------
def test_a_reply_bigger_than_the_window_completes_after_window_updates():
    pair = Pair(client_acks=False)
    pair.request(1, b"")
    pair.exchange()
    body = bytes(range(256)) * 800  # 204,800 bytes against a 65,535-byte window
    pair.server.reply(1, body)
    pair.exchange()
    response = pair.responses[1]
    assert len(response.data) == 65_535 and not response.trailers and not response.ended
    assert pair.server.pending_bytes == len(frame(body)) - 65_535
    pair.client_acks = True
    pair.client.acknowledge_received_data(len(response.data), 1)
    pair.exchange()
    assert bytes(response.data) == frame(body)
    assert response.trailers == {b"grpc-status": b"0"} and response.ended
    assert pair.server.pending_bytes == 0


def test_a_reply_over_max_message_becomes_resource_exhausted():
    pair = Pair(max_message=10)
    pair.request(1, b"")
    pair.exchange()
    pair.server.reply(1, b"x" * 11)
    pair.exchange()
    assert pair.responses[1].headers[b"grpc-status"] == b"8" and not pair.responses[1].data


def test_fail_percent_encodes_the_message_and_refuses_ok():
    pair = Pair()
    pair.request(1, b"")
    pair.exchange()
    with pytest.raises(ValueError):
        pair.server.fail(1, GrpcStatus.OK)
    pair.server.fail(1, GrpcStatus.NOT_FOUND, "scope 'é' 100%")
    pair.exchange()
    assert pair.responses[1].headers[b"grpc-message"] == b"scope '%C3%A9' 100%25"
    assert pair.responses[1].headers[b"grpc-status"] == b"5"


def test_answers_to_unknown_or_answered_streams_are_ignored():
    pair = Pair()
    pair.request(1, b"")
    pair.exchange()
    pair.server.reply(1, b"")
    pair.server.reply(1, b"\x08\x01")
    pair.server.fail(1, GrpcStatus.INTERNAL)
    pair.server.reply(99, b"")
    pair.exchange()
    assert bytes(pair.responses[1].data) == frame(b"") and pair.responses[1].trailers == {b"grpc-status": b"0"}


def test_percent_encode():
    assert percent_encode("ok ~") == b"ok ~"
    assert percent_encode("a%b\né\x7f") == b"a%25b%0A%C3%A9%7F"
    assert percent_encode(" padded ") == b"%20padded%20" and percent_encode(" ") == b"%20"


# -- resets and connection ends -----------------------------------------------------------
def test_client_reset_mid_request_drops_the_stream():
    pair = Pair()
    pair.request(1, framed=PREFIX.pack(0, 50) + b"x" * 10, end=False)
    pair.exchange()
    pair.client.reset_stream(1, error_code=h2.errors.ErrorCodes.CANCEL)
    assert pair.exchange() == []
    assert pair.server._incoming == {} and pair.server._buffered == 0
    pair.request(3, b"")
    assert [c.stream_id for c in pair.exchange()] == [3]


def test_client_reset_after_the_call_makes_the_reply_a_no_op():
    pair = Pair()
    pair.request(1, b"")
    assert len(pair.exchange()) == 1
    pair.client.reset_stream(1, error_code=h2.errors.ErrorCodes.CANCEL)
    pair.exchange()
    pair.server.reply(1, b"\x08\x01")
    assert pair.server.data_to_send() == b""


def test_a_call_reset_in_the_same_read_is_not_handed_out():
    pair = Pair()
    pair.request(1, b"")
    pair.client.reset_stream(1, error_code=h2.errors.ErrorCodes.CANCEL)
    assert pair.exchange() == []


def test_client_reset_while_a_reply_waits_for_window_drops_it():
    pair = Pair(client_acks=False)
    pair.request(1, b"")
    pair.exchange()
    pair.server.reply(1, b"x" * 100_000)
    pair.exchange()
    assert pair.server.pending_bytes > 0
    pair.client.reset_stream(1, error_code=h2.errors.ErrorCodes.CANCEL)
    pair.exchange()
    assert pair.server.pending_bytes == 0


def test_goaway_from_the_client_closes():
    pair = Pair()
    pair.client.close_connection()
    pair.exchange()
    assert pair.server.closed
    assert pair.server.receive_data(b"anything") == []


def test_eof_closes():
    pair = Pair()
    assert pair.server.receive_data(b"") == [] and pair.server.closed


def test_garbage_instead_of_a_preface_is_a_connection_error():
    server = GrpcServerConnection()
    server.initiate()
    server.data_to_send()
    assert server.receive_data(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") == []
    assert server.closed
    assert server.data_to_send()[3] == 7  # a GOAWAY frame (type 7, RFC 9113 6.8) goes out


def test_close_sends_goaway():
    pair = Pair()
    pair.server.close()
    pair.exchange()
    assert pair.server.closed and pair.goaway == h2.errors.ErrorCodes.NO_ERROR
