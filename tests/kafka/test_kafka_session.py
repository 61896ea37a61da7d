"""The Kafka session, sans-I/O, on a real broker in a temporary directory: SASL,
ApiVersions, Metadata with auto-creation and permissions, Produce (acks, idempotent
sequences, bad batches), Fetch (offsets, waits, byte limits), ListOffsets, admin."""

from __future__ import annotations

import pytest

from adapters.kafka import frames
from adapters.kafka.context import Access, KafkaContext, KafkaOptions
from adapters.kafka.dataplane import FetchWait, ProduceWait
from adapters.kafka.errors import ErrorCode as E
from adapters.kafka.messages import API, FETCH, LIST_OFFSETS, METADATA, PRODUCE
from adapters.kafka.messages_admin import CREATE_TOPICS, SASL_AUTHENTICATE, SASL_HANDSHAKE
from adapters.kafka.messages_txn import INIT_PRODUCER_ID
from adapters.kafka.records import Record, decode_batches, encode_batch
from adapters.kafka.session import MECHANISMS, KafkaSession
from core.broker import Broker
from core.errors import StorageError
from core.permissions import GlobalPermissions, Permissions

PASSWORD = "secret-password"


@pytest.fixture
def broker(tmp_path):
    with Broker.open(tmp_path / "data") as b:
        b.meta.users.create_user("root", PASSWORD, permissions=Permissions.root())
        yield b


@pytest.fixture
def ctx(broker):
    return KafkaContext(broker, host="127.0.0.1", port=9092, options=KafkaOptions())


class Client:
    """Drives one session with requests built from the tables, as a client would."""

    def __init__(self, ctx, user=None):
        self.session = KafkaSession(ctx, Access(ctx.broker.meta.users, user, anonymous=user is not None))
        self.corr = 0
        self.now = 1_000_000

    def call(self, api, version, **fields):
        self.corr += 1
        frame = frames.encode_request(api.key, version, self.corr, "test", api.request.make(**fields))
        outcome = self.session.handle(frame[4:], self.now)
        return self.finish(api, version, outcome)

    def finish(self, api, version, outcome):
        while outcome.kind == "login":
            user, password = outcome.wait
            try:
                result = self.session.ctx.broker.meta.users.authenticate(user, password)
            except Exception as exc:  # noqa: BLE001 - handed to the session as the driver does
                result = exc
            outcome = self.session.login_done(result)
        if outcome.kind == "wait":
            return outcome
        if outcome.kind == "silent":
            return None
        if outcome.frame is None:
            assert outcome.kind == "close"
            return ("close", None)
        corr, value = frames.decode_response(api.key, version, outcome.frame[4:])
        assert corr == self.corr
        return (outcome.kind, value) if outcome.kind == "close" else value

    def login(self, user="root", password=PASSWORD, version=1):
        hs = self.call(SASL_HANDSHAKE, version, mechanism="PLAIN")
        assert hs.error_code == 0 and hs.mechanisms == MECHANISMS
        return self.call(SASL_AUTHENTICATE, 1, auth_bytes=b"\0" + user.encode() + b"\0" + password.encode())


def topic(name, *parts):
    P = PRODUCE.request.structs
    return P["TopicProduceData"].make(name=name, partition_data=tuple(
        P["PartitionProduceData"].make(index=i, records=r) for i, r in parts))


def batch(*values, **kw):
    return encode_batch([Record(offset_delta=i, value=v, key=b"k%d" % i) for i, v in enumerate(values)], **kw)


def fetch_req(name, offset, partition=0, max_bytes=1 << 20, min_bytes=1, max_wait_ms=0):
    S = FETCH.request.structs
    return dict(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, topics=(
        S["FetchTopic"].make(topic=name, partitions=(S["FetchPartition"].make(
            partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes),)),))


def produce(client, name, records, acks=-1, version=9, partition=0):
    out = client.call(PRODUCE, version, acks=acks, timeout_ms=1000, topic_data=(topic(name, (partition, records)),))
    if getattr(out, "kind", None) == "wait":
        wait = out.wait
        assert isinstance(wait, ProduceWait)
        client.session.ctx.broker.flush()  # what the flusher does; its acks fire
        assert wait.done
        value = client.finish(PRODUCE, version, client.session.resume(wait, client.now))
        return value.responses[0].partition_responses[0]
    return out.responses[0].partition_responses[0] if out is not None else None


