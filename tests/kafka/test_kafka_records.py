"""Kafka record batch v2 codec (adapters/kafka/records.py): golden bytes, round trips, refusals.

Unit tier: no sockets. The golden batch is written out field by field from the
layout in DefaultRecordBatch.java / DefaultRecord.java, and its CRC-32C is
checked with a bitwise implementation here, independent of the crc32c package.
kafka-python (a test dependency) stands in for a real client on both sides.
"""

from __future__ import annotations

import gzip
import struct
import sys

import cramjam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.kafka import records as R
from adapters.kafka.records import (
    COMPRESSION_GZIP, COMPRESSION_LZ4, COMPRESSION_NONE, COMPRESSION_SNAPPY, COMPRESSION_ZSTD, CORRUPT_MESSAGE,
    INVALID_RECORD, TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, UNSUPPORTED_COMPRESSION_TYPE, Record,
    RecordBatchError, decode_batches, decode_produce_batch, encode_batch,
)

CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]
COMPRESSED = CODECS[1:]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def crc32c_bitwise(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), one bit at a time."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_bitwise_crc_matches_the_standard_check_value():
    assert crc32c_bitwise(b"123456789") == 0xE3069283


# -- golden bytes: two records, one header, uncompressed, written out by hand

GOLDEN_RECORDS = [
    Record(0, 0, 0, b"k", b"v1", (("h", b"x"),)),
    Record(0, 5, 1, None, None, ()),
]
GOLDEN_RECORD_BYTES = bytes.fromhex(
    "1a"          # length 13 (zigzag 26)
    "00"          # attributes
    "00"          # timestamp delta 0
    "00"          # offset delta 0
    "02" "6b"     # key length 1, "k"
    "04" "7631"   # value length 2, "v1"
    "02"          # 1 header
    "02" "68"     # header key length 1, "h"
    "02" "78"     # header value length 1, "x"
    "0c"          # length 6
    "00"          # attributes
    "0a"          # timestamp delta 5
    "02"          # offset delta 1
    "01"          # key null (-1)
    "01"          # value null (-1)
    "00"          # no headers
)
GOLDEN_COVERED = bytes.fromhex(
    "0000"                # attributes: no compression, create time
    "00000001"            # last offset delta
    "0000018bcfe56800"    # base timestamp 1700000000000
    "0000018bcfe56805"    # max timestamp 1700000000005
    "ffffffffffffffff"    # producer id -1
    "ffff"                # producer epoch -1
    "ffffffff"            # base sequence -1
    "00000002"            # record count
) + GOLDEN_RECORD_BYTES
GOLDEN_CRC = 0x29D161F1
GOLDEN = (
    bytes.fromhex("0000000000000000")   # base offset 0
    + struct.pack(">i", 49 + len(GOLDEN_RECORD_BYTES))  # length: everything after this field
    + bytes.fromhex("ffffffff")         # partition leader epoch -1
    + b"\x02"                           # magic
    + struct.pack(">I", GOLDEN_CRC)
    + GOLDEN_COVERED
)


def test_golden_crc_is_crc32c_of_the_covered_bytes():
    assert crc32c_bitwise(GOLDEN_COVERED) == GOLDEN_CRC
    assert len(GOLDEN) == 82


def test_encode_writes_the_golden_bytes():
    assert encode_batch(GOLDEN_RECORDS, base_timestamp=1_700_000_000_000) == GOLDEN


def test_decode_reads_the_golden_bytes():
    [batch] = decode_batches(GOLDEN)
    assert batch.records == tuple(GOLDEN_RECORDS)
    assert (batch.base_offset, batch.partition_leader_epoch, batch.magic, batch.crc) == (0, -1, 2, GOLDEN_CRC)
    assert (batch.last_offset_delta, batch.base_timestamp, batch.max_timestamp) == (1, 1_700_000_000_000,
                                                                                    1_700_000_000_005)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert (batch.compression, batch.timestamp_type, batch.is_transactional, batch.is_control) == (0, 0, False, False)
    assert batch.record_count == 2 and batch.last_offset == 1
    assert [batch.timestamp_of(r) for r in batch.records] == [1_700_000_000_000, 1_700_000_000_005]
    # decode also takes the bytearray / memoryview a frame reader may hand it
    assert decode_batches(memoryview(bytearray(GOLDEN))) == [batch]


def test_several_batches_back_to_back():
    second = encode_batch([Record(value=b"z")], base_offset=2, base_timestamp=5, compression=COMPRESSION_GZIP)
    batches = decode_batches(GOLDEN + second + GOLDEN)
    assert [b.base_offset for b in batches] == [0, 2, 0]
    assert batches[1].records == (Record(value=b"z"),)
    assert decode_batches(b"") == []


