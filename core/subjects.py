"""NATS subjects: validation and the subscription trie ("sublist").

Theory of operation
-------------------
A subject is a string of tokens separated by ``.`` (../shared/protocols/nats.md
section 6). A subscription *pattern* may use two whole-token wildcards: ``*``
matches exactly one token and ``>`` matches one or more trailing tokens, so it
may only be the last token. A token such as ``b*`` or ``a>`` is a literal.
Validation follows nats-server ``server/sublist.go`` (``isValidSubject``,
``IsValidLiteralSubject``): no empty subject, no empty token (so no leading,
trailing or doubled dot), no token containing one of `` \\t\\n\\r\\f``, nothing
after ``>``.

:class:`SubjectTrie` stores subscriptions in a tree of levels, one level per
token, where each node keeps its literal children in a dict plus two separate
slots for a ``*`` child and a ``>`` child (the shape of nats-server's
``level``/``node``). :meth:`SubjectTrie.match` walks the levels breadth first,
following at each token the literal child, the ``*`` child, and collecting the
subscribers of the ``>`` child, so its cost depends on the number of tokens
and of wildcard branches, not on the number of subscriptions. A subject is
split once; no regular expressions are used.

Results are cached by subject. Every insert or remove moves the trie's
``generation`` counter (nats-server's ``genid``) and the cache is dropped the
next time :meth:`SubjectTrie.match` sees the counter has moved (STYLE.md
section 7). Cached results are immutable and shared between callers.

Subscribers are opaque hashable objects. Each ``(pattern, queue, subscriber)``
triple is stored once; a subscriber reached through several matching patterns
appears once in a result's ``plain`` tuple, and once per queue group.

Publish subjects are not validated by :meth:`SubjectTrie.match`: nats-server
without ``pedantic`` delivers ``PUB a.*`` as the literal subject ``a.*``
(nats.md section 6), and so does this trie: a ``*`` token in a published
subject is plain text, matched only by ``*`` and ``>`` patterns. A subject
with an empty token matches nothing, as in nats-server's ``Sublist.match``.

This module is pure and synchronous; it imports no trio.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Hashable, Iterator, Mapping

from .errors import InvalidSubject

PWC = "*"  # partial wildcard: exactly one token
FWC = ">"  # full wildcard: one or more trailing tokens
SEP = "."

# The characters nats-server refuses inside a token (``isValidSubject`` in
# server/sublist.go checks exactly this set); the protocol parser also splits
# arguments on them, so they can never arrive inside a SUB subject.
_BAD_TOKEN_CHARS = frozenset(" \t\n\r\f")

# Result-cache bound and the size a full cache is trimmed to. Same numbers
# as nats-server's sublist (``slCacheMax = 1024``, ``slCacheSweep = 256`` in
# server/sublist.go): enough to keep every hot subject of a busy connection
# set, while a client publishing on endless unique subjects (inbox replies,
# ids in subjects) cannot grow memory without limit.
MAX_CACHED_RESULTS = 1024
CACHE_TRIM_TO = 256

Subscriber = Hashable


# -- validation ---------------------------------------------------------------
def _valid_tokens(tokens: list[str], allow_wildcards: bool) -> bool:
    last = len(tokens) - 1
    bad = _BAD_TOKEN_CHARS
    for i, tok in enumerate(tokens):
        if not tok:
            return False
        if len(tok) == 1:
            if tok == FWC:
                if not allow_wildcards or i != last:
                    return False
            elif tok == PWC:
                if not allow_wildcards:
                    return False
            elif tok in bad:
                return False
        elif not bad.isdisjoint(tok):
            return False
    return True


def is_valid_pattern(pattern: str) -> bool:
    """True if ``pattern`` is a valid subscription subject (wildcards allowed).

    ``>`` and ``*`` alone are valid (``SUB >`` receives everything)."""
    if not pattern or not isinstance(pattern, str):
        return False
    return _valid_tokens(pattern.split(SEP), True)


def is_valid_subject(subject: str) -> bool:
    """True if ``subject`` is a valid *publish* subject: valid and literal.

    This is nats-server's ``IsValidLiteralSubject``, what ``pedantic`` mode
    checks on publish."""
    if not subject or not isinstance(subject, str):
        return False
    return _valid_tokens(subject.split(SEP), False)


def is_literal(subject: str) -> bool:
    """True if no token of ``subject`` is a wildcard (``*`` or ``>`` alone).

    Does not check validity (nats-server's ``subjectIsLiteral``):
    ``a.b*`` is literal, ``a.*`` is not."""
    for tok in subject.split(SEP):
        if tok == PWC or tok == FWC:
            return False
    return True


def subject_matches(pattern: str, subject: str) -> bool:
    """Brute-force reference matcher: does ``subject`` match ``pattern``?

    ``pattern`` must be valid (:func:`is_valid_pattern`), else
    :class:`~core.errors.InvalidSubject` is raised. ``subject`` is treated as
    literal tokens, like :meth:`SubjectTrie.match`; a subject with an empty
    token matches nothing.
    """
    if not is_valid_pattern(pattern):
        raise InvalidSubject(f"invalid subject pattern {pattern!r}")
    stoks = subject.split(SEP)
    if "" in stoks:
        return False
    ptoks = pattern.split(SEP)
    for i, ptok in enumerate(ptoks):
        if ptok == FWC:
            return len(stoks) > i
        if i >= len(stoks):
            return False
        if ptok != PWC and ptok != stoks[i]:
            return False
    return len(ptoks) == len(stoks)


# -- results ----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class MatchResult:
    """Who receives a message published on one subject.

    ``plain``: every matching non-queue subscriber, each once.
    ``queues``: queue name -> the matching members of that group (each once);
    deliver to one member per group (nats.md section 7). Both are read-only
    and shared through the cache: never mutate them.
    """

    plain: tuple[Subscriber, ...]
    queues: Mapping[str, tuple[Subscriber, ...]]

    @property
    def empty(self) -> bool:
        """True when nobody is interested in the subject."""
        return not self.plain and not self.queues


EMPTY_RESULT = MatchResult((), MappingProxyType({}))


# -- the trie ---------------------------------------------------------------
class _Node:
    """One token position: the subscriptions ending here and the next level."""

    __slots__ = ("children", "pwc", "fwc", "plain", "queues")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.pwc: _Node | None = None
        self.fwc: _Node | None = None
        # dicts used as insertion-ordered sets of subscribers
        self.plain: dict[Subscriber, None] = {}
        self.queues: dict[str, dict[Subscriber, None]] = {}

    def is_empty(self) -> bool:
        return not (self.children or self.pwc or self.fwc or self.plain or self.queues)


class _Collector:
    """Accumulates one match result; dicts keep first-seen order and dedupe."""

    __slots__ = ("plain", "queues")

    def __init__(self) -> None:
        self.plain: dict[Subscriber, None] = {}
        self.queues: dict[str, dict[Subscriber, None]] = {}

    def add(self, node: _Node) -> None:
        if node.plain:
            self.plain.update(node.plain)
        if node.queues:
            for name, members in node.queues.items():
                got = self.queues.get(name)
                if got is None:
                    self.queues[name] = dict(members)
                else:
                    got.update(members)

    def result(self) -> MatchResult:
        if not self.plain and not self.queues:
            return EMPTY_RESULT
        queues = {name: tuple(members) for name, members in self.queues.items()}
        return MatchResult(tuple(self.plain), MappingProxyType(queues))


class SubjectTrie:
    """Subscriptions by subject pattern, with NATS matching semantics.

    ``generation`` moves on every change that took effect; ``count`` (also
    ``len(trie)``) is the number of stored ``(pattern, queue, subscriber)``
    subscriptions. Synchronous and not thread-safe (the trio thread owns it).
    """

    def __init__(self) -> None:
        self._root = _Node()
        self._count = 0
        self.generation = 0
        self._cache: dict[str, MatchResult] = {}
        self._cache_generation = 0

    @property
    def count(self) -> int:
        return self._count

    def __len__(self) -> int:
        return self._count

    # -- changes -------------------------------------------------------------
    def insert(self, pattern: str, sub: Subscriber, queue: str | None = None) -> bool:
        """Subscribe ``sub`` to ``pattern`` (in queue group ``queue`` if given).

        Returns ``False`` if that exact subscription already existed (nothing
        changes). ``queue=""`` means no queue group (nats-py's default).
        Raises :class:`~core.errors.InvalidSubject` for an invalid pattern.
        """
        tokens = _pattern_tokens(pattern)
        node = self._root
        for tok in tokens:
            node = _child_for_insert(node, tok)
        if queue:
            members = node.queues.get(queue)
            if members is None:
                members = node.queues[queue] = {}
            if sub in members:
                return False
            members[sub] = None
        else:
            if sub in node.plain:
                return False
            node.plain[sub] = None
        self._changed(+1)
        return True

    def remove(self, pattern: str, sub: Subscriber, queue: str | None = None) -> bool:
        """Remove one subscription; returns ``False`` if it was not there.

        Nodes left without subscriptions or children are pruned.
        Raises :class:`~core.errors.InvalidSubject` for an invalid pattern.
        """
        tokens = _pattern_tokens(pattern)
        path: list[tuple[_Node, str]] = []
        node = self._root
        for tok in tokens:
            nxt = _child_for_lookup(node, tok)
            if nxt is None:
                return False
            path.append((node, tok))
            node = nxt
        if not _discard(node, sub, queue or None):
            return False
        _prune(path, node)
        self._changed(-1)
        return True

    def _changed(self, delta: int) -> None:
        self._count += delta
        self.generation += 1

    # -- lookups ---------------------------------------------------------
    def match(self, subject: str) -> MatchResult:
        """Subscribers of every pattern that matches the published ``subject``.

        Cached by subject until the next change; an empty subject or one with
        an empty token matches nothing (and is not cached)."""
        if self._cache_generation != self.generation:
            self._cache = {}
            self._cache_generation = self.generation
        else:
            hit = self._cache.get(subject)
            if hit is not None:
                return hit
        tokens = subject.split(SEP)
        if "" in tokens:
            return EMPTY_RESULT
        result = self._walk(tokens)
        cache = self._cache
        if len(cache) >= MAX_CACHED_RESULTS:
            _trim(cache)
        cache[subject] = result
        return result

    def _walk(self, tokens: list[str]) -> MatchResult:
        out = _Collector()
        level = [self._root]
        for tok in tokens:
            nxt: list[_Node] = []
            for node in level:
                if node.fwc is not None:
                    out.add(node.fwc)
                if node.pwc is not None:
                    nxt.append(node.pwc)
                child = node.children.get(tok)
                if child is not None:
                    nxt.append(child)
            if not nxt:
                return out.result()
            level = nxt
        for node in level:
            out.add(node)
        return out.result()

    def subscriptions(self) -> Iterator[tuple[str, Subscriber, str | None]]:
        """Every stored ``(pattern, subscriber, queue)``, for monitoring and tests."""
        stack: list[tuple[_Node, tuple[str, ...]]] = [(self._root, ())]
        while stack:
            node, prefix = stack.pop()
            if prefix:
                pattern = SEP.join(prefix)
                for sub in node.plain:
                    yield pattern, sub, None
                for name, members in node.queues.items():
                    for sub in members:
                        yield pattern, sub, name
            for tok, child in node.children.items():
                stack.append((child, prefix + (tok,)))
            if node.pwc is not None:
                stack.append((node.pwc, prefix + (PWC,)))
            if node.fwc is not None:
                stack.append((node.fwc, prefix + (FWC,)))


# -- helpers ----------------------------------------------------------------
def _pattern_tokens(pattern: str) -> list[str]:
    if not isinstance(pattern, str) or not pattern:
        raise InvalidSubject(f"invalid subject {pattern!r}")
    tokens = pattern.split(SEP)
    if not _valid_tokens(tokens, True):
        raise InvalidSubject(f"invalid subject {pattern!r}")
    return tokens


def _child_for_insert(node: _Node, tok: str) -> _Node:
    if tok == PWC:
        if node.pwc is None:
            node.pwc = _Node()
        return node.pwc
    if tok == FWC:
        if node.fwc is None:
            node.fwc = _Node()
        return node.fwc
    child = node.children.get(tok)
    if child is None:
        child = node.children[tok] = _Node()
    return child


def _child_for_lookup(node: _Node, tok: str) -> _Node | None:
    if tok == PWC:
        return node.pwc
    if tok == FWC:
        return node.fwc
    return node.children.get(tok)


def _discard(node: _Node, sub: Subscriber, queue: str | None) -> bool:
    if queue is None:
        if sub not in node.plain:
            return False
        del node.plain[sub]
        return True
    members = node.queues.get(queue)
    if members is None or sub not in members:
        return False
    del members[sub]
    if not members:
        del node.queues[queue]
    return True


def _prune(path: list[tuple[_Node, str]], node: _Node) -> None:
    """Unlink empty nodes from the leaf upwards (nats-server prunes the same way)."""
    for parent, tok in reversed(path):
        if not node.is_empty():
            return
        if tok == PWC:
            parent.pwc = None
        elif tok == FWC:
            parent.fwc = None
        else:
            del parent.children[tok]
        node = parent


def _trim(cache: dict[str, MatchResult]) -> None:
    """Drop the oldest entries down to ``CACHE_TRIM_TO`` (nats-server sweeps at
    random; insertion order is as good and costs nothing to track)."""
    excess = len(cache) - CACHE_TRIM_TO
    for key in list(cache)[:excess]:
        del cache[key]


__all__ = [
    "CACHE_TRIM_TO",
    "EMPTY_RESULT",
    "FWC",
    "MAX_CACHED_RESULTS",
    "MatchResult",
    "PWC",
    "SubjectTrie",
    "is_literal",
    "is_valid_pattern",
    "is_valid_subject",
    "subject_matches",
]
