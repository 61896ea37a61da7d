"""NATS client protocol framing, client side: server bytes -> events, client frames -> bytes.

The mirror image of :mod:`adapters.nats.codec` (which reads what a *client*
sends): :class:`ClientCodec` reads what a NATS *server* sends to a client, for
the gateway's own connection to a JetStream cluster (issue 14). It is sans-I/O
(no sockets, no trio, no clock): feed bytes with :meth:`ClientCodec.receive_data`
and take events from :meth:`ClientCodec.next_event` until it returns
``NEED_DATA``.

What the server sends (protocols/nats.md section 3; nats-server
``server/client.go``): ``INFO {json}``, ``MSG <subject> <sid> [reply] <#bytes>``,
``HMSG <subject> <sid> [reply] <#hdr> <#total>``, ``PING``, ``PONG``, ``+OK``,
``-ERR '<text>'``. The parser follows the same rules as the server-side codec
so both ends agree on every frame nats-server can write:

* Verbs match case-insensitively (nats-server's parser does, and so do the
  client parsers that talk to it); ``MSG``, ``HMSG``, ``INFO`` and ``-ERR``
  need a space or tab after the verb; ``PING``, ``PONG`` and ``+OK`` ignore
  the rest of their line.
* A line ends at ``\\n``; one ``\\r`` before it is dropped. Arguments split on
  runs of spaces and tabs only (a subject may hold any other byte).
* Sizes are 1 to 9 decimal digits (:func:`adapters.nats.codec.parse_size`);
  the payload is found by its declared length and must end in ``\\r\\n``.
* A bad first byte is an error as soon as it arrives, and a line still
  being received is checked against its limit, so a broken peer cannot make
  the buffer grow without bound.

Errors raise :class:`NatsClientProtocolError`; after one the connection is
unusable (the stream is out of step) and must be closed.

The encoders write the client's frames (``CONNECT``, ``PUB``/``HPUB``,
``SUB``, ``UNSUB``, ``PING``, ``PONG``). Header blocks are the ADR-4 blocks of
:mod:`adapters.nats.headers`; :func:`status_of` reads the status line the
server puts in replies (``503`` no responders, ``408``/``409`` JetStream pull
statuses, ``404`` no messages).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from .codec import MAX_SIZE_DIGITS, parse_size
from .events import NEED_DATA, NeedData
from .headers import VERSION_LINE, HeaderBlock, encode_headers, parse_headers

# -- limits -------------------------------------------------------------------------
# A MSG/HMSG line repeats the subject and reply of a PUB line that nats-server
# accepted (at most MAX_CONTROL_LINE_SIZE = 4096 argument bytes, const.go) and
# adds the subscriber's sid and the sizes; the sid came from a SUB line bounded by
# the same 4096. Twice that, rounded up, covers every line a server can write.
MAX_CONTROL_LINE = 16 * 1024
# INFO carries connect_urls for every route of the cluster (and xkey, nonce,
# ...); a large cluster's INFO passes 4096 bytes easily, so it gets its own,
# wider bound. 256 KiB is thousands of URLs.
MAX_INFO_LINE = 256 * 1024
# nats-server refuses max_payload above 64 MiB in its configuration
# (MAX_PAYLOAD_MAX_SIZE, const.go), so no server delivers a larger message.
# Clients may tighten it to the max_payload of the server's INFO.
MAX_PAYLOAD = 64 * 1024 * 1024
# A sid we read back must fit an int64 (19 digits); ours are small counters.
MAX_SID_DIGITS = 19

CRLF = b"\r\n"
PING = b"PING\r\n"
PONG = b"PONG\r\n"

# Status codes a server puts in a reply's header block (protocols/nats.md section 9,
# ADR-9 for the JetStream pull statuses).
STATUS_NO_RESPONDERS = "503"
STATUS_REQUEST_TIMEOUT = "408"   # pull request expired
STATUS_CONFLICT = "409"          # pull: consumer deleted / leadership change / limits
STATUS_NO_MESSAGES = "404"
STATUS_CONTROL = "100"           # idle heartbeat / flow control

_UTF8, _ESC = "utf-8", "surrogateescape"
_SP, _TAB, _CR, _LF = 0x20, 0x09, 0x0D, 0x0A
# What nats-server splits a PUB/SUB line on (parser.go); a subject holding one
# of these would be read as two arguments (CR/LF would end the line).
_SUBJECT_BREAKERS = re.compile(r"[ \t\r\n]")


class NatsClientProtocolError(ValueError):
    """The server's byte stream is not the NATS protocol (or passes a limit);
    close the connection: what follows cannot be framed any more."""


# -- events (server -> client) ------------------------------------------------------
class ServerEvent:
    """Base of the events :class:`ClientCodec` returns."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ServerInfo(ServerEvent):
    """``INFO {json}``: the server's description (first frame, and async updates
    such as ``{"ldm": true}`` or new ``connect_urls``)."""

    fields: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ServerMsg(ServerEvent):
    """One delivery. ``reply`` is None when absent; ``header`` is the raw
    ``NATS/1.0...\\r\\n\\r\\n`` block of an ``HMSG`` and None for a ``MSG``."""

    subject: str
    sid: int
    reply: str | None
    header: bytes | None
    payload: bytes


