"""Key-value tables: small versioned maps with conditional updates, in the metadata store.

What Pravega calls table segments (protocols/pravega.md section 4.5): the
pravega 0.3.8 client keeps each reader group's state in one
(``<scope>/<group>_kvtable/0.#epoch.0``, section 8), through conditional
updates and delta reads. Nothing here knows Pravega's wire; names, keys and
values are opaque.

Theory of operation
-------------------
* A table is a row of ``kv_tables`` (name, ``length``); its entries are rows of
  ``kv_entries`` (key, value, version), deleted with it (foreign-key cascade).
  Both live in the broker's metadata file (``core.metadb``, migration 2,
  synchronous=FULL): a change that returned is durable.
* **Versions are positions.** ``length`` is a per-table counter that only
  grows. An update of n entries gives them the versions ``length ..
  length + n - 1`` in order and adds n; a removal takes one position per key
  it removes. Upstream a version is the byte offset the entry was written at in
  the table segment and the length is the segment's length (pravega/pravega
  segmentstore ``HashTableSegmentLayout``); only order and growth matter to
  clients, so positions are counted in entries, not bytes.
* **Conditions** (per key): :data:`NO_VERSION` (Pravega's ``Long.MIN_VALUE``)
  is unconditional; :data:`NOT_EXISTS` (-1) requires the key to be missing; any
  other value requires the key to hold exactly that version. Every condition
  of a call is checked against the table as it was before the call (a key may
  appear twice in one update, as the Rust synchronizer sends a map's version
  key once per inserted inner key: both see the old version, the later value
  wins). Then ``expected_length`` (Pravega's ``tableSegmentOffset``; -1 = none)
  must equal the table's length. Any failure changes nothing: each mutating
  call is one SQLite transaction.
* **Delta reads** (:meth:`KvTables.delta`) return the *current* entries whose
  version is at or after a position, in version order; see the method for
  what upstream does with removed keys and why they are not returned.

Limits are named below with their reasons; a call over one raises
InvalidArgument and changes nothing.
"""

from __future__ import annotations

from typing import Callable, Sequence

from .errors import (
    InvalidArgument,
    TableKeyBadVersion,
    TableKeyDoesNotExist,
    TableLengthMismatch,
    TableNotEmpty,
    TableNotFound,
)
from .message import now_us
from .metadb import MAX_INT64, MetaDb, check_int, check_name

NO_VERSION = -(1 << 63)  # unconditional (Pravega TableKey.NO_VERSION = Long.MIN_VALUE)
NOT_EXISTS = -1  # the key must not exist (Pravega TableKey.NOT_EXISTS)
NO_LENGTH = -1  # expected_length: no condition on the table's length (tableSegmentOffset -1)

# A table name holds a qualified Pravega segment name: scope (<= 255) "/"
# stream (<= 255, plus "_kvtable") "/" "0.#epoch.0" (protocols/pravega.md 9),
# well under 1 KiB. The bound keeps list() answers small.
MAX_TABLE_NAME_BYTES = 1024
# Pravega's own limits: keys up to 8 KiB (EntrySerializer.MAX_KEY_LENGTH /
# TableStore.MAXIMUM_KEY_LENGTH) and a serialized entry up to 1 MiB
# (EntrySerializer.MAX_SERIALIZATION_LENGTH), pravega/pravega segmentstore
# server/tables/EntrySerializer.java. A client never needs more.
MAX_KEY_BYTES = 8 * 1024
MAX_VALUE_BYTES = 1024 * 1024
# One update or removal is one transaction holding the metadata store's lock:
# every other metadata write (offsets, topics) waits for it. 10,000 rows commit
# in a few tens of milliseconds; reader-group state changes a handful of keys.
MAX_BATCH_ENTRIES = 10_000
# And at most 32 MiB of keys and values per call: upstream's MAX_BATCH_SIZE is
# 32 serialized entries of 1 MiB (TableSegmentLayout / EntrySerializer). A
# Pravega frame is at most 16 MiB anyway (protocols/pravega.md 11).
MAX_BATCH_BYTES = 32 * 1024 * 1024
# A page of entries() or delta() holds at most this many entries, whatever the
# caller suggests (Pravega's suggestedEntryCount is a suggestion): bounds one
# reply's memory together with max_bytes.
MAX_PAGE_ENTRIES = 10_000
# Tables per broker. Each reader group is one table; a client that creates
# groups under fresh names without deleting them would grow the metadata file
# without bound. 100,000 is far past any real deployment of one gateway and
# keeps list() under ~100 MB even with the longest names.
MAX_TABLES = 100_000

