"""Wire field types of the Pravega segment-store protocol (pravega.md section 0).

Theory of operation
-------------------
Every field of every command in :mod:`adapters.pravega.commands` has a type
object from here. A type knows:

* ``fixed``: its size when it never varies, and ``fmt``, a big-endian
  :mod:`struct` code for plain scalars, so the command table can fuse a run
  of them into one precompiled ``struct.Struct`` (STYLE.md section 7);
* ``min_size``: its smallest encoding, so a list count that cannot fit in
  the bytes left is refused before any item is read (a DoS guard);
* ``read(buf, pos, end) -> (value, next_pos)``: decode one value without
  reading past ``end``; a short or malformed field raises
  :class:`~adapters.pravega.errors.PravegaProtocolError` (upstream closes
  the connection on any decode failure, section 1), never ``IndexError`` or
  ``struct.error``. Bytes are copied out once, so callers may pass a
  ``memoryview`` of their receive buffer and release it afterwards;
* ``write(out, value)``: append the encoding to a list of ``bytes``; a value
  that cannot be encoded is our own bug and raises ``ValueError``/``TypeError``;
* ``strategy()``: a hypothesis strategy of valid values (hypothesis is
  imported lazily, so production code never imports it).

Everything is big-endian and signed (Java ``DataOutput``). Values are plain
Python values (``int``, ``bool``, ``str``, ``bytes``, ``uuid.UUID``) or small
named tuples, so decoded commands compare by value.
"""

from __future__ import annotations

import re
import struct
import uuid
from collections import namedtuple
from typing import Any, NamedTuple

from .errors import PravegaProtocolError

# Sentinels (pravega.md section 0).
NULL_ATTRIBUTE_VALUE = -(1 << 63)  # Long.MIN_VALUE: "no value", e.g. a writer never seen
NO_VERSION = -(1 << 63)  # table key condition: unconditional
NOT_EXISTS = -1  # table key condition: the key must not exist

MAX_UTF = 0xFFFF  # writeUTF's u16 byte count (section 0)
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I32_PAIR = struct.Struct(">ii")
_ENCODE_ERRORS = (struct.error, TypeError, ValueError, OverflowError, AttributeError)


