"""Typed events between the Iggy connection state machine and its session.

The command bodies themselves are the dataclasses the command table derives
(``spec.CREATE_STREAM.cls`` ...); these events wrap one with what the
framing knew about it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

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


# Eviction reasons Ferry uses (iggy-current.md 4.4).
EVICT_NO_SESSION = 1
EVICT_INVALID_CREDENTIALS = 9
EVICT_INVALID_TOKEN = 10
EVICT_MALFORMED_LOGIN = 15

__all__ = ["BadRequest", "Evict", "NEED_DATA", "NeedData", "Reply", "Request"]
