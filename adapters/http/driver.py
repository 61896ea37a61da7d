"""The trio side of the HTTP adapter: sockets, tasks, timeouts (the only trio code here).

Theory of operation
-------------------
One :func:`http_session` per accepted connection (STYLE.md section 3):

* **TLS**: the handshake runs first, bounded by ``HANDSHAKE_TIMEOUT_S``; the
  ALPN result (``h2`` or ``http/1.1``) picks the protocol before any byte of
  HTTP is read (RFC 9113 section 3.2).
* **Read loop**: receive, feed :class:`~.connection.HttpServerConnection`,
  drain its events. Each request runs as its own task in the connection's
  nursery, so HTTP/2 streams are served side by side and a long poll never
  blocks its neighbours; a stream the peer resets cancels its task.
  HTTP/1.1 answers in order, so while a request is in flight the loop stops
  reading: the kernel's receive window then pushes back on the client and
  nothing piles up in h11's buffer.
* **Timeouts**: a partly received request must complete within
  ``request_timeout_s`` of its first byte (slowloris guard); a connection with nothing in
  flight closes after ``idle_timeout_s``; a write the peer does not drain
  within ``WRITE_TIMEOUT_S`` ends the connection (no unbounded stall).
* **Outcomes**: :class:`~.handler.Offload` runs in ``trio.to_thread``;
  :class:`~.handler.Park` waits on a ``trio.Event`` set by a broker callback,
  bounded by its timeout.
* **Writes** go through one lock, one ``send_all`` of everything the state
  machine has queued (batched per turn, as h2 suggests).
* **Drain**: when the gateway stops accepting (the listener task is
  cancelled), every session gets the ``drain`` event: HTTP/1.1 answers the
  request in flight with ``Connection: close``, HTTP/2 sends GOAWAY and lets
  open streams finish, and an idle connection closes at once instead of
  holding the shutdown until the grace period ends.
"""

from __future__ import annotations

import logging
import math
import ssl
from functools import partial

import trio

from .app import HttpApp
from .connection import HttpServerConnection, StreamReset
from .handler import EventStream, Offload, Park
from adapters.peer import peer_of
from core.access import bind_actor
from core.connections import address, bind_connection, clip, current_connection, directory_for
from core.errors import FerryError

from .errors import Response, internal_error
from .events import NEED_DATA, ConnectionClosed, Request, RequestError
from .limits import RECV_CHUNK, HttpLimits

log = logging.getLogger("ferry.http")

HANDSHAKE_TIMEOUT_S = 10.0  # a TLS handshake is a few round trips; 10 s is generous
# A peer that reads nothing for this long is gone or hostile (hypercorn cuts
# idle writers too); holding its responses longer only pins memory.
WRITE_TIMEOUT_S = 60.0
ALPN_PROTOCOLS = ["h2", "http/1.1"]  # RFC 9113 3.2: h2 preferred over TLS
# A streamed response stops producing while this much of it waits for the
# peer's HTTP/2 window (HTTP/1.1 pushes back through send_all instead).
STREAM_HIGH_WATER = 256 * 1024
SSE_KEEPALIVE = b": keep-alive\n\n"  # an SSE comment line (ignored by EventSource)


