"""Incremental fetch sessions (KIP-227), sans-I/O: one cache per listener.

Theory of operation
-------------------
A consumer that fetches many partitions sends all of them, with their
offsets, in every Fetch, and gets all of them back, most with nothing new.
KIP-227 lets the broker remember the set: a Fetch of v7+ with session epoch 0
asks for a *full* fetch that also opens a session; the answer carries its id.
The client's later Fetches name the session and the next epoch (1, 2, ...)
and list only the partitions whose fetch offset or byte limit changed, plus
the partitions to drop (``forgotten_topics_data``); the answer lists only the
partitions with something to say: records, an error, or a high watermark,
last stable offset or log start offset that moved since the session last
reported it. Epoch -1 fetches without a session (and closes the one named).
kafka-python uses sessions whenever the broker answers with an id; librdkafka,
aiokafka and kafkajs send session id 0 and epoch -1 and get full answers.

The rules are Kafka's ``FetchManager.newContext`` and
``CachedPartition.maybeUpdateResponseData`` (kafka.server.FetchSession):

* epoch -1: close the named session, full answer with session id 0;
* epoch 0: close the named session, full answer; a new session is opened when
  the cache has a slot (else id 0: the client goes on without one);
* epoch > 0: an unknown id answers FETCH_SESSION_ID_NOT_FOUND, a wrong epoch
  INVALID_FETCH_SESSION_EPOCH (top-level errors; the client then starts a
  full fetch); otherwise the listed partitions are added or updated, the
  forgotten ones removed, and the expected epoch moves on.

A session is this gateway's memory: over several gateways (docs/scale-out.md)
a client that reconnects elsewhere gets FETCH_SESSION_ID_NOT_FOUND and starts
again with a full fetch, as after a Kafka broker restart. A session belongs to
the connection that opened it and ends with it (Kafka keeps sessions across
connections; here another connection naming it gets FETCH_SESSION_ID_NOT_FOUND
and starts again, which bounds the cache by live connections and keeps one
user's session from another), and every partition it holds is authorized again
at every fetch (adapters/kafka/dataplane.py).

Bounds: :data:`MAX_FETCH_SESSIONS` sessions per listener; when full, a new
session takes the slot of the least recently used one idle for
:data:`EVICTION_IDLE_MS`, or is not opened. A session holds at most
:data:`MAX_SESSION_PARTITIONS` partitions: a full fetch over more gets no
session, an incremental one that would grow past it closes the session and
answers FETCH_SESSION_ID_NOT_FOUND.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from .errors import ErrorCode as E

# Kafka's max.incremental.fetch.session.cache.slots default (KafkaConfig).
MAX_FETCH_SESSIONS = 1000
# Kafka's min.incremental.fetch.session.eviction.ms default: a session idle this
# long may lose its slot to a new one when the cache is full.
EVICTION_IDLE_MS = 120_000
# Partitions one session remembers: each costs a few hundred bytes here, so the
# cache stays under a few GiB worst case only if this is bounded too; a consumer
# with more partitions than this fetches without a session (full fetches).
MAX_SESSION_PARTITIONS = 10_000
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
UNKNOWN = -1  # a high watermark / offset the session has not reported yet


@dataclass(slots=True)
class Wanted:
    """A partition a fetch reads: what the request (or the session) says about it, and
    what the session last reported of it (UNKNOWN before its first answer)."""

    partition: int
    fetch_offset: int
    partition_max_bytes: int
    hwm: int = UNKNOWN
    lso: int = UNKNOWN
    start: int = UNKNOWN


@dataclass(eq=False)
class Session:
    id: int
    owner: object  # the connection that opened it (its DataPlane)
    epoch: int = 1  # the epoch the next incremental fetch must carry
    last_used_ms: int = 0
    # topic -> partition -> Wanted, in the order the partitions were added
    topics: dict = field(default_factory=dict)

    def size(self) -> int:
        return sum(len(parts) for parts in self.topics.values())


@dataclass(slots=True)
class FetchPlan:
    """What one Fetch request reads, decided once (a long poll re-reads the same plan).
    ``topics`` is ``[(topic, [Wanted, ...]), ...]``; ``session`` is the session the answer
    updates (None: no session); ``incremental``: answer only partitions with news;
    ``error``: a top-level error code (no partition is read)."""

    topics: list
    session: Session | None = None
    incremental: bool = False
    error: int = 0
    _served: list = field(default_factory=list)

    @property
    def session_id(self) -> int:
        return 0 if self.session is None or self.error else self.session.id

    def report(self, topic: str, wanted: Wanted, fields: dict) -> bool:
        """Whether a partition's answer goes into the response (always, unless incremental),
        remembering what the session reported: Kafka's ``maybeUpdateResponseData``."""
        hwm, lso, start = (fields.get("high_watermark", -1), fields.get("last_stable_offset", -1),
                           fields.get("log_start_offset", -1))
        news = (not self.incremental or fields.get("error_code") or fields.get("records")
                or (hwm, lso, start) != (wanted.hwm, wanted.lso, wanted.start))
        if self.session is not None:
            if fields.get("error_code"):  # reported again until it clears, as Kafka does
                wanted.hwm = wanted.lso = wanted.start = UNKNOWN
            else:
                wanted.hwm, wanted.lso, wanted.start = hwm, lso, start
            if fields.get("records"):
                self._served.append((topic, wanted.partition))
        return bool(news)

    def done(self) -> None:
        """The answer is made: partitions that returned records move to the end of the
        session's order, so a response byte limit does not starve the later ones (Kafka's
        ``IncrementalFetchContext`` moves them the same way)."""
        if self.session is None:
            return
        topics = self.session.topics
        for topic, index in self._served:
            parts = topics.get(topic)
            if parts is not None and index in parts:
                parts[index] = parts.pop(index)
                topics[topic] = topics.pop(topic)
        self._served.clear()


