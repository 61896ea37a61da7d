"""The durable end of a partition: a read bound, and the readers waiting for it.

Theory of operation
-------------------
Appends are readable at once (served from the pending calls) but durable only
when the flusher's write (and fdatasync, unless the policy is ``never``) of
their batch returned. Some protocols must serve durable data only:

* Pravega: an append completes once it is durably logged (protocols/pravega.md
  section 5.4), and readers get only completed data, so no position a reader
  holds (section 7) is ever taken back by a crash;
* Kafka: consumers get records below the high watermark, which the leader moves
  only over committed records (Kafka's documentation, Design, "Replication":
  committed = in every in-sync replica's log; Ferry keeps one copy, so
  committed is durable under the fsync policy).

:class:`DurableEnd` is that bound for one partition, in offsets (``offset``:
just past the last durable record) and in the Pravega byte view
(``byte_end``: where that record's event frame ends, docs/storage.md "Byte
positions"), plus one-shot ``wake()`` callbacks for readers parked at it. The
partition moves it when a batch is committed (``Partition.complete_flush``)
and wakes the waiters after the writers' acks fired, so a writer's ack is on
its way before any reader is answered; a JetStream-store partition moves it when the cluster's
stream hands the record to the gateway's mirror (gateway/jetstream_store/
partition.py: stored by the cluster = durable). Sans-I/O: no clock, no trio.
"""

from __future__ import annotations

from typing import Callable

# Waiters per partition: a client that parks reads in a loop (a Pravega reader per
# segment, a Kafka long poll per partition) must not grow memory without limit. The
# same bound as core/live.py's MAX_WAITERS_PER_PARTITION; past it the oldest waiter
# is woken early: it finds nothing new and parks again or answers empty, as a
# timed-out long poll does.
MAX_DURABLE_WAITERS = 10_000


class DurableEnd:
    """A partition's durable end and the one-shot waiters for its next move."""

    __slots__ = ("offset", "byte_end", "_waiters", "_ticket")

    def __init__(self, offset: int = 0, byte_end: int = 0) -> None:
        self.offset = offset  # just past the last durable record
        self.byte_end = byte_end  # ... and where its Pravega event frame ends
        self._waiters: dict[int, Callable[[], None]] = {}  # insertion order = park order
        self._ticket = 0

    @property
    def waiting(self) -> int:
        """Waiters parked now (tests, metrics)."""
        return len(self._waiters)

    def advance(self, offset: int, byte_end: int) -> bool:
        """Move the end up to ``offset`` / ``byte_end`` if that is ahead of it; True when
        it moved. Never moves back (a JetStream-store partition's local cache commits
        behind what it already applied). Wakes nobody: the caller calls :meth:`wake`
        once the writers' acks are out."""
        if offset <= self.offset:
            return False
        self.offset, self.byte_end = offset, byte_end
        return True

    def reset(self, offset: int, byte_end: int) -> None:
        """Set the end as it is (open, purge, a cache restarted further on) and wake
        every waiter: what they waited at may not exist any more."""
        self.offset, self.byte_end = offset, byte_end
        self.wake()

    def add_waiter(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake()`` once, the next time the end moves (or the partition closes).
        Returns a function that cancels the wait (safe after it fired)."""
        waiters = self._waiters
        if len(waiters) >= MAX_DURABLE_WAITERS:
            waiters.pop(next(iter(waiters)))()
        self._ticket = ticket = self._ticket + 1
        waiters[ticket] = wake

        def cancel() -> None:
            waiters.pop(ticket, None)  # the dict it parked in: gone from it once fired
        return cancel

    def wake(self) -> None:
        """Fire every waiter once, in the order they parked."""
        if self._waiters:
            waiters, self._waiters = self._waiters, {}
            for wake in list(waiters.values()):  # a wake() may cancel another waiter
                wake()
