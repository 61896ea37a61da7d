"""A declarative protobuf (proto3) codec: messages declared once as field tables.

Theory of operation
-------------------
A message is a subclass of :class:`Message` with a ``FIELDS`` tuple of
:class:`Field` rows (number, proto name, kind). When the subclass is created,
:meth:`Message.__init_subclass__` turns it into a frozen dataclass whose
attributes are the snake_case forms of the proto names (``segmentId`` ->
``segment_id``; a Python keyword gets a trailing ``_``: ``from`` -> ``from_``),
each defaulting to its proto3 default (STYLE.md section 4: declare once, derive
the rest). Everything else is derived from the same rows:

* :meth:`Message.encode` writes the fields in table order and, as proto3 does,
  leaves out every field that holds its default (0, ``""``, ``b""``, False, an
  empty tuple or dict); a sub-message is written whenever it is not None, so
  its presence survives a round trip. Numeric repeated fields are written
  packed (the proto3 default, protobuf encoding guide "Packed Repeated Fields").
* :meth:`Message.decode` accepts fields in any order, packed and unpacked
  numeric repeated fields alike, lets the last value of a scalar win and merges
  repeated occurrences of a sub-message field (the encoding guide's
  "Last One Wins" rule; merging is decoding the concatenated bytes). Unknown
  field numbers are skipped (proto3 keeps no unknown fields we need). Wrong
  wire types for a known field, truncated varints, lengths past the end,
  invalid UTF-8 in a ``string`` and group wire types raise
  :class:`ProtobufError`, never ``IndexError``.
* :func:`strategy` builds a hypothesis strategy of valid values from the rows.

Kinds: ``"int32"``, ``"int64"``, ``"uint32"``, ``"uint64"``, ``"bool"``,
``"double"``, ``"float"``, ``"string"``, ``"bytes"``; an ``IntEnum`` class
(an enum field: int32 on the wire; values the enum does not name decode as
plain ints, proto3 enums being open); a :class:`Message` subclass; or
``Map(key_kind, value_kind)`` (a ``map<K, V>``: on the wire a repeated entry
message with key = 1 and value = 2, in Python a ``dict``). ``repeated=True``
makes a field a tuple of its kind. int32/int64 are two's complement: a negative
value takes ten bytes on the wire, as protobuf writes it (sint32/sint64's
zigzag is not needed by the Pravega controller proto and is left out).

Values are plain Python objects; map fields are dicts (a frozen message does not
make its dict immutable, so do not mutate one you did not build). Controller
messages are few and small, so instances are not slotted.
"""

from __future__ import annotations

import dataclasses
import keyword
import math
import re
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar

# Wire types (protobuf encoding guide, "Message Structure").
VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5
MAX_VARINT_BYTES = 10  # a 64-bit value in 7-bit groups; a longer varint is malformed
MAX_FIELD_NUMBER = 2**29 - 1  # protobuf language guide: field numbers are 1 .. 536,870,911
RESERVED_NUMBERS = range(19000, 20000)  # reserved for the protobuf implementation itself
_U64 = (1 << 64) - 1


class ProtobufError(ValueError):
    """Bytes that are not a valid encoding of the message, or a value that
    cannot be encoded (out of range for its kind, wrong type)."""


class SpecError(TypeError):
    """A message table is malformed (duplicate numbers or names, bad kind): a
    bug in the declaring module, raised when the class is created."""


