"""The trio drivers of the Pravega adapter: segment store (TCP) and controller (gRPC).

Theory of operation
-------------------
Segment store: one connection, two tasks (STYLE.md section 3). The reader
decodes frames (:class:`~adapters.pravega.codec.FrameDecoder`) and hands each
command to the sans-I/O :class:`~adapters.pravega.session.SegmentStoreSession`,
which answers through :class:`Outbox` -- replies may leave out of request
order across requests (pravega.md section 1), acks from the core's flusher
land there too. The writer task drains the outbox, one ``send_all`` per
turn. Appends are pipelined: the reader never waits for an ack, only stops
reading while more than ``MAX_UNACKED_BYTES`` are appended and not yet
acknowledged, or while the outbox holds more than ``MAX_OUTBOX_BYTES``
(TCP then pushes back on the client). A read at the tail parks in its own
small task until the partition's durable end moves (readers get durable data
only: core/log/durable.py) or ``tail_park_s``.

Controller: gRPC unary calls over h2c (:mod:`adapters.pravega.grpc`) served
in the connection's task: every RPC is a quick synchronous call on the
metadata (:mod:`adapters.pravega.controller`).

A protocol violation closes the connection after the replies before it
(upstream closes too; clients reconnect and re-run SetupAppend); a broken
socket ends quietly; anything else is our bug: logged, connection closed,
the listener keeps serving.
"""

from __future__ import annotations

import logging
from functools import partial

import trio

from adapters.peer import peer_of
from core.access import bind_actor, current_actor
from core.connections import address, bind_connection, clip, directory_for
from core.metrics import listener_metrics, metrics_for
from core.perowner import PerOwner

from . import commands as C

from .auth import TokenIssuer, load_secret
from .codec import NEED_DATA, FrameDecoder
from .errors import PravegaProtocolError
from .grpc import GrpcServerConnection
from .session import ERROR_REPLIES, Park, SegmentStoreSession
from .state import state_of

log = logging.getLogger("ferry.pravega")

RECV_CHUNK = 256 * 1024  # bytes per receive
# Appended, not yet acknowledged bytes per connection before the reader pauses:
# two of the client's largest blocks (8 MiB each, pravega-client.md section 4),
# so a Java-style streaming writer keeps one block in flight behind another.
MAX_UNACKED_BYTES = 16 * 1024 * 1024
# Reply bytes queued for a slow reader before we stop reading its requests:
# a few maximal SegmentRead replies (2 MiB each, pravega.md section 7).
MAX_OUTBOX_BYTES = 8 * 1024 * 1024
# Parked tail reads per connection: the client keeps one per segment it reads,
# so this is far above any real reader and bounds a misbehaving one.
MAX_PARKED_READS = 1024
DEFAULT_TAIL_PARK_S = 5.0  # answered well before the client's 30 s timeout (pravega.md section 7)


_ISSUER_LOCKS: PerOwner[trio.Lock] = PerOwner(trio.Lock)  # per PravegaState


async def ensure_issuer(broker) -> TokenIssuer:
    """The broker's delegation-token issuer, made once from the key under its data dir
    (both Pravega listeners call this before serving; the lock keeps two first starts
    from racing on the key file)."""
    state = state_of(broker)
    lock = _ISSUER_LOCKS.of(state)
    async with lock:
        if state.issuer is None:
            state.issuer = TokenIssuer(await trio.to_thread.run_sync(load_secret, broker.data_dir))
    return state.issuer


