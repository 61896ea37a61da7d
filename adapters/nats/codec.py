"""NATS client protocol framing, server side: client bytes -> events, events -> bytes.

Theory of operation
-------------------
:class:`ServerCodec` reads what a client sends. It keeps one ``bytearray``
and an offset into it; :meth:`ServerCodec.next_event` parses at most one
operation from the offset and drops the consumed prefix only when it returns
``NEED_DATA`` (STYLE.md section 7). It follows nats-server's byte-level
parser (``server/parser.go``) wherever a client could tell the difference:

* The verb is matched case-insensitively as it arrives, so a wrong byte is
  an ``Unknown Protocol Operation`` at once, even before the line ends.
  Empty lines, ``MSG`` and ``HMSG`` from a client are unknown operations too.
* ``PUB``, ``HPUB``, ``SUB``, ``UNSUB`` and ``-ERR`` need a space or tab
  after the verb, ``CONNECT`` and ``INFO`` take zero or more; then runs of
  spaces and tabs are skipped, and the byte that ends the run starts the
  argument, whatever it is. The line ends at the next ``\\n``; if a ``\\r``
  appeared in the argument, the argument's last byte is dropped (``c.drop``).
* ``PING``, ``PONG`` and ``+OK`` ignore everything up to the ``\\n``.
* The argument, at most ``max_control_line`` bytes (checked on complete
  lines and, like nats-server, on a line still being received), is split on
  spaces and tabs (``SUB``/``UNSUB`` also on CR and LF, ``splitArg``).
  Sizes are 1 to 9 decimal digits (``parseSize``).
* A payload is found by its declared length ("find, then jump") and must be
  followed by ``\\r\\n``; it is copied out of the buffer once.
* With ``connect_only`` set (auth required, no ``CONNECT`` yet) any
  operation whose first byte is not ``C``/``c`` is an ``Authorization
  Violation`` at that byte, as in nats-server.

A ``PUB`` in the form clients write (upper case, one blank after the verb, CRLF,
payload already buffered) takes a one-step fast path; anything else falls
back to the general path from the same offset, so both agree by construction.
:meth:`ServerCodec.scan_pubs` applies the same idea to a whole receive: it
parses every such ``PUB`` in one loop into plain tuples (no event objects) and
stops at the first frame it does not take, which :meth:`next_event` then
reads (docs/nats.md, "Performance").

Errors are raised as :class:`~adapters.nats.errors.NatsProtocolError` with
nats-server's text, or with no text where nats-server closes silently.
Whitespace runs and ignored ``PING`` tails are consumed as they arrive, so a
client cannot make the buffer grow without a protocol limit being checked.

Deliberate differences (none reachable by a conforming client): ``HMSG`` is
refused as soon as its ``M`` arrives (nats-server reads the line and fails on
the payload), a ``\\r`` inside an argument split across reads is handled as
if it had arrived in one read, and ``INFO`` from a client is only checked to
be a JSON object or ``null``, not field by field.

The encoders build server frames: ``INFO`` (JSON as Go's ``encoding/json``
writes it), ``MSG``/``HMSG`` as lists of fragments that share the payload
(:class:`PreparedMessage` encodes one published message once for all its
subscribers), and the fixed ``PING``/``PONG``/``+OK``/``-ERR`` frames.
"""

from __future__ import annotations

import enum
import json
from typing import Any, Callable, Iterable, Mapping


from . import pubscan as _pubscan
from .errors import (
    AUTHORIZATION_VIOLATION,
    MAX_CONTROL_LINE_EXCEEDED,
    MAX_PAYLOAD_VIOLATION,
    UNKNOWN_PROTOCOL_OPERATION,
    NatsProtocolError,
    err_frame,
)
from .events import NEED_DATA, Connect, Err, Event, HPub, Info, NeedData, Ok, Ping, Pong, Pub, Sub, Unsub

# nats-server MAX_CONTROL_LINE_SIZE (const.go): the longest argument part of
# an operation line; a DoS guard on what we buffer before a line ends.
MAX_CONTROL_LINE = 4096
# nats-server MAX_PAYLOAD_SIZE (const.go), advertised in INFO; configurable.
MAX_PAYLOAD = 1024 * 1024
# parseSize (util.go) reads at most 9 digits (999M); longer is a bad size.
MAX_SIZE_DIGITS = 9
# Payloads above this are copied through a memoryview (one copy); smaller ones
# through a bytearray slice, which measured faster for small sizes.
_VIEW_COPY_MIN = 4096

