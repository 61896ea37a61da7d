"""Kafka records <-> canonical messages (adapters/kafka/translate.py, docs/headers.md "Kafka").

Produce batches go through the real codec (records.py encode, then the broker's decode);
what to_inputs makes is stored in the real record layout (core.record.encode_record) and
parsed back, so encode_fetch reads the views a partition read hands it; the Fetch bytes are
read back by records.py and by kafka-python's own reader (MemoryRecords)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords

from adapters.kafka import translate
from adapters.kafka.errors import ErrorCode
from adapters.kafka.records import (HEADER_SIZE, TIMESTAMP_LOG_APPEND_TIME, Record, RecordBatchError, decode_batches,
                                    decode_produce_batch, encode_batch)
from core.errors import HeaderError
from core.header_value import HeaderKind, HeaderValue
from core.message import MAX_HEADERS_SIZE, Headers
from core.record import encode_record, parse_record

T0 = 1_700_000_000_000  # ms: every batch's base timestamp
APPEND_US = T0 * 1000 + 123_456  # the append time given to stored records (µs)
BIG = 1 << 30
KEY = translate.KEY_HEADER
TOMB = translate.TOMBSTONE_HEADER


def produce(*records, **batch_args):
    """to_inputs of a client batch holding ``records`` (offset deltas numbered here)."""
    records = [r._replace(offset_delta=i) for i, r in enumerate(records)]
    batch_args.setdefault("base_timestamp", T0)
    return translate.to_inputs(decode_produce_batch(encode_batch(records, **batch_args), 9))


def stored(inputs, first_offset=0):
    """Each input as the log stores it, parsed back (payload and headers are memoryviews)."""
    out = []
    for i, item in enumerate(inputs):
        raw = encode_record(1 + i, first_offset + i, APPEND_US, item.origin_timestamp, item.headers, item.payload)
        out.append(parse_record(memoryview(raw)))
    return out


def stored_block(block, payload=b"p", origin=0, offset=0):
    return parse_record(encode_record(7, offset, APPEND_US, origin, block, payload))


def pairs(item):
    return [(k.to_text(), v.kind, v.data) for k, v in Headers.decode(item.headers)]


def fetched(views, max_bytes=BIG, whole_first=False):
    """(offset, key, value, headers, timestamp) of every record encode_fetch answers."""
    data = translate.encode_fetch(views, max_bytes=max_bytes, whole_first=whole_first).data
    return [(b.offset_of(r), r.key, r.value, r.headers, b.timestamp_of(r))
            for b in decode_batches(data) for r in b.records]


def kafka_python(data):
    """What kafka-python's consumer reads: (batch, [records]) per batch."""
    memory = MemoryRecords(bytes(data))
    out = []
    while (batch := memory.next_batch()) is not None:
        assert batch.validate_crc()
        out.append((batch, list(batch)))
    assert memory.valid_bytes() == len(data)
    return out


# -- Kafka -> canonical ------------------------------------------------------------

@pytest.mark.parametrize("size", [0, 1, 255, 256, 600])
def test_keys_are_stored_first_in_chunks_of_255_and_read_back(size):
    key = (bytes(range(256)) * 3)[:size]
    (item,) = produce(Record(key=key, value=b"v", headers=(("h", b"1"),)))
    got = pairs(item)
    chunks = [key[i:i + 255] for i in range(0, size, 255)]
    assert got == [(KEY, HeaderKind.RAW, c) for c in chunks] + [("h", HeaderKind.STRING, b"1")]
    assert [len(c) for c in chunks] == {0: [], 1: [1], 255: [255], 256: [255, 1], 600: [255, 255, 90]}[size]
    (back,) = fetched(stored([item]))
    assert back[1:4] == ((key or None), b"v", (("h", b"1"),))


def test_null_and_empty_keys_store_nothing_and_read_back_null():
    items = produce(Record(key=None, value=b"a"), Record(key=b"", value=b"b"))
    assert [i.headers for i in items] == [b"", b""]
    assert [g[1] for g in fetched(stored(items))] == [None, None]


