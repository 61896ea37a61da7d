"""Which view a Pravega stream segment has, and its first offset in that view.

Theory of operation
-------------------
A Ferry partition stores events; Pravega shows a segment in one of two views
(pravega.md section 12, reads.py):

* **events**: the byte view of 8-byte-headed event frames, as an
  ``EventStreamWriter`` wrote them (offsets count frames and payloads);
* **raw bytes**: what a ``ByteStreamWriter`` wrote, offsets counting payload
  bytes only.

A stream becomes a byte stream when its first conditional append (the byte
writer's only kind) arrives on an empty single-segment stream: the topic
attribute ``pravega.kind`` records it, so every connection and gateway sees the
same view. This collaborator owns that decision and its cache (shared per broker
in :mod:`adapters.pravega.state`), and the translation of a byte stream's
truncation point between the two views. No I/O, no trio.
"""

from __future__ import annotations

from .reads import raw_end, raw_offset_for, raw_pos_of

ATTR_KIND = "pravega.kind"  # topic attribute: "bytes" once a byte stream wrote it
BYTES = "bytes"


class SegmentViews:
    """The event or byte view of stream segments; ``kinds`` is the broker-wide cache
    keyed by ``(stream_id, topic_id, created_at)`` (a re-created topic starts again)."""

    def __init__(self, broker, kinds: dict[tuple[int, int, int], str]) -> None:
        self.broker = broker
        self.kinds = kinds

    def is_bytes(self, topic) -> bool:
        """True when the topic is a byte stream (its Pravega view is raw bytes)."""
        key = (topic.stream_id, topic.id, topic.created_at)
        kind = self.kinds.get(key)
        if kind is None:
            kind = self.broker.topic_state.topic_attrs(topic.stream_id, topic.id).get(ATTR_KIND, "events")
            if (kind == BYTES or topic.partitions_count != 1
                    or self.broker.partition(topic.stream_id, topic.id, 0).next_offset):
                # Kept once final: only an empty single-segment stream can still turn into a
                # byte stream -- here (mark_bytes keeps this cache) or, in scale-out mode, on
                # another gateway (the attribute arrives through the metadata log) -- so that
                # answer is read again next time (one attribute read until the stream has data).
                self.kinds[key] = kind
        return kind == BYTES

    def mark_bytes(self, topic) -> bool:
        """Make an empty single-segment stream a byte stream; False for any other."""
        if topic.partitions_count != 1:
            return False  # byte streams are single-segment streams (Pravega's ByteStreamWriter)
        self.broker.topic_state.set_topic_attrs(topic.stream_id, topic.id, {ATTR_KIND: BYTES})
        self.kinds[(topic.stream_id, topic.id, topic.created_at)] = BYTES
        return True

    def start(self, topic, part, number: int, raw: bool) -> int:
        """The segment's first readable offset in its view (the truncation point)."""
        start = self.broker.topic_state.partition_byte_start(topic.stream_id, topic.id, number)
        if not raw:
            return start
        # A byte stream's recorded start is kept in the event view, where the core's
        # whole-segment deletion can use it; translated here to the raw offset.
        off = part.offset_for_byte_pos(start)
        if off >= part.next_offset:
            return raw_end(part)
        return raw_pos_of(part, off) + (start - part.byte_pos_of(off))

    @staticmethod
    def event_pos_of_raw(part, raw: int) -> int:
        """The event-view position of raw offset ``raw`` (a byte stream's truncation)."""
        off = raw_offset_for(part, raw)
        if off >= part.next_offset:
            return part.byte_end
        return part.byte_pos_of(off) + (raw - raw_pos_of(part, off))


__all__ = ["ATTR_KIND", "BYTES", "SegmentViews"]
