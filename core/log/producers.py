"""The producer-dedup table of a partition, and when its entries expire.

Theory of operation
-------------------
A table maps a producer id to ``(last sequence, last write µs)`` and is kept
in *write order*: :func:`remember` moves a producer to the end, so the least
recently written one is always first. Append times never decrease within a
partition (docs/storage.md "Offsets, timestamps and byte positions"), so the
write times along the table never decrease either, and everything idle for
longer than the TTL is a prefix of it: :func:`expire_idle` pops from the front
and stops at the first live entry (Kafka's producer-state expiry,
``producer.id.expiration.ms``, keeps a last-write time per producer for the
same purpose).

Expiry runs where it costs nothing on the append path: after each write
(``Partition.complete_flush``, with the batch's newest append time as "now"),
when a segment's dedup snapshot is built, and at open. A producer that comes
back after its TTL before any of those ran is caught on the only path where it
matters, the duplicate check (:func:`is_expired`, consulted only when the
sequence would be refused). Write times are stored with the entries in every
batch header (``batch.FLAG_PRODUCER_TIMES``), so a restart neither forgets a
live producer nor brings an expired one back.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from itertools import islice

Table = dict[str, tuple[int, int]]  # producer id -> (last sequence, last write µs)

# Calls remembered per producer by :class:`RecentCalls`: Kafka's
# ProducerStateEntry.NUM_BATCHES_TO_RETAIN. An idempotent producer has at most five
# requests in flight per connection, so a retry is of one of its last five calls.
CALLS_PER_PRODUCER = 5


def remember(table: Table, pid: str, seq: int, ts: int, limit: int) -> None:
    """Record ``pid -> (seq, ts)`` as the most recent write; past ``limit``
    entries the least recently written producer is forgotten."""
    table.pop(pid, None)
    table[pid] = (seq, ts)
    if len(table) > limit:
        del table[next(iter(table))]


def expire_idle(table: Table, now: int, ttl_us: int) -> int:
    """Forget the producers last written before ``now - ttl_us`` (none when
    ``ttl_us`` is 0: no expiry); returns how many."""
    if not ttl_us or not table:
        return 0
    cutoff = now - ttl_us
    gone = 0
    for pid, (_seq, ts) in table.items():
        if ts >= cutoff:
            break
        gone += 1
    for pid in list(islice(table, gone)):
        del table[pid]
    return gone


def is_expired(entry: tuple[int, int], now: int, ttl_us: int) -> bool:
    """True when the entry's producer has been idle for longer than the TTL."""
    return bool(ttl_us) and entry[1] < now - ttl_us


class RecentCalls:
    """Where each producer's last :data:`CALLS_PER_PRODUCER` calls start: ``(id, last
    sequence) -> base offset``, as Kafka's producer state keeps each producer's last
    batches' metadata (``ProducerStateEntry``, ``BatchMetadata``) so a retry is answered
    with the first attempt's base offset (adapters/kafka/recent_batches.py).

    Fed by every call the partition takes with a producer, its own appends and, over the
    JetStream store, the mirror's (gateway/jetstream_store/partition.py ``apply``, one
    message at a time with its call's sequence: the first one names the base), so a
    gateway knows where a call another gateway stored went. In memory only: the batch
    headers keep each producer's last sequence, not where its calls start, so a
    restart forgets them (docs/storage.md "Producer deduplication"). At most
    ``limit`` producers (the table's own bound, LogConfig.max_producers), least
    recently written forgotten first."""

    __slots__ = ("_by", "_limit")

    def __init__(self, limit: int) -> None:
        self._by: OrderedDict[str, deque[list[int]]] = OrderedDict()  # [last seq, base, count]
        self._limit = limit

    def add(self, pid: str, seq: int, base: int, count: int) -> None:
        """A call of ``pid`` ending at sequence ``seq`` put ``count`` records at ``base``
        (a repeat of the newest ``seq``, the next message of the same call, adds to it)."""
        by = self._by
        calls = by.get(pid)
        if calls is None:
            calls = by[pid] = deque(maxlen=CALLS_PER_PRODUCER)
            if len(by) > self._limit:
                by.popitem(last=False)
        else:
            by.move_to_end(pid)
            if calls and calls[-1][0] == seq:
                calls[-1][2] += count
                return
        calls.append([seq, base, count])

    def find(self, pid: str, first: int, last: int) -> int | None:
        """The base offset of ``pid``'s newest remembered call of sequences ``first``..
        ``last`` (its last sequence and record count: Kafka matches a duplicate by its
        first and last sequence, ``BatchMetadata``), or None."""
        for seq, base, count in reversed(self._by.get(pid, ())):
            if seq == last and count == last - first + 1:
                return base
        return None

    def clear(self) -> None:
        self._by.clear()


__all__ = ["CALLS_PER_PRODUCER", "RecentCalls", "Table", "expire_idle", "is_expired", "remember"]
