"""Wire field types of the Kafka protocol, on the shared engine (adapters/wire/types.py).

Theory of operation
-------------------
Kafka's conventions are one :class:`~adapters.wire.types.Wire`, :data:`KAFKA`:
everything big-endian (Java ``ByteBuffer``), every decode failure a
:class:`KafkaDecodeError` (Kafka answers an unparsable request by closing the
connection), message versions 0 to :data:`MAX_VERSION`, API keys a
non-negative int16.

Integers, floats, flags and UUIDs have one form in every version and are the
engine's types (:data:`INT8` ... :data:`UUID`). Strings, byte strings, record
sets and arrays change form with the version (seed 004, KIP-482):

* in a *flexible* version the length is an unsigned varint of length + 1,
  0 meaning null (the "compact" forms); otherwise an int16 (strings) or
  int32 (bytes, records, arrays) length, -1 meaning null;
* null is legal only in the field's nullable versions.

So a field declares a placeholder (:data:`STRING`, :data:`BYTES`,
:data:`RECORDS`, :func:`ARRAY`), a :class:`Versioned` type, and Kafka's
struct (:mod:`adapters.kafka.table`) resolves it per version, through the
engine's ``Struct.resolve`` hook, into one of the concrete forms below. A
concrete type (:data:`NULLABLE_STRING`, the request header's client id) is
used as it is in every version.

Strings are at most :data:`MAX_STRING` bytes of UTF-8 in either form (Java
reads the length into a ``short``; its generated readers refuse a longer
compact one too).
"""

from __future__ import annotations

import uuid

from adapters.wire import types as wt
from adapters.wire.types import ListOf, WireType

# The highest message version any API declares (Fetch's spec file is at 17); version ranges
# in declarations parse against 0..MAX_VERSION, each API keeps only its own range.
MAX_VERSION = 31
MAX_STRING = 0x7FFF  # an int16 length's largest value; compact strings keep the same limit
ZERO_UUID = uuid.UUID(int=0)  # Kafka's default for a uuid field (Uuid.ZERO_UUID)


class KafkaDecodeError(Exception):
    """The peer sent bytes that are not a valid Kafka message; Kafka closes the connection.

    ``reason`` says what was wrong, for logs and tests; it is never sent."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _short(what: str = "") -> KafkaDecodeError:
    return KafkaDecodeError(f"{what} ends early" if what else "ends early")


KAFKA = wt.Wire("kafka", ">", KafkaDecodeError, KafkaDecodeError, _short,
                versions=tuple(range(MAX_VERSION + 1)), codes=range(0, 1 << 15), codes_about="a non-negative int16")

INT8 = wt.Int(KAFKA, "b", "int8")
INT16 = wt.Int(KAFKA, "h", "int16")
INT32 = wt.Int(KAFKA, "i", "int32")
INT64 = wt.Int(KAFKA, "q", "int64")
UINT16 = wt.Int(KAFKA, "H", "uint16")
FLOAT64 = wt.Float(KAFKA, "d", "float64")
BOOL = wt.Bool(KAFKA)  # any non-zero byte is true (Java's readByte() != 0)
UUID = wt.Uuid(KAFKA)
UVARINT = wt.UVarInt(KAFKA, 32, "uvarint")
VARINT = wt.VarInt(KAFKA, 32, "varint")
VARLONG = wt.VarInt(KAFKA, 64, "varlong")


def _forms(make) -> dict[tuple[bool, bool], WireType]:
    """The four concrete forms of a length-prefixed type, by (compact, nullable)."""
    return {(compact, nullable): make(compact, nullable) for compact in (False, True) for nullable in (False, True)}


def _text(compact: bool, nullable: bool) -> WireType:
    name = ("compact_" if compact else "") + ("nullable_" if nullable else "") + "string"
    return wt.Text(UVARINT if compact else INT16, name, nullable=nullable, offset=int(compact), max_bytes=MAX_STRING)


def _bytes(kind: str):
    def make(compact: bool, nullable: bool) -> WireType:
        name = ("compact_" if compact else "") + ("nullable_" if nullable else "") + kind
        return wt.Bytes(UVARINT if compact else INT32, name, nullable=nullable, offset=int(compact))
    return make


STRING_FORMS = _forms(_text)
BYTES_FORMS = _forms(_bytes("bytes"))
RECORDS_FORMS = _forms(_bytes("records"))  # raw record batches; adapters/kafka/records.py reads them
NULLABLE_STRING = STRING_FORMS[False, True]  # the request header's client id: never compact


class Versioned(WireType):
    """A placeholder whose concrete type depends on the version: :meth:`form` gives it.
    Never read or written itself; Kafka's struct resolves it when it builds its plans."""

    def form(self, flexible: bool, nullable: bool, version: int) -> WireType:  # pragma: no cover - abstract
        raise NotImplementedError

    def read(self, buf, pos, end):
        raise TypeError(f"{self.name} is resolved per version before use")

    def write(self, out, value):
        raise TypeError(f"{self.name} is resolved per version before use")


