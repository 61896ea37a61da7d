"""Pravega segment-store framing: bytes in, commands out (pravega.md sections 1 and 5.2).

Theory of operation
-------------------
:class:`FrameDecoder` keeps one ``bytearray`` and a read position (STYLE.md
section 7). :meth:`FrameDecoder.next_event` reads one frame header
(``type i32``, ``length i32``), checks it at once, waits for the payload,
decodes it through the command table (:mod:`adapters.pravega.commands`) and
returns the command, or :data:`NEED_DATA`. The consumed prefix is dropped
only when it returns ``NEED_DATA``, so a burst of small frames costs one
compaction, and bytes arriving one at a time cost O(1) each.

Header checks follow the upstream server (section 1): a negative length, a
frame longer than the length-field decoder's maximum, or an unknown type is
fatal (:class:`PravegaProtocolError`; the server closes the connection). We
check the type as soon as the header is in, rather than after the payload,
so a garbage stream fails on its first eight bytes.

Append blocks (section 5.2, upstream ``AppendDecoder``) are reassembled
here, because the rules are about frame order. An AppendBlock is held, not
returned; the very next frame must be the AppendBlockEnd of the same writer;
``sizeOfWholeEvents`` must lie within the block; the block's remainder after
the whole events must be exactly one PartialEvent or Padding frame (Padding
only with empty end data); ``numEvents`` must be positive. The result is one
:class:`Append` whose data is ``whole events || partial payload || end data``.
A standalone AppendBlockEnd (all the Rust client sends, section 5.3) becomes
an :class:`Append` of its ``data``. Event, PartialEvent and Padding frames
at top level are refused: they only exist inside a block.

What this layer does *not* check: the event frames inside ``Append.data``
(the session does, with :func:`split_events`; ConditionalBlockEnd carries raw
bytes), SetupAppend-before-append and event numbers going backwards (they
need per-writer state: the session's job).

After an error the decoder stays failed: every later :meth:`next_event`
raises the same error. ``receive_data(b"")`` marks EOF; EOF inside a frame
or with a block held is an error, EOF between frames is ``NEED_DATA``.
No I/O, no clock, no trio.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

from . import commands
from .commands import HEADER, HEADER_SIZE
from .errors import PravegaProtocolError

# Upstream's server pipeline starts with netty's LengthFieldBasedFrameDecoder(MAX_WIRECOMMAND_SIZE,
# 4, 4), which counts the 8-byte header in the frame length: 0x00FFFFFF = 16 MiB - 1 (section 1).
MAX_FRAME = 0x00FFFFFF
MAX_PAYLOAD = MAX_FRAME - HEADER_SIZE
# Compact the receive buffer once this much is consumed and still waiting for more; below it,
# only when everything is consumed (then clearing is free). Bounds the memory held by parsed bytes.
COMPACT_AT = 1 << 16

_APPEND_BLOCK = commands.CODE_OF[commands.AppendBlock]
_APPEND_BLOCK_END = commands.CODE_OF[commands.AppendBlockEnd]
_PARTIAL_EVENT = commands.CODE_OF[commands.PartialEvent]
_PADDING = commands.CODE_OF[commands.Padding]
_EVENT = commands.CODE_OF[commands.Event]
_SPECS = commands.TABLE.by_code


class NeedData(enum.Enum):
    """Returned by :meth:`FrameDecoder.next_event` when no complete command is buffered."""

    NEED_DATA = "NEED_DATA"


NEED_DATA = NeedData.NEED_DATA


@dataclass(frozen=True, slots=True)
class Append:
    """One reassembled append (section 5.2): fires for an AppendBlock + AppendBlockEnd pair
    (Java) or a standalone AppendBlockEnd (Rust). ``data`` is normally event frames; it is not
    checked here. ``last_event_number`` and ``request_id`` come from the AppendBlockEnd."""

    writer_id: uuid.UUID
    data: bytes
    num_events: int
    last_event_number: int
    request_id: int


def encode(cmd) -> bytes:
    """The frame of ``cmd`` (see :func:`commands.encode`), refusing one longer than the peer's
    decoder accepts: ``ValueError``, since building it is our bug."""
    frame = commands.encode(cmd)
    if len(frame) > MAX_FRAME:
        raise ValueError(f"{type(cmd).__name__} frame of {len(frame)} bytes exceeds {MAX_FRAME}")
    return frame


class FrameDecoder:
    """Client or server bytes -> commands and :class:`Append` events (module docstring)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._eof = False
        self._block: commands.AppendBlock | None = None  # held until its AppendBlockEnd
        self._error: PravegaProtocolError | None = None

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Buffer ``data``; ``b""`` means the peer closed its side. Parses nothing."""
        if self._eof and data:
            raise RuntimeError("receive_data after EOF")
        if not data:
            self._eof = True
        else:
            self._buf += data

    def next_event(self):
        """One command or :class:`Append`, or :data:`NEED_DATA`. Raises :class:`PravegaProtocolError`
        (then again on every later call)."""
        if self._error is not None:
            raise self._error
        try:
            return self._next()
        except PravegaProtocolError as exc:
            self._error = exc
            self._block = None
            raise

    def _next(self):
        while True:
            buf, pos = self._buf, self._pos
            avail = len(buf) - pos
            if avail < HEADER_SIZE:
                return self._need_data(avail)
            code, length = HEADER.unpack_from(buf, pos)
            if length < 0:
                raise PravegaProtocolError(f"negative frame length {length}")
            if length > MAX_PAYLOAD:
                raise PravegaProtocolError(f"frame length {length} exceeds {MAX_PAYLOAD}")
            spec = _SPECS.get(code)
            if spec is None:
                raise PravegaProtocolError(f"unknown command type {code}")
            if self._block is not None and code != _APPEND_BLOCK_END:
                # AppendDecoder: after an AppendBlock only its AppendBlockEnd may come.
                raise PravegaProtocolError(f"{spec.name} after an AppendBlock, expected AppendBlockEnd")
            if spec.block_only:
                raise PravegaProtocolError(f"{spec.name} outside an AppendBlock")
            if avail < HEADER_SIZE + length:
                return self._need_data(avail)
            start = pos + HEADER_SIZE
            # The view is released before returning, so the buffer can still be resized;
            # the types copy what they keep.
            with memoryview(buf) as view, view[start : start + length] as payload:
                cmd = spec.decode(commands.V, payload)
            self._pos = start + length
            if code == _APPEND_BLOCK:
                self._block = cmd
                continue
            if code == _APPEND_BLOCK_END:
                return self._append(cmd)
            return cmd

    def _need_data(self, avail: int) -> NeedData:
        if self._eof and (avail or self._block is not None):
            what = "an AppendBlock" if avail == 0 else "a frame"
            raise PravegaProtocolError(f"connection closed inside {what}")
        if self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        elif self._pos >= COMPACT_AT:
            del self._buf[: self._pos]
            self._pos = 0
        return NEED_DATA

    def _append(self, end: commands.AppendBlockEnd) -> Append:
        """Apply section 5.2's rules to ``end`` and the held block (if any)."""
        block, self._block = self._block, None
        if end.num_events <= 0:
            raise PravegaProtocolError(f"numEvents {end.num_events} is not positive")
        if block is None:  # standalone: the data is the append (Rust client, section 5.3)
            data = end.data
        else:
            data = _reassemble(block, end)
        return Append(end.writer_id, data, end.num_events, end.last_event_number, end.request_id)


