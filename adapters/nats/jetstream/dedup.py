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

The window is this gateway's. In scale-out mode the cluster also de-duplicates a
JetStream publish's msg id across every gateway of the store
(gateway/jetstream_store/msgids.py); an id it found a first copy of elsewhere is
remembered here at that copy's stored time, so it leaves this window when it
leaves the cluster's.

Only stored copies are in ``ids``. nats-server fills its msg-id map from stored
messages (server/stream.go ``rebuildDedupe``) and stages an id still being
proposed with sequence 0, answering a re-send of it with error 10158 ("duplicate
message id is in process"), never ``duplicate`` (server/jetstream_batching.go,
``checkMsgHeadersPreClusteredProposal``). Here an id whose first copy's append
through this gateway has not settled sits in ``guessed``, at the sequence the
append was given (a JetStream-store partition only guesses it), until
:meth:`~DedupWindow.settled` moves it to ``ids`` or drops it: a retry meanwhile
is still found (and waits, ``after_settled``), but what the saved state writes
(``saved_state``, read ``ids``) holds no guess. Such a guess, saved in the key-value
tables every scale-out gateway shares, let another gateway answer a retry
``duplicate: true`` for a message never stored: bench/fault_schedule.py seed 2
lost 2 that way (docs/scale-out.md, "Fault schedule", item 3). :func:`held`
checks a duplicate answer against the log as well, for documents saved before.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Callable, Iterator

from .fields import msg_id_of

# Ids remembered per stream for de-duplication; past it the oldest go first
# (nats-server keeps every id inside the window; this bounds memory).
MAX_DEDUP_IDS = 100_000
# Retries of one msg id parked until its first copy's append here settles (each one a
# client's publish awaiting its PubAck); past it a retry is told to publish again.
MAX_SETTLING_WAITERS = 256


class DedupWindow:
    """Recent msg ids of one stream whose copies are stored: id -> (seq, monotonic ns),
    oldest first; ``settling``: ids whose first copy's append through this gateway has
    not settled (neither durable nor failed), each with the duplicates waiting for it;
    ``guessed``: those ids' (seq the append was given, monotonic ns), until it settles."""

    __slots__ = ("ids", "settling", "guessed")

    def __init__(self) -> None:
        self.ids: OrderedDict[str, tuple[int, int]] = OrderedDict()
        self.settling: dict[str, list[Callable[[], None]]] = {}
        self.guessed: dict[str, tuple[int, int]] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def refill(self, msg_id: str, seq: int, mono_ns: int) -> None:
        """An id read back from the log (in stream order, so oldest first)."""
        self.ids[msg_id] = (seq, mono_ns)

    def duplicate_of(self, msg_id: str, horizon_ns: int) -> int | None:
        """The seq ``msg_id`` was stored at, if that was at or after
        ``horizon_ns`` (monotonic), else None; older ids are forgotten. The id's own
        time is checked too: one remembered at another gateway's earlier store time
        (:meth:`remember`, scale-out) may sit behind newer ones. An id whose append
        here is in flight is found at the sequence that append was given."""
        guess = self.guessed.get(msg_id)
        if guess is not None:
            return guess[0]
        ids = self.ids
        while ids:
            oldest = next(iter(ids.values()))
            if oldest[1] >= horizon_ns:
                break
            ids.popitem(last=False)
        found = ids.get(msg_id)
        return None if found is None or found[1] < horizon_ns else found[0]

    def forget(self, msg_id: str, seq: int) -> None:
        """Drop ``msg_id`` if it still stands for ``seq`` (that append failed: a retry
        must be stored, not answered as a duplicate of nothing)."""
        for where in (self.guessed, self.ids):
            found = where.get(msg_id)
            if found is not None and found[0] == seq:
                del where[msg_id]

    def appending(self, msg_id: str) -> None:
        """The first copy of ``msg_id`` is being appended here (session._store)."""
        self.settling.setdefault(msg_id, [])

    def after_settled(self, msg_id: str, fire: Callable[[], None]) -> bool | None:
        """Call ``fire`` once ``msg_id``'s append here settles: True if parked, None when
        no append of it is in flight here, False when too many already wait."""
        waiting = self.settling.get(msg_id)
        if waiting is None:
            return None
        if len(waiting) >= MAX_SETTLING_WAITERS:
            return False
        waiting.append(fire)
        return True

    def settled(self, msg_id: str, stored: bool = True) -> None:
        """``msg_id``'s append here is durable (``stored``: the window takes the sequence
        it was last remembered at) or failed (not stored: it is dropped, and a retry is
        stored): answer the duplicates that waited for it."""
        guess = self.guessed.pop(msg_id, None)
        if guess is not None and stored:
            self._add(msg_id, *guess)
        for fire in self.settling.pop(msg_id, ()):
            fire()

    def drop(self, msg_id: str) -> None:
        """Forget ``msg_id`` whatever it stands for (:func:`held` found no copy of it)."""
        self.ids.pop(msg_id, None)
        self.guessed.pop(msg_id, None)

    def remember_stored(self, msg_id: str, seq: int, stored_us: int) -> None:
        """``msg_id`` stored at ``seq`` at ``stored_us`` (µs since the epoch): a first copy
        another gateway stored, so the id leaves this window when it leaves the cluster's."""
        self.remember(msg_id, seq, time.monotonic_ns() - max(0, time.time_ns() - stored_us * 1000))

    def remember(self, msg_id: str, seq: int, mono_ns: int) -> None:
        """``msg_id`` at ``seq``: a guess while its append here settles, else stored."""
        if msg_id in self.settling:
            self.guessed[msg_id] = (seq, mono_ns)
        else:
            self._add(msg_id, seq, mono_ns)

    def _add(self, msg_id: str, seq: int, mono_ns: int) -> None:
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


def held(streams, st, msg_id: str, seq: int) -> bool:
    """May a duplicate of ``msg_id`` be answered with ``seq``? Not when the log ends
    before ``seq`` or holds another msg id there: the window's entry then names a copy
    never stored here (a saved window with an append's guessed sequence, module
    docstring). A copy no longer held (deleted, purged, expired) still counts: nats-server
    keeps its id until the window passes, whatever became of the message."""
    if seq > streams.last_seq(st):
        return False
    view = streams._raw(st, seq)
    return view is None or msg_id_of(view.headers) == msg_id


def first_copy(streams, st, seq: int) -> tuple[int, int] | None:
    """(Ferry id, stored time µs) of the message at ``seq`` (None: not held here): tells a
    publish the cluster stored from one it found a duplicate of (session._store)."""
    view = streams._raw(st, seq)
    return None if view is None else (view.id, view.timestamp)


# Records read between two yields of refill(): the streams' scan chunk (SCAN_CHUNK).
REFILL_YIELD = 256

__all__ = ["MAX_DEDUP_IDS", "MAX_SETTLING_WAITERS", "REFILL_YIELD", "DedupWindow", "first_copy", "held", "refill"]
