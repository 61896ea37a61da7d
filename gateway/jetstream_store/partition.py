"""A partition whose records a NATS JetStream cluster orders and keeps (scale-out mode).

Theory of operation
-------------------
In scale-out mode (docs/scale-out.md) the cluster's stream for a partition is
the log: its sequence ``n`` is Ferry offset ``n - 1``, assigned by the stream
leader, so any number of gateways may append to the same partition and still
agree on every offset. This class is the gateway's side of that, with no I/O:

* ``append`` / ``append_encoded`` check what the embedded log checks, give
  each message its id now (so every gateway stores the same one), and queue
  an :class:`Outgoing` entry in a bounded outbox instead of the local log.
  The records are not readable yet (``is_applied`` says False): they have no
  offset until the cluster stores them. The result's ``base_offset`` is this
  gateway's guess (exact while it is the partition's only writer);
  ``on_durable`` gets the real one.
* The JetStream store (store.py) takes the outbox,
  publishes each message and, on the stream's acknowledgement, calls
  :meth:`await_applied`.
* The driver's mirror of the stream calls :meth:`apply` for every stored
  message in sequence order, from every gateway. Applying appends it to the
  local :class:`~core.log.partition.Partition` this class extends, which is
  the gateway's cache of the stream (reads, byte positions, time index, tail
  wake-ups work as in the embedded log), and fires the ``on_durable`` of
  appends whose last message is now applied: an acknowledged append is
  readable on the gateway that acknowledged it (read-your-writes). An applied
  message is one the cluster stored, so applying also moves the partition's
  durable end (``Partition.durable``, core/log/durable.py: what Pravega and
  Kafka readers are served up to) and wakes the readers parked at it.

The cache's own fsync policy is the partition config's; nothing is lost if the
cache is: it is re-read from the stream from the offset it holds.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from core.errors import InvalidArgument, PayloadTooLarge, StorageError
from core.log.config import MAX_APPEND_BYTES
from core.log.encoded import records_of
from core.log.partition import AppendInput, AppendResult, OnDurable, Partition, _fire
from core.log.segment import Segment
from core.message import uuid7
from core.record import encode_record

from .layout import DUPLICATE_WINDOW_NS

# Message bytes queued for the cluster per partition before ``over_limit`` asks the
# protocol drivers to stop reading from their clients (the embedded log's backpressure,
# LogConfig.max_pending_bytes, applied to the outbox): the cluster's round trip, not
# the disk, is what the queue waits for.
MAX_OUTBOX_BYTES = 16 * 1024 * 1024
# How long after a producer's last stored call the cluster surely still remembers its
# message ids: JetStream's duplicate window (layout.DUPLICATE_WINDOW_NS, 2 minutes) less
# 20 s for the clocks of the gateway that stamped the call and of this one. A topic whose
# expiry is shorter has a shorter window (layout.Layout.stream_config): a retry past it
# is stored again rather than lost.
CLUSTER_DEDUP_TRUST_US = DUPLICATE_WINDOW_NS // 1000 - 20_000_000
# Bytes of the stored header block besides the message's own headers (the
# Ferry-Store and Nats-Msg-Id lines, about 150 bytes, with room to spare).
HEADER_ALLOWANCE = 512


@dataclass(slots=True)
class Outgoing:
    """One append call on its way to the cluster: ``messages`` are
    ``(id, origin_timestamp, headers, payload)`` in order."""

    messages: list[tuple[int, int, bytes, bytes]]
    producer: tuple[str, int] | None
    on_durable: OnDurable | None
    nbytes: int


class RemotePartition(Partition):
    """A partition cached locally and stored in a JetStream stream (module docstring)."""

    incarnation = None  # set by the store: tells a topic from a later one reusing its ids, or a purge
    client_ids = False  # set by the store: a JetStream stream's, its clients' msg ids go to the cluster (msgids.py)
    max_message_bytes = MAX_APPEND_BYTES  # the cluster's max_payload (its INFO), set by the store
    # How long a producer's call is left to the cluster (_cluster_remembers): less when the
    # stream's duplicate window is shorter than the store's (iggyids.py sets it).
    cluster_trust_us = CLUSTER_DEDUP_TRUST_US

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.outbox: list[Outgoing] = []
        self.outbox_bytes = 0
        self.in_flight = 0  # messages published and not yet applied here
        # (last, tie, base, count, duplicate, callback): fired once the cache holds offset ``last``
        self._waiting: list[tuple[int, int, int, int, bool, OnDurable]] = []
        self._tie = 0
        self._wake_remote: Callable[[], None] = lambda: None
        self._known_end: int | None = None  # the stream's end, asked by log_end, used once
        self._asking_end = False
        # Ids of messages this gateway published and the mirror has not applied yet; a
        # message applied that is not among them came from another writer, at foreign_at
        # (time.monotonic): the publish chain stays off meanwhile (publisher.py). foreign_seq
        # is the stream sequence of the last such message: a chain whose last known
        # sequence is below it is stale (publisher.py, PartitionPublisher._drive).
        self.own_ids: set[int] = set()
        self.foreign_at = float("-inf")
        self.foreign_seq = 0

    def set_remote_wakeup(self, wake: Callable[[], None]) -> None:
        """The cluster driver's ``wake()``, called when the outbox turns non-empty."""
        self._wake_remote = wake
        if self.outbox:
            wake()

    @property
    def unsettled(self) -> bool:
        """Appends taken whose ``on_durable`` has not fired: queued, published, or awaiting the mirror."""
        return bool(self.outbox or self.in_flight or self._waiting)

    @property
    def over_limit(self) -> bool:
        return self.outbox_bytes > MAX_OUTBOX_BYTES or super().over_limit

    # -- appends: to the outbox ------------------------------------------------------
    def is_applied(self, result: AppendResult) -> bool:
        """Never on return (Partition.is_applied): an append waits in the outbox, a
        duplicate's result names the cache's end, not where the cluster is."""
        return False

    def append(
        self,
        items: Sequence[AppendInput],
        *,
        producer: tuple[str, int] | None = None,
        on_durable: OnDurable | None = None,
    ) -> AppendResult:
        if self._failed is not None or self._closed:
            raise self._unwritable()
        if not items:
            raise InvalidArgument("no messages to append")
        messages = [(i.id or uuid7(), i.origin_timestamp, i.headers, i.payload) for i in items]
        return self._queue(messages, producer, on_durable)

    def append_encoded(
        self,
        block: bytearray,
        count: int,
        *,
        producer: tuple[str, int] | None = None,
        on_durable: OnDurable | None = None,
    ) -> AppendResult:
        if self._failed is not None or self._closed:
            raise self._unwritable()
        if len(block) > MAX_APPEND_BYTES:
            raise PayloadTooLarge(f"one append of {len(block)} bytes exceeds {MAX_APPEND_BYTES}")
        views = records_of(block)
        if len(views) != count:
            raise InvalidArgument(f"block holds {len(views)} records, not {count}")
        messages = [(rv.id or uuid7(), rv.origin_timestamp, bytes(rv.headers), bytes(rv.payload)) for rv in views]
        return self._queue(messages, producer, on_durable)

    def _queue(self, messages, producer, on_durable) -> AppendResult:
        if producer is not None and self._is_duplicate(producer) and not self._cluster_remembers(producer):
            return self._duplicate(on_durable)
        nbytes = sum(len(h) + len(p) for _, _, h, p in messages)
        for _, _, headers, payload in messages:
            # Each message is one cluster message: its payload plus the header block
            # (layout.py), under the cluster's max_payload.
            if len(payload) + 2 * len(headers) + HEADER_ALLOWANCE > self.max_message_bytes:
                raise PayloadTooLarge(f"a message of {len(payload)} bytes exceeds the cluster's "
                                      f"max_payload ({self.max_message_bytes} bytes)")
        if nbytes > MAX_APPEND_BYTES:
            raise PayloadTooLarge(f"one append of {nbytes} bytes exceeds {MAX_APPEND_BYTES}")
        # Encoding checks every field now (sizes, header block), as the embedded log's
        # append does, so a bad message fails the call instead of the cluster round trip.
        for mid, origin, headers, payload in messages:
            encode_record(mid, 0, 0, origin, headers, payload)
        guess = self._next_offset + self.in_flight + sum(len(o.messages) for o in self.outbox)
        self.outbox.append(Outgoing(messages, producer, on_durable, nbytes))
        self.outbox_bytes += nbytes
        if len(self.outbox) == 1:
            self._wake_remote()
        return AppendResult(self.partition_id, guess, len(messages), self._append_time())

    def _cluster_remembers(self, producer: tuple[str, int]) -> bool:
        """A producer call this cache already holds (some of) goes to the cluster again
        while the cluster still remembers its message ids (layout.py: ``<producer>:<seq>:<i>``):
        the stored ones are answered duplicate at their sequences, so the answer names the
        original offset, and what is missing is stored. A call is not atomic: a gateway
        killed between two of its messages leaves its first part stored, and the mirror
        records the producer's sequence from that first part; answered duplicate here,
        the rest was lost (docs/scale-out.md, "Fault schedule", item 1)."""
        last = self._producers.get(producer[0])
        return last is not None and self._clock() - last[1] < self.cluster_trust_us

    def take_outbox(self) -> list[Outgoing]:
        """The driver takes every queued call (in append order) to publish it."""
        out, self.outbox = self.outbox, []
        self.outbox_bytes = 0
        self.in_flight += sum(len(o.messages) for o in out)
        return out

    def await_applied(self, first_seq: int, last_seq: int, count: int, on_durable: OnDurable | None,
                      duplicate: bool = False) -> None:
        """The cluster stored a call's ``count`` messages at sequences ``first_seq``
        .. ``last_seq`` (consecutive unless another gateway wrote in between): fire
        ``on_durable`` once this cache holds the last of them (now, if it does)."""
        self.in_flight = max(0, self.in_flight - count)
        if on_durable is None:
            return
        base, last = first_seq - 1, last_seq - 1  # offset = sequence - 1
        # A duplicate waits too, for the first copy: the cluster may answer a re-send
        # duplicate before the mirror applied the original (its acknowledgement was lost,
        # e.g. with the stream leader killed), and the Kafka listener finds where it went
        # in what the mirror applied (Partition.producer_call_offset): fired at once, the
        # retry was answered DUPLICATE_SEQUENCE_NUMBER with offset -1, and librdkafka
        # numbered the records -1, 0, 1 (fault-schedule seed 3; docs/scale-out.md item 2).
        if last < self._next_offset:
            _fire(on_durable, AppendResult(self.partition_id, base, 0 if duplicate else count, self._last_ts,
                                           duplicate=duplicate))
            return
        self._tie += 1
        heapq.heappush(self._waiting, (last, self._tie, base, count, duplicate, on_durable))

    def fail_in_flight(self, count: int, exc: BaseException, on_durable: OnDurable | None) -> None:
        """The cluster refused (or never answered) a call: its messages are not stored."""
        self.in_flight = max(0, self.in_flight - count)
        if on_durable is not None:
            _fire(on_durable, exc)

    # -- Store.log_end: how far the stream reaches beyond this cache ------------------------
    def log_end(self, ask: Callable[[Callable[[int | None], None]], None]) -> int | None:
        """The stream's end from one ``STREAM.INFO`` asked (through ``ask``) at the previous
        call, used once, so a client that saw offset P elsewhere before asking here gets an
        end >= P; None while it is being asked. ``ask(answered)`` sends the request and
        calls ``answered(last sequence or None)``; it raises when it cannot send."""
        if self._known_end is not None:
            end, self._known_end = self._known_end, None
            return max(end, self._next_offset)
        if self._asking_end:
            return None
        self._asking_end = True

        def answered(last_seq: int | None) -> None:
            self._asking_end = False
            self._known_end = last_seq  # sequence n is offset n - 1: the last sequence is the end
        try:
            ask(answered)
        except Exception:  # noqa: BLE001 - not running, or the connection is gone: ask again next time
            self._asking_end = False
            raise
        return None

    # -- the mirror: stored messages, in sequence order --------------------------------
    @property
    def next_sequence(self) -> int:
        """The stream sequence the cache wants next."""
        return self._next_offset + 1

    def skip_to(self, offset: int) -> None:
        """The stream no longer holds the messages before ``offset`` (its retention
        removed them before this cache got them): drop what the cache holds and
        start it at ``offset``. Byte positions go on from where the cache was, so
        a gateway that joined late counts them from what it saw (docs/scale-out.md)."""
        if offset <= self._next_offset:
            return
        self.flush()
        try:
            for seg in list(self._segments):
                self._remove_segment(seg)
            self._segments = [Segment.create(self.path, offset, self._byte_end)]
        except OSError as exc:
            raise StorageError(f"cannot restart the cache at {self.path}: {exc}", errno=exc.errno) from exc
        self._next_offset = offset
        self.durable.reset(offset, self._byte_end)

    def apply(self, seq: int, mid: int, timestamp: int, origin_timestamp: int, headers: bytes, payload: bytes,
              producer: tuple[str, int] | None = None) -> AppendResult | None:
        """Store the stream's message ``seq`` in the cache at offset ``seq - 1``.
        Returns None for one already held; raises StorageError on a gap (the
        driver re-reads the stream from :attr:`next_sequence`)."""
        offset = seq - 1
        if offset < self._next_offset:
            return None
        if offset != self._next_offset:
            raise StorageError(f"partition {self.partition_id}: stream sequence {seq} after {self._next_offset}")
        own = self.own_ids
        if mid in own:
            own.discard(mid)
        else:
            self.foreign_at = time.monotonic()
            self.foreign_seq = seq
        # Stored time never goes back within a partition (the time index needs it),
        # whichever gateway's clock stamped the message: every gateway applies the
        # same rule to the same order, so they store the same time.
        ts = timestamp if timestamp >= self._last_ts else self._last_ts
        record = encode_record(mid, offset, ts, origin_timestamp or ts, headers, payload)
        result = self._add_call(offset, ts, 1, [record], None, len(record), 8 + len(payload), producer, None)
        # The cluster stored it (the mirror only gets stored messages): durable, whatever
        # the cache's own flush does later (DurableEnd never moves back for it).
        self.durable.advance(self._next_offset, self._byte_end)
        waiting = self._waiting
        while waiting and waiting[0][0] <= offset:
            _, _, base, count, duplicate, callback = heapq.heappop(waiting)
            _fire(callback, AppendResult(self.partition_id, base, 0 if duplicate else count, ts,
                                         duplicate=duplicate))
        self.durable.wake()  # readers after the writers' acks, as in the embedded log
        return result

    def close(self) -> None:
        """Fail what is still queued or awaited: it was never acknowledged."""
        self._fail_queued(StorageError(f"partition {self.partition_id} is closed"))
        super().close()

    def delete(self) -> None:
        self._fail_queued(StorageError(f"partition {self.partition_id} was deleted"))
        super().delete()

    def _fail_queued(self, exc: BaseException) -> None:
        outbox, self.outbox, self.outbox_bytes = self.outbox, [], 0
        waiting, self._waiting = self._waiting, []
        for entry in outbox:
            if entry.on_durable is not None:
                _fire(entry.on_durable, exc)
        for *_, callback in waiting:
            _fire(callback, exc)