# -- authentication ---------------------------------------------------------------------
def test_only_api_versions_and_sasl_before_login(ctx):
    c = Client(ctx)
    versions = c.call(API[18], 3)
    assert {k.api_key for k in versions.api_keys} == set(c.session.served)
    assert {0, 1, 2, 3, 17, 18, 36} <= set(c.session.served)
    kind, _ = c.call(METADATA, 1, topics=None)
    assert kind == "close"


def test_sasl_plain_v1_logs_in_and_a_wrong_password_closes(ctx):
    c = Client(ctx)
    ok = c.login()
    assert ok.error_code == 0
    assert c.session.access.username == "root"
    bad = Client(ctx)
    kind, value = bad.login(password="wrong-password-x")
    assert kind == "close" and value.error_code == E.SASL_AUTHENTICATION_FAILED


def test_sasl_handshake_v0_takes_a_bare_token(ctx):
    c = Client(ctx)
    c.call(SASL_HANDSHAKE, 0, mechanism="PLAIN")
    outcome = c.session.handle(b"\0root\0" + PASSWORD.encode(), c.now)
    assert outcome.kind == "login"
    user = ctx.broker.meta.users.authenticate(*outcome.wait)
    done = c.session.login_done(user)
    assert done.kind == "reply" and done.frame == b"\0\0\0\0"


def test_unsupported_mechanism_is_refused(ctx):
    c = Client(ctx)
    kind, value = c.call(SASL_HANDSHAKE, 1, mechanism="GSSAPI")
    assert kind == "close" and value.error_code == E.UNSUPPORTED_SASL_MECHANISM
    assert value.mechanisms == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def test_api_versions_of_a_newer_version_answers_v0_with_the_ranges(ctx):
    c = Client(ctx)
    frame = frames.encode_request(18, 3, 7, "x", API[18].request.make())
    frame = frame[:6] + (9).to_bytes(2, "big") + frame[8:]  # ask for v9
    outcome = c.session.handle(frame[4:], c.now)
    assert outcome.kind == "reply"
    corr, value = frames.decode_response(18, 0, outcome.frame[4:])
    assert corr == 7 and value.error_code == E.UNSUPPORTED_VERSION and value.api_keys


# -- metadata and admin ------------------------------------------------------------------
def test_metadata_auto_creates_and_names_this_broker(ctx, broker):
    c = Client(ctx)
    c.login()
    T = METADATA.request.structs["MetadataRequestTopic"]
    md = c.call(METADATA, 12, topics=(T.make(name="orders.eu"), T.make(name="plain")),
                allow_auto_topic_creation=True)
    assert [(b.node_id, b.host, b.port) for b in md.brokers] == [(1, "127.0.0.1", 9092)]
    assert [(t.name, t.error_code, len(t.partitions)) for t in md.topics] == [("orders.eu", 0, 1), ("plain", 0, 1)]
    assert broker.get_topic("orders", "eu").partitions_count == 1
    assert broker.get_topic("kafka", "plain") is not None
    md = c.call(METADATA, 12, topics=(T.make(name="nope"),), allow_auto_topic_creation=False)
    assert md.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    md = c.call(METADATA, 12, topics=(T.make(name="bad name"),), allow_auto_topic_creation=True)
    assert md.topics[0].error_code == E.INVALID_TOPIC_EXCEPTION
    everything = c.call(METADATA, 1, topics=None)
    assert {t.name for t in everything.topics} == {"orders.eu", "plain"}


def test_a_user_sees_and_creates_only_what_it_may(ctx, broker):
    broker.create_stream("open")
    broker.create_topic("open", "t", 1)
    broker.meta.users.create_user("reader", PASSWORD, permissions=Permissions(
        global_=GlobalPermissions(read_topics=True, poll_messages=True)))
    broker.meta.users.create_user("nobody", PASSWORD)
    c = Client(ctx)
    c.login("reader")
    T = METADATA.request.structs["MetadataRequestTopic"]
    md = c.call(METADATA, 9, topics=(T.make(name="open.t"), T.make(name="new.x")), allow_auto_topic_creation=True)
    assert [(t.name, t.error_code) for t in md.topics] == [("open.t", 0), ("new.x", E.UNKNOWN_TOPIC_OR_PARTITION)]
    out = produce(c, "open.t", batch(b"x"), acks=1)
    assert out.error_code == E.TOPIC_AUTHORIZATION_FAILED
    n = Client(ctx)
    n.login("nobody")
    assert n.call(METADATA, 9, topics=None).topics == ()


