"""Kafka transactions on Ferry's log, sans-I/O: the transaction coordinator.

Theory of operation
-------------------
Kafka writes a transaction's records into the partitions as they are
produced, then a commit or abort control marker, and read_committed
consumers filter aborted records out (KIP-98). Ferry's log is the canonical
log every protocol reads (NATS, Iggy, Pravega, Spark): they know no markers
and would see aborted records as messages. So here a transaction's records
are **staged** until EndTxn and appended to the log only at commit; nothing
aborted or open ever reaches the log.

* **State** per transactional id is durable in the broker's key-value tables
  (:mod:`adapters.kafka.txn_state`): producer id and epoch, Kafka's
  ``TransactionState``, timeout, partitions and groups added, staged batches
  and offsets. Every change is a conditional update on the version read; a
  lost race is read again (:data:`SAVE_TRIES`), then CONCURRENT_TRANSACTIONS.
* **InitProducerId** (``TransactionCoordinator.handleInitProducerId``): a new
  id gets a producer id and epoch 0; an existing one has its open transaction
  aborted (staged data discarded) and its epoch bumped, which fences the old
  producer. Kafka aborts first, answers CONCURRENT_TRANSACTIONS and bumps
  again on the retry; an abort here is one write, so one answer does both.
  An exhausted epoch (``TransactionMetadata.isEpochExhausted``) takes a new
  producer id. KIP-360 (v3+ with the current id and epoch): a retry of a bump
  the client never saw answers the same epoch, anything else PRODUCER_FENCED.
* **AddPartitionsToTxn / AddOffsetsToTxn** start a transaction (Ongoing) and
  record what it touches; **Produce** of a transactional batch is checked
  (partition added, producer id and epoch, sequence: against the last one
  this producer epoch staged, else the log's ``Partition.producer_sequence``)
  and staged durably before it is answered (:meth:`TxnCoordinator.stage`).
  **TxnOffsetCommit** stages offsets.
* **EndTxn(commit)** writes PrepareCommit first (the decision), then appends
  every staged block to its partition in staged order with
  ``producer=("kafka:<pid>:<epoch>", last sequence)`` and waits until every
  append is durable (:class:`Completion`); then the staged offsets are
  committed (GroupOffsets), CompleteCommit is written and the staged data
  removed. Should the gateway stop in between, the commit is rolled forward
  when the listener starts (:meth:`TxnCoordinator.recover`) or when the id is
  next touched: appending again is harmless, the log answers an already
  stored producer sequence as a duplicate. **EndTxn(abort)** discards.
* **Timeouts**: an Ongoing transaction past its timeout is aborted and its
  epoch bumped (``abortTimedOutTransactions``), by :meth:`TxnCoordinator.tick`
  at :meth:`TxnCoordinator.next_deadline` on the caller's clock (``now_ms``).
  A restart arms open transactions' timeouts afresh.

Authorization: Ferry has no transactional-id resource. A transactional id
belongs to the Ferry user that first initialised it; another user gets
TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Topics are checked as everywhere:
AddPartitionsToTxn and Produce need ``send_messages``, TxnOffsetCommit
``poll_messages`` (docs/kafka.md "Transactions").
"""

from __future__ import annotations

import logging

from core.errors import FerryError, NotFound, StorageConflict, TableKeyBadVersion, TopicSealed
from core.kvtables import MAX_VALUE_BYTES
from core.permissions import Action

from . import txn_state as ts
from .errors import ErrorCode as E
from .groups import valid_group_id
from .messages_txn import ADD_OFFSETS_TO_TXN, ADD_PARTITIONS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT
from .offsets import CommitTooLarge, GroupOffsets, metadata_too_large
from .records import producer_key, sequence_error

log = logging.getLogger("ferry.kafka")

