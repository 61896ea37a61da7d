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
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

from core.errors import NotFound
from core.message import Headers
from core.model import TopicSettings
from core.subjects import is_literal, subject_matches

from .config import NS_PER_S, check_update, same_config, subjects_overlap
from .dedup import DedupWindow
from .errors import JsApiError
from .index import ROLLUP_HEADER, TTL_HEADER, SubjectCounts, SubjectIndex, needs_index, parse_ttl
from .removed import RemovedRecords
from ..translate import canonical_to_nats, stored_subject

JS_STREAM = "jetstream"                 # the Ferry stream holding every JetStream stream
CONFIG_ATTR = "nats.js.config"
FLOOR_ATTR = "nats.js.first_seq"
MSG_ID_HEADER = "Nats-Msg-Id"
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


def go_time(ns: int) -> str:
    """RFC 3339 with nanoseconds, trailing zeros trimmed (Go's RFC3339Nano)."""
    if ns <= 0:
        return "0001-01-01T00:00:00Z"
    secs, frac = divmod(ns, NS_PER_S)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
    return f"{text}.{frac:09d}".rstrip("0").rstrip(".") + "Z"


def parse_go_time(text: str) -> int:
    """RFC 3339 (Go's time.Time JSON) to ns since the epoch."""
    from datetime import datetime
    frac = 0
    base = text.rstrip("Z")
    if "." in base:
        base, digits = base.split(".", 1)
        digits = "".join(ch for ch in digits if ch.isdigit())
        frac = int((digits + "000000000")[:9])
    try:
        dt = datetime.fromisoformat(base + ("+00:00" if text.endswith("Z") else ""))
    except ValueError:
        return 0
    return int(dt.timestamp()) * 1_000_000_000 + frac


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
        st.index = None                              # limits may have changed: rebuilt on next need
        self._save(st)
        self._subjects.clear()
        self.generation += 1   # subject -> stream answers may differ now (session route caches)
        return st

    def delete(self, name: str) -> None:
        st = self.get(name)
        self.removed.drop(st)
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
        matching = [q for q, subj in idx.live.items() if subject_matches(subject, subj)]
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
        return self.broker.partition(JS_STREAM, st.topic_id, 0)

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
            cfg = st.config
            idx = st.index = SubjectIndex(self._log_start(st), cfg["max_msgs_per_subject"], cfg["allow_rollup_hdrs"],
                                          cfg.get("allow_msg_ttl", False), st.floors, st.deleted)
            built = True
        else:
            built = False
        for view in self._forwards(st, idx.to + 1):
            rollup, ttl = _index_headers(view.headers)
            idx.add(view.offset + 1, self.subject_of(st, view), view.timestamp * 1000, rollup, ttl)
        if built and st.config["retention"] != "limits":
            self.release(st, list(idx.live))          # acked before a restart, or no interest left
        if idx.ttls:
            idx.expire(time.time_ns())
        idx.trim_below(base or self._log_start(st))
        return idx

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
            subjects = self._subject_count(st, first, last) if messages else 0
        if subjects:
            out["num_subjects"] = subjects
        out["consumer_count"] = self.consumer_count(st.name)
        return out

    def _subject_count(self, st: JsStream, first: int, last: int) -> int:
        """Distinct subjects in ``first..last`` of a stream without index:
        counts kept up to date by reading each record once as it arrives and
        once as it leaves (a rebuild when the records that left are gone or
        many)."""
        counts = st.counts
        if counts is None or first < counts.start or first - counts.start > counts.to - first:
            counts = st.counts = SubjectCounts(first)
        elif first > counts.start:
            gone = [self.subject_of(st, v) for v in self._forwards(st, counts.start, first - 1)]
            if len(gone) != first - counts.start:
                counts = st.counts = SubjectCounts(first)
            else:
                counts.drop(gone, first)
        if counts.to < last:
            counts.add([self.subject_of(st, v) for v in self._forwards(st, counts.to + 1, last)], last)
        return len(counts.subjects)

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
        batch = self.broker.read(JS_STREAM, st.topic_id, 0, seq - 1, 1)
        for view in batch.records():
            return view if view.offset == seq - 1 else None
        return None

    def subject_of(self, st: JsStream, view) -> str:
        """The published subject of a record; records from other protocols get
        the stream's first subject (or its name when that is a wildcard)."""
        subject = stored_subject(view.headers)
        if subject is None:
            first = st.config["subjects"][0]
            subject = first if "*" not in first.split(".") and ">" not in first.split(".") else st.name
        return subject

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
        for view in self._backwards(st, first):
            if subject_matches(subject, self.subject_of(st, view)):
                return view
        return None

    def next_for_subject(self, st: JsStream, subject: str, seq: int):
        """The first visible record at or after ``seq`` whose subject ``subject`` matches."""
        for view in self._forwards(st, max(seq, self.first_seq(st))):
            if self.visible(st, view.offset + 1) and subject_matches(subject, self.subject_of(st, view)):
                return view
        return None

    def _backwards(self, st: JsStream, first: int) -> Iterator:
        end = self.last_seq(st)                      # a seq: offsets below it are read
        while end >= first:
            start = max(first, end - SCAN_CHUNK + 1)
            views = list(self.broker.read(JS_STREAM, st.topic_id, 0, start - 1, end - start + 1).records())
            yield from reversed(views)
            end = start - 1

    # -- de-duplication -------------------------------------------------------------
    def dedup_window(self, st: JsStream) -> DedupWindow:
        """The stream's msg-id window, refilled from the log once after a start."""
        if st.dedup is None:
            st.dedup = window = DedupWindow()
            start = self.seq_at_time(st, time.time_ns() - st.config["duplicate_window"])
            mono = time.monotonic_ns()
            now = time.time_ns()
            for view in self._forwards(st, max(start, self.first_seq(st))):
                msg_id = msg_id_of(view.headers)
                if msg_id:
                    window.refill(msg_id, view.offset + 1, mono - (now - view.timestamp * 1000))
        return st.dedup

    def views(self, st: JsStream, seq: int, count: int = SCAN_CHUNK, max_bytes: int = READ_AHEAD_BYTES) -> list:
        """Up to ``count`` stored records from ``seq`` on (at least one, else at
        most ``max_bytes``), as record views that stay valid once read."""
        return list(self.broker.read(JS_STREAM, st.topic_id, 0, seq - 1, count, max_bytes).records())

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


