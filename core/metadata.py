"""The metadata store: streams, topics, partitions, consumer groups, consumer
offsets, users, permissions, personal access tokens and settings, in SQLite.

Theory of operation
-------------------
One :class:`Metadata` object owns one SQLite file (:mod:`core.metadb` has
the connection, the schema, migrations and why the file survives crashes).
The API is synchronous; the broker calls it from the trio thread.

* **Ids** are canonical, 0-based ints (docs/internals.md). Without an explicit
  id the lowest free one is assigned, so a deleted stream's id is the next one
  handed out (Iggy 0.6+ keeps entities in slabs, which do exactly this). The
  seed-era Iggy dialect lets the client choose ids: an explicit id that is
  taken raises the entity's ``AlreadyExists`` with ``details["field"] == "id"``
  (``"name"`` for a taken name), which the adapters map to Iggy's distinct
  "id exists" / "name exists" codes. ``NotFound`` errors carry the same field.
* **Names** of streams, topics and groups are unique per parent and 1..255
  bytes of UTF-8 (Iggy's Str8 limit), else :class:`InvalidName`.
* **Lookups** take an :data:`Ident`: an int id or a str name.
* **Atomicity**: every multi-row change (a topic and its partitions, a stream
  and everything under it) is one transaction; a crash leaves all or nothing.
  Deletes cascade through foreign keys: stream -> topics -> partitions ->
  stored offsets, topic -> consumer groups. Grants on a deleted stream or
  topic are dropped in the same transaction (ids are reused).
* **Partitions** of a topic are numbered ``0..n-1``: adding appends ids,
  deleting removes the highest ones (as Iggy does).
* **Cache**: every append and poll looks its topic up, so streams and topics
  are also kept in memory (dicts by id and by name), loaded on open and
  updated after each commit. This process is the file's only writer.
* **Consumer groups**: only the group (id, name) is stored. Its *members* are
  connections: they die with the process and re-join after a restart, so
  they live in the broker (``core.groups``), never here.
* **Consumer offsets** name the last consumed offset per (consumer kind,
  consumer id, partition). ``store_offset`` runs on every auto-commit poll:
  it is one cached prepared UPSERT, its own transaction.
* **Collaborators**: topic state (sealed flags, recorded partition starts,
  topic attributes) is ``metadata.topic_state``, a
  :class:`core.topicstate.TopicStateStore`; users, permissions and tokens are
  ``metadata.users``, a :class:`core.auth.UserStore`. Both share this store's
  connection; the deletes here drop their grants and cached starts. The
  records handed out (``StreamInfo``, ``TopicInfo``, ...) are in
  :mod:`core.model`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable, Sequence

from argon2 import PasswordHasher

from .access import audit
from .auth import INACTIVE, ACTIVE, TokenInfo, UserInfo, UserStore
from .errors import (
    ConsumerGroupAlreadyExists,
    ConsumerGroupNotFound,
    ConsumerOffsetNotFound,
    InvalidArgument,
    PartitionNotFound,
    StreamAlreadyExists,
    StreamNotFound,
    TooManyPartitions,
    TopicAlreadyExists,
    TopicNotFound,
)
from .log.config import FSYNC_POLICIES, MAX_SEGMENT_BYTES
from .message import now_us
from .metadb import MAX_ID, MAX_INT64, Ident, MetaDb, check_ident, check_int, check_name, lowest_free_id
from .model import ConsumerGroupInfo, ConsumerOffsetInfo, PartitionInfo, StreamInfo, TopicInfo, TopicSettings
from .permissions import Action, GlobalPermissions, Permissions, StreamPermissions, TopicPermissions
from .topicstate import TopicStateStore

# Iggy's CreateTopic/CreatePartitions accept at most 1000 partitions
# (MAX_PARTITIONS_COUNT, apache/iggy core/common/src/commands/topics/create_topic.rs;
# error 2015 TooManyPartitions).
MAX_PARTITIONS = 1000
CONSUMER_KINDS = ("consumer", "group")

_UPSERT_OFFSET = (
    "INSERT INTO consumer_offsets (stream_id, topic_id, partition_id, kind, consumer_id, stored_offset)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (stream_id, topic_id, partition_id, kind, consumer_id)"
    " DO UPDATE SET stored_offset = excluded.stored_offset"
)
_OFFSET_KEY = "stream_id = ? AND topic_id = ? AND partition_id = ? AND kind = ? AND consumer_id = ?"
_TOPIC_COLUMNS = (
    "t.stream_id, t.id, t.name, t.created_at, "
    "(SELECT COUNT(*) FROM partitions p WHERE p.stream_id = t.stream_id AND p.topic_id = t.id), "
    "t.message_expiry, t.max_topic_size, t.compression, t.replication_factor, t.sealed, t.segment_bytes, t.fsync"
)


class Metadata:
    """The metadata store. ``clock`` returns µs since the epoch (tests inject one).

    ``fsync_offsets=False`` writes consumer offsets through a second
    connection with ``synchronous=NORMAL``: still atomic and crash-safe for
    the process, but a power cut may forget the last few stored offsets (then
    messages are delivered again, at-least-once). Iggy does not fsync offsets
    by default either. Everything else always commits with ``FULL``.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        clock: Callable[[], int] = now_us,
        hasher: PasswordHasher | None = None,
        fsync_offsets: bool = True,
    ) -> None:
        self._db = self._offsets_db = MetaDb(path)
        self._clock = clock
        # Users, permissions and tokens (core/auth.py).
        self.users = UserStore(self._db, clock, hasher)
        # Sealing, logical partition starts and topic attributes (core/topicstate.py).
        self.topic_state = TopicStateStore(self._db, self.get_topic, self._reload_topic)
        self.closed = False
        try:
            self._db.migrate()
            if not fsync_offsets:
                self._offsets_db = MetaDb(path, synchronous="NORMAL")
                self._offsets_db.lock = self._db.lock  # one lock: both write the same file
            self._load_cache()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._offsets_db is not self._db:
            self._offsets_db.close()
        self._db.close()

    def __enter__(self) -> "Metadata":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def path(self) -> Path:
        return self._db.path

    @property
    def db(self) -> MetaDb:
        """The connection (synchronous=FULL) that other stores share: ``core.kvtables``."""
        return self._db

    @property
    def databases(self) -> tuple[MetaDb, ...]:
        """Every connection that writes the file (the offsets may have their own,
        synchronous=NORMAL): what a replicating store (core/store.py) installs on."""
        return (self._db,) if self._offsets_db is self._db else (self._db, self._offsets_db)

    def schema_version(self) -> int:
        return self._db.schema_version()

    # -- streams -----------------------------------------------------------------
    def create_stream(self, name: str, stream_id: int | None = None) -> StreamInfo:
        """Raises InvalidName, InvalidArgument (id), StreamAlreadyExists."""
        check_name(name, "stream")
        if stream_id is not None:
            check_int(stream_id, "stream id", 0, MAX_ID)
        with self._db.transaction() as conn:
            if name in self._stream_ids:
                raise StreamAlreadyExists(f"stream {name!r} already exists", field="name")
            if stream_id is None:
                stream_id = lowest_free_id(conn, "streams")
            elif stream_id in self._streams:
                raise StreamAlreadyExists(f"stream id {stream_id} already exists", field="id")
            created = self._clock()
            conn.execute("INSERT INTO streams (id, name, created_at) VALUES (?, ?, ?)", (stream_id, name, created))
        info = StreamInfo(stream_id, name, created, 0)
        self._streams[stream_id] = info
        self._stream_ids[name] = stream_id
        self._topics[stream_id] = {}
        audit("stream.create", stream=name, stream_id=stream_id)
        return info

    def get_stream(self, stream: Ident) -> StreamInfo:
        """Raises StreamNotFound (``field`` "id" or "name")."""
        return self._streams[self._sid(stream)]

    def list_streams(self) -> list[StreamInfo]:
        return [self._streams[k] for k in sorted(self._streams)]

    def update_stream(self, stream: Ident, name: str) -> StreamInfo:
        """Rename a stream. Raises StreamNotFound, InvalidName, StreamAlreadyExists."""
        check_name(name, "stream")
        sid = self._sid(stream)
        old = self._streams[sid]
        if name == old.name:
            return old
        if name in self._stream_ids:
            raise StreamAlreadyExists(f"stream {name!r} already exists", field="name")
        with self._db.transaction() as conn:
            conn.execute("UPDATE streams SET name = ? WHERE id = ?", (name, sid))
        del self._stream_ids[old.name]
        self._stream_ids[name] = sid
        info = self._streams[sid] = replace(old, name=name)
        audit("stream.update", stream=name, stream_id=sid, old_name=old.name)
        return info

    def delete_stream(self, stream: Ident) -> None:
        """Delete a stream with its topics, partitions, groups, offsets and grants."""
        sid = self._sid(stream)
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM streams WHERE id = ?", (sid,))
            self.users.forget_grants(conn, sid)
        self.topic_state.forget_logical_starts(sid)
        info = self._streams.pop(sid)
        del self._stream_ids[info.name]
        for topic in self._topics.pop(sid).values():
            del self._topic_ids[(sid, topic.name)]
        audit("stream.delete", stream=info.name, stream_id=sid)

    # -- topics ------------------------------------------------------------------
    def create_topic(
        self,
        stream: Ident,
        name: str,
        partitions: int = 1,
        *,
        topic_id: int | None = None,
        settings: TopicSettings = TopicSettings(),
        segment_bytes: int = 0,
        fsync: str = "",
    ) -> TopicInfo:
        """Create a topic and its partitions ``0..partitions-1`` in one transaction.
        ``settings`` are checked (:meth:`TopicSettings.checked`) after the name and
        the partition count. ``segment_bytes`` and ``fsync`` override the broker's log settings for this
        topic (0 / "" keep them); they cannot be changed afterwards.

        Raises StreamNotFound, InvalidName, InvalidArgument, TooManyPartitions,
        TopicAlreadyExists."""
        check_name(name, "topic")
        _check_partitions(partitions, 0)
        checked = settings.checked()
        log_settings = _topic_log_settings(segment_bytes, fsync)
        if topic_id is not None:
            check_int(topic_id, "topic id", 0, MAX_ID)
        sid = self._sid(stream)
        with self._db.transaction() as conn:
            if (sid, name) in self._topic_ids:
                raise TopicAlreadyExists(f"topic {name!r} already exists in stream {sid}", field="name")
            if topic_id is None:
                topic_id = lowest_free_id(conn, "topics", ("stream_id",), (sid,))
            elif topic_id in self._topics[sid]:
                raise TopicAlreadyExists(f"topic id {topic_id} already exists in stream {sid}", field="id")
            created = self._clock()
            conn.execute(
                "INSERT INTO topics (stream_id, id, name, created_at, message_expiry, max_topic_size,"
                " compression, replication_factor, segment_bytes, fsync) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (sid, topic_id, name, created, *_setting_values(checked), *log_settings),
            )
            _insert_partitions(conn, sid, topic_id, range(partitions), created)
        info = self._reload_topic(sid, topic_id)
        audit("topic.create", stream_id=sid, topic=name, topic_id=topic_id, partitions=partitions)
        return info

    def get_topic(self, stream: Ident, topic: Ident) -> TopicInfo:
        """Raises StreamNotFound, TopicNotFound (``field`` "id" or "name")."""
        sid = self._sid(stream)
        return self._topics[sid][self._tid(sid, topic)]

    def list_topics(self, stream: Ident) -> list[TopicInfo]:
        topics = self._topics[self._sid(stream)]
        return [topics[k] for k in sorted(topics)]

    def update_topic(
        self,
        stream: Ident,
        topic: Ident,
        *,
        name: str | None = None,
        settings: TopicSettings | None = None,
    ) -> TopicInfo:
        """Rename a topic and/or replace its settings (``None`` keeps either; to change
        some settings pass ``dataclasses.replace(topic.settings, ...)``). Raises
        StreamNotFound, TopicNotFound, InvalidName, InvalidArgument, TopicAlreadyExists."""
        old = self.get_topic(stream, topic)
        new_name = old.name if name is None else check_name(name, "topic")
        checked = (old.settings if settings is None else settings).checked()
        taken = self._topic_ids.get((old.stream_id, new_name))
        if taken is not None and taken != old.id:
            raise TopicAlreadyExists(f"topic {new_name!r} already exists in stream {old.stream_id}", field="name")
        with self._db.transaction() as conn:
            conn.execute(
                "UPDATE topics SET name = ?, message_expiry = ?, max_topic_size = ?, compression = ?,"
                " replication_factor = ? WHERE stream_id = ? AND id = ?",
                (new_name, *_setting_values(checked), old.stream_id, old.id),
            )
        del self._topic_ids[(old.stream_id, old.name)]
        audit("topic.update", stream_id=old.stream_id, topic=new_name, topic_id=old.id)
        return self._reload_topic(old.stream_id, old.id)

    def delete_topic(self, stream: Ident, topic: Ident) -> None:
        """Delete a topic with its partitions, groups, offsets and grants."""
        info = self.get_topic(stream, topic)
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM topics WHERE stream_id = ? AND id = ?", (info.stream_id, info.id))
            self.users.forget_grants(conn, info.stream_id, info.id)
        self.topic_state.forget_logical_starts(info.stream_id, info.id)
        self._drop_topic(info)
        audit("topic.delete", stream_id=info.stream_id, topic=info.name, topic_id=info.id)

    # -- partitions ----------------------------------------------------------------
    def add_partitions(self, stream: Ident, topic: Ident, count: int) -> list[int]:
        """Append ``count`` partitions; returns their ids. Raises TooManyPartitions."""
        info = self.get_topic(stream, topic)
        _check_partitions(count, 1)
        if info.partitions_count + count > MAX_PARTITIONS:
            raise TooManyPartitions(f"a topic holds at most {MAX_PARTITIONS} partitions")
        new_ids = list(range(info.partitions_count, info.partitions_count + count))
        with self._db.transaction() as conn:
            _insert_partitions(conn, info.stream_id, info.id, new_ids, self._clock())
        self._reload_topic(info.stream_id, info.id)
        return new_ids

    def delete_partitions(self, stream: Ident, topic: Ident, count: int) -> list[int]:
        """Remove the ``count`` highest partitions (and their stored offsets);
        returns their ids. Raises InvalidArgument if the topic has fewer."""
        info = self.get_topic(stream, topic)
        _check_partitions(count, 1)
        if count > info.partitions_count:
            raise InvalidArgument(f"topic {info.name!r} has only {info.partitions_count} partitions")
        removed = list(range(info.partitions_count - count, info.partitions_count))
        with self._db.transaction() as conn:
            conn.execute(
                "DELETE FROM partitions WHERE stream_id = ? AND topic_id = ? AND id >= ?",
                (info.stream_id, info.id, removed[0]),
            )
        self.topic_state.forget_logical_starts(info.stream_id, info.id, removed[0])
        self._reload_topic(info.stream_id, info.id)
        return removed

    def list_partitions(self, stream: Ident, topic: Ident) -> list[PartitionInfo]:
        info = self.get_topic(stream, topic)
        rows = self._db.all(
            "SELECT stream_id, topic_id, id, created_at FROM partitions WHERE stream_id = ? AND topic_id = ?"
            " ORDER BY id",
            (info.stream_id, info.id),
        )
        return [PartitionInfo(*r) for r in rows]

    # -- consumer groups -----------------------------------------------------------
    def create_group(self, stream: Ident, topic: Ident, name: str, group_id: int | None = None) -> ConsumerGroupInfo:
        """Raises StreamNotFound, TopicNotFound, InvalidName, ConsumerGroupAlreadyExists."""
        check_name(name, "consumer group")
        if group_id is not None:
            check_int(group_id, "consumer group id", 0, MAX_ID)
        t = self.get_topic(stream, topic)
        key = (t.stream_id, t.id)
        with self._db.transaction() as conn:
            where = "stream_id = ? AND topic_id = ?"
            if conn.execute(f"SELECT 1 FROM consumer_groups WHERE {where} AND name = ?", (*key, name)).fetchone():
                raise ConsumerGroupAlreadyExists(f"consumer group {name!r} already exists", field="name")
            if group_id is None:
                group_id = lowest_free_id(conn, "consumer_groups", ("stream_id", "topic_id"), key)
            elif conn.execute(f"SELECT 1 FROM consumer_groups WHERE {where} AND id = ?", (*key, group_id)).fetchone():
                raise ConsumerGroupAlreadyExists(f"consumer group id {group_id} already exists", field="id")
            conn.execute(
                "INSERT INTO consumer_groups (stream_id, topic_id, id, name) VALUES (?, ?, ?, ?)", (*key, group_id, name)
            )
        return ConsumerGroupInfo(t.stream_id, t.id, group_id, name)

    def get_group(self, stream: Ident, topic: Ident, group: Ident) -> ConsumerGroupInfo:
        """Raises StreamNotFound, TopicNotFound, ConsumerGroupNotFound."""
        t = self.get_topic(stream, topic)
        ident = check_ident(group, "consumer group")
        column = "name" if isinstance(ident, str) else "id"
        row = self._db.one(
            f"SELECT id, name FROM consumer_groups WHERE stream_id = ? AND topic_id = ? AND {column} = ?",
            (t.stream_id, t.id, ident),
        )
        if row is None:
            raise ConsumerGroupNotFound(f"consumer group {ident!r} not found", field=column)
        return ConsumerGroupInfo(t.stream_id, t.id, row[0], row[1])

    def list_groups(self, stream: Ident, topic: Ident) -> list[ConsumerGroupInfo]:
        t = self.get_topic(stream, topic)
        rows = self._db.all(
            "SELECT id, name FROM consumer_groups WHERE stream_id = ? AND topic_id = ? ORDER BY id", (t.stream_id, t.id)
        )
        return [ConsumerGroupInfo(t.stream_id, t.id, gid, name) for gid, name in rows]

    def delete_group(self, stream: Ident, topic: Ident, group: Ident) -> None:
        """Delete a group and the offsets it stored (Iggy drops them too)."""
        g = self.get_group(stream, topic, group)
        with self._db.transaction() as conn:
            conn.execute(
                "DELETE FROM consumer_groups WHERE stream_id = ? AND topic_id = ? AND id = ?",
                (g.stream_id, g.topic_id, g.id),
            )
            conn.execute(
                "DELETE FROM consumer_offsets WHERE stream_id = ? AND topic_id = ? AND kind = 'group'"
                " AND consumer_id = ?",
                (g.stream_id, g.topic_id, g.id),
            )

    # -- consumer offsets ----------------------------------------------------------
    def store_offset(self, kind: str, consumer_id: int, stream_id: int, topic_id: int, partition_id: int,
                     offset: int) -> None:
        """Store the last consumed ``offset`` (canonical ids). Raises InvalidArgument,
        StreamNotFound, TopicNotFound, PartitionNotFound."""
        row = self._offset_row(kind, consumer_id, stream_id, topic_id, partition_id, offset)
        self._offsets_db.execute(_UPSERT_OFFSET, row)

    def store_offsets(self, items: Iterable[ConsumerOffsetInfo | Sequence]) -> None:
        """Store many offsets in one transaction: all or none. Each item is a
        ConsumerOffsetInfo or a ``(kind, consumer_id, stream_id, topic_id,
        partition_id, offset)`` tuple, as :meth:`store_offset` takes."""
        rows = [self._offset_row(*_offset_args(item)) for item in items]
        if not rows:
            return
        with self._offsets_db.transaction() as conn:
            conn.executemany(_UPSERT_OFFSET, rows)

    def get_offset(self, kind: str, consumer_id: int, stream_id: int, topic_id: int, partition_id: int) -> int | None:
        """The stored offset, or ``None`` when nothing is stored."""
        key = self._offset_key(kind, consumer_id, stream_id, topic_id, partition_id)
        row = self._db.one(f"SELECT stored_offset FROM consumer_offsets WHERE {_OFFSET_KEY}", key)
        return None if row is None else row[0]

    def delete_offset(self, kind: str, consumer_id: int, stream_id: int, topic_id: int, partition_id: int) -> None:
        """Raises ConsumerOffsetNotFound when nothing is stored."""
        key = self._offset_key(kind, consumer_id, stream_id, topic_id, partition_id)
        with self._db.transaction() as conn:
            if conn.execute(f"DELETE FROM consumer_offsets WHERE {_OFFSET_KEY}", key).rowcount == 0:
                raise ConsumerOffsetNotFound(
                    f"no offset stored for {kind} {consumer_id} on partition {partition_id}"
                )

    def list_offsets(self, stream: Ident, topic: Ident) -> list[ConsumerOffsetInfo]:
        """Every offset stored for the topic, by partition, kind and consumer."""
        t = self.get_topic(stream, topic)
        rows = self._db.all(
            "SELECT kind, consumer_id, stream_id, topic_id, partition_id, stored_offset FROM consumer_offsets"
            " WHERE stream_id = ? AND topic_id = ? ORDER BY partition_id, kind, consumer_id",
            (t.stream_id, t.id),
        )
        return [ConsumerOffsetInfo(*r) for r in rows]

    def delete_topic_offsets(self, stream: Ident, topic: Ident) -> int:
        """Forget every offset of a topic (the broker's purge); returns how many."""
        t = self.get_topic(stream, topic)
        with self._db.transaction() as conn:
            cur = conn.execute(
                "DELETE FROM consumer_offsets WHERE stream_id = ? AND topic_id = ?", (t.stream_id, t.id)
            )
            return cur.rowcount

    # -- settings ------------------------------------------------------------------
    def get_setting(self, key: str, default: str | None = None) -> str | None:
        row = self._db.one("SELECT value FROM settings WHERE key = ?", (_setting_key(key),))
        return default if row is None else row[0]

    def set_setting(self, key: str, value: str) -> None:
        if not isinstance(value, str):
            raise InvalidArgument("setting values are strings")
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (_setting_key(key), value),
            )

    # -- cache and lookups -----------------------------------------------------------
    def reload(self) -> None:
        """Re-read every cached row: the file changed under us (a replicated store
        replayed another gateway's writes, core/metadb.py)."""
        with self._db.lock:
            self._load_cache()
            self.users.invalidate()   # users too may have changed: no cached decision survives

    def _load_cache(self) -> None:
        self._streams: dict[int, StreamInfo] = {}
        self._stream_ids: dict[str, int] = {}
        self._topics: dict[int, dict[int, TopicInfo]] = {}
        self._topic_ids: dict[tuple[int, str], int] = {}
        for sid, name, created in self._db.all("SELECT id, name, created_at FROM streams"):
            self._streams[sid] = StreamInfo(sid, name, created, 0)
            self._stream_ids[name] = sid
            self._topics[sid] = {}
        for row in self._db.all(f"SELECT {_TOPIC_COLUMNS} FROM topics t"):
            self._cache_topic(_topic_info(row))
        self.topic_state.load()

    def _cache_topic(self, info: TopicInfo) -> TopicInfo:
        topics = self._topics[info.stream_id]
        topics[info.id] = info
        self._topic_ids[(info.stream_id, info.name)] = info.id
        stream = self._streams[info.stream_id]
        self._streams[info.stream_id] = replace(stream, topics_count=len(topics))
        return info

    def _reload_topic(self, sid: int, tid: int) -> TopicInfo:
        row = self._db.one(f"SELECT {_TOPIC_COLUMNS} FROM topics t WHERE t.stream_id = ? AND t.id = ?", (sid, tid))
        return self._cache_topic(_topic_info(row))

    def _drop_topic(self, info: TopicInfo) -> None:
        topics = self._topics[info.stream_id]
        del topics[info.id]
        del self._topic_ids[(info.stream_id, info.name)]
        stream = self._streams[info.stream_id]
        self._streams[info.stream_id] = replace(stream, topics_count=len(topics))

    def _sid(self, stream: Ident) -> int:
        ident = check_ident(stream, "stream")
        sid = self._stream_ids.get(ident) if isinstance(ident, str) else ident
        if sid is None or sid not in self._streams:
            field = "name" if isinstance(ident, str) else "id"
            raise StreamNotFound(f"stream {ident!r} not found", field=field)
        return sid

    def _tid(self, sid: int, topic: Ident) -> int:
        ident = check_ident(topic, "topic")
        tid = self._topic_ids.get((sid, ident)) if isinstance(ident, str) else ident
        if tid is None or tid not in self._topics[sid]:
            field = "name" if isinstance(ident, str) else "id"
            raise TopicNotFound(f"topic {ident!r} not found in stream {sid}", field=field)
        return tid

    def _offset_key(self, kind: str, consumer_id: int, sid: int, tid: int, pid: int) -> tuple:
        if kind not in CONSUMER_KINDS:
            raise InvalidArgument(f"consumer kind must be one of {CONSUMER_KINDS}, got {kind!r}")
        check_int(consumer_id, "consumer id", 0, MAX_ID)
        info = self.get_topic(check_int(sid, "stream id", 0, MAX_ID), check_int(tid, "topic id", 0, MAX_ID))
        if not 0 <= check_int(pid, "partition id", 0, MAX_ID) < info.partitions_count:
            raise PartitionNotFound(f"partition {pid} not found in topic {info.name!r}", partition_id=pid)
        return (sid, tid, pid, kind, consumer_id)

    def _offset_row(self, kind, consumer_id, sid, tid, pid, offset) -> tuple:
        key = self._offset_key(kind, consumer_id, sid, tid, pid)
        return (*key, check_int(offset, "offset", 0, MAX_INT64))


