"""Wire field types of the Pravega segment-store protocol (pravega.md section 0), on the shared engine.

Theory of operation
-------------------
Every field of every command in :mod:`adapters.pravega.commands` has a type
object from here. The contract (``fixed``/``fmt``, ``min_size``, ``read``,
``write``, ``strategy``) is :class:`adapters.wire.types.WireType`'s; this
module holds Pravega's conventions (:data:`PRAVEGA`: everything big-endian and
signed, Java ``DataOutput``; every decode failure a
:class:`~adapters.pravega.errors.PravegaProtocolError`, on which upstream
closes the connection, section 1), the primitive types built from them, and
the types only Pravega has (Java's modified UTF-8, embedded event frames,
table keys and entries).

Values are plain Python values (``int``, ``bool``, ``str``, ``bytes``,
``uuid.UUID``) or small named tuples, so decoded commands compare by value.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from adapters.wire import types as wt
from adapters.wire.types import ListOf, WireType

from .errors import PravegaProtocolError

# Sentinels (pravega.md section 0).
NULL_ATTRIBUTE_VALUE = -(1 << 63)  # Long.MIN_VALUE: "no value", e.g. a writer never seen
NO_VERSION = -(1 << 63)  # table key condition: unconditional
NOT_EXISTS = -1  # table key condition: the key must not exist

MAX_UTF = 0xFFFF  # writeUTF's u16 byte count (section 0)
_U16 = struct.Struct(">H")
_I64 = struct.Struct(">q")
_I32_PAIR = struct.Struct(">ii")

ENDS_EARLY = "ends early"  # the reason for every field cut short by the frame's end


def _short(_what: str = "") -> PravegaProtocolError:
    return PravegaProtocolError(ENDS_EARLY)


def _at(where: str, exc: PravegaProtocolError) -> PravegaProtocolError:
    return PravegaProtocolError(f"{where}: {exc.reason}")


# One layout per command (version 0): Pravega grows commands by optional trailing
# fields, not by versions. Codes fit a signed byte, sent as an i32 (section 1).
PRAVEGA = wt.Wire("pravega", ">", PravegaProtocolError, PravegaProtocolError, _short, at=_at,
                  codes=range(-128, 128), codes_about="a signed byte")

I8 = wt.Int(PRAVEGA, "b", "i8")  # scale and update types
I32 = wt.Int(PRAVEGA, "i", "i32")
I64 = wt.Int(PRAVEGA, "q", "i64")
# One byte; Java ``readBoolean`` takes any non-zero byte as true (section 0).
Bool = wt.Bool(PRAVEGA)
# 16 bytes: most then least significant 64 bits, each big-endian = RFC 4122 order (section 0).
Uuid = wt.Uuid(PRAVEGA)
# ``i32`` byte count + bytes. A negative count is malformed (Java would read it as empty
# in some commands; we refuse it, since no client writes one).
Blob = wt.Bytes(I32, "blob")
Rest = wt.Rest  # all remaining bytes of the frame (AppendBlock data, PartialEvent, Padding)


def _take(buf, pos: int, end: int, n: int) -> tuple[bytes, int]:
    """``n`` bytes at ``pos``, copied out (the caller's buffer may be a view it releases)."""
    if n > end - pos:
        raise _short()
    return bytes(buf[pos : pos + n]), pos + n


def decode_modified_utf8(raw: bytes) -> str:
    """Java's ``writeUTF`` form: UTF-8 except NUL as ``C0 80`` and characters beyond the BMP
    as two 3-byte surrogates (section 0). ``C0`` never starts valid UTF-8, so swapping the pair
    for NUL cannot change any other character; Python's ``surrogatepass`` reads the surrogates,
    and a UTF-16 round trip joins pairs and refuses lone ones. Raises ``UnicodeError``."""
    text = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
    return text.encode("utf-16-be", "surrogatepass").decode("utf-16-be")


class _Utf(WireType):
    """``u16`` byte count + text. Decodes standard UTF-8 (Rust) and modified UTF-8 (Java);
    encodes standard UTF-8, which is what both accept for Pravega's names (section 0)."""

    min_size = 2
    py = str
    name = "utf"

    def read(self, buf, pos, end):
        if end - pos < 2:
            raise _short()
        raw, pos = _take(buf, pos + 2, end, _U16.unpack_from(buf, pos)[0])
        try:
            return raw.decode("utf-8"), pos
        except UnicodeDecodeError:
            pass  # the rare Java form: NUL or a character outside the BMP
        try:
            return decode_modified_utf8(raw), pos
        except UnicodeError:
            raise PravegaProtocolError("invalid UTF-8") from None

    def write(self, out, value):
        if not isinstance(value, str):
            raise TypeError(f"str expected, got {value!r}")
        data = value.encode("utf-8")
        if len(data) > MAX_UTF:
            raise ValueError(f"utf string of {len(data)} bytes exceeds {MAX_UTF}")
        out.append(_U16.pack(len(data)))
        out.append(data)

    def strategy(self):
        from hypothesis import strategies as st

        return st.text(max_size=20)  # no surrogates by default: every value encodes


Utf = _Utf()


class _EventFrame(WireType):
    """An embedded Event frame ``0: i32, len: i32, payload`` (ConditionalAppend, section 4.1).
    The value is the payload; the inner type must be 0 (upstream ``readEvent``)."""

    min_size = 8
    py = bytes
    name = "event"

    def read(self, buf, pos, end):
        if end - pos < 8:
            raise _short()
        code, n = _I32_PAIR.unpack_from(buf, pos)
        if code != 0:
            raise PravegaProtocolError(f"event frame type {code}, expected 0")
        if n < 0:
            raise PravegaProtocolError(f"negative length {n}")
        return _take(buf, pos + 8, end, n)

    def write(self, out, value):
        out.append(_I32_PAIR.pack(0, len(value)))
        out.append(bytes(value))

    def strategy(self):
        from hypothesis import strategies as st

        return st.binary(max_size=32)


EventFrame = _EventFrame()


# -- table segments (section 4.5) ----------------------------------------------------------


class TableKey(NamedTuple):
    """A table key and its version (a position, or NO_VERSION / NOT_EXISTS as a condition)."""

    key: bytes
    version: int


class TableEntry(NamedTuple):
    """One (TableKey, TableValue) pair of a TableEntries list, flattened."""

    key: bytes
    version: int
    value: bytes


_KEY_EMPTY_JAVA = 4  # payloadLen of the doc's Java empty key: keyLen only, no version
_KEY_OVERHEAD = 4 + 8  # payloadLen = keyLen field + key + version


def _sized_header(buf, pos: int, end: int, what: str) -> tuple[int, int, int]:
    """TableKey/TableValue start: ``payloadLen i32``, ``dataLen i32`` -> (payloadLen, dataLen, pos)."""
    if end - pos < 8:
        raise _short()
    payload_len, n = _I32_PAIR.unpack_from(buf, pos)
    if n < 0:
        raise PravegaProtocolError(f"negative {what} length {n}")
    return payload_len, n, pos + 8


def _check_payload_len(what: str, payload_len: int, expected: int) -> None:
    # Both clients write exactly this; a different value means a misframed entry.
    if payload_len != expected:
        raise PravegaProtocolError(f"{what} payload length {payload_len} != {expected}")


def _write_sized(out: list, data: bytes, overhead: int) -> None:
    out.append(_I32_PAIR.pack(len(data) + overhead, len(data)))
    out.append(bytes(data))


class _TableKeyType(WireType):
    """``payloadLen i32`` (= 4 + keyLen + 8), ``keyLen i32``, key, ``version i64``.

    Java leaves the version out of an empty key (section 4.5); the doc gives that form as
    ``payloadLen == 4``, and a key read in it gets Java's ``TableKey.EMPTY`` version,
    NO_VERSION. We always write the version (Rust reads strictly)."""

    min_size = 8
    py = TableKey
    name = "table_key"

    def read(self, buf, pos, end):
        payload_len, n, pos = _sized_header(buf, pos, end, "key")
        if n == 0 and payload_len == _KEY_EMPTY_JAVA:
            return TableKey(b"", NO_VERSION), pos
        _check_payload_len("key", payload_len, n + _KEY_OVERHEAD)
        if n + 8 > end - pos:
            raise _short()
        key = bytes(buf[pos : pos + n])
        return TableKey(key, _I64.unpack_from(buf, pos + n)[0]), pos + n + 8

    def write(self, out, value):
        key, version = value
        _write_sized(out, key, _KEY_OVERHEAD)
        out.append(_I64.pack(version))

    def strategy(self):
        from hypothesis import strategies as st

        return st.builds(TableKey, st.binary(max_size=16), I64.strategy())


TableKeyType = _TableKeyType()


class _TableValueType(WireType):
    """``payloadLen i32`` (= 4 + valueLen), ``valueLen i32``, value; decodes to the bytes."""

    min_size = 8
    py = bytes
    name = "table_value"

    def read(self, buf, pos, end):
        payload_len, n, pos = _sized_header(buf, pos, end, "value")
        _check_payload_len("value", payload_len, n + 4)
        return _take(buf, pos, end, n)

    def write(self, out, value):
        _write_sized(out, value, 4)

    def strategy(self):
        from hypothesis import strategies as st

        return st.binary(max_size=16)


TableValueType = _TableValueType()


class _TableEntryType(WireType):
    """A TableKey followed by a TableValue, as one :class:`TableEntry`."""

    min_size = TableKeyType.min_size + TableValueType.min_size
    py = TableEntry
    name = "table_entry"

    def read(self, buf, pos, end):
        (key, version), pos = TableKeyType.read(buf, pos, end)
        value, pos = TableValueType.read(buf, pos, end)
        return TableEntry(key, version, value), pos

    def write(self, out, value):
        TableKeyType.write(out, (value.key, value.version))
        TableValueType.write(out, value.value)

    def strategy(self):
        from hypothesis import strategies as st

        return st.builds(TableEntry, st.binary(max_size=16), I64.strategy(), st.binary(max_size=16))


TableEntries = ListOf(I32, _TableEntryType())
TableKeys = ListOf(I32, TableKeyType)

__all__ = [
    "Blob", "Bool", "ENDS_EARLY", "EventFrame", "I32", "I64", "I8", "MAX_UTF", "NOT_EXISTS", "NO_VERSION",
    "NULL_ATTRIBUTE_VALUE", "PRAVEGA", "Rest", "TableEntries", "TableEntry", "TableKey", "TableKeyType", "TableKeys",
    "TableValueType", "Utf", "Uuid", "decode_modified_utf8",
]
