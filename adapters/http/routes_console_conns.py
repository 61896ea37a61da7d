"""The web console's Connections and Errors endpoints (adapters/http/console/connections.js, errors.js).

* ``GET /console/api/connections``: every open connection of every listener, from the
  broker's connection directory (core/connections.py): listener, remote address, connected
  since, client name and version, the Ferry user, messages and bytes in and out, errors,
  subscriptions. ``?listener=`` keeps one listener's.
* ``DELETE /console/api/connections/{id}``: ask the connection's driver to close it
  (audited as ``connection.close``). A connection cannot close itself: the answer would
  be cancelled with it.
* ``GET /console/api/errors``: the last errors of each listener (at most
  ``MAX_ERRORS_PER_LISTENER`` each), newest first; ``?listener=`` keeps one listener's.

Reading needs ``read_servers`` (the permission of Iggy's GetClients and GetStats, which
show the same kind of thing: who is connected, from where); closing needs
``manage_servers`` (core/permissions.py).
"""

from __future__ import annotations

import time

from core.access import audit
from core.connections import MAX_ERRORS_PER_LISTENER, current_connection, directory_for
from core.permissions import Action

from .errors import HttpError, not_found_entity
from .handler import App, Ctx, Route, empty, json_response

# Rows in one answer: one screen of the console. The directory itself holds every open
# connection (bounded by each listener's max_connections); ``total`` says how many.
MAX_LISTED = 1000
# A connection id is the directory's counter: far below this many digits.
MAX_ID_DIGITS = 18


def list_connections(app: App, ctx: Ctx):
    """``{"time", "total", "connections": [...]}``, oldest connection first."""
    ctx.require(Action.READ_SERVERS)
    listener = ctx.query.get("listener") or None
    conns = [c for c in directory_for(app.broker).connections() if listener is None or c.listener == listener]
    return json_response({"time": time.time(), "total": len(conns),
                          "connections": [c.snapshot() for c in conns[:MAX_LISTED]]})


def close_connection(app: App, ctx: Ctx):
    """204 once the connection's driver was asked to close it; 404 when it is not open."""
    ctx.require(Action.MANAGE_SERVERS)
    text = ctx.params["conn_id"]
    if not (text.isascii() and text.isdigit() and len(text) <= MAX_ID_DIGITS):
        raise HttpError.http(400, "connection id must be a number", "conn_id")
    directory = directory_for(app.broker)
    conn = directory.get(int(text))
    if conn is None or conn.close is None:
        raise not_found_entity()
    if conn is current_connection():
        raise HttpError.http(400, "this request came on that connection: close it from another one", "conn_id")
    directory.close(conn.id)
    audit("connection.close", connection=conn.id, listener=conn.listener, remote=conn.remote,
          client_user=conn.user or "-")
    return empty()


def list_errors(app: App, ctx: Ctx):
    """``{"time", "limit", "errors": [{time, listener, remote, message}]}``, newest first."""
    ctx.require(Action.READ_SERVERS)
    listener = ctx.query.get("listener") or None
    errors = directory_for(app.broker).errors.entries(listener)
    return json_response({"time": time.time(), "limit": MAX_ERRORS_PER_LISTENER,
                          "errors": [e.to_json() for e in errors]})


# ``?listener=`` is not declared as a Route query: /openapi.json documents the Iggy API's
# own query names (schemas.QUERY), and these console routes are not part of it.
ROUTES = [
    Route("GET", "/console/api/connections", list_connections),
    Route("DELETE", "/console/api/connections/{conn_id}", close_connection, ok=(204, None)),
    Route("GET", "/console/api/errors", list_errors),
]

__all__ = ["MAX_LISTED", "ROUTES"]
