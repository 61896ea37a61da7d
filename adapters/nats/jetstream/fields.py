"""One string header of a stored record, without decoding the block (no trio).

:func:`msg_id_of` (``Nats-Msg-Id``) and :func:`index_headers` (``Nats-Rollup``,
``Nats-TTL``) are the JetStream headers the streams read this way.

Theory of operation
-------------------
Rebuilding a stream's per-subject state or its msg-id window reads one or
two headers of every record (the stored subject, ``Nats-Msg-Id``).
``Headers.decode`` builds and validates every pair first: profiled at about
20 us of a record's 35 us on this machine (issue 30), most of the cost of
reading a long stream. The stored block is the canonical TLV (``u8 kind,
u32 length, bytes`` for a key, then for its value; docs/internals.md
"Message model"), written only after validation, so :func:`header_str` walks
it by the lengths alone and compares keys as bytes. It answers what
``Headers.decode(block).get(key)`` answers for a STRING key and value (the
first pair with that key); on anything unexpected (a truncated block, a
value of another kind) it hands the block to the caller's ``slow`` lookup
(the decoding one it replaces), so errors and odd blocks behave exactly as
before.
"""

from __future__ import annotations

import struct
from functools import partial
from typing import Callable

from core.message import HeaderKind, Headers

from .index import ROLLUP_HEADER, TTL_HEADER, parse_ttl

MSG_ID_HEADER = "Nats-Msg-Id"
_MSG_ID_KEY = MSG_ID_HEADER.encode()
_ROLLUP_KEY, _TTL_KEY = ROLLUP_HEADER.encode(), TTL_HEADER.encode()

_HEAD = struct.Struct("<BI")                 # kind, length
_STRING = int(HeaderKind.STRING)


def header_str(tlv, key: bytes, slow: Callable[[object], str | None]) -> str | None:
    """The first STRING value under the STRING key ``key`` in a stored header
    block, None when there is none; ``slow(tlv)`` answers the blocks this walk
    does not (see the theory above)."""
    end = len(tlv)
    if not end:
        return None
    pos, size, unpack = 0, _HEAD.size, _HEAD.unpack_from
    try:
        while pos < end:
            kkind, klen = unpack(tlv, pos)
            kstart = pos + size
            vpos = kstart + klen
            vkind, vlen = unpack(tlv, vpos)
            pos = vpos + size + vlen
            if klen == len(key) and kkind == _STRING and tlv[kstart:vpos] == key:
                if vkind != _STRING or pos > end:
                    return slow(tlv)                  # not the plain case: let Headers say
                return str(tlv[vpos + size:pos], "utf-8")
        if pos == end:
            return None
    except (struct.error, UnicodeDecodeError):
        pass
    return slow(tlv)


def msg_id_of(tlv) -> str | None:
    return header_str(tlv, _MSG_ID_KEY, partial(_decoded_str, MSG_ID_HEADER)) if len(tlv) else None


def index_headers(tlv) -> tuple[str | None, int]:
    """A record's ``Nats-Rollup`` value and ``Nats-TTL`` seconds (0: none)."""
    if not len(tlv):
        return None, 0
    rollup = header_str(tlv, _ROLLUP_KEY, partial(_decoded_str, ROLLUP_HEADER))
    ttl = header_str(tlv, _TTL_KEY, partial(_decoded_str, TTL_HEADER))
    seconds = 0
    if ttl is not None:
        try:
            seconds = parse_ttl(ttl)
        except ValueError:
            seconds = 0
    return rollup, seconds


def _decoded_str(key: str, tlv) -> str | None:
    value = Headers.decode(tlv).get(key)
    return value.as_str() if value is not None else None


__all__ = ["MSG_ID_HEADER", "header_str", "index_headers", "msg_id_of"]
