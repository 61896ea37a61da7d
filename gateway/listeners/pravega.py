"""The Pravega segment store (default port 12345, Pravega's own default).

Real Pravega clients (PyPI ``pravega`` 0.3.8, the Rust client) append and
read events here after the controller (``pravega_controller``, 9090) told them
where each segment lives; docs/pravega.md.

Options of ``[listeners.pravega]`` (also ``FERRY_PRAVEGA_<KEY>``):

===============  =======  ====================================================
key              default  meaning
===============  =======  ====================================================
advertised_host  ""       the host name clients are told to connect to for
                          segments (the controller's ``getURI``); empty: the
                          bind address, or 127.0.0.1 when that is a wildcard.
                          Set it in containers (``ferry``, the service name).
tail_park_ms     5000     how long a read at the tail waits for new data
                          before it is answered empty (the client re-asks at
                          once; its own timeout is 30 s)
anonymous_user   ""       a Ferry user that requests with an empty delegation
                          token (a client with auth disabled) act as, with
                          that user's permissions checked on each request
                          (empty: a token from the controller is required)
===============  =======  ====================================================

Every other request needs a delegation token from the controller's
``getDelegationToken``, re-checked against the user's current permissions on
each request (adapters/pravega/auth.py).
"""

from __future__ import annotations

from adapters.pravega.auth import Principal
from adapters.pravega.driver import ensure_issuer, serve_segment_store
from adapters.pravega.state import state_of
from core.errors import InvalidArgument

from ..registry import ListenerSpec

OPTIONS = {"advertised_host": "", "tail_park_ms": 5000, "anonymous_user": ""}
WILDCARDS = ("0.0.0.0", "::", "")
MAX_TAIL_PARK_MS = 25_000  # the 0.3.8 client's request timeout is 30 s (pravega.md section 7)


def advertised(host: str, configured: str) -> str:
    """What getURI tells clients: the configured name, else the bind address
    (never a wildcard: a client cannot connect to 0.0.0.0)."""
    if configured:
        return configured
    return "127.0.0.1" if host in WILDCARDS else host


async def serve(broker, cfg, conn_nursery, *, task_status) -> None:
    opts = {**OPTIONS, **dict(cfg.options)}
    park = int(opts["tail_park_ms"])
    if not 1 <= park <= MAX_TAIL_PARK_MS:
        raise InvalidArgument(f"listeners.pravega.tail_park_ms must be 1..{MAX_TAIL_PARK_MS}, got {park}")
    name = str(opts["anonymous_user"]).strip()
    anonymous = Principal.anonymous_user(broker.meta.users, name, "listeners.pravega.anonymous_user") if name else None
    await ensure_issuer(broker)  # tokens are checked from the first request on
    state_of(broker).anonymous = anonymous
    await serve_segment_store(broker, cfg.host, cfg.port, conn_nursery,
                              advertised_host=advertised(cfg.host, str(opts["advertised_host"])),
                              tail_park_s=park / 1000, task_status=task_status)


LISTENER = ListenerSpec(name="pravega", default_port=12345, transport="tcp", serve=serve, options=OPTIONS,
                        description="Pravega segment store (pravega 0.3.8 client): appends, reads, table segments")
