"""Produce, Fetch and ListOffsets on Ferry's log, sans-I/O.

Theory of operation
-------------------
Kafka's offsets are Ferry's: a partition's records are numbered from 0
without gaps, so a Kafka offset names the stored record of the same offset.
The high watermark is the partition's *durable* end
(``Partition.durable_next_offset``, core/log/durable.py): Kafka serves
consumers committed records only (its documentation, Design,
"Replication"), and with one copy a record is committed once durable under
the fsync policy. Fetch serves nothing above it, ListOffsets LATEST answers
it, and a waiting Fetch wakes when it moves, not on the append.

**Produce.** Each partition's one record batch is checked as Kafka's broker
checks a client batch (:func:`adapters.kafka.records.decode_produce_batch`),
translated to canonical records in the stored layout, one block per batch
(:func:`adapters.kafka.translate.to_block`), and appended with one
``broker.append_records`` call, which stamps the block in one pass as an Iggy
send is (a transactional batch is staged instead: :meth:`DataPlane._produce_txn`).
``acks=0`` answers nothing; ``acks`` 1 and
-1 answer when every partition's append is durable under the fsync policy
(``on_durable``): Ferry has one copy, so "all in-sync replicas" and "the
leader" are the same disk, and an acknowledged record survives ``kill -9``
(docs/kafka.md). The answer's base offset is the one ``on_durable`` reports:
a partition that applies appends later (the JetStream store,
``Partition.is_applied``) only guesses it when the call returns. An
idempotent producer's batch (producer id >= 0) is checked against the
partition's last stored sequence of that producer and epoch
(``Partition.producer_sequence``, kept through restarts by the log): the next
sequence is appended, an already stored one answers
the first attempt's base offset with no error once that is durable, as Kafka
answers a retry of one of a producer's last five batches (:func:`_retried_base`:
this listener's RecentBatches, adapters/kafka/recent_batches.py, the partition's
memory of calls, which over the JetStream store includes other gateways', then a
bounded search of the stored records, adapters/kafka/retry_lookup.py; a batch not
found answers DUPLICATE_SEQUENCE_NUMBER, which the Java client and librdkafka treat
as success), a gap OUT_OF_ORDER_SEQUENCE_NUMBER (Kafka's
``ProducerStateManager`` rules for a producer whose state the broker holds).
Before the sequences, Kafka's epoch fence: a batch of an older epoch than one
the partition took answers INVALID_PRODUCER_EPOCH; and a gap that an append of
the producer still open on this gateway may fill answers NOT_ENOUGH_REPLICAS
(retriable) instead of OUT_OF_ORDER, which librdkafka would take as proof that
the batch is not stored (adapters/kafka/producer_state.py). Over a store that
several gateways share, a gateway's copy of the partition may lack another gateway's
last records: a new leader takes no batch until its copy holds the stored log's end,
and a gap is judged again on a copy caught up after it was seen, NOT_ENOUGH_REPLICAS
meanwhile (adapters/kafka/catch_up.py). The driver answers
a Produce within its TimeoutMs: partitions not durable by then answer
REQUEST_TIMED_OUT (:meth:`ProduceWait.expire`, Kafka's ``DelayedProduce``).

**Fetch.** Per partition, stored records from the fetch offset are turned
into record batches up to the partition's and the response's byte limits,
the first batch whole even past them so a consumer always progresses
(KIP-74). An offset outside ``[log start, high watermark]`` answers
OFFSET_OUT_OF_RANGE, except one above the high watermark that the stored log
may hold (``Store.log_end``: over the JetStream store, this gateway's copy can
be a few ms behind the cluster when a client moves here from another leader):
that is an empty partition, as Kafka answers an offset between the high
watermark and the log end. When fewer than ``min_bytes`` are found and
``max_wait_ms`` is above 0, the request waits (:class:`FetchWait`): the
driver wakes it when the durable end of any of its partitions moves or at
its deadline and calls :meth:`DataPlane.fetch` again with the same request.
The partitions a request reads are its own, or with an incremental fetch
session (KIP-227, adapters/kafka/fetch_sessions.py) the session's, and an
incremental answer lists only the partitions with news.

**ListOffsets.** -2 is the log start, -1 the high watermark, -3 (v7) the
last record; a timestamp is the first record whose timestamp (the producer's
CreateTime, what a Fetch shows) is at or after it, Kafka's answer for a
CreateTime topic. Ferry indexes append times, so the search starts at the
first record appended at or after it (``Partition.offset_for_timestamp``) and
reads forward a bounded number of records (``_created_at_or_after``).

**Log start.** Kafka's log start offset is the partition's recorded start
seen by offset (``TopicState.partition_start_offset``): what retention left,
moved up by DeleteRecords (adapters/kafka/admin.py) or a Pravega truncation.
Fetch, ListOffsets and Produce answers all report it, and no record below it
is served, though it may still be stored (docs/kafka.md "APIs served", DeleteRecords).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from core.errors import (FerryError, NotFound, PartitionNotFound, PayloadTooLarge, ShuttingDown, StorageError,
                         TopicSealed)
from core.metrics import listener_metrics, metrics_for
from core.permissions import Action

from . import translate
from .context import can_describe
from .errors import ErrorCode as E
from .fetch_sessions import FetchPlan
from .messages import FETCH, LIST_OFFSETS, PRODUCE
from .placement import topic_key
from .records import RecordBatchError, decode_produce_batch, producer_key, sequence_error
from .retry_lookup import find_stored

log = logging.getLogger("ferry.kafka")

# Records read from the log per partition per fetch: bounds the work of one
# response beside the byte limits (Kafka's own fetch is bounded by bytes only).
MAX_FETCH_RECORDS = 10_000
# The largest answer a Fetch request may ask for. Kafka's fetch.max.bytes
# default is 50 MiB (ReplicaManager); clients ask for at most that.
MAX_FETCH_RESPONSE_BYTES = 50 * 1024 * 1024
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
# A ListOffsets timestamp search reads at most this many records past the first one
# appended at or after the time (``_created_at_or_after``): usually the answer is in
# that record's batch; the bound keeps one request's work near one Fetch's
# (MAX_FETCH_RECORDS) when producers back-dated a long run of records.
TIMESTAMP_SCAN_RECORDS = MAX_FETCH_RECORDS
TIMESTAMP_SCAN_CHUNK, TIMESTAMP_SCAN_CHUNK_BYTES = 500, 1 << 20  # per read: whole records, bounded memory
LISTENER = "kafka"  # the metrics' listener label

_PRODUCE_TOPIC = PRODUCE.response.structs["TopicProduceResponse"]
_PRODUCE_PART = PRODUCE.response.structs["PartitionProduceResponse"]
_FETCH_TOPIC = FETCH.response.structs["FetchableTopicResponse"]
_FETCH_PART = FETCH.response.structs["PartitionData"]
_LO_TOPIC = LIST_OFFSETS.response.structs["ListOffsetsTopicResponse"]
_LO_PART = LIST_OFFSETS.response.structs["ListOffsetsPartitionResponse"]


@dataclass(eq=False)
class ProduceWait:
    """A Produce answer waiting for its appends to be durable; ``wake`` is the driver's.
    ``topics`` holds ``(name, [partition fields])``: the response is built by :meth:`finish`
    (the message values are frozen)."""

    topics: list = field(default_factory=list)
    pending: int = 0
    wake: object = None
    pending_request: object = None  # the session's (api key, version, correlation id)
    timeout_ms: int = 0  # the request's TimeoutMs: the driver calls expire() past it
    expired: bool = False
    _open: dict = field(default_factory=dict)  # id(fields) -> fields of appends not settled yet

    def callback(self, fields: dict, retry=None):
        """``on_durable`` for one partition's append. ``retry``: for an idempotent batch,
        ``(recent batches, key, first sequence, last sequence, partition, stored block, log
        start)``: a duplicate answers the first attempt's base offset when it is known (:func:`_retried_base`),
        and a stored batch is remembered for its retries (also once the answer expired)."""
        self.pending += 1
        self._open[id(fields)] = fields

        def on_durable(outcome) -> None:
            if self.expired:  # answered REQUEST_TIMED_OUT: only a retry's answer can use this
                if retry is not None and not isinstance(outcome, BaseException) and not outcome.duplicate:
                    retry[0].remember(retry[1], retry[2], retry[3], outcome.base_offset)
                return
            self._open.pop(id(fields), None)
            if isinstance(outcome, BaseException):
                fields.update(error_code=int(E.KAFKA_STORAGE_ERROR), base_offset=-1,
                              error_message=f"the append did not become durable: {outcome}")
            elif outcome.duplicate:  # a retry: answered once what was pending (the original) is durable
                found = _retried_base(retry)
                if found is None:
                    fields.update(error_code=int(E.DUPLICATE_SEQUENCE_NUMBER), base_offset=-1)
                    # Rare and telling: librdkafka counts this as delivered with no offset. A
                    # fault-schedule run had two records answered so that no node holds
                    # (docs/scale-out.md, "On the ninth session's code"): say which batch.
                    if retry is not None:
                        log.warning("Produce retry answered DUPLICATE_SEQUENCE_NUMBER with no offset",
                                    extra={"partition_key": list(retry[1][:3]), "producer": retry[1][3],
                                           "base_sequence": retry[2], "last_sequence": retry[3],
                                           "reported_offset": outcome.base_offset})
                else:
                    fields.update(error_code=0, base_offset=found)
            else:  # where the records are: a partition that applies later only guessed at return
                fields["base_offset"] = outcome.base_offset
                if retry is not None:
                    retry[0].remember(retry[1], retry[2], retry[3], outcome.base_offset)
            self.pending -= 1
            if self.pending == 0 and self.wake is not None:
                self.wake()
        return on_durable

    @property
    def done(self) -> bool:
        return self.pending == 0 or self.expired

    def expire(self) -> None:
        """The request's timeout passed: what is not durable yet answers REQUEST_TIMED_OUT,
        as Kafka's ``DelayedProduce.onExpiration`` does for partitions still waiting for
        their acks. The append goes on; the client's retry (same producer sequences) is
        answered as a retry once it is stored, or stored then."""
        self.expired = True
        for fields in self._open.values():
            fields.update(error_code=int(E.REQUEST_TIMED_OUT), base_offset=-1,
                          error_message="the append was not durable within the request's timeout")
        self._open.clear()

    def finish(self):
        return PRODUCE.response.make(responses=tuple(
            _PRODUCE_TOPIC.make(name=name, partition_responses=tuple(_PRODUCE_PART.make(**f) for f in parts))
            for name, parts in self.topics))


@dataclass(eq=False)
class FetchWait:
    """A Fetch with too few bytes, waiting until ``deadline_ms`` for an append to ``keys``."""

    version: int
    request: object
    deadline_ms: int
    keys: list  # (stream_id, topic_id, partition_id) for broker.wait_for_durable
    pending: object = None  # the session's (api key, version, correlation id)
    plan: FetchPlan | None = None  # what it reads (adapters/kafka/fetch_sessions.py)


def _retried_base(retry) -> int | None:
    """The base offset of the stored batch a retry repeats, or None (then the answer is
    DUPLICATE_SEQUENCE_NUMBER). Kafka's producer state holds each producer's last five
    batches on every replica (``ProducerStateEntry``); here this listener's memory of the
    batches it stored (adapters/kafka/recent_batches.py, matched on first and last
    sequence), then the partition's own (``Partition.producer_call_offset``,
    core/log/producers.py), which over the JetStream store also holds the calls other
    gateways stored, applied by the mirror: a client that moved here after its gateway
    died gets the offset it was stored at. Called once what is pending on the partition
    is durable; an offset at or past the durable end is not answered. Neither remembers
    what was stored before this process started: then the stored records are searched
    for the retry's (adapters/kafka/retry_lookup.py, bounded)."""
    if retry is None:
        return None
    recent, key, first, last, part, block, log_start = retry
    found = recent.find(key, first, last)
    if found is None:
        found = part.producer_call_offset(key[3], first, last)
        if found is not None and found >= part.durable_next_offset:
            found = None
    if found is None:  # forgotten (a restart): the records themselves (retry_lookup.py)
        found = find_stored(part, block, log_start(), part.durable_next_offset)
    return found


