"""Kafka's epoch fence and the answer to a sequence gap an open append may fill
(adapters/kafka/producer_state.py), and a Produce answered within its TimeoutMs
(ProduceWait.expire): the rules alone, then through a session on a real broker."""

from __future__ import annotations

from adapters.kafka.context import KafkaContext, KafkaOptions
from adapters.kafka.errors import ErrorCode as E
from adapters.kafka.messages import PRODUCE
from adapters.kafka.messages_txn import INIT_PRODUCER_ID
from adapters.kafka.producer_state import DOUBT_S, MAX_OPEN, ProducerStates
from core.errors import StorageError

from test_kafka_session import Client, batch, broker, ctx, produce, topic  # noqa: F401 - fixtures

KEY = (1, 1, 0, 7)  # stream, topic, partition, producer id


# -- the rules ----------------------------------------------------------------------------
def test_an_older_epoch_is_fenced_once_a_newer_one_was_taken():
    s = ProducerStates()
    assert s.refusal(KEY, 3, 0.0) is None  # unknown producer: the sequence rule decides
    a = s.taken(KEY, 4, 0, 1, 0.0)
    s.settled(KEY, a, True, 0.0)
    assert s.refusal(KEY, 4, 0.0) is None
    code, message = s.refusal(KEY, 3, 0.0)
    assert code == E.INVALID_PRODUCER_EPOCH and "epoch 3" in message
    assert s.refusal(KEY, 5, 0.0) is None  # a bump is taken
    assert s.refusal((1, 1, 1, 7), 3, 0.0) is None  # per partition, as Kafka's producer state


def test_a_newer_epoch_waits_while_an_older_append_is_on_its_way():
    s = ProducerStates()
    a = s.taken(KEY, 4, 10, 11, 0.0)
    assert s.refusal(KEY, 5, 0.0)[0] == E.NOT_ENOUGH_REPLICAS  # retriable: not written
    s.settled(KEY, a, False, 0.0)  # failed, fate unknown: no longer holds the new epoch back
    assert s.refusal(KEY, 5, 0.0) is None
    s.taken(KEY, 5, 0, 0, 10.0)  # never settled (a callback lost): forgotten after DOUBT_S
    assert s.refusal(KEY, 6, 10.0 + DOUBT_S - 1)[0] == E.NOT_ENOUGH_REPLICAS
    assert s.refusal(KEY, 6, 10.0 + DOUBT_S) is None


def test_a_gap_is_open_while_an_append_that_may_fill_it_is_unsettled():
    s = ProducerStates()
    a = s.taken(KEY, 4, 10, 11, 0.0)
    assert s.gap_open(KEY, 4, 12, 9, 0.0)  # pending: 10-11 may be stored yet
    assert not s.gap_open(KEY, 4, 12, 11, 0.0)  # the log holds them: no gap at all
    a = s.taken(KEY, 4, 10, 11, 0.0)
    s.settled(KEY, a, False, 100.0)  # the store gave up: in doubt for DOUBT_S
    assert s.gap_open(KEY, 4, 12, 9, 100.0 + DOUBT_S - 1)
    assert not s.gap_open(KEY, 4, 12, 9, 100.0 + DOUBT_S)  # past the duplicate window
    b = s.taken(KEY, 4, 20, 21, 0.0)
    assert not s.gap_open(KEY, 4, 15, 9, 0.0)  # 20-21 cannot fill 10..14
    assert not s.gap_open(KEY, 5, 22, 9, 0.0)  # another epoch's sequences
    s.settled(KEY, b, True, 0.0)  # applied: nothing open
    assert not s.gap_open(KEY, 4, 22, 9, 0.0)


def test_open_appends_are_bounded_per_producer_and_partition():
    s = ProducerStates()
    for i in range(MAX_OPEN + 5):
        s.taken(KEY, 1, i, i, 0.0)
    assert s.gap_open(KEY, 1, 100, None, 0.0)
    assert not s.gap_open(KEY, 1, 5, None, 0.0)  # the oldest five were forgotten


# -- through a session ------------------------------------------------------------------------
def _producer(c):
    pid = c.call(INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout_ms=1000)
    assert pid.error_code == 0
    return pid.producer_id, pid.producer_epoch


