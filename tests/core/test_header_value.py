"""Tests for core.header_value (re-exported by core.message): kinds, typed
values, their validation and their exact text form."""

from __future__ import annotations

import dataclasses
import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.errors import (
    FerryError,
    HeaderError,
    HeadersTooLarge,
    InvalidHeaderKey,
    InvalidHeaderKind,
    InvalidHeaderValue,
    MalformedHeaders,
)
from core.message import HeaderKind, HeaderValue
from header_strategies import PROPS, VALUES_BY_KIND, any_value

K = HeaderKind
HV = HeaderValue

# ---------------------------------------------------------------------------- kinds
ALL_KINDS = [
    ("RAW", 1, "raw", None), ("STRING", 2, "string", None), ("BOOL", 3, "bool", 1),
    ("INT8", 4, "int8", 1), ("INT16", 5, "int16", 2), ("INT32", 6, "int32", 4),
    ("INT64", 7, "int64", 8), ("INT128", 8, "int128", 16), ("UINT8", 9, "uint8", 1),
    ("UINT16", 10, "uint16", 2), ("UINT32", 11, "uint32", 4), ("UINT64", 12, "uint64", 8),
    ("UINT128", 13, "uint128", 16), ("FLOAT32", 14, "float32", 4), ("FLOAT64", 15, "float64", 8),
]  # fmt: skip


@pytest.mark.parametrize("name, code, json_name, size", ALL_KINDS)
def test_kind_codes_names_and_sizes_match_the_seed(name, code, json_name, size):
    kind = HeaderKind[name]
    assert int(kind) == code
    assert kind.json_name == json_name == kind.name_json
    assert kind.fixed_size == size
    assert HeaderKind.from_json_name(json_name) is kind
    assert HeaderKind.from_code(code) is kind


def test_there_are_exactly_fifteen_kinds():
    assert [int(k) for k in HeaderKind] == list(range(1, 16))


@pytest.mark.parametrize("code", [0, 16, 255, 256, -1, "2", 2.0, True, None])
def test_unknown_kind_code_is_rejected(code):
    with pytest.raises(InvalidHeaderKind):
        HeaderKind.from_code(code)


@pytest.mark.parametrize("name", ["", "Raw", "STRING", "u8", "float", "uint256", " int8"])
def test_unknown_kind_json_name_is_rejected(name):
    with pytest.raises(InvalidHeaderKind):
        HeaderKind.from_json_name(name)


# ----------------------------------------------------------------- constructors
I128_MIN, I128_MAX, U128_MAX = -(2**127), 2**127 - 1, 2**128 - 1
CONSTRUCTED = [
    # constructor, python value, kind, exact bytes, accessor
    ("raw", b"\x00\xff", K.RAW, b"\x00\xff", "as_bytes"),
    ("raw", b"r" * 255, K.RAW, b"r" * 255, "as_bytes"),
    ("string", "héllo", K.STRING, "héllo".encode(), "as_str"),
    ("string", "x" * 255, K.STRING, b"x" * 255, "as_str"),
    ("bool", True, K.BOOL, b"\x01", "as_bool"),
    ("bool", False, K.BOOL, b"\x00", "as_bool"),
    ("int8", -128, K.INT8, b"\x80", "as_int"),
    ("int8", 127, K.INT8, b"\x7f", "as_int"),
    ("int16", -32768, K.INT16, b"\x00\x80", "as_int"),
    ("int16", 32767, K.INT16, b"\xff\x7f", "as_int"),
    ("int32", -(2**31), K.INT32, b"\x00\x00\x00\x80", "as_int"),
    ("int32", 2**31 - 1, K.INT32, b"\xff\xff\xff\x7f", "as_int"),
    ("int64", -(2**63), K.INT64, b"\x00" * 7 + b"\x80", "as_int"),
    ("int64", 2**63 - 1, K.INT64, b"\xff" * 7 + b"\x7f", "as_int"),
    ("int64", -2, K.INT64, b"\xfe" + b"\xff" * 7, "as_int"),
    ("int128", I128_MIN, K.INT128, b"\x00" * 15 + b"\x80", "as_int"),
    ("int128", I128_MAX, K.INT128, b"\xff" * 15 + b"\x7f", "as_int"),
    ("uint8", 0, K.UINT8, b"\x00", "as_int"),
    ("uint8", 255, K.UINT8, b"\xff", "as_int"),
    ("uint16", 65535, K.UINT16, b"\xff\xff", "as_int"),
    ("uint16", 0x0102, K.UINT16, b"\x02\x01", "as_int"),
    ("uint32", 2**32 - 1, K.UINT32, b"\xff" * 4, "as_int"),
    ("uint64", 2**64 - 1, K.UINT64, b"\xff" * 8, "as_int"),
    ("uint64", 123456, K.UINT64, (123456).to_bytes(8, "little"), "as_int"),
    ("uint128", 0, K.UINT128, b"\x00" * 16, "as_int"),
    ("uint128", U128_MAX, K.UINT128, b"\xff" * 16, "as_int"),
    ("float32", 1.5, K.FLOAT32, struct.pack("<f", 1.5), "as_float"),
    ("float32", -3.4028234663852886e38, K.FLOAT32, b"\xff\xff\x7f\xff", "as_float"),
    ("float64", 123.45, K.FLOAT64, struct.pack("<d", 123.45), "as_float"),
    ("float64", math.inf, K.FLOAT64, struct.pack("<d", math.inf), "as_float"),
    ("float64", 5e-324, K.FLOAT64, b"\x01" + b"\x00" * 7, "as_float"),
]


