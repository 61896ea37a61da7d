"""SQLite plumbing for the metadata store: connection, schema, migrations, transactions.

Theory of operation
-------------------
One SQLite file (``metadata.sqlite``) holds every piece of metadata. The
connection runs in WAL mode with ``synchronous=FULL``: in WAL mode FULL syncs
the write-ahead log on every commit, so a commit that returned survives a
crash or a power cut (https://www.sqlite.org/pragma.html#pragma_synchronous,
https://www.sqlite.org/wal.html). ``foreign_keys=ON`` makes the cascades of
the schema below real: deleting a stream removes its topics, partitions,
consumer groups and stored offsets in the same statement, hence in the same
transaction.

Every change runs in :meth:`MetaDb.transaction` (``BEGIN IMMEDIATE`` ...
``COMMIT``). A crash or an exception before ``COMMIT`` leaves the file as it
was before ``BEGIN``: there is no half-created stream or topic to clean up.

The connection is in autocommit mode (``isolation_level=None``) so that
Python's sqlite3 module never opens or commits transactions behind our back;
a single statement outside :meth:`transaction` (the offset UPSERT) is its own
transaction.

Migrations: ``schema_version`` holds one integer. :data:`MIGRATIONS` lists
every step from an empty file; on open, the steps above the stored version run
in order, each in its own transaction together with the version bump. A file
written by a newer Ferry (version above the last step) is refused rather than
misread.

Locking: every statement runs under one ``threading.RLock``. The broker calls
the store from the trio thread, but password hashing (argon2, tens of
milliseconds) is meant to run in a worker thread (``trio.to_thread``), and
those calls touch the connection too; the lock keeps their transactions from
interleaving with the trio thread's. The connection is opened with
``check_same_thread=False`` for the same reason.

Replication (scale-out, docs/scale-out.md): a gateway whose metadata lives in
a NATS JetStream cluster installs a :class:`Replicator`. Every write then
captures the statements it runs (with their bound values, so ids, hashes and
timestamps chosen here travel as values, and replay is deterministic); before
``COMMIT`` the replicator publishes them as one entry of the cluster's
metadata log with compare-and-set on the log's last sequence, and only a
stored entry lets the local transaction commit. Other gateways replay the
entries in log order (:meth:`MetaDb.apply_entry`). The file stays the
gateway's cache of the log, with the last sequence it holds in
``replica_state``.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Protocol, Sequence

from .errors import InvalidArgument, InvalidName, StorageError

log = logging.getLogger("ferry.metadata")

Ident = int | str

# Names of streams, topics and consumer groups: Iggy stores them behind a u8
# length prefix (Str8, protocols/iggy.md section 4.4; create_topic.rs checks
# `name.len() > MAX_NAME_LENGTH` with MAX_NAME_LENGTH = 255), counted in bytes.
MIN_NAME_BYTES = 1
MAX_NAME_BYTES = 255

# Ids are u32 on every Iggy wire. The seed-era dialect numbers from 1
# (wire = canonical + 1, docs/internals.md), so the largest canonical id every
# dialect can carry is 2**32 - 2.
MAX_ID = 2**32 - 2

# SQLite INTEGER is a signed 64-bit value; offsets, sizes and durations are
# stored as such. No real partition gets near 2**63 records.
MAX_INT64 = 2**63 - 1

# How long a second opener of the same file waits for our write lock before
# SQLite reports "database is locked" (only tools such as `sqlite3` on the
# live file ever compete with the broker's own connection).
BUSY_TIMEOUT_MS = 5000


Statement = tuple[str, tuple]
# Writes whose result does not depend on the state they meet (last writer wins):
# replicated without first catching up (MetaDb.execute). The stored consumer offset.
REORDERABLE_PREFIXES = ("INSERT INTO consumer_offsets ",)


class Replicator(Protocol):
    """What :class:`MetaDb` needs from a cluster (gateway/jetstream_store/store.py)."""

    def before_write(self, db: "MetaDb") -> None:
        """Bring ``db`` up to the log's end (apply entries other gateways wrote)."""

    def publish(self, statements: list[Statement], after_seq: int) -> int:
        """Store ``statements`` as the log entry following ``after_seq``; return its
        sequence. Raises (a FerryError) when the log moved past ``after_seq`` or
        the cluster did not answer: the local transaction then rolls back."""

    def publish_anywhere(self, statements: list[Statement], db: "MetaDb") -> int:
        """Store ``statements`` as the entry after the last one ``db`` holds, catching
        ``db`` up and trying again while other gateways got there first."""


