"""The NATS client listener (default port 4222, nats-server's own default).

Options of ``[listeners.nats]`` (also ``FERRY_NATS_<KEY>`` variables) use
nats-server's names and defaults (nats.md section 11): ``max_payload``,
``max_pending``, ``max_control_line``, ``max_subscriptions``,
``ping_interval`` (seconds), ``ping_max``, ``server_name``.

Authentication, as nats-server's flags and config: ``user`` + ``password``
(``--user/--pass``), or ``token`` (``--auth``), or ``auth_file``: a file in
nats-server's config format whose ``authorization`` block (users with
publish/subscribe permissions, ``timeout``) and top-level ``no_auth_user``
apply (adapters/nats/auth.py).

TLS, as nats-server's ``--tlscert/--tlskey/--tlscacert/--tlsverify``:
``tls_cert``, ``tls_key``, ``tls_ca``, ``tls_verify``. INFO is sent in clear
text with ``tls_required``, then the client upgrades (nats.md section 13);
``tls_handshake_first`` (config ``tls { handshake_first: true }``) makes the
TLS handshake come first and INFO follow inside it.

``jetstream`` (default true) serves the JetStream streams API, pull, push and
ordered consumers and acknowledged publishing on Ferry's log (adapters/nats/jetstream_api.py);
false answers ``$JS.API`` requests as nats-server without ``-js`` does.

The listener registers its state (adapters/nats/server_state.py) so the
``nats_ws`` and ``nats_monitor`` listeners share its settings and connections.
"""

from __future__ import annotations

from pathlib import Path

import trio

from adapters.nats.auth import Auth, AuthConfigError, auth_from_block, simple_auth
from adapters.nats.connection import NatsLimits, ServerInfo
from adapters.nats.driver import new_server_id, run_jetstream_timers, serve_nats
from adapters.nats.jetstream_api import enable as enable_jetstream
from adapters.nats.jetstream_session import wire as wire_jetstream
from adapters.nats.natsconf import NatsConfError, lookup, parse
from adapters.nats.server_state import NatsServerState, register
from core.errors import InvalidArgument

from ..registry import ListenerSpec
from ._nats_tls import server_ssl_context

OPTIONS = {
    "max_payload": 1024 * 1024,
    "max_pending": 64 * 1024 * 1024,
    "max_control_line": 4096,
    "max_subscriptions": 0,
    "ping_interval": 120.0,
    "ping_max": 2,
    "server_name": "",
    "user": "",
    "password": "",
    "token": "",
    "auth_file": "",
    "tls_cert": "",
    "tls_key": "",
    "tls_ca": "",
    "tls_verify": False,
    "tls_handshake_first": False,
    "jetstream": True,
}
# A config file is a few KiB; refuse anything absurd before parsing it.
MAX_AUTH_FILE_BYTES = 4 * 1024 * 1024


def load_auth(opts) -> Auth:
    """The listener's :class:`Auth`: from ``auth_file`` or the simple options."""
    path = opts["auth_file"]
    simple = (opts["user"], opts["password"], opts["token"])
    try:
        if not path:
            return simple_auth(*simple)
        if any(simple):
            raise AuthConfigError("set auth_file or user/password/token, not both")
        doc = read_conf(path)
        block = lookup(doc, "authorization", default=None)
        if block is None:
            raise AuthConfigError(f"{path}: has no authorization block")
        return auth_from_block(block, no_auth_user=str(lookup(doc, "no_auth_user", default="")))
    except AuthConfigError as exc:
        raise InvalidArgument(f"listeners.nats: {exc.message}") from None


def read_conf(path: str) -> dict:
    """A nats-server config file, parsed (environment variables resolve ``$NAME``)."""
    import os

    p = Path(path)
    try:
        if p.stat().st_size > MAX_AUTH_FILE_BYTES:
            raise InvalidArgument(f"{path}: larger than {MAX_AUTH_FILE_BYTES} bytes")
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidArgument(f"{path}: cannot be read: {exc.strerror}") from None
    try:
        return parse(text, os.environ, source=str(path))
    except NatsConfError as exc:
        raise InvalidArgument(exc.message) from None


def build_state(broker, cfg) -> NatsServerState:
    opts = cfg.options
    auth = load_auth(opts)
    limits = NatsLimits(max_payload=opts["max_payload"], max_control_line=opts["max_control_line"],
                        max_subscriptions=opts["max_subscriptions"],
                        ping_interval=float(opts["ping_interval"]), ping_max=opts["ping_max"],
                        auth_timeout=auth.timeout)
    if opts["max_pending"] < limits.max_payload:
        # nats-server refuses to start with max_pending < max_payload (nats.md section 11).
        raise InvalidArgument("listeners.nats.max_pending must be >= max_payload")
    ctx = server_ssl_context("nats", opts["tls_cert"], opts["tls_key"], opts["tls_ca"], opts["tls_verify"])
    info = ServerInfo(server_id=new_server_id(), server_name=opts["server_name"],
                      host=cfg.host, port=cfg.port, auth_required=auth.required,
                      tls_required=ctx is not None, tls_verify=ctx is not None and opts["tls_verify"])
    return NatsServerState(broker=broker, info=info, limits=limits, max_pending=opts["max_pending"],
                           authenticate=auth.authenticate if auth.enabled else None,
                           initial_permissions=auth.initial_permissions, ssl_context=ctx,
                           tls_handshake_first=ctx is not None and opts["tls_handshake_first"])


async def serve(broker, cfg, conn_nursery, *, task_status) -> None:
    state = build_state(broker, cfg)
    register(state)
    js = None
    if cfg.options["jetstream"]:
        # On by default under `ferry serve`: Ferry's storage is always there
        # (docs/nats.md "JetStream"); `ferry nats-server` turns it on with -js.
        js = enable_jetstream(broker, state.info.server_name or state.info.server_id)
        wire_jetstream(broker, js)
    async with trio.open_nursery() as nursery:
        if js is not None and not js.timers_running:
            js.timers_running = True      # one timer task per broker (consumers' acks, pulls, saves)
            nursery.start_soon(_jetstream_timers, js)
        await serve_nats(state, cfg.host, cfg.port, conn_nursery, task_status=task_status)
        nursery.cancel_scope.cancel()


async def _jetstream_timers(js) -> None:
    try:
        await run_jetstream_timers(js.consumers)
    finally:
        js.timers_running = False


LISTENER = ListenerSpec(name="nats", default_port=4222, transport="tcp", serve=serve,
                        options=OPTIONS, description="NATS client protocol (nats-py, nats.js, nats CLI)")
