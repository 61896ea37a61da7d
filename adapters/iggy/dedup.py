"""Iggy's message deduplication: when a send's repeated ids are dropped.

Theory of operation
-------------------
The reference server (apache/iggy server-0.8.0) keeps, per partition, a window
of the message ids it stored (``[system.message_deduplication]``: ``enabled =
false``, ``max_entries = 10000``, ``expiry = "1 m"``; ``core/server/config.toml``).
While appending a batch it gives id 0 a fresh UUID, then drops every message
whose id the window already holds (or that came earlier in the same batch), and
the send still succeeds (``messages_batch_mut.rs`` ``prepare_for_persistence``:
"Detected duplicate message ID ..., removing"). Ferry does the same for every
Iggy send (binary TCP/QUIC/WebSocket, ``handlers_data.send_messages``; HTTP,
``adapters/http/routes_messages.py``), with the window of
``core/log/iddedup.py``. Other protocols never consult it.

Where Ferry differs, and why:

* **Per topic.** The server-wide default (:class:`DedupSettings`, the gateway's
  ``[iggy] message_deduplication`` keys) can be overridden per topic by the topic
  attribute :data:`TOPIC_ATTR` (``"true"`` / ``"false"``; :func:`set_topic_dedup`).
* **Across restarts.** Upstream's window lives in memory and starts empty. Ferry
  rebuilds a partition's window from the ids stored in its log at the first
  deduplicated send after a start (``iddedup.Rebuild``: at most ``max_entries``
  records, the expiry, ``REBUILD_MAX_BYTES``), so a client that resends after a
  ``kill -9`` stores nothing twice. The rebuild runs in slices of
  ``iddedup.REBUILD_SLICE`` records by the broker's background tasks
  (``Broker.in_slices``, core/flusher.py; :func:`hold_send`), the sends
  to that partition held until it is done and then run in the order they came: at
  ``max_entries = 1000000`` it reads up to 16 MiB, which held the loop 170-220 ms
  in one piece at 1,000,000 messages (docs/iggy.md, "Large topics").
* **Id 0** is never a duplicate and is not remembered (upstream remembers the
  UUID it generated, which no client can resend; Ferry keeps the room for client ids).
* **Bounded.** ``max_entries`` is 1..``MAX_ENTRIES_LIMIT`` (upstream: 0 = unbounded).
* **Acks.** A send whose every message is a duplicate appends nothing and is
  acknowledged once what is pending on the partition (maybe the originals) is
  durable (``Partition.ack_after_pending``), so an ack still means stored. Ids are
  remembered when the append is queued and forgotten if it fails
  (:meth:`Filtered.on_durable`), so a resend after a failed write is stored.

The window is this gateway's (one per partition object, dropped with it). In a
scale-out deployment (``ferry serve --store``) the cluster catches what another
gateway stored: a message of a topic with deduplication on goes to its partition's
stream with ``iggy.<id hex>`` as its ``Nats-Msg-Id``, and that stream's
``duplicate_window`` is :func:`cluster_window_us` (the expiry), so a batch resent
through another gateway after the first died is stored once, and an id is forgotten
at the expiry on every gateway alike (gateway/jetstream_store/iggyids.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable
from weakref import WeakKeyDictionary

from core.log.iddedup import (DEFAULT_EXPIRY_US, DEFAULT_MAX_ENTRIES, IdWindow, Rebuild, block_ids, drop_records,
                              rebuild)
from core.message import now_us
from core.perowner import PerOwner

TOPIC_ATTR = "iggy.message_deduplication"  # topic attribute: "true" / "false"; absent = server default
_TRUE, _FALSE = "true", "false"
# Topics whose override is remembered per broker (one SQLite read per topic, not per
# send); past it the memo starts over. 10 000: far more topics than one gateway sends
# to at once, a few hundred KiB.
MAX_CACHED_TOPICS = 10_000


@dataclass(frozen=True, slots=True)
class DedupSettings:
    """The server-wide default (upstream's names): off, 10 000 ids, one minute."""

    enabled: bool = False
    max_entries: int = DEFAULT_MAX_ENTRIES
    expiry_us: int = DEFAULT_EXPIRY_US

    def __post_init__(self) -> None:
        IdWindow(self.max_entries, self.expiry_us)  # raises InvalidArgument for a bound out of range


class _BrokerDedup:
    """One broker's settings, topic overrides and windows (per partition object)."""

    __slots__ = ("settings", "windows", "building", "overrides", "__weakref__")

    def __init__(self) -> None:
        self.settings = DedupSettings()
        self.windows: WeakKeyDictionary[object, IdWindow] = WeakKeyDictionary()
        # partition object -> the sends waiting for its window (hold_send), while it is rebuilt
        self.building: WeakKeyDictionary[object, list[Callable[[], None]]] = WeakKeyDictionary()
        self.overrides: dict[tuple[int, int, int], bool | None] = {}  # (stream, topic, created_at) -> override


_STATE: PerOwner[_BrokerDedup] = PerOwner(_BrokerDedup)
# The settings again, by the broker's Metadata: what a scale-out store holds (it never
# sees the Broker), for cluster_window_us.
_BY_META: PerOwner[DedupSettings] = PerOwner()


def configure(broker, settings: DedupSettings) -> None:
    """Set ``broker``'s server-wide default (gateway start-up); drops the windows."""
    state = _STATE.of(broker)
    state.settings = settings
    state.windows = WeakKeyDictionary()
    state.building = WeakKeyDictionary()
    try:
        _BY_META.set(broker.meta, settings)
    except (AttributeError, TypeError):  # a test double without a weakly referable Metadata
        pass


def cluster_window_us(meta, topic) -> int | None:
    """Scale-out: how long (µs) the cluster should remember the Iggy ids of ``topic``
    (its partitions' streams' ``duplicate_window``: the expiry; 0, no expiry, gives
    None's caller its own default), or None when deduplication is off for ``topic``.
    ``meta`` is the broker's Metadata (the store's ``StoreEvents.meta``). Reads the
    topic's override afresh: the store calls it once per metadata change, not per send."""
    settings = _BY_META.get(meta) or DedupSettings()
    value = meta.topic_state.topic_attrs(topic.stream_id, topic.id).get(TOPIC_ATTR, "")
    on = settings.enabled if value not in (_TRUE, _FALSE) else value == _TRUE
    return settings.expiry_us if on else None


def set_topic_dedup(broker, topic, enabled: bool | None) -> None:
    """Override the default for one topic (None: follow the default again)."""
    broker.topic_state.set_topic_attrs(topic.stream_id, topic.id,
                                       {TOPIC_ATTR: "" if enabled is None else (_TRUE if enabled else _FALSE)})
    _STATE.of(broker).overrides.pop((topic.stream_id, topic.id, topic.created_at), None)


def topic_dedup(broker, topic) -> bool:
    """Is deduplication on for ``topic`` (its override, else the server default)?"""
    state = _STATE.of(broker)
    key = (topic.stream_id, topic.id, topic.created_at)  # created_at: a re-created topic is another topic
    try:
        override = state.overrides[key]
    except KeyError:
        value = broker.topic_state.topic_attrs(topic.stream_id, topic.id).get(TOPIC_ATTR, "")
        override = True if value == _TRUE else False if value == _FALSE else None
        if len(state.overrides) >= MAX_CACHED_TOPICS:
            state.overrides.clear()
        state.overrides[key] = override
    return state.settings.enabled if override is None else override


@dataclass(slots=True)
class Filtered:
    """What is left of a send after deduplication (:func:`filter_send`)."""

    partition: int  # the partition chosen (explicit, by key or balanced): append there
    block: bytearray
    count: int  # records left in ``block``; 0: all were duplicates
    dropped: int
    part: object = None  # the partition object (for ``ack_after_pending``)
    _window: IdWindow | None = None
    _ids: list[int] | None = None
    _now: int = 0
    _failed: bool = False

    def stored(self) -> None:
        """The append took the block: remember its ids (not when it already failed)."""
        if self._window is not None and self._ids and not self._failed:
            self._window.add_all(self._ids, self._now)

    def on_durable(self, ack):
        """``ack`` (the append's on_durable) behind a check: when the append fails (a
        write error, or the cluster not storing it in scale-out mode) its ids are
        forgotten, so the client's resend is stored instead of dropped as a duplicate
        of records that do not exist."""
        def done(outcome) -> None:
            if isinstance(outcome, BaseException):
                self._failed = True
                if self._window is not None and self._ids:
                    self._window.forget(self._ids)
            ack(outcome)
        return done


def filter_send(broker, topic, partition: int | None, key: bytes | None, block: bytearray, count: int,
                *, now: int | None = None) -> Filtered | None:
    """Drop the records of ``block`` (stored layout, ``count`` records) whose ids the
    partition stored within the window; None when deduplication is off for ``topic``
    (send as usual; also when the broker is shutting down or the topic is sealed, so the
    append refuses it as it would). Chooses the partition once (``Broker.choose_partition``: the
    balanced counter moves once per send, as without deduplication). A block whose
    lengths do not frame ``count`` records is passed on unchanged, so the append
    refuses it with its own error. Raises what ``choose_partition`` raises."""
    if broker.draining or broker.closed or topic.sealed or not topic_dedup(broker, topic):
        return None  # off, or the append refuses the send with its own error (shutting down, sealed)
    pid = broker.choose_partition(topic, partition, key)
    part = broker.partition(topic.stream_id, topic.id, pid)
    ids = block_ids(block, count)
    if ids is None:
        return Filtered(pid, block, count, 0, part)
    now = now_us() if now is None else now
    window = _window_of(broker, part, now)
    drop = window.duplicates(ids, now)
    if drop:
        gone = set(drop)
        block = drop_records(block, count, drop)
        ids = [msg_id for i, msg_id in enumerate(ids) if i not in gone]
    return Filtered(pid, block, count - len(drop), len(drop), part, window, ids, now)


def hold_send(broker, topic, partition: int | None, key: bytes | None,
              go: Callable[[int | None, bytes | None], None],
              fail: Callable[[BaseException], None]) -> tuple[bool, int | None, bytes | None]:
    """Before :func:`filter_send`: ``(held, partition, key)``. When deduplication is on
    for ``topic`` and the chosen partition's window is not rebuilt yet (the first send
    after a start), the rebuild starts in slices (``Broker.in_slices``; or the send joins
    the one running) and ``held`` is True: ``go(partition, None)`` runs once the window
    is filled, in the order the sends came (an exception it raises goes to ``fail``).
    Otherwise (off, window ready, or no background tasks: the rebuild then runs in one
    piece in filter_send) ``held`` is False and the caller goes on now with ``partition``
    and ``key`` (the partition chosen once: the balanced counter moves once per send)."""
    if broker.draining or broker.closed or topic.sealed or not topic_dedup(broker, topic):
        return False, partition, key
    pid = broker.choose_partition(topic, partition, key)
    part = broker.partition(topic.stream_id, topic.id, pid)
    state = _STATE.of(broker)
    if part in state.windows:
        return False, pid, None

    def resume() -> None:
        try:
            go(pid, None)
        except Exception as exc:  # noqa: BLE001 - the send's own error, answered to its client
            fail(exc)
    waiting = state.building.get(part)
    if waiting is not None:
        waiting.append(resume)
        return True, pid, None
    if broker.in_slices is None:  # no background tasks (a test driving a session): in one piece
        return False, pid, None
    s = state.settings
    window = IdWindow(s.max_entries, s.expiry_us)
    job = Rebuild(window, part.read, part.first_offset, part.next_offset, now_us())
    state.building[part] = [resume]

    def done(finished: bool) -> None:
        # A failed or cut rebuild leaves no window: the held sends rebuild (and fail, or
        # succeed) in one piece in filter_send.
        waiting = state.building.pop(part, [])
        if finished:
            state.windows[part] = window
        for go_on in waiting:
            go_on()
    # The broker's job, not the connection's (core/flusher.py SliceRunner): other
    # connections' sends to the partition wait for it too.
    broker.in_slices(job.step, done)
    return True, pid, None


def _window_of(broker, part, now: int) -> IdWindow:
    """The partition's window, rebuilt from its log on first use after a start."""
    state = _STATE.of(broker)
    window = state.windows.get(part)
    if window is None:
        s = state.settings
        window = IdWindow(s.max_entries, s.expiry_us)
        rebuild(window, part.read, part.first_offset, part.next_offset, now)
        state.windows[part] = window
    return window


__all__ = ["DedupSettings", "Filtered", "MAX_CACHED_TOPICS", "TOPIC_ATTR", "cluster_window_us", "configure",
           "filter_send", "hold_send", "set_topic_dedup", "topic_dedup"]
