"""Byte strings written by hand from Kafka's spec files (seed 004, the message JSONs), to
prove the layout itself and not only that encoder and decoder agree: ApiVersions v0 and v3
request and response, Metadata v1 request, Produce v3 request with its header."""

from __future__ import annotations

import pytest

from adapters.kafka import frames
from adapters.kafka.frames import FrameSplitter
from adapters.kafka.messages import API

APIV = API.by_name["ApiVersions"]
METADATA = API.by_name["Metadata"]
PRODUCE = API.by_name["Produce"]
ApiVersion = APIV.response.structs["ApiVersion"].cls


def h(text: str) -> bytes:
    """Hex with spaces and ``|`` between fields, for reading."""
    return bytes.fromhex(text.replace("|", " "))


def _framed(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


# --- ApiVersions v0 ------------------------------------------------------------------------

# Request header v1: api_key 18 | version 0 | correlation id 1 | client id "ab" (int16 length).
# The v0 body is empty.
API_VERSIONS_V0_REQUEST = h("0012 | 0000 | 00000001 | 0002 6162")


def test_api_versions_v0_request():
    wire = frames.encode_request(18, 0, 1, "ab", APIV.request.make())
    assert wire == _framed(API_VERSIONS_V0_REQUEST)
    header, body = frames.decode_request(API_VERSIONS_V0_REQUEST)
    assert (header.request_api_key, header.request_api_version, header.correlation_id, header.client_id) == (
        18, 0, 1, "ab")
    assert body == APIV.request.make()


# Response header v0: correlation id 1. Body v0: error_code 0 | api_keys: int32 count 2, then
# (api_key, min, max) int16 each: Produce 3-9, ApiVersions 0-3. No throttle time before v1.
API_VERSIONS_V0_RESPONSE = h("00000001 | 0000 | 00000002 | 0000 0003 0009 | 0012 0000 0003")
KEYS = (ApiVersion(api_key=0, min_version=3, max_version=9), ApiVersion(api_key=18, min_version=0, max_version=3))


def test_api_versions_v0_response():
    value = APIV.response.make(error_code=0, api_keys=KEYS)
    assert frames.encode_response(18, 0, 1, value) == _framed(API_VERSIONS_V0_RESPONSE)
    assert frames.decode_response(18, 0, API_VERSIONS_V0_RESPONSE) == (1, value)


# --- ApiVersions v3: flexible body ---------------------------------------------------------

# Request header v2: as v1 (the client id keeps its int16 length) then an empty tagged-field
# section (00). Body: client_software_name "ferry" and client_software_version "1.0" as compact
# strings (unsigned varint length + 1), then the body's empty tagged-field section.
API_VERSIONS_V3_REQUEST = h("0012 | 0003 | 00000002 | 0002 6162 | 00 | 06 6665727279 | 04 312e30 | 00")


def test_api_versions_v3_request():
    value = APIV.request.make(client_software_name="ferry", client_software_version="1.0")
    assert frames.encode_request(18, 3, 2, "ab", value) == _framed(API_VERSIONS_V3_REQUEST)
    assert frames.decode_request(API_VERSIONS_V3_REQUEST)[1] == value


# Response header stays v0 (no tagged-field section) although the body is flexible.
# Body: error_code 0 | api_keys compact: count 2 + 1 = 03, each item ends with its own empty
# tagged section (00) | throttle_time_ms 0 | tagged section: 2 fields, in tag order:
# tag 1 (finalized_features_epoch, int64 5) size 8, tag 3 (zk_migration_ready true) size 1.
API_VERSIONS_V3_RESPONSE = h(
    "00000002 | 0000 | 03 | 0000 0003 0009 00 | 0012 0000 0003 00 | 00000000"
    " | 02 | 01 08 0000000000000005 | 03 01 01")


def test_api_versions_v3_response_keeps_header_v0_and_writes_tagged_fields():
    value = APIV.response.make(error_code=0, api_keys=KEYS, finalized_features_epoch=5, zk_migration_ready=True)
    assert frames.encode_response(18, 3, 2, value) == _framed(API_VERSIONS_V3_RESPONSE)
    assert frames.decode_response(18, 3, API_VERSIONS_V3_RESPONSE) == (2, value)


def test_api_versions_v3_response_at_defaults_has_an_empty_tagged_section():
    value = APIV.response.make(error_code=0, api_keys=())
    # Compact empty array = 01; the tagged fields at their defaults are left out: count 00.
    assert APIV.response.encode(3, value) == h("0000 | 01 | 00000000 | 00")
    assert value.finalized_features_epoch == -1 and value.supported_features == ()


# --- Metadata v1 request -------------------------------------------------------------------

# Header v1: api_key 3 | version 1 | correlation id 9 | client id null (int16 -1).
# Body v1: topics, an int32-counted array of structs {name string}, nullable from v1.
METADATA_V1_ONE_TOPIC = h("0003 | 0001 | 00000009 | ffff | 00000001 | 0006 6f7264657273")
METADATA_V1_ALL_TOPICS = h("0003 | 0001 | 00000009 | ffff | ffffffff")


@pytest.mark.parametrize("payload,topics", [
    (METADATA_V1_ONE_TOPIC, ("orders",)),
    (METADATA_V1_ALL_TOPICS, None),
], ids=["one-topic", "all-topics"])
def test_metadata_v1_request(payload, topics):
    topic_cls = METADATA.request.structs["MetadataRequestTopic"].cls
    value = METADATA.request.make(topics=None if topics is None else tuple(topic_cls(name=t) for t in topics))
    assert frames.encode_request(3, 1, 9, None, value) == _framed(payload)
    header, body = frames.decode_request(payload)
    assert header.client_id is None and body == value
    assert body.allow_auto_topic_creation is True  # v4+ field: its spec default in v1


# --- Produce v3 request --------------------------------------------------------------------

# Header v1: api_key 0 | version 3 | correlation id 0x01020304 | client id "rdkafka".
# Body v3: transactional_id null (int16 -1) | acks -1 | timeout_ms 30000 | topic_data: 1 topic
# "t" with 1 partition: index 0, records as int32-length bytes (3 raw bytes here; the record
# batch codec reads them elsewhere).
PRODUCE_V3 = h(
    "0000 | 0003 | 01020304 | 0007 72646b61666b61"
    " | ffff | ffff | 00007530 | 00000001 | 0001 74 | 00000001 | 00000000 | 00000003 616263")


def test_produce_v3_request_and_header():
    topic = PRODUCE.request.structs["TopicProduceData"].cls
    partition = PRODUCE.request.structs["PartitionProduceData"].cls
    value = PRODUCE.request.make(transactional_id=None, acks=-1, timeout_ms=30000,
                                 topic_data=(topic(name="t", partition_data=(partition(index=0, records=b"abc"),)),))
    wire = frames.encode_request(0, 3, 0x01020304, "rdkafka", value)
    assert wire == _framed(PRODUCE_V3)
    header, body = frames.decode_request(FrameSplitter().feed(wire)[0])
    assert (header.request_api_key, header.request_api_version, header.correlation_id, header.client_id) == (
        0, 3, 0x01020304, "rdkafka")
    assert body == value


def test_produce_v9_is_flexible_with_header_v2():
    topic = PRODUCE.request.structs["TopicProduceData"].cls
    value = PRODUCE.request.make(transactional_id=None, acks=1, timeout_ms=1000, topic_data=(topic(name="t"),))
    # Header v2: ... client id "c" (int16 length) + 00. Body: transactional_id compact null 00 |
    # acks | timeout | topic_data compact 02 | name compact 02 74 | partition_data compact empty 01 |
    # topic's tags 00 | body's tags 00.
    expected = h("0000 | 0009 | 00000005 | 0001 63 | 00 | 00 | 0001 | 000003e8 | 02 | 02 74 | 01 | 00 | 00")
    assert frames.encode_request(0, 9, 5, "c", value) == _framed(expected)
