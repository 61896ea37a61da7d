"""Table-segment entries between the wire shapes and ``core.kvtables``' tuples.

The wire carries :class:`~adapters.pravega.types.TableEntry` (key, version,
value) and :class:`~adapters.pravega.types.TableKey` (key, version)
(pravega.md section 4.5); the core's tables take and give ``(key, value,
version)`` and ``(key, version)`` tuples. Keys and values are the client's
own serialized blobs: stored as bytes, never interpreted (section 8).
"""

from __future__ import annotations

from .types import TableEntry, TableKey


def entries_in(entries) -> list[tuple[bytes, bytes, int]]:
    return [(bytes(e.key), bytes(e.value), e.version) for e in entries]


def entries_out(rows) -> tuple[TableEntry, ...]:
    return tuple(TableEntry(key, version, value) for key, value, version in rows)


def keys_in(keys) -> list[tuple[bytes, int]]:
    return [(bytes(k.key), k.version) for k in keys]


def keys_out(rows) -> tuple[TableKey, ...]:
    return tuple(TableKey(key, version) for key, version in rows)


__all__ = ["entries_in", "entries_out", "keys_in", "keys_out"]
