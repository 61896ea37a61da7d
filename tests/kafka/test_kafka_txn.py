"""Kafka transactions, sans-I/O, on a real broker in a temporary directory: the
coordinator's states, fencing and KIP-360, timeouts, staged data (chunks, the limit),
commit and abort, and the roll-forward of a commit a stop cut short (adapters/kafka/txn.py)."""

from __future__ import annotations

import pytest

from adapters.kafka import frames, txn, txn_state
from adapters.kafka.context import Access, KafkaContext, KafkaOptions
from adapters.kafka.errors import ErrorCode as E
from adapters.kafka.group_api import GroupApi
from adapters.kafka.groups import Coordinator
from adapters.kafka.messages import FETCH, LIST_OFFSETS, PRODUCE
from adapters.kafka.messages_txn import (ADD_OFFSETS_TO_TXN, ADD_PARTITIONS_TO_TXN, END_TXN, INIT_PRODUCER_ID,
                                         TXN_OFFSET_COMMIT)
from adapters.kafka.offsets import GroupOffsets
from adapters.kafka.records import Record, encode_batch
from adapters.kafka.session import KafkaSession, TxnWait
from core.broker import Broker
from core.errors import StorageError, TableKeyBadVersion
from core.permissions import GlobalPermissions, Permissions

TOPIC = "shop.orders"  # stream "shop", topic "orders", two partitions


@pytest.fixture
def broker(tmp_path):
    with Broker.open(tmp_path / "data") as b:
        b.meta.users.create_user("root", "secret-password", permissions=Permissions.root())
        b.create_stream("shop")
        b.create_topic("shop", "orders", 2)
        yield b


def make_ctx(broker):
    ctx = KafkaContext(broker, host="127.0.0.1", port=9092, options=KafkaOptions())
    ctx.groups = GroupApi(Coordinator(initial_rebalance_delay_ms=0), GroupOffsets(broker.tables), (1, "h", 1))
    return ctx


@pytest.fixture
def ctx(broker):
    return make_ctx(broker)


class Client:
    """Drives one session as the user ``name`` (no SASL: the access is given)."""

    def __init__(self, ctx, name="root"):
        user = ctx.broker.meta.users.get_user(name)
        self.session = KafkaSession(ctx, Access(ctx.broker.meta.users, user, anonymous=True))
        self.corr = 0
        self.now = 1_000_000

    def call(self, api, version, **fields):
        self.corr += 1
        frame = frames.encode_request(api.key, version, self.corr, "test", api.request.make(**fields))
        outcome = self.session.handle(frame[4:], self.now)
        if outcome.kind == "wait":
            return outcome.wait
        if outcome.kind == "silent":
            return None
        assert outcome.kind == "reply", outcome
        corr, value = frames.decode_response(api.key, version, outcome.frame[4:])
        assert corr == self.corr
        return value

    def resume(self, api, version, wait):
        outcome = self.session.resume(wait, self.now)
        return frames.decode_response(api.key, version, outcome.frame[4:])[1]

    # -- the transaction calls ------------------------------------------------------------
    def init(self, tid, timeout=60_000, version=4, pid=-1, epoch=-1):
        r = self.call(INIT_PRODUCER_ID, version, transactional_id=tid, transaction_timeout_ms=timeout,
                      producer_id=pid, producer_epoch=epoch)
        return r.error_code, r.producer_id, r.producer_epoch

    def add(self, tid, pid, epoch, parts=((TOPIC, (0, 1)),), version=3):
        T = ADD_PARTITIONS_TO_TXN.request.structs["AddPartitionsToTxnTopic"]
        r = self.call(ADD_PARTITIONS_TO_TXN, version, v3_and_below_transactional_id=tid,
                      v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                      v3_and_below_topics=tuple(T.make(name=n, partitions=tuple(ps)) for n, ps in parts))
        return {(t.name, p.partition_index): p.partition_error_code
                for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}

    def produce(self, tid, partition, records, acks=-1, topic=TOPIC):
        P = PRODUCE.request.structs
        r = self.call(PRODUCE, 9, transactional_id=tid, acks=acks, timeout_ms=1000, topic_data=(
            P["TopicProduceData"].make(name=topic, partition_data=(
                P["PartitionProduceData"].make(index=partition, records=records),)),))
        return None if r is None else r.responses[0].partition_responses[0]

    def add_offsets(self, tid, pid, epoch, group):
        return self.call(ADD_OFFSETS_TO_TXN, 3, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                         group_id=group).error_code

    def commit_offsets(self, tid, pid, epoch, group, offsets, version=3, **member):
        S = TXN_OFFSET_COMMIT.request.structs
        r = self.call(TXN_OFFSET_COMMIT, version, transactional_id=tid, group_id=group, producer_id=pid,
                      producer_epoch=epoch, **member, topics=(S["TxnOffsetCommitRequestTopic"].make(name=TOPIC, partitions=tuple(
                          S["TxnOffsetCommitRequestPartition"].make(partition_index=p, committed_offset=o,
                                                                    committed_metadata="m")
                          for p, o in offsets)),))
        return [p.error_code for p in r.topics[0].partitions]

    def end(self, tid, pid, epoch, commit, version=3):
        r = self.call(END_TXN, version, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit)
        if isinstance(r, TxnWait):
            self.session.ctx.broker.flush()  # what the flusher does; the appends' callbacks fire
            assert r.done
            r = self.resume(END_TXN, version, r)
        return r.error_code


