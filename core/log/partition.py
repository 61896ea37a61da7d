"""A partition of the durable log: segments, pending appends, group commit.

Theory of operation
-------------------
``append`` is synchronous and never touches the disk: it assigns offsets and
one append timestamp (never below the previous one), encodes the records
(``core.record``), keeps them in a :class:`PendingCall` where reads see them at
once, and calls the flusher's ``wake()`` when the partition turns dirty.

The flusher (``core/flusher.py``, the one trio task in core) runs rounds: for
each dirty partition ``begin_flush`` takes the pending calls (up to what fits
the active segment) and prepares one batch; the job's ``run`` does one
``os.write`` and one ``fdatasync`` in a worker thread; ``complete_flush`` then
commits the index entries and fires each call's ``on_durable`` with its
:class:`AppendResult`, in append order. A failed write fails every pending
call with :class:`StorageError` and leaves the partition read-only: nothing is
acked that is not durable. ``flush()`` does the same synchronously.

State lives in the trio thread; the worker thread only sees a ``FlushJob``.
Storage format and the durability promise: docs/storage.md.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Callable, Sequence

from ..errors import CorruptSegment, InvalidArgument, PartitionNotFound, PayloadTooLarge, StorageError
from ..message import now_us, uuid7
from ..record import encode_record
from . import reads
from .batch import (
    BATCH_HEADER_SIZE, FLAG_PRODUCER_TIMES, FLAG_SNAPSHOT, batch_head, check_producer_id, encode_producers,
)  # fmt: skip
from .encoded import stamp_records
from .config import MAX_APPEND_BYTES, MAX_BATCH_BYTES, LogConfig
from .durable import DurableEnd
from .index import T_MAXTS, TIME_ENTRY
from .pending import FlushJob, PendingCall, index_entries, written_producers
from .producers import RecentCalls, Table, expire_idle, is_expired, remember
from .readbatch import ReadBatch
from .recovery import recover_segments
from .results import AppendInput, AppendResult, OnDurable, _fast_result, _fire, _nothing
from .salvage import TEMP_SUFFIX as SALVAGE_TEMP, Quarantine
from .segment import LOG_SUFFIX, Segment, fsync_dir, make_dirs

log = logging.getLogger("ferry.log")

_SEQ_MIN, _SEQ_MAX = -(1 << 63), (1 << 63) - 1  # producer sequences are stored as i64


class Partition:
    """One partition directory; see the module docstring. Synchronous, trio-thread only.

    Reads and lookups are the functions of ``reads.py`` over the segments and
    pending calls; damaged segments go to the partition's :class:`Quarantine`."""

    incarnation = None  # what the store tied the partition to (Store.incarnation, Broker.resync)

    def __init__(self, path: Path, partition_id: int, cfg: LogConfig, clock: Callable[[], int]) -> None:
        self.path = path
        self.partition_id = partition_id
        self.cfg = cfg
        self._clock = clock
        self._segments: list[Segment] = []
        self._calls: list[PendingCall] = []
        self._ready: list[tuple[OnDurable, AppendResult]] = []  # duplicate acks with nothing ahead
        self._inflight: FlushJob | None = None
        self._next_offset = 0
        self._byte_end = 0
        self._last_ts = 0
        self._pending_bytes = 0
        self._pending_records = 0
        self._producers: Table = {}  # id -> (seq, write µs), write order; includes pending appends
        self._durable_producers: Table = {}  # as of the last batch written
        self._recent_calls = RecentCalls(cfg.max_producers)  # where producers' last calls start
        self._ttl_us = cfg.producer_ttl_ms * 1000  # idle producers expire (core/log/producers.py)
        self._wake: Callable[[], None] = _nothing
        self._signalled = False
        self._failed: StorageError | None = None
        self._closed = False
        self.fsync_count = 0  # fdatasyncs of batches (tests and metrics)
        self.write_count = 0  # batches written
        self.torn_bytes = 0  # bytes cut off the tail at open
        self._quarantine = Quarantine(path, partition_id, cfg.fsyncs)  # damaged segments (salvage.py)
        self.durable = DurableEnd()  # the read bound of durable-only readers, and their waiters (durable.py)
        # After salvaging the active segment its first batch may not hold the
        # dedup snapshot any more: the next batch written carries one.
        self._snapshot_due = False

    # -- open / recovery -----------------------------------------------------
    @classmethod
    def open(
        cls, path: Path | str, partition_id: int, cfg: LogConfig, *, clock: Callable[[], int] | None = None
    ) -> "Partition":
        """Open (creating if needed) a partition directory and recover it: torn
        tail cut, indexes rebuilt where needed, damaged segments salvaged (moved
        to quarantine/, good batches kept; salvage.py), dedup table replayed.
        ``clock`` returns µs (tests). Raises StorageError when the directory
        cannot be read or written."""
        part = cls(Path(path), partition_id, cfg, clock or now_us)
        try:
            make_dirs(part.path, cfg.fsyncs)  # stream/topic/partition dirs: durable names
            part._recover()
        except OSError as exc:
            part._close_files()
            raise StorageError(f"cannot open partition at {part.path}: {exc}", errno=exc.errno) from exc
        return part

    def _recover(self) -> None:
        for leftover in self.path.glob("*" + SALVAGE_TEMP):  # a salvage cut short by a crash
            leftover.unlink()
        found = recover_segments(self.path, self.cfg.max_producers, self.cfg.fsyncs, self._quarantine.salvage)
        self._segments = found.segments
        self.torn_bytes += found.torn_bytes
        self._snapshot_due = found.snapshot_due
        self._next_offset, self._byte_end = found.segments[-1].next_offset, found.segments[-1].end_byte
        self._last_ts = max((s.times.last()[T_MAXTS] for s in self._segments if s.times.count), default=0)
        expire_idle(found.producers, self._clock(), self._ttl_us)  # idle past the TTL while we were down, too
        self._durable_producers, self._producers = found.producers, dict(found.producers)
        self.durable.reset(self._next_offset, self._byte_end)  # all that recovery kept is on disk

    # -- wiring ------------------------------------------------------------------
    def set_wakeup(self, wake: Callable[[], None]) -> None:
        """Install the flusher's ``wake()``, called each time the partition turns dirty."""
        self._wake = wake
        self._signalled = False
        if self.needs_flush:
            self._signal()

    def _signal(self) -> None:
        if not self._signalled:
            self._signalled = True
            self._wake()

    # -- state -------------------------------------------------------------------
    @property
    def pending_bytes(self) -> int:
        """Record bytes appended but not yet written (in-flight writes included)."""
        return self._pending_bytes

    @property
    def over_limit(self) -> bool:
        """True while ``pending_bytes`` exceeds ``cfg.max_pending_bytes``: appends
        still succeed, but drivers should stop reading from their peers until
        it clears (backpressure; nothing is dropped)."""
        return self._pending_bytes > self.cfg.max_pending_bytes

    @property
    def needs_flush(self) -> bool:
        """Something for the flusher: pending calls (and no write in flight), or acks to fire."""
        return bool(self._ready) or (bool(self._calls) and self._inflight is None and self._failed is None)

    @property
    def durable_next_offset(self) -> int:
        """The offset just past the last record written to disk (and fsynced,
        unless the policy is ``never``): durable-only readers stay below it (``durable``)."""
        return self.durable.offset

    @property
    def failed(self) -> StorageError | None:
        """The write error that made the partition read-only, if any."""
        return self._failed

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def size_bytes(self) -> int:
        """Bytes held: segment files plus pending record bytes."""
        return sum(s.size for s in self._segments) + self._pending_bytes

    @property
    def record_count(self) -> int:
        return sum(s.index.count for s in self._segments) + self._pending_records

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def salvaged(self) -> int:
        """Damaged segments quarantined and salvaged (tests, metrics)."""
        return self._quarantine.count

    def producer_sequence(self, producer_id: str) -> int | None:
        """The last sequence stored (or pending) for a producer, None if unknown
        or idle past ``cfg.producer_ttl_ms``."""
        entry = self._producers.get(producer_id)
        return None if entry is None or is_expired(entry, self._clock(), self._ttl_us) else entry[0]

    def producer_call_offset(self, producer_id: str, first: int, last: int) -> int | None:
        """The base offset of the producer's call of sequences ``first``..``last``, if it is
        one of its last five this process took (core/log/producers.py ``RecentCalls``), else
        None. It may still be pending: the caller answers once what is pending is durable."""
        return self._recent_calls.find(producer_id, first, last)

    # -- bounds and reads (reads.py) ------------------------------------------------------
    @property
    def next_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._next_offset

    @property
    def first_offset(self) -> int:
        """Oldest offset still held (== next_offset when the partition is empty)."""
        return reads.first_offset(self._segments, self._calls, self._next_offset)

    @property
    def last_offset(self) -> int | None:
        """Newest offset held, None when the partition is empty."""
        return self._next_offset - 1 if self._next_offset > self.first_offset else None

    @property
    def byte_start(self) -> int:
        """Pravega byte position of the oldest record still held."""
        return reads.byte_start(self._segments, self._calls, self._byte_end)

    @property
    def byte_end(self) -> int:
        """Length of the Pravega byte view: each record counts 8 + payload bytes."""
        return self._byte_end

    def read(self, offset: int, count: int, max_bytes: int | None = None) -> ReadBatch:
        """``reads.read``; raises what it raises, CorruptSegment (a sealed segment failed
        its CRC: quarantined, later reads skip it) and StorageError (the disk failed)."""
        return reads.read(self._segments, self._calls, self.first_offset, self._next_offset, self.partition_id,
                          self._read_segment, offset, count, max_bytes)

    def _read_segment(self, seg: Segment, off: int, count: int, budget: int, need_one: bool):
        try:
            try:
                return seg.read(off - seg.base_offset, count, budget, need_one)
            except CorruptSegment as exc:
                if not (seg.sealed and self._quarantine.rebuild_indexes(seg, exc)):
                    raise
            return seg.read(off - seg.base_offset, count, budget, need_one)  # the log was fine
        except CorruptSegment as exc:
            self._replace_damaged(seg, exc)
            raise
        except OSError as exc:
            raise StorageError(f"reading {seg.path(LOG_SUFFIX)} failed: {exc}", errno=exc.errno) from exc

    def _replace_damaged(self, seg: Segment, exc: BaseException) -> None:
        """A sealed segment's log failed its checks: its good batches take its place."""
        if seg.sealed and seg in self._segments:  # the active one is checked at open
            i = self._segments.index(seg)
            self._segments[i : i + 1] = self._quarantine.salvage(seg, exc, seg.next_offset)[0]

    def offset_for_timestamp(self, ts_us: int) -> int:
        """First offset appended at or after ``ts_us``; ``next_offset`` when none (``reads.py``)."""
        return reads.offset_for_timestamp(self._segments, self._calls, self._next_offset, ts_us)

    def offset_for_byte_pos(self, pos: int) -> int:
        """The offset of the record whose Pravega event covers byte ``pos`` (``reads.py``)."""
        return reads.offset_for_byte_pos(self._segments, self._calls, self.byte_start, self._byte_end,
                                         self._next_offset, pos)

    def byte_pos_of(self, offset: int) -> int:
        """Pravega byte position where record ``offset`` starts (``reads.py``)."""
        return reads.byte_pos_of(self._segments, self._calls, self.first_offset, self._next_offset,
                                 self._byte_end, offset)

    def segment_positions(self) -> list[tuple[int, int, int]]:
        """``(base_offset, records, file bytes)`` of each segment (diagnostics, CLI)."""
        return [(s.base_offset, s.index.count, s.size) for s in self._segments]

    # -- append --------------------------------------------------------------------
    def is_applied(self, result: AppendResult) -> bool:
        """Is the append that returned ``result`` applied: readable at its offsets, counted in
        ``next_offset`` / ``byte_end``? Always here (this log applies before returning). A
        partition that applies later (gateway/jetstream_store/partition.py) says False:
        ``result`` is a guess then, and ``on_durable`` gets the real offsets."""
        return True

    def append(
        self,
        items: Sequence[AppendInput],
        *,
        producer: tuple[str, int] | None = None,
        on_durable: OnDurable | None = None,
    ) -> AppendResult:
        """Append ``items`` as consecutive records; readable at once.

        ``producer=(id, seq)``: when ``seq`` is not above the last one stored for
        ``id`` nothing is written and the result has ``duplicate=True``.
        ``on_durable`` later gets the result once the records are durable under
        the fsync policy (a duplicate's once everything before it is), or the
        StorageError if the write failed. Raises InvalidArgument (no items, bad
        producer or field), PayloadTooLarge, StorageError (partition failed or closed)."""
        if self._failed is not None or self._closed:
            raise self._unwritable()
        if not items:
            raise InvalidArgument("no messages to append")
        if producer is not None and self._is_duplicate(producer):
            return self._duplicate(on_durable)
        ts = self._append_time()
        base = self._next_offset
        if len(items) == 1:  # the common case, without the loop's overhead
            item = items[0]
            payload = item.payload
            records = [encode_record(item.id or uuid7(), base, ts, item.origin_timestamp or ts, item.headers, payload)]
            nbytes = len(records[0])
            events = 8 + len(payload)
        else:
            records = [
                encode_record(item.id or uuid7(), off, ts, item.origin_timestamp or ts, item.headers, item.payload)
                for off, item in enumerate(items, base)
            ]
            nbytes = sum(map(len, records))
            events = 8 * len(records) + sum(len(item.payload) for item in items)
            if nbytes > MAX_APPEND_BYTES:
                raise PayloadTooLarge(f"one append of {nbytes} bytes exceeds {MAX_APPEND_BYTES}")
        return self._add_call(base, ts, len(records), records, None, nbytes, events, producer, on_durable)

    def append_encoded(
        self,
        block: bytearray,
        count: int,
        *,
        producer: tuple[str, int] | None = None,
        on_durable: OnDurable | None = None,
    ) -> AppendResult:
        """Append ``count`` records that arrive already in the stored layout
        (``core.record``), back to back in ``block``: what :meth:`append` would
        store for the same messages, without building them one by one.

        The partition takes ``block`` over: offsets, the append timestamp,
        UUIDv7 ids where the id is 0, origin timestamps where 0, and checksums
        are written into it in one pass (``core.log.encoded.stamp_records``),
        and it is kept as one chunk until written. Dedup, ``on_durable`` and
        visibility are those of :meth:`append`. Raises what ``stamp_records``
        raises for a malformed block (nothing is stored then), InvalidArgument
        (bad producer), PayloadTooLarge (over MAX_APPEND_BYTES), StorageError."""
        if self._failed is not None or self._closed:
            raise self._unwritable()
        if len(block) > MAX_APPEND_BYTES:
            raise PayloadTooLarge(f"one append of {len(block)} bytes exceeds {MAX_APPEND_BYTES}")
        if producer is not None and self._is_duplicate(producer):
            return self._duplicate(on_durable)
        ts = self._append_time()
        base = self._next_offset
        sizes, plens = stamp_records(block, count, base, ts)
        return self._add_call(base, ts, count, [block], (sizes, plens), len(block), 8 * count + sum(plens),
                              producer, on_durable)

    def _add_call(
        self, base: int, ts: int, n: int, records: list, block_sizes: tuple[list[int], list[int]] | None,
        nbytes: int, events: int, producer: tuple[str, int] | None, on_durable: OnDurable | None,
    ) -> AppendResult:  # fmt: skip
        """Queue one call's records (``block_sizes``: sizes and payload lengths of an encoded block)."""
        result = _fast_result(self.partition_id, base, n, ts)
        byte_pos = self._byte_end
        self._byte_end = byte_end = byte_pos + events
        call = PendingCall(base, ts, byte_pos, byte_end, records, nbytes, producer, on_durable, result,
                           None if block_sizes is None else block_sizes[0])
        if block_sizes is not None:
            call.plens = block_sizes[1]
        self._calls.append(call)
        self._next_offset = base + n
        self._last_ts = ts
        self._pending_bytes += nbytes
        self._pending_records += n
        if producer is not None:
            remember(self._producers, producer[0], producer[1], ts, self.cfg.max_producers)
            self._recent_calls.add(producer[0], producer[1], base, n)
        if not self._signalled:
            self._signalled = True
            self._wake()
        return result

    def _append_time(self) -> int:
        """The timestamp of the next append: the clock, never behind the last
        append's (the wall clock may step back; stored time stays monotonic)."""
        ts = self._clock()
        return ts if ts >= self._last_ts else self._last_ts

    def _is_duplicate(self, producer: tuple[str, int]) -> bool:
        pid, seq = producer
        check_producer_id(pid)
        if isinstance(seq, bool) or not isinstance(seq, int) or not _SEQ_MIN <= seq <= _SEQ_MAX:
            raise InvalidArgument(f"producer sequence must be an i64, got {seq!r}")
        last = self._producers.get(pid)
        if last is None or seq > last[0]:
            return False
        # Refused unless the producer was idle past its TTL: then it starts over.
        # The clock is read only here, on the rare would-be duplicate (is_expired, inlined).
        ttl = self._ttl_us
        return not ttl or last[1] >= self._clock() - ttl

    def ack_after_pending(self, on_durable: OnDurable | None) -> AppendResult:
        """A send whose every message was a duplicate (core/log/iddedup.py): nothing is
        appended; ``on_durable`` fires once what is pending (maybe the originals) is durable."""
        return self._duplicate(on_durable)

    def _duplicate(self, on_durable: OnDurable | None) -> AppendResult:
        result = AppendResult(self.partition_id, self._next_offset, 0, self._last_ts, duplicate=True)
        if on_durable is not None:
            if self._calls:  # ack after the last pending call, which may hold the original
                last = self._calls[-1]
                if last.followers is None:
                    last.followers = []
                last.followers.append((on_durable, result))
            else:
                self._ready.append((on_durable, result))
                self._signal()
        return result

    def _unwritable(self) -> StorageError:
        if self._failed is not None:
            return StorageError(f"partition {self.partition_id} is read-only after a write failure: {self._failed}")
        return StorageError(f"partition {self.partition_id} is closed")

    # -- flushing --------------------------------------------------------------------
    def fire_ready_acks(self) -> None:
        """Fire the acks of duplicates that had nothing pending ahead of them."""
        if self._ready:
            ready, self._ready = self._ready, []
            for callback, result in ready:
                _fire(callback, result)
        if not self._calls:
            self._signalled = False

    def begin_flush(self, fsync: bool = True) -> FlushJob | None:
        """Take pending calls into a :class:`FlushJob` (None if there is nothing
        to write, a write is in flight, or the partition failed). Rolls to a new
        segment first when the batch would not fit the active one."""
        calls = self._calls
        if self._inflight is not None or not calls or self._failed is not None or self._closed:
            return None
        active = self._segments[-1]
        first = calls[0]
        seg_bytes = self.cfg.segment_bytes
        roll = active.size > 0 and active.size + BATCH_HEADER_SIZE + first.nbytes > seg_bytes
        seg_size = 0 if roll else active.size
        cap = min(seg_bytes - seg_size, MAX_BATCH_BYTES) - BATCH_HEADER_SIZE
        n, total = 1, first.nbytes
        while n < len(calls) and total + calls[n].nbytes <= cap:
            total += calls[n].nbytes
            n += 1
        taken = calls[:n]
        job = FlushJob()
        job.ncalls, job.records_len, job.fsync = n, total, fsync
        job.producers = written_producers(taken)
        flags, entries = 0, job.producers
        last_ts = taken[-1].timestamp
        if roll or self._snapshot_due:
            # The first batch of a segment carries the whole table, so recovery only
            # ever replays the active segment (docs/storage.md, "Producer dedup").
            table = dict(self._durable_producers)
            for pid, seq, ts in job.producers:
                remember(table, pid, seq, ts, self.cfg.max_producers)
            expire_idle(table, last_ts, self._ttl_us)
            flags, entries = FLAG_SNAPSHOT, [(pid, seq, ts) for pid, (seq, ts) in table.items()]
        blob, nprod = encode_producers(entries)
        if nprod:
            flags |= FLAG_PRODUCER_TIMES
        job.index_data = index_entries(taken, seg_size + BATCH_HEADER_SIZE + len(blob))
        job.end_byte = taken[-1].byte_end
        seg_base = first.base_offset if roll else active.base_offset
        job.nrecords = count = sum(c.count for c in taken)
        job.time_data = TIME_ENTRY.pack(last_ts, seg_size, first.base_offset - seg_base, count)
        job.head = batch_head(
            base_offset=first.base_offset, base_byte_pos=first.byte_pos, max_timestamp=last_ts, count=count,
            producers=blob, producer_count=nprod, flags=flags, records_len=total,
        )  # fmt: skip
        job.batch_len = len(job.head) + total
        job.chunks = [record for call in taken for record in call.records]
        if roll:
            job.sealing, job.directory = active, self.path
            job.new_base, job.new_start_byte = first.base_offset, first.byte_pos
        else:
            job.segment = active
        self._inflight = job
        self._signalled = n < len(calls)
        if self._signalled:  # a backlog larger than one batch: ask for another round
            self._wake()
        return job

    def complete_flush(self, job: FlushJob) -> None:
        """Apply a finished job (trio thread): commit the batch and fire its
        callbacks in order, or fail the partition. Idempotent."""
        if job.completed:
            return
        job.completed = True
        if self._inflight is job:
            self._inflight = None
        taken = self._calls[: job.ncalls]
        del self._calls[: job.ncalls]
        self._pending_bytes -= job.records_len
        self._pending_records -= job.nrecords
        if job.error is not None:
            self._fail(job, taken)
            return
        if job.sealing is not None:
            try:
                job.sealing.seal()
            except OSError:  # still readable through its in-memory tables
                log.exception("could not map the indexes of sealed segment %s", job.sealing.path(LOG_SUFFIX))
            self._segments.append(job.new_segment)
        job.target.commit(job.batch_len, job.index_data, job.time_data, job.end_byte)
        moved = self.durable.advance(job.target.next_offset, job.end_byte)  # set before the acks read it
        self._snapshot_due = False
        for pid, seq, ts in job.producers:
            remember(self._durable_producers, pid, seq, ts, self.cfg.max_producers)
        if self._ttl_us:  # off the append path: once per batch, "now" = its newest append time
            now = taken[-1].timestamp
            expire_idle(self._durable_producers, now, self._ttl_us)
            expire_idle(self._producers, now, self._ttl_us)
        self.write_count += 1
        self.fsync_count += job.fsync
        for call in taken:
            self._ack(call, call.result)
        if moved:  # readers after the writers' acks: no reader sees a record its writer has not heard of
            self.durable.wake()

    def _ack(self, call: PendingCall, outcome: object) -> None:
        if call.callback is not None:
            _fire(call.callback, outcome)
        for callback, result in call.followers or ():
            _fire(callback, outcome if isinstance(outcome, BaseException) else result)

    def _fail(self, job: FlushJob, taken: list[PendingCall]) -> None:
        cause = job.error
        err = StorageError(f"writing partition {self.partition_id} at {self.path} failed: {cause}",
                           errno=getattr(cause, "errno", None))  # fmt: skip
        err.__cause__ = cause
        self._failed = err
        log.error("partition %d at %s is read-only: %s", self.partition_id, self.path, cause)
        try:  # best effort: drop a partial batch now; recovery would cut it anyway
            if job.new_segment is not None:
                job.new_segment.remove()
            elif job.target is not None and job.target.fd >= 0:
                os.ftruncate(job.target.fd, job.target.size)
        except OSError:
            log.warning("could not cut the failed write in %s", self.path)
        rest, self._calls = self._calls, []
        active = self._segments[-1]
        self._next_offset, self._byte_end = active.next_offset, active.end_byte
        self._pending_bytes = self._pending_records = 0
        self._producers = dict(self._durable_producers)
        for call in taken + rest:
            self._ack(call, err)

    def _settle(self) -> None:
        """Wait for a write in flight (blocking) and apply it."""
        job = self._inflight
        if job is not None:
            job.wait()
            self.complete_flush(job)

    def flush(self, fsync: bool = True) -> None:
        """Write (and with ``fsync``, fdatasync) everything pending now, firing
        the callbacks; for the CLI and shutdown. Waits for a write the flusher
        has in flight. Raises StorageError if a write fails."""
        if self._closed:
            return
        self._settle()
        self.fire_ready_acks()
        while (job := self.begin_flush(fsync)) is not None:
            job.run()
            self.complete_flush(job)
            if job.error is not None:
                raise self._failed
        self._signalled = False

    # -- retention and lifecycle ------------------------------------------------------
    def enforce_retention(self, now_us: int, max_age_us: int, max_bytes: int) -> int:
        """Delete whole sealed segments, oldest first: those whose newest record
        is more than ``max_age_us`` old, then more while the partition is over
        ``max_bytes`` (0 disables either rule). The active segment is never
        deleted. Returns the number of segments removed."""
        if max_age_us < 0 or max_bytes < 0:
            raise InvalidArgument("retention limits must be >= 0 (0 = no limit)")
        removed = 0
        disk = sum(s.size for s in self._segments)
        while len(self._segments) > 1:
            seg = self._segments[0]
            expired = max_age_us > 0 and (not seg.times.count or now_us - seg.times.last()[T_MAXTS] > max_age_us)
            if not (expired or (max_bytes > 0 and disk > max_bytes)):
                break
            disk -= seg.size
            self._remove_segment(seg)
            removed += 1
        return removed

    def delete_oldest_segments(self, count: int, consumed_up_to: int | None = None) -> int:
        """Iggy's DeleteSegments: delete up to ``count`` of the oldest sealed
        segments, never the active one (asking for more than there are deletes
        them all). ``consumed_up_to`` is the lowest offset any consumer has
        stored: deletion stops at the first segment holding a later offset, so
        nothing a consumer still has to read goes (apache/iggy server 0.8
        ``delete_oldest_segments``; None = no stored offsets, no barrier).
        Offsets are not renumbered and stored offsets are left as they are;
        reads below the new first offset start at it. Returns the number removed."""
        if count < 0:
            raise InvalidArgument("segments count must be >= 0")
        removed = 0
        while removed < count and len(self._segments) > 1:
            seg = self._segments[0]
            if consumed_up_to is not None and seg.next_offset - 1 > consumed_up_to:
                break
            self._remove_segment(seg)
            removed += 1
        return removed

    def _remove_segment(self, seg: Segment) -> None:
        self._segments.remove(seg)
        try:
            seg.remove()
        except OSError as exc:
            raise StorageError(f"cannot delete segment {seg.path(LOG_SUFFIX)}: {exc}", errno=exc.errno) from exc

    def purge(self) -> None:
        """Flush, then delete every record: offsets, byte positions and the dedup
        table start again from 0 (as Iggy's purge does)."""
        self.flush()
        try:
            for seg in list(self._segments):
                self._remove_segment(seg)
            self._segments = [Segment.create(self.path, 0, 0)]
            if self.cfg.fsyncs:
                fsync_dir(self.path)
        except OSError as exc:
            raise StorageError(f"cannot purge partition at {self.path}: {exc}", errno=exc.errno) from exc
        self._next_offset = self._byte_end = 0
        self._producers, self._durable_producers = {}, {}
        self._recent_calls.clear()
        self.durable.reset(0, 0)

    def close(self) -> None:
        """Flush pending appends (with fsync) and close every file. Idempotent."""
        if self._closed:
            return
        try:
            if self._failed is None:
                self.flush()
        finally:
            self._closed = True
            self._close_files()

    def _close_files(self) -> None:
        self.durable.wake()  # parked readers look again (and find the partition gone or replaced)
        for seg in self._segments:
            seg.close()

    def delete(self) -> None:
        """Drop pending appends (their callbacks get PartitionNotFound), close,
        and remove the partition directory."""
        self._settle()
        gone = PartitionNotFound(f"partition {self.partition_id} was deleted", partition_id=self.partition_id)
        calls, self._calls = self._calls, []
        ready, self._ready = self._ready, []
        for call in calls:
            self._ack(call, gone)
        for callback, _result in ready:
            _fire(callback, gone)
        self._pending_bytes = self._pending_records = 0
        self._closed = True
        self._close_files()
        shutil.rmtree(self.path, ignore_errors=True)

    def __repr__(self) -> str:
        return (
            f"<Partition {self.partition_id} at {self.path}: offsets {self.first_offset}..{self._next_offset}, "
            f"{len(self._segments)} segments, {self._pending_bytes} pending bytes>"
        )