def _reassemble(block: commands.AppendBlock, end: commands.AppendBlockEnd) -> bytes:
    if end.writer_id != block.writer_id:
        raise PravegaProtocolError(f"AppendBlockEnd writer {end.writer_id} does not match "
                                   f"AppendBlock writer {block.writer_id}")
    whole = end.size_of_whole_events
    size = len(block.data)
    if not 0 <= whole <= size:
        raise PravegaProtocolError(f"sizeOfWholeEvents {whole} outside the block's {size} bytes")
    remainder = size - whole
    if remainder == 0:
        # Whole events fill the block (the unbatched form: one event, empty end data). Upstream
        # drops end.data here; we keep the section 5.2 formula, so nothing is ever lost silently.
        return block.data + end.data if end.data else block.data
    if remainder < HEADER_SIZE:
        raise PravegaProtocolError(f"block remainder of {remainder} bytes is not a PartialEvent or Padding frame")
    code, length = HEADER.unpack_from(block.data, whole)
    if code not in (_PARTIAL_EVENT, _PADDING):
        spec = _SPECS.get(code)
        raise PravegaProtocolError(f"block ends with {spec.name if spec else code}, "
                                   "expected PartialEvent or Padding")
    if length != remainder - HEADER_SIZE:
        raise PravegaProtocolError(f"block's final frame length {length}, expected {remainder - HEADER_SIZE}")
    view = memoryview(block.data)
    if code == _PADDING:
        if end.data:
            raise PravegaProtocolError("Padding closes the block but AppendBlockEnd carries data")
        return bytes(view[:whole])
    return b"".join((view[:whole], view[whole + HEADER_SIZE :], end.data))


# An event frame, `0: i32, len: i32, payload` (sections 4.1, 6), has the command frame's header.


def event_frame(payload: bytes) -> bytes:
    """``payload`` as one stored event frame: ``[0: i32][len: i32][payload]``."""
    return HEADER.pack(_EVENT, len(payload)) + payload


def split_events(data: bytes) -> list[memoryview]:
    """The payloads of the event frames that make up ``data`` exactly, as views into it.

    Raises :class:`PravegaProtocolError` for a frame type other than 0, a negative length,
    or a frame cut short at the end."""
    view = memoryview(data)
    out: list[memoryview] = []
    pos, end = 0, len(view)
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise PravegaProtocolError(f"partial event header at offset {pos}")
        code, length = HEADER.unpack_from(view, pos)
        if code != _EVENT:
            raise PravegaProtocolError(f"event frame type {code} at offset {pos}, expected 0")
        if length < 0:
            raise PravegaProtocolError(f"negative event length {length} at offset {pos}")
        pos += HEADER_SIZE
        if length > end - pos:
            raise PravegaProtocolError(f"event of {length} bytes at offset {pos - HEADER_SIZE} is cut short")
        out.append(view[pos : pos + length])
        pos += length
    return out


__all__ = ["Append", "COMPACT_AT", "FrameDecoder", "MAX_FRAME", "MAX_PAYLOAD", "NEED_DATA", "NeedData",
           "encode", "event_frame", "split_events"]
