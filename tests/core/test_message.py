"""Tests for core.message: header blocks (TLV and seed-era legacy), the Headers
multi-map, Message.from_record, uuid7 and now_us. Values: test_header_value.py."""

from __future__ import annotations

import struct
import time
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.errors import (
    HeaderError,
    HeadersTooLarge,
    InvalidHeaderKey,
    InvalidHeaderKind,
    InvalidHeaderValue,
    MalformedHeaders,
)
from core.message import (
    MAX_HEADERS_SIZE,
    Headers,
    HeaderValue,
    Message,
    Uuid7Generator,
    now_us,
    uuid7,
)
from core.record import encode_record, parse_record
from header_strategies import PROPS, any_value, utf8_text

HV = HeaderValue

# --------------------------------------------------------------------- Headers
def test_headers_keep_order_and_repeated_keys():
    h = Headers()
    h.add("a", "1")
    h.add("b", 2)
    h.add("a", HV.uint8(3))
    assert len(h) == 3 and h
    assert h.get("a") == HV.string("1")  # first
    assert h.get_all("a") == [HV.string("1"), HV.uint8(3)]
    assert h.get("missing") is None
    assert h.get("missing", HV.bool(True)) == HV.bool(True)
    assert h.get_all("missing") == []
    assert h.keys() == [HV.string("a"), HV.string("b"), HV.string("a")]
    assert h.values() == [HV.string("1"), HV.int64(2), HV.uint8(3)]
    assert list(h) == h.items() == list(zip(h.keys(), h.values()))
    assert "b" in h and HV.string("b") in h and "c" not in h and 5 not in h


def test_headers_to_dict_last_value_wins_and_from_dict():
    h = Headers([("a", "1"), ("b", "2"), ("a", "3")])
    assert h.to_dict() == {HV.string("a"): HV.string("3"), HV.string("b"): HV.string("2")}
    assert list(h.to_dict()) == [HV.string("a"), HV.string("b")]
    assert Headers.from_dict({"x": 1, HV.uint8(2): b"raw"}) == Headers([("x", 1), (HV.uint8(2), b"raw")])
    assert Headers({"x": "y"}) == Headers([("x", "y")])  # a mapping is read as its items


def test_headers_equality_copy_bool_and_repr():
    h = Headers([("k", "v"), (HV.uint16(9), True)])
    assert h == Headers(h) and h is not Headers(h)
    assert h != Headers([(HV.uint16(9), True), ("k", "v")])  # order matters
    assert h != [("k", "v")]
    assert not Headers() and Headers() == Headers()
    assert repr(h) == "Headers([('k', HeaderValue.string('v')), (HeaderValue.uint16(9), HeaderValue.bool(True))])"
    with pytest.raises(TypeError):
        hash(h)


def test_headers_remove():
    h = Headers([("a", "1"), ("b", "2"), ("a", "3")])
    assert h.remove("a") == 2
    assert h == Headers([("b", "2")])
    assert h.encoded_size == len(h.encode()) == 12
    assert h.remove("zz") == 0


def test_typed_keys_are_distinct_from_string_keys():
    h = Headers([(HV.uint32(7), "x")])
    assert h.get(HV.uint32(7)) == HV.string("x")
    assert h.get("7") is None and h.get(HV.uint64(7)) is None


BAD_KEYS = ["", "k" * 256, "é" * 128, "\ud800", 5, b"bytes", None]


@pytest.mark.parametrize("key", BAD_KEYS)
def test_add_rejects_bad_keys(key):
    h = Headers()
    with pytest.raises(InvalidHeaderKey):
        h.add(key, "v")
    assert not h


def test_add_accepts_the_longest_key():
    h = Headers([("k" * 255, "v"), ("é" * 127 + "x", "v")])
    assert len(h) == 2


@pytest.mark.parametrize("value", ["", b"", None, "v" * 256, 2**128])
def test_add_rejects_bad_values(value):
    h = Headers()
    with pytest.raises(InvalidHeaderValue):
        h.add("k", value)
    assert not h


def test_lookups_of_impossible_keys_find_nothing():
    h = Headers([("k", "v")])
    assert h.get("") is None and h.get_all("\ud800") == [] and "" not in h
    with pytest.raises(InvalidHeaderKey):
        h.get(5)  # type: ignore[arg-type]


def _full_headers() -> Headers:
    """Headers whose encoding is exactly MAX_HEADERS_SIZE bytes."""
    h = Headers()
    per_entry = 10 + 255 + 255
    count, rest = divmod(MAX_HEADERS_SIZE, per_entry)
    for _ in range(count):
        h.add("k" * 255, b"v" * 255)
    h.add("a", b"v" * (rest - 10 - 1))
    return h


