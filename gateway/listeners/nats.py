"""The NATS client listener (default port 4222, nats-server's own default).

Options of ``[listeners.nats]`` (also ``FERRY_NATS_<KEY>`` variables) use
nats-server's names and defaults (nats.md section 11): ``max_payload``,
``max_pending``, ``max_control_line``, ``max_subscriptions``,
``ping_interval`` (seconds), ``ping_max``, ``server_name``.

Authentication (docs/nats.md "Authentication and permissions") depends on
``auth_mode``:

* ``"ferry"`` (the default, ``ferry serve``): every client logs in as a Ferry
  user (CONNECT ``user``/``pass``) or with a personal access token
  (``auth_token``), and Ferry's permissions decide what it may publish and
  subscribe (adapters/nats/ferryauth.py). ``anonymous_user`` names the Ferry
  user a client without credentials acts as (empty: credentials required).
  ``auth_file`` (a nats-server config file) only narrows: its users'
  publish/subscribe permissions filter what the Ferry user of the same name
  may do; its passwords and ``no_auth_user`` are ignored (a log line says so).
* ``"nats-server"`` (set by ``ferry nats-server``): nats-server's own model,
  open by default; ``auth_file``'s ``authorization`` block (users, passwords,
  permissions, ``timeout``) and top-level ``no_auth_user`` apply
  (adapters/nats/auth.py), and the drop-in's ``--user/--pass``/``--auth``
  flags reach the listener through :func:`with_credentials` (an in-process
  option, never read from a config file or the environment).

TLS, as nats-server's ``--tlscert/--tlskey/--tlscacert/--tlsverify``:
``tls_cert``, ``tls_key``, ``tls_ca``, ``tls_verify``. INFO is sent in clear
text with ``tls_required``, then the client upgrades (nats.md section 13);
``tls_handshake_first`` (config ``tls { handshake_first: true }``) makes the
TLS handshake come first and INFO follow inside it.

``jetstream`` (default true) serves the JetStream streams API, pull, push and
ordered consumers and acknowledged publishing on Ferry's log (adapters/nats/jetstream/api.py);
false answers ``$JS.API`` requests as nats-server without ``-js`` does.

The listener registers its state (adapters/nats/server_state.py) so the
``nats_ws`` and ``nats_monitor`` listeners share its settings and connections.
"""

from __future__ import annotations

import dataclasses
import logging
from functools import partial
from pathlib import Path

import trio

from adapters.nats.auth import AUTH_TIMEOUT, Auth, AuthConfigError, auth_from_block, simple_auth
from adapters.nats.connection import NatsLimits, ServerInfo
from adapters.nats.driver import new_server_id, run_jetstream_timers, serve_nats
from adapters.nats.jetstream.api import enable as enable_jetstream
from adapters.nats.jetstream.session import wire as wire_jetstream
from adapters.nats.natsconf import NatsConfError, lookup, parse
from adapters.nats.ferryauth import FerryAuthenticator, subject_filters
from adapters.nats.server_state import NatsServerState, register, revoke_user
from core.errors import InvalidArgument, UserNotFound

from ..registry import ListenerSpec
from ._nats_tls import server_ssl_context

