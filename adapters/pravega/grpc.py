"""A sans-I/O unary gRPC server connection over h2 (the controller's transport).

Theory of operation
-------------------
The Pravega client speaks gRPC to the controller over cleartext HTTP/2 with
prior knowledge (tonic, ``tcp://host:9090``): its first bytes are the HTTP/2
connection preface. h2's ``H2Connection`` is sans-I/O already; this class
adds gRPC's framing on top (grpc/grpc ``doc/PROTOCOL-HTTP2.md``) and hands out
one :class:`UnaryCall` per complete request. No trio, no socket, no clock: the
driver feeds bytes to :meth:`GrpcServerConnection.receive_data`, answers each
call with :meth:`~GrpcServerConnection.reply` or
:meth:`~GrpcServerConnection.fail`, and writes :meth:`data_to_send`.

* **Requests**: HEADERS (``:method POST``, ``:path /<service>/<method>``,
  ``content-type: application/grpc[+proto]``), then DATA holding exactly one
  Length-Prefixed-Message (1-byte compressed flag, 4-byte big-endian length,
  the protobuf bytes), then END_STREAM. DATA frame boundaries mean nothing
  (PROTOCOL-HTTP2.md "Data Frames"): the message is reassembled per stream and
  the call fires at END_STREAM.
* **Refusals the layer answers itself** (:data:`_REFUSALS`) use the statuses
  grpc-java gives, because the real Pravega controller runs grpc-java (netty):
  HTTP 405/415 + INTERNAL for a wrong method/content-type (``NettyServerHandler``;
  PROTOCOL-HTTP2.md asks for 415), UNIMPLEMENTED for an unknown message
  encoding and for a path that names no method, INTERNAL for a compressed
  message we never offered to decode (we advertise only ``identity``), for a
  second message and for END_STREAM with no or half a message (grpc-java's
  unary call handler and deframer), RESOURCE_EXHAUSTED past :data:`MAX_MESSAGE`.
  They go out as a Trailers-Only response (one HEADERS frame with END_STREAM);
  if the client was still sending, RST_STREAM(NO_ERROR) follows (PROTOCOL-HTTP2.md
  "Early Server Closure"), and late DATA is left to h2.
* **Responses**: HEADERS (``:status 200``, ``content-type``), DATA with one
  Length-Prefixed-Message, then trailers ``grpc-status`` (+ ``grpc-message``,
  percent-encoded as PROTOCOL-HTTP2.md "Responses" defines). DATA is sent only as
  far as the peer's flow-control windows and frame size allow; the rest waits
  per stream in the shared send pump (:class:`adapters.wire.h2pump.SendPump`),
  which sends it on WINDOW_UPDATE or a SETTINGS change (RFC 9113 section 5.2),
  then the trailers.
* **Flow control inbound**: every DATA frame is acknowledged at once, so big or
  many requests never stall; memory is bounded instead by the per-stream buffer
  (at most ``max_message + 5`` bytes, refused beyond), the stream count (our
  SETTINGS_MAX_CONCURRENT_STREAMS, enforced by h2) and :data:`MAX_BUFFERED` for
  all streams of a connection together. Outbound data waiting for window is at
  most one reply (``<= max_message + 5``) per open stream.
* A stream the peer resets is forgotten (and a call it completed in the same
  read is not handed out). GOAWAY from the peer, EOF (``receive_data(b"")``)
  or an HTTP/2 protocol error (we send GOAWAY) set :attr:`closed`: the driver
  flushes :meth:`data_to_send` and closes the socket.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum
from functools import partial

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from adapters.wire.h2pump import SendPump

# gRPC's default maximum size of a received message (grpc-java
# GrpcUtil.DEFAULT_MAX_MESSAGE_SIZE, grpc-go defaultServerMaxReceiveMessageSize):
# clients expect a server to refuse bigger ones with RESOURCE_EXHAUSTED.
MAX_MESSAGE = 4 * 1024 * 1024
# RFC 9113 section 6.5.2 recommends advertising no fewer than 100 streams.
MAX_CONCURRENT_STREAMS = 100
# PROTOCOL-HTTP2.md: servers may limit Request-Headers, 8 KiB suggested (grpc-java's default too).
MAX_HEADER_LIST = 8 * 1024
# Request bytes buffered on one connection across all its streams: four
# maximum-size messages. Controller requests are well under 1 KiB, so only a
# client flooding many big calls at once meets it (RESOURCE_EXHAUSTED).
MAX_BUFFERED = 4 * MAX_MESSAGE
PREFIX = struct.Struct(">BI")  # Length-Prefixed-Message: compressed flag, message length

_CONTENT_TYPES = (b"application/grpc", b"application/grpc+proto")  # +json etc. are not protobuf
_IDENTITY = (None, b"identity")  # grpc-encoding values that mean "not compressed"


class GrpcStatus(IntEnum):
    """gRPC status codes (grpc/grpc ``doc/statuscodes.md``)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


