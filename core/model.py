"""The records the metadata store hands out: streams, topics, partitions,
consumer groups and consumer offsets (immutable snapshots of rows).

Their own module because several stores build and return them: core.metadata
(the SQLite tables and their cache), core.topicstate (sealing returns a
TopicInfo), the broker and the remote store (core/store.py). Each imports this
module rather than another store, so imports point one way.

:class:`TopicSettings` is the other way in: the user-settable settings of a
topic, one value that the adapters build and ``Broker.create_topic`` /
``update_topic`` and ``Metadata`` take, so the four settings are named (and
validated, :meth:`TopicSettings.checked`) in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidArgument
from .metadb import check_int

COMPRESSIONS = ("none", "gzip")  # Iggy CompressionAlgorithm 1 / 2 (protocols/iggy.md 3.6)
MAX_REPLICATION_FACTOR = 255  # a u8 on the wire


@dataclass(frozen=True, slots=True)
class TopicSettings:
    """A topic's user-settable settings (``TopicInfo.settings``). Built unchecked, so a
    caller can assemble one from wire values; the store validates it with
    :meth:`checked` at the point it always did (after the name and partition count)."""

    message_expiry: int = 0  # µs; 0 = never expires
    max_topic_size: int = 0  # bytes; 0 = unlimited
    compression: str = "none"  # one of COMPRESSIONS (stored as TopicInfo.compression_algorithm)
    replication_factor: int = 1

    def checked(self) -> TopicSettings:
        """The normalized copy (compression lowercased), or InvalidArgument."""
        check_int(self.message_expiry, "message expiry (µs)")
        check_int(self.max_topic_size, "max topic size (bytes)")
        # Iggy's JSON accepts the algorithm name in any case (protocols/iggy.md 3.6).
        compression = self.compression
        algo = compression.lower() if isinstance(compression, str) else compression
        if algo not in COMPRESSIONS:
            raise InvalidArgument(f"compression must be one of {COMPRESSIONS}, got {compression!r}")
        # 0 means "not given" on Iggy's wire and is stored as 1 there; the adapter
        # maps it, the core refuses it (Iggy's own validation: 2018 InvalidReplicationFactor).
        check_int(self.replication_factor, "replication factor", 1, MAX_REPLICATION_FACTOR)
        return TopicSettings(self.message_expiry, self.max_topic_size, algo, self.replication_factor)


@dataclass(frozen=True, slots=True)
class StreamInfo:
    id: int
    name: str
    created_at: int  # µs since the epoch
    topics_count: int


@dataclass(frozen=True, slots=True)
class TopicInfo:
    stream_id: int
    id: int
    name: str
    created_at: int  # µs since the epoch
    partitions_count: int
    message_expiry: int  # µs; 0 = never expires
    max_topic_size: int  # bytes; 0 = unlimited
    compression_algorithm: str  # "none" | "gzip"
    replication_factor: int
    sealed: bool = False  # no more appends (broker.topic_state.seal_topic); last, so older constructions still work
    # Per-topic log settings (migration 3), fixed at creation: 0 / "" = the broker's [log] value.
    segment_bytes: int = 0  # roll to a new segment past this many bytes
    fsync: str = ""  # "always" | "batch" | "never" (core.log.config.FSYNC_POLICIES)

    @property
    def settings(self) -> TopicSettings:
        """The user-settable settings; ``replace(topic.settings, ...)`` for an update."""
        return TopicSettings(self.message_expiry, self.max_topic_size, self.compression_algorithm,
                             self.replication_factor)


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    stream_id: int
    topic_id: int
    id: int
    created_at: int  # µs since the epoch


@dataclass(frozen=True, slots=True)
class ConsumerGroupInfo:
    stream_id: int
    topic_id: int
    id: int
    name: str


@dataclass(frozen=True, slots=True)
class ConsumerOffsetInfo:
    kind: str  # "consumer" | "group"
    consumer_id: int
    stream_id: int
    topic_id: int
    partition_id: int
    offset: int  # the last consumed offset


__all__ = [
    "COMPRESSIONS", "ConsumerGroupInfo", "ConsumerOffsetInfo", "MAX_REPLICATION_FACTOR", "PartitionInfo", "StreamInfo",
    "TopicInfo", "TopicSettings",
]
