"""The trio driver for Iggy over TCP (the only trio code of the Iggy adapter).

Theory of operation
-------------------
Iggy clients are lockstep: one request, then exactly one reply (iggy.md 1.1,
iggy-current.md 4). A connection has two tasks (STYLE.md section 3): the
reader parses frames and lets the session answer; the writer sends the
answers in request order, waiting where an answer is not ready yet. A send
is answered once its records are durable (its :class:`Deferred` fires from
the core's flusher), and while it waits the reader may parse the requests a
pipelining producer sent behind it, up to ``MAX_PIPELINED`` requests and
``MAX_PIPELINED_BYTES`` of request frames: their appends join the same group
commit. A lockstep client is unaffected (there is never a second request).
Any other Deferred (password hashing at login, in ``trio.to_thread``)
changes what the next request may do, so the reader waits until it is
answered before parsing more. Backpressure is TCP's own: past those limits
the reader stops reading.

Errors: every peer mistake is already a reply (the session never raises for
input); a fatal framing error writes its reply after the replies before it
and closes; a broken socket ends the session quietly; anything else is our
bug: logged, connection closed, the listener keeps serving others.

Metrics: :class:`IggyMeter` counts a connection in the shared per-listener
families (core/metrics.py ``listener_metrics``, label ``listener``): the TCP,
QUIC and WebSocket drivers all use it, so ``iggy_tcp``, ``iggy_quic`` and
``iggy_ws`` count the same things (docs/internals.md "Metrics").
"""

from __future__ import annotations

import itertools
import logging
import struct
from functools import partial

import trio

from adapters.peer import peer_of
from core.connections import clip, directory_for
from core.metrics import listener_metrics, metrics_for

from .connection import State
from .errors import IggyError, IggyStatus
from .events import NEED_DATA, Deferred, Evict, Reply, Request
from .messages import StoredBatch
from .session import TRANSPORT_TCP, IggySession
from .spec import COMMANDS

log = logging.getLogger("ferry.iggy")

RECV_CHUNK = 256 * 1024  # bytes per receive: one typical batch of 1 000 x 128 B messages
IDLE_TIMEOUT_S = 600.0  # no byte for this long: the client is gone (its heartbeat is every 5 s)
# A connection that has not logged in this long after it opened is closed
# (docs/security.md "Floods"): every Iggy SDK logs in right after connecting, and
# an unauthenticated connection may only ping and ask its identity. nats-server
# gives CONNECT 2 s; Iggy has no such limit, so this leaves room for slow TLS and
# a client's own connection retries.
LOGIN_TIMEOUT_S = 30.0
# Open connections per listener before new ones are closed at once (Iggy has no
# error frame before a login, so the close is the answer); 0 = unlimited.
DEFAULT_MAX_CONNECTIONS = 10_000
# Requests read ahead of their replies. Real Iggy clients never pipeline; a raw
# producer that does gets its sends into one group commit (nats bench's w256
# window, PERF-ANCHORS.md section 3). The bytes bound keeps a connection's
# share of pending data near one max_pending_bytes of the log (8 MiB).
MAX_PIPELINED = 32
MAX_PIPELINED_BYTES = 8 * 1024 * 1024
_CLIENT_IDS = itertools.count(1)
_FINAL = object()  # writer queue marker: write the bytes that follow, then stop
LISTENER = "iggy_tcp"  # the metrics label: the listener's name in gateway/registry.py
_SEND = COMMANDS.by_name["message.send"]
_POLL = COMMANDS.by_name["message.poll"]
# A PollMessages reply body starts with u32 partition, u64 offset, u32 count
# (replies.POLL_PREFIX, the same in every dialect); the polled messages follow.
_POLL_HEAD = 16
_U32 = struct.Struct("<I")