@pytest.mark.parametrize("ctor, value, kind, data, accessor", CONSTRUCTED)
def test_constructor_bytes_and_accessor(ctor, value, kind, data, accessor):
    hv = getattr(HV, ctor)(value)
    assert (hv.kind, hv.data) == (kind, data)
    assert getattr(hv, accessor)() == value
    assert hv.to_python() == value
    assert type(hv.to_python()) is type(value)
    assert HV(kind, data) == hv  # the validating constructor accepts what the helpers build
    assert HV(int(kind), bytearray(data)) == hv  # and coerces a code and a bytearray


def test_float32_stores_the_rounded_value():
    hv = HV.float32(0.1)
    assert hv.as_float() == struct.unpack("<f", struct.pack("<f", 0.1))[0]
    assert hv.as_float() != 0.1


OUT_OF_RANGE = [
    ("int8", 128), ("int8", -129), ("int16", 2**15), ("int16", -(2**15) - 1),
    ("int32", 2**31), ("int32", -(2**31) - 1), ("int64", 2**63), ("int64", -(2**63) - 1),
    ("int128", 2**127), ("int128", -(2**127) - 1), ("uint8", 256), ("uint8", -1),
    ("uint16", 2**16), ("uint32", 2**32), ("uint64", 2**64), ("uint64", -1),
    ("uint128", 2**128), ("uint128", -1), ("float32", 1e39), ("float32", -1e39),
    ("float64", 10**400),
]  # fmt: skip


@pytest.mark.parametrize("ctor, value", OUT_OF_RANGE)
def test_out_of_range_values_are_rejected(ctor, value):
    with pytest.raises(InvalidHeaderValue):
        getattr(HV, ctor)(value)


WRONG_TYPES = [
    ("int8", "1"), ("int8", True), ("int8", 1.0), ("uint64", None), ("bool", 1), ("bool", "true"),
    ("string", b"x"), ("raw", "x"), ("raw", 5), ("float64", "1.0"), ("float32", False),
    ("string", "\ud800"),  # a lone surrogate has no UTF-8 form
]  # fmt: skip


@pytest.mark.parametrize("ctor, value", WRONG_TYPES)
def test_wrong_python_types_are_rejected(ctor, value):
    with pytest.raises(InvalidHeaderValue):
        getattr(HV, ctor)(value)


INVALID_RAW = [
    (K.RAW, b"", InvalidHeaderValue),
    (K.RAW, b"x" * 256, InvalidHeaderValue),
    (K.STRING, b"", InvalidHeaderValue),
    (K.STRING, b"\xff", InvalidHeaderValue),
    (K.STRING, "é".encode() * 128, InvalidHeaderValue),  # 256 bytes, 128 characters
    (K.STRING, b"\xc3", InvalidHeaderValue),  # truncated UTF-8 sequence
    (K.BOOL, b"\x02", InvalidHeaderValue),
    (K.BOOL, b"\x00\x00", InvalidHeaderValue),
    (K.INT16, b"\x01", InvalidHeaderValue),
    (K.INT16, b"\x01\x02\x03\x04", InvalidHeaderValue),
    (K.UINT128, b"\x00" * 15, InvalidHeaderValue),
    (K.FLOAT64, b"\x00" * 4, InvalidHeaderValue),
    (K.FLOAT32, b"", InvalidHeaderValue),
    (K.RAW, "text", InvalidHeaderValue),
    (K.RAW, 7, InvalidHeaderValue),
    (0, b"x", InvalidHeaderKind),
    (16, b"x", InvalidHeaderKind),
    ("raw", b"x", InvalidHeaderKind),
]


