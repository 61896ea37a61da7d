"""Iggy framing: legacy ``length/code`` frames and 256-byte VSR envelopes.

Theory of operation
-------------------
Three dialects share one port (adapters/iggy/spec.py). The first 8 bytes of a
connection pick the framing (iggy-current.md section 3.1): ``u32 a, u32 b``
with ``4 <= a < MAX_FRAME`` and ``b`` a known legacy code is the legacy
framing; anything else (apache-iggy 0.9.0 sends 16 zero checksum bytes first)
is VSR. Inside the legacy framing the login's version string later picks
dialect 1 or 2 (iggy-middle.md section 3.1).

* Legacy request: ``u32 length (= 4 + N), u32 code, N body bytes``; reply
  ``u32 status, u32 length (body only), body`` (iggy.md 1.1).
* VSR request: 256-byte header (size at 48, command byte 60 = 5 Request,
  client at 128, request checksum at 144, request number at 168, operation at
  176, session at 184, code at 196 for operation 2) then the body; reply:
  256-byte header (size, command 8 = Reply, echoes, operation at 208, status
  at 216) then the body (iggy-current.md 4.1-4.2).

Parsers here read from a ``bytearray`` by offset and return ``None`` until a
whole frame is there; they never raise anything but :class:`IggyStatus`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import IggyError, IggyStatus

# A request frame larger than this is refused and the connection closed: Iggy's
# server reads at most 10 MB for control frames and its send path caps a batch's
# payload at 64 MB (iggy-middle.md 4 and 6.11); 64 MiB + metadata bounds both.
MAX_FRAME = 64 * 1024 * 1024 + 64 * 1024
LEGACY_HEAD = struct.Struct("<II")
VSR_HEADER_SIZE = 256
VSR_REQUEST = 5  # header command byte of a request
VSR_REPLY = 8
VSR_EVICTION = 13
_U32 = struct.Struct("<I")


def is_legacy_start(first8: bytes, known_codes) -> bool:
    """True when the first 8 bytes of a connection are a legacy ``length, code``."""
    length, code = LEGACY_HEAD.unpack_from(first8, 0)
    return 4 <= length < MAX_FRAME and code in known_codes


def parse_legacy(buf: bytearray, pos: int) -> tuple[int, int, int, int] | None:
    """``(code, body_start, body_end, next_pos)`` of the frame at ``pos``, or
    ``None`` when incomplete. A length below 4 or above :data:`MAX_FRAME` is
    fatal (the reference server drops such connections, iggy.md 1.1)."""
    if len(buf) - pos < 8:
        return None
    length, code = LEGACY_HEAD.unpack_from(buf, pos)
    if length < 4 or length > MAX_FRAME:
        raise IggyStatus(IggyError.INVALID_COMMAND, f"frame length {length}", fatal=True)
    end = pos + 4 + length
    if len(buf) < end:
        return None
    return code, pos + 8, end, end


def legacy_reply(status: int, body: bytes = b"") -> bytes:
    """A legacy response. Errors always carry an empty body (iggy.md 1.1)."""
    if status:
        body = b""
    return LEGACY_HEAD.pack(status, len(body)) + body


@dataclass(frozen=True, slots=True)
class VsrHeader:
    """The request-header fields a reply echoes or a session needs."""

    client: bytes  # 16 bytes
    request_checksum: bytes  # 16 bytes
    request: int
    operation: int
    session: int
    code: int  # the legacy command code (operation 2), else 0


_VSR_REQ = struct.Struct("<48xIxxxxxxxxB67x16s16s8xQB7xQxxxxI56x")


def parse_vsr(buf: bytearray, pos: int) -> tuple[VsrHeader, int, int, int] | None:
    """``(header, body_start, body_end, next_pos)`` or ``None`` when incomplete."""
    if len(buf) - pos < VSR_HEADER_SIZE:
        return None
    size, command, client, rcsum, request, operation, session, code = _VSR_REQ.unpack_from(buf, pos)
    if size < VSR_HEADER_SIZE or size > MAX_FRAME:
        raise IggyStatus(IggyError.INVALID_COMMAND, f"VSR frame size {size}", fatal=True)
    if command != VSR_REQUEST:
        raise IggyStatus(IggyError.INVALID_COMMAND, f"VSR header command {command}", fatal=True)
    end = pos + size
    if len(buf) < end:
        return None
    return VsrHeader(client, rcsum, request, operation, session, code), pos + VSR_HEADER_SIZE, end, end


_VSR_REPLY = struct.Struct("<48xI8xB67x16s16s16sQQQQB7xI36x")


def vsr_reply(req: VsrHeader, status: int, body: bytes = b"", session: int = 0) -> bytes:
    """A VSR reply; a non-zero status always has an empty body (iggy-current.md 9)."""
    if status:
        body = b""
    head = _VSR_REPLY.pack(VSR_HEADER_SIZE + len(body), VSR_REPLY, req.request_checksum, b"\0" * 16, req.client,
                           session, 0, 0, req.request, req.operation, status)
    return head + body


def vsr_eviction(client: bytes, reason: int) -> bytes:
    """A session-terminal Eviction frame (iggy-current.md 4.4)."""
    frame = bytearray(VSR_HEADER_SIZE)
    _U32.pack_into(frame, 48, VSR_HEADER_SIZE)
    frame[60] = VSR_EVICTION
    frame[128:144] = client
    frame[255] = reason
    return bytes(frame)


def vsr_request(operation: int, body: bytes, *, code: int = 0, session: int = 0, request: int = 0,
                client: bytes = b"\x01" + b"\0" * 15) -> bytes:
    """A VSR request frame as the 0.9.0 client builds it (tests and tools)."""
    head = bytearray(VSR_HEADER_SIZE)
    _U32.pack_into(head, 48, VSR_HEADER_SIZE + len(body))
    head[60] = VSR_REQUEST
    head[128:144] = client
    struct.pack_into("<QB", head, 168, request, operation)
    struct.pack_into("<Q", head, 184, session)
    if operation == 2:
        _U32.pack_into(head, 196, code)
    return bytes(head) + body


def legacy_request(code: int, body: bytes = b"") -> bytes:
    """A legacy request frame (tests and tools)."""
    return LEGACY_HEAD.pack(4 + len(body), code) + body


def parse_vsr_reply(data: bytes) -> tuple[int, int, bytes]:
    """``(operation, status, body)`` of one VSR reply (tests)."""
    (size,) = _U32.unpack_from(data, 48)
    return data[208], _U32.unpack_from(data, 216)[0], data[VSR_HEADER_SIZE:size]


__all__ = [
    "MAX_FRAME",
    "VSR_HEADER_SIZE",
    "VsrHeader",
    "is_legacy_start",
    "legacy_reply",
    "legacy_request",
    "parse_legacy",
    "parse_vsr",
    "parse_vsr_reply",
    "vsr_eviction",
    "vsr_reply",
    "vsr_request",
]
