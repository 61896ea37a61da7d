"""Typed events of the NATS client protocol (protocols/nats.md section 3).

Each class is one protocol operation, named as the protocol names it, so a
grep against the spec finds it. The server side *receives* ``Connect``,
``Pub``, ``HPub``, ``Sub``, ``Unsub``, ``Ping``, ``Pong`` (and ``Info``,
``Ok``, ``Err``, which nats-server tolerates from clients) and *sends*
``Info``, ``Msg``, ``HMsg``, ``Ping``, ``Pong``, ``Ok`` and ``Err``.

Subjects, reply subjects and queue names are ``str`` decoded from the wire as
UTF-8 with ``surrogateescape``, so any byte string nats-server would accept
survives the round trip exactly; ``sid`` stays ``bytes`` because it is
echoed verbatim in every ``MSG``. Payloads and header blocks are ``bytes``
copied once out of the receive buffer.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from .subscriptions import Subscription


class NeedData(enum.Enum):
    """Returned by ``next_event`` when the buffered bytes hold no complete event."""

    NEED_DATA = "NEED_DATA"


NEED_DATA = NeedData.NEED_DATA


class Event:
    """Base of every NATS event."""

    __slots__ = ()


# -- client -> server ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Connect(Event):
    """``CONNECT {json}``: the client's options (nats.md section 5).

    From the codec it holds the fields present in the JSON (names listed in
    ``fields``) over nats-server's defaults (verbose, pedantic and echo on).
    The connection merges it over the options of any earlier ``CONNECT`` and
    emits the effective options once the ``CONNECT`` has been accepted.
    """

    verbose: bool = True
    pedantic: bool = True
    echo: bool = True
    tls_required: bool = False
    headers: bool = False
    no_responders: bool = False
    protocol: int = 0
    name: str = ""
    lang: str = ""
    version: str = ""
    user: str = ""
    password: str = field(default="", repr=False)  # JSON "pass"
    auth_token: str = field(default="", repr=False)
    nkey: str = ""
    jwt: str = field(default="", repr=False)
    sig: str = field(default="", repr=False)
    account: str = ""  # obsolete: any value is an Authorization Violation
    new_account: bool = False
    fields: frozenset[str] = frozenset()  # attribute names the JSON set


DEFAULT_CONNECT = Connect()


@dataclass(frozen=True, slots=True)
class Pub(Event):
    """``PUB <subject> [reply] <#bytes>`` and its payload; fires once the payload
    and its trailing CRLF have arrived. ``reply`` is ``""`` when absent."""

    subject: str
    reply: str
    payload: bytes


@dataclass(frozen=True, slots=True)
class HPub(Event):
    """``HPUB <subject> [reply] <#hdr> <#total>`` with its header block and payload.

    ``header`` is the raw block, forwarded byte for byte (nats-server never
    parses it). An empty ``header`` (``#hdr`` = 0) is delivered as a plain
    ``MSG``, as nats-server does (``hasHeader := pa.hdr > 0``).
    """

    subject: str
    reply: str
    header: bytes
    payload: bytes


@dataclass(frozen=True, slots=True)
class Sub(Event):
    """``SUB <subject> [queue] <sid>``; ``queue`` is ``""`` for a plain subscription.

    The connection emits it only for a new, valid, permitted subscription and
    attaches the :class:`~adapters.nats.subscriptions.Subscription` it created.
    """

    subject: str
    queue: str
    sid: bytes
    subscription: Subscription | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Unsub(Event):
    """``UNSUB <sid> [max_msgs]``. ``max_msgs`` is 0 for "remove now" (absent,
    zero or unparsable, all of which nats-server treats alike).

    The connection emits it only for a known sid, with the subscription
    attached; ``subscription.closed`` tells whether it was removed now or
    will be after ``max_msgs`` deliveries in total.
    """

    sid: bytes
    max_msgs: int = 0
    subscription: Subscription | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Ping(Event):
    """``PING``. Received: the connection has already queued the ``PONG``.
    Sent (through ``send``): counts as an outstanding ping."""


@dataclass(frozen=True, slots=True)
class Pong(Event):
    """``PONG``. Received: clears the outstanding server pings."""


@dataclass(frozen=True, slots=True)
class Ok(Event):
    """``+OK``. Sent after each accepted operation in verbose mode; ignored from clients."""


@dataclass(frozen=True, slots=True)
class Err(Event):
    """``-ERR '<text>'``. Sent: a non-fatal error reply. Received from a client:
    nats-server closes the connection (no reply)."""

    text: str


@dataclass(frozen=True, slots=True)
class Info(Event):
    """``INFO {json}``. Sent: ``fields`` override the connection's own INFO
    (async INFO, e.g. ``{"ldm": True}``). Received from a client: ignored once
    the JSON parses (nats-server ``processInfo``)."""

    fields: Mapping[str, Any] = field(default_factory=dict)


# -- server -> client -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Msg(Event):
    """``MSG <subject> <sid> [reply] <#bytes>`` + payload: one delivery.

    ``subject`` is the published subject, never the subscription's pattern."""

    subject: str
    sid: bytes
    reply: str
    payload: bytes | memoryview


@dataclass(frozen=True, slots=True)
class HMsg(Event):
    """``HMSG <subject> <sid> [reply] <#hdr> <#total>`` + header block + payload.

    Sent to a client without header support it becomes a ``MSG`` carrying the
    payload only, as nats-server does."""

    subject: str
    sid: bytes
    reply: str
    header: bytes
    payload: bytes | memoryview


@dataclass(frozen=True, slots=True)
class ConnectionClosed(Event):
    """The client closed its side (``receive_data(b"")``) and every complete
    operation before that has been returned. Fires once; a partial operation
    left in the buffer is dropped, as nats-server drops it."""


__all__ = [
    "DEFAULT_CONNECT", "NEED_DATA", "Connect", "ConnectionClosed", "Err", "Event", "HMsg",
    "HPub", "Info", "Msg", "NeedData", "Ok", "Ping", "Pong", "Pub", "Sub", "Unsub",
]
