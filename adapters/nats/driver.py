"""The trio side of the NATS listener: sockets in, sans-I/O connection, broker out.

Theory of operation
-------------------
:func:`serve_nats` binds the listener and runs :func:`nats_connection` per
client (STYLE.md section 3). Each connection has two small tasks:

* the read loop feeds bytes to :class:`NatsServerConnection`, hands each event
  to :class:`NatsSession`, and moves the connection's replies to the outbox
  *before* acting on the next event, so replies and deliveries keep
  nats-server's order. It stops reading while the outbox is over its high
  water mark (TCP flow control then pushes back on the publisher);
* the write loop sends whatever the outbox holds as one join per wake-up
  (in 1 MiB slices); bytes stay counted as pending until written, and each
  write wakes whoever waits for the outbox to drain: its own reader over the
  high water mark, or a fast producer stalled on it (at most STALL_TOTAL per
  read, as nats-server). It also runs the connection's PING / auth timers at
  :meth:`NatsServerConnection.next_deadline` (time from ``trio.current_time``)
  while it waits for bytes: a third task per connection only for timers cost
  about 2.8 KB of an idle connection's ~17 KB (docs/internals.md "Memory").

A fatal protocol error sends what is queued, then ``-ERR '...'``, then closes;
a slow consumer is closed without ``-ERR`` (nats.md section 11). The broker's
``draining`` flag makes every connection say goodbye with an INFO carrying
``"ldm": true`` (lame duck mode, nats.md section 1) and close: a busy reader
sees the flag between reads; idle ones are reached through
:meth:`NatsServerState.enter_lame_duck`, which :func:`serve_nats` calls when
the gateway cancels it during shutdown.

With TLS configured, INFO is written in clear text and the client's TLS
handshake follows on the same socket before the three tasks start
(nats.md section 13). The settings and live connections live in
:class:`~adapters.nats.server_state.NatsServerState`, shared with the
WebSocket and monitoring listeners.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import ssl
import time
from dataclasses import replace
from functools import partial

import trio

from adapters.peer import peer_of
from core.access import bind_actor
from core.errors import StorageConflict, StorageError
from core.connections import address, clip, directory_for

from .connection import NatsServerConnection
from .errors import AUTHORIZATION_VIOLATION, MAX_CONNECTIONS_EXCEEDED, NatsError, NatsProtocolError, err_frame
from .events import Info
from .server_state import ClientRecord, Meter, NatsServerState, meter_for, refresh_entry
from .outbox import WRITE_NOW_MAX_FRAMES, Outbox
from .session import NatsSession
from .jetstream.warmup import cold, warm_for

log = logging.getLogger("ferry.nats")

# One receive_some. nats-server reads at most 64 KiB per read, but each trio
# wake-up costs tens of microseconds here: a 256 KiB read let a toy trio server
# beat nats-server at 16 KiB messages (PERF-ANCHORS.md section 1, recommendation 1).
RECV_CHUNK = 256 * 1024
# A fast producer waits at most this long per read for the clients it filled
# past their high water mark to drain (nats-server stallTotalAllowed, 10 ms,
# server/client.go); after that it reads on, and a consumer that still cannot
# keep up is closed as a slow consumer at max_pending.
STALL_TOTAL = 0.010
# The writer hands the socket at most this much per send_all, so the outbox's
# pending count (and the producers stalled on it) moves on as bytes leave.
WRITE_SLICE = 1024 * 1024
WRITE_DEADLINE = 10.0        # nats-server write_deadline: a stuck write is a slow consumer
CLOSE_GRACE = 1.0            # seconds to flush a final -ERR before closing
_BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def new_server_id() -> str:
    """A 56-character id shaped like nats-server's (an nkey public key starting with N)."""
    return "N" + "".join(secrets.choice(_BASE32) for _ in range(55))


