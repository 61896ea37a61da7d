"""Committed offsets of Kafka consumer groups, in the broker's key-value tables.

Theory of operation
-------------------
Kafka keeps committed offsets in its ``__consumer_offsets`` log; Ferry keeps
them in its key-value tables (core/kvtables.py, the metadata store:
synchronous=FULL, so a commit that returned survives ``kill -9`` and power
loss). One table per group, named :data:`PREFIX` + the group id; one entry per
partition, the key the topic name, a NUL and the partition number (4 bytes,
big-endian), the value the offset, leader epoch, commit time and metadata
(:data:`_VALUE` then the UTF-8 metadata). A commit is one table update, all
its partitions or none. An offset is kept as the client sent it (Kafka does
not check it against the log); a group's offsets go with DeleteGroups, a
topic's with the topic (:meth:`GroupOffsets.forget_topic`).
"""

from __future__ import annotations

import struct

from core.errors import FerryError
from core.kvtables import MAX_TABLE_NAME_BYTES, NO_VERSION

PREFIX = "_kafka/offsets/"
MAX_METADATA_BYTES = 4096  # Kafka's offset.metadata.max.bytes default
_VALUE = struct.Struct(">qiq")  # offset, leader epoch, commit time ms
_PART = struct.Struct(">i")
PAGE = 10_000  # entries read per page when listing a group's offsets


def table_name(group: str) -> str:
    name = PREFIX + group
    if len(name.encode()) > MAX_TABLE_NAME_BYTES:
        raise ValueError(f"group id of {len(group.encode())} bytes is too long")
    return name


def _key(topic: str, partition: int) -> bytes:
    return topic.encode() + b"\0" + _PART.pack(partition)


def _split(key: bytes) -> tuple[str, int]:
    return bytes(key[:-_PART.size - 1]).decode(), _PART.unpack(key[-_PART.size:])[0]


class GroupOffsets:
    """Committed offsets per group (module docstring)."""

    def __init__(self, tables) -> None:
        self.tables = tables

    def commit(self, group: str, entries: list, now_ms: int) -> None:
        """``entries``: [(topic, partition, offset, leader epoch, metadata)], stored together."""
        name = table_name(group)
        self.tables.create(name)
        rows = []
        for topic, partition, offset, epoch, metadata in entries:
            value = _VALUE.pack(offset, epoch, now_ms) + (metadata or "").encode()
            rows.append((_key(topic, partition), value, NO_VERSION))
        if rows:
            self.tables.update(name, rows)

    def fetch(self, group: str, wanted: list | None) -> dict:
        """{(topic, partition): (offset, epoch, metadata)} of ``wanted`` [(topic, partition)]
        that have one, or of every committed partition when ``wanted`` is None."""
        name = table_name(group)
        if not self.tables.exists(name):
            return {}
        if wanted is None:
            entries, after = [], None
            while True:
                page = self.tables.entries(name, after, PAGE)
                entries += page
                if len(page) < PAGE:
                    break
                after = page[-1][0]
        else:
            keys = [_key(t, p) for t, p in wanted]
            entries = [e for e in (self.tables.get(name, keys) if keys else []) if e is not None]
        out = {}
        for key, value, _version in entries:
            offset, epoch, _ts = _VALUE.unpack_from(value)
            out[_split(key)] = (offset, epoch, value[_VALUE.size:].decode())
        return out

    def delete_partitions(self, group: str, topic: str, partitions: list) -> None:
        name = table_name(group)
        if self.tables.exists(name):
            present = {k for k, _v, _n in (e for e in self.tables.get(name, [_key(topic, p) for p in partitions])
                                            if e is not None)}
            if present:
                self.tables.remove(name, [(k, NO_VERSION) for k in present])

    def delete_group(self, group: str) -> bool:
        name = table_name(group)
        if not self.tables.exists(name):
            return False
        self.tables.delete(name, must_be_empty=False)
        return True

    def groups(self) -> list[str]:
        return [n[len(PREFIX):] for n in self.tables.list(PREFIX)]

    def forget_topic(self, topic: str) -> None:
        for group in self.groups():
            try:
                committed = self.fetch(group, None)
            except FerryError:
                continue
            parts = [p for (t, p) in committed if t == topic]
            if parts:
                self.delete_partitions(group, topic, parts)
