"""The HTTP listener: Iggy's HTTP/JSON API over HTTP/1.1 and HTTP/2 on one port.

Plugs in by discovery (gateway/listeners/__init__.py). Options of
``[listeners.http]`` (also ``FERRY_HTTP_<KEY>``):

=================  ============  =================================================
key                default       meaning
=================  ============  =================================================
tls_cert           ""            PEM certificate chain; set it (and tls_key) for
                                 HTTPS with ALPN h2/http/1.1
tls_key            ""            PEM private key (may be inside tls_cert)
jwt_secret         ""            HS256 key, >= 32 bytes; empty = random, persisted
                                 in <data_dir>/http-jwt-secret on first start
jwt_lifetime_s     3600          access-token lifetime (Iggy's default, 1 h)
max_body_bytes     2000000       request body limit, 413 past it (Iggy's 2 MB)
idle_timeout_s     60.0          close keep-alive connections idle this long
request_timeout_s  60.0          a started request must complete within this
max_wait_ms        55000         upper bound of a long poll's ``wait_ms``
max_connections    10000         open connections; past it new ones are closed
=================  ============  =================================================
"""

from __future__ import annotations

import json

import trio

from adapters.http.app import HttpApp
from adapters.http.driver import make_ssl_context, serve_http
from adapters.http.limits import (
    IDLE_TIMEOUT_S, MAX_BODY_BYTES, MAX_CONNECTIONS, MAX_WAIT_MS, REQUEST_TIMEOUT_S, HttpLimits,
)
from adapters.http.tokens import DEFAULT_LIFETIME_S, REVOKED_SETTING, TokenService, load_secret
from core.connections import directory_for
from core.metrics import metrics_for
from gateway.registry import ListenerSpec

# Error bodies are a few hundred bytes; a larger one is not parsed for the Errors view.
MAX_ERROR_BODY = 4096

OPTIONS = {
    "tls_cert": "",
    "tls_key": "",
    "jwt_secret": "",
    "jwt_lifetime_s": DEFAULT_LIFETIME_S,
    "max_body_bytes": MAX_BODY_BYTES,
    "idle_timeout_s": IDLE_TIMEOUT_S,
    "request_timeout_s": REQUEST_TIMEOUT_S,
    "max_wait_ms": MAX_WAIT_MS,
    "max_connections": MAX_CONNECTIONS,
}


class _ListenerApp(HttpApp):
    """The HttpApp that also counts error answers (status 400 and up) in the shared
    ``ferry_errors_total`` family (core/metrics.py). Metrics wiring only; the
    natural home is ``HttpApp.count_response`` itself."""

    def count_response(self, response) -> None:
        super().count_response(response)
        if response.status >= 400:
            self.counters["errors"].inc(self.listener)
            directory_for(self.broker).error(self.listener, error_text(response))


def error_text(response) -> str:
    """An error answer as the console's Errors view lists it: the status and the reason of
    Iggy's JSON error body (``{"id", "code", "reason", "field"}``) when there is one."""
    text = str(response.status)
    body = response.body
    if isinstance(body, (bytes, bytearray)) and body[:1] == b"{" and len(body) <= MAX_ERROR_BODY:
        try:
            doc = json.loads(body)
        except ValueError:
            return text
        if isinstance(doc, dict):
            for key in ("code", "reason"):
                if doc.get(key):
                    text += f" {doc[key]}"
            if doc.get("field"):
                text += f" (field {doc['field']})"
    return text


def build_app(broker, cfg) -> tuple[HttpApp, HttpLimits]:
    """The HttpApp for ``broker`` with ``cfg.options`` applied (blocking: reads the secret)."""
    opts = {**OPTIONS, **dict(cfg.options)}
    limits = HttpLimits(
        max_body_bytes=int(opts["max_body_bytes"]),
        idle_timeout_s=float(opts["idle_timeout_s"]),
        request_timeout_s=float(opts["request_timeout_s"]),
        max_wait_ms=int(opts["max_wait_ms"]),
        max_connections=int(opts["max_connections"]),
    )
    secret = load_secret(broker.data_dir, str(opts["jwt_secret"]))
    meta = broker.meta
    tokens = TokenService(secret, lifetime_s=int(opts["jwt_lifetime_s"]),
                          persist=lambda value: meta.set_setting(REVOKED_SETTING, value),
                          revoked=meta.get_setting(REVOKED_SETTING))
    return _ListenerApp(broker, tokens, metrics_for(broker), limits=limits, listener=cfg.name), limits


async def serve(broker, cfg, conn_nursery, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """ListenerSpec.serve: bind, report the port, serve until cancelled."""
    app, limits = build_app(broker, cfg)
    opts = {**OPTIONS, **dict(cfg.options)}
    ssl_context = make_ssl_context(opts["tls_cert"], opts["tls_key"]) if opts["tls_cert"] else None
    await serve_http(app, limits, cfg.host, cfg.port, conn_nursery, ssl_context=ssl_context,
                     task_status=task_status)


LISTENER = ListenerSpec(
    name="http",
    default_port=3000,  # Iggy's HTTP port (iggy.md section 8)
    transport="tcp",
    serve=serve,
    options=OPTIONS,
    description="Iggy HTTP/JSON API over HTTP/1.1 and HTTP/2 (h2c, TLS+ALPN); /metrics, /healthz",
)
