"""The bytes-bounded queue of frames for one NATS client (no trio).

Theory of operation
-------------------
Every frame for a client, replies and deliveries alike, goes into its one
:class:`Outbox`; the driver's write loop drains it. Fan-out never awaits
(STYLE.md section 3): :meth:`Outbox.offer` refuses nothing while open, but the
session (``adapters/nats/session.py``) refuses deliveries once ``max_pending``
bytes are queued and marks the client slow; past ``high_water`` it stalls the
publishers that fill it. :meth:`Outbox.write_now` lets the task that queued
bytes send them itself while the writer task is parked.
"""

from __future__ import annotations

from typing import Callable

# nats-server's default per-connection outbound limit (max_pending, 64 MiB,
# nats.md section 11); past it the client is a slow consumer.
MAX_PENDING = 64 * 1024 * 1024
# Above this share of max_pending a client's outbox stalls whoever publishes
# to it, as nats-server stalls fast producers (nats.md section 11); the
# driver also stops reading from a client whose own outbox is past it.
HIGH_WATER_FRACTION = 0.75
# Frames one gathering write may take (Linux IOV_MAX is 1024); a longer queue is joined
# first, which small frames make cheap anyway.
WRITE_NOW_MAX_FRAMES = 512


class Outbox:
    """Frames queued for one client, bounded by bytes (STYLE.md section 3).

    ``pending`` counts bytes queued *and* bytes handed to a write that has not
    returned yet (nats-server's ``pb`` counts unflushed bytes the same way),
    so a writer stuck on a slow socket cannot make room by taking frames.
    ``wake`` is called (sync) whenever data arrives for an idle writer;
    ``drained`` is the driver's wake-up for whoever waits until ``pending``
    drops below ``high_water`` (a stalled reader or producer).

    ``direct`` (set by the driver for a plain TCP socket) writes a list of
    frames without blocking and says how many bytes the socket took; ``writer_idle`` is True while
    the connection's writer task is parked. :meth:`write_now` uses both to
    send from the task that queued the bytes, one task hop less per reply.
    ``kick`` wakes the writer task unconditionally: ``wake`` may leave a
    parked writer asleep while a reader's pass is about to call
    :meth:`write_now`, which kicks it only for what the socket did not take."""

    __slots__ = ("frames", "pending", "max_pending", "high_water", "closed", "wake", "drained", "direct",
                 "writer_idle", "kick")

    def __init__(self, max_pending: int = MAX_PENDING, wake: Callable[[], None] = lambda: None) -> None:
        self.frames: list[bytes | memoryview] = []
        self.pending = 0
        self.max_pending = max_pending
        self.high_water = int(max_pending * HIGH_WATER_FRACTION)
        self.closed = False
        self.wake = wake
        self.drained: object = None
        self.direct: Callable[[list], int] | None = None
        self.writer_idle = False
        self.kick = wake

    def offer(self, data: bytes) -> bool:
        """Queue control bytes (replies); never refused while open."""
        if data and not self.closed:
            self.frames.append(data)
            self.pending += len(data)
            self.wake()
        return not self.closed

    def take(self) -> bytes:
        """Everything queued, as one bytes; resets the pending count."""
        data = b"".join(self.frames)
        self.frames.clear()
        self.pending = 0
        return data

    def take_for_write(self) -> bytes:
        """Everything queued, as one bytes (one join per wake-up, STYLE.md
        section 3). The bytes stay in ``pending`` until :meth:`written`."""
        data = b"".join(self.frames)
        self.frames.clear()
        return data

    def written(self, nbytes: int) -> None:
        """``nbytes`` taken by :meth:`take_for_write` reached the socket."""
        self.pending = max(0, self.pending - nbytes)

    def write_now(self) -> None:
        """Send what is queued through ``direct`` while the writer task is
        parked (so no write of its own is in progress). A trio task wake-up
        costs tens of microseconds here (docs/nats.md "Performance"), a
        request/reply crosses two of them; what the socket does not take at
        once stays queued, first, for the writer task, which ``wake`` has
        already been told about. ``direct`` takes the frames as they are
        (a gathering write), so large payloads are not joined first."""
        frames = self.frames
        if not self.writer_idle or not frames or self.direct is None or self.closed:
            return
        if len(frames) > WRITE_NOW_MAX_FRAMES:
            frames[:] = [b"".join(frames)]
        sent = self.direct(frames)
        if not sent:
            self.kick()
            return
        if self.advance(sent):   # the socket took part of the queue: the writer sends the rest
            self.kick()
        if self.drained is not None:
            self.drained.set()

    def advance(self, sent: int) -> bool:
        """``sent`` bytes from the front of ``frames`` reached the socket: drop
        them (a frame taken in part stays as a view of its rest, first in line)
        and count them written. True if frames are left."""
        self.written(sent)
        frames = self.frames
        left = sent
        for i, frame in enumerate(frames):
            size = len(frame)
            if left < size:
                del frames[:i]
                if left:
                    frames[0] = memoryview(frame)[left:]
                return True
            left -= size
        frames.clear()
        return False


__all__ = ["HIGH_WATER_FRACTION", "MAX_PENDING", "WRITE_NOW_MAX_FRAMES", "Outbox"]
