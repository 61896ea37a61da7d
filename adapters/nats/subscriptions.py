"""Per-connection subscription bookkeeping: sid -> :class:`Subscription`.

nats-server keeps one ``subs`` map per client keyed by the client-chosen sid
(``client.go`` ``processSubEx``/``processUnsub``) and counts deliveries per
subscription (``nm``) against an auto-unsubscribe limit (``max``) set by
``UNSUB <sid> <max>``. This is that map, sans-I/O: the connection fills it
from ``SUB``/``UNSUB``; the session (phase 2) puts each
:class:`Subscription` object in the broker's subject trie as the subscriber,
calls :meth:`Subscription.record_delivery` per delivered message, and
removes the subscription from the trie when that returns True or when an
``Unsub`` event carries a closed subscription.
"""

from __future__ import annotations

from typing import Iterator


class Subscription:
    """One client subscription. Hashable by identity, so it can be a trie subscriber.

    ``sid`` is echoed verbatim in ``MSG``; ``queue`` is ``""`` for a plain
    subscription; ``max_msgs`` is 0 (no limit) or the total number of messages
    after which it goes away; ``owner`` is free for the session (its outbox).
    """

    __slots__ = ("sid", "subject", "queue", "max_msgs", "delivered", "closed", "owner")

    def __init__(self, sid: bytes, subject: str, queue: str = "") -> None:
        self.sid = sid
        self.subject = subject
        self.queue = queue
        self.max_msgs = 0
        self.delivered = 0
        self.closed = False
        self.owner: object = None

    def record_delivery(self) -> bool:
        """Count one message delivered to this subscription.

        Returns True when that message reached the ``max_msgs`` limit: the
        caller must then drop the subscription (``Subscriptions.remove`` and
        the broker trie). nats-server delivers the ``max``-th message and
        unsubscribes right after it (``deliverMsg``, ``shouldUnsub``)."""
        self.delivered += 1
        return 0 < self.max_msgs <= self.delivered

    def __repr__(self) -> str:
        return (f"Subscription(sid={self.sid!r}, subject={self.subject!r}, queue={self.queue!r},"
                f" max_msgs={self.max_msgs}, delivered={self.delivered}, closed={self.closed})")


class Subscriptions:
    """The subscriptions of one connection, by sid, in creation order.

    ``limit`` is the per-connection maximum (0 = none, nats-server's default
    ``max_subscriptions``); the connection refuses a ``SUB`` with ``maximum
    subscriptions exceeded`` once it is reached.
    """

    __slots__ = ("_by_sid", "limit")

    def __init__(self, limit: int = 0) -> None:
        if limit < 0:
            raise ValueError(f"subscription limit must be >= 0, got {limit}")
        self._by_sid: dict[bytes, Subscription] = {}
        self.limit = limit

    def __len__(self) -> int:
        return len(self._by_sid)

    def __contains__(self, sid: object) -> bool:
        return sid in self._by_sid

    def __iter__(self) -> Iterator[Subscription]:
        return iter(list(self._by_sid.values()))

    def get(self, sid: bytes) -> Subscription | None:
        """The live subscription with this sid, or None."""
        return self._by_sid.get(sid)

    @property
    def at_limit(self) -> bool:
        """True when no further subscription may be created (nats-server ``subsAtLimit``)."""
        return 0 < self.limit <= len(self._by_sid)

    def add(self, sid: bytes, subject: str, queue: str = "") -> Subscription | None:
        """Create a subscription; returns None if ``sid`` is already live
        (nats-server keeps the first subscription and ignores the new one)."""
        if sid in self._by_sid:
            return None
        sub = self._by_sid[sid] = Subscription(sid, subject, queue)
        return sub

    def unsubscribe(self, sid: bytes, max_msgs: int = 0) -> Subscription | None:
        """Apply ``UNSUB <sid> [max_msgs]``; returns the subscription, or None for an unknown sid.

        With ``max_msgs`` above the number already delivered the subscription
        stays until that total is reached; otherwise it is removed now and
        comes back with ``closed`` set (nats-server ``processUnsub``)."""
        sub = self._by_sid.get(sid)
        if sub is None:
            return None
        if max_msgs > 0 and max_msgs > sub.delivered:
            sub.max_msgs = max_msgs
        else:
            sub.max_msgs = 0
            self.remove(sub)
        return sub

    def remove(self, sub: Subscription) -> bool:
        """Drop ``sub`` (auto-unsubscribe limit reached, or ``UNSUB``); marks it closed.

        Returns False if it was not live here."""
        if self._by_sid.get(sub.sid) is not sub:
            return False
        del self._by_sid[sub.sid]
        sub.closed = True
        return True

    def clear(self) -> list[Subscription]:
        """Remove every subscription (connection closed); returns them, closed,
        so the session can take them out of the broker."""
        subs = list(self._by_sid.values())
        self._by_sid.clear()
        for sub in subs:
            sub.closed = True
        return subs


__all__ = ["Subscription", "Subscriptions"]
