"""What a route handler gets and gives back: the contract between the HTTP
application (app.py, which dispatches) and the route modules (routes_*.py).

A handler is ``handler(app, ctx) -> Outcome``: ``app`` is the application seen
through :class:`App` (the parts a handler may use), ``ctx`` the request
(:class:`Ctx`), the outcome a :class:`~.errors.Response` or one of :class:`Park`,
:class:`Offload`, :class:`EventStream` (app.py's docstring says what the driver
does with each). Routes are rows of a table (:class:`Route`).

Its own module so that imports point one way: app.py imports the route table
(routes.py) and both import this; no route module imports app.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from core.access import denied
from core.metadata import UserInfo
from core.metrics import MetricsRegistry
from core.permissions import Action

from . import models
from .errors import JSON_TYPE, Response, forbidden
from .events import Request
from .limits import HttpLimits
from .tokens import Claims, TokenService


class App(Protocol):
    """The HTTP application (app.HttpApp) as a handler sees it."""

    broker: Any
    clock: Callable[[], float]
    tokens: TokenService
    metrics: MetricsRegistry
    limits: HttpLimits
    listener: str
    counters: Any  # core.connections.per_connection(listener_metrics(...))
    routes: list[Route]
    openapi: bytes | None  # built on first GET /openapi.json

    def user_of(self, claims: Claims) -> UserInfo: ...


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
Handler = Callable[["App", "Ctx"], Outcome]


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

    app: App
    request: Request
    params: dict[str, str]
    query: dict[str, str]
    user: UserInfo | None = None
    claims: Claims | None = None

    def require(self, action: Action, stream_id: int | None = None, topic_id: int | None = None) -> None:
        """403 unless the user may do ``action`` (core.permissions rules). The grants
        apply whatever the user's status: Iggy's HTTP API never checks it after the
        login (docs/iggy.md "What a credential change does to live sessions")."""
        if self.user is None or not self.app.broker.meta.users.can(self.user, action, stream_id, topic_id,
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


__all__ = ["App", "Ctx", "EventStream", "Handler", "Offload", "Outcome", "Park", "Route", "empty", "json_response",
           "text_response"]
