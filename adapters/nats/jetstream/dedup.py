"""A JetStream stream's Nats-Msg-Id de-duplication window (no trio, no broker).

Theory of operation
-------------------
nats-server stores a publish whose ``Nats-Msg-Id`` it saw inside the
stream's ``duplicate_window`` only once, and acks the copy with the first
one's sequence and ``duplicate: true``. :class:`DedupWindow` keeps the ids of
one stream's recent publishes in arrival order with their sequence and
monotonic time: :meth:`~DedupWindow.duplicate_of` first drops those older than
the window, :meth:`~DedupWindow.remember` adds one and drops the oldest past
:data:`MAX_DEDUP_IDS`. The window lives in memory; the streams module refills
it from the log's last ``duplicate_window`` of messages the first time a
stream is published to after a start (``JetStreams.dedup_window``).
"""

from __future__ import annotations

from collections import OrderedDict

# Ids remembered per stream for de-duplication; past it the oldest go first
# (nats-server keeps every id inside the window; this bounds memory).
MAX_DEDUP_IDS = 100_000


class DedupWindow:
    """Recent msg ids of one stream: id -> (seq, monotonic ns), oldest first."""

    __slots__ = ("ids",)

    def __init__(self) -> None:
        self.ids: OrderedDict[str, tuple[int, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self.ids)

    def refill(self, msg_id: str, seq: int, mono_ns: int) -> None:
        """An id read back from the log (in stream order, so oldest first)."""
        self.ids[msg_id] = (seq, mono_ns)

    def duplicate_of(self, msg_id: str, horizon_ns: int) -> int | None:
        """The seq ``msg_id`` was stored at, if that was at or after
        ``horizon_ns`` (monotonic), else None; older ids are forgotten."""
        ids = self.ids
        while ids:
            oldest = next(iter(ids.values()))
            if oldest[1] >= horizon_ns:
                break
            ids.popitem(last=False)
        found = ids.get(msg_id)
        return None if found is None else found[0]

    def remember(self, msg_id: str, seq: int, mono_ns: int) -> None:
        ids = self.ids
        ids[msg_id] = (seq, mono_ns)
        ids.move_to_end(msg_id)
        while len(ids) > MAX_DEDUP_IDS:
            ids.popitem(last=False)


__all__ = ["MAX_DEDUP_IDS", "DedupWindow"]
