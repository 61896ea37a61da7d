"""nats-server's monitoring endpoints over Ferry's NATS state (no I/O, no trio).

Theory of operation
-------------------
nats-server serves JSON on its HTTP monitoring port (8222). Tools and test
harnesses read a handful of fields (nats.md section 14): ``/varz`` server
totals, ``/connz`` open connections with their counters, ``/subsz``
subscription counts, ``/healthz`` for readiness probes, ``/jsz`` JetStream
usage, streams and consumers (built by ``jetstream/monitor.py`` from the
broker's JetStream API state). :func:`respond`
maps a request path and query to ``(status, body)``; the listener
(``gateway/listeners/nats_monitor.py``) only moves bytes.

Field names and encodings are nats-server's (server/monitor.go): durations
such as ``ping_interval`` are Go ``time.Duration`` integers (nanoseconds),
``uptime``/``idle`` use its compact ``1d2h3m4s`` form, times are RFC 3339 in
UTC. Fields for features Ferry does not have (routes, gateways, leaf nodes,
closed-connection history; ``/varz``'s ``jetstream`` section) are left out or
zero, never invented.
Byte counters are what the session counts: ``in_bytes`` is payload bytes, as
in nats-server; ``out_bytes`` counts the MSG frames written (control line
included), a little more than nats-server's payload-only figure.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from typing import Any, Mapping
from urllib.parse import parse_qs

from .jetstream import monitor as jetstream_monitor
from .server_state import NatsServerState

NS = 1_000_000_000                 # Go time.Duration unit
DEFAULT_CONNZ_LIMIT = 1024         # nats-server DefaultConnListSize
WRITE_DEADLINE_S = 10              # nats-server DEFAULT_FLUSH_DEADLINE (driver.WRITE_DEADLINE)
ENDPOINTS = ("/varz", "/connz", "/subsz", "/healthz", "/jsz")
_SORTS = {
    "cid": lambda c: c[0], "start": lambda c: c[1].start,
    "subs": lambda c: -len(c[1].session.conn.subscriptions),
    "msgs_to": lambda c: -c[1].session.msgs_out, "msgs_from": lambda c: -c[1].session.msgs_in,
    "bytes_to": lambda c: -c[1].session.bytes_out, "bytes_from": lambda c: -c[1].session.bytes_in,
}


def respond(state: NatsServerState, path: str, query: str = "", now: float | None = None,
            http_port: int = 0) -> tuple[int, bytes]:
    """``(HTTP status, JSON body)`` for a GET of ``path?query``."""
    now = time.time() if now is None else now
    params = {k: v[-1] for k, v in parse_qs(query).items()}
    path = path.rstrip("/") or "/"
    if path == "/varz":
        return 200, _json(varz(state, now, http_port))
    if path == "/connz":
        try:
            return 200, _json(connz(state, now, params))
        except ValueError as exc:
            return 400, _json({"error": str(exc)})
    if path == "/subsz" or path == "/subscriptionsz":
        return 200, _json(subsz(state, now))
    if path == "/jsz":
        return jetstream_monitor.respond(state, query, now)
    if path == "/healthz":
        if getattr(state.broker, "draining", False):
            return 503, _json({"status": "unavailable", "status_code": 503, "error": "lame duck mode"})
        return 200, _json({"status": "ok"})
    if path == "/":
        return 200, _json({"endpoints": list(ENDPOINTS)})
    return 404, _json({"error": f"{path} not found", "endpoints": list(ENDPOINTS)})


def varz(state: NatsServerState, now: float, http_port: int = 0) -> dict[str, Any]:
    info, limits, totals = state.info, state.limits, state.totals
    live = list(state.clients.values())
    doc = {
        "server_id": info.server_id, "server_name": info.server_name or info.server_id,
        "version": info.version, "proto": 1, "go": info.go, "host": info.host, "port": info.port,
        "max_connections": state.max_connections, "ping_interval": int(limits.ping_interval * NS),
        "ping_max": limits.ping_max, "http_host": info.host, "http_port": http_port, "https_port": 0,
        "auth_timeout": limits.auth_timeout, "max_control_line": limits.max_control_line,
        "max_payload": limits.max_payload, "max_pending": state.max_pending,
        "tls_timeout": state.tls_timeout, "write_deadline": WRITE_DEADLINE_S * NS,
        "start": rfc3339(state.start), "now": rfc3339(now), "uptime": uptime(now - state.start),
        "cores": os.cpu_count() or 1,
        "connections": len(live), "total_connections": state.total_connections,
        "routes": 0, "remotes": 0, "leafnodes": 0,
        "in_msgs": totals.in_msgs + sum(r.session.msgs_in for r in live),
        "out_msgs": totals.out_msgs + sum(r.session.msgs_out for r in live),
        "in_bytes": totals.in_bytes + sum(r.session.bytes_in for r in live),
        "out_bytes": totals.out_bytes + sum(r.session.bytes_out for r in live),
        "slow_consumers": totals.slow_consumers + sum(bool(r.session.slow) for r in live),
        "subscriptions": sum(len(r.session.conn.subscriptions) for r in live),
    }
    for flag in ("auth_required", "tls_required", "tls_verify"):   # omitempty in nats-server's Varz
        if getattr(info, flag):
            doc[flag] = True
    return doc


def connz(state: NatsServerState, now: float, params: Mapping[str, str]) -> dict[str, Any]:
    """Open connections, ``offset``/``limit`` paged, ``sort`` by nats-server's keys,
    ``subs=1`` for each connection's subject list, ``auth=1`` for the user
    name, ``cid`` for one connection."""
    offset, limit = _int(params, "offset", 0), _int(params, "limit", DEFAULT_CONNZ_LIMIT)
    sort = params.get("sort", "cid")
    if sort not in _SORTS:
        raise ValueError(f"invalid sorting option: {sort}")
    if params.get("state", "open") not in ("open", "any", "all"):
        raise ValueError("only open connections are kept (state=open)")
    rows = sorted(state.clients.items(), key=_SORTS[sort])
    if "cid" in params:
        rows = [r for r in rows if r[0] == _int(params, "cid", 0)]
    subs = params.get("subs", "").lower() in ("1", "true", "detail")
    auth = params.get("auth", "").lower() in ("1", "true")
    page = rows[offset:offset + limit] if limit > 0 else rows[offset:]
    return {"server_id": state.info.server_id, "now": rfc3339(now), "num_connections": len(page),
            "total": len(rows), "offset": offset, "limit": limit,
            "connections": [_conn_info(cid, rec, now, subs, auth) for cid, rec in page]}


def _conn_info(cid: int, rec, now: float, subs: bool, auth: bool) -> dict[str, Any]:
    session, conn = rec.session, rec.session.conn
    opts = conn.options
    info: dict[str, Any] = {
        "cid": cid, "kind": "Client", "type": rec.kind, "ip": rec.ip, "port": rec.port,
        "start": rfc3339(rec.start), "uptime": uptime(now - rec.start),
        "pending_bytes": session.outbox.pending,
        "in_msgs": session.msgs_in, "out_msgs": session.msgs_out,
        "in_bytes": session.bytes_in, "out_bytes": session.bytes_out,
        "subscriptions": len(conn.subscriptions),
    }
    # A Ferry login (adapters/nats/ferryauth.py) knows its user even when it came with a token.
    user = getattr(conn.permissions, "username", "") or opts.user
    for key, value in (("name", opts.name), ("lang", opts.lang), ("version", opts.version),
                       ("tls_version", rec.tls_version), ("tls_cipher_suite", rec.tls_cipher),
                       ("authorized_user", user if auth and conn.info.auth_required else "")):
        if value:
            info[key] = value
    if subs:
        info["subscriptions_list"] = sorted(s.subject for s in conn.subscriptions)
    return info


def subsz(state: NatsServerState, now: float) -> dict[str, Any]:
    live = list(state.clients.values())
    return {"server_id": state.info.server_id, "now": rfc3339(now),
            "num_subscriptions": sum(len(r.session.conn.subscriptions) for r in live),
            "num_cache": 0, "num_inserts": 0, "num_removes": 0, "num_matches": 0,
            "cache_hit_rate": 0.0, "max_fanout": 0, "avg_fanout": 0.0}


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat().replace("+00:00", "Z")


def uptime(seconds: float) -> str:
    """nats-server's compact duration (``myUptime``): ``45s``, ``3m5s``, ``2d1h0m3s``."""
    secs = max(int(seconds), 0)
    mins, hrs, days = secs // 60, secs // 3600, secs // 86400
    years = days // 365
    if years:
        return f"{years}y{days % 365}d{hrs % 24}h{mins % 60}m{secs % 60}s"
    if days:
        return f"{days}d{hrs % 24}h{mins % 60}m{secs % 60}s"
    if hrs:
        return f"{hrs}h{mins % 60}m{secs % 60}s"
    if mins:
        return f"{mins}m{secs % 60}s"
    return f"{secs}s"


def _int(params: Mapping[str, str], key: str, default: int) -> int:
    try:
        value = int(params.get(key, default))
    except ValueError:
        raise ValueError(f"{key} must be an integer") from None
    if value < 0:
        raise ValueError(f"{key} must not be negative")
    return value


def _json(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, indent=2).encode() + b"\n"


__all__ = ["ENDPOINTS", "connz", "respond", "rfc3339", "subsz", "uptime", "varz"]
