"""Durable JetStream consumers: saving, restoring and merging their state (no trio).

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
memory only, on the gateway that made them.

**One consumer across gateways** (scale-out, docs/scale-out.md "JetStream
consumers"). The table is replicated: every gateway's file gets every other's
writes, with the same versions. Each gateway keeps the consumer in memory and,
when the table brings another gateway's write of it (:meth:`ConsumerStore.changes`,
after ``KvTables.replayed``), folds it in with :func:`merge`, whose rules only
move state forward, as a join: delivered sequences and the ack floor take the
larger; a message is acked when either side acked it. An ack above the floor
has no record of its own: a sequence at or below a side's delivered one that
is not in that side's pending set was acked (or terminated) there, because a
side takes pending entries together with the delivered sequence that covers
them; so the floor rises to just below the lowest message still pending. Both
gateways therefore reach the same state once idle, whatever the order the
writes crossed in. The periodic write is conditional on the version
this gateway last saw (compare-and-set, :func:`save_dirty`): a write that
crossed another's fails, the other's state is merged, and the merged state is
written on the next turn, so the table never goes back either. Config writes
(create, update, pause) stay unconditional: they are rare, and a gateway whose
merged state holds more than what it read writes it back.
"""

from __future__ import annotations

import json
from collections import deque
from typing import TYPE_CHECKING, Iterator

from core.errors import FerryError, TableKeyBadVersion
from core.kvtables import MAX_BATCH_ENTRIES, NO_VERSION, NOT_EXISTS

from .model import Consumer, Pending

if TYPE_CHECKING:  # pragma: no cover
    from .streams import JetStreams

TABLE = "nats.jetstream.consumers"
SAVE_INTERVAL = 0.2          # seconds between writes of a dirty durable consumer
# After a write the store refused (the cluster unreachable, or the broker closing): the
# next try. A scale-out metadata write blocks the event loop up to 8 s (REQUEST_TIMEOUT_S
# in gateway/jetstream_store/store.py), so retrying every SAVE_INTERVAL would stall it.
SAVE_RETRY_S = 2.0
PAGE = 1000                  # entries per read of the table (load, changes)


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
        self.position = 0            # the table version changes() reads from next
        self.removals = False        # changes() saw fewer entries than positions: a key may be gone

    def mark(self, con: Consumer) -> None:
        """``con``'s state changed: a durable one is written on the next save."""
        if con.durable:
            self.dirty.add(con)

    def save(self, con: Consumer) -> None:
        """Write ``con`` now (a durable one; create, update, pause)."""
        if con.durable and self.tables is not None:
            self.tables.create(TABLE)
            con.version = self.tables.update(TABLE, [(_key(con), _dump(con), NO_VERSION)])[0]
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
            ok = self.save_dirty(now)
            self.next_save = now + (SAVE_INTERVAL if ok else SAVE_RETRY_S)

    def next_deadline(self) -> float | None:
        return self.next_save if self.unsaved() else None

    def save_dirty(self, now: float = 0.0) -> bool:
        """Write every dirty durable consumer (one transaction, each key on the
        condition that it still holds the version this gateway last saw), and
        the messages acks removed from interest / work-queue streams. False when
        the store refused: what was dirty stays dirty for the next try."""
        if self.streams.removed.unsaved and self.tables is not None:
            try:
                self.streams.flush_removed()
            except FerryError:
                pass                            # the broker is closing: the last interval is lost
        if not self.dirty or self.tables is None:
            self.dirty.clear()
            return True
        # only consumers still registered (not deleted, nor replaced by one made elsewhere)
        batch = [c for c in self.dirty if self.registry.get(c.stream.name, {}).get(c.name) is c]
        self.dirty.clear()
        if len(batch) > MAX_BATCH_ENTRIES:       # the table's limit per call: the rest next turn
            self.dirty.update(batch[MAX_BATCH_ENTRIES:])
            batch = batch[:MAX_BATCH_ENTRIES]
        if not batch:
            return True
        for _attempt in range(2):
            entries = [(_key(c), _dump(c), NOT_EXISTS if c.version is None else c.version) for c in batch]
            try:
                self.tables.create(TABLE)
                versions = self.tables.update(TABLE, entries)
            except TableKeyBadVersion as exc:
                # Another gateway wrote (or deleted) one of them since this one last read
                # it: merge what is there now and write the result (once more now, then
                # on the next turn).
                skip = self._catch_up(exc.details.get("key"), now)
                batch = [c for c in batch if c is not skip]
                if not batch:
                    return True
                continue
            except FerryError:
                self.dirty.update(batch)        # the cluster is unreachable, or the broker closing
                return False
            for con, version in zip(batch, versions):
                con.version = version
            return True
        self.dirty.update(batch)
        return True

    def _catch_up(self, key, now: float) -> Consumer | None:
        """After a refused conditional write: merge the current entry of ``key``.
        Returns the consumer when it is not to be written (deleted, or deleted and
        made again, elsewhere: ``JsConsumers.refresh`` drops or replaces it)."""
        if not isinstance(key, bytes):
            return None
        entry = self.tables.get(TABLE, [key])[0]
        stream, _, name = key.decode().partition("/")
        con = self.registry.get(stream, {}).get(name)
        if con is None:
            return None
        if entry is None:
            return con
        doc = json.loads(entry[1])
        if doc.get("created") != con.created:
            return con
        acked, _ahead = merge(con, doc, now)
        self.streams.release(con.stream, acked)
        con.version = entry[2]
        return None

    def load(self, now: float) -> Iterator[Consumer]:
        """The durable consumers saved in the table, rebuilt one by one (at
        start; the registry adds each before the next is read)."""
        if self.tables is None or not self.tables.exists(TABLE):
            return
        self.position = self.tables.info(TABLE)[0]
        after = None
        while True:
            page = self.tables.entries(TABLE, after, PAGE)
            if not page:
                return
            for key, value, version in page:
                con = self.restore(json.loads(value), now)
                if con is not None:
                    con.version = version
                    yield con
            after = page[-1][0]

    def changes(self) -> Iterator[tuple[dict, int]]:
        """``(doc, version)`` of every entry written since the last call (this
        gateway's own writes too: the caller knows them by their version), in
        version order. Sets ``removals`` when a key may have been removed."""
        self.removals = False
        if self.tables is None or not self.tables.exists(TABLE):
            return
        length = self.tables.info(TABLE)[0]
        start, seen = self.position, 0
        while self.position < length:
            page, last, _end = self.tables.delta(TABLE, self.position, PAGE)
            if not page:
                break
            self.position = last
            for _key_, value, version in page:
                seen += 1
                yield json.loads(value), version
        self.position = max(self.position, length)
        # Each written entry takes one position and each removed key one: fewer entries
        # than positions means a removal (or a key written twice) in between.
        self.removals = length - start > seen

    def entries(self) -> Iterator[tuple[dict, int]]:
        """Every saved consumer, ``(doc, version)`` (a stream appeared: its consumers)."""
        if self.tables is None or not self.tables.exists(TABLE):
            return
        after = None
        while page := self.tables.entries(TABLE, after, PAGE):
            for _key_, value, version in page:
                yield json.loads(value), version
            after = page[-1][0]

    def gone(self, cons: list[Consumer]) -> list[Consumer]:
        """Those of ``cons`` (saved durables) whose key is no longer in the table."""
        if self.tables is None or not self.tables.exists(TABLE):
            return []
        out = []
        for i in range(0, len(cons), MAX_BATCH_ENTRIES):
            chunk = cons[i:i + MAX_BATCH_ENTRIES]
            got = self.tables.get(TABLE, [_key(c) for c in chunk])
            out += [c for c, entry in zip(chunk, got) if entry is None]
        return out

    def restore(self, doc: dict, now: float) -> Consumer | None:
        """A consumer rebuilt from its saved ``doc`` (None: its stream is unknown here);
        its unacked messages are due after ``ack_wait`` from ``now``."""
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