async def serve_nats(state: NatsServerState, host: str, port: int, conn_nursery, *,
                     task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Bind ``host:port`` (0 = any free port) and serve NATS clients until
    cancelled. Supports ``nursery.start``; ``started()`` returns the bound port."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    state.info = replace(state.info, port=bound)  # INFO tells clients the real port
    state.ports["nats"] = bound
    try:
        task_status.started(bound)
        await trio.serve_listeners(partial(nats_connection, state), listeners, handler_nursery=conn_nursery)
    finally:
        # The gateway cancels its listeners right after setting broker.draining:
        # wake idle readers so every client gets the lame-duck INFO now.
        if getattr(state.broker, "draining", False):
            state.enter_lame_duck()


async def nats_connection(state: NatsServerState, stream: trio.abc.Stream, kind: str = "nats") -> None:
    """Serve one client until it leaves, breaks the protocol or is too slow.

    ``stream`` is any trio Stream (TCP, or a WebSocket adapted by the nats_ws
    listener); ``kind`` is what the monitor reports for it. For ``"nats"``
    with ``state.ssl_context`` set, INFO goes out in clear text and the
    client's TLS handshake follows on the same stream (nats.md section 13);
    a WebSocket's TLS, if any, is the WebSocket listener's business."""
    client_ip, client_port = peer_of(stream) or ("", 0)
    # Who this task speaks for (core/access.py): the login guard and the audit
    # lines of a login or a refusal on this connection name it; a login adds the user.
    bind_actor("nats" if kind == "nats" else "nats_ws", client_ip or "local")
    upgrade = kind == "nats" and state.ssl_context is not None
    info = state.info if upgrade or not state.info.tls_required else \
        replace(state.info, tls_required=False, tls_verify=False)
    conn = NatsServerConnection(info, state.limits, client_id=next(state.client_ids),
                                client_ip=client_ip, now=trio.current_time(),
                                authenticate=state.authenticate, permissions=state.initial_permissions)
    if state.max_connections and len(state.clients) >= state.max_connections:
        await _refuse_over_capacity(stream, conn)
        return
    wakeup = _Wakeup()
    touched = state.touched

    def wake() -> None:
        touched.add(outbox)   # a reader's pass ends with write_now() on each (_read_loop)
        # During a reader's pass, a parked writer of a plain TCP socket is left
        # asleep: that pass's write_now sends the bytes and kicks the writer only
        # for what the socket did not take. Waking it anyway cost a request/reply
        # two idle task turns (~25 us each, py-spy; docs/nats.md "Performance").
        if not (state.in_pass and outbox.writer_idle and outbox.direct is not None):
            wakeup.set()

    outbox = Outbox(state.max_pending, wake)
    outbox.kick = wakeup.set
    outbox.drained = drained = _Wakeup()
    session = NatsSession(state.broker, conn, outbox)
    session.may_park = True           # _read_loop resumes a parked JetStream request
    record = ClientRecord(session, kind=kind, ip=client_ip, port=client_port)
    state.add(conn.client_id, record)
    meter = record.meter = meter_for(state, session, "nats" if kind == "nats" else "nats_ws")
    final = _Final()
    # The console's entry (core/connections.py): counts come from the session, as /connz's.
    directory = directory_for(state.broker)
    entry = directory.open("nats" if kind == "nats" else "nats_ws", address((client_ip, client_port)),
                           close=partial(_kick_now, conn, outbox, final, wakeup),
                           refresh=partial(refresh_entry, session))
    conn.on_error = entry.error
    try:
        if upgrade:
            tls = await _start_tls(state, stream, conn, record)
            if tls is None:
                return
            stream = tls
        elif isinstance(stream, trio.SocketStream):  # plain TCP: any task that queued bytes may write them
            outbox.direct = _direct_writer(stream.socket.fileno())
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_write_loop, stream, conn, session, wakeup, final, nursery.cancel_scope, meter,
                               drained)
            record.wake = partial(_lame_duck_now, conn, outbox, final, wakeup)
            record.revoke = partial(_revoke_now, conn, outbox, final, wakeup)
            await _read_loop(stream, conn, session, state, final, meter, drained)
            final.done = True
            wakeup.set()
    except* (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError):
        pass  # the peer vanished or stopped reading; nobody to tell
    except* Exception:
        log.exception("nats connection failed", extra={"client_id": conn.client_id})
    finally:
        session.close()
        state.touched.discard(outbox)
        state.remove(conn.client_id)
        meter.close(fatal_error=bool(final.error))
        directory.closed(entry)
        if final.error:   # counted by meter.close: its words go to the listener's last errors
            entry.error(_err_text(final.error) + " (connection closed)")
        with trio.move_on_after(CLOSE_GRACE) as scope:
            scope.shield = True
            await trio.aclose_forcefully(stream)


