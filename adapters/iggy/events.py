"""Typed events between the Iggy connection state machine and its session.

The command bodies themselves are the dataclasses the command table derives
(``spec.CREATE_STREAM.cls`` ...); these events wrap one with what the
framing knew about it. The session answers each with a :class:`Reply`, an
:class:`Evict` or a :class:`Deferred` (handlers.py and handlers_data.py build
them without importing the session).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable

from .codec import VsrHeader
from .errors import IggyError
from .table import Command


class NeedData(enum.Enum):
    NEED_DATA = "NEED_DATA"


NEED_DATA = NeedData.NEED_DATA


@dataclass(frozen=True, slots=True)
class Request:
    """Fires once a whole request frame decoded: ``value`` is ``command.cls``."""

    command: Command
    value: Any
    dialect: int
    vsr: VsrHeader | None = None


@dataclass(frozen=True, slots=True)
class BadRequest:
    """Fires for a whole frame whose code is unknown or whose body does not
    decode; the session answers ``status`` and the connection goes on."""

    code: int
    status: IggyError
    detail: str = ""
    vsr: VsrHeader | None = None
    command: Command | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """What the session sends back for one request: a status and a body
    (ignored for a non-zero status). ``command`` decides VSR result framing."""

    status: int = 0
    body: bytes = b""
    command: Command | None = None


@dataclass(frozen=True, slots=True)
class Evict:
    """A VSR Eviction (iggy-current.md 4.4): session-terminal; the connection closes."""

    reason: int


@dataclass(slots=True)
class Deferred:
    """The session's answer when the reply must wait for the driver: run ``work`` in a
    worker thread, or (no ``work``) wait until :meth:`fire` is called; then send
    ``finish(outcome)`` where ``outcome`` is the result or the exception."""

    finish: Callable[[Any], Reply | Evict]
    work: Callable[[], Any] | None = None
    outcome: Any = None
    done: bool = False
    on_done: Callable[[], None] | None = field(default=None, repr=False)

    def fire(self, outcome: Any) -> None:
        self.outcome, self.done = outcome, True
        if self.on_done is not None:
            self.on_done()


# Eviction reasons Ferry uses (iggy-current.md 4.4).
EVICT_NO_SESSION = 1
EVICT_INVALID_CREDENTIALS = 9
EVICT_INVALID_TOKEN = 10
EVICT_MALFORMED_LOGIN = 15

__all__ = ["BadRequest", "Deferred", "Evict", "NEED_DATA", "NeedData", "Reply", "Request"]
