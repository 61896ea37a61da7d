"""A reader for the subset of nats-server's configuration format Ferry uses (no I/O).

Theory of operation
-------------------
nats-server's config files (``nats-server -c FILE``) are a relaxed JSON:
``key: value``, ``key = value`` or ``key value``; a block ``key { ... }``
needs no separator; entries end at a newline, ``,`` or ``;``; arrays are
``[a, b]`` (commas or newlines); ``#`` and ``//`` start comments; strings may
be double-quoted, single-quoted or bare. Bare values are typed the way
nats-server's lexer types them: ``true/false/yes/no/on/off`` are booleans,
digits are integers (with size suffixes: ``k``/``m``/``g``/``t`` are powers
of 1000, ``kb``/``ki``/``kib`` and friends powers of 1024), digits with one
``.`` are floats, anything else is a string (``2s``, ``0.0.0.0:4222``).
``$NAME`` refers to a variable set earlier in an enclosing block, else to an
environment variable (as nats-server resolves them).

:func:`parse` takes the text and returns nested ``dict``/``list`` values; it
raises :class:`NatsConfError` naming the line. ``include`` is refused (Ferry
reads one file). Keys are returned as written; nats-server matches them
without regard to case, so :func:`lookup` does too.

This module is pure: the caller reads the file and supplies the environment.
"""

from __future__ import annotations

from typing import Any, Mapping

from core.errors import InvalidArgument

# A config file is a few KiB; this bounds nesting so a hostile file cannot
# exhaust the interpreter's stack (a DoS guard, not a nats-server limit).
MAX_DEPTH = 32
_BOOLS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}
# Integer suffixes as nats-server's config parser reads them.
_SUFFIXES = {"k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4,
             "kb": 1024, "ki": 1024, "kib": 1024, "mb": 1024**2, "mi": 1024**2, "mib": 1024**2,
             "gb": 1024**3, "gi": 1024**3, "gib": 1024**3, "tb": 1024**4, "ti": 1024**4, "tib": 1024**4}
_EOF = "\x00"  # what peek() returns at the end; a NUL in the file ends it too
_BLANK = " \t\r"
_END_BARE = set(" \t\r\n,;]}#")
_KEY_END = set(" \t\r\n=:{[,;#}")
_VAR_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


class NatsConfError(InvalidArgument):
    """The file is not valid nats-server config; the message names the line."""


def parse(text: str, env: Mapping[str, str] | None = None, source: str = "config") -> dict[str, Any]:
    """The document as nested dicts and lists (keys in file order).

    ``env`` resolves ``$NAME`` references no block defines. Raises
    :class:`NatsConfError`."""
    parser = _Parser(text, env or {}, source)
    return parser.document()


def lookup(table: Mapping[str, Any], *names: str, default: Any = None) -> Any:
    """The first of ``names`` present in ``table``, compared without case."""
    lowered = {k.lower(): v for k, v in table.items()}
    for name in names:
        if name.lower() in lowered:
            return lowered[name.lower()]
    return default