def _settling(states, skey, opened, on_durable):
    """``on_durable`` that first tells ``states`` the fate of the ``opened`` append
    (adapters/kafka/producer_state.py): in the log, or unknown (failed, or a duplicate
    of a copy not applied here yet)."""
    def settle(outcome) -> None:
        applied = not isinstance(outcome, BaseException) and not outcome.duplicate
        states.settled(skey, opened, applied, time.monotonic())
        if on_durable is not None:
            on_durable(outcome)
    return settle


def append_error(exc: BaseException) -> tuple[int, str]:
    """The Kafka error code (and message) of a failed append."""
    if isinstance(exc, RecordBatchError):
        return exc.error_code, str(exc)
    if isinstance(exc, PayloadTooLarge):
        return int(E.MESSAGE_TOO_LARGE), str(exc)
    if isinstance(exc, ShuttingDown):
        return int(E.NOT_LEADER_OR_FOLLOWER), str(exc)  # retriable: the client retries after a restart
    if isinstance(exc, StorageError):
        return int(E.KAFKA_STORAGE_ERROR), str(exc)
    if isinstance(exc, TopicSealed):
        return int(E.POLICY_VIOLATION), str(exc)
    if isinstance(exc, (PartitionNotFound, NotFound)):
        return int(E.UNKNOWN_TOPIC_OR_PARTITION), str(exc)
    return int(E.UNKNOWN_SERVER_ERROR), str(exc)


