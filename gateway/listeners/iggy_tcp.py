"""The Iggy binary listener over TCP (default port 8090, Iggy's own default).

One port serves every Iggy client generation: iggy-py 0.4.0, apache-iggy
0.8.0 and apache-iggy 0.9.0 (VSR); the dialect is detected per connection
(adapters/iggy/connection.py, docs/iggy.md). QUIC (8080/udp) comes later.
"""

from __future__ import annotations

from adapters.iggy.driver import serve_iggy_tcp

from ..registry import ListenerSpec


async def serve(broker, cfg, conn_nursery, *, task_status) -> None:
    await serve_iggy_tcp(broker, cfg.host, cfg.port, conn_nursery, task_status=task_status)


LISTENER = ListenerSpec(name="iggy_tcp", default_port=8090, transport="tcp", serve=serve,
                        description="Iggy binary protocol over TCP (iggy-py 0.4, apache-iggy 0.8 and 0.9)")