def test_trailing_partial_batch_is_corrupt():
    for cut in (1, 11, 12, 17, 60, len(GOLDEN) - 1):
        with pytest.raises(RecordBatchError) as info:
            decode_batches(GOLDEN + GOLDEN[:cut])
        assert info.value.error_code == CORRUPT_MESSAGE


@pytest.mark.parametrize("compression", CODECS)
def test_truncation_at_every_byte_is_corrupt_message(compression):
    buf = encode_batch([Record(0, i, i, b"key", b"value %d" % i * 5, (("a", None),)) for i in range(4)],
                       base_timestamp=10, compression=compression)
    for cut in range(1, len(buf)):
        with pytest.raises(RecordBatchError) as info:
            decode_batches(buf[:cut])
        assert info.value.error_code == CORRUPT_MESSAGE, cut


def test_every_flipped_byte_under_the_crc_is_corrupt_message():
    for at in range(21, len(GOLDEN)):
        for flip in (0x01, 0x80):
            bad = bytearray(GOLDEN)
            bad[at] ^= flip
            with pytest.raises(RecordBatchError) as info:
                decode_batches(bytes(bad))
            assert info.value.error_code == CORRUPT_MESSAGE, at
    # the CRC itself
    bad = bytearray(GOLDEN)
    bad[17] ^= 0x01
    with pytest.raises(RecordBatchError, match="CRC") as info:
        decode_batches(bytes(bad))
    assert info.value.error_code == CORRUPT_MESSAGE


def test_base_offset_and_leader_epoch_are_outside_the_crc():
    # A broker rewrites both on append without recomputing the CRC.
    moved = struct.pack(">q", 1234) + GOLDEN[8:12] + struct.pack(">i", 7) + GOLDEN[16:]
    [batch] = decode_batches(moved)
    assert (batch.base_offset, batch.partition_leader_epoch, batch.crc) == (1234, 7, GOLDEN_CRC)
    assert batch.offset_of(batch.records[1]) == 1235


# -- batches whose CRC holds but whose contents do not

def forge(records_bytes: bytes = GOLDEN_RECORD_BYTES, *, count: int = 2, attributes: int = 0,
          last_offset_delta: int = 1, magic: int = 2, length: int | None = None) -> bytes:
    """A batch with a correct CRC around whatever header values and record bytes are given;
    the defaults give the golden batch."""
    covered = struct.pack(">hiqqqhii", attributes, last_offset_delta, 1_700_000_000_000, 1_700_000_000_005,
                          -1, -1, -1, count) + records_bytes
    if length is None:
        length = 49 + len(records_bytes)
    return struct.pack(">qiiBI", 0, length, -1, magic, crc32c_bitwise(covered)) + covered


def refusal(buf: bytes) -> RecordBatchError:
    with pytest.raises(RecordBatchError) as info:
        decode_batches(buf)
    return info.value


def test_forge_reproduces_the_golden_batch():
    assert forge() == GOLDEN


@pytest.mark.parametrize("magic,code", [(0, INVALID_RECORD), (1, INVALID_RECORD), (3, CORRUPT_MESSAGE),
                                        (0xFF, CORRUPT_MESSAGE)])
def test_magic_other_than_2(magic, code):
    assert refusal(forge(magic=magic)).error_code == code


@pytest.mark.parametrize("length", [-1, 0, 14, 48])
def test_length_below_the_header_is_corrupt(length):
    assert refusal(forge(length=length)).error_code == CORRUPT_MESSAGE


@pytest.mark.parametrize("count,reason", [(3, "runs past the end of the batch"), (1, "7 bytes left"),
                                          (0, "21 bytes left"), (-1, "record count -1")])
def test_record_count_not_matching_the_bytes_is_invalid_record(count, reason):
    err = refusal(forge(count=count))
    assert err.error_code == INVALID_RECORD and reason in str(err)


