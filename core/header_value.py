"""Typed header values: the fifteen Iggy header kinds and one validated value.

Theory of operation
-------------------
A header key or value is a kind plus its bytes. The fifteen kinds and their
codes are the ones of the Iggy headers seed (seeds/000) and of Iggy's
``HeaderKind::as_code``. A value is validated once, when it is built, so
everything downstream may trust it:

* 1..255 bytes (the seed's u8 limit; Iggy rejects an empty key or value),
* typed kinds have their exact width (ints little-endian two's complement,
  floats little-endian IEEE 754), BOOL is one byte 0 or 1, STRING is UTF-8.

Text form (``HeaderValue.to_text``/``from_text``), for protocols whose headers
are text (NATS). ``from_text(kind, v.to_text()) == v`` holds for every value:

========== ===============================================================
kind       text
========== ===============================================================
STRING     the string itself
RAW        standard base64 (RFC 4648 section 4) with padding
BOOL       ``true`` / ``false``
ints       decimal, ``-`` for negatives
floats     shortest decimal that reads back to the same bits (``repr`` for
           float64, the shortest ``%g`` form for float32); ``inf``, ``-inf``,
           ``nan`` for the canonical quiet NaN, and ``nan(0x<bits>)`` (the
           IEEE bits in hex, 8 or 16 digits) for any other NaN so that NaN
           payloads and signs survive
========== ===============================================================

``from_text`` accepts those forms (plus a leading ``+`` on numbers) and
nothing looser. The public names live in :mod:`core.message`; this module is
split out only to keep each file small.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from .errors import InvalidHeaderKind, InvalidHeaderValue

# Key and value are 1..255 bytes: "the maximum value of the u8 type" (seeds/000)
# and Iggy's HeaderKey::new / HeaderValue::from checks.
MAX_HEADER_FIELD = 255


class HeaderKind(IntEnum):
    """Header kinds with the wire codes of seeds/000 (Iggy ``HeaderKind::as_code``)."""

    RAW = 1
    STRING = 2
    BOOL = 3
    INT8 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    INT128 = 8
    UINT8 = 9
    UINT16 = 10
    UINT32 = 11
    UINT64 = 12
    UINT128 = 13
    FLOAT32 = 14
    FLOAT64 = 15

    @property
    def fixed_size(self) -> int | None:
        """Exact byte width of this kind's values; None for RAW and STRING."""
        return _FIXED_SIZE[self]

    @property
    def json_name(self) -> str:
        """The kind's name in Iggy's HTTP JSON (``"raw"``, ``"uint64"``, ...)."""
        return _JSON_NAME[self]

    name_json = json_name  # the spelling docs/internals.md used first

    @classmethod
    def from_json_name(cls, name: str) -> HeaderKind:
        """The kind called ``name`` in Iggy's JSON; raises InvalidHeaderKind."""
        kind = _KIND_BY_JSON.get(name)
        if kind is None:
            raise InvalidHeaderKind(f"unknown header kind name {name!r}")
        return kind

    @classmethod
    def from_code(cls, code: int) -> HeaderKind:
        """The kind with wire code ``code``; raises InvalidHeaderKind."""
        if isinstance(code, HeaderKind):
            return code
        ok = isinstance(code, int) and not isinstance(code, bool) and 0 <= code < 256
        kind = KIND_BY_CODE[code] if ok else None
        if kind is None:
            raise InvalidHeaderKind(f"unknown header kind code {code!r}")
        return kind


_K = HeaderKind
_JSON_NAME = {k: k.name.lower() for k in HeaderKind}  # Iggy serde: rename_all = "snake_case"
_KIND_BY_JSON = {name: k for k, name in _JSON_NAME.items()}
KIND_BY_CODE: tuple[HeaderKind | None, ...] = tuple(
    HeaderKind(c) if 1 <= c <= 15 else None for c in range(256)
)
# (byte width, signed) of the integer kinds.
_INT_KINDS = {
    _K.INT8: (1, True), _K.INT16: (2, True), _K.INT32: (4, True), _K.INT64: (8, True),
    _K.INT128: (16, True), _K.UINT8: (1, False), _K.UINT16: (2, False),
    _K.UINT32: (4, False), _K.UINT64: (8, False), _K.UINT128: (16, False),
}  # fmt: skip
_INT_RANGE = {
    k: ((-(1 << (8 * w - 1)), (1 << (8 * w - 1)) - 1) if signed else (0, (1 << (8 * w)) - 1))
    for k, (w, signed) in _INT_KINDS.items()
}
_FLOAT_STRUCT = {_K.FLOAT32: struct.Struct("<f"), _K.FLOAT64: struct.Struct("<d")}
_FIXED_SIZE: dict[HeaderKind, int | None] = {
    _K.RAW: None, _K.STRING: None, _K.BOOL: 1, _K.FLOAT32: 4, _K.FLOAT64: 8,
    **{k: w for k, (w, _) in _INT_KINDS.items()},
}  # fmt: skip
# The quiet NaN every IEEE platform produces for float("nan"); others print as nan(0x...).
_CANONICAL_NAN = {_K.FLOAT32: 0x7FC00000, _K.FLOAT64: 0x7FF8000000000000}
_NAN_PARTS = {_K.FLOAT32: (23, 0xFF), _K.FLOAT64: (52, 0x7FF)}  # mantissa bits, exponent mask

