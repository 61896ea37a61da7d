"""HTTP/1.1 side of the server connection: h11 wrapped into adapters/http/events.

Theory of operation
-------------------
h11 already is a sans-I/O state machine (its ``_state.py`` keeps the table of
legal transitions); this wrapper only adds what the server needs on top:

* whole requests: ``Data`` chunks are buffered up to ``max_body_bytes``; a
  larger ``Content-Length`` or body yields :class:`RequestError` (413) and the
  connection closes after that answer, because the unread rest of the body
  cannot be skipped safely (RFC 9112 section 9.6, "Tear-down");
* ``Expect: 100-continue`` is answered as soon as the body is wanted
  (RFC 9110 section 10.1.1), which curl sends for larger uploads;
* keep-alive: after a response, ``start_next_cycle`` when both sides are DONE
  (h11's own rule), else the connection closes;
* ``Upgrade: h2c`` (RFC 7540 section 3.2; RFC 9113 deprecates it but curl
  ``--http2`` still sends it over cleartext): the request is read whole, a
  ``101`` goes out, and :class:`Upgrade` hands the request, the client's
  ``HTTP2-Settings`` and the bytes after the request to the HTTP/2 side.

Requests are answered one at a time: h11 pauses on a pipelined request until
the previous response is complete, which is the ordering HTTP/1.1 demands.
"""

from __future__ import annotations

from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus

import h11

from .errors import HttpError, Response
from .events import NEED_DATA, ConnectionClosed, Request, RequestError
from .limits import HttpLimits

SERVER_HEADER = (b"server", b"ferry")
# The status line's reason phrase (RFC 9110 15: the standard phrases, as
# HTTPStatus names them). Clients ignore it, people and some tools read it;
# h11 sends an empty one unless given. HTTP/2 has none (RFC 9113 8.3.2).
_REASONS = {int(s): s.phrase.encode("ascii") for s in HTTPStatus}


def reason_phrase(status: int) -> bytes:
    """``b"Not Found"`` for 404; empty for a status without a standard phrase."""
    return _REASONS.get(status, b"")


@dataclass(frozen=True, slots=True)
class Upgrade:
    """Internal: the client asked for h2c and got a 101 (never leaves connection.py)."""

    request: Request
    settings: bytes
    trailing: bytes


def _tokens(value: bytes | None) -> set[bytes]:
    if not value:
        return set()
    return {t.strip().lower() for t in value.split(b",")}


