"""The HTTP application: routing, authentication and error mapping, no I/O.

Theory of operation
-------------------
``HttpApp.handle(request)`` turns one whole :class:`~.events.Request` into an
*outcome*, synchronously and without trio:

* a :class:`~.errors.Response`, ready to send;
* :class:`Park`: the answer depends on a future broker event (an append for a
  long poll, the fsync that makes a send durable). The driver calls
  ``subscribe(wake)``, waits for ``wake()`` or ``timeout_s``, cancels the
  subscription and calls ``resume(timed_out)`` for the next outcome;
* :class:`Offload`: CPU-heavy work (argon2 password hashing, tens of ms) the
  driver runs in a worker thread (``work()``), then ``then(result)`` on the
  trio thread. core/auth.py documents that those calls are thread-safe.

Routes are a table (:class:`Route`): method, path pattern, handler, whether
the route is public and which entity its names belong to (for Iggy's error
numbers). An unknown path is 404, a known path with another method 405 with
``Allow``. Every route except the public ones needs ``Authorization: Bearer``
(iggy.md section 10.2); handlers check permissions with ``ctx.require``.

Nothing escapes ``handle``/``guard`` as an exception: HttpErrors and core
errors become their wire form, anything else is logged with its traceback
and answered with a generic 500 (STYLE.md section 5).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import parse_qsl, unquote

from core.access import Actor, current_actor, denied, use_actor
from core.connections import current_connection, per_connection
from core.errors import FerryError
from core.metadata import UserInfo
from core.metrics import MetricsRegistry, listener_metrics
from core.permissions import Action

from . import models
from .errors import JSON_TYPE, HttpError, Response, forbidden, from_core, internal_error, unauthenticated
from .events import Request
from .limits import HttpLimits
from .tokens import Claims, TokenError, TokenService

log = logging.getLogger("ferry.http")

# No route takes more than seven query parameters; a hundred bounds the work
# parse_qsl does on a hostile query string.
MAX_QUERY_FIELDS = 100
# u64::MAX has 20 digits; longer numbers are refused before int() (which also
# refuses past 4300 digits, with a ValueError we must never leak as a 500).
MAX_NUMBER_DIGITS = 20


@dataclass(frozen=True, slots=True)
class Park:
    """Wait for a broker event, then ``resume(timed_out)``; see the module docstring."""

    subscribe: Callable[[Callable[[], None]], Callable[[], None]]
    resume: Callable[[bool], Any]
    timeout_s: float | None = None


@dataclass(frozen=True, slots=True)
class Offload:
    """Run ``work()`` in a worker thread, then ``then(result or exception)``."""

    work: Callable[[], Any]
    then: Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class EventStream:
    """A streamed answer (server-sent events, text/event-stream).

    The driver sends ``status`` and ``headers``, then loops: ``next_chunk()``
    returns the bytes available now (``b""`` = nothing yet, ``None`` = done);
    when there is nothing, it waits for ``subscribe(wake)`` to fire or
    ``heartbeat_s`` to pass (then sends an SSE comment line to keep proxies
    and the peer's timers from closing an idle stream, and to notice a peer
    that left). It ends when ``next_chunk`` raises or returns None, or the
    gateway drains."""

    headers: tuple[tuple[bytes, bytes], ...]
    next_chunk: Callable[[], bytes | None]
    subscribe: Callable[[Callable[[], None]], Callable[[], None]]
    heartbeat_s: float
    status: int = 200


Outcome = Response | Park | Offload | EventStream
Handler = Callable[["HttpApp", "Ctx"], Outcome]


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    pattern: str  # "/streams/{stream_id}/topics"
    handler: Handler
    public: bool = False
    entity: str | None = None  # "stream" | "topic" | "group" | "user" | "token"
    # For /openapi.json (adapters/http/openapi.py): the Iggy command this route
    # serves (its name in adapters/iggy/spec.py), the request body schema, the
    # success status and its body schema ("[Name]" = array of Name), query names.
    command: str | None = None
    body: str | None = None
    ok: tuple[int, str | None] = (200, None)
    query: tuple[str, ...] = ()
    segments: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "segments", tuple(self.pattern.strip("/").split("/")) if self.pattern != "/" else ())

    def match(self, parts: tuple[str, ...]) -> dict[str, str] | None:
        if len(parts) != len(self.segments):
            return None
        params = {}
        for seg, part in zip(self.segments, parts):
            if seg.startswith("{"):
                params[seg[1:-1]] = part
            elif seg != part:
                return None
        return params


@dataclass(slots=True)
class Ctx:
    """One request as a handler sees it."""

    app: "HttpApp"
    request: Request
    params: dict[str, str]
    query: dict[str, str]
    user: UserInfo | None = None
    claims: Claims | None = None

    def require(self, action: Action, stream_id: int | None = None, topic_id: int | None = None) -> None:
        """403 unless the user may do ``action`` (core.permissions rules). The grants
        apply whatever the user's status: Iggy's HTTP API never checks it after the
        login (docs/iggy.md "What a credential change does to live sessions")."""
        if self.user is None or not self.app.broker.meta.can(self.user, action, stream_id, topic_id,
                                                             ignore_status=True):
            denied(str(action), stream_id=stream_id, topic_id=topic_id, path=self.request.target[:200])
            raise forbidden(str(action))

    def json(self) -> Any:
        return models.parse_json(self.request.body)

    def fields(self) -> models.Fields:
        return models.Fields(self.json())

    def ident(self, name: str) -> int | str:
        return models.parse_identifier(self.params[name], name)

    def q_int(self, name: str, default: int | None, lo: int = 0, hi: int = models.U64_MAX) -> int:
        text = self.query.get(name)
        if text is None or text == "":
            if default is None:
                raise models.bad_field(name, "query parameter is required")
            return default
        if not (text.isascii() and text.isdigit() and len(text) <= MAX_NUMBER_DIGITS):
            raise models.bad_field(name, "must be a non-negative integer")
        value = int(text)
        if not lo <= value <= hi:
            raise models.bad_field(name, f"must be within {lo}..{hi}")
        return value

    def q_bool(self, name: str, default: bool) -> bool:
        text = self.query.get(name)
        if text is None or text == "":
            return default
        if text.lower() in ("true", "1"):
            return True
        if text.lower() in ("false", "0"):
            return False
        raise models.bad_field(name, "must be true or false")


def json_response(value: Any, status: int = 200) -> Response:
    return Response(status, (JSON_TYPE,), models.dumps(value))


def empty(status: int = 204) -> Response:
    return Response(status)


def text_response(text: str, content_type: bytes = b"text/plain; charset=utf-8", status: int = 200) -> Response:
    return Response(status, ((b"content-type", content_type),), text.encode())


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
        user = self.broker.meta.live_user(claims.user_id)
        if user is None or (claims.user_created_at is not None and claims.user_created_at != user.created_at):
            raise TokenError("user deleted")
        return user


__all__ = ["Ctx", "EventStream", "HttpApp", "Offload", "Outcome", "Park", "Route", "empty", "json_response",
           "text_response"]
