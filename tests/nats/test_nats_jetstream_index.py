"""SubjectIndex, SubjectCounts and parse_ttl (adapters/nats/jetstream/index.py):
a naive model of what JetStream still shows, no broker, no network."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from adapters.nats.jetstream import index as ji
from adapters.nats.jetstream.index import (
    HIDDEN_LOG,
    NS_PER_S,
    SubjectCounts,
    SubjectIndex,
    parse_ttl,
)

SUBJECTS = ("a", "b", "c")
SMALL_LOG = 6                     # HIDDEN_LOG for the machine, so "too far behind" happens


def index(start=1, per=0, rollups=True, ttls=True, floors=None, deleted=None) -> SubjectIndex:
    return SubjectIndex(start, per, rollups, ttls, dict(floors or {}), set(deleted or ()))


def put(idx: SubjectIndex, *subjects: str, ts: int = 0, rollup: str | None = None, ttl: int = 0) -> None:
    for subject in subjects:
        idx.add(idx.to + 1, subject, ts, rollup, ttl)


class Model:
    """Live records as a plain ascending list of (seq, subject, expires ns or None)."""

    def __init__(self, per: int, rollups: bool, ttls: bool) -> None:
        self.per, self.rollups, self.ttls = per, rollups, ttls
        self.recs: list[tuple[int, str, int | None]] = []
        self.events: list[tuple[int, str]] = []          # every hide, in order

    def drop(self, seqs) -> None:
        for seq in list(seqs):
            for rec in self.recs:
                if rec[0] == seq:
                    self.recs.remove(rec)
                    self.events.append((seq, rec[1]))

    def add(self, seq, subject, ts, rollup, ttl) -> None:
        if self.rollups and rollup == "all":        # every earlier message of the stream
            self.drop(r[0] for r in self.recs)
        elif self.rollups and rollup == "sub":      # every earlier message of the subject
            self.drop(r[0] for r in self.recs if r[1] == subject)
        self.recs.append((seq, subject, ts + ttl * NS_PER_S if self.ttls and ttl > 0 else None))
        mine = [r[0] for r in self.recs if r[1] == subject]
        if self.per > 0:                            # the oldest past max_msgs_per_subject
            self.drop(mine[:max(0, len(mine) - self.per)])

    def expire(self, now) -> None:                  # soonest expiry first, then lower seq
        due = sorted((r[2], r[0]) for r in self.recs if r[2] is not None and r[2] <= now)
        self.drop(seq for _, seq in due)

    def subjects(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for seq, subject, _ in self.recs:
            out.setdefault(subject, []).append(seq)
        return out


class IndexMachine(RuleBasedStateMachine):
    """Random adds (rollups, TTLs), hides, trims, max_msgs and expiry against the model."""

    @initialize(start=st.integers(1, 4), per=st.integers(0, 3), rollups=st.booleans(), ttls=st.booleans())
    def setup(self, start, per, rollups, ttls):
        saved, ji.HIDDEN_LOG = ji.HIDDEN_LOG, SMALL_LOG
        try:
            self.idx = SubjectIndex(start, per, rollups, ttls, {}, set())
        finally:
            ji.HIDDEN_LOG = saved
        self.start, self.now = start, 0
        self.model = Model(per, rollups, ttls)
        self.snaps: list[tuple[int, set[int], int]] = []     # (version, live seqs, to)

    @rule(subject=st.sampled_from(SUBJECTS), rollup=st.sampled_from([None, None, "sub", "all", "bogus"]),
          ttl=st.sampled_from([0, 0, -1, 1, 2, 3]), dt=st.sampled_from([0, NS_PER_S // 2, NS_PER_S]))
    def add(self, subject, rollup, ttl, dt):
        self.now += dt
        seq = self.idx.to + 1
        self.idx.add(seq, subject, self.now, rollup, ttl)
        self.model.add(seq, subject, self.now, rollup, ttl)

    @rule(offset=st.integers(-1, 30))
    def hide(self, offset):
        seq = self.start + offset
        was = any(r[0] == seq for r in self.model.recs)
        assert self.idx.hide(seq) is was
        self.model.drop([seq])

    @rule(offset=st.integers(-1, 32))
    def trim_below(self, offset):
        seq = self.start + offset
        self.idx.trim_below(seq)
        self.model.drop(r[0] for r in self.model.recs if r[0] < seq)

    @rule(count=st.integers(0, 6))
    def keep_at_most(self, count):
        self.idx.keep_at_most(count)
        self.model.drop(r[0] for r in self.model.recs[:max(0, len(self.model.recs) - count)])

    @rule(dt=st.sampled_from([0, NS_PER_S // 2, NS_PER_S, 3 * NS_PER_S]))
    def expire(self, dt):
        self.now += dt
        self.idx.expire(self.now)
        self.model.expire(self.now)

    @invariant()
    def agrees(self):
        if not hasattr(self, "idx"):
            return
        idx, model = self.idx, self.model
        want = {seq: subject for seq, subject, _ in model.recs}
        assert idx.live == want and list(idx.live) == sorted(idx.live)
        assert {s: list(q) for s, q in idx.subjects.items()} == model.subjects()
        assert idx.first() == (min(want) if want else None)
        for subject in SUBJECTS:
            assert idx.last_of(subject) == max((q for q, s in want.items() if s == subject), default=0)
        assert idx.version == len(model.events)
        for version, live, to in self.snaps:
            since = idx.hides_since(version)
            if idx.version - version > SMALL_LOG:
                assert since is None
                continue
            events = list(since)
            assert events == model.events[version:]
            assert live - {q for q, _ in events} == {q for q in want if q <= to}
        self.snaps = (self.snaps + [(idx.version, set(want), idx.to)])[-40:]


TestIndexMachine = IndexMachine.TestCase
TestIndexMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None,
                                     suppress_health_check=[HealthCheck.too_slow])


# -- plain cases -------------------------------------------------------------------------

def test_floors_and_deleted_hide_matching_adds():
    idx = index(floors={"a": 3}, deleted={4})
    put(idx, "a", "b", "a", "b", "a", "b")
    assert idx.live == {2: "b", 3: "a", 5: "a", 6: "b"} and idx.to == 6
    # stored, then hidden: its limits and rollups applied first (as when it was stored live)
    assert idx.version == 2 and [q for q, _ in idx.hides_since(0)] == [1, 4]


@pytest.mark.parametrize("per", [1, 3])
def test_per_subject_limit(per):
    idx = index(per=per)
    put(idx, "a", "b", "a", "a", "a", "a")          # a: 1 3 4 5 6
    assert list(idx.subjects["a"]) == [1, 3, 4, 5, 6][-per:]
    assert list(idx.subjects["b"]) == [2]
    assert [q for q, _ in idx.hides_since(0)] == [1, 3, 4, 5, 6][:5 - per]


def test_rollups():
    idx = index()
    put(idx, "a", "b", "a")
    put(idx, "a", rollup="sub")
    assert idx.live == {2: "b", 4: "a"}
    put(idx, "c", "b")
    put(idx, "c", rollup="all")                      # every earlier message, any subject
    assert idx.live == {7: "c"} and idx.first() == 7
    assert [q for q, _ in idx.hides_since(0)] == [1, 3, 2, 4, 5, 6]


def test_rollups_ignored_when_disabled():
    idx = index(rollups=False)
    put(idx, "a", "b")
    put(idx, "a", rollup="sub")
    put(idx, "b", rollup="all")
    assert list(idx.live) == [1, 2, 3, 4] and idx.version == 0


def test_ttls():
    idx = index()
    put(idx, "a", ts=10, ttl=2)
    put(idx, "b", ts=10, ttl=-1)                     # "never"
    put(idx, "c", ts=10, ttl=1)
    idx.expire(10 + NS_PER_S - 1)
    assert list(idx.live) == [1, 2, 3]
    idx.expire(10 + NS_PER_S)
    assert list(idx.live) == [1, 2]
    idx.expire(10 ** 15)
    assert list(idx.live) == [2]
    off = index(ttls=False)
    put(off, "a", "b", ts=0, ttl=1)
    off.expire(10 ** 15)
    assert list(off.live) == [1, 2]


def test_trim_below_beyond_to_and_first_moves_past_to():
    idx = index(start=5)
    put(idx, "a", "b", "a")                          # 5 6 7
    idx.trim_below(100)
    assert idx.live == {} and idx.version == 3 and idx.first() is None
    assert idx.head == idx.to + 1 == 8
    put(idx, "b")                                    # a floor is not trim_below's business
    assert idx.first() == 8 and idx.last_of("b") == 8 and idx.last_of("a") == 0


def test_first_after_everything_hidden():
    idx = index(start=3)
    assert idx.first() is None and idx.head == 3
    put(idx, "a", "b", "c")
    for seq in (4, 3, 5):
        assert idx.hide(seq)
    assert not idx.hide(4)
    assert idx.first() is None and idx.head == 6
    put(idx, "a")
    assert idx.first() == 6
    idx.keep_at_most(0)
    assert idx.first() is None and idx.head == 7


def test_hidden_log_bound():
    idx = index()
    put(idx, *["a"] * (HIDDEN_LOG + 2))
    idx.keep_at_most(1)
    assert idx.version == HIDDEN_LOG + 1
    assert idx.hides_since(0) is None
    assert [q for q, _ in idx.hides_since(1)] == list(range(2, HIDDEN_LOG + 2))
    assert list(idx.hides_since(idx.version)) == []


@pytest.mark.parametrize("case", ["per_subject", "rollup_deleted", "rollup_floored"])
def test_rebuild_matches_live_index(case):
    """The streams module rebuilds the index from the log plus saved floors/deletes:
    it must show what the index showed before (nats-server never brings back a
    message that a limit or rollup removed when its remover is deleted later)."""
    per = 1 if case == "per_subject" else 0

    def log(idx):
        if per:
            put(idx, "a", "a", "a")                  # 3 removed 2 removed 1
        else:
            put(idx, "b")
            put(idx, "a", rollup="all")              # 2 removed 1
    live, floors, deleted = index(per=per), {}, set()
    log(live)
    live.hide(live.to)
    if case == "rollup_floored":
        floors["a"] = live.to + 1                    # purge subject "a"
    else:
        deleted.add(live.to)                         # STREAM.MSG.DELETE
    rebuilt = index(per=per, floors=floors, deleted=deleted)
    log(rebuilt)
    assert rebuilt.live == live.live == {}


# -- SubjectCounts -----------------------------------------------------------------------

@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5), st.lists(st.tuples(st.booleans(), st.lists(st.sampled_from(SUBJECTS), max_size=5))))
def test_subject_counts(start, ops):
    counts, window = SubjectCounts(start), []
    for grow, subjects in ops:
        if grow:
            window += subjects
            counts.add(subjects, start + len(window) - 1)
        else:
            gone, window = window[:len(subjects)], window[len(subjects):]
            start += len(gone)
            counts.drop(gone, start)
        assert counts.subjects == dict(Counter(window))
        assert (counts.start, counts.to) == (start, start + len(window) - 1)


# -- parse_ttl: nats-server's parseMessageTTL (time.ParseDuration, then parseInt64) -------

@pytest.mark.parametrize("text,seconds", [
    ("1s", 1), ("1m30s", 90), ("1.5s", 1), ("1h", 3600), ("2h45m", 9900), ("1000ms", 1), ("1.s", 1),
    (".5m", 30), ("1000000us", 1), ("1000000µs", 1), ("10", 10), ("00", 0), ("86400", 86400),
    ("never", -1), ("NEVER", -1), ("Never", -1),
])
def test_parse_ttl_valid(text, seconds):
    assert parse_ttl(text) == seconds


@pytest.mark.parametrize("text", [
    "500ms", "999ms", "0s", "-1", "-1s", "-0", "abc", "", "s", ".s", "1x", "1s5", "1..5s", "1e3s", "0x10", "nan",
])
def test_parse_ttl_invalid(text):
    with pytest.raises(ValueError):
        parse_ttl(text)


@pytest.mark.parametrize("text,seconds", [
    ("0", None),                     # ParseDuration("0") == 0 < 1s: JSMessageTTLInvalidErr
    ("+5s", 5),                      # ParseDuration takes a leading '+'
    ("1000000μs", 1), ("1000000000µs", 1000),   # U+03BC and U+00B5 are both Go units
    ("3000000h", None),              # overflows int64 ns: ParseDuration errors, parseInt64 fails
    ("0.99999999999999999s", None),  # Go truncates to 999999999ns
    ("\u0663", None),                # ARABIC-INDIC DIGIT THREE is no ASCII digit
])
def test_parse_ttl_like_nats_server(text, seconds):
    try:
        got = parse_ttl(text)
    except ValueError:
        got = None
    assert got == seconds