class _Parser:
    def __init__(self, text: str, env: Mapping[str, str], source: str) -> None:
        self.text = text
        self.pos = 0
        self.env = env
        self.source = source
        self.scopes: list[dict[str, Any]] = []
        self.depth = 0

    # -- helpers ------------------------------------------------------------------
    def error(self, what: str) -> NatsConfError:
        line = self.text.count("\n", 0, self.pos) + 1
        return NatsConfError(f"{self.source}:{line}: {what}")

    def peek(self) -> str:
        """The next character, or ``_EOF`` (never a member of the sets below)."""
        return self.text[self.pos] if self.pos < len(self.text) else _EOF

    def skip(self, newlines: bool) -> None:
        """Skip blanks and comments (and newlines when asked)."""
        text, n = self.text, len(self.text)
        while self.pos < n:
            c = text[self.pos]
            if c in _BLANK or (newlines and c == "\n"):
                self.pos += 1
            elif c == "#" or text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = n if end < 0 else end
            else:
                return

    def nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"blocks nested deeper than {MAX_DEPTH}")

    # -- grammar ------------------------------------------------------------------
    def document(self) -> dict[str, Any]:
        self.skip(newlines=True)
        if self.peek() == "{":      # a whole-file JSON object is accepted too
            self.pos += 1
            table = self.entries(closer="}")
            self.skip(newlines=True)
            if self.peek() != _EOF:
                raise self.error("text after the closing '}'")
            return table
        return self.entries(closer=_EOF)

    def entries(self, closer: str) -> dict[str, Any]:
        table: dict[str, Any] = {}
        self.scopes.append(table)
        self.nest()
        while True:
            self.skip(newlines=True)
            c = self.peek()
            if c in ",;":
                self.pos += 1
                continue
            if c == closer:
                self.pos += c != _EOF
                break
            if c == _EOF or c in "}]":
                raise self.error(f"unexpected {'end of file' if c == _EOF else c!r}")
            key = self.key()
            if key.lower() == "include":
                raise self.error("include is not supported: put everything in one file")
            self.skip(newlines=False)
            if self.peek() in "=:":
                self.pos += 1
                self.skip(newlines=False)
            table[key] = self.value()
        self.scopes.pop()
        self.depth -= 1
        return table

    def key(self) -> str:
        c = self.peek()
        if c in "\"'":
            return self.quoted()
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in _KEY_END:
            self.pos += 1
        if self.pos == start:
            raise self.error(f"expected a key, found {c!r}")
        return self.text[start:self.pos]

    def value(self) -> Any:
        c = self.peek()
        if c == "{":
            self.pos += 1
            return self.entries(closer="}")
        if c == "[":
            self.pos += 1
            return self.array()
        if c in "\"'":
            return self.quoted()
        if c == _EOF or c in "\n,;]}#":
            raise self.error("a key without a value")
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in _END_BARE:
            self.pos += 1
        return self.bare(self.text[start:self.pos])

    def array(self) -> list[Any]:
        items: list[Any] = []
        self.nest()
        while True:
            self.skip(newlines=True)
            c = self.peek()
            if c == ",":
                self.pos += 1
                continue
            if c == "]":
                self.pos += 1
                self.depth -= 1
                return items
            if c == _EOF:
                raise self.error("unterminated array")
            items.append(self.value())

    def quoted(self) -> str:
        quote, text = self.text[self.pos], self.text
        end = self.pos + 1
        while end < len(text) and text[end] != quote and text[end] != "\n":
            end += 2 if quote == '"' and text[end] == "\\" else 1
        if end >= len(text) or text[end] != quote:
            raise self.error("unterminated string")
        raw = self.text[self.pos + 1:end]
        self.pos = end + 1
        if quote == '"' and "\\" in raw:
            raw = _unescape(raw)
        return raw

    def bare(self, word: str) -> Any:
        if word.startswith("$") and len(word) > 1 and set(word[1:]) <= _VAR_CHARS:
            return self.variable(word[1:])
        low = word.lower()
        if low in _BOOLS:
            return _BOOLS[low]
        digits = len(word) - len(word.lstrip("-0123456789"))
        number, suffix = word[:digits], word[digits:].lower()
        if number and number.lstrip("-").isdigit():
            if not suffix:
                return int(number)
            if suffix in _SUFFIXES:
                return int(number) * _SUFFIXES[suffix]
            if suffix[0] == "." and suffix[1:].isdigit():
                return float(word)
        return word

    def variable(self, name: str) -> Any:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name in self.env:
            return self.env[name]
        raise self.error(f"variable reference ${name} is not defined")


def _unescape(raw: str) -> str:
    out, i = [], 0
    escapes = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}
    while i < len(raw):
        c = raw[i]
        if c == "\\" and i + 1 < len(raw) and raw[i + 1] in escapes:
            out.append(escapes[raw[i + 1]])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


__all__ = ["MAX_DEPTH", "NatsConfError", "lookup", "parse"]
