"""The trio driver of the Kafka listener: sockets, waits and the group coordinator's clock.

Theory of operation
-------------------
One task per connection. Like Kafka's broker, it reads one request, acts on
the session's outcome (adapters/kafka/session.py) and only then takes the
next, so answers leave in request order; frames that arrived meanwhile wait
in the frame splitter (at most one receive's worth, :data:`RECV_CHUNK`, plus
one partial frame below ``frames.MAX_FRAME_SIZE``).

Waiting outcomes:

* a login runs the password check in a worker thread (argon2 is slow), the
  connection's actor bound so the login guard and audit log see its address;
  a SCRAM login (the proof already checked by the session, no hashing left)
  asks ``UserStore.scram_login`` on this task, whose actor is the connection's;
* a Produce waits for the flusher's durability callbacks of its appends, at most its
  TimeoutMs (:data:`MIN_PRODUCE_TIMEOUT_MS` at least): past it the partitions still
  waiting answer REQUEST_TIMED_OUT (``ProduceWait.expire``);
* a Fetch waits until the high watermark (the durable end) of one of its
  partitions moves (``broker.wait_for_durable``) or its deadline, then reads again;
* a group request waits until the coordinator answers it, from this or
  another connection's request or from the coordinator's clock:
  :class:`GroupClock` runs ``tick`` at the coordinator's next deadline and is
  poked after every group request, since a request can move that deadline;
* an EndTxn(commit) waits for the durability callbacks of its transaction's
  appends (adapters/kafka/txn.py). The same clock ticks the transaction
  coordinator: transaction timeouts, and commits whose appends became durable
  with no connection left to finish them. At start the listener rolls forward
  the commits a stop interrupted (``TxnCoordinator.recover``).

With a TLS context (the listener's tls_cert/tls_key) every accepted stream is
a ``trio.SSLStream`` from its first byte, as a Kafka SSL listener is: clients
say ``security.protocol`` SSL or SASL_SSL and the SASL exchange runs inside
TLS. The handshake runs before the first request, under the same deadline as
the login (:data:`AUTH_TIMEOUT_S` from accept); a failed or unfinished one
closes the connection with an info line. No client certificates are asked for
(Kafka's ``ssl.client.auth=none``, its default).

A closed socket ends the connection quietly; anything else is our bug,
logged, and the listener keeps serving.
"""

from __future__ import annotations

import logging
import math
import ssl
from collections import deque
from functools import partial

import trio

from adapters.peer import peer_of
from core.access import bind_actor, current_actor
from core.connections import address, directory_for
from core.metrics import listener_metrics, metrics_for

from .context import Access
from .frames import FrameSplitter
from .session import GroupWait, KafkaSession, TxnWait, deliver
from .dataplane import FetchWait, ProduceWait
from .types import KafkaDecodeError

log = logging.getLogger("ferry.kafka")
LISTENER = "kafka"
RECV_CHUNK = 256 * 1024  # bytes per receive
# A connection that has not logged in this long after it opened is closed, as the
# Iggy listeners do (docs/security.md "Unauthenticated connections are closed"):
# an idle unauthenticated socket costs memory and a file descriptor for nothing.
# With TLS the handshake counts against the same deadline.
AUTH_TIMEOUT_S = 30.0
# A Produce is answered within its TimeoutMs, as Kafka's DelayedProduce answers
# REQUEST_TIMED_OUT for what is not acknowledged by then; so the answer comes before
# the client's own deadline (librdkafka's socket.timeout.ms, 60 s, above its
# request.timeout.ms, 30 s, which it sends as TimeoutMs), which would cut the
# connection and count its requests as possibly stored. A smaller TimeoutMs is raised
# to this floor: Kafka's wait is for replicas already written in memory, Ferry's for
# an fsync or a cluster round trip, and a healthy write must not time out.
MIN_PRODUCE_TIMEOUT_MS = 1000


def now_ms() -> int:
    """The session's clock: trio's (monotonic) time in milliseconds."""
    return int(trio.current_time() * 1000)


