"""The gateway's trio NATS client for the hot path to a JetStream cluster (issue 14).

Theory of operation
-------------------
One :class:`TrioNats` holds one connection and, while it is up, three tasks:

* the *reader* feeds :class:`~adapters.nats.client_codec.ClientCodec` and
  dispatches each event in place: replies to the pending request's callback,
  deliveries to the subscription's callback, ``PING`` to a queued ``PONG``;
* the *writer* sends the outbox: every frame queued since its last write goes
  out in one ``send_all`` (publishes queued in one scheduler tick cost one
  system call; nats.go and nats-py also coalesce writes in a buffer);
* the *pinger* sends ``PING`` every ``ping_interval_s`` and declares the
  connection dead when ``MAX_OUTSTANDING_PINGS`` are unanswered (nats.go's
  ``MaxPingsOutstanding`` default is 2) - a half-open TCP connection otherwise
  goes unnoticed until the kernel gives up, minutes later.

:meth:`TrioNats.publish` and :meth:`TrioNats.request_cb` are synchronous: they
append to the outbox and return, raising :class:`SlowCluster` rather than
letting the outbox pass ``max_pending_bytes``. Requests share one wildcard
subscription ``_INBOX.<random>.*`` (nats.go's "new style" requests do the
same): a request is one ``PUB`` with a fresh last token, and the pending map
is keyed by that token. Timeouts are one heap of ``(deadline, token)`` and
one timer task, not one task per request; an entry whose reply came is
skipped when it reaches the top (lazy deletion).

When the connection drops, every pending request fails with
:class:`ConnectionLost`, the outbox is dropped (core NATS is at most once; a
caller that needs more uses JetStream acks), and the supervisor tries the
URLs again, starting with the next one, with a doubling backoff between
rounds. The new connection re-sends every ``SUB`` (with its old sid) before
its ``PING``, so when :attr:`TrioNats.connected` turns true again the
subscriptions are live; then the :attr:`TrioNats.on_reconnect` callbacks run
(for ordered consumers and the like that must be recreated). While
disconnected, :meth:`publish` and :meth:`request_cb` raise
:class:`ConnectionLost`.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import ssl
from collections import deque
from typing import Callable

import trio

from adapters.nats.client_codec import (
    NEED_DATA,
    PING,
    PONG,
    STATUS_NO_RESPONDERS,
    ClientCodec,
    NatsClientProtocolError,
    ServerErr,
    ServerEvent,
    ServerInfo,
    ServerMsg,
    ServerPing,
    ServerPong,
    encode_connect,
    encode_pub,
    encode_sub,
    encode_unsub,
    status_of,
)
from adapters.nats.headers import HeaderBlock, encode_headers

from .blocking import (
    DEFAULT_CONNECT_TIMEOUT_S,
    PERMISSIONS_VIOLATION,
    connect_options,
    new_inbox_prefix,
    parse_url,
    wants_tls,
)
from .errors import ClusterUnreachable, ConnectionLost, NoResponders, SlowCluster

log = logging.getLogger("ferry.cluster")

# Bytes queued and not yet written. 8 MiB is about 70 ms of a 1 Gbit/s link:
# past that the cluster is not keeping up, and queueing more only adds latency
# and memory, so the caller is told (SlowCluster) and can push back on its own
# clients. nats.go's reconnect buffer has the same 8 MiB default.
DEFAULT_MAX_PENDING_BYTES = 8 * 1024 * 1024
# JetStream publish acks and $JS.API calls are answered in milliseconds; 5 s
# (nats.go's default request timeout) leaves room for a leader election.
DEFAULT_REQUEST_TIMEOUT_S = 5.0
# nats.go/nats-py ping every 2 minutes; a gateway should notice a dead cluster
# node much sooner, and one PING per 10 s is negligible traffic.
DEFAULT_PING_INTERVAL_S = 10.0
MAX_OUTSTANDING_PINGS = 2          # nats.go MaxPingsOutstanding / nats-py max_outstanding_pings
RECONNECT_BACKOFF_MIN_S = 0.05     # first pause after a round of URLs failed
RECONNECT_BACKOFF_MAX_S = 2.0      # nats.go waits 2 s between attempts on one server
CLOSE_FLUSH_TIMEOUT_S = 1.0        # aclose() waits this long for the outbox to drain
RECV_SIZE = 64 * 1024              # one receive_some; many small messages per read
# The timeout heap is rebuilt without answered entries once it holds this many
# and four times the pending requests (keeps memory to the live requests).
HEAP_COMPACT_MIN = 4096
INBOX_SID = 1   # the shared reply subscription; user subscriptions start at 2

Callback = Callable[[object], None]


class _Broken(Exception):
    """The current connection is unusable (EOF, -ERR, stale); the supervisor reconnects."""


class _Sub:
    __slots__ = ("subject", "queue", "callback")

    def __init__(self, subject: str, queue: str | None, callback: Callable[[ServerMsg], None]):
        self.subject, self.queue, self.callback = subject, queue, callback


class TrioNats:
    """A trio NATS client: ``async with TrioNats(urls) as nc`` or ``await nc.connect(nursery)``.

    Callbacks (request replies, subscriptions, ``on_reconnect``) run in the
    client's own tasks and must not block; an exception from one is logged and
    does not harm the connection.
    """

    def __init__(self, urls: list[str], *, user: str | None = None, password: str | None = None,
                 token: str | None = None, tls: ssl.SSLContext | None = None,
                 name: str = "ferry-gateway",
                 max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
                 request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
                 ping_interval_s: float = DEFAULT_PING_INTERVAL_S,
                 connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S, echo: bool = True) -> None:
        if not urls:
            raise ValueError("at least one NATS URL is needed")
        self.urls = list(urls)
        self._parsed = [parse_url(u) for u in self.urls]
        self._options = connect_options(name, user, password, token)
        self._options["echo"] = echo  # False: our own publishes never come back to us
        self._tls = tls
        self.max_pending_bytes = max_pending_bytes
        self.request_timeout_s = request_timeout_s
        self.ping_interval_s = ping_interval_s
        self.connect_timeout_s = connect_timeout_s
        self.on_reconnect: list[Callable[[TrioNats], None]] = []
        self.server_url: str | None = None
        self.server_info: dict = {}
        self._connected = False
        self._closed = False
        self._index = -1
        self._stream: trio.abc.Stream | None = None
        self._codec = ClientCodec()
        self._out = bytearray()
        self._inflight = 0
        self._write_lot = trio.lowlevel.ParkingLot()
        self._subs: dict[int, _Sub] = {}
        self._sids = itertools.count(INBOX_SID + 1)
        self._inbox = new_inbox_prefix() + "."
        self._tokens = itertools.count(1)
        self._pending: dict[str, tuple[Callback, str]] = {}  # token -> (callback, subject)
        self._heap: list[tuple[float, str]] = []
        self._timer_lot = trio.lowlevel.ParkingLot()
        self._pongs: deque[list] = deque()   # [event, error] per PING sent (None: keepalive)
        self._pings_out = 0
        self._last_err = ""
        self._run_scope = trio.CancelScope()
        self._started = False
        self._done = trio.Event()
        self._nursery_cm: object = None

    @property
    def connected(self) -> bool:
        return self._connected

    @property
    def pending_bytes(self) -> int:
        """Bytes queued and not yet written (what ``max_pending_bytes`` bounds)."""
        return len(self._out) + self._inflight

    # -- lifecycle ---------------------------------------------------------------------
    async def __aenter__(self) -> TrioNats:
        self._nursery_cm = cm = trio.open_nursery()
        nursery = await cm.__aenter__()
        try:
            await self.connect(nursery)
        except BaseException:
            self.close()
            await cm.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        # The body's exception is not handed to the nursery: it holds only our
        # tasks (ended by close()), and a strict nursery would wrap it in an
        # ExceptionGroup. It propagates unchanged.
        if exc_info[0] is None:
            await self.aclose()
        else:
            self.close()
        await self._nursery_cm.__aexit__(None, None, None)  # type: ignore[attr-defined]

    async def connect(self, nursery: trio.Nursery) -> None:
        """Connect to the first URL that works (raises :class:`ClusterUnreachable`
        naming each URL and why), then run the client's tasks in ``nursery``."""
        if self._started or self._closed:
            raise RuntimeError("TrioNats.connect() is called once")
        await self._establish(0)
        self._started = True
        nursery.start_soon(self._run)

    def close(self) -> None:
        """Stop at once: pending requests fail with :class:`ConnectionLost`, queued
        bytes are dropped, the tasks end. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._connected = False
        self._run_scope.cancel()
        self._fail_all(ConnectionLost("client closed"))
        if not self._started:
            self._done.set()

    async def aclose(self) -> None:
        """Write what is queued (up to ``CLOSE_FLUSH_TIMEOUT_S``), then :meth:`close`
        and wait for the tasks to end."""
        if self._connected:
            with trio.move_on_after(CLOSE_FLUSH_TIMEOUT_S):
                try:
                    await self.flush()
                except (ConnectionLost, TimeoutError):
                    pass
        self.close()
        await self._done.wait()

    # -- connecting --------------------------------------------------------------------
    async def _establish(self, start: int) -> None:
        failures = []
        n = len(self.urls)
        for i in range(start, start + n):
            index = i % n
            try:
                with trio.fail_after(self.connect_timeout_s):
                    await self._open(index)
                return
            except trio.TooSlowError:
                failures.append(f"{self.urls[index]} (timed out)")
            except (OSError, ValueError, trio.BrokenResourceError, _Broken,
                    NatsClientProtocolError) as exc:
                failures.append(f"{self.urls[index]} ({_reason(exc)})")
        raise ClusterUnreachable("no NATS server reachable: " + "; ".join(failures))

    async def _open(self, index: int) -> None:
        host, port, url_tls = self._parsed[index]
        stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)  # sets TCP_NODELAY
        codec = ClientCodec()
        try:
            info = await _read_event(stream, codec)
            if not isinstance(info, ServerInfo):
                raise ValueError(f"expected INFO first, got {info!r}")
            if wants_tls(url_tls, info.fields, self._tls):
                stream = trio.SSLStream(stream, self._tls or ssl.create_default_context(),
                                        server_hostname=host)
                await stream.do_handshake()
            # SUBs go before the PING, so its PONG proves they are registered.
            hello = [encode_connect(self._options), encode_sub(self._inbox + "*", INBOX_SID)]
            hello += [encode_sub(s.subject, sid, s.queue) for sid, s in self._subs.items()]
            hello.append(PING)
            await stream.send_all(b"".join(hello))
            while True:
                event = await _read_event(stream, codec)
                if isinstance(event, ServerPong):
                    break
                if isinstance(event, ServerErr):
                    raise _Broken(event.text)
                if isinstance(event, ServerPing):
                    await stream.send_all(PONG)
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise
        self._stream, self._codec, self._index = stream, codec, index
        self.server_url, self.server_info = self.urls[index], info.fields
        self._out.clear()
        self._inflight = self._pings_out = 0
        self._last_err = ""
        self._connected = True
        log.info("connected to NATS cluster", extra={"url": self.server_url})

    async def _run(self) -> None:
        """Supervisor: serve a connection until it breaks, clean up, reconnect."""
        try:
            with self._run_scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._timer)
                    while True:
                        reason = await self._serve()
                        await self._lost(reason)
                        await self._reconnect()
                        for callback in list(self.on_reconnect):
                            _call(callback, self)
        finally:
            self._connected = False
            self._fail_all(ConnectionLost("client closed"))
            if self._stream is not None:
                with trio.CancelScope(shield=True):
                    await trio.aclose_forcefully(self._stream)
            self._done.set()

    async def _serve(self) -> str:
        """Run reader, writer and pinger until one of them finds the connection
        broken; returns why."""
        reason = ["cancelled"]

        async def guard(task: Callable, scope: trio.CancelScope) -> None:
            try:
                await task()
            except (_Broken, OSError, trio.BrokenResourceError, trio.ClosedResourceError,
                    NatsClientProtocolError) as exc:
                reason[0] = _reason(exc)
                scope.cancel()

        async with trio.open_nursery() as nursery:
            for task in (self._reader, self._writer, self._pinger):
                nursery.start_soon(guard, task, nursery.cancel_scope)
        return reason[0]

    async def _lost(self, reason: str) -> None:
        log.warning("lost the NATS cluster connection",
                    extra={"url": self.server_url, "reason": reason})
        self._connected = False
        stream, self._stream = self._stream, None
        if stream is not None:
            await trio.aclose_forcefully(stream)
        self._out.clear()
        self._inflight = 0
        self._fail_all(ConnectionLost(f"connection to {self.server_url} lost: {reason}"))

    async def _reconnect(self) -> None:
        delay = RECONNECT_BACKOFF_MIN_S
        while True:
            try:
                await self._establish(self._index + 1)
                return
            except ClusterUnreachable as exc:
                log.warning("NATS cluster reconnect failed", extra={"reason": str(exc)})
            await trio.sleep(delay)
            delay = min(delay * 2, RECONNECT_BACKOFF_MAX_S)

    def _fail_all(self, error: Exception) -> None:
        pending, self._pending = self._pending, {}
        self._heap.clear()
        for callback, _ in pending.values():
            _call(callback, error)
        pongs, self._pongs = self._pongs, deque()
        for waiter in pongs:
            if waiter is not None:
                waiter[1] = error
                waiter[0].set()

    # -- tasks -------------------------------------------------------------------------
    async def _reader(self) -> None:
        stream, codec = self._stream, self._codec
        assert stream is not None
        while True:
            event = codec.next_event()
            if event is NEED_DATA:
                data = await stream.receive_some(RECV_SIZE)
                if not data:
                    raise _Broken(f"closed by the server after -ERR '{self._last_err}'"
                                  if self._last_err else "closed by the server")
                codec.receive_data(data)
            elif type(event) is ServerMsg:
                self._dispatch(event)
            elif type(event) is ServerPing:
                self._queue(PONG)
            elif type(event) is ServerPong:
                self._pings_out = 0
                if self._pongs:
                    waiter = self._pongs.popleft()
                    if waiter is not None:
                        waiter[0].set()
            elif type(event) is ServerErr:
                self._server_error(event.text)
            elif type(event) is ServerInfo:
                self.server_info = {**self.server_info, **event.fields}

    def _dispatch(self, msg: ServerMsg) -> None:
        if msg.sid == INBOX_SID:
            subject = msg.subject
            if not subject.startswith(self._inbox):
                return
            entry = self._pending.pop(subject[len(self._inbox):], None)
            if entry is None:
                return   # a late reply to a request that timed out or was cancelled
            callback, request_subject = entry
            if msg.header is not None and status_of(msg)[0] == STATUS_NO_RESPONDERS:
                _call(callback, NoResponders(f"no responders for {request_subject!r}"))
            else:
                _call(callback, msg)
            return
        sub = self._subs.get(msg.sid)
        if sub is not None:
            _call(sub.callback, msg)

    def _server_error(self, text: str) -> None:
        # Permission and subject errors are not fatal and the protocol does not
        # tie them to one operation, so they can only be logged (a request they
        # hit times out). Any other -ERR is fatal: the server closes next, and
        # the reader names it as the reason.
        log.warning("NATS cluster sent -ERR", extra={"error": text, "url": self.server_url})
        if not text.startswith(PERMISSIONS_VIOLATION):
            self._last_err = text

    async def _writer(self) -> None:
        stream = self._stream
        assert stream is not None
        while True:
            if not self._out:
                await self._write_lot.park()
                continue
            data, self._out = self._out, bytearray()
            self._inflight = len(data)
            await stream.send_all(data)
            self._inflight = 0

    async def _pinger(self) -> None:
        while True:
            await trio.sleep(self.ping_interval_s)
            if self._pings_out >= MAX_OUTSTANDING_PINGS:
                raise _Broken(f"stale connection: {self._pings_out} PINGs unanswered")
            self._pings_out += 1
            self._pongs.append(None)
            self._queue(PING)

    async def _timer(self) -> None:
        while True:
            heap, pending = self._heap, self._pending
            if not heap:
                await self._timer_lot.park()
                continue
            deadline, token = heap[0]
            if token not in pending:
                heapq.heappop(heap)
                continue
            if trio.current_time() >= deadline:
                heapq.heappop(heap)
                callback, subject = pending.pop(token)
                _call(callback, TimeoutError(f"no reply to {subject!r} within the request timeout"))
                continue
            with trio.move_on_at(deadline):
                await self._timer_lot.park()

    # -- operations --------------------------------------------------------------------
    def _queue(self, frame: bytes) -> None:
        """Append a control frame (PING, PONG, SUB, UNSUB): never refused."""
        self._out += frame
        if self._write_lot:
            self._write_lot.unpark_all()

    def _queue_limited(self, frame: bytes) -> None:
        if len(self._out) + self._inflight + len(frame) > self.max_pending_bytes:
            raise SlowCluster(f"{len(self._out) + self._inflight} bytes are waiting to be written "
                              f"(max_pending_bytes {self.max_pending_bytes})")
        self._out += frame
        if self._write_lot:
            self._write_lot.unpark_all()

    def _check_publish(self, payload: bytes, header: bytes | HeaderBlock | None) -> bytes | None:
        if not self._connected:
            raise ConnectionLost("not connected to the NATS cluster")
        if isinstance(header, HeaderBlock):
            header = encode_headers(header)
        size = len(payload) + (len(header) if header is not None else 0)
        limit = self.server_info.get("max_payload")
        if limit is not None and size > limit:
            raise ValueError(f"message of {size} bytes passes the server's max_payload {limit}")
        return header

    def publish(self, subject: str, payload: bytes = b"", header: bytes | HeaderBlock | None = None,
                reply: str | None = None) -> None:
        """Queue one message (HPUB when ``header`` is given); returns at once.
        Raises :class:`SlowCluster`, :class:`ConnectionLost` (not connected) or
        ValueError (bad subject, message larger than the server's max_payload)."""
        header = self._check_publish(payload, header)
        self._queue_limited(encode_pub(subject, payload, reply, header))

    def request_cb(self, subject: str, payload: bytes, header: bytes | HeaderBlock | None,
                   callback: Callback, *, timeout_s: float | None = None) -> None:
        """Send a request; ``callback`` later gets the reply :class:`ServerMsg`, or
        :class:`NoResponders`, ``TimeoutError`` (after ``timeout_s``, default
        ``request_timeout_s``) or :class:`ConnectionLost`, exactly once, in a
        client task. Raises like :meth:`publish` when nothing could be sent
        (then the callback is never called)."""
        self._request(subject, payload, header, callback, timeout_s)

    def _request(self, subject: str, payload: bytes, header: bytes | HeaderBlock | None,
                 callback: Callback, timeout_s: float | None) -> str:
        header = self._check_publish(payload, header)
        token = str(next(self._tokens))
        self._queue_limited(encode_pub(subject, payload, self._inbox + token, header))
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        self._pending[token] = (callback, subject)
        entry = (trio.current_time() + timeout, token)
        heap = self._heap
        heapq.heappush(heap, entry)
        if heap[0] is entry:
            self._timer_lot.unpark_all()   # a new earliest deadline
        elif len(heap) > HEAP_COMPACT_MIN and len(heap) > 4 * len(self._pending):
            heap[:] = [e for e in heap if e[1] in self._pending]
            heapq.heapify(heap)
        return token

    async def request(self, subject: str, payload: bytes = b"",
                      header: bytes | HeaderBlock | None = None,
                      timeout_s: float | None = None) -> ServerMsg:
        """Send a request and wait for its reply; raises what :meth:`request_cb`
        would pass to its callback. Cancelling the wait forgets the request."""
        result: list = []
        done = trio.Event()

        def callback(outcome: object) -> None:
            result.append(outcome)
            done.set()

        token = self._request(subject, payload, header, callback, timeout_s)
        try:
            await done.wait()
        finally:
            self._pending.pop(token, None)
        outcome = result[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def flush(self, timeout_s: float | None = None) -> None:
        """Wait until the server has read everything queued so far (a ``PING``
        answered by its ``PONG``). Raises ``TimeoutError`` or :class:`ConnectionLost`."""
        if not self._connected:
            raise ConnectionLost("not connected to the NATS cluster")
        waiter: list = [trio.Event(), None]
        self._pongs.append(waiter)
        self._queue(PING)
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        with trio.move_on_after(timeout):
            await waiter[0].wait()
        if not waiter[0].is_set():
            raise TimeoutError(f"no PONG within {timeout} s")
        if waiter[1] is not None:
            raise waiter[1]

    def subscribe(self, subject: str, callback: Callable[[ServerMsg], None],
                  queue: str | None = None) -> int:
        """Subscribe; returns the sid. ``callback(msg)`` runs in the reader task.
        Kept across reconnects (re-sent with the same sid)."""
        sid = next(self._sids)
        frame = encode_sub(subject, sid, queue)   # validates before anything is kept
        self._subs[sid] = _Sub(subject, queue, callback)
        if self._connected:
            self._queue(frame)
        return sid

    def unsubscribe(self, sid: int) -> None:
        """Remove a subscription (unknown sids are ignored)."""
        if self._subs.pop(sid, None) is not None and self._connected:
            self._queue(encode_unsub(sid))


async def _read_event(stream: trio.abc.Stream, codec: ClientCodec) -> ServerEvent:
    while True:
        event = codec.next_event()
        if event is not NEED_DATA:
            return event  # type: ignore[return-value]
        data = await stream.receive_some(RECV_SIZE)
        if not data:
            raise _Broken("connection closed by the server")
        codec.receive_data(data)


def _call(callback: Callable, arg: object) -> None:
    """Run a user callback; its exception is logged, never raised into our tasks."""
    try:
        callback(arg)
    except Exception:
        log.exception("NATS cluster client callback failed")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, (OSError, trio.BrokenResourceError)) and exc.__cause__ is not None:
        return _reason(exc.__cause__)     # trio wraps the socket's or TLS's own error
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _reason(exc.exceptions[0])
    return str(exc) or type(exc).__name__


__all__ = [
    "CLOSE_FLUSH_TIMEOUT_S", "DEFAULT_MAX_PENDING_BYTES", "DEFAULT_PING_INTERVAL_S",
    "DEFAULT_REQUEST_TIMEOUT_S", "MAX_OUTSTANDING_PINGS", "RECONNECT_BACKOFF_MAX_S",
    "RECONNECT_BACKOFF_MIN_S", "TrioNats",
]
