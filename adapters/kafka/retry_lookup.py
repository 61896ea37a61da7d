"""Where a retried idempotent batch was stored, when no memory of it is left.

Kafka answers a producer's retry of one of its last five batches with no error and
the first attempt's base offset (``UnifiedLog.analyzeAndValidateProducerState``),
from producer state it keeps in its snapshots across restarts and on every replica.
Ferry remembers where a producer's last calls start in memory only: the listener's
:class:`~adapters.kafka.recent_batches.RecentBatches` and the partition's
``Partition.producer_call_offset`` (core/log/producers.py ``RecentCalls``; over the
JetStream store it also holds what other gateways stored, through the mirror). The
log's batch headers keep each producer's last sequence, not where its calls start
(docs/storage.md "Producer deduplication"), so after a restart, or for a call applied
before this gateway's cache started, neither knows.

The choice here is to look the batch up in the partition itself rather than add
call offsets to the log's format: a retry carries the very records of its first
attempt (a Kafka producer re-sends the batch it built, same values, keys, headers and
CreateTimes), so :func:`find_stored` reads the durable tail for the newest run of
stored records equal to the retry's, record for record (payload, headers, and
the producer's time where it set one). The batch is one of the producer's last five
(Kafka answers nothing else), so it is near the end of the log: the read is bounded
by :data:`SCAN_RECORDS` and :data:`SCAN_BYTES`, and past them the caller answers
DUPLICATE_SEQUENCE_NUMBER as before. The cost falls only on a retry that memory
missed, never on a new batch. What it cannot tell apart: another producer's run of
byte-identical records with the same CreateTimes after it (the newest run is named).
"""

from __future__ import annotations

from core.log.encoded import records_of

# Stored records read back from the durable end per lookup, and the bytes one read
# may hold: the work of one lookup stays near one Fetch's (dataplane.MAX_FETCH_RECORDS
# records). A producer's five last batches were written within its delivery timeout
# (librdkafka message.timeout.ms, 300 s by default): a retry that memory missed comes
# after a gateway restart or a client's move to another gateway, seconds later, when
# the other producers of the partition have written far fewer records than this.
# A full scan took 50-60 ms on the shared 2-core test VM (10,000 records of 100 bytes),
# spent only on a retry that memory missed.
SCAN_RECORDS = 10_000
SCAN_CHUNK, SCAN_CHUNK_BYTES = 500, 1 << 20  # per read: whole records, bounded memory


def _same(stored, wanted) -> bool:
    """Is the stored record ``wanted`` as the client sent it? A record without a
    producer time (0) took the append time when stored: its time is not compared."""
    if wanted.origin_timestamp and stored.origin_timestamp != wanted.origin_timestamp:
        return False
    return stored.payload == wanted.payload and stored.headers == wanted.headers


def find_stored(part, block, start: int, end: int) -> int | None:
    """The base offset of the newest run of stored records below ``end`` (the durable end)
    and at or after ``start`` (the log start) equal to ``block``'s records (the retry,
    translated as it would be stored), or None within the module's bounds."""
    wanted = records_of(block)
    n = len(wanted)
    if not n or end - start < n:
        return None
    low = max(start, end - SCAN_RECORDS)
    # Read forwards in chunks from ``low``, keeping the runs still alive as
    # ``(first offset, records matched)``: no record view outlives its read.
    found = None
    runs: list[tuple[int, int]] = []
    offset = low
    while offset < end:
        batch = part.read(offset, min(SCAN_CHUNK, end - offset), SCAN_CHUNK_BYTES)
        if not batch.count:
            break
        for view in batch.records():
            runs = [(s, k + 1) for s, k in runs if _same(view, wanted[k])]
            if _same(view, wanted[0]):
                runs.append((view.offset, 1))
            if runs and runs[0][1] == n:
                found = runs.pop(0)[0]
        offset = batch.next_offset
    return found


__all__ = ["SCAN_CHUNK", "SCAN_CHUNK_BYTES", "SCAN_RECORDS", "find_stored"]