class GroupClock:
    """Runs the group and transaction coordinators' ``tick`` at their next deadline
    (module docstring); either may be None."""

    def __init__(self, groups, txn=None) -> None:
        self.groups = groups
        self.txn = txn
        self._poke = trio.Event()

    def poke(self) -> None:
        self._poke.set()

    async def run(self) -> None:
        while True:
            times = [t for t in (self.groups.next_deadline() if self.groups is not None else None,
                                 self.txn.next_deadline() if self.txn is not None else None) if t is not None]
            with trio.move_on_at(min(times) / 1000 if times else math.inf):
                await self._poke.wait()
            self._poke = trio.Event()
            if self.groups is not None:
                deliver(self.groups.tick(now_ms()))
            if self.txn is not None:
                self.txn.tick(now_ms())


async def serve_kafka(ctx, host: str, port: int, conn_nursery, *, make_groups,
                      ssl_context: ssl.SSLContext | None = None,
                      task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Bind ``host:port`` and serve Kafka connections until cancelled; ``started()``
    gets the bound port. ``ctx.port`` is the advertised port, or 0 to advertise the
    bound one; ``make_groups(node)`` builds the group API once the node's address
    (id, host, port) is known. With ``ssl_context`` every connection is TLS
    (clients' SSL / SASL_SSL); None serves plaintext (PLAINTEXT / SASL_PLAINTEXT)."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    if not ctx.port:
        ctx.port = bound
    ctx.groups = make_groups((ctx.node_id, ctx.host, ctx.port))
    clock = GroupClock(ctx.groups, ctx.txn)
    ctx.txn.on_ready = clock.poke
    resumed = ctx.txn.recover(now_ms())  # commits a stop cut short are completed before serving
    if resumed:
        log.info("kafka: rolling forward %d decided transaction commit(s)", resumed)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(clock.run)
        task_status.started(bound)
        handler = partial(kafka_connection, ctx, clock, ssl_context=ssl_context)
        await trio.serve_listeners(handler, listeners, handler_nursery=conn_nursery)


async def kafka_connection(ctx, clock: GroupClock, stream: trio.abc.Stream, *,
                           ssl_context: ssl.SSLContext | None = None) -> None:
    login_deadline = trio.current_time() + AUTH_TIMEOUT_S  # from accept, TLS handshake included
    peer = peer_of(stream) or "local"
    if ssl_context is not None:
        # https_compatible=False: TLS as the RFC has it, close_notify sent at the end and
        # a cut without one reported as a broken stream (trio.SSLStream docs), which
        # ends the connection quietly below: Kafka's SslTransportLayer also sends
        # close_notify and lets a peer's missing one pass.
        stream = trio.SSLStream(stream, ssl_context, server_side=True, https_compatible=False)
    bind_actor("kafka", peer)
    counters = listener_metrics(metrics_for(ctx.broker))
    counters["connections_total"].inc(LISTENER)
    counters["connections_open"].inc(LISTENER)
    users = ctx.broker.meta.users
    access = Access(users, ctx.anonymous, anonymous=ctx.anonymous is not None)
    if ctx.anonymous is not None:
        current_actor().logged_in(ctx.anonymous.username, ctx.anonymous.id)
    session = KafkaSession(ctx, access)
    scope = trio.CancelScope()
    directory = directory_for(ctx.broker)
    entry = directory.open(LISTENER, address(peer), close=scope.cancel,
                           refresh=partial(_refresh, session, current_actor()))
    parked: list = []
    try:
        with scope:
            if ssl_context is not None and not await _handshake(stream, login_deadline):
                counters["errors"].inc(LISTENER)
                return
            await _serve(ctx, clock, stream, session, counters, parked, login_deadline)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the peer vanished
    except Exception:  # noqa: BLE001 - our bug: log it, close this connection, keep the listener
        log.exception("kafka connection failed")
    finally:
        for token in parked:
            ctx.groups.cancel(token)  # parked implies groups
        session.data.closed()
        counters["connections_open"].dec(LISTENER)
        directory.closed(entry)
        await trio.aclose_forcefully(stream)


async def _handshake(stream: trio.SSLStream, deadline: float) -> bool:
    """The server side of the TLS handshake, by ``deadline``; False (logged at info,
    the caller closes) when the peer breaks it (a plaintext client, an untrusted
    certificate on its side, a reset) or is too slow."""
    with trio.move_on_at(deadline):
        try:
            await stream.do_handshake()
        except trio.BrokenResourceError as exc:  # SSLStream wraps ssl.SSLError and socket errors
            log.info("kafka connection closed: TLS handshake failed: %r", exc.__cause__ or exc)
            return False
        return True
    log.info("kafka connection closed: no TLS handshake within %s s", AUTH_TIMEOUT_S)
    return False


def _refresh(session: KafkaSession, actor, entry) -> None:
    entry.user = session.access.username or actor.user
    entry.client = session.client_id


async def _serve(ctx, clock: GroupClock, stream, session: KafkaSession, counters, parked: list,
                 auth_deadline: float) -> None:
    splitter = FrameSplitter()
    queue: deque[bytes] = deque()
    while True:
        while not queue:
            data = None
            with trio.move_on_at(math.inf if session.authenticated else auth_deadline):
                data = await stream.receive_some(RECV_CHUNK)
            if data is None:
                log.info("kafka connection closed: no SASL login within %s s", AUTH_TIMEOUT_S)
                return
            if not data:
                return
            try:
                queue.extend(splitter.feed(data))
            except KafkaDecodeError as exc:
                counters["errors"].inc(LISTENER)
                log.info("kafka connection closed: %s", exc)
                return
        outcome = session.handle(queue.popleft(), now_ms())
        while outcome.kind in ("login", "scram_login", "wait"):
            if outcome.kind in ("login", "scram_login"):
                if outcome.kind == "login":
                    user = await _login(ctx, *outcome.wait)
                else:
                    user = _scram_login(ctx, *outcome.wait)
                outcome = session.login_done(user)
                if not isinstance(user, BaseException):
                    current_actor().logged_in(user.username, user.id)  # audit lines name the user
            else:
                wait = outcome.wait
                if isinstance(wait, GroupWait):
                    clock.poke()
                    parked.append(wait)
                    try:
                        await _wait_woken(wait)
                    finally:
                        parked.remove(wait)
                elif isinstance(wait, ProduceWait):
                    with trio.move_on_after(max(wait.timeout_ms, MIN_PRODUCE_TIMEOUT_MS) / 1000):
                        await _wait_woken(wait)
                    if not wait.done:
                        wait.expire()  # Kafka's answer past the request's TimeoutMs (dataplane.py)
                elif isinstance(wait, TxnWait):
                    await _wait_woken(wait)
                elif isinstance(wait, FetchWait):
                    await _wait_fetch(ctx.broker, wait)
                outcome = session.resume(wait, now_ms())
        if outcome.kind == "silent":
            continue
        if outcome.frame:
            await stream.send_all(outcome.frame)
        if outcome.kind == "close":
            counters["errors"].inc(LISTENER)
            log.info("kafka connection closed: %s", outcome.reason)
            return
        if session.take_group_touch():
            clock.poke()  # a group request may have moved the coordinator's next deadline


async def _login(ctx, username: str, password: str):
    users = ctx.broker.meta.users
    try:
        return await trio.to_thread.run_sync(users.authenticate, username, password)
    except Exception as exc:  # noqa: BLE001 - every refusal is the same SASL failure to the client
        return exc


def _scram_login(ctx, username: str, ok: bool, credential):
    try:
        return ctx.broker.meta.users.scram_login(username, ok, credential=credential)
    except Exception as exc:  # noqa: BLE001 - every refusal is the same SASL failure to the client
        return exc


async def _wait_woken(wait) -> None:
    """Until ``wait`` (a GroupWait, ProduceWait or TxnWait) is done: it calls its ``wake`` then."""
    if wait.done:
        return
    done = trio.Event()
    wait.wake = done.set
    await done.wait()


async def _wait_fetch(broker, wait: FetchWait) -> None:
    woken = trio.Event()
    cancels = [broker.wait_for_durable(*key, woken.set) for key in wait.keys]  # the high watermark moved
    try:
        with trio.move_on_at(wait.deadline_ms / 1000):
            await woken.wait()
    finally:
        for cancel in cancels:
            cancel()
