"""The console's readers and JetStream endpoints (issue 28): who reads what, and how far behind.

* ``GET /console/api/consumers``: every kind of reader with its lag per partition:
  Iggy consumer groups and plain consumers with stored offsets (core metadata),
  JetStream consumers (``adapters.nats.jetstream.api.jetstream_for``, the NATS listener's
  per-broker registry), Pravega reader groups (their state is the 0.3.8 client's own
  key-value table in ``broker.tables``, decoded by ``adapters/pravega/readergroups.py``).
* ``GET /console/api/jetstream``: JetStream streams with config, state and consumers;
  key-value buckets with their keys (current value, revision, history kept); object stores
  with their objects.

Both are read-only and answer from what the broker and the NATS registry hold in memory or
in metadata; nothing here opens a connection. The two adapter modules they read are pure
(no trio, no I/O), as the Iggy ones ``adapters/http`` already shares (docs/internals.md
"Adapter dependencies"); neither adapter learns about HTTP.

Permissions: a user sees a reader only on a topic it may ``read_topic`` (what Iggy's
consumer-group commands and JetStream's CONSUMER.INFO ask, adapters/nats/ferryauth.py),
a JetStream stream only if it may ``read_topic`` the stream's topic in Ferry stream
``jetstream``, and KV values only with ``poll_messages`` there too (they are message
payloads: keys and revisions are shown without it). Listings are cut at named limits and
say so (``truncated``), so one answer stays a page a browser can draw.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from adapters.nats.jetstream.api import jetstream_for
from adapters.nats.jetstream.streams import JS_STREAM
from adapters.pravega.readergroups import group_tables, place, read_group
from core.errors import NotFound
from core.message import Headers
from core.permissions import Action

from .handler import App, Ctx, Route, json_response

# Rows of one kind in one answer (Iggy groups, Iggy consumers, JetStream consumers, Pravega
# groups; JetStream streams): more is a table nobody reads in a browser, and each row costs
# a metadata query or a pending count.
MAX_ROWS = 500
# Keys listed per KV bucket and objects per object store, for the same reason.
MAX_KEYS = 200
# Bytes of a KV value shown; the size is given beside it.
MAX_VALUE_PREVIEW = 256
# An object store's metadata message is a small JSON document (nats.go ObjectInfo); a larger
# one is not parsed (listed with its size only).
MAX_META_BYTES = 64 * 1024
# Undecodable entries reported per reader group: the first few say what is wrong.
MAX_PROBLEMS = 10
KV_PREFIX, OBJ_PREFIX = "KV_", "OBJ_"  # nats.go's stream names for buckets and object stores
KV_OPERATION = "KV-Operation"  # nats.go marks deletes and purges with it (DEL, PURGE)
# The parts of a stream config the view shows (the rest is in STREAM.INFO).
CONFIG_FIELDS = ("subjects", "retention", "storage", "discard", "max_msgs", "max_bytes", "max_age",
                 "max_msgs_per_subject", "max_msg_size", "num_replicas", "duplicate_window", "sealed",
                 "allow_rollup_hdrs", "description")


def _can(app: App, ctx: Ctx, action: Action, stream_id: int, topic_id: int | None = None) -> bool:
    # status ignored, as ctx.require does: Iggy's HTTP API never checks it after the login
    return app.broker.meta.users.can(ctx.user, action, stream_id, topic_id, ignore_status=True)


def partition_lag(part, stored: int | None) -> int:
    """Messages after an Iggy stored offset (the last consumed one; None = nothing consumed,
    so every kept message is unread)."""
    return part.record_count if stored is None else max(part.next_offset - 1 - stored, 0)


# -- Iggy ----------------------------------------------------------------------------------
def _iggy(app: App, ctx: Ctx) -> dict:
    broker = app.broker
    groups: list[dict] = []
    consumers: list[dict] = []
    truncated = False
    for s in broker.list_streams():
        for t in broker.list_topics(s.id):
            if not _can(app, ctx, Action.READ_TOPIC, s.id, t.id):
                continue
            found = broker.consumers.list_groups(s.id, t.id)
            offsets = broker.meta.list_offsets(s.id, t.id)
            if not found and not offsets:
                continue
            parts = [broker.partition(s.id, t.id, pid) for pid in range(t.partitions_count)]
            stored: dict[tuple[str, int], dict[int, int]] = {}
            for o in offsets:
                stored.setdefault((o.kind, o.consumer_id), {})[o.partition_id] = o.offset
            where = {"stream": s.name, "topic": t.name, "stream_id": s.id, "topic_id": t.id}
            for g in found:
                if len(groups) >= MAX_ROWS:
                    truncated = True
                    break
                mine = stored.get(("group", g.id), {})
                rows = [_iggy_partition(pid, part, mine.get(pid)) for pid, part in enumerate(parts)]
                members = broker.consumers.group_members(s.id, t.id, g.id)
                groups.append({**where, "id": g.id, "name": g.name, "members": len(members),
                               "lag": sum(r["lag"] for r in rows), "partitions": rows})
            for (kind, cid), mine in sorted(stored.items()):
                if kind != "consumer":
                    continue
                if len(consumers) >= MAX_ROWS:
                    truncated = True
                    break
                # a plain consumer: only the partitions it stored an offset for are its own
                rows = [_iggy_partition(pid, parts[pid], off) for pid, off in sorted(mine.items())
                        if pid < len(parts)]
                consumers.append({**where, "id": cid, "lag": sum(r["lag"] for r in rows), "partitions": rows})
    return {"groups": groups, "consumers": consumers, "truncated": truncated}


def _iggy_partition(pid: int, part, stored: int | None) -> dict:
    return {"partition": pid, "stored_offset": stored, "next_offset": part.next_offset,
            "lag": partition_lag(part, stored)}


# -- JetStream -----------------------------------------------------------------------------
def _js_stream_id(app: App) -> int | None:
    try:
        return app.broker.get_stream(JS_STREAM).id
    except NotFound:
        return None


def _visible_streams(app: App, ctx: Ctx, js) -> tuple[list, bool]:
    """(JsStreams the user may read, sorted by name; whether the list was cut)."""
    sid = _js_stream_id(app)
    if js is None or sid is None:
        return [], False
    out = [st for name, st in sorted(js.streams.streams.items())
           if _can(app, ctx, Action.READ_TOPIC, sid, st.topic_id)]
    return out[:MAX_ROWS], len(out) > MAX_ROWS


def _consumer_row(js, con) -> dict:
    info = js.consumers.info(con)  # what CONSUMER.INFO answers (num_pending counted up to now)
    cfg = con.config
    return {"stream": con.stream.name, "name": con.name, "durable": con.durable,
            "mode": "push" if cfg.get("deliver_subject") else "pull",
            "filter": con.filters, "ack_policy": cfg.get("ack_policy"), "deliver_policy": cfg.get("deliver_policy"),
            "delivered": {"stream_seq": info["delivered"]["stream_seq"],
                          "consumer_seq": info["delivered"]["consumer_seq"]},
            "ack_floor": {"stream_seq": info["ack_floor"]["stream_seq"],
                          "consumer_seq": info["ack_floor"]["consumer_seq"]},
            "ack_pending": info["num_ack_pending"], "num_pending": info["num_pending"],
            "redelivered": info["num_redelivered"], "waiting": info["num_waiting"],
            "paused": bool(info.get("paused"))}


def _js_consumers(js, streams: list, budget: int) -> tuple[list[dict], bool]:
    rows: list[dict] = []
    for st in streams:
        for name in sorted(js.consumers.by_stream.get(st.name, {})):
            if len(rows) >= budget:
                return rows, True
            rows.append(_consumer_row(js, js.consumers.by_stream[st.name][name]))
    return rows, False


def _kind(st) -> tuple[str, str | None]:
    """("kv" | "object" | "stream", bucket) by nats.go's naming of the bucket's stream."""
    subjects = st.config.get("subjects") or []
    if st.name.startswith(KV_PREFIX):
        bucket = st.name[len(KV_PREFIX):]
        if subjects == [f"$KV.{bucket}.>"]:
            return "kv", bucket
    if st.name.startswith(OBJ_PREFIX):
        bucket = st.name[len(OBJ_PREFIX):]
        if sorted(subjects) == sorted([f"$O.{bucket}.C.>", f"$O.{bucket}.M.>"]):
            return "object", bucket
    return "stream", None


def _preview(payload: bytes) -> tuple[str, str]:
    cut = payload[:MAX_VALUE_PREVIEW]
    try:
        return cut.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(cut).decode(), "base64"


def _header(view, name: str) -> str | None:
    if not len(view.headers):
        return None
    value = Headers.decode(view.headers).get(name)
    return value.to_text() if value is not None else None


def _kv_bucket(js, st, bucket: str, values: bool) -> dict:
    prefix = f"$KV.{bucket}."
    out: dict[str, Any] = {"bucket": bucket, "stream": st.name, "history": st.config.get("max_msgs_per_subject"),
                           "values_shown": values, "keys": [], "truncated": False}
    idx = js.streams.index(st)  # a bucket keeps per-subject history, so it always has one
    if idx is None:
        out["keys_count"] = None
        return out
    subjects = sorted(s for s, seqs in idx.subjects.items() if seqs and s.startswith(prefix))
    out["keys_count"] = len(subjects)
    out["truncated"] = len(subjects) > MAX_KEYS
    for subject in subjects[:MAX_KEYS]:
        seqs = idx.subjects[subject]
        view = js.streams.record(st, seqs[-1])
        row: dict[str, Any] = {"key": subject[len(prefix):], "revision": seqs[-1], "history": len(seqs),
                               "operation": "PUT"}
        if view is not None:
            row["operation"] = _header(view, KV_OPERATION) or "PUT"
            row["value_size"] = len(view.payload)
            if values and row["operation"] == "PUT":
                row["value"], row["value_encoding"] = _preview(bytes(view.payload))
        out["keys"].append(row)
    return out


def _object_store(js, st, bucket: str) -> dict:
    prefix = f"$O.{bucket}.M."
    out: dict[str, Any] = {"bucket": bucket, "stream": st.name, "objects": [], "truncated": False}
    idx = js.streams.index(st)  # rollups on the metadata subjects: always indexed
    if idx is None:
        out["objects_count"] = None
        return out
    metas = sorted(s for s, seqs in idx.subjects.items() if seqs and s.startswith(prefix))
    live = []
    for subject in metas:
        view = js.streams.record(st, idx.subjects[subject][-1])
        if view is None:
            continue
        doc = None
        if len(view.payload) <= MAX_META_BYTES:
            try:
                doc = json.loads(bytes(view.payload))
            except (ValueError, UnicodeDecodeError):
                doc = None
        if not isinstance(doc, dict):
            live.append({"name": None, "meta_size": len(view.payload), "problem": "metadata is not JSON"})
            continue
        if doc.get("deleted"):
            continue  # nats.go keeps a deleted object's metadata, marked, until the bucket is purged
        live.append({"name": doc.get("name"), "size": doc.get("size"), "chunks": doc.get("chunks"),
                     "digest": doc.get("digest"), "mtime": doc.get("mtime"),
                     "description": doc.get("description")})
    out["objects_count"] = len(live)
    out["truncated"] = len(live) > MAX_KEYS
    out["objects"] = sorted(live, key=lambda o: o["name"] or "")[:MAX_KEYS]
    return out


# -- Pravega -------------------------------------------------------------------------------
def _pravega(app: App, ctx: Ctx) -> dict:
    broker = app.broker
    groups: list[dict] = []
    tables = group_tables(broker.tables)
    for table, scope, name in tables[:MAX_ROWS]:
        group = read_group(broker.tables, table, scope, name)
        place(broker, group)
        segments = [s for s in group.segments if s.topic_id is not None
                    and _can(app, ctx, Action.READ_TOPIC, s.stream_id, s.topic_id)]
        if not segments:
            continue  # nothing of it the user may see (or its streams are gone)
        groups.append({
            "scope": scope, "name": name, "readers": group.readers,
            # the Pravega names the group reads (scope/stream of its segments), not Ferry's
            "streams": sorted({s.segment.rsplit("/", 1)[0] for s in segments}),
            "lag_events": sum(s.lag_events for s in segments), "lag_bytes": sum(s.lag_bytes for s in segments),
            "segments": [{"segment": s.segment, "reader": s.reader, "stream": s.stream, "topic": s.topic,
                          "partition": s.partition, "position": s.read, "end": s.end,
                          "lag_bytes": s.lag_bytes, "lag_events": s.lag_events} for s in segments],
            "distance_to_tail": group.distance, "problems": group.problems[:MAX_PROBLEMS],
            "truncated": group.truncated})
    return {"groups": groups, "truncated": len(tables) > MAX_ROWS}


# -- handlers ------------------------------------------------------------------------------
def consumers_overview(app: App, ctx: Ctx):
    """Every reader the user may see, with its lag (module docstring)."""
    js = jetstream_for(app.broker)
    streams, cut = _visible_streams(app, ctx, js)
    rows, more = _js_consumers(js, streams, MAX_ROWS) if js is not None else ([], False)
    return json_response({"iggy": _iggy(app, ctx),
                          "jetstream": {"enabled": js is not None, "consumers": rows, "truncated": cut or more},
                          "pravega": _pravega(app, ctx),
                          "limits": {"rows": MAX_ROWS}})


def jetstream_overview(app: App, ctx: Ctx):
    """Streams, their consumers, KV buckets and object stores the user may see."""
    js = jetstream_for(app.broker)
    if js is None:
        return json_response({"enabled": False, "streams": [], "kv": [], "objects": [], "truncated": False})
    streams, cut = _visible_streams(app, ctx, js)
    sid = _js_stream_id(app)
    out: dict[str, Any] = {"enabled": True, "streams": [], "kv": [], "objects": [], "truncated": cut,
                           "limits": {"streams": MAX_ROWS, "keys": MAX_KEYS, "value_preview": MAX_VALUE_PREVIEW}}
    budget = MAX_ROWS
    for st in streams:
        kind, bucket = _kind(st)
        rows, more = _js_consumers(js, [st], budget)
        budget -= len(rows)
        out["streams"].append({"name": st.name, "kind": kind, "created": st.created,
                               "config": {k: st.config.get(k) for k in CONFIG_FIELDS},
                               "state": js.streams.state(st), "consumers": rows, "consumers_truncated": more})
        if kind == "kv":
            values = _can(app, ctx, Action.POLL_MESSAGES, sid, st.topic_id)
            out["kv"].append(_kv_bucket(js, st, bucket, values))
        elif kind == "object":
            out["objects"].append(_object_store(js, st, bucket))
    return json_response(out)


ROUTES = [
    Route("GET", "/console/api/consumers", consumers_overview),
    Route("GET", "/console/api/jetstream", jetstream_overview),
]

__all__ = ["MAX_KEYS", "MAX_ROWS", "MAX_VALUE_PREVIEW", "ROUTES", "partition_lag"]
