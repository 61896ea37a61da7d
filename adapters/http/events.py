"""Events of the HTTP server connection (adapters/http/connection.py).

h11 and h2 each have their own event types; the connection folds both into
these few, so the application above never knows which protocol a request
came over. Requests arrive whole: the connection buffers a body up to the
configured limit (iggy.md section 8: Iggy's HTTP body limit is 2 MB) and
reports a :class:`RequestError` past it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import HttpError


@dataclass(frozen=True, slots=True)
class Request:
    """Fires once a request's head and whole body have arrived.

    ``stream_id`` names the exchange the response goes to: the HTTP/2 stream
    id, or a per-connection counter on HTTP/1.1. Header names are lower-case
    bytes (h11 and h2 both normalise them)."""

    stream_id: int
    method: str
    target: str  # path and query as sent ("/streams/1/topics?x=y")
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    http_version: str  # "1.1", "1.0" or "2"

    def header(self, name: bytes) -> bytes | None:
        """The first value of header ``name`` (lower-case), or None."""
        for k, v in self.headers:
            if k == name:
                return v
        return None


@dataclass(frozen=True, slots=True)
class RequestError:
    """Fires when a request cannot be served as sent: a body over the limit
    (413), a malformed HTTP/1.1 head (400), headers too large (431).

    The application answers ``error.response()`` on ``stream_id``; on HTTP/1.1
    the connection then closes (the rest of that request cannot be framed)."""

    stream_id: int
    error: HttpError


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """Fires once: the peer closed, or broke the protocol beyond an answer.

    Whatever :meth:`HttpServerConnection.data_to_send` still holds (a GOAWAY,
    a final response) should be sent before the socket is closed."""

    reason: str = ""


class NeedData:
    """Returned by ``next_event`` when more bytes are needed (h11's NEED_DATA)."""

    _instance: "NeedData | None" = None

    def __new__(cls) -> "NeedData":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA = NeedData()

Event = Request | RequestError | ConnectionClosed

__all__ = ["ConnectionClosed", "Event", "NEED_DATA", "NeedData", "Request", "RequestError"]
