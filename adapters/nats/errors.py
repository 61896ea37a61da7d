"""The NATS adapter's error family and its wire forms.

Every error a NATS client can see is ``-ERR '<text>'\\r\\n`` (nats-server
``client.go`` ``errProto``), and the text is what clients match on: nats-py
lower-cases it and looks for ``stale connection``, ``authorization violation``
and ``permissions violation``, and closes its side on every other ``-ERR``;
nats.js parses ``Permissions Violation for (Publish|Subscription) to "..."``.
So the texts below are nats-server's, byte for byte (protocols/nats.md
section 10, checked against nats-server ``server/client.go``, ``parser.go``
and ``errors.go``), and none is ever invented here.

Two kinds of failure reach the peer (STYLE.md section 5):

* :class:`NatsProtocolError` is fatal: send :attr:`~NatsError.wire` (which is
  empty when nats-server closes without a word, e.g. a malformed ``PUB``
  line), then close.
* :class:`NatsErrorReply` is not: the reply is queued and the connection
  goes on (permission violations, ``Invalid Subject``).

:class:`NatsLocalProtocolError` is our own misuse of the state machine (a
bug): log it, close, never show its text to the peer.
"""

from __future__ import annotations

from core.errors import (
    FerryError,
    InvalidSubject,
    PayloadTooLarge,
    PermissionDenied,
    Unauthenticated,
)

# -- texts nats-server sends (inside ``-ERR '...'``) ---------------------------
# Fatal: the connection is closed right after.
UNKNOWN_PROTOCOL_OPERATION = "Unknown Protocol Operation"  # parser.go parseErr
AUTHORIZATION_VIOLATION = "Authorization Violation"  # client.go authViolation
AUTHENTICATION_TIMEOUT = "Authentication Timeout"  # client.go authTimeout
MAX_PAYLOAD_VIOLATION = "Maximum Payload Violation"  # client.go maxPayloadViolation
# errors.go ErrMaxControlLine; lower case on the wire (nats.md section 2, verified).
MAX_CONTROL_LINE_EXCEEDED = "maximum control line exceeded"
STALE_CONNECTION = "Stale Connection"  # client.go processPingTimer
INVALID_CLIENT_PROTOCOL = "invalid client protocol"  # errors.go ErrBadClientProtocol
NO_RESPONDERS_REQUIRES_HEADERS = "no responders requires headers support"  # errors.go
MAX_CONNECTIONS_EXCEEDED = "maximum connections exceeded"  # errors.go ErrTooManyConnections
# Not fatal: replied to, the connection stays open.
INVALID_SUBJECT = "Invalid Subject"  # client.go processSubEx (sublist Insert failed)
INVALID_PUBLISH_SUBJECT = "Invalid Publish Subject"  # pedantic; the message is still delivered
MAX_SUBSCRIPTIONS_EXCEEDED = "maximum subscriptions exceeded"  # errors.go ErrTooManySubs

FATAL_TEXTS = frozenset({
    UNKNOWN_PROTOCOL_OPERATION, AUTHORIZATION_VIOLATION, AUTHENTICATION_TIMEOUT,
    MAX_PAYLOAD_VIOLATION, MAX_CONTROL_LINE_EXCEEDED, STALE_CONNECTION,
    INVALID_CLIENT_PROTOCOL, NO_RESPONDERS_REQUIRES_HEADERS, MAX_CONNECTIONS_EXCEEDED,
})


def err_frame(text: str) -> bytes:
    """``-ERR '<text>'\\r\\n`` (nats-py's regex needs the single quotes)."""
    return b"-ERR '" + text.encode("utf-8", "surrogateescape") + b"'\r\n"


# -- Go %q quoting for subjects inside error texts ------------------------------
_GO_SHORT_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                     "\t": "\\t", "\v": "\\v", "\\": "\\\\", '"': '\\"'}


def go_quote(text: str) -> str:
    """Quote like Go's ``%q`` on a byte slice (``strconv.Quote``).

    nats-server formats subjects in permission errors with ``%q``. Subjects
    reach us decoded as UTF-8 with ``surrogateescape``, so a lone surrogate
    ``\\udcXX`` stands for an invalid byte and becomes ``\\xXX`` as in Go.
    Python's ``str.isprintable`` and Go's ``unicode.IsPrint`` agree (letters,
    marks, numbers, punctuation, symbols and the ASCII space).
    """
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return '"' + text + '"'
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _GO_SHORT_ESCAPES:
            out.append(_GO_SHORT_ESCAPES[ch])
        elif 0xDC80 <= code <= 0xDCFF:  # surrogateescape'd raw byte
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def publish_violation(subject: str) -> str:
    """Text for a publish refused by permissions or a reserved subject."""
    return f"Permissions Violation for Publish to {go_quote(subject)}"


