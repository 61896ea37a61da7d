"""The HTTP/2 send pump: response bodies waiting for flow-control window (sans-I/O).

Theory of operation
-------------------
h2's ``H2Connection`` sends DATA only as far as the peer's flow-control
windows (the stream's and the connection's, RFC 9113 section 5.2) and its
SETTINGS_MAX_FRAME_SIZE allow. A server answering with bodies must keep the
rest and send it when a WINDOW_UPDATE or a SETTINGS change arrives.
:class:`SendPump` is that, once, for adapters/http (h2side.py) and Pravega's
gRPC controller (adapters/pravega/grpc.py). Per stream it holds the body bytes
not sent yet, whether the producer has ended the body, and how the stream ends
once everything went out:

* ``end_with_data``: END_STREAM rides on the last DATA frame (an HTTP
  response); otherwise ``finish(stream_id)`` ends the stream (gRPC trailers,
  or an RST_STREAM after a refused request);
* ``finish`` runs once the body is drained and ended, unless END_STREAM
  already went out with the last DATA frame (then the stream needs nothing
  more); without ``finish``, ``end_stream`` is sent.

A stream h2 refuses meanwhile (reset or closed by the peer: h2's
``StreamClosedError``/``ProtocolError``) is dropped with what it still held.
The owner calls :meth:`pump` on ``WindowUpdated`` and
``RemoteSettingsChanged``; :meth:`add` and :meth:`end` pump by themselves.
Nothing here does I/O: the owner writes ``data_to_send()`` as always.
Memory: at most what the owner queued; each owner bounds its bodies
(HTTP's streaming through ``pending_bytes``, gRPC's one reply per stream).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import h2.connection
import h2.exceptions

_GONE = (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError)


@dataclass(slots=True)
class _Body:
    data: bytearray  # body bytes not yet sent (waiting for window)
    end_with_data: bool  # END_STREAM goes on the last DATA frame
    finish: Callable[[int], None] | None  # ends the stream otherwise
    ended: bool = False  # the producer finished the body
    sent_end: bool = False  # END_STREAM went out with the last DATA frame


class SendPump:
    """Bodies of one h2 connection's streams, sent as far as flow control allows."""

    def __init__(self, conn: h2.connection.H2Connection) -> None:
        self._conn = conn
        self._bodies: dict[int, _Body] = {}

    def open(self, stream_id: int, data: bytes | bytearray = b"", *, ended: bool = False,
             end_with_data: bool = True, finish: Callable[[int], None] | None = None) -> None:
        """Start the body of ``stream_id`` (its HEADERS are sent), then pump."""
        self._bodies[stream_id] = _Body(bytearray(data), end_with_data, finish, ended)
        if data or ended:
            self.pump()

    def add(self, stream_id: int, data: bytes) -> bool:
        """Append to an open, unended body and pump; False (nothing done) otherwise."""
        body = self._bodies.get(stream_id)
        if body is None or body.ended:
            return False
        body.data += data
        self.pump()
        return True

    def end(self, stream_id: int) -> bool:
        """The producer is done with the body: pump; False if it was not open."""
        body = self._bodies.get(stream_id)
        if body is None or body.ended:
            return False
        body.ended = True
        self.pump()
        return True

    def forget(self, stream_id: int) -> None:
        """Drop a stream's body (the peer reset the stream)."""
        self._bodies.pop(stream_id, None)

    def clear(self) -> None:
        self._bodies.clear()

    def pending_bytes(self, stream_id: int | None = None) -> int:
        """Body bytes still waiting for window: of ``stream_id``, or of every stream."""
        if stream_id is None:
            return sum(len(body.data) for body in self._bodies.values())
        body = self._bodies.get(stream_id)
        return 0 if body is None else len(body.data)

    def __bool__(self) -> bool:
        return bool(self._bodies)

    def pump(self) -> None:
        """Send every waiting body as far as flow control allows (RFC 9113 5.2); finish
        the streams whose bodies are drained and ended."""
        conn = self._conn
        for sid in list(self._bodies):
            body = self._bodies[sid]
            data = body.data
            try:
                while data:
                    size = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size, len(data))
                    if size <= 0:
                        break
                    last = size == len(data) and body.ended and body.end_with_data
                    conn.send_data(sid, bytes(memoryview(data)[:size]), end_stream=last)
                    del data[:size]  # a bytearray drops a prefix without moving the rest
                    body.sent_end = last
                if data or not body.ended:
                    continue
                del self._bodies[sid]
                if body.sent_end:
                    continue
                if body.finish is not None:
                    body.finish(sid)
                else:
                    conn.end_stream(sid)  # an empty body, or ended after its last DATA
            except _GONE:
                self._bodies.pop(sid, None)


__all__ = ["SendPump"]
