"""The warm-up of a broker's JetStream streams: cold state caught up in slices (no trio).

Theory of operation
-------------------
After a start, state that is a function of every stored record is cold: the
per-subject counts of a stream without index, the subject index of one that
needs it, the msg-id window. What ``saved_state`` restored is warm already;
the rest used to be read by the first call that needed it, in one go on the
event loop (issue 30: 5.2 s for a 620,000-message STREAM.INFO, with other
clients' PINGs waiting). :func:`warm_step` reads about ``budget`` records of
it and returns; the NATS driver (``driver.warm_streams``) calls it between
other tasks until it returns False, then now and then to follow new
appends. A subject index is built aside (``JsStream.building``) and put in
use once caught up, so no call sees half of one.

A request that needs state the slices have not reached yet does not read it
itself in one piece: :func:`request_need` and :func:`publish_need` say what
it waits for, the NATS session parks it (and what its connection sent after
it), and the driver runs :func:`warm_for` slices for it until :func:`cold`
says the call would read at most :data:`WARM_TAIL` records, then handles it
(``driver._warm_parked``). A filtered purge or a message delete on a stream
without index gets its first index built that way. Other connections are
served between two slices; the parked connection's own later requests wait
behind it, as a nats-server client's do behind an API call its read loop is
answering.
"""

from __future__ import annotations

import json

from .dedup import REFILL_YIELD, refill
from .index import needs_index


# Live messages whose need one release step checks (a dict lookup and a test per
# consumer each, ~1-3 us here): a step stays near the warm-up's ~10 ms slice.
RELEASE_SLICE = 4096


def release_step(streams, st, budget: int = RELEASE_SLICE) -> bool:
    """Check up to ``budget`` of the live messages queued on ``st``'s index
    (``SubjectIndex.to_release``, newest first: taken from its end) and remove
    those no consumer needs (``JetStreams.release``); True when it checked some."""
    idx = st.index
    if idx is None or not idx.to_release:
        return False
    batch = idx.to_release[-budget:]
    del idx.to_release[-budget:]
    batch.reverse()                                  # queued newest first: checked oldest first,
    streams.release(st, batch)                       # as a subject's seqs leave its deque's front
    return True


