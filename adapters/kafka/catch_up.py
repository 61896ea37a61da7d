"""A Kafka partition's new leader judges sequences only on a copy caught up with the stored log.

Kafka's broker decides an idempotent batch against its own log: a new leader's
``ProducerStateManager`` is rebuilt from the log it already holds as a replica
(``Partition.makeLeader``), so OUT_OF_ORDER_SEQUENCE_NUMBER always means "this log
lacks the sequences before the batch". librdkafka acts on that answer without a
second look (rdkafka_request.c ``rd_kafka_handle_idempotent_Produce_error``): for the
head-of-line batch it is fatal ("sequence desynchronization"), for a later one it
bumps the epoch and sends every unacknowledged record again ("skipped sequence
numbers").

Over the JetStream store a gateway's copy of a partition is what its mirror applied
(gateway/jetstream_store/store.py): another gateway's last appends reach it a moment
after the cluster stored them, later after a freeze or a lost connection. In seed 3
of bench/fault_schedule.py the leadership of a partition moved to a gateway whose
copy still lacked the other gateway's last batch of a producer, and that gateway
answered the producer's next batch OUT_OF_ORDER: librdkafka stopped the producer
(docs/scale-out.md, "Fault schedule", item 6). :class:`CatchUp` keeps, per
partition, what the Produce path (adapters/kafka/dataplane.py) needs to avoid that:

* **On taking leadership.** Under a placement (the live set of gateways) it has not
  served the partition under yet, the gateway asks the stored log's end
  (``Store.log_end``) and takes no batch until its copy holds that much: the
  answer meanwhile is NOT_ENOUGH_REPLICAS, which Kafka defines as "not written" and
  librdkafka retries with the same producer id, epoch and sequences
  (``RD_KAFKA_ERR_ACTION_RETRY | RD_KAFKA_ERR_ACTION_MSG_NOT_PERSISTED``), unlike
  OUT_OF_ORDER. Any change of the live set counts: leadership may have moved away
  and back in between.
* **On a gap.** A batch whose sequence looks out of order (or that starts past 0 for a
  producer the copy does not know) is answered NOT_ENOUGH_REPLICAS once, and the copy
  is caught up again with the log's end asked after that moment; the same gap seen
  again on the caught-up copy is real and answered as Kafka does.

The log's end comes from ``Store.log_end``, which answers the stream's end asked at its
previous call (None while asking): an answer left over from an older question is
dropped and asked again, so the end is one asked after the moment that needed it.

Sans-I/O: plain data; ``log_end`` is the caller's function.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Callable, Hashable

# Partitions remembered per listener, least recently produced to forgotten first (a
# forgotten one catches up again at its next produce, one round trip).
MAX_PARTITIONS = 10_000
# Gaps remembered per partition as already rechecked (a few producers' worth).
MAX_GAPS = 64


class _Partition:
    __slots__ = ("token", "target", "asked", "gaps")

    def __init__(self, token: object) -> None:
        self.token = token  # the placement it was caught up under
        self.target: int | None = None  # the log's end to hold before judging sequences
        self.asked = False  # a fresh end was asked for target
        self.gaps: deque = deque(maxlen=MAX_GAPS)


class CatchUp:
    """Per listener: each partition's catch-up state (module docstring)."""

    __slots__ = ("_by",)

    def __init__(self) -> None:
        self._by: OrderedDict[Hashable, _Partition] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by)

    def ready(self, key: Hashable, token: object, applied_end: int, log_end: Callable[[], int | None]) -> bool:
        """May a batch for partition ``key`` be judged now, under placement ``token``?
        ``applied_end``: the offset after the copy's last record; ``log_end()``: the stored
        log's end as asked at its previous call, or None while it is being asked."""
        by = self._by
        entry = by.get(key)
        if entry is None or entry.token is not token:
            entry = by[key] = _Partition(token)
            while len(by) > MAX_PARTITIONS:
                by.popitem(last=False)
        by.move_to_end(key)
        if entry.target is None:
            if not entry.asked:
                entry.asked = True
                if log_end() is not None:  # an answer to a question asked before now: ask again
                    log_end()
                return False
            end = log_end()
            if end is None:
                return False
            entry.target = end
        return applied_end >= entry.target

    def recheck(self, key: Hashable, gap: Hashable) -> bool:
        """A batch shows ``gap`` on a copy caught up before it came: True the first time
        (the caller answers it retriable; the copy catches up with the log's end from
        now on), False once rechecked (the gap is in the log)."""
        entry = self._by.get(key)
        if entry is None or gap in entry.gaps:
            return False
        entry.gaps.append(gap)
        entry.target, entry.asked = None, False
        return True


__all__ = ["CatchUp", "MAX_GAPS", "MAX_PARTITIONS"]
