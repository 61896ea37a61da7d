"""Ferry's idempotent-send tag over Iggy (adapters/iggy/producer.py): two reserved
headers on a send's first message become the core's producer dedup."""

from __future__ import annotations

import struct

import pytest

from adapters.iggy import replies as R
from adapters.iggy.errors import IggyError
from adapters.iggy.messages import WireMessage
from adapters.iggy.producer import PRODUCER_ID_KEY, PRODUCER_SEQ_KEY
from adapters.iggy.types import ConsumerId, PartitioningValue, Strategy
from core.broker import Broker
from core.message import Headers, HeaderValue
from iggy_pair import Client


@pytest.fixture
def c(tmp_path):
    b = Broker.open(tmp_path / "data")
    client = Client(b, 3)
    assert client.login() == 0
    client.ok("stream.create", name="s")
    client.ok("topic.create", stream_id="s", partitions_count=1, name="t")
    yield client
    b.close()


def tagged(payload: bytes, producer: str | None, seq: int | None, extra: dict | None = None) -> WireMessage:
    h = Headers(extra or {})
    if producer is not None:
        h.add(PRODUCER_ID_KEY, producer)
    if seq is not None:
        h.add(PRODUCER_SEQ_KEY, HeaderValue.int64(seq))
    return WireMessage(0, payload, h.encode(), 1_700_000_000_000_000)


def send(c, *messages):
    return c.call("message.send", stream_id="s", topic_id="t", partitioning=PartitioningValue(2, struct.pack("<I", 0)),
                  messages=messages)


def stored(c) -> list[tuple[bytes, Headers]]:
    body = c.ok("message.poll", consumer=ConsumerId(1, 0), stream_id="s", topic_id="t", partition_id=0,
                strategy=Strategy(3, 0), count=100)
    _prefix, pos = R.POLL_PREFIX.decode(3, body, exact=False)
    out = []
    while pos < len(body):
        length, n = struct.unpack_from("<Q", body, pos + 32)[0], struct.unpack_from("<I", body, pos + 48)[0]
        fpos = pos + 256
        for _ in range(n):
            hlen, plen = struct.unpack_from("<II", body, fpos + 32)
            out.append((body[fpos + 48 : fpos + 48 + plen], Headers.decode(body[fpos + 48 + plen : fpos + 48 + plen + hlen])))
            fpos += 48 + plen + hlen
        pos += length
    return out


def test_a_replayed_sequence_is_acknowledged_and_not_stored(c):
    assert send(c, tagged(b"a", "p1", 0), WireMessage(0, b"b", b"", 1_700_000_000_000_000))[0] == 0
    assert send(c, tagged(b"a", "p1", 0), WireMessage(0, b"b", b"", 1_700_000_000_000_000))[0] == 0  # replay: OK, dropped
    assert send(c, tagged(b"c", "p1", 1))[0] == 0
    assert send(c, tagged(b"x", "p2", 0))[0] == 0  # another producer has its own sequence
    assert [p for p, _h in stored(c)] == [b"a", b"b", b"c", b"x"]


def test_the_tag_is_removed_and_other_headers_stay(c):
    send(c, tagged(b"a", "p1", 5, {"k": "v"}))
    send(c, tagged(b"b", None, None, {"k": "w"}))  # untagged: an ordinary send
    assert stored(c) == [(b"a", Headers({"k": "v"})), (b"b", Headers({"k": "w"}))]


@pytest.mark.parametrize("producer,seq", [("p1", None), (None, 3)])
def test_half_a_tag_is_refused(c, producer, seq):
    assert send(c, tagged(b"a", producer, seq))[0] == IggyError.INVALID_HEADER_VALUE
    assert stored(c) == []


def test_negative_sequence_is_refused(c):
    assert send(c, tagged(b"a", "p1", -1))[0] == IggyError.INVALID_HEADER_VALUE
