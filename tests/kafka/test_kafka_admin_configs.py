"""IncrementalAlterConfigs and DeleteRecords through the Kafka session, sans-I/O, on a real
broker in a temporary directory (adapters/kafka/admin.py, core/topicops.py): the one config
table CreateTopics, IncrementalAlterConfigs and DescribeConfigs share, Kafka's refusals, and
the log start offset DeleteRecords moves as Fetch, ListOffsets and Produce then report it.
Every request is encoded and every answer decoded at its version, each API at its oldest and
newest."""

from __future__ import annotations

import pytest

from adapters.kafka import frames
from adapters.kafka.context import Access, KafkaContext, KafkaOptions
from adapters.kafka.errors import ErrorCode as E
from adapters.kafka.messages import API, FETCH, LIST_OFFSETS, PRODUCE
from adapters.kafka.messages_admin import (CREATE_TOPICS, DELETE_RECORDS, DESCRIBE_CONFIGS,
                                           INCREMENTAL_ALTER_CONFIGS)
from adapters.kafka.records import Record, decode_batches, encode_batch
from adapters.kafka.session import KafkaSession
from core.broker import Broker, BrokerConfig
from core.log import AppendInput, LogConfig
from core.model import TopicSettings
from core.permissions import GlobalPermissions, Permissions

# Records of 40-byte payloads appended two per flush: a 550-byte segment holds two
# batches (four records), so 20 records make five segments, the last one active.
PAYLOAD = 40
SEGMENT_BYTES = 550
TOPIC, BROKER_RESOURCE = 2, 4  # ConfigResource.Type ids
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # AlterConfigOp.OpType ids
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5
EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
IAC_VERSIONS = (0, 1)
DR_VERSIONS = (0, 2)


def open_broker(path):
    return Broker.open(path, BrokerConfig(log=LogConfig(segment_bytes=SEGMENT_BYTES, fsync="never")))


@pytest.fixture
def broker(tmp_path):
    with open_broker(tmp_path / "data") as b:
        b.create_stream("s")
        b.create_topic("s", "t", 2)
        yield b


def client(broker, user="iggy", permissions=None):
    if user != "iggy":
        broker.meta.users.create_user(user, "password-123", permissions=permissions)
    ctx = KafkaContext(broker, host="127.0.0.1", port=9092, options=KafkaOptions())
    return Client(KafkaSession(ctx, Access(broker.meta.users, broker.meta.users.get_user(user), anonymous=True)))