async def _refuse_over_capacity(stream, conn: NatsServerConnection) -> None:
    """nats-server's answer past max_connections: INFO, the error, the close."""
    log.warning("nats connection refused: max_connections reached", extra={"client_ip": conn.client_ip})
    try:
        with trio.move_on_after(CLOSE_GRACE):
            await stream.send_all(conn.data_to_send() + err_frame(MAX_CONNECTIONS_EXCEEDED))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await trio.aclose_forcefully(stream)


async def _start_tls(state: NatsServerState, stream, conn: NatsServerConnection,
                     record: ClientRecord) -> trio.SSLStream | None:
    """Send INFO in clear text, then run the server side of the client's TLS
    handshake on the same stream; with ``tls_handshake_first`` the handshake
    comes first and INFO stays queued for the TLS stream. None when the
    handshake fails or is too slow: nats-server closes such a client without
    a word (nats.md section 10)."""
    if not state.tls_handshake_first:
        with trio.fail_after(state.tls_timeout):
            await stream.send_all(conn.data_to_send())
    tls = trio.SSLStream(stream, state.ssl_context, server_side=True)
    try:
        with trio.fail_after(state.tls_timeout):
            await tls.do_handshake()
    except (trio.BrokenResourceError, trio.TooSlowError, ssl.SSLError) as exc:
        log.info("TLS handshake failed", extra={"client_id": conn.client_id, "error": repr(exc)})
        return None
    record.tls_version = tls.version() or ""          # SSLStream forwards these to its SSLObject
    record.tls_cipher = (tls.cipher() or ("",))[0]
    return tls


class _Wakeup:
    """A re-armable event: ``set`` from sync code, ``wait`` in any task.

    Several tasks may wait at once (a client's own reader and producers
    stalled on its outbox): the first to wake re-arms, the others see that
    the event was already replaced and leave the new one alone, so no
    waiter is left on an event nobody will set.

    The ``trio.Event`` (about 270 bytes with its task set) exists only while
    someone waits; a ``set`` with nobody waiting leaves ``_pending`` for the
    next ``wait``, which then returns at once, as on a set event. Most
    connections' ``drained`` wake-up is never waited on."""

    __slots__ = ("_event", "_pending")

    def __init__(self) -> None:
        self._event: trio.Event | None = None
        self._pending = False

    def set(self) -> None:
        event = self._event
        if event is None:
            self._pending = True
        else:
            event.set()

    async def wait(self) -> None:
        if self._pending:
            self._pending = False
            await trio.lowlevel.checkpoint()
            return
        event = self._event
        if event is None:
            event = self._event = trio.Event()
        await event.wait()
        if self._event is event:
            self._event = None


class _Final:
    """Shared end-of-connection flags between the three tasks."""

    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = False
        self.error: bytes = b""


async def _read_loop(stream, conn: NatsServerConnection, session: NatsSession, state, final: _Final,
                     meter: Meter, drained: _Wakeup) -> None:
    outbox = session.outbox
    high_water = outbox.high_water
    stalled = session.stalled
    broker = state.broker
    outbox.offer(conn.data_to_send())  # the INFO queued at construction goes first
    receive = _socket_receiver(stream.socket) if outbox.direct is not None else stream.receive_some
    while True:
        if session.slow:
            return
        if broker.draining:
            await _lame_duck(conn, outbox)
            return
        data = await receive(RECV_CHUNK)
        if not _pass(conn, session, state, final, partial(conn.receive_data, data, trio.current_time())):
            return
        while conn.auth_pending is not None:   # a password checked in a worker thread, then on
            pending = conn.auth_pending
            outcome = await trio.to_thread.run_sync(_outcome, pending.work)
            if not _pass(conn, session, state, final, lambda: conn.resume_auth(pending.finish(outcome))):
                return
        while session.parked is not None:      # a JetStream request waits for cold state
            await _warm_parked(session)
            if not _pass(conn, session, state, final, session.resume_parked):
                return
        meter.fold()
        if not data:
            return
        while outbox.pending > high_water and not session.slow:
            await drained.wait()   # set by the writer as bytes leave; TCP pushes back on the peer
        if stalled:
            await _stall(stalled)


