"""The compiled twin of a Produce batch's record decode and translation
(adapters/kafka/_speedups.c) against the Python loops it replaces
(records._decode_records, then translate.to_block): the same stored block for
every records region the Python loops accept, and None (the Python loops then
raise Kafka's error) for every region they refuse."""

from __future__ import annotations

import importlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.kafka import translate
from adapters.kafka.records import (HEADER_SIZE, Record, RecordBatch, RecordBatchError, StoredRecords, _decode_records,
                                    _encode_record, decode_produce_batch, encode_batch)
from adapters.kafka.translate import MAX_TIMESTAMP_MS, RESERVED_PREFIX

try:  # the C function itself, whatever FERRY_PURE_PYTHON says (docs/internals.md "Compiled loops")
    BLOCK = translate.configure_compiled(importlib.import_module("adapters.kafka._speedups"))
except ImportError:
    BLOCK = None
pytestmark = pytest.mark.skipif(BLOCK is None, reason="adapters.kafka._speedups is not built")
PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

names = st.one_of(st.sampled_from(["", "trace", "ferry-kafka-key", "FERRY-Kafka-x", "ferry-kafk", "é-name",
                                   "\u212a", "x" * 255, "y" * 256]),
                  st.text(max_size=20))
values = st.one_of(st.none(), st.binary(max_size=40), st.just(b"\xff\xfe"), st.just("é".encode()),
                   st.just(b"v" * 256), st.just(b"\xed\xa0\x80"))
records = st.builds(
    Record,
    attributes=st.integers(0, 255),
    timestamp_delta=st.one_of(st.integers(-5, 5), st.integers(-(1 << 63), (1 << 63) - 1)),
    offset_delta=st.integers(0, 3),
    key=st.one_of(st.none(), st.binary(max_size=20), st.binary(min_size=250, max_size=600)),
    value=st.one_of(st.none(), st.binary(max_size=50)),
    headers=st.lists(st.tuples(names, values), max_size=4).map(tuple),
)


def python_block(data, pos, limit, count, base_ts, log_append, max_ts):
    """What the Python loops make of a records region, or the RecordBatchError they raise."""
    try:
        recs = _decode_records(data, pos, limit, count)
        batch = RecordBatch(0, -1, 2, 0, 0x08 if log_append else 0, max(count - 1, 0), base_ts, max_ts,
                            -1, -1, -1, recs)
        block, nbytes = translate.to_block(batch)
        return bytes(block), nbytes
    except RecordBatchError as exc:
        return exc


def undecided(recs) -> bool:
    """Records the compiled loop leaves to Python by design: a header name with a
    non-ASCII byte among its first len(RESERVED_PREFIX) bytes (Unicode lowercase)."""
    return any(any(b >= 0x80 for b in name.encode()[:len(RESERVED_PREFIX)]) for r in recs for name, _ in r.headers)


@PROPS
@given(recs=st.lists(records, max_size=6), base_ts=st.one_of(st.integers(-1, 2_000_000_000_000),
                                                             st.sampled_from([MAX_TIMESTAMP_MS, -(1 << 63)])),
       log_append=st.booleans(), max_ts=st.integers(-1, 2_000_000_000_000), pad=st.binary(max_size=3),
       data=st.data())
def test_compiled_and_python_agree(recs, base_ts, log_append, max_ts, pad, data):
    region = b"".join(_encode_record(r) for r in recs)
    count = len(recs)
    cases = [(region, count)]
    if region:  # broken on purpose: a byte changed, cut short, a wrong count, bytes after
        at = data.draw(st.integers(0, len(region) - 1))
        flipped = region[:at] + bytes([data.draw(st.integers(0, 255))]) + region[at + 1:]
        cases += [(flipped, count), (region[:at], count), (region, count + 1), (region + pad, count)]
    for body, n in cases:
        buf = pad + body + b"tail"  # the region sits inside a larger buffer, as in a request frame
        args = (buf, len(pad), len(pad) + len(body), n, base_ts, log_append, max_ts)
        want = python_block(*args)
        got = BLOCK(*args)
        if got is None:
            assert isinstance(want, RecordBatchError) or undecided(_decode_records(*args[:4])), want
        else:
            assert not isinstance(want, RecordBatchError), (want, got)
            assert (bytes(got[0]), got[1]) == want


def test_decode_produce_batch_hands_the_compiled_block_out_once():
    recs = [Record(offset_delta=i, key=b"k", value=b"v%d" % i, headers=(("h", b"1"),)) for i in range(3)]
    wire = encode_batch(recs, base_timestamp=1_700_000_000_000)
    batch = decode_produce_batch(wire, 9, block=BLOCK)
    assert isinstance(batch.records, StoredRecords) and len(batch.records) == 3
    plain = decode_produce_batch(wire, 9)
    first = translate.to_block(batch)
    assert (bytes(first[0]), first[1]) == tuple(bytes(x) if isinstance(x, bytearray) else x
                                                for x in translate.to_block(plain))
    assert list(batch.records) == list(plain.records)  # decoded on demand, the same records
    again = translate.to_block(batch)  # the first block was handed over: a new one is built
    assert again[0] is not first[0] and bytes(again[0]) == bytes(first[0])
    assert wire[HEADER_SIZE:]  # the records region the compiled loop read