def test_headers_size_limit_is_inclusive_and_checked_in_add():
    h = _full_headers()
    assert h.encoded_size == len(h.encode()) == MAX_HEADERS_SIZE == 100_000
    before = len(h)
    with pytest.raises(HeadersTooLarge):
        h.add("b", "c")
    assert len(h) == before and len(h.encode()) == MAX_HEADERS_SIZE
    assert Headers.decode(h.encode()) == h


def test_decode_rejects_an_oversized_block():
    block = _full_headers().encode() + Headers([("b", "c")]).encode()
    with pytest.raises(HeadersTooLarge):
        Headers.decode(block)


def test_decode_legacy_rejects_a_block_too_large_once_canonical():
    # 9000 one-byte pairs: 99 000 legacy bytes, but 108 000 in the TLV form we store
    block = b"".join(struct.pack("<I", 1) + b"k" + struct.pack("<BI", 9, 1) + b"\x01" for _ in range(9000))
    assert len(block) <= MAX_HEADERS_SIZE
    with pytest.raises(HeadersTooLarge):
        Headers.decode_legacy(block)


# -------------------------------------------------------------- wire: TLV block
# iggy-middle.md section 7.2, bytes accepted by the apache-iggy 0.8 client.
IGGY_TLV_EXAMPLE = bytes.fromhex("02 05000000 7472616365 02 03000000 616263 02 01000000 6e 09 01000000 07")


def test_tlv_known_answer_from_iggy():
    h = Headers([("trace", "abc"), ("n", HV.uint8(7))])
    assert h.encode() == IGGY_TLV_EXAMPLE
    assert Headers.decode(IGGY_TLV_EXAMPLE) == h
    assert Headers().encode() == b"" and Headers.decode(b"") == Headers()


def test_decode_from_a_view_inside_a_bigger_buffer():
    buf = bytearray(b"prefix" + IGGY_TLV_EXAMPLE + b"suffix")
    h = Headers.decode(memoryview(buf)[6 : 6 + len(IGGY_TLV_EXAMPLE)])
    assert h.get("trace") == HV.string("abc")
    buf.extend(b"more")  # no view on the bytearray outlives decode


def _entry(kkind: int, key: bytes, vkind: int, value: bytes) -> bytes:
    return struct.pack("<BI", kkind, len(key)) + key + struct.pack("<BI", vkind, len(value)) + value


GOOD = _entry(2, b"k", 2, b"v")
MALFORMED_TLV = [
    ("one byte", b"\x02", MalformedHeaders),
    ("truncated key head", b"\x02\x01\x00\x00", MalformedHeaders),
    ("truncated key", b"\x02\x05\x00\x00\x00ab", MalformedHeaders),
    ("key without value", b"\x02\x01\x00\x00\x00k", MalformedHeaders),
    ("truncated value head", b"\x02\x01\x00\x00\x00k\x02\x01", MalformedHeaders),
    ("truncated value", b"\x02\x01\x00\x00\x00k\x02\x03\x00\x00\x00ab", MalformedHeaders),
    ("zero key kind", _entry(0, b"k", 2, b"v"), InvalidHeaderKind),
    ("zero value kind", _entry(2, b"k", 0, b"v"), InvalidHeaderKind),
    ("key kind 16", _entry(16, b"k", 2, b"v"), InvalidHeaderKind),
    ("value kind 255", _entry(2, b"k", 255, b"v"), InvalidHeaderKind),
    ("empty key", _entry(2, b"", 2, b"v"), InvalidHeaderKey),
    ("256-byte key", _entry(2, b"k" * 256, 2, b"v"), InvalidHeaderKey),
    ("huge key length", b"\x02\xff\xff\xff\xffk", InvalidHeaderKey),
    ("empty value", _entry(2, b"k", 2, b""), InvalidHeaderValue),
    ("256-byte value", _entry(2, b"k", 1, b"v" * 256), InvalidHeaderValue),
    ("huge value length", b"\x02\x01\x00\x00\x00k\x01\xff\xff\xff\xff", InvalidHeaderValue),
    ("key not UTF-8", _entry(2, b"\xff", 2, b"v"), InvalidHeaderKey),
    ("value not UTF-8", _entry(2, b"k", 2, b"\xc3"), InvalidHeaderValue),
    ("bool value 2", _entry(2, b"k", 3, b"\x02"), InvalidHeaderValue),
    ("4-byte int16 value", _entry(2, b"k", 5, b"\x00" * 4), InvalidHeaderValue),
    ("4-byte uint64 key", _entry(12, b"\x00" * 4, 2, b"v"), InvalidHeaderKey),
    ("trailing byte", GOOD + b"\x00", MalformedHeaders),
    ("trailing zero head", GOOD + b"\x00" * 5, InvalidHeaderKind),
    ("trailing lone key", GOOD + b"\x02\x01\x00\x00\x00k", MalformedHeaders),
    ("bad second entry", GOOD + _entry(2, b"k", 8, b"\x00"), InvalidHeaderValue),
]