class _Capture:
    """A connection stand-in that records every statement that is not a read."""

    __slots__ = ("conn", "statements")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.statements: list[Statement] = []

    def execute(self, sql: str, params: Sequence[object] = ()):
        cur = self.conn.execute(sql, params)
        if not _is_read(sql):
            self.statements.append((sql, tuple(params)))
        return cur

    def executemany(self, sql: str, rows):
        rows = [tuple(r) for r in rows]
        cur = self.conn.executemany(sql, rows)
        self.statements.extend((sql, r) for r in rows)
        return cur

    def __getattr__(self, name: str):
        return getattr(self.conn, name)


def _is_read(sql: str) -> bool:
    head = sql.lstrip()[:7].upper()
    return head.startswith("SELECT") or head.startswith("PRAGMA")


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: ``apply`` is a SQL script or a callable given the connection."""

    version: int
    about: str
    apply: str | Callable[[sqlite3.Connection], None]


_SCHEMA_V1 = """
CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE streams (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);

CREATE TABLE topics (
    stream_id          INTEGER NOT NULL REFERENCES streams(id) ON DELETE CASCADE,
    id                 INTEGER NOT NULL,
    name               TEXT NOT NULL,
    created_at         INTEGER NOT NULL,
    message_expiry     INTEGER NOT NULL,
    max_topic_size     INTEGER NOT NULL,
    compression        TEXT NOT NULL,
    replication_factor INTEGER NOT NULL,
    PRIMARY KEY (stream_id, id),
    UNIQUE (stream_id, name)
) WITHOUT ROWID;

CREATE TABLE partitions (
    stream_id  INTEGER NOT NULL,
    topic_id   INTEGER NOT NULL,
    id         INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (stream_id, topic_id, id),
    FOREIGN KEY (stream_id, topic_id) REFERENCES topics(stream_id, id) ON DELETE CASCADE
) WITHOUT ROWID;

CREATE TABLE consumer_groups (
    stream_id INTEGER NOT NULL,
    topic_id  INTEGER NOT NULL,
    id        INTEGER NOT NULL,
    name      TEXT NOT NULL,
    PRIMARY KEY (stream_id, topic_id, id),
    UNIQUE (stream_id, topic_id, name),
    FOREIGN KEY (stream_id, topic_id) REFERENCES topics(stream_id, id) ON DELETE CASCADE
) WITHOUT ROWID;

CREATE TABLE consumer_offsets (
    stream_id     INTEGER NOT NULL,
    topic_id      INTEGER NOT NULL,
    partition_id  INTEGER NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('consumer', 'group')),
    consumer_id   INTEGER NOT NULL,
    stored_offset INTEGER NOT NULL,
    PRIMARY KEY (stream_id, topic_id, partition_id, kind, consumer_id),
    FOREIGN KEY (stream_id, topic_id, partition_id)
        REFERENCES partitions(stream_id, topic_id, id) ON DELETE CASCADE
) WITHOUT ROWID;

CREATE TABLE users (
    id            INTEGER PRIMARY KEY,
    username      TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('active', 'inactive')),
    created_at    INTEGER NOT NULL,
    permissions   TEXT
);

CREATE TABLE personal_access_tokens (
    user_id    INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    token_hash BLOB NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    expiry_at  INTEGER,
    PRIMARY KEY (user_id, name)
) WITHOUT ROWID;
"""

# Step 2: what the Pravega adapter needs from the core, in generic form
# (docs/internals.md "Topic state" and "Key-value tables"):
# * topics.sealed: a sealed topic takes no appends (Pravega sealStream);
# * partitions.logical_start: the byte position a Pravega truncateStream moved
#   the partition's start to (0 = none recorded); the log only deletes whole
#   segments below it, so the finer position lives here;
# * topic_attrs: a small string key/value store per topic (stream tags,
#   retention and scaling policies echoed back to Pravega clients);
# * kv_tables / kv_entries: core.kvtables (Pravega table segments). Entries are
#   a rowid table, not WITHOUT ROWID: values reach 1 MiB and SQLite advises
#   WITHOUT ROWID only for rows well under a page (sqlite.org/withoutrowid.html,
#   section 4). The version index serves delta reads in version order.
_SCHEMA_V2 = """
ALTER TABLE topics ADD COLUMN sealed INTEGER NOT NULL DEFAULT 0;

