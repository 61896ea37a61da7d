"""Sealed topics, logical truncation, byte bounds and topic attributes.

:class:`TopicState` is the broker's collaborator for them
(``broker.topic_state``), over the metadata store's half (``core.topicstate``)
and the broker's partitions. Generic core capabilities the Pravega adapter
maps its stream and segment operations onto (protocols/pravega.md sections 4.3
and 12); any adapter may use them.

* **Sealing** (Pravega sealStream / SealSegment) marks a topic so that every
  later ``append`` / ``append_records`` raises :class:`TopicSealed`. It waits
  for nothing: appends accepted before it are pending in their partitions and
  still become durable and acknowledged as usual.
* **Logical truncation** (Pravega truncateStream / TruncateSegment) records a
  byte position (the Pravega byte view, docs/storage.md "Byte positions") as
  the partition's start in metadata, then deletes the whole sealed segments
  that lie entirely below it (never the active one). Pravega reads see the
  exact position (:meth:`TopicState.partition_byte_start`); other protocols'
  offset reads only notice the deleted segments, as after retention.
* **Start offsets**: the same recorded start, seen by offset. An offset-based
  protocol that honours truncation (Kafka's log start offset, which its
  DeleteRecords moves) reads :meth:`TopicState.partition_start_offset`, the
  first record that begins at or after the start, and moves it with
  :meth:`TopicState.truncate_partition_to_offset`, a truncation at the byte
  position where that record begins. Both conversions are exact: a record's
  byte position is in the offset index (``Partition.byte_pos_of``) and a byte
  position's record is found by bisection (``Partition.offset_for_byte_pos``),
  so no offset is stored beside the byte start.
* **Attributes**: a small string key/value store per topic
  (``core.topicstate``), for what Pravega echoes back (tags, policies).
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Callable, Mapping

from .errors import InvalidArgument, InvalidOffset, TopicSealed

if TYPE_CHECKING:  # pragma: no cover
    from .log import Partition
    from .metadata import Metadata
    from .metadb import Ident
    from .model import TopicInfo

log = logging.getLogger("ferry.broker")


def topic_sealed(info: "TopicInfo") -> TopicSealed:
    """The error an append to the sealed topic ``info`` raises."""
    return TopicSealed(f"topic {info.name!r} is sealed: it takes no more appends",
                       stream_id=info.stream_id, topic_id=info.id)


class TopicState:
    """Sealing, truncation and attributes of one broker's topics (``broker.topic_state``).

    ``meta`` is the metadata store (``core.topicstate`` keeps the state there);
    ``partition(info, pid)`` is the broker's open partition of a topic (raises
    PartitionNotFound); ``sealed()`` runs after a topic is sealed (the broker
    drops the TopicInfos it cached per subject)."""

    def __init__(self, meta: "Metadata", partition: Callable[["TopicInfo", int], "Partition"],
                 sealed: Callable[[], None]) -> None:
        self.meta = meta
        self._partition = partition
        self._sealed = sealed

    # -- sealing ---------------------------------------------------------------
    def seal_topic(self, stream: "Ident", topic: "Ident") -> "TopicInfo":
        """Seal a topic (idempotent); returns its TopicInfo (``sealed`` True).
        Appends already accepted still become durable. Raises StreamNotFound,
        TopicNotFound."""
        info = self.meta.topic_state.seal_topic(stream, topic)
        self._sealed()  # cached TopicInfos would still say unsealed
        return info

    # -- byte bounds and truncation ---------------------------------------------------
    def partition_byte_start(self, stream: "Ident", topic: "Ident", partition_id: int) -> int:
        """The first byte position readable in the Pravega view: the larger of
        the log's ``byte_start`` (moved by retention and segment deletion) and
        the start a truncation recorded. Raises StreamNotFound, TopicNotFound,
        PartitionNotFound."""
        info = self.meta.get_topic(stream, topic)
        part = self._partition(info, partition_id)
        return max(part.byte_start, self.meta.topic_state.logical_start(info.stream_id, info.id, partition_id))

    def partition_byte_end(self, stream: "Ident", topic: "Ident", partition_id: int) -> int:
        """The length of the partition's Pravega byte view (pending appends
        included, as reads see them). Raises as :meth:`partition_byte_start`."""
        return self._partition(self.meta.get_topic(stream, topic), partition_id).byte_end

    def truncate_partition(self, stream: "Ident", topic: "Ident", partition_id: int, byte_pos: int) -> int:
        """Move the partition's start to ``byte_pos`` and return the new start
        (:meth:`partition_byte_start`). The position is recorded durably first;
        then the whole sealed segments below it are deleted (never the active
        one), so other protocols lose those records as after retention. A
        position at or below the current start changes nothing (a truncation is
        never undone). Raises StreamNotFound, TopicNotFound, PartitionNotFound,
        InvalidArgument (not an int), InvalidOffset (negative, or past
        ``byte_end``), StorageError."""
        if isinstance(byte_pos, bool) or not isinstance(byte_pos, int):
            raise InvalidArgument(f"a byte position is an int, got {type(byte_pos).__name__}")
        info = self.meta.get_topic(stream, topic)
        part = self._partition(info, partition_id)
        if not 0 <= byte_pos <= part.byte_end:
            raise InvalidOffset(f"byte position {byte_pos} is outside 0..{part.byte_end}", position=byte_pos)
        start = max(part.byte_start, self.meta.topic_state.logical_start(info.stream_id, info.id, partition_id))
        if byte_pos <= start:
            return start
        self.meta.topic_state.set_logical_start(info.stream_id, info.id, partition_id, byte_pos)
        _drop_segments_below(part, byte_pos)
        return byte_pos

    # -- start offsets ------------------------------------------------------------------
    def partition_start_offset(self, stream: "Ident", topic: "Ident", partition_id: int) -> int:
        """The first offset at or after the partition's start (:meth:`partition_byte_start`):
        the log's ``first_offset`` unless a truncation recorded a start past the log's
        ``byte_start``, else the first record that begins at or after that position
        (``next_offset`` when none does yet). Kafka's log start offset. Raises
        StreamNotFound, TopicNotFound, PartitionNotFound."""
        info = self.meta.get_topic(stream, topic)
        part = self._partition(info, partition_id)
        return _offset_at_or_after(part, self.meta.topic_state.logical_start(info.stream_id, info.id, partition_id))

    def truncate_partition_to_offset(self, stream: "Ident", topic: "Ident", partition_id: int, offset: int) -> int:
        """Move the partition's start to record ``offset`` (``next_offset``: past every
        record), as :meth:`truncate_partition` at the byte position where that record
        begins, and return the new :meth:`partition_start_offset`. An offset at or below
        the current start offset changes nothing and answers it (Kafka's DeleteRecords,
        ``UnifiedLog.maybeIncrementLogStartOffset``). Raises StreamNotFound, TopicNotFound,
        PartitionNotFound, InvalidArgument (not an int), InvalidOffset (negative, or past
        ``next_offset``), StorageError."""
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise InvalidArgument(f"an offset is an int, got {type(offset).__name__}")
        info = self.meta.get_topic(stream, topic)
        part = self._partition(info, partition_id)
        if not 0 <= offset <= part.next_offset:
            raise InvalidOffset(f"offset {offset} is outside 0..{part.next_offset}", offset=offset)
        states = self.meta.topic_state
        start = _offset_at_or_after(part, states.logical_start(info.stream_id, info.id, partition_id))
        if offset <= start:
            return start
        self.truncate_partition(info.stream_id, info.id, partition_id, _byte_pos_at_or_after(part, offset))
        return _offset_at_or_after(part, states.logical_start(info.stream_id, info.id, partition_id))

    def apply_logical_starts(self, partitions: Mapping[tuple[int, int, int], "Partition"]) -> None:
        """At open, over the broker's recovered ``partitions`` (by stream, topic and
        partition id): finish truncations a crash cut short (segments not yet
        deleted) and pull back a start past the log's end (the tail it was
        recorded against was pending and lost; new appends must stay readable)."""
        for (sid, tid, pid), start in self.meta.topic_state.logical_starts().items():
            part = partitions.get((sid, tid, pid))
            if part is None:
                continue
            if start > part.byte_end:
                log.warning("partition %d of topic %d/%d: recorded start %d is past the log's end %d after "
                            "recovery; moving it back", pid, sid, tid, start, part.byte_end)
                start = self.meta.topic_state.set_logical_start(sid, tid, pid, part.byte_end, lower=True)
            _drop_segments_below(part, start)

    # -- attributes --------------------------------------------------------------------
    def set_topic_attrs(self, stream: "Ident", topic: "Ident", mapping: Mapping[str, str]) -> None:
        """Set the given attribute keys of a topic (other keys are kept), all or
        nothing. Raises StreamNotFound, TopicNotFound, InvalidName (key),
        InvalidArgument (value, or a limit of ``core.topicstate``)."""
        self.meta.topic_state.set_topic_attrs(stream, topic, mapping)

    def topic_attrs(self, stream: "Ident", topic: "Ident") -> dict[str, str]:
        """A topic's attributes. Raises StreamNotFound, TopicNotFound."""
        return self.meta.topic_state.topic_attrs(stream, topic)