class _Flex(Versioned):
    """A string, bytes or records field: one of four forms (module docstring)."""

    def __init__(self, name: str, py: type, forms: dict[tuple[bool, bool], WireType]) -> None:
        self.name = name
        self.py = py
        self.forms = forms

    def form(self, flexible, nullable, version):
        return self.forms[flexible, nullable]


STRING = _Flex("string", str, STRING_FORMS)
BYTES = _Flex("bytes", bytes, BYTES_FORMS)
RECORDS = _Flex("records", bytes, RECORDS_FORMS)


class Array(Versioned):
    """``[]item``: an int32 count (-1 null) or, in flexible versions, an unsigned varint of
    count + 1 (0 null), then the items. ``item`` is a concrete type, a :class:`Versioned`
    one (``[]string`` items go compact with the array) or a struct (anything with
    ``at(version)``: :class:`adapters.wire.table.Struct`), read in the array's version."""

    py = tuple

    def __init__(self, item) -> None:
        self.item = item
        self.name = f"[]{item.name}"
        self._forms: dict[tuple[bool, bool, int], WireType] = {}

    def form(self, flexible, nullable, version):
        key = (flexible, nullable, version)
        t = self._forms.get(key)
        if t is None:
            item = self.item
            if isinstance(item, Versioned):
                item = item.form(flexible, False, version)  # array items are never null
            elif not isinstance(item, WireType):
                item = item.at(version)
            t = self._forms[key] = ListOf(UVARINT if flexible else INT32, item, nullable=nullable,
                                          offset=int(flexible))
        return t


def ARRAY(item) -> Array:  # noqa: N802 - reads like the spec's type names
    return Array(item)


class NullableStruct(WireType):
    """A struct value that may be null: Kafka's generated code writes an int8 before it,
    -1 for null and 1 for a struct that follows (``ConsumerGroupHeartbeatResponseData.write``,
    the heartbeat's Assignment); librdkafka reads that byte as "present"."""

    min_size = 1

    def __init__(self, inner: WireType) -> None:
        self.inner = inner
        self.name = f"nullable {inner.name}"
        self.py = inner.py

    def read(self, buf, pos, end):
        marker, pos = INT8.read(buf, pos, end)
        return (None, pos) if marker < 0 else self.inner.read(buf, pos, end)

    def write(self, out, value):
        if value is None:
            out.append(b"\xff")
            return
        out.append(b"\x01")
        self.inner.write(out, value)

    def strategy(self):
        from hypothesis import strategies as st

        return st.none() | self.inner.strategy()


class StructField(Versioned):
    """A field whose value is one nested struct (not a list): the struct in the version,
    behind a presence byte in the versions the field is nullable (:class:`NullableStruct`)."""

    def __init__(self, struct) -> None:
        self.struct = struct
        self.name = struct.name
        self.py = struct.cls
        self._nullable: dict[int, NullableStruct] = {}

    def form(self, flexible, nullable, version):
        if not nullable:
            return self.struct.at(version)
        form = self._nullable.get(version)
        if form is None:
            form = self._nullable[version] = NullableStruct(self.struct.at(version))
        return form


__all__ = [
    "ARRAY", "Array", "BOOL", "BYTES", "BYTES_FORMS", "FLOAT64", "INT16", "INT32", "INT64", "INT8", "KAFKA",
    "KafkaDecodeError", "MAX_STRING", "MAX_VERSION", "NULLABLE_STRING", "NullableStruct", "RECORDS", "RECORDS_FORMS", "STRING",
    "STRING_FORMS", "StructField", "UINT16", "UUID", "UVARINT", "VARINT", "VARLONG", "Versioned", "ZERO_UUID",
]
