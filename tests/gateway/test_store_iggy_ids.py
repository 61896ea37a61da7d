"""Scale-out: what the store sends for a partition whose topic has Iggy deduplication on
(gateway/jetstream_store/iggyids.py), without a cluster: the cluster ``Nats-Msg-Id`` of
each message, and how long a producer's call is left to the cluster when the stream's
duplicate window is the (shorter) deduplication expiry. The cluster side is
tests/gateway/test_scaleout_iggy_dedup.py (store pass)."""

from __future__ import annotations

from adapters.nats.headers import parse_headers
from core.log import AppendInput, LogConfig
from core.message import now_us
from gateway.jetstream_store.layout import IGGY_IDS, MSG_ID, decode_message, encode_message
from gateway.jetstream_store.partition import CLUSTER_DEDUP_TRUST_US, RemotePartition


def _msg_id(header: bytes) -> str:
    return dict(parse_headers(header).items)[MSG_ID]


def test_an_iggy_deduplicated_message_goes_with_its_id_under_the_iggy_prefix():
    mid = 0x65
    plain = encode_message(mid, 1, 1, b"")
    iggy = encode_message(mid, 1, 1, b"", client_ids=IGGY_IDS)
    assert _msg_id(plain) == f"{mid:032x}" and _msg_id(iggy) == f"iggy.{mid:032x}"
    assert decode_message(iggy) == decode_message(plain)  # the stored message is the same
    # a producer's call keeps its own id (its retries through any gateway are stored once)
    tagged = encode_message(mid, 1, 1, b"", ("w", 3), 2, client_ids=IGGY_IDS)
    assert _msg_id(tagged).endswith(":3:2")


def test_a_shorter_cluster_window_shortens_how_long_a_producer_call_is_left_to_it(tmp_path):
    clock = [now_us()]
    q = RemotePartition.open(tmp_path / "q", 0, LogConfig(fsync="never"), clock=lambda: clock[0])
    assert q.cluster_trust_us == CLUSTER_DEDUP_TRUST_US
    q.apply(1, 5, clock[0], 0, b"", b"a", ("w", 1))
    clock[0] += 50_000_000  # 50 s after the call was stored
    assert not q.append([AppendInput(b"a")], producer=("w", 1)).duplicate  # to the cluster: it remembers
    q.take_outbox()
    q.cluster_trust_us = 60_000_000 - 20_000_000  # a 60 s window (iggyids.py: less 20 s for the clocks)
    assert q.append([AppendInput(b"a")], producer=("w", 1)).duplicate  # answered here: it may have forgotten
    assert not q.outbox