class Client:
    """One session acting as a user (no SASL round: Access is given the user)."""

    def __init__(self, session):
        self.session = session
        self.corr = 0

    def call(self, api, version, **fields):
        self.corr += 1
        frame = frames.encode_request(api.key, version, self.corr, "test", api.request.make(**fields))
        outcome = self.session.handle(frame[4:], 1_000_000)
        if outcome.kind == "wait":  # a Produce waiting for durability: what the flusher does
            self.session.ctx.broker.flush()
            outcome = self.session.resume(outcome.wait, 1_000_000)
        assert outcome.kind == "reply", outcome
        corr, value = frames.decode_response(api.key, version, outcome.frame[4:])
        assert corr == self.corr
        return value

    # -- IncrementalAlterConfigs, DescribeConfigs ------------------------------------------
    def alter(self, version, *resources, validate_only=False):
        """``resources``: (type, name, [(key, op, value)]); the answers as (code, message)."""
        S = INCREMENTAL_ALTER_CONFIGS.request.structs
        value = self.call(INCREMENTAL_ALTER_CONFIGS, version, validate_only=validate_only, resources=tuple(
            S["AlterConfigsResource"].make(resource_type=rtype, resource_name=name, configs=tuple(
                S["AlterableConfig"].make(name=k, config_operation=op, value=v) for k, op, v in configs))
            for rtype, name, configs in resources))
        assert [(r.resource_type, r.resource_name) for r in value.responses] == [(r[0], r[1]) for r in resources]
        return [(r.error_code, r.error_message) for r in value.responses]

    def alter_topic(self, version, name, *configs, validate_only=False):
        ((code, message),) = self.alter(version, (TOPIC, name, configs), validate_only=validate_only)
        return code, message

    def describe(self, version, name, keys=None):
        """{key: (value, source)} of a topic (source: is_default's before v1)."""
        S = DESCRIBE_CONFIGS.request.structs
        value = self.call(DESCRIBE_CONFIGS, version, include_synonyms=False, include_documentation=False,
                          resources=(S["DescribeConfigsResource"].make(resource_type=TOPIC, resource_name=name,
                                                                      configuration_keys=keys),))
        (result,) = value.results
        assert result.error_code == 0
        if version == 0:
            return {c.name: (c.value, DEFAULT_CONFIG if c.is_default else DYNAMIC_TOPIC_CONFIG) for c in result.configs}
        return {c.name: (c.value, c.config_source) for c in result.configs}

    # -- DeleteRecords, ListOffsets, Fetch ---------------------------------------------------
    def delete_records(self, version, name, *parts):
        """``parts``: (partition, offset); the answers as (partition, low watermark, code)."""
        S = DELETE_RECORDS.request.structs
        value = self.call(DELETE_RECORDS, version, timeout_ms=1000, topics=(S["DeleteRecordsTopic"].make(
            name=name, partitions=tuple(S["DeleteRecordsPartition"].make(partition_index=p, offset=o)
                                        for p, o in parts)),))
        (topic,) = value.topics
        assert topic.name == name
        return [(p.partition_index, p.low_watermark, p.error_code) for p in topic.partitions]

    def list_offset(self, name, timestamp, partition=0, version=7):
        S = LIST_OFFSETS.request.structs
        value = self.call(LIST_OFFSETS, version, replica_id=-1, topics=(S["ListOffsetsTopic"].make(
            name=name, partitions=(S["ListOffsetsPartition"].make(partition_index=partition, timestamp=timestamp),)),))
        (p,) = value.topics[0].partitions
        assert p.error_code == 0
        return p.old_style_offsets[0] if version == 0 else p.offset

    def produce(self, name, value, partition=0):
        """(error code, log start offset) of a one-record Produce v9 with acks=1."""
        S = PRODUCE.request.structs
        answer = self.call(PRODUCE, 9, acks=1, timeout_ms=1000, transactional_id=None, topic_data=(
            S["TopicProduceData"].make(name=name, partition_data=(S["PartitionProduceData"].make(
                index=partition, records=encode_batch([Record(offset_delta=0, value=value)])),)),))
        (p,) = answer.responses[0].partition_responses
        return p.error_code, p.log_start_offset

    def fetch(self, name, offset, partition=0, version=12):
        """(error code, log start offset, [offsets of the records])."""
        S = FETCH.request.structs
        value = self.call(FETCH, version, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=(
            S["FetchTopic"].make(topic=name, partitions=(S["FetchPartition"].make(
                partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20),)),))
        (p,) = value.responses[0].partitions
        records = decode_batches(p.records) if p.records else []
        return p.error_code, p.log_start_offset, [b.base_offset + r.offset_delta for b in records for r in b.records]


def fill(broker, n=20, pid=0):
    """``n`` records in partition ``pid`` of s/t, flushed two at a time (module comment)."""
    part = broker.partition("s", "t", pid)
    for i in range(0, n, 2):
        broker.append("s", "t", [AppendInput(b"m%06d" % j + b"." * (PAYLOAD - 7)) for j in (i, i + 1)], partition=pid)
        part.flush(fsync=False)
    return part


# -- the protocol surface ------------------------------------------------------------------
def test_api_versions_advertises_both_apis(broker):
    versions = client(broker).call(API[18], 3)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert ranges[21] == (0, 2) and ranges[44] == (0, 1)


# -- IncrementalAlterConfigs -------------------------------------------------------------------
@pytest.mark.parametrize("version", IAC_VERSIONS)
def test_set_then_delete_shows_in_describe(broker, version):
    c = client(broker)
    assert c.alter_topic(version, "s.t", ("retention.ms", SET, "60000"), ("retention.bytes", SET, "1000")) == (0, None)
    info = broker.get_topic("s", "t")
    assert (info.message_expiry, info.max_topic_size) == (60_000_000, 2000)  # per partition x 2 partitions
    for describe_version in (0, 4):
        seen = c.describe(describe_version, "s.t")
        assert seen["retention.ms"] == ("60000", DYNAMIC_TOPIC_CONFIG)
        assert seen["retention.bytes"] == ("1000", DYNAMIC_TOPIC_CONFIG)
        assert seen["cleanup.policy"] == ("delete", DEFAULT_CONFIG)
        assert seen["segment.bytes"] == (str(SEGMENT_BYTES), DEFAULT_CONFIG)  # the broker's [log] value
    assert c.alter_topic(version, "s.t", ("retention.ms", DELETE, None), ("retention.bytes", DELETE, None)) == (0, None)
    info = broker.get_topic("s", "t")
    assert (info.message_expiry, info.max_topic_size) == (0, 0)
    assert c.describe(4, "s.t", keys=("retention.ms", "retention.bytes")) == {
        "retention.ms": ("-1", DEFAULT_CONFIG), "retention.bytes": ("-1", DEFAULT_CONFIG)}


