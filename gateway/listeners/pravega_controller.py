"""The Pravega controller's gRPC API over h2c (default port 9090, Pravega's own default).

Scopes, streams, segments and transactions for real Pravega clients
(``StreamManager("tcp://host:9090")``); unary gRPC on the project's own
trio + h2 stack (adapters/pravega/grpc.py), no second event loop. Segment
addresses it hands out are the ``pravega`` listener's (its
``advertised_host``); docs/pravega.md.
"""

from __future__ import annotations

from adapters.pravega.controller import ControllerService
from adapters.pravega.driver import serve_controller

from ..registry import ListenerSpec


async def serve(broker, cfg, conn_nursery, *, task_status) -> None:
    await serve_controller(broker, cfg.host, cfg.port, conn_nursery, service=ControllerService(broker),
                           task_status=task_status)


LISTENER = ListenerSpec(name="pravega_controller", default_port=9090, transport="tcp", serve=serve,
                        description="Pravega controller gRPC API (h2c): scopes, streams, segments, transactions")