class DataPlane:
    """Produce, Fetch and ListOffsets for one connection (module docstring)."""

    def __init__(self, ctx, access) -> None:
        self.ctx = ctx
        self.broker = ctx.broker
        self.access = access
        self.counters = listener_metrics(metrics_for(ctx.broker))

    # -- lookups ------------------------------------------------------------------------
    def _topic(self, name: str, action) -> tuple[object | None, int]:
        """(TopicInfo, 0) or (None, Kafka error code); ``action`` None is Kafka's Describe."""
        info = self.ctx.topic(name)
        if info is None:
            return None, int(E.UNKNOWN_TOPIC_OR_PARTITION)
        if not (can_describe(self.access, info.stream_id, info.id) if action is None
                else self.access.can(action, info.stream_id, info.id)):
            return None, int(E.TOPIC_AUTHORIZATION_FAILED)
        return info, 0

    def _log_start(self, info, partition_id: int) -> int:
        """Kafka's log start offset: the first record at or after the partition's
        recorded start (DeleteRecords moves it, as does a Pravega truncation), never
        below what retention left (core/topicops.py ``partition_start_offset``)."""
        return self.broker.topic_state.partition_start_offset(info.stream_id, info.id, partition_id)

    def _partitions(self, info, err: int, items, index_key: str, index_of, out: list, **defaults):
        """Each requested partition's response fields (appended to ``out``), yielding
        ``(item, fields)`` for those to serve: none when the topic check failed (``err``),
        UNKNOWN_TOPIC_OR_PARTITION for an index the topic does not have, and
        NOT_LEADER_OR_FOLLOWER for one another gateway leads (adapters/kafka/placement.py;
        Kafka's ``ReplicaManager`` answers a partition it does not lead so, and the client
        asks Metadata for the leader again)."""
        placement = self.ctx.placement()
        # the topic's placement key, once per topic; None: this gateway leads every partition
        key = None if err or placement.single else topic_key(info)
        for item in items:
            index = index_of(item)
            fields = {index_key: index, "error_code": err, **defaults}
            out.append(fields)
            if err:
                continue
            if not 0 <= index < info.partitions_count:
                fields["error_code"] = int(E.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            if key is not None and not placement.leads(key, index):
                fields["error_code"] = int(E.NOT_LEADER_OR_FOLLOWER)
                continue
            yield item, fields

    # -- Produce --------------------------------------------------------------------------
    def produce(self, version: int, body) -> ProduceWait | None:
        """The Produce answer (``finish()`` once ``done``: it waits for durability), or None
        for acks=0 (no answer is sent)."""
        acks = body.acks
        # Refusals of the whole request come before the partition checks, as in Kafka's
        # ReplicaManager.appendRecords (acks).
        refusal, reason = 0, None
        if acks not in (0, 1, -1):
            refusal = int(E.INVALID_REQUIRED_ACKS)
        elif body.transactional_id is not None:
            return self._produce_txn(version, body, acks)
        wait = ProduceWait(timeout_ms=body.timeout_ms)
        for t in body.topic_data:
            parts: list[dict] = []
            info, err = self._topic(t.name, Action.SEND_MESSAGES)
            extra = {"error_message": reason} if reason and not err else {}
            for p, resp in self._partitions(info, err or refusal, t.partition_data, "index", lambda p: p.index,
                                            parts, base_offset=-1, **extra):
                self._produce_partition(version, info, p, resp, wait if acks else None)
            wait.topics.append((t.name, parts))
        return wait if acks else None

    def _produce_txn(self, version: int, body, acks: int) -> ProduceWait | None:
        """A transactional Produce: each batch checked and translated as any other, then
        staged durably by the transaction coordinator (adapters/kafka/txn.py) instead of
        appended, so the answer comes at once. The records reach the log at commit, which
        is when their offsets exist: the answer's base offset is -1 (docs/kafka.md
        "Transactions")."""
        wait = ProduceWait()
        staged: list = []  # (response fields, coordinator item)
        for t in body.topic_data:
            parts: list[dict] = []
            info, err = self._topic(t.name, Action.SEND_MESSAGES)
            for p, resp in self._partitions(info, err, t.partition_data, "index", lambda p: p.index, parts,
                                            base_offset=-1):
                try:
                    if p.records is None:
                        raise RecordBatchError(int(E.INVALID_RECORD), "a Produce partition needs one record batch")
                    batch = decode_produce_batch(p.records, version, block=translate.COMPILED_BLOCK)
                    block, nbytes = translate.to_block(batch)
                except (RecordBatchError, FerryError) as exc:
                    resp["error_code"], resp["error_message"] = append_error(exc)
                    continue
                staged.append((resp, nbytes, (info, p.index, batch, block)))
            wait.topics.append((t.name, parts))
        if staged:
            answers = self.ctx.txn.stage(body.transactional_id, self.access, [item for _r, _n, item in staged])
            for (resp, nbytes, (info, index, batch, _blk)), (code, message) in zip(staged, answers):
                resp["error_code"] = code
                if message:
                    resp["error_message"] = message
                if not code:
                    resp["log_start_offset"] = self._log_start(info, index)
                    # counted when taken, as Kafka's MessagesInPerSec counts a transaction's
                    # records when they are appended, whatever the transaction's end
                    self.counters["messages_in"].inc(LISTENER, amount=len(batch.records))
                    self.counters["bytes_in"].inc(LISTENER, amount=nbytes)
        return wait if acks else None

    def _produce_partition(self, version: int, info, p, resp: dict, wait: ProduceWait | None) -> None:
        try:
            if p.records is None:
                raise RecordBatchError(int(E.INVALID_RECORD), "a Produce partition needs one record batch")
            batch = decode_produce_batch(p.records, version, block=translate.COMPILED_BLOCK)
            block, nbytes = translate.to_block(batch)
            count = len(batch.records)
            producer = retry = opened = None
            part = self.broker.partition(info.stream_id, info.id, p.index)
            if self._catching_up(info, p.index, part):
                resp["error_code"] = int(E.NOT_ENOUGH_REPLICAS)  # retriable, "not written"
                resp["error_message"] = "this broker is catching up with the partition's stored log; retry"
                return
            if batch.producer_id >= 0:
                pid = producer_key(batch.producer_id, batch.producer_epoch)
                retry = (self.ctx.recent_batches, (info.stream_id, info.id, p.index, pid),
                         batch.base_sequence, batch.last_sequence, part, block,
                         lambda: self._log_start(info, p.index))
                skey = (info.stream_id, info.id, p.index, batch.producer_id)
                producer = self._sequence(part, batch, pid, skey, resp)
                if producer is None:
                    if resp.get("error_code") == int(E.DUPLICATE_SEQUENCE_NUMBER):
                        self._answer_retry(part, retry, resp, wait)
                    return
            on_durable = wait.callback(resp, retry) if wait is not None else None
            if producer is not None:
                opened = self.ctx.producer_states.taken(skey, batch.producer_epoch, batch.base_sequence,
                                                        batch.last_sequence, time.monotonic())
                on_durable = _settling(self.ctx.producer_states, skey, opened, on_durable)
            try:
                result = self.broker.append_records(info.stream_id, info.id, block, count, partition=p.index,
                                                    producer=producer, on_durable=on_durable, origin="kafka")
            except BaseException:
                if wait is not None:
                    wait.pending -= 1  # this append will never call back
                if opened is not None:  # refused before it reached the log: nothing is open
                    self.ctx.producer_states.settled(skey, opened, True, time.monotonic())
                raise
        except (RecordBatchError, FerryError) as exc:
            resp["error_code"], resp["error_message"] = append_error(exc)
            return
        if result.duplicate:  # a sequence stored since our check (another connection of the producer)
            if wait is None:
                resp["error_code"] = int(E.DUPLICATE_SEQUENCE_NUMBER)
            return  # else on_durable answers it, as _answer_retry does
        resp["base_offset"] = result.base_offset
        resp["log_start_offset"] = self._log_start(info, p.index)
        self.counters["messages_in"].inc(LISTENER, amount=count)
        self.counters["bytes_in"].inc(LISTENER, amount=nbytes)

    def _catching_up(self, info, index: int, part) -> bool:
        """True while this gateway's copy of the partition may lack records the stored log
        held when the gateway took the partition's leadership, or when a batch showed a gap
        (adapters/kafka/catch_up.py): the batch is answered NOT_ENOUGH_REPLICAS then."""
        placement = self.ctx.placement()
        if placement.single:  # one gateway: its copy is the log
            return False
        key = (info.stream_id, info.id, index)
        return not self.ctx.catch_up.ready(key, placement, part.next_offset,
                                           lambda: self.broker.store.log_end(key, part))

    @staticmethod
    def _answer_retry(part, retry, resp: dict, wait: ProduceWait | None) -> None:
        """A retry of a batch already taken: Kafka answers the first attempt's base offset
        with no error (adapters/kafka/recent_batches.py), and only once that attempt is
        durable: the answer waits for what is pending on the partition, which holds the
        original if it is not yet written (``Partition.ack_after_pending``)."""
        if wait is None:
            return  # acks=0: nothing is answered
        resp["error_code"] = 0
        resp.pop("error_message", None)
        part.ack_after_pending(wait.callback(resp, retry))

    def _sequence(self, part, batch, pid: str, skey, resp) -> tuple[str, int] | None:
        """The ``producer=(id, last sequence)`` of an idempotent batch, or None after
        setting the error (module docstring): Kafka's epoch fence first, then its
        sequence rule, where a gap an append still open here may fill is answered
        NOT_ENOUGH_REPLICAS, retriable, instead of OUT_OF_ORDER_SEQUENCE_NUMBER
        (adapters/kafka/producer_state.py)."""
        states, now, epoch = self.ctx.producer_states, time.monotonic(), batch.producer_epoch
        stored = part.producer_sequence(pid)
        refused = states.refusal(skey, epoch, now)
        if refused is None and part.producer_sequence(producer_key(batch.producer_id, epoch + 1)) is not None:
            # another gateway (or this one before a restart) stored the next epoch's records
            refused = int(E.INVALID_PRODUCER_EPOCH), f"producer {batch.producer_id} has an epoch after {epoch}"
        if refused is None:
            refused = sequence_error(batch, stored)
            gap = (refused is not None and refused[0] == int(E.OUT_OF_ORDER_SEQUENCE_NUMBER)) or (
                refused is None and stored is None and batch.base_sequence > 0)
            if gap and states.gap_open(skey, epoch, batch.base_sequence, stored, now):
                refused = int(E.NOT_ENOUGH_REPLICAS), (
                    f"sequences before {batch.base_sequence} may still be stored; retry")
            elif gap and not self.ctx.placement().single and self.ctx.catch_up.recheck(
                    skey[:3], (batch.producer_id, epoch, batch.base_sequence)):
                # this copy may lack the producer's last batches another gateway stored: catch
                # up, then judge again (adapters/kafka/catch_up.py); OUT_OF_ORDER would stop
                # librdkafka's producer or make it bump its epoch
                refused = int(E.NOT_ENOUGH_REPLICAS), (
                    f"sequences before {batch.base_sequence} may be in the stored log; retry")
        if refused is not None:
            resp["error_code"], message = refused
            if message:
                resp["error_message"] = message
            return None
        return pid, batch.last_sequence

    # -- Fetch ----------------------------------------------------------------------------
    def fetch(self, version: int, body, now_ms: int, deadline_ms: int | None = None, plan: FetchPlan | None = None):
        """The Fetch response value, or a :class:`FetchWait` when it should wait. ``plan`` is
        what the request reads, decided once by the fetch-session cache (a long poll that
        resumes passes its wait's plan: the session's epoch moved once)."""
        if plan is None:
            plan = self.ctx.fetch_sessions.plan(version, body, self, now_ms)
        if plan.error:  # a session the listener does not know, or a wrong epoch: nothing is read
            return FETCH.response.make(error_code=plan.error, session_id=0, responses=())
        budget = max(0, min(body.max_bytes, MAX_FETCH_RESPONSE_BYTES))
        total = 0
        keys = []
        topics = []
        for name, wanted in plan.topics:
            info, err = self._topic(name, Action.POLL_MESSAGES)
            parts: list[dict] = []
            # A partition answered with an error carries an empty record set, never null:
            # Kafka's ReplicaManager answers a read error with MemoryRecords.EMPTY
            # (createLogReadResult), and librdkafka refuses a null one ("invalid
            # MessageSetSize -1", rd_kafka_fetch_reply_handle_partition).
            for w, resp in self._partitions(info, err, wanted, "partition_index", lambda w: w.partition, parts,
                                            high_watermark=-1, records=b""):
                keys.append((info.stream_id, info.id, w.partition))
                limit = min(w.partition_max_bytes, budget - total)
                total += self._fetch_partition(info, w, resp, limit, first=(total == 0))
            topics.append((name, wanted, parts))
        if deadline_ms is None:
            deadline_ms = now_ms + max(0, min(body.max_wait_ms, self.ctx.options.fetch_wait_max_ms))
        if total < body.min_bytes and now_ms < deadline_ms and keys:
            return FetchWait(version, body, deadline_ms, keys, plan=plan)
        responses = []
        for name, wanted, parts in topics:
            kept = tuple(_FETCH_PART.make(**f) for w, f in zip(wanted, parts) if plan.report(name, w, f))
            if kept or not plan.incremental:
                responses.append(_FETCH_TOPIC.make(topic=name, partitions=kept))
        plan.done()
        return FETCH.response.make(session_id=plan.session_id, responses=tuple(responses))

    def closed(self) -> None:
        """The connection ended: its fetch sessions go (adapters/kafka/fetch_sessions.py)."""
        self.ctx.fetch_sessions.forget(self)

    def _fetch_partition(self, info, p, resp: dict, limit: int, first: bool) -> int:
        """Fill ``resp`` for one partition; the record bytes it holds."""
        try:
            part = self.broker.partition(info.stream_id, info.id, p.partition)
            hwm, start = part.durable_next_offset, self._log_start(info, p.partition)  # durable only
            resp.update(high_watermark=hwm, last_stable_offset=hwm, log_start_offset=start)
            if not start <= p.fetch_offset <= hwm:
                if p.fetch_offset > hwm and self._stored_above(info, p.partition, part, p.fetch_offset):
                    resp["records"] = b""  # not here yet (module docstring, "Fetch")
                    return 0
                resp["error_code"] = int(E.OFFSET_OUT_OF_RANGE)
                return 0
            if p.fetch_offset == hwm or (limit <= 0 and not first):
                resp["records"] = b""
                return 0
            batch = part.read(p.fetch_offset, min(MAX_FETCH_RECORDS, hwm - p.fetch_offset), max(limit, 1))
            fetched = translate.encode_read(batch, max_bytes=limit, whole_first=first)
        except FerryError as exc:
            resp["error_code"] = append_error(exc)[0]
            return 0
        resp["records"] = fetched.data
        self.counters["messages_out"].inc(LISTENER, amount=fetched.count)
        self.counters["bytes_out"].inc(LISTENER, amount=len(fetched.data))
        return len(fetched.data)

    def _stored_above(self, info, pid: int, part, offset: int) -> bool:
        """May ``offset``, above this gateway's high watermark, be in the stored log? Its
        end may not be known yet (the store asks): then yes, the safe answer (an empty
        partition, which the client fetches again; OFFSET_OUT_OF_RANGE would reset it)."""
        end = self.broker.store.log_end((info.stream_id, info.id, pid), part)
        return end is None or offset <= end

    # -- ListOffsets ------------------------------------------------------------------------
    def list_offsets(self, version: int, body):
        topics = []
        for t in body.topics:
            info, err = self._topic(t.name, None)
            parts: list[dict] = []
            for p, resp in self._partitions(info, err, t.partitions, "partition_index",
                                            lambda p: p.partition_index, parts):
                try:  # a timestamp search reads records: a failed read answers its Kafka code
                    part = self.broker.partition(info.stream_id, info.id, p.partition_index)
                    offset, ts = self._offset_for(part, p.timestamp, self._log_start(info, p.partition_index))
                except FerryError as exc:
                    resp["error_code"] = append_error(exc)[0]
                    continue
                resp.update(timestamp=ts, offset=offset, leader_epoch=0 if offset >= 0 else -1)
                if version == 0:
                    resp["old_style_offsets"] = (offset,) if offset >= 0 else ()
            topics.append(_LO_TOPIC.make(name=t.name, partitions=tuple(_LO_PART.make(**f) for f in parts)))
        return LIST_OFFSETS.response.make(topics=tuple(topics))

    @staticmethod
    def _offset_for(part, timestamp: int, start: int) -> tuple[int, int]:
        """(offset, timestamp ms) Kafka answers for a ListOffsets timestamp (module docstring);
        no record below ``start``, the log start offset, is answered."""
        end = part.durable_next_offset  # the high watermark: nothing above it is answered
        if timestamp == LATEST:
            return end, -1
        if timestamp == EARLIEST:
            return start, -1
        if timestamp == MAX_TIMESTAMP:
            offset = end - 1
            if offset < part.first_offset or offset < start:
                return -1, -1
        elif timestamp < 0:
            return -1, -1
        else:
            # searched from the log start offset, as UnifiedLog.fetchOffsetByTimestamp does
            offset = max(part.offset_for_timestamp(timestamp * 1000), start)
            if offset >= end:
                return -1, -1  # no record at or after it: Kafka answers offset -1
            found = _created_at_or_after(part, offset, end, timestamp)
            if found is not None:
                return found
        (view,) = part.read(offset, 1).records()
        # The found record's own Kafka timestamp (Kafka's ListOffsets answers the record's
        # timestamp, TimestampAndOffset in UnifiedLog.fetchOffsetByTimestamp): the time a
        # Fetch shows for it, the producer's CreateTime, else the append time
        # (translate.encode_read), not the append time the search used.
        return offset, (view.origin_timestamp or view.timestamp) // 1000


def _created_at_or_after(part, offset: int, end: int, timestamp: int) -> tuple[int, int] | None:
    """Kafka's answer on a CreateTime topic (every Kafka topic here): the first record whose
    timestamp, as a Fetch shows it, is at or after ``timestamp`` (ms), from ``offset``, the
    first record *appended* at or after it: a record appended earlier was created earlier
    too, unless its producer's clock ran ahead of the gateway's. ``(offset, timestamp)``,
    ``(-1, -1)`` when no record below ``end`` (the high watermark) has such a timestamp (Kafka's
    "none"), or None after TIMESTAMP_SCAN_RECORDS without one: the caller answers ``offset``, which is never
    after Kafka's answer (a consumer that seeks there misses nothing)."""
    scanned = 0
    while offset < end and scanned < TIMESTAMP_SCAN_RECORDS:
        batch = part.read(offset, min(TIMESTAMP_SCAN_CHUNK, end - offset), TIMESTAMP_SCAN_CHUNK_BYTES)
        if not batch.count:
            return None
        for view in batch.records():
            ts = (view.origin_timestamp or view.timestamp) // 1000
            if ts >= timestamp:
                return view.offset, ts
        offset, scanned = batch.next_offset, scanned + batch.count
    return (-1, -1) if offset >= end else None