# Text grammars for from_text: the forms to_text writes, plus a leading "+".
_INT_TEXT = re.compile(r"[+-]?[0-9]{1,40}")  # i128/u128 need at most 39 digits
_FLOAT_TEXT = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf)")
_NAN_TEXT = re.compile(r"nan\(0x([0-9a-f]+)\)")
_MAX_NUMBER_TEXT = 400  # longer than any float repr; bounds the work float() does
_INF = float("inf")


def validate_field(kind: HeaderKind, data: bytes, err: type[Exception]) -> None:
    """Raise ``err`` unless ``data`` is a valid value of ``kind``."""
    n = len(data)
    if not 1 <= n <= MAX_HEADER_FIELD:
        raise err(f"header {kind.json_name} is {n} bytes, must be 1..{MAX_HEADER_FIELD}")
    size = _FIXED_SIZE[kind]
    if size is not None:
        if n != size:
            raise err(f"header {kind.json_name} must be {size} bytes, got {n}")
        if kind is _K.BOOL and data[0] > 1:
            raise err(f"header bool must be 0 or 1, got {data[0]}")
    elif kind is _K.STRING:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise err("header string is not valid UTF-8") from exc


@dataclass(frozen=True, slots=True, repr=False)
class HeaderValue:
    """One typed header key or value: a kind and its 1..255 bytes, validated here.

    Build one with a kind-named constructor (``HeaderValue.uint16(7)``) or with
    :meth:`of`. Raises InvalidHeaderValue (InvalidHeaderKind for a bad kind)."""

    kind: HeaderKind
    data: bytes

    def __post_init__(self) -> None:
        kind = self.kind
        if kind.__class__ is not HeaderKind:
            kind = HeaderKind.from_code(kind)
            object.__setattr__(self, "kind", kind)
        data = self.data
        if data.__class__ is not bytes:
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise InvalidHeaderValue(f"header data must be bytes, not {type(data).__name__}")
            data = bytes(data)
            object.__setattr__(self, "data", data)
        validate_field(kind, data, InvalidHeaderValue)

    # -- constructors ---------------------------------------------------------
    @classmethod
    def raw(cls, value: bytes | bytearray | memoryview) -> HeaderValue:
        return cls(_K.RAW, value)  # type: ignore[arg-type]  # __post_init__ copies to bytes

    @classmethod
    def string(cls, value: str) -> HeaderValue:
        if not isinstance(value, str):
            raise InvalidHeaderValue(f"header string must be str, not {type(value).__name__}")
        try:
            return cls(_K.STRING, value.encode("utf-8"))
        except UnicodeEncodeError as exc:  # lone surrogates
            raise InvalidHeaderValue("header string is not encodable as UTF-8") from exc

    @classmethod
    def bool(cls, value: bool) -> HeaderValue:
        if value is not True and value is not False:
            raise InvalidHeaderValue(f"header bool must be True or False, not {value!r}")
        return trusted_value(_K.BOOL, b"\x01" if value else b"\x00")

    @classmethod
    def int8(cls, value: int) -> HeaderValue:
        return _from_int(_K.INT8, value)

    @classmethod
    def int16(cls, value: int) -> HeaderValue:
        return _from_int(_K.INT16, value)

    @classmethod
    def int32(cls, value: int) -> HeaderValue:
        return _from_int(_K.INT32, value)

    @classmethod
    def int64(cls, value: int) -> HeaderValue:
        return _from_int(_K.INT64, value)

    @classmethod
    def int128(cls, value: int) -> HeaderValue:
        return _from_int(_K.INT128, value)

    @classmethod
    def uint8(cls, value: int) -> HeaderValue:
        return _from_int(_K.UINT8, value)

    @classmethod
    def uint16(cls, value: int) -> HeaderValue:
        return _from_int(_K.UINT16, value)

    @classmethod
    def uint32(cls, value: int) -> HeaderValue:
        return _from_int(_K.UINT32, value)

    @classmethod
    def uint64(cls, value: int) -> HeaderValue:
        return _from_int(_K.UINT64, value)

    @classmethod
    def uint128(cls, value: int) -> HeaderValue:
        return _from_int(_K.UINT128, value)

    @classmethod
    def float32(cls, value: float) -> HeaderValue:
        return _from_float(_K.FLOAT32, value)

    @classmethod
    def float64(cls, value: float) -> HeaderValue:
        return _from_float(_K.FLOAT64, value)

    @classmethod
    def of(cls, value: Any) -> HeaderValue:
        """Infer the kind from a Python value: str -> STRING, bytes-like -> RAW,
        bool -> BOOL, int -> INT64 when it fits, else INT128, else UINT128,
        float -> FLOAT64; a HeaderValue is returned as it is."""
        if isinstance(value, HeaderValue):
            return value
        if isinstance(value, str):
            return cls.string(value)
        if value is True or value is False:
            return cls.bool(value)
        if isinstance(value, int):
            for kind in (_K.INT64, _K.INT128, _K.UINT128):
                lo, hi = _INT_RANGE[kind]
                if lo <= value <= hi:
                    return _from_int(kind, value)
            raise InvalidHeaderValue(f"integer {value} does not fit in 128 bits")
        if isinstance(value, float):
            return _from_float(_K.FLOAT64, value)
        if isinstance(value, (bytes, bytearray, memoryview)):
            return cls.raw(value)
        raise InvalidHeaderValue(f"no header kind for a {type(value).__name__}")

    # -- accessors --------------------------------------------------------------
    def as_bytes(self) -> bytes:
        """The bytes of a RAW value (``.data`` gives any kind's bytes)."""
        self._expect(self.kind is _K.RAW, "raw")
        return self.data

    def as_str(self) -> str:
        self._expect(self.kind is _K.STRING, "string")
        return self.data.decode("utf-8")

    def as_bool(self) -> bool:
        self._expect(self.kind is _K.BOOL, "bool")
        return self.data == b"\x01"

    def as_int(self) -> int:
        """The value of any of the ten integer kinds."""
        spec = _INT_KINDS.get(self.kind)
        self._expect(spec is not None, "an integer")
        return int.from_bytes(self.data, "little", signed=spec[1])  # type: ignore[index]

    def as_float(self) -> float:
        """The value of FLOAT32 (widened exactly) or FLOAT64."""
        fmt = _FLOAT_STRUCT.get(self.kind)
        self._expect(fmt is not None, "a float")
        return fmt.unpack(self.data)[0]  # type: ignore[union-attr]

    def to_python(self) -> bytes | str | bool | int | float:
        """The value as the natural Python type of its kind."""
        kind = self.kind
        if kind is _K.RAW:
            return self.data
        if kind is _K.STRING:
            return self.as_str()
        if kind is _K.BOOL:
            return self.as_bool()
        if kind in _FLOAT_STRUCT:
            return self.as_float()
        return self.as_int()

    def _expect(self, ok: bool, wanted: str) -> None:
        if not ok:
            raise InvalidHeaderValue(f"header value is {self.kind.json_name}, not {wanted}")

    # -- text form (module docstring) -------------------------------------------
    def to_text(self) -> str:
        """The value as text; :meth:`from_text` reads it back exactly."""
        kind = self.kind
        if kind is _K.STRING:
            return self.data.decode("utf-8")
        if kind is _K.RAW:
            return base64.b64encode(self.data).decode("ascii")
        if kind is _K.BOOL:
            return "true" if self.data == b"\x01" else "false"
        if kind in _FLOAT_STRUCT:
            return _float_to_text(kind, self.data)
        return str(self.as_int())

    @classmethod
    def from_text(cls, kind: HeaderKind | int, text: str) -> HeaderValue:
        """Parse the text form of a ``kind`` value; raises InvalidHeaderValue."""
        kind = HeaderKind.from_code(kind)
        if not isinstance(text, str):
            raise InvalidHeaderValue(f"header text must be str, not {type(text).__name__}")
        if kind is _K.STRING:
            return cls.string(text)
        if kind is _K.RAW:
            try:
                return cls.raw(base64.b64decode(text, validate=True))
            except (binascii.Error, ValueError) as exc:  # ValueError: non-ASCII text
                raise InvalidHeaderValue("raw header text is not standard base64") from exc
        if kind is _K.BOOL:
            if text not in ("true", "false"):
                raise InvalidHeaderValue(f"bool header text must be true or false, not {text!r}")
            return cls.bool(text == "true")
        if kind in _FLOAT_STRUCT:
            return _float_from_text(kind, text)
        if not _INT_TEXT.fullmatch(text):
            raise InvalidHeaderValue(f"{kind.json_name} header text is not a decimal integer")
        return _from_int(kind, int(text))

    def __repr__(self) -> str:
        return f"HeaderValue.{self.kind.json_name}({self.to_python()!r})"


