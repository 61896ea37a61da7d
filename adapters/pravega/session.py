"""One segment-store connection: Pravega commands in, broker calls, replies out.

Theory of operation
-------------------
The driver feeds decoded commands (:mod:`adapters.pravega.codec`) to
:meth:`SegmentStoreSession.handle`; replies leave through ``emit(frame)``,
a synchronous callback that queues bytes for the driver's writer. Nothing
here awaits, sleeps or touches a socket (STYLE.md section 2).

Appends (pravega.md sections 5 and 12):

* ``SetupAppend`` names a (segment, writer). The writer's last *stored*
  event number comes from the partition's producer table -- kept in the
  same batches as the data and replayed on recovery (docs/storage.md) -- so
  after a reconnect, or a restart after ``kill -9``, the client learns
  exactly what survived and resends only the rest.
* A block (Rust: standalone ``AppendBlockEnd``; Java: reassembled by the
  codec) numbered ``f..l`` against stored ``s``: ``l <= s`` is a duplicate,
  stored nothing and acknowledged; ``f > s`` (or an unknown writer) is
  appended; a block straddling ``s`` is no client's behaviour and closes the
  connection, as upstream does for event numbers going backwards.
* ``DataAppended`` is emitted from the core's ``on_durable`` callback: only
  once the block is durable under the fsync policy, and in order per writer
  (the flusher fires callbacks in offset order). The session never waits for
  an ack before handling the next command: the driver keeps reading, bounded
  by ``unacked_bytes``.

Reads return the event-frame byte view up to the durable end (reads.py); a
read at that end is *parked* (returned as :class:`Park`): the driver waits
for the durable end to move or ``PARK_S`` and calls :meth:`read` again
with ``parked=True``, which answers (empty, ``atTail``) rather than wait
again -- before the client's 30 s request timeout (pravega.md section 7).

Table segments (reader-group state of the 0.3.8 client) are the broker's
key-value tables (``broker.tables``). Transactions are held in
:mod:`adapters.pravega.state` until the controller commits them.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from functools import partial
from typing import Callable

from core.errors import (
    InvalidOffset,
    NotFound,
    PayloadTooLarge,
    ShuttingDown,
    StorageError,
    TopicSealed,
)
from core.log.encoded import payload_block
from core.log.partition import AppendInput
from core.metrics import listener_metrics, metrics_for

from . import commands as C
from .auth import READ, Principal
from .gate import SegmentGate
from .codec import Append, split_events
from .errors import PravegaProtocolError
from .errors import Reply as _Reply
from .names import parse_segment
from .reads import clamp, durable_end, events_started, raw_end, raw_pos_of, read_events, read_raw
from .state import TxnError, state_of
from .tables import TableSegmentOps
from .views import SegmentViews

log = logging.getLogger("ferry.pravega")

# Wire versions (pravega.md section 2): the 0.3.8 client speaks 15 and accepts a
# server iff low <= 15 <= high; 17 would make Java clients use LocateOffset,
# which is not served, so 15 until it is. 5 is upstream's oldest compatible.
WIRE_VERSION = 15
OLDEST_COMPATIBLE_VERSION = 5
NULL_EVENT_NUMBER = -(1 << 63)  # Long.MIN_VALUE: "this writer never wrote here"
MAX_EVENT_BYTES = 8 * 1024 * 1024  # the client's single-event limit (pravega-client.md section 4)
ORIGIN = "pravega"  # the publishing protocol recorded for live delivery
LISTENER = "pravega"  # the ``listener`` label of this adapter's metrics
# The failure replies of Pravega's WireCommands (each one request answered with an
# error: ferry_errors_total); SegmentSealed/SegmentTruncated are success replies.
ERROR_REPLIES = frozenset((
    C.WrongHost, C.SegmentIsSealed, C.SegmentIsTruncated, C.SegmentAlreadyExists, C.NoSuchSegment,
    C.TableSegmentNotEmpty, C.InvalidEventNumber, C.OperationUnsupported, C.AuthTokenCheckFailed,
    C.ConditionalCheckFailed, C.TableKeyDoesNotExist, C.TableKeyBadVersion, C.ErrorMessage,
))
MAX_TRANSIENT_BYTES = 64 * 1024 * 1024  # one large event's parts held before the merge (core MAX_PAYLOAD)
# Unmerged large events per connection: the 0.3.8 client builds one at a time per segment
# writer, so a few cover any real client and bound what a misbehaving one can pin
# (MAX_TRANSIENTS x MAX_TRANSIENT_BYTES).
MAX_TRANSIENTS = 4
# Writers set up on one connection: a client process opens one per segment it writes and
# shares connections per segment store, so this is far above real use while bounding
# what one connection can make us hold (a few hundred bytes each).
MAX_WRITERS = 10_000




@dataclass(slots=True)
class Park:
    """A read at the tail: wait for an append to ``key`` (``(stream_id,
    topic_id, partition_id)``), then call ``session.read(cmd, parked=True)``."""

    cmd: object
    key: tuple[int, int, int]


@dataclass(slots=True)
class _Writer:
    segment: str
    stream_id: int
    topic_id: int
    partition: int
    last_acked: int
    producer: str  # the partition's producer-table key: the writer id
    txn: uuid.UUID | None = None
    transient: str | None = None  # a large event's part: the full transient segment name
    raw: bool = False  # a byte stream: offsets count payload bytes only
    inflight: int = 0
    deferred: list | None = None  # error replies held until earlier blocks are acked
    principal: Principal | None = None  # who set it up (auth on): re-checked on every block


class SegmentStoreSession(TableSegmentOps):
    """The per-connection state of the segment store; see the module docstring."""

    def __init__(self, broker, emit: Callable[[bytes], None], *, clock_ms: Callable[[], int] | None = None,
                 on_ack: Callable[[], None] | None = None) -> None:
        self.broker = broker
        self.state = state_of(broker)
        self._emit = emit
        self._on_ack = on_ack or (lambda: None)
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.writers: dict[uuid.UUID, _Writer] = {}
        self.transients: set[str] = set()  # transient segments made here and not merged yet
        self.counters = listener_metrics(metrics_for(broker))
        self.unacked_bytes = 0  # appended, not yet acknowledged (the driver's read gate)
        self.close_after_flush = False  # set when the protocol says: reply, then close
        self.closed = False
        self._principal: Principal | None = None  # who the request being handled acts as (auth on)
        self.gate = SegmentGate(broker, self.state)  # tokens and live permissions (adapters/pravega/gate.py)
        self.views = SegmentViews(broker, self.state.kinds)  # events or raw bytes (adapters/pravega/views.py)
        self._handlers = {
            C.Hello: self._hello,
            C.KeepAlive: self._keep_alive,
            C.SetupAppend: self._setup_append,
            Append: self._append,
            C.ConditionalAppend: self._conditional_append,
            C.ConditionalBlockEnd: self._conditional_block,
            C.CreateTransientSegment: self._create_transient,
            C.MergeSegments: self._merge,
            C.ReadSegment: self.read,
            C.GetStreamSegmentInfo: self._segment_info,
            C.SealSegment: self._seal,
            C.TruncateSegment: self._truncate,
            C.GetSegmentAttribute: self._get_attribute,
            C.CreateTableSegment: self._create_table,
            C.DeleteTableSegment: self._delete_table,
            C.UpdateTableEntries: self._update_table,
            C.RemoveTableKeys: self._remove_keys,
            C.ReadTable: self._read_table,
            C.ReadTableEntries: self._read_entries,
            C.ReadTableKeys: self._read_keys,
            C.ReadTableEntriesDelta: self._read_delta,
            C.GetTableSegmentInfo: self._table_info,
        }

    # -- dispatch --------------------------------------------------------------------
    def handle(self, cmd) -> Park | None:
        """Answer one command (through ``emit``); a tail read returns a Park.
        Raises PravegaProtocolError when the connection must close."""
        handler = self._handlers.get(type(cmd))
        try:
            self._principal = self.gate.admit(cmd)
            if handler is None:
                return self._unsupported(cmd)
            return handler(cmd)
        except _Reply as r:
            log.debug("pravega request refused", extra={"command": type(cmd).__name__,
                                                       "reply": type(r.reply).__name__, "detail": repr(cmd)[:300]})
            self.send(r.reply)
        except ShuttingDown as exc:
            raise PravegaProtocolError(f"shutting down: {exc}") from None
        return None

    def send(self, reply) -> None:
        if type(reply) in ERROR_REPLIES:
            self.counters["errors"].inc(LISTENER)
        self._emit(C.encode(reply))

    def _recheck(self, w: _Writer, rid: int) -> bool:
        """Before storing a block: may the writer's principal still send to its topic?
        False after answering AuthTokenCheckFailed (the writer must set up again, and
        its next token request meets the same check at the controller)."""
        refusal = self.gate.still_sending(w.principal, w.stream_id, w.topic_id, rid, w.segment)
        if refusal is None:
            return True
        self._fail(w, refusal.reply)
        return False

    def close(self) -> None:
        self.closed = True
        self.writers.clear()
        for seg in self.transients:  # a large event the client never merged: nobody else can finish it
            self.state.transients.pop(seg, None)
        self.transients.clear()

    def _unsupported(self, cmd) -> None:
        rid = getattr(cmd, "request_id", None)
        if rid is None:  # Event/Padding/... frames: the codec already refuses them
            raise PravegaProtocolError(f"unexpected {type(cmd).__name__}")
        self.send(C.OperationUnsupported(request_id=rid, operation_name=type(cmd).__name__, server_stack_trace=""))

    # -- handshake -------------------------------------------------------------------
    def _hello(self, cmd) -> None:
        # Upstream: refuse when the ranges do not overlap, then close.
        if cmd.low_version > WIRE_VERSION or cmd.high_version < OLDEST_COMPATIBLE_VERSION:
            self.send(C.Hello(high_version=WIRE_VERSION, low_version=OLDEST_COMPATIBLE_VERSION))
            raise PravegaProtocolError(
                f"client wire versions {cmd.low_version}..{cmd.high_version} do not overlap "
                f"{OLDEST_COMPATIBLE_VERSION}..{WIRE_VERSION}")
        self.send(C.Hello(high_version=WIRE_VERSION, low_version=OLDEST_COMPATIBLE_VERSION))

    def _keep_alive(self, cmd) -> None:
        self.send(C.KeepAlive())

    # -- addressing --------------------------------------------------------------------
    def _target(self, rid: int, segment: str):
        """``(SegmentName, TopicInfo)`` of a stream segment, or a NoSuchSegment reply."""
        name = parse_segment(segment)
        topic = None
        if name is not None and name.epoch == 0:
            names = self.broker.addressing.topic_for_pravega(name.scope, name.stream)
            if names is not None:
                try:
                    topic = self.broker.get_topic(*names)
                except NotFound:
                    topic = None
        if topic is None or name.number >= topic.partitions_count:
            raise _Reply(C.NoSuchSegment(request_id=rid, segment=segment, server_stack_trace="", offset=-1))
        return name, topic

    def _partition(self, topic, number: int):
        return self.broker.partition(topic.stream_id, topic.id, number)

    # -- appends -------------------------------------------------------------------------
    def _setup_append(self, cmd) -> None:
        rid, seg = cmd.request_id, cmd.segment
        name, topic = self._target(rid, seg)
        txn = None
        if name.txn is not None:
            txn = uuid.UUID(name.txn)
            held = self.state.get(txn)
            if held is None or held.state.name != "OPEN":
                raise _Reply(C.NoSuchSegment(request_id=rid, segment=seg, server_stack_trace="", offset=-1))
            last = held.writers.get((name.number, cmd.writer_id), NULL_EVENT_NUMBER)
        elif name.transient is not None:
            if seg not in self.state.transients:
                raise _Reply(C.NoSuchSegment(request_id=rid, segment=seg, server_stack_trace="", offset=-1))
            last = NULL_EVENT_NUMBER
        else:
            if topic.sealed:
                raise _Reply(C.SegmentIsSealed(request_id=rid, segment=seg, server_stack_trace="", offset=-1))
            part = self._partition(topic, name.number)
            key = (topic.stream_id, topic.id, name.number)
            waiting = partial(self._setup_settled, cmd)
            if self.state.when_settled(key, str(cmd.writer_id), waiting):
                # Blocks of this writer (from a connection now gone) are not applied yet (on
                # their way to the cluster): answer once they are stored or failed (state.py,
                # "Unsettled appends"; never with the embedded log, which applies at once).
                return
            stored = part.producer_sequence(str(cmd.writer_id))
            last = NULL_EVENT_NUMBER if stored is None else stored
        old = self.writers.get(cmd.writer_id)
        if old is not None and old.inflight:
            raise PravegaProtocolError(f"writer {cmd.writer_id} set up again with blocks in flight")
        if old is None and len(self.writers) >= MAX_WRITERS:
            raise _Reply(C.ErrorMessage(request_id=rid, segment=seg, error_code=-1,
                                        message=f"{MAX_WRITERS} writers are set up on this connection"))
        self.writers[cmd.writer_id] = _Writer(seg, topic.stream_id, topic.id, name.number, last,
                                              str(cmd.writer_id), txn, seg if name.transient else None,
                                              self.views.is_bytes(topic), principal=self._principal)
        self.send(C.AppendSetup(request_id=rid, segment=seg, writer_id=cmd.writer_id, last_event_number=last))

    def _setup_settled(self, cmd) -> None:
        """A SetupAppend that waited for the writer's unsettled appends: answer it now."""
        if self.closed:
            return
        try:
            self.handle(cmd)
        except PravegaProtocolError as exc:
            log.info("pravega connection closed: protocol error", extra={"reason": str(exc)})
            self.close_after_flush = True
            self._on_ack()

    def _writer(self, writer_id: uuid.UUID) -> _Writer:
        w = self.writers.get(writer_id)
        if w is None:  # upstream: an append from a writer not set up is a protocol error
            raise PravegaProtocolError(f"append from writer {writer_id} before SetupAppend")
        return w

    def _append(self, ev: Append) -> None:
        w = self._writer(ev.writer_id)
        if w.deferred is not None:
            return  # the writer failed; later blocks get nothing until it sets up again
        try:
            payloads = split_events(ev.data)
        except PravegaProtocolError:
            self._fail(w, C.ErrorMessage(request_id=ev.request_id, segment=w.segment,
                                         message="append data is not a sequence of event frames", error_code=0))
            raise
        if len(payloads) != ev.num_events or ev.num_events <= 0:
            raise PravegaProtocolError(f"block says {ev.num_events} events, holds {len(payloads)}")
        for p in payloads:
            if len(p) > MAX_EVENT_BYTES:
                raise PravegaProtocolError(f"event of {len(p)} bytes exceeds {MAX_EVENT_BYTES}")
        if not self._recheck(w, ev.request_id):
            return None
        if w.txn is not None:
            return self._append_txn(w, ev, payloads)
        self._store(w, ev.request_id, ev.last_event_number, ev.num_events, payloads, len(ev.data))

    def _writer_part(self, w: _Writer, rid: int, last: int):
        """The writer's partition, or None after answering NoSuchSegment: its topic (or partition)
        was deleted since SetupAppend, by another protocol (Pravega deletes only sealed streams)."""
        try:
            return self.broker.partition(w.stream_id, w.topic_id, w.partition)
        except NotFound:
            self._fail(w, C.NoSuchSegment(request_id=rid, segment=w.segment, server_stack_trace="", offset=last))
            return None

    def _store(self, w: _Writer, rid: int, last: int, n: int, payloads, size: int) -> None:
        part = self._writer_part(w, rid, last)
        if part is None:
            return
        stored = part.producer_sequence(w.producer)
        first = last - n + 1
        if stored is not None and first <= stored < last:
            # Only a client that lost track of its numbers sends this (pravega.md section 12):
            # close, so it re-runs SetupAppend, learns the stored number and resends the rest.
            raise PravegaProtocolError(f"block {first}..{last} straddles stored event number {stored}")
        count = len(payloads)
        block = payload_block(payloads)  # stamped in one pass by the core (append_records)
        w.inflight += 1
        self.unacked_bytes += size
        # Once the call returned: the segment's length right after this block (for its
        # DataAppended) when the partition applied it at once, else None (_acked).
        end: list[int | None] = []
        try:
            result = self.broker.append_records(w.stream_id, w.topic_id, block, count, partition=w.partition,
                                                producer=(w.producer, last),
                                                on_durable=partial(self._acked, w, rid, last, size, part, end),
                                                origin=ORIGIN)
            if part.is_applied(result):
                end.append(raw_end(part) if w.raw else part.byte_end)
            else:  # unsettled until on_durable (state.py); ``size``: what it adds to the writer's view
                end.append(None)
                self.state.begin_append((w.stream_id, w.topic_id, w.partition), w.producer, size)
            self.counters["messages_in"].inc(LISTENER, amount=count)
            self.counters["bytes_in"].inc(LISTENER, amount=size - 8 * count if not w.raw else size)
        except TopicSealed:
            self._settle(w, size)
            self._fail(w, C.SegmentIsSealed(request_id=rid, segment=w.segment, server_stack_trace="", offset=last))
        except NotFound:
            self._settle(w, size)
            self._fail(w, C.NoSuchSegment(request_id=rid, segment=w.segment, server_stack_trace="", offset=last))
        except PayloadTooLarge as exc:
            self._settle(w, size)
            self._fail(w, C.ErrorMessage(request_id=rid, segment=w.segment, message=exc.message, error_code=0))
            raise PravegaProtocolError(exc.message) from None
        except StorageError as exc:
            self._settle(w, size)
            raise PravegaProtocolError(f"storage failed: {exc}") from None

    def _settle(self, w: _Writer, size: int, unsettled: bool = False) -> None:
        w.inflight -= 1
        self.unacked_bytes -= size
        if unsettled:  # counted by _store as not applied yet
            self.state.end_append((w.stream_id, w.topic_id, w.partition), w.producer, size)
        self._on_ack()

    def _acked(self, w: _Writer, rid: int, last: int, size: int, part, end: list[int | None], outcome) -> None:
        later = end == [None]  # applied after the call returned (_store)
        self._settle(w, size, later)
        if self._write_failed(outcome):
            return
        prev, w.last_acked = w.last_acked, max(w.last_acked, last)
        # Upstream: the length after *this* append, not after later blocks already accepted.
        if later:  # the partition may hold later appends (other gateways') by now: from the real offsets
            offset = _end_after(part, outcome, w.raw)
        elif end:
            offset = end[0]
        else:  # fired inside the call (no partition does): the end now
            offset = raw_end(part) if w.raw else part.byte_end
        self.send(C.DataAppended(writer_id=uuid.UUID(w.producer), event_number=last, previous_event_number=prev,
                                 request_id=rid, current_segment_write_offset=offset))
        if w.inflight == 0 and w.deferred:
            self._flush_deferred(w)

    def _write_failed(self, outcome) -> bool:
        """True when an ``on_durable`` outcome must not be acknowledged: the session is
        gone, or the write failed -- then the client must not be told it is stored, and
        closing the connection makes it reconnect and learn the truth from AppendSetup."""
        if self.closed:
            return True
        if isinstance(outcome, BaseException):
            self.close_after_flush = True
            self._on_ack()
            return True
        return False

    def _fail(self, w: _Writer, reply) -> None:
        """An error for this writer: after the blocks ahead of it are acked (upstream
        AppendProcessor), then the writer must set up again."""
        w.deferred = (w.deferred or []) + [reply]
        if w.inflight == 0:
            self._flush_deferred(w)

    def _flush_deferred(self, w: _Writer) -> None:
        for reply in w.deferred or ():
            self.send(reply)
        w.deferred = []
        if self.writers.get(uuid.UUID(w.producer)) is w:
            del self.writers[uuid.UUID(w.producer)]

    def _append_txn(self, w: _Writer, ev: Append, payloads) -> None:
        txn = self.state.get(w.txn)
        try:
            if txn is None:
                raise TxnError("transaction is gone")
            self.state.add_events(txn, w.partition, ev.writer_id, ev.last_event_number, [bytes(p) for p in payloads])
        except TxnError as exc:
            self._fail(w, C.NoSuchSegment(request_id=ev.request_id, segment=w.segment,
                                          server_stack_trace=str(exc), offset=ev.last_event_number))
            return
        prev, w.last_acked = w.last_acked, max(w.last_acked, ev.last_event_number)
        self.send(C.DataAppended(writer_id=ev.writer_id, event_number=ev.last_event_number, previous_event_number=prev,
                                 request_id=ev.request_id, current_segment_write_offset=-1))

    def _conditional_append(self, cmd) -> None:
        w = self._writer(cmd.writer_id)
        if not self._recheck(w, cmd.request_id):
            return
        part = self._writer_part(w, cmd.request_id, cmd.event_number)
        if part is None:
            return
        if part.byte_end + self._unsettled_bytes(w) != cmd.expected_offset:
            self.send(C.ConditionalCheckFailed(writer_id=cmd.writer_id, event_number=cmd.event_number,
                                               request_id=cmd.request_id))
            return
        self._store(w, cmd.request_id, cmd.event_number, 1, [cmd.event], len(cmd.event) + 8)

    def _conditional_block(self, cmd) -> None:
        """Raw bytes at an expected offset (pravega.md section 5.5): a byte stream's
        write, or one part of a large event on a transient segment."""
        w = self._writer(cmd.writer_id)
        if not self._recheck(w, cmd.request_id):
            return
        if w.transient is not None:
            return self._transient_part(w, cmd)
        part = self._writer_part(w, cmd.request_id, cmd.event_number)
        if part is None:
            return
        topic = self.broker.get_topic(w.stream_id, w.topic_id)
        if not w.raw:
            if part.next_offset != 0 or self._unsettled_bytes(w) or not self.views.mark_bytes(topic):
                # An event stream with events in it cannot become a byte stream.
                self.send(C.ConditionalCheckFailed(writer_id=cmd.writer_id, event_number=cmd.event_number,
                                                   request_id=cmd.request_id))
                return
            w.raw = True
        if raw_end(part) + self._unsettled_bytes(w) != cmd.expected_offset:
            self.send(C.ConditionalCheckFailed(writer_id=cmd.writer_id, event_number=cmd.event_number,
                                               request_id=cmd.request_id))
            return
        if cmd.data:
            self._store(w, cmd.request_id, cmd.event_number, 1, [cmd.data], len(cmd.data))
        else:  # nothing to store; acknowledge in order behind what is in flight
            self._store_nothing(w, cmd.request_id, cmd.event_number)

    def _store_nothing(self, w: _Writer, rid: int, last: int) -> None:
        prev, w.last_acked = w.last_acked, max(w.last_acked, last)
        part = self.broker.partition(w.stream_id, w.topic_id, w.partition)
        end = (raw_end(part) if w.raw else part.byte_end) + self._unsettled_bytes(w)
        self.send(C.DataAppended(writer_id=uuid.UUID(w.producer), event_number=last, previous_event_number=prev,
                                 request_id=rid, current_segment_write_offset=end))

    def _unsettled_bytes(self, w: _Writer) -> int:
        """What this gateway's appends to the writer's partition that the cluster has not
        stored yet will add to its end (always 0 with the embedded log; state.py)."""
        return self.state.unsettled_bytes.get((w.stream_id, w.topic_id, w.partition), 0)

    # -- large events: transient segments merged into their parent -------------------------
    def _create_transient(self, cmd) -> None:
        rid = cmd.request_id
        name, topic = self._target(rid, cmd.parent_segment)
        if name.txn is not None or name.transient is not None:
            raise _Reply(C.OperationUnsupported(request_id=rid, operation_name="transient of a transient",
                                                server_stack_trace=""))
        if len(self.transients) >= MAX_TRANSIENTS:
            raise _Reply(C.ErrorMessage(request_id=rid, segment=cmd.parent_segment, error_code=-1,
                                        message=f"{MAX_TRANSIENTS} large events are unmerged on this connection"))
        seg = f"{cmd.parent_segment}#transient.{cmd.writer_id.hex}.{uuid.uuid4().hex}"
        self.state.transients[seg] = bytearray()
        self.transients.add(seg)
        self.send(C.SegmentCreated(request_id=rid, segment=seg))

    def _transient_part(self, w: _Writer, cmd) -> None:
        held = self.state.transients.get(w.transient)
        if held is None or len(held) != cmd.expected_offset or len(held) + len(cmd.data) > MAX_TRANSIENT_BYTES:
            self.send(C.ConditionalCheckFailed(writer_id=cmd.writer_id, event_number=cmd.event_number,
                                               request_id=cmd.request_id))
            return
        held += cmd.data
        prev, w.last_acked = w.last_acked, max(w.last_acked, cmd.event_number)
        self.send(C.DataAppended(writer_id=cmd.writer_id, event_number=cmd.event_number, previous_event_number=prev,
                                 request_id=cmd.request_id, current_segment_write_offset=len(held)))

    def _merge(self, cmd) -> None:
        rid = cmd.request_id
        name, topic = self._target(rid, cmd.target)
        held = self.state.transients.pop(cmd.source, None)
        self.transients.discard(cmd.source)
        if held is None:
            raise _Reply(C.NoSuchSegment(request_id=rid, segment=cmd.source, server_stack_trace="", offset=-1))
        try:
            payloads = split_events(bytes(held))
        except PravegaProtocolError:
            raise _Reply(C.ErrorMessage(request_id=rid, segment=cmd.source, message="merged bytes are not event "
                                        "frames", error_code=0)) from None
        part = self._partition(topic, name.number)
        applied: list[bool] = []  # once the call returned: Partition.is_applied of its result
        try:
            result = self.broker.append(topic.stream_id, topic.id, [AppendInput(bytes(p)) for p in payloads],
                                        partition=name.number, on_durable=partial(self._merged, rid, cmd, part,
                                                                                  applied), origin=ORIGIN)
            applied.append(part.is_applied(result))
        except TopicSealed:
            raise _Reply(C.SegmentIsSealed(request_id=rid, segment=cmd.target, server_stack_trace="",
                                           offset=-1)) from None

    def _merged(self, rid: int, cmd, part, applied: list[bool], outcome) -> None:
        if self._write_failed(outcome):
            return
        # Applied after the call returned: the partition may hold later appends (other
        # gateways') by now, so the end right after this one, from its real offsets.
        end = _end_after(part, outcome, False) if applied == [False] else part.byte_end
        self.send(C.SegmentsMerged(request_id=rid, target=cmd.target, source=cmd.source,
                                   new_target_write_offset=end))

    # -- reads -------------------------------------------------------------------------------
    def read(self, cmd, parked: bool = False) -> Park | None:
        rid, seg = cmd.request_id, cmd.segment
        try:
            if parked and self.gate.on:  # waited at the tail: is it still allowed?
                self.gate.check(cmd, "segment", READ)
            name, topic = self._target(rid, seg)
        except _Reply as r:
            self.send(r.reply)
            return None
        part = self._partition(topic, name.number)
        raw = self.views.is_bytes(topic)
        end = durable_end(part, raw)  # readers get durable bytes only (issue 30; reads.py)
        start = self.views.start(topic, part, name.number, raw)
        offset = cmd.offset
        if offset < start:
            self.send(C.SegmentIsTruncated(request_id=rid, segment=seg, start_offset=start, server_stack_trace="",
                                           offset=offset))
            return None
        if offset >= end:
            if topic.sealed or self.broker.get_topic(topic.stream_id, topic.id).sealed:
                self.send(C.SegmentRead(segment=seg, offset=offset, at_tail=True, end_of_segment=True, data=b"",
                                        request_id=rid))
                return None
            if not parked:
                return Park(cmd, (topic.stream_id, topic.id, name.number))
            self.send(C.SegmentRead(segment=seg, offset=offset, at_tail=True, end_of_segment=False, data=b"",
                                    request_id=rid))
            return None
        try:
            data = (read_raw if raw else read_events)(part, offset, min(clamp(cmd.suggested_length), end - offset))
        except InvalidOffset:  # retention moved the start between the check and the read
            start = self.views.start(topic, part, name.number, raw)
            self.send(C.SegmentIsTruncated(request_id=rid, segment=seg, start_offset=start, server_stack_trace="",
                                           offset=offset))
            return None
        at_tail = offset + len(data) >= end
        self.counters["bytes_out"].inc(LISTENER, amount=len(data))  # the byte view: frames included
        if not raw:  # a byte-stream read has no events to count
            self.counters["messages_out"].inc(LISTENER, amount=events_started(part, offset, len(data)))
        self.send(C.SegmentRead(segment=seg, offset=offset, at_tail=at_tail, end_of_segment=at_tail and topic.sealed,
                                data=data, request_id=rid))
        return None

    def _segment_info(self, cmd) -> None:
        rid, seg = cmd.request_id, cmd.segment_name
        name, topic = self._target(rid, seg)
        part = self._partition(topic, name.number)
        if name.txn is not None:
            txn = self.state.get(uuid.UUID(name.txn))
            held = sum(8 + len(p) for p in txn.events.get(name.number, ())) if txn else 0
            self.send(C.StreamSegmentInfo(request_id=rid, segment_name=seg, exists=txn is not None, is_sealed=False,
                                          is_deleted=False, last_modified=self._clock_ms(), write_offset=held,
                                          start_offset=0))
            return
        raw = self.views.is_bytes(topic)
        end = durable_end(part, raw)  # the length readers may read to (issue 30)
        start = self.views.start(topic, part, name.number, raw)
        self.send(C.StreamSegmentInfo(request_id=rid, segment_name=seg, exists=True, is_sealed=topic.sealed,
                                      is_deleted=False, last_modified=self._clock_ms(), write_offset=end,
                                      start_offset=start))

    def _seal(self, cmd) -> None:
        rid, seg = cmd.request_id, cmd.segment
        name, topic = self._target(rid, seg)
        if topic.partitions_count != 1:  # a Ferry topic seals whole; one segment of many cannot
            raise _Reply(C.OperationUnsupported(request_id=rid, operation_name="SealSegment of one of several "
                                                "segments (seal the stream)", server_stack_trace=""))
        self.broker.topic_state.seal_topic(topic.stream_id, topic.id)
        self.send(C.SegmentSealed(request_id=rid, segment=seg))

    def _truncate(self, cmd) -> None:
        rid, seg = cmd.request_id, cmd.segment
        name, topic = self._target(rid, seg)
        offset = cmd.truncation_offset
        if self.views.is_bytes(topic):
            part = self._partition(topic, name.number)
            if not 0 <= offset <= raw_end(part):
                raise _Reply(C.ErrorMessage(request_id=rid, segment=seg, message=f"offset {offset} is past the end",
                                            error_code=0))
            offset = self.views.event_pos_of_raw(part, offset)
        try:
            self.broker.topic_state.truncate_partition(topic.stream_id, topic.id, name.number, offset)
        except InvalidOffset as exc:
            raise _Reply(C.ErrorMessage(request_id=rid, segment=seg, message=exc.message, error_code=0)) from None
        self.send(C.SegmentTruncated(request_id=rid, segment=seg))

    def _get_attribute(self, cmd) -> None:
        # Java writers read their last event number as an attribute keyed by writer id.
        name, topic = self._target(cmd.request_id, cmd.segment_name)
        stored = self._partition(topic, name.number).producer_sequence(str(cmd.attribute_id))
        self.send(C.SegmentAttribute(request_id=cmd.request_id, value=NULL_EVENT_NUMBER if stored is None else stored))


def _end_after(part, outcome, raw: bool) -> int:
    """The segment's length right after the append ``outcome`` (an AppendResult with
    the real offsets, gateway/jetstream_store/partition.py ``on_durable``) in the event view, or the raw
    one; the current end for a duplicate or an offset retention already dropped."""
    nxt = outcome.base_offset + outcome.count
    if outcome.count and not outcome.duplicate and part.first_offset <= nxt <= part.next_offset:
        return raw_pos_of(part, nxt) if raw else part.byte_pos_of(nxt)
    return raw_end(part) if raw else part.byte_end


__all__ = ["OLDEST_COMPATIBLE_VERSION", "Park", "SegmentStoreSession", "WIRE_VERSION"]
