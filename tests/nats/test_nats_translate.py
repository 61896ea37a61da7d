"""Canonical typed headers <-> NATS header blocks (docs/headers.md)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.nats.headers import parse_headers
from adapters.nats.translate import block_to_headers, canonical_to_nats, nats_to_canonical, stored_subject
from core.addressing import SUBJECT_HEADER
from core.errors import InvalidHeaderValue
from core.header_value import HeaderValue as HV
from core.message import Headers
from header_strategies import PROPS, any_value

pairs = st.lists(st.tuples(any_value, any_value), min_size=0, max_size=8)


def _headers(items) -> Headers:
    h = Headers()
    for k, v in items:
        h.add(k, v)
    return h


@PROPS
@given(pairs)
def test_canonical_to_nats_and_back_is_lossless_for_every_kind(items):
    original = _headers(items)
    block = canonical_to_nats(original.encode(), drop_subject=False)
    back = block_to_headers(parse_headers(block)) if block else Headers()
    assert back == original


def test_plain_string_headers_go_out_as_written_without_a_kinds_line():
    h = _headers([(HV.string("A"), HV.string("1")), (HV.string("A"), HV.string("2"))])
    assert canonical_to_nats(h.encode()) == b"NATS/1.0\r\nA: 1\r\nA: 2\r\n\r\n"


def test_documented_example():
    h = _headers([(HV.string("trace"), HV.string("abc")), (HV.uint64(5), HV.float32(1.5)),
                  (HV.string("bin"), HV.raw(b"\x00\xff")), (HV.string("bad key"), HV.string("v"))])
    assert canonical_to_nats(h.encode()) == (
        b"NATS/1.0\r\ntrace: abc\r\n5: 1.5\r\nbin: AP8=\r\nYmFkIGtleQ==: v\r\n"
        b"Ferry-Header-Kinds: 1:uint64:float32,2:string:raw,3:string:string:k\r\n\r\n")


def test_subject_header_is_added_on_store_and_dropped_on_delivery():
    tlv = nats_to_canonical(b"NATS/1.0\r\nK: v\r\nferry-nats-subject: spoofed\r\n\r\n", "orders.eu")
    assert [(k.as_str(), v.as_str()) for k, v in Headers.decode(tlv)] == [("K", "v"), (SUBJECT_HEADER, "orders.eu")]
    assert stored_subject(tlv) == "orders.eu"
    assert canonical_to_nats(tlv) == b"NATS/1.0\r\nK: v\r\n\r\n"


def test_empty_values_are_not_stored_and_status_line_is_not_a_header():
    tlv = nats_to_canonical(b"NATS/1.0 503\r\nEmpty:\r\nK: v\r\n\r\n", "a.b")
    assert [k.as_str() for k, _ in Headers.decode(tlv)] == ["K", SUBJECT_HEADER]


def test_values_over_255_bytes_cannot_be_stored():
    with pytest.raises(InvalidHeaderValue):
        nats_to_canonical(b"NATS/1.0\r\nK: " + b"x" * 256 + b"\r\n\r\n", "a.b")


@pytest.mark.parametrize("kinds_line", [
    "nonsense", "0:string", "0:bogus:string", "0:string:string:z", "x:string:string",
    "0:uint8:string",  # key "K" is not a uint8's text: kept as string
])
def test_malformed_kinds_line_keeps_every_line_as_a_string(kinds_line):
    block = f"NATS/1.0\r\nK: v\r\nFerry-Header-Kinds: {kinds_line}\r\n\r\n".encode()
    back = block_to_headers(parse_headers(block))
    assert [(k.kind.json_name, k.as_str(), v.as_str()) for k, v in back] == [("string", "K", "v")]
