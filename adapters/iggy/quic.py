"""Iggy over QUIC, sans-I/O: aioquic events in, whole requests out, replies onto streams.

Theory of operation
-------------------
Iggy's QUIC transport carries exactly one request per bidirectional stream:
the client writes one frame (legacy ``length, code, body`` or a VSR envelope,
the same bytes as on TCP) and finishes its side; the server writes one reply
frame and finishes (protocols/iggy.md 1.2, iggy-current.md 10). A QUIC
connection is one session (one login, one dialect).

:class:`IggyQuicGlue` sits between aioquic's ``QuicConnection`` (itself
sans-I/O) and an :class:`~adapters.iggy.session.IggySession`:

* :meth:`feed_events` takes the events ``QuicConnection.next_event()`` gave,
  buffers each stream's bytes (bounded by :data:`MAX_REQUEST_BYTES`) and
  queues the stream id once its FIN arrived;
* the driver takes queued streams one at a time (the session's connection is
  lockstep) and calls :meth:`request_events` to parse the stream's frame,
  then :meth:`reply` to write the answer with FIN.

No trio and no clock here: the trio side (``quic_driver.py``) owns the UDP
socket, the timers and the waiting for Deferred answers, as aioquic's own
examples and hypercorn's trio server do (STYLE.md 3, "QUIC").
"""

from __future__ import annotations

from collections import deque

from aioquic.quic.events import ConnectionTerminated, QuicEvent, StreamDataReceived, StreamReset

from .events import NEED_DATA, Evict, Reply
from .errors import IggyError, IggyStatus

# Iggy's server reads a request stream "to end (max 10 MB)" (iggy.md 1.2); a
# batch of messages is bounded by codec.MAX_FRAME on TCP, and we keep the same.
MAX_REQUEST_BYTES = 64 * 1024 * 1024 + 64 * 1024
MAX_QUEUED_REQUESTS = 1024  # finished streams waiting for their turn; more is abuse


class IggyQuicGlue:
    """Per QUIC connection: stream buffers, the queue of finished requests."""

    def __init__(self, quic, session) -> None:
        self.quic = quic
        self.session = session
        self._buffers: dict[int, bytearray] = {}
        self.ready: deque[tuple[int, bytes]] = deque()
        self.terminated = False

    def feed_events(self, events: list[QuicEvent]) -> None:
        for ev in events:
            if isinstance(ev, StreamDataReceived):
                buf = self._buffers.setdefault(ev.stream_id, bytearray())
                if len(buf) + len(ev.data) > MAX_REQUEST_BYTES or len(self.ready) >= MAX_QUEUED_REQUESTS:
                    self._buffers.pop(ev.stream_id, None)
                    self.quic.reset_stream(ev.stream_id, int(IggyError.INVALID_COMMAND))
                    continue
                buf += ev.data
                if ev.end_stream:
                    self.ready.append((ev.stream_id, bytes(self._buffers.pop(ev.stream_id))))
            elif isinstance(ev, StreamReset):
                self._buffers.pop(ev.stream_id, None)
            elif isinstance(ev, ConnectionTerminated):
                self.terminated = True

    def request_events(self, data: bytes):
        """The events of one request stream: normally exactly one Request/BadRequest.
        A stream holding a partial frame yields a BadRequest-equivalent status."""
        conn = self.session.conn
        conn.receive_data(data)
        try:
            ev = conn.next_event()
        except IggyStatus as err:
            return None, err
        if ev is NEED_DATA:  # the stream ended inside a frame
            return None, IggyStatus(IggyError.INVALID_COMMAND, "stream ended inside a frame", fatal=True)
        return ev, None

    def reply(self, stream_id: int, answer: Reply | Evict) -> None:
        """Queue ``answer`` on the request's stream and finish it."""
        conn = self.session.conn
        conn.send(answer, session=self.session.vsr_session)
        self.quic.send_stream_data(stream_id, conn.data_to_send(), end_stream=True)
        if isinstance(answer, Evict):
            self.quic.close(error_code=0, reason_phrase="evicted")

    def fail(self, stream_id: int, err: IggyStatus) -> None:
        """A framing error on one stream: send what the framing allows, then close."""
        data = self.session.conn.data_to_send()
        self.quic.send_stream_data(stream_id, data, end_stream=True)
        self.quic.close(error_code=int(err.code), reason_phrase="invalid frame")


__all__ = ["IggyQuicGlue", "MAX_REQUEST_BYTES"]
