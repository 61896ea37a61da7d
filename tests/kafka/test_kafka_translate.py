"""Kafka records <-> canonical messages (adapters/kafka/translate.py), through the real
stored record layout (core/record.py), read back by kafka-python's own batch reader."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from adapters.kafka import translate
from adapters.kafka.errors import ErrorCode
from adapters.kafka.records import Record, RecordBatchError, decode_batches, decode_produce_batch, encode_batch
from core.header_value import HeaderValue
from core.message import Headers
from core.record import encode_record, parse_record

T0 = 1_700_000_000_000  # ms


def produce(*records, base_timestamp=T0):
    return translate.to_inputs(decode_produce_batch(encode_batch(list(records), base_timestamp=base_timestamp), 9))


def stored(inputs, first_offset=0, append_us=T0 * 1000 + 5):
    """Each input as the log stores it, parsed back (payload and headers as memoryviews)."""
    views = []
    for i, item in enumerate(inputs):
        raw = encode_record(1 + i, first_offset + i, append_us, item.origin_timestamp, item.headers, item.payload)
        views.append(parse_record(memoryview(raw)))
    return views


def fetched(views, max_bytes=1 << 20, first=True):
    data = translate.to_batches(views, max_bytes=max_bytes, first=first)
    return [(b.offset_of(r), r.key, r.value, r.headers, b.timestamp_of(r)) for b in decode_batches(data) for r in b.records]


@pytest.mark.parametrize("size", [0, 1, 255, 256, 600])
def test_keys_of_any_length_round_trip(size):
    key = bytes(range(256)) * 3
    key = key[:size]
    (item,) = produce(Record(key=key, value=b"v"))
    headers = Headers.decode(item.headers) if item.headers else Headers()
    assert len(headers.get_all(translate.KEY_HEADER)) == (size + 254) // 255
    (got,) = fetched(stored([item]))
    assert got[1] == (key or None) and got[2] == b"v"


def test_null_and_empty_values_and_the_producer_timestamp():
    items = produce(Record(value=None, key=b"k"), Record(offset_delta=1, value=b"", timestamp_delta=7))
    assert items[0].origin_timestamp == T0 * 1000 and items[1].origin_timestamp == (T0 + 7) * 1000
    got = fetched(stored(items))
    assert [(g[2], g[4]) for g in got] == [(None, T0), (b"", T0 + 7)]


def test_headers_keep_order_and_repeats_drop_empty_values_and_type_utf8():
    (item,) = produce(Record(value=b"x", headers=(("a", b"1"), ("bin", b"\xff\x00"), ("a", b"2"), ("e", b""),
                                                   ("n", None), ("", b"no key"))))
    pairs = [(k.as_str(), v.kind.name_json, v.data) for k, v in Headers.decode(item.headers)]
    assert pairs == [("a", "string", b"1"), ("bin", "raw", b"\xff\x00"), ("a", "string", b"2")]
    assert fetched(stored([item]))[0][3] == (("a", b"1"), ("bin", b"\xff\x00"), ("a", b"2"))


@pytest.mark.parametrize("headers, why", [
    ((("k" * 256, b"v"),), "header key of 256 bytes"),
    ((("k", b"v" * 256),), "value of 256 bytes"),
    ((("ferry-kafka-key", b"v"),), "reserved"),
])
def test_unstorable_headers_refuse_the_batch_naming_the_record(headers, why):
    with pytest.raises(RecordBatchError) as err:
        produce(Record(value=b"ok"), Record(offset_delta=1, value=b"x", headers=headers))
    assert err.value.error_code == ErrorCode.INVALID_RECORD
    assert "record 1" in str(err.value) and why in str(err.value)


def test_typed_canonical_headers_reach_kafka_as_text():
    block = Headers([(HeaderValue.uint64(5), HeaderValue.float32(1.5)), ("flag", HeaderValue.bool(True)),
                     ("raw", HeaderValue.raw(b"\x01"))]).encode()
    raw = encode_record(9, 0, T0 * 1000, 0, block, b"p")
    (got,) = fetched([parse_record(memoryview(raw))])
    assert got[3] == (("5", b"1.5"), ("flag", b"true"), ("raw", b"\x01"))
    assert got[4] == T0  # no origin timestamp: the append time


def test_byte_limits_and_the_first_batch_rule():
    views = stored(produce(*[Record(offset_delta=i, value=b"v" * 100) for i in range(20)]))
    assert fetched(views, max_bytes=50, first=False) == []
    one = fetched(views, max_bytes=50, first=True)
    assert len(one) >= 1 and one[0][0] == 0
    some = fetched(views, max_bytes=1000)
    assert 1 <= len(some) < 20 and [g[0] for g in some] == list(range(len(some)))
    assert len(translate.to_batches(views, max_bytes=1000)) <= 1000


def test_batches_hold_at_most_the_named_count_and_kafka_python_reads_them():
    n = translate.MAX_RECORDS_PER_BATCH + 3
    views = stored(produce(*[Record(offset_delta=i, value=b"%d" % i, key=b"k") for i in range(n)]), first_offset=40)
    data = translate.to_batches(views, max_bytes=10 << 20)
    batches = decode_batches(data)
    assert [len(b.records) for b in batches] == [translate.MAX_RECORDS_PER_BATCH, 3]
    pos, seen = 0, []
    while pos < len(data):
        length = int.from_bytes(data[pos + 8:pos + 12], "big") + 12
        kp = DefaultRecordBatch(bytearray(data[pos:pos + length]))
        assert kp.validate_crc()
        seen += [(r.offset, r.key, r.value) for r in kp]
        pos += length
    assert seen == [(40 + i, b"k", b"%d" % i) for i in range(n)]


_HEADER_NAME = st.text(alphabet=st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=20)
_RECORD = st.builds(lambda key, value, headers: (key, value, tuple(headers)),
                    st.one_of(st.none(), st.binary(min_size=1, max_size=600)),
                    st.one_of(st.none(), st.binary(max_size=300)),
                    st.lists(st.tuples(_HEADER_NAME, st.binary(min_size=1, max_size=255)), max_size=4))


@settings(max_examples=60, deadline=None)
@given(st.lists(_RECORD, min_size=1, max_size=8))
def test_kafka_records_survive_the_canonical_form(recs):
    records = [Record(offset_delta=i, timestamp_delta=i, key=k, value=v, headers=h) for i, (k, v, h) in enumerate(recs)]
    got = fetched(stored(produce(*records)))
    assert [(g[1], g[2], g[3], g[4]) for g in got] == [(k, v, h, T0 + i) for i, (k, v, h) in enumerate(recs)]
