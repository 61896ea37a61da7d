"""System routes: /, /ping, /healthz, /metrics, /stats, /clients, /snapshot (iggy.md 10.2, 10.4).

``/stats`` reports what the process and host really use (core/procstats.py:
CPU in percent over a recent window as Iggy's sysinfo-based handler does,
resident memory, storage I/O, threads, the data directory's disk), the log's
totals, and ``clients_count`` as the Iggy clients connected (TCP, QUIC and
WebSocket sessions, the number the binary GetStats gives; HTTP requests are not
clients in Iggy).

``/clients`` lists the Iggy binary sessions (TCP and QUIC) of this broker, from
the registry the Iggy adapter keeps (``adapters.iggy.session.sessions_of``;
HTTP requests are not clients, as in Iggy).

``/metrics`` renders the broker's registry (core/metrics.py) plus the per-
partition figures collected from the log at render time: next offset, stored
bytes and record count per (stream, topic, partition). ``/healthz`` answers
200 while serving and 503 once the gateway drains, so a load balancer stops
sending new work during shutdown.
"""

from __future__ import annotations

import os
import platform
import socket
import time

from adapters.iggy import snapshot
from adapters.iggy.session import sessions_of
from core.metrics import CONTENT_TYPE, render_families
from core.procstats import START_US, process_stats
from core.permissions import Action

from . import models
from .errors import JSON_TYPE, HttpError, Response, bad_field, not_found_entity
from .handler import App, Ctx, Offload, Route, json_response, text_response
from .openapi import build as build_openapi
from .webpage import CSP, PAGE



def root(app: App, ctx: Ctx):
    """The browser page (webpage.py); ``curl /`` and Iggy's "Iggy API" probe get text."""
    accept = ctx.request.header(b"accept") or b""
    if b"text/html" not in accept:
        return text_response("Ferry HTTP API (Iggy-compatible); see /openapi.json\n")
    return Response(200, ((b"content-type", b"text/html; charset=utf-8"), (b"content-security-policy", CSP),
                          (b"x-content-type-options", b"nosniff")), PAGE.encode())


def openapi_json(app: App, ctx: Ctx):
    if app.openapi is None:
        app.openapi = models.dumps(build_openapi(app.routes))
    return Response(200, (JSON_TYPE,), app.openapi)


def ping(app: App, ctx: Ctx):
    return text_response("pong")


def healthz(app: App, ctx: Ctx):
    if app.broker.draining or app.broker.closed:
        return json_response({"status": "draining"}, 503)
    return json_response({"status": "ok"})


def partition_families(broker):
    """Collector: per-partition gauges read from the log at render time."""
    offsets, sizes, counts = [], [], []
    for stream in broker.list_streams():
        for topic in broker.list_topics(stream.id):
            for pid in range(topic.partitions_count):
                part = broker.partition(stream.id, topic.id, pid)
                labels = {"stream": stream.name, "topic": topic.name, "partition": str(pid)}
                offsets.append((labels, part.next_offset))
                sizes.append((labels, part.size_bytes))
                counts.append((labels, part.record_count))
    return [
        ("ferry_partition_next_offset", "gauge", "Offset the next appended message gets.", offsets),
        ("ferry_partition_size_bytes", "gauge", "Bytes stored in the partition.", sizes),
        ("ferry_partition_messages", "gauge", "Messages stored in the partition (after retention).", counts),
    ]


def metrics(app: App, ctx: Ctx):
    text = app.metrics.render()
    text += render_families(partition_families(app.broker))
    return text_response(text, CONTENT_TYPE.encode())