@dataclass(frozen=True, slots=True)
class ServerPing(ServerEvent):
    """``PING``: answer with :data:`PONG`."""


@dataclass(frozen=True, slots=True)
class ServerPong(ServerEvent):
    """``PONG``: the answer to our oldest unanswered ``PING``."""


@dataclass(frozen=True, slots=True)
class ServerOk(ServerEvent):
    """``+OK`` (verbose mode only)."""


@dataclass(frozen=True, slots=True)
class ServerErr(ServerEvent):
    """``-ERR '<text>'``, with the quotes removed (``Authorization Violation``,
    ``Permissions Violation for Publish to "x"``, ``Stale Connection``...)."""

    text: str


_PING, _PONG, _OK = ServerPing(), ServerPong(), ServerOk()

# (lower-case verb, needs a blank after it, event for a line-ignoring verb).
_VERBS: tuple[tuple[bytes, bool, ServerEvent | None], ...] = (
    (b"msg", True, None), (b"hmsg", True, None), (b"ping", False, _PING),
    (b"pong", False, _PONG), (b"+ok", False, _OK), (b"-err", True, None),
    (b"info", True, None),
)
_LONGEST_VERB = max(len(v[0]) for v in _VERBS)


def _common_prefix(a: bytes, b: bytes) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _split(arg: bytes) -> list[bytes]:
    """Split on runs of spaces and tabs (what nats-server writes between arguments)."""
    if b"\t" in arg:
        arg = arg.replace(b"\t", b" ")
    return [p for p in arg.split(b" ") if p]