class IggyMeter:
    """One Iggy listener's counts in the shared families (``listener=label``).

    * connections: accepted (``connections_total``) and open now;
    * ``messages_in`` / ``bytes_in``: messages of each SendMessages the broker
      accepted and their payload bytes (user headers not included);
    * ``messages_out`` / ``bytes_out``: messages of each PollMessages reply and
      the bytes of those messages as sent (each message's header included: the
      reply is not walked per message, STYLE.md 7);
    * ``errors``: replies with a non-zero status, evictions and fatal framing
      errors.

    Counting wraps the session's ``handle`` and ``finish`` (the two places an
    answer comes from), so every driver counts alike without knowing the rules."""

    __slots__ = ("broker", "c", "label")

    def __init__(self, broker, label: str) -> None:
        self.broker = broker
        self.c = listener_metrics(metrics_for(broker))
        self.label = label

    def opened(self, session: IggySession, close=None) -> None:
        """A connection was accepted: count it, meter its session's answers and list it
        in the broker's connection directory (``close`` ends it: core/connections.py)."""
        self.c["connections_total"].inc(self.label)
        self.c["connections_open"].inc(self.label)
        entry = session.console = directory_for(session.broker).open(
            self.label, session.address, close=close, refresh=partial(_refresh_entry, session))
        c = entry.metered(self.c)  # one inc moves the listener's series and this connection's
        session.handle = self._metered_handle(session.handle, c, entry)
        session.finish = self._metered_finish(session.finish, c, entry)

    def closed(self, session: IggySession | None = None) -> None:
        self.c["connections_open"].dec(self.label)
        if session is not None and session.console is not None:
            directory_for(session.broker).closed(session.console)

    def full(self, limit: int) -> bool:
        """At ``limit`` open connections (0 = no limit): count a refusal and say so."""
        if limit and self.c["connections_open"].value(self.label) >= limit:
            self.c["connections_refused"].inc(self.label)
            return True
        return False

    def error(self, session: IggySession | None = None, message: str = "", remote: str = "") -> None:
        """A fatal framing error (the connection ends); ``message`` says which, for the
        listener's last errors (``remote``: the peer, when there is no ``session``)."""
        entry = getattr(session, "console", None)
        message = message or "framing error (connection closed)"
        if entry is not None:
            entry.metered(self.c)["errors"].inc(self.label)
            entry.error(message)
        else:
            self.c["errors"].inc(self.label)
            if self.broker is not None:
                directory_for(self.broker).errors.record(self.label, remote, message)

    def _metered_handle(self, handle, c, entry):
        label = self.label

        def handle_and_count(event):
            answer = handle(event)
            kind = type(answer)
            if kind is Deferred:
                if type(event) is Request and event.command is _SEND:  # appended; the ack follows
                    msgs = event.value.messages
                    if isinstance(msgs, StoredBatch):
                        count, size = msgs.count, msgs.payload_bytes
                    else:
                        count, size = len(msgs), sum(len(m.payload) for m in msgs)
                    c["messages_in"].inc(label, amount=count)
                    c["bytes_in"].inc(label, amount=size)
            elif kind is Reply:
                if answer.status:
                    c["errors"].inc(label)
                    entry.error(_status_text(answer.status, getattr(event, "command", None)))
                elif type(event) is Request and event.command is _POLL and len(answer.body) >= _POLL_HEAD:
                    count = _U32.unpack_from(answer.body, _POLL_HEAD - 4)[0]
                    if count:
                        c["messages_out"].inc(label, amount=count)
                        c["bytes_out"].inc(label, amount=len(answer.body) - _POLL_HEAD)
            else:  # Evict
                c["errors"].inc(label)
                entry.error("evicted (connection closed)")
            return answer

        return handle_and_count

    def _metered_finish(self, finish, c, entry):
        errors, label = c["errors"], self.label

        def finish_and_count(deferred, command):
            answer = finish(deferred, command)
            if type(answer) is not Reply or answer.status:
                errors.inc(label)
                entry.error(_status_text(getattr(answer, "status", 0), command) if type(answer) is Reply
                            else "evicted (connection closed)")
            return answer

        return finish_and_count


def _status_text(status: int, command) -> str:
    """An error reply as the console lists it: Iggy's name for the status, its code, the command."""
    try:
        name = IggyError(status).name.lower()
    except ValueError:
        name = "error"
    return f"{name} ({status})" + (f" to {command.name}" if command is not None else "")


def _refresh_entry(session: IggySession, entry) -> None:
    """The live identity of an Iggy connection (core/connections.py ``refresh``): the
    logged-in user, the SDK its login named, the consumer groups it joined."""
    entry.user = session.user.username if session.user is not None else ""
    entry.client, entry.version = clip(session.client_name), clip(session.client_version)
    groups = session.broker.consumers.groups_of(session.client_id)
    entry.subscriptions = len(groups)
    entry.subjects = tuple(_group_name(session.broker, g) for g in groups)


def _group_name(broker, key: tuple[int, int, int]) -> str:
    sid, tid, gid = key
    try:
        return f"group {broker.consumers.get_group(sid, tid, gid).name} of {broker.get_stream(sid).name}/" \
               f"{broker.get_topic(sid, tid).name}"
    except Exception:  # noqa: BLE001 - deleted meanwhile: the ids still say which
        return f"group {gid} of {sid}/{tid}"


