"""The Iggy server connection: bytes in, requests out; replies in, bytes out.

Theory of operation
-------------------
A sans-I/O state machine in the h11 style (STYLE.md section 2):
``receive_data`` only buffers, ``next_event`` parses at most one frame,
``send`` encodes one reply, ``data_to_send`` hands the driver what to write.

States and transitions (anything else is a local bug, raised as
:class:`LocalProtocolError`):

=============  =====================  ==================================
state          on                     goes to
=============  =====================  ==================================
DETECT         8 bytes buffered       LEGACY or VSR (codec.is_legacy_start)
LEGACY / VSR   a whole frame          AWAIT_REPLY once ``max_in_flight``
                                      requests wait for replies (1 by
                                      default: Iggy clients are lockstep,
                                      iggy.md 1.1), else stays
AWAIT_REPLY    send(Reply)            LEGACY / VSR
AWAIT_REPLY    send(Evict)            CLOSED
any            fatal framing error    ERROR (stays; the driver closes)
=============  =====================  ==================================

Replies go out in request order: ``send`` answers the oldest request still
waiting. A driver may raise ``max_in_flight`` to read on while sends wait for
their durability acks (a pipelining producer, driver.py); with the default of
1 this is the strict lockstep machine.

The dialect (spec.py) is 3 for VSR. Legacy frames decode as dialect 2 until
a LoginUser's version string says otherwise (1, 4 or 5) (iggy-middle.md 3.1: before
login, the two legacy generations send only Ping, GetStats and the logins,
whose layouts are identical). A PAT login carries no version, so after one
the first frame whose layout differs between dialects 1 and 2 decides, by
the structural checks of iggy-middle.md 3.1 step 4 (:func:`guess_legacy_dialect`);
until then frames decode as dialect 2. Those checks tell only dialect 1's
numbering from dialect 2's; a PAT login from apache-iggy 0.5.0 or 0.6.0 (whose
Python APIs have no PAT login) would be taken for 1 or 2.
"""

from __future__ import annotations

import enum
import re

from .codec import (
    VsrHeader, is_legacy_start, legacy_reply, parse_legacy, parse_vsr, vsr_eviction, vsr_reply,
)
from .errors import IggyError, IggyStatus
from .events import NEED_DATA, BadRequest, Evict, Reply, Request
from .spec import COMMANDS, LOGIN_PAT, LOGIN_USER
from .types import ConsumerRef, Identifier

_RESULT_OK = b"\0\0\0\0"  # iggy-current.md 4.3: result section with count 0
_VERSION = re.compile(r"(\d+)\.(\d+)")


class State(enum.Enum):
    DETECT = "detect"
    LEGACY = "legacy"
    VSR = "vsr"
    AWAIT_REPLY = "await_reply"
    CLOSED = "closed"
    ERROR = "error"


class LocalProtocolError(Exception):
    """We misused the state machine (a bug on our side, never the peer's)."""


def guess_legacy_dialect(code: int, body) -> int | None:
    """Dialect 1 or 2 from the shape of a legacy frame whose layout differs between
    them (iggy-middle.md 3.1 step 4), or ``None`` when the frame cannot tell."""
    try:
        n = len(body)
        if code == 12:  # GetClusterMetadata: only middle clients send it
            return 2
        if code == 101 and n:  # dialect 2 starts with u32 metadata_length >= 12, not an Id kind byte
            return 1 if body[0] in (1, 2) else 2
        if code == 202 and n:
            if n >= 5 and n == 5 + body[4]:
                return 1
            return 2 if n == 1 + body[0] else None
        if code in (100, 120, 121, 122):
            _c, pos = ConsumerRef.read(body, 0, n)
            _s, pos = Identifier.read(body, pos, n)
            _t, pos = Identifier.read(body, pos, n)
            left = n - pos
            return {(100, 18): 1, (100, 19): 2, (120, 4): 1, (120, 5): 2, (121, 12): 1, (121, 13): 2,
                    (122, 4): 1, (122, 5): 2}.get((code, left))
        if code in (302, 602):
            _s, pos = Identifier.read(body, 0, n)
            if code == 602:
                _t, pos = Identifier.read(body, pos, n)
            rest = n - pos
            fixed = 26 if code == 302 else 4  # the u32 id (and topic settings) before the name
            if rest > fixed and rest == fixed + 1 + body[pos + fixed]:
                return 1
            return 2
    except (IggyStatus, IndexError):
        return None
    return None


def dialect_for_version(version: str) -> int:
    """iggy-middle.md 3.1 (the SDK's crate version): empty or < 0.7 -> dialect 1;
    0.7.x (apache-iggy 0.5.0) -> 5; 0.8.x (apache-iggy 0.6.0) -> 4; newer -> 2."""
    m = _VERSION.match(version or "")
    if m is None:
        return 1
    major_minor = (int(m.group(1)), int(m.group(2)))
    if major_minor < (0, 7):
        return 1
    return {(0, 7): 5, (0, 8): 4}.get(major_minor, 2)