def merge(con: Consumer, doc: dict, now: float) -> tuple[list[int], bool]:
    """Fold ``doc``, the same consumer as another gateway saved it, into ``con``
    (module docstring): ``(acked, ahead)``, the sequences ``con`` had pending that
    the other side acked, and whether ``con`` now holds something ``doc`` lacks
    (then it is written back). Never moves ``con`` backwards; merging the same
    ``doc`` twice changes nothing the second time."""
    d_sseq, d_cseq = doc["delivered"]
    f_sseq, f_cseq = doc["ack_floor"]
    theirs = {seq: (cseq, n, ts) for seq, cseq, n, ts in doc["pending"]}
    their_rdc = {int(k): v for k, v in doc.get("rdc", {}).items()}
    acked = [s for s in con.pending if s <= f_sseq or (s <= d_sseq and s not in theirs)]
    done = set(acked)                            # acked on one side, pending on the other
    for seq in acked:
        del con.pending[seq]
    for seq, (cseq, n, ts) in theirs.items():
        p = con.pending.get(seq)
        if p is not None:
            p.cseq, p.deliveries = min(p.cseq, cseq), max(p.deliveries, n)   # the first delivery's cseq
        elif seq <= con.sseq or seq <= con.floor_sseq:
            done.add(seq)                        # delivered here and no longer pending: acked here
        else:
            con.pending[seq] = Pending(cseq, n, now + con.ack_wait(n), ts)
    con.sseq, con.cseq = max(con.sseq, d_sseq), max(con.cseq, d_cseq)
    if (f_sseq, f_cseq) > (con.floor_sseq, con.floor_cseq):
        con.floor_sseq, con.floor_cseq = f_sseq, f_cseq
    below = [s for s in con.pending if s <= con.floor_sseq]
    for seq in below:
        del con.pending[seq]
    acked += below
    done.update(below)
    if not con.pending:                          # every delivery acked: the floor is the delivered point
        con.floor_sseq, con.floor_cseq = con.sseq, con.cseq
    else:
        # What lies between the floor and the lowest pending message was acked, on one side
        # or the other: the floor goes up to just below it, where nats-server's processAckMsg
        # puts it once the ack right above the floor comes (which may have come elsewhere).
        low = min(con.pending)
        if low - 1 > con.floor_sseq:
            con.floor_sseq, con.floor_cseq = low - 1, max(con.pending[low].cseq - 1, con.floor_cseq)
    for seq, n in their_rdc.items():
        if seq not in done:
            con.rdc[seq] = max(con.rdc.get(seq, 0), n)
    for seq in done:
        con.rdc.pop(seq, None)
    if con.scan < con.sseq:                      # delivered elsewhere: look on from there, count again
        con.scan = con.np_to = con.sseq
        con.np_count, con.np_index, con.ahead, con.replayed = 0, None, deque(), None
    mine = (con.sseq, con.cseq, con.floor_sseq, con.floor_cseq,
            {s: (p.cseq, p.deliveries) for s, p in con.pending.items()}, con.rdc)
    other = (d_sseq, d_cseq, f_sseq, f_cseq, {s: (c, n) for s, (c, n, _ts) in theirs.items()}, their_rdc)
    return sorted(acked), mine != other


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


__all__ = ["SAVE_INTERVAL", "TABLE", "ConsumerStore", "merge"]