def test_the_longest_key_fits_the_header_block_and_one_byte_more_is_refused():
    def block_size(n):
        return n + -(-n // 255) * (10 + len(KEY))

    longest = max(n for n in range(80_000, MAX_HEADERS_SIZE) if block_size(n) <= MAX_HEADERS_SIZE)
    assert longest == 91_050  # the figure docs/headers.md "Kafka" gives
    key = bytes(i % 251 for i in range(longest))
    (item,) = produce(Record(key=key, value=b"v"))
    assert len(item.headers) == block_size(longest) <= MAX_HEADERS_SIZE
    assert Headers.decode(item.headers).encoded_size == len(item.headers)  # the canonical codec agrees
    assert fetched(stored([item]))[0][1] == key
    with pytest.raises(RecordBatchError) as err:
        produce(Record(value=b"ok"), Record(key=key + b"x", value=b"v"))
    assert err.value.error_code == ErrorCode.INVALID_RECORD and "record 1:" in str(err.value)


def test_a_null_value_is_a_tombstone_and_an_empty_value_is_not():
    items = produce(Record(key=b"k", value=None), Record(key=b"k", value=b""))
    assert [i.payload for i in items] == [b"", b""]
    assert pairs(items[0]) == [(KEY, HeaderKind.RAW, b"k"), (TOMB, HeaderKind.BOOL, b"\x01")]
    assert pairs(items[1]) == [(KEY, HeaderKind.RAW, b"k")]
    assert [(g[1], g[2], g[3]) for g in fetched(stored(items))] == [(b"k", None, ()), (b"k", b"", ())]


def test_headers_keep_order_and_repeats_drop_empty_values_and_type_utf8():
    headers = (("a", b"1"), ("bin", b"\xff\x00"), ("a", b"2"), ("e", b""), ("n", None), ("", b"no key"),
               ("ключ", "значение".encode()), ("a", b"3"))
    (item,) = produce(Record(value=b"x", headers=headers))
    assert pairs(item) == [("a", HeaderKind.STRING, b"1"), ("bin", HeaderKind.RAW, b"\xff\x00"),
                           ("a", HeaderKind.STRING, b"2"), ("ключ", HeaderKind.STRING, "значение".encode()),
                           ("a", HeaderKind.STRING, b"3")]
    kept = tuple(h for h in headers if h[0] and h[1])
    assert fetched(stored([item]))[0][3] == kept


def test_create_time_becomes_the_origin_timestamp_and_no_time_the_append_time():
    items = produce(Record(timestamp_delta=0, value=b"a"), Record(timestamp_delta=7, value=b"b"),
                    Record(timestamp_delta=-5, value=b"c"))
    assert [i.origin_timestamp for i in items] == [T0 * 1000, (T0 + 7) * 1000, (T0 - 5) * 1000]
    assert [i.id for i in items] == [0, 0, 0]
    assert [g[4] for g in fetched(stored(items))] == [T0, T0 + 7, T0 - 5]
    # -1 is Kafka's "no timestamp": the core stamps the append time, which Fetch then sends.
    (none,) = produce(Record(value=b"x"), base_timestamp=-1)
    assert none.origin_timestamp == 0
    assert fetched(stored([none]))[0][4] == APPEND_US // 1000
    # Under LogAppendTime every record of the batch has the batch's max timestamp.
    (appended,) = produce(Record(value=b"x", timestamp_delta=3), timestamp_type=TIMESTAMP_LOG_APPEND_TIME,
                          max_timestamp=T0 + 99)
    assert appended.origin_timestamp == (T0 + 99) * 1000


def test_a_time_the_log_cannot_store_answers_invalid_timestamp():
    (last,) = produce(Record(value=b"x"), base_timestamp=translate.MAX_TIMESTAMP_MS)
    assert last.origin_timestamp == translate.MAX_TIMESTAMP_MS * 1000 < 1 << 64
    with pytest.raises(RecordBatchError) as err:
        produce(Record(value=b"x"), Record(value=b"y", timestamp_delta=1), base_timestamp=translate.MAX_TIMESTAMP_MS)
    assert err.value.error_code == ErrorCode.INVALID_TIMESTAMP and "record 1:" in str(err.value)


@pytest.mark.parametrize("headers, why", [
    ((("k" * 256, b"v"),), "header key of 256 bytes"),
    ((("é" * 128, b"v"),), "header key of 256 bytes"),
    ((("k", b"v" * 256),), "value of 256 bytes"),
    ((("ferry-kafka-key", b"v"),), "reserved by Ferry"),
    ((("ferry-kafka-tombstone", b"true"),), "reserved by Ferry"),
    ((("Ferry-Kafka-Anything", b"v"),), "reserved by Ferry"),
    (tuple((f"h{i}", b"v" * 255) for i in range(380)), f"more than {MAX_HEADERS_SIZE} header bytes"),
])
def test_unstorable_headers_refuse_the_batch_naming_the_record(headers, why):
    with pytest.raises(RecordBatchError) as err:
        produce(Record(value=b"ok"), Record(value=b"fine", headers=(("a", b"b"),)), Record(value=b"x", headers=headers))
    assert err.value.error_code == ErrorCode.INVALID_RECORD
    assert err.value.reason.startswith("record 2: ") and why in err.value.reason


def test_dropped_headers_are_dropped_before_they_are_judged():
    # A header that would not be stored refuses nothing, whatever its name or size.
    (item,) = produce(Record(value=b"x", headers=(("ferry-kafka-key", b""), ("k" * 300, None), ("", b"v" * 300))))
    assert item.headers == b""


def test_a_tombstone_past_the_block_limit_is_refused():
    # 371 entries of 10 + 4 + 255 bytes and one of 10 + 4 + 170: 99 983 bytes, which fit alone;
    # the tombstone's 32 bytes do not.
    headers = tuple((f"h{i:03}", b"v" * 255) for i in range(371)) + (("last", b"v" * 170),)
    (item,) = produce(Record(value=b"x", headers=headers))
    assert len(item.headers) == 99_983
    with pytest.raises(RecordBatchError, match="record 0: key, headers and tombstone"):
        produce(Record(value=None, headers=headers))


# -- canonical -> Kafka ------------------------------------------------------------

def test_typed_canonical_headers_reach_kafka_as_text_in_order():
    block = Headers([(HeaderValue.uint64(5), HeaderValue.float32(1.5)), ("flag", HeaderValue.bool(True)),
                     ("raw", HeaderValue.raw(b"\x01\xff")), ("neg", HeaderValue.int8(-3)),
                     (HeaderValue.raw(b"\x00\x01"), HeaderValue.uint128((1 << 128) - 1)), ("s", "tekst")]).encode()
    (got,) = fetched([stored_block(block, origin=0)])
    assert got[3] == (("5", b"1.5"), ("flag", b"true"), ("raw", b"\x01\xff"), ("neg", b"-3"),
                      ("AAE=", str((1 << 128) - 1).encode()), ("s", b"tekst"))
    assert got[1] is None and got[2] == b"p"
    assert got[4] == APPEND_US // 1000  # no origin timestamp: the append time


def test_key_and_tombstone_headers_written_by_other_protocols():
    # A NATS or HTTP client writes strings: a string key header is a key, "true" a tombstone.
    block = Headers([(KEY, "order-"), ("x", "1"), (KEY, HeaderValue.raw(b"42")), (TOMB, "true")]).encode()
    (got,) = fetched([stored_block(block, payload=b"ignored", origin=(T0 + 1) * 1000)])
    assert got[1:] == (b"order-42", None, (("x", b"1"),), T0 + 1)
    # A false tombstone keeps the value; the reserved headers never reach Kafka as headers.
    block = Headers([(TOMB, False), (KEY, HeaderValue.uint16(7))]).encode()
    (got,) = fetched([stored_block(block)])
    assert got[1:4] == (b"7", b"p", ())


def test_a_malformed_stored_block_is_an_error_not_a_guess():
    good = Headers([("k", "v")]).encode()
    for bad in (good[:-1], good + b"\x02", good[:3], b"\x02\x01\x00\x00\x00\xff\x02\x01\x00\x00\x00v",
                b"\x02\x01\x00\x00\x00k\x63\x01\x00\x00\x00v"):
        with pytest.raises(HeaderError):
            translate.encode_fetch([stored_block(bad)], max_bytes=BIG)


def test_byte_limits_are_exact_and_the_first_record_may_go_over():
    views = stored(produce(*[Record(value=b"v" * (50 + 17 * i), key=b"k%d" % i, headers=(("h", b"%d" % i),))
                             for i in range(12)]), first_offset=100)
    sizes = [len(translate.encode_fetch(views[:k], max_bytes=BIG).data) for k in range(13)]
    assert sizes[0] == 0 and sizes[1] > HEADER_SIZE
    for k in range(1, 13):
        exact = translate.encode_fetch(views, max_bytes=sizes[k])
        assert (exact.count, exact.next_offset, len(exact.data)) == (k, 100 + k, sizes[k])
        short = translate.encode_fetch(views, max_bytes=sizes[k] - 1)
        assert (short.count, len(short.data)) == (k - 1, sizes[k - 1])
    empty = translate.encode_fetch(views, max_bytes=sizes[1] - 1)
    assert empty == translate.Fetched(b"", 0, None)
    for limit in (0, 1, sizes[1] - 1):  # KIP-74: the first record goes out whole
        first = translate.encode_fetch(views, max_bytes=limit, whole_first=True)
        assert (first.count, first.next_offset, len(first.data)) == (1, 101, sizes[1])
    # ... and only the first: what follows it still has to fit.
    assert translate.encode_fetch(views, max_bytes=sizes[3], whole_first=True).count == 3
    assert translate.encode_fetch(views, max_bytes=0, whole_first=True).data == first.data
    assert translate.encode_fetch(views, max_bytes=0).data == b""


def test_sizes_are_counted_exactly_for_every_record_shape():
    # Each record's size decides where a byte limit cuts: a prefix of k records must fit
    # exactly its own length and not one byte less, whatever the record looks like.
    blocks = [b"", Headers([(TOMB, True)]).encode(),
              Headers([(KEY, HeaderValue.raw(b"k" * 255)), (TOMB, True)]).encode(),
              Headers([(HeaderValue.uint64(1 << 63), HeaderValue.float64(0.1)), ("é" * 100, "x" * 255)]).encode(),
              Headers([(KEY, "s"), (TOMB, False)]).encode()]
    payloads = [b"", b"p" * 63, b"p" * 64, b"p" * 8191, b"p" * 8192, b"p" * 70_000]
    offsets = iter(range(0, 10 ** 6, 997))  # gaps: offset deltas of one, two and three bytes
    origins = [0, T0 * 1000, (T0 - 10 ** 12) * 1000, (T0 + 63) * 1000, (T0 + 64) * 1000]
    views = [stored_block(block, payload=p, origin=origins[i % len(origins)], offset=next(offsets))
             for i, (block, p) in enumerate((b, p) for b in blocks for p in payloads)]
    for k in range(1, len(views) + 1):
        limit = len(translate.encode_fetch(views[:k], max_bytes=BIG).data)
        assert translate.encode_fetch(views, max_bytes=limit).count == k
        assert translate.encode_fetch(views, max_bytes=limit - 1).count == k - 1


def test_batches_hold_at_most_the_named_count_and_kafka_python_reads_them():
    per = translate.MAX_RECORDS_PER_BATCH
    n = per + 3
    views = stored(produce(*[Record(timestamp_delta=i % 7, value=b"%d" % i, key=b"k" if i % 2 else None,
                                    headers=(("i", b"%d" % i),)) for i in range(n)]), first_offset=40)
    out = translate.encode_fetch(views, max_bytes=BIG)
    assert (out.count, out.next_offset) == (n, 40 + n)
    read = kafka_python(out.data)
    assert [(b.base_offset, b.records_count, b.last_offset_delta) for b, _ in read] == [(40, per, per - 1),
                                                                                        (40 + per, 3, 2)]
    for batch, _ in read:
        assert (batch.magic, batch.compression_type, batch.timestamp_type) == (2, 0, 0)
        assert (batch.producer_id, batch.is_transactional, batch.is_control_batch) == (-1, False, False)
    seen = [(r.offset, r.key, r.value, r.headers, r.timestamp) for _, recs in read for r in recs]
    assert seen == [(40 + i, b"k" if i % 2 else None, b"%d" % i, [("i", b"%d" % i)], T0 + i % 7) for i in range(n)]
    # A byte limit that ends inside the second batch: the first batch, plus what fits of the second.
    limit = len(translate.encode_fetch(views[:per + 1], max_bytes=BIG).data)
    assert limit > int.from_bytes(out.data[8:12], "big") + 12 + HEADER_SIZE
    cut = translate.encode_fetch(views, max_bytes=limit)
    assert (cut.count, cut.next_offset) == (per + 1, 41 + per)
    assert [b.records_count for b, _ in kafka_python(cut.data)] == [per, 1]
    assert translate.encode_fetch(views, max_bytes=limit - 1).count == per


def test_tombstones_and_long_keys_as_kafka_python_sees_them():
    long_key = bytes(range(256)) * 4
    views = stored(produce(Record(key=long_key, value=None, headers=(("bin", b"\x80"),)),
                           Record(key=b"k", value=b"", timestamp_delta=1)), first_offset=9)
    ((batch, recs),) = kafka_python(translate.encode_fetch(views, max_bytes=BIG).data)
    assert batch.base_offset == 9 and batch.first_timestamp == T0 and batch.max_timestamp == T0 + 1
    assert [(r.offset, r.key, r.value, r.headers) for r in recs] == [(9, long_key, None, [("bin", b"\x80")]),
                                                                     (10, b"k", b"", [])]


# -- round trip --------------------------------------------------------------------

_NAME = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40).filter(
    lambda s: len(s.encode()) <= 255 and not s[:12].lower() == translate.RESERVED_PREFIX)
