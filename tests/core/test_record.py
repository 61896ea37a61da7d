"""Tests for core.record: the stored record layout (Iggy 0.7/0.8 64-byte header,
payload, header TLV, XXH3-64 of bytes 8..end)."""

from __future__ import annotations

import struct

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from core import record
from core.errors import CorruptSegment, InvalidArgument, PayloadTooLarge
from core.message import Headers, HeaderValue
from core.record import (
    RECORD_HEADER_SIZE,
    encode_record,
    parse_record,
    record_checksum_ok,
    record_size,
)

PROPS = settings(deadline=None, derandomize=True, max_examples=100)
# An independent reading of iggy-middle.md section 7.1, to pin the layout.
IGGY_08_HEADER = struct.Struct("<Q16sQQQIIQ")

ID = 0x0123456789ABCDEF_FEDCBA9876543210
HEADERS = Headers([("trace", "abc"), ("n", HeaderValue.uint8(7))]).encode()


def _sample(**overrides: object) -> bytes:
    fields = dict(id=ID, offset=9, timestamp=1_700_000_000_000_001, origin_timestamp=1_699_000_000_000_000,
                  headers=HEADERS, payload=b"hello")  # fmt: skip
    fields.update(overrides)
    return encode_record(**fields)  # type: ignore[arg-type]


def test_round_trip_fields():
    raw = _sample()
    view = parse_record(raw)
    assert (view.id, view.offset, view.timestamp, view.origin_timestamp) == (
        ID, 9, 1_700_000_000_000_001, 1_699_000_000_000_000,
    )  # fmt: skip
    assert bytes(view.payload) == b"hello" and bytes(view.headers) == HEADERS
    assert view.size == len(raw) == RECORD_HEADER_SIZE + 5 + len(HEADERS) == record_size(raw)
    assert Headers.decode(view.headers).get("trace") == HeaderValue.string("abc")


def test_layout_matches_iggy_08_message_header():
    raw = _sample()
    csum, id_bytes, offset, ts, origin, hlen, plen, reserved = IGGY_08_HEADER.unpack_from(raw)
    assert RECORD_HEADER_SIZE == IGGY_08_HEADER.size == 64
    assert int.from_bytes(id_bytes, "little") == ID  # u128 LE
    assert (offset, ts, origin) == (9, 1_700_000_000_000_001, 1_699_000_000_000_000)
    assert (hlen, plen, reserved) == (len(HEADERS), 5, 0)
    assert raw[64:69] == b"hello" and raw[69:] == HEADERS  # payload, then headers
    assert csum == xxhash.xxh3_64_intdigest(raw[8:]) == parse_record(raw).checksum


@pytest.mark.parametrize("id_", [0, 1, 2**64 - 1, 2**64, 2**128 - 1])
def test_id_extremes(id_):
    assert parse_record(_sample(id=id_)).id == id_


def test_empty_payload_and_headers():
    raw = encode_record(0, 0, 0, 0, b"", b"")
    view = parse_record(raw)
    assert len(raw) == RECORD_HEADER_SIZE and view.size == RECORD_HEADER_SIZE
    assert bytes(view.payload) == b"" and bytes(view.headers) == b""


def test_every_single_byte_corruption_is_detected():
    raw = _sample()
    for i in range(len(raw)):
        for flip in (0x01, 0x80):
            bad = bytearray(raw)
            bad[i] ^= flip
            with pytest.raises(CorruptSegment):
                parse_record(bad)
            assert not record_checksum_ok(bad)
    assert record_checksum_ok(raw)


def test_checksum_mismatch_reports_where():
    bad = bytearray(_sample())
    bad[64] ^= 0xFF  # first payload byte
    with pytest.raises(CorruptSegment, match="checksum") as info:
        parse_record(bad)
    assert info.value.details == {"position": 0, "offset": 9}
    bad.extend(b"x")  # the failed parse left no view on the buffer


def test_verify_false_skips_the_checksum():
    bad = bytearray(_sample())
    bad[64] ^= 0xFF
    view = parse_record(bad, verify=False)
    assert bytes(view.payload)[0] == ord("h") ^ 0xFF


def test_every_truncation_is_detected():
    raw = _sample()
    for cut in range(len(raw)):
        with pytest.raises(CorruptSegment, match="truncated"):
            parse_record(raw[:cut])
        if cut < RECORD_HEADER_SIZE:
            with pytest.raises(CorruptSegment):
                record_size(raw[:cut])
        else:
            assert record_size(raw[:cut]) == len(raw)  # the header alone gives the size


def test_parse_at_offsets_inside_a_bigger_buffer():
    recs = [_sample(offset=i, payload=b"p" * i, headers=HEADERS if i % 2 else b"") for i in range(1, 6)]
    prefix = b"\xee" * 13
    buf = bytearray(prefix + b"".join(recs) + recs[0][:20])  # a torn write at the end
    pos, seen = len(prefix), []
    while True:
        try:
            view = parse_record(buf, pos)
        except CorruptSegment:
            break
        assert record_size(buf, pos) == view.size
        seen.append((view.offset, bytes(view.payload), bytes(view.headers)))
        pos += view.size
    assert seen == [(i, b"p" * i, HEADERS if i % 2 else b"") for i in range(1, 6)]
    assert pos == len(buf) - 20
    for form in (bytes, memoryview):
        assert parse_record(form(buf), len(prefix)).offset == 1


def test_views_point_into_the_buffer():
    buf = bytearray(b"\x00" * 3 + _sample())
    view = parse_record(buf, 3)
    assert view.payload.obj is buf and view.headers.obj is buf
    view.payload.release()
    view.headers.release()


def test_negative_position_is_refused():
    raw = _sample()
    with pytest.raises(InvalidArgument):
        parse_record(raw, -len(raw))
    with pytest.raises(InvalidArgument):
        record_size(raw, -len(raw))


@pytest.mark.parametrize(
    "field, value",
    [("id", -1), ("id", 2**128), ("offset", -1), ("offset", 2**64), ("timestamp", -5), ("origin_timestamp", 2**64)],
)
def test_out_of_range_fields_are_refused(field, value):
    with pytest.raises(InvalidArgument):
        _sample(**{field: value})


def test_payload_limit(monkeypatch):
    monkeypatch.setattr(record, "MAX_PAYLOAD", 8)
    assert parse_record(_sample(payload=b"x" * 8)).size == RECORD_HEADER_SIZE + 8 + len(HEADERS)
    with pytest.raises(PayloadTooLarge):
        _sample(payload=b"x" * 9)


@PROPS
@given(
    st.integers(0, 2**128 - 1),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
    st.binary(max_size=300),
    st.binary(max_size=300),
    st.binary(max_size=40),
)
def test_round_trip_property(id_, offset, ts, origin, headers, payload, prefix):
    raw = encode_record(id_, offset, ts, origin, headers, payload)
    view = parse_record(prefix + raw + b"tail", len(prefix))
    assert (view.id, view.offset, view.timestamp, view.origin_timestamp) == (id_, offset, ts, origin)
    assert (bytes(view.payload), bytes(view.headers)) == (payload, headers)
    assert view.checksum == xxhash.xxh3_64_intdigest(raw[8:])
    assert view.size == len(raw) == record_size(raw)