CRLF = b"\r\n"
PING_FRAME = b"PING\r\n"
PONG_FRAME = b"PONG\r\n"
OK_FRAME = b"+OK\r\n"

_SP, _TAB, _CR, _LF = 0x20, 0x09, 0x0D, 0x0A
_UTF8 = "utf-8"
_ESC = "surrogateescape"


# The PUB fast path's loops (compiled twins in adapters/nats/_speedups.c unless
# FERRY_PURE_PYTHON=1 or no build, core/compiled.py).
COMPILED = _pubscan.COMPILED


class _Op(enum.IntEnum):
    NONE = 0
    PUB = 1
    HPUB = 2
    SUB = 3
    UNSUB = 4
    CONNECT = 5
    INFO = 6
    ERR = 7


class _Sep(enum.Enum):
    REST = 0      # PING/PONG/+OK: ignore to end of line
    REQUIRED = 1  # space or tab must follow the verb
    OPTIONAL = 2  # CONNECT/INFO: spaces and tabs may follow


# (lower-case verb, op, separator rule, event for REST ops); no verb is a prefix of another.
_VERBS: tuple[tuple[bytes, _Op, _Sep, Event | None], ...] = (
    (b"pub", _Op.PUB, _Sep.REQUIRED, None),
    (b"hpub", _Op.HPUB, _Sep.REQUIRED, None),
    (b"ping", _Op.NONE, _Sep.REST, Ping()),
    (b"pong", _Op.NONE, _Sep.REST, Pong()),
    (b"sub", _Op.SUB, _Sep.REQUIRED, None),
    (b"unsub", _Op.UNSUB, _Sep.REQUIRED, None),
    (b"connect", _Op.CONNECT, _Sep.OPTIONAL, None),
    (b"info", _Op.INFO, _Sep.OPTIONAL, None),
    (b"+ok", _Op.NONE, _Sep.REST, Ok()),
    (b"-err", _Op.ERR, _Sep.REQUIRED, None),
)
_LONGEST_VERB = max(len(v[0]) for v in _VERBS)
# The common upper-case forms, tried first with one startswith each.
_FAST: tuple[tuple[bytes, _Op], ...] = (
    (b"PUB ", _Op.PUB), (b"HPUB ", _Op.HPUB), (b"SUB ", _Op.SUB), (b"UNSUB ", _Op.UNSUB),
)
_PING_LINE = b"PING\r\n"
_PONG_LINE = b"PONG\r\n"
_PING, _PONG = Ping(), Pong()


def _silent(detail: str) -> NatsProtocolError:
    """nats-server closes without an -ERR (the parse error goes to its log only)."""
    return NatsProtocolError(None, detail)


def parse_size(digits: bytes) -> int:
    """nats-server ``parseSize``: 1..9 ASCII digits, else -1."""
    if 0 < len(digits) <= MAX_SIZE_DIGITS and digits.isdigit():
        return int(digits)
    return -1


def _split(arg: bytes, crlf_too: bool) -> list[bytes]:
    """Split on runs of spaces and tabs (and CR/LF for SUB/UNSUB, ``splitArg``)."""
    if b"\t" in arg:
        arg = arg.replace(b"\t", b" ")
    if crlf_too and (b"\r" in arg or b"\n" in arg):
        arg = arg.replace(b"\r", b" ").replace(b"\n", b" ")
    parts = arg.split(b" ")
    if b"" in parts:
        parts = [p for p in parts if p]
    return parts


def _text(raw: bytes) -> str:
    return raw.decode(_UTF8, _ESC)


