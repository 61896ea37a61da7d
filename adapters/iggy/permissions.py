"""The binary Permissions blob (protocols/iggy.md section 3.7) <-> core Permissions.

Layout: ten u8 global flags; ``u8 has_streams``; then stream entries, each
``u32 stream_id, 6 x u8 flags, u8 has_topics, [topic entries], u8 more_streams``;
a topic entry is ``u32 topic_id, 4 x u8 flags, u8 more_topics``. Flags are 1
for true. Ids leave and enter through ``edge`` (1 for dialect 1, render.edge).
Decoding is bounded by the blob and raises :class:`IggyStatus` (3) on
anything malformed.
"""

from __future__ import annotations

import struct

from core.permissions import (
    GLOBAL_FLAGS, STREAM_FLAGS, TOPIC_FLAGS, GlobalPermissions, Permissions, StreamPermissions,
    TopicPermissions,
)

from .errors import IggyError, IggyStatus

_U32 = struct.Struct("<I")


def encode_permissions(p: Permissions, edge: int = 0) -> bytes:
    out = bytearray(getattr(p.global_, f) for f in GLOBAL_FLAGS)
    streams = sorted((p.streams or {}).items())
    out.append(1 if streams else 0)
    for i, (sid, sp) in enumerate(streams):
        out += _U32.pack(sid + edge)
        out += bytes(getattr(sp, f) for f in STREAM_FLAGS)
        topics = sorted((sp.topics or {}).items())
        out.append(1 if topics else 0)
        for j, (tid, tp) in enumerate(topics):
            out += _U32.pack(tid + edge)
            out += bytes(getattr(tp, f) for f in TOPIC_FLAGS)
            out.append(1 if j + 1 < len(topics) else 0)
        out.append(1 if i + 1 < len(streams) else 0)
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise IggyStatus(IggyError.INVALID_COMMAND, "permissions blob ends early")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def flag(self) -> bool:
        return self.take(1)[0] == 1

    def u32(self) -> int:
        return _U32.unpack(self.take(4))[0]


def decode_permissions(data: bytes, edge: int = 0) -> Permissions:
    r = _Reader(bytes(data))
    glob = GlobalPermissions(**{f: r.flag() for f in GLOBAL_FLAGS})
    streams: dict[int, StreamPermissions] | None = None
    if r.flag():
        streams = {}
        while True:
            sid = _canonical(r.u32(), edge)
            flags = {f: r.flag() for f in STREAM_FLAGS}
            topics: dict[int, TopicPermissions] | None = None
            if r.flag():
                topics = {}
                while True:
                    tid = _canonical(r.u32(), edge)
                    topics[tid] = TopicPermissions(**{f: r.flag() for f in TOPIC_FLAGS})
                    if not r.flag():
                        break
            streams[sid] = StreamPermissions(**flags, topics=topics)
            if not r.flag():
                break
    if r.pos != len(r.data):
        raise IggyStatus(IggyError.INVALID_COMMAND, "trailing bytes after permissions")
    return Permissions(glob, streams)


def _canonical(wire_id: int, edge: int) -> int:
    if wire_id < edge:
        raise IggyStatus(IggyError.INVALID_COMMAND, f"id {wire_id} in permissions")
    return wire_id - edge


__all__ = ["decode_permissions", "encode_permissions"]
