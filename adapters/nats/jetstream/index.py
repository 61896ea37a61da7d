"""Which stored records a JetStream stream still shows: the per-subject index (no trio, no broker).

Theory of operation
-------------------
Ferry's log is append-only, but JetStream removes single messages: the
oldest of a subject past ``max_msgs_per_subject`` (what KV history is), every
earlier message of a subject or of the stream after a ``Nats-Rollup`` (KV
purge, object store metadata), a message whose ``Nats-TTL`` ran out, a
purge with a subject filter, ``STREAM.MSG.DELETE``, and under ``interest``
or ``workqueue`` retention a message no consumer needs any more. Ferry never
rewrites the log for these; a :class:`SubjectIndex` records which sequences are still
*live* and every JetStream read (consumers, MSG.GET, DIRECT.GET, stream
state) asks it. Other protocols read the log as appended.

Most of the index is a function of the log itself: limits, rollups and TTLs
are recomputed from the stored records (:meth:`SubjectIndex.add`, in order)
whenever the index is rebuilt, so nothing about them needs saving. The
removals a client asks for by API (subject-filtered purges as per-subject
floors, message deletes as sequences), the messages acks removed under
interest and work-queue retention (``JetStreams.release``, saved with the
consumers' state) and those an interest stream took while no consumer
matched their subject (``JetStreams.no_interest``) are saved in the broker's
key-value table by ``removed.RemovedRecords``, and handed to the index as
``floors`` and ``deleted``; deletes below the first live message fold into
the purge floor (``JetStreams.flush_removed``).

Memory (measured with tracemalloc): about 150 bytes per live message (its
dict entry and its entry in its subject's deque), plus about 800 bytes per
subject with several live messages (the deque, its dict entry and the subject
string; a subject with one, a KV key, keeps a 1-tuple instead), for streams that use these features only (:func:`needs_index`);
nats-server keeps a comparable per-subject index in memory. Hidden sequences are reported in a bounded log (:data:`HIDDEN_LOG`)
so consumers can keep their pending counts without recounting.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Iterator

from core.subjects import is_literal, subject_matches

ROLLUP_HEADER = "Nats-Rollup"
TTL_HEADER = "Nats-TTL"
# Hide events kept for consumers to catch up on; one further behind recounts.
HIDDEN_LOG = 4096
NS_PER_S = 1_000_000_000


def parse_ttl(text: str) -> int:
    """nats-server's ``Nats-TTL`` value in seconds: a Go duration of at least
    1s, a whole number of seconds, or ``never`` (-1). Raises ValueError."""
    if text.lower() == "never":
        return -1
    ns = _go_duration_ns(text)
    if ns is not None:
        if ns < NS_PER_S:
            raise ValueError(f"invalid per-message TTL {text!r}")
        return ns // NS_PER_S
    if text and all("0" <= ch <= "9" for ch in text) and len(text) <= 18:
        return int(text)                   # nats-server's parseInt64: ASCII digits only
    raise ValueError(f"invalid per-message TTL {text!r}")


# Go's time.ParseDuration units, in ns ("µ" U+00B5 and "μ" U+03BC both mean micro).
_UNITS = {"ns": 1, "us": 1000, "\u00b5s": 1000, "\u03bcs": 1000, "ms": 10**6, "s": NS_PER_S,
          "m": 60 * NS_PER_S, "h": 3600 * NS_PER_S}
_MAX_NS = (1 << 63) - 1


def _go_duration_ns(text: str) -> int | None:
    """ns in a Go duration (``1h30m``, ``1.5s``, ``+5s``, ``0``) as
    time.ParseDuration reads it (fractions truncated, int64 range), None
    when it is not one."""
    if text[:1] in ("+", "-"):
        sign, text = (-1 if text[0] == "-" else 1), text[1:]
    else:
        sign = 1
    if text == "0":
        return 0
    if not text:
        return None
    total, i, n = 0, 0, len(text)
    while i < n:
        j = i
        while j < n and "0" <= text[j] <= "9":
            j += 1
        whole = text[i:j]
        frac = ""
        if j < n and text[j] == ".":
            k = j + 1
            while k < n and "0" <= text[k] <= "9":
                k += 1
            frac, j = text[j + 1:k], k
        if not whole and not frac:
            return None
        k = j
        while k < n and not ("0" <= text[k] <= "9" or text[k] == "."):
            k += 1
        unit = _UNITS.get(text[j:k])
        if unit is None:
            return None
        value = int(whole or "0") * unit
        if frac:
            value += int(frac) * unit // 10 ** len(frac)      # Go truncates the fraction
        total += value
        if total > _MAX_NS:
            return None
        i = k
    return sign * total


def matching(by_subject: dict, patterns: list[str], stream_subjects: list[str] = ()) -> list:
    """The values of ``by_subject`` (subject -> anything) whose subject one of
    ``patterns`` matches, in one pass with the cheapest test: a literal is a
    lookup, ``a.b.>`` a prefix test, a pattern covering every subject the
    stream takes (``stream_subjects``, its config's) no test at all.
    subject_matches costs 1-7 us a subject here (with the load): a KV ``keys`` of a 100,000-key
    bucket held the loop 0.7 s testing each key (issue 30)."""
    if not patterns or any(p == ">" or _prefix(p) and stream_subjects and
                           all(q.startswith(_prefix(p)) for q in stream_subjects) for p in patterns):
        return list(by_subject.values())
    if len(patterns) == 1 and is_literal(patterns[0]):
        value = by_subject.get(patterns[0])
        return [] if value is None else [value]
    prefixes = [_prefix(p) for p in patterns]
    if all(prefixes):
        prefixes = tuple(prefixes)
        return [v for s, v in by_subject.items() if s.startswith(prefixes)]
    return [v for s, v in by_subject.items() if any(subject_matches(p, s) for p in patterns)]


def _prefix(pattern: str) -> str:
    """``"a.b."`` for ``a.b.>`` (a literal head), else ``""``."""
    head, dot, tail = pattern.rpartition(".")
    return head + "." if dot and tail == ">" and is_literal(head) else ""


def subject_totals(counts: dict, pattern: str, size=len) -> dict[str, int]:
    """Messages per subject of ``counts`` (subject -> a count, or its live seqs
    with ``size=len``) whose subject ``pattern`` matches: STREAM.INFO's
    ``subjects_filter`` (nats-server's ``SubjectsTotals``), with the tests of
    :func:`matching`."""
    if is_literal(pattern):
        value = counts.get(pattern)
        return {pattern: size(value)} if value else {}
    if pattern == ">":
        return {s: size(v) for s, v in counts.items()}
    prefix = _prefix(pattern)
    if prefix:
        return {s: size(v) for s, v in counts.items() if s.startswith(prefix)}
    return {s: size(v) for s, v in counts.items() if subject_matches(pattern, s)}


def needs_index(config: dict, floors: dict, deleted: set) -> bool:
    """True when a stream's visible messages are not simply a range of the log."""
    return bool(config.get("max_msgs_per_subject", -1) > 0 or config.get("allow_rollup_hdrs")
                or config.get("allow_msg_ttl") or config.get("retention", "limits") != "limits"
                or floors or deleted)


class SubjectIndex:
    """Live sequences of one stream, by subject, built from its records in order."""

    def __init__(self, start: int, per_subject: int, rollups: bool, ttls: bool,
                 floors: dict[str, int], deleted: set[int]) -> None:
        self.to = start - 1                           # last sequence looked at
        self.head = start                             # no live sequence is below it
        self.per_subject = per_subject
        self.rollups, self.ttls = rollups, ttls
        self.floors, self.deleted = floors, deleted
        self.live: dict[int, str] = {}                # seq -> subject, ascending
        # subject -> its live seqs, ascending: a deque, or a 1-tuple for a subject with one
        # (a KV key). A tuple of ints is not tracked by the cycle collector (CPython untracks
        # it in its first collection) where a deque is, and is 48 bytes against 760: with a
        # deque per key a full collection with a 100,000-key bucket took 40-70 ms here
        # (issue 30's limit for the loop is 100 ms). Readers index, iterate and bisect it.
        self.subjects: dict[str, deque[int] | tuple[int]] = {}
        self.expiry: list[tuple[int, int]] = []       # heap of (expires ns, seq)
        self.version = 0                              # hide events so far
        self.hidden: deque[tuple[int, str]] = deque(maxlen=HIDDEN_LOG)
        # Interest / work-queue retention: live seqs whose need is still to be checked
        # (an index put in use after a start, a consumer deleted), newest first, a slice
        # at a time by the warm-up (warmup.release_step), not all in one piece.
        self.to_release: list[int] = []

    # -- building --------------------------------------------------------------------
    def add(self, seq: int, subject: str, ts_ns: int, rollup: str | None = None, ttl: int = 0) -> None:
        """The record ``seq`` (the next after :attr:`to`) with its subject,
        stored time, ``Nats-Rollup`` value and ``Nats-TTL`` seconds."""
        self.to = seq
        # A record deleted or purged later still had its effects (limits,
        # rollups) when it was stored: apply them, then hide it.
        gone = seq in self.deleted or seq < self.floors.get(subject, 0)
        if rollup and self.rollups:
            if rollup == "all":
                for old in list(self.live):
                    self.hide(old)
            elif rollup == "sub":
                for old in list(self.subjects.get(subject, ())):
                    self.hide(old)
        self.live[seq] = subject
        subjects = self.subjects
        seqs = subjects.get(subject)
        if seqs is None:
            subjects[subject] = (seq,)                # one live seq: a tuple (see __init__)
        else:
            if type(seqs) is tuple:
                seqs = subjects[subject] = deque(seqs)
            seqs.append(seq)
            if self.per_subject > 0:
                while len(seqs) > self.per_subject:
                    self.hide(seqs[0])
        if gone:
            self.hide(seq)
        elif ttl > 0 and self.ttls:
            heapq.heappush(self.expiry, (ts_ns + ttl * NS_PER_S, seq))

    # -- removing ------------------------------------------------------------------------
    def hide(self, seq: int) -> bool:
        subject = self.live.pop(seq, None)
        if subject is None:
            return False
        seqs = self.subjects[subject]
        if type(seqs) is tuple:                      # its only live seq
            del self.subjects[subject]
        else:
            if seqs[0] == seq:
                seqs.popleft()
            elif seqs[-1] == seq:                    # newest first (a release slice): no scan either
                seqs.pop()
            else:
                seqs.remove(seq)
            if len(seqs) == 1:
                self.subjects[subject] = (seqs[0],)
            elif not seqs:
                del self.subjects[subject]
        self.version += 1
        self.hidden.append((seq, subject))
        return True

    def expire(self, now_ns: int) -> None:
        expiry = self.expiry
        while expiry and expiry[0][0] <= now_ns:
            self.hide(heapq.heappop(expiry)[1])

    def trim_below(self, seq: int) -> None:
        """Hide every live sequence below ``seq`` (a purge floor, max_age, log start)."""
        while self.live:
            first = self.first()
            if first is None or first >= seq:
                return
            self.hide(first)

    def keep_at_most(self, count: int) -> None:
        """Hide the oldest until at most ``count`` are live (``max_msgs``)."""
        while len(self.live) > count:
            first = self.first()
            if first is None:
                return
            self.hide(first)

    # -- questions ----------------------------------------------------------------------
    def first(self) -> int | None:
        """The lowest live sequence (a pointer that only moves up: amortised O(1))."""
        if not self.live:
            self.head = max(self.head, self.to + 1)
            return None
        live, head = self.live, self.head
        while head not in live:
            head += 1
        self.head = head
        return head

    def last_of(self, subject: str) -> int:
        seqs = self.subjects.get(subject)
        return seqs[-1] if seqs else 0

    def hides_since(self, version: int) -> Iterator[tuple[int, str]] | None:
        """The hide events after ``version``, or None when they are no longer all kept."""
        behind = self.version - version
        if behind > len(self.hidden):
            return None
        return iter(list(self.hidden)[len(self.hidden) - behind:]) if behind else iter(())


class SubjectCounts:
    """Messages per subject in ``start..to`` of a stream without an index
    (``num_subjects``): nats-server's per-subject state (its ``psim``: total,
    first and last block), here the count, a lower bound of the first
    sequence (exact when the subject first arrives, kept when older records
    leave) and the last sequence of each subject. Subject lookups
    (``last_by_subj``, ``next_by_subj``, filtered ``num_pending``) read
    these instead of scanning the log.

    :meth:`to_json` / :meth:`from_json` are the saved form
    (``JetStreams.save_state``): a restart then reads only the records
    stored after it, not the whole stream."""

    def __init__(self, start: int) -> None:
        self.start, self.to = start, start - 1
        self.subjects: dict[str, int] = {}
        self.first: dict[str, int] = {}               # subject -> a seq at or below its first (lower bound)
        self.last: dict[str, int] = {}                # subject -> its last seq in start..to

    def add(self, subjects: list[str], to: int, seqs: list[int] | None = None) -> None:
        """``subjects`` of the records ``self.to + 1 .. to``, in order (``seqs``:
        their sequences, where the log has gaps; default consecutive)."""
        counts, first, last = self.subjects, self.first, self.last
        for seq, subject in zip(seqs if seqs is not None else range(self.to + 1, to + 1), subjects):
            n = counts.get(subject, 0)
            if not n:
                first[subject] = seq
            counts[subject] = n + 1
            last[subject] = seq
        self.to = to

    def drop(self, subjects: list[str], start: int) -> None:
        """``subjects`` of the records that left, ``self.start .. start - 1``."""
        counts = self.subjects
        for subject in subjects:
            left = counts.get(subject, 0) - 1
            if left > 0:
                counts[subject] = left
            else:
                counts.pop(subject, None)
                self.first.pop(subject, None)
                self.last.pop(subject, None)
        self.start = start

    def to_json(self) -> dict:
        return {"start": self.start, "to": self.to,
                "subjects": {s: [n, max(self.first[s], self.start), self.last[s]] for s, n in self.subjects.items()}}

    @classmethod
    def from_json(cls, doc: dict) -> "SubjectCounts":
        """The saved form back (raises KeyError, TypeError, ValueError on a bad document)."""
        counts = cls(int(doc["start"]))
        counts.to = int(doc["to"])
        for subject, (n, first, last) in doc["subjects"].items():
            if not (isinstance(subject, str) and counts.start <= int(first) <= int(last) <= counts.to and int(n) > 0):
                raise ValueError(f"bad saved subject state for {subject!r}")
            counts.subjects[subject], counts.first[subject], counts.last[subject] = int(n), int(first), int(last)
        return counts


__all__ = ["HIDDEN_LOG", "SubjectCounts", "ROLLUP_HEADER", "TTL_HEADER", "SubjectIndex", "needs_index", "parse_ttl",
           "matching", "subject_totals"]