_new = object.__new__
_set_kind = HeaderValue.__dict__["kind"].__set__  # slot descriptors: skip the frozen __setattr__
_set_data = HeaderValue.__dict__["data"].__set__


def trusted_value(kind: HeaderKind, data: bytes) -> HeaderValue:
    """A HeaderValue from parts already checked (skips __post_init__); for core.message."""
    hv = _new(HeaderValue)
    _set_kind(hv, kind)
    _set_data(hv, data)
    return hv


def _from_int(kind: HeaderKind, value: int) -> HeaderValue:
    if not isinstance(value, int) or value is True or value is False:
        raise InvalidHeaderValue(f"{kind.json_name} header needs an int, not {type(value).__name__}")
    lo, hi = _INT_RANGE[kind]
    if not lo <= value <= hi:
        raise InvalidHeaderValue(f"{value} is outside {kind.json_name} range {lo}..{hi}")
    width, signed = _INT_KINDS[kind]
    return trusted_value(kind, value.to_bytes(width, "little", signed=signed))


def _from_float(kind: HeaderKind, value: float) -> HeaderValue:
    if not isinstance(value, (int, float)) or value is True or value is False:
        raise InvalidHeaderValue(f"{kind.json_name} header needs a float, not {type(value).__name__}")
    try:
        return trusted_value(kind, _FLOAT_STRUCT[kind].pack(float(value)))
    except OverflowError as exc:  # e.g. 1e300 as float32, or an int beyond float range
        raise InvalidHeaderValue(f"{value!r} is outside {kind.json_name} range") from exc