_VALUE = st.one_of(st.binary(min_size=1, max_size=255), st.text(min_size=1, max_size=60).map(str.encode).filter(
    lambda b: len(b) <= 255))
_RECORD = st.builds(
    lambda key, value, headers, td: Record(timestamp_delta=td, key=key, value=value, headers=tuple(headers)),
    st.one_of(st.none(), st.binary(min_size=1, max_size=900)),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.lists(st.tuples(_NAME, _VALUE), max_size=5),
    st.integers(-(10 ** 9), 10 ** 9),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_RECORD, min_size=1, max_size=8), st.integers(0, 1 << 40))
def test_kafka_records_survive_the_canonical_form(records, first_offset):
    views = stored(produce(*records), first_offset=first_offset)
    out = translate.encode_fetch(views, max_bytes=BIG)
    want = [(first_offset + i, r.key, r.value, r.headers, T0 + r.timestamp_delta) for i, r in enumerate(records)]
    assert [(b.offset_of(r), r.key, r.value, r.headers, b.timestamp_of(r))
            for b in decode_batches(out.data) for r in b.records] == want
    assert [(r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
            for _, recs in kafka_python(out.data) for r in recs] == want
    # The sizes were counted exactly: the whole answer fits its own length and not one byte less.
    assert translate.encode_fetch(views, max_bytes=len(out.data)).count == len(records)
    assert translate.encode_fetch(views, max_bytes=len(out.data) - 1).count == len(records) - 1