OPTIONS = {
    "max_payload": 1024 * 1024,
    "max_pending": 64 * 1024 * 1024,
    "max_control_line": 4096,
    "max_subscriptions": 0,
    "max_connections": 64 * 1024,
    "ping_interval": 120.0,
    "ping_max": 2,
    "server_name": "",
    "auth_mode": "ferry",
    "anonymous_user": "",
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
FERRY_MODE, NATS_SERVER_MODE = "ferry", "nats-server"
AUTH_MODES = (FERRY_MODE, NATS_SERVER_MODE)
# The drop-in's --user/--pass/--auth: an option only with_credentials sets (in process).
CREDENTIALS_OPTION = "drop_in_credentials"

log = logging.getLogger("ferry.nats")


def with_credentials(cfg, user: str = "", password: str = "", token: str = "", *, name: str = "nats"):
    """``cfg`` (a gateway Config) with nats-server's ``--user/--pass`` or ``--auth``
    for the ``nats`` listener in ``auth_mode = "nats-server"`` (``ferry nats-server``)."""
    listeners = tuple(
        dataclasses.replace(lc, options={**lc.options, CREDENTIALS_OPTION: (user, password, token)})
        if lc.name == name else lc for lc in cfg.listeners)
    return dataclasses.replace(cfg, listeners=listeners)


def load_auth(opts) -> Auth:
    """The listener's nats-server :class:`Auth` (``auth_mode = "nats-server"``):
    from ``auth_file`` or the drop-in's flags (:func:`with_credentials`)."""
    path = opts["auth_file"]
    simple = tuple(opts.get(CREDENTIALS_OPTION) or ("", "", ""))
    try:
        if not path:
            return simple_auth(*simple)
        if any(simple):
            raise AuthConfigError("set auth_file or --user/--pass/--auth, not both")
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


def ferry_auth(broker, opts) -> tuple[FerryAuthenticator, float]:
    """The ``ferry serve`` authenticator (Ferry's users, ``anonymous_user``,
    ``auth_file`` as a subject filter) and the CONNECT timeout."""
    name = opts["anonymous_user"]
    if name:
        try:
            broker.meta.users.get_user(name)
        except UserNotFound:
            raise InvalidArgument(f"listeners.nats.anonymous_user: no Ferry user {name!r}") from None
    filters, timeout = {}, AUTH_TIMEOUT
    path = opts["auth_file"]
    if path:
        doc = read_conf(path)
        block = lookup(doc, "authorization", default=None)
        if block is None:
            raise InvalidArgument(f"listeners.nats: {path}: has no authorization block")
        try:
            filters, has_passwords = subject_filters(block)
            timeout = float(lookup(block, "timeout", default=AUTH_TIMEOUT))
        except AuthConfigError as exc:
            raise InvalidArgument(f"listeners.nats: {exc.message}") from None
        except (TypeError, ValueError):
            raise InvalidArgument(f"listeners.nats: {path}: authorization.timeout must be seconds") from None
        if has_passwords or lookup(doc, "no_auth_user", default=None):
            log.warning("NATS auth_file: only its users' permissions apply under ferry serve; its passwords "
                        "and no_auth_user are ignored (clients log in as Ferry users)", extra={"file": path})
    return FerryAuthenticator(broker, anonymous_user=name, filters=filters), timeout


def build_state(broker, cfg) -> NatsServerState:
    opts = cfg.options
    mode = opts.get("auth_mode", FERRY_MODE)
    if mode not in AUTH_MODES:
        raise InvalidArgument(f"listeners.nats.auth_mode: {mode!r} (expected 'ferry' or 'nats-server')")
    if mode == FERRY_MODE:
        authenticator, auth_timeout = ferry_auth(broker, opts)
        authenticate, initial = authenticator, authenticator.initial_permissions()
        auth_required = not authenticator.anonymous_user
    else:
        auth = load_auth(opts)
        authenticate = auth.authenticate if auth.enabled else None
        initial, auth_required, auth_timeout = auth.initial_permissions, auth.required, auth.timeout
    limits = NatsLimits(max_payload=opts["max_payload"], max_control_line=opts["max_control_line"],
                        max_subscriptions=opts["max_subscriptions"],
                        ping_interval=float(opts["ping_interval"]), ping_max=opts["ping_max"],
                        auth_timeout=auth_timeout)
    if opts["max_pending"] < limits.max_payload:
        # nats-server refuses to start with max_pending < max_payload (nats.md section 11).
        raise InvalidArgument("listeners.nats.max_pending must be >= max_payload")
    ctx = server_ssl_context("nats", opts["tls_cert"], opts["tls_key"], opts["tls_ca"], opts["tls_verify"])
    info = ServerInfo(server_id=new_server_id(), server_name=opts["server_name"],
                      host=cfg.host, port=cfg.port, auth_required=auth_required,
                      tls_required=ctx is not None, tls_verify=ctx is not None and opts["tls_verify"])
    return NatsServerState(broker=broker, info=info, limits=limits, max_pending=opts["max_pending"],
                           authenticate=authenticate, initial_permissions=initial, ssl_context=ctx,
                           tls_handshake_first=ctx is not None and opts["tls_handshake_first"],
                           max_connections=int(opts["max_connections"]))


async def serve(broker, cfg, conn_nursery, *, task_status) -> None:
    state = build_state(broker, cfg)
    register(state)
    js = None
    if cfg.options["jetstream"]:
        # On by default under `ferry serve`: Ferry's storage is always there
        # (docs/nats.md "JetStream"); `ferry nats-server` turns it on with -js.
        js = enable_jetstream(broker, state.info.server_name or state.info.server_id)
        wire_jetstream(broker, js)
    # A deleted user's connections close at once (ferry mode; nats-server mode has no Ferry users).
    unwatch = broker.meta.users.watch_credentials(partial(revoke_user, state)) \
        if isinstance(state.authenticate, FerryAuthenticator) else (lambda: None)
    try:
        async with trio.open_nursery() as nursery:
            if js is not None and not js.timers_running:
                js.timers_running = True      # one timer task per broker (consumers' acks, pulls, saves)
                nursery.start_soon(_jetstream_timers, js)
            await serve_nats(state, cfg.host, cfg.port, conn_nursery, task_status=task_status)
            nursery.cancel_scope.cancel()
    finally:
        unwatch()


async def _jetstream_timers(js) -> None:
    try:
        await run_jetstream_timers(js.consumers)
    finally:
        js.timers_running = False


LISTENER = ListenerSpec(name="nats", default_port=4222, transport="tcp", serve=serve,
                        options=OPTIONS, description="NATS client protocol (nats-py, nats.js, nats CLI)")
