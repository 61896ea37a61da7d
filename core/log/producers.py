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

from itertools import islice

Table = dict[str, tuple[int, int]]  # producer id -> (last sequence, last write µs)


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


__all__ = ["Table", "expire_idle", "is_expired", "remember"]
