"""JetStream streams on Ferry's log: the mapping onto the broker (no trio).

Theory of operation
-------------------
A JetStream stream ``NAME`` is the Ferry topic ``NAME`` of the Ferry stream
:data:`JS_STREAM` (created on first use), with one partition so sequences
are ordered: stream sequence = offset + 1. Its normalised config lives in
the topic attribute :data:`CONFIG_ATTR` (JSON, with ``created``), and a
purge floor in :data:`FLOOR_ATTR`: a purge never rewrites the log (offsets,
hence sequences, keep counting as nats-server's do), it raises the first
visible sequence and drops the whole segments below it. ``max_msgs`` and
``max_age`` move the first visible sequence the same way, computed on
demand; ``max_age``/``max_bytes`` also become the topic's ``message_expiry``
/ ``max_topic_size``, so Ferry's retention reclaims the space.

:class:`JetStreams` keeps the per-broker index (name -> :class:`JsStream`,
subject patterns -> name) rebuilt from the attributes by :meth:`load`, and
answers the questions the API (``jetstream.api``) and the publish path
(``session``) ask. Nats-Msg-Id de-duplication is a bounded in-memory window
per stream (``dedup.DedupWindow``), refilled from the log's last
``duplicate_window`` of messages the first time a stream is published to
after a start. Saved removals (filtered purges, deletes, what retention
removed) go through ``removed.RemovedRecords``.

Long streams (issue 30): state that is a function of every record (the
per-subject counts, the msg-id window) is saved at shutdown and checkpointed
while serving (:meth:`JetStreams.save_state`, ``saved_state.SavedState``),
restored on first need, so a restart reads only what was stored after the
save; whatever is still cold (and a subject index) is caught up by
:meth:`JetStreams.warm_step` in bounded slices between other work. A NATS
request that needs state not caught up yet waits, parked, while its own
slices run (``warmup.request_need``); the answer stays exact.
"""

from __future__ import annotations

import base64
import json
import struct
import time
from bisect import bisect_left
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

from core.addressing import SUBJECT_HEADER
from core.errors import NotFound
from core.record import RECORD_HEADER_SIZE
from core.model import TopicSettings
from core.subjects import is_literal, subject_matches

from .config import check_update, go_time, parse_go_time, same_config, subjects_overlap
from .dedup import DedupWindow, refill
from .errors import JsApiError
from .fields import MSG_ID_HEADER, header_str, index_headers, msg_id_of
from .index import SubjectCounts, SubjectIndex, needs_index
from .removed import RemovedRecords
from .saved_state import SavedState
from .warmup import warm_step
from ..translate import canonical_to_nats, stored_subject

JS_STREAM = "jetstream"                 # the Ferry stream holding every JetStream stream
CONFIG_ATTR = "nats.js.config"
FLOOR_ATTR = "nats.js.first_seq"
_SUBJECT_KEY = SUBJECT_HEADER.encode()
# A stored record's u32 headers length and u32 payload length, at byte 48 of its
# 64-byte header (core/record.py RECORD_HEADER: six u64 fields come first).
_LENGTHS = struct.Struct("<II")
_LENGTHS_AT = 48
# Records read per step when scanning the log (subject lookups, index and count catch-up),
SCAN_CHUNK = 256
SCAN_BYTES = 1 << 20          # ... and at most this many bytes of them (at least one record)
READ_AHEAD_BYTES = 256 * 1024     # a consumer's read-ahead of records it has not handed out yet
SUBJECT_CACHE_MAX = 10_000
# Saved deletes past which those below the first live message fold into the purge floor.
COMPACT_DELETES = 256