class Outbox:
    """Reply frames waiting for the writer task; ``put`` never blocks."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.nbytes = 0
        self.ready = trio.Event()
        self.progress = trio.Event()  # set when the writer drained, or an ack came back
        self.closing = False

    def put(self, frame: bytes) -> None:
        self.frames.append(frame)
        self.nbytes += len(frame)
        self.ready.set()

    def poke(self) -> None:
        self.progress.set()
        self.ready.set()

    def take(self) -> bytes:
        out = b"".join(self.frames)
        self.frames.clear()
        self.nbytes = 0
        self.ready = trio.Event()
        return out


async def serve_segment_store(broker, host: str, port: int, conn_nursery, *, advertised_host: str,
                              tail_park_s: float = DEFAULT_TAIL_PARK_S,
                              task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Bind ``host:port`` and serve segment-store connections until cancelled;
    ``started()`` returns the bound port, which the controller's getURI names."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    state_of(broker).segment_store = (advertised_host, bound)
    task_status.started(bound)
    handler = partial(segment_store_connection, broker, tail_park_s=tail_park_s)
    await trio.serve_listeners(handler, listeners, handler_nursery=conn_nursery)


async def segment_store_connection(broker, stream: trio.abc.Stream, *, tail_park_s: float = DEFAULT_TAIL_PARK_S) -> None:
    peer = peer_of(stream) or "local"
    bind_actor("pravega", peer)  # who the audit lines and the login guard see
    outbox = Outbox()
    session = SegmentStoreSession(broker, outbox.put, on_ack=outbox.poke)
    counters = session.counters
    counters["connections_total"].inc("pravega")
    counters["connections_open"].inc("pravega")
    directory = directory_for(broker)
    scope = trio.CancelScope()   # the console's close
    entry = directory.open("pravega", address(peer), close=scope.cancel,
                           refresh=partial(_refresh_store, session, current_actor()))
    _meter_session(session, entry)
    try:
        with scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_write_loop, stream, outbox, session, nursery.cancel_scope)
                await _read_loop(broker, stream, outbox, session, nursery, tail_park_s, entry)
                outbox.closing = True
                outbox.poke()
    except* (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the peer vanished: nobody to tell
    except* Exception:
        log.exception("pravega segment store connection failed")
    finally:
        counters["connections_open"].dec("pravega")
        directory.closed(entry)
        session.close()
        await trio.aclose_forcefully(stream)


def _meter_session(session: SegmentStoreSession, entry) -> None:
    """Count the session on its console entry too (core/connections.py), and keep its
    failure replies, in Pravega's words, in the listener's last errors."""
    session.counters = entry.metered(session.counters)
    send = session.send

    def send_and_record(reply) -> None:
        if type(reply) in ERROR_REPLIES:
            entry.error(_reply_text(reply))
        send(reply)

    session.send = send_and_record


def _reply_text(reply) -> str:
    """A failure reply as the console lists it: its WireCommands name and what it names."""
    parts = [type(reply).__name__]
    for name in ("segment", "operation_name", "message", "serverStackTrace"):
        value = getattr(reply, name, None)
        if value:
            parts.append(f"{name}={value}")
    return " ".join(parts)


def _refresh_store(session: SegmentStoreSession, actor, entry) -> None:
    """The user a segment-store connection acts as and the segments it writes."""
    entry.user = actor.user
    segments = sorted({w.segment for w in session.writers.values()})
    entry.subscriptions = len(segments)
    entry.subjects = tuple(f"writer to {seg}" for seg in segments)


async def _read_loop(broker, stream, outbox: Outbox, session: SegmentStoreSession, nursery, park_s: float,
                     entry=None) -> None:
    decoder = FrameDecoder()
    parked = [0]
    while True:
        data = await stream.receive_some(RECV_CHUNK)
        decoder.receive_data(data)
        try:
            while (cmd := decoder.next_event()) is not NEED_DATA:
                if type(cmd) is C.Hello and entry is not None:   # the client's wire versions
                    entry.client, entry.version = "pravega", f"wire {cmd.low_version}..{cmd.high_version}"
                park = session.handle(cmd)
                if park is not None:
                    if parked[0] >= MAX_PARKED_READS:
                        session.read(park.cmd, parked=True)  # answer at once: empty, at tail
                    else:
                        parked[0] += 1
                        nursery.start_soon(_park, broker, session, park, park_s, parked)
        except PravegaProtocolError as exc:
            log.info("pravega connection closed: protocol error", extra={"reason": str(exc)})
            return
        if not data or session.close_after_flush:
            return
        while session.unacked_bytes > MAX_UNACKED_BYTES or outbox.nbytes > MAX_OUTBOX_BYTES:
            outbox.progress = trio.Event()
            await outbox.progress.wait()
            if session.close_after_flush:
                return


async def _park(broker, session: SegmentStoreSession, park: Park, park_s: float, parked: list) -> None:
    try:
        woken = trio.Event()
        cancel = broker.wait_for_durable(*park.key, woken.set)  # not on append: issue 30
        try:
            with trio.move_on_after(park_s):
                while not broker.draining:
                    await woken.wait()
                    break
        finally:
            cancel()
        if not session.closed:
            session.read(park.cmd, parked=True)
    finally:
        parked[0] -= 1


async def _write_loop(stream, outbox: Outbox, session: SegmentStoreSession, scope: trio.CancelScope) -> None:
    while True:
        await outbox.ready.wait()
        if outbox.frames:
            await stream.send_all(outbox.take())
        else:
            outbox.ready = trio.Event()
        outbox.progress.set()
        if (outbox.closing or session.close_after_flush) and not outbox.frames:
            scope.cancel()  # the reader may be parked in receive_some; parked reads end too
            return


# -- controller ------------------------------------------------------------------------------
async def serve_controller(broker, host: str, port: int, conn_nursery, *, service,
                           task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Bind ``host:port`` and serve the controller's gRPC API until cancelled."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    task_status.started(bound)
    await trio.serve_listeners(partial(controller_connection, service), listeners, handler_nursery=conn_nursery)


async def controller_connection(service, stream: trio.abc.Stream) -> None:
    peer = peer_of(stream) or "local"
    bind_actor("pravega_controller", peer)  # the login guard counts failures per address
    conn = GrpcServerConnection()
    counters = listener_metrics(metrics_for(service.broker))
    counters["connections_total"].inc("pravega_controller")
    counters["connections_open"].inc("pravega_controller")
    directory = directory_for(service.broker)
    scope = trio.CancelScope()   # the console's close
    actor = current_actor()
    entry = directory.open("pravega_controller", address(peer), close=scope.cancel,
                           refresh=lambda e: setattr(e, "user", actor.user))
    bind_connection(entry)   # the service counts per_connection (gateway/listeners/pravega_controller.py)
    try:
        with scope:
            await _serve_calls(service, stream, conn, entry)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    except Exception:
        log.exception("pravega controller connection failed")
    finally:
        counters["connections_open"].dec("pravega_controller")
        directory.closed(entry)
        await trio.aclose_forcefully(stream)


async def _serve_calls(service, stream, conn: GrpcServerConnection, entry) -> None:
    conn.initiate()
    await stream.send_all(conn.data_to_send())
    while not conn.closed:
        data = await stream.receive_some(RECV_CHUNK)
        if not data:
            return
        for call in conn.receive_data(data):
            agent = next((v for k, v in call.metadata if k == "user-agent"), None)
            if agent:
                entry.client = clip(agent)
            auth = getattr(service, "auth", None)
            check = auth.prepare(call.metadata) if auth is not None else None
            if check is not None:   # a password not seen lately: argon2 off the event loop
                check.settle(await trio.to_thread.run_sync(check))
            service.dispatch(conn, call)
        out = conn.data_to_send()
        if out:
            await stream.send_all(out)


__all__ = ["Outbox", "controller_connection", "ensure_issuer", "segment_store_connection", "serve_controller",
           "serve_segment_store"]
