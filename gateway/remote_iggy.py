"""Consumer-group offsets from a running server, over its Iggy TCP listener (no trio).

Why TCP: Iggy's HTTP API reads only single-consumer offsets (``GET
.../consumer-offsets`` has no consumer kind; apache/iggy and Ferry alike), but
``ferry group list`` needs each group's stored offset per partition to show
its lag. The binary GetConsumerOffset (code 120) takes a consumer kind, so
this module speaks just enough of the legacy framing (dialect 2,
adapters/iggy/spec.py: ``u32 length, u32 code, body`` out, ``u32 status,
u32 length, body`` back) to log in and ask. Encoders come from the same
command table the server decodes with.

A JWT cannot log in over TCP; with one (or with the TCP listener off or
unknown) the offsets are simply not available, and the caller says so.
"""

from __future__ import annotations

import socket
import struct

from adapters.iggy import spec
from adapters.iggy.replies import OFFSET_INFO
from adapters.iggy.types import ConsumerId

from .remote_target import Target

DIALECT = 2            # legacy framing, 0-based ids, optional partition (spec.py's table)
CLIENT_VERSION = "0.10.0"  # a login version that picks dialect 2 (connection.dialect_for_version)
TIMEOUT_S = 10.0
MAX_REPLY = 1 << 20    # an offset reply is 20 bytes; anything near this is not one
_HEAD = struct.Struct("<II")
GROUP_KIND = 2         # Iggy's consumer kind for a group (iggy.md 3.2)


class OffsetsUnavailable(Exception):
    """Stored group offsets cannot be read; the message says why."""


class GroupOffsets:
    """A logged-in binary connection that reads group offsets; use as a context manager."""

    def __init__(self, target: Target) -> None:
        if target.tcp_port is None:
            raise OffsetsUnavailable("the Iggy TCP listener is off or unknown (set [listeners.iggy_tcp] in --config)")
        if target.auth.token and target.auth.is_jwt:
            raise OffsetsUnavailable("a JWT cannot log in over Iggy TCP (use a password or a personal access token)")
        try:
            self._sock = socket.create_connection((target.host, target.tcp_port), timeout=TIMEOUT_S)
        except OSError as exc:
            raise OffsetsUnavailable(f"Iggy TCP at {target.host}:{target.tcp_port}: {exc.strerror or exc}") from None
        try:
            if target.auth.token:
                self._request(spec.LOGIN_PAT, spec.LOGIN_PAT.make(token=target.auth.token))
            else:
                self._request(spec.LOGIN_USER, spec.LOGIN_USER.make(
                    username=target.auth.username, password=target.auth.password, version=CLIENT_VERSION))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> "GroupOffsets":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def stored(self, stream_id: int, topic_id: int, group_id: int, partition_id: int) -> int | None:
        """The group's stored offset in one partition, or None when it has none."""
        value = spec.GET_CONSUMER_OFFSET.make(consumer=ConsumerId(GROUP_KIND, group_id), stream_id=stream_id,
                                              topic_id=topic_id, partition_id=partition_id)
        body = self._request(spec.GET_CONSUMER_OFFSET, value)
        if not body:
            return None
        return OFFSET_INFO.decode(DIALECT, body).stored_offset

    def _request(self, command, value) -> bytes:
        payload = command.encode(DIALECT, value)
        try:
            self._sock.sendall(_HEAD.pack(len(payload) + 4, command.code) + payload)
            status, length = _HEAD.unpack(self._read(_HEAD.size))
            if length > MAX_REPLY:
                raise OffsetsUnavailable(f"Iggy TCP reply of {length} bytes is not an offset")
            body = self._read(length)
        except OSError as exc:
            raise OffsetsUnavailable(f"Iggy TCP: {exc.strerror or exc}") from None
        if status:
            raise OffsetsUnavailable(f"Iggy TCP {command.name} refused (Iggy error {status})")
        return body

    def _read(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self._sock.recv(left)
            if not chunk:
                raise OffsetsUnavailable("Iggy TCP connection closed by the server")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)


__all__ = ["GroupOffsets", "OffsetsUnavailable"]