class FetchSessions:
    """The listener's fetch-session cache (module docstring)."""

    def __init__(self, *, max_sessions: int = MAX_FETCH_SESSIONS, idle_ms: int = EVICTION_IDLE_MS,
                 max_partitions: int = MAX_SESSION_PARTITIONS) -> None:
        self.max_sessions = max_sessions
        self.idle_ms = idle_ms
        self.max_partitions = max_partitions
        self._sessions: OrderedDict[int, Session] = OrderedDict()  # least recently used first
        self._next_id = 1

    def __len__(self) -> int:
        return len(self._sessions)

    def plan(self, version: int, body, owner, now_ms: int) -> FetchPlan:
        """The plan of one Fetch request (module docstring)."""
        if version < 7:
            return FetchPlan(_requested(body))
        sid, epoch = body.session_id, body.session_epoch
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH) or epoch < FINAL_EPOCH:
            if sid:
                self._close(sid, owner)
            topics = _requested(body)
            if epoch != INITIAL_EPOCH:
                return FetchPlan(topics)
            session = self._open(owner, topics, now_ms)
            return FetchPlan(topics, session)
        session = self._sessions.get(sid)
        if session is None or session.owner != owner:
            return FetchPlan([], error=int(E.FETCH_SESSION_ID_NOT_FOUND))
        if epoch != session.epoch:
            return FetchPlan([], error=int(E.INVALID_FETCH_SESSION_EPOCH))
        self._update(session, body)
        if session.size() > self.max_partitions:
            del self._sessions[sid]
            return FetchPlan([], error=int(E.FETCH_SESSION_ID_NOT_FOUND))
        session.epoch = _next_epoch(epoch)
        session.last_used_ms = now_ms
        self._sessions.move_to_end(sid)
        return FetchPlan([(t, list(parts.values())) for t, parts in session.topics.items()], session,
                         incremental=True)

    def forget(self, owner) -> None:
        """Drop the sessions of a connection that closed."""
        for sid in [sid for sid, s in self._sessions.items() if s.owner == owner]:
            del self._sessions[sid]

    # -- internals --------------------------------------------------------------------------
    def _close(self, sid: int, owner) -> None:
        session = self._sessions.get(sid)
        if session is not None and session.owner == owner:
            del self._sessions[sid]

    def _open(self, owner, topics: list, now_ms: int) -> Session | None:
        if sum(len(parts) for _, parts in topics) > self.max_partitions:
            return None
        if len(self._sessions) >= self.max_sessions:
            oldest_id, oldest = next(iter(self._sessions.items()))
            if now_ms - oldest.last_used_ms < self.idle_ms:
                return None  # every slot in use: fetch without a session, as Kafka does
            del self._sessions[oldest_id]
        sid = self._take_id()
        session = Session(sid, owner, last_used_ms=now_ms)
        for topic, parts in topics:
            session.topics.setdefault(topic, {}).update((w.partition, w) for w in parts)
        self._sessions[sid] = session
        return session

    def _take_id(self) -> int:
        """A positive 31-bit id not in use (0 means no session, -1 is Kafka's throttled id)."""
        while True:
            sid = self._next_id
            self._next_id = sid + 1 if sid < 0x7FFFFFFF else 1
            if sid not in self._sessions:
                return sid

    @staticmethod
    def _update(session: Session, body) -> None:
        for t in body.topics:
            parts = session.topics.setdefault(t.topic, {})
            for p in t.partitions:
                old = parts.get(p.partition)
                if old is None:
                    parts[p.partition] = Wanted(p.partition, p.fetch_offset, p.partition_max_bytes)
                else:
                    old.fetch_offset, old.partition_max_bytes = p.fetch_offset, p.partition_max_bytes
        for f in body.forgotten_topics_data:
            parts = session.topics.get(f.topic)
            if parts is None:
                continue
            for index in f.partitions:
                parts.pop(index, None)
            if not parts:
                del session.topics[f.topic]


def _requested(body) -> list:
    """The request's own partitions as ``[(topic, [Wanted, ...])]``; a partition named twice
    keeps its last entry, as the session's map does."""
    out: dict[str, dict[int, Wanted]] = {}
    for t in body.topics:
        parts = out.setdefault(t.topic, {})
        for p in t.partitions:
            parts[p.partition] = Wanted(p.partition, p.fetch_offset, p.partition_max_bytes)
    return [(t, list(parts.values())) for t, parts in out.items()]


def _next_epoch(epoch: int) -> int:
    """Kafka's ``JFetchMetadata.nextEpoch``: 1 follows the largest int32."""
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1


__all__ = ["EVICTION_IDLE_MS", "FetchPlan", "FetchSessions", "MAX_FETCH_SESSIONS", "MAX_SESSION_PARTITIONS",
           "Session", "Wanted"]
