"""Committed offsets of Kafka consumer groups, in the broker's key-value tables.

Theory of operation
-------------------
Kafka keeps committed offsets in its ``__consumer_offsets`` log
(``OffsetMetadataManager``); Ferry keeps them in its key-value tables
(core/kvtables.py, the metadata store: synchronous=FULL, so a commit that
returned survives ``kill -9`` and power loss). One table per group, named
:data:`PREFIX` + the group id (a group id is 1..MAX_GROUP_ID_BYTES bytes, so
the name always fits ``MAX_TABLE_NAME_BYTES``; the prefix holds "_", which no
Pravega scope may, so no reader-group table shares it). One entry per
partition: the key is the topic name, a NUL (never in a topic name) and the
partition (4 bytes, big-endian), so one topic's keys are contiguous; the value
is the offset (int64), leader epoch (int32) and commit time in ms (int64),
big-endian, then the UTF-8 metadata (:data:`_VALUE`).

A commit is one table update, all its partitions or none; the table is
created on the first commit. An offset is kept as the client sent it (Kafka
does not check it against the log). A partition with none reads as offset -1,
metadata "" (Kafka's ``OffsetFetchResponse.INVALID_OFFSET``). A group's offsets
go with DeleteGroups, a topic's with the topic (:meth:`GroupOffsets.forget_topic`,
as Kafka's ``onPartitionsDeleted``); a table left empty is dropped, so
:meth:`GroupOffsets.groups` lists the groups that have offsets.
"""

from __future__ import annotations

import struct

from core.errors import FerryError, TableNotFound
from core.kvtables import MAX_BATCH_BYTES, MAX_BATCH_ENTRIES, MAX_KEY_BYTES, MAX_PAGE_ENTRIES, NO_VERSION

from .groups import valid_group_id

PREFIX = "_kafka/offsets/"
# Kafka's offset.metadata.max.bytes default. Kafka compares it with the string's
# length (Java String.length(), UTF-16 units: OffsetMetadataManager.isMetadataInvalid).
MAX_METADATA_BYTES = 4096
_VALUE = struct.Struct(">qiq")  # offset, leader epoch, commit time ms
_PART = struct.Struct(">i")
NO_OFFSET = (-1, -1, "")  # (offset, leader epoch, metadata) of a partition without a commit


class CommitTooLarge(ValueError):
    """A commit over one key-value update's bounds (Kafka: INVALID_COMMIT_OFFSET_SIZE)."""


def table_name(group: str) -> str:
    if not valid_group_id(group):
        raise ValueError(f"not a usable group id: {group[:80]!r}")
    return PREFIX + group


def metadata_too_large(metadata: str | None) -> bool:
    """True when Kafka would answer OFFSET_METADATA_TOO_LARGE."""
    if metadata is None or 2 * len(metadata) <= MAX_METADATA_BYTES:  # a code point is 1 or 2 UTF-16 units
        return False
    return len(metadata) > MAX_METADATA_BYTES or len(metadata.encode("utf-16-le")) // 2 > MAX_METADATA_BYTES


def _key(topic: str, partition: int) -> bytes:
    return topic.encode() + b"\0" + _PART.pack(partition)


def _split(key: bytes) -> tuple[str, int]:
    return bytes(key[:-_PART.size - 1]).decode(), _PART.unpack(key[-_PART.size:])[0]


def _decode(value: bytes) -> tuple[int, int, str] | None:
    if len(value) < _VALUE.size:
        return None
    offset, epoch, _ms = _VALUE.unpack_from(value)
    return offset, epoch, bytes(value[_VALUE.size:]).decode(errors="replace")


