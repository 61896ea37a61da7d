"""Durable JetStream consumers: saving and restoring their state (no trio).

Theory of operation
-------------------
Durable consumers are kept in the broker's key-value table :data:`TABLE`
(``core/kvtables.py``), one key ``<stream>/<name>``, JSON: config, created,
delivered, ack floor, pending, redelivery counts and, for deliver last per
subject, the sequences still to send. State changes mark a consumer dirty;
:class:`ConsumerStore` (owned by ``JsConsumers``) writes it at most every
:data:`SAVE_INTERVAL`, on create and delete at once, and on shutdown. After
a crash at most the last interval of acks is lost: those messages are
delivered again (at least once, as JetStream promises). Ephemerals live in
memory only.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Iterator

from core.errors import FerryError
from core.kvtables import NO_VERSION

from .model import Consumer, Pending

if TYPE_CHECKING:  # pragma: no cover
    from .streams import JetStreams

TABLE = "nats.jetstream.consumers"
SAVE_INTERVAL = 0.2          # seconds between writes of a dirty durable consumer


class ConsumerStore:
    """Durable consumers in the broker's key-value ``tables`` (None: nothing is
    saved). ``registry`` is the consumers' stream -> name -> consumer map: only
    consumers of streams still in it are written. The removals acks made on
    interest and work-queue streams (``streams``) are saved with them."""

    def __init__(self, streams: JetStreams, tables, registry: dict[str, dict[str, Consumer]]) -> None:
        self.streams = streams
        self.tables = tables
        self.registry = registry
        self.dirty: set[Consumer] = set()
        self.next_save = 0.0

    def mark(self, con: Consumer) -> None:
        """``con``'s state changed: a durable one is written on the next save."""
        if con.durable:
            self.dirty.add(con)

    def save(self, con: Consumer) -> None:
        """Write ``con`` now (a durable one; create, update, pause)."""
        if con.durable and self.tables is not None:
            self.tables.create(TABLE)
            self.tables.update(TABLE, [(_key(con), _dump(con), NO_VERSION)])
        self.dirty.discard(con)

    def remove(self, con: Consumer) -> None:
        """``con`` is deleted: never write it again, and forget it in the table."""
        self.dirty.discard(con)
        if con.durable and self.tables is not None:
            self.tables.remove(TABLE, [(_key(con), NO_VERSION)])

    def unsaved(self) -> bool:
        """Whether a save has anything to write."""
        return bool(self.dirty or self.streams.removed.unsaved)

    def tick(self, now: float) -> None:
        """Save what is unsaved, at most every :data:`SAVE_INTERVAL`."""
        if self.unsaved() and now >= self.next_save:
            self.save_dirty()
            self.next_save = now + SAVE_INTERVAL

    def next_deadline(self) -> float | None:
        return self.next_save if self.unsaved() else None

    def save_dirty(self) -> None:
        """Write every dirty durable consumer (one transaction), and the
        messages acks removed from interest / work-queue streams."""
        if self.streams.removed.unsaved and self.tables is not None:
            try:
                self.streams.flush_removed()
            except FerryError:
                pass                            # the broker is closing: the last interval is lost
        if not self.dirty or self.tables is None:
            self.dirty.clear()
            return
        entries = [(_key(c), _dump(c), NO_VERSION) for c in self.dirty if c.stream.name in self.registry]
        self.dirty.clear()
        if entries:
            try:
                self.tables.create(TABLE)
                self.tables.update(TABLE, entries)
            except FerryError:
                pass                            # the broker is closing: the last interval is lost

    def load(self, now: float) -> Iterator[Consumer]:
        """The durable consumers saved in the table, rebuilt one by one (at
        start; the registry adds each before the next is read)."""
        if self.tables is None or not self.tables.exists(TABLE):
            return
        after = None
        while True:
            page = self.tables.entries(TABLE, after, 1000)
            if not page:
                return
            for key, value, _version in page:
                con = self._restore(json.loads(value), now)
                if con is not None:
                    yield con
            after = page[-1][0]

    def _restore(self, doc: dict, now: float) -> Consumer | None:
        st = self.streams.streams.get(doc["stream"])
        if st is None:
            return None
        con = Consumer(st, doc["name"], doc["config"], doc["created"], True, active=now)
        con.sseq, con.cseq = doc["delivered"]
        con.floor_sseq, con.floor_cseq = doc["ack_floor"]
        con.scan = con.np_to = con.sseq
        for seq, cseq, deliveries, ts in doc["pending"]:
            con.pending[seq] = Pending(cseq, deliveries, now + con.ack_wait(deliveries), ts)
        con.rdc = {int(k): v for k, v in doc.get("rdc", {}).items()}
        if "lps" in doc:
            con.lps_to, con.lps = doc["lps"][0], set(doc["lps"][1])
            st.want_index = True
        return con


def _key(con: Consumer) -> bytes:
    return f"{con.stream.name}/{con.name}".encode()


def _dump(con: Consumer) -> bytes:
    doc = {"stream": con.stream.name, "name": con.name, "config": con.config, "created": con.created,
           "delivered": [con.sseq, con.cseq], "ack_floor": [con.floor_sseq, con.floor_cseq],
           "pending": [[s, p.cseq, p.deliveries, p.ts] for s, p in sorted(con.pending.items())],
           "rdc": {str(k): v for k, v in con.rdc.items()}}
    if con.lps is not None:
        doc["lps"] = [con.lps_to, sorted(q for q in con.lps if q > con.sseq)]
    return json.dumps(doc, separators=(",", ":")).encode()


__all__ = ["SAVE_INTERVAL", "TABLE", "ConsumerStore"]
