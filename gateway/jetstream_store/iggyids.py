"""Iggy message ids, de-duplicated by the cluster across every gateway (scale-out mode).

Theory of operation
-------------------
Iggy's deduplication (adapters/iggy/dedup.py, docs/iggy.md "Message deduplication")
keeps a window of ids per partition in each gateway. A client whose send through
gateway A got no answer (A died) resends the batch through B, whose window never saw
those ids. The reference server drops a duplicate from the batch silently and the send
succeeds (apache/iggy server-0.8.0 ``core/common/src/types/message/messages_batch_mut.rs``
``prepare_for_persistence``: "Detected duplicate message ID ..., removing"). The cluster
does the same for a repeated ``Nats-Msg-Id`` within a stream's ``duplicate_window``, so
it decides, as for JetStream msg ids (msgids.py):

* **The id.** On a partition whose topic has deduplication on, a message without an
  idempotent producer's tag goes with ``iggy.<id hex>`` as its cluster ``Nats-Msg-Id``
  (layout.encode_message, ``IGGY_IDS``) instead of the bare hex id. The Iggy id is the
  message id (a send's id 0 got a fresh UUIDv7 at append), so the gateway's own re-sends
  after a lost acknowledgement are still stored once; the ``.`` keeps the form apart from
  the other ids (``js.<id>``, ``<producer>:<seq>:<i>``, hex).
* **The window.** The partition stream's ``duplicate_window`` is the deduplication
  expiry (``dedup.cluster_window_us``; at most the topic's message expiry, as nats-server
  requires; 0, no expiry, keeps the store's two minutes), so an id is forgotten when the
  reference server would forget it, on every gateway alike. Whether a topic deduplicates
  (the server default, the topic's override attribute) is read again before an append
  whenever the metadata moved (one read per metadata change, not per send), and a
  stream whose window differs is updated (``$JS.API.STREAM.UPDATE``, ``ClientIds._update``;
  the send does not wait). Turned off again, the stream gets the store's window back (in
  the same gateway's life: a gateway that starts with it off leaves the streams alone).
* **The answer.** The cluster answers a duplicate with the first copy's sequence; the
  publisher counts it stored (publisher.py ``_Call.done``), so the send is acknowledged
  once the cache holds the first copy, as upstream acknowledges a batch it dropped
  duplicates from.
* **Producer calls.** A producer's call is trusted to the cluster only while its stream
  surely remembers it (partition.py ``_cluster_remembers``): a window shorter than the
  store's two minutes shortens that trust too (``cluster_trust_us``), so an older retry
  is answered duplicate by the gateway instead of being stored again.

What is not kept: with deduplication off the message still carries its id in hex, so
the cluster drops a resend of the same ids within its two minutes (docs/scale-out.md).
"""

from __future__ import annotations

import trio

from adapters.iggy.dedup import cluster_window_us

from .layout import DUPLICATE_WINDOW_NS, IGGY_IDS, NS_PER_US
from .msgids import ClientIds, _Window
from .partition import CLUSTER_DEDUP_TRUST_US

# The clocks of the gateway that stamped a producer's call and of this one may differ
# by this much (partition.py CLUSTER_DEDUP_TRUST_US keeps the same margin).
CLOCK_MARGIN_US = 20_000_000


class IggyIds(ClientIds):
    """The partitions that are not a JetStream stream's, and their streams' windows (module docstring)."""

    def opened(self, topic, key) -> bool:
        self.windows[key] = _Window()  # whether the topic deduplicates is read at its first append
        return False

    def before_append(self, key, topic) -> None:
        """Mark the partition's messages and set its stream's window from the topic's deduplication."""
        w = self.windows.get(key)
        entry = self.store.parts.get(key)
        if w is None or entry is None:
            return
        meta = self.store.events.meta
        seq = meta.db.replica_seq
        if w.meta_seq != seq:  # the metadata moved: the topic's override (or the topic) may have
            w.meta_seq = seq
            part = entry[0]
            expiry_us = cluster_window_us(meta, topic)
            part.client_ids = IGGY_IDS if expiry_us is not None else False
            if expiry_us is None:  # off: the store's own window, if the stream was given another
                w.want = DUPLICATE_WINDOW_NS if w.have not in (None, DUPLICATE_WINDOW_NS) else w.have
            else:
                w.want = expiry_us * NS_PER_US if expiry_us else DUPLICATE_WINDOW_NS
            want_ns = w.want or DUPLICATE_WINDOW_NS  # what the stream will remember (stream_config's cap)
            window_ns = min(want_ns, topic.message_expiry * NS_PER_US) if topic.message_expiry else want_ns
            part.cluster_trust_us = min(CLUSTER_DEDUP_TRUST_US, window_ns // NS_PER_US - CLOCK_MARGIN_US)
        if w.want is not None and w.want != w.have and not w.asking and self.store.nc is not None \
                and trio.current_time() >= w.retry_at:
            self._update(key, topic, w)


__all__ = ["IggyIds"]
