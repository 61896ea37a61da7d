"""NATS header blocks <-> canonical typed headers (docs/headers.md).

Theory of operation
-------------------
A NATS header block (ADR-4) is an ordered list of text ``Key: Value`` lines;
Ferry's canonical headers (``core.message.Headers``) are an ordered list of
``(key, value)`` pairs where each side carries one of the 15 kinds.

*NATS -> canonical* (:func:`nats_to_canonical`): every line becomes a
string/string pair, order and repeated keys kept; the status line is not a
header. If the block carries the reserved ``Ferry-Header-Kinds`` line (which
Ferry itself adds on delivery), the entries it lists get their kinds back, so
a message that travelled canonical -> NATS -> canonical is unchanged. The
reserved lines (``ferry-nats-subject``, ``Ferry-Header-Kinds``) from the
client are dropped; the publish subject is added as ``ferry-nats-subject``.

*canonical -> NATS* (:func:`canonical_to_nats`): string/string pairs whose key
is a valid NATS header name and whose value survives ADR-4 text (no CR/LF, no
surrounding blanks) go out as they are. Every other pair is written in its
text form (``HeaderValue.to_text``) and listed in one ``Ferry-Header-Kinds``
line appended at the end. Its value is a comma-separated list of entries
``<index>:<key kind>:<value kind>[:<flags>]`` where ``index`` counts the
block's lines from 0, kinds are the JSON kind names (``string``, ``uint64``,
...) and ``flags`` holds ``k`` when the key text is base64url (not a valid
NATS header name) and ``v`` when a string value is base64 (it held CR/LF or
surrounding blanks). Raw values are always base64 (that is their text form).

What the canonical form cannot hold is a documented loss (docs/headers.md):
canonical values are 1..255 bytes (seed 000), so a NATS header with an empty
value is not stored, and a key or value over 255 bytes makes the message
unstorable (:class:`~core.errors.InvalidHeaderValue` from this module; the
NATS adapter still delivers it live and answers a PubAck error).
"""

from __future__ import annotations

import base64
import binascii

from core.addressing import KINDS_HEADER, RESERVED_NATS_HEADERS, SUBJECT_HEADER, stored_subject
from core.errors import InvalidHeaderKey, InvalidHeaderValue
from core.header_value import HeaderKind, HeaderValue
from core.message import Headers

from .errors import NatsHeaderError
from .headers import HeaderBlock, encode_headers, parse_headers

_STRING = HeaderKind.STRING
_KINDS_LOWER = KINDS_HEADER.lower()
# ADR-4 / RFC 822 field names: printable ASCII 33..126 except ":".
_KEY_OK = frozenset(c for c in range(33, 127) if c != ord(":"))
_OWS = " \t"
# A kinds line lists at most one entry per header line; a block holds at most
# MAX_HEADERS_SIZE bytes, so this bound only guards against a hostile line.
MAX_KIND_ENTRIES = 10_000


def _nats_key_ok(text: str) -> bool:
    data = text.encode("utf-8", "surrogateescape")
    return bool(data) and all(c in _KEY_OK for c in data)


def _text_value_ok(text: str) -> bool:
    return "\r" not in text and "\n" not in text and text == text.strip(_OWS)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii")


def canonical_to_nats(tlv: bytes | memoryview, *, drop_subject: bool = True) -> bytes:
    """The NATS header block for a canonical TLV block (``Headers.encode()``),
    ``b""`` when there is nothing to send. ``ferry-nats-subject`` is left out
    when ``drop_subject`` (the MSG subject line carries it)."""
    if not tlv:
        return b""
    headers = Headers.decode(tlv)
    items: list[tuple[str, str]] = []
    kinds: list[str] = []
    for key, value in headers:
        kflag = vflag = ""
        if key.kind is _STRING:
            ktext = key.as_str()
            if drop_subject and ktext == SUBJECT_HEADER:
                continue
            if not _nats_key_ok(ktext) or ktext.lower() in RESERVED_NATS_HEADERS:
                ktext, kflag = _b64url(key.data), "k"
        else:
            ktext = key.to_text()
            if not _nats_key_ok(ktext):
                ktext, kflag = _b64url(ktext.encode()), "k"
        vtext = value.to_text()
        if value.kind is _STRING and not _text_value_ok(vtext):
            vtext, vflag = base64.b64encode(value.data).decode("ascii"), "v"
        if key.kind is not _STRING or value.kind is not _STRING or kflag or vflag:
            entry = f"{len(items)}:{key.kind.json_name}:{value.kind.json_name}"
            kinds.append(entry + (":" + kflag + vflag if kflag or vflag else ""))
        items.append((ktext, vtext))
    if kinds:
        items.append((KINDS_HEADER, ",".join(kinds)))
    if not items:
        return b""
    return encode_headers(HeaderBlock(tuple(items)))


