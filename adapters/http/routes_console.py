"""JSON endpoints of the web console (adapters/http/console/), where the Iggy API lacks what the page shows.

* ``GET /console/{asset}``: the console's static files (public: the page must load before
  anyone logs in; they hold no data).
* ``GET /console/api/metrics``: one snapshot of the per-listener families of ``/metrics``
  (core/metrics.py) as JSON; the page polls it every second and draws rates from the
  differences between snapshots.
* ``GET /console/api/me``: the session's user name and whether it may manage servers.
* ``GET /console/api/streams/{stream_id}/topics/{topic_id}``: partitions with numeric sizes
  and offsets, each consumer group's stored offsets and lag, and the topic's NATS subject
  and Pravega names.
* ``GET /console/api/streams/{stream_id}/topics/{topic_id}/messages``: the message browser,
  in routes_console_browse.py; each message shows the protocol that most likely wrote it
  (:func:`infer_origin`, here).

The metrics snapshot reads the registry's *rendered* Prometheus text, by family name and
``listener`` label, instead of reaching into the registry: a listener that has no series
yet (or an adapter that adds its own to the shared families later) needs no change here.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from adapters.nats.jetstream.streams import JS_STREAM
from core.addressing import SUBJECT_HEADER
from core.consumers import Consumer
from core.message import Headers
from core.metrics import BYTES_IN, BYTES_OUT, CONNECTIONS_OPEN, CONNECTIONS_TOTAL, MESSAGES_IN, MESSAGES_OUT
from core.permissions import Action

from . import console
from .errors import Response, not_found_entity
from .handler import App, Ctx, Route, json_response
from .routes_streams import topic_of

# Families the overview charts, by the key the page reads. Counters are totals since start;
# the page turns two snapshots into a rate. connections_open is a gauge.
FAMILIES = {MESSAGES_IN: "messages_in", MESSAGES_OUT: "messages_out", BYTES_IN: "bytes_in",
            BYTES_OUT: "bytes_out", CONNECTIONS_OPEN: "connections_open", CONNECTIONS_TOTAL: "connections_total",
            "ferry_errors_total": "errors"}  # by name: a family newer than this module's first version
# One sample line of the exposition format: name, optional {labels}, value (timestamp ignored).
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


# -- origin inference -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Origin:
    """Which protocol most likely wrote a message, and the evidence."""

    protocol: str  # "NATS", "NATS JetStream", "Iggy/HTTP" or "Iggy/HTTP/Pravega"
    evidence: str


def infer_origin(headers: Headers, stream: str, pravega_visible: bool) -> Origin:
    """The writer of a stored message, from what the adapters leave in it.

    The stored record has no protocol field. The only mark an adapter stores is the NATS
    adapter's ``ferry-nats-subject`` (docs/addressing.md "Reserved headers"): the Iggy
    producer headers (``ferry-producer-id``/``-seq``, also what Spark sinks send) are
    removed before the append, and Pravega events carry no headers at all. So Iggy binary
    (TCP, QUIC, WebSocket, and Spark, which writes over it) and HTTP cannot be told apart,
    and a message without headers in a Pravega-visible topic may also be a Pravega event.
    The header travels with the message: a NATS message copied elsewhere with its headers
    (``ferry pipeline replay``) still reads as NATS.
    """
    subject = headers.get(SUBJECT_HEADER)
    if subject is not None:
        where = "NATS JetStream" if stream == JS_STREAM else "NATS"
        return Origin(where, f"{SUBJECT_HEADER}: {subject.to_text()}")
    if headers:
        return Origin("Iggy/HTTP", f"headers without {SUBJECT_HEADER}; Pravega stores none; "
                      "Iggy binary and HTTP writes look alike")
    if pravega_visible:
        return Origin("Iggy/HTTP/Pravega", "no headers: an Iggy, HTTP or Pravega write")
    return Origin("Iggy/HTTP", "no headers, and the topic is not Pravega-visible")


# -- static files -------------------------------------------------------------------------
def asset(app: App, ctx: Ctx):
    found = console.ASSETS.get(ctx.params["asset"])
    if found is None:
        raise not_found_entity()
    content_type, body = found
    return Response(200, ((b"content-type", content_type), (b"cache-control", b"no-cache"),
                          (b"x-content-type-options", b"nosniff"), (b"content-security-policy", console.CSP)),
                    body)


# -- metrics snapshot ---------------------------------------------------------------------
def _labels(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    return {k: re.sub(r'\\[\\"n]', lambda m: _UNESCAPE[m.group(0)], v) for k, v in _LABEL.findall(text)}


def listener_snapshot(exposition: str) -> dict[str, dict[str, float]]:
    """listener -> {key of FAMILIES: value}, from Prometheus text. Samples of one listener
    that differ in other labels are summed; samples without a ``listener`` label are skipped."""
    out: dict[str, dict[str, float]] = {}
    for line in exposition.splitlines():
        if not line.startswith("ferry_"):
            continue  # comments, and families that are not ours
        m = _SAMPLE.match(line)
        if m is None or m.group(1) not in FAMILIES:
            continue
        listener = _labels(m.group(2)).get("listener")
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        if listener is None or value != value:  # NaN: nothing to chart
            continue
        series = out.setdefault(listener, dict.fromkeys(FAMILIES.values(), 0.0))
        series[FAMILIES[m.group(1)]] += value
    return out


def metrics_snapshot(app: App, ctx: Ctx):
    """``{"time": unix seconds, "listeners": {name: {messages_in, ..., connections_open}}}``."""
    return json_response({"time": time.time(), "listeners": listener_snapshot(app.metrics.render())})


# -- who is logged in ------------------------------------------------------------------------
def whoami(app: App, ctx: Ctx):
    """``{"id", "username", "manage_servers"}`` of the session's user: the header shows the
    name after a deep link (the page then never saw the login form), and views hide actions
    the user may not take (the server checks them anyway)."""
    user = ctx.user
    return json_response({"id": user.id, "username": user.username,
                          "manage_servers": app.broker.meta.users.can(user, Action.MANAGE_SERVERS, ignore_status=True)})


# -- topic details --------------------------------------------------------------------------
def _visible_topic(app: App, ctx: Ctx, action: Action):
    topic = topic_of(app, ctx)
    ctx.require(action, topic.stream_id, topic.id)
    return topic, app.broker.get_stream(topic.stream_id).name


def topic_details(app: App, ctx: Ctx):
    topic, stream_name = _visible_topic(app, ctx, Action.READ_TOPIC)
    broker = app.broker
    parts = [broker.partition(topic.stream_id, topic.id, pid) for pid in range(topic.partitions_count)]
    groups = []
    for g in broker.consumers.list_groups(topic.stream_id, topic.id):
        members = broker.consumers.group_members(topic.stream_id, topic.id, g.id)
        rows, total = [], 0
        for pid, part in enumerate(parts):
            stored = broker.consumers.get_offset(Consumer("group", g.id), topic.stream_id, topic.id, pid)
            # Iggy stores the last consumed offset; nothing stored = every kept message is unread.
            lag = part.record_count if stored is None else max(part.next_offset - 1 - stored, 0)
            rows.append({"partition": pid, "stored_offset": stored, "lag": lag})
            total += lag
        groups.append({"id": g.id, "name": g.name, "members": len(members), "lag": total, "partitions": rows})
    pravega = broker.addressing.pravega_names_for(stream_name, topic.name)
    return json_response({
        "stream": {"id": topic.stream_id, "name": stream_name},
        "topic": {"id": topic.id, "name": topic.name, "partitions_count": topic.partitions_count},
        "nats_subject": broker.addressing.live_subject_for(stream_name, topic.name),
        "pravega": None if pravega is None else "/".join(pravega),
        "partitions": [{"id": pid, "next_offset": p.next_offset, "messages": p.record_count,
                        "size_bytes": p.size_bytes, "segments": p.segment_count} for pid, p in enumerate(parts)],
        "groups": groups,
    })


CT = "/console/api/streams/{stream_id}/topics/{topic_id}"
ROUTES = [
    Route("GET", "/console/{asset}", asset, public=True),
    Route("GET", "/console/api/metrics", metrics_snapshot),
    Route("GET", "/console/api/me", whoami),
    Route("GET", CT, topic_details, entity="topic"),
]

__all__ = ["Origin", "ROUTES", "infer_origin", "listener_snapshot"]