def test_create_topics_checks_like_kafka(ctx, broker):
    c = Client(ctx)
    c.login()
    S = CREATE_TOPICS.request.structs

    def create(name, n=3, rf=1, configs=(), validate=False):
        t = S["CreatableTopic"].make(name=name, num_partitions=n, replication_factor=rf, configs=tuple(
            S["CreatableTopicConfig"].make(name=k, value=v) for k, v in configs))
        return c.call(CREATE_TOPICS, 7, topics=(t,), timeout_ms=1000, validate_only=validate).topics[0]

    ok = create("made.here", configs=[("retention.ms", "60000")])
    assert (ok.error_code, ok.num_partitions) == (0, 3)
    assert broker.get_topic("made", "here").message_expiry == 60_000_000
    assert create("made.here").error_code == E.TOPIC_ALREADY_EXISTS
    assert create("r3", rf=3).error_code == E.INVALID_REPLICATION_FACTOR
    assert create("cmp", configs=[("cleanup.policy", "compact")]).error_code == E.INVALID_CONFIG
    assert create("zero", n=0).error_code == E.INVALID_PARTITIONS
    assert create("dry", validate=True).error_code == 0
    assert ctx.topic("dry") is None


# -- produce, fetch, list offsets -----------------------------------------------------------
def test_produce_then_fetch_round_trip(ctx, broker):
    c = Client(ctx)
    c.login()
    broker.create_stream("s")
    broker.create_topic("s", "t", 2)
    first = produce(c, "s.t", batch(b"a", b"b", b"c"))
    assert (first.error_code, first.base_offset) == (0, 0)
    second = produce(c, "s.t", batch(b"d"))
    assert second.base_offset == 3
    resp = c.call(FETCH, 12, **fetch_req("s.t", 1))
    part = resp.responses[0].partitions[0]
    assert (part.error_code, part.high_watermark) == (0, 4)
    records = [(b.base_offset + r.offset_delta, r.value) for b in decode_batches(part.records) for r in b.records]
    assert records == [(1, b"b"), (2, b"c"), (3, b"d")]
    out_of_range = c.call(FETCH, 4, **fetch_req("s.t", 9)).responses[0].partitions[0]
    assert out_of_range.error_code == E.OFFSET_OUT_OF_RANGE
    L = LIST_OFFSETS.request.structs
    lo = c.call(LIST_OFFSETS, 7, replica_id=-1, topics=(L["ListOffsetsTopic"].make(name="s.t", partitions=(
        L["ListOffsetsPartition"].make(partition_index=0, timestamp=-2),
        L["ListOffsetsPartition"].make(partition_index=1, timestamp=-1))),))
    assert [(p.partition_index, p.offset) for p in lo.topics[0].partitions] == [(0, 0), (1, 0)]


def test_fetch_waits_for_min_bytes_until_its_deadline(ctx, broker):
    c = Client(ctx)
    c.login()
    broker.create_stream("w")
    broker.create_topic("w", "t", 1)
    outcome = c.call(FETCH, 11, **fetch_req("w.t", 0, max_wait_ms=500))
    assert outcome.kind == "wait" and isinstance(outcome.wait, FetchWait)
    writer = Client(ctx)  # another connection appends while this fetch waits
    writer.login()
    produce(writer, "w.t", batch(b"late"))
    value = c.finish(FETCH, 11, c.session.resume(outcome.wait, c.now + 10))
    assert value.responses[0].partitions[0].high_watermark == 1
    empty = c.call(FETCH, 11, **fetch_req("w.t", 1, max_wait_ms=500))
    timed_out = c.finish(FETCH, 11, c.session.resume(empty.wait, c.now + 600))
    assert timed_out.responses[0].partitions[0].records == b""


def test_idempotent_sequences_duplicates_and_gaps(ctx, broker):
    c = Client(ctx)
    c.login()
    broker.create_stream("i")
    broker.create_topic("i", "t", 1)
    pid = c.call(INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout_ms=1000)
    assert pid.error_code == 0 and pid.producer_id >= 0
    kw = dict(producer_id=pid.producer_id, producer_epoch=pid.producer_epoch)
    assert produce(c, "i.t", batch(b"0", b"1", base_sequence=0, **kw)).base_offset == 0
    # A retry of a stored batch gets the first attempt's base offset and no error, as
    # from Kafka (adapters/kafka/recent_batches.py); one that matches no remembered
    # batch (here: a part of one) the legacy DUPLICATE_SEQUENCE_NUMBER.
    retry = produce(c, "i.t", batch(b"0", b"1", base_sequence=0, **kw))
    assert (retry.error_code, retry.base_offset) == (0, 0)
    assert produce(c, "i.t", batch(b"1", base_sequence=1, **kw)).error_code == E.DUPLICATE_SEQUENCE_NUMBER
    assert produce(c, "i.t", batch(b"5", base_sequence=5, **kw)).error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(c, "i.t", batch(b"2", base_sequence=2, **kw)).base_offset == 2
    assert broker.partition("i", "t", 0).next_offset == 3
    again = c.call(INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout_ms=1000)
    assert again.producer_id != pid.producer_id


