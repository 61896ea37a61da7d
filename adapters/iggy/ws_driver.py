"""The trio driver for Iggy over WebSocket (trio-websocket), default port 8092.

Theory of operation
-------------------
trio-websocket does the HTTP upgrade, framing, masking, ping/pong and the
close handshake; :class:`IggyWsStream` turns the upgraded connection into
the byte stream the TCP driver reads, with :class:`~adapters.iggy.ws.IggyWsFraming`
checking each binary message (one request frame, adapters/iggy/ws.py) and
cutting replies into one message each. The connection is then served by the
TCP driver's own pipeline (:class:`adapters.iggy.driver._Pipeline`): the same
session, command table, dialect detection, ordered replies, read-ahead bound
(``MAX_PIPELINED`` requests, ``MAX_PIPELINED_BYTES``), idle timeout and
error handling as ``iggy+tcp://``.

Bounds: a message is at most :data:`~adapters.iggy.ws.WS_MAX_MESSAGE` (the
TCP frame cap; trio-websocket closes with 1009 past it while it arrives);
at most :data:`WS_MESSAGE_QUEUE` finished messages wait between
trio-websocket's reader and ours, after which it stops reading and TCP flow
control holds the client back (STYLE.md 3). The upgrade must finish within
:data:`HANDSHAKE_TIMEOUT_S` and a close within :data:`CLOSE_GRACE_S`.

A peer breaking the framing (text message, a message that is not exactly
one frame) gets a close frame with the RFC 6455 code (ws.py) and a count in
``ferry_iggy_ws_protocol_closes_total``; no traceback is logged for it.

Replies skip wsproto's message encoder, which copies a payload three times
into fresh buffers (``bytearray(payload)``, ``header + payload``, ``data +=``;
a 1 000 x 128 B poll reply is ~180 KB, and fresh buffers that size cost
page faults here: STYLE.md 7, copy a payload at most once). A server frame
is unmasked (RFC 6455 5.1), so it is a 2-10 byte header
(:func:`ws.frame_header`) then the reply as it is: two writes, under
trio-websocket's own stream lock, the one its reader takes for pongs and
closes, so frames never interleave. Two writes, not one joined buffer,
from :data:`JOIN_BELOW` up: there the join is one more fresh copy and
measured ~0.1 ms more server CPU per 1 000-message poll than the extra
syscall; below it (send acks, metadata) one joined write is cheaper. Where
that lock is missing (another trio-websocket version) replies go through
``send_message``.
"""

from __future__ import annotations

import itertools
import logging
from functools import partial

import trio
from trio_websocket import ConnectionClosed, WebSocketRequest, serve_websocket

from core.metrics import metrics_for

from ..wsmask import install as install_compiled_unmask
from .driver import DEFAULT_MAX_CONNECTIONS, RECV_CHUNK, IggyMeter, serve_session
from .ws import (
    CLOSE_MESSAGE_TOO_BIG,
    WS_MAX_MESSAGE,
    IggyWsFraming,
    WsError,
    frame_header,
)

log = logging.getLogger("ferry.iggy.ws")

LISTENER = "iggy_ws"  # the metrics label, as the listener's name
# Iggy's TransportProtocol::WebSocket (core/common/src/types/configuration/transport.rs;
# GetClients shows it as "WebSocket", core/common/src/wire_conversions.rs).
TRANSPORT_WEBSOCKET = 4
# Finished messages queued inside trio-websocket; one lets the next request
# arrive while the pipeline answers this one (trio-websocket's own default).
WS_MESSAGE_QUEUE = 1
HANDSHAKE_TIMEOUT_S = 10.0  # TCP accept to upgraded (the SDK gives up on its own reconnect timer)
CLOSE_GRACE_S = 2.0  # the reference server's close grace (message_bus DEFAULT_CLOSE_GRACE)
# Client ids are shared with TCP (from 1) and QUIC (from 2**31) in one broker: a range of our own.
_CLIENT_IDS = itertools.count(1 << 30)
# Replies below this size go out as one write of header + reply (the copy is
# cheap, and a loopback send costs as much as a small copy); larger ones as
# two writes (module docstring).
JOIN_BELOW = 64 * 1024


class WsMetrics:
    """The listener's families: the shared per-listener ones, counted by the
    TCP driver's :class:`~adapters.iggy.driver.IggyMeter` (label
    ``listener="iggy_ws"``), and WebSocket-level counts."""

    def __init__(self, registry, broker=None) -> None:
        self.meter = IggyMeter(broker, LISTENER) if broker is not None else None
        self.messages = registry.counter("ferry_iggy_ws_messages_total",
                                         "Iggy WebSocket binary messages (one request or one reply each).",
                                         ("direction",))
        self.bytes = registry.counter("ferry_iggy_ws_message_bytes_total",
                                      "Bytes of Iggy WebSocket binary messages.", ("direction",))
        self.closes = registry.counter("ferry_iggy_ws_protocol_closes_total",
                                       "Iggy WebSocket connections closed for breaking the framing, "
                                       "by RFC 6455 close code.", ("code",))

    def closed_for(self, code: int, peer: str = "", reason: str = "") -> None:
        self.closes.inc(str(code))
        if self.meter is not None:
            self.meter.error(message=f"WebSocket close {code}" + (f": {reason}" if reason else ""), remote=peer)