class ServerCodec:
    """Parser of the client-to-server byte stream (see the module docstring).

    ``allow_headers`` (CONNECT had ``headers:true``) and ``connect_only``
    (auth required and no CONNECT yet) are switched by the connection.
    """

    def __init__(self, *, max_payload: int = MAX_PAYLOAD,
                 max_control_line: int = MAX_CONTROL_LINE) -> None:
        if max_payload < 0 or max_control_line <= 0:
            raise ValueError("max_payload must be >= 0 and max_control_line > 0")
        self.max_payload = max_payload
        self.max_control_line = max_control_line
        self.allow_headers = False
        self.connect_only = False
        self.eof = False
        self._buf = bytearray()
        self._pos = 0
        self._op = _Op.NONE        # verb read, argument line pending
        self._in_ws = False        # still skipping the blanks after the verb
        self._skip: Event | None = None   # PING/PONG/+OK whose line end is pending
        self._pending: tuple[_Op, bytes, bytes, int, int] | None = None  # awaiting payload

    @property
    def buffered(self) -> int:
        """Bytes received and not yet consumed."""
        return len(self._buf) - self._pos

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes; ``b""`` marks the end of the stream."""
        if data:
            self._buf += data
        else:
            self.eof = True

    def next_event(self) -> Event | NeedData:
        """One client operation, or ``NEED_DATA``; raises ``NatsProtocolError``."""
        if self._pending is not None:
            return self._payload()
        if self._skip is not None:
            return self._skip_line()
        if self._op is _Op.NONE:
            if self._buf.startswith(b"PUB ", self._pos) and not self.connect_only:
                event = self._fast_pub()
                if event is not None:
                    return event
            started = self._start_op()
            if started is not None:
                return started
        return self._control_line()

    def _fast_pub(self) -> Event | None:
        """``PUB`` in the form every client writes (one blank after the verb,
        CRLF, payload already here): parsed in one step. Returns None to let
        the general path handle anything else, from the same offset."""
        buf, pos = self._buf, self._pos
        start = pos + 4
        nl = buf.find(b"\n", start + 1)
        if nl < 0 or buf[nl - 1] != _CR or nl - 1 - start > self.max_control_line:
            return None
        arg = bytes(buf[start:nl - 1])
        if b"\t" in arg or arg[:1] == b" ":
            return None
        parts = arg.split(b" ")
        if b"" in parts:
            parts = [p for p in parts if p]
        if len(parts) == 2:
            subject, sizeb = parts
            reply = ""
        elif len(parts) == 3:
            reply = parts[1].decode(_UTF8, _ESC)
            subject, sizeb = parts[0], parts[2]
        else:
            return None
        if not (0 < len(sizeb) <= MAX_SIZE_DIGITS and sizeb.isdigit()):
            return None
        size = int(sizeb)
        body = nl + 1
        end = body + size
        if size > self.max_payload or len(buf) < end + 2 or buf[end] != _CR or buf[end + 1] != _LF:
            return None
        self._pos = end + 2
        payload = bytes(buf[body:end]) if size < _VIEW_COPY_MIN else self._copy(body, end)
        return Pub(subject.decode(_UTF8, _ESC), reply, payload)

    def scan_pubs(self, out: list, refuse: Callable[[str, str], bool] | None = None) -> int:
        """Every complete ``PUB`` at the offset in the exact form clients write
        (``PUB <subject> [reply] <size>\\r\\n``, single spaces, payload here),
        parsed in one loop without events (PERF-ANCHORS.md recommendations 1
        and 3). Appends ``(subject, reply, arg, payload)`` to ``out`` per PUB:
        ``arg`` is the raw argument with its CRLF (a MSG line reuses it whole)
        and ``payload`` a bytearray copy. Stops, without consuming it, at the first frame that
        is anything else, or for which ``refuse(subject, reply)`` (called only
        when either starts with ``_`` or ``$``) says the connection must
        answer it; :meth:`next_event` takes over from there, so both paths
        agree by construction. Returns how many PUBs were appended."""
        return self._scan(_pubscan.scan_pubs, out, refuse)

    def scan_runs(self, out: list, refuse: Callable[[str, str], bool] | None = None) -> int:
        """The frames :meth:`scan_pubs` would take, as runs of one subject and
        reply: ``(subject, reply, count, payload_bytes, start, end)`` with
        ``start:end`` in :attr:`buffer`, valid until the next call that parses
        (adapters/nats/pubscan.py). Returns how many runs were appended."""
        return self._scan(_pubscan.scan_runs, out, refuse)

    def _scan(self, loop, out: list, refuse) -> int:
        """Run a pubscan loop from the offset, only between operations."""
        if self._pending is not None or self._skip is not None or self._op is not _Op.NONE \
                or self.connect_only:
            return 0
        before = len(out)
        self._pos = loop(self._buf, self._pos, self.max_control_line, self.max_payload, MAX_SIZE_DIGITS, out,
                         refuse)
        return len(out) - before

    @property
    def buffer(self) -> bytearray:
        """The receive buffer the runs of :meth:`scan_runs` point into."""
        return self._buf

    # -- parsing steps ----------------------------------------------------------
    def _need_data(self) -> NeedData:
        if self._pos:
            del self._buf[:self._pos]   # O(1) for a bytearray prefix
            self._pos = 0
        return NEED_DATA

    def _start_op(self) -> Event | NeedData | None:
        """Read the verb at the offset. Returns an event, NEED_DATA, or None
        once the verb is read and the argument line comes next."""
        buf, pos = self._buf, self._pos
        if pos >= len(buf):
            return self._need_data()
        if self.connect_only and buf[pos] not in b"Cc":
            raise NatsProtocolError(AUTHORIZATION_VIOLATION, "operation before CONNECT")
        for prefix, op in _FAST:
            if buf.startswith(prefix, pos):
                self._op, self._in_ws, self._pos = op, True, pos + len(prefix)
                return None
        if buf.startswith(_PING_LINE, pos):
            self._pos = pos + 6
            return _PING
        if buf.startswith(_PONG_LINE, pos):
            self._pos = pos + 6
            return _PONG
        return self._start_op_slow(buf, pos)

    def _start_op_slow(self, buf: bytearray, pos: int) -> Event | NeedData | None:
        head = bytes(buf[pos:pos + _LONGEST_VERB]).lower()
        partial = False
        for verb, op, sep, event in _VERBS:
            if head.startswith(verb):
                break
            if verb.startswith(head):
                partial = True
        else:
            if partial:
                return self._need_data()
            raise NatsProtocolError(UNKNOWN_PROTOCOL_OPERATION, f"unknown verb at {head!r}")
        after = pos + len(verb)
        if sep is _Sep.REST:
            self._pos = after
            self._skip = event
            return self._skip_line()
        if sep is _Sep.REQUIRED:
            if after >= len(buf):
                return self._need_data()
            if buf[after] not in (_SP, _TAB):
                raise NatsProtocolError(UNKNOWN_PROTOCOL_OPERATION, f"no blank after {verb!r}")
            after += 1
        self._op, self._in_ws, self._pos = op, True, after
        return None

    def _skip_line(self) -> Event | NeedData:
        buf = self._buf
        nl = buf.find(b"\n", self._pos)
        if nl < 0:
            self._pos = len(buf)   # ignored bytes: drop them as they come
            return self._need_data()
        event, self._skip = self._skip, None
        self._pos = nl + 1
        return event  # type: ignore[return-value]

    def _control_line(self) -> Event | NeedData:
        buf, pos = self._buf, self._pos
        n = len(buf)
        if self._in_ws:
            while pos < n and buf[pos] in (_SP, _TAB):
                pos += 1
            self._pos = pos
            if pos >= n:
                return self._need_data()
            self._in_ws = False
        # buf[pos] starts the argument even if it is CR or LF (parser.go *_SPC states).
        nl = buf.find(b"\n", pos + 1)
        if nl < 0:
            # Same drop rule as a complete line, so the count only grows as bytes
            # arrive and the outcome does not depend on how the line was split.
            pending = n - pos - (1 if buf.find(b"\r", pos + 1) >= 0 else 0)
            if pending > self.max_control_line:
                raise NatsProtocolError(MAX_CONTROL_LINE_EXCEEDED, f"unterminated line of {pending} bytes")
            return self._need_data()
        end = nl
        if nl - 1 > pos and (buf[nl - 1] == _CR or buf.find(b"\r", pos + 1, nl) >= 0):
            end = nl - 1
        if end - pos > self.max_control_line:
            raise NatsProtocolError(MAX_CONTROL_LINE_EXCEEDED, f"argument of {end - pos} bytes")
        arg = bytes(buf[pos:end])
        op, self._op = self._op, _Op.NONE
        self._pos = nl + 1
        return _ARG_HANDLERS[op](self, arg)

    def _pub_line(self, arg: bytes) -> Event | NeedData:
        parts = _split(arg, False)
        if len(parts) == 2:
            subject, sizeb = parts
            reply = b""
        elif len(parts) == 3:
            subject, reply, sizeb = parts
        else:
            raise _silent(f"PUB with {len(parts)} arguments: {arg[:64]!r}")
        size = parse_size(sizeb)
        if size < 0:
            raise _silent(f"PUB with a bad size: {arg[:64]!r}")
        if size > self.max_payload:
            raise NatsProtocolError(MAX_PAYLOAD_VIOLATION, f"{size} > {self.max_payload}")
        self._pending = (_Op.PUB, subject, reply, 0, size)
        return self._payload()

    def _hpub_line(self, arg: bytes) -> Event | NeedData:
        if not self.allow_headers:
            raise _silent("HPUB without headers:true in CONNECT")
        parts = _split(arg, False)
        if len(parts) == 3:
            subject, hdrb, sizeb = parts
            reply = b""
        elif len(parts) == 4:
            subject, reply, hdrb, sizeb = parts
        else:
            raise _silent(f"HPUB with {len(parts)} arguments: {arg[:64]!r}")
        hdr, size = parse_size(hdrb), parse_size(sizeb)
        if hdr < 0 or size < 0:
            raise _silent(f"HPUB with a bad size: {arg[:64]!r}")
        if hdr > size:
            raise _silent(f"HPUB header size {hdr} > total size {size}")
        if size > self.max_payload:
            raise NatsProtocolError(MAX_PAYLOAD_VIOLATION, f"{size} > {self.max_payload}")
        self._pending = (_Op.HPUB, subject, reply, hdr, size)
        return self._payload()

    def _payload(self) -> Event | NeedData:
        op, subject, reply, hdr, size = self._pending  # type: ignore[misc]
        buf, start = self._buf, self._pos
        end = start + size
        n = len(buf)
        if n <= end + 1:
            if n > end and buf[end] != _CR:
                raise NatsProtocolError(UNKNOWN_PROTOCOL_OPERATION, "payload not followed by CRLF")
            return self._need_data()
        if buf[end] != _CR or buf[end + 1] != _LF:
            raise NatsProtocolError(UNKNOWN_PROTOCOL_OPERATION, "payload not followed by CRLF")
        self._pending = None
        self._pos = end + 2
        if op is _Op.PUB:
            return Pub(_text(subject), _text(reply), self._copy(start, end))
        return HPub(_text(subject), _text(reply), self._copy(start, start + hdr),
                    self._copy(start + hdr, end))

    def _copy(self, start: int, end: int) -> bytes:
        if end - start < _VIEW_COPY_MIN:
            return bytes(self._buf[start:end])
        with memoryview(self._buf) as view:
            return view[start:end].tobytes()

    def _sub_line(self, arg: bytes) -> Event:
        parts = _split(arg, True)
        if len(parts) == 2:
            return Sub(_text(parts[0]), "", parts[1])
        if len(parts) == 3:
            return Sub(_text(parts[0]), _text(parts[1]), parts[2])
        raise _silent(f"SUB with {len(parts)} arguments: {arg[:64]!r}")

    def _unsub_line(self, arg: bytes) -> Event:
        parts = _split(arg, True)
        if len(parts) == 1:
            return Unsub(parts[0], 0)
        if len(parts) == 2:
            return Unsub(parts[0], max(parse_size(parts[1]), 0))
        raise _silent(f"UNSUB with {len(parts)} arguments: {arg[:64]!r}")

    def _connect_line(self, arg: bytes) -> Event:
        return parse_connect(arg)

    def _info_line(self, arg: bytes) -> Event:
        value = _go_json(arg, "INFO")
        if value is None:
            return Info({})
        if not isinstance(value, _JsonObject):
            raise _silent("INFO from client is not a JSON object")
        return Info(dict(value))

    def _err_line(self, arg: bytes) -> Event:
        return Err(_text(arg))


_ARG_HANDLERS = {
    _Op.PUB: ServerCodec._pub_line, _Op.HPUB: ServerCodec._hpub_line,
    _Op.SUB: ServerCodec._sub_line, _Op.UNSUB: ServerCodec._unsub_line,
    _Op.CONNECT: ServerCodec._connect_line, _Op.INFO: ServerCodec._info_line,
    _Op.ERR: ServerCodec._err_line,
}


# -- CONNECT JSON, read the way Go's encoding/json fills ClientOpts -------------------
class _JsonObject(list):
    """A JSON object as its (key, value) pairs in document order."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")   # Python accepts NaN/Infinity; Go does not


