"""Topic state beyond Iggy's settings: the sealed flag, recorded partition
starts and topic attributes.

:class:`TopicStateStore` is a collaborator that :class:`core.metadata.Metadata`
constructs and hands out as ``metadata.topic_state``; its constructor takes the
store's :class:`core.metadb.MetaDb` and the two topic-cache functions it needs
(``get_topic``, ``reload_topic``). The columns and the table are metadata
migration 2 (``core.metadb``).

Theory of operation
-------------------
* **Sealed** is a column of ``topics`` and so a field of every cached
  :class:`~core.model.TopicInfo` (``sealed``): the append path reads it from
  the TopicInfo it looks up anyway, so the check costs one attribute read.
  Sealing is one way: Pravega has no unseal (sealStream is final).
* **Logical starts** (``partitions.logical_start``) are the byte positions a
  Pravega truncation moved each partition's start to. The log itself only
  drops whole segments, so the exact position lives here. Only partitions
  with a start above 0 are cached (a dict hit per Pravega read, never SQL).
  A start only moves up (:meth:`set_logical_start`); purging a topic sets its
  partitions' starts back to 0, and deleting a stream, topic or partition
  deletes the rows (foreign-key cascade) and the cache entries with them.
* **Attributes** are a small string key/value store per topic
  (``topic_attrs``, deleted with the topic by cascade), bounded by the limits
  below. They are read rarely (a Pravega getStreamConfiguration), so they are
  not cached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping

from .errors import InvalidArgument, PartitionNotFound
from .metadb import MAX_INT64, check_int, check_name

if TYPE_CHECKING:  # pragma: no cover
    from .metadb import Ident, MetaDb
    from .model import TopicInfo

# Attribute keys: 1..255 bytes of UTF-8, the length of every other name in the
# store (Iggy's Str8), enough for Pravega's tag and policy names.
MAX_ATTR_KEY_BYTES = 255
# Values: Pravega allows a stream fewer than 128 tags of fewer than 256 Java
# chars each (MAX_TAG_COUNT / MAX_TAG_LENGTH, pravega/pravega
# client/.../stream/StreamConfiguration.java). A UTF-16 unit is at most 3 bytes
# of UTF-8, so every tag of a stream in one value (the largest thing the
# Pravega adapter stores) fits in 96 KiB plus separators; 128 KiB leaves room.
MAX_ATTR_VALUE_BYTES = 128 * 1024
# Keys per topic: one key per Pravega tag (128) plus the handful of policy
# keys, with room to spare. Bounds what one topic_attrs() call returns
# (at most 256 x 128 KiB = 32 MiB, in practice a few KiB).
MAX_ATTRS_PER_TOPIC = 256


class TopicStateStore:
    """Sealing, logical partition starts and topic attributes in the metadata file ``db``.

    ``get_topic(stream, topic)`` is the metadata store's cached lookup (raises
    StreamNotFound, TopicNotFound); ``reload_topic(sid, tid)`` re-reads one
    topic row into that cache and returns it (after sealing)."""

    def __init__(
        self,
        db: "MetaDb",
        get_topic: Callable[["Ident", "Ident"], "TopicInfo"],
        reload_topic: Callable[[int, int], "TopicInfo"],
    ) -> None:
        self._db = db
        self._get_topic = get_topic
        self._reload_topic = reload_topic
        self._logical_starts: dict[tuple[int, int, int], int] = {}

    def load(self) -> None:
        """Read the recorded starts afresh (on open and on ``Metadata.reload``)."""
        self._logical_starts = {
            (sid, tid, pid): start
            for sid, tid, pid, start in self._db.all(
                "SELECT stream_id, topic_id, id, logical_start FROM partitions WHERE logical_start > 0"
            )
        }

    # -- sealing ---------------------------------------------------------------
    def seal_topic(self, stream: "Ident", topic: "Ident") -> "TopicInfo":
        """Mark a topic sealed (idempotent); returns its TopicInfo with ``sealed``
        True. Raises StreamNotFound, TopicNotFound."""
        info = self._get_topic(stream, topic)
        if info.sealed:
            return info
        with self._db.transaction() as conn:
            conn.execute("UPDATE topics SET sealed = 1 WHERE stream_id = ? AND id = ?", (info.stream_id, info.id))
        return self._reload_topic(info.stream_id, info.id)

    # -- logical partition starts ------------------------------------------------
    def logical_start(self, sid: int, tid: int, pid: int) -> int:
        """The byte position recorded for a partition (canonical ids); 0 when none."""
        return self._logical_starts.get((sid, tid, pid), 0)

    def logical_starts(self) -> dict[tuple[int, int, int], int]:
        """Every start recorded above 0, by ``(stream_id, topic_id, partition_id)`` (a copy)."""
        return dict(self._logical_starts)

    def set_logical_start(self, sid: int, tid: int, pid: int, position: int, *, lower: bool = False) -> int:
        """Record ``position`` as the partition's start if it is above the one
        recorded (a start never moves back, as a truncation is never undone);
        ``lower=True`` records it even when below (the broker's recovery, when
        the log lost its tail in a crash). Returns the start now recorded.
        Raises InvalidArgument (not an int within 0..2**63-1), PartitionNotFound."""
        check_int(position, "byte position", 0, MAX_INT64)
        key = (sid, tid, pid)
        current = self._logical_starts.get(key, 0)
        if position == current or (position < current and not lower):
            return current
        with self._db.transaction() as conn:
            cur = conn.execute(
                "UPDATE partitions SET logical_start = ? WHERE stream_id = ? AND topic_id = ? AND id = ?",
                (position, *key),
            )
            if cur.rowcount == 0:
                raise PartitionNotFound(f"partition {pid} not found in topic {tid} of stream {sid}",
                                        partition_id=pid)
        if position:
            self._logical_starts[key] = position
        else:
            self._logical_starts.pop(key, None)
        return position

    def clear_logical_starts(self, sid: int, tid: int) -> None:
        """Set every recorded start of a topic's partitions back to 0 (the broker's purge)."""
        if not self._cached_starts(sid, tid):
            return
        with self._db.transaction() as conn:
            conn.execute(
                "UPDATE partitions SET logical_start = 0 WHERE stream_id = ? AND topic_id = ? AND logical_start != 0",
                (sid, tid),
            )
        self.forget_logical_starts(sid, tid)

    def _cached_starts(self, sid: int, tid: int | None = None, first_pid: int = 0) -> list[tuple[int, int, int]]:
        return [k for k in self._logical_starts
                if k[0] == sid and (tid is None or k[1] == tid) and k[2] >= first_pid]

    def forget_logical_starts(self, sid: int, tid: int | None = None, first_pid: int = 0) -> None:
        """Drop cache entries whose rows are gone (a delete cascaded) or were reset."""
        for key in self._cached_starts(sid, tid, first_pid):
            del self._logical_starts[key]

    # -- attributes ------------------------------------------------------------------
    def set_topic_attrs(self, stream: "Ident", topic: "Ident", attrs: Mapping[str, str]) -> None:
        """Set the given keys (others keep their values), in one transaction.
        Raises StreamNotFound, TopicNotFound, InvalidName (a key outside
        1..MAX_ATTR_KEY_BYTES bytes of UTF-8), InvalidArgument (a value that is
        not a str or is over MAX_ATTR_VALUE_BYTES, or more than
        MAX_ATTRS_PER_TOPIC keys would result); nothing is changed then."""
        info = self._get_topic(stream, topic)
        if not isinstance(attrs, Mapping):
            raise InvalidArgument(f"topic attributes must be a mapping, got {type(attrs).__name__}")
        rows = [(check_name(k, "topic attribute", hi=MAX_ATTR_KEY_BYTES), _attr_value(k, v)) for k, v in attrs.items()]
        if not rows:
            return
        key = (info.stream_id, info.id)
        with self._db.transaction() as conn:
            have = {r[0] for r in conn.execute("SELECT key FROM topic_attrs WHERE stream_id = ? AND topic_id = ?", key)}
            total = len(have | {k for k, _ in rows})
            if total > MAX_ATTRS_PER_TOPIC:
                raise InvalidArgument(f"a topic holds at most {MAX_ATTRS_PER_TOPIC} attributes, this would make {total}")
            conn.executemany(
                "INSERT INTO topic_attrs (stream_id, topic_id, key, value) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (stream_id, topic_id, key) DO UPDATE SET value = excluded.value",
                [(*key, k, v) for k, v in rows],
            )

    def topic_attrs(self, stream: "Ident", topic: "Ident") -> dict[str, str]:
        """Every attribute of a topic, by key. Raises StreamNotFound, TopicNotFound."""
        info = self._get_topic(stream, topic)
        rows = self._db.all(
            "SELECT key, value FROM topic_attrs WHERE stream_id = ? AND topic_id = ? ORDER BY key",
            (info.stream_id, info.id),
        )
        return dict(rows)


def _attr_value(key: str, value: object) -> str:
    return check_name(value, f"topic attribute {key!r}", InvalidArgument, 0, MAX_ATTR_VALUE_BYTES, noun="value")


__all__ = ["MAX_ATTRS_PER_TOPIC", "MAX_ATTR_KEY_BYTES", "MAX_ATTR_VALUE_BYTES", "TopicStateStore"]