@pytest.mark.parametrize("version", IAC_VERSIONS)
def test_retention_values_cross_as_kafka_means_them(broker, version):
    c = client(broker)
    assert c.alter_topic(version, "s.t", ("retention.ms", SET, "0"))[0] == 0  # expire at once: 1 µs, never 0
    assert broker.get_topic("s", "t").message_expiry == 1
    assert c.describe(4, "s.t")["retention.ms"] == ("0", DYNAMIC_TOPIC_CONFIG)
    assert c.alter_topic(version, "s.t", ("retention.ms", SET, "-1"), ("retention.bytes", SET, "-5"))[0] == 0
    assert broker.get_topic("s", "t").settings == TopicSettings()  # unlimited again


@pytest.mark.parametrize("version", IAC_VERSIONS)
def test_validate_only_checks_and_changes_nothing(broker, version):
    c = client(broker)
    assert c.alter_topic(version, "s.t", ("retention.ms", SET, "5000"), validate_only=True) == (0, None)
    assert broker.get_topic("s", "t").message_expiry == 0
    code, message = c.alter_topic(version, "s.t", ("retention.ms", SET, "-2"), validate_only=True)
    assert code == E.INVALID_CONFIG and "retention.ms" in message


@pytest.mark.parametrize("version", IAC_VERSIONS)
def test_keys_and_values_ferry_cannot_hold_are_invalid_config(broker, version):
    c = client(broker)
    for config in [("max.message.bytes", SET, "1000"), ("retention.ms", SET, "-2"), ("retention.ms", SET, "1e3"),
                   ("retention.bytes", SET, "0"), ("cleanup.policy", SET, "compact"),
                   ("cleanup.policy", SET, "compact,delete"), ("compression.type", SET, "gzip"),
                   ("segment.bytes", SET, "1048576"), ("retention.ms", SET, str(2**63))]:
        code, message = c.alter_topic(version, "s.t", config)
        assert code == E.INVALID_CONFIG and config[0] in message, (config, message)
    # APPEND and SUBTRACT: only on list keys (cleanup.policy), as Kafka's controller answers
    code, message = c.alter_topic(version, "s.t", ("retention.ms", APPEND, "1"))
    assert code == E.INVALID_CONFIG and "APPEND" in message
    assert c.alter_topic(version, "s.t", ("retention.bytes", SUBTRACT, "1"))[0] == E.INVALID_CONFIG
    assert c.alter_topic(version, "s.t", ("cleanup.policy", APPEND, "delete"))[0] == 0
    assert c.alter_topic(version, "s.t", ("cleanup.policy", APPEND, "compact"))[0] == E.INVALID_CONFIG
    assert c.alter_topic(version, "s.t", ("cleanup.policy", SUBTRACT, "delete"))[0] == E.INVALID_CONFIG
    assert c.alter_topic(version, "s.t", ("cleanup.policy", SET, "delete"), ("cleanup.policy", DELETE, None)) \
        == (E.INVALID_REQUEST, "a config key may appear once per resource")
    assert c.alter_topic(version, "s.t", ("cleanup.policy", SET, " delete "))[0] == 0  # a no-op
    # a resource's changes are made together or not at all
    code, _ = c.alter_topic(version, "s.t", ("retention.ms", SET, "7000"), ("max.message.bytes", SET, "1"))
    assert code == E.INVALID_CONFIG and broker.get_topic("s", "t").message_expiry == 0