class IggyServerConnection:
    """One client connection's protocol state (no sockets, no clock)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._out: list[bytes] = []
        self.state = State.DETECT
        self._framing: State | None = None
        self.dialect = 2
        self._guessing = False  # after a versionless (PAT) login: the next telling frame decides
        self._vsr: VsrHeader | None = None
        self._pending_cmd = None
        # (VSR header, command) of each request parsed and not yet answered, oldest
        # first. A list, not a deque: at most max_in_flight (the driver's 32) entries,
        # and an empty deque holds a 64-slot block (~700 bytes) per idle connection.
        self._awaiting: list = []
        self.max_in_flight = 1
        self.last_frame_size = 0  # bytes of the frame next_event parsed last (driver's read-ahead bound)
        self.eof = False

    # -- input ---------------------------------------------------------------------
    def receive_data(self, data: bytes | bytearray) -> None:
        """Buffer bytes from the peer; ``b""`` means end of file."""
        if not data:
            self.eof = True
            return
        self._buf += data

    def next_event(self):
        """One :class:`Request` / :class:`BadRequest`, or ``NEED_DATA``.

        Raises :class:`IggyStatus` with ``fatal`` for unrecoverable framing; the
        error reply is then already queued in :meth:`data_to_send`."""
        if self.state in (State.ERROR, State.CLOSED, State.AWAIT_REPLY):
            return NEED_DATA
        try:
            return self._next()
        except IggyStatus as err:
            if err.fatal:
                self.state = State.ERROR  # (requests parsed before still get their replies)
                if self._framing is State.LEGACY:
                    self._out.append(legacy_reply(err.code))
            raise

    def _next(self):
        if self.state is State.DETECT:
            if len(self._buf) < 8:
                return NEED_DATA
            self._framing = State.LEGACY if is_legacy_start(bytes(self._buf[:8]), COMMANDS.by_code) else State.VSR
            if self._framing is State.VSR:
                self.dialect = 3
            self.state = self._framing
        if self._framing is State.LEGACY:
            frame = parse_legacy(self._buf, self._pos)
            if frame is None:
                return self._need()
            code, start, end, nxt = frame
            vsr = None
        else:
            frame = parse_vsr(self._buf, self._pos)
            if frame is None:
                return self._need()
            vsr, start, end, nxt = frame
            code = vsr.code if vsr.operation == 2 else 0
        self.last_frame_size = nxt - self._pos
        self._pos = nxt
        self._vsr = vsr
        event = self._decode(code, vsr, start, end)
        self._awaiting.append((vsr, self._pending_cmd))
        if len(self._awaiting) >= self.max_in_flight:
            self.state = State.AWAIT_REPLY
        return event

    def _decode(self, code: int, vsr: VsrHeader | None, start: int, end: int):
        if vsr is not None and vsr.operation != 2:
            return self._decode_vsr_op(vsr, start, end)
        if self._guessing:
            guess = guess_legacy_dialect(code, bytes(self._buf[start:end]))  # rare: one copy
            if guess is not None:
                self.dialect, self._guessing = guess, False
        cmd = COMMANDS.get(code, self.dialect)
        if cmd is None:
            self._pending_cmd = None
            return BadRequest(code, IggyError.INVALID_COMMAND, "unknown command", vsr)
        self._pending_cmd = cmd
        try:
            value = cmd.decode(self.dialect, self._buf, start, end)
        except IggyStatus as err:
            return BadRequest(code, err.code, err.detail, vsr, cmd)
        if cmd is LOGIN_USER:
            self.dialect = dialect_for_version(value.version)
            self._guessing = False
        elif cmd is LOGIN_PAT:
            self._guessing = True
        return Request(cmd, value, self.dialect, vsr)

    def _decode_vsr_op(self, vsr: VsrHeader, start: int, end: int):
        """A replicated/register/logout operation: the op byte implies the command.
        Register (op 1) carries a password or a PAT login; try the password shape
        first (iggy-current.md 6.4)."""
        if vsr.operation == 1:
            candidates = [COMMANDS.by_code[40], COMMANDS.by_code[45]]
        else:
            cmd = COMMANDS.by_vsr_op.get(vsr.operation)
            candidates = [cmd] if cmd is not None else []
        if not candidates:
            self._pending_cmd = None
            return BadRequest(0, IggyError.INVALID_COMMAND, f"unknown operation {vsr.operation}", vsr)
        error: IggyStatus | None = None
        for cmd in candidates:
            self._pending_cmd = cmd
            try:
                return Request(cmd, cmd.decode(3, self._buf, start, end), 3, vsr)
            except IggyStatus as err:
                error = error or err
        return BadRequest(candidates[0].code, error.code, error.detail, vsr, candidates[0])

    def _need(self):
        # Drop the consumed prefix only when we are about to wait (STYLE.md 7).
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        return NEED_DATA

    # -- output --------------------------------------------------------------------
    def send(self, event: Reply | Evict, *, session: int = 0) -> None:
        """Queue the reply to the oldest request still waiting for one."""
        if not self._awaiting or self.state in (State.CLOSED, State.DETECT):
            raise LocalProtocolError(f"cannot send {type(event).__name__} in state {self.state}")
        vsr, pending_cmd = self._awaiting.pop(0)
        if isinstance(event, Evict):
            if vsr is None:
                raise LocalProtocolError("Evict is VSR-only")
            self._out.append(vsr_eviction(vsr.client, event.reason))
            self.state = State.CLOSED
            return
        if self._framing is State.LEGACY:
            self._out.append(legacy_reply(event.status, event.body))
        else:
            body = event.body
            cmd = event.command or pending_cmd
            if not event.status and cmd is not None and cmd.result_framed:
                body = _RESULT_OK + body
            self._out.append(vsr_reply(vsr, event.status, body, session))
        if self.state is not State.ERROR:  # replies to requests before a fatal frame still go out
            self.state = self._framing

    @property
    def in_flight(self) -> int:
        """Requests parsed and not answered yet."""
        return len(self._awaiting)

    def data_to_send(self) -> bytes:
        out = b"".join(self._out)
        self._out.clear()
        return out

    @property
    def vsr_header(self) -> VsrHeader | None:
        return self._vsr


__all__ = ["IggyServerConnection", "LocalProtocolError", "State", "dialect_for_version"]
