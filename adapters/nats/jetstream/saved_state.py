"""A JetStream stream's derived state saved across restarts (no trio).

Theory of operation
-------------------
Some per-stream answers are functions of every stored record: the
per-subject counts behind ``num_subjects`` and the subject lookups
(``index.SubjectCounts``), the subject index of a stream that needs one
(``index.SubjectIndex``: KV buckets, interest and work-queue streams; its
saved form is ``saved_index``'s), and the ``Nats-Msg-Id`` window
(``dedup.DedupWindow``). Rebuilt from the log after a start, they cost a
read of the whole stream (issue 30: 5.2 s for the first STREAM.INFO of a
620,000-message stream, on the event loop). nats-server writes its stream
state to ``index.db`` when it stops and reads the blocks written after it
on the next start (server/filestore.go, ``writeFullState`` and
``recoverFullState``); Ferry does the same with one document per stream in
the broker's key-value tables (``broker.tables``, table :data:`TABLE`),
written at shutdown (:meth:`SavedState.stop_steps`) and checkpointed while
serving (:meth:`SavedState.due`, from the driver's warm-up task), both built
in short steps and written in a worker thread, so a start after a
``kill -9`` reads only what was stored after the last checkpoint.

The document says up to which sequence it holds (``to``) and the id of
that record. It is used only when the log still holds that record with
that id and the stream is the same topic, so a log cut by a crash, a
deleted and re-created stream or a purged topic never revives stale
state; anything stored after ``to`` is read the usual way. A document too
big for :data:`MAX_STATE_BYTES` is not saved (the state is rebuilt then).
"""

from __future__ import annotations

import json
import math
import time
from typing import Iterator

from core.kvtables import MAX_VALUE_BYTES, NO_VERSION

from . import saved_index
from .dedup import DedupWindow, refill
from .index import SubjectCounts, needs_index
from .warmup import STATE, cold

TABLE = "nats.jetstream.state"
# One table value holds at most MAX_VALUE_BYTES (Pravega's 1 MiB entry limit,
# core/kvtables.py), so a document is split into parts. 32 MiB is a stream with
# about 500,000 distinct subjects plus a full msg-id window: past that, rebuilding
# from the log after a restart is the cheaper evil than a metadata file that big.
PART_BYTES = MAX_VALUE_BYTES
MAX_STATE_BYTES = 32 * PART_BYTES
# Checkpoints while serving: after a kill -9 a start reads only what was stored
# after the last one. nats-server also rewrites its full stream state while it
# runs (filestore.go's flush loop calls ``writeFullState`` every 2 minutes plus
# up to 30 s of jitter) and after a crash reads the blocks past it; a Python
# read of the tail costs more than Go's, so here a stream is saved again once
# this many records were appended since its last save (16 warm-up slices to
# read back after a kill -9, about 0.2 s here) ...
CHECKPOINT_RECORDS = 16 * 1024
# ... or, with fewer appended, once this long has passed (a document with a
# full msg-id window is ~5 MB: not written more often than this for a trickle).
CHECKPOINT_S = 10.0
# Entries (ids, subjects) a checkpoint encodes per step between other tasks, and
# msg ids a restore decodes per step: 100,000 ids took ~110 ms to copy and encode
# at once here (issue 30's limit for the loop is 100 ms), so 2,500 cost about what
# one step of the log refill costs (dedup.REFILL_YIELD records, ~2.5 ms).
CHECKPOINT_CHUNK = 2_500
# The document's layout: 2 is a JSON head line and one line per chunk (snapshot);
# a document without the "v" key is the first layout, one JSON text (still read).
LAYOUT = 2


