"""The Kafka frame splitter and request/response framing on malformed and unserved input:
truncated frames, bad size prefixes, negative array lengths, unknown tags, unknown API keys
and unsupported versions (which carry the correlation id so the session can answer as Kafka
does)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.kafka import frames
from adapters.kafka.errors import ErrorCode
from adapters.kafka.frames import MAX_FRAME_SIZE, FrameSplitter, UnknownApiKey, UnsupportedRequest, UnsupportedVersion
from adapters.kafka.messages import API
from adapters.kafka.types import KafkaDecodeError

APIV = API.by_name["ApiVersions"]
METADATA = API.by_name["Metadata"]
PRODUCE = API.by_name["Produce"]
FETCH = API.by_name["Fetch"]


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace("|", " "))


def _payload(api, version: int, value, correlation_id: int = 1) -> bytes:
    return frames.encode_request(api.key, version, correlation_id, "c", value)[4:]


# --- the splitter ----------------------------------------------------------------------------

@pytest.mark.parametrize("prefix", [b"\xff\xff\xff\xff", b"\x80\x00\x00\x00"], ids=["-1", "min-int32"])
def test_negative_size_is_refused(prefix):
    with pytest.raises(KafkaDecodeError, match="negative frame size"):
        FrameSplitter().feed(prefix + b"\x00" * 8)


def test_oversized_size_is_refused_before_any_payload():
    with pytest.raises(KafkaDecodeError, match="exceeds"):
        FrameSplitter().feed((MAX_FRAME_SIZE + 1).to_bytes(4, "big"))
    small = FrameSplitter(max_frame_size=16)
    assert small.feed((16).to_bytes(4, "big") + b"x" * 16) == [b"x" * 16]  # the limit itself is fine
    with pytest.raises(KafkaDecodeError, match="frame size 17 exceeds 16"):
        small.feed((17).to_bytes(4, "big"))


def test_a_truncated_frame_waits_for_the_rest():
    wire = frames.encode_request(18, 0, 1, None, APIV.request.make())
    splitter = FrameSplitter()
    assert splitter.feed(wire[:-1]) == []
    assert splitter.buffered == len(wire) - 1
    assert splitter.feed(wire[-1:]) == [wire[4:]]
    assert splitter.feed(b"\x00\x00") == [] and splitter.buffered == 2  # half a size prefix


def test_an_empty_frame_is_split_then_refused_by_the_decoder():
    assert FrameSplitter().feed(b"\x00\x00\x00\x00") == [b""]
    with pytest.raises(KafkaDecodeError, match="cut short"):
        frames.decode_request(b"")


# --- truncated payloads ----------------------------------------------------------------------

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_cut_of_a_request_payload_is_a_decode_error(data):
    api, version = data.draw(st.sampled_from([(PRODUCE, 3), (PRODUCE, 9), (FETCH, 12), (METADATA, 1),
                                               (METADATA, 12), (APIV, 3)]))
    payload = _payload(api, version, data.draw(api.request.strategy(version)))
    for cut in range(len(payload)):
        with pytest.raises(KafkaDecodeError):
            frames.decode_request(payload[:cut])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_cut_of_a_response_payload_is_a_decode_error(data):
    api, version = data.draw(st.sampled_from([(FETCH, 4), (FETCH, 12), (APIV, 0), (APIV, 3), (METADATA, 9)]))
    payload = frames.encode_response(api.key, version, 5, data.draw(api.response.strategy(version)))[4:]
    for cut in range(len(payload)):
        with pytest.raises(KafkaDecodeError):
            frames.decode_response(api.key, version, payload[:cut])


# --- negative and null lengths ---------------------------------------------------------------

HEADER_V1 = "0003 | {v} | 00000001 | ffff"  # Metadata, client id null


@pytest.mark.parametrize("payload,reason", [
    (h(HEADER_V1.format(v="0000") + " | ffffffff"), "negative count -1"),  # v0 topics: not nullable
    (h(HEADER_V1.format(v="0001") + " | fffffffe"), "negative count -2"),  # only -1 means null
    (h(HEADER_V1.format(v="0001") + " | 00000001 | fffe"), "negative length -2"),  # a topic name
    (h(HEADER_V1.format(v="0001") + " | 00000001 | ffff"), "negative length -1"),  # name not nullable
    (h(HEADER_V1.format(v="0001") + " | 7fffffff"), "cannot fit"),  # count beyond the bytes left
], ids=["null-in-v0", "minus-two", "negative-string", "null-string", "huge-count"])
def test_negative_lengths_are_malformed(payload, reason):
    with pytest.raises(KafkaDecodeError, match=reason):
        frames.decode_request(payload)


def test_compact_null_where_the_field_is_not_nullable():
    # Produce v9: transactional_id compact null (00) is fine, topic_data compact null (00) is not.
    payload = h("0000 | 0009 | 00000001 | ffff | 00 | 00 | 0001 | 000003e8 | 00 | 00")
    with pytest.raises(KafkaDecodeError, match="negative count -1"):
        frames.decode_request(payload)


def test_a_null_metadata_topic_list_in_v1_means_all_topics():
    assert frames.decode_request(h(HEADER_V1.format(v="0001") + " | ffffffff"))[1].topics is None


# --- tagged fields ---------------------------------------------------------------------------

V3_REQUEST = "0012 | 0003 | 00000002 | 0002 6162 | {header_tags} | 02 78 | 02 79 | {body_tags}"


@pytest.mark.parametrize("header_tags,body_tags", [
    ("00", "01 | 07 03 616263"),  # an unknown tag 7 in the body
    ("02 | 00 01 ff | 05 00", "00"),  # two unknown tags in the header, one empty
    ("00", "02 | 21 00 | 9601 02 0000"),  # two-byte tag number (150)
], ids=["body", "header", "varint-tag"])
def test_unknown_tags_are_skipped(header_tags, body_tags):
    header, body = frames.decode_request(h(V3_REQUEST.format(header_tags=header_tags, body_tags=body_tags)))
    assert header.correlation_id == 2
    assert body == APIV.request.make(client_software_name="x", client_software_version="y")


def test_unknown_tags_in_a_nested_struct_are_skipped_and_known_ones_decoded():
    # ApiVersions v3 response, one api key whose item carries an unknown tag 4, then the body's
    # section with tag 1 (finalized_features_epoch = 9) and an unknown tag 6.
    payload = h("00000001 | 0000 | 02 | 0001 0004 000c | 01 04 02 abcd | 00000000"
                " | 02 | 01 08 0000000000000009 | 06 00")
    _cid, body = frames.decode_response(18, 3, payload)
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(1, 4, 12)]
    assert body.finalized_features_epoch == 9 and body.zk_migration_ready is False


@pytest.mark.parametrize("body_tags,reason", [
    ("01 | 07 05 616263", "tag 7 ends early"),  # size beyond the body
    ("05 | 07 00", "cannot fit"),  # more tags than bytes
], ids=["size", "count"])
def test_malformed_tag_sections(body_tags, reason):
    with pytest.raises(KafkaDecodeError, match=reason):
        frames.decode_request(h(V3_REQUEST.format(header_tags="00", body_tags=body_tags)))


def test_a_known_tag_must_fill_its_size_exactly():
    # Fetch v12 request: ClusterId (tag 0, compact nullable string) declared 4 bytes, holding 2.
    fetch = FETCH.request.make(max_wait_ms=1, min_bytes=1)
    payload = _payload(FETCH, 12, fetch)
    assert payload.endswith(b"\x00")  # the body's empty tagged section
    with pytest.raises(KafkaDecodeError, match="tagged size 4"):
        frames.decode_request(payload[:-1] + h("01 | 00 04 02 61 0000"))
    cluster = frames.decode_request(payload[:-1] + h("01 | 00 02 02 61"))[1]
    assert cluster.cluster_id == "a"


# --- unknown keys and unsupported versions ---------------------------------------------------

@pytest.mark.parametrize("key", [4, 999, -1, 71], ids=["LeaderAndIsr", "999", "-1", "GetTelemetrySubscriptions"])
def test_an_unknown_api_key_carries_the_correlation_id(key):
    payload = key.to_bytes(2, "big", signed=True) + h("0001 | 12345678 | ffff")
    with pytest.raises(UnknownApiKey) as caught:
        frames.decode_request(payload)
    exc = caught.value
    assert (exc.correlation_id, exc.api_key, exc.api_version) == (0x12345678, key, 1)
    assert isinstance(exc, UnsupportedRequest) and isinstance(exc, KafkaDecodeError)
    assert exc.reply() is None  # Kafka closes the connection


@pytest.mark.parametrize("key,version", [(0, 2), (0, 10), (1, 3), (1, 13), (3, 13), (47, 1)])
def test_an_unsupported_version_carries_the_correlation_id(key, version):
    payload = key.to_bytes(2, "big") + version.to_bytes(2, "big") + h("00000063 | ffff")
    with pytest.raises(UnsupportedVersion) as caught:
        frames.decode_request(payload)
    assert (caught.value.correlation_id, caught.value.api_key, caught.value.api_version) == (0x63, key, version)
    assert caught.value.reply() is None


@pytest.mark.parametrize("version", [4, 5, 0x7FFF])
def test_api_versions_of_an_unserved_version_is_answered_in_v0_with_error_35(version):
    # kafka-python opens with ApiVersions v4; its header and body are not read.
    payload = h("0012") + version.to_bytes(2, "big") + h("0000002a | 0002 6b70 | 00 | 0000")
    with pytest.raises(UnsupportedVersion) as caught:
        frames.decode_request(payload)
    reply = caught.value.reply()
    (frame,) = FrameSplitter().feed(reply)
    assert frame[:4] == h("0000002a")  # header v0: the correlation id alone
    cid, body = frames.decode_response(18, 0, frame)
    assert cid == 42 and body.error_code == ErrorCode.UNSUPPORTED_VERSION == 35
    assert tuple((k.api_key, k.min_version, k.max_version) for k in body.api_keys) == API.ranges()
    assert (18, 0, 3) in API.ranges()


def test_a_header_cut_inside_the_client_id_is_a_plain_decode_error():
    with pytest.raises(KafkaDecodeError) as caught:
        frames.decode_request(h("0012 | 0000 | 00000001 | 0005 61"))
    assert not isinstance(caught.value, UnsupportedRequest)


def test_a_response_of_the_wrong_message_is_our_bug():
    with pytest.raises(TypeError):
        frames.encode_response(18, 0, 1, METADATA.response.make())