def _float_to_text(kind: HeaderKind, data: bytes) -> str:
    fmt = _FLOAT_STRUCT[kind]
    (x,) = fmt.unpack(data)
    if x != x:  # NaN: keep the exact bits unless they are the canonical quiet NaN
        bits = int.from_bytes(data, "little")
        if bits == _CANONICAL_NAN[kind]:
            return "nan"
        return f"nan(0x{bits:0{2 * len(data)}x})"
    if kind is _K.FLOAT64:
        return repr(x)  # shortest round-tripping form (Python's repr contract)
    for digits in range(1, 9):  # 9 significant digits always identify a float32
        text = f"{x:.{digits}g}"
        try:
            if fmt.pack(float(text)) == data:
                # %g writes 30 as "3e+01"; repr's "30.0" names the same float, shorter.
                alt = repr(float(text))
                return alt if len(alt) < len(text) else text
        except OverflowError:  # near the float32 maximum a short form rounds past it
            continue
    return f"{x:.9g}"


def _float_from_text(kind: HeaderKind, text: str) -> HeaderValue:
    if len(text) > _MAX_NUMBER_TEXT:
        raise InvalidHeaderValue(f"{kind.json_name} header text is too long")
    if text == "nan":
        return trusted_value(kind, _CANONICAL_NAN[kind].to_bytes(_FIXED_SIZE[kind], "little"))  # type: ignore[arg-type]
    match = _NAN_TEXT.fullmatch(text)
    if match:
        return _nan_from_bits(kind, match.group(1))
    if not _FLOAT_TEXT.fullmatch(text):
        raise InvalidHeaderValue(f"{kind.json_name} header text is not a number: {text!r}")
    value = float(text)
    if value in (_INF, -_INF) and "inf" not in text:  # "1e999" overflows float64
        raise InvalidHeaderValue(f"{text!r} is outside {kind.json_name} range")
    return _from_float(kind, value)


def _nan_from_bits(kind: HeaderKind, hex_bits: str) -> HeaderValue:
    width = _FIXED_SIZE[kind]
    bits = int(hex_bits, 16)
    mantissa_bits, exp_mask = _NAN_PARTS[kind]
    is_nan = (bits >> mantissa_bits) & exp_mask == exp_mask and bits & ((1 << mantissa_bits) - 1)
    if len(hex_bits) != 2 * width or not is_nan:  # type: ignore[operator]
        raise InvalidHeaderValue(f"nan({hex_bits}) is not a {kind.json_name} NaN bit pattern")
    return trusted_value(kind, bits.to_bytes(width, "little"))  # type: ignore[arg-type]


__all__ = ["MAX_HEADER_FIELD", "HeaderKind", "HeaderValue"]