def _pass(conn: NatsServerConnection, session: NatsSession, state, final: _Final, first) -> bool:
    """One synchronous pass: ``first()`` (feed bytes, or resume a deferred CONNECT),
    then every complete operation, then every outbox the pass filled is written.
    False when the connection must end (a fatal error is left in ``final``)."""
    outbox, touched = session.outbox, state.touched
    state.in_pass = True
    try:
        first()
        outbox.offer(conn.data_to_send())
        session.process()   # every complete operation, in one synchronous pass
        outbox.offer(conn.data_to_send())
    except NatsProtocolError as err:
        outbox.offer(conn.data_to_send())
        final.error = err.wire
        return False
    except NatsError:
        return False
    finally:
        state.in_pass = False
        if touched:   # every outbox this pass queued bytes for, this client's own included
            targets = list(touched)
            touched.clear()
            for target in targets:
                target.write_now()
    return True


def _outcome(work):
    """``work()``'s result, or the exception it raised (handed to DeferredAuth.finish)."""
    try:
        return work()
    except Exception as exc:  # noqa: BLE001 - the finish step on the trio thread decides
        return exc


async def _stall(stalled: set[Outbox]) -> None:
    """Fast-producer stall (nats-server ``stalledWait``): wait, at most
    STALL_TOTAL in all, for the outboxes this client filled to drain."""
    with trio.move_on_after(STALL_TOTAL):
        for target in list(stalled):
            drained = target.drained
            while drained is not None and target.pending > target.high_water and not target.closed:
                await drained.wait()
    stalled.clear()


async def _lame_duck(conn: NatsServerConnection, outbox: Outbox) -> None:
    try:
        conn.send(Info({"ldm": True}))
    except NatsError:
        return
    outbox.offer(conn.data_to_send())


def _lame_duck_now(conn: NatsServerConnection, outbox: Outbox, final: _Final, wakeup: _Wakeup) -> None:
    """Lame duck for a client idle in ``receive_some`` (called by
    ``NatsServerState.enter_lame_duck``): queue the ``ldm`` INFO and let the
    writer send it and close, which also ends the pending read. Cancelling
    the read instead would break a TLS stream (trio.SSLStream)."""
    if final.done:
        return
    try:
        conn.send(Info({"ldm": True}))
    except NatsError:
        return
    outbox.offer(conn.data_to_send())
    final.done = True
    wakeup.set()


def _revoke_now(conn: NatsServerConnection, outbox: Outbox, final: _Final, wakeup: _Wakeup) -> None:
    """The connection's user was deleted (``server_state.revoke_user``): send what
    is queued, then ``-ERR 'Authorization Violation'`` (nats-server's words when it
    revokes a user), then close; the writer does it, which also ends the read."""
    if final.done:
        return
    outbox.offer(conn.data_to_send())
    final.error = NatsProtocolError(AUTHORIZATION_VIOLATION, "user deleted").wire
    final.done = True
    wakeup.set()


def _kick_now(conn: NatsServerConnection, outbox: Outbox, final: _Final, wakeup: _Wakeup) -> None:
    """Close the connection from the console (nats-server's ``kick``, which closes
    without a word): send what is queued, then close; the writer does it."""
    if final.done:
        return
    outbox.offer(conn.data_to_send())
    final.done = True
    wakeup.set()


def _err_text(wire: bytes) -> str:
    """The text of a ``-ERR '...'`` frame."""
    text = wire.decode("utf-8", "replace").strip()
    if text.startswith("-ERR "):
        text = text[5:].strip().strip("'")
    return clip(text)


async def _write_loop(stream, conn: NatsServerConnection, session: NatsSession, wakeup: _Wakeup, final: _Final,
                      cancel_scope, meter: Meter, drained: _Wakeup) -> None:
    outbox = session.outbox
    # The timers' next run, read again only after they ran (as a task asleep
    # until that deadline would): a PING or an auth timeout is queued like a reply.
    timer_at = conn.next_deadline()
    while True:
        if timer_at is not None and trio.current_time() >= timer_at:
            timer_at = _run_timers(conn, outbox, final)
            continue
        if session.slow:
            cancel_scope.cancel()   # nats-server closes a slow consumer without -ERR
            return
        if outbox.frames and outbox.direct is not None:
            await _write_gathered(stream.socket, session, drained)
            meter.fold()
            continue
        if outbox.frames:
            data = outbox.take_for_write()   # one join per wake-up (STYLE.md section 3)
            if len(data) <= WRITE_SLICE:
                with trio.fail_after(WRITE_DEADLINE):
                    await stream.send_all(data)
                outbox.written(len(data))
            else:
                view = memoryview(data)
                for start in range(0, len(data), WRITE_SLICE):
                    chunk = view[start:start + WRITE_SLICE]
                    with trio.fail_after(WRITE_DEADLINE):
                        await stream.send_all(chunk)
                    outbox.written(len(chunk))
                    drained.set()
            drained.set()     # a reader or producer stalled on this outbox may go on
            meter.fold()
            continue
        if final.done:
            if final.error:
                with trio.move_on_after(CLOSE_GRACE):
                    await stream.send_all(final.error)
            cancel_scope.cancel()
            return
        outbox.writer_idle = True   # Outbox.write_now may send for us until we wake
        try:
            if timer_at is None:
                await wakeup.wait()
            else:
                with trio.move_on_at(timer_at):
                    await wakeup.wait()
        finally:
            outbox.writer_idle = False


