"""The NATS client listener (default port 4222, nats-server's own default).

Options of ``[listeners.nats]`` (also ``FERRY_NATS_<KEY>`` variables) use
nats-server's names and defaults (nats.md section 11): ``max_payload``,
``max_pending``, ``max_control_line``, ``max_subscriptions``,
``ping_interval`` (seconds), ``ping_max``, ``server_name``; and simple
authentication as nats-server's ``--user/--pass`` and ``--auth`` flags:
``user`` + ``password``, or ``token``.
"""

from __future__ import annotations

import hmac

from adapters.nats.connection import NatsLimits, ServerInfo
from adapters.nats.driver import NatsServerState, new_server_id, serve_nats
from core.errors import InvalidArgument

from ..registry import ListenerSpec

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
}


def _authenticator(opts):
    """A CONNECT check for ``user``/``password`` or ``token`` (compared in
    constant time), or None when neither is configured."""
    user, password, token = opts["user"], opts["password"], opts["token"]
    if token and (user or password):
        raise InvalidArgument("listeners.nats: set token or user/password, not both")
    if bool(user) != bool(password):
        raise InvalidArgument("listeners.nats: user and password go together")
    if token:
        return lambda c: hmac.compare_digest(c.auth_token.encode(), token.encode())
    if user:
        return lambda c: (hmac.compare_digest(c.user.encode(), user.encode())
                          & hmac.compare_digest(c.password.encode(), password.encode()))
    return None


def build_state(broker, cfg) -> NatsServerState:
    opts = cfg.options
    limits = NatsLimits(max_payload=opts["max_payload"], max_control_line=opts["max_control_line"],
                        max_subscriptions=opts["max_subscriptions"],
                        ping_interval=float(opts["ping_interval"]), ping_max=opts["ping_max"])
    if opts["max_pending"] < limits.max_payload:
        # nats-server refuses to start with max_pending < max_payload (nats.md section 11).
        raise InvalidArgument("listeners.nats.max_pending must be >= max_payload")
    authenticate = _authenticator(opts)
    info = ServerInfo(server_id=new_server_id(), server_name=opts["server_name"],
                      host=cfg.host, port=cfg.port, auth_required=authenticate is not None)
    return NatsServerState(broker=broker, info=info, limits=limits, max_pending=opts["max_pending"],
                           authenticate=authenticate)


async def serve(broker, cfg, conn_nursery, *, task_status) -> None:
    state = build_state(broker, cfg)
    await serve_nats(state, cfg.host, cfg.port, conn_nursery, task_status=task_status)


LISTENER = ListenerSpec(name="nats", default_port=4222, transport="tcp", serve=serve,
                        options=OPTIONS, description="NATS client protocol (nats-py, nats.js, nats CLI)")
