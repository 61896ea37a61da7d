"""The field-type protocol and the primitive field types, per byte order and error factory.

Theory of operation
-------------------
Every field of every declared message has a *type* object. A type knows:

* ``fixed``: its size in bytes when it never varies (``None`` otherwise),
  and ``fmt``, a :mod:`struct` code without byte-order prefix for plain
  scalars, so :mod:`adapters.wire.table` can fuse a run of them into one
  precompiled ``struct.Struct`` (STYLE.md section 7);
* ``min_size``: its smallest encoding, so an unbounded list count that cannot
  fit in the bytes left is refused before any item is read (a DoS guard);
* ``rest``: it takes every byte up to the end of the body (legal only last);
* ``py``: the Python type of decoded values (dataclass annotations);
* ``read(buf, pos, end) -> (value, next_pos)``: decode one value without
  reading past ``end``; a short or malformed field raises the protocol's own
  decode error (``Wire.short`` / ``Wire.error``), never ``IndexError`` or
  ``struct.error``. Bytes are copied out, so callers may pass a
  ``memoryview`` of their receive buffer and release it afterwards;
* ``write(out, value)``: append the encoding to a list of ``bytes``; a value
  the wire cannot carry is our own bug and raises ``ValueError``/``TypeError``;
* ``strategy()``: a hypothesis strategy of valid values (hypothesis is
  imported lazily, so production code never imports it).

A protocol describes itself once, as a :class:`Wire`, and builds its
primitive types from it (``U32 = Int(IGGY, "I", "u32")``, ``I32 = Int(PRAVEGA,
"i", "i32")``); its own composite types (Iggy's identifiers, Pravega's table
keys) implement the same protocol next to its declarations.

Length-prefixed values (:class:`Bytes`, :class:`Text`, :class:`ListOf`) take
their count as any integer type: a fixed :class:`Int` or an unsigned
:class:`UVarInt`. Two options cover the common variants: ``nullable`` (a
count of -1 after ``offset`` is ``None``, any other negative count is
malformed) and ``offset`` (the wire carries count + offset: 1 for the
"compact" forms whose wire 0 means null, 0 otherwise).
"""

from __future__ import annotations

import re
import struct
import uuid
from collections import namedtuple
from dataclasses import dataclass
from typing import Any, Callable

# What writing a value the wire cannot carry raises (valid() catches these).
ENCODE_ERRORS = (struct.error, TypeError, ValueError, OverflowError, AttributeError)


@dataclass(frozen=True)
class Wire:
    """One protocol's conventions, the parameters of the engine.

    ``short(what)`` is the decode error for a value cut short by the end of the
    body (``what`` names the type or the struct); ``error(reason)`` every other
    decode error; both return instances of ``error_type``. ``at(where, exc)``,
    when set, restates a field's decode error with the field's name
    (``"Command.field"``), as Pravega's reasons do; without it a field's error
    passes unchanged (Iggy's carry a status code the type chose) and a cut-short
    run of fused fields is reported for the struct. ``versions`` is the set of
    layout versions field ranges name (Iggy's dialects; ``(0,)`` for a protocol
    with one layout per message); ``codes`` the legal command codes."""

    name: str
    order: str  # struct byte-order prefix: "<" little-endian (Iggy), ">" big-endian (Pravega, Kafka)
    error_type: type[Exception]
    error: Callable[[str], Exception]
    short: Callable[[str], Exception]
    at: Callable[[str, Exception], Exception] | None = None
    versions: tuple[int, ...] = (0,)
    codes: range = range(-(1 << 31), 1 << 31)
    codes_about: str = "an i32"