ALTER TABLE partitions ADD COLUMN logical_start INTEGER NOT NULL DEFAULT 0;

CREATE TABLE topic_attrs (
    stream_id INTEGER NOT NULL,
    topic_id  INTEGER NOT NULL,
    key       TEXT NOT NULL,
    value     TEXT NOT NULL,
    PRIMARY KEY (stream_id, topic_id, key),
    FOREIGN KEY (stream_id, topic_id) REFERENCES topics(stream_id, id) ON DELETE CASCADE
);

CREATE TABLE kv_tables (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    length     INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
);

CREATE TABLE kv_entries (
    table_id INTEGER NOT NULL REFERENCES kv_tables(id) ON DELETE CASCADE,
    key      BLOB NOT NULL,
    value    BLOB NOT NULL,
    version  INTEGER NOT NULL,
    PRIMARY KEY (table_id, key)
);

CREATE UNIQUE INDEX kv_entries_by_version ON kv_entries (table_id, version);
"""

# Step 3: per-topic log settings (docs/storage.md "Per-topic segment size and
# fsync policy"): a topic's segment size in bytes and its fsync policy, each
# overriding the broker's ``[log]`` value; 0 and '' keep the broker's.
_SCHEMA_V3 = """
ALTER TABLE topics ADD COLUMN segment_bytes INTEGER NOT NULL DEFAULT 0;