def _run_timers(conn: NatsServerConnection, outbox: Outbox, final: _Final) -> float | None:
    """Run the connection's due timers and queue what they send; the next
    deadline, None when there is none (closed) or a timer ended the connection
    (``Stale Connection``, ``Authentication Timeout``: ``final`` says so)."""
    try:
        conn.handle_deadline(trio.current_time())
    except NatsProtocolError as err:
        outbox.offer(conn.data_to_send())
        final.error = err.wire
        final.done = True
        return None
    outbox.offer(conn.data_to_send())
    return conn.next_deadline()


async def run_jetstream_timers(consumers) -> None:
    """The timers of one broker's JetStream consumers (``JsConsumers``):
    ``tick`` at ``next_deadline`` (monotonic time, as the consumers use),
    sooner when ``wake`` says a deadline may have moved; the streams' warm-up
    (:func:`warm_streams`) beside them. Dirty consumer state and the streams'
    derived state are saved on the way out (shutdown; :func:`save_streams`)."""
    wakeup = _Wakeup()
    consumers.wake = wakeup.set
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(warm_streams, consumers.streams)
            while True:
                deadline = consumers.next_deadline()
                timeout = math.inf if deadline is None else max(deadline - time.monotonic(), 0.0)
                with trio.move_on_after(timeout):
                    await wakeup.wait()
                out = consumers.tick(time.monotonic())
                if out and consumers.emit is not None:
                    consumers.emit(out)
    finally:
        consumers.wake = lambda: None
        consumers.store.save_dirty()
        with trio.CancelScope(shield=True):           # the stop's save runs to its end, in steps
            await save_streams(consumers.streams)


# Writes of one document at a stop when the replicated metadata moved under each
# (StorageConflict: two gateways checkpointing at once); a lost save costs a rebuild.
STOP_SAVE_ATTEMPTS = 3


async def save_streams(streams) -> None:
    """Save the streams' derived state at a stop (``SavedState.stop_steps``),
    other tasks running between two steps and each document written in a
    worker thread (issue 30: built and written in one go, it held the loop
    0.83-2.3 s with a 100,000-key index)."""
    saved = streams.saved
    try:
        for step in saved.stop_steps(streams):
            if step is None:
                await trio.sleep(0)
            else:
                for attempt in range(STOP_SAVE_ATTEMPTS):
                    try:
                        await trio.to_thread.run_sync(saved.write, *step)
                        break
                    except StorageConflict:   # another gateway's write came first: write ours after it
                        if attempt + 1 == STOP_SAVE_ATTEMPTS:
                            raise
    except StorageError as exc:  # the store refused or did not answer: the next start reads from the last checkpoint
        log.warning("the JetStream streams' state was not saved at the stop (%s); the next start reads "
                    "the log from the last checkpoint", exc)
    except Exception:  # noqa: BLE001 - a failed save costs a rebuild on the next start, not the shutdown
        log.exception("saving the JetStream streams' state failed")


# Records read per warm-up slice. A record costs about 5-20 us to read and take
# the subject from on this 2-core machine (issue 30's profile), so a slice stays
# near 10 ms: other connections' requests wait at most that long for the loop.
WARM_SLICE = 1024
# How often the warm-up looks again once everything was caught up: it keeps the
# per-subject counts near the log's end, so a call catches up at most about this
# long's appends itself.
WARM_FOLLOW_S = 1.0