def make_ssl_context(certfile: str, keyfile: str | None = None) -> ssl.SSLContext:
    """A server context with our ALPN list; raises OSError/SSLError on bad files."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certfile, keyfile or None)
    ctx.set_alpn_protocols(ALPN_PROTOCOLS)
    return ctx


class _Session:
    def __init__(self, app: HttpApp, stream: trio.abc.Stream, conn: HttpServerConnection,
                 nursery: trio.Nursery, drain: trio.Event) -> None:
        self.app = app
        self.stream = stream
        self.conn = conn
        self.nursery = nursery
        self.limits = conn.limits
        self.inflight: dict[int, trio.CancelScope] = {}
        self.send_lock = trio.Lock()
        self.changed = trio.Event()
        self.progress = trio.Event()  # set after every read (HTTP/2 window updates)
        self.closing = False
        self.request_started: float | None = None
        self.drain = drain
        self.read_scope: trio.CancelScope | None = None

    async def read_loop(self) -> None:
        while True:
            if self.conn.protocol == "http/1.1":
                # Answer in order and stop reading meanwhile; requests the client
                # pipelined are already buffered and start as each answer goes out.
                while True:
                    while self.inflight:
                        await self._wait_changed()
                    self._drain_events()
                    await self.flush()
                    if not self.inflight:
                        break
            if self.closing or self._done() or (self.drain.is_set() and self.conn.idle and not self.inflight):
                return
            with trio.move_on_after(self._read_timeout()) as scope:
                self.read_scope = scope
                data = await self.stream.receive_some(RECV_CHUNK)
            if scope.cancelled_caught:
                return  # idle, too slow or draining: close without a word (as nginx does)
            self.conn.receive_data(data)
            self._drain_events()
            self.progress.set()
            self.progress = trio.Event()
            await self.flush()
            if not data:
                return

    async def watch_drain(self) -> None:
        """On gateway drain: GOAWAY / close-after-response, and stop an idle read at once."""
        await self.drain.wait()
        self.conn.close()
        await self.flush()
        if not self.inflight and self.conn.idle and self.read_scope is not None:
            self.read_scope.cancel()

    def _done(self) -> bool:
        return self.conn.state.value == "closed" and not self.inflight

    def _read_timeout(self) -> float:
        if self.conn.mid_request:
            # Measured from the request's first byte, not the last read, so a
            # client trickling a byte at a time cannot hold the slot forever.
            now = trio.current_time()
            if self.request_started is None:
                self.request_started = now
            return self.request_started + self.limits.request_timeout_s - now
        self.request_started = None
        if self.conn.idle and not self.inflight:
            return self.limits.idle_timeout_s
        return math.inf  # requests in flight (HTTP/2): they carry their own bounds

    async def _wait_changed(self) -> None:
        await self.changed.wait()
        self.changed = trio.Event()

    def _drain_events(self) -> None:
        while True:
            event = self.conn.next_event()
            if event is NEED_DATA:
                return
            if isinstance(event, Request):
                self.inflight[event.stream_id] = trio.CancelScope()
                self.nursery.start_soon(self._run, event)
            elif isinstance(event, RequestError):
                self._answer(event.stream_id, event.error.response())
            elif isinstance(event, StreamReset):
                scope = self.inflight.pop(event.stream_id, None)
                if scope is not None:
                    scope.cancel()
            elif isinstance(event, ConnectionClosed):
                self.closing = True
                return

    def _answer(self, stream_id: int, response: Response) -> None:
        self.app.count_response(response)
        self.conn.send_response(stream_id, response)
        if self.app.broker.draining:
            self.conn.close()

    async def _run(self, request: Request) -> None:
        scope = self.inflight.get(request.stream_id)
        if scope is None:
            return
        entry = current_connection()   # the console's (core/connections.py), bound by http_session
        agent = request.header(b"user-agent")
        if entry is not None and agent:
            entry.client = clip(agent.decode("latin-1"))
        try:
            with scope:
                started = trio.current_time()
                outcome = await self._complete(self.app.handle(request))
                if isinstance(outcome, EventStream):
                    await self._stream(request.stream_id, outcome)
                    return
                self.app.latency.observe(trio.current_time() - started, self.app.listener)
                self._answer(request.stream_id, outcome)
                await self.flush()
        finally:
            self.inflight.pop(request.stream_id, None)
            self.changed.set()

    async def _complete(self, outcome) -> Response | EventStream:
        app = self.app
        while not isinstance(outcome, (Response, EventStream)):
            if isinstance(outcome, Offload):
                try:
                    result = await trio.to_thread.run_sync(outcome.work)
                except Exception as exc:  # noqa: BLE001 - handed to `then`, which maps it
                    result = exc
                outcome = app.guard(outcome.then, result)
            elif isinstance(outcome, Park):
                outcome = await self._park(outcome)
            else:
                log.error("handler returned %r", type(outcome).__name__)
                return internal_error().response()
        return outcome

    async def _stream(self, stream_id: int, events: EventStream) -> None:
        """Send a streamed response until it ends, the peer leaves or the gateway drains."""
        app, conn = self.app, self.conn
        app.count_response(Response(events.status))
        if not conn.start_response(stream_id, events.status, events.headers):
            return
        try:
            # Send the head now: the first chunk may be minutes away (an idle topic, the
            # next heartbeat), and a client (EventSource, httpx, curl -N) waits for the
            # status and headers before it reads anything. Nothing else flushes for us:
            # HTTP/1.1 stops reading while a request is in flight, and on HTTP/2 only
            # the peer's next frame would (issue 28).
            await self.flush()
            while not self.drain.is_set():
                try:
                    chunk = events.next_chunk()
                except Exception as exc:  # noqa: BLE001 - the topic went away, or a bug: end the stream
                    if not isinstance(exc, FerryError):
                        log.exception("HTTP event stream failed")
                    return
                if chunk is None:
                    return
                if chunk:
                    conn.send_body(stream_id, chunk)
                    await self.flush()
                    while conn.pending_bytes(stream_id) > STREAM_HIGH_WATER and not self.drain.is_set():
                        await self.progress.wait()
                    continue
                if not await self._wait_for(events.subscribe, events.heartbeat_s):
                    conn.send_body(stream_id, SSE_KEEPALIVE)
                    await self.flush()
        finally:
            conn.end_response(stream_id)
            with trio.CancelScope(shield=True), trio.move_on_after(WRITE_TIMEOUT_S):
                await self.flush()

    async def _wait_for(self, subscribe, timeout: float) -> bool:
        """Wait until ``subscribe``'s wake fires (True), the timeout or a drain (False)."""
        woken = trio.Event()
        cancel = subscribe(woken.set)
        try:
            with trio.move_on_after(timeout):
                async with trio.open_nursery() as nursery:
                    async def stop_on(event: trio.Event) -> None:
                        await event.wait()
                        nursery.cancel_scope.cancel()
                    nursery.start_soon(stop_on, woken)
                    nursery.start_soon(stop_on, self.drain)
        finally:
            cancel()
        return woken.is_set()

    async def _park(self, park: Park):
        woken = trio.Event()
        try:
            cancel = park.subscribe(woken.set)
        except Exception:  # noqa: BLE001 - a bug in the handler's subscribe
            log.exception("HTTP park failed")
            return internal_error().response()
        try:
            timeout = math.inf if park.timeout_s is None else park.timeout_s
            with trio.move_on_after(timeout) as scope:
                await woken.wait()
        finally:
            cancel()
        return self.app.guard(park.resume, scope.cancelled_caught)

    async def flush(self) -> None:
        async with self.send_lock:
            data = self.conn.data_to_send()
            if data:
                with trio.fail_after(WRITE_TIMEOUT_S):
                    await self.stream.send_all(data)


