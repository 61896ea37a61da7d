"""What a partition's leader knows of an idempotent producer beyond the log's last
sequence: the newest epoch it took, and the appends whose fate is still open.

Kafka's broker decides a batch against its own log, which it appends to at once
(``ProducerStateManager``; ``ProducerAppendInfo.checkProducerEpoch`` and
``checkSequence``): a batch of an older epoch than the producer's latest on the
partition is refused INVALID_PRODUCER_EPOCH (``InvalidProducerEpochException``,
Kafka 2.7+, the code Produce answers at every version), and a sequence gap
OUT_OF_ORDER_SEQUENCE_NUMBER, which is proof that the missing batch is not in the
log. librdkafka acts on that proof: a later batch answered OUT_OF_ORDER while an
earlier one failed makes it bump the epoch and send the unacknowledged records
again from sequence 0 ("skipped sequence numbers", rdkafka_request.c
``rd_kafka_handle_idempotent_Produce_error``; KIP-360 lets an idempotent producer
bump its own epoch, rdkafka_idempotence.c ``rd_kafka_idemp_drain_done``).

Over the JetStream store an append is in the cluster's hands until its
acknowledgement comes back and the mirror applies it (gateway/jetstream_store/):
the log's last sequence (``Partition.producer_sequence``) counts only applied
records, and an append the store gave up on may still have been stored (an
acknowledgement lost with a node, docs/scale-out.md "Fault schedule", item 6).
Answering OUT_OF_ORDER then stored those records twice, once per epoch.
:class:`ProducerStates` keeps, per partition and producer id, what this gateway
sent and does not know the fate of, so the Produce path (adapters/kafka/dataplane.py)

* refuses a batch of an older epoch than one it took: INVALID_PRODUCER_EPOCH, as
  Kafka's fence;
* answers a newer epoch's batch NOT_ENOUGH_REPLICAS (retriable, "not written")
  while an older epoch's append of the same producer is still on its way, so the
  log never holds an older epoch's record after a newer one;
* answers a gap NOT_ENOUGH_REPLICAS instead of OUT_OF_ORDER while an append that
  could fill it is open: the client then retries the earlier batch with its own
  sequences (JetStream drops it as a duplicate, ``Nats-Msg-Id``, or stores it) and
  the later one after it.

Sans-I/O: plain data; the clock is the caller's (seconds, monotonic).
"""

from __future__ import annotations

from collections import OrderedDict

from .errors import ErrorCode

# How long an append the store gave up on (or answered as a duplicate of one not yet
# applied here) may still turn up in the log: JetStream's duplicate window (2 minutes,
# gateway/jetstream_store/layout.py DUPLICATE_WINDOW_NS), inside which a retry with the
# same sequences is stored at most once; past it the doubt cannot be settled anyway.
DOUBT_S = 120.0
# Open appends kept per producer and partition: Kafka's five in-flight batches per
# connection (ProducerStateEntry.NUM_BATCHES_TO_RETAIN), a few connections' worth
# (retries through a new connection while the old one's append is still open).
MAX_OPEN = 20
# (partition, producer id) pairs remembered per listener, least recently written
# forgotten first: as adapters/kafka/recent_batches.py, the log's own bound.
MAX_PRODUCER_PARTITIONS = 10_000

Key = tuple[int, int, int, int]  # (stream id, topic id, partition, producer id)


class OpenAppend:
    """One append of ``first``..``last`` under ``epoch``: ``pending`` while the store has
    it, forgotten at ``until`` (a lost callback cannot hold the producer back forever)."""

    __slots__ = ("epoch", "first", "last", "pending", "until")

    def __init__(self, epoch: int, first: int, last: int, until: float) -> None:
        self.epoch, self.first, self.last = epoch, first, last
        self.pending, self.until = True, until


class _Producer:
    __slots__ = ("epoch", "open")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.open: list[OpenAppend] = []


class ProducerStates:
    """Per listener: each producer's newest epoch and open appends per partition."""

    __slots__ = ("_by",)

    def __init__(self) -> None:
        self._by: OrderedDict[Key, _Producer] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by)

    def refusal(self, key: Key, epoch: int, now: float) -> tuple[int, str] | None:
        """Kafka's epoch rule for a batch, before its sequences are checked: None to go
        on, else ``(error code, message)`` (module docstring)."""
        entry = self._by.get(key)
        if entry is None:
            return None
        if epoch < entry.epoch:
            return int(ErrorCode.INVALID_PRODUCER_EPOCH), (
                f"producer {key[3]} epoch {epoch} is older than its epoch {entry.epoch} on this partition")
        self._prune(entry, None, now)
        for a in entry.open:
            if a.epoch < epoch and a.pending:
                return int(ErrorCode.NOT_ENOUGH_REPLICAS), (
                    f"an append of producer {key[3]} epoch {a.epoch} is not settled yet; retry")
        return None

    def gap_open(self, key: Key, epoch: int, base_sequence: int, stored: int | None, now: float) -> bool:
        """May an open append of this epoch fill the gap between ``stored`` (the log's last
        sequence, None: none) and ``base_sequence``?"""
        entry = self._by.get(key)
        if entry is None:
            return False
        self._prune(entry, stored if entry.epoch == epoch else None, now)
        low = -1 if stored is None else stored
        return any(a.epoch == epoch and a.last > low and a.first < base_sequence for a in entry.open)

    def taken(self, key: Key, epoch: int, first: int, last: int, now: float) -> OpenAppend:
        """A batch went to the log; :meth:`settled` reports its fate."""
        by = self._by
        entry = by.get(key)
        if entry is None:
            entry = by[key] = _Producer(epoch)
            while len(by) > MAX_PRODUCER_PARTITIONS:
                by.popitem(last=False)
        else:
            by.move_to_end(key)
            if epoch > entry.epoch:
                entry.epoch = epoch
        a = OpenAppend(epoch, first, last, now + DOUBT_S)
        entry.open.append(a)
        if len(entry.open) > MAX_OPEN:
            del entry.open[0]
        return a

    def settled(self, key: Key, a: OpenAppend, applied: bool, now: float) -> None:
        """``a`` is in this gateway's copy of the log (``applied``), or its fate stays
        unknown for :data:`DOUBT_S` (the store failed it, or the cluster answered it as
        a duplicate of a copy not applied here yet)."""
        entry = self._by.get(key)
        if entry is None:
            return
        if applied:
            try:
                entry.open.remove(a)
            except ValueError:
                pass
        else:
            a.pending, a.until = False, now + DOUBT_S

    @staticmethod
    def _prune(entry: _Producer, stored: int | None, now: float) -> None:
        """Drop what is settled: doubts past their time, and (``stored`` given, the log's
        last sequence of the producer's newest epoch) appends the log now holds."""
        if not entry.open:
            return
        entry.open = [a for a in entry.open
                      if a.until > now
                      and not (stored is not None and a.epoch == entry.epoch and a.last <= stored)]


__all__ = ["DOUBT_S", "MAX_OPEN", "MAX_PRODUCER_PARTITIONS", "OpenAppend", "ProducerStates"]