class IggyWsStream(trio.abc.Stream):
    """An upgraded server-side WebSocket as the byte stream the Iggy pipeline reads.

    ``receive_some`` yields the bytes of checked request messages (b"" once the
    connection is closed, or after closing it for a framing error);
    ``send_all`` writes whole reply frames, one binary message each."""

    def __init__(self, ws, metrics: WsMetrics) -> None:
        self._ws = ws
        self._metrics = metrics
        self.framing = IggyWsFraming()
        self._rest: memoryview | None = None  # the unread part of a message larger than max_bytes
        # trio-websocket 0.12 internals for the reply fast path (module docstring); None: send_message
        self._lock = getattr(ws, "_stream_lock", None)
        self._raw = getattr(ws, "_stream", None) if self._lock is not None else None
        remote = getattr(ws, "remote", None)
        self.peer = f"{getattr(remote, 'address', 'unknown')}:{getattr(remote, 'port', 0)}"

    async def receive_some(self, max_bytes: int | None = None):
        if self._rest is not None:
            return self._take(self._rest, max_bytes)
        try:
            message = await self._ws.get_message()
        except ConnectionClosed as closed:
            if closed.reason is not None and closed.reason.code == CLOSE_MESSAGE_TOO_BIG:
                self._metrics.closed_for(CLOSE_MESSAGE_TOO_BIG, self.peer, "message too big")  # trio-websocket sent it
            return b""
        try:
            data = self.framing.request(message)
        except WsError as err:
            self._metrics.closed_for(err.close_code, self.peer, err.reason)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("iggy ws framing error from %s: %s", self.peer, err.reason)
            with trio.move_on_after(CLOSE_GRACE_S):
                await self._ws.aclose(err.close_code, err.reason)
            return b""
        self._metrics.messages.inc("in")
        self._metrics.bytes.inc("in", amount=len(data))
        if max_bytes is None or len(data) <= max_bytes:
            return data
        return self._take(memoryview(data), max_bytes)

    def _take(self, view: memoryview, max_bytes: int | None):
        n = len(view) if max_bytes is None else max_bytes
        chunk, rest = view[:n], view[n:]
        self._rest = rest if len(rest) else None
        return chunk

    async def send_all(self, data) -> None:
        for frame in self.framing.replies(bytes(data)):
            if self._ws.closed is not None:
                raise trio.BrokenResourceError("websocket closed")
            if self._raw is not None:
                async with self._lock:
                    if len(frame) < JOIN_BELOW:
                        await self._raw.send_all(frame_header(len(frame)) + frame)
                    else:
                        await self._raw.send_all(frame_header(len(frame)))
                        await self._raw.send_all(frame)
            else:
                try:
                    await self._ws.send_message(frame)
                except ConnectionClosed:
                    raise trio.BrokenResourceError("websocket closed") from None
            self._metrics.messages.inc("out")
            self._metrics.bytes.inc("out", amount=len(frame))

    async def wait_send_all_might_not_block(self) -> None:
        return None

    async def aclose(self) -> None:
        with trio.move_on_after(CLOSE_GRACE_S):
            await self._ws.aclose()


async def serve_iggy_ws(broker, host: str, port: int, conn_nursery, *, ssl_context=None,
                        max_connections: int = DEFAULT_MAX_CONNECTIONS,
                        task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Bind ``host:port`` (0 = a free port) and serve Iggy WebSocket clients
    (``iggy+ws://``; with ``ssl_context``, ``wss://``: the SDKs' ``tls=true``)
    until cancelled. Any request path is accepted (the SDK asks for ``/``).
    Supports ``nursery.start``; ``started()`` returns the bound port."""
    metrics = WsMetrics(metrics_for(broker), broker)
    install_compiled_unmask()  # RFC 6455 unmasking in C (adapters/wsmask.py): a quarter of a send's time
    async with trio.open_nursery() as nursery:
        server = await nursery.start(partial(
            serve_websocket, partial(_handle, broker, metrics, max_connections), host, port, ssl_context,
            handler_nursery=conn_nursery, message_queue_size=WS_MESSAGE_QUEUE, max_message_size=WS_MAX_MESSAGE,
            receive_buffer_size=RECV_CHUNK, connect_timeout=HANDSHAKE_TIMEOUT_S, disconnect_timeout=CLOSE_GRACE_S))
        task_status.started(server.port)


async def _handle(broker, metrics: WsMetrics, max_connections: int, request: WebSocketRequest) -> None:
    try:
        ws = await request.accept()
    except ConnectionClosed:
        return
    await iggy_ws_connection(broker, IggyWsStream(ws, metrics), metrics, max_connections)


async def iggy_ws_connection(broker, stream: IggyWsStream, metrics: WsMetrics,
                             max_connections: int = DEFAULT_MAX_CONNECTIONS) -> None:
    """Serve one upgraded Iggy WebSocket client until it leaves or breaks the framing."""
    try:
        await serve_session(broker, stream, client_id=next(_CLIENT_IDS) & 0xFFFFFFFF, address=stream.peer,
                            transport=TRANSPORT_WEBSOCKET, what="iggy websocket session", meter=metrics.meter,
                            max_connections=max_connections)
    finally:
        await stream.aclose()


__all__ = ["TRANSPORT_WEBSOCKET", "IggyWsStream", "WsMetrics", "iggy_ws_connection", "serve_iggy_ws"]
