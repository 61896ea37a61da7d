"""HTTP/2 side of the server connection: h2 wrapped into adapters/http/events.

Theory of operation
-------------------
h2's ``H2Connection`` is sans-I/O already; this wrapper assembles whole
requests per stream and sends whole responses while respecting flow control:

* **Inbound**: every DATA frame is acknowledged at once
  (``acknowledge_received_data``), so the peer's windows refill; memory is
  bounded instead by ``max_body_bytes`` per stream times
  ``MAX_CONCURRENT_STREAMS`` (our SETTINGS). A body over the limit gets a 413
  on its stream followed by RST_STREAM(NO_ERROR), which RFC 9113 section 8.1
  allows for a response sent before the request is complete.
* **Outbound**: a response body is sent only as far as the peer's
  flow-control windows and frame size allow; the rest waits in the shared
  send pump (:class:`adapters.wire.h2pump.SendPump`) until a WINDOW_UPDATE or
  a SETTINGS change (RFC 9113 section 5.2). END_STREAM rides on the last DATA
  frame; a refused request's stream ends with RST_STREAM instead.
* A stream the peer resets yields :class:`StreamReset` so the driver can
  cancel that request's task (a long poll must not outlive its stream).
* Protocol errors: h2 raises ``ProtocolError``; we send GOAWAY and report
  :class:`ConnectionClosed`.
* Content-Length is checked here, not by h2: h2 treats a body that does not
  match it (or a non-numeric value) as a connection error and tears down
  every stream, where RFC 9113 section 8.1.1 makes such a malformed request a
  *stream* error of type PROTOCOL_ERROR (a server may answer it first). So
  :class:`_H2Connection` turns h2's per-stream length tracking off and the
  stream gets a 400 naming ``content-length``, then RST_STREAM(PROTOCOL_ERROR);
  the connection and its other streams go on.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from functools import partial

import h2.config
import h2.connection
import h2.events
import h2.errors
import h2.exceptions
import h2.settings

from adapters.wire.h2pump import SendPump

from .errors import HttpError, Response
from .events import NEED_DATA, ConnectionClosed, Request, RequestError
from .h1 import SERVER_HEADER
from .limits import HttpLimits


DEFAULT_WINDOW = 65_535  # RFC 9113 6.9.2: every window starts here
MAX_WINDOW = 2**31 - 1  # RFC 9113 6.9.1: the largest legal window
# Inbound bytes in flight on one connection before the peer waits for our
# WINDOW_UPDATE: 16 MiB keeps a multiplexed batch upload streaming without
# letting one connection claim more than a few bodies' worth of buffers.
CONNECTION_WINDOW = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class StreamReset:
    """Fires when the peer resets a stream whose request may still be running."""

    stream_id: int


@dataclass(slots=True)
class _Incoming:
    method: str
    target: str
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytearray = field(default_factory=bytearray)
    rejected: bool = False
    expected: int | None = None  # the request's Content-Length, if it sent one
    malformed: bool = False  # rejected as a malformed message: reset with PROTOCOL_ERROR


def _no_length_check(*_args) -> None:
    return None


class _H2Connection(h2.connection.H2Connection):
    """h2 without its Content-Length checks, which H2Side does per stream
    (module docstring). ``_begin_new_stream`` is where h2 creates a stream,
    before it sees the stream's headers (h2 4.x; tests/http pin the result)."""

    def _begin_new_stream(self, stream_id, allowed_ids):
        stream = super()._begin_new_stream(stream_id, allowed_ids)
        stream._initialize_content_length = _no_length_check
        stream._track_content_length = _no_length_check
        return stream


