"""Issue 30's sans-I/O parts: header lookups without a decode, saved per-subject counts.

``fields.header_str`` must answer what ``Headers.decode(block).get(key)`` answers (the
lookups it replaced: ``stored_subject``, the msg id, rollup and TTL), errors included;
``SubjectCounts`` must keep each subject's count, first and last seq as records come and
go, and its saved form must come back the same.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

from adapters.nats.jetstream.fields import header_str, index_headers, msg_id_of
from adapters.nats.jetstream.index import ROLLUP_HEADER, TTL_HEADER, SubjectCounts, parse_ttl
from core.addressing import SUBJECT_HEADER, stored_subject
from core.message import HeaderValue, Headers

KEYS = [SUBJECT_HEADER, "Nats-Msg-Id", ROLLUP_HEADER, TTL_HEADER, "a", "ferry-nats-subjecT"]
VALUES = st.one_of(st.text(min_size=1, max_size=8).filter(lambda t: len(t.encode()) <= 255).map(HeaderValue.string),
                   st.integers(-5, 5).map(HeaderValue.int32),
                   st.binary(min_size=1, max_size=6).map(HeaderValue.raw),
                   st.sampled_from(["1s", "never", "5", "x", "all", "sub"]).map(HeaderValue.string))
PAIRS = st.lists(st.tuples(st.sampled_from(KEYS), st.booleans(), VALUES), max_size=6)


def block(pairs) -> bytes:
    headers = Headers()
    for key, raw_key, value in pairs:
        headers.add(HeaderValue.raw(key.encode()) if raw_key else HeaderValue.string(key), value)
    return headers.encode()


def outcome(fn, tlv):
    try:
        return fn(tlv)
    except Exception as exc:  # noqa: BLE001 - the error class is part of the answer
        return type(exc)


def decoded(key, tlv):
    value = Headers.decode(tlv).get(key)
    return value.as_str() if value is not None else None


def old_index_headers(tlv):
    """index_headers as it decoded before (streams._index_headers, 2026-11-28)."""
    if not tlv:
        return None, 0
    headers = Headers.decode(tlv)
    rollup, ttl = headers.get(ROLLUP_HEADER), headers.get(TTL_HEADER)
    seconds = 0
    if ttl is not None:
        try:
            seconds = parse_ttl(ttl.as_str())
        except ValueError:
            seconds = 0
    return (rollup.as_str() if rollup is not None else None), seconds


@settings(max_examples=400, deadline=None)
@given(PAIRS, st.booleans())
def test_header_lookups_answer_as_the_decode(pairs, as_view):
    tlv = block(pairs)
    data = memoryview(tlv) if as_view else tlv
    assert outcome(lambda t: header_str(t, SUBJECT_HEADER.encode(), stored_subject) if len(t) else None, data) \
        == outcome(stored_subject, tlv)
    assert outcome(msg_id_of, data) == outcome(lambda t: decoded("Nats-Msg-Id", t) if t else None, tlv)
    assert outcome(index_headers, data) == outcome(old_index_headers, tlv)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5), st.lists(st.tuples(st.booleans(), st.lists(st.sampled_from("abc"), max_size=5))))
def test_subject_counts_first_last_and_saved_form(start, ops):
    counts, window = SubjectCounts(start), []        # window: (seq, subject) still counted
    for grow, subjects in ops:
        if grow:
            seq0 = counts.to + 1
            window += [(seq0 + i, s) for i, s in enumerate(subjects)]
            counts.add(subjects, counts.to + len(subjects))
        else:
            gone, window = window[:len(subjects)], window[len(subjects):]
            counts.drop([s for _, s in gone], counts.start + len(gone))
        assert counts.subjects == dict(Counter(s for _, s in window))
        assert counts.last == {s: max(q for q, t in window if t == s) for s in counts.subjects}
        assert all(counts.first[s] <= min(q for q, t in window if t == s) for s in counts.subjects)
        back = SubjectCounts.from_json(counts.to_json())
        assert (back.start, back.to, back.subjects, back.last) == (counts.start, counts.to, counts.subjects, counts.last)


def test_subject_counts_with_gaps_take_the_given_seqs():
    counts = SubjectCounts(1)
    counts.add(["a", "b", "a"], 9, seqs=[1, 5, 9])
    assert (counts.first, counts.last, counts.to) == ({"a": 1, "b": 5}, {"a": 9, "b": 5}, 9)


@pytest.mark.parametrize("doc", [
    {"start": 1, "to": 3, "subjects": {"a": [1, 2, 9]}},          # last past to
    {"start": 1, "to": 3, "subjects": {"a": [0, 1, 2]}},          # no messages
    {"start": 1, "to": 3, "subjects": {"a": [1, 3, 2]}},          # first after last
    {"start": 1, "subjects": {}},                                 # no to
    {"start": 1, "to": 3, "subjects": {"a": [1, 2]}},             # short entry
])
def test_a_bad_saved_document_is_refused(doc):
    with pytest.raises((KeyError, TypeError, ValueError)):
        SubjectCounts.from_json(doc)