Entry = tuple[bytes, bytes, int]  # (key, value, version)


class KvTables:
    """The key-value tables of one metadata store; ``broker.tables``. Synchronous,
    like the rest of the store (the trio thread; the MetaDb lock guards threads)."""

    def __init__(self, db: MetaDb, *, clock: Callable[[], int] = now_us) -> None:
        self._db = db
        self._clock = clock
        self._watchers: list[Callable[[], None]] = []

    # -- writes made elsewhere ------------------------------------------------------
    def watch(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` each time :meth:`replayed` reports writes that did
        not go through this object: another gateway's, replayed into the file by a
        replicated store (``Broker.resync``, docs/scale-out.md). The watcher reads
        what changed with :meth:`delta` (versions are the same on every gateway:
        the replayed statements carry them). It may be called on any thread that
        replays, and inside another write's catch-up: it should only take note."""
        self._watchers.append(callback)

    def replayed(self) -> None:
        """Writes made elsewhere reached the file: tell every watcher."""
        for callback in tuple(self._watchers):
            callback()

    def catch_up(self) -> None:
        """Take in every write made elsewhere so far before a read that must see them
        (:meth:`MetaDb.catch_up`; a round trip to the cluster in scale-out mode,
        nothing with the embedded log). Raises StorageError when it cannot."""
        self._db.catch_up()

    # -- tables -----------------------------------------------------------------
    def create(self, name: str) -> bool:
        """Create an empty table; False if one by that name exists (nothing
        changes). Raises InvalidName (name not 1..MAX_TABLE_NAME_BYTES bytes of
        UTF-8), InvalidArgument (MAX_TABLES reached)."""
        _check_table_name(name)
        with self._db.transaction() as conn:
            if conn.execute("SELECT 1 FROM kv_tables WHERE name = ?", (name,)).fetchone():
                return False
            if conn.execute("SELECT COUNT(*) FROM kv_tables").fetchone()[0] >= MAX_TABLES:
                raise InvalidArgument(f"at most {MAX_TABLES} key-value tables may exist")
            conn.execute("INSERT INTO kv_tables (name, length, created_at) VALUES (?, 0, ?)", (name, self._clock()))
        return True

    def delete(self, name: str, must_be_empty: bool) -> None:
        """Delete a table and its entries. Raises TableNotFound, TableNotEmpty
        (``must_be_empty`` and it holds an entry: nothing is deleted)."""
        with self._db.transaction() as conn:
            tid, _length = _table(conn, name)
            if must_be_empty and conn.execute("SELECT 1 FROM kv_entries WHERE table_id = ? LIMIT 1",
                                              (tid,)).fetchone():
                raise TableNotEmpty(f"key-value table {name!r} is not empty", table=name)
            conn.execute("DELETE FROM kv_tables WHERE id = ?", (tid,))

    def exists(self, name: str) -> bool:
        return self._db.one("SELECT 1 FROM kv_tables WHERE name = ?", (_check_table_name(name),)) is not None

    def list(self, prefix: str = "") -> list[str]:
        """Names of the tables starting with ``prefix``, sorted (by code point)."""
        if not isinstance(prefix, str):
            raise InvalidArgument(f"a table name prefix is a str, got {type(prefix).__name__}")
        rows = self._db.all(
            "SELECT name FROM kv_tables WHERE substr(name, 1, length(?1)) = ?1 ORDER BY name", (prefix,)
        )  # SQLite's substr/length count characters, as str.startswith does; names sort by UTF-8 bytes = code points
        return [r[0] for r in rows]

    def info(self, name: str) -> tuple[int, int]:
        """``(length, entry_count)``: the position counter and the number of keys. Raises TableNotFound."""
        with self._db.lock:
            tid, length = _table(self._db.conn, name)
            count = self._db.one("SELECT COUNT(*) FROM kv_entries WHERE table_id = ?", (tid,))[0]
        return length, count

    # -- changes --------------------------------------------------------------------
    def update(self, name: str, entries: Sequence[tuple[bytes, bytes, int]],
               expected_length: int = NO_LENGTH) -> list[int]:
        """Insert or replace ``(key, value, expected_version)`` entries, all or
        nothing; returns each entry's new version, in the order given.

        Raises TableNotFound; TableKeyBadVersion (a key holds another version
        than expected, or exists where NOT_EXISTS was expected);
        TableKeyDoesNotExist (a version was expected and the key is missing);
        TableLengthMismatch (``expected_length`` given and not the table's
        length); InvalidArgument (malformed entries or a limit exceeded)."""
        batch = [(_key(e, 0, "entry"), _value(e), _version(e)) for e in _batch(entries, 3, "(key, value, version)")]
        _check_bytes(sum(len(k) + len(v) for k, v, _ in batch))
        _check_expected_length(expected_length)
        with self._db.transaction() as conn:
            tid, length = _table(conn, name)
            _check_conditions(conn, tid, name, [(k, ver) for k, _, ver in batch])
            _check_length(name, expected_length, length)
            versions = list(range(length, length + len(batch)))
            conn.executemany(
                "INSERT INTO kv_entries (table_id, key, value, version) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (table_id, key) DO UPDATE SET value = excluded.value, version = excluded.version",
                [(tid, k, v, ver) for (k, v, _), ver in zip(batch, versions)],
            )
            conn.execute("UPDATE kv_tables SET length = ? WHERE id = ?", (length + len(batch), tid))
        return versions

    def remove(self, name: str, keys: Sequence[tuple[bytes, int]], expected_length: int = NO_LENGTH) -> None:
        """Remove ``(key, expected_version)`` keys, all or nothing, under the
        conditions :meth:`update` applies; removing a missing key without a
        condition (or with NOT_EXISTS) does nothing. Each key removed takes
        one position. Raises what :meth:`update` raises."""
        batch = [(_key(e, 0, "key"), _version(e)) for e in _batch(keys, 2, "(key, version)")]
        _check_bytes(sum(len(k) for k, _ in batch))
        _check_expected_length(expected_length)
        with self._db.transaction() as conn:
            tid, length = _table(conn, name)
            present = _check_conditions(conn, tid, name, batch)
            _check_length(name, expected_length, length)
            conn.executemany("DELETE FROM kv_entries WHERE table_id = ? AND key = ?", [(tid, k) for k in present])
            if present:
                conn.execute("UPDATE kv_tables SET length = ? WHERE id = ?", (length + len(present), tid))

    # -- reads ------------------------------------------------------------------------
    def get(self, name: str, keys: Sequence[bytes]) -> list[Entry | None]:
        """The entry of each key (None where missing), in the order given.
        Raises TableNotFound, InvalidArgument."""
        wanted = [_key(k, None, "key") for k in _batch(keys, None, "key")]
        with self._db.lock:
            conn = self._db.conn
            tid, _length = _table(conn, name)
            out: list[Entry | None] = []
            for k in wanted:
                row = conn.execute("SELECT value, version FROM kv_entries WHERE table_id = ? AND key = ?",
                                   (tid, k)).fetchone()
                out.append(None if row is None else (k, row[0], row[1]))
        return out

    def entries(self, name: str, after: bytes | None, limit: int, *, max_bytes: int | None = None) -> list[Entry]:
        """Entries in key order (bytes order), starting after key ``after``
        (None: from the first), at most ``min(limit, MAX_PAGE_ENTRIES)`` and,
        with ``max_bytes``, at most that many bytes of keys and values (but
        always one entry when any is left, so a large entry cannot stall a
        reader). Page on by passing the last key returned as ``after``; an empty
        page is the end. Raises TableNotFound, InvalidArgument."""
        if after is not None:
            after = _key(after, None, "after")
        sql = "SELECT key, value, version FROM kv_entries WHERE table_id = ?"
        sql += " ORDER BY key" if after is None else " AND key > ? ORDER BY key"
        args = () if after is None else (after,)
        page, _more = self._page(name, sql, args, limit, max_bytes)
        return page

    def delta(self, name: str, from_position: int, limit: int, *,
              max_bytes: int | None = None) -> tuple[list[Entry], int, bool]:
        """Entries changed at or after ``from_position``: ``(entries, last_position, reached_end)``.

        ``entries`` are the table's *current* entries whose version is >=
        ``from_position``, in version order, paged like :meth:`entries`.
        ``last_position`` is the position just after the last entry returned
        (its version + 1), or ``from_position`` when none is; ``reached_end``
        says no current entry lies at or after it. A reader that passes
        ``last_position`` back sees every entry of an unchanged table exactly
        once; an entry updated meanwhile moves to a later version and is
        returned again there, with its new value.

        **Removed keys are not returned.** Upstream (pravega/pravega
        segmentstore ``PravegaRequestProcessor.readTableEntriesDelta``) walks the
        table segment from ``fromPosition`` with ``TableEntryDeltaIterator``,
        which does yield removal records (``DeltaIteratorState.deletionRecord``),
        but the request processor only uses them to drop an earlier put of the
        same key from the reply it is building: no removal reaches the client,
        and its ``lastPosition`` is the iterator state's ``fromPosition`` (the
        segment offset just after the last record walked). The clients agree:
        the Rust client (pravega/pravega-client-rust ``src/sync/table.rs``
        ``read_entries_stream_from_position``) CBOR-decodes every value a delta
        read returns and panics on one that does not decode (an empty removal
        marker would not), loops until an empty page and ignores ``shouldClear``
        and ``reachedEnd``; its synchronizer (``src/sync/synchronizer.rs``)
        never deletes from its map on a fetch: it learns a removal as an
        ordinary update that writes a ``"tombstone"`` value (``insert_tombstone``),
        and removes the key itself only afterwards (``clear_tombstone``). So the
        tombstone *is* the removal a synchronizer needs, and it arrives here
        like any other entry. ``shouldClear`` (upstream: ``fromPosition`` below
        the compaction offset, history compacted away) is always false here:
        every current entry is kept at its version, so any position can be
        served. Raises TableNotFound, InvalidArgument (``from_position``
        negative or past the table's length, as upstream's
        ``entryDeltaIterator`` refuses)."""
        check_int(from_position, "delta position", 0, MAX_INT64)
        sql = "SELECT key, value, version FROM kv_entries WHERE table_id = ? AND version >= ? ORDER BY version"
        page, more = self._page(name, sql, (from_position,), limit, max_bytes, check_position=from_position)
        last = page[-1][2] + 1 if page else from_position
        return page, last, not more

    def _page(self, name: str, sql: str, args: tuple, limit: int, max_bytes: int | None,
              check_position: int | None = None) -> tuple[list[Entry], bool]:
        """Rows of ``sql`` (``table_id`` first, then ``args``) up to the count and
        byte bounds, and whether any row was left. Rows are read one by one
        under the store's lock, so a page never holds more than it returns."""
        count = min(check_int(limit, "limit", 1, MAX_INT64), MAX_PAGE_ENTRIES)
        budget = MAX_INT64 if max_bytes is None else check_int(max_bytes, "max_bytes", 0, MAX_INT64)
        page: list[Entry] = []
        with self._db.lock:
            conn = self._db.conn
            tid, length = _table(conn, name)
            if check_position is not None and check_position > length:
                raise InvalidArgument(f"position {check_position} is past the length {length} of table {name!r}")
            cur = conn.execute(sql, (tid, *args))
            try:
                for key, value, version in cur:
                    size = len(key) + len(value)
                    if len(page) == count or (page and size > budget):
                        return page, True
                    page.append((key, value, version))
                    budget -= size
            finally:
                cur.close()
        return page, False


# -- helpers ------------------------------------------------------------------------------
def _table(conn, name: str) -> tuple[int, int]:
    """``(id, length)`` of a table; TableNotFound if there is none."""
    row = conn.execute("SELECT id, length FROM kv_tables WHERE name = ?", (_check_table_name(name),)).fetchone()
    if row is None:
        raise TableNotFound(f"key-value table {name!r} not found", table=name)
    return row[0], row[1]


def _check_table_name(name: object) -> str:
    return check_name(name, "key-value table", hi=MAX_TABLE_NAME_BYTES)


def _batch(items: object, width: int | None, shape: str) -> list:
    """``items`` as a list of at most MAX_BATCH_ENTRIES, each a tuple of ``width`` (None: any item)."""
    if isinstance(items, (bytes, bytearray, memoryview, str)) or not isinstance(items, Sequence):
        raise InvalidArgument(f"expected a sequence of {shape}, got {type(items).__name__}")
    if len(items) > MAX_BATCH_ENTRIES:
        raise InvalidArgument(f"at most {MAX_BATCH_ENTRIES} keys per call, got {len(items)}")
    if width is not None:
        for item in items:
            if not isinstance(item, (tuple, list)) or len(item) != width:
                raise InvalidArgument(f"each item must be {shape}, got {item!r:.80}")
    return list(items)


def _key(item: object, index: int | None, what: str) -> bytes:
    key = item if index is None else item[index]
    if not isinstance(key, (bytes, bytearray, memoryview)):
        raise InvalidArgument(f"{what}: keys are bytes, got {type(key).__name__}")
    key = bytes(key)
    # Not empty: the Java wire form of a TableKey leaves the version out when
    # the key is empty (protocols/pravega.md 4.5), so an empty key could not
    # carry its condition.
    if not 1 <= len(key) <= MAX_KEY_BYTES:
        raise InvalidArgument(f"{what}: a key is 1..{MAX_KEY_BYTES} bytes, got {len(key)}")
    return key


def _value(item: Sequence) -> bytes:
    value = item[1]
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise InvalidArgument(f"entry values are bytes, got {type(value).__name__}")
    value = bytes(value)
    if len(value) > MAX_VALUE_BYTES:
        raise InvalidArgument(f"a value is at most {MAX_VALUE_BYTES} bytes, got {len(value)}")
    return value


def _version(item: Sequence) -> int:
    version = item[-1]
    if isinstance(version, bool) or not isinstance(version, int):
        raise InvalidArgument(f"an expected version is an int, got {type(version).__name__}")
    if version not in (NO_VERSION, NOT_EXISTS) and not 0 <= version <= MAX_INT64:
        raise InvalidArgument(f"an expected version is NO_VERSION, NOT_EXISTS or >= 0, got {version}")
    return version


def _check_bytes(total: int) -> None:
    if total > MAX_BATCH_BYTES:
        raise InvalidArgument(f"one call carries at most {MAX_BATCH_BYTES} bytes of keys and values, got {total}")


def _check_expected_length(expected: object) -> None:
    if expected != NO_LENGTH:
        check_int(expected, "expected table length", 0, MAX_INT64)


def _check_length(name: str, expected: int, length: int) -> None:
    if expected != NO_LENGTH and expected != length:
        raise TableLengthMismatch(f"key-value table {name!r} has length {length}, not {expected}",
                                  table=name, expected=expected, actual=length)


def _check_conditions(conn, tid: int, name: str, batch: list[tuple[bytes, int]]) -> list[bytes]:
    """Check every key's condition against the table before the call; returns the
    distinct keys that exist, in first-seen order. Raises the first failure."""
    current: dict[bytes, int | None] = {}
    for key, _expected in batch:
        if key not in current:
            row = conn.execute("SELECT version FROM kv_entries WHERE table_id = ? AND key = ?", (tid, key)).fetchone()
            current[key] = None if row is None else row[0]
    for key, expected in batch:
        actual = current[key]
        if expected == NO_VERSION or (expected == NOT_EXISTS and actual is None) or expected == actual:
            continue
        if actual is None:
            raise TableKeyDoesNotExist(f"key-value table {name!r}: key {key[:64]!r} does not exist",
                                       table=name, key=key, expected=expected, actual=None)
        raise TableKeyBadVersion(f"key-value table {name!r}: key {key[:64]!r} has version {actual}, not {expected}",
                                 table=name, key=key, expected=expected, actual=actual)
    return [k for k, v in current.items() if v is not None]


__all__ = [
    "MAX_BATCH_BYTES", "MAX_BATCH_ENTRIES", "MAX_KEY_BYTES", "MAX_PAGE_ENTRIES", "MAX_TABLES",
    "MAX_TABLE_NAME_BYTES", "MAX_VALUE_BYTES", "NOT_EXISTS", "NO_LENGTH", "NO_VERSION", "KvTables",
]
