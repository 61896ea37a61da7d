"""gateway/jetstream_store/layout.py: Ferry records as JetStream messages, metadata log entries,
JetStream API answers (scale-out mode, docs/scale-out.md)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.nats.headers import parse_headers
from core.errors import InvalidArgument
from core.message import Headers
from gateway.jetstream_store.layout import (
    ApiError, Layout, ack_info, api_answer, decode_entry, decode_message, encode_entry,
    encode_message, mirror_consumer, pub_ack,
)  # fmt: skip
from header_strategies import PROPS, any_value

headers_st = st.lists(st.tuples(any_value, any_value), max_size=6)
producer_st = st.none() | st.tuples(st.text(min_size=1, max_size=40), st.integers(-(2**63), 2**63 - 1))


def _tlv(pairs) -> bytes:
    h = Headers()
    for k, v in pairs:
        h.add(k, v)
    return h.encode() if pairs else b""


@PROPS
@given(pairs=headers_st, mid=st.integers(0, 2**128 - 1), ts=st.integers(0, 2**63 - 1),
       origin=st.integers(0, 2**63 - 1), producer=producer_st, index=st.integers(0, 1000))
def test_message_round_trip_is_lossless(pairs, mid, ts, origin, producer, index):
    tlv = _tlv(pairs)
    block = encode_message(mid, ts, origin, tlv, producer, index)
    parse_headers(block)  # a valid ADR-4 block: JetStream stores it as it is
    got = decode_message(block)
    assert (got.id, got.timestamp, got.origin_timestamp, got.producer) == (mid, ts, origin, producer)
    assert Headers.decode(got.headers) == Headers.decode(tlv) if tlv else got.headers == b""


def test_readable_headers_and_the_publish_subject_are_kept():
    tlv = _tlv([("ferry-nats-subject", "orders.eu"), ("trace", "abc")])
    block = encode_message(1, 2, 3, tlv)
    items = parse_headers(block).items
    assert items[0] == ("Ferry-Store", f"1;{1:032x};2;3")
    assert ("trace", "abc") in items
    assert decode_message(block).headers == tlv


def test_user_nats_headers_never_reach_jetstream_as_such():
    # JetStream acts on Nats-* headers (Nats-Expected-Stream would fail the publish).
    tlv = _tlv([("Nats-Expected-Stream", "other"), ("a", "b")])
    block = encode_message(7, 1, 1, tlv)
    keys = [k for k, _ in parse_headers(block).items]
    assert keys == ["Ferry-Store", "Nats-Msg-Id", "Ferry-Headers"]
    assert decode_message(block).headers == tlv


def test_producer_calls_carry_a_dedup_id():
    block = encode_message(5, 1, 1, b"", ("writer/1", 42), 3)
    items = dict(parse_headers(block).items)
    assert items["Nats-Msg-Id"].endswith(":42:3")
    assert decode_message(block).producer == ("writer/1", 42)
    # without a producer the message id dedups the gateway's own re-sends
    assert dict(parse_headers(encode_message(5, 1, 1, b"")).items)["Nats-Msg-Id"] == f"{5:032x}"


@pytest.mark.parametrize("header, error", [
    (None, "without a Ferry-Store header"),
    (b"NATS/1.0\r\nfoo: bar\r\n\r\n", "without a Ferry-Store header"),
    (b"NATS/1.0\r\nFerry-Store: 2;00;1;1\r\n\r\n", "malformed Ferry-Store header"),
    (b"NATS/1.0\r\nFerry-Store: 1;zz;1;1\r\n\r\n", "malformed Ferry-Store header"),
    (b"NATS/1.0\r\nFerry-Store: 1;00;1\r\n\r\n", "malformed Ferry-Store header"),
    (b"NATS/1.0\r\nFerry-Store: 1;00;1;1\r\nFerry-Headers: !!\r\n\r\n", "malformed Ferry-Headers header"),
])
def test_foreign_messages_are_refused(header, error):
    with pytest.raises(InvalidArgument, match=error):
        decode_message(header)


@PROPS
@given(st.lists(st.tuples(st.text(max_size=30), st.lists(
    st.none() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20) | st.binary(max_size=20)
    | st.floats(allow_nan=False), max_size=5)), max_size=5))
def test_metadata_entries_round_trip(statements):
    assert decode_entry(encode_entry(statements)) == [(sql, tuple(p)) for sql, p in statements]


@pytest.mark.parametrize("data", [b"", b"[]", b'{"v":2,"s":[]}', b'{"v":1}', b'{"v":1,"s":[["x",[{"b":"!"}]]]}'])
def test_malformed_metadata_entries(data):
    with pytest.raises(InvalidArgument, match="malformed metadata log entry"):
        decode_entry(data)


def test_api_answers():
    assert pub_ack(b'{"stream":"S","seq":12}') == (12, False)
    assert pub_ack(b'{"stream":"S","seq":12,"duplicate":true}') == (12, True)
    with pytest.raises(ApiError) as err:
        pub_ack(b'{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"}}')
    assert (err.value.code, err.value.err_code) == (400, 10071)
    with pytest.raises(ApiError):
        api_answer(b"nope")
    with pytest.raises(ApiError, match="without a sequence"):
        pub_ack(b'{"stream":"S"}')


def test_layout_names_and_configs():
    lay = Layout("Ferry", 3)
    assert lay.partition_stream(1, 2, 3, 99) == "FERRY_P_1_2_3_99"
    assert lay.partition_subject(1, 2, 3, 99) == "ferry.p.1.2.3.99"
    assert (lay.meta_stream, lay.meta_subject) == ("FERRY_META", "ferry.meta")
    cfg = lay.stream_config("FERRY_P_1_2_3", "ferry.p.1.2.3", max_age_us=5, max_bytes=0)
    assert cfg["num_replicas"] == 3 and cfg["max_age"] == 5000 and cfg["max_bytes"] == -1
    for bad in ("", "a.b", "x" * 33, "a b"):
        with pytest.raises(InvalidArgument):
            Layout(bad)
    with pytest.raises(InvalidArgument):
        Layout("F", 0)
    assert mirror_consumer("S", "_INBOX.x", 0)["config"]["opt_start_seq"] == 1


def test_ack_subject_sequence():
    assert ack_info("$JS.ACK.S.C.1.42.7.1700000000.0") == (42, 1700000000)
    assert ack_info("$JS.ACK.dom.acc.S.C.1.43.7.1700000001.0.rnd") == (43, 1700000001)
    assert ack_info("_INBOX.x") is None and ack_info(None) is None
    assert ack_info("$JS.ACK.S.C.1.x.7.1.0") is None