@pytest.mark.parametrize("name, buf, exc", MALFORMED_TLV, ids=[c[0] for c in MALFORMED_TLV])
def test_decode_rejects_malformed_blocks(name, buf, exc):
    for form in (bytes, bytearray, memoryview):
        with pytest.raises(exc):
            Headers.decode(form(buf))


# ---------------------------------------------------------- wire: legacy map
def _legacy(key: bytes, kind: int, value: bytes) -> bytes:
    return struct.pack("<I", len(key)) + key + struct.pack("<BI", kind, len(value)) + value


def test_legacy_known_answer_from_the_seed():
    block = bytes.fromhex("05000000" "7472616365" "02" "03000000" "616263")  # seeds/000 layout
    assert Headers([("trace", "abc")]).encode_legacy() == block
    assert Headers.decode_legacy(block) == Headers([("trace", "abc")])


def test_decode_legacy_keeps_repeated_keys_and_encode_legacy_collapses_them():
    block = _legacy(b"a", 2, b"1") + _legacy(b"b", 2, b"2") + _legacy(b"a", 2, b"3")
    h = Headers.decode_legacy(block)
    assert h.get_all("a") == [HV.string("1"), HV.string("3")]
    assert h.encode_legacy() == _legacy(b"a", 2, b"3") + _legacy(b"b", 2, b"2")


def test_encode_legacy_stringifies_typed_keys_and_skips_those_too_long():
    h = Headers([(HV.uint32(7), "x"), (HV.raw(b"\x00" * 200), "y"), ("7", "z"), (HV.bool(True), 1)])
    # the uint32 key 7 and the string key "7" meet in the map: the later one wins
    assert Headers.decode_legacy(h.encode_legacy()) == Headers([("7", "z"), ("true", HV.int64(1))])


MALFORMED_LEGACY = [
    ("truncated key length", b"\x01\x00\x00", MalformedHeaders),
    ("empty key", _legacy(b"", 2, b"v"), InvalidHeaderKey),
    ("256-byte key", _legacy(b"k" * 256, 2, b"v"), InvalidHeaderKey),
    ("key not UTF-8", _legacy(b"\xfe", 2, b"v"), InvalidHeaderKey),
    ("truncated key", b"\x03\x00\x00\x00ab", MalformedHeaders),
    ("key without value", b"\x01\x00\x00\x00k", MalformedHeaders),
    ("zero kind", _legacy(b"k", 0, b"v"), InvalidHeaderKind),
    ("kind 16", _legacy(b"k", 16, b"v"), InvalidHeaderKind),
    ("empty value", _legacy(b"k", 1, b""), InvalidHeaderValue),
    ("8-byte int32", _legacy(b"k", 6, b"\x00" * 8), InvalidHeaderValue),
    ("truncated value", _legacy(b"k", 1, b"vvv")[:-1], MalformedHeaders),
    ("trailing byte", _legacy(b"k", 2, b"v") + b"\x01", MalformedHeaders),
]


@pytest.mark.parametrize("name, buf, exc", MALFORMED_LEGACY, ids=[c[0] for c in MALFORMED_LEGACY])
def test_decode_legacy_rejects_malformed_blocks(name, buf, exc):
    for form in (bytes, bytearray, memoryview):
        with pytest.raises(exc):
            Headers.decode_legacy(form(buf))


# ------------------------------------------------------ hypothesis: round trips
KEY_POOL = ["a", "b", "content-type", "é", "k" * 255]
str_keys = st.one_of(st.sampled_from(KEY_POOL), utf8_text)
any_keys = st.one_of(str_keys, any_value)
pairs_any = st.lists(st.tuples(any_keys, any_value), max_size=12)
pairs_str = st.lists(st.tuples(str_keys, any_value), max_size=12)


@PROPS
@given(pairs_any)
def test_tlv_round_trip(pairs):
    h = Headers(pairs)
    block = h.encode()
    assert len(block) == h.encoded_size
    for form in (bytes, bytearray, memoryview):
        back = Headers.decode(form(block))
        assert back == h
        assert back.encode() == block
    assert [k for k, _ in h] == [HV.of(k) if isinstance(k, str) else k for k, _ in pairs]


@PROPS
@given(pairs_str)
def test_legacy_round_trip_gives_the_map_view(pairs):
    h = Headers(pairs)
    back = Headers.decode_legacy(h.encode_legacy())
    assert back.to_dict() == h.to_dict()
    assert back.items() == list(h.to_dict().items())  # one pair per key, map order
    assert Headers.decode_legacy(bytearray(h.encode_legacy())) == back


