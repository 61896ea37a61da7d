"""A retried idempotent batch whose first attempt no memory of this listener holds:
answered as Kafka answers it (no error, the first attempt's base offset) from the
partition's memory of calls (core/log/producers.py RecentCalls) or, after a restart,
from the stored records (adapters/kafka/retry_lookup.py)."""

from __future__ import annotations

from adapters.kafka import retry_lookup
from adapters.kafka.context import KafkaContext, KafkaOptions
from adapters.kafka.errors import ErrorCode as E
from adapters.kafka.messages_txn import INIT_PRODUCER_ID
from adapters.kafka.records import Record, encode_batch
from core.broker import Broker
from core.log import LogConfig
from core.log.producers import CALLS_PER_PRODUCER, RecentCalls
from core.permissions import Permissions
from gateway.jetstream_store.partition import RemotePartition

from test_kafka_session import PASSWORD, Client, batch, broker, ctx, produce  # noqa: F401 - fixtures


def _setup(broker, name="r"):  # noqa: F811
    broker.create_stream(name)
    broker.create_topic(name, "t", 1)


def _producer(c):
    pid = c.call(INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout_ms=1000)
    assert pid.error_code == 0
    return dict(producer_id=pid.producer_id, producer_epoch=pid.producer_epoch)


def _timed(*values, ts, **kw):
    """A batch with CreateTimes, as librdkafka and the Java client send."""
    return encode_batch([Record(offset_delta=i, timestamp_delta=i, value=v, key=b"k%d" % i)
                         for i, v in enumerate(values)], base_timestamp=ts, **kw)


def _other_listener(broker):  # noqa: F811
    """A fresh listener state on the same log: another gateway, or this one restarted."""
    c = Client(KafkaContext(broker, host="127.0.0.1", port=9093, options=KafkaOptions()))
    c.login()
    return c


def test_recent_calls_keep_the_last_five_per_producer_and_count_a_call_applied_piecewise():
    calls = RecentCalls(limit=2)
    for i in range(CALLS_PER_PRODUCER + 1):
        calls.add("p", 10 * i + 9, 100 * i, 10)
    assert calls.find("p", 0, 9) is None  # the oldest of six was forgotten
    assert calls.find("p", 10, 19) == 100 and calls.find("p", 50, 59) == 500
    assert calls.find("p", 55, 59) is None  # a part of a batch is not a batch that was sent
    # the mirror applies a call one message at a time, each with the call's sequence
    for off in (7, 8, 9):
        calls.add("q", 2, off, 1)
    assert calls.find("q", 0, 2) == 7
    calls.add("r", 0, 0, 1)  # a third producer: the least recently written goes
    assert calls.find("p", 10, 19) is None and calls.find("q", 0, 2) == 7


def test_a_retry_through_another_listener_gets_the_first_attempts_offset(ctx, broker):  # noqa: F811
    c = Client(ctx)
    c.login()
    _setup(broker)
    kw = _producer(c)
    other = dict(kw, producer_id=kw["producer_id"] + 1000)
    assert produce(c, "r.t", batch(b"x", base_sequence=0, **other)).error_code == 0
    first = produce(c, "r.t", batch(b"a", b"b", b"c", base_sequence=0, **kw))
    assert (first.error_code, first.base_offset) == (0, 1)
    # the listener's RecentBatches of the other gateway never saw it: the partition's own memory
    retry = produce(_other_listener(broker), "r.t", batch(b"a", b"b", b"c", base_sequence=0, **kw))
    assert (retry.error_code, retry.base_offset) == (0, 1)
    assert broker.partition("r", "t", 0).next_offset == 4


def test_a_retry_after_a_restart_is_found_among_the_stored_records(tmp_path):
    with Broker.open(tmp_path / "data") as b:
        b.meta.users.create_user("root", PASSWORD, permissions=Permissions.root())
        c = Client(KafkaContext(b, host="127.0.0.1", port=9092, options=KafkaOptions()))
        c.login()
        _setup(b)
        kw = _producer(c)
        other = dict(kw, producer_id=kw["producer_id"] + 1000)
        assert produce(c, "r.t", _timed(b"a", b"b", ts=1_700_000_000_000, base_sequence=0, **other)).base_offset == 0
        sent = [_timed(b"v%d" % i, b"w%d" % i, ts=1_700_000_000_000 + i, base_sequence=2 * i, **kw) for i in range(4)]
        offsets = [produce(c, "r.t", s).base_offset for s in sent]
        # the same values again from the other producer, later and at another time
        assert produce(c, "r.t", _timed(b"v1", b"w1", ts=1_700_000_009_000, base_sequence=2, **other)).error_code == 0
    assert offsets == [2, 4, 6, 8]
    with Broker.open(tmp_path / "data") as b:  # a restart: no memory of where calls went
        part = b.partition("r", "t", 0)
        assert part.producer_call_offset(f"kafka:{kw['producer_id']}:{kw['producer_epoch']}", 2, 3) is None
        c = Client(KafkaContext(b, host="127.0.0.1", port=9092, options=KafkaOptions()))
        c.login()
        for s, off in zip(sent, offsets):
            retry = produce(c, "r.t", s)
            assert (retry.error_code, retry.base_offset) == (0, off)
        # a batch that was never sent as such (a part of one): nothing to name
        part_of = produce(c, "r.t", _timed(b"w1", ts=1_700_000_000_002, base_sequence=3, **kw))
        assert (part_of.error_code, part_of.base_offset) == (E.DUPLICATE_SEQUENCE_NUMBER, -1)
        assert part.next_offset == 12


def test_a_retry_past_the_scan_bound_answers_duplicate_sequence_number(tmp_path, monkeypatch):
    monkeypatch.setattr(retry_lookup, "SCAN_RECORDS", 3)
    with Broker.open(tmp_path / "data") as b:
        b.meta.users.create_user("root", PASSWORD, permissions=Permissions.root())
        c = Client(KafkaContext(b, host="127.0.0.1", port=9092, options=KafkaOptions()))
        c.login()
        _setup(b)
        kw = _producer(c)
        old = _timed(b"a", b"b", ts=1_700_000_000_000, base_sequence=0, **kw)
        assert produce(c, "r.t", old).base_offset == 0
        other = dict(kw, producer_id=kw["producer_id"] + 1000)
        later = _timed(b"x", b"y", b"z", ts=1_700_000_000_005, base_sequence=0, **other)
        assert produce(c, "r.t", later).error_code == 0
    with Broker.open(tmp_path / "data") as b:
        c = Client(KafkaContext(b, host="127.0.0.1", port=9092, options=KafkaOptions()))
        c.login()
        retry = produce(c, "r.t", old)
        assert (retry.error_code, retry.base_offset) == (E.DUPLICATE_SEQUENCE_NUMBER, -1)


def test_a_call_another_gateway_stored_is_known_from_the_mirror(tmp_path):
    """Over the JetStream store every gateway's mirror applies every stored message with
    its producer and call sequence (gateway/jetstream_store/partition.py ``apply``)."""
    part = RemotePartition.open(tmp_path / "p", 0, LogConfig(fsync="never"))
    part.apply(1, 11, 1_000, 0, b"", b"other")
    for seq, mid in ((2, 12), (3, 13), (4, 14)):  # one call of three messages, stored via another gateway
        part.apply(seq, mid, 1_000, 0, b"", b"m", producer=("kafka:7:0", 2))
    assert part.producer_call_offset("kafka:7:0", 0, 2) == 1
    assert part.producer_call_offset("kafka:7:0", 2, 2) is None
    part.close()
