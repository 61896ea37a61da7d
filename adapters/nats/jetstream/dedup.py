"""A JetStream stream's Nats-Msg-Id de-duplication window (no trio, no broker).

Theory of operation
-------------------
nats-server stores a publish whose ``Nats-Msg-Id`` it saw inside the
stream's ``duplicate_window`` only once, and acks the copy with the first
one's sequence and ``duplicate: true``. :class:`DedupWindow` keeps the ids of
one stream's recent publishes in arrival order with their sequence and
monotonic time: :meth:`~DedupWindow.duplicate_of` first drops those older than
the window, :meth:`~DedupWindow.remember` adds one and drops the oldest past
:data:`MAX_DEDUP_IDS`. The window lives in memory; :func:`refill` reads it back from the log's
last ``duplicate_window`` of messages after a start (through the streams'
read methods: this module imports no broker), in slices when the warm-up
drives it (``JetStreams.warm_step``), at once when a publish needs it
(``JetStreams.dedup_window``); ``saved_state`` restores a saved window first.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Iterator

from .fields import msg_id_of

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

    def forget(self, msg_id: str, seq: int) -> None:
        """Drop ``msg_id`` if it still stands for ``seq`` (that append failed: a retry
        must be stored, not answered as a duplicate of nothing)."""
        found = self.ids.get(msg_id)
        if found is not None and found[0] == seq:
            del self.ids[msg_id]

    def remember(self, msg_id: str, seq: int, mono_ns: int) -> None:
        ids = self.ids
        ids[msg_id] = (seq, mono_ns)
        ids.move_to_end(msg_id)
        while len(ids) > MAX_DEDUP_IDS:
            ids.popitem(last=False)


def refill(streams, st, after: int = 0, window: DedupWindow | None = None) -> Iterator[None]:
    """Refill ``st``'s window (``streams``: the ``JetStreams``) from the log's
    last ``duplicate_window`` after seq ``after``, newest first and at most
    :data:`MAX_DEDUP_IDS` ids (the window keeps no more, so older records
    are not read: issue 30 read a whole 620,000-message window); yields every
    :data:`REFILL_YIELD` records read, sets ``st.dedup`` at the end
    (``window``: ids restored from the saved state, to add to)."""
    window = window if window is not None else DedupWindow()
    now, mono = time.time_ns(), time.monotonic_ns()
    start = max(streams.seq_at_time(st, now - st.config["duplicate_window"]), streams.first_seq(st), after + 1)
    found: list[tuple[str, int, int]] = []
    for view in streams._backwards(st, start):
        msg_id = msg_id_of(view.headers)
        if msg_id:
            found.append((msg_id, view.offset + 1, mono - (now - view.timestamp * 1000)))
            if len(found) >= MAX_DEDUP_IDS:
                break
        if view.offset % REFILL_YIELD == 0:
            yield
    for n, (msg_id, seq, at) in enumerate(reversed(found), 1):
        window.refill(msg_id, seq, at)
        if n % REFILL_YIELD == 0:     # 100,000 ids at once took ~80 ms here: in steps too
            yield
    while len(window) > MAX_DEDUP_IDS:
        window.ids.popitem(last=False)
    st.dedup, st.refill = window, None


# Records read between two yields of refill(): the streams' scan chunk (SCAN_CHUNK).
REFILL_YIELD = 256

__all__ = ["MAX_DEDUP_IDS", "REFILL_YIELD", "DedupWindow", "refill"]
