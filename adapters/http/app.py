"""The HTTP application: routing, authentication and error mapping, no I/O.

Theory of operation
-------------------
``HttpApp.handle(request)`` turns one whole :class:`~.events.Request` into an
*outcome*, synchronously and without trio:

* a :class:`~.errors.Response`, ready to send;
* :class:`~.handler.Park`: the answer depends on a future broker event (an append for a
  long poll, the fsync that makes a send durable). The driver calls
  ``subscribe(wake)``, waits for ``wake()`` or ``timeout_s``, cancels the
  subscription and calls ``resume(timed_out)`` for the next outcome;
* :class:`~.handler.Offload`: CPU-heavy work (argon2 password hashing, tens of ms) the
  driver runs in a worker thread (``work()``), then ``then(result)`` on the
  trio thread. core/auth.py documents that those calls are thread-safe.

Routes are a table (:class:`~.handler.Route`): method, path pattern, handler,
whether the route is public and which entity its names belong to (for Iggy's
error numbers). The route modules import handler.py, never this module;
routes.py gathers their tables for the default one. An unknown path is 404,
a known path with another method 405 with ``Allow``. Every route except the
public ones needs ``Authorization: Bearer`` (iggy.md section 10.2); handlers
check permissions with ``ctx.require``.

Nothing escapes ``handle``/``guard`` as an exception: HttpErrors and core
errors become their wire form, anything else is logged with its traceback
and answered with a generic 500 (STYLE.md section 5).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable
from urllib.parse import parse_qsl, unquote

from core.access import Actor, current_actor, use_actor
from core.connections import current_connection, per_connection
from core.errors import FerryError
from core.metadata import UserInfo
from core.metrics import MetricsRegistry, listener_metrics

from .errors import HttpError, Response, from_core, internal_error, unauthenticated
from .events import Request
from .handler import Ctx, Outcome, Route
from .limits import HttpLimits
from .tokens import Claims, TokenError, TokenService

log = logging.getLogger("ferry.http")

# No route takes more than seven query parameters; a hundred bounds the work
# parse_qsl does on a hostile query string.
MAX_QUERY_FIELDS = 100


class HttpApp:
    """Routes requests to handlers over one broker; see the module docstring."""

    def __init__(self, broker, tokens: TokenService, metrics: MetricsRegistry, *,
                 limits: HttpLimits | None = None, listener: str = "http",
                 routes: list[Route] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.broker = broker
        self.clock = clock
        self.tokens = tokens
        self.metrics = metrics
        self.limits = limits or HttpLimits()
        self.listener = listener
        # Also counted on the connection the driver binds (the console's, core/connections.py).
        self.counters = per_connection(listener_metrics(metrics))
        self.requests = metrics.counter("ferry_http_requests_total", "HTTP requests answered, by status.",
                                        ("listener", "status"))
        self.latency = metrics.histogram("ferry_http_request_duration_seconds",
                                         "From a request's last byte to its answer (long polls included).",
                                         ("listener",))
        if routes is None:
            from .routes import ROUTES

            routes = ROUTES
        self.routes = routes
        self.openapi: bytes | None = None  # built on first GET /openapi.json

    # -- entry points -------------------------------------------------------------
    def handle(self, request: Request) -> Outcome:
        """The outcome for ``request``; never raises."""
        return self.guard(self._dispatch, request)

    def guard(self, fn: Callable[..., Outcome], *args: Any, entity: str | None = None) -> Outcome:
        """``fn(*args)``, with every exception turned into its error response."""
        try:
            return fn(*args)
        except HttpError as exc:
            return exc.response()
        except FerryError as exc:
            return from_core(exc, entity).response()
        except Exception:  # noqa: BLE001 - a bug of ours: log it, answer a generic 500
            log.exception("HTTP handler failed")
            return internal_error().response()

    def count_response(self, response: Response) -> None:
        self.requests.inc(self.listener, str(response.status))

    # -- dispatch -------------------------------------------------------------------
    def _dispatch(self, request: Request) -> Outcome:
        path, _, query_text = request.target.partition("?")
        if not path.startswith("/"):
            raise HttpError.http(400, "request target must be an absolute path", "path")
        try:
            parts = tuple(unquote(p, errors="strict") for p in path.strip("/").split("/")) if path != "/" else ()
        except UnicodeDecodeError:
            raise HttpError.http(400, "path is not valid percent-encoded UTF-8", "path") from None
        matching, found = [], None
        for route in self.routes:
            params = route.match(parts)
            if params is None:
                continue
            matching.append(route)
            if route.method == request.method or (request.method == "HEAD" and route.method == "GET"):
                found = (route, params)
                break
        if found is None:
            if matching:
                # Allow lists the methods of the most specific pattern that matched
                # (RFC 9110 15.5.6), not of every pattern the path happens to fit.
                best = max(matching, key=lambda r: sum(not s.startswith("{") for s in r.segments)).pattern
                allow = ", ".join(sorted({r.method for r in self.routes if r.pattern == best}))
                raise HttpError.http(405, f"method {request.method} not allowed here", "method",
                                     headers=((b"allow", allow.encode()),))
            raise HttpError.http(404, f"no route for {path}", "path")
        route, params = found
        try:
            query = dict(parse_qsl(query_text, keep_blank_values=True, errors="strict",
                                   max_num_fields=MAX_QUERY_FIELDS))
        except (UnicodeDecodeError, ValueError):
            raise HttpError.http(400, "malformed query string", "query") from None
        ctx = Ctx(self, request, params, query)
        base = current_actor()  # the connection's; a request starts as nobody from there
        use_actor(Actor(base.protocol, base.addr))
        if not route.public:
            self._authenticate(ctx)
        return self.guard(route.handler, self, ctx, entity=route.entity)

    def _authenticate(self, ctx: Ctx) -> None:
        value = ctx.request.header(b"authorization")
        if value is None or not value[:7].lower() == b"bearer ":
            raise unauthenticated()
        try:
            claims = self.tokens.verify(value[7:].strip().decode("ascii"))
            user = self.user_of(claims)
        except (TokenError, UnicodeDecodeError):
            raise unauthenticated() from None
        ctx.user, ctx.claims = user, claims
        # This request's own actor (an HTTP/2 connection carries many users' requests).
        use_actor(Actor(self.listener, current_actor().addr, user.username, user.id))
        conn = current_connection()   # the console's entry of this connection (core/connections.py)
        if conn is not None:
            conn.user = user.username

    def user_of(self, claims: Claims) -> UserInfo:
        """The user a valid token acts for, as stored now (so permission changes
        apply at once). TokenError if the user was deleted (or the id now holds a
        later user: the ``ferry_uc`` claim); core/credentials.py. As on Iggy, a
        deactivation or a deleted personal access token ends no token."""
        user = self.broker.meta.users.live_user(claims.user_id)
        if user is None or (claims.user_created_at is not None and claims.user_created_at != user.created_at):
            raise TokenError("user deleted")
        return user


__all__ = ["HttpApp"]
