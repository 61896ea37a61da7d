"""Where an idempotent producer's recent batches went: Kafka's answer to a retry.

A Kafka producer that got no answer sends the same batch again (same producer id,
epoch and sequences). Kafka's broker keeps the metadata of each producer's last
five batches (``ProducerStateEntry.NUM_BATCHES_TO_RETAIN``) and answers a retry of
one of them with no error and the first attempt's base offset
(``UnifiedLog.analyzeAndValidateProducerState`` finds the duplicate batch and
returns its append info). Ferry's log keeps only each producer's last sequence
(docs/storage.md "Producer deduplication"), which tells a retry from a new batch
but not where the retried one went: answering DUPLICATE_SEQUENCE_NUMBER with base
offset -1 made librdkafka report that batch's records at offsets -1, 0, 1, ...
(bench/fault_schedule.py found it when gateways died between storing and
answering). :class:`RecentBatches` keeps what Kafka keeps, per listener, for the
batches this gateway stored while it ran; a retry it does not know is looked up in
the partition next (adapters/kafka/dataplane.py ``_retried_base``: the partition's
memory of calls, which includes other gateways' over the JetStream store, then the
stored records, adapters/kafka/retry_lookup.py), and only a batch none of them finds
gets DUPLICATE_SEQUENCE_NUMBER, which every client treats as success.
Sans-I/O: plain data, no clock.
"""

from __future__ import annotations

from collections import OrderedDict, deque

# Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN: a producer has at most five
# requests in flight per connection (max.in.flight.requests.per.connection <= 5 for
# idempotence), so its retries are of one of its last five batches.
BATCHES_PER_PRODUCER = 5

# (partition, producer) pairs remembered per listener, least recently written
# forgotten first: the log's own bound on producers per partition (LogConfig
# max_producers, 10,000), so memory stays bounded with many short-lived producers.
MAX_PRODUCER_PARTITIONS = 10_000

Key = tuple[int, int, int, str]  # (stream id, topic id, partition, producer key)


class RecentBatches:
    """``(first sequence, last sequence, base offset)`` of each producer's last batches."""

    __slots__ = ("_by",)

    def __init__(self) -> None:
        self._by: OrderedDict[Key, deque[tuple[int, int, int]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by)

    def remember(self, key: Key, first_seq: int, last_seq: int, base_offset: int) -> None:
        """A batch of ``key``'s producer became durable at ``base_offset``."""
        by = self._by
        batches = by.get(key)
        if batches is None:
            batches = by[key] = deque(maxlen=BATCHES_PER_PRODUCER)
            while len(by) > MAX_PRODUCER_PARTITIONS:
                by.popitem(last=False)
        else:
            by.move_to_end(key)
        batches.append((first_seq, last_seq, base_offset))

    def find(self, key: Key, first_seq: int, last_seq: int) -> int | None:
        """The base offset of the stored batch with exactly these sequences, or None
        (Kafka matches a duplicate by its first and last sequence: ``BatchMetadata``)."""
        for first, last, base in self._by.get(key, ()):
            if first == first_seq and last == last_seq:
                return base
        return None


__all__ = ["BATCHES_PER_PRODUCER", "MAX_PRODUCER_PARTITIONS", "RecentBatches"]
