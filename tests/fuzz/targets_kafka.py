"""Fuzz targets for Kafka (adapters/kafka).

* ``kafka_request``: request frames. The first byte picks the form: a raw stream
  through :class:`FrameSplitter` and each frame through ``frames.decode_request``
  (header, API key and version check, then the table engine on the body); or one API
  and version from the table (``messages*.py``, every request message Ferry serves)
  and the rest as that request's body. Contract (frames.py, types.py):
  ``KafkaDecodeError`` (``UnknownApiKey``/``UnsupportedVersion`` among them). A body
  it accepts re-encodes to bytes that decode to the same encoding.
* ``kafka_records``: a Produce partition's ``records`` through
  ``records.decode_produce_batch`` (CRC-32C, the decompression bomb guard of
  compression.py, record and header varints) and ``translate.to_block`` (records to
  stored records), once with the compiled Produce decode (``adapters.kafka._speedups
  .block``, ``translate.COMPILED_BLOCK``) and once with the Python loops: the same
  block and payload bytes, or the same Kafka error code and text. Contract
  (records.py): :class:`RecordBatchError`. Other first bytes: ``decode_batches`` (a
  Fetch answer's batches; accepted batches re-encoded uncompressed decode to the same
  records) and ``compression.decompress`` (codecs 1-4; what comes out compresses and
  decompresses back to itself).
"""

from __future__ import annotations

from fuzzlib import Picker, check, chunks, outcome

from adapters.kafka import translate
from adapters.kafka.compression import compress, decompress
from adapters.kafka.frames import FrameSplitter, decode_request
from adapters.kafka.messages import API
from adapters.kafka.records import RecordBatchError, decode_batches, decode_produce_batch, encode_batch
from adapters.kafka.types import KafkaDecodeError

_APIS = API.apis
_MAX_FRAMES = 64
_LIMIT = 1 << 20  # decompressed bytes per input: libFuzzer's default rss limit is 2 GB


def _reencoded(api, version: int, value) -> None:
    encoded = api.request.encode(version, value)
    again = api.request.decode(version, encoded)
    check(api.request.encode(version, again) == encoded, f"{api.name} v{version}: {value!r} re-decoded as {again!r}")


def kafka_request(data: bytes) -> None:
    p = Picker(data)
    mode = p.byte()
    if mode & 1:
        api = p.pick(_APIS)
        version = p.pick(api.versions)
        kind, value = outcome(api.request.decode, KafkaDecodeError, version, p.rest(), 0, exact=False)
        if kind == "ok":
            _reencoded(api, version, value[0])
        return
    cuts = bytes(p.byte() for _ in range(3))
    splitter = FrameSplitter(max_frame_size=1 << 20)
    frames = 0
    try:
        for piece in chunks(p.rest(), cuts):
            for frame in splitter.feed(piece):
                frames += 1
                if frames > _MAX_FRAMES:
                    return
                kind, value = outcome(decode_request, KafkaDecodeError, frame)
                if kind == "ok":
                    header, body = value
                    _reencoded(API[header.request_api_key], header.request_api_version, body)
    except KafkaDecodeError:
        pass


def _produce(buf: bytes, version: int, block):
    """``to_block`` of the decoded batch, as comparable values."""
    try:
        batch = decode_produce_batch(buf, version, max_decompressed=_LIMIT, block=block)
        made, nbytes = translate.to_block(batch)
    except RecordBatchError as exc:
        return "err", exc.error_code, exc.reason
    return "ok", bytes(made), nbytes


def kafka_records(data: bytes) -> None:
    p = Picker(data)
    mode = p.byte()
    if mode % 4 <= 1:
        version = 3 + (mode >> 2) % 9  # Produce v3..v11: record batches (magic 2)
        body = p.rest()
        pure = _produce(body, version, None)
        if translate.COMPILED_BLOCK is not None:
            compiled = _produce(body, version, translate.COMPILED_BLOCK)
            check(compiled == pure, f"Produce v{version}: compiled {compiled!r} != python {pure!r}")
    elif mode % 4 == 2:
        kind, batches = outcome(decode_batches, RecordBatchError, p.rest(), max_decompressed=_LIMIT)
        if kind == "ok":
            for b in batches:
                again = decode_batches(encode_batch(
                    b.records, base_offset=b.base_offset, base_timestamp=b.base_timestamp,
                    timestamp_type=b.timestamp_type, transactional=b.is_transactional, control=b.is_control,
                    delete_horizon=b.has_delete_horizon, producer_id=b.producer_id,
                    producer_epoch=b.producer_epoch, base_sequence=b.base_sequence,
                    partition_leader_epoch=b.partition_leader_epoch, max_timestamp=b.max_timestamp,
                    last_offset_delta=b.last_offset_delta))
                check(tuple(again[0].records) == tuple(b.records), f"batch records {b.records!r} re-decoded differently")
    else:
        codec = 1 + (mode >> 2) % 4
        kind, plain = outcome(decompress, RecordBatchError, codec, p.rest(), _LIMIT)
        if kind == "ok":
            check(decompress(codec, compress(codec, plain), _LIMIT) == plain, f"codec {codec} round trip")


TARGETS = {"kafka_request": kafka_request, "kafka_records": kafka_records}