@pytest.mark.parametrize("kind, data, exc", INVALID_RAW)
def test_direct_construction_validates(kind, data, exc):
    with pytest.raises(exc):
        HV(kind, data)


def test_string_limit_is_bytes_not_characters():
    assert len(HV.string("é" * 127).data) == 254
    with pytest.raises(InvalidHeaderValue):
        HV.string("é" * 128)


def test_error_family():
    for cls in (InvalidHeaderKey, InvalidHeaderValue, InvalidHeaderKind, HeadersTooLarge, MalformedHeaders):
        assert issubclass(cls, HeaderError) and issubclass(cls, FerryError)


OF_CASES = [
    ("s", K.STRING), (b"x", K.RAW), (bytearray(b"x"), K.RAW), (memoryview(b"xy"), K.RAW),
    (True, K.BOOL), (False, K.BOOL), (0, K.INT64), (5, K.INT64), (-(2**63), K.INT64),
    (2**63 - 1, K.INT64), (2**63, K.INT128), (-(2**63) - 1, K.INT128), (I128_MIN, K.INT128),
    (I128_MAX, K.INT128), (2**127, K.UINT128), (U128_MAX, K.UINT128), (1.5, K.FLOAT64),
    (math.nan, K.FLOAT64),
]  # fmt: skip


@pytest.mark.parametrize("value, kind", OF_CASES)
def test_of_infers_the_kind(value, kind):
    hv = HV.of(value)
    assert hv.kind is kind
    if kind is K.RAW:
        assert hv.as_bytes() == bytes(value)
    elif kind is not K.FLOAT64 or value == value:
        assert hv.to_python() == value


@pytest.mark.parametrize("value", [2**128, I128_MIN - 1, None, [1], {"a": 1}, 1j, b""])
def test_of_rejects_what_has_no_kind(value):
    with pytest.raises(InvalidHeaderValue):
        HV.of(value)


def test_of_returns_a_header_value_unchanged():
    hv = HV.uint16(3)
    assert HV.of(hv) is hv


WRONG_ACCESSOR = [
    (HV.string("1"), "as_int"), (HV.string("x"), "as_bytes"), (HV.raw(b"x"), "as_str"),
    (HV.int8(1), "as_float"), (HV.int8(1), "as_bool"), (HV.bool(True), "as_int"),
    (HV.float32(1.0), "as_int"), (HV.uint8(1), "as_bool"), (HV.float64(1.0), "as_str"),
    (HV.bool(False), "as_bytes"),
]  # fmt: skip


@pytest.mark.parametrize("hv, accessor", WRONG_ACCESSOR)
def test_accessor_of_the_wrong_kind_raises(hv, accessor):
    with pytest.raises(InvalidHeaderValue):
        getattr(hv, accessor)()


