"""The Iggy binary listener over QUIC (default UDP port 8080, Iggy's own default).

Same dialects, session and command table as TCP (adapters/iggy), one request
per bidirectional stream; a self-signed ``localhost`` certificate is made at
start, which the Iggy SDKs accept by default (docs/iggy.md).
"""

from __future__ import annotations

from adapters.iggy.quic_driver import serve_iggy_quic

from ..registry import ListenerSpec


async def serve(broker, cfg, conn_nursery, *, task_status) -> None:
    await serve_iggy_quic(broker, cfg.host, cfg.port, conn_nursery, task_status=task_status)


LISTENER = ListenerSpec(name="iggy_quic", default_port=8080, transport="udp", serve=serve,
                        description="Iggy binary protocol over QUIC (apache-iggy 0.8 and 0.9)")