async def warm_streams(streams) -> None:
    """Catch up the JetStream streams' derived state (``JetStreams.warm_step``) in
    slices of :data:`WARM_SLICE` records, letting every other task run between
    two slices (issue 30: a long stream was read in one go by the first call
    that needed it, on the event loop); then checkpoint what changed
    (``SavedState.due``), the tables written in a worker thread."""
    saved = streams.saved
    while True:
        try:
            while streams.warm_step(WARM_SLICE):
                await trio.sleep(0)
            for name, steps in saved.due(streams, time.monotonic()):
                data = None
                for data in steps:                   # encoded a chunk at a time, other tasks between
                    if data is None:
                        await trio.sleep(0)
                if data:
                    await trio.to_thread.run_sync(saved.write, name, data)
        except StorageError as exc:
            # A checkpoint's table write the store refused for now (scale-out: another
            # gateway wrote the replicated metadata at the same moment, StorageConflict, or
            # the cluster had no leader): the next round writes it again. Stopping here
            # left a gateway without checkpoints until its restart (fault-schedule runs).
            log.warning("JetStream checkpoint not written this round (%s); trying again", exc)
        except Exception:  # noqa: BLE001 - e.g. a damaged segment: the calls that need it report it
            log.exception("JetStream warm-up failed and stopped; the calls that need the state catch it up")
            return
        await trio.sleep(WARM_FOLLOW_S)


async def _warm_parked(session: NatsSession) -> None:
    """Warm what the session's parked JetStream request needs (``warmup.cold``)
    in slices of :data:`WARM_SLICE` records, other tasks running between two
    (the request is then answered from that state, not by a read of its own)."""
    streams = session.js.streams
    st, what = session.parked_on
    try:
        while cold(streams, st, what) and warm_for(streams, st, what, WARM_SLICE):
            await trio.sleep(0)
    except Exception:  # noqa: BLE001 - the request then reads what is left itself and reports the error
        log.exception("JetStream warm-up for a parked request failed")


async def _write_gathered(sock, session: NatsSession, drained) -> None:
    """Send the outbox's frames as they are, with gathering writes (plain TCP).
    Joining them first would copy every payload once more per subscriber: for a
    16 KiB message fanned out to 4 clients that join was a quarter of the
    gateway's time (py-spy, docs/nats.md "Performance"). Frames queued while we
    wait for the socket go out in the same loop."""
    fd = sock.fileno()
    outbox = session.outbox
    frames = outbox.frames
    while frames and not session.slow:   # a slow consumer is closed, not flushed (nats.md 11)
        batch = frames if len(frames) <= WRITE_NOW_MAX_FRAMES else frames[:WRITE_NOW_MAX_FRAMES]
        try:
            sent = os.writev(fd, batch)
        except BlockingIOError:
            sent = 0
        except OSError as exc:   # the peer is gone: end the connection as send_all would
            raise trio.BrokenResourceError(str(exc)) from exc
        if sent:
            outbox.advance(sent)
            drained.set()     # a reader or producer stalled on this outbox may go on
        else:
            with trio.fail_after(WRITE_DEADLINE):
                await trio.lowlevel.wait_writable(sock)


def _socket_receiver(sock):
    """``receive_some`` for a plain TCP socket that waits for readiness first.
    trio's ``receive_some`` tries ``recv`` first and, once a client is idle between
    requests, that try almost always fails: a raised BlockingIOError, a context
    manager and a scheduler turn for nothing on every request/reply hop (py-spy,
    docs/nats.md "Performance"). Waiting first is one checkpoint, as trio's own."""
    fd = sock.fileno()
    wait_readable = trio.lowlevel.wait_readable

    async def receive(max_bytes: int) -> bytes:
        while True:
            await wait_readable(sock)
            try:
                return os.read(fd, max_bytes)
            except BlockingIOError:   # a spurious wake-up: wait again
                continue
            except OSError as exc:    # reset by the peer: the end trio's stream would report
                raise trio.BrokenResourceError(str(exc)) from exc
    return receive


def _direct_writer(fd: int):
    """A non-blocking gathering write to the socket ``fd`` for Outbox.write_now:
    the byte count the kernel took, 0 when it would block or fails (the writer
    task then sends, and meets any error on its own send_all)."""
    def write(frames: list) -> int:
        try:
            return os.writev(fd, frames)
        except OSError:   # BlockingIOError, or a broken peer: the writer task deals with it
            return 0
    return write


__all__ = ["NatsServerState", "nats_connection", "new_server_id", "run_jetstream_timers", "serve_nats"]