def test_value_is_frozen_hashable_and_has_an_evaluable_repr():
    hv = HV.uint32(7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        hv.data = b"\x00"  # type: ignore[misc]
    assert {hv: 1}[HV(K.UINT32, b"\x07\x00\x00\x00")] == 1
    assert hv != HV.int32(7)  # same bytes, other kind
    for value in (hv, HV.string("a'b"), HV.raw(b"\x00"), HV.bool(True), HV.float32(0.5)):
        assert eval(repr(value), {"HeaderValue": HeaderValue}) == value


# --------------------------------------------------------------------- text form
TEXT_FORMS = [
    (HV.string("a b: c"), "a b: c"),
    (HV.raw(b"\x00\xff"), "AP8="),
    (HV.raw(b"\xfb\xff"), "+/8="),  # standard alphabet, not URL-safe
    (HV.bool(True), "true"),
    (HV.bool(False), "false"),
    (HV.int8(-128), "-128"),
    (HV.uint128(U128_MAX), str(U128_MAX)),
    (HV.int128(I128_MIN), str(I128_MIN)),
    (HV.float64(0.1), "0.1"),
    (HV.float32(0.1), "0.1"),  # shortest float32 form, not 0.10000000149011612
    (HV.float32(16777216.0), "16777216"),
    (HV.float32(1e-45), "1e-45"),  # smallest float32 subnormal
    (HV.float64(1e300), "1e+300"),
    (HV.float64(-0.0), "-0.0"),
    (HV.float32(-0.0), "-0"),
    (HV.float64(math.inf), "inf"),
    (HV.float32(-math.inf), "-inf"),
    (HV.float64(math.nan), "nan"),
    (HV.float32(math.nan), "nan"),
    (HV(K.FLOAT32, bytes.fromhex("0100807f")), "nan(0x7f800001)"),  # signalling NaN keeps its bits
    (HV(K.FLOAT64, bytes.fromhex("000000000000f8ff")), "nan(0xfff8000000000000)"),  # negative NaN
]


@pytest.mark.parametrize("hv, text", TEXT_FORMS)
def test_text_form(hv, text):
    assert hv.to_text() == text
    assert HV.from_text(hv.kind, text) == hv


def test_from_text_accepts_a_plus_sign_and_a_code():
    assert HV.from_text(K.INT8, "+7") == HV.int8(7)
    assert HV.from_text(6, "-7") == HV.int32(-7)
    assert HV.from_text(K.FLOAT64, "+1e3") == HV.float64(1000.0)


BAD_TEXT = [
    (K.INT8, "128", InvalidHeaderValue), (K.INT8, "1.0", InvalidHeaderValue),
    (K.INT8, " 1", InvalidHeaderValue), (K.INT8, "1_0", InvalidHeaderValue),
    (K.INT8, "", InvalidHeaderValue), (K.INT8, "٣", InvalidHeaderValue),  # non-ASCII digit
    (K.UINT8, "-1", InvalidHeaderValue), (K.UINT128, "9" * 41, InvalidHeaderValue),
    (K.BOOL, "True", InvalidHeaderValue), (K.BOOL, "1", InvalidHeaderValue),
    (K.RAW, "not base64!", InvalidHeaderValue), (K.RAW, "AP8", InvalidHeaderValue),
    (K.RAW, "", InvalidHeaderValue), (K.RAW, "é", InvalidHeaderValue),
    (K.RAW, "AP-_", InvalidHeaderValue),  # URL-safe alphabet
    (K.STRING, "", InvalidHeaderValue), (K.STRING, "x" * 256, InvalidHeaderValue),
    (K.FLOAT64, "1e999", InvalidHeaderValue), (K.FLOAT32, "1e39", InvalidHeaderValue),
    (K.FLOAT64, "NaN", InvalidHeaderValue), (K.FLOAT64, "-nan", InvalidHeaderValue),
    (K.FLOAT64, "infinity", InvalidHeaderValue), (K.FLOAT64, "0x1p3", InvalidHeaderValue),
    (K.FLOAT64, "1_0.0", InvalidHeaderValue), (K.FLOAT64, "", InvalidHeaderValue),
    (K.FLOAT64, "1" * 401, InvalidHeaderValue),
    (K.FLOAT64, "nan(0x7ff0000000000000)", InvalidHeaderValue),  # the bits of inf
    (K.FLOAT64, "nan(0x7fc00000)", InvalidHeaderValue),  # a float32 width
    (K.FLOAT32, "nan(0x7FC00001)", InvalidHeaderValue),  # upper-case hex is not our form
    (0, "x", InvalidHeaderKind), (99, "1", InvalidHeaderKind),
]  # fmt: skip


@pytest.mark.parametrize("kind, text, exc", BAD_TEXT)
def test_from_text_rejects(kind, text, exc):
    with pytest.raises(exc):
        HV.from_text(kind, text)


# ----------------------------------------------------------- hypothesis: text
def test_every_kind_has_a_strategy():
    assert set(VALUES_BY_KIND) == set(HeaderKind)


@PROPS
@given(any_value)
def test_text_round_trip_is_exact_for_every_kind(hv):
    text = hv.to_text()
    assert isinstance(text, str)
    back = HV.from_text(hv.kind, text)
    assert back == hv  # same kind, same bytes (NaN payloads included)


@PROPS
@given(st.floats(width=32, allow_nan=False))
def test_float32_text_is_never_longer_than_repr(x):
    hv = HV.float32(x)
    assert len(hv.to_text()) <= len(repr(hv.as_float()))
