"""The Iggy binary listener over WebSocket (default port 8092, the Iggy SDK's and server's default).

The same frames, sessions and command table as ``iggy_tcp``, one request per
binary WebSocket message (adapters/iggy/ws.py, docs/iggy.md). Clients:
``iggy+ws://user:pass@host:8092`` (apache-iggy 0.9.0 ``from_connection_string``,
or ``WebSocketConfig``); with TLS, ``...?tls=true&tls_domain=...`` (the SDK
then connects to ``wss://``).

Options of ``[listeners.iggy_ws]`` (also ``FERRY_IGGY_WS_<KEY>``):

=========  =======  ==========================================================
key        default  meaning
=========  =======  ==========================================================
tls_cert   ""       PEM certificate chain; set it (and tls_key) and every
                    connection is ``wss://`` (Iggy's ``[websocket.tls]``)
tls_key    ""       PEM private key (may be inside tls_cert)
max_con-   10000    open connections; past it a new one is closed at once
nections            (0 = unlimited). A connection that has not logged in
                    30 s after it opened is closed (docs/security.md)
=========  =======  ==========================================================
"""

from __future__ import annotations

from adapters.iggy.driver import DEFAULT_MAX_CONNECTIONS
from adapters.iggy.ws_driver import serve_iggy_ws

from ..registry import ListenerSpec
from ._tls import tls_options

OPTIONS = {"tls_cert": "", "tls_key": "", "max_connections": DEFAULT_MAX_CONNECTIONS}


async def serve(broker, cfg, conn_nursery, *, task_status) -> None:
    opts = {**OPTIONS, **dict(cfg.options)}
    ctx = tls_options(opts, "iggy_ws")
    await serve_iggy_ws(broker, cfg.host, cfg.port, conn_nursery, ssl_context=ctx,
                         max_connections=int(opts["max_connections"]), task_status=task_status)


LISTENER = ListenerSpec(name="iggy_ws", default_port=8092, transport="tcp", serve=serve, options=OPTIONS,
                        description="Iggy binary protocol over WebSocket (apache-iggy 0.9 iggy+ws://), TLS optional")
