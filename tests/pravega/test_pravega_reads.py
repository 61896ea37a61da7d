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