@PROPS
@given(pairs_any, st.data())
def test_every_prefix_decodes_to_leading_pairs_or_raises(pairs, data):
    h = Headers(pairs)
    block = h.encode()
    cut = data.draw(st.integers(0, len(block)))
    try:
        got = Headers.decode(block[:cut])
    except HeaderError:
        return
    assert got.items() == h.items()[: len(got)]


@PROPS
@given(st.binary(max_size=64))
def test_decoding_noise_raises_only_header_errors(noise):
    for decode in (Headers.decode, Headers.decode_legacy):
        try:
            decode(noise)
        except HeaderError:
            pass


# ---------------------------------------------------------------------- Message
def test_message_from_record():
    headers = Headers([("trace", "abc"), (HV.uint8(1), 2.5)])
    raw = encode_record(2**100 + 5, 42, 1_700_000_000_000_000, 1_699_999_999_000_000, headers.encode(), b"hi")
    view = parse_record(raw)
    msg = Message.from_record(view)
    assert msg == Message(
        id=2**100 + 5,
        timestamp=1_700_000_000_000_000,
        origin_timestamp=1_699_999_999_000_000,
        headers=headers,
        payload=b"hi",
        offset=42,
        checksum=view.checksum,
    )
    assert type(msg.payload) is bytes


def test_message_from_record_without_headers_and_defaults():
    msg = Message.from_record(parse_record(encode_record(0, 0, 1, 1, b"", b"")))
    assert msg.headers == Headers() and msg.payload == b""
    plain = Message(1, 2, 3, Headers(), b"p")
    assert (plain.offset, plain.checksum) == (0, 0)
    with pytest.raises(AttributeError):
        plain.extra = 1  # type: ignore[attr-defined]  # slotted


def test_message_from_record_with_a_bad_header_block():
    raw = encode_record(1, 0, 1, 1, b"\x02\x01\x00\x00", b"p")  # checksum fine, block truncated
    with pytest.raises(MalformedHeaders):
        Message.from_record(parse_record(raw))


# ------------------------------------------------------------------ uuid7, now_us
def _fields(u: int) -> tuple[int, int, int, int]:
    """(ms, version, variant, 74-bit counter) of a UUIDv7 int."""
    counter = (((u >> 64) & 0xFFF) << 62) | (u & ((1 << 62) - 1))
    return u >> 80, (u >> 76) & 0xF, (u >> 62) & 0b11, counter


def test_uuid7_layout_and_timestamp():
    before = time.time_ns() // 1_000_000
    u = uuid7()
    after = time.time_ns() // 1_000_000
    ms, version, variant, _ = _fields(u)
    assert 0 < u < 2**128
    assert (version, variant) == (7, 0b10)
    assert before <= ms <= after
    parsed = uuid.UUID(int=u)
    assert parsed.version == 7 and parsed.variant == uuid.RFC_4122


def test_uuid7_is_strictly_increasing_in_process():
    ids = [uuid7() for _ in range(2000)]
    assert ids == sorted(set(ids))


def test_uuid7_counter_within_one_millisecond():
    gen = Uuid7Generator(clock_ms=lambda: 1000, seed=lambda: 5)
    a, b, c = gen(), gen(), gen()
    assert [_fields(x) for x in (a, b, c)] == [(1000, 7, 2, 5), (1000, 7, 2, 6), (1000, 7, 2, 7)]


def test_uuid7_counter_carries_from_rand_b_into_rand_a():
    gen = Uuid7Generator(clock_ms=lambda: 1, seed=lambda: (1 << 62) - 1)
    a, b = gen(), gen()
    assert (a >> 64) & 0xFFF == 0 and (b >> 64) & 0xFFF == 1 and b & ((1 << 62) - 1) == 0
    assert b > a


def test_uuid7_survives_a_clock_going_backwards():
    times = iter([5000, 4000, 4999, 5001])
    gen = Uuid7Generator(clock_ms=lambda: next(times), seed=lambda: 100)
    ids = [gen() for _ in range(4)]
    assert [_fields(u)[0] for u in ids] == [5000, 5000, 5000, 5001]
    assert ids == sorted(ids) and len(set(ids)) == 4


def test_uuid7_counter_overflow_moves_to_the_next_millisecond():
    seeds = iter([(1 << 74) - 1, 9])
    gen = Uuid7Generator(clock_ms=lambda: 7, seed=lambda: next(seeds))
    a, b = gen(), gen()
    assert _fields(a) == (7, 7, 2, (1 << 74) - 1)
    assert _fields(b) == (8, 7, 2, 9)
    assert b > a


def test_uuid7_default_seed_leaves_the_rollover_bit_clear():
    for _ in range(50):
        assert _fields(Uuid7Generator(clock_ms=lambda: 1)())[3] < 1 << 73


def test_now_us():
    before = time.time_ns() // 1000
    t = now_us()
    assert before <= t <= time.time_ns() // 1000
