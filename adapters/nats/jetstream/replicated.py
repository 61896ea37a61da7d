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

Not followed: filtered purges and message deletes made on another gateway (the
``nats.jetstream.removed`` rows) reach this gateway's index at its next start.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from core.errors import NotFound

from .streams import CONFIG_ATTR, FLOOR_ATTR, JS_STREAM, JsStream

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
    if added:
        streams.removed.load({st.name: st for st in added})   # their saved subject floors and deletes
    if changed:
        streams._subjects.clear()                    # subject -> stream answers may differ now
        streams.generation += 1                      # ... and the session route caches with them
    return added, dropped


def _saved(st: JsStream) -> str:
    """The config attribute as ``JetStreams._save`` writes it for ``st``."""
    return json.dumps({"config": st.config, "created": st.created}, separators=(",", ":"))


__all__ = ["follow_streams"]
