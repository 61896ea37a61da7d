"""The byte views of a partition (adapters/pravega/reads.py) against a model.

Event view: each message is the frame ``[0: i32][len: i32][payload]`` (pravega.md
section 6); raw view (byte streams): the payloads back to back. Any offset, any
length, messages with and without headers (other protocols' writes), some still
pending and some written: the reply is the model's slice, byte for byte."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.pravega.reads import raw_end, read_events, read_raw
from core.broker import Broker, BrokerConfig
from core.log import AppendInput, LogConfig
from core.message import Headers

payloads = st.lists(st.binary(max_size=300), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=payloads, cut=st.integers(0, 40), picks=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 5000)),
                                                              min_size=1, max_size=8))
def test_any_offset_and_length_is_the_model_slice(tmp_path_factory, data, cut, picks):
    broker = Broker.open(tmp_path_factory.mktemp("reads"), BrokerConfig(log=LogConfig(fsync="never")))
    try:
        broker.create_stream("s")
        broker.create_topic("s", "t", 1)
        headers = Headers()
        headers.add("k", "v")
        for i, p in enumerate(data):
            broker.append("s", "t", [AppendInput(p, headers.encode() if i % 3 == 0 else b"")], partition=0)
            if i == cut:
                broker.flush()  # written records and pending ones in one read
        part = broker.partition("s", "t", 0)
        framed = b"".join(struct.pack(">ii", 0, len(p)) + p for p in data)
        raw = b"".join(data)
        assert part.byte_end == len(framed) and raw_end(part) == len(raw)
        for frac, length in picks:
            pos = int(frac * len(framed))
            assert read_events(part, pos, length) == framed[pos: pos + length]
            rpos = int(frac * len(raw))
            assert read_raw(part, rpos, length) == raw[rpos: rpos + length]
    finally:
        broker.close()


def _header_block() -> bytes:
    headers = Headers()
    headers.add("trace", "abc")
    return headers.encode()


def _stored(payloads_and_headers) -> list[bytes]:
    from core.log.encoded import block_of, stamp_records
    block = block_of([AppendInput(p, h) for p, h in payloads_and_headers])
    if payloads_and_headers:
        stamp_records(block, len(payloads_and_headers), 0, 1)
    return [bytes(block)]


@given(records=st.lists(st.tuples(st.binary(max_size=200), st.sampled_from([b"", _header_block()])),
                        max_size=30),
       need=st.integers(1, 8000), framed=st.booleans(), split=st.integers(0, 3))
def test_compiled_frames_equal_the_python_loop(records, need, framed, split):
    """The C twin (adapters/pravega/_speedups.c) and the Python loop give the same bytes."""
    import pytest

    from adapters.pravega.reads import _frames_python
    speedups = pytest.importorskip("adapters.pravega._speedups")
    chunks = [memoryview(c) for c in _stored(records)]
    if split and chunks and records:  # the same records over several chunks, split at record bounds
        whole, cuts, pos = bytes(chunks[0]), [], 0
        for p, h in records[:split]:
            pos += 64 + len(p) + len(h)
            cuts.append(pos)
        chunks = [memoryview(whole[a:b]) for a, b in zip([0, *cuts], [*cuts, len(whole)]) if b > a]
    pieces: list = []
    got_py = _frames_python(chunks, need, framed, pieces)
    data, got_c = speedups.frames(chunks, need, framed)
    assert (data, got_c) == (b"".join(pieces), got_py)


def test_compiled_frames_refuse_a_record_past_its_chunk():
    import pytest
    speedups = pytest.importorskip("adapters.pravega._speedups")
    (chunk,) = _stored([(b"payload", b"")])
    with pytest.raises(ValueError):
        speedups.frames([chunk[:-1]], 100, True)
