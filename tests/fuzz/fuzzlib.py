"""Helpers shared by the fuzz targets (tests/fuzz/targets_*.py).

A target is ``def target(data: bytes) -> None``: it feeds ``data`` to one decoder
and returns when the decoder either accepted it or refused it with the error its
docstring documents (the protocol's own error). Anything else escapes and is a
crash: libFuzzer under atheris stops on it (tests/fuzz/run.py), the smoke test
fails on it (tests/fuzz/test_fuzz_smoke.py).

Where a target needs choices (which command, which dialect or version), it takes
them from the first bytes of the input with :class:`Picker`, so every input maps
to exactly one run and a crash replays from its file alone.
"""

from __future__ import annotations


class Picker:
    """Reads small choices off the front of a fuzz input; the rest is the body."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        """The next byte, or 0 past the end (short inputs still pick something)."""
        if self.pos >= len(self.data):
            return 0
        b = self.data[self.pos]
        self.pos += 1
        return b

    def pick(self, options):
        """One of ``options`` (a sequence), chosen by the next byte."""
        return options[self.byte() % len(options)]

    def rest(self) -> bytes:
        return self.data[self.pos:]


def outcome(fn, errors, *args, **kwargs):
    """``("ok", value)`` or ``("err", exc)`` for one of ``errors``; anything else raises."""
    try:
        return "ok", fn(*args, **kwargs)
    except errors as exc:
        return "err", exc


class Mismatch(AssertionError):
    """A target's own check failed: a round trip or a compiled loop and its Python twin disagree."""


def check(cond: bool, what: str) -> None:
    """Raise :class:`Mismatch` unless ``cond`` (not ``assert``: it must hold under ``python -O``)."""
    if not cond:
        raise Mismatch(what)


def chunks(data: bytes, cuts: bytes):
    """``data`` split at the points ``cuts`` names (each byte a chunk length 1..256), to
    feed a streaming decoder the same bytes in pieces (STYLE.md 6.1: whole and in parts)."""
    pos = 0
    for c in cuts:
        if pos >= len(data):
            return
        step = c + 1
        yield data[pos:pos + step]
        pos += step
    if pos < len(data):
        yield data[pos:]