# Kafka's transaction.max.timeout.ms default: a longer InitProducerId timeout
# answers INVALID_TRANSACTION_TIMEOUT (TransactionStateManager.validateTransactionTimeoutMs).
MAX_TXN_TIMEOUT_MS = 900_000
# Staged bytes per transaction. A commit reads the whole transaction back and
# hands it to the log, which holds it in memory until written, and every
# staged byte is written twice (key-value tables, then the log): 128 MiB is
# four times the Java producer's buffer.memory default (32 MiB) and bounds one
# commit's memory. Past it Produce answers RECORD_LIST_TOO_LARGE, which is not
# retriable, so clients make the transaction abortable.
MAX_STAGED_BYTES = 128 * 1024 * 1024
# Partitions per transaction: the state document lists them and is rewritten
# on every change, and must stay under the key-value value limit (1 MiB).
MAX_TXN_PARTITIONS = 10_000
# TransactionMetadata.isEpochExhausted: epochs up to Short.MaxValue - 2 are
# handed out, Short.MaxValue - 1 and above take a new producer id.
EPOCH_EXHAUSTED = 32_766
SAVE_TRIES = 3  # reads of a state another gateway changed at the same moment
# A decided commit whose appends failed (a storage error, the broker draining) is tried
# again this much later, whether or not its producer is still there to retry EndTxn.
COMMIT_RETRY_MS = 1000
# A PRODUCER_FENCED answer exists from these versions; older clients get
# INVALID_PRODUCER_EPOCH (KafkaApis' handlers map it the same way).
FENCED_FROM = {22: 4, 24: 2, 25: 2, 26: 2}

_APT = ADD_PARTITIONS_TO_TXN.response.structs
_TOC = TXN_OFFSET_COMMIT.response.structs


class TxnError(Exception):
    """A request-level refusal; ``code`` is the Kafka error code."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message or E(code).name)
        self.code = int(code)


class _Conflict(Exception):
    """The state changed under us (another gateway): read it again."""


class Completion:
    """A commit being rolled forward: its appends' durability callbacks, counted."""

    def __init__(self, txn_id: str, gen: int) -> None:
        self.txn_id, self.gen = txn_id, gen
        self.pending = 0
        self.started = False
        self.failed: BaseException | None = None
        self.result: int | None = None  # set by TxnCoordinator.finish
        self.waiters: list = []

    @property
    def done(self) -> bool:
        return self.started and self.pending == 0

    def callback(self):
        self.pending += 1

        def on_durable(outcome) -> None:
            if isinstance(outcome, BaseException):
                self.failed = outcome
            self.pending -= 1
            if self.done:
                self._wake()
        return on_durable

    def start_done(self) -> None:
        self.started = True
        if self.done:
            self._wake()

    def _wake(self) -> None:
        for wake in list(self.waiters):
            wake()