class H2Side:
    """HTTP/2 through h2; see the module docstring."""

    def __init__(self, limits: HttpLimits, *, upgrade: tuple[Request, bytes] | None = None) -> None:
        self.limits = limits
        config = h2.config.H2Configuration(client_side=False, header_encoding=None,
                                           validate_inbound_headers=True)
        self._h2 = _H2Connection(config)
        self._events: deque = deque()
        self._incoming: dict[int, _Incoming] = {}
        self._sends = SendPump(self._h2)  # response bodies waiting for flow-control window
        self._open: set[int] = set()  # requests handed out, not answered yet
        self._heads: set[int] = set()  # streams whose request was HEAD
        self._closed = False
        self._goaway = False
        if upgrade is None:
            self._h2.initiate_connection()
        else:
            request, settings = upgrade
            # RFC 7540 3.2: the upgraded request is stream 1, half-closed (remote).
            self._h2.initiate_upgrade_connection(settings)
            self._open.add(1)
            self._events.append(Request(1, request.method, request.target, request.headers, request.body, "2"))
        self._h2.update_settings({
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: limits.max_concurrent_streams,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: limits.max_header_bytes,
            # A stream may send a whole body without waiting for WINDOW_UPDATEs:
            # its buffer is bounded by max_body_bytes anyway. Never below the
            # default: a client that already sent under 64 KiB would see its
            # window go negative (RFC 9113 6.9.2) and stall mid-body.
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: max(DEFAULT_WINDOW, min(limits.max_body_bytes, MAX_WINDOW)),
        })
        # The connection window starts at 64 KiB whatever SETTINGS say (RFC 9113
        # 6.9.2); open it to what our streams may hold together, capped.
        self._h2.increment_flow_control_window(CONNECTION_WINDOW - DEFAULT_WINDOW)

    @property
    def idle(self) -> bool:
        return not (self._incoming or self._sends or self._open)

    @property
    def mid_request(self) -> bool:
        return bool(self._incoming)

    # -- input ---------------------------------------------------------------
    def receive_data(self, data: bytes) -> None:
        if self._closed:
            return
        if not data:
            self._closed = True
            self._events.append(ConnectionClosed("peer closed"))
            return
        try:
            events = self._h2.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            self._fail(exc)
            return
        for ev in events:
            self._handle(ev)

    def _fail(self, exc: Exception) -> None:
        code = getattr(exc, "error_code", None) or h2.errors.ErrorCodes.PROTOCOL_ERROR
        try:
            self._h2.close_connection(error_code=code)
        except h2.exceptions.ProtocolError:
            pass
        self._closed = True
        self._events.append(ConnectionClosed("HTTP/2 protocol error"))

    def _handle(self, ev) -> None:
        if isinstance(ev, h2.events.RequestReceived):
            self._request_head(ev.stream_id, ev.headers)
        elif isinstance(ev, h2.events.DataReceived):
            self._data(ev)
        elif isinstance(ev, h2.events.StreamEnded):
            self._stream_ended(ev.stream_id)
        elif isinstance(ev, h2.events.StreamReset):
            self._forget(ev.stream_id)
            self._events.append(StreamReset(ev.stream_id))
        elif isinstance(ev, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
            self._sends.pump()
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self._closed = True
            self._events.append(ConnectionClosed("GOAWAY received"))

    def _request_head(self, sid: int, headers) -> None:
        pseudo = {k: v for k, v in headers if k.startswith(b":")}
        regular = tuple((k, v) for k, v in headers if not k.startswith(b":"))
        method, path = pseudo.get(b":method"), pseudo.get(b":path")
        inc = _Incoming((method or b"").decode("ascii", "replace"), (path or b"").decode("ascii", "replace"), regular)
        self._incoming[sid] = inc
        if method == b"HEAD":
            self._heads.add(sid)
        lengths = {v for k, v in regular if k == b"content-length"}
        if method == b"HEAD":
            inc.expected = 0  # RFC 9110 9.3.2: no content
        if len(lengths) > 1 or any(not v.isdigit() for v in lengths):  # RFC 9110 8.6: 1*DIGIT, one value
            self._malformed(sid, inc, f"content-length must be one decimal number, got {sorted(lengths)!r}")
            return
        if lengths:
            (length,) = lengths
            if len(length) > 18 or int(length) > self.limits.max_body_bytes:
                self._reject(sid, inc, self._too_large())
                return
            inc.expected = int(length)

    def _malformed(self, sid: int, inc: _Incoming, detail: str) -> None:
        """RFC 9113 8.1.1: a 400 on the stream, then RST_STREAM(PROTOCOL_ERROR)."""
        inc.malformed = True
        self._reject(sid, inc, HttpError.http(400, detail, "content-length"))

    def _too_large(self) -> HttpError:
        return HttpError.http(413, f"request body exceeds {self.limits.max_body_bytes} bytes", "body")

    def _reject(self, sid: int, inc: _Incoming, error: HttpError) -> None:
        inc.rejected = True
        inc.body = bytearray()
        self._open.add(sid)
        self._events.append(RequestError(sid, error))

    def _data(self, ev: h2.events.DataReceived) -> None:
        try:
            self._h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            pass  # stream already gone: only the connection window mattered
        inc = self._incoming.get(ev.stream_id)
        if inc is None or inc.rejected:
            return
        if len(inc.body) + len(ev.data) > self.limits.max_body_bytes:
            self._reject(ev.stream_id, inc, self._too_large())
            return
        inc.body += ev.data
        if inc.expected is not None and len(inc.body) > inc.expected:
            self._malformed(ev.stream_id, inc, f"body is longer than content-length {inc.expected}")

    def _stream_ended(self, sid: int) -> None:
        inc = self._incoming.pop(sid, None)
        if inc is None or inc.rejected:
            if inc is not None and inc.rejected:
                self._incoming[sid] = inc  # keep until answered: reset_after depends on it
            return
        if inc.expected is not None and len(inc.body) != inc.expected:
            self._incoming[sid] = inc
            self._malformed(sid, inc, f"body of {len(inc.body)} bytes does not match content-length {inc.expected}")
            return
        self._open.add(sid)
        self._events.append(Request(sid, inc.method, inc.target, inc.headers, bytes(inc.body), "2"))

    def _forget(self, sid: int) -> None:
        self._incoming.pop(sid, None)
        self._sends.forget(sid)
        self._open.discard(sid)
        self._heads.discard(sid)

    def next_event(self):
        if self._events:
            return self._events.popleft()
        return NEED_DATA

    # -- output --------------------------------------------------------------
    def send_response(self, stream_id: int, response: Response) -> None:
        length = (b"content-length", str(len(response.body)).encode())
        if self.start_response(stream_id, response.status, (length, *response.headers)):
            self.send_body(stream_id, response.body)
            self.end_response(stream_id)

    def start_response(self, stream_id: int, status: int, headers) -> bool:
        """Send the HEADERS frame; the body follows through send_body. False if stale."""
        if stream_id not in self._open or self._closed:
            return False  # reset by the peer meanwhile, or the connection is gone
        self._open.discard(stream_id)
        inc = self._incoming.pop(stream_id, None)
        reset_after = inc is not None and inc.rejected
        reset_code = h2.errors.ErrorCodes.PROTOCOL_ERROR if inc is not None and inc.malformed else \
            h2.errors.ErrorCodes.NO_ERROR
        try:
            self._h2.send_headers(stream_id, [(b":status", str(status).encode()), SERVER_HEADER, *headers])
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            return False
        if reset_after:
            self._sends.open(stream_id, end_with_data=False, finish=partial(self._end_and_reset, reset_code))
        else:
            self._sends.open(stream_id)
        return True

    def _end_and_reset(self, code: int, stream_id: int) -> None:
        self._h2.end_stream(stream_id)
        # The peer may still be sending the body we refused (RFC 9113 8.1).
        self._h2.reset_stream(stream_id, error_code=code)

    def send_body(self, stream_id: int, data: bytes) -> None:
        if data and stream_id not in self._heads:
            self._sends.add(stream_id, data)

    def end_response(self, stream_id: int) -> None:
        if self._sends.end(stream_id):
            self._heads.discard(stream_id)

    def pending_bytes(self, stream_id: int) -> int:
        """Body bytes of ``stream_id`` still waiting for flow-control window."""
        return self._sends.pending_bytes(stream_id)

    def close(self) -> None:
        """Send GOAWAY (once): no new streams; the ones in flight may finish."""
        if not self._closed and not self._goaway:
            self._goaway = True
            try:
                self._h2.close_connection()
            except h2.exceptions.ProtocolError:
                pass

    def data_to_send(self) -> bytes:
        return self._h2.data_to_send()


__all__ = ["H2Side", "StreamReset"]