def snake(camel: str) -> str:
    """``requestId`` -> ``request_id``: pravega.md names fields in camelCase, Python in snake_case."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


ENDS_EARLY = "ends early"  # the reason for every field cut short by the frame's end


def _short() -> PravegaProtocolError:
    return PravegaProtocolError(ENDS_EARLY)


def _take(buf, pos: int, end: int, n: int) -> tuple[bytes, int]:
    """``n`` bytes at ``pos``, copied out (the caller's buffer may be a view it releases)."""
    if n > end - pos:
        raise _short()
    return bytes(buf[pos : pos + n]), pos + n


def _read_count(buf, pos: int, end: int, what: str) -> tuple[int, int]:
    """An ``i32`` length or count prefix; negative ones are malformed."""
    if end - pos < 4:
        raise _short()
    n = _I32.unpack_from(buf, pos)[0]
    if n < 0:
        raise PravegaProtocolError(f"negative {what} {n}")
    return n, pos + 4


class WireType:
    """Base of all field types; the module docstring gives the contract."""

    fixed: int | None = None
    fmt: str | None = None  # struct code (no byte-order prefix) for plain fixed scalars
    min_size = 0
    rest = False  # consumes the rest of the frame: only legal as a command's last field
    py: Any = object  # the Python type of decoded values, for dataclass annotations
    name = "?"

    def read(self, buf, pos: int, end: int) -> tuple[Any, int]:  # pragma: no cover - abstract
        raise NotImplementedError

    def write(self, out: list, value: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def strategy(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def valid(self, value: Any) -> bool:
        """True when ``value`` can be written (the command table checks defaults with it)."""
        try:
            self.write([], value)
        except _ENCODE_ERRORS:
            return False
        return True

    def __repr__(self) -> str:
        return self.name


class Int(WireType):
    """Signed big-endian integer: ``i8`` (scale/update types), ``i32``, ``i64``."""

    def __init__(self, fmt: str, name: str) -> None:
        self.fmt = fmt
        self._s = struct.Struct(">" + fmt)
        self.fixed = self.min_size = self._s.size
        self.name = name
        self.py = int
        self.lo, self.hi = -(1 << (8 * self.fixed - 1)), (1 << (8 * self.fixed - 1)) - 1

    def read(self, buf, pos, end):
        if end - pos < self.fixed:
            raise _short()
        return self._s.unpack_from(buf, pos)[0], pos + self.fixed

    def write(self, out, value):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{self.name} expects an int, got {value!r}")
        out.append(self._s.pack(value))

    def strategy(self):
        from hypothesis import strategies as st

        return st.integers(self.lo, self.hi)


I8 = Int("b", "i8")
I32 = Int("i", "i32")
I64 = Int("q", "i64")


class _Bool(WireType):
    """One byte; Java ``readBoolean`` takes any non-zero byte as true (section 0), and so
    does struct's ``?``, which lets booleans fuse with their integer neighbours."""

    fixed = min_size = 1
    fmt = "?"
    py = bool
    name = "bool"

    def read(self, buf, pos, end):
        if end - pos < 1:
            raise _short()
        return buf[pos] != 0, pos + 1

    def write(self, out, value):
        if not isinstance(value, bool):
            raise TypeError(f"bool expected, got {value!r}")
        out.append(b"\x01" if value else b"\x00")

    def strategy(self):
        from hypothesis import strategies as st

        return st.booleans()


Bool = _Bool()


class _Uuid(WireType):
    """16 bytes: most then least significant 64 bits, each big-endian = RFC 4122 order (section 0)."""

    fixed = min_size = 16
    py = uuid.UUID
    name = "uuid"

    def read(self, buf, pos, end):
        if end - pos < 16:
            raise _short()
        return uuid.UUID(bytes=bytes(buf[pos : pos + 16])), pos + 16

    def write(self, out, value):
        out.append(value.bytes)

    def strategy(self):
        from hypothesis import strategies as st

        return st.uuids()


Uuid = _Uuid()


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


class _Bytes(WireType):
    """Base of the types whose values are raw bytes."""

    py = bytes

    def strategy(self):
        from hypothesis import strategies as st

        return st.binary(max_size=32)


class _Blob(_Bytes):
    """``i32`` byte count + bytes. A negative count is malformed (Java would read it as empty
    in some commands; we refuse it, since no client writes one)."""

    min_size = 4
    name = "blob"

    def read(self, buf, pos, end):
        n, pos = _read_count(buf, pos, end, "length")
        return _take(buf, pos, end, n)

    def write(self, out, value):
        out.append(_I32.pack(len(value)))
        out.append(bytes(value))


Blob = _Blob()


class _Rest(_Bytes):
    """All remaining bytes of the frame, no own length (AppendBlock data, PartialEvent, Padding)."""

    rest = True
    name = "rest"

    def read(self, buf, pos, end):
        return bytes(buf[pos:end]), end

    def write(self, out, value):
        if isinstance(value, int):  # bytes(5) would silently be five zero bytes
            raise TypeError(f"bytes expected, got {value!r}")
        out.append(bytes(value))


Rest = _Rest()


class _EventFrame(_Bytes):
    """An embedded Event frame ``0: i32, len: i32, payload`` (ConditionalAppend, section 4.1).
    The value is the payload; the inner type must be 0 (upstream ``readEvent``)."""

    min_size = 8
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


EventFrame = _EventFrame()


class ListOf(WireType):
    """``count: i32`` then that many items (section 4: ``count i32 x item``); decodes to a tuple."""

    def __init__(self, item: WireType) -> None:
        self.item = item
        self.min_size = 4
        self.py = tuple
        self.name = f"list<{item.name}>"

    def read(self, buf, pos, end):
        n, pos = _read_count(buf, pos, end, "count")
        # Every item takes at least min_size bytes: a count that cannot fit is refused
        # before the loop, so a 4-byte frame cannot make us iterate 2**31 times.
        if n * self.item.min_size > end - pos:
            raise PravegaProtocolError(f"{n} items cannot fit in {end - pos} bytes")
        read = self.item.read
        items = []
        for _ in range(n):
            value, pos = read(buf, pos, end)
            items.append(value)
        return tuple(items), pos

    def write(self, out, value):
        out.append(_I32.pack(len(value)))
        for v in value:
            self.item.write(out, v)

    def strategy(self):
        from hypothesis import strategies as st

        return st.lists(self.item.strategy(), max_size=4).map(tuple)


class Record(WireType):
    """A fixed sequence of typed fields decoding to a named tuple (list items such as
    MergeSegments' attribute updates). ``fields`` are ``(camelName, type)`` as in pravega.md."""

    def __init__(self, name: str, fields: tuple[tuple[str, WireType], ...], module: str | None = None) -> None:
        self.name = name
        self.types = tuple(t for _, t in fields)
        self.cls = namedtuple(name, [snake(n) for n, _ in fields], module=module)
        self.py = self.cls
        self.min_size = sum(t.min_size for t in self.types)

    def read(self, buf, pos, end):
        values = []
        for t in self.types:
            v, pos = t.read(buf, pos, end)
            values.append(v)
        return self.cls(*values), pos

    def write(self, out, value):
        for t, v in zip(self.types, value, strict=True):
            t.write(out, v)

    def strategy(self):
        from hypothesis import strategies as st

        return st.builds(self.cls, *(t.strategy() for t in self.types))


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


TableEntries = ListOf(_TableEntryType())
TableKeys = ListOf(TableKeyType)

__all__ = [
    "Blob", "Bool", "ENDS_EARLY", "EventFrame", "I32", "I64", "I8", "Int", "ListOf", "MAX_UTF", "NOT_EXISTS",
    "NO_VERSION", "NULL_ATTRIBUTE_VALUE", "Record", "Rest", "TableEntries", "TableEntry", "TableKey",
    "TableKeyType", "TableKeys", "TableValueType", "Utf", "Uuid", "WireType", "decode_modified_utf8", "snake",
]