async def serve_iggy_tcp(broker, host: str, port: int, conn_nursery, *, ssl_context=None,
                         max_connections: int = DEFAULT_MAX_CONNECTIONS,
                         task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Bind ``host:port`` (0 = a free port) and serve Iggy clients until cancelled;
    with ``ssl_context`` every connection is TLS from its first byte (Iggy's
    ``[tcp.tls]``: the SDKs' ``tls_enabled`` wraps the whole TCP stream).
    Supports ``nursery.start``; ``started()`` returns the bound port."""
    meter = IggyMeter(broker, LISTENER)
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    if ssl_context is not None:
        # https_compatible=False: Iggy clients expect a close_notify at the end (trio docs).
        listeners = [trio.SSLListener(lst, ssl_context, https_compatible=False) for lst in listeners]
    task_status.started(bound)
    await trio.serve_listeners(partial(iggy_connection, broker, meter=meter, max_connections=max_connections),
                               listeners,
                               handler_nursery=conn_nursery)


async def iggy_connection(broker, stream: trio.abc.Stream, *, meter: IggyMeter | None = None,
                          max_connections: int = DEFAULT_MAX_CONNECTIONS) -> None:
    """Serve one Iggy client until it leaves or breaks the framing (counted by
    ``meter``, the listener's; a test may leave it out)."""
    peer = peer_of(stream)
    # "host:port" with no IPv6 brackets, as the QUIC and WebSocket drivers write it
    peer_text = f"{peer[0]}:{peer[1]}" if peer else "unknown"
    try:
        await serve_session(broker, stream, client_id=next(_CLIENT_IDS) & 0xFFFFFFFF, address=peer_text,
                            transport=TRANSPORT_TCP, what="iggy session", meter=meter,
                            max_connections=max_connections)
    finally:
        await trio.aclose_forcefully(stream)


async def serve_session(broker, stream, *, client_id: int, address: str, transport: int, what: str,
                        meter: IggyMeter | None, max_connections: int = DEFAULT_MAX_CONNECTIONS) -> None:
    """One connection's session, from open to close (TCP and WebSocket share it; the
    caller closes the stream): an IggySession reading ahead ``MAX_PIPELINED`` requests,
    counted in ``meter``, served by :func:`serve_pipeline` until the peer leaves."""
    if meter is not None and meter.full(max_connections):
        log.warning("iggy connection refused: listener at max_connections",
                    extra={"peer": address, "listener": meter.label, "max_connections": max_connections})
        return   # the caller closes the stream
    session = IggySession(broker, client_id=client_id, address=address, transport=transport)
    session.conn.max_in_flight = MAX_PIPELINED
    scope = trio.CancelScope()  # the console's close: the caller then closes the stream
    if meter is not None:
        meter.opened(session, close=scope.cancel)
    try:
        with scope:
            await serve_pipeline(stream, session, what, meter)
    finally:
        session.close()
        if meter is not None:
            meter.closed(session)


async def serve_pipeline(stream, session: IggySession, what: str, meter: IggyMeter | None = None) -> None:
    """Run one connection's read and write loops (:class:`_Pipeline`) until the
    peer leaves; failures are logged, never raised (TCP and WebSocket share it).
    A fatal framing error is counted in ``meter``."""
    try:
        async with trio.open_nursery() as nursery:
            pipe = _Pipeline(stream, session, nursery.cancel_scope, meter)
            nursery.start_soon(pipe.write_loop)
            await pipe.read_loop()
    except* (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError):
        pass  # the peer vanished or went silent: nobody to tell
    except* Exception:
        log.exception(f"{what} failed", extra={"peer": session.address})


class _Pipeline:
    """One connection's reader and writer and the ordered answers between them."""

    def __init__(self, stream, session: IggySession, scope: trio.CancelScope, meter: IggyMeter | None = None) -> None:
        self.stream, self.session, self.scope, self.meter = stream, session, scope, meter
        # The connection refuses to parse past MAX_PIPELINED waiting requests, so
        # this channel (one slot per waiting request, plus the final item) never blocks.
        self.send_q, self.recv_q = trio.open_memory_channel(MAX_PIPELINED + 1)
        self.unacked_bytes = 0
        self.queued = 0  # answers handed to the writer and not yet written
        self._encoded = 0  # of those, encoded into the writer's next write
        # Set by the writer after each answer. The Event (~270 bytes) exists only
        # while the reader waits; a set with nobody waiting leaves _progressed.
        self._progress: trio.Event | None = None
        self._progressed = False
        # Until the first login (None after it: a later logout and re-login, as the
        # 0.9 client does after a credential change, is not a new connection).
        self.login_deadline: float | None = trio.current_time() + LOGIN_TIMEOUT_S

    async def read_loop(self) -> None:
        conn, session = self.session.conn, self.session
        try:
            while True:
                timeout = IDLE_TIMEOUT_S
                if self.login_deadline is not None:
                    if session.user is not None:
                        self.login_deadline = None
                    else:
                        timeout = self.login_deadline - trio.current_time()
                        if timeout <= 0:
                            log.info("iggy connection closed: no login in time",
                                     extra={"peer": session.address, "login_timeout_s": LOGIN_TIMEOUT_S})
                            return
                with trio.fail_after(min(timeout, IDLE_TIMEOUT_S)):
                    data = await self.stream.receive_some(RECV_CHUNK)
                conn.receive_data(data)
                if not await self._serve_frames(conn, session):
                    return
                if not data or session.broker.closed:
                    return
                while self.unacked_bytes > MAX_PIPELINED_BYTES or conn.state is State.AWAIT_REPLY:
                    await self._wait_progress()  # stop reading: TCP pushes back on the producer
                    if not await self._serve_frames(conn, session):
                        return
        finally:
            self.send_q.close()  # the writer answers what is queued, then ends

    async def _serve_frames(self, conn, session) -> bool:
        """Answer every complete frame buffered; False when the connection must end."""
        while True:
            try:
                event = conn.next_event()
            except IggyStatus as err:
                if self.meter is not None:
                    self.meter.error(session, f"{err} (connection closed)")
                final = conn.data_to_send()  # the error reply, when the framing allows one
                await self.send_q.send((_FINAL, final, 0))
                return False
            if event is NEED_DATA:
                return True
            size = conn.last_frame_size
            reply = session.handle(event)
            command = getattr(event, "command", None)
            if isinstance(reply, Deferred) and reply.work is not None:
                # Login: what follows depends on it; answer it before parsing on.
                self.queued += 1
                await self.send_q.send((reply, command, 0))
                while self.queued:
                    await self._wait_progress()
                continue
            if not self.queued and not isinstance(reply, Deferred):
                # Nothing ahead of it (a lockstep client's poll, ping, ...): answer
                # here, without the hop to the writer task, which is idle, so the
                # stream still has one sender at a time.
                conn.send(reply, session=session.vsr_session)
                await self.stream.send_all(conn.data_to_send())
                if isinstance(reply, Evict) or conn.state is State.CLOSED:
                    return False
                continue
            self.unacked_bytes += size
            self.queued += 1
            await self.send_q.send((reply, command, size))
            if conn.state is State.CLOSED:
                return False

    async def _wait_progress(self) -> None:
        """Until the writer's next :meth:`_set_progress` (at once if there was
        one since the last wait)."""
        if self._progressed:
            self._progressed = False
            await trio.lowlevel.checkpoint()
            return
        event = self._progress   # a wait cancelled earlier left it: a set since then counts
        if event is None:
            event = self._progress = trio.Event()
        await event.wait()
        self._progress = None

    def _set_progress(self) -> None:
        if self._progress is None:
            self._progressed = True
        else:
            self._progress.set()

    async def write_loop(self) -> None:
        """Answer in order. Answers that are ready together (the acks of one group
        commit) go out in one write (STYLE.md section 7: batch writes)."""
        async for item in self.recv_q:
            out: list[bytes] = []
            done = False
            while not done:
                done = await self._answer(item, out)
                if done:
                    break
                try:
                    item = self.recv_q.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
            if out:
                await self._write(out)
            self._set_progress()
            if done:
                break
            item = None  # not kept while parked: a login's answer holds its closures
        self.scope.cancel()  # the reader may be parked in receive_some

    async def _answer(self, item, out: list[bytes]) -> bool:
        """Encode the answer of one queued request into ``out``; True when the
        connection ends after it."""
        reply, command, size = item
        if reply is _FINAL:
            if command:
                out.append(command)
            return True
        conn, session = self.session.conn, self.session
        if isinstance(reply, Deferred):
            if not reply.done and out:  # send what is ready before waiting
                await self._write(out)
            reply = await _complete(session, reply, command)
        conn.send(reply, session=session.vsr_session)
        out.append(conn.data_to_send())
        self.unacked_bytes -= size
        self._encoded += 1
        return isinstance(reply, Evict) or conn.state is State.CLOSED

    async def _write(self, out: list[bytes]) -> None:
        await self.stream.send_all(b"".join(out))
        out.clear()
        self.queued -= self._encoded  # only now: the reader answers directly when this is 0
        self._encoded = 0
        self._set_progress()


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


__all__ = ["IggyMeter", "iggy_connection", "serve_iggy_tcp"]
