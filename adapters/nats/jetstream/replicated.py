"""JetStream streams other scale-out gateways created, changed or deleted (no trio).

Theory of operation
-------------------
In scale-out mode (docs/scale-out.md) every gateway's metadata file gets every
other gateway's writes, and ``Broker.resync`` reloads the broker's caches.
:class:`~adapters.nats.jetstream.streams.JetStreams` keeps its own index of the
streams (name -> :class:`~adapters.nats.jetstream.streams.JsStream`), built from
the topics' attributes at start; :func:`follow_streams` brings it in line with
them again, in place, so what this gateway holds for the streams it already had
(subject index, msg-id window, open partition, the consumers that point at the
``JsStream``) stays: a stream that appeared is added, a stream whose config or
purge floor changed gets them (and its subject index is rebuilt on next need,
as after ``STREAM.UPDATE``), and a stream that went (or was made again under the
same name: another topic) is dropped. ``JsConsumers.refresh`` calls it when the
key-value tables report writes from elsewhere, then follows the durable
consumers (``consumer_store``).

Filtered purges and message deletes made on another gateway (subject floors
and deleted sequences, the ``nats.jetstream.removed`` rows: ``removed``) are
followed by :func:`follow_removed`: each is recorded in the stream's
``floors`` / ``deleted`` at once (an index built from now on applies it, as
after a start) and hidden in the index in use and the one being built
(``SubjectIndex.hide``: consumers' pending counts follow its hide log, their
cursors ask ``JetStreams.visible``). A purge elsewhere may remove a whole
stream's worth of messages, and nats-server removes them all in one go
(server/filestore.go ``PurgeEx``, under the stream's lock); here the loop is
shared with every connection, so at most :data:`FOLLOW_BUDGET` sequences are
hidden or entries applied per call, and ``JsConsumers`` calls again at once
while some remain (``RemovedRecords.behind``). Meanwhile this gateway still
shows part of what went, as it shows another gateway's append a little late.
"""

from __future__ import annotations

import json
from collections import deque
from typing import TYPE_CHECKING

from core.errors import NotFound

from .streams import CONFIG_ATTR, FLOOR_ATTR, JS_STREAM, JsStream

# Sequences hidden (or table entries applied) per follow_removed call: 1,024 hides of one
# subject took 0.4-0.6 ms here (a 200,000-message index, 2 loaded cores), plus one delta
# page read from the metadata file: inside one warm-up slice (driver.WARM_SLICE, ~10 ms).
FOLLOW_BUDGET = 1024

if TYPE_CHECKING:  # pragma: no cover
    from .streams import JetStreams


def follow_streams(streams: "JetStreams") -> tuple[list[JsStream], list[str]]:
    """Apply the streams' saved attributes to ``streams``: ``(added, dropped)``,
    the streams that appeared here and the names of those that went (a name
    made again is in both)."""
    broker = streams.broker
    try:
        topics = broker.list_topics(JS_STREAM)
    except NotFound:
        topics = []
    seen: dict[str, tuple[int, dict]] = {}
    for topic in topics:
        attrs = broker.topic_state.topic_attrs(JS_STREAM, topic.id)
        if CONFIG_ATTR in attrs:                     # not a topic made by another protocol
            seen[topic.name] = (topic.id, attrs)
    added: list[JsStream] = []
    dropped: list[str] = []
    changed = False
    for name, st in list(streams.streams.items()):
        got = seen.get(name)
        if got is None or got[0] != st.topic_id:
            del streams.streams[name]
            dropped.append(name)
            changed = True
    for name, (topic_id, attrs) in seen.items():
        doc = json.loads(attrs[CONFIG_ATTR])
        floor = int(attrs.get(FLOOR_ATTR, "0"))
        st = streams.streams.get(name)
        if st is None:
            st = streams.streams[name] = JsStream(name, doc["config"], doc["created"], topic_id, floor=floor)
            added.append(st)
            changed = True
            continue
        if attrs[CONFIG_ATTR] != _saved(st):             # compared as saved: JSON has no tuples
            st.config = doc["config"]
            st.index = st.building = None            # rebuilt on next need (as STREAM.UPDATE does)
            changed = True
        if floor > st.floor:                         # purged elsewhere: a floor only rises
            st.floor = floor
            _fold(st)
    if dropped and streams.removed.todo:            # rows read for a stream that went are not its successor's
        gone = set(dropped)
        streams.removed.todo = deque(row for row in streams.removed.todo if row[0] not in gone)
    if added:
        streams.removed.load({st.name: st for st in added}, start=False)   # their saved floors and deletes
    if changed:
        streams._subjects.clear()                    # subject -> stream answers may differ now
        streams.generation += 1                      # ... and the session route caches with them
    return added, dropped


def _fold(st: JsStream) -> None:
    """The floor rose: forget the subject floors and deletes it covers, as the
    gateway that raised it did (``JetStreams._compact``) and as its table now says."""
    if st.deleted and min(st.deleted) < st.floor:
        st.deleted.difference_update([q for q in st.deleted if q < st.floor])
    for subject in [s for s, q in st.floors.items() if q <= st.floor]:
        del st.floors[subject]


def follow_removed(streams: "JetStreams", budget: int = FOLLOW_BUDGET) -> bool:
    """Apply about ``budget`` sequences' worth of the floors and deletes other
    gateways saved since the last call (``RemovedRecords.read``); True while
    some remain (call again soon)."""
    removed = streams.removed
    todo = removed.todo
    while budget > 0:
        if not todo:
            removed.read(budget)
            if not todo:
                break
        name, kind, rest, value = todo[0]
        st = streams.streams.get(name)
        budget -= 1
        if st is None:                               # deleted since, or not followed here yet: its
            todo.popleft()                           # rows are loaded when its stream appears
            continue
        try:
            number = int(rest if kind == "d" else value)
        except ValueError:                           # not a row this version wrote: skipped, not retried
            todo.popleft()
            continue
        if kind == "d":
            seq = number
            if seq >= st.floor:
                st.deleted.add(seq)
            for idx in (st.index, st.building):
                if idx is not None:
                    idx.hide(seq)
            todo.popleft()
            continue
        floor = number
        if floor > max(st.floors.get(rest, 0), st.floor):
            st.floors[rest] = floor
        for idx in (st.index, st.building):
            while budget > 0 and idx is not None:
                seqs = idx.subjects.get(rest)        # ascending; hide() may replace the container
                if not seqs or seqs[0] >= floor:
                    break
                idx.hide(seqs[0])
                budget -= 1
        if not any(idx is not None and (seqs := idx.subjects.get(rest)) and seqs[0] < floor
                   for idx in (st.index, st.building)):
            todo.popleft()                           # else: the rest of this subject in the next call
    return removed.behind


def _saved(st: JsStream) -> str:
    """The config attribute as ``JetStreams._save`` writes it for ``st``."""
    return json.dumps({"config": st.config, "created": st.created}, separators=(",", ":"))


__all__ = ["FOLLOW_BUDGET", "follow_removed", "follow_streams"]