@pytest.mark.parametrize("records_bytes,reason", [
    (b"\xff\xff\xff\xff\xff\x01" + GOLDEN_RECORD_BYTES[1:], "varint longer than 5 bytes"),  # record length
    (b"\xff\xff\xff\xff\x1f" + GOLDEN_RECORD_BYTES[1:], "varint wider than 32 bits"),  # record length
    (b"\x1a\x00" + b"\xff" * 10 + b"\x01\x00", "varint longer than 10 bytes"),  # timestamp delta varlong
    (b"\x1a\x00\x00\x00\x03" + GOLDEN_RECORD_BYTES[5:], "key length -2 does not fit"),
    (b"\x1a\x00\x00\x00\x7e" + GOLDEN_RECORD_BYTES[5:], "key length 63 does not fit"),
    (b"\x1c" + GOLDEN_RECORD_BYTES[1:] + b"\x00", "record is 14 bytes but its fields take 13"),
    (b"\x18" + GOLDEN_RECORD_BYTES[1:], "header value length 1 does not fit"),  # length 12, one short
    (b"\x00" + GOLDEN_RECORD_BYTES[1:], "record length 0"),
    (b"\x1a\x00\x00\x00\x02k\x04v1\x03" + GOLDEN_RECORD_BYTES[10:], "header count -2"),
    (b"\x1a\x00\x00\x00\x02k\x04v1\x40" + GOLDEN_RECORD_BYTES[10:], "header count 32 does not fit"),
    (b"\x1a\x00\x00\x00\x02k\x04v1\x02\x02\xff\x02x" + GOLDEN_RECORD_BYTES[14:], "not UTF-8"),
    (GOLDEN_RECORD_BYTES[:14] + b"\x0c\x00\x0a\x02\x01\x04\x00", "value length 2 does not fit"),
])
def test_malformed_records_are_invalid_record(records_bytes, reason):
    err = refusal(forge(records_bytes))
    assert err.error_code == INVALID_RECORD and reason in str(err)


@SETTINGS
@given(st.data())
def test_mangled_records_under_a_good_crc_give_only_batch_errors(data):
    # Whatever the record bytes, decoding returns or raises RecordBatchError: never an
    # IndexError, struct.error or UnicodeDecodeError.
    raw = bytearray(GOLDEN_RECORD_BYTES)
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    raw = raw[:data.draw(st.integers(0, len(raw)))]
    try:
        decode_batches(forge(bytes(raw), count=data.draw(st.integers(-1, 4))))
    except RecordBatchError as exc:
        assert exc.error_code == INVALID_RECORD


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_compression_id(codec_id):
    assert refusal(forge(attributes=codec_id)).error_code == UNSUPPORTED_COMPRESSION_TYPE


@pytest.mark.parametrize("compression", COMPRESSED)
def test_payload_that_does_not_decompress_is_corrupt(compression):
    assert refusal(forge(b"\x00not compressed at all", attributes=compression)).error_code == CORRUPT_MESSAGE


# -- compression

@pytest.mark.parametrize("compression", COMPRESSED)
def test_decompression_bomb_guard(compression):
    records = [Record(offset_delta=i, value=bytes(10_000)) for i in range(10)]
    buf = encode_batch(records, compression=compression)
    assert len(buf) < 10_000  # compresses well: a small bomb
    [batch] = decode_batches(buf, max_decompressed=200_000)
    assert batch.records == tuple(records)
    err = refusal_with(buf, max_decompressed=50_000)
    assert err.error_code == CORRUPT_MESSAGE and "decompress to more than 50000" in str(err)


def refusal_with(buf: bytes, **kwargs) -> RecordBatchError:
    with pytest.raises(RecordBatchError) as info:
        decode_batches(buf, **kwargs)
    return info.value


def test_the_guard_is_above_the_frame_limit():
    from adapters.kafka.frames import MAX_FRAME_SIZE
    assert R.MAX_DECOMPRESSED_BYTES >= MAX_FRAME_SIZE