@dataclass(frozen=True, slots=True)
class UnaryCall:
    """Fires when a request stream ended with exactly one well-formed message.
    ``body`` is the protobuf bytes without the 5-byte prefix; ``metadata`` the
    request headers other than pseudo-headers, decoded as Latin-1."""

    stream_id: int
    service: str
    method: str
    body: bytes
    metadata: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class _Refusal:
    http_status: int
    status: GrpcStatus
    text: str  # str.format()ted with the case's detail (if it has a {} for it)
    extra: tuple[tuple[bytes, bytes], ...] = ()


# What the layer answers by itself, keyed by reason (module docstring: grpc-java's choices).
_REFUSALS = {
    "method": _Refusal(405, GrpcStatus.INTERNAL, "gRPC requires POST, got {}"),
    "content-type": _Refusal(415, GrpcStatus.INTERNAL, "content-type {} is not gRPC with protobuf"),
    "encoding": _Refusal(200, GrpcStatus.UNIMPLEMENTED, "grpc-encoding {} is not supported",
                         ((b"grpc-accept-encoding", b"identity"),)),
    "path": _Refusal(200, GrpcStatus.UNIMPLEMENTED, "no gRPC method at path {}"),
    "compressed": _Refusal(200, GrpcStatus.INTERNAL, "message flag {} but no compression was negotiated"),
    "too-large": _Refusal(200, GrpcStatus.RESOURCE_EXHAUSTED, "request message larger than {} bytes"),
    "too-many": _Refusal(200, GrpcStatus.INTERNAL, "more than one request message in a unary call"),
    "no-message": _Refusal(200, GrpcStatus.INTERNAL, "request ended without a message"),
    "truncated": _Refusal(200, GrpcStatus.INTERNAL, "request ended inside a message ({} bytes)"),
    "overloaded": _Refusal(200, GrpcStatus.RESOURCE_EXHAUSTED, "more than {} request bytes buffered"),
}


def percent_encode(text: str) -> bytes:
    """grpc-message encoding: UTF-8, then every byte outside 0x20-0x7E, and '%',
    as %XX. A space at either end is encoded too: a header value must not start
    or end with whitespace (RFC 9110 section 5.5), and h2 strips it."""
    out = b"".join(bytes((b,)) if 0x20 <= b <= 0x7E and b != 0x25 else b"%%%02X" % b
                   for b in text.encode("utf-8"))
    if out.startswith(b" "):
        out = b"%20" + out[1:]
    if out.endswith(b" "):
        out = out[:-1] + b"%20"
    return out


@dataclass(slots=True)
class _Incoming:
    service: str
    method: str
    metadata: tuple[tuple[str, str], ...]
    buf: bytearray = field(default_factory=bytearray)
    expect: int = -1  # prefix + message length once the prefix is complete