def _topic_info(row: Sequence) -> TopicInfo:
    # SQLite keeps the sealed flag as 0/1
    return TopicInfo(*row[:9], sealed=bool(row[9]), segment_bytes=row[10], fsync=row[11])


# -- validation helpers ----------------------------------------------------------------
def _check_partitions(count: object, lo: int) -> int:
    if isinstance(count, bool) or not isinstance(count, int):
        raise InvalidArgument(f"partition count must be an int, got {type(count).__name__}")
    if count < lo:
        raise InvalidArgument(f"partition count must be at least {lo}, got {count}")
    if count > MAX_PARTITIONS:
        raise TooManyPartitions(f"a topic holds at most {MAX_PARTITIONS} partitions, got {count}")
    return count


def _setting_values(s: TopicSettings) -> tuple[int, int, str, int]:
    # in the column order of the topics table (message_expiry .. replication_factor)
    return (s.message_expiry, s.max_topic_size, s.compression, s.replication_factor)


def _topic_log_settings(segment_bytes: int, fsync: str) -> tuple[int, str]:
    check_int(segment_bytes, "segment size (bytes)", 0, MAX_SEGMENT_BYTES)  # 0 = the broker's
    if fsync not in ("", *FSYNC_POLICIES):
        raise InvalidArgument(f"fsync must be one of {FSYNC_POLICIES} or '' (the broker's), got {fsync!r}")
    return (segment_bytes, fsync)


def _insert_partitions(conn, sid: int, tid: int, ids: Iterable[int], created: int) -> None:
    conn.executemany(
        "INSERT INTO partitions (stream_id, topic_id, id, created_at) VALUES (?, ?, ?, ?)",
        ((sid, tid, pid, created) for pid in ids),
    )


def _offset_args(item: ConsumerOffsetInfo | Sequence) -> tuple:
    if isinstance(item, ConsumerOffsetInfo):
        return (item.kind, item.consumer_id, item.stream_id, item.topic_id, item.partition_id, item.offset)
    if isinstance(item, (str, bytes)) or not isinstance(item, Sequence) or len(item) != 6:
        raise InvalidArgument("an offset is (kind, consumer_id, stream_id, topic_id, partition_id, offset)")
    return tuple(item)


def _setting_key(key: object) -> str:
    return check_name(key, "setting")


__all__ = [
    "ACTIVE",
    "Action",
    "GlobalPermissions",
    "INACTIVE",
    "Ident",
    "MAX_PARTITIONS",
    "Metadata",
    "Permissions",
    "StreamPermissions",
    "TokenInfo",
    "TopicPermissions",
    "UserInfo",
]
