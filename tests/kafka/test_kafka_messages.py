"""Every Kafka API Ferry serves, both directions, every version: round trips through whole
frames with values drawn from strategies the table derives, and, for a sample of versions,
frames fed one byte at a time and frames with trailing bytes. Plus the table's own facts:
ApiVersions' answer is derived from it, and its ranges serve what the clients of kafka.md
section 2 use."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.kafka import frames
from adapters.kafka.frames import FrameSplitter
from adapters.kafka.messages import API, api_versions
from adapters.kafka.types import KafkaDecodeError

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])

EVERY = [(api, v) for api in API for v in api.versions]


def _sample(api) -> list[int]:
    """The oldest and newest served versions, and the first flexible one."""
    chosen = {api.min, api.max}
    if api.flexible_versions:
        chosen.add(min(api.flexible_versions))
    return sorted(chosen)


SAMPLE = [(api, v) for api in API for v in _sample(api)]


def _id(case) -> str:
    return f"{case[0].name}-v{case[1]}"


def _only(frames_out: list[bytes]) -> bytes:
    assert len(frames_out) == 1
    return frames_out[0]


@pytest.mark.parametrize("case", EVERY, ids=_id)
@SETTINGS
@given(data=st.data(), correlation_id=st.integers(-(1 << 31), (1 << 31) - 1),
       client_id=st.none() | st.text(max_size=12))
def test_request_round_trip_whole(case, data, correlation_id, client_id):
    api, v = case
    value = data.draw(api.request.strategy(v))
    wire = frames.encode_request(api.key, v, correlation_id, client_id, value)
    header, body = frames.decode_request(_only(FrameSplitter().feed(wire)))
    assert body == value
    assert (header.request_api_key, header.request_api_version, header.correlation_id, header.client_id) == (
        api.key, v, correlation_id, client_id)


@pytest.mark.parametrize("case", EVERY, ids=_id)
@SETTINGS
@given(data=st.data(), correlation_id=st.integers(-(1 << 31), (1 << 31) - 1))
def test_response_round_trip_whole(case, data, correlation_id):
    api, v = case
    value = data.draw(api.response.strategy(v))
    wire = frames.encode_response(api.key, v, correlation_id, value)
    assert frames.decode_response(api.key, v, _only(FrameSplitter().feed(wire))) == (correlation_id, value)


def _bytewise(wire: bytes) -> bytes:
    splitter = FrameSplitter()
    got = []
    for i in range(len(wire)):
        out = splitter.feed(wire[i : i + 1])
        assert out == [] or i == len(wire) - 1  # nothing comes out before the last byte
        got += out
    assert splitter.buffered == 0
    return _only(got)


@pytest.mark.parametrize("case", SAMPLE, ids=_id)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_sampled_versions_byte_at_a_time_and_trailing_bytes(case, data):
    api, v = case
    request = data.draw(api.request.strategy(v))
    response = data.draw(api.response.strategy(v))
    req_wire = frames.encode_request(api.key, v, 7, "c", request)
    resp_wire = frames.encode_response(api.key, v, 7, response)
    assert frames.decode_request(_bytewise(req_wire))[1] == request
    assert frames.decode_response(api.key, v, _bytewise(resp_wire)) == (7, response)
    # Bytes after a request body are ignored, as Kafka's broker does (AbstractRequest
    # never checks what remains; librdkafka 2.16 sends some); a response must end exactly.
    assert frames.decode_request(req_wire[4:] + b"\x00\x01\x00")[1] == request
    with pytest.raises(KafkaDecodeError, match="trailing"):
        frames.decode_response(api.key, v, resp_wire[4:] + b"\x00")


def test_two_frames_in_one_piece_and_one_split_across_pieces():
    api = API.by_name["Heartbeat"]
    value = api.request.make(group_id="g", generation_id=3, member_id="m")
    one = frames.encode_request(api.key, 1, 1, None, value)
    two = frames.encode_request(api.key, 4, 2, "x", value)
    splitter = FrameSplitter()
    assert splitter.feed(one + two[:5]) == [one[4:]]
    assert splitter.buffered == 5
    assert splitter.feed(two[5:]) == [two[4:]]
    assert [frames.decode_request(f)[0].correlation_id for f in (one[4:], two[4:])] == [1, 2]


def test_api_versions_answer_is_derived_from_the_table():
    body = api_versions()
    listed = tuple((k.api_key, k.min_version, k.max_version) for k in body.api_keys)
    assert listed == API.ranges() == tuple((a.key, a.min, a.max) for a in API)
    assert body.error_code == 0
    assert [k for k, _lo, _hi in listed] == sorted(k for k, _lo, _hi in listed)


# The API keys and version ranges Ferry serves (issue 25).
SERVED = {
    "ApiVersions": (18, 0, 3), "Metadata": (3, 0, 12), "Produce": (0, 3, 9), "Fetch": (1, 4, 12),
    "ListOffsets": (2, 0, 7), "FindCoordinator": (10, 0, 4), "JoinGroup": (11, 0, 7), "SyncGroup": (14, 0, 5),
    "Heartbeat": (12, 0, 4), "LeaveGroup": (13, 0, 4), "OffsetCommit": (8, 0, 9), "OffsetFetch": (9, 0, 7),
    "InitProducerId": (22, 0, 4), "CreateTopics": (19, 0, 7), "DeleteTopics": (20, 0, 6),
    "CreatePartitions": (37, 0, 3), "DescribeConfigs": (32, 0, 4), "SaslHandshake": (17, 0, 1),
    "SaslAuthenticate": (36, 0, 2), "ListGroups": (16, 0, 4), "DescribeGroups": (15, 0, 5),
    "DeleteGroups": (42, 0, 2), "OffsetDelete": (47, 0, 0), "AddPartitionsToTxn": (24, 0, 3),
    "AddOffsetsToTxn": (25, 0, 3), "EndTxn": (26, 0, 3), "TxnOffsetCommit": (28, 0, 3), "DescribeCluster": (60, 0, 1),
    "DeleteRecords": (21, 0, 2), "IncrementalAlterConfigs": (44, 0, 1),
    "ConsumerGroupHeartbeat": (68, 0, 1), "ConsumerGroupDescribe": (69, 0, 0),
}


def test_the_table_serves_the_issue_s_keys_and_ranges():
    assert {a.name: (a.key, a.min, a.max) for a in API} == SERVED


# kafka.md section 2: per API, each client's usable range (lo, hi; "<=N" is 0..N) for
# librdkafka 2.15, librdkafka 2.0.2, kafka-python 3.0, aiokafka 0.14, kafkajs 2.2, and the
# versions the table says every client accepts. ApiVersions is negotiated apart (tested in
# test_kafka_frames.py: a higher version is answered with error 35 and the ranges).
CLIENTS = {
    "Metadata": ([(0, 13), (0, 4), (0, 13), (0, 5), (0, 6)], (4, 5)),
    "Produce": ([(3, 10), (0, 7), (3, 13), (0, 7), (0, 7)], (3, 7)),
    "Fetch": ([(4, 16), (0, 11), (0, 12), (1, 11), (0, 11)], (4, 11)),
    "ListOffsets": ([(0, 7), (0, 2), (0, 11), (0, 3), (0, 3)], (2, 3)),
    "FindCoordinator": ([(0, 2), (0, 2), (0, 6), (0, 1), (0, 2)], (1, 1)),
    "JoinGroup": ([(0, 5), (0, 5), (0, 7), (0, 5), (0, 5)], (5, 5)),
    "SyncGroup": ([(0, 3), (0, 3), (0, 5), (0, 3), (0, 3)], (3, 3)),
    "Heartbeat": ([(0, 3), (0, 3), (0, 4), (0, 1), (0, 3)], (1, 1)),
    "LeaveGroup": ([(0, 1), (0, 1), (0, 5), (0, 1), (0, 3)], (1, 1)),
    "OffsetCommit": ([(0, 9), (0, 7), (0, 8), (2, 3), (0, 5)], (3, 3)),
    "OffsetFetch": ([(0, 9), (0, 7), (0, 8), (1, 3), (1, 4)], (3, 3)),
    "InitProducerId": ([(0, 4), (0, 4), (0, 4), (0, 0), (0, 1)], (0, 0)),
    "AddPartitionsToTxn": ([(0, 0), (0, 0), (0, 3), (0, 0), (0, 1)], (0, 0)),
    "AddOffsetsToTxn": ([(0, 0), (0, 0), (0, 3), (0, 0), (0, 1)], (0, 0)),
    "EndTxn": ([(0, 1), (0, 1), (0, 3), (0, 0), (0, 1)], (0, 0)),
    "TxnOffsetCommit": ([(0, 3), (0, 3), (0, 3), (0, 0), (0, 1)], (0, 0)),
    "CreateTopics": ([(0, 4), (0, 4), (0, 7), (0, 3), (0, 3)], (3, 3)),
    "DeleteTopics": ([(0, 4), (0, 1), (0, 6), (0, 3), (0, 1)], (1, 1)),
    "DescribeConfigs": ([(0, 1), (0, 1), (0, 4), (0, 2), (0, 2)], (1, 1)),
    "CreatePartitions": ([(0, 2), (0, 0), (0, 3), (0, 1), (0, 1)], (0, 1)),
    "SaslHandshake": ([(0, 1), (0, 1), (0, 1), (0, 1), (0, 1)], (1, 1)),
    "SaslAuthenticate": ([(0, 1), (0, 0), (0, 2), (0, 1), (0, 1)], (0, 1)),
}


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_every_client_finds_a_version_and_the_common_ones_are_served(name):
    api = API.by_name[name]
    clients, (lo, hi) = CLIENTS[name]
    assert api.min <= lo and hi <= api.max  # what every client accepts is served
    for c_lo, c_hi in clients:  # each client and Ferry share at least one version
        assert max(c_lo, api.min) <= min(c_hi, api.max), (name, c_lo, c_hi)
