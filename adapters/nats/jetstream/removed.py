"""The saved removals of JetStream streams: per-subject floors and deleted sequences (no trio).

Theory of operation
-------------------
Most of what a stream no longer shows follows from its records (limits,
rollups, TTLs: ``index.SubjectIndex`` recomputes them on a rebuild). The rest
must be saved: subject-filtered purges (a per-subject floor: the first
sequence of that subject still shown), ``STREAM.MSG.DELETE`` and the messages
interest and work-queue retention removed (deleted sequences). Each stream
keeps them in memory (``JsStream.floors``, ``JsStream.deleted``, handed to
its index); :class:`RemovedRecords` keeps them in the broker's key-value
table :data:`TABLE`, one key per floor (``<stream> US f US <subject>``, the
sequence as value) or delete (``<stream> US d US <seq>``), and reads them
back at start. Removals by acks are not written one by one: they wait in
``unsaved`` until the consumers' next save (``JetStreams.flush_removed``).

Scale-out (docs/scale-out.md "JetStream consumers"): the table is part of the
metadata, so another gateway's floors and deletes arrive in it as replayed
writes. :meth:`RemovedRecords.read` takes them in version order from
``position`` (``KvTables.delta``: versions are the same on every gateway) into
``todo``, a page at a time; ``replicated.follow_removed`` applies them to the
streams here in slices. Keys removed from the table are not returned by a
delta read; they are removed only when a stream is deleted (followed as the
stream's topic going) or when deletes fold into the purge floor (followed as
the floor attribute rising, ``replicated.follow_streams``).
"""

from __future__ import annotations

from collections import deque

from core.kvtables import NO_VERSION

TABLE = "nats.jetstream.removed"
TABLE_BATCH = 1000            # key-value table entries written or removed per call


class RemovedRecords:
    """The removals of one broker's streams in ``broker.tables`` (read when
    used: a broker without tables saves nothing). ``st`` below is a
    ``streams.JsStream`` (not imported: the streams module imports this one)."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.unsaved: dict[str, list[int]] = {}      # stream -> seqs released by acks, saved with consumer state
        self.position = 0                            # the table's version this gateway has read up to
        # (stream, kind, subject or seq, value) read from the table, not applied to the streams yet
        self.todo: deque[tuple[str, str, str, bytes]] = deque()
        self.more = False                            # the last read left entries in the table

    def load(self, streams: dict, start: bool = True) -> None:
        """Subject floors and deleted seqs saved by earlier purges and deletes
        (``start``: every stream's, at start: later writes are read from here
        on by :meth:`read`; else those of streams that appeared since)."""
        tables = getattr(self.broker, "tables", None)
        if tables is None or not tables.exists(TABLE):
            return
        if start:                                    # taken before the entries: one written meanwhile
            self.position = tables.info(TABLE)[0]    # is read twice, and applying it twice changes nothing
            self.todo.clear()
        after = None
        while True:
            page = tables.entries(TABLE, after, 1000)
            if not page:
                return
            for key, value, _version in page:
                name, kind, rest = key.decode().split("\x1f", 2)
                st = streams.get(name)
                if st is None:
                    continue
                if kind == "f":
                    st.floors[rest] = int(value)
                else:
                    st.deleted.add(int(rest))
            after = page[-1][0]

    def save(self, st, floors: dict[str, int], deleted: list[int]) -> None:
        tables = self.broker.tables
        tables.create(TABLE)
        entries = [(_key(st, "f", s), str(q).encode(), NO_VERSION) for s, q in floors.items()]
        entries += [(_key(st, "d", q), b"", NO_VERSION) for q in deleted]
        for i in range(0, len(entries), TABLE_BATCH):
            versions = tables.update(TABLE, entries[i:i + TABLE_BATCH])
            if versions and versions[0] == self.position:   # nothing from elsewhere in between:
                self.position = versions[-1] + 1             # this gateway's own write is not read back

    def forget(self, st, floors, deleted) -> None:
        """Remove saved per-subject floors (subjects) and deletes (seqs) from the table."""
        keys = [(_key(st, "f", s), NO_VERSION) for s in floors]
        keys += [(_key(st, "d", q), NO_VERSION) for q in deleted]
        for i in range(0, len(keys), TABLE_BATCH):
            self.broker.tables.remove(TABLE, keys[i:i + TABLE_BATCH])

    def drop(self, st) -> None:
        """The stream is deleted: forget everything saved for it."""
        tables = getattr(self.broker, "tables", None)
        if tables is None or not (st.floors or st.deleted) or not tables.exists(TABLE):
            return
        self.forget(st, st.floors, st.deleted)

    def read(self, limit: int) -> bool:
        """Queue in ``todo`` up to ``limit`` entries written since :attr:`position`
        (other gateways' floors and deletes, in version order); False when none was."""
        tables = getattr(self.broker, "tables", None)
        if tables is None or not tables.exists(TABLE):
            self.more = False
            return False
        self.more = False                            # a failed read is retried at the next write from elsewhere
        page, self.position, end = tables.delta(TABLE, self.position, limit)
        self.more = not end
        for key, value, _version in page:
            parts = key.decode("utf-8", "replace").split("\x1f", 2)
            if len(parts) == 3:                      # (what save() writes; anything else is skipped)
                self.todo.append((parts[0], parts[1], parts[2], value))
        return bool(page)

    @property
    def behind(self) -> bool:
        """Entries read and not applied yet, or left in the table by the last read."""
        return bool(self.todo) or self.more

    def released(self, st, seqs: list[int]) -> None:
        """Seqs retention removed: saved on the next :meth:`take` by the consumers' save."""
        self.unsaved.setdefault(st.name, []).extend(seqs)

    def take(self) -> dict[str, list[int]]:
        """The unsaved seqs by stream name, and none left unsaved."""
        unsaved, self.unsaved = self.unsaved, {}
        return unsaved


def _key(st, kind: str, rest) -> bytes:
    """A key of :data:`TABLE`: ``<stream> US f US <subject>`` (a floor) or ``... d ... <seq>`` (a delete)."""
    return f"{st.name}\x1f{kind}\x1f{rest}".encode()


__all__ = ["TABLE", "RemovedRecords"]
