"""Wire field types of the Iggy protocol, on the shared engine (adapters/wire/types.py).

Theory of operation
-------------------
Every field of every Iggy command or response body has a type object here.
The contract (``fixed``/``fmt``, ``read``, ``write``, ``strategy``) is
:class:`adapters.wire.types.WireType`'s; this module holds Iggy's conventions
(:data:`IGGY`: little-endian everywhere, protocols/iggy.md "Conventions";
decode errors are :class:`~adapters.iggy.errors.IggyStatus`, ``INVALID_COMMAND``
unless a more precise Iggy code exists), the primitive types built from
them, and the types only Iggy has (identifiers, consumers, partitioning,
polling strategies, has-flag optionals).

Values are plain Python values or small named tuples, so decoded commands
compare by value and round-trip tests can say ``decode(encode(x)) == x``.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from adapters.wire import types as wt
from adapters.wire.types import Int, Wire, WireType

from .errors import IggyError, IggyStatus

DIALECTS = (1, 2, 3, 4, 5)  # adapters/iggy/spec.py's docstring says which client each one is
_MAX_STR8 = 255  # u8 length prefix


def _short(what: str) -> IggyStatus:
    return IggyStatus(IggyError.INVALID_COMMAND, f"{what}: frame ends early")


def _invalid(reason: str) -> IggyStatus:
    return IggyStatus(IggyError.INVALID_COMMAND, reason)


IGGY = Wire("iggy", "<", IggyStatus, _invalid, _short, versions=DIALECTS, codes=range(1, 1 << 32),
            codes_about="a u32")

U8 = Int(IGGY, "B", "u8")
U16 = Int(IGGY, "H", "u16")
U32 = Int(IGGY, "I", "u32")
U64 = Int(IGGY, "Q", "u64")
F32 = wt.Float(IGGY, "f", "f32")  # Stats' CPU percentages (iggy.md 5.x Stats table)
Bool = wt.Bool(IGGY, only_one=True)  # u8 flag: 1 is true, anything else false (iggy.md section 3.6)
Bytes32 = wt.Bytes(U32, "bytes32")  # VSR option blocks, login context


class _U128(WireType):
    fixed = 16
    name = "u128"
    _s = struct.Struct("<QQ")

    def read(self, buf, pos, end):
        if end - pos < 16:
            raise _short(self.name)
        lo, hi = self._s.unpack_from(buf, pos)
        return lo | (hi << 64), pos + 16

    def write(self, out, value):
        if not 0 <= value < 1 << 128:
            raise ValueError("u128 out of range")
        out.append(self._s.pack(value & 0xFFFFFFFFFFFFFFFF, value >> 64))

    def strategy(self):
        from hypothesis import strategies as st

        return st.integers(0, (1 << 128) - 1)


U128 = _U128()


class Text(WireType):
    """UTF-8 text after a u8 (``Str8``) or u32 (``Str32``) byte count."""

    def __init__(self, prefix: Int, name: str, max_len: int, min_len: int = 0) -> None:
        self.prefix = prefix
        self.name = name
        self.max_len = max_len
        self.min_len = min_len

    def read(self, buf, pos, end):
        n, pos = self.prefix.read(buf, pos, end)
        if n > end - pos:
            raise _short(self.name)
        try:
            text = bytes(buf[pos : pos + n]).decode("utf-8")
        except UnicodeDecodeError:
            raise IggyStatus(IggyError.INVALID_COMMAND, f"{self.name} is not UTF-8") from None
        return text, pos + n

    def write(self, out, value):
        data = value.encode("utf-8")
        if not self.min_len <= len(data) <= self.max_len:
            raise ValueError(f"{self.name} of {len(data)} bytes")
        self.prefix.write(out, len(data))
        out.append(data)

    def strategy(self):
        from hypothesis import strategies as st

        return st.text(max_size=min(self.max_len, 40)).filter(
            lambda s: self.min_len <= len(s.encode("utf-8")) <= self.max_len
        )


Str8 = Text(U8, "str8", _MAX_STR8)
Str32 = Text(U32, "str32", 1 << 20)  # login version/context strings; bounded by the frame limit


class _Identifier(WireType):
    """``u8 kind (1 numeric, 2 string), u8 len, value`` (iggy.md section 3.1).

    Decodes to an ``int`` (numeric) or a ``str`` (name)."""

    name = "identifier"

    def read(self, buf, pos, end):
        if end - pos < 2:
            raise _short(self.name)
        kind, n = buf[pos], buf[pos + 1]
        pos += 2
        if n > end - pos:
            raise _short(self.name)
        if kind == 1:
            if n != 4:  # numeric ids are exactly a u32 (iggy.md 3.1 -> InvalidIdentifier)
                raise IggyStatus(IggyError.INVALID_IDENTIFIER, "numeric identifier must be 4 bytes")
            return struct.unpack_from("<I", buf, pos)[0], pos + 4
        if kind == 2:
            if n == 0:
                raise IggyStatus(IggyError.INVALID_IDENTIFIER, "empty string identifier")
            try:
                return bytes(buf[pos : pos + n]).decode("utf-8"), pos + n
            except UnicodeDecodeError:
                raise IggyStatus(IggyError.INVALID_IDENTIFIER, "identifier is not UTF-8") from None
        raise IggyStatus(IggyError.INVALID_COMMAND, f"unknown identifier kind {kind}")

    def write(self, out, value):
        if isinstance(value, bool):
            raise TypeError("identifier must be int or str")
        if isinstance(value, int):
            out.append(struct.pack("<BBI", 1, 4, value))
            return
        data = value.encode("utf-8")
        if not 1 <= len(data) <= _MAX_STR8:
            raise ValueError("string identifier must be 1..255 bytes")
        out.append(bytes((2, len(data))))
        out.append(data)

    def strategy(self):
        from hypothesis import strategies as st

        return st.one_of(
            st.integers(0, 0xFFFFFFFF),
            st.text(min_size=1, max_size=30).filter(lambda s: len(s.encode()) <= _MAX_STR8),
        )


Identifier = _Identifier()


class ConsumerId(NamedTuple):
    kind: int  # 1 single consumer, 2 consumer group
    id: int | str


class _Consumer(WireType):
    """``u8 kind, Identifier`` (iggy.md section 3.2; the seed's ``u32 id`` is wrong)."""

    name = "consumer"

    def read(self, buf, pos, end):
        kind, pos = U8.read(buf, pos, end)
        if kind not in (1, 2):
            raise IggyStatus(IggyError.INVALID_COMMAND, f"unknown consumer kind {kind}")
        ident, pos = Identifier.read(buf, pos, end)
        return ConsumerId(kind, ident), pos

    def write(self, out, value):
        if value.kind not in (1, 2):
            raise ValueError("consumer kind")
        out.append(bytes((value.kind,)))
        Identifier.write(out, value.id)

    def strategy(self):
        from hypothesis import strategies as st

        return st.builds(ConsumerId, st.sampled_from((1, 2)), Identifier.strategy())


ConsumerRef = _Consumer()


class PartitioningValue(NamedTuple):
    kind: int  # 1 balanced, 2 partition id, 3 messages key
    value: bytes


class _Partitioning(WireType):
    """``u8 kind, u8 len, value`` (iggy.md section 3.3)."""

    name = "partitioning"

    def read(self, buf, pos, end):
        if end - pos < 2:
            raise _short(self.name)
        kind, n = buf[pos], buf[pos + 1]
        pos += 2
        if kind not in (1, 2, 3):
            raise IggyStatus(IggyError.INVALID_COMMAND, f"unknown partitioning kind {kind}")
        if n > end - pos:
            raise _short(self.name)
        return PartitioningValue(kind, bytes(buf[pos : pos + n])), pos + n

    def write(self, out, value):
        if value.kind not in (1, 2, 3) or len(value.value) > _MAX_STR8:
            raise ValueError("partitioning")
        out.append(bytes((value.kind, len(value.value))))
        out.append(value.value)

    def strategy(self):
        from hypothesis import strategies as st

        return st.one_of(
            st.just(PartitioningValue(1, b"")),
            st.builds(lambda p: PartitioningValue(2, struct.pack("<I", p)), st.integers(0, 0xFFFFFFFF)),
            st.builds(lambda k: PartitioningValue(3, k), st.binary(min_size=1, max_size=40)),
        )


Partitioning = _Partitioning()


class Strategy(NamedTuple):
    kind: int  # 1 offset, 2 timestamp, 3 first, 4 last, 5 next
    value: int


class _PollingStrategy(WireType):
    """``u8 kind, u64 value`` (iggy.md section 3.4)."""

    fixed = 9
    name = "polling_strategy"
    _s = struct.Struct("<BQ")

    def read(self, buf, pos, end):
        if end - pos < 9:
            raise _short(self.name)
        kind, value = self._s.unpack_from(buf, pos)
        if not 1 <= kind <= 5:
            raise IggyStatus(IggyError.INVALID_COMMAND, f"unknown polling kind {kind}")
        return Strategy(kind, value), pos + 9

    def write(self, out, value):
        if not 1 <= value.kind <= 5:
            raise ValueError("polling kind")
        out.append(self._s.pack(value.kind, value.value))

    def strategy(self):
        from hypothesis import strategies as st

        return st.builds(Strategy, st.integers(1, 5), st.integers(0, (1 << 64) - 1))


PollingStrategy = _PollingStrategy()


class Optional(WireType):
    """``u8 has`` then the inner value when ``has == 1`` (decodes to ``None`` or the value).

    ``fixed_absent`` mirrors Iggy's optional partition (``u8 has, u32 id``), where
    the u32 is on the wire even when absent (iggy-middle.md section 6.12)."""

    def __init__(self, inner: WireType, *, always_present: bool = False) -> None:
        self.inner = inner
        self.always_present = always_present
        self.name = f"opt<{inner.name}>"
        if always_present and inner.fixed is not None:
            self.fixed = 1 + inner.fixed

    def read(self, buf, pos, end):
        has, pos = U8.read(buf, pos, end)
        if has > 1:  # iggy.md 4.2: a has-flag above 1 is a decode failure
            raise IggyStatus(IggyError.INVALID_COMMAND, f"{self.name}: flag {has}")
        if has == 0 and not self.always_present:
            return None, pos
        value, pos = self.inner.read(buf, pos, end)
        return (value if has else None), pos

    def write(self, out, value):
        if value is None:
            out.append(b"\x00")
            if self.always_present:
                out.append(b"\x00" * self.inner.fixed)
            return
        out.append(b"\x01")
        self.inner.write(out, value)

    def strategy(self):
        from hypothesis import strategies as st

        return st.one_of(st.none(), self.inner.strategy())


OptU32 = Optional(U32, always_present=True)


__all__ = ["Bool", "Bytes32", "ConsumerId", "ConsumerRef", "DIALECTS", "F32", "IGGY", "Identifier", "OptU32",
           "Optional", "Partitioning", "PartitioningValue", "PollingStrategy", "Str32", "Str8", "Strategy", "Text",
           "U128", "U16", "U32", "U64", "U8"]