class ClientCodec:
    """Parser of the server-to-client byte stream (see the module docstring).

    One ``bytearray`` and an offset into it; the consumed prefix is dropped
    only when ``NEED_DATA`` is returned, so a receive holding many frames costs
    one compaction, not one per frame.
    """

    def __init__(self, *, max_payload: int = MAX_PAYLOAD,
                 max_control_line: int = MAX_CONTROL_LINE,
                 max_info_line: int = MAX_INFO_LINE) -> None:
        if max_payload < 0 or max_control_line <= 0 or max_info_line <= 0:
            raise ValueError("max_payload must be >= 0, the line limits > 0")
        self.max_payload = max_payload
        self.max_control_line = max_control_line
        self.max_info_line = max_info_line
        self._buf = bytearray()
        self._pos = 0
        # A MSG/HMSG line read, payload pending: (subject, sid, reply, hdr, size).
        self._pending: tuple[str, int, str | None, int, int] | None = None

    @property
    def buffered(self) -> int:
        """Bytes received and not yet consumed."""
        return len(self._buf) - self._pos

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes read from the server."""
        self._buf += data

    def next_event(self) -> ServerEvent | NeedData:
        """One server operation, or ``NEED_DATA``; raises :class:`NatsClientProtocolError`."""
        if self._pending is not None:
            return self._payload()
        buf, pos = self._buf, self._pos
        n = len(buf)
        if pos >= n:
            return self._need_data()
        nl = buf.find(b"\n", pos)
        if nl < 0:
            self._check_partial(buf, pos, n)
            return self._need_data()
        end = nl - 1 if nl > pos and buf[nl - 1] == _CR else nl
        line = bytes(buf[pos:end])
        verb, blank, event = self._verb(bytes(buf[pos:pos + _LONGEST_VERB + 1]).lower(), complete=True)
        self._check_length(verb, len(line))
        self._pos = nl + 1
        if event is not None:
            return event
        arg = line[len(verb) + 1:]
        if verb == b"msg" or verb == b"hmsg":
            self._pending = self._msg_line(arg, verb == b"hmsg")
            return self._payload()
        if verb == b"info":
            return self._info(arg)
        return ServerErr(_err_text(arg))

    # -- helpers -------------------------------------------------------------------
    def _need_data(self) -> NeedData:
        if self._pos:
            del self._buf[:self._pos]
            self._pos = 0
        return NEED_DATA

    @staticmethod
    def _verb(head: bytes, *, complete: bool) -> tuple[bytes, bool, ServerEvent | None]:
        """The verb ``head`` (lower-cased line start) begins with. With
        ``complete`` the line has ended, so the verb must be whole and, when it
        takes arguments, followed by a blank; otherwise ``head`` may also be a
        prefix of one. Raises on anything else."""
        for verb, blank, event in _VERBS:
            if head.startswith(verb):
                rest = head[len(verb):len(verb) + 1]
                if not blank or rest in (b" ", b"\t") or (not complete and rest in (b"", b"\r")):
                    return verb, blank, event
                if rest in (b"", b"\r", b"\n"):
                    raise NatsClientProtocolError(f"{verb.upper().decode()} without arguments")
                break
            if not complete and verb.startswith(head):
                return verb, blank, event
        # Show the line up to the first byte no verb can continue with: the same
        # text whether the line came whole or a byte at a time.
        known = max(_common_prefix(head, verb) for verb, _, _ in _VERBS)
        raise NatsClientProtocolError(f"unknown protocol operation {head[:known + 1]!r}")

    def _check_length(self, verb: bytes, length: int) -> None:
        """A line (without its CRLF) is the verb, one blank and at most the limit's
        bytes; INFO has its own, wider limit (see :data:`MAX_INFO_LINE`)."""
        limit = self.max_info_line if verb == b"info" else self.max_control_line
        if length > limit + len(verb) + 1:
            raise NatsClientProtocolError(f"{verb.upper().decode()} line of {length} bytes passes "
                                          f"the limit of {limit}")

    def _check_partial(self, buf: bytearray, pos: int, n: int) -> None:
        """A line whose ``\\n`` has not arrived: its verb must be plausible and its
        length within the limit. A last ``\\r`` is not counted (it is dropped if
        ``\\n`` follows), so the count only grows as bytes arrive and the outcome
        does not depend on how the line was split into reads."""
        verb, _, _ = self._verb(bytes(buf[pos:pos + _LONGEST_VERB + 1]).lower(), complete=False)
        self._check_length(verb, n - pos - (1 if buf[n - 1] == _CR else 0))

    def _msg_line(self, arg: bytes, has_header: bool) -> tuple[str, int, str | None, int, int]:
        parts = _split(arg)
        verb = "HMSG" if has_header else "MSG"
        want = (4, 5) if has_header else (3, 4)
        if len(parts) not in want:
            raise NatsClientProtocolError(f"{verb} with {len(parts)} arguments: {arg[:64]!r}")
        subject, sidb = parts[0], parts[1]
        reply = parts[2] if len(parts) == want[1] else None
        if not sidb.isdigit() or len(sidb) > MAX_SID_DIGITS or not sidb.isascii():
            raise NatsClientProtocolError(f"{verb} with a bad sid {sidb[:32]!r}")
        size = parse_size(parts[-1])
        hdr = parse_size(parts[-2]) if has_header else 0
        if size < 0 or hdr < 0:
            raise NatsClientProtocolError(f"{verb} with a bad size (1 to {MAX_SIZE_DIGITS} digits): "
                                          f"{arg[:64]!r}")
        if hdr > size:
            raise NatsClientProtocolError(f"HMSG header size {hdr} > total size {size}")
        if has_header and hdr < len(VERSION_LINE) + 4:
            raise NatsClientProtocolError(f"HMSG header size {hdr} is too small for a header block")
        if size > self.max_payload:
            raise NatsClientProtocolError(f"{verb} of {size} bytes passes max_payload {self.max_payload}")
        return (subject.decode(_UTF8, _ESC), int(sidb),
                None if reply is None else reply.decode(_UTF8, _ESC), hdr, size)

    def _payload(self) -> ServerMsg | NeedData:
        subject, sid, reply, hdr, size = self._pending  # type: ignore[misc]
        buf, start = self._buf, self._pos
        end = start + size
        n = len(buf)
        if n < end + 2:
            if n > end and buf[end] != _CR:
                raise NatsClientProtocolError("message payload not followed by CRLF")
            return self._need_data()
        if buf[end] != _CR or buf[end + 1] != _LF:
            raise NatsClientProtocolError("message payload not followed by CRLF")
        self._pending = None
        self._pos = end + 2
        if hdr:
            header = bytes(buf[start:start + hdr])
            if not header.startswith(VERSION_LINE):
                raise NatsClientProtocolError(f"HMSG header block does not start with NATS/1.0: "
                                              f"{header[:16]!r}")
            return ServerMsg(subject, sid, reply, header, bytes(buf[start + hdr:end]))
        return ServerMsg(subject, sid, reply, None, bytes(buf[start:end]))

    @staticmethod
    def _info(arg: bytes) -> ServerInfo:
        try:
            value = json.loads(arg.decode(_UTF8, "replace"))
        except (ValueError, RecursionError) as exc:  # deep nesting: as codec._go_json (tests/fuzz)
            raise NatsClientProtocolError(f"INFO is not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise NatsClientProtocolError("INFO is not a JSON object")
        return ServerInfo(value)


def _err_text(arg: bytes) -> str:
    """``'text'`` -> ``text`` (nats-server always quotes; tolerate a bare text)."""
    text = arg.strip(b" \t")
    if len(text) >= 2 and text[:1] == b"'" and text[-1:] == b"'":
        text = text[1:-1]
    return text.decode(_UTF8, "replace")


# -- header helpers -----------------------------------------------------------------
def status_of(msg: ServerMsg) -> tuple[str, str]:
    """``(status, description)`` of a reply's header block: ``("503", "")`` for no
    responders, ``("408", "Request Timeout")``, ``("", "")`` when there is no
    header or no status. Only the version line is read (by
    :func:`~adapters.nats.headers.parse_headers` on that line alone), so the
    status of a reply survives header lines this side would not accept."""
    header = msg.header
    if not header:
        return "", ""
    end = header.find(CRLF)
    if end <= len(VERSION_LINE):
        return "", ""
    block = parse_headers(header[:end + 2] + CRLF)
    return block.status, block.description


def headers_of(msg: ServerMsg) -> HeaderBlock | None:
    """The parsed header block of ``msg`` (None for a ``MSG``); raises
    :class:`~adapters.nats.errors.NatsHeaderError` for a block that is not ADR-4."""
    return None if msg.header is None else parse_headers(msg.header)


# -- encoders (client -> server) ----------------------------------------------------
def check_subject(subject: str, what: str = "subject") -> bytes:
    """The wire form of ``subject``; ValueError when empty or holding a space,
    tab, CR or LF (nats-server would read it as two arguments or a line end)."""
    if not subject or _SUBJECT_BREAKERS.search(subject):
        raise ValueError(f"invalid {what} {subject!r}: empty or contains whitespace")
    return subject.encode(_UTF8, _ESC)


def encode_connect(options: Mapping[str, Any]) -> bytes:
    """``CONNECT {json}\\r\\n`` (compact JSON; nats-server reads the keys
    case-insensitively and ignores unknown ones)."""
    return b"CONNECT " + json.dumps(dict(options), separators=(",", ":")).encode() + CRLF


def encode_pub(subject: str, payload: bytes | bytearray | memoryview = b"",
               reply: str | None = None,
               header: bytes | HeaderBlock | None = None) -> bytes:
    """``PUB`` (or ``HPUB`` when a header block is given) with its payload.

    ``header`` is a raw ``NATS/1.0...\\r\\n\\r\\n`` block or a :class:`HeaderBlock`
    (encoded by :func:`~adapters.nats.headers.encode_headers`). The block is
    checked only to start with ``NATS/1.0`` and end with an empty line: nats-server
    forwards it unparsed, so a subscriber would get whatever we send.
    """
    subj = check_subject(subject)
    rep = b"" if reply is None else b" " + check_subject(reply, "reply subject")
    if header is None:
        return b"".join((b"PUB ", subj, rep, b" %d\r\n" % len(payload), payload, CRLF))
    if isinstance(header, HeaderBlock):
        header = encode_headers(header)
    if not header.startswith(VERSION_LINE) or not header.endswith(b"\r\n\r\n"):
        raise ValueError(f"not a NATS header block: {bytes(header[:32])!r}")
    hlen = len(header)
    return b"".join((b"HPUB ", subj, rep, b" %d %d\r\n" % (hlen, hlen + len(payload)),
                     header, payload, CRLF))


def encode_sub(subject: str, sid: int, queue: str | None = None) -> bytes:
    """``SUB <subject> [queue] <sid>\\r\\n``."""
    subj = check_subject(subject)
    if queue is None:
        return b"SUB %s %d\r\n" % (subj, sid)
    return b"SUB %s %s %d\r\n" % (subj, check_subject(queue, "queue group"), sid)


def encode_unsub(sid: int, max_msgs: int | None = None) -> bytes:
    """``UNSUB <sid> [max_msgs]\\r\\n``; with ``max_msgs`` the server removes the
    subscription after that many deliveries in total."""
    if max_msgs is None:
        return b"UNSUB %d\r\n" % sid
    if max_msgs <= 0:
        raise ValueError("max_msgs must be positive (omit it to unsubscribe now)")
    return b"UNSUB %d %d\r\n" % (sid, max_msgs)


__all__ = [
    "CRLF", "MAX_CONTROL_LINE", "MAX_INFO_LINE", "MAX_PAYLOAD", "MAX_SID_DIGITS", "NEED_DATA",
    "PING", "PONG", "STATUS_CONFLICT", "STATUS_CONTROL", "STATUS_NO_MESSAGES",
    "STATUS_NO_RESPONDERS", "STATUS_REQUEST_TIMEOUT", "ClientCodec", "NatsClientProtocolError",
    "ServerErr", "ServerEvent", "ServerInfo", "ServerMsg", "ServerOk", "ServerPing", "ServerPong",
    "check_subject", "encode_connect", "encode_pub", "encode_sub", "encode_unsub", "headers_of",
    "status_of",
]
