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

import ssl

from adapters.iggy.driver import DEFAULT_MAX_CONNECTIONS, serve_iggy_tcp
from core.errors import InvalidArgument

from ..registry import ListenerSpec

OPTIONS = {"tls_cert": "", "tls_key": "", "max_connections": DEFAULT_MAX_CONNECTIONS}


def server_ssl_context(cert: str, key: str = "", listener: str = "iggy_tcp") -> ssl.SSLContext:
    """A TLS server context (TLS 1.2+, no client certificates: Iggy authenticates
    with its own login). Raises InvalidArgument naming ``listener`` for bad files
    (shared with iggy_ws)."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key or None)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidArgument(f"listeners.{listener}: cannot load tls_cert/tls_key: {exc}") from exc
    return ctx


async def serve(broker, cfg, conn_nursery, *, task_status) -> None:
    opts = {**OPTIONS, **dict(cfg.options)}
    if opts["tls_key"] and not opts["tls_cert"]:
        raise InvalidArgument("listeners.iggy_tcp: tls_key needs tls_cert")
    ctx = server_ssl_context(str(opts["tls_cert"]), str(opts["tls_key"])) if opts["tls_cert"] else None
    await serve_iggy_tcp(broker, cfg.host, cfg.port, conn_nursery, ssl_context=ctx,
                         max_connections=int(opts["max_connections"]), task_status=task_status)


LISTENER = ListenerSpec(name="iggy_tcp", default_port=8090, transport="tcp", serve=serve, options=OPTIONS,
                        description="Iggy binary protocol over TCP (iggy-py 0.4, apache-iggy 0.8, 0.9), TLS optional")
