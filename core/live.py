"""Live delivery: subject subscriptions and wake-ups for waiting readers.

Theory of operation
-------------------
Every message that enters Ferry, stored or not, is offered to live
subscribers through :meth:`LiveHub.publish`. Subscribers are adapter objects
(a NATS client's subscription, an HTTP long-poll, ...) that implement
:class:`Subscriber`. Fan-out never awaits (STYLE.md section 3): ``deliver``
is synchronous and returns ``False`` when the subscriber's bounded outbox is
full, after which the adapter applies its own slow-consumer policy.

Queue groups follow nats-server: each queue group receives a message once,
delivered to one member picked at random (nats-server picks randomly too;
``client.go`` processMsgResults), while every plain subscriber receives it.

Waiters are one-shot callbacks keyed by partition, fired after the next
append to that partition so a long-poll or a parked Pravega read can wake.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Protocol

from .subjects import SubjectTrie

# A waiter list per partition is bounded so a client that parks reads in a
# loop cannot grow memory without limit; past this the oldest is woken early
# (it sees no new data and re-parks), like a timed-out long poll.
MAX_WAITERS_PER_PARTITION = 10_000


@dataclass(slots=True)
class Delivery:
    """One message offered to live subscribers.

    ``headers`` is the canonical TLV block (``core.message.Headers.encode()``);
    ``native`` optionally carries the publishing protocol's own header form
    (e.g. the NATS header block) so a same-protocol hop needs no translation;
    ``origin`` names that protocol. Stored messages carry their address.
    ``publisher`` identifies the publishing connection and ``prepared`` caches
    the first protocol-specific encoding of this delivery.
    """

    subject: str
    payload: bytes | memoryview
    headers: bytes = b""
    reply: str | None = None
    origin: str = ""
    native: object = None
    stream_id: int | None = None
    topic_id: int | None = None
    partition_id: int | None = None
    offset: int | None = None
    timestamp: int = 0
    id: int = 0
    # The publishing connection (NATS ``echo: false`` skips its own messages).
    publisher: object = None
    # Per-protocol cache of the encoded frame, filled by the first subscriber
    # of that protocol so a fan-out encodes once (nats-server does the same).
    prepared: object = None


class Subscriber(Protocol):
    def deliver(self, delivery: Delivery) -> bool:
        """Queue the message without blocking; ``False`` means the subscriber is too slow."""


@dataclass(slots=True)
class PublishStats:
    delivered: int = 0
    slow: list = field(default_factory=list)


class LiveHub:
    """Subject-addressed fan-out plus per-partition wake-ups. Synchronous."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.trie = SubjectTrie()
        self._rng = rng or random.Random()
        self._waiters: dict[tuple[int, int, int], list[Callable[[], None]]] = {}

    # -- subscriptions ---------------------------------------------------
    def subscribe(self, pattern: str, sub: Subscriber, queue: str | None = None) -> None:
        self.trie.insert(pattern, sub, queue)

    def unsubscribe(self, pattern: str, sub: Subscriber, queue: str | None = None) -> None:
        self.trie.remove(pattern, sub, queue)

    def has_interest(self, subject: str) -> bool:
        result = self.trie.match(subject)
        return bool(result.plain or result.queues)

    def publish(self, delivery: Delivery) -> PublishStats:
        """Offer ``delivery`` to every matching plain subscriber and one member per queue group."""
        stats = PublishStats()
        result = self.trie.match(delivery.subject)
        for sub in result.plain:
            if sub.deliver(delivery):
                stats.delivered += 1
            else:
                stats.slow.append(sub)
        for members in result.queues.values():
            if not members:
                continue
            sub = members[self._rng.randrange(len(members))] if len(members) > 1 else members[0]
            if sub.deliver(delivery):
                stats.delivered += 1
            else:
                stats.slow.append(sub)
        return stats

    # -- waiters ---------------------------------------------------------
    def add_waiter(self, key: tuple[int, int, int], wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake()`` once after the next append to partition ``key``.

        Returns a function that cancels the wait (safe to call after it fired)."""
        waiters = self._waiters.setdefault(key, [])
        if len(waiters) >= MAX_WAITERS_PER_PARTITION:
            waiters.pop(0)()
        waiters.append(wake)

        def cancel() -> None:
            lst = self._waiters.get(key)
            if lst is not None:
                try:
                    lst.remove(wake)
                except ValueError:
                    pass
                if not lst:
                    del self._waiters[key]

        return cancel

    def wake(self, key: tuple[int, int, int]) -> None:
        waiters = self._waiters.pop(key, None)
        if waiters:
            for wake in waiters:
                wake()

    def wake_all(self) -> None:
        """Wake everyone (shutdown, topic deletion)."""
        waiters, self._waiters = self._waiters, {}
        for lst in waiters.values():
            for wake in lst:
                wake()
