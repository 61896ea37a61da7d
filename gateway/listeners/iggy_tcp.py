"""The Iggy binary listener over TCP (default port 8090, Iggy's own default).

One port serves every Iggy client generation: iggy-py 0.4.0, apache-iggy
0.8.0 and apache-iggy 0.9.0 (VSR); the dialect is detected per connection
(adapters/iggy/connection.py, docs/iggy.md).

Options of ``[listeners.iggy_tcp]`` (also ``FERRY_IGGY_TCP_<KEY>``):

=========  =======  ==========================================================
key        default  meaning
=========  =======  ==========================================================
tls_cert   ""       PEM certificate chain; set it (and tls_key) and every
                    connection is TLS (Iggy's ``[tcp.tls]``; the SDKs'
                    ``tls_enabled``)
tls_key    ""       PEM private key (may be inside tls_cert)
max_con-   10000    open connections; past it a new one is closed at once
nections            (0 = unlimited). A connection that has not logged in
                    30 s after it opened is closed (docs/security.md)
=========  =======  ==========================================================
"""

from __future__ import annotations

from adapters.iggy.driver import DEFAULT_MAX_CONNECTIONS, serve_iggy_tcp

from ..registry import ListenerSpec
from ._tls import tls_options

OPTIONS = {"tls_cert": "", "tls_key": "", "max_connections": DEFAULT_MAX_CONNECTIONS}


async def serve(broker, cfg, conn_nursery, *, task_status) -> None:
    opts = {**OPTIONS, **dict(cfg.options)}
    ctx = tls_options(opts, "iggy_tcp")
    await serve_iggy_tcp(broker, cfg.host, cfg.port, conn_nursery, ssl_context=ctx,
                         max_connections=int(opts["max_connections"]), task_status=task_status)


LISTENER = ListenerSpec(name="iggy_tcp", default_port=8090, transport="tcp", serve=serve, options=OPTIONS,
                        description="Iggy binary protocol over TCP (iggy-py 0.4, apache-iggy 0.8, 0.9), TLS optional")
