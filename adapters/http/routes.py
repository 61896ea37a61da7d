"""The route table of the HTTP API: every route module's ROUTES, in order.

Order matters only where a literal segment and a parameter compete for the
same method and shape (``DELETE /users/logout`` before ``DELETE
/users/{user_id}``): the first match wins.
"""

from __future__ import annotations

from . import (routes_console, routes_console_browse, routes_console_conns, routes_console_readers, routes_messages,
               routes_options, routes_streams, routes_system, routes_users)

ROUTES = [*routes_system.ROUTES, *routes_users.ROUTES, *routes_streams.ROUTES, *routes_messages.ROUTES,
          *routes_options.ROUTES, *routes_console.ROUTES, *routes_console_browse.ROUTES,
          *routes_console_conns.ROUTES, *routes_console_readers.ROUTES]

__all__ = ["ROUTES"]
