"""gateway/jetstream_store/layout.py: a JetStream client's Nats-Msg-Id as the cluster's msg id
(scale-out mode, docs/scale-out.md "JetStream msg ids across gateways"), and the partition
streams' duplicate windows."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from adapters.nats.headers import parse_headers
from core.message import Headers
from gateway.jetstream_store.layout import (
    CLIENT_ID_PREFIX, DUPLICATE_WINDOW_NS, Layout, client_msg_id, decode_message, encode_message,
)  # fmt: skip
from header_strategies import PROPS


def _tlv(pairs) -> bytes:
    h = Headers()
    for k, v in pairs:
        h.add(k, v)
    return h.encode() if pairs else b""


def _cluster_id(block: bytes) -> str:
    return dict(parse_headers(block).items)["Nats-Msg-Id"]


def test_a_jetstream_partition_sends_the_clients_msg_id_namespaced():
    tlv = _tlv([("ferry-nats-subject", "orders.eu"), ("Nats-Msg-Id", "order-17")])
    block = encode_message(5, 1, 2, tlv, client_ids=True)
    assert _cluster_id(block) == "js.order-17"
    got = decode_message(block)
    assert (got.id, got.timestamp, got.origin_timestamp, got.producer) == (5, 1, 2, None)
    assert got.headers == tlv  # the client's own header is still there for readers
    # elsewhere (another protocol's topic) the same header is only a header: Ferry's own id
    assert _cluster_id(encode_message(5, 1, 2, tlv)) == f"{5:032x}"
    # a message without a msg id keeps Ferry's id, so the gateway's re-sends still dedup
    plain = _tlv([("ferry-nats-subject", "orders.eu")])
    assert _cluster_id(encode_message(5, 1, 2, plain, client_ids=True)) == f"{5:032x}"
    assert _cluster_id(encode_message(5, 1, 2, b"", client_ids=True)) == f"{5:032x}"
    # an idempotent producer's call keeps its producer id
    assert _cluster_id(encode_message(5, 1, 2, tlv, ("p", 9), 0, client_ids=True)).endswith(":9:0")


def test_an_id_that_cannot_be_a_header_line_keeps_the_message_id():
    # a record another protocol wrote to a JetStream stream's topic may hold anything
    for bad in ("a\r\nNats-Expected-Stream: x", "tab\there", "nul\x00"):
        tlv = _tlv([("Nats-Msg-Id", bad)])
        assert client_msg_id(tlv) is None
        block = encode_message(7, 1, 1, tlv, client_ids=True)
        assert _cluster_id(block) == f"{7:032x}"
        assert decode_message(block).headers == tlv


@PROPS
@given(msg_id=st.text(min_size=1, max_size=64), mid=st.integers(0, 2**128 - 1))
def test_client_ids_round_trip(msg_id, mid):
    tlv = _tlv([("Nats-Msg-Id", msg_id), ("k", "v")])
    block = encode_message(mid, 1, 1, tlv, client_ids=True)
    got = decode_message(block)
    assert (got.id, got.headers) == (mid, tlv)
    cid = client_msg_id(tlv)
    if cid is not None:
        assert cid == CLIENT_ID_PREFIX + msg_id
        assert f"\r\nNats-Msg-Id: {cid}\r\n".encode() in block


def test_the_duplicate_window_is_the_streams_and_at_most_max_age():
    layout = Layout("T", 3)
    assert layout.stream_config("S", "s")["duplicate_window"] == DUPLICATE_WINDOW_NS
    cfg = layout.stream_config("S", "s", duplicate_window_ns=3 * 10**9)
    assert cfg["duplicate_window"] == 3 * 10**9
    # nats-server refuses a window longer than max_age ("duplicates window can not be larger then max age")
    cfg = layout.stream_config("S", "s", max_age_us=1_000_000)
    assert (cfg["max_age"], cfg["duplicate_window"]) == (10**9, 10**9)
    cfg = layout.stream_config("S", "s", max_age_us=3600 * 10**6, duplicate_window_ns=600 * 10**9)
    assert cfg["duplicate_window"] == 600 * 10**9