def test_a_late_batch_of_the_old_epoch_is_refused_and_not_stored(ctx, broker):  # noqa: F811
    c = Client(ctx)
    c.login()
    broker.create_stream("f")
    broker.create_topic("f", "t", 1)
    pid, epoch = _producer(c)
    assert produce(c, "f.t", batch(b"a", b"b", base_sequence=0, producer_id=pid, producer_epoch=epoch)).error_code == 0
    # librdkafka bumps its own epoch (KIP-360) and numbers from 0 again
    bumped = produce(c, "f.t", batch(b"c", base_sequence=0, producer_id=pid, producer_epoch=epoch + 1))
    assert (bumped.error_code, bumped.base_offset) == (0, 2)
    late = produce(c, "f.t", batch(b"c", base_sequence=2, producer_id=pid, producer_epoch=epoch))
    assert (late.error_code, late.base_offset) == (E.INVALID_PRODUCER_EPOCH, -1)
    # another gateway (a fresh listener state) knows the new epoch from the log alone
    other = Client(KafkaContext(broker, host="127.0.0.1", port=9093, options=KafkaOptions()))
    other.login()
    late = produce(other, "f.t", batch(b"c", base_sequence=2, producer_id=pid, producer_epoch=epoch))
    assert late.error_code == E.INVALID_PRODUCER_EPOCH
    assert broker.partition("f", "t", 0).next_offset == 3


def test_a_gap_behind_a_failed_append_is_retriable_until_the_retry_lands(ctx, broker, monkeypatch):  # noqa: F811
    c = Client(ctx)
    c.login()
    broker.create_stream("g")
    broker.create_topic("g", "t", 1)
    pid, epoch = _producer(c)
    kw = dict(producer_id=pid, producer_epoch=epoch)
    assert produce(c, "g.t", batch(b"0", base_sequence=0, **kw)).error_code == 0
    real = type(broker).append_records

    def lost_ack(self, *args, on_durable=None, **kw):  # the store gives up: it may or may not be stored
        on_durable(StorageError("the cluster did not store the message"))
        return real(self, *args, **kw)  # (here it is: the cluster had it after all)
    monkeypatch.setattr(type(broker), "append_records", lost_ack)
    first = produce(c, "g.t", batch(b"1", b"2", base_sequence=1, **kw))
    assert first.error_code == E.KAFKA_STORAGE_ERROR
    monkeypatch.setattr(type(broker), "append_records", real)
    broker.flush()
    # Kafka answers a gap OUT_OF_ORDER only when its log lacks the batch: here an open
    # append may fill it, so the answer is retriable and keeps the producer's epoch.
    # (as over the JetStream store, where the log shows the first batch only once the
    # mirror applied it: here not yet)
    cls = type(broker.partition("g", "t", 0))
    seen = cls.producer_sequence
    monkeypatch.setattr(cls, "producer_sequence", lambda self, k: 0 if k == f"kafka:{pid}:{epoch}" else seen(self, k))
    second = produce(c, "g.t", batch(b"3", base_sequence=3, **kw))
    assert second.error_code == E.NOT_ENOUGH_REPLICAS
    monkeypatch.undo()
    # the client retries the first batch (stored meanwhile: answered as a retry), then the second
    assert produce(c, "g.t", batch(b"1", b"2", base_sequence=1, **kw)).error_code in (0, E.DUPLICATE_SEQUENCE_NUMBER)
    assert produce(c, "g.t", batch(b"3", base_sequence=3, **kw)).base_offset == 3
    assert broker.partition("g", "t", 0).next_offset == 4


def test_a_produce_not_durable_within_its_timeout_answers_request_timed_out(ctx, broker):  # noqa: F811
    c = Client(ctx)
    c.login()
    broker.create_stream("w")
    broker.create_topic("w", "t", 2)
    pid, epoch = _producer(c)
    out = c.call(PRODUCE, 9, acks=-1, timeout_ms=30_000, topic_data=(
        topic("w.t", (0, batch(b"x", base_sequence=0, producer_id=pid, producer_epoch=epoch)), (1, b"")),))
    wait = out.wait
    assert not wait.done and wait.timeout_ms == 30_000
    wait.expire()  # what the driver does at the deadline
    assert wait.done
    value = c.finish(PRODUCE, 9, c.session.resume(wait, c.now))
    p0, p1 = value.responses[0].partition_responses
    assert (p0.error_code, p0.base_offset) == (E.REQUEST_TIMED_OUT, -1)  # Kafka's DelayedProduce
    assert p1.error_code == E.INVALID_RECORD  # answered at once, not touched by the expiry
    broker.flush()  # the append goes on; its retry is answered with where it went
    retry = produce(c, "w.t", batch(b"x", base_sequence=0, producer_id=pid, producer_epoch=epoch))
    assert (retry.error_code, retry.base_offset) == (0, 0)
    assert broker.partition("w", "t", 0).next_offset == 1