def test_bad_batches_get_kafka_errors_and_store_nothing(ctx, broker):
    c = Client(ctx)
    c.login()
    broker.create_stream("b")
    broker.create_topic("b", "t", 1)
    good = bytearray(batch(b"x"))
    good[-1] ^= 0xFF  # the CRC no longer holds
    assert produce(c, "b.t", bytes(good)).error_code == E.CORRUPT_MESSAGE
    assert produce(c, "b.t", batch(b"x"), acks=2).error_code == E.INVALID_REQUIRED_ACKS
    assert produce(c, "b.t", batch(b"x"), partition=5).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.partition("b", "t", 0).next_offset == 0
    assert produce(c, "b.t", batch(b"x"), acks=0) is None
    assert broker.partition("b", "t", 0).next_offset == 1


def test_list_offsets_answers_the_found_records_create_time(ctx, broker):
    # found by tests/kafka/test_kafka_client_matrix.py: kafka-python's and aiokafka's
    # offsets_for_times gave the append time while a Fetch of the same record shows the
    # producer's CreateTime; Kafka answers the found record's own timestamp.
    c = Client(ctx)
    c.login()
    broker.create_stream("ts")
    broker.create_topic("ts", "t", 1)
    created = 1_600_000_000_000  # ms, long before this append
    assert produce(c, "ts.t", batch(b"a", b"b", base_timestamp=created)).error_code == 0
    L = LIST_OFFSETS.request.structs
    lo = c.call(LIST_OFFSETS, 7, replica_id=-1, topics=(L["ListOffsetsTopic"].make(name="ts.t", partitions=(
        L["ListOffsetsPartition"].make(partition_index=0, timestamp=0),
        L["ListOffsetsPartition"].make(partition_index=0, timestamp=-3))),))
    assert [(p.offset, p.timestamp) for p in lo.topics[0].partitions] == [(0, created), (1, created)]


def test_list_offsets_by_timestamp_searches_create_times(ctx, broker, monkeypatch):
    # Kafka answers the first record whose CreateTime is at or after the time; Ferry's
    # index holds append times, later than a batch's create times (linger, back-dated
    # records): the search reads on from the first record appended at or after it.
    from adapters.kafka import dataplane
    c = Client(ctx)
    c.login()
    broker.create_stream("ct")
    broker.create_topic("ct", "t", 1)
    t0 = 1_600_000_000_000
    records = [Record(offset_delta=i, timestamp_delta=10 * i, value=b"%d" % i) for i in range(8)]
    assert produce(c, "ct.t", encode_batch(records, base_timestamp=t0)).error_code == 0
    L = LIST_OFFSETS.request.structs

    def lookup(*times):
        lo = c.call(LIST_OFFSETS, 7, replica_id=-1, topics=(L["ListOffsetsTopic"].make(name="ct.t", partitions=tuple(
            L["ListOffsetsPartition"].make(partition_index=0, timestamp=t) for t in times)),))
        return [(p.offset, p.timestamp) for p in lo.topics[0].partitions]

    assert lookup(t0, t0 + 25, t0 + 70, t0 + 71) == [(0, t0), (3, t0 + 30), (7, t0 + 70), (-1, -1)]
    monkeypatch.setattr(dataplane, "TIMESTAMP_SCAN_CHUNK", 2)
    monkeypatch.setattr(dataplane, "TIMESTAMP_SCAN_RECORDS", 4)
    # past the bound: the first record appended at or after it, never after Kafka's answer
    assert lookup(t0 + 25, t0 + 35) == [(3, t0 + 30), (0, t0)]  # offset 4 is the fifth record read

    def failing_read(*_args, **_kw):
        raise StorageError("disk gone")
    monkeypatch.setattr(type(broker.partition("ct", "t", 0)), "read", failing_read)
    lo = c.call(LIST_OFFSETS, 7, replica_id=-1, topics=(L["ListOffsetsTopic"].make(name="ct.t", partitions=(
        L["ListOffsetsPartition"].make(partition_index=0, timestamp=t0),)),))
    (part,) = lo.topics[0].partitions
    assert (part.error_code, part.offset) == (E.KAFKA_STORAGE_ERROR, -1)  # Kafka's answer, not a traceback
