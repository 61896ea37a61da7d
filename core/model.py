"""The records the metadata store hands out: streams, topics, partitions,
consumer groups and consumer offsets (immutable snapshots of rows).

Their own module because several stores build and return them: core.metadata
(the SQLite tables and their cache), core.topicstate (sealing returns a
TopicInfo), the broker and the remote store (core/store.py). Each imports this
module rather than another store, so imports point one way.
"""

from __future__ import annotations

from dataclasses import dataclass


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


__all__ = ["ConsumerGroupInfo", "ConsumerOffsetInfo", "PartitionInfo", "StreamInfo", "TopicInfo"]
