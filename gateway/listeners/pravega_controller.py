"""The Pravega controller's gRPC API over h2c (default port 9090, Pravega's own default).

Scopes, streams, segments and transactions for real Pravega clients
(``StreamManager("tcp://host:9090")``); unary gRPC on the project's own
trio + h2 stack (adapters/pravega/grpc.py), no second event loop. Segment
addresses it hands out are the ``pravega`` listener's (its
``advertised_host``); docs/pravega.md.

Every RPC needs Basic credentials of a Ferry user (clients: ``auth_enabled=True``,
``pravega_client_auth_method=Basic``) and that user's permission, and the segment
store needs a delegation token from ``getDelegationToken``, as a Pravega cluster
with auth enabled (adapters/pravega/auth.py, docs/pravega.md "Authentication").

Options of ``[listeners.pravega_controller]`` (also ``FERRY_PRAVEGA_CONTROLLER_<KEY>``):

==============  =======  ======================================================
key             default  meaning
==============  =======  ======================================================
auth            true     kept for old configuration files: ``true`` is the
                         only behaviour; ``false`` is refused at start (use
                         ``anonymous_user`` to let clients in without
                         credentials)
anonymous_user  ""       a Ferry user that RPCs without credentials act as,
                         with exactly its permissions (empty: credentials
                         are required); it must exist at start
==============  =======  ======================================================

Metrics (core/metrics.py ``listener_metrics``, ``listener="pravega_controller"``):
connections (counted by adapters/pravega/driver.py); each gRPC call is a
message in (``bytes_in``: its protobuf bytes), each OK answer a message out
(``bytes_out``: its protobuf bytes), each non-OK answer an error.
"""

from __future__ import annotations

from adapters.pravega.auth import Authenticator, Principal
from adapters.pravega.controller import ControllerService
from adapters.pravega.driver import ensure_issuer, serve_controller
from adapters.pravega.grpc import GrpcStatus
from core.connections import directory_for, per_connection
from core.errors import InvalidArgument
from core.metrics import listener_metrics, metrics_for

from ..registry import ListenerSpec

OPTIONS = {"auth": True, "anonymous_user": ""}
NAME = "pravega_controller"  # the metrics label: this listener's name


class _MeteredController(ControllerService):
    """The controller service, counting calls and answers under ``listener=NAME``."""

    def __init__(self, broker, **kw) -> None:
        super().__init__(broker, **kw)
        # Also counted on the connection the driver binds (the console's, core/connections.py).
        self.counters = per_connection(listener_metrics(metrics_for(broker)))
        self.directory = directory_for(broker)

    def dispatch(self, conn, call) -> None:
        self.counters["messages_in"].inc(NAME)
        self.counters["bytes_in"].inc(NAME, amount=len(call.body))
        super().dispatch(_MeteredConn(conn, self.counters, self.directory), call)


class _MeteredConn:
    """The gRPC connection as the service answers through it (reply / fail)."""

    __slots__ = ("conn", "counters", "directory")

    def __init__(self, conn, counters, directory) -> None:
        self.conn, self.counters, self.directory = conn, counters, directory

    def reply(self, stream_id: int, body: bytes) -> None:
        self.counters["messages_out"].inc(NAME)
        self.counters["bytes_out"].inc(NAME, amount=len(body))
        self.conn.reply(stream_id, body)

    def fail(self, stream_id: int, code, message: str = "") -> None:
        self.counters["errors"].inc(NAME)
        try:
            status = GrpcStatus(code).name
        except ValueError:
            status = str(code)
        self.directory.error(NAME, f"{status}: {message}" if message else status)
        self.conn.fail(stream_id, code, message)


async def serve(broker, cfg, conn_nursery, *, task_status) -> None:
    opts = {**OPTIONS, **dict(cfg.options)}
    if not opts["auth"]:
        raise InvalidArgument(f"listeners.{NAME}.auth = false: anonymous access is no longer a switch; set "
                              f"listeners.{NAME}.anonymous_user (and listeners.pravega.anonymous_user) to a "
                              f"Ferry user whose permissions credential-less clients get")
    name = str(opts["anonymous_user"]).strip()
    anonymous = Principal.anonymous_user(broker.meta.users, name, f"listeners.{NAME}.anonymous_user") if name else None
    auth = Authenticator(broker, await ensure_issuer(broker), anonymous=anonymous)
    await serve_controller(broker, cfg.host, cfg.port, conn_nursery, service=_MeteredController(broker, auth=auth),
                           task_status=task_status)


LISTENER = ListenerSpec(name="pravega_controller", default_port=9090, transport="tcp", serve=serve, options=OPTIONS,
                        description="Pravega controller gRPC API (h2c): scopes, streams, segments, transactions")
