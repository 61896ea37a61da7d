"""NATS over WebSocket (default port 8443): browsers (nats.ws) and nats-py ``ws://`` URLs.

The NATS protocol stream travels in binary WebSocket messages with no
framing of its own: a message may hold part of an operation or several
(the nats.ws framing that nats-server's websocket listener speaks). So a
WebSocket connection is adapted to a trio Stream (:class:`WebSocketStream`)
and served by the same driver as TCP clients
(:func:`adapters.nats.driver.nats_connection`); the connection shares the
``nats`` listener's settings, authentication and monitoring state.

Options of ``[listeners.nats_ws]``: ``tls_cert`` and ``tls_key`` for
``wss://`` (TLS at the WebSocket layer, as nats-server's ``websocket { tls
{...} }``; the NATS-level upgrade of the TCP listener never happens here).
Without a running ``nats`` listener the WebSocket listener uses
nats-server's default limits, and its clients log in as Ferry users
(adapters/nats/ferryauth.py, no ``anonymous_user``); the log says so.
"""

from __future__ import annotations

import logging
from functools import partial

import trio
from trio_websocket import ConnectionClosed, WebSocketRequest, serve_websocket

from adapters.nats.connection import ServerInfo
from adapters.nats.driver import nats_connection, new_server_id
from adapters.nats.ferryauth import FerryAuthenticator
from adapters.nats.server_state import NatsServerState, register, revoke_user, shared_state
from adapters.wsmask import install as install_compiled_unmask

from ..registry import ListenerSpec
from ._nats_tls import server_ssl_context

log = logging.getLogger("ferry.nats.ws")

OPTIONS = {"tls_cert": "", "tls_key": ""}
# One WebSocket message is buffered whole by trio-websocket. nats-py sends
# its pending buffer (2 MiB by default) as one message, so the bound must
# take that plus one max_payload publish; 8 MiB does for the defaults and
# grows with a larger max_payload.
WS_MAX_MESSAGE = 8 * 1024 * 1024
# Messages queued between trio-websocket's reader and ours: small, so a
# fast publisher is held back by TCP flow control (STYLE.md section 3).
WS_MESSAGE_QUEUE = 4


class WebSocketStream(trio.abc.Stream):
    """A server-side WebSocket connection as a byte stream for the NATS driver."""

    def __init__(self, ws) -> None:
        self._ws = ws
        self._buf = b""
        self._pos = 0
        remote = getattr(ws, "remote", None)
        self.peer = (getattr(remote, "address", ""), getattr(remote, "port", 0))

    async def send_all(self, data) -> None:
        if not data:
            return
        try:
            await self._ws.send_message(bytes(data))
        except ConnectionClosed:
            raise trio.BrokenResourceError("websocket closed") from None

    async def wait_send_all_might_not_block(self) -> None:
        return None

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        """Bytes of the current message (at most ``max_bytes``); b"" once closed."""
        while self._pos >= len(self._buf):
            try:
                message = await self._ws.get_message()
            except ConnectionClosed:
                return b""
            self._buf = message.encode() if isinstance(message, str) else message
            self._pos = 0
        end = len(self._buf) if max_bytes is None else min(len(self._buf), self._pos + max_bytes)
        data = self._buf[self._pos:end] if self._pos or end < len(self._buf) else self._buf
        self._pos = end
        return data

    async def aclose(self) -> None:
        await self._ws.aclose()


def _state_for(broker, cfg) -> tuple[NatsServerState, bool]:
    """The nats listener's shared state, or (it is not running) one of our own;
    True when it is our own."""
    state = shared_state(broker)
    if state is not None:
        return state, False
    log.warning("listeners.nats is not running: NATS over WebSocket uses nats-server's default limits; "
                "clients log in as Ferry users")
    state = NatsServerState(broker=broker, info=ServerInfo(server_id=new_server_id(), host=cfg.host,
                                                           port=cfg.port, auth_required=True),
                            authenticate=FerryAuthenticator(broker))
    register(state)
    return state, True


async def _handle(state: NatsServerState, request: WebSocketRequest) -> None:
    try:
        ws = await request.accept()
    except ConnectionClosed:
        return
    await nats_connection(state, WebSocketStream(ws), kind="websocket")


async def serve(broker, cfg, conn_nursery, *, task_status) -> None:
    state, own = _state_for(broker, cfg)
    # Our own state: a deleted user's connections close here (else the nats listener does it).
    unwatch = broker.meta.users.watch_credentials(partial(revoke_user, state)) if own else (lambda: None)
    install_compiled_unmask()  # RFC 6455 unmasking in C (adapters/wsmask.py)
    opts = cfg.options
    ctx = server_ssl_context("nats_ws", opts["tls_cert"], opts["tls_key"])
    max_message = max(WS_MAX_MESSAGE, 2 * (state.limits.max_payload + state.limits.max_control_line))
    try:
        async with trio.open_nursery() as nursery:
            server = await nursery.start(partial(
                serve_websocket, partial(_handle, state), cfg.host, cfg.port, ctx,
                handler_nursery=conn_nursery, max_message_size=max_message,
                message_queue_size=WS_MESSAGE_QUEUE))
            state.ports["websocket"] = server.port
            task_status.started(server.port)
    finally:
        unwatch()
        if getattr(broker, "draining", False):
            state.enter_lame_duck()


LISTENER = ListenerSpec(name="nats_ws", default_port=8443, transport="tcp", serve=serve, options=OPTIONS,
                        description="NATS over WebSocket (nats.ws, nats-py ws://)")