@dataclass(eq=False)
class JsStream:
    """One JetStream stream: its config and in-memory publish state."""

    name: str
    config: dict[str, Any]
    created: str
    topic_id: int
    floor: int = 0                                   # purge floor: first visible seq
    dedup: DedupWindow | None = None                 # None until refilled from the log
    floors: dict = field(default_factory=dict)       # subject -> first visible seq (filtered purges), saved
    deleted: set = field(default_factory=set)        # seqs removed by STREAM.MSG.DELETE, saved
    index: SubjectIndex | None = None                # built on first need (jetstream.index)
    counts: SubjectCounts | None = None              # subjects of a stream without index (num_subjects)
    want_index: bool = False                         # a last_per_subject consumer asked for one
    building: SubjectIndex | None = None             # an index warm_step is building, not in use yet
    loading: Iterator | None = None                  # the saved index being decoded (saved_state), then building
    restored: bool = False                           # the saved state was looked at (save_state)
    refill: Iterator | None = None                   # the msg-id window's refill in progress (warm_step)
    part: Any = None                                 # its partition (core Partition), while open


class JetStreams:
    """The JetStream streams of one broker."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.streams: dict[str, JsStream] = {}
        self._subjects: dict[str, str | None] = {}   # published subject -> stream name (cache)
        self.generation = 0
        self.consumer_count: Callable[[str], int] = lambda name: 0   # set by the consumers' registry
        # Interest and work-queue retention: does a consumer still need (seq, subject)? (the registry's)
        self.needed: Callable[[JsStream, int, str], bool] = lambda st, seq, subject: True
        self.removed = RemovedRecords(broker)        # saved floors and deletes, and those acks left unsaved
        self.saved = SavedState(broker)              # counts and msg-id windows saved at shutdown

    # -- start -------------------------------------------------------------------
    def load(self) -> None:
        """Rebuild the index from the topics' attributes (at listener start)."""
        self.streams.clear()
        self._subjects.clear()
        self.generation += 1   # subject -> stream answers may differ now (session route caches)
        try:
            topics = self.broker.list_topics(JS_STREAM)
        except NotFound:
            return
        for topic in topics:
            attrs = self.broker.topic_state.topic_attrs(JS_STREAM, topic.id)
            if CONFIG_ATTR not in attrs:
                continue                             # a topic made by another protocol
            doc = json.loads(attrs[CONFIG_ATTR])
            self.streams[topic.name] = JsStream(topic.name, doc["config"], doc["created"], topic.id,
                                                floor=int(attrs.get(FLOOR_ATTR, "0")))
        self.removed.load(self.streams)

    # -- lookups -----------------------------------------------------------------
    def get(self, name: str) -> JsStream:
        st = self.streams.get(name)
        if st is None:
            raise JsApiError("JSStreamNotFoundErr")
        return st

    def stream_for(self, subject: str) -> JsStream | None:
        """The stream whose subjects match a published subject (cached)."""
        if not self.streams:
            return None
        cache = self._subjects
        try:
            name = cache[subject]
        except KeyError:
            name = next((st.name for st in self.streams.values()
                         if any(subject_matches(p, subject) for p in st.config["subjects"])), None)
            if len(cache) >= SUBJECT_CACHE_MAX:
                cache.clear()
            cache[subject] = name
        return None if name is None else self.streams.get(name)

    def names(self, subject: str | None = None) -> list[str]:
        names = sorted(self.streams)
        if subject:
            names = [n for n in names if any(subjects_overlap(p, subject) for p in self.streams[n].config["subjects"])]
        return names

    # -- stream changes -------------------------------------------------------------
    def create(self, cfg: dict[str, Any]) -> JsStream:
        """Create (or find, when the config is the same) a stream."""
        name = cfg["name"]
        st = self.streams.get(name)
        if st is not None:
            if not same_config(st.config, cfg):
                raise JsApiError("JSStreamNameExistErr")
            return st
        self._check_overlap(name, cfg["subjects"])
        broker = self.broker
        try:
            broker.get_stream(JS_STREAM)
        except NotFound:
            broker.create_stream(JS_STREAM)
        topic = broker.create_topic(JS_STREAM, name, 1, settings=TopicSettings(**_retention(cfg)))
        st = JsStream(name, cfg, go_time(time.time_ns()), topic.id)
        self._save(st)
        self.streams[name] = st
        self._subjects.clear()
        self.generation += 1   # subject -> stream answers may differ now (session route caches)
        return st

    def update(self, cfg: dict[str, Any]) -> JsStream:
        st = self.get(cfg["name"])
        check_update(st.config, cfg)
        self._check_overlap(st.name, cfg["subjects"])
        topic = self.broker.get_topic(JS_STREAM, st.topic_id)
        self.broker.update_topic(JS_STREAM, st.topic_id, settings=replace(topic.settings, **_retention(cfg)))
        st.config = cfg
        st.index = st.building = st.loading = None   # limits may have changed: rebuilt on next need
        self._save(st)
        self._subjects.clear()
        self.generation += 1   # subject -> stream answers may differ now (session route caches)
        return st

    def delete(self, name: str) -> None:
        st = self.get(name)
        self.removed.drop(st)
        self.saved.drop(st.name)
        self.broker.delete_topic(JS_STREAM, st.topic_id)
        del self.streams[name]
        self._subjects.clear()
        self.generation += 1   # subject -> stream answers may differ now (session route caches)

    def purge(self, name: str, request: dict[str, Any]) -> int:
        """Purge all, up to ``seq`` (exclusive) or all but the last ``keep``;
        returns how many messages went."""
        st = self.get(name)
        if st.config["deny_purge"]:
            raise JsApiError("JSStreamPurgeFailedF", err="stream purge not permitted")
        subject = request.get("filter") or ">"
        if subject != ">" or (st.index is not None or needs_index(st.config, st.floors, st.deleted)) \
                and request.get("keep"):
            return self._purge_subject(st, subject, int(request.get("seq") or 0), int(request.get("keep") or 0))
        last, first = self.last_seq(st), self.first_seq(st)
        new_floor = last + 1
        if request.get("seq"):
            new_floor = min(int(request["seq"]), last + 1)
        elif request.get("keep"):
            new_floor = max(last - int(request["keep"]) + 1, first)
        purged = max(0, new_floor - first)
        idx = self.index(st)
        if idx is not None:
            purged = sum(1 for q in idx.live if q < new_floor)
        if new_floor > st.floor:
            st.floor = new_floor
            self.broker.topic_state.set_topic_attrs(JS_STREAM, st.topic_id, {FLOOR_ATTR: str(new_floor)})
            self._drop_segments(st)
        return purged

    def _purge_subject(self, st: JsStream, subject: str, seq: int, keep: int) -> int:
        """nats-server's filtered purge: the oldest matching messages below
        ``seq`` (if given), all but the newest ``keep`` of them (if given).
        Within each subject that is a prefix, so it is saved as per-subject
        floors."""
        idx = self.index(st, force=True)
        # the matching subjects' own seqs, not every live message (issue 30: O(stream) per purge)
        matching = sorted(q for subj, seqs in idx.subjects.items() if subject_matches(subject, subj) for q in seqs)
        if keep:
            matching = matching[:max(len(matching) - keep, 0)]
        if seq:
            matching = [q for q in matching if q < seq]
        floors: dict[str, int] = {}
        for q in matching:
            subj = idx.live[q]
            floors[subj] = max(floors.get(subj, 0), q + 1)
            idx.hide(q)
        if floors:
            for subj, q in floors.items():
                st.floors[subj] = max(st.floors.get(subj, 0), q)
            self.removed.save(st, floors, [])
        return len(matching)

    def delete_msg(self, st: JsStream, seq: int) -> bool:
        """``STREAM.MSG.DELETE``: hide one message, saved; False when it is not there."""
        idx = self.index(st, force=True)
        if seq not in idx.live:
            return False
        idx.hide(seq)
        st.deleted.add(seq)
        self.removed.save(st, {}, [seq])
        return True

    def _check_overlap(self, name: str, subjects: list[str]) -> None:
        for other in self.streams.values():
            if other.name != name and any(subjects_overlap(a, b) for a in subjects for b in other.config["subjects"]):
                raise JsApiError("JSStreamSubjectOverlapErr")

    def _save(self, st: JsStream) -> None:
        doc = json.dumps({"config": st.config, "created": st.created}, separators=(",", ":"))
        self.broker.topic_state.set_topic_attrs(JS_STREAM, st.topic_id, {CONFIG_ATTR: doc})

    def _drop_segments(self, st: JsStream) -> None:
        """Delete the whole sealed segments below the floor (the records after
        them stay on disk, hidden). The broker's logical truncation does exactly
        that, at the floor's byte position (docs/internals.md "Topic state")."""
        part = self._partition(st)
        offset = min(st.floor - 1, part.next_offset)
        if offset > part.first_offset:
            self.broker.topic_state.truncate_partition(JS_STREAM, st.topic_id, 0, part.byte_pos_of(offset))

    # -- state --------------------------------------------------------------------
    def _partition(self, st: JsStream):
        """The stream's partition, kept while it is open: a consumer asks for it
        several times per message, and the broker's lookup reads the topic's
        metadata row each time (a purge keeps the object; a delete closes it)."""
        part = st.part
        if part is None or part.closed:
            part = st.part = self.broker.partition(JS_STREAM, st.topic_id, 0)
        return part

    def last_seq(self, st: JsStream) -> int:
        return self._partition(st).next_offset

    def first_seq(self, st: JsStream) -> int:
        """First visible sequence: purge floor, the log's start, max_msgs,
        max_age, and (indexed streams) the first live one."""
        last = self.last_seq(st)
        first = self._log_start(st)
        max_msgs, max_age = st.config["max_msgs"], st.config["max_age"]
        if max_age > 0 and last:
            first = max(first, self.seq_at_time(st, time.time_ns() - max_age))
        idx = self.index(st, base=first)
        if idx is not None:
            if max_msgs > 0:
                idx.keep_at_most(max_msgs)
            live = idx.first()
            return last + 1 if live is None else live
        if max_msgs > 0:
            first = max(first, last - max_msgs + 1)
        return first

    def index(self, st: JsStream, force: bool = False, base: int = 0) -> SubjectIndex | None:
        """The stream's subject index caught up with the log (built on first
        need), or None for a stream that needs none (every record in
        ``first_seq..last_seq`` is visible). ``base``: the first sequence the
        log still shows (:meth:`first_seq` passes it)."""
        idx = st.index
        if idx is None:
            if not (force or st.want_index or needs_index(st.config, st.floors, st.deleted)):
                return None
            st.want_index = True
            for _ in st.loading or ():               # a saved index half decoded: the rest now
                pass
            idx = st.index = st.building or self._new_index(st)   # one warm_step began: go on from there
            st.building = None
            built = True
        else:
            built = False
        self._index_catch_up(st, idx)
        if built and st.config["retention"] != "limits":
            # acked before a restart, or no interest left: checked in the warm-up's
            # slices (warmup.release_step; calls that read the state wait for them)
            idx.to_release = list(reversed(idx.live))
        if idx.ttls:
            idx.expire(time.time_ns())
        idx.trim_below(base or self._log_start(st))
        return idx

    def _new_index(self, st: JsStream) -> SubjectIndex:
        cfg = st.config
        return SubjectIndex(self._log_start(st), cfg["max_msgs_per_subject"], cfg["allow_rollup_hdrs"],
                            cfg.get("allow_msg_ttl", False), st.floors, st.deleted)

    def _index_catch_up(self, st: JsStream, idx: SubjectIndex, budget: int | None = None) -> bool:
        """Add the records after ``idx.to`` (at most ``budget`` of them); True when caught up."""
        last = self.last_seq(st)
        end = last if budget is None else min(last, idx.to + budget)
        if not (idx.rollups or idx.ttls):                 # the subjects alone: no view per record
            add = idx.add
            for seq, subject in zip(*self._subjects_in(st, idx.to + 1, end)):
                add(seq, subject, 0)
            return idx.to >= last
        for view in self._forwards(st, idx.to + 1, end):
            rollup, ttl = index_headers(view.headers)
            idx.add(view.offset + 1, self.subject_of(st, view), view.timestamp * 1000, rollup, ttl)
        return idx.to >= last

    def _log_start(self, st: JsStream) -> int:
        """The first sequence the log still shows: the purge floor or the log's start."""
        return max(st.floor, self._partition(st).first_offset + 1, 1)

    def seq_at_time(self, st: JsStream, ns: int) -> int:
        """The first sequence stored at or after ``ns`` (ns since the epoch)."""
        return self._partition(st).offset_for_timestamp(ns // 1000) + 1

    def release(self, st: JsStream, seqs) -> None:
        """Interest / work-queue retention: remove those of ``seqs`` no
        consumer needs any more (nats-server's ackMsg and checkInterestState)."""
        idx = st.index
        if idx is None or st.config["retention"] == "limits":
            return
        live, needed = idx.live, self.needed
        gone = [seq for seq in seqs if (subject := live.get(seq)) is not None and not needed(st, seq, subject)]
        for seq in gone:
            idx.hide(seq)
            st.deleted.add(seq)               # saved: a rebuild must not bring it back
        if gone:
            self.removed.released(st, gone)

    def flush_removed(self) -> None:
        """Save the seqs acks released (with the consumers' state, every
        SAVE_INTERVAL), then fold deletes below the first live message into
        the purge floor so the saved set stays small."""
        for name, seqs in self.removed.take().items():
            st = self.streams.get(name)
            if st is not None:
                self.removed.save(st, {}, seqs)
                if len(st.deleted) >= COMPACT_DELETES:
                    self._compact(st)

    def _compact(self, st: JsStream) -> None:
        idx = st.index
        if idx is None:
            return
        first = idx.first()
        first = idx.to + 1 if first is None else first
        below = [q for q in st.deleted if q < first]
        if first <= st.floor or not below:
            return
        st.floor = first
        self.broker.topic_state.set_topic_attrs(JS_STREAM, st.topic_id, {FLOOR_ATTR: str(first)})
        old_floors = [s for s, q in st.floors.items() if q <= first]
        self.removed.forget(st, old_floors, below)
        st.deleted.difference_update(below)
        for subject in old_floors:
            del st.floors[subject]
        self._drop_segments(st)

    def no_interest(self, st: JsStream, seq: int) -> None:
        """Interest retention: a message stored while no consumer's filter
        matched its subject is removed at once (saved, as a delete)."""
        st.deleted.add(seq)
        idx = st.index
        if idx is not None:
            idx.hide(seq)
        self.removed.save(st, {}, [seq])

    def visible(self, st: JsStream, seq: int) -> bool:
        """Whether JetStream still shows ``seq`` (the index as it stands: no catch-up)."""
        idx = st.index
        return idx is None or seq in idx.live or seq > idx.to

    def state(self, st: JsStream) -> dict[str, Any]:
        """nats-server's ``state`` object (``bytes`` are Ferry's stored bytes)."""
        part = self._partition(st)
        last = part.next_offset
        first = self.first_seq(st)
        idx = st.index
        messages = len(idx.live) if idx is not None else max(0, last - first + 1)
        first_view = self.record(st, first) if messages else None
        last_view = self._raw(st, last) if last else None
        if not last and first <= 1:
            first = 0
        out = {"messages": messages, "bytes": part.size_bytes if messages else 0, "first_seq": first,
               "first_ts": go_time(first_view.timestamp * 1000 if first_view else 0), "last_seq": last,
               "last_ts": go_time(last_view.timestamp * 1000 if last_view else 0)}
        if idx is not None:
            if messages and last - first + 1 > messages:
                out["num_deleted"] = last - first + 1 - messages
            subjects = len(idx.subjects)
        else:
            subjects = len(self.subject_counts(st, first, last).subjects) if messages else 0
        if subjects:
            out["num_subjects"] = subjects
        out["consumer_count"] = self.consumer_count(st.name)
        return out

    def subject_counts(self, st: JsStream, first: int, last: int, budget: int | None = None) -> SubjectCounts:
        """The per-subject counts of ``first..last`` of a stream without index
        (with ``budget``: read at most about that many records, the counts may
        stop short of ``last``): kept up to date by reading each record once
        as it arrives and once as it leaves (a rebuild when the records that
        left are gone or many), restored from the saved state after a start."""
        if not st.restored:
            self._restore(st)
        counts = st.counts
        if counts is None or first < counts.start or first - counts.start > counts.to - first:
            counts = st.counts = SubjectCounts(first)
        elif first > counts.start:
            _seqs, gone = self._subjects_in(st, counts.start, first - 1)
            if len(gone) != first - counts.start:
                counts = st.counts = SubjectCounts(first)
            else:
                counts.drop(gone, first)
        while counts.to < last:
            end = last if budget is None else min(last, counts.to + budget)
            seqs, subjects = self._subjects_in(st, counts.to + 1, end)
            counts.add(subjects, end, seqs)
            if budget is not None:
                break
        return counts

    def _subjects_in(self, st: JsStream, first: int, last: int) -> tuple[list[int], list[str]]:
        """The seqs and subjects of the stored records in ``first..last``: what
        :meth:`subject_of` answers, read from the raw records (the header block
        sliced by its length, core/record.py's layout) without building a view
        per record: about half the cost of a rebuild after a start (issue 30)."""
        seqs: list[int] = []
        subjects: list[str] = []
        lengths, body, slow = _LENGTHS.unpack_from, RECORD_HEADER_SIZE, stored_subject
        default = None
        seq = first
        while seq <= last:
            batch = self._partition(st).read(seq - 1, min(SCAN_CHUNK, last - seq + 1), SCAN_BYTES)
            if not batch.count:
                break
            for raw in batch.raw_records():
                hlen, plen = lengths(raw, _LENGTHS_AT)
                subject = header_str(raw[body + plen:body + plen + hlen], _SUBJECT_KEY, slow) if hlen else None
                if subject is None:
                    subject = default = default or self._default_subject(st)
                subjects.append(subject)
            seqs.extend(range(batch.first_offset + 1, batch.next_offset + 1))
            seq = batch.next_offset + 1
        return seqs, subjects

    def stored_bytes(self, st: JsStream) -> int:
        return self._partition(st).size_bytes

    def totals(self) -> tuple[int, int]:
        """(memory, storage) bytes for account info: memory streams count as memory."""
        memory = storage = 0
        for st in self.streams.values():
            size = self._partition(st).size_bytes
            if st.config["storage"] == "memory":
                memory += size
            else:
                storage += size
        return memory, storage

    # -- messages -------------------------------------------------------------------
    def record(self, st: JsStream, seq: int):
        """The visible stored record of ``seq`` (a RecordView), or None."""
        if not self.visible(st, seq):
            return None
        return self._raw(st, seq)

    def _raw(self, st: JsStream, seq: int):
        """The stored record of ``seq``, visible or not, or None."""
        if seq < 1:
            return None
        batch = self._partition(st).read(seq - 1, 1)
        for view in batch.records():
            return view if view.offset == seq - 1 else None
        return None

    def subject_of(self, st: JsStream, view) -> str:
        """The published subject of a record; records from other protocols get
        the stream's first subject (or its name when that is a wildcard)."""
        subject = header_str(view.headers, _SUBJECT_KEY, stored_subject) if len(view.headers) else None
        return self._default_subject(st) if subject is None else subject

    def _default_subject(self, st: JsStream) -> str:
        first = st.config["subjects"][0]
        return first if "*" not in first.split(".") and ">" not in first.split(".") else st.name

    def message_json(self, st: JsStream, view) -> dict[str, Any]:
        """A MSG.GET ``message`` object."""
        out: dict[str, Any] = {"subject": self.subject_of(st, view), "seq": view.offset + 1}
        hdrs = canonical_to_nats(view.headers) if len(view.headers) else b""
        if hdrs:
            out["hdrs"] = base64.b64encode(hdrs).decode()
        if len(view.payload):
            out["data"] = base64.b64encode(bytes(view.payload)).decode()
        out["time"] = go_time(view.timestamp * 1000)
        return out

    def find(self, st: JsStream, seq: int, last: str | None, after: str | None):
        """The record a MSG.GET / DIRECT.GET asks for (last or next on a subject, or by seq), or None."""
        if last:
            return self.last_for_subject(st, last)
        if after:
            return self.next_for_subject(st, after, seq)
        return self.record(st, seq) if seq >= self.first_seq(st) else None

    def last_for_subject(self, st: JsStream, subject: str):
        """The newest visible record whose subject ``subject`` matches (a scan back)."""
        first = self.first_seq(st)
        idx = st.index
        if idx is not None:
            if is_literal(subject):
                seq = idx.last_of(subject)
            else:
                seq = max((seqs[-1] for subj, seqs in idx.subjects.items() if subject_matches(subject, subj)),
                          default=0)
            return self._raw(st, seq) if seq else None
        seq = self.last_matching(st, lambda subj: subject_matches(subject, subj), subject)
        return self._raw(st, seq) if seq >= first else None

    def last_matching(self, st: JsStream, takes: Callable[[str], bool], literal: str | None = None) -> int:
        """The last seq whose subject ``takes`` accepts (``literal``: the one subject
        it accepts, if so), 0 when none: from the per-subject state, no scan."""
        first, last = self.first_seq(st), self.last_seq(st)
        idx = st.index
        if idx is not None:
            if literal is not None and is_literal(literal):
                return idx.last_of(literal)
            return max((seqs[-1] for subj, seqs in idx.subjects.items() if takes(subj)), default=0)
        if last < first:
            return 0
        counts = self.subject_counts(st, first, last)
        if literal is not None and is_literal(literal):
            return counts.last.get(literal, 0)
        return max((q for subj, q in counts.last.items() if takes(subj)), default=0)

    def next_candidate(self, st: JsStream, filters: list[str], seq: int) -> int | None:
        """Where a scan from ``seq`` for the literal subjects ``filters`` can
        start: the lowest seq at or after ``seq`` any of them may have (from
        the index, or the per-subject counts' first and last), None when none
        has one in ``seq..last``; ``seq`` itself when a filter is a wildcard
        (the subjects are not looked through for every step of a consumer)."""
        if not all(is_literal(f) for f in filters):
            return seq
        idx, best = st.index, None
        if idx is None:
            counts = self.subject_counts(st, self.first_seq(st), self.last_seq(st))
        for f in filters:
            if idx is not None:
                seqs = idx.subjects.get(f)
                if not seqs or seqs[-1] < seq:
                    continue
                at = seqs[0] if seqs[0] >= seq else seqs[bisect_left(seqs, seq)]
            else:
                if counts.last.get(f, 0) < seq:
                    continue
                at = max(seq, counts.first[f])
            best = at if best is None else min(best, at)
        return best

    def next_for_subject(self, st: JsStream, subject: str, seq: int):
        """The first visible record at or after ``seq`` whose subject ``subject`` matches."""
        first, last = self.first_seq(st), self.last_seq(st)
        start = max(seq, first)
        if st.index is None and start <= last:
            # Skip what the per-subject state rules out: before the first
            # matching subject's first seq, after the last one's last.
            counts = self.subject_counts(st, first, last)
            spans = [(counts.first[s], q) for s, q in counts.last.items() if subject_matches(subject, s)]
            if not spans or start > max(q for _f, q in spans):
                return None
            start = max(start, min(f for f, _q in spans))
        for view in self._forwards(st, start):
            if self.visible(st, view.offset + 1) and subject_matches(subject, self.subject_of(st, view)):
                return view
        return None

    def _backwards(self, st: JsStream, first: int) -> Iterator:
        end = self.last_seq(st)                      # a seq: offsets below it are read
        while end >= first:
            start = max(first, end - SCAN_CHUNK + 1)
            views = list(self._partition(st).read(start - 1, end - start + 1).records())
            yield from reversed(views)
            end = start - 1

    # -- de-duplication -------------------------------------------------------------
    def dedup_window(self, st: JsStream) -> DedupWindow:
        """The stream's msg-id window, restored or refilled from the log once after a start."""
        if not st.restored:
            self._restore(st)
        if st.dedup is None:
            for _ in st.refill or refill(self, st):  # go on from where warm_step got to
                pass
        return st.dedup

    # -- saved state and warm-up (issue 30) -----------------------------------------------
    def _restore(self, st: JsStream) -> None:
        """Take the state saved at the last shutdown (once per stream and start)."""
        st.restored = True
        self.saved.restore(self, st)

    def warm_step(self, budget: int) -> bool:
        """Catch up about ``budget`` records of cold state (``warmup.warm_step``); True while some remains."""
        return warm_step(self, budget)

    def save_state(self) -> None:
        """Save each stream's counts and msg-id window (at shutdown: the NATS driver's timer task)."""
        for st in list(self.streams.values()):
            self.saved.save_stream(self, st)

    def views(self, st: JsStream, seq: int, count: int = SCAN_CHUNK, max_bytes: int = READ_AHEAD_BYTES) -> list:
        """Up to ``count`` stored records from ``seq`` on (at least one, else at
        most ``max_bytes``), as record views that stay valid once read."""
        return list(self._partition(st).read(seq - 1, count, max_bytes).records())

    def _forwards(self, st: JsStream, first: int, last: int | None = None) -> Iterator:
        """Stored records from ``first`` to ``last`` (default: the stream's last), in order."""
        seq = first
        last = self.last_seq(st) if last is None else last
        while seq <= last:
            views = self.views(st, seq, min(SCAN_CHUNK, last - seq + 1), SCAN_BYTES)
            if not views:
                return
            yield from views
            seq = views[-1].offset + 2

    def duplicate_of(self, st: JsStream, msg_id: str) -> int | None:
        """The seq a msg id was stored at inside the window, else None."""
        window = self.dedup_window(st)
        return window.duplicate_of(msg_id, time.monotonic_ns() - st.config["duplicate_window"])

    def remember(self, st: JsStream, msg_id: str, seq: int) -> None:
        self.dedup_window(st).remember(msg_id, seq, time.monotonic_ns())

    def last_msg_id(self, st: JsStream) -> str:
        view = self._raw(st, self.last_seq(st))
        return (msg_id_of(view.headers) or "") if view is not None else ""


def _retention(cfg: dict[str, Any]) -> dict[str, int]:
    """The ``TopicSettings`` retention fields for a stream config: max_age ns -> µs, max_bytes
    (discard new refuses publishes instead of dropping old messages)."""
    return {"message_expiry": cfg["max_age"] // 1000 if cfg["max_age"] > 0 else 0,
            "max_topic_size": cfg["max_bytes"] if cfg["max_bytes"] > 0 and cfg["discard"] == "old" else 0}


__all__ = ["CONFIG_ATTR", "FLOOR_ATTR", "JS_STREAM", "JetStreams", "JsStream", "MSG_ID_HEADER", "go_time", "msg_id_of",
           "parse_go_time"]