def _drop_segments_below(part: "Partition", byte_pos: int) -> int:
    """Delete the partition's sealed segments whose records all end at or before
    ``byte_pos``; returns how many. ``offset_for_byte_pos`` names the record
    covering ``byte_pos`` (the first not entirely below it), so every record
    before it may go: Partition.delete_oldest_segments stops at the first
    segment holding that offset or a later one, and never takes the active one."""
    if byte_pos <= part.byte_start:
        return 0
    keep_from = part.offset_for_byte_pos(byte_pos)
    return part.delete_oldest_segments(sys.maxsize, keep_from - 1)


def _offset_at_or_after(part: "Partition", byte_pos: int) -> int:
    """The first offset whose record begins at or after ``byte_pos`` (``next_offset``
    when none does). ``offset_for_byte_pos`` names the record covering the position;
    a Pravega truncation may fall inside it, and then that record is below the start."""
    if byte_pos <= part.byte_start:
        return part.first_offset
    pos = min(byte_pos, part.byte_end)  # recovery pulls a start back to the end; never past it
    offset = part.offset_for_byte_pos(pos)
    if offset < part.next_offset and part.byte_pos_of(offset) < pos:
        offset += 1
    return offset


def _byte_pos_at_or_after(part: "Partition", offset: int) -> int:
    """Where record ``offset`` begins in the byte view, or, for an offset inside a
    quarantined gap (core/log/salvage.py: offsets jump between salvaged segments),
    where the next record held begins (``byte_end`` when none follows)."""
    try:
        return part.byte_pos_of(offset)
    except InvalidOffset:
        held = part.read(offset, 1)
        return part.byte_pos_of(held.first_offset) if held.count else part.byte_end


__all__ = ["TopicState", "topic_sealed"]