# -- varints ------------------------------------------------------------------
def encode_varint(value: int) -> bytes:
    """``value`` (0 .. 2**64-1) as a base-128 varint, low groups first."""
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(buf, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``buf[pos:end]`` and the position after it; raises ProtobufError."""
    result = shift = 0
    for i in range(pos, min(end, pos + MAX_VARINT_BYTES)):
        byte = buf[i]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & _U64, i + 1  # a 10th byte over 1 overflows; protobuf drops those bits
        shift += 7
    if end - pos >= MAX_VARINT_BYTES:
        raise ProtobufError(f"varint longer than {MAX_VARINT_BYTES} bytes at offset {pos}")
    raise ProtobufError(f"truncated varint at offset {pos}")


def _length_delimited(buf, pos: int, end: int) -> tuple[int, int]:
    """Start and end of the LEN payload at ``pos``; checks the length against ``end``."""
    length, pos = decode_varint(buf, pos, end)
    if length > end - pos:
        raise ProtobufError(f"length {length} at offset {pos} runs past the end ({end - pos} bytes left)")
    return pos, pos + length


# -- kinds: one object per wire representation ------------------------------------
class _Kind:
    """How one value of a field's type is written, read, checked and generated."""

    wire: int = VARINT
    packable: bool = True  # numeric kinds may be packed into one LEN field
    default: Any = 0
    annotation: str = "int"

    def is_default(self, value) -> bool:
        return value == self.default

    def put(self, out: bytearray, value) -> None:
        raise NotImplementedError

    def get(self, buf, pos: int, end: int) -> tuple[Any, int]:
        raise NotImplementedError

    def strategy(self, st):
        raise NotImplementedError


class _Varint(_Kind):
    """int32/int64/uint32/uint64/bool: a varint of the value's 64-bit two's
    complement; decoding keeps the low ``bits`` and sign-extends if signed."""

    def __init__(self, lo: int, hi: int, bits: int, signed: bool) -> None:
        self.lo, self.hi, self.bits, self.signed = lo, hi, bits, signed

    def put(self, out: bytearray, value) -> None:
        if not isinstance(value, int) or not self.lo <= value <= self.hi:
            raise ProtobufError(f"{value!r} is not an integer in [{self.lo}, {self.hi}]")
        out += encode_varint(value & _U64)

    def get(self, buf, pos, end):
        raw, pos = decode_varint(buf, pos, end)
        raw &= (1 << self.bits) - 1
        if self.signed and raw >> (self.bits - 1):
            raw -= 1 << self.bits
        return raw, pos

    def strategy(self, st):
        return st.integers(self.lo, self.hi)


class _Bool(_Varint):
    default, annotation = False, "bool"

    def __init__(self) -> None:
        super().__init__(0, 1, 64, False)

    def get(self, buf, pos, end):
        raw, pos = decode_varint(buf, pos, end)
        return raw != 0, pos  # any non-zero varint is true (protobuf encoding guide)

    def strategy(self, st):
        return st.booleans()


class _Enum(_Varint):
    """An enum field: int32 on the wire; unnamed values stay plain ints (open enums)."""

    def __init__(self, enum: type[IntEnum]) -> None:
        super().__init__(-(2**31), 2**31 - 1, 32, True)
        self.enum = enum
        self.annotation = f"{enum.__qualname__} | int"

    def get(self, buf, pos, end):
        raw, pos = super().get(buf, pos, end)
        try:
            return self.enum(raw), pos
        except ValueError:
            return raw, pos

    def strategy(self, st):
        return st.sampled_from(list(self.enum)) | super().strategy(st)


class _Fixed(_Kind):
    """double/float: IEEE 754 little-endian in an I64/I32 field."""

    default, annotation = 0.0, "float"

    def __init__(self, fmt: str, wire: int, width: int) -> None:
        self.struct, self.wire, self.width = struct.Struct(fmt), wire, width

    def is_default(self, value) -> bool:
        return value == 0 and math.copysign(1.0, value) > 0  # -0.0 has a bit set: written

    def put(self, out: bytearray, value) -> None:
        try:
            out += self.struct.pack(value)
        except (struct.error, OverflowError, TypeError) as exc:
            raise ProtobufError(f"{value!r} is not a {self.width}-bit float: {exc}") from None

    def get(self, buf, pos, end):
        if end - pos < self.struct.size:
            raise ProtobufError(f"truncated fixed-width value at offset {pos}")
        return self.struct.unpack_from(buf, pos)[0], pos + self.struct.size

    def strategy(self, st):
        return st.floats(allow_nan=False, width=self.width)  # NaN != NaN would fail round trips


class _Text(_Kind):
    """string (UTF-8, checked) or bytes: a LEN field holding the raw bytes."""

    wire, packable = LEN, False

    def __init__(self, text: bool) -> None:
        self.text = text
        self.default, self.annotation = ("", "str") if text else (b"", "bytes")

    def put(self, out: bytearray, value) -> None:
        if self.text:
            if not isinstance(value, str):
                raise ProtobufError(f"{value!r} is not a str")
            try:
                value = value.encode("utf-8")
            except UnicodeEncodeError as exc:  # lone surrogates
                raise ProtobufError(f"string is not encodable as UTF-8: {exc}") from None
        elif not isinstance(value, (bytes, bytearray, memoryview)):
            raise ProtobufError(f"{value!r} is not bytes")
        out += encode_varint(len(value))
        out += value

    def get(self, buf, pos, end):
        start, stop = _length_delimited(buf, pos, end)
        if not self.text:
            return bytes(buf[start:stop]), stop
        try:
            return str(buf[start:stop], "utf-8"), stop  # proto3 requires valid UTF-8 in string fields
        except UnicodeDecodeError as exc:
            raise ProtobufError(f"string field is not valid UTF-8: {exc}") from None

    def strategy(self, st):
        return st.text(st.characters(codec="utf-8")) if self.text else st.binary()


class _Nested(_Kind):
    """A sub-message: a LEN field holding its encoding. Absent is None."""

    wire, packable, default = LEN, False, None

    def __init__(self, cls: type[Message]) -> None:
        self.cls = cls
        self.annotation = f"{cls.__qualname__} | None"

    def is_default(self, value) -> bool:
        return value is None

    def put(self, out: bytearray, value) -> None:
        if not isinstance(value, self.cls):
            raise ProtobufError(f"{value!r} is not a {self.cls.__qualname__}")
        body = value.encode()
        out += encode_varint(len(body))
        out += body

    def get(self, buf, pos, end):
        start, stop = _length_delimited(buf, pos, end)
        return self.cls.decode(buf[start:stop]), stop

    def strategy(self, st):
        return strategy(self.cls)


_SCALARS: dict[str, _Kind] = {
    "int32": _Varint(-(2**31), 2**31 - 1, 32, True),
    "int64": _Varint(-(2**63), 2**63 - 1, 64, True),
    "uint32": _Varint(0, 2**32 - 1, 32, False),
    "uint64": _Varint(0, 2**64 - 1, 64, False),
    "bool": _Bool(),
    "double": _Fixed("<d", I64, 64),
    "float": _Fixed("<f", I32, 32),
    "string": _Text(True),
    "bytes": _Text(False),
}
_MAP_KEYS = {"int32", "int64", "uint32", "uint64", "bool", "string"}  # language guide: integral or string keys


@dataclass(frozen=True)
class Map:
    """``map<key, value>``: ``key`` one of the integral kinds or ``"string"``;
    ``value`` any kind but another map."""

    key: str
    value: Any


def _kind_of(kind) -> _Kind:
    if isinstance(kind, str) and kind in _SCALARS:
        return _SCALARS[kind]
    if isinstance(kind, type) and issubclass(kind, IntEnum):
        return _Enum(kind)
    if isinstance(kind, type) and issubclass(kind, Message):
        return _Nested(kind)
    raise SpecError(f"unknown field kind {kind!r}")


def _snake(name: str) -> str:
    attr = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    return attr + "_" if keyword.iskeyword(attr) else attr


# -- fields -------------------------------------------------------------------
@dataclass(frozen=True)
class Field:
    """One row of a message table. ``name`` is the proto's own field name;
    ``attr`` (derived) is the Python attribute. ``about`` documents the row."""

    number: int
    name: str
    kind: Any
    repeated: bool = False
    about: str = ""
    attr: str = dataclasses.field(init=False)
    codec: _Kind = dataclasses.field(init=False, repr=False)
    entry: type | None = dataclasses.field(init=False, repr=False)  # a map's entry message

    def __post_init__(self) -> None:
        if not 1 <= self.number <= MAX_FIELD_NUMBER or self.number in RESERVED_NUMBERS:
            raise SpecError(f"field {self.name}: number {self.number} is not usable")
        entry = None
        if isinstance(self.kind, Map):
            if self.repeated or self.kind.key not in _MAP_KEYS or isinstance(self.kind.value, Map):
                raise SpecError(f"field {self.name}: bad map {self.kind!r}")
            entry = type(f"{self.name}Entry", (Message,), {"FIELDS": (
                Field(1, "key", self.kind.key), Field(2, "value", self.kind.value))})
            codec = _Nested(entry)
        else:
            codec = _kind_of(self.kind)
        object.__setattr__(self, "attr", _snake(self.name))
        object.__setattr__(self, "codec", codec)
        object.__setattr__(self, "entry", entry)

    @property
    def is_map(self) -> bool:
        return self.entry is not None

    def _default(self):
        if self.is_map:
            return dataclasses.field(default_factory=dict)
        return () if self.repeated else self.codec.default

    def _annotation(self) -> str:
        if self.is_map:
            return "dict"
        return f"tuple[{self.codec.annotation}, ...]" if self.repeated else self.codec.annotation

    def write(self, out: bytearray, value) -> None:
        """Append this field's encoding of ``value`` (nothing for a proto3 default)."""
        codec = self.codec
        if self.is_map:
            if not isinstance(value, dict):
                raise ProtobufError(f"{self.name}: {value!r} is not a dict")
            value = tuple(self.entry(k, v) for k, v in value.items())
        elif not self.repeated:
            if not codec.is_default(value):
                out += encode_varint(self.number << 3 | codec.wire)
                codec.put(out, value)
            return
        if not isinstance(value, (tuple, list)):
            raise ProtobufError(f"{self.name}: {value!r} is not a tuple")
        if not value:
            return
        if codec.packable:
            body = bytearray()
            for item in value:
                codec.put(body, item)
            out += encode_varint(self.number << 3 | LEN)
            out += encode_varint(len(body))
            out += body
            return
        tag = encode_varint(self.number << 3 | codec.wire)
        for item in value:
            out += tag
            codec.put(out, item)

    def read(self, buf, pos: int, end: int, wire: int, values: dict) -> int:
        """Decode one occurrence at ``pos`` into ``values``; returns the new position."""
        codec = self.codec
        if self.repeated or self.is_map:
            items = values.setdefault(self.attr, [])
            if wire == LEN and codec.packable:
                start, stop = _length_delimited(buf, pos, end)
                while start < stop:
                    item, start = codec.get(buf, start, stop)
                    items.append(item)
                return stop
            self._check_wire(wire)
            item, pos = codec.get(buf, pos, end)
            items.append(item)
            return pos
        self._check_wire(wire)
        if isinstance(codec, _Nested):  # repeated occurrences merge: keep the bytes, decode once
            start, stop = _length_delimited(buf, pos, end)
            values.setdefault(self.attr, bytearray()).extend(buf[start:stop])
            return stop
        values[self.attr], pos = codec.get(buf, pos, end)
        return pos

    def _check_wire(self, wire: int) -> None:
        if wire != self.codec.wire:
            raise ProtobufError(f"field {self.name} (#{self.number}) has wire type {wire}, "
                                f"expected {self.codec.wire}")

    def finish(self, raw):
        """The attribute value from what :meth:`read` collected."""
        if self.is_map:
            value_default = self.entry.FIELDS[1].codec
            empty = value_default.cls() if isinstance(value_default, _Nested) else value_default.default
            return {e.key: empty if e.value is None else e.value for e in raw}  # later keys win
        if self.repeated:
            return tuple(raw)
        if isinstance(self.codec, _Nested):
            return self.codec.cls.decode(raw)
        return raw


# -- messages -----------------------------------------------------------------
class Message:
    """Base of declared messages: subclasses set ``FIELDS`` and become frozen
    dataclasses (module docstring). Nested enums and messages are declared as
    nested classes, named as in the proto."""

    FIELDS: ClassVar[tuple[Field, ...]] = ()
    _BY_NUMBER: ClassVar[dict[int, Field]] = {}
    _BY_ATTR: ClassVar[dict[str, Field]] = {}

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        fields = cls.__dict__.get("FIELDS", ())
        by_number = {f.number: f for f in fields}
        attrs = {f.attr for f in fields}
        if len(by_number) != len(fields) or len(attrs) != len(fields):
            raise SpecError(f"{cls.__qualname__}: duplicate field numbers or names")
        cls._BY_NUMBER = by_number
        cls._BY_ATTR = {f.attr: f for f in fields}
        cls.__annotations__ = {f.attr: f._annotation() for f in fields}
        for f in fields:
            setattr(cls, f.attr, f._default())
        dataclasses.dataclass(frozen=True)(cls)

    def encode(self) -> bytes:
        """The proto3 wire encoding; raises ProtobufError for unencodable values."""
        out = bytearray()
        for f in self.FIELDS:
            f.write(out, getattr(self, f.attr))
        return bytes(out)

    @classmethod
    def decode(cls, data):
        """Parse ``data`` (bytes-like); raises ProtobufError if it is malformed."""
        buf = data if isinstance(data, memoryview) else memoryview(data)
        pos, end = 0, len(buf)
        values: dict[str, Any] = {}
        while pos < end:
            key, pos = decode_varint(buf, pos, end)
            number, wire = key >> 3, key & 7
            if number == 0:
                raise ProtobufError(f"field number 0 at offset {pos}")
            field = cls._BY_NUMBER.get(number)
            if field is None:
                pos = _skip(buf, pos, end, wire)
            else:
                pos = field.read(buf, pos, end, wire, values)
        by_attr = cls._BY_ATTR
        return cls(**{attr: by_attr[attr].finish(raw) for attr, raw in values.items()})


def _skip(buf, pos: int, end: int, wire: int) -> int:
    """Step over an unknown field's value; groups (deprecated, absent from
    proto3) and the undefined wire types 6 and 7 are errors."""
    if wire == VARINT:
        return decode_varint(buf, pos, end)[1]
    if wire == LEN:
        return _length_delimited(buf, pos, end)[1]
    width = {I64: 8, I32: 4}.get(wire)
    if width is None:
        raise ProtobufError(f"unsupported wire type {wire} at offset {pos}")
    if end - pos < width:
        raise ProtobufError(f"truncated fixed-width field at offset {pos}")
    return pos + width


def strategy(cls: type[Message]):
    """A hypothesis strategy of ``cls`` instances, derived from its FIELDS.
    Imports hypothesis lazily (a test-only dependency)."""
    from hypothesis import strategies as st

    def field_strategy(f: Field):
        if f.is_map:
            key, value = f.entry.FIELDS
            return st.dictionaries(key.codec.strategy(st), value.codec.strategy(st), max_size=4)
        item = f.codec.strategy(st)
        if f.repeated:
            return st.lists(item, max_size=4).map(tuple)
        return st.none() | item if isinstance(f.codec, _Nested) else item

    return st.builds(cls, **{f.attr: field_strategy(f) for f in cls.FIELDS})


__all__ = ["Field", "Map", "Message", "ProtobufError", "SpecError", "decode_varint", "encode_varint", "strategy"]