class SavedState:
    """Saved stream state documents in one broker's tables (a broker without
    tables saves nothing). ``st`` below is a ``streams.JsStream``."""

    def __init__(self, broker) -> None:
        self.broker = broker
        # stream name -> (seq its saved document holds up to, monotonic s of that save)
        self.marks: dict[str, tuple[int, float]] = {}

    # -- what a document holds --------------------------------------------------------
    def restore(self, streams, st) -> None:
        """Give ``st`` the counts and msg-id window saved for it, if the document
        still describes its log (the theory above); ``streams`` is the JetStreams."""
        doc = self.load(st.name)
        if doc is None or doc.get("topic") != st.topic_id:
            return
        to, last = doc.get("to"), streams.last_seq(st)
        view = streams._raw(st, to) if isinstance(to, int) and 0 < to <= last else None
        if view is None or f"{view.id:032x}" != doc.get("id"):
            return
        try:
            counts = SubjectCounts.from_json(doc["counts"]) if doc.get("counts") else None
            chunks = doc.get("dedup")
            if chunks is not None and not (isinstance(chunks, list)
                                           and all(isinstance(c, (str, bytes)) for c in chunks)):
                raise ValueError("bad saved msg-id window")
        except (KeyError, TypeError, ValueError):
            return
        self.marks[st.name] = (to, time.monotonic())
        if counts is not None and st.counts is None:
            st.counts = counts
        part = doc.get("index")
        if part is not None and saved_index.matches(part, st.config) and st.index is None \
                and st.building is None and needs_index(st.config, st.floors, st.deleted):
            st.loading = self._load_index(st, part, to)     # decoded in steps by the warm-up (or a call)
        if chunks is not None and st.dedup is None:     # decoded in steps by the warm-up (or a publish)
            st.refill = self._refill(streams, st, chunks, to)

    def _refill(self, streams, st, chunks: list[str], to: int) -> Iterator[None]:
        """The saved msg ids back into a window, one chunk per step (yields
        between, as ``dedup.refill`` does per 256 records read), then the ids
        stored after ``to`` from the log; sets ``st.dedup`` at the end."""
        window = DedupWindow()
        now, mono = time.time_ns(), time.monotonic_ns()
        horizon = now - st.config["duplicate_window"]
        for chunk in chunks:
            yield
            try:
                ids = [(str(m), int(q), int(w)) for m, q, w in json.loads(chunk)]
            except (TypeError, ValueError):
                yield from refill(streams, st)             # a damaged document: the log's window instead
                return
            for msg_id, seq, wall in ids:                  # wall clock ns saved, monotonic in memory
                if wall >= horizon:                        # what the restart's pause took out of the window
                    window.refill(msg_id, seq, mono - (now - wall))
        if to < streams.last_seq(st):                      # stored after the save: read those too
            yield from refill(streams, st, after=to, window=window)
        else:
            st.dedup, st.refill = window, None

    def _load_index(self, st, part: dict, to: int) -> Iterator[None]:
        """The saved subject index decoded a step at a time
        (``saved_index.decode``); at the end it is ``st.building``, which the
        warm-up catches up from ``to`` and puts in use. A damaged part is
        dropped: the index is built from the log instead."""
        try:
            for idx in saved_index.decode(part, to, st.floors, st.deleted):
                if idx is None:
                    yield
                elif st.index is None and st.building is None:
                    st.building = idx
        except (KeyError, TypeError, ValueError):
            pass
        st.loading = None

    def save_stream(self, streams, st) -> None:
        """Save ``st``'s counts or index (caught up with the log first) and msg-id
        window, when it has any, built in one go (``JetStreams.save_state``; the
        driver's stop runs :meth:`stop_steps` instead)."""
        data = None
        for data in self.snapshot(streams, st):
            pass
        if data:
            self.write(st.name, data)

    def stop_steps(self, streams) -> Iterator[tuple[str, bytes] | None]:
        """The save at a clean stop in steps (the driver's timers task runs them,
        other tasks between two, and writes each document off the loop): None
        between two steps, ``(name, bytes)`` for each stream's document
        (:meth:`snapshot`). Built in one go, a stop with a 100,000-key index held
        the loop 0.83-2.3 s here (issue 30)."""
        for st in list(streams.streams.values()):
            if streams.streams.get(st.name) is not st:
                continue                               # deleted while an earlier one was encoded
            data = None
            for data in self.snapshot(streams, st):
                if data is None:
                    yield None
            if data and streams.streams.get(st.name) is st:
                yield st.name, data
            yield None

    def due(self, streams, now: float) -> list[tuple[str, Iterator[bytes | None]]]:
        """The checkpoints to write now (monotonic ``now`` in seconds): ``(name,
        steps)`` (:meth:`snapshot`) for each stream with :data:`CHECKPOINT_RECORDS`
        appended since its last save, or any appended and :data:`CHECKPOINT_S`
        passed, whose state the warm-up has caught up (``warmup.cold``: taking
        it costs at most a slice). The caller runs the steps between other
        tasks and writes the bytes (:meth:`write`, off the loop)."""
        out = []
        for st in list(streams.streams.values()):
            if not st.restored or st.counts is None and st.dedup is None and st.index is None:
                continue
            last = streams.last_seq(st)
            to, at = self.marks.get(st.name, (0, -math.inf))
            unsaved = last - to if last >= to else last   # a smaller last: a new stream of that name
            if not unsaved or unsaved < CHECKPOINT_RECORDS and now - at < CHECKPOINT_S:
                continue
            if cold(streams, st, STATE) or st.dedup is None and st.refill is not None:
                continue                               # the warm-up has not caught up yet
            self.marks[st.name] = (last, now)          # also when nothing is saved: retried after CHECKPOINT_S
            out.append((st.name, self.snapshot(streams, st)))
        return out

    def snapshot(self, streams, st) -> Iterator[bytes | None]:
        """``st``'s document (its counts caught up with the log, the ids inside
        the window), built in steps of :data:`CHECKPOINT_CHUNK` entries: yields
        None between two steps, then the bytes (nothing when there is nothing
        to save). The state is copied in the first step (C copies), so what a
        later step encodes is the state at ``to``. Layout (:data:`LAYOUT`): a
        JSON head line, then one line per chunk of the index and of the msg-id
        window, so a start parses the head alone and each chunk in its own step
        (:meth:`load`)."""
        last = streams.last_seq(st)
        view = streams._raw(st, last) if last else None
        if view is None or (st.counts is None and st.dedup is None and st.index is None):
            return
        # "v" first: how load() tells this layout (_LAYOUT_HEAD)
        head = {"v": LAYOUT, "topic": st.topic_id, "to": last, "id": f"{view.id:032x}"}
        subjects = ids = index = None
        if st.index is not None:                       # caught up (at most WARM_TAIL records: due())
            streams.index(st)
            if st.index is not None and st.index.to == last:
                index = saved_index.encode_parts(st.index)   # copies the index in its first step
        if st.counts is not None and st.index is None:
            counts = streams.subject_counts(st, streams.first_seq(st), last)
            if counts.to == last:
                start, names, numbers = counts.start, list(counts.subjects), list(counts.subjects.values())
                firsts, lasts = counts.first.copy(), counts.last.copy()
                subjects = True
        if st.dedup is not None:
            # The ids only, in one C pass: their (seq, time) are looked up a chunk per
            # step below. Copying keys and values (two passes over the OrderedDict, ~25 ms
            # per 100,000 ids here, issue 30) or walking it in place (no positional
            # access: each step skips over the ids before it) cost more in one step.
            window, ids = st.dedup.ids, list(st.dedup.ids)
            now, mono = time.time_ns(), time.monotonic_ns()
            horizon = mono - st.config["duplicate_window"]  # only the ids still inside the window
        self.marks[st.name] = (last, time.monotonic())
        lines: list[bytes] = []                        # after the head, in the order the head counts them
        if index is not None:                          # nothing when over its limit
            parts = None
            for parts in index:
                if parts is None:
                    yield None
            if parts is not None:
                meta, texts, pairs = parts
                head["index"] = dict(meta, seqs=len(texts), expiry=len(pairs))
                lines += texts
                lines += pairs
        encoded = _dumps(head)[:-1]
        if subjects is not None:                       # SubjectCounts.to_json's shape, in the head
            chunks = []
            for i in range(0, len(names), CHECKPOINT_CHUNK):
                yield None
                part = zip(names[i:i + CHECKPOINT_CHUNK], numbers[i:i + CHECKPOINT_CHUNK])
                chunks.append(_dumps({s: [n, max(firsts[s], start), lasts[s]] for s, n in part})[1:-1])
            encoded += b',"counts":{"start":%d,"to":%d,"subjects":{%s}}' % (
                start, last, b",".join(c for c in chunks if c))
        if ids is not None:                            # one line per chunk: restored a chunk per step
            n = 0
            get = window.get
            for i in range(0, len(ids), CHECKPOINT_CHUNK):
                yield None
                # an id gone since (evicted) left the window anyway; one stored again
                # after `last` (a new seq) is read back from the log by the restore
                part = [(m, v) for m in ids[i:i + CHECKPOINT_CHUNK] if (v := get(m)) is not None and v[0] <= last]
                chunk = [[m, q, now - (mono - at)] for m, (q, at) in part if at >= horizon]
                if chunk:
                    lines.append(_dumps(chunk))
                    n += 1
            encoded += b',"dedup":%d' % n
        yield b"\n".join([encoded + b"}"] + lines)

    # -- the table ------------------------------------------------------------------------
    def load(self, name: str) -> dict | None:
        """The document saved for stream ``name``, or None (none, or unreadable).
        Only its head is parsed here: the index's and the msg-id window's
        chunks come back as lists of JSON texts (bytes), which the restore
        decodes one per step (a 100,000-key bucket's document parsed at once
        held the loop 35-161 ms here, issue 30). A document of the first
        layout (one JSON text, the chunks as JSON strings) is read as before."""
        tables = getattr(self.broker, "tables", None)
        if tables is None or not tables.exists(TABLE):
            return None
        head = tables.get(TABLE, [name.encode()])[0]
        if head is None:
            return None
        try:
            parts = int(head[1])
            values = tables.get(TABLE, [_part(name, i) for i in range(parts)]) if 0 < parts <= _MAX_PARTS else [None]
            if any(v is None for v in values):
                return None
            data = b"".join(v[1] for v in values)
            if data.startswith(_LAYOUT_HEAD):          # a head (and maybe no chunk line after it)
                return _split(data)
            doc = json.loads(data)                     # the first layout: one JSON text
            return doc if isinstance(doc, dict) else None
        except (ValueError, TypeError, KeyError):
            return None

    def save(self, name: str, doc: dict) -> bool:
        """Save (replace) stream ``name``'s document (as :meth:`load` returns it),
        in the first layout; False when it is over :data:`MAX_STATE_BYTES`
        (nothing is kept for it then)."""
        def text(value):
            return value.decode() if isinstance(value, bytes) else value
        doc = dict(doc)
        doc.pop("v", None)
        if isinstance(doc.get("index"), dict):
            doc["index"] = {k: [text(t) for t in v] if k in ("seqs", "expiry") else v
                            for k, v in doc["index"].items()}
        if isinstance(doc.get("dedup"), list):
            doc["dedup"] = [text(t) for t in doc["dedup"]]
        return self.write(name, _dumps(doc))

    def write(self, name: str, data: bytes) -> bool:
        """:meth:`save` for a document already encoded (:meth:`snapshot`); safe in
        a worker thread (the tables' own lock guards their database)."""
        tables = getattr(self.broker, "tables", None)
        if tables is None:
            return False
        if len(data) > MAX_STATE_BYTES:
            self.drop(name)
            return False
        tables.create(TABLE)
        parts = [data[i:i + PART_BYTES] for i in range(0, len(data), PART_BYTES)] or [b""]
        old = self._parts(name)
        entries = [(_part(name, i), part, NO_VERSION) for i, part in enumerate(parts)]
        for i in range(0, len(entries), 16):          # 16 MiB per transaction (MAX_BATCH_BYTES is 32)
            tables.update(TABLE, entries[i:i + 16])
        tables.update(TABLE, [(name.encode(), str(len(parts)).encode(), NO_VERSION)])
        if old > len(parts):
            tables.remove(TABLE, [(_part(name, i), NO_VERSION) for i in range(len(parts), old)])
        return True

    def drop(self, name: str) -> None:
        """Forget stream ``name``'s document (the stream is deleted)."""
        tables = getattr(self.broker, "tables", None)
        old = self._parts(name)
        if tables is None or not old:
            return
        tables.remove(TABLE, [(name.encode(), NO_VERSION)] + [(_part(name, i), NO_VERSION) for i in range(old)])

    def _parts(self, name: str) -> int:
        tables = getattr(self.broker, "tables", None)
        if tables is None or not tables.exists(TABLE):
            return 0
        head = tables.get(TABLE, [name.encode()])[0]
        try:
            return int(head[1]) if head is not None else 0
        except ValueError:
            return 0


