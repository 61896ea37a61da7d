"""One HTTP server connection, HTTP/1.1 or HTTP/2, chosen from its first bytes.

Theory of operation
-------------------
The state machine has three states, in a table (STYLE.md section 2):

=============  =======================================  ===============
state          on input                                 next
=============  =======================================  ===============
DETECTING      first 24 bytes equal the HTTP/2 preface  HTTP2
DETECTING      they differ from it at some byte         HTTP1
DETECTING      EOF                                      CLOSED
HTTP1          a request upgraded to h2c (101 sent)     HTTP2
any            peer closed / fatal protocol error       CLOSED
=============  =======================================  ===============

* Over TLS, ALPN decides before any byte arrives: ``h2`` starts in HTTP2,
  anything else (``http/1.1`` or no ALPN) in HTTP1 (RFC 9113 section 3.2).
* Over cleartext, a client with *prior knowledge* opens with the connection
  preface ``PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n`` (RFC 9113 section 3.3);
  no HTTP/1.1 request line can start that way, so comparing the first bytes
  is unambiguous, and a mismatch at any byte decides for HTTP/1.1 at once.
* ``Upgrade: h2c`` (RFC 7540 section 3.2) is handled by :mod:`.h1`, which
  answers 101 and hands over; the upgraded request becomes stream 1 here.

API as every adapter's ``connection.py``: ``receive_data`` (``b""`` = EOF),
``next_event`` (one event or ``NEED_DATA``), ``send_response`` (queue an
answer; or ``start_response``/``send_body``/``end_response`` to stream one),
``data_to_send`` (bytes for the socket). No I/O, no clock: the
driver owns timeouts and asks ``idle``/``mid_request`` which one applies.
"""

from __future__ import annotations

import enum

from .errors import Response
from .events import NEED_DATA, ConnectionClosed
from .h1 import H1Side, Upgrade
from .h2side import H2Side, StreamReset
from .limits import HttpLimits

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"  # RFC 9113 section 3.4


class State(enum.Enum):
    DETECTING = "detecting"
    HTTP1 = "http/1.1"
    HTTP2 = "h2"
    CLOSED = "closed"


class HttpServerConnection:
    """HTTP/1.1 (h11) and HTTP/2 (h2) behind one sans-I/O API.

    ``alpn`` is the protocol TLS negotiated (None over cleartext); ``tls``
    disables the h2c upgrade, which RFC 7540 section 3.2 defines for
    cleartext only."""

    def __init__(self, limits: HttpLimits | None = None, *, alpn: str | None = None, tls: bool = False) -> None:
        self.limits = limits or HttpLimits()
        self._tls = tls
        self._detect = bytearray()
        self._carry = b""  # HTTP/1.1 bytes (the 101) that precede the HTTP/2 preamble
        self._side: H1Side | H2Side | None = None
        self.state = State.DETECTING
        if alpn == "h2":
            self._become_h2()
        elif tls:
            self._become_h1()

    @property
    def protocol(self) -> str | None:
        """``"http/1.1"``, ``"h2"`` or None while undecided."""
        return self.state.value if self.state in (State.HTTP1, State.HTTP2) else None

    def _become_h1(self) -> None:
        self._side = H1Side(self.limits, allow_h2c=not self._tls)
        self.state = State.HTTP1

    def _become_h2(self, upgrade=None) -> None:
        self._side = H2Side(self.limits, upgrade=upgrade)
        self.state = State.HTTP2

    # -- input ---------------------------------------------------------------
    def receive_data(self, data: bytes | bytearray) -> None:
        if self.state is State.CLOSED:
            return
        if self.state is not State.DETECTING:
            self._side.receive_data(data)
            return
        if not data:
            self.state = State.CLOSED
            return
        self._detect += data
        n = min(len(self._detect), len(H2_PREFACE))
        if self._detect[:n] != H2_PREFACE[:n]:
            self._become_h1()
        elif n == len(H2_PREFACE):
            self._become_h2()
        else:
            return  # a prefix of the preface: wait for more
        buffered, self._detect = bytes(self._detect), bytearray()
        self._side.receive_data(buffered)

    def next_event(self):
        """The next :mod:`.events` event (or :class:`StreamReset`), or ``NEED_DATA``."""
        if self.state is State.CLOSED:
            return ConnectionClosed("closed")
        if self._side is None:
            return NEED_DATA
        event = self._side.next_event()
        if isinstance(event, Upgrade):
            self._carry += self._side.data_to_send()
            try:
                self._become_h2(upgrade=(event.request, event.settings))
            except Exception:  # noqa: BLE001 - a malformed HTTP2-Settings value from the peer
                self.state = State.CLOSED
                return ConnectionClosed("bad HTTP2-Settings")
            if event.trailing:
                self._side.receive_data(event.trailing)
            event = self._side.next_event()
        if isinstance(event, ConnectionClosed):
            self.state = State.CLOSED
        return event

    @property
    def idle(self) -> bool:
        """No request is in flight or partly received: the idle timeout applies."""
        return self._side is None or self._side.idle

    @property
    def mid_request(self) -> bool:
        """A request is partly received: the request timeout applies."""
        if self._side is None:
            return bool(self._detect)
        return self._side.mid_request

    # -- output --------------------------------------------------------------
    def send_response(self, stream_id: int, response: Response) -> None:
        """Queue ``response`` for the request ``stream_id``; a stale id is ignored."""
        if self._side is not None:
            self._side.send_response(stream_id, response)

    # Streaming responses (server-sent events): a head, body chunks, an end.
    def start_response(self, stream_id: int, status: int, headers) -> bool:
        """Send a response head without a length; False if ``stream_id`` is stale."""
        return self._side is not None and self._side.start_response(stream_id, status, headers)

    def send_body(self, stream_id: int, data: bytes) -> None:
        if self._side is not None:
            self._side.send_body(stream_id, data)

    def end_response(self, stream_id: int) -> None:
        if self._side is not None:
            self._side.end_response(stream_id)

    def pending_bytes(self, stream_id: int) -> int:
        """Body bytes queued for ``stream_id`` behind HTTP/2 flow control (0 on HTTP/1.1)."""
        return 0 if self._side is None else self._side.pending_bytes(stream_id)

    def close(self) -> None:
        """Stop taking requests: HTTP/1.1 closes after the one in flight,
        HTTP/2 sends GOAWAY and lets open streams finish."""
        if self._side is None:
            self.state = State.CLOSED
        else:
            self._side.close()

    def data_to_send(self) -> bytes:
        carry, self._carry = self._carry, b""
        if self._side is None:
            return carry
        return carry + self._side.data_to_send()


__all__ = ["H2_PREFACE", "HttpServerConnection", "State", "StreamReset"]