@pytest.mark.parametrize("version", IAC_VERSIONS)
def test_requests_kafka_refuses_before_looking_are_invalid_request(broker, version):
    c = client(broker)
    twice = (TOPIC, "s.t", [("retention.ms", SET, "1000")])
    assert [code for code, _ in c.alter(version, twice, twice, (TOPIC, "other", []))] == [
        E.INVALID_REQUEST, E.INVALID_REQUEST, E.UNKNOWN_TOPIC_OR_PARTITION]
    code, message = c.alter_topic(version, "s.t", ("retention.ms", SET, None))
    assert code == E.INVALID_REQUEST and "retention.ms" in message
    assert c.alter_topic(version, "s.t", ("retention.ms", 9, "1"))[0] == E.INVALID_REQUEST
    assert c.alter(version, (16, "metrics", [("interval.ms", SET, "1")]))[0][0] == E.INVALID_REQUEST
    assert broker.get_topic("s", "t").message_expiry == 0


@pytest.mark.parametrize("version", IAC_VERSIONS)
def test_broker_configs_answer_as_for_a_config_kafka_cannot_update(broker, version):
    c = client(broker)
    answers = c.alter(version, (BROKER_RESOURCE, "1", [("num.partitions", SET, "3")]),
                      (BROKER_RESOURCE, "", [("log.retention.ms", DELETE, None)]),
                      (BROKER_RESOURCE, "7", [("num.partitions", SET, "3")]))
    assert [code for code, _ in answers] == [E.INVALID_REQUEST, E.INVALID_REQUEST, E.INVALID_REQUEST]
    assert "num.partitions" in answers[0][1] and "log.retention.ms" in answers[1][1]
    assert c.alter(version, (BROKER_RESOURCE, "1", [])) == [(0, None)]  # nothing to change


@pytest.mark.parametrize("version", IAC_VERSIONS)
def test_unknown_topic_and_a_user_who_may_not_manage_it(broker, version):
    assert client(broker).alter_topic(version, "s.nope", ("retention.ms", SET, "1"))[0] == E.UNKNOWN_TOPIC_OR_PARTITION
    reader = client(broker, "reader", Permissions(global_=GlobalPermissions(read_topics=True, poll_messages=True)))
    assert reader.alter_topic(version, "s.t", ("retention.ms", SET, "1"))[0] == E.TOPIC_AUTHORIZATION_FAILED
    assert reader.describe(4, "s.t")["retention.ms"] == ("-1", DEFAULT_CONFIG)  # it may still describe
    assert broker.get_topic("s", "t").message_expiry == 0


def test_create_topics_reads_the_same_table(broker):
    c = client(broker)
    S = CREATE_TOPICS.request.structs

    def create(name, *configs):
        t = S["CreatableTopic"].make(name=name, num_partitions=1, replication_factor=1, configs=tuple(
            S["CreatableTopicConfig"].make(name=k, value=v) for k, v in configs))
        return c.call(CREATE_TOPICS, 7, topics=(t,), timeout_ms=1000, validate_only=False).topics[0]

    made = create("s.seg", ("segment.bytes", "1048576"), ("compression.type", "uncompressed"))
    assert made.error_code == 0 and broker.get_topic("s", "seg").segment_bytes == 1048576
    configs = {cfg.name: (cfg.value, cfg.config_source) for cfg in made.configs}
    assert configs["segment.bytes"] == ("1048576", DYNAMIC_TOPIC_CONFIG)
    assert c.describe(4, "s.seg")["segment.bytes"] == ("1048576", DYNAMIC_TOPIC_CONFIG)
    # fixed at creation: an alter may restate it, never change it
    assert c.alter_topic(1, "s.seg", ("segment.bytes", SET, "1048576"))[0] == 0
    assert c.alter_topic(1, "s.seg", ("segment.bytes", DELETE, None))[0] == E.INVALID_CONFIG
    for bad in [("segment.bytes", "13"), ("retention.bytes", "0"), ("max.message.bytes", "1"), ("retention.ms", None)]:
        refused = create("s.bad", bad)
        assert refused.error_code == E.INVALID_CONFIG and bad[0] in refused.error_message, refused
    assert broker.list_topics("s")[-1].name == "seg"