_MAX_PARTS = MAX_STATE_BYTES // PART_BYTES
_LAYOUT_HEAD = b'{"v":%d,' % LAYOUT       # how a document of LAYOUT starts (the first layout: '{"topic":')


def _split(data: bytes) -> dict:
    """A document of :data:`LAYOUT` 2: its head parsed, the lines after it
    handed out as the chunk lists the head counts (not parsed: one per
    restore step). Raises ValueError (or TypeError, KeyError) when the
    lines do not match the head."""
    lines = data.split(b"\n")                   # a C split: ~1 ms for a 100,000-key bucket's document
    doc = json.loads(lines[0])
    if not isinstance(doc, dict) or doc.get("v") != LAYOUT:
        raise ValueError("unknown saved state layout")
    at = 1

    def take(n) -> list[bytes]:
        nonlocal at
        if type(n) is not int or n < 0 or at + n > len(lines):
            raise ValueError("saved state lines do not match their head")
        at += n
        return lines[at - n:at]
    index = doc.get("index")
    if index is not None:
        index["seqs"] = take(index["seqs"])
        index["expiry"] = take(index["expiry"])
    if "dedup" in doc:
        doc["dedup"] = take(doc["dedup"])
    if at != len(lines):
        raise ValueError("saved state lines do not match their head")
    return doc


def _dumps(doc) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _part(name: str, i: int) -> bytes:
    return f"{name}\x1f{i}".encode()


__all__ = ["CHECKPOINT_CHUNK", "CHECKPOINT_RECORDS", "CHECKPOINT_S", "LAYOUT", "MAX_STATE_BYTES", "TABLE", "SavedState"]