def _parse_kinds(text: str) -> dict[int, tuple[HeaderKind, HeaderKind, str]]:
    """Entries of a ``Ferry-Header-Kinds`` value; a malformed value yields
    ``{}`` (every line then stays string/string: nothing is lost)."""
    out: dict[int, tuple[HeaderKind, HeaderKind, str]] = {}
    entries = text.split(",")
    if len(entries) > MAX_KIND_ENTRIES:
        return {}
    try:
        for entry in entries:
            parts = entry.strip().split(":")
            if len(parts) not in (3, 4) or not parts[0].isdigit():
                return {}
            flags = parts[3] if len(parts) == 4 else ""
            if set(flags) - {"k", "v"}:
                return {}
            out[int(parts[0])] = (HeaderKind.from_json_name(parts[1]),
                                  HeaderKind.from_json_name(parts[2]), flags)
    except Exception:  # noqa: BLE001 - unknown kind names: treat the line as absent
        return {}
    return out


def _typed(kind: HeaderKind, text: str, b64: bool, urlsafe: bool) -> HeaderValue:
    if b64:
        try:
            data = (base64.urlsafe_b64decode(text) if urlsafe else base64.b64decode(text, validate=True))
        except (binascii.Error, ValueError) as exc:
            raise InvalidHeaderValue("header text flagged base64 is not base64") from exc
        if kind is _STRING:
            return HeaderValue(_STRING, data)
        text = data.decode("utf-8", "strict")
    return HeaderValue.from_text(kind, text)


def block_to_headers(block: HeaderBlock) -> Headers:
    """Canonical headers for a parsed NATS block (reserved lines dropped,
    kinds restored from ``Ferry-Header-Kinds`` when it is present and valid).

    Raises InvalidHeaderKey / InvalidHeaderValue when a line cannot be held
    canonically (over 255 bytes); empty values are skipped (docs/headers.md)."""
    kinds: dict[int, tuple[HeaderKind, HeaderKind, str]] = {}
    for k, v in block.items:
        if k.lower() == _KINDS_LOWER:
            kinds = _parse_kinds(v)
    headers = Headers()
    index = -1
    for k, v in block.items:
        index += 1
        if k.lower() in RESERVED_NATS_HEADERS:
            continue
        spec = kinds.get(index)
        if spec is not None:
            kkind, vkind, flags = spec
            try:
                key = _typed(kkind, k, "k" in flags, urlsafe=True)
                value = _typed(vkind, v, "v" in flags, urlsafe=False)
            except (InvalidHeaderKey, InvalidHeaderValue, UnicodeDecodeError):
                pass  # not what Ferry wrote: keep the text as it came
            else:
                headers.add(key, value)
                continue
        if not v:
            continue  # canonical values are 1..255 bytes: documented loss
        headers.add(HeaderValue.string(k), HeaderValue.string(v))
    return headers


def nats_to_canonical(block: bytes, subject: str) -> bytes:
    """The canonical TLV block to store for a captured NATS publish: the
    client's headers (see :func:`block_to_headers`) plus ``ferry-nats-subject``.

    Raises NatsHeaderError for a block that is not ADR-4, InvalidHeaderKey /
    InvalidHeaderValue / HeadersTooLarge when it cannot be held canonically."""
    return block_to_canonical(parse_headers(block) if block else None, subject)


def block_to_canonical(block: HeaderBlock | None, subject: str) -> bytes:
    """:func:`nats_to_canonical` for a block the caller has already parsed."""
    headers = block_to_headers(block) if block is not None else Headers()
    headers.add(SUBJECT_HEADER, subject)
    return headers.encode()


__all__ = ["MAX_KIND_ENTRIES", "NatsHeaderError", "block_to_canonical", "block_to_headers", "canonical_to_nats",
           "nats_to_canonical", "stored_subject"]
