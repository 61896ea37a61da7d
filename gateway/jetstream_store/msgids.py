"""JetStream clients' msg ids, de-duplicated by the cluster across every gateway (scale-out mode).

Theory of operation
-------------------
nats-server stores a publish whose ``Nats-Msg-Id`` it saw within the stream's
``duplicate_window`` once, and answers the copy ``{"stream":..,"seq":<the first
copy's>,"duplicate": true}``. Each gateway keeps a window of its own
(adapters/nats/jetstream/dedup.py), filled from its own publishes and one read
of the log after it starts, so a client retrying through another gateway was
stored twice: bench/fault_schedule.py counted 14 such duplicates in ten
minutes (docs/scale-out.md, "Fault schedule", item 4). Every copy reaches the
cluster, and a JetStream stream de-duplicates within itself, so the cluster
decides; nothing is replicated between gateways for it:

* **The id.** A JetStream stream is one Ferry topic of one partition, so one
  backing stream. Its partition is marked ``client_ids`` when opened
  (:meth:`ClientIds.opened`), and the pump sends a message whose own headers
  carry a ``Nats-Msg-Id`` with ``js.<id>`` as the cluster's ``Nats-Msg-Id``
  (layout.encode_message) instead of Ferry's hex message id. The gateway's own
  re-sends after a lost acknowledgement carry it too, so they are still stored once.
* **The window.** The backing stream's ``duplicate_window`` is the JetStream
  stream's, so an id is forgotten when nats-server would forget it, on every
  gateway alike. The stream's config is a topic attribute written after the
  topic (``streams.JetStreams.create``) and changed by ``STREAM.UPDATE``, so it
  is read again before an append whenever the metadata moved since the last
  look (:meth:`ClientIds.before_append`: one attribute read per metadata
  change, not per message), and a backing stream whose window differs is
  updated (``$JS.API.STREAM.UPDATE``, on the trio connection: the publish
  does not wait; until the cluster answers, the window it had holds).
* **The answer.** The cluster answers a duplicate with the first copy's
  sequence (Ferry offset + 1); the partition fires the append's ``on_durable``
  with it once the local cache holds that message, and the JetStream adapter
  compares the id stored there with its own message's: another's means a
  duplicate (adapters/nats/jetstream/session.py ``_store``).
* **Only stored copies answer.** nats-server answers ``duplicate`` only for a
  copy it stored (an id still being proposed gets error 10158, which the client
  retries). Each gateway's msg-id window is also saved in the key-value tables,
  which every gateway shares and reads at its start, so it must hold no id whose
  append is still on its way here at a guessed sequence: a gateway that took
  such a guess answered a retry ``duplicate: true`` for a message never stored
  (docs/scale-out.md, "Fault schedule", item 3, seed 2). The window keeps those
  aside until they settle, and a duplicate's sequence is checked against the
  log before it is answered (adapters/nats/jetstream/dedup.py, ``held``).

What is not kept: Ferry's own re-sends of a message *without* a msg id on a
stream whose window is shorter than the pump's re-send span (30 s) are
de-duplicated within that window only. The adapter looks at the stored copy only
when the sequence differs from the one it guessed at append (the embedded log's
is always right, and the look is a read per publish): a duplicate whose first
copy sits exactly at the guessed sequence gets a plain PubAck, with the right
sequence, without ``duplicate: true``.
"""

from __future__ import annotations

import json
import logging

import trio

from adapters.nats.client_codec import ServerMsg
from adapters.nats.jetstream.streams import CONFIG_ATTR, JS_STREAM
from core.errors import NotFound

from .errors import ConnectionLost, SlowCluster
from .layout import DUPLICATE_WINDOW_NS, ApiError, api_answer, request_json

log = logging.getLogger("ferry.store")

# After a refused or unanswered STREAM.UPDATE, how long before the next append tries again
# (a stream leader election takes about 5 s: store.py REQUEST_TIMEOUT_S).
UPDATE_RETRY_S = 1.0


class _Window:
    """What one JetStream partition's backing stream should have and has."""

    __slots__ = ("meta_seq", "want", "have", "asking", "retry_at")

    def __init__(self) -> None:
        self.meta_seq = -1        # the metadata log entry the config was last read at
        self.want = 0             # duplicate_window (ns) the backing stream should have
        self.have: int | None = None  # what the cluster last confirmed; None: not asked yet
        self.asking = False
        self.retry_at = float("-inf")


class ClientIds:
    """The JetStream partitions of one store and their backing streams' windows (module docstring)."""

    def __init__(self, store) -> None:
        self.store = store
        self.windows: dict[tuple[int, int, int], _Window] = {}

    def opened(self, topic, key) -> bool:
        """Is ``topic`` a JetStream stream's (a topic of the Ferry stream ``jetstream``)?"""
        try:
            keyed = self.store.events.meta.get_stream(topic.stream_id).name == JS_STREAM
        except NotFound:  # no such stream (any more): not a JetStream partition
            keyed = False
        if keyed:  # new, or reopened on a new stream (a purge): its window is asked again
            self.windows[key] = _Window()
        return keyed

    def closed(self, key) -> None:
        self.windows.pop(key, None)

    def before_append(self, key, topic) -> None:
        """Update the backing stream's duplicate window when the JetStream stream's differs."""
        w = self.windows.get(key)
        if w is None:
            return
        meta = self.store.events.meta
        seq = meta.db.replica_seq
        if w.meta_seq != seq:  # the metadata moved: the stream's config may have
            w.meta_seq = seq
            w.want = self._window(meta, topic)
        if w.want != w.have and not w.asking and self.store.nc is not None and trio.current_time() >= w.retry_at:
            self._update(key, topic, w)

    @staticmethod
    def _window(meta, topic) -> int:
        raw = meta.topic_state.topic_attrs(topic.stream_id, topic.id).get(CONFIG_ATTR)
        try:
            return int(json.loads(raw)["config"]["duplicate_window"]) if raw else DUPLICATE_WINDOW_NS
        except (ValueError, KeyError, TypeError):
            return DUPLICATE_WINDOW_NS

    def _update(self, key, topic, w: _Window) -> None:
        store = self.store
        entry = store.parts.get(key)
        nc = store.nc
        if entry is None or nc is None or not nc.connected:
            return
        _part, stream, subject = entry
        per_part = topic.max_topic_size // max(topic.partitions_count, 1) if topic.max_topic_size else 0
        body = store.layout.stream_config(stream, subject, max_age_us=topic.message_expiry, max_bytes=per_part,
                                          duplicate_window_ns=w.want)
        want = w.want

        def answered(outcome) -> None:
            w.asking = False
            try:
                if not isinstance(outcome, ServerMsg):
                    raise ApiError(0, 0, f"no answer: {outcome or type(outcome).__name__}")
                api_answer(outcome.payload)
            except ApiError as exc:
                log.info("stream %s: duplicate window not updated yet: %s", stream, exc)
                w.retry_at = trio.current_time() + UPDATE_RETRY_S
                return
            w.have = want

        w.asking = True
        try:
            nc.request_cb(f"$JS.API.STREAM.UPDATE.{stream}", request_json(body), None, answered)
        except (ConnectionLost, SlowCluster):
            w.asking = False
            w.retry_at = trio.current_time() + UPDATE_RETRY_S


__all__ = ["ClientIds", "UPDATE_RETRY_S"]
