"""NATS header blocks (ADR-4, seeds/002_*): parse and encode.

A block is ``NATS/1.0[ <status>[ <description>]]\\r\\n``, then ``Key: Value\\r\\n``
lines, then an empty line ``\\r\\n``; ``HPUB``'s ``#hdr bytes`` counts all of it.
Keys repeat and keep their order and case (ADR-4: operations are
case-sensitive and case-preserving); the status line is not a header.

nats-server never parses a client's block (it forwards the bytes, nats.md
section 8), so nothing here runs on the NATS-to-NATS path. This module is for
translating to other protocols, and it is strict where ADR-4 and RFC 822 are:
keys are printable ASCII (33..126) without ``:``, values hold no CR or LF,
lines end in CRLF, the block ends with exactly one empty line. Anything else
raises :class:`~adapters.nats.errors.NatsHeaderError`. Values are trimmed of
surrounding spaces and tabs (RFC 7230 optional whitespace, as Go's
``textproto``, nats-py and nats.js do), so only values without surrounding
whitespace survive a round trip unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .errors import NatsHeaderError

VERSION_LINE = b"NATS/1.0"  # ADR-4: the only header version so far
EMPTY_BLOCK = b"NATS/1.0\r\n\r\n"  # 12 bytes; nats-py turns it into headers=None
NO_RESPONDERS_STATUS = "503"  # nats.md section 9
CRLF = b"\r\n"
_OWS = b" \t"

# Encoded blocks are cached by value: publishers tend to repeat the same
# header lines (a fixed content type, a tracing key), and nats-server itself
# avoids re-encoding repeated headers. 256 distinct blocks are a few KiB.
ENCODE_CACHE_SIZE = 256

# ADR-4 quoting RFC 822 section 3.1.2: field names are printable ASCII, 33..126, except ":".
_KEY_CHARS = bytes(c for c in range(33, 127) if c != ord(":"))


@dataclass(frozen=True, slots=True)
class HeaderBlock:
    """One parsed block: ordered ``(key, value)`` pairs plus the optional status.

    ``status`` is ``""`` or three ASCII digits (``"503"``, ``"404"``, ``"100"``);
    ``description`` may follow it (``"No Messages"``).
    """

    items: tuple[tuple[str, str], ...] = ()
    status: str = ""
    description: str = ""

    def get(self, key: str) -> str | None:
        """The first value of ``key`` (case-sensitive, ADR-4 GET), or None."""
        for k, v in self.items:
            if k == key:
                return v
        return None

    def get_all(self, key: str) -> list[str]:
        """Every value of ``key`` in order (case-sensitive, ADR-4 VALUES)."""
        return [v for k, v in self.items if k == key]


def _check_key(key: bytes) -> None:
    if not key or key.translate(None, _KEY_CHARS):
        raise NatsHeaderError(f"invalid header key {key!r}")


def _check_text(value: bytes, what: str) -> None:
    if b"\r" in value or b"\n" in value:
        raise NatsHeaderError(f"CR or LF inside a header {what}: {value!r}")


def _parse_status(line: bytes) -> tuple[str, str]:
    """The part of the version line after ``NATS/1.0``: ``(status, description)``."""
    if not line:
        return "", ""
    if line[0] not in _OWS:
        raise NatsHeaderError(f"bad version line {VERSION_LINE + line!r}")
    _check_text(line, "status line")
    code, _, desc = line.strip(_OWS).partition(b" ")
    if len(code) != 3 or not code.isdigit():
        raise NatsHeaderError(f"bad status code {code!r}")
    return code.decode("ascii"), desc.strip(_OWS).decode("utf-8", "surrogateescape")


def parse_headers(block: bytes | bytearray | memoryview) -> HeaderBlock:
    """Parse one whole header block (exactly ``#hdr bytes`` long).

    Returns a :class:`HeaderBlock`; raises :class:`NatsHeaderError` when the
    block is not ADR-4 shaped (wrong version, bad key, missing or extra bytes
    around the final empty line, bare CR or LF, folded lines).
    """
    data = bytes(block)
    if not data.startswith(VERSION_LINE):
        raise NatsHeaderError("header block does not start with NATS/1.0")
    end = data.find(CRLF)
    if end < 0:
        raise NatsHeaderError("header version line has no CRLF")
    status, description = _parse_status(data[len(VERSION_LINE):end])
    items: list[tuple[str, str]] = []
    pos = end + 2
    while True:
        end = data.find(CRLF, pos)
        if end < 0:
            raise NatsHeaderError("header block does not end with an empty line")
        if end == pos:
            if end + 2 != len(data):
                raise NatsHeaderError("bytes after the header block's empty line")
            return HeaderBlock(tuple(items), status, description)
        line = data[pos:end]
        colon = line.find(b":")
        if colon < 0:
            raise NatsHeaderError(f"header line without ':' {line!r}")
        key = line[:colon]
        _check_key(key)  # also refuses a folded line (starts with SP/HTAB)
        value = line[colon + 1:]
        _check_text(value, "value")
        items.append((key.decode("ascii"), value.strip(_OWS).decode("utf-8", "surrogateescape")))
        pos = end + 2


def encode_headers(block: HeaderBlock) -> bytes:
    """The wire form of ``block``; ``parse_headers`` of it gives ``block`` back
    when no value has surrounding whitespace. Raises :class:`NatsHeaderError`
    for a key or value that cannot be written (see the module docstring)."""
    return _encode_cached(block)


@lru_cache(maxsize=ENCODE_CACHE_SIZE)
def _encode_cached(block: HeaderBlock) -> bytes:
    parts = [VERSION_LINE]
    if block.status:
        code = block.status.encode("ascii", "replace")
        if len(code) != 3 or not code.isdigit():
            raise NatsHeaderError(f"bad status code {block.status!r}")
        parts += (b" ", code)
        if block.description:
            desc = block.description.encode("utf-8", "surrogateescape")
            _check_text(desc, "status description")
            parts += (b" ", desc)
    elif block.description:
        raise NatsHeaderError("a status description needs a status code")
    parts.append(CRLF)
    for key, value in block.items:
        kb = key.encode("utf-8", "surrogateescape")
        _check_key(kb)
        vb = value.encode("utf-8", "surrogateescape")
        _check_text(vb, "value")
        parts += (kb, b": ", vb, CRLF)
    parts.append(CRLF)
    return b"".join(parts)


def no_responders_block(subject: str) -> bytes:
    """The 503 block nats-server sends for a request nobody answered (nats.md
    section 9): ``NATS/1.0 503\\r\\nNats-Subject: <subject>\\r\\n\\r\\n``, 32 bytes
    plus the subject."""
    return (b"NATS/1.0 503\r\nNats-Subject: " + subject.encode("utf-8", "surrogateescape")
            + b"\r\n\r\n")


__all__ = [
    "EMPTY_BLOCK", "ENCODE_CACHE_SIZE", "HeaderBlock", "NO_RESPONDERS_STATUS", "VERSION_LINE",
    "encode_headers", "no_responders_block", "parse_headers",
]