def txn_batch(pid, epoch, seq, *values):
    return encode_batch([Record(offset_delta=i, value=v) for i, v in enumerate(values)], transactional=True,
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def stored(broker, partition):
    part = broker.partition("shop", "orders", partition)
    return [bytes(r.payload) for r in part.read(0, 10_000).records()]


# -- InitProducerId ------------------------------------------------------------------------------
def test_init_producer_id_bumps_epochs_fences_and_follows_kip_360(ctx):
    c = Client(ctx)
    code, pid, epoch = c.init("t1")
    assert (code, epoch) == (0, 0) and pid >= 0
    assert c.init("t1") == (0, pid, 1)  # a second producer: the first is fenced
    assert c.add("t1", pid, 0, version=2) == {(TOPIC, 0): E.PRODUCER_FENCED, (TOPIC, 1): E.PRODUCER_FENCED}
    assert set(c.add("t1", pid, 0, version=1).values()) == {E.INVALID_PRODUCER_EPOCH}
    # KIP-360: the current producer asks for a bump; a retry of it gets the same epoch
    assert c.init("t1", pid=pid, epoch=1) == (0, pid, 2)
    assert c.init("t1", pid=pid, epoch=1) == (0, pid, 2)
    assert c.init("t1", pid=pid, epoch=0)[0] == E.PRODUCER_FENCED
    assert c.init("t1", version=3, pid=pid, epoch=0)[0] == E.INVALID_PRODUCER_EPOCH
    assert c.init("t1", pid=pid + 1000, epoch=2)[0] == E.PRODUCER_FENCED
    # an exhausted epoch takes a new producer id (TransactionMetadata.isEpochExhausted)
    doc = txn_state.load(ctx.broker.tables, "t1")
    doc.epoch = txn.EPOCH_EXHAUSTED
    txn_state.save(ctx.broker.tables, doc)
    code, new_pid, epoch = c.init("t1")
    assert code == 0 and new_pid != pid and epoch == 0
    assert c.init("t1", timeout=txn.MAX_TXN_TIMEOUT_MS + 1)[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert c.init("")[0] == E.INVALID_REQUEST


def test_a_transactional_id_belongs_to_the_user_that_initialised_it(ctx, broker):
    broker.meta.users.create_user("other", "secret-password", permissions=Permissions(
        global_=GlobalPermissions(send_messages=True, poll_messages=True)))
    root, other = Client(ctx), Client(ctx, "other")
    _, pid, epoch = root.init("mine")
    assert other.init("mine")[0] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert set(other.add("mine", pid, epoch).values()) == {E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    assert other.end("mine", pid, epoch, True) == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    out = other.produce("mine", 0, txn_batch(pid, epoch, 0, b"x"))
    assert out.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # a user without send_messages may not add the topic: the other partition is not attempted
    broker.meta.users.create_user("reader", "secret-password", permissions=Permissions(
        global_=GlobalPermissions(read_topics=True, poll_messages=True)))
    reader = Client(ctx, "reader")
    _, rpid, repoch = reader.init("readers")
    assert reader.add("readers", rpid, repoch, parts=((TOPIC, (0,)), ("shop.nope", (0,)))) == {
        (TOPIC, 0): E.TOPIC_AUTHORIZATION_FAILED, ("shop.nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert root.add("mine", pid, epoch, parts=((TOPIC, (0, 7)),)) == {
        (TOPIC, 0): E.OPERATION_NOT_ATTEMPTED, (TOPIC, 7): E.UNKNOWN_TOPIC_OR_PARTITION}


# -- commit and abort ----------------------------------------------------------------------------
def test_records_reach_the_log_at_commit_only_and_an_abort_leaves_nothing(ctx, broker):
    c = Client(ctx)
    _, pid, e = c.init("shop-1")
    assert c.add("shop-1", pid, e) == {(TOPIC, 0): 0, (TOPIC, 1): 0}
    first = c.produce("shop-1", 0, txn_batch(pid, e, 0, b"a0", b"a1"))
    assert (first.error_code, first.base_offset) == (0, -1)  # no offset before the commit
    assert c.produce("shop-1", 1, txn_batch(pid, e, 0, b"b0")).error_code == 0
    assert c.produce("shop-1", 0, txn_batch(pid, e, 2, b"a2")).error_code == 0
    assert c.produce("shop-1", 0, txn_batch(pid, e, 2, b"a2")).error_code == E.DUPLICATE_SEQUENCE_NUMBER
    assert c.produce("shop-1", 0, txn_batch(pid, e, 9, b"gap")).error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert c.add_offsets("shop-1", pid, e, "g1") == 0
    assert c.commit_offsets("shop-1", pid, e, "g1", [(0, 5), (1, 7)]) == [0, 0]
    assert stored(broker, 0) == [] and stored(broker, 1) == []
    assert GroupOffsets(broker.tables).fetch("g1", None) == {}
    assert c.end("shop-1", pid, e, True) == 0
    assert stored(broker, 0) == [b"a0", b"a1", b"a2"] and stored(broker, 1) == [b"b0"]
    assert GroupOffsets(broker.tables).fetch("g1", None) == {(TOPIC, 0): (5, -1, "m"), (TOPIC, 1): (7, -1, "m")}
    assert c.end("shop-1", pid, e, True) == 0  # a retried commit is answered again
    assert c.end("shop-1", pid, e, False) == E.INVALID_TXN_STATE
    # the next transaction is aborted: nothing of it is stored, its sequences still count
    assert c.add("shop-1", pid, e, parts=((TOPIC, (0,)),)) == {(TOPIC, 0): 0}
    assert c.produce("shop-1", 0, txn_batch(pid, e, 3, b"gone")).error_code == 0
    assert c.add_offsets("shop-1", pid, e, "g1") == 0
    assert c.commit_offsets("shop-1", pid, e, "g1", [(0, 99)]) == [0]
    assert c.end("shop-1", pid, e, False) == 0
    assert stored(broker, 0) == [b"a0", b"a1", b"a2"]
    assert GroupOffsets(broker.tables).fetch("g1", [(TOPIC, 0)])[(TOPIC, 0)][0] == 5
    assert broker.tables.info(txn_state.table_name("shop-1"))[1] == 1  # only the state is left
    assert c.add("shop-1", pid, e, parts=((TOPIC, (0,)),)) == {(TOPIC, 0): 0}
    assert c.produce("shop-1", 0, txn_batch(pid, e, 4, b"a3")).error_code == 0  # numbered on after the abort
    assert c.end("shop-1", pid, e, True) == 0
    assert stored(broker, 0) == [b"a0", b"a1", b"a2", b"a3"]


def test_state_errors_answer_kafkas_codes(ctx, broker):
    c = Client(ctx)
    _, pid, e = c.init("st")
    assert c.end("st", pid, e, True) == E.INVALID_TXN_STATE  # Empty
    assert c.end("st", pid + 1, e, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert c.end("st", pid, e + 1, False, version=2) == E.PRODUCER_FENCED
    assert c.end("never", 5, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
    out = c.produce("st", 0, txn_batch(pid, e, 0, b"x"))
    assert out.error_code == E.INVALID_TXN_STATE  # the partition was not added
    assert c.add("st", pid, e, parts=((TOPIC, (0,)),)) == {(TOPIC, 0): 0}
    assert c.produce("st", 1, txn_batch(pid, e, 0, b"x")).error_code == E.INVALID_TXN_STATE
    assert c.produce("st", 0, txn_batch(pid, e + 1, 0, b"x")).error_code == E.INVALID_PRODUCER_EPOCH
    assert c.produce("st", 0, txn_batch(pid + 1, e, 0, b"x")).error_code == E.INVALID_PRODUCER_ID_MAPPING
    assert c.add_offsets("st", pid, e, "members") == 0
    assert c.commit_offsets("st", pid, e, "members", [(0, 1)], generation_id=5, member_id="m") == [
        E.ILLEGAL_GENERATION]  # v3 checks the member's generation, as OffsetCommit
    assert c.commit_offsets("st", pid, e, "members", [(0, 1)], version=2, generation_id=5) == [0]
    plain = encode_batch([Record(offset_delta=0, value=b"x")], producer_id=pid, producer_epoch=e, base_sequence=0)
    assert c.produce("st", 0, plain).error_code == E.INVALID_RECORD  # not a transactional batch
    assert c.commit_offsets("st", pid, e, "g", [(0, 1)]) == [E.INVALID_TXN_STATE]  # no AddOffsetsToTxn
    assert c.add_offsets("st", pid, e, "") == E.INVALID_GROUP_ID
    # a new InitProducerId aborts the open transaction and fences this producer
    assert c.produce("st", 0, txn_batch(pid, e, 0, b"open")).error_code == 0
    assert c.init("st") == (0, pid, e + 1)
    assert c.produce("st", 0, txn_batch(pid, e, 1, b"late")).error_code == E.INVALID_PRODUCER_EPOCH
    assert c.end("st", pid, e + 1, True) == E.INVALID_TXN_STATE  # the open one was aborted
    broker.flush()
    assert stored(broker, 0) == []


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(ctx, broker):
    c = Client(ctx)
    _, pid, e = c.init("slow", timeout=1000)
    assert ctx.txn.next_deadline() is None
    assert c.add("slow", pid, e) == {(TOPIC, 0): 0, (TOPIC, 1): 0}
    assert c.produce("slow", 0, txn_batch(pid, e, 0, b"late")).error_code == 0
    assert ctx.txn.next_deadline() == c.now + 1000
    ctx.txn.tick(c.now + 999)
    assert txn_state.load(broker.tables, "slow").state == txn_state.ONGOING
    ctx.txn.tick(c.now + 1000)
    doc = txn_state.load(broker.tables, "slow")
    assert (doc.state, doc.epoch, doc.batches) == (txn_state.COMPLETE_ABORT, e + 1, 0)
    assert ctx.txn.next_deadline() is None
    assert c.produce("slow", 0, txn_batch(pid, e, 1, b"x")).error_code == E.INVALID_PRODUCER_EPOCH
    assert c.end("slow", pid, e, True) == E.PRODUCER_FENCED
    broker.flush()
    assert stored(broker, 0) == []


# -- staged data ------------------------------------------------------------------------------
def test_large_blocks_are_chunked_and_the_staged_bytes_are_bounded(ctx, broker, monkeypatch):
    monkeypatch.setattr(txn_state, "WRITE_BYTES", 700 * 1024)  # several updates for one block
    c = Client(ctx)
    _, pid, e = c.init("big")
    c.add("big", pid, e)
    big = bytes(range(256)) * (6 * 1024)  # 1.5 MiB: three chunks
    assert c.produce("big", 1, txn_batch(pid, e, 0, big, b"tail")).error_code == 0
    monkeypatch.setattr(txn, "MAX_STAGED_BYTES", len(big) + 1024)
    out = c.produce("big", 1, txn_batch(pid, e, 2, b"y" * 4096))
    assert out.error_code == E.RECORD_LIST_TOO_LARGE  # abortable for clients: not retriable
    assert c.end("big", pid, e, True) == 0
    assert stored(broker, 1) == [big, b"tail"]


def test_a_decided_commit_is_rolled_forward_after_a_stop(tmp_path):
    path = tmp_path / "data"
    with Broker.open(path) as b:
        b.meta.users.create_user("root", "secret-password", permissions=Permissions.root())
        b.create_stream("shop")
        b.create_topic("shop", "orders", 2)
        ctx = make_ctx(b)
        c = Client(ctx)
        _, pid, e = c.init("rf")
        c.add("rf", pid, e)
        c.add_offsets("rf", pid, e, "grp")
        assert c.produce("rf", 0, txn_batch(pid, e, 0, b"x0", b"x1")).error_code == 0
        assert c.produce("rf", 1, txn_batch(pid, e, 0, b"y0")).error_code == 0
        assert c.commit_offsets("rf", pid, e, "grp", [(0, 2)]) == [0]
        wait = c.call(END_TXN, 3, transactional_id="rf", producer_id=pid, producer_epoch=e, committed=True)
        assert isinstance(wait, TxnWait)
        # the stop comes after the decision and the appends, before CompleteCommit
    with Broker.open(path) as b:
        assert txn_state.load(b.tables, "rf").state == txn_state.PREPARE_COMMIT
        ctx = make_ctx(b)
        assert ctx.txn.recover(0) == 1  # appended again: the log knows the sequences, stores nothing twice
        b.flush()
        assert ctx.txn.next_deadline() == 0
        ctx.txn.tick(0)
        assert txn_state.load(b.tables, "rf").state == txn_state.COMPLETE_COMMIT
        assert stored(b, 0) == [b"x0", b"x1"] and stored(b, 1) == [b"y0"]
        assert GroupOffsets(b.tables).fetch("grp", None) == {(TOPIC, 0): (2, -1, "m")}
        c = Client(ctx)
        assert c.end("rf", pid, e, True) == 0


def test_a_commit_decided_before_any_append_is_completed_when_the_id_is_touched(ctx, broker):
    c = Client(ctx)
    _, pid, e = c.init("touch")
    c.add("touch", pid, e)
    assert c.produce("touch", 0, txn_batch(pid, e, 0, b"z")).error_code == 0
    doc = txn_state.load(broker.tables, "touch")
    doc.state = txn_state.PREPARE_COMMIT  # as if the gateway stopped right after the decision
    txn_state.save(broker.tables, doc)
    fresh = make_ctx(broker)  # another start: nothing in memory
    assert Client(fresh).end("touch", pid, e, True) == 0
    assert stored(broker, 0) == [b"z"]


# -- reads ---------------------------------------------------------------------------------------
def test_read_committed_fetch_and_list_offsets_see_the_high_watermark(ctx, broker):
    c = Client(ctx)
    _, pid, e = c.init("r")
    c.add("r", pid, e, parts=((TOPIC, (0,)),))
    c.produce("r", 0, txn_batch(pid, e, 0, b"1", b"2"))
    c.end("r", pid, e, True)
    S = FETCH.request.structs
    f = c.call(FETCH, 12, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=1, topics=(
        S["FetchTopic"].make(topic=TOPIC, partitions=(S["FetchPartition"].make(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20),)),))
    p = f.responses[0].partitions[0]
    assert (p.error_code, p.high_watermark, p.last_stable_offset, p.aborted_transactions) == (0, 2, 2, ())
    L = LIST_OFFSETS.request.structs
    lo = c.call(LIST_OFFSETS, 7, replica_id=-1, isolation_level=1, topics=(L["ListOffsetsTopic"].make(
        name=TOPIC, partitions=(L["ListOffsetsPartition"].make(partition_index=0, timestamp=-1),)),))
    assert lo.topics[0].partitions[0].offset == 2


def test_the_transaction_apis_are_served_with_the_group_apis(ctx, broker):
    assert {22, 24, 25, 26, 28} <= set(Client(ctx).session.served)
    alone = KafkaContext(broker, host="127.0.0.1", port=9092, options=KafkaOptions())  # no group coordinator
    assert not {24, 25, 26, 28} & set(Client(alone).session.served)


def test_acks_0_stages_without_an_answer_and_a_stale_state_write_is_refused(ctx, broker):
    c = Client(ctx)
    _, pid, e = c.init("quiet")
    c.add("quiet", pid, e, parts=((TOPIC, (1,)),))
    assert c.produce("quiet", 1, txn_batch(pid, e, 0, b"q"), acks=0) is None
    assert txn_state.load(broker.tables, "quiet").batches == 1
    # two gateways read the same version; the second write loses (never two owners of an epoch)
    one, two = txn_state.load(broker.tables, "quiet"), txn_state.load(broker.tables, "quiet")
    one.epoch += 1
    txn_state.save(broker.tables, one)
    two.epoch += 1
    with pytest.raises(TableKeyBadVersion):
        txn_state.save(broker.tables, two)
    assert c.end("quiet", pid, e + 1, True) == 0
    assert stored(broker, 1) == [b"q"]


def test_a_commit_whose_appends_fail_is_retried_by_the_clock(ctx, broker, monkeypatch):
    c = Client(ctx)
    _, pid, e = c.init("retry")
    c.add("retry", pid, e, parts=((TOPIC, (0,)),))
    c.produce("retry", 0, txn_batch(pid, e, 0, b"r"))

    def broken(*_a, **_k):
        raise StorageError("disk full")
    monkeypatch.setattr(broker, "append_records", broken)
    assert c.end("retry", pid, e, True) == E.COORDINATOR_NOT_AVAILABLE  # retriable: the decision stands
    assert txn_state.load(broker.tables, "retry").state == txn_state.PREPARE_COMMIT
    monkeypatch.undo()
    assert ctx.txn.next_deadline() == c.now + txn.COMMIT_RETRY_MS
    ctx.txn.tick(c.now + txn.COMMIT_RETRY_MS)  # rolled forward again, no client needed
    broker.flush()
    ctx.txn.tick(c.now + txn.COMMIT_RETRY_MS)
    assert txn_state.load(broker.tables, "retry").state == txn_state.COMPLETE_COMMIT
    assert stored(broker, 0) == [b"r"]
    assert c.end("retry", pid, e, True) == 0