def snake(camel: str) -> str:
    """``requestId`` -> ``request_id``: specs name fields in camelCase, Python in snake_case."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


class WireType:
    """Base of all field types; the module docstring gives the contract."""

    fixed: int | None = None
    fmt: str | None = None  # struct code (no byte-order prefix) for plain fixed scalars
    min_size = 0
    rest = False  # consumes the rest of the body: only legal as the last field
    py: Any = Any  # the Python type of decoded values, for dataclass annotations
    name = "?"

    def read(self, buf, pos: int, end: int) -> tuple[Any, int]:  # pragma: no cover - abstract
        raise NotImplementedError

    def write(self, out: list, value: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def strategy(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def size(self, value: Any) -> int:
        """Bytes of ``value`` on the wire."""
        if self.fixed is not None:
            return self.fixed
        out: list = []
        self.write(out, value)
        return sum(len(b) for b in out)

    def valid(self, value: Any) -> bool:
        """True when ``value`` can be written (tables check defaults with it)."""
        try:
            self.write([], value)
        except ENCODE_ERRORS:
            return False
        return True

    def __repr__(self) -> str:
        return self.name


class Int(WireType):
    """Fixed-width integer in the wire's byte order; the struct code says width and sign
    (``B H I Q`` unsigned, ``b h i q`` signed)."""

    def __init__(self, wire: Wire, fmt: str, name: str) -> None:
        self.wire = wire
        self.fmt = fmt
        self._s = struct.Struct(wire.order + fmt)
        self.fixed = self.min_size = self._s.size
        self.name = name
        self.py = int
        bits = 8 * self.fixed
        self.lo, self.hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if fmt.islower() else (0, (1 << bits) - 1)

    def read(self, buf, pos, end):
        if end - pos < self.fixed:
            raise self.wire.short(self.name)
        return self._s.unpack_from(buf, pos)[0], pos + self.fixed

    def write(self, out, value):
        if isinstance(value, bool) or not isinstance(value, int):  # struct would take True as 1
            raise TypeError(f"{self.name} expects an int, got {value!r}")
        out.append(self._s.pack(value))

    def strategy(self):
        from hypothesis import strategies as st

        return st.integers(self.lo, self.hi)


class UVarInt(WireType):
    """An unsigned integer of at most ``bits`` bits in base-128 groups, low group first, the
    high bit of each byte saying another follows (protobuf's and Kafka's unsigned varint).
    Longer than ``bits`` needs, or a value beyond ``bits``, is malformed."""

    min_size = 1
    py = int

    def __init__(self, wire: Wire, bits: int = 32, name: str = "uvarint") -> None:
        self.wire = wire
        self.bits = bits
        self.max_bytes = (bits + 6) // 7
        self.lo, self.hi = 0, (1 << bits) - 1
        self.name = name

    def read(self, buf, pos, end):
        return read_uvarint(self.wire, buf, pos, end, self.bits, self.name)

    def write(self, out, value):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{self.name} expects an int, got {value!r}")
        if not self.lo <= value <= self.hi:
            raise ValueError(f"{value} does not fit {self.name}")
        out.append(uvarint_bytes(value))

    def size(self, value):
        return len(uvarint_bytes(value))

    def strategy(self):
        from hypothesis import strategies as st

        return st.integers(self.lo, self.hi)


class VarInt(UVarInt):
    """A signed integer of at most ``bits`` bits, zigzag-mapped (0, -1, 1, -2 -> 0, 1, 2, 3)
    so small magnitudes stay short, then written as a :class:`UVarInt`."""

    def __init__(self, wire: Wire, bits: int = 32, name: str = "varint") -> None:
        super().__init__(wire, bits, name)
        self.hi_unsigned = self.hi
        self.lo, self.hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def read(self, buf, pos, end):
        u, pos = read_uvarint(self.wire, buf, pos, end, self.bits, self.name)
        return (u >> 1) ^ -(u & 1), pos

    def write(self, out, value):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{self.name} expects an int, got {value!r}")
        if not self.lo <= value <= self.hi:
            raise ValueError(f"{value} does not fit {self.name}")
        out.append(uvarint_bytes(self._zigzag(value)))

    def size(self, value):
        return len(uvarint_bytes(self._zigzag(value)))

    def _zigzag(self, value: int) -> int:
        return ((value << 1) ^ (value >> (self.bits - 1))) & self.hi_unsigned


ONE_BYTE = tuple(bytes((u,)) for u in range(0x80))  # the one-byte encodings, made once (hot in record loops)


def uvarint_bytes(value: int) -> bytes:
    """The base-128 encoding of a non-negative ``value`` (:class:`UVarInt`)."""
    if value < 0x80:
        return ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint(wire: Wire, buf, pos: int, end: int, bits: int = 32, what: str = "uvarint") -> tuple[int, int]:
    """Decode one :class:`UVarInt` of at most ``bits`` bits at ``pos``: ``(value, next_pos)``."""
    value = shift = 0
    limit = pos + (bits + 6) // 7
    stop = min(end, limit)
    while pos < stop:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value >> bits:
                raise wire.error(f"{what} exceeds {bits} bits")
            return value, pos
        shift += 7
    if pos == limit:
        raise wire.error(f"{what} longer than {(bits + 6) // 7} bytes")
    raise wire.short(what)


class Float(WireType):
    """IEEE 754 binary32 (``f``) or binary64 (``d``) in the wire's byte order. Read on its
    own, not fused into runs (no ``fmt``): a body cut short inside one names the float."""

    def __init__(self, wire: Wire, fmt: str, name: str) -> None:
        self.wire = wire
        self._s = struct.Struct(wire.order + fmt)
        self.fixed = self.min_size = self._s.size
        self.name = name
        self.py = float

    def read(self, buf, pos, end):
        if end - pos < self.fixed:
            raise self.wire.short(self.name)
        return self._s.unpack_from(buf, pos)[0], pos + self.fixed

    def write(self, out, value):
        out.append(self._s.pack(value))

    def strategy(self):
        from hypothesis import strategies as st

        return st.floats(width=8 * self.fixed, allow_nan=False)


class Bool(WireType):
    """A one-byte flag. By default any non-zero byte is true (Java's ``readBoolean``,
    Kafka), as struct's ``?`` reads it, so such flags fuse with their integer
    neighbours. ``only_one``: only 1 is true, anything else false (Iggy, iggy.md
    section 3.6), read on its own."""

    fixed = min_size = 1
    py = bool
    name = "bool"

    def __init__(self, wire: Wire, *, only_one: bool = False) -> None:
        self.wire = wire
        self.only_one = only_one
        self.fmt = None if only_one else "?"

    def read(self, buf, pos, end):
        if end - pos < 1:
            raise self.wire.short(self.name)
        return (buf[pos] == 1 if self.only_one else buf[pos] != 0), pos + 1

    def write(self, out, value):
        if not isinstance(value, bool):
            raise TypeError(f"bool expected, got {value!r}")
        out.append(b"\x01" if value else b"\x00")

    def strategy(self):
        from hypothesis import strategies as st

        return st.booleans()


class Bytes(WireType):
    """Raw bytes after a byte count of type ``count``; a negative count is malformed
    (no client writes one) unless ``nullable`` makes -1 (after ``offset``) ``None``
    (module docstring). ``max_bytes``: the longest value a peer accepts (a longer one
    is malformed when read)."""

    py = bytes

    def __init__(self, count: WireType, name: str, *, nullable: bool = False, offset: int = 0,
                 max_bytes: int | None = None) -> None:
        self.count = count
        self.wire = count.wire
        self.min_size = count.min_size
        self.name = name
        self.nullable = nullable
        self.offset = offset
        self.max_bytes = max_bytes
        # The plain form (fixed count, not nullable) packs its count in one call.
        self._plain = isinstance(count, Int) and not nullable and offset == 0

    def read(self, buf, pos, end):
        n, pos = self.count.read(buf, pos, end)
        n -= self.offset
        if n < 0:
            if n == -1 and self.nullable:
                return None, pos
            raise self.wire.error(f"negative length {n}")
        if self.max_bytes is not None and n > self.max_bytes:
            raise self.wire.error(f"{self.name} of {n} bytes exceeds {self.max_bytes}")
        if n > end - pos:
            raise self.wire.short(self.name)
        return bytes(buf[pos : pos + n]), pos + n

    def write(self, out, value):
        if self._plain:
            out.append(self.count._s.pack(len(value)))
        elif value is None:
            if not self.nullable:
                raise TypeError(f"{self.name} is not nullable")
            self.count.write(out, self.offset - 1)
            return
        else:
            if isinstance(value, int):  # bytes(5) would silently be five zero bytes
                raise TypeError(f"bytes expected, got {value!r}")
            self.count.write(out, len(value) + self.offset)
        out.append(bytes(value))

    def strategy(self):
        from hypothesis import strategies as st

        values = st.binary(max_size=64)
        return st.none() | values if self.nullable else values


class Text(Bytes):
    """UTF-8 text, laid out as :class:`Bytes` (count, ``nullable``, ``offset``,
    ``max_bytes``; a longer value is also refused when written). Invalid UTF-8 is
    malformed."""

    py = str

    def __init__(self, count: WireType, name: str, *, nullable: bool = False, offset: int = 0,
                 max_bytes: int | None = None) -> None:
        super().__init__(count, name, nullable=nullable, offset=offset, max_bytes=max_bytes)
        self._plain = False  # values are encoded first (write)

    def read(self, buf, pos, end):
        raw, pos = super().read(buf, pos, end)
        if raw is None:
            return None, pos
        try:
            return raw.decode("utf-8"), pos
        except UnicodeDecodeError:
            raise self.wire.error(f"{self.name}: invalid UTF-8") from None

    def write(self, out, value):
        if value is None:
            super().write(out, None)
            return
        if not isinstance(value, str):
            raise TypeError(f"str expected, got {value!r}")
        data = value.encode("utf-8")
        if self.max_bytes is not None and len(data) > self.max_bytes:
            raise ValueError(f"{self.name} of {len(data)} bytes exceeds {self.max_bytes}")
        super().write(out, data)

    def strategy(self):
        from hypothesis import strategies as st

        values = st.text(max_size=20)  # no lone surrogates by default: every value encodes
        return st.none() | values if self.nullable else values


class _Rest(WireType):
    """Every byte up to the end of the body, no own length (Iggy's VSR options,
    Pravega's AppendBlock data). Only legal last (the table checks)."""

    rest = True
    py = bytes
    name = "rest"

    def read(self, buf, pos, end):
        return bytes(buf[pos:end]), end

    def write(self, out, value):
        if isinstance(value, int):  # bytes(5) would silently be five zero bytes
            raise TypeError(f"bytes expected, got {value!r}")
        out.append(bytes(value))

    def strategy(self):
        from hypothesis import strategies as st

        return st.binary(max_size=64)


Rest = _Rest()


class Uuid(WireType):
    """16 bytes: most then least significant 64 bits, each big-endian, which is RFC 4122
    order whatever the wire's byte order (Pravega's writer ids, Kafka's UUID)."""

    fixed = min_size = 16
    py = uuid.UUID
    name = "uuid"

    def __init__(self, wire: Wire) -> None:
        self.wire = wire

    def read(self, buf, pos, end):
        if end - pos < 16:
            raise self.wire.short(self.name)
        return uuid.UUID(bytes=bytes(buf[pos : pos + 16])), pos + 16

    def write(self, out, value):
        out.append(value.bytes)

    def strategy(self):
        from hypothesis import strategies as st

        return st.uuids()


class ListOf(WireType):
    """A count of type ``count``, then that many ``item`` values; decodes to a tuple.

    With ``max_items`` a larger count is refused; without, a count whose items cannot
    fit in the bytes left (``item.min_size`` each, at least one byte) is refused before
    the loop, so a 4-byte body cannot make us iterate 2**31 times. A negative count is
    malformed, unless ``nullable`` makes -1 (after ``offset``) ``None`` (module docstring)."""

    def __init__(self, count: WireType, item: WireType, max_items: int | None = None, *,
                 nullable: bool = False, offset: int = 0) -> None:
        self.count = count
        self.item = item
        self.max_items = max_items
        self.nullable = nullable
        self.offset = offset
        self.wire = count.wire
        self.min_size = count.min_size
        self.py = tuple
        self.name = f"list<{item.name}>"

    def read(self, buf, pos, end):
        n, pos = self.count.read(buf, pos, end)
        n -= self.offset
        if n < 0:
            if n == -1 and self.nullable:
                return None, pos
            raise self.wire.error(f"negative count {n}")
        if self.max_items is not None:
            if n > self.max_items:
                raise self.wire.error(f"{self.name}: {n} items")
        elif n * max(1, self.item.min_size) > end - pos:
            raise self.wire.error(f"{n} items cannot fit in {end - pos} bytes")
        read = self.item.read
        items = []
        for _ in range(n):
            value, pos = read(buf, pos, end)
            items.append(value)
        return tuple(items), pos

    def write(self, out, value):
        if value is None:
            if not self.nullable:
                raise TypeError(f"{self.name} is not nullable")
            self.count.write(out, self.offset - 1)
            return
        if self.max_items is not None and len(value) > self.max_items:
            raise ValueError("too many items")
        self.count.write(out, len(value) + self.offset)
        for v in value:
            self.item.write(out, v)

    def strategy(self):
        from hypothesis import strategies as st

        most = 4 if self.max_items is None else min(self.max_items, 8)
        values = st.lists(self.item.strategy(), max_size=most).map(tuple)
        return st.none() | values if self.nullable else values


class Record(WireType):
    """A fixed sequence of typed fields decoding to a named tuple (list items such as
    Pravega's attribute updates). ``fields`` are ``(specName, type)``; the tuple's
    fields are their snake_case forms."""

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


__all__ = ["Bool", "Bytes", "ENCODE_ERRORS", "Float", "Int", "ListOf", "Record", "Rest", "Text", "UVarInt", "Uuid",
           "VarInt", "Wire", "WireType", "read_uvarint", "snake", "uvarint_bytes"]
