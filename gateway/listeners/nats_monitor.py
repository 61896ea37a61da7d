"""nats-server's HTTP monitoring port (default 8222): ``/varz``, ``/connz``, ``/subsz``, ``/healthz``, ``/jsz``.

The JSON comes from :mod:`adapters.nats.monitor` over the state the ``nats``
listener registered for this broker (adapters/nats/server_state.py), so the
WebSocket clients of ``nats_ws`` are counted too; ``/jsz`` reads the
broker's JetStream state, which the ``nats`` listener turned on
(``adapters.nats.jetstream.api.enable``), else it reports ``disabled``. HTTP/1.1 through h11, GET
and HEAD only, keep-alive, one small request at a time per connection.
Without a running ``nats`` listener every endpoint answers 503.

Metrics (core/metrics.py ``listener_metrics``, ``listener="nats_monitor"``):
connections; ``messages_in``/``messages_out`` count requests and responses,
``bytes_in`` the request bytes received (a monitoring GET has no other
payload), ``bytes_out`` the response bodies; ``errors`` the responses with a
status of 400 or more.
"""

from __future__ import annotations

import logging
from functools import partial

import h11
import trio

from adapters.nats.jetstream.monitor import warm_for_jsz
from adapters.nats.monitor import respond
from adapters.nats.server_state import shared_state
from adapters.peer import peer_of
from core.connections import address, clip, directory_for
from core.metrics import listener_metrics, metrics_for

from ..registry import ListenerSpec

log = logging.getLogger("ferry.nats.monitor")

MAX_REQUEST_HEAD = 16 * 1024   # a monitoring GET is one short line and a few headers
MAX_BODY = 64 * 1024           # GETs carry no body; anything larger is refused unread
IDLE_TIMEOUT = 30.0            # keep-alive connections idle this long are closed
RECV_CHUNK = 16 * 1024
_UNAVAILABLE = b'{"error": "the nats listener is not running"}\n'
NAME = "nats_monitor"  # the metrics label: this listener's name


async def serve(broker, cfg, conn_nursery, *, task_status) -> None:
    listeners = await trio.open_tcp_listeners(cfg.port, host=cfg.host)
    bound = listeners[0].socket.getsockname()[1]
    task_status.started(bound)
    await trio.serve_listeners(partial(_http_connection, broker, bound), listeners,
                               handler_nursery=conn_nursery)


async def _http_connection(broker, http_port: int, stream) -> None:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_HEAD)
    counters = listener_metrics(metrics_for(broker))
    counters["connections_total"].inc(NAME)
    counters["connections_open"].inc(NAME)
    directory = directory_for(broker)
    scope = trio.CancelScope()   # the console's close
    entry = directory.open(NAME, address(peer_of(stream)), close=scope.cancel)  # "" without a peer
    counters = entry.metered(counters)   # counted on the console's entry too (core/connections.py)
    try:
        with scope:
            await _serve_requests(broker, http_port, stream, conn, counters, entry)
    except h11.RemoteProtocolError as exc:
        if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            with trio.move_on_after(1):
                await _send(conn, stream, exc.error_status_hint, b"", head_only=False, counters=counters,
                            entry=entry, error=str(exc))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    except Exception:  # noqa: BLE001 - a bug here must not take the listener down
        log.exception("nats monitor connection failed")
    finally:
        counters["connections_open"].dec(NAME)
        directory.closed(entry)
        await trio.aclose_forcefully(stream)


async def _serve_requests(broker, http_port: int, stream, conn: h11.Connection, counters, entry) -> None:
    while True:
        with trio.move_on_after(IDLE_TIMEOUT):
            request = await _read_request(conn, stream, counters)
        if request is None:
            return
        agent = dict(request.headers).get(b"user-agent")
        if agent:
            entry.client = clip(agent.decode("latin-1"))
        while warm_for_jsz(broker, request.target.decode("latin-1")):
            await trio.sleep(0)                  # cold JetStream state read in slices first (issue 30)
        status, body = _answer(broker, http_port, request)
        counters["messages_in"].inc(NAME)
        await _send(conn, stream, status, body, head_only=request.method == b"HEAD", counters=counters,
                    entry=entry, error=request.target.decode("latin-1"))
        if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
            return
        conn.start_next_cycle()


def _answer(broker, http_port: int, request: h11.Request) -> tuple[int, bytes]:
    if request.method not in (b"GET", b"HEAD"):
        return 405, b'{"error": "only GET is supported"}\n'
    state = shared_state(broker)
    if state is None:
        return 503, _UNAVAILABLE
    path, _, query = request.target.decode("latin-1").partition("?")
    return respond(state, path, query, http_port=http_port)


async def _read_request(conn: h11.Connection, stream, counters) -> h11.Request | None:
    """The next request with its (small) body read, or None at EOF."""
    request = None
    body = 0
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(RECV_CHUNK)
            counters["bytes_in"].inc(NAME, amount=len(data))
            conn.receive_data(data)
        elif isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += len(event.data)
            if body > MAX_BODY:
                raise h11.RemoteProtocolError("request body too large", error_status_hint=413)
        elif isinstance(event, h11.EndOfMessage):
            return request
        elif isinstance(event, h11.ConnectionClosed):
            return None


async def _send(conn: h11.Connection, stream, status: int, body: bytes, head_only: bool, counters,
                entry=None, error: str = "") -> None:
    """Answer; a status >= 400 is an error, listed with ``error`` (the path, or the
    parse error) in the listener's last errors."""
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    data = conn.send(h11.Response(status_code=status, headers=headers))
    if not head_only:
        data += conn.send(h11.Data(data=body))
    data += conn.send(h11.EndOfMessage())
    await stream.send_all(data)
    counters["messages_out"].inc(NAME)
    if not head_only:
        counters["bytes_out"].inc(NAME, amount=len(body))
    if status >= 400:
        counters["errors"].inc(NAME)
        if entry is not None:
            entry.error(f"{status} {error}")


LISTENER = ListenerSpec(name="nats_monitor", default_port=8222, transport="tcp", serve=serve,
                        description="nats-server monitoring endpoints (/varz, /connz, /subsz, /healthz, /jsz)")
