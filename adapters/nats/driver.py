"""The trio side of the NATS listener: sockets in, sans-I/O connection, broker out.

Theory of operation
-------------------
:func:`serve_nats` binds the listener and runs :func:`nats_connection` per
client (STYLE.md section 3). Each connection has three small tasks:

* the read loop feeds bytes to :class:`NatsServerConnection`, hands each event
  to :class:`NatsSession`, and moves the connection's replies to the outbox
  *before* acting on the next event, so replies and deliveries keep
  nats-server's order. It stops reading while the outbox is over its high
  water mark (TCP flow control then pushes back on the publisher);
* the write loop sends whatever the outbox holds as one write per wake-up;
* the timer loop runs the connection's PING / auth timers at
  :meth:`NatsServerConnection.next_deadline` (time from ``trio.current_time``).

A fatal protocol error sends what is queued, then ``-ERR '...'``, then closes;
a slow consumer is closed without ``-ERR`` (nats.md section 11). The broker's
``draining`` flag makes every connection say goodbye with an INFO carrying
``"ldm": true`` (lame duck mode, nats.md section 13) and close.
"""

from __future__ import annotations

import itertools
import logging
import secrets
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Callable

import trio

from .connection import NatsLimits, NatsServerConnection, ServerInfo
from .errors import NatsError, NatsProtocolError
from .events import NEED_DATA, Info
from .session import MAX_PENDING, NatsSession, Outbox

log = logging.getLogger("ferry.nats")

RECV_CHUNK = 64 * 1024       # one receive_some; nats-server reads in up to 64 KiB too
# Stop reading from a client while its own outbox holds more than this (our
# replies and its deliveries): the same 75 % mark at which nats-server
# stalls fast producers (nats.md section 11).
HIGH_WATER_FRACTION = 0.75
WRITE_DEADLINE = 10.0        # nats-server write_deadline: a stuck write is a slow consumer
CLOSE_GRACE = 1.0            # seconds to flush a final -ERR before closing
_BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def new_server_id() -> str:
    """A 56-character id shaped like nats-server's (an nkey public key starting with N)."""
    return "N" + "".join(secrets.choice(_BASE32) for _ in range(55))


@dataclass
class NatsServerState:
    """What every connection of one listener shares."""

    broker: object
    info: ServerInfo
    limits: NatsLimits = field(default_factory=NatsLimits)
    max_pending: int = MAX_PENDING
    authenticate: Callable | None = None
    client_ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    sessions: set = field(default_factory=set)
    total_connections: int = 0


async def serve_nats(state: NatsServerState, host: str, port: int, conn_nursery, *,
                     task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Bind ``host:port`` (0 = any free port) and serve NATS clients until
    cancelled. Supports ``nursery.start``; ``started()`` returns the bound port."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    state.info = replace(state.info, port=bound)  # INFO tells clients the real port
    task_status.started(bound)
    await trio.serve_listeners(partial(nats_connection, state), listeners, handler_nursery=conn_nursery)


async def nats_connection(state: NatsServerState, stream: trio.abc.Stream) -> None:
    """Serve one client until it leaves, breaks the protocol or is too slow."""
    client_ip = _peer_ip(stream)
    conn = NatsServerConnection(state.info, state.limits, client_id=next(state.client_ids),
                                client_ip=client_ip, now=trio.current_time(),
                                authenticate=state.authenticate)
    wakeup = _Wakeup()
    outbox = Outbox(state.max_pending, wakeup.set)
    session = NatsSession(state.broker, conn, outbox)
    state.sessions.add(session)
    state.total_connections += 1
    final = _Final()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_write_loop, stream, session, wakeup, final, nursery.cancel_scope)
            nursery.start_soon(_timer_loop, conn, session, final)
            await _read_loop(stream, conn, session, state, final)
            final.done = True
            wakeup.set()
    except* (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError):
        pass  # the peer vanished or stopped reading; nobody to tell
    except* Exception:
        log.exception("nats connection failed", extra={"client_id": conn.client_id})
    finally:
        session.close()
        state.sessions.discard(session)
        with trio.move_on_after(CLOSE_GRACE) as scope:
            scope.shield = True
            await trio.aclose_forcefully(stream)


class _Wakeup:
    """A re-armable event: ``set`` from sync code, ``wait`` in the writer."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = trio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()
        self._event = trio.Event()


class _Final:
    """Shared end-of-connection flags between the three tasks."""

    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = False
        self.error: bytes = b""


async def _read_loop(stream, conn: NatsServerConnection, session: NatsSession, state, final: _Final) -> None:
    outbox = session.outbox
    high_water = int(outbox.max_pending * HIGH_WATER_FRACTION)
    broker = state.broker
    outbox.offer(conn.data_to_send())  # the INFO queued at construction goes first
    while True:
        if session.slow:
            return
        if broker.draining:
            await _lame_duck(conn, outbox)
            return
        data = await stream.receive_some(RECV_CHUNK)
        try:
            conn.receive_data(data, trio.current_time())
            while True:
                event = conn.next_event()
                if event is NEED_DATA:
                    break
                outbox.offer(conn.data_to_send())   # replies before this event's deliveries
                session.handle(event)
        except NatsProtocolError as err:
            outbox.offer(conn.data_to_send())
            final.error = err.wire
            return
        except NatsError:
            return
        outbox.offer(conn.data_to_send())
        if not data:
            return
        while outbox.pending > high_water and not session.slow:
            await trio.sleep(0.001)  # the writer is draining; TCP pushes back on the peer


async def _lame_duck(conn: NatsServerConnection, outbox: Outbox) -> None:
    try:
        conn.send(Info({"ldm": True}))
    except NatsError:
        return
    outbox.offer(conn.data_to_send())


async def _write_loop(stream, session: NatsSession, wakeup: _Wakeup, final: _Final, cancel_scope) -> None:
    outbox = session.outbox
    while True:
        if session.slow:
            cancel_scope.cancel()   # nats-server closes a slow consumer without -ERR
            return
        if outbox.frames:
            data = outbox.take()
            with trio.fail_after(WRITE_DEADLINE):
                await stream.send_all(data)
            continue
        if final.done:
            if final.error:
                with trio.move_on_after(CLOSE_GRACE):
                    await stream.send_all(final.error)
            cancel_scope.cancel()
            return
        await wakeup.wait()


async def _timer_loop(conn: NatsServerConnection, session: NatsSession, final: _Final) -> None:
    while True:
        deadline = conn.next_deadline()
        if deadline is None:
            await trio.sleep_forever()
        await trio.sleep_until(deadline)
        try:
            conn.handle_deadline(trio.current_time())
        except NatsProtocolError as err:
            session.outbox.offer(conn.data_to_send())
            final.error = err.wire
            final.done = True
            session.outbox.wake()
            return
        session.outbox.offer(conn.data_to_send())


def _peer_ip(stream) -> str:
    sock = getattr(stream, "socket", None)
    try:
        return sock.getpeername()[0] if sock is not None else ""
    except OSError:
        return ""


__all__ = ["NatsServerState", "nats_connection", "new_server_id", "serve_nats"]