# -- DeleteRecords and the log start offset --------------------------------------------------
@pytest.mark.parametrize("version", DR_VERSIONS)
def test_delete_records_moves_the_log_start_offset(broker, version):
    c = client(broker)
    part = fill(broker)
    assert c.delete_records(version, "s.t", (0, 7)) == [(0, 7, 0)]
    assert c.list_offset("s.t", EARLIEST) == 7 and c.list_offset("s.t", EARLIEST, version=0) == 7
    assert c.list_offset("s.t", 0) == 7  # a timestamp is searched from the log start
    assert c.fetch("s.t", 5) == (E.OFFSET_OUT_OF_RANGE, 7, [])
    code, start, offsets = c.fetch("s.t", 7)
    assert (code, start, offsets[0], offsets[-1]) == (0, 7, 7, 19)
    assert c.fetch("s.t", 7, version=4)[0] == 0
    # the whole segments below it are gone (offsets 0-3); 4-6 share a segment with 7
    assert part.first_offset == 4
    assert broker.topic_state.partition_byte_start("s", "t", 0) == part.byte_pos_of(7)  # Pravega's view agrees
    # at or below the start: nothing moves, the answer is the start
    assert c.delete_records(version, "s.t", (0, 3), (0, 7)) == [(0, 7, 0), (0, 7, 0)]
    assert c.delete_records(version, "s.t", (0, -1), (1, -1)) == [(0, 20, 0), (1, 0, 0)]  # -1: the high watermark
    assert c.list_offset("s.t", EARLIEST) == c.list_offset("s.t", LATEST) == 20
    assert c.list_offset("s.t", MAX_TIMESTAMP) == -1  # no record left to name
    assert c.fetch("s.t", 19)[0] == E.OFFSET_OUT_OF_RANGE and c.fetch("s.t", 20) == (0, 20, [])
    assert c.produce("s.t", b"after") == (0, 20)  # Produce answers carry the log start too
    assert c.fetch("s.t", 20) == (0, 20, [20])


@pytest.mark.parametrize("version", DR_VERSIONS)
def test_delete_records_refusals(broker, version):
    c = client(broker)
    fill(broker, 6)
    assert c.delete_records(version, "s.t", (0, 7), (0, -2), (5, 1)) == [
        (0, -1, E.OFFSET_OUT_OF_RANGE), (0, -1, E.OFFSET_OUT_OF_RANGE), (5, -1, E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert c.delete_records(version, "s.nope", (0, 1)) == [(0, -1, E.UNKNOWN_TOPIC_OR_PARTITION)]
    reader = client(broker, "reader", Permissions(global_=GlobalPermissions(read_topics=True, poll_messages=True)))
    assert reader.delete_records(version, "s.t", (0, 3)) == [(0, -1, E.TOPIC_AUTHORIZATION_FAILED)]
    assert c.list_offset("s.t", EARLIEST) == 0 and broker.partition("s", "t", 0).first_offset == 0


def test_the_log_start_is_durable_and_purge_resets_it(tmp_path):
    with open_broker(tmp_path / "d") as b:
        b.create_stream("s")
        b.create_topic("s", "t", 2)
        fill(b)
        assert client(b).delete_records(2, "s.t", (0, 9)) == [(0, 9, 0)]
    with open_broker(tmp_path / "d") as b:
        c = client(b)
        assert c.list_offset("s.t", EARLIEST) == 9 and c.fetch("s.t", 8)[0] == E.OFFSET_OUT_OF_RANGE
        b.purge_topic("s", "t")  # offsets and byte positions start again from 0
        b.append("s", "t", [AppendInput(b"again")], partition=0)
        b.flush()  # a Fetch serves durable records only (issue 30)
        assert c.list_offset("s.t", EARLIEST) == 0 and c.fetch("s.t", 0) == (0, 0, [0])


def test_a_pravega_truncation_inside_a_record_starts_kafka_at_the_next_one(broker):
    c = client(broker)
    part = fill(broker, 8)
    inside = part.byte_pos_of(5) + 3  # three bytes into record 5's event
    broker.topic_state.truncate_partition("s", "t", 0, inside)
    assert broker.topic_state.partition_start_offset("s", "t", 0) == 6
    assert c.list_offset("s.t", EARLIEST) == 6 and c.fetch("s.t", 5)[0] == E.OFFSET_OUT_OF_RANGE
    # DeleteRecords at that record is a no-op; past it, the byte start moves onto a record's start
    assert c.delete_records(2, "s.t", (0, 6)) == [(0, 6, 0)]
    assert broker.topic_state.partition_byte_start("s", "t", 0) == inside
    assert c.delete_records(2, "s.t", (0, 7)) == [(0, 7, 0)]
    assert broker.topic_state.partition_byte_start("s", "t", 0) == part.byte_pos_of(7)
