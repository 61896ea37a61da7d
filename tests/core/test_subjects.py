"""core.subjects: validation tables and the trie against the brute-force matcher."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from core.errors import InvalidArgument, InvalidSubject
from core.subjects import (
    CACHE_TRIM_TO,
    EMPTY_RESULT,
    MAX_CACHED_RESULTS,
    SubjectTrie,
    is_literal,
    is_valid_pattern,
    is_valid_subject,
    subject_matches,
)

# -- validation tables (nats.md section 6, nats-server isValidSubject) --------
VALID_PATTERNS = ["a", "foo.bar", ">", "*", "foo.*", "foo.>", "*.*.>", "a.b*", "a>.b", "$SRV.PING", "_INBOX.x.y",
                  "é.ü", "a\x00b"]
INVALID_PATTERNS = ["", ".", "foo..bar", ".foo", "foo.", "foo.>.bar", ">.a", "a b", "a\tb", "a.\n", "a\r", "a.\f.b",
                    " ", "a. .b"]


@pytest.mark.parametrize("pattern", VALID_PATTERNS)
def test_valid_patterns(pattern):
    assert is_valid_pattern(pattern)


@pytest.mark.parametrize("pattern", INVALID_PATTERNS)
def test_invalid_patterns(pattern):
    assert not is_valid_pattern(pattern)
    assert not is_valid_subject(pattern)


@pytest.mark.parametrize(
    "subject, valid",
    [("foo.bar", True), ("a.b*", True), ("a>", True), ("foo.*", False), ("foo.>", False), ("*", False),
     (">", False), ("", False), ("foo..bar", False)],
)
def test_publish_subject_validity(subject, valid):
    assert is_valid_subject(subject) is valid


@pytest.mark.parametrize(
    "subject, literal",
    [("a.b", True), ("a.b*", True), ("a.*", False), ("a.>", False), ("*", False), ("a.*b", True), ("", True)],
)
def test_is_literal(subject, literal):
    assert is_literal(subject) is literal


def test_non_strings_are_not_valid():
    assert not is_valid_pattern(None)  # type: ignore[arg-type]
    assert not is_valid_subject(12)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "pattern, subject, expected",
    [
        ("foo.bar", "foo.bar", True),
        ("foo.bar", "foo.baz", False),
        ("foo.*", "foo.bar", True),
        ("foo.*", "foo", False),
        ("foo.*", "foo.bar.baz", False),
        ("foo.>", "foo.bar", True),
        ("foo.>", "foo.bar.baz", True),
        ("foo.>", "foo", False),
        (">", "a", True),
        (">", "a.b.c", True),
        ("*", "a", True),
        ("*", "a.b", False),
        ("*.b.>", "a.b.c", True),
        ("*.b.>", "a.b", False),
        ("a.b*", "a.b*", True),  # b* is a literal token (nats.md section 6)
        ("a.b*", "a.bc", False),
        ("a.*", "a.b*", True),
        ("a.*", "a.*", True),  # an unvalidated publish of a.* reaches SUB a.*
        ("a.b", "a.*", False),
        ("a.>", "a..b", False),  # empty token: nothing matches (Sublist.match)
        (">", "", False),
    ],
)
def test_subject_matches_table(pattern, subject, expected):
    assert subject_matches(pattern, subject) is expected
    trie = SubjectTrie()
    trie.insert(pattern, "s")
    assert (trie.match(subject).plain == ("s",)) is expected


def test_subject_matches_rejects_invalid_pattern():
    with pytest.raises(InvalidSubject):
        subject_matches("a..b", "a.b")


# -- trie basics ---------------------------------------------------------------
def test_insert_invalid_pattern_raises_typed_error():
    trie = SubjectTrie()
    for bad in INVALID_PATTERNS:
        with pytest.raises(InvalidSubject) as info:
            trie.insert(bad, "s")
        assert isinstance(info.value, InvalidArgument)
    with pytest.raises(InvalidSubject):
        trie.remove("foo.>.bar", "s")
    assert trie.count == 0 and trie.generation == 0


def test_queue_groups_are_keyed_by_name_across_patterns():
    trie = SubjectTrie()
    trie.insert("foo.*", "a", queue="g")
    trie.insert("foo.bar", "b", queue="g")
    trie.insert("foo.bar", "c", queue="h")
    trie.insert("foo.>", "p")
    result = trie.match("foo.bar")
    assert result.plain == ("p",)
    assert {k: set(v) for k, v in result.queues.items()} == {"g": {"a", "b"}, "h": {"c"}}
    assert trie.match("foo.baz").queues.keys() == {"g"}


def test_empty_queue_name_means_plain():
    trie = SubjectTrie()
    trie.insert("a", "s", queue="")
    assert trie.match("a").plain == ("s",)
    assert trie.remove("a", "s", queue="")
    assert trie.match("a").empty


def test_duplicates_and_dedup():
    trie = SubjectTrie()
    assert trie.insert("a.b", "s")
    assert not trie.insert("a.b", "s")  # same subscription: no change
    assert trie.count == 1 and trie.generation == 1
    trie.insert("a.*", "s")  # same subscriber, second pattern
    trie.insert("a.b", "s", queue="q")  # and as a queue member
    assert len(trie) == 3
    result = trie.match("a.b")
    assert result.plain == ("s",)
    assert dict(result.queues) == {"q": ("s",)}


def test_remove_missing_returns_false_and_keeps_generation():
    trie = SubjectTrie()
    trie.insert("a.b", "s")
    gen = trie.generation
    assert not trie.remove("a.c", "s")
    assert not trie.remove("a.b", "other")
    assert not trie.remove("a.b", "s", queue="q")
    assert trie.generation == gen and trie.count == 1


def test_remove_prunes_nodes():
    trie = SubjectTrie()
    trie.insert("a.b.c.d", 1)
    trie.insert("a.*.>", 2, queue="q")
    trie.remove("a.b.c.d", 1)
    trie.remove("a.*.>", 2, queue="q")
    assert trie.count == 0
    assert trie._root.is_empty()  # nothing left behind, like nats-server's pruning


def test_results_are_read_only():
    trie = SubjectTrie()
    trie.insert("a", "s", queue="q")
    result = trie.match("a")
    with pytest.raises(TypeError):
        result.queues["x"] = ()  # type: ignore[index]
    assert trie.match("nothing") is EMPTY_RESULT
    assert EMPTY_RESULT.empty


def test_cache_hit_and_invalidation_by_generation():
    trie = SubjectTrie()
    trie.insert("a.*", "s")
    first = trie.match("a.b")
    assert trie.match("a.b") is first  # served from the cache
    trie.insert("a.b", "t")
    second = trie.match("a.b")
    assert second is not first and set(second.plain) == {"s", "t"}
    trie.remove("a.*", "s")
    assert trie.match("a.b").plain == ("t",)
    # a negative result is cached too and dropped on the next change
    assert trie.match("x.y").empty
    trie.insert(">", "all")
    assert trie.match("x.y").plain == ("all",)


def test_cache_is_bounded():
    trie = SubjectTrie()
    trie.insert(">", "s")
    for i in range(MAX_CACHED_RESULTS + 10):
        trie.match(f"subj.{i}")
        assert len(trie._cache) <= MAX_CACHED_RESULTS
    assert len(trie._cache) < MAX_CACHED_RESULTS
    assert len(trie._cache) >= CACHE_TRIM_TO
    assert trie.match("subj.0").plain == ("s",)


def test_subject_with_empty_token_is_not_cached():
    trie = SubjectTrie()
    trie.insert(">", "s")
    assert trie.match("a..b").empty
    assert trie.match("").empty
    assert trie.match(".a").empty
    assert "a..b" not in trie._cache


def test_subscriptions_lists_everything():
    trie = SubjectTrie()
    entries = {("a.b", 1, None), ("a.*", 2, "q"), (">", 3, None), ("a.>", 4, "r")}
    for pattern, sub, queue in entries:
        trie.insert(pattern, sub, queue)
    assert set(trie.subscriptions()) == entries


# -- trie vs brute force (STYLE.md section 6.4) ------------------------------------
TOKENS = ["a", "b", "c"]
pattern_token = st.sampled_from(TOKENS + ["*"])
subject_token = st.sampled_from(TOKENS + ["*"])  # "*" in a publish is a literal token


@st.composite
def patterns(draw):
    toks = draw(st.lists(pattern_token, min_size=1, max_size=4))
    if draw(st.booleans()):
        toks = toks[: draw(st.integers(0, len(toks) - 1))] + [">"]
    return ".".join(toks)


subjects = st.lists(subject_token, min_size=1, max_size=5).map(".".join)
queues = st.sampled_from([None, "q1", "q2"])
subs = st.integers(0, 5)
entries = st.tuples(patterns(), subs, queues)


def brute_force(stored, subject):
    plain, groups = set(), {}
    for pattern, sub, queue in stored:
        if subject_matches(pattern, subject):
            if queue is None:
                plain.add(sub)
            else:
                groups.setdefault(queue, set()).add(sub)
    return plain, groups


def check(trie, stored, subject):
    result = trie.match(subject)
    plain, groups = brute_force(stored, subject)
    assert len(result.plain) == len(set(result.plain)), "a subscriber appears once"
    assert set(result.plain) == plain
    for members in result.queues.values():
        assert len(members) == len(set(members))
    assert {k: set(v) for k, v in result.queues.items()} == groups


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(entries, max_size=25), st.lists(st.integers(0, 24), max_size=10), st.lists(subjects, min_size=1, max_size=10))
def test_trie_agrees_with_brute_force(inserted, removals, probe):
    trie = SubjectTrie()
    stored = set()
    for entry in inserted:
        assert trie.insert(*entry) is (entry not in stored)
        stored.add(entry)
    for i in removals:
        if i < len(inserted):
            entry = inserted[i]
            assert trie.remove(*entry) is (entry in stored)
            stored.discard(entry)
    assert trie.count == len(stored)
    assert Counter(trie.subscriptions()) == Counter(stored)
    for subject in probe:
        check(trie, stored, subject)
        check(trie, stored, subject)  # again, from the cache


@settings(max_examples=50, derandomize=True)
@given(patterns())
def test_generated_patterns_are_valid(pattern):
    assert is_valid_pattern(pattern)


class TrieMachine(RuleBasedStateMachine):
    """Interleaved inserts, removes and (cached) matches never disagree with the brute force."""

    def __init__(self):
        super().__init__()
        self.trie = SubjectTrie()
        self.stored: set = set()

    @rule(entry=entries)
    def insert(self, entry):
        gen = self.trie.generation
        added = self.trie.insert(*entry)
        assert added is (entry not in self.stored)
        assert self.trie.generation == gen + (1 if added else 0)
        self.stored.add(entry)

    @precondition(lambda self: self.stored)
    @rule(data=st.data())
    def remove(self, data):
        entry = data.draw(st.sampled_from(sorted(self.stored, key=repr)))
        assert self.trie.remove(*entry)
        self.stored.discard(entry)

    @rule(entry=entries)
    def remove_maybe_missing(self, entry):
        assert self.trie.remove(*entry) is (entry in self.stored)
        self.stored.discard(entry)

    @rule(subject=subjects)
    def match(self, subject):
        check(self.trie, self.stored, subject)

    @invariant()
    def count_matches(self):
        assert self.trie.count == len(self.stored)


TrieMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
test_trie_state_machine = TrieMachine.TestCase
