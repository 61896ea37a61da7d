"""Table-segment entries between the wire shapes and ``core.kvtables``' tuples.

The wire carries :class:`~adapters.pravega.types.TableEntry` (key, version,
value) and :class:`~adapters.pravega.types.TableKey` (key, version)
(pravega.md section 4.5); the core's tables take and give ``(key, value,
version)`` and ``(key, version)`` tuples. Keys and values are the client's
own serialized blobs: stored as bytes, never interpreted (section 8).
"""

from __future__ import annotations

from functools import partial

from core.errors import (
    FerryError,
    TableKeyBadVersion,
    TableKeyDoesNotExist,
    TableLengthMismatch,
    TableNotEmpty,
    TableNotFound,
)

from . import commands as C
from .errors import Reply as _Reply
from .names import is_table_segment
from .types import TableEntry, TableKey

MAX_TABLE_READ = 1000  # entries per table read reply, whatever the client suggests
# ... and bytes of keys and values in it: entries hold up to 1 MiB, a frame at most 16 MiB
MAX_TABLE_READ_BYTES = 8 * 1024 * 1024


def entries_in(entries) -> list[tuple[bytes, bytes, int]]:
    return [(bytes(e.key), bytes(e.value), e.version) for e in entries]


def entries_out(rows) -> tuple[TableEntry, ...]:
    return tuple(TableEntry(key, version, value) for key, value, version in rows)


def keys_in(keys) -> list[tuple[bytes, int]]:
    return [(bytes(k.key), k.version) for k in keys]


def keys_out(rows) -> tuple[TableKey, ...]:
    return tuple(TableKey(key, version) for key, version in rows)


class TableSegmentOps:
    """The table-segment commands of :class:`~adapters.pravega.session.SegmentStoreSession`
    (a mixin: it needs ``broker`` and ``send``), over the broker's key-value tables."""

    def _table_call(self, rid: int, segment: str, fn, *args):
        if not is_table_segment(segment):
            raise _Reply(C.NoSuchSegment(request_id=rid, segment=segment, server_stack_trace="", offset=-1))
        try:
            return fn(segment, *args)
        except TableNotFound:
            raise _Reply(C.NoSuchSegment(request_id=rid, segment=segment, server_stack_trace="", offset=-1)) from None
        except TableKeyBadVersion:
            raise _Reply(C.TableKeyBadVersion(request_id=rid, segment=segment, server_stack_trace="")) from None
        except TableKeyDoesNotExist:
            raise _Reply(C.TableKeyDoesNotExist(request_id=rid, segment=segment, server_stack_trace="")) from None
        except TableNotEmpty:
            raise _Reply(C.TableSegmentNotEmpty(request_id=rid, segment=segment, server_stack_trace="")) from None
        except TableLengthMismatch as exc:
            length = exc.details.get("actual", -1)  # the table's current length
            raise _Reply(C.SegmentIsTruncated(request_id=rid, segment=segment, start_offset=length,
                                              server_stack_trace="", offset=-1)) from None
        except FerryError as exc:  # a key or value over its limit
            raise _Reply(C.ErrorMessage(request_id=rid, segment=segment, message=exc.message, error_code=0)) from None

    def _create_table(self, cmd) -> None:
        rid, seg = cmd.request_id, cmd.segment
        if self._table_call(rid, seg, self.broker.tables.create):
            self.send(C.SegmentCreated(request_id=rid, segment=seg))
        else:
            self.send(C.SegmentAlreadyExists(request_id=rid, segment=seg, server_stack_trace=""))

    def _delete_table(self, cmd) -> None:
        self._table_call(cmd.request_id, cmd.segment, self.broker.tables.delete, cmd.must_be_empty)
        self.send(C.SegmentDeleted(request_id=cmd.request_id, segment=cmd.segment))

    def _update_table(self, cmd) -> None:
        versions = self._table_call(cmd.request_id, cmd.segment, self.broker.tables.update,
                                    entries_in(cmd.entries), cmd.table_segment_offset)
        self.send(C.TableEntriesUpdated(request_id=cmd.request_id, updated_versions=tuple(versions)))

    def _remove_keys(self, cmd) -> None:
        self._table_call(cmd.request_id, cmd.segment, self.broker.tables.remove, keys_in(cmd.keys),
                         cmd.table_segment_offset)
        self.send(C.TableKeysRemoved(request_id=cmd.request_id, segment=cmd.segment))

    def _read_table(self, cmd) -> None:
        keys = [k for k, _v in keys_in(cmd.keys)]
        found = self._table_call(cmd.request_id, cmd.segment, self.broker.tables.get, keys)
        rows = [(k, b"", -1) if e is None else e for k, e in zip(keys, found)]  # -1: no such key (upstream)
        self.send(C.TableRead(request_id=cmd.request_id, segment=cmd.segment, entries=entries_out(rows)))

    def _page(self, cmd, count: int):
        token = bytes(cmd.continuation_token or b"")
        after = token or None
        rows = self._table_call(cmd.request_id, cmd.segment,
                                partial(self.broker.tables.entries, max_bytes=MAX_TABLE_READ_BYTES), after,
                                max(1, min(count, MAX_TABLE_READ)))
        return rows, (rows[-1][0] if rows else token)

    def _read_entries(self, cmd) -> None:
        rows, token = self._page(cmd, cmd.suggested_entry_count)
        self.send(C.TableEntriesRead(request_id=cmd.request_id, segment=cmd.segment, entries=entries_out(rows),
                                     continuation_token=token))

    def _read_keys(self, cmd) -> None:
        rows, token = self._page(cmd, cmd.suggested_key_count)
        self.send(C.TableKeysRead(request_id=cmd.request_id, segment=cmd.segment,
                                  keys=keys_out([(k, v) for k, _val, v in rows]), continuation_token=token))

    def _read_delta(self, cmd) -> None:
        rows, last, reached_end = self._table_call(cmd.request_id, cmd.segment,
                                                   partial(self.broker.tables.delta, max_bytes=MAX_TABLE_READ_BYTES),
                                                   cmd.from_position,
                                                   max(1, min(cmd.suggested_entry_count, MAX_TABLE_READ)))
        self.send(C.TableEntriesDeltaRead(request_id=cmd.request_id, segment=cmd.segment, entries=entries_out(rows),
                                          should_clear=False, reached_end=reached_end, last_position=last))

    def _table_info(self, cmd) -> None:
        length, count = self._table_call(cmd.request_id, cmd.segment_name, self.broker.tables.info)
        self.send(C.TableSegmentInfo(request_id=cmd.request_id, segment_name=cmd.segment_name, start_offset=0,
                                     length=length, entry_count=count, key_length=0))


__all__ = ["MAX_TABLE_READ", "MAX_TABLE_READ_BYTES", "TableSegmentOps", "entries_in", "entries_out", "keys_in",
           "keys_out"]