class H1Side:
    """HTTP/1.1 through h11; see the module docstring."""

    def __init__(self, limits: HttpLimits, *, allow_h2c: bool = True) -> None:
        self.limits = limits
        self.allow_h2c = allow_h2c
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=limits.max_header_bytes)
        self._out: list[bytes] = []
        self._sid = 0
        self._head: h11.Request | None = None
        self._body = bytearray()
        self._waiting = False  # a request was handed out and is not answered yet
        self._close_after = False  # answer the pending request, then close
        self._streaming = False  # a response head went out, its end not yet
        self._closed = False

    # -- input ---------------------------------------------------------------
    def receive_data(self, data: bytes) -> None:
        if self._closed or self._close_after:
            return  # nothing more of this connection will be read
        try:
            self._h11.receive_data(bytes(data))
        except RuntimeError:  # data after EOF: a peer bug, nothing to answer
            self._closed = True

    @property
    def mid_request(self) -> bool:
        """True while a request head or body is partly received."""
        return self._h11.their_state is h11.SEND_BODY or (
            self._h11.their_state is h11.IDLE and bool(self._h11.trailing_data[0]))

    @property
    def idle(self) -> bool:
        return not self._waiting and self._h11.their_state is h11.IDLE

    def next_event(self):
        if self._closed:
            return ConnectionClosed("closed")
        if self._waiting or self._close_after:
            return NEED_DATA  # h11 would pause anyway; no reading past an open request
        while True:
            try:
                ev = self._h11.next_event()
            except h11.RemoteProtocolError as exc:
                return self._protocol_error(exc)
            if ev is h11.NEED_DATA or ev is h11.PAUSED:
                return NEED_DATA
            if isinstance(ev, h11.Request):
                found = self._start(ev)
            elif isinstance(ev, h11.Data):
                found = self._data(ev.data)
            elif isinstance(ev, h11.EndOfMessage):
                found = self._end()
            elif isinstance(ev, h11.ConnectionClosed):
                self._closed = True
                return ConnectionClosed("peer closed")
            else:
                found = None
            if found is not None:
                return found

    def _protocol_error(self, exc: h11.RemoteProtocolError):
        if self._h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            self._sid += 1
            self._waiting = self._close_after = True
            status = exc.error_status_hint if exc.error_status_hint in (400, 413, 431) else 400
            # h11's message names the framing problem (our library's text, no input echoed).
            return RequestError(self._sid, HttpError.http(status, f"malformed HTTP/1.1 request: {exc}"))
        self._closed = True
        return ConnectionClosed("protocol error")

    def _start(self, ev: h11.Request):
        self._sid += 1
        self._head = ev
        self._body.clear()
        length = dict(ev.headers).get(b"content-length")
        if length is not None and length.isdigit() and (len(length) > 18 or int(length) > self.limits.max_body_bytes):
            return self._too_large()
        if self._h11.they_are_waiting_for_100_continue:
            self._out.append(self._h11.send(h11.InformationalResponse(status_code=100, headers=[],
                                                                      reason=reason_phrase(100))))
        return None

    def _data(self, data: bytes):
        if len(self._body) + len(data) > self.limits.max_body_bytes:
            return self._too_large()
        self._body += data
        return None

    def _too_large(self) -> RequestError:
        self._waiting = self._close_after = True
        self._body.clear()
        return RequestError(self._sid, HttpError.http(
            413, f"request body exceeds {self.limits.max_body_bytes} bytes", "body"))

    def _end(self):
        head = self._head
        request = Request(self._sid, head.method.decode("ascii", "replace"), head.target.decode("ascii", "replace"),
                          tuple(head.headers), bytes(self._body), head.http_version.decode("ascii"))
        self._body.clear()
        self._waiting = True
        if self.allow_h2c and self._h11.their_state is h11.MIGHT_SWITCH_PROTOCOL:
            upgrade = self._try_h2c(request)
            if upgrade is not None:
                return upgrade
        return request

    def _try_h2c(self, request: Request) -> Upgrade | None:
        settings = request.header(b"http2-settings")
        if b"h2c" not in _tokens(request.header(b"upgrade")) or settings is None:
            return None
        if not {b"upgrade", b"http2-settings"} <= _tokens(request.header(b"connection")):
            return None  # RFC 7540 3.2.1: HTTP2-Settings must be a connection option
        self._out.append(self._h11.send(h11.InformationalResponse(
            status_code=101, headers=[(b"connection", b"Upgrade"), (b"upgrade", b"h2c")], reason=reason_phrase(101))))
        trailing, _closed = self._h11.trailing_data
        self._closed = True  # this side is done; HTTP/2 owns the socket from here
        return Upgrade(request, settings, bytes(trailing))

    # -- output --------------------------------------------------------------
    def send_response(self, stream_id: int, response: Response) -> None:
        length = (b"content-length", str(len(response.body)).encode())
        if self.start_response(stream_id, response.status, (length, *response.headers)):
            if response.body:
                self.send_body(stream_id, response.body)
            self.end_response(stream_id)

    def start_response(self, stream_id: int, status: int, headers) -> bool:
        """Send the head; without a content-length h11 frames the body chunked
        (RFC 9112 section 7.1), or by closing for an HTTP/1.0 peer. False if stale."""
        if self._closed or stream_id != self._sid or not self._waiting or self._streaming:
            return False  # stale answer (connection gone or request already answered)
        headers = [SERVER_HEADER, (b"date", formatdate(usegmt=True).encode()), *headers]
        if self._close_after:
            headers.append((b"connection", b"close"))
        self._streaming = True
        return self._send(h11.Response(status_code=status, headers=headers, reason=reason_phrase(status)))

    def send_body(self, stream_id: int, data: bytes) -> None:
        head_only = self._head is not None and self._head.method == b"HEAD"
        if self._streaming and stream_id == self._sid and data and not head_only:
            self._send(h11.Data(data=data))

    def end_response(self, stream_id: int) -> None:
        if not self._streaming or stream_id != self._sid or not self._send(h11.EndOfMessage()):
            return
        self._streaming = self._waiting = False
        if self._h11.our_state is h11.MUST_CLOSE or self._close_after:
            self._closed = True
        elif self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
            self._h11.start_next_cycle()

    def pending_bytes(self, stream_id: int) -> int:
        return 0  # everything goes straight to the socket buffer; send_all pushes back

    def _send(self, event) -> bool:
        try:
            data = self._h11.send(event)
        except h11.LocalProtocolError:
            # Our state machine refused (e.g. the peer's half already errored):
            # nothing sane can follow on this socket.
            self._closed = True
            return False
        if data:
            self._out.append(data)
        return True

    def close(self) -> None:
        """Close once the request in flight (if any) is answered."""
        if not self._waiting:
            self._closed = True
        else:
            self._close_after = True

    def data_to_send(self) -> bytes:
        out, self._out = self._out, []
        return b"".join(out)


__all__ = ["H1Side", "Upgrade"]