def warm_step(streams, budget: int) -> bool:
    """Catch up about ``budget`` records of cold per-stream state (restored
    or read from the log: subject counts, the subject index of a stream
    that needs one, the msg-id window); True while some remains. The NATS
    driver calls it between other work, so a long stream is read in
    slices instead of by the first call that needs it."""
    for st in list(streams.streams.values()):
        if not st.restored:
            streams._restore(st)
        if release_step(streams, st, RELEASE_SLICE * budget // WARM_TAIL):
            return True                              # interest / work queue: what nobody needs goes
        last = streams.last_seq(st)
        if st.index is None and needs_index(st.config, st.floors, st.deleted):
            if st.loading is not None:               # the saved index, a text per step (saved_index)
                next(st.loading, None)
                return True
            building = st.building = st.building or streams._new_index(st)
            before = building.to
            if not streams._index_catch_up(st, building, budget) and building.to != before:
                return True
            streams.index(st)                        # in use from now on
            return True
        elif st.index is None:
            first = streams.first_seq(st)
            before = st.counts.to if st.counts is not None else None
            if first <= last and streams.subject_counts(st, first, last, budget).to != before:
                return True                       # read some: the rest in the next slices
        if st.dedup is None and st.config["duplicate_window"] > 0 and last:
            st.refill = st.refill or refill(streams, st)
            for _ in zip(range(max(budget // REFILL_YIELD, 1)), st.refill):
                pass
            if st.dedup is None:
                return True
    return False


# -- requests that wait for the warm-up ---------------------------------------------------
# What a parked request waits for: the stream's per-subject state (its counts, or its
# subject index when it has or needs one), a subject index even on a stream without one
# (filtered purge, message delete), or the msg-id window.
STATE, INDEX, DEDUP = "state", "index", "dedup"
# Records a call may still read itself once the warm-up has caught up: one slice of the
# driver's warm-up (driver.WARM_SLICE, about 10 ms here), so no call reads more than
# that on the loop in one piece (issue 30).
WARM_TAIL = 1024
# $JS.API verbs (followed by ".<stream>...") whose answer reads the stream's
# per-subject state or index: STREAM.INFO's num_subjects, CREATE/UPDATE answer with
# the same info, a consumer's start and num_pending, a pull's next message.
_STATE_VERBS = ("STREAM.INFO.", "STREAM.CREATE.", "STREAM.UPDATE.", "CONSUMER.CREATE.",
                "CONSUMER.DURABLE.CREATE.", "CONSUMER.INFO.", "CONSUMER.LIST.", "CONSUMER.MSG.NEXT.",
                "STREAM.PURGE.")
# ... whose answer needs a subject index even on a stream without one (streams.py
# ``index(st, force=True)``): a message delete, a purge with a subject filter.
_DELETE, _PURGE = "STREAM.MSG.DELETE.", "STREAM.PURGE."
# Gets that read by subject (a scan or the per-subject state); a get by seq of a
# stream without index reads one record and waits for nothing.
_GET_VERBS = ("STREAM.MSG.GET.", "DIRECT.GET.")
_BY_SUBJECT = (b"by_subj", b"multi_last")
_API = "$JS.API."


def cold(streams, st, what: str) -> bool:
    """True while a call that needs ``what`` (:data:`STATE`, :data:`INDEX`,
    :data:`DEDUP`) of stream ``st`` would read more than :data:`WARM_TAIL`
    records itself; False once it would not, or when the stream is gone."""
    if what == DEDUP and st.dedup is not None:
        return False
    if streams.streams.get(st.name) is not st:
        return False                                  # deleted meanwhile: the call answers what it finds
    if not st.restored:
        return True
    last = streams.last_seq(st)
    if what == DEDUP:
        return st.config["duplicate_window"] > 0 and last > 0
    idx = st.index if st.index is not None else st.building
    if idx is not None or what == INDEX or _indexed(st):
        # messages still to release: the state would show some nobody needs
        return idx is None or last - idx.to > WARM_TAIL or bool(idx.to_release)
    counts = st.counts
    return counts is None or last - counts.to > WARM_TAIL


def warm_for(streams, st, what: str, budget: int) -> bool:
    """One slice (about ``budget`` records) toward what a parked call needs
    (:func:`cold`): restore the saved state, then go on with the msg-id
    window's refill, the index (the one in use, or one built aside that the
    call takes over, ``JetStreams.index``) or the per-subject counts. False
    when it got no further (records missing from the log: the call reads
    what it can itself)."""
    if not st.restored:
        streams._restore(st)
        return True
    if what == DEDUP:
        st.refill = st.refill or refill(streams, st)
        for _ in zip(range(max(budget // REFILL_YIELD, 1)), st.refill):
            pass
        return True
    if release_step(streams, st, RELEASE_SLICE * budget // WARM_TAIL):
        return True
    if st.index is not None or what == INDEX or _indexed(st):
        idx = st.index
        if idx is None and st.loading is not None:   # the saved index, a text per step (saved_index)
            next(st.loading, None)
            return True
        if idx is None:
            idx = st.building = st.building or streams._new_index(st)
        before = idx.to
        streams._index_catch_up(st, idx, budget)
        return idx.to != before
    counts = st.counts
    before = counts.to if counts is not None else None
    return streams.subject_counts(st, streams.first_seq(st), streams.last_seq(st), budget).to != before


def request_need(streams, subject: str, payload) -> tuple | None:
    """``(stream, what)`` a ``$JS.API`` request must wait for before it is
    answered (:func:`cold`), None when it can be answered now."""
    rest = subject[len(_API):]
    if not isinstance(payload, bytes):
        payload = bytes(payload)                      # `in` on a memoryview compares single bytes
    if rest == "STREAM.LIST":                         # every stream's state
        for st in list(streams.streams.values()):
            if cold(streams, st, STATE):
                return st, STATE
        return None
    if rest.startswith(_DELETE):
        return _need(streams, rest[len(_DELETE):], INDEX)
    if rest.startswith(_PURGE) and _filtered(payload):
        return _need(streams, rest[len(_PURGE):], INDEX)
    for verb in _STATE_VERBS:
        if rest.startswith(verb):
            return _need(streams, rest[len(verb):], STATE)
    for verb in _GET_VERBS:
        if rest.startswith(verb):
            name, dot, _subject = rest[len(verb):].partition(".")
            st = streams.streams.get(name)
            if st is None or not (dot or _indexed(st) or any(k in payload for k in _BY_SUBJECT)):
                return None
            return (st, STATE) if cold(streams, st, STATE) else None
    return None


def publish_need(streams, st, header) -> tuple | None:
    """``(st, what)`` a publish on stream ``st`` must wait for (its msg-id window
    for a ``Nats-Msg-Id``, its per-subject state for the checks that read it),
    None when it can be stored now."""
    if header and not isinstance(header, bytes):
        header = bytes(header)                        # `in` on a memoryview compares single bytes
    if header and st.dedup is None and b"Nats-Msg-Id" in header and cold(streams, st, DEDUP):
        return st, DEDUP
    if (st.config.get("discard_new_per_subject") or header and b"Nats-Expected-Last-Subject-Sequence" in header) \
            and cold(streams, st, STATE):
        return st, STATE
    return None


def _need(streams, tail: str, what: str) -> tuple | None:
    st = streams.streams.get(tail.partition(".")[0])
    return (st, what) if st is not None and cold(streams, st, what) else None


def _filtered(payload) -> bool:
    """A purge request with a subject filter (``streams.JetStreams.purge``'s test); a
    body that is not JSON waits for nothing (its answer is an error)."""
    if b"filter" not in payload:
        return False
    try:
        doc = json.loads(payload)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(doc, dict) and doc.get("filter") not in (None, "", ">")


def _indexed(st) -> bool:
    return st.index is not None or st.want_index or needs_index(st.config, st.floors, st.deleted)


__all__ = ["DEDUP", "INDEX", "RELEASE_SLICE", "STATE", "WARM_TAIL", "cold", "publish_need", "release_step",
           "request_need", "warm_for", "warm_step"]