def test_snappy_is_written_in_xerial_framing_and_read_raw_too():
    records = [Record(offset_delta=i, value=b"abc" * 20_000) for i in range(2)]
    buf = encode_batch(records, compression=COMPRESSION_SNAPPY)
    payload = buf[61:]
    assert payload[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    # 120 KB of records: four blocks of at most 32 KiB each, as snappy-java writes
    pos, blocks = 16, 0
    while pos < len(payload):
        (n,) = struct.unpack_from(">i", payload, pos)
        assert len(cramjam.snappy.decompress_raw(payload[pos + 4:pos + 4 + n])) <= 32 * 1024
        pos, blocks = pos + 4 + n, blocks + 1
    assert blocks == 4
    plain = b"".join(R._encode_record(r) for r in records)
    raw = bytes(cramjam.snappy.compress_raw(plain))
    [batch] = decode_batches(forge(raw, count=2, attributes=COMPRESSION_SNAPPY))
    assert batch.records == tuple(records)


def test_lz4_frame_flags_are_the_java_clients():
    buf = encode_batch([Record(value=b"x" * 1000)], compression=COMPRESSION_LZ4)
    # magic, then FLG 0x60 (version 1, independent blocks, no checksums, no content
    # size) and BD 0x40 (64 KiB blocks), as Kafka's Lz4BlockOutputStream writes
    assert buf[61:67] == b"\x04\x22\x4d\x18\x60\x40"


def test_gzip_members_back_to_back_read_as_one_stream():
    plain = b"".join(R._encode_record(r) for r in GOLDEN_RECORDS)
    payload = gzip.compress(plain[:10]) + gzip.compress(plain[10:])
    [batch] = decode_batches(forge(payload, attributes=COMPRESSION_GZIP))
    assert batch.records == tuple(GOLDEN_RECORDS)


@pytest.mark.parametrize("compression,module", [(COMPRESSION_SNAPPY, "cramjam"), (COMPRESSION_LZ4, "lz4.frame"),
                                                (COMPRESSION_ZSTD, "zstandard")])
def test_missing_codec_library_refuses_with_unsupported_compression(monkeypatch, compression, module):
    buf = encode_batch(GOLDEN_RECORDS, compression=compression)
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    err = refusal(buf)
    assert err.error_code == UNSUPPORTED_COMPRESSION_TYPE and "not installed" in str(err)
    with pytest.raises(RecordBatchError) as info:
        encode_batch(GOLDEN_RECORDS, compression=compression)
    assert info.value.error_code == UNSUPPORTED_COMPRESSION_TYPE
    # the other codecs are unaffected
    assert decode_batches(encode_batch(GOLDEN_RECORDS, compression=COMPRESSION_GZIP))[0].records == tuple(
        GOLDEN_RECORDS)


# -- round trips

header_keys = st.text(max_size=8)
blobs = st.none() | st.binary(max_size=40)
record_lists = st.lists(
    st.tuples(st.integers(-(1 << 40), 1 << 40), blobs, blobs,
              st.lists(st.tuples(header_keys, blobs), max_size=3).map(tuple)),
    min_size=0, max_size=12)


@SETTINGS
@given(compression=st.sampled_from(CODECS), items=record_lists, transactional=st.booleans(), control=st.booleans(),
       timestamp_type=st.sampled_from([TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME]),
       base_offset=st.integers(0, (1 << 63) - 1), base_timestamp=st.integers(-1, 1 << 50),
       producer=st.tuples(st.integers(-1, (1 << 63) - 1), st.integers(-1, (1 << 15) - 1),
                          st.integers(-1, (1 << 31) - 1)),
       leader_epoch=st.integers(-1, (1 << 31) - 1), repeat=st.integers(1, 3))
def test_round_trip(compression, items, transactional, control, timestamp_type, base_offset, base_timestamp,
                    producer, leader_epoch, repeat):
    records = [Record(0, ts, i, key, value, headers) for i, (ts, key, value, headers) in enumerate(items)]
    producer_id, producer_epoch, base_sequence = producer
    buf = encode_batch(records, base_offset=base_offset, base_timestamp=base_timestamp, compression=compression,
                       timestamp_type=timestamp_type, transactional=transactional, control=control,
                       producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
                       partition_leader_epoch=leader_epoch)
    batches = decode_batches(buf * repeat)
    assert len(batches) == repeat and len(set(batches)) == 1
    batch = batches[0]
    assert batch.records == tuple(records)
    assert (batch.compression, batch.timestamp_type, batch.is_transactional, batch.is_control) == (
        compression, timestamp_type, transactional, control)
    assert (batch.base_offset, batch.base_timestamp, batch.partition_leader_epoch) == (
        base_offset, base_timestamp, leader_epoch)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == producer
    assert batch.record_count == len(records)
    assert batch.last_offset_delta == max(len(records) - 1, 0)
    if records:
        assert batch.max_timestamp == base_timestamp + max(r.timestamp_delta for r in records)
    else:
        assert batch.max_timestamp == -1
    # re-encoding what was decoded gives the same bytes (every codec here is deterministic)
    again = encode_batch(batch.records, base_offset=base_offset, base_timestamp=base_timestamp,
                         compression=compression, timestamp_type=timestamp_type, transactional=transactional,
                         control=control, producer_id=producer_id, producer_epoch=producer_epoch,
                         base_sequence=base_sequence, partition_leader_epoch=leader_epoch,
                         max_timestamp=batch.max_timestamp)
    assert again == buf


def test_log_append_time_gives_every_record_the_batch_max_timestamp():
    buf = encode_batch(GOLDEN_RECORDS, base_timestamp=100, timestamp_type=TIMESTAMP_LOG_APPEND_TIME,
                       max_timestamp=9_999)
    [batch] = decode_batches(buf)
    assert batch.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
    assert [batch.timestamp_of(r) for r in batch.records] == [9_999, 9_999]


def test_encode_refuses_values_the_format_cannot_carry():
    with pytest.raises(ValueError):
        encode_batch([Record(offset_delta=1 << 31)])
    with pytest.raises(ValueError):
        encode_batch([Record(timestamp_delta=1 << 63)])
    with pytest.raises(ValueError):
        encode_batch([Record()], producer_epoch=1 << 15)
    with pytest.raises(ValueError):
        encode_batch([Record()], compression=5)


# -- a Produce partition: the broker's checks on a client's batch

def produce_refusal(buf: bytes, version: int = 9) -> int:
    with pytest.raises(RecordBatchError) as info:
        decode_produce_batch(buf, version)
    return info.value.error_code


def test_produce_accepts_a_client_batch():
    batch = decode_produce_batch(GOLDEN, 3)
    assert batch.records == tuple(GOLDEN_RECORDS)
    idempotent = encode_batch(GOLDEN_RECORDS, producer_id=5, producer_epoch=0, base_sequence=0,
                              compression=COMPRESSION_ZSTD)
    assert decode_produce_batch(idempotent, 7).producer_id == 5


def test_produce_refusals():
    assert produce_refusal(b"") == INVALID_RECORD  # no batch
    assert produce_refusal(GOLDEN + GOLDEN) == INVALID_RECORD  # two batches
    assert produce_refusal(encode_batch(GOLDEN_RECORDS, compression=COMPRESSION_ZSTD), 6) == (
        UNSUPPORTED_COMPRESSION_TYPE)
    assert produce_refusal(encode_batch(GOLDEN_RECORDS, base_offset=3)) == INVALID_RECORD
    assert produce_refusal(encode_batch(GOLDEN_RECORDS, last_offset_delta=2)) == INVALID_RECORD
    assert produce_refusal(encode_batch([])) == INVALID_RECORD  # no records
    assert produce_refusal(encode_batch([], last_offset_delta=-1)) == INVALID_RECORD
    assert produce_refusal(encode_batch(GOLDEN_RECORDS, control=True)) == INVALID_RECORD
    assert produce_refusal(encode_batch(GOLDEN_RECORDS, producer_id=5, producer_epoch=0)) == INVALID_RECORD
    assert produce_refusal(forge(magic=1)) == INVALID_RECORD


def test_produce_does_not_check_per_record_offset_deltas():
    # Kafka renumbers a client's records on append; only last_offset_delta + 1 == count counts.
    records = [Record(offset_delta=0, value=b"a"), Record(offset_delta=7, value=b"b")]
    batch = decode_produce_batch(encode_batch(records, last_offset_delta=1), 9)
    assert [r.offset_delta for r in batch.records] == [0, 7]


# -- a real client: kafka-python's record batch builder and reader

@pytest.mark.parametrize("compression", CODECS)
def test_kafka_python_batches_both_ways(compression):
    kafka_records = pytest.importorskip("kafka.record.default_records")
    builder = kafka_records.DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=True, producer_id=42, producer_epoch=3,
        base_sequence=100, batch_size=1 << 20)
    expected = []
    for i in range(60):
        key = None if i % 3 == 0 else b"key-%d" % i
        value = None if i % 7 == 0 else b"value %d " % i * 20
        headers = [("trace", b"t%d" % i), ("empty", None)] if i % 2 else []
        builder.append(i, timestamp=1_700_000_000_000 + 3 * i, key=key, value=value, headers=headers)
        expected.append(Record(0, 3 * i, i, key, value, tuple(headers)))
    theirs = bytes(builder.build())

    batch = decode_produce_batch(theirs, 9)
    assert batch.compression == compression  # the builder kept it (the data compresses)
    assert batch.records == tuple(expected)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.is_transactional) == (
        42, 3, 100, True)
    assert batch.max_timestamp == 1_700_000_000_000 + 3 * 59

    ours = encode_batch(batch.records, base_timestamp=batch.base_timestamp, compression=compression,
                        transactional=True, producer_id=42, producer_epoch=3, base_sequence=100,
                        partition_leader_epoch=batch.partition_leader_epoch)
    if compression in (COMPRESSION_NONE, COMPRESSION_SNAPPY):
        assert ours == theirs  # same bytes (kafka-python's snappy is cramjam's too)
    read = kafka_records.DefaultRecordBatch(bytearray(ours))
    assert read.validate_crc()
    assert (read.compression_type, read.is_transactional, read.producer_id, read.base_sequence) == (
        compression, True, 42, 100)
    got = list(read)
    assert [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in got] == [
        (r.offset_delta, 1_700_000_000_000 + r.timestamp_delta, r.key, r.value, list(r.headers))
        for r in expected]