def stats(app: App, ctx: Ctx):
    totals = app.broker.totals()
    used = process_stats().read(app.broker.data_dir)
    now = int(time.time() * 1_000_000)
    uname = platform.uname()
    size = models.size_text
    return json_response({
        "process_id": os.getpid(),
        "cpu_usage": used.cpu_usage,
        "total_cpu_usage": used.total_cpu_usage,
        "memory_usage": size(used.memory_usage),
        "total_memory": size(used.total_memory),
        "available_memory": size(used.available_memory),
        "run_time": now - START_US,
        "start_time": START_US,
        "read_bytes": size(used.read_bytes),
        "written_bytes": size(used.written_bytes),
        "messages_size_bytes": size(totals.stored_bytes),
        "streams_count": totals.streams,
        "topics_count": totals.topics,
        "partitions_count": totals.partitions,
        "segments_count": totals.segments,
        "messages_count": totals.messages,
        "clients_count": len(sessions_of(app.broker)),
        "consumer_groups_count": totals.consumer_groups,
        "hostname": socket.gethostname(),
        "os_name": uname.system,
        "os_version": uname.release,
        "kernel_version": uname.version,
        "iggy_server_version": "ferry",
        "iggy_server_semver": None,
        "cache_metrics": {},
        # the current server's Stats has three more fields, required by its clients' decoder
        "threads_count": used.threads_count,
        "free_disk_space": size(used.free_disk_space),
        "total_disk_space": size(used.total_disk_space),
    })


def get_clients(app: App, ctx: Ctx):
    ctx.require(Action.READ_SERVERS)
    return json_response([models.client_json(s, False) for _cid, s in sorted(sessions_of(app.broker).items())])


def get_client(app: App, ctx: Ctx):
    ctx.require(Action.READ_SERVERS)
    text = ctx.params["client_id"]
    if not (text.isascii() and text.isdigit() and len(text) <= 10 and int(text) <= models.U32_MAX):
        raise bad_field("client_id", f"must be an integer within 0..{models.U32_MAX}")
    session = sessions_of(app.broker).get(int(text))
    if session is None:
        raise not_found_entity()
    return json_response(models.client_json(session, True))


def snapshot_file(app: App, ctx: Ctx):
    """Iggy's ``POST /snapshot``: a ZIP archive of diagnostics (adapters/iggy/snapshot.py),
    built in a worker thread; permission read_servers (Iggy's get_snapshot rule)."""
    ctx.require(Action.READ_SERVERS)
    body = ctx.fields()
    try:
        request = snapshot.request_from_names(body.obj.get("compression"), body.obj.get("snapshot_types"))
    except snapshot.SnapshotRefused as err:
        raise _refused(err) from None
    inputs = snapshot.inputs_from_broker(app.broker, len(sessions_of(app.broker)))

    def then(result):
        if isinstance(result, snapshot.SnapshotRefused):
            raise _refused(result)
        if isinstance(result, BaseException):
            raise result
        # Iggy's download name, local time (apache/iggy http get_snapshot)
        name = time.strftime("iggy_snapshot_%Y%m%d_%H%M%S.zip", time.localtime(inputs.now))
        return Response(200, ((b"content-type", b"application/zip"),
                              (b"content-disposition", f'attachment; filename="{name}"'.encode())), result)

    return Offload(lambda: snapshot.build_snapshot(request, inputs), then)


def _refused(err: snapshot.SnapshotRefused) -> HttpError:
    reason = f"{err.field}: {err.reason}" if err.field else err.reason
    return HttpError.iggy(int(err.code), reason, err.field)


ROUTES = [
    Route("GET", "/", root, public=True, ok=(200, "text")),
    Route("GET", "/openapi.json", openapi_json, public=True),
    Route("GET", "/ping", ping, public=True, command="system.ping", ok=(200, "text")),
    Route("GET", "/healthz", healthz, public=True, ok=(200, "Health")),
    Route("GET", "/metrics", metrics, public=True, ok=(200, "text")),
    Route("GET", "/stats", stats, public=True, command="system.stats"),
    Route("GET", "/clients", get_clients, command="client.list", ok=(200, "[ClientInfo]")),
    Route("GET", "/clients/{client_id}", get_client, command="client.get", ok=(200, "ClientInfoDetails")),
    Route("POST", "/snapshot", snapshot_file, command="system.snapshot", body="GetSnapshot", ok=(200, "zip")),
]

__all__ = ["ROUTES", "partition_families"]
