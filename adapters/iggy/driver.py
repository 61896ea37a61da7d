"""The trio driver for Iggy over TCP (the only trio code of the Iggy adapter).

Theory of operation
-------------------
Iggy clients are strictly lockstep: one request, then exactly one reply
(iggy.md 1.1, iggy-current.md 4), so a connection needs no writer task and no
outbox: the read loop parses a frame, lets the session answer, writes the
reply and reads on. Backpressure is therefore TCP's own: while we compute or
write a reply we are not reading. Every complete frame in the buffer is served
before the next receive, so the buffer holds at most one partial frame
(bounded by ``codec.MAX_FRAME``) plus one ``RECV_CHUNK``, even for a peer
that pipelines.

A :class:`~adapters.iggy.session.Deferred` answer is completed here: password
hashing runs in ``trio.to_thread`` (argon2 takes tens of milliseconds); a send
waits for its durability callback, which the core's flusher task fires.

Errors: every peer mistake is already a reply (the session never raises for
input); a fatal framing error writes its reply and closes; a broken socket
ends the session quietly; anything else is our bug: logged, connection closed,
the listener keeps serving others (STYLE.md section 3).
"""

from __future__ import annotations

import itertools
import logging
from functools import partial

import trio

from .connection import State
from .errors import IggyStatus
from .events import NEED_DATA, Evict
from .session import TRANSPORT_TCP, Deferred, IggySession

log = logging.getLogger("ferry.iggy")

RECV_CHUNK = 256 * 1024  # bytes per receive: one typical batch of 1 000 x 128 B messages
IDLE_TIMEOUT_S = 600.0  # no byte for this long: the client is gone (its heartbeat is every 5 s)
_CLIENT_IDS = itertools.count(1)


async def serve_iggy_tcp(broker, host: str, port: int, conn_nursery, *,
                         task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Bind ``host:port`` (0 = a free port) and serve Iggy clients until cancelled.
    Supports ``nursery.start``; ``started()`` returns the bound port."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    task_status.started(bound)
    await trio.serve_listeners(partial(iggy_connection, broker), listeners, handler_nursery=conn_nursery)


def _peer(stream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
        return f"{host}:{port}"
    except (AttributeError, OSError):
        return "unknown"


async def iggy_connection(broker, stream: trio.abc.Stream) -> None:
    """Serve one Iggy client until it leaves or breaks the framing."""
    session = IggySession(broker, client_id=next(_CLIENT_IDS) & 0xFFFFFFFF, address=_peer(stream),
                          transport=TRANSPORT_TCP)
    try:
        await _read_loop(stream, session)
    except* (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError):
        pass  # the peer vanished or went silent: nobody to tell
    except* Exception:
        log.exception("iggy session failed", extra={"peer": session.address})
    finally:
        session.close()
        await trio.aclose_forcefully(stream)


async def _read_loop(stream, session: IggySession) -> None:
    conn = session.conn
    while True:
        with trio.fail_after(IDLE_TIMEOUT_S):
            data = await stream.receive_some(RECV_CHUNK)
        conn.receive_data(data)
        while True:
            try:
                event = conn.next_event()
            except IggyStatus:
                final = conn.data_to_send()  # the error reply, when the framing allows one
                if final:
                    await stream.send_all(final)
                return
            if event is NEED_DATA:
                break
            reply = session.handle(event)
            if isinstance(reply, Deferred):
                reply = await _complete(session, reply, getattr(event, "command", None))
            conn.send(reply, session=session.vsr_session)
            await stream.send_all(conn.data_to_send())
            if isinstance(reply, Evict) or conn.state is State.CLOSED:
                return
        if not data or session.broker.closed:
            return


async def _complete(session: IggySession, deferred: Deferred, command):
    if deferred.work is not None:
        try:
            deferred.outcome = await trio.to_thread.run_sync(deferred.work)
        except Exception as exc:  # noqa: BLE001 - handed to finish(), which maps core errors
            deferred.outcome = exc
    elif not deferred.done:
        done = trio.Event()
        deferred.on_done = done.set
        await done.wait()
    return session.finish(deferred, command)


__all__ = ["iggy_connection", "serve_iggy_tcp"]