def reply_violation(reply: str) -> str:
    """Text for a publish whose reply subject is reserved (``_R_.``, ``_GR_.``, ``$JS.ACK.``)."""
    return f"Permissions Violation for Publish with Reply of {go_quote(reply)}"


def subscribe_violation(subject: str, queue: str = "") -> str:
    """Text for a refused (queue) subscription (client.go subPermissionViolation)."""
    if queue:
        return (f"Permissions Violation for Subscription to {go_quote(subject)}"
                f" using queue {go_quote(queue)}")
    return f"Permissions Violation for Subscription to {go_quote(subject)}"


# -- the family -------------------------------------------------------------------
class NatsError(Exception):
    """Base of the NATS adapter's errors. ``text`` is the ``-ERR`` text or None."""

    fatal = True

    def __init__(self, text: str | None, detail: str = "") -> None:
        super().__init__(text or detail or type(self).__name__)
        self.text = text
        self.detail = detail

    @property
    def wire(self) -> bytes:
        """What the peer is sent: ``-ERR '<text>'\\r\\n``, or ``b""`` for a silent close."""
        return err_frame(self.text) if self.text else b""


class NatsProtocolError(NatsError):
    """The client broke the protocol: send :attr:`wire` (maybe empty), then close.

    ``detail`` says what was wrong, for logs only; nats-server closes without
    any ``-ERR`` for a malformed ``CONNECT``, wrong argument counts, bad sizes,
    ``HPUB`` without header support, and a client that sends ``-ERR``.
    """

    fatal = True


class NatsErrorReply(NatsError):
    """A refused operation: reply with :attr:`wire` and keep the connection."""

    fatal = False

    def __init__(self, text: str, detail: str = "") -> None:
        super().__init__(text, detail)


class NatsLocalProtocolError(NatsError):
    """We misused the state machine (a bug on our side). Never shown to the peer."""

    fatal = True

    def __init__(self, detail: str) -> None:
        super().__init__(None, detail)


class NatsHeaderError(NatsError, ValueError):
    """A header block that does not follow ADR-4 (``NATS/1.0`` line, ``Key: Value``
    lines, empty line).

    Never sent on the wire: nats-server forwards client header blocks byte for
    byte without parsing them (nats.md section 8), so this only stops a
    translation to another protocol's header model.
    """

    fatal = False

    def __init__(self, detail: str) -> None:
        super().__init__(None, detail)


# -- core errors -> NATS wire errors (the one mapping table, STYLE.md section 5) --
# Errors not listed here are bugs on our side, not something to tell a client.
_CORE_FATAL: tuple[tuple[type[FerryError], str], ...] = (
    (Unauthenticated, AUTHORIZATION_VIOLATION),
    (PayloadTooLarge, MAX_PAYLOAD_VIOLATION),
)
_CORE_REPLY: tuple[tuple[type[FerryError], str], ...] = (
    (InvalidSubject, INVALID_SUBJECT),
)


def from_core_error(exc: FerryError, *, subject: str = "", queue: str = "",
                    publish: bool = True) -> NatsError:
    """The NATS error a client sees for a core error raised while serving it.

    ``PermissionDenied`` becomes the publish or subscribe permission text for
    ``subject`` (and ``queue``), as nats-server words it. Anything unmapped is
    returned as a :class:`NatsLocalProtocolError` (log it; the peer learns nothing).
    """
    if isinstance(exc, PermissionDenied):
        text = publish_violation(subject) if publish else subscribe_violation(subject, queue)
        return NatsErrorReply(text, detail=str(exc))
    for cls, text in _CORE_FATAL:
        if isinstance(exc, cls):
            return NatsProtocolError(text, detail=str(exc))
    for cls, text in _CORE_REPLY:
        if isinstance(exc, cls):
            return NatsErrorReply(text, detail=str(exc))
    return NatsLocalProtocolError(f"unmapped core error {exc!r}")


__all__ = [
    "AUTHENTICATION_TIMEOUT", "AUTHORIZATION_VIOLATION", "FATAL_TEXTS", "INVALID_CLIENT_PROTOCOL",
    "INVALID_PUBLISH_SUBJECT", "INVALID_SUBJECT", "MAX_CONNECTIONS_EXCEEDED",
    "MAX_CONTROL_LINE_EXCEEDED", "MAX_PAYLOAD_VIOLATION", "MAX_SUBSCRIPTIONS_EXCEEDED",
    "NO_RESPONDERS_REQUIRES_HEADERS", "STALE_CONNECTION", "UNKNOWN_PROTOCOL_OPERATION",
    "NatsError", "NatsErrorReply", "NatsHeaderError", "NatsLocalProtocolError",
    "NatsProtocolError", "err_frame", "from_core_error", "go_quote", "publish_violation",
    "reply_violation", "subscribe_violation",
]