def msg_id_of(tlv) -> str | None:
    if not len(tlv):
        return None
    value = Headers.decode(tlv).get(MSG_ID_HEADER)
    return value.as_str() if value is not None else None


def _index_headers(tlv) -> tuple[str | None, int]:
    """A record's ``Nats-Rollup`` value and ``Nats-TTL`` seconds (0: none)."""
    if not len(tlv):
        return None, 0
    headers = Headers.decode(tlv)
    rollup = headers.get(ROLLUP_HEADER)
    ttl = headers.get(TTL_HEADER)
    seconds = 0
    if ttl is not None:
        try:
            seconds = parse_ttl(ttl.as_str())
        except ValueError:
            seconds = 0
    return (rollup.as_str() if rollup is not None else None), seconds


def _retention(cfg: dict[str, Any]) -> dict[str, int]:
    """The ``TopicSettings`` retention fields for a stream config: max_age ns -> µs, max_bytes
    (discard new refuses publishes instead of dropping old messages)."""
    return {"message_expiry": cfg["max_age"] // 1000 if cfg["max_age"] > 0 else 0,
            "max_topic_size": cfg["max_bytes"] if cfg["max_bytes"] > 0 and cfg["discard"] == "old" else 0}


__all__ = ["CONFIG_ATTR", "FLOOR_ATTR", "JS_STREAM", "JetStreams", "JsStream", "MSG_ID_HEADER", "go_time", "msg_id_of",
           "parse_go_time"]