async def http_session(app: HttpApp, limits: HttpLimits, drain: trio.Event, stream: trio.abc.Stream) -> None:
    """Serve one connection until it closes; never raises (STYLE.md section 3)."""
    counters = app.counters
    if counters["connections_open"].value(app.listener) >= limits.max_connections:
        counters["connections_refused"].inc(app.listener)
        await trio.aclose_forcefully(stream)  # over capacity: refuse before any work
        return
    counters["connections_total"].inc(app.listener)
    counters["connections_open"].inc(app.listener)
    peer = peer_of(stream)
    bind_actor(app.listener, peer[0] if peer else "unknown")  # each request task copies it (core/access.py)
    directory = directory_for(app.broker)
    closing = trio.CancelScope()   # the console's close
    entry = directory.open(app.listener, address(peer) if peer else "unknown", close=closing.cancel)
    bind_connection(entry)   # request tasks copy it: app.counters count on it (core/connections.py)
    try:
        with closing:
            alpn, tls = None, isinstance(stream, trio.SSLStream)
            if tls:
                with trio.move_on_after(HANDSHAKE_TIMEOUT_S) as scope:
                    await stream.do_handshake()
                if scope.cancelled_caught:
                    return
                alpn = stream.selected_alpn_protocol()
            conn = HttpServerConnection(limits, alpn=alpn, tls=tls)
            async with trio.open_nursery() as nursery:
                session = _Session(app, stream, conn, nursery, drain)
                nursery.start_soon(session.watch_drain)
                await session.read_loop()
                await session.flush()
                nursery.cancel_scope.cancel()  # whatever still runs has nobody to answer
    except* (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, ssl.SSLError):
        pass  # peer vanished or stalled; nobody to tell
    except* Exception:
        log.exception("HTTP session failed")
    finally:
        counters["connections_open"].dec(app.listener)
        directory.closed(entry)
        await trio.aclose_forcefully(stream)


async def serve_http(app: HttpApp, limits: HttpLimits, host: str, port: int, conn_nursery: trio.Nursery, *,
                     ssl_context: ssl.SSLContext | None = None,
                     task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
    """Bind ``host:port`` and serve until cancelled. Supports ``nursery.start``;
    ``started()`` returns the bound port (useful with port 0)."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    if ssl_context is not None:
        listeners = [trio.SSLListener(lst, ssl_context, https_compatible=True) for lst in listeners]
    drain = trio.Event()  # set when accepting stops: open sessions then wind down
    task_status.started(bound)
    try:
        await trio.serve_listeners(partial(http_session, app, limits, drain), listeners,
                                   handler_nursery=conn_nursery)
    finally:
        drain.set()


__all__ = ["http_session", "make_ssl_context", "serve_http"]