ALTER TABLE topics ADD COLUMN fsync TEXT NOT NULL DEFAULT '';
"""

# Step 4: SCRAM credentials (core/scram.py; docs/kafka.md "Security"): per user and
# mechanism the salt, iteration count, StoredKey and ServerKey (RFC 5802 section 3),
# the values Kafka keeps per user (ScramCredential). They go with their user.
_SCHEMA_V4 = """
CREATE TABLE scram_credentials (
    user_id    INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    mechanism  TEXT NOT NULL,
    salt       BLOB NOT NULL,
    iterations INTEGER NOT NULL,
    stored_key BLOB NOT NULL,
    server_key BLOB NOT NULL,
    PRIMARY KEY (user_id, mechanism)
) WITHOUT ROWID;
"""

# Every schema step from an empty file, in order. Add a step; never edit one
# that has shipped.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", _SCHEMA_V1),
    Migration(2, "sealed topics, logical partition starts, topic attributes, key-value tables", _SCHEMA_V2),
    Migration(3, "per-topic segment size and fsync policy", _SCHEMA_V3),
    Migration(4, "SCRAM credentials", _SCHEMA_V4),
)


class MetaDb:
    """The SQLite connection, its lock, transactions and migrations."""

    def __init__(self, path: Path | str, *, synchronous: str = "FULL") -> None:
        self.path = Path(path)
        self.lock = threading.RLock()
        self.replicator: Replicator | None = None
        self.replica_seq = 0  # last metadata-log entry this file holds (replicated mode)
        self._depth = 0  # nested transaction() calls (replicated mode publishes at the outermost)
        try:
            self.conn = _connect(self.path, synchronous)
        except sqlite3.Error as err:
            raise StorageError(f"cannot open metadata store {self.path}: {err}") from err

    def close(self) -> None:
        with self.lock:
            self.conn.close()

    def catch_up(self) -> None:
        """Replicated: apply every metadata-log entry past the one this file holds
        (what a write does first), for a read that must see every write made
        elsewhere before it (Kafka's OffsetFetch after a rebalance). Raises
        StorageError when the cluster cannot say where the log ends. Embedded: nothing."""
        with self.lock:
            if self.replicator is not None:
                self.replicator.before_write(self)

    # -- statements --------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``; any exception rolls everything back.
        Replicated: the statements are published to the cluster's log before
        ``COMMIT``, and a refused publish rolls back (module docstring)."""
        with self.lock:
            rep = self.replicator
            if rep is not None and self._depth == 0:
                rep.before_write(self)
            conn = self.conn
            _run(conn, "BEGIN IMMEDIATE")
            try:
                if rep is None:
                    yield conn
                else:
                    capture = _Capture(conn)
                    self._depth += 1
                    try:
                        yield capture  # type: ignore[misc]
                    finally:
                        self._depth -= 1
                    if capture.statements:
                        seq = rep.publish(capture.statements, self.replica_seq)
                        _run(conn, _SET_REPLICA_SEQ, (seq,))
                        self.replica_seq = seq
                _run(conn, "COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.rollback()
                if rep is not None:  # a publish that went through before COMMIT failed is not ours
                    self.replica_seq = self._stored_replica_seq()
                raise

    def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        """One statement as its own transaction (autocommit); returns the rows changed.
        Replicated, an upsert whose outcome does not depend on what came before it
        (a stored consumer offset) skips the catch-up round trip: it is published
        after whatever the log holds, then replayed here like any entry."""
        rep = self.replicator
        if rep is not None and sql.startswith(REORDERABLE_PREFIXES):
            with self.lock:
                statements = [(sql, tuple(params))]
                self.apply_entry(rep.publish_anywhere(statements, self), statements)
                return 1
        if rep is not None:
            with self.transaction() as conn:
                return conn.execute(sql, params).rowcount
        with self.lock:
            return _run(self.conn, sql, params).rowcount

    # -- replication (module docstring) --------------------------------------------
    def replicate(self, replicator: Replicator | None) -> None:
        """Install (or remove) the cluster log writes go through; reads the last
        entry this file holds."""
        with self.lock:
            if replicator is not None:
                _run(self.conn, _REPLICA_TABLE)
                self.replica_seq = self._stored_replica_seq()
            self.replicator = replicator

    def _stored_replica_seq(self) -> int:
        row = _run(self.conn, "SELECT seq FROM replica_state WHERE id = 0").fetchone()
        return int(row[0]) if row else 0

    def apply_entry(self, seq: int, statements: Sequence[Statement]) -> bool:
        """Replay the log entry ``seq`` (another gateway's write) in one transaction.
        Returns False, doing nothing, when the file already holds it; raises
        StorageError when an entry is missing in between (the caller fetches it)."""
        with self.lock:
            if seq <= self.replica_seq:
                return False
            if seq != self.replica_seq + 1:
                raise StorageError(f"metadata log entry {seq} arrived after {self.replica_seq}: a gap")
            conn = self.conn
            _run(conn, "BEGIN IMMEDIATE")
            try:
                _run(conn, "SAVEPOINT entry")
                try:
                    for sql, params in statements:
                        conn.execute(sql, params)
                except sqlite3.IntegrityError as exc:
                    # The entry's writer checked it against the same state, so this
                    # only happens to a reorderable write that met, say, its topic's
                    # deletion: every gateway refuses it alike, and the log goes on.
                    log.warning("metadata log entry %d skipped: %s", seq, exc)
                    _run(conn, "ROLLBACK TO entry")
                _run(conn, "RELEASE entry")
                _run(conn, _SET_REPLICA_SEQ, (seq,))
                _run(conn, "COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.rollback()
                raise
            self.replica_seq = seq
            return True

    def one(self, sql: str, params: Sequence[object] = ()) -> tuple | None:
        """The first row of a read, or ``None``."""
        with self.lock:
            return _run(self.conn, sql, params).fetchone()

    def all(self, sql: str, params: Sequence[object] = ()) -> list[tuple]:
        with self.lock:
            return _run(self.conn, sql, params).fetchall()

    # -- migrations ----------------------------------------------------------
    def schema_version(self) -> int:
        row = self.one("SELECT version FROM schema_version")
        return int(row[0]) if row else 0

    def migrate(self, migrations: Sequence[Migration] | None = None) -> int:
        """Run the steps above the stored version (default :data:`MIGRATIONS`,
        read at call time); returns the version reached."""
        migrations = MIGRATIONS if migrations is None else migrations
        with self.lock:
            with self.transaction() as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                if conn.execute("SELECT COUNT(*) FROM schema_version").fetchone()[0] == 0:
                    conn.execute("INSERT INTO schema_version (version) VALUES (0)")
            current = self.schema_version()
            latest = migrations[-1].version if migrations else 0
            if current > latest:
                raise StorageError(
                    f"metadata store {self.path} has schema version {current}; "
                    f"this build knows up to {latest} (was it written by a newer Ferry?)"
                )
            for step in migrations:
                if step.version > current:
                    self._apply(step)
                    current = step.version
            return current

    def _apply(self, step: Migration) -> None:
        log.info("migrating metadata store", extra={"version": step.version, "about": step.about})
        try:
            with self.transaction() as conn:
                if isinstance(step.apply, str):
                    for statement in _statements(step.apply):
                        conn.execute(statement)
                else:
                    step.apply(conn)
                conn.execute("UPDATE schema_version SET version = ?", (step.version,))
        except sqlite3.Error as err:
            raise StorageError(f"metadata migration {step.version} ({step.about}) failed: {err}") from err


_REPLICA_TABLE = ("CREATE TABLE IF NOT EXISTS replica_state "
                  "(id INTEGER PRIMARY KEY CHECK (id = 0), seq INTEGER NOT NULL)")
_SET_REPLICA_SEQ = "INSERT INTO replica_state (id, seq) VALUES (0, ?) ON CONFLICT (id) DO UPDATE SET seq = excluded.seq"


def _connect(path: Path, synchronous: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if str(mode).lower() != "wal":  # e.g. a filesystem without shared memory
        log.warning("metadata store is not in WAL mode", extra={"mode": mode})
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    return conn


def _run(conn: sqlite3.Connection, sql: str, params: Sequence[object] = ()) -> sqlite3.Cursor:
    """Execute one statement; the disk's refusals become :class:`StorageError`."""
    try:
        return conn.execute(sql, params)
    except sqlite3.OperationalError as err:
        raise StorageError(f"metadata store: {err}") from err


def _statements(script: str) -> list[str]:
    # The schema scripts hold no ';' inside literals, so a split is exact.
    return [s.strip() for s in script.split(";") if s.strip()]


# -- input checks shared by the store's modules -------------------------------------
def check_name(name: object, what: str, error: type[InvalidArgument] = InvalidName,
               lo: int = MIN_NAME_BYTES, hi: int = MAX_NAME_BYTES, *, noun: str = "name") -> str:
    """``name`` as given if it is a str of ``lo..hi`` UTF-8 bytes, else ``error``
    (``noun`` words the message for other strings: "value")."""
    if not isinstance(name, str):
        raise error(f"{what} {noun} must be a string, got {type(name).__name__}")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise error(f"{what} {noun} is not valid UTF-8") from None
    if not lo <= size <= hi:
        raise error(f"{what} {noun} must be {lo}..{hi} bytes of UTF-8, got {size}", size=size)
    return name


def check_int(value: object, what: str, lo: int = 0, hi: int = MAX_INT64) -> int:
    """``value`` if it is an int (not a bool) within ``lo..hi``, else InvalidArgument."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{what} must be an int, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise InvalidArgument(f"{what} must be within {lo}..{hi}, got {value}")
    return value


def check_ident(ident: object, what: str) -> Ident:
    """An id (int within 0..MAX_ID) or a name (str); anything else is InvalidArgument."""
    if isinstance(ident, str):
        return ident
    return check_int(ident, f"{what} id", 0, MAX_ID)


def lowest_free_id(conn: sqlite3.Connection, table: str, scope: Sequence[str] = (),
                   values: Sequence[object] = (), first: int = 0) -> int:
    """The smallest id >= ``first`` not used in ``table`` within ``scope``
    (Iggy 0.6+ slab reuse). ``table`` and ``scope`` are module constants, never
    caller input."""
    where = "".join(f" AND {col} = ?" for col in scope)
    if conn.execute(f"SELECT 1 FROM {table} WHERE id = ?{where}", (first, *values)).fetchone() is None:
        return first
    sql = (
        f"SELECT MIN(a.id) + 1 FROM {table} a WHERE a.id >= ?"
        + "".join(f" AND a.{col} = ?" for col in scope)
        + f" AND NOT EXISTS (SELECT 1 FROM {table} b WHERE b.id = a.id + 1"
        + "".join(f" AND b.{col} = a.{col}" for col in scope)
        + ")"
    )
    found = int(conn.execute(sql, (first, *values)).fetchone()[0])
    if found > MAX_ID:
        raise InvalidArgument(f"no free id left in {table}")
    return found


__all__ = [
    "Ident",
    "MAX_ID",
    "MAX_NAME_BYTES",
    "MIGRATIONS",
    "MetaDb",
    "Migration",
    "check_ident",
    "check_int",
    "check_name",
    "lowest_free_id",
]
