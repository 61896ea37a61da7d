"""core.log: Partition.append_encoded / Broker.append_records, records that arrive
already in the stored layout (core/log/encoded.py): the same stored bytes as
appending the messages one by one, typed errors and nothing stored for a
malformed block, byte positions, reads inside a pending block, restarts."""

from __future__ import annotations

import os
import struct
import tempfile
import uuid
from pathlib import Path

import pytest
from header_strategies import PROPS, any_value
from hypothesis import given, settings
from hypothesis import strategies as st
from log_helpers import FakeClock, open_part

from core import errors as ce
from core.broker import Broker
from core.log import AppendInput
from core.message import Headers, HeaderValue, Uuid7Generator, uuid7_parts
from core.record import RECORD_HEADER_SIZE, encode_record, parse_record

Msg = tuple[int, bytes, bytes, int]  # id, payload, headers (TLV), origin timestamp


def client_block(msgs: list[Msg], junk: int = 0x5A5A) -> bytearray:
    """The records as an Iggy 0.8 client lays them out: checksum, offset and
    timestamp hold whatever the client put there (here: junk)."""
    out = bytearray()
    for mid, payload, headers, origin in msgs:
        rec = bytearray(encode_record(mid, junk, junk, origin, headers, payload))
        struct.pack_into("<Q", rec, 0, junk)
        out += rec
    return out


def stored(part) -> bytes:
    return part.read(0, 1 << 30).to_bytes()


header_blocks = st.lists(st.tuples(st.text(min_size=1, max_size=8), any_value), max_size=3).map(
    lambda pairs: Headers(pairs).encode() if pairs else b"")
messages = st.lists(
    st.tuples(st.integers(1, (1 << 128) - 1), st.binary(max_size=300), header_blocks,
              st.one_of(st.just(0), st.integers(1, (1 << 64) - 1))),
    min_size=1, max_size=20)


@PROPS
@given(calls=st.lists(messages, min_size=1, max_size=4), flush_after=st.integers(0, 4))
def test_encoded_block_stores_what_appending_one_by_one_stores(calls, flush_after):
    with tempfile.TemporaryDirectory() as tmp:
        clock = FakeClock()
        one = open_part(Path(tmp) / "one", clock)
        enc = open_part(Path(tmp) / "enc", clock)
        for n, msgs in enumerate(calls):
            a = one.append([AppendInput(p, h, i, o) for i, p, h, o in msgs])
            b = enc.append_encoded(client_block(msgs), len(msgs))
            assert a == b
            clock.advance(3)
            if n + 1 == flush_after:
                one.flush()
                enc.flush()
        assert stored(enc) == stored(one)  # pending and/or written: byte for byte
        assert enc.byte_end == one.byte_end
        for off in range(one.next_offset):
            assert enc.byte_pos_of(off) == one.byte_pos_of(off)
            assert enc.offset_for_byte_pos(one.byte_pos_of(off)) == off
        budget = len(stored(one)) // 3
        assert enc.read(1, 1 << 20, budget).to_bytes() == one.read(1, 1 << 20, budget).to_bytes()
        enc.close()
        enc = open_part(Path(tmp) / "enc", clock)  # after a restart: the same records
        assert stored(enc) == stored(one)
        one.close()
        enc.close()


def test_id_zero_gets_increasing_uuid7s_and_origin_zero_the_append_time(tmp_path):
    clock = FakeClock()
    part = open_part(tmp_path, clock)
    res = part.append_encoded(client_block([(0, b"a", b"", 0), (5, b"b", b"", 9), (0, b"c", b"", 0)]), 3)
    assert (res.base_offset, res.count, res.timestamp) == (0, 3, clock.now)
    recs = list(part.read(0, 10).records())
    assert [r.offset for r in recs] == [0, 1, 2] and recs[1].id == 5
    assert recs[0].id < recs[2].id and {uuid.UUID(int=r.id).version for r in (recs[0], recs[2])} == {7}
    assert [r.origin_timestamp for r in recs] == [clock.now, 9, clock.now]
    assert all(parse_record(part.read(i, 1).to_bytes()).checksum == recs[i].checksum for i in range(3))


def test_uuid7_reserve_is_monotonic_and_never_carries_into_the_high_half():
    low62 = (1 << 62) - 1
    seeds = iter([low62 - 1, 17])  # the first block would carry: it moves to the next millisecond
    gen = Uuid7Generator(clock_ms=lambda: 1000, seed=lambda: next(seeds))
    ms, counter = gen.reserve(4)
    assert (ms, counter) == (1001, 17)
    ids = [(hi << 64) | lo for lo, hi in (uuid7_parts(ms, counter + i) for i in range(4))]
    assert ids == sorted(ids) and len({i >> 64 for i in ids}) == 1
    assert gen() > ids[-1]


def _with(block: bytearray, at: int, fmt: str, value: int) -> bytearray:
    struct.pack_into(fmt, block, at, value)
    return block


def _good(n: int = 3) -> bytearray:
    return client_block([(0, b"payload%d" % i, b"", 0) for i in range(n)])