class GroupOffsets:
    """Committed offsets per group (module docstring); ``tables`` is a
    :class:`core.kvtables.KvTables` (``broker.tables``)."""

    def __init__(self, tables) -> None:
        self.tables = tables

    def commit(self, group: str, entries: list, now_ms: int) -> None:
        """``entries``: [(topic, partition, offset, leader epoch, metadata or None)], stored
        together (a partition named twice: the later wins). Raises ValueError (group id),
        CommitTooLarge, FerryError (the store)."""
        name = table_name(group)
        rows = [(_key(topic, partition), _VALUE.pack(offset, epoch, now_ms) + (metadata or "").encode(), NO_VERSION)
                for topic, partition, offset, epoch, metadata in entries]
        if not rows:
            return
        if len(rows) > MAX_BATCH_ENTRIES or sum(len(k) + len(v) for k, v, _ in rows) > MAX_BATCH_BYTES \
                or any(len(k) > MAX_KEY_BYTES for k, _v, _n in rows):
            raise CommitTooLarge(f"{len(rows)} partitions do not fit one key-value update")
        try:
            self.tables.update(name, rows)
        except TableNotFound:
            self.tables.create(name)
            self.tables.update(name, rows)

    def fetch(self, group: str, wanted: list | None) -> dict:
        """``{(topic, partition): (offset, leader epoch, metadata)}`` of the ``wanted``
        [(topic, partition)] that have a commit, or of every committed partition when
        ``wanted`` is None. A group without offsets (or an unusable id) has none."""
        if not valid_group_id(group):
            return {}
        # Every commit made through another gateway first (a round trip in scale-out mode):
        # a consumer that takes partitions over after a rebalance resumes from what was
        # committed last, wherever. A fault-schedule run saw a member on a gateway just
        # back from a freeze fetch its stale copy's offsets, consume from there and commit
        # them: the group's offsets went back by ~440. Raises StorageError when it cannot.
        self.tables.catch_up()
        name = table_name(group)
        entries = []
        try:
            if wanted is None:
                after = None
                while page := self.tables.entries(name, after, MAX_PAGE_ENTRIES):
                    entries += page
                    after = page[-1][0]
            else:
                keys = [k for k in dict.fromkeys(_key(t, p) for t, p in wanted) if len(k) <= MAX_KEY_BYTES]
                for i in range(0, len(keys), MAX_BATCH_ENTRIES):
                    entries += [e for e in self.tables.get(name, keys[i:i + MAX_BATCH_ENTRIES]) if e is not None]
        except TableNotFound:
            return {}
        out = {}
        for key, value, _version in entries:
            decoded = _decode(value)
            if decoded is not None:
                out[_split(key)] = decoded
        return out

    def delete_partitions(self, group: str, topic: str, partitions: list) -> None:
        """Forget the offsets of ``partitions`` of ``topic`` (those without one: nothing)."""
        if not valid_group_id(group):
            return
        self._remove(table_name(group), [_key(topic, p) for p in dict.fromkeys(partitions)])

    def delete_group(self, group: str) -> bool:
        """Forget every offset of ``group``; False when it had none."""
        if not valid_group_id(group):
            return False
        try:
            self.tables.delete(table_name(group), must_be_empty=False)
        except TableNotFound:
            return False
        return True

    def has(self, group: str) -> bool:
        """True when ``group`` has committed offsets."""
        return valid_group_id(group) and self.tables.exists(table_name(group))

    def groups(self) -> list[str]:
        """The ids of the groups that have committed offsets, sorted."""
        return [n[len(PREFIX):] for n in self.tables.list(PREFIX)]

    def forget_topic(self, topic: str) -> None:
        """Forget every group's offsets of a deleted topic (best effort per group)."""
        head = topic.encode()
        prefix = head + b"\0"
        for name in self.tables.list(PREFIX):
            try:
                keys, after = [], head  # keys after b"topic" start with b"topic\0" first
                while page := self.tables.entries(name, after, MAX_PAGE_ENTRIES):
                    hits = [k for k, _v, _n in page if k.startswith(prefix)]
                    keys += hits
                    if len(hits) < len(page):
                        break
                    after = page[-1][0]
                self._remove(name, keys)
            except FerryError:
                continue

    def _remove(self, name: str, keys: list) -> None:
        keys = [k for k in keys if len(k) <= MAX_KEY_BYTES]
        if not keys:
            return
        try:
            for i in range(0, len(keys), MAX_BATCH_ENTRIES):
                self.tables.remove(name, [(k, NO_VERSION) for k in keys[i:i + MAX_BATCH_ENTRIES]])
            if self.tables.info(name)[1] == 0:
                self.tables.delete(name, must_be_empty=True)
        except TableNotFound:
            return


__all__ = ["MAX_METADATA_BYTES", "NO_OFFSET", "PREFIX", "CommitTooLarge", "GroupOffsets", "metadata_too_large",
           "table_name"]
