"""Iggy over WebSocket, sans-I/O: one request per binary message in, one reply per message out.

Theory of operation
-------------------
Iggy's WebSocket transport carries the same frames as TCP (legacy
``length, code, body`` or a 256-byte VSR envelope), one per binary WebSocket
message (RFC 6455 opcode 2). Upstream facts (apache/iggy at cc269ef7, the
commit iggy-current.md was read at):

* the SDK client (``core/sdk/src/websocket/websocket_client.rs``) opens
  ``ws://host:port`` (path ``/``, no subprotocol; TLS: ``wss://domain:port``)
  and writes each encoded request with one ``write`` =
  one ``Message::Binary`` (``websocket_connection_stream.rs``); it reads
  replies as a byte stream across binary messages, so any split would do,
  but the server sends exactly one reply per message;
* the server (``core/message_bus/src/transports/ws.rs``,
  ``decode_consensus_frame``) requires each binary message to be exactly
  one frame (``size`` field == message length, at most 64 MiB) and closes
  the connection on a text frame, a short message or a size mismatch; pings
  are answered by the WebSocket layer (tungstenite auto-pong).

:class:`IggyWsFraming` is that rule, with no I/O: :meth:`request` checks one
inbound message and returns its bytes for the session's byte-oriented
:class:`~adapters.iggy.connection.IggyServerConnection` (which then sees
exactly the bytes a TCP client would send, so dialect detection, the command
table and the session are shared with TCP), or raises :class:`WsError`
with the close code to send. :meth:`replies` cuts what the connection
queued into one message per reply frame. Close codes are RFC 6455's
(section 7.4.1); the reference server sends a close frame without a code,
which leaves the client no reason: a code costs nothing and says which rule
was broken.
"""

from __future__ import annotations

import struct

from .codec import LEGACY_HEAD, MAX_FRAME, VSR_HEADER_SIZE, is_legacy_start
from .spec import COMMANDS

# Largest binary message accepted: one request frame as TCP bounds it
# (codec.MAX_FRAME = 64 MiB + 64 KiB, Iggy's 64 MiB batch cap plus metadata;
# the reference WS server's cap is its 64 MiB message-bus frame limit). A
# larger message is refused by the WebSocket layer with 1009 before it is
# buffered whole (trio-websocket counts it as it arrives).
WS_MAX_MESSAGE = MAX_FRAME

# RFC 6455 section 7.4.1 status codes.
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001  # server shutting down
CLOSE_PROTOCOL_ERROR = 1002  # a binary message that is not exactly one Iggy request frame
CLOSE_UNSUPPORTED_DATA = 1003  # a text message: Iggy frames are binary
CLOSE_MESSAGE_TOO_BIG = 1009  # over WS_MAX_MESSAGE (sent by the WebSocket layer itself)
# A close frame is a control frame: payload <= 125 bytes, 2 of them the code (RFC 6455 5.5).
MAX_CLOSE_REASON = 123

_U32 = struct.Struct("<I")
_HEAD_16 = struct.Struct("!BBH")  # RFC 6455 5.2: FIN|opcode, 126, u16 length (network order)
_HEAD_64 = struct.Struct("!BBQ")  # FIN|opcode, 127, u64 length
_FIN_BINARY = 0x82  # FIN bit + opcode 2 (binary)
_VSR_SIZE_AT = 48  # u32 total size in a VSR header (iggy-current.md 4.1)
_LEGACY_REPLY_HEAD = LEGACY_HEAD.size  # u32 status, u32 body length


class WsError(Exception):
    """The peer broke the one-request-per-binary-message rule: close with ``close_code``."""

    def __init__(self, close_code: int, reason: str) -> None:
        super().__init__(f"{close_code}: {reason}")
        self.close_code = close_code
        self.reason = reason[:MAX_CLOSE_REASON]


def frame_header(n: int) -> bytes:
    """The header of one unfragmented, unmasked binary frame of ``n`` payload
    bytes, as a server sends it (RFC 6455 5.2; servers never mask, 5.1)."""
    if n < 126:
        return bytes((_FIN_BINARY, n))
    if n < 1 << 16:
        return _HEAD_16.pack(_FIN_BINARY, 126, n)
    return _HEAD_64.pack(_FIN_BINARY, 127, n)


class IggyWsFraming:
    """Per connection: which framing the first message chose, and the message checks."""

    __slots__ = ("legacy",)

    def __init__(self) -> None:
        self.legacy: bool | None = None  # decided by the first message, as on TCP (codec.is_legacy_start)

    def request(self, message: bytes | str) -> bytes:
        """The bytes of one request message, for ``IggyServerConnection.receive_data``.

        Raises :class:`WsError` (1003 for text, 1002 when the message is not
        exactly one frame of the connection's framing)."""
        if isinstance(message, str):
            raise WsError(CLOSE_UNSUPPORTED_DATA, "Iggy requests are binary messages")
        n = len(message)
        if n < LEGACY_HEAD.size:
            raise WsError(CLOSE_PROTOCOL_ERROR, f"message of {n} bytes is shorter than any Iggy frame")
        if self.legacy is None:
            self.legacy = is_legacy_start(message[:LEGACY_HEAD.size], COMMANDS.by_code)
        if self.legacy:
            size = 4 + _U32.unpack_from(message, 0)[0]  # u32 length counts the code and the body
        elif n < VSR_HEADER_SIZE:
            raise WsError(CLOSE_PROTOCOL_ERROR, f"message of {n} bytes is shorter than a VSR header")
        else:
            size = _U32.unpack_from(message, _VSR_SIZE_AT)[0]
        if size != n:
            raise WsError(CLOSE_PROTOCOL_ERROR, f"frame of {size} bytes in a message of {n}: one request per message")
        return message

    def replies(self, data: bytes) -> list[bytes]:
        """``data`` (whole reply frames, as ``IggyServerConnection.data_to_send``
        gives them) cut into one message per frame. Bytes that do not tile into
        frames stay together in one message: never dropped, never reordered."""
        n = len(data)
        if not n:
            return []
        frames, pos = [], 0
        while pos < n:
            if self.legacy:
                if n - pos < _LEGACY_REPLY_HEAD:
                    break
                end = pos + _LEGACY_REPLY_HEAD + _U32.unpack_from(data, pos + 4)[0]
            else:
                if n - pos < VSR_HEADER_SIZE:
                    break
                end = pos + _U32.unpack_from(data, pos + _VSR_SIZE_AT)[0]
            if end <= pos or end > n:
                break
            frames.append(data if pos == 0 and end == n else data[pos:end])
            pos = end
        if pos != n:
            return [data]
        return frames


__all__ = [
    "CLOSE_GOING_AWAY",
    "CLOSE_MESSAGE_TOO_BIG",
    "CLOSE_NORMAL",
    "CLOSE_PROTOCOL_ERROR",
    "CLOSE_UNSUPPORTED_DATA",
    "WS_MAX_MESSAGE",
    "IggyWsFraming",
    "WsError",
    "frame_header",
]