def _go_json(arg: bytes, what: str) -> Any:
    """Parse like ``json.Unmarshal``: invalid UTF-8 is replaced, not an error.
    Nesting past Python's recursion limit (about 1,000 levels; a 4,096-byte line holds
    about 4,000) is bad JSON too, not a RecursionError out of the codec
    (tests/fuzz/regressions/nats_server). A limit: Go's decoder allows 10,000 levels, so
    an object with an unknown field nested 1,000-2,000 deep passes nats-server, not us."""
    try:
        return json.loads(arg.decode(_UTF8, "replace"), object_pairs_hook=_JsonObject,
                          parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise _silent(f"{what}: bad JSON ({exc})") from None


# JSON name -> (Connect attribute, kind). nats-server ClientOpts (client.go);
# fields we do not act on are still type-checked because Go refuses a bad type.
_CONNECT_FIELDS: dict[str, tuple[str | None, str]] = {
    "echo": ("echo", "bool"), "verbose": ("verbose", "bool"), "pedantic": ("pedantic", "bool"),
    "tls_required": ("tls_required", "bool"), "headers": ("headers", "bool"),
    "no_responders": ("no_responders", "bool"), "new_account": ("new_account", "bool"),
    "protocol": ("protocol", "int"),
    "name": ("name", "str"), "lang": ("lang", "str"), "version": ("version", "str"),
    "user": ("user", "str"), "pass": ("password", "str"), "auth_token": ("auth_token", "str"),
    "nkey": ("nkey", "str"), "jwt": ("jwt", "str"), "sig": ("sig", "str"),
    "account": ("account", "str"),
    "remote_account": (None, "str"), "proxy_sig": (None, "str"),
    "import": (None, "object"), "export": (None, "object"),
}
_GO_INT_MIN, _GO_INT_MAX = -(2**63), 2**63 - 1  # Go int on 64-bit


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "bool":
        return type(value) is bool
    if kind == "str":
        return type(value) is str
    if kind == "int":
        return type(value) is int and _GO_INT_MIN <= value <= _GO_INT_MAX
    return isinstance(value, _JsonObject)


def parse_connect(arg: bytes) -> Connect:
    """``CONNECT`` JSON -> :class:`Connect` holding the fields that were set.

    Follows ``json.Unmarshal`` into nats-server's ``ClientOpts``: keys match
    case-insensitively, the last one wins, unknown keys are ignored, ``null``
    leaves a field alone, and a value of the wrong type (or a number that is
    not an integer for ``protocol``) is an error. Any error closes the
    connection without ``-ERR`` (raises a silent ``NatsProtocolError``).
    """
    value = _go_json(arg, "CONNECT")
    if value is None:
        return Connect()
    if not isinstance(value, _JsonObject):
        raise _silent("CONNECT argument is not a JSON object")
    values: dict[str, Any] = {}
    for key, item in value:
        spec = _CONNECT_FIELDS.get(key) or _CONNECT_FIELDS.get(key.lower() if key.isascii() else key)
        if spec is None or item is None:
            continue
        attr, kind = spec
        if not _type_ok(item, kind):
            raise _silent(f"CONNECT field {key!r} has the wrong type")
        if attr is not None:
            values[attr] = item
    return Connect(**values, fields=frozenset(values))


# -- encoders (server -> client) --------------------------------------------------
# Go's Info struct order (server.go): encoding/json writes fields in this order.
INFO_FIELD_ORDER = (
    "server_id", "server_name", "version", "proto", "git_commit", "go", "host", "port",
    "headers", "auth_required", "tls_required", "tls_verify", "tls_available", "max_payload",
    "jetstream", "ip", "client_id", "client_ip", "nonce", "cluster", "cluster_dynamic",
    "domain", "connect_urls", "ws_connect_urls", "ldm", "compression", "connect_info",
    "remote_account", "acc_is_sys", "api_lvl", "xkey",
)
_INFO_RANK = {name: i for i, name in enumerate(INFO_FIELD_ORDER)}
# encoding/json escapes these for HTML safety; done here for byte-equal INFO lines.
_GO_JSON_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


def encode_info(fields: Mapping[str, Any]) -> bytes:
    """``INFO <json> \\r\\n`` exactly as nats-server writes it (``generateInfoJSON``:
    compact JSON, Go field order, a space before CRLF)."""
    ordered = sorted(fields, key=lambda k: _INFO_RANK.get(k, len(_INFO_RANK)))
    text = json.dumps({k: fields[k] for k in ordered}, ensure_ascii=False, separators=(",", ":"))
    for raw, escaped in _GO_JSON_ESCAPES:
        if raw in text:
            text = text.replace(raw, escaped)
    return b"INFO " + text.encode(_UTF8) + b" \r\n"


def encode_err(text: str) -> bytes:
    """``-ERR '<text>'\\r\\n``."""
    return err_frame(text)


def _line(verb: bytes, subject: bytes, sid: bytes, reply: bytes, sizes: bytes) -> bytes:
    if reply:
        return b"".join((verb, subject, b" ", sid, b" ", reply, b" ", sizes, CRLF))
    return b"".join((verb, subject, b" ", sid, b" ", sizes, CRLF))


def encode_msg(subject: bytes, sid: bytes, reply: bytes,
               payload: bytes | memoryview) -> list[bytes | memoryview]:
    """``MSG`` as fragments ``[line, payload, CRLF]``; the payload is not copied."""
    return [_line(b"MSG ", subject, sid, reply, b"%d" % len(payload)), payload, CRLF]


def encode_hmsg(subject: bytes, sid: bytes, reply: bytes, header: bytes,
                payload: bytes | memoryview) -> list[bytes | memoryview]:
    """``HMSG`` as fragments ``[line, header, payload, CRLF]``; nothing is copied."""
    sizes = b"%d %d" % (len(header), len(header) + len(payload))
    return [_line(b"HMSG ", subject, sid, reply, sizes), header, payload, CRLF]


class PreparedMessage:
    """One published message, encoded once for every subscriber.

    The parts of the ``MSG``/``HMSG`` line that do not depend on the
    subscriber are built here; :meth:`append_to` adds the sid and appends
    the fragments (sharing ``header`` and ``payload``) to a writer's list, to
    be joined once per flush. An empty ``header`` is a plain message.
    """

    __slots__ = ("header", "payload", "_msg_head", "_msg_tail", "_hmsg_head", "_hmsg_tail",
                 "_body", "_hbody")

    def __init__(self, subject: bytes, reply: bytes, payload: bytes | memoryview,
                 header: bytes = b"") -> None:
        self.header = header
        self.payload = payload
        tail_reply = b" " + reply if reply else b""
        plen = len(payload)
        self._msg_head = b"MSG " + subject + b" "
        self._msg_tail = tail_reply + b" %d\r\n" % plen
        self._body = plen + 2
        self._hmsg_head = b"HMSG " + subject + b" "
        self._hmsg_tail = tail_reply + b" %d %d\r\n" % (len(header), len(header) + plen)
        self._hbody = len(header) + plen + 2

    def append_to(self, out: list, sid: bytes, headers: bool) -> int:
        """Append this message for subscription ``sid`` to ``out``; returns the
        bytes appended. ``headers`` is False for clients without header support,
        which get a ``MSG`` with the payload only (nats-server, nats.md section 8)."""
        if headers and self.header:
            line = self._hmsg_head + sid + self._hmsg_tail
            out += (line, self.header, self.payload, CRLF)
            return len(line) + self._hbody
        line = self._msg_head + sid + self._msg_tail
        out += (line, self.payload, CRLF)
        return len(line) + self._body

    def counted(self, headers: bool) -> int:
        """The bytes nats-server counts as sent for one delivery (``out_bytes``,
        server/client.go deliverMsg: the header block when the client takes
        headers, plus the payload; no protocol line, no CRLF)."""
        return self._hbody - 2 if headers and self.header else self._body - 2


def join_frames(frames: Iterable[bytes | memoryview]) -> bytes:
    """One ``b"".join`` for a list of fragments (STYLE.md section 7)."""
    return b"".join(frames)


__all__ = [
    "CRLF", "INFO_FIELD_ORDER", "MAX_CONTROL_LINE", "MAX_PAYLOAD", "MAX_SIZE_DIGITS", "OK_FRAME",
    "PING_FRAME", "PONG_FRAME", "PreparedMessage", "ServerCodec", "encode_err", "encode_hmsg",
    "encode_info", "encode_msg", "join_frames", "parse_connect", "parse_size",
]