class TxnCoordinator:
    """The transaction coordinator of one listener (module docstring). ``ctx`` is the
    :class:`~adapters.kafka.context.KafkaContext`: broker, topic names, producer ids
    and the group coordinator (``ctx.groups``, for TxnOffsetCommit's generation check)."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.tables = ctx.broker.tables
        self.offsets = GroupOffsets(self.tables)
        self._deadlines: dict[str, tuple[int, int]] = {}  # txn id -> (timeout at, generation)
        self._completing: dict[str, Completion] = {}
        self._retries: dict[str, int] = {}  # txn id -> when to roll its decided commit forward again
        self.on_ready = None  # the driver's clock poke: a completion is done, or a deadline moved

    # -- the clock --------------------------------------------------------------------------
    def next_deadline(self) -> int | None:
        if any(c.done for c in self._completing.values()):
            return 0
        return min([at for at, _gen in self._deadlines.values()] + list(self._retries.values()), default=None)

    def tick(self, now_ms: int) -> None:
        """Finish the commits whose appends are durable, abort timed-out transactions."""
        for c in [c for c in self._completing.values() if c.done]:
            self.finish(c, now_ms)
        for txn_id, at in list(self._retries.items()):
            if at <= now_ms:
                del self._retries[txn_id]
                try:
                    doc = ts.load(self.tables, txn_id)
                except FerryError:
                    self._retries[txn_id] = now_ms + COMMIT_RETRY_MS
                    continue
                if doc is not None:
                    self._touch(doc)
        for txn_id, (at, gen) in list(self._deadlines.items()):
            if at <= now_ms:
                del self._deadlines[txn_id]
                try:
                    self._run(lambda: self._expire(txn_id, gen))
                except (TxnError, FerryError) as exc:
                    log.info("kafka transaction %r: timeout abort deferred: %s", txn_id, exc)
                    self._deadlines[txn_id] = (now_ms + 1000, gen)

    def recover(self, now_ms: int) -> int:
        """At start-up: roll every decided commit forward and arm open transactions'
        timeouts; the number of commits resumed."""
        resumed = 0
        for doc in ts.load_all(self.tables):
            if doc.state == ts.PREPARE_COMMIT:
                self._start_commit(doc)
                resumed += 1
            elif doc.state == ts.ONGOING:
                self._deadlines[doc.txn_id] = (now_ms + doc.timeout_ms, doc.gen)
        return resumed

    # -- shared checks ----------------------------------------------------------------------
    def _run(self, op):
        for _ in range(SAVE_TRIES):
            try:
                return op()
            except (TableKeyBadVersion, StorageConflict, _Conflict):  # another gateway wrote first: read again
                continue
        raise TxnError(E.CONCURRENT_TRANSACTIONS, "the transaction's state kept changing")

    def _load(self, txn_id: str, access) -> ts.TxnDoc:
        if not txn_id:
            raise TxnError(E.INVALID_REQUEST, "empty transactional id")
        try:
            doc = ts.load(self.tables, txn_id)
        except FerryError as exc:
            raise TxnError(E.COORDINATOR_NOT_AVAILABLE, str(exc)) from None
        except (ValueError, TypeError):
            raise TxnError(E.UNKNOWN_SERVER_ERROR, "unreadable transaction state") from None
        if doc is None:
            raise TxnError(E.INVALID_PRODUCER_ID_MAPPING, f"transactional id {txn_id!r} was never initialised")
        self._own(doc, access)
        self._touch(doc)
        return doc

    @staticmethod
    def _own(doc: ts.TxnDoc, access) -> None:
        if doc.owner != [access.user_id, access.created_at]:
            raise TxnError(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                           f"transactional id {doc.txn_id!r} belongs to another user")

    def _touch(self, doc: ts.TxnDoc) -> None:
        """A decided commit nobody here is completing is rolled forward now."""
        if doc.state == ts.PREPARE_COMMIT and doc.txn_id not in self._completing:
            self._start_commit(doc)

    @staticmethod
    def _producer(doc: ts.TxnDoc, pid: int, epoch: int, key: int, version: int) -> None:
        if doc.pid != pid:
            raise TxnError(E.INVALID_PRODUCER_ID_MAPPING, f"producer id {pid} is not the transactional id's")
        if doc.epoch != epoch:
            fenced = key in FENCED_FROM and version >= FENCED_FROM[key]
            raise TxnError(E.PRODUCER_FENCED if fenced else E.INVALID_PRODUCER_EPOCH,
                           f"epoch {epoch} is not the current {doc.epoch}")

    def _begin(self, doc: ts.TxnDoc, now_ms: int) -> None:
        """Empty or Complete* -> Ongoing (``TransactionMetadata.prepareAddPartitions``)."""
        if doc.state in (ts.PREPARE_COMMIT, ts.PREPARE_ABORT):
            raise TxnError(E.CONCURRENT_TRANSACTIONS)
        if doc.state != ts.ONGOING:
            doc.state, doc.gen, doc.start_ms = ts.ONGOING, doc.gen + 1, now_ms
            doc.parts, doc.groups, doc.batches, doc.staged, doc.offsets = [], [], 0, 0, {}
            self._deadlines[doc.txn_id] = (now_ms + doc.timeout_ms, doc.gen)
            self._poke()

    def _poke(self) -> None:
        if self.on_ready is not None:
            self.on_ready()

    @staticmethod
    def _discard(doc: ts.TxnDoc, state: str) -> tuple[int, int]:
        """Forget the open transaction's staged data in ``doc``; what to purge after saving."""
        gone = (doc.gen, doc.batches)
        doc.state, doc.parts, doc.groups, doc.batches, doc.staged, doc.offsets = state, [], [], 0, 0, {}
        return gone

    def _new_epoch(self, doc: ts.TxnDoc) -> None:
        """Fence the current producer: the next epoch, or a new producer id when exhausted."""
        if doc.epoch + 1 >= EPOCH_EXHAUSTED:
            doc.prev_pid, doc.pid, doc.epoch = doc.pid, self.ctx.next_producer_id(), 0
        else:
            doc.epoch += 1
        doc.last_epoch, doc.seqs = -1, {}

    # -- InitProducerId ---------------------------------------------------------------------
    def init_producer_id(self, version: int, body, access, now_ms: int) -> tuple[int, int, int]:
        """(error code, producer id, epoch) for a transactional InitProducerId."""
        txn_id, timeout = body.transactional_id, body.transaction_timeout_ms
        if not txn_id:
            return int(E.INVALID_REQUEST), -1, -1
        if not 0 < timeout <= MAX_TXN_TIMEOUT_MS:
            return int(E.INVALID_TRANSACTION_TIMEOUT), -1, -1
        expected = (body.producer_id, body.producer_epoch) if version >= 3 and body.producer_id >= 0 else None
        try:
            doc, purge = self._run(lambda: self._init(txn_id, timeout, expected, access, version))
        except TxnError as exc:
            return exc.code, -1, -1
        except FerryError:
            return int(E.COORDINATOR_NOT_AVAILABLE), -1, -1
        self._deadlines.pop(txn_id, None)
        if purge is not None:
            ts.purge(self.tables, txn_id, *purge)
        return 0, doc.pid, doc.epoch

    def _init(self, txn_id: str, timeout: int, expected, access, version: int):
        doc = ts.load(self.tables, txn_id)
        if doc is None:
            doc = ts.TxnDoc(txn_id, [access.user_id, access.created_at], pid=self.ctx.next_producer_id())
        else:
            self._own(doc, access)
            self._touch(doc)
        if doc.state in (ts.PREPARE_COMMIT, ts.PREPARE_ABORT):
            raise TxnError(E.CONCURRENT_TRANSACTIONS, "a commit is completing")
        if expected is not None and not (doc.epoch == -1 or expected[0] == doc.pid or (
                expected[0] == doc.prev_pid and expected[1] >= EPOCH_EXHAUSTED)):
            raise TxnError(E.PRODUCER_FENCED if version >= 4 else E.INVALID_PRODUCER_EPOCH)
        purge = None
        if doc.state == ts.ONGOING:  # fence and abort in one step (module docstring)
            purge = self._discard(doc, ts.COMPLETE_ABORT)
            self._new_epoch(doc)
        elif doc.epoch >= EPOCH_EXHAUSTED and (expected is None or expected[1] == doc.epoch):
            last = doc.epoch if expected is not None else -1  # prepareProducerIdRotation
            doc.prev_pid, doc.pid, doc.epoch = doc.pid, self.ctx.next_producer_id(), 0
            doc.last_epoch, doc.seqs = last, {}
            doc.state = ts.EMPTY
        elif expected is None:
            doc.epoch, doc.last_epoch, doc.seqs, doc.state = doc.epoch + 1, -1, {}, ts.EMPTY
        elif doc.epoch == -1 or expected[1] == doc.epoch:
            doc.epoch, doc.last_epoch, doc.seqs, doc.state = doc.epoch + 1, doc.epoch, {}, ts.EMPTY
        elif expected[1] != doc.last_epoch:  # else: a retry of a bump the client never saw
            raise TxnError(E.PRODUCER_FENCED if version >= 4 else E.INVALID_PRODUCER_EPOCH)
        doc.timeout_ms = timeout
        ts.save(self.tables, doc)
        return doc, purge

    # -- AddPartitionsToTxn, AddOffsetsToTxn ---------------------------------------------------
    def add_partitions(self, version: int, body, access, now_ms: int):
        txn_id, pid, epoch = body.v3_and_below_transactional_id, body.v3_and_below_producer_id, \
            body.v3_and_below_producer_epoch
        wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
        codes: dict = {}
        keys = {}
        try:
            self._load(txn_id, access)
        except TxnError as exc:
            if exc.code != int(E.INVALID_PRODUCER_ID_MAPPING):
                return self._add_partitions_answer(body, {tp: exc.code for tp in wanted})
        for name, p in wanted:  # KafkaApis.handleAddPartitionsToTxnRequest's topic checks
            info = self.ctx.topic(name)
            if info is None or not 0 <= p < info.partitions_count:
                codes[(name, p)] = int(E.UNKNOWN_TOPIC_OR_PARTITION)
            elif not access.can(Action.SEND_MESSAGES, info.stream_id, info.id):
                codes[(name, p)] = int(E.TOPIC_AUTHORIZATION_FAILED)
            else:
                keys[(name, p)] = ts.part_key(info.stream_id, info.id, p)
        if codes:  # one failure fails the request; the others were not attempted
            return self._add_partitions_answer(body, {tp: codes.get(tp, int(E.OPERATION_NOT_ATTEMPTED))
                                                      for tp in wanted})

        def op():
            doc = self._load(txn_id, access)
            self._producer(doc, pid, epoch, 24, version)
            new = [k for k in dict.fromkeys(keys.values()) if k not in doc.parts]
            if doc.state == ts.ONGOING and not new:
                return  # already added: answered at once, as Kafka does
            self._begin(doc, now_ms)
            if len(doc.parts) + len(new) > MAX_TXN_PARTITIONS:
                raise TxnError(E.INVALID_REQUEST, f"a transaction may touch {MAX_TXN_PARTITIONS} partitions")
            doc.parts += [k for k in new if k not in doc.parts]
            ts.save(self.tables, doc)
        code = self._code(op)
        return self._add_partitions_answer(body, {tp: code for tp in wanted})

    @staticmethod
    def _add_partitions_answer(body, codes: dict):
        return ADD_PARTITIONS_TO_TXN.response.make(results_by_topic_v3_and_below=tuple(
            _APT["AddPartitionsToTxnTopicResult"].make(name=t.name, results_by_partition=tuple(
                _APT["AddPartitionsToTxnPartitionResult"].make(partition_index=p,
                                                               partition_error_code=codes[(t.name, p)])
                for p in t.partitions))
            for t in body.v3_and_below_topics))

    def _code(self, op) -> int:
        try:
            self._run(op)
        except TxnError as exc:
            return exc.code
        except FerryError:
            return int(E.COORDINATOR_NOT_AVAILABLE)
        return 0

    def add_offsets(self, version: int, body, access, now_ms: int):
        def op():
            doc = self._load(body.transactional_id, access)
            self._producer(doc, body.producer_id, body.producer_epoch, 25, version)
            if not valid_group_id(body.group_id):
                raise TxnError(E.INVALID_GROUP_ID)
            if doc.state == ts.ONGOING and body.group_id in doc.groups:
                return
            self._begin(doc, now_ms)
            doc.groups.append(body.group_id)
            ts.save(self.tables, doc)
        return ADD_OFFSETS_TO_TXN.response.make(error_code=self._code(op))

    # -- TxnOffsetCommit ------------------------------------------------------------------------
    def txn_offset_commit(self, version: int, body, access, now_ms: int):
        codes: dict = {}
        valid = []
        try:
            self._load(body.transactional_id, access)
            top = 0
        except TxnError as exc:
            top = exc.code
        for t in body.topics:  # KafkaApis.handleTxnOffsetCommitRequest's topic checks
            info = self.ctx.topic(t.name)
            for p in t.partitions:
                key = (t.name, p.partition_index)
                if top:
                    codes[key] = top
                elif info is None or not 0 <= p.partition_index < info.partitions_count:
                    codes[key] = int(E.UNKNOWN_TOPIC_OR_PARTITION)
                elif not access.can(Action.POLL_MESSAGES, info.stream_id, info.id):
                    codes[key] = int(E.TOPIC_AUTHORIZATION_FAILED)
                elif metadata_too_large(p.committed_metadata):
                    codes[key] = int(E.OFFSET_METADATA_TOO_LARGE)
                else:
                    valid.append((key, p))
        if valid:
            def op():
                doc = self._load(body.transactional_id, access)
                self._producer(doc, body.producer_id, body.producer_epoch, 28, version)
                if doc.state != ts.ONGOING or body.group_id not in doc.groups:
                    raise TxnError(E.INVALID_TXN_STATE, "the group was not added to this transaction")
                if version >= 3 and self.ctx.groups is not None:  # the member's generation, as OffsetCommit's
                    # whichever coordinator holds the group: classic, or KIP-848's (member epoch)
                    err = self.ctx.groups.check_commit(
                        body.group_id, body.generation_id, body.member_id, now_ms=now_ms,
                        instance_id=body.group_instance_id, version=version, transactional=True)
                    if err:
                        raise TxnError(err)
                staged = doc.offsets.setdefault(body.group_id, {})
                for (name, index), p in valid:
                    staged[f"{name}\0{index}"] = [p.committed_offset, p.committed_leader_epoch, p.committed_metadata]
                if len(doc.encode()) > MAX_VALUE_BYTES // 2:
                    raise TxnError(E.INVALID_COMMIT_OFFSET_SIZE, "the transaction's offsets do not fit")
                ts.save(self.tables, doc)
            code = self._code(op)
            for key, _p in valid:
                codes[key] = code
        return TXN_OFFSET_COMMIT.response.make(topics=tuple(
            _TOC["TxnOffsetCommitResponseTopic"].make(name=t.name, partitions=tuple(
                _TOC["TxnOffsetCommitResponsePartition"].make(partition_index=p.partition_index,
                                                              error_code=codes[(t.name, p.partition_index)])
                for p in t.partitions))
            for t in body.topics))

    # -- EndTxn ------------------------------------------------------------------------------------
    def end_txn(self, version: int, body, access, now_ms: int):
        """The EndTxn response value, or a :class:`Completion` to wait for (then :meth:`finish`)."""
        out = []

        def op():
            out.clear()
            doc = self._load(body.transactional_id, access)
            self._producer(doc, body.producer_id, body.producer_epoch, 26, version)
            commit = body.committed
            if doc.state == ts.ONGOING and commit:
                doc.state = ts.PREPARE_COMMIT  # the decision, durable before any append
                ts.save(self.tables, doc)
                self._deadlines.pop(doc.txn_id, None)
                out.append(self._start_commit(doc))
            elif doc.state == ts.ONGOING:
                gone = self._discard(doc, ts.COMPLETE_ABORT)
                ts.save(self.tables, doc)
                self._deadlines.pop(doc.txn_id, None)
                ts.purge(self.tables, doc.txn_id, *gone)
            elif doc.state == ts.PREPARE_COMMIT and commit:
                out.append(self._completing[doc.txn_id])  # _load's touch started it
            elif (doc.state, commit) not in ((ts.COMPLETE_COMMIT, True), (ts.COMPLETE_ABORT, False)):
                raise TxnError(E.INVALID_TXN_STATE, f"EndTxn({'commit' if commit else 'abort'}) in {doc.state}")
        code = self._code(op)
        if out and not code:
            return out[0]
        return END_TXN.response.make(error_code=code)

    def _start_commit(self, doc: ts.TxnDoc) -> Completion:
        """Append the staged batches of a PrepareCommit ``doc`` (module docstring)."""
        c = Completion(doc.txn_id, doc.gen)
        c.waiters.append(self._poke)
        self._completing[doc.txn_id] = c
        producer = producer_key(doc.pid, doc.epoch)
        broker = self.ctx.broker
        try:
            for sid, tid, p, count, last_seq, block in ts.staged_batches(self.tables, doc):
                on_durable = c.callback()
                try:
                    broker.append_records(sid, tid, block, count, partition=p, producer=(producer, last_seq),
                                          on_durable=on_durable, origin="kafka")
                except (NotFound, TopicSealed) as exc:  # the topic went (or was sealed) meanwhile:
                    c.pending -= 1  # its records go with it, as Kafka's do with a deleted topic
                    log.warning("kafka transaction %r: staged records dropped: %s", doc.txn_id, exc)
                except FerryError as exc:
                    c.pending -= 1
                    c.failed = exc
                    break
        except FerryError as exc:  # reading the staged data failed
            c.failed = exc
        c.start_done()
        return c

    def finish(self, c: Completion, now_ms: int) -> int:
        """Complete a commit whose appends are all durable: the staged offsets, then
        CompleteCommit. The EndTxn error code (0, or COORDINATOR_NOT_AVAILABLE: the
        decision stands and the next touch rolls it forward again)."""
        if c.result is not None or not c.done:
            return c.result if c.result is not None else int(E.COORDINATOR_NOT_AVAILABLE)
        if self._completing.get(c.txn_id) is c:
            del self._completing[c.txn_id]
        if c.failed is not None:
            log.warning("kafka transaction %r: commit not finished: %s", c.txn_id, c.failed)
            c.result = int(E.COORDINATOR_NOT_AVAILABLE)
            self._retries[c.txn_id] = now_ms + COMMIT_RETRY_MS
            self._poke()
            return c.result
        gone = []

        def op():
            doc = ts.load(self.tables, c.txn_id)
            if doc is None or doc.state != ts.PREPARE_COMMIT or doc.gen != c.gen:
                return  # finished elsewhere (another gateway rolled it forward)
            for group, staged in doc.offsets.items():
                entries = []
                for key, (offset, epoch, metadata) in staged.items():
                    topic, _, index = key.rpartition("\0")
                    entries.append((topic, int(index), offset, epoch, metadata))
                try:
                    self.offsets.commit(group, entries, now_ms)
                except (CommitTooLarge, ValueError) as exc:
                    log.warning("kafka transaction %r: offsets of group %r dropped: %s", c.txn_id, group, exc)
            gone.append(self._discard(doc, ts.COMPLETE_COMMIT))
            ts.save(self.tables, doc)
        c.result = self._code(op)
        if c.result:
            self._retries[c.txn_id] = now_ms + COMMIT_RETRY_MS
            self._poke()
        if gone:
            ts.purge(self.tables, c.txn_id, *gone[0])
        return c.result

    def _expire(self, txn_id: str, gen: int) -> None:
        """Abort a timed-out transaction and bump the epoch (fencing its producer)."""
        doc = ts.load(self.tables, txn_id)
        if doc is None or doc.state != ts.ONGOING or doc.gen != gen:
            return
        gone = self._discard(doc, ts.COMPLETE_ABORT)
        self._new_epoch(doc)
        ts.save(self.tables, doc)
        ts.purge(self.tables, txn_id, *gone)
        log.info("kafka transaction %r timed out after %d ms: aborted, epoch now %d", txn_id, doc.timeout_ms,
                 doc.epoch)

    # -- Produce -----------------------------------------------------------------------------------
    def stage(self, txn_id: str, access, items: list) -> list:
        """Stage a transactional Produce's batches durably. ``items``: [(TopicInfo,
        partition, RecordBatch, stored block)]; returns [(error code, message)] in order."""
        out: list = []

        def op():
            out.clear()
            doc = self._load(txn_id, access)
            chunks, heads = [], []
            for info, index, batch, block in items:
                out.append(self._check_batch(doc, info, index, batch, len(block)))
                if out[-1][0]:
                    continue
                key = ts.part_key(info.stream_id, info.id, index)
                last_seq = batch.last_sequence
                c, h = ts.batch_rows(doc, doc.batches, info.stream_id, info.id, index, len(batch.records),
                                     last_seq, block)
                chunks += c
                heads += h
                doc.seqs[key] = last_seq
                doc.batches += 1
                doc.staged += len(block)
            if heads:
                ts.save(self.tables, doc, ts.write_chunks(self.tables, doc, chunks) + heads)
        try:
            self._run(op)
        except TxnError as exc:
            return [(exc.code, str(exc))] * len(items)
        except FerryError as exc:
            return [(int(E.KAFKA_STORAGE_ERROR), str(exc))] * len(items)
        return out

    def _check_batch(self, doc: ts.TxnDoc, info, index: int, batch, nbytes: int) -> tuple[int, str | None]:
        if not batch.is_transactional or batch.producer_id < 0:
            return int(E.INVALID_RECORD), "a transactional Produce needs transactional batches"
        if batch.producer_id != doc.pid:
            return int(E.INVALID_PRODUCER_ID_MAPPING), f"producer id {batch.producer_id} is not {doc.pid}"
        if batch.producer_epoch != doc.epoch:
            return int(E.INVALID_PRODUCER_EPOCH), f"epoch {batch.producer_epoch} is not the current {doc.epoch}"
        key = ts.part_key(info.stream_id, info.id, index)
        if doc.state != ts.ONGOING or key not in doc.parts:
            return int(E.INVALID_TXN_STATE), "the partition was not added to the transaction"
        stored = doc.seqs.get(key)  # this epoch's last staged sequence, else the log's
        if stored is None:
            stored = self.ctx.broker.partition(info.stream_id, info.id, index).producer_sequence(
                producer_key(doc.pid, doc.epoch))
        refused = sequence_error(batch, stored)
        if refused is not None:
            return refused
        if doc.staged + nbytes > MAX_STAGED_BYTES:
            return int(E.RECORD_LIST_TOO_LARGE), f"a transaction stages at most {MAX_STAGED_BYTES} bytes"
        return 0, None


__all__ = ["EPOCH_EXHAUSTED", "MAX_STAGED_BYTES", "MAX_TXN_PARTITIONS", "MAX_TXN_TIMEOUT_MS", "Completion",
           "TxnCoordinator", "TxnError"]
