"""``GET /openapi.json``: the OpenAPI 3.1 document, built from the route table.

Each :class:`~.handler.Route` carries its Iggy command name, body schema, success
status and query parameters; :mod:`.schemas` holds the component schemas. The
document is built once per app (routes do not change at run time).
"""

from __future__ import annotations

from typing import Iterable

from .schemas import SCHEMAS, ref

# Query parameters by name (the current Iggy server's, plus Ferry's wait_ms).
QUERY = {
    "consumer_id": ({"type": "string"}, "consumer id (digits, or a name hashed with XXH32); default 1"),
    "id": ({"type": "string"}, "the seed-era name of consumer_id, still read"),
    "partition_id": ({"type": "integer", "minimum": 0}, "partition (numbered from 0); default 0"),
    "kind": ({"enum": ["offset", "timestamp", "first", "last", "next", "o", "t", "f", "l", "n"]},
             "polling strategy; default offset"),
    "value": ({"type": "integer", "minimum": 0}, "offset, or timestamp in µs"),
    "count": ({"type": "integer", "minimum": 1, "maximum": 10_000}, "messages to return; default 10"),
    "auto_commit": ({"type": "boolean"}, "store the last polled offset; default false"),
    "wait_ms": ({"type": "integer", "minimum": 0}, "long poll: wait up to this long for a message"),
    "partitions_count": ({"type": "integer", "minimum": 1}, "how many partitions to delete"),
    "segments_count": ({"type": "integer", "minimum": 0, "maximum": 2**32 - 1},
                       "how many of the oldest sealed segments to delete"),
    # the console's message browser (adapters/http/routes_console_browse.py)
    "order": ({"enum": ["newest", "oldest"]}, "browse: rows newest or oldest first; default newest"),
    "dir": ({"enum": ["older", "newer"]}, "browse: page towards older or newer messages; default from order"),
    "cursor": ({"type": "string"}, "browse: partition:offset boundaries from a previous page's older/newer"),
    "offset": ({"type": "integer", "minimum": 0}, "browse: jump to this offset"),
    "time": ({"type": "integer", "minimum": 0}, "browse: jump to this time, µs since the epoch"),
    "header": ({"type": "string"}, "browse: only messages with this header key"),
    "header_value": ({"type": "string"}, "browse: ... whose value (text form) is this"),
    "key": ({"type": "string"}, "browse: only messages with this key (partition key, NATS subject or id)"),
    "text": ({"type": "string"}, "browse: only messages whose payload contains this text"),
}
REQUIRED_QUERY = frozenset({"partitions_count", "segments_count"})
ERROR_STATUSES = {"400": "bad request", "401": "missing or invalid bearer token (empty body), or bad login token",
                  "403": "not permitted", "404": "not found", "413": "request body too large"}


def _response(status: int, schema: str | None) -> dict:
    if schema is None:
        return {"description": "empty body"} if status in (201, 204) else {"description": "OK"}
    if schema.startswith("["):
        body = {"type": "array", "items": ref(schema[1:-1])}
    elif schema == "zip":
        return {"description": "OK, a ZIP archive (attachment)",
                "content": {"application/zip": {"schema": {"type": "string", "contentMediaType": "application/zip"}}}}
    elif schema in ("text", "events"):
        media = "text/plain" if schema == "text" else "text/event-stream"
        return {"description": "OK", "content": {media: {"schema": {"type": "string"}}}}
    else:
        body = ref(schema)
    return {"description": "OK", "content": {"application/json": {"schema": body}}}


def _operation(route) -> dict:
    params = [{"name": seg[1:-1], "in": "path", "required": True,
               "schema": {"type": "string", "minLength": 1, "maxLength": 255},
               "description": "digits = id (numbered from 0), anything else = name"}
              for seg in route.segments if seg.startswith("{")]
    for name in route.query:
        schema, about = QUERY[name]
        params.append({"name": name, "in": "query", "required": name in REQUIRED_QUERY,
                       "schema": schema, "description": about})
    status, schema = route.ok
    responses = {str(status): _response(status, schema)}
    for code, about in ERROR_STATUSES.items():
        if code == "413" and not route.body:
            continue
        entry = {"description": about}
        if code != "401":
            entry["content"] = {"application/json": {"schema": ref("Error")}}
        responses[code] = entry
    op = {"operationId": f"{route.method.lower()}_{route.handler.__name__}", "parameters": params,
          "responses": responses}
    if route.command:
        op["x-iggy-command"] = route.command
    if route.body:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": ref(route.body)}}}
    if not route.public:
        op["security"] = [{"bearer": []}]
    return op


def build(routes: Iterable, version: str = "0.1.0") -> dict:
    """The OpenAPI document for ``routes``."""
    paths: dict[str, dict] = {}
    for route in routes:
        paths.setdefault(route.pattern, {})[route.method.lower()] = _operation(route)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Ferry HTTP API (Iggy-compatible)", "version": version,
                 "description": "The current Iggy server's HTTP API (ids from 0) served by Ferry; see docs/http.md."},
        "paths": paths,
        "components": {"schemas": SCHEMAS,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}}},
    }


__all__ = ["build"]