REC = RECORD_HEADER_SIZE + 8  # size of one record of _good()
BAD_HEADERS = b"\x02\x00\x00\x00\x00"  # a string key of length 0, cut short
MALFORMED = [
    ("count larger than the block", lambda: (_good(), 4), ce.RecordTruncated),
    ("count smaller than the block", lambda: (_good(), 2), ce.MalformedRecords),
    ("cut inside a header", lambda: (_good()[: 2 * REC + 30], 3), ce.RecordTruncated),
    ("cut inside a payload", lambda: (_good()[:-1], 3), ce.MalformedRecords),
    ("reserved field set", lambda: (_with(_good(), REC + 56, "<Q", 1), 3), ce.RecordReservedField),
    ("payload length past the end", lambda: (_with(_good(), 52, "<I", 10_000), 3), ce.MalformedRecords),
    ("headers length past the end", lambda: (_with(_good(), 48, "<I", 10_000), 3), ce.MalformedRecords),
    ("malformed header block", lambda: (client_block([(0, b"x", BAD_HEADERS, 0)]), 1), ce.HeaderError),
    ("zero count", lambda: (_good(), 0), ce.InvalidArgument),
]


@pytest.mark.parametrize("make,error", [(m, e) for _n, m, e in MALFORMED], ids=[n for n, _m, _e in MALFORMED])
def test_malformed_block_raises_typed_error_and_stores_nothing(tmp_path, make, error):
    part = open_part(tmp_path)
    part.append_encoded(_good(1), 1)
    before = (part.next_offset, part.byte_end, stored(part))
    block, count = make()
    with pytest.raises(error):
        part.append_encoded(block, count)
    assert (part.next_offset, part.byte_end, stored(part)) == before
    part.append_encoded(_good(2), 2)  # the partition goes on
    part.flush()
    assert part.next_offset == 3 and len(list(part.read(0, 10).records())) == 3


def test_oversized_header_block_is_refused(tmp_path):
    part = open_part(tmp_path)
    big = Headers([("k", HeaderValue.raw(b"v" * 200))]).encode() * 600  # past MAX_HEADERS_SIZE
    with pytest.raises(ce.HeadersTooLarge):
        part.append_encoded(client_block([(0, b"x", big, 0)]), 1)
    assert part.next_offset == 0


def test_producer_dedup_and_durable_acks_as_append(tmp_path):
    part = open_part(tmp_path)
    acks = []
    first = part.append_encoded(_good(2), 2, producer=("p", 1), on_durable=acks.append)
    dup = part.append_encoded(_good(2), 2, producer=("p", 1), on_durable=acks.append)
    assert dup.duplicate and part.next_offset == 2 and not acks  # nothing acked before the write
    part.flush()
    assert acks == [first, dup]
    part.close()
    part = open_part(tmp_path)  # the dedup entry is stored with the batch
    assert part.append_encoded(_good(1), 1, producer=("p", 1)).duplicate


def test_broker_append_records_reaches_append_listeners(tmp_path):
    with Broker.open(tmp_path / "data") as broker:
        broker.create_stream("s")
        broker.create_topic("s", "t", 2)
        seen = []
        broker.add_append_listener(lambda info, pid, res, items: seen.append((pid, res.count, list(items))))
        hdr = Headers([("k", "v")]).encode()
        res = broker.append_records("s", "t", client_block([(7, b"hello", hdr, 3), (0, b"x", b"", 0)]), 2,
                                    partition=1)
        assert (res.partition_id, res.base_offset, res.count) == (1, 0, 2)
        (pid, count, items), = seen
        assert (pid, count) == (1, 2)
        assert items[0] == AppendInput(b"hello", hdr, 7, 3)
        assert items[1].payload == b"x" and items[1].id and items[1].origin_timestamp == res.timestamp
        with pytest.raises(ce.RecordTruncated):
            broker.append_records("s", "t", bytearray(os.urandom(10)), 1, partition=0)
        assert broker.partition("s", "t", 0).next_offset == 0


@settings(max_examples=30, deadline=None)  # a broker per example
@given(st.lists(st.tuples(st.binary(min_size=1, max_size=64), st.integers(0, (1 << 128) - 1),
                          st.integers(0, 1 << 62), st.booleans()), min_size=1, max_size=6))
def test_block_of_items_stores_what_append_stores(msgs):
    """``encoded.block_of`` + ``append_records`` keep every field ``append`` keeps
    (the HTTP send path): payload, header block, id (0 -> a UUIDv7), origin (0 -> the
    append time)."""
    from core.log.encoded import block_of

    items = [AppendInput(payload=p, headers=Headers([("k", HeaderValue.string("v"))]).encode() if h else b"",
                         id=i, origin_timestamp=o) for p, i, o, h in msgs]
    with tempfile.TemporaryDirectory() as tmp:
        broker = Broker.open(Path(tmp) / "d")
        try:
            broker.create_stream("s")
            broker.create_topic(0, "t", 2)
            broker.append(0, 0, items, partition=0)
            broker.append_records(0, 0, block_of(items), len(items), partition=1)
            one, two = (broker.read_messages(0, 0, p, 0, 100) for p in (0, 1))
        finally:
            broker.close()
    assert [(m.payload, m.headers, m.origin_timestamp) for m in two] == [
        (m.payload, m.headers, m.origin_timestamp if it.origin_timestamp else n.timestamp)
        for m, n, it in zip(one, two, items)]
    assert [m.id for m in two][: len(items)] == [it.id or m.id for it, m in zip(items, two)]
    assert all(m.id for m in two)


def test_block_of_refuses_a_field_that_does_not_fit_its_slot():
    from core.log.encoded import block_of

    for item in (AppendInput(payload=b"x", id=1 << 128), AppendInput(payload=b"x", origin_timestamp=-1)):
        with pytest.raises(ce.InvalidArgument):
            block_of([item])