class _FrameSizeGuard:
    """Follows the HTTP/2 frame boundaries of the inbound bytes (a 24-byte client
    preface, then 9-byte headers: a 24-bit length first, RFC 9113 section 4.1) and
    reports a frame longer than the maximum we advertise (the default 16 384, never
    changed: section 6.5.2) as soon as its header arrives."""

    __slots__ = ("skip", "head")

    MAX_FRAME = 16_384  # SETTINGS_MAX_FRAME_SIZE initial value; we never raise it
    PREFACE = 24  # b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

    def __init__(self) -> None:
        self.skip = self.PREFACE  # bytes to pass before the next frame header
        self.head = b""  # a frame header split across reads

    def feed(self, data: bytes) -> bool:
        pos, end = 0, len(data)
        while pos < end:
            if self.skip:
                step = min(self.skip, end - pos)
                self.skip -= step
                pos += step
                continue
            take = min(9 - len(self.head), end - pos)
            self.head += data[pos:pos + take]
            pos += take
            if len(self.head) == 9:
                length = int.from_bytes(self.head[:3], "big")
                if length > self.MAX_FRAME:
                    return False
                self.skip, self.head = length, b""
        return True


class GrpcServerConnection:
    """Server side of one HTTP/2 connection carrying unary gRPC calls (module docstring)."""

    def __init__(self, *, max_message: int = MAX_MESSAGE, max_streams: int = MAX_CONCURRENT_STREAMS,
                 max_buffered: int = MAX_BUFFERED) -> None:
        self.max_message = max_message
        self.max_streams = max_streams
        self.max_buffered = max_buffered
        self._h2 = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=False, header_encoding=None, validate_inbound_headers=True))
        self._incoming: dict[int, _Incoming] = {}
        self._sends = SendPump(self._h2)  # framed replies waiting for flow-control window
        self._awaiting: set[int] = set()  # calls handed out, not answered yet
        self._buffered = 0  # bytes in all _incoming buffers
        self._ending: frozenset[int] = frozenset()  # streams the client ended in this read
        self._frames = _FrameSizeGuard()
        self.closed = False
        self._dispatch = {
            h2.events.RequestReceived: self._on_request,
            h2.events.DataReceived: self._on_data,
            h2.events.StreamEnded: self._on_end,
            h2.events.StreamReset: self._on_reset,
            h2.events.WindowUpdated: self._on_window,
            h2.events.RemoteSettingsChanged: self._on_window,
            h2.events.ConnectionTerminated: self._on_goaway,
        }

    def initiate(self) -> None:
        """Queue the connection preface and our SETTINGS (call once after accept)."""
        self._h2.initiate_connection()
        self._h2.update_settings({
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.max_streams,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: MAX_HEADER_LIST,
        })

    @property
    def pending_bytes(self) -> int:
        """Reply bytes still waiting for the peer's flow-control window."""
        return self._sends.pending_bytes()

    # -- input ------------------------------------------------------------------
    def receive_data(self, data: bytes) -> list[UnaryCall]:
        """Feed bytes from the socket (``b""`` = EOF); returns the calls completed.
        Protocol-level refusals are queued for :meth:`data_to_send` here."""
        if self.closed:
            return []
        if not data:
            self._close()
            return []
        if not self._frames.feed(data):
            # h2 would buffer a frame's whole declared body (up to 16 MiB) before checking
            # its length against our SETTINGS_MAX_FRAME_SIZE; refuse it from the header.
            self._protocol_error(h2.exceptions.FrameTooLargeError("frame larger than SETTINGS_MAX_FRAME_SIZE"))
            return []
        try:
            events = self._h2.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            # Includes a stream over our limit: h2 makes that a connection
            # error, which RFC 9113 section 5.4 allows for any stream error.
            self._protocol_error(exc)
            return []
        self._ending = frozenset(ev.stream_id for ev in events if isinstance(ev, h2.events.StreamEnded))
        calls = []
        for ev in events:
            handler = self._dispatch.get(type(ev))
            call = handler(ev) if handler is not None else None
            if call is not None:
                calls.append(call)
        return [call for call in calls if call.stream_id in self._awaiting]  # drop calls reset meanwhile

    def _on_request(self, ev: h2.events.RequestReceived) -> None:
        sid = ev.stream_id
        pseudo = {k: v for k, v in ev.headers if k.startswith(b":")}
        headers = [(k, v) for k, v in ev.headers if not k.startswith(b":")]
        regular = dict(headers)
        method, path = pseudo.get(b":method", b""), pseudo.get(b":path", b"")
        content_type = regular.get(b"content-type", b"")
        encoding = regular.get(b"grpc-encoding")
        parts = path.split(b"/")
        if method != b"POST":
            return self._refuse(sid, "method", method)
        if content_type.split(b";", 1)[0].strip().lower() not in _CONTENT_TYPES:
            return self._refuse(sid, "content-type", content_type or b"(none)")
        if encoding not in _IDENTITY:
            return self._refuse(sid, "encoding", encoding)
        if len(parts) != 3 or parts[0] or not parts[1] or not parts[2] or not path.isascii():
            return self._refuse(sid, "path", path)
        metadata = tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in headers)
        self._incoming[sid] = _Incoming(parts[1].decode("ascii"), parts[2].decode("ascii"), metadata)
        return None

    def _on_data(self, ev: h2.events.DataReceived) -> None:
        try:
            self._h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            pass  # the stream is gone; only the connection window mattered
        inc = self._incoming.get(ev.stream_id)
        if inc is None or not ev.data:
            return
        if self._buffered + len(ev.data) > self.max_buffered:
            return self._refuse(ev.stream_id, "overloaded", self.max_buffered)
        before = len(inc.buf)
        reason = self._take(inc, ev.data)
        self._buffered += len(inc.buf) - before
        if reason is not None:
            self._refuse(ev.stream_id, *reason)
        return None

    def _take(self, inc: _Incoming, data: bytes) -> tuple[str, object] | None:
        """Append ``data`` to the stream's buffer, never past one message;
        returns a refusal (reason, detail) when the framing breaks a rule."""
        if inc.expect < 0:
            need = PREFIX.size - len(inc.buf)
            inc.buf += data[:need]
            data = data[need:]
            if len(inc.buf) < PREFIX.size:
                return None
            flag, length = PREFIX.unpack(inc.buf)
            if flag:
                return "compressed", flag
            if length > self.max_message:
                return "too-large", self.max_message
            inc.expect = PREFIX.size + length
        if len(inc.buf) + len(data) > inc.expect:
            return "too-many", ""
        inc.buf += data
        return None

    def _on_end(self, ev: h2.events.StreamEnded) -> UnaryCall | None:
        sid = ev.stream_id
        inc = self._incoming.get(sid)
        if inc is None:
            return None  # refused earlier, or never a gRPC request
        if not inc.buf:
            return self._refuse(sid, "no-message", "")
        if len(inc.buf) < inc.expect or inc.expect < 0:
            return self._refuse(sid, "truncated", len(inc.buf))
        self._forget_incoming(sid)
        self._awaiting.add(sid)
        return UnaryCall(sid, inc.service, inc.method, bytes(memoryview(inc.buf)[PREFIX.size:]), inc.metadata)

    def _on_reset(self, ev: h2.events.StreamReset) -> None:
        self._forget_incoming(ev.stream_id)
        self._sends.forget(ev.stream_id)
        self._awaiting.discard(ev.stream_id)

    def _on_window(self, _ev) -> None:
        self._sends.pump()

    def _on_goaway(self, _ev) -> None:
        self._close()

    def _forget_incoming(self, sid: int) -> None:
        inc = self._incoming.pop(sid, None)
        if inc is not None:
            self._buffered -= len(inc.buf)

    # -- output -----------------------------------------------------------------
    def reply(self, stream_id: int, body: bytes) -> None:
        """Answer a call with one message and grpc-status 0. A call whose stream
        was reset meanwhile, or that was answered already, is ignored. A body
        over ``max_message`` becomes RESOURCE_EXHAUSTED (the client's limit)."""
        if stream_id not in self._awaiting or self.closed:
            return
        if len(body) > self.max_message:
            self.fail(stream_id, GrpcStatus.RESOURCE_EXHAUSTED, f"response larger than {self.max_message} bytes")
            return
        self._awaiting.discard(stream_id)
        framed = bytearray(PREFIX.pack(0, len(body)))
        framed += body
        if self._send_headers(stream_id, self._head(200), end_stream=False):
            # The trailers end the stream once the message went out.
            self._sends.open(stream_id, framed, ended=True, end_with_data=False,
                             finish=partial(self._send_trailers, [(b"grpc-status", b"0")]))

    def fail(self, stream_id: int, code: int, message: str = "") -> None:
        """Answer a call with an error status and no message (Trailers-Only).
        Ignored for streams not awaiting an answer, like :meth:`reply`."""
        if code == GrpcStatus.OK:
            raise ValueError("fail() needs an error status; use reply() for OK")
        if stream_id not in self._awaiting or self.closed:
            return
        self._awaiting.discard(stream_id)
        self._send_headers(stream_id, [*self._head(200), *self._status(code, message)], end_stream=True)

    def _refuse(self, sid: int, reason: str, detail) -> None:
        """Answer a request the layer itself refuses (:data:`_REFUSALS`)."""
        refusal = _REFUSALS[reason]
        self._forget_incoming(sid)
        if isinstance(detail, bytes):
            detail = detail.decode("latin-1")
        headers = [*self._head(refusal.http_status), *refusal.extra,
                   *self._status(refusal.status, refusal.text.format(detail))]
        if self._send_headers(sid, headers, end_stream=True) and sid not in self._ending:
            try:  # the client is still sending: PROTOCOL-HTTP2.md "Early Server Closure"
                self._h2.reset_stream(sid, error_code=h2.errors.ErrorCodes.NO_ERROR)
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                pass

    @staticmethod
    def _head(http_status: int) -> list[tuple[bytes, bytes]]:
        return [(b":status", str(http_status).encode()), (b"content-type", b"application/grpc")]

    @staticmethod
    def _status(code: int, message: str) -> list[tuple[bytes, bytes]]:
        status = [(b"grpc-status", str(int(code)).encode())]
        return status + [(b"grpc-message", percent_encode(message))] if message else status

    def _send_headers(self, sid: int, headers, *, end_stream: bool) -> bool:
        try:
            self._h2.send_headers(sid, headers, end_stream=end_stream)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            return False  # reset by the peer in this same read, or the connection is gone
        return True

    def _send_trailers(self, trailers: list[tuple[bytes, bytes]], sid: int) -> None:
        self._h2.send_headers(sid, trailers, end_stream=True)

    def close(self) -> None:
        """Send GOAWAY(NO_ERROR) and stop: for shutdown once the calls are answered
        (h2 sends nothing on any stream after its GOAWAY)."""
        if not self.closed:
            try:
                self._h2.close_connection()
            except h2.exceptions.ProtocolError:
                pass
            self._close()

    def _protocol_error(self, exc: h2.exceptions.ProtocolError) -> None:
        code = getattr(exc, "error_code", None) or h2.errors.ErrorCodes.PROTOCOL_ERROR
        try:
            self._h2.close_connection(error_code=code)
        except h2.exceptions.ProtocolError:
            pass
        self._close()

    def _close(self) -> None:
        self.closed = True
        self._incoming.clear()
        self._sends.clear()
        self._awaiting.clear()
        self._buffered = 0

    def data_to_send(self) -> bytes:
        """Bytes to write to the socket now (possibly empty)."""
        return self._h2.data_to_send()


__all__ = ["MAX_CONCURRENT_STREAMS", "MAX_MESSAGE", "GrpcServerConnection", "GrpcStatus", "UnaryCall",
           "percent_encode"]
