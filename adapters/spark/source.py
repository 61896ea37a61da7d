"""``format("ferry")``: the PySpark data source (batch and streaming reads, writes).

Theory of operation
-------------------
Spark runs these classes in several processes and pickles them between
(spark-datasource.md section 1): the source and its readers hold only plain
data (:mod:`adapters.spark.options`), and every method that needs the gateway
opens a :class:`~adapters.spark.client.FerryClient`, uses it, and closes it
before returning.

* Batch: ``partitions()`` (planner process) snapshots each Ferry partition's
  end offset once, so the read is a consistent snapshot, and cuts each
  partition's ``[start, end)`` into ranges of at most
  ``maxRecordsPerPartition`` messages, one Spark task each. ``read()``
  (executors) polls its range and yields one Arrow batch per poll.
* Streaming: offsets are ``{"topic": {"partition": next offset}}``, which
  Spark writes to the checkpoint as they are. ``latestOffset`` advances every
  partition toward the gateway's end (or the ``availableNow`` target), within
  the read limit; a partition or topic that appears mid-run joins at offset
  0, so nothing written to it is skipped. Since each batch reads exactly the
  offsets between two checkpointed dicts, a restart from the checkpoint
  re-reads neither more nor less (no duplicates, no gaps, into a
  transactional sink).
"""

from __future__ import annotations

import gc
import logging
from dataclasses import dataclass
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable, ReadLimit, ReadMaxRows, ReadMinRows, SupportsTriggerAvailableNow,
)

from .batches import SCHEMA_DDL, polled_to_batch
from .client import RECORD_HEADER, FerryClientError
from .options import EARLIEST, LATEST, FerryOptionError, SourceOptions, source_options

log = logging.getLogger("ferry.spark")

Offsets = dict[str, dict[int, int]]  # topic -> partition -> next offset to read


@dataclass(frozen=True)
class FerryRange(InputPartition):
    """Offsets ``[start, end)`` of one Ferry partition: one Spark task."""

    topic: str
    partition: int
    start: int
    end: int


def split_ranges(start: Offsets, end: Offsets, max_records: int) -> list[FerryRange]:
    """One range per partition with data, each at most ``max_records`` long."""
    out = []
    for topic in sorted(end):
        for pid in sorted(end[topic]):
            lo, hi = start.get(topic, {}).get(pid, 0), end[topic][pid]
            for a in range(lo, hi, max_records):
                out.append(FerryRange(topic, pid, a, min(a + max_records, hi)))
    return out


class FerryDataLoss(FerryClientError):
    """Messages a query should read are gone (retention removed them first)."""


def _lost(opts: SourceOptions, r: FerryRange, lo: int, hi: int) -> None:
    what = f"offsets {lo}..{hi - 1} of {opts.stream}/{r.topic} partition {r.partition}"
    if opts.fail_on_data_loss:
        raise FerryDataLoss(f"{what} were removed (retention) before this query read them; "
                            "set failOnDataLoss=false to skip such gaps")
    log.warning("skipping %s: removed before this query read them", what)


def read_range(opts: SourceOptions, r: FerryRange) -> Iterator:
    """Arrow batches of one range (runs on an executor; its own connection).

    Offsets are contiguous, so a poll that starts above the offset asked for, or a
    partition that ends early, means retention removed messages first (as the
    Kafka source, ``failOnDataLoss`` decides whether that fails the query)."""
    if not isinstance(r, FerryRange):  # no ranges: Spark still runs one task, with a bare InputPartition
        return
    # pyspark's daemon runs gc.collect() in the worker after every task (pyspark/daemon.py);
    # with pyspark and pyarrow loaded that walks ~50k long-lived objects, ~25 ms of CPU per
    # task (docs/spark.md "Performance"). Freezing what exists now (imports, the reader)
    # leaves that collect only the task's own objects; those are collected as before.
    gc.freeze()
    expect = r.start
    with opts.conn.session() as client:
        for polled in client.poll_range(opts.stream, r.topic, r.partition, r.start, r.end, opts.poll_count):
            first = RECORD_HEADER.unpack_from(polled.body, polled.start)[3]
            if first > expect:
                _lost(opts, r, expect, min(first, r.end))
            expect = first + polled.count
            batch = polled_to_batch(opts.stream, r.topic, polled, r.end)
            if batch is not None:
                yield batch
    if expect < r.end:
        _lost(opts, r, expect, r.end)


def current_ends(opts: SourceOptions, client) -> Offsets:
    """``{topic: {partition: next offset}}`` now, for every topic read."""
    ends: Offsets = {}
    for topic in opts.topic_names(client):
        info = client.topic(opts.stream, topic)
        if info is None:
            if opts.pattern is None:
                raise FerryOptionError(f"topic: {opts.stream}/{topic} does not exist on the gateway")
            continue  # deleted between listing and lookup
        ends[topic] = info.next_offsets()
    return ends


def first_retained(opts: SourceOptions, client, topic: str, pid: int, end: int) -> int:
    """Where ``earliest`` is now: the oldest stored offset (``end`` when empty)."""
    first = client.first_offset(opts.stream, topic, pid)
    return end if first is None else first


def resolve(opts: SourceOptions, client, given, ends: Offsets, name: str) -> Offsets:
    """Turn ``earliest``/``latest``/JSON (-2/-1 allowed) into numbers; partitions
    not named in the JSON take ``earliest`` for a start and ``latest`` for an end."""
    out: Offsets = {}
    for topic, parts in ends.items():
        named = given.get(topic, {}) if isinstance(given, dict) else {}
        if unknown := set(named) - set(parts):
            raise FerryOptionError(f"{name}: topic {topic!r} has no partition {sorted(unknown)}")
        per = {}
        for pid, hi in parts.items():
            want = named.get(pid, EARLIEST if name == "startingOffsets" else LATEST)
            if given == "earliest":
                want = EARLIEST
            elif given == "latest":
                want = LATEST
            per[pid] = first_retained(opts, client, topic, pid, hi) if want == EARLIEST else (
                hi if want == LATEST else want)
        out[topic] = per
    if name == "startingOffsets" and opts.starting_timestamp_ms is not None:
        # Kafka's rule: a timestamp start wins over startingOffsets. A partition with
        # nothing at or after it starts at its end (only later messages are read).
        ts_us = opts.starting_timestamp_ms * 1000
        for topic, parts in out.items():
            for pid in parts:
                found = client.offset_for_timestamp(opts.stream, topic, pid, ts_us)
                parts[pid] = ends[topic][pid] if found is None else found
    return out


class FerryDataSource(DataSource):
    """Ferry topics as a Spark table: ``spark.read.format("ferry")`` and
    ``readStream``/``write``/``writeStream`` (docs/spark.md)."""

    @classmethod
    def name(cls) -> str:
        return "ferry"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema) -> "FerryBatchReader":
        return FerryBatchReader(source_options(self.options, streaming=False))

    def streamReader(self, schema) -> "FerryStreamReader":
        return FerryStreamReader(source_options(self.options, streaming=True))

    def writer(self, schema, overwrite: bool):
        from .sink import FerryBatchWriter, sink_for

        return FerryBatchWriter(sink_for(self.options, schema, overwrite))

    def streamWriter(self, schema, overwrite: bool):
        from .sink import FerryStreamWriter, sink_for

        return FerryStreamWriter(sink_for(self.options, schema, overwrite))


class FerryBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[FerryRange]:
        with self.opts.conn.session() as client:
            ends = current_ends(self.opts, client)
            start = resolve(self.opts, client, self.opts.starting, ends, "startingOffsets")
            end = resolve(self.opts, client, self.opts.ending, ends, "endingOffsets")
        for topic, parts in end.items():  # an explicit end past the data reads what is there
            for pid, hi in parts.items():
                parts[pid] = min(hi, ends[topic][pid])
        return split_ranges(start, end, self.opts.max_records_per_partition)

    def read(self, partition: FerryRange) -> Iterator:
        return read_range(self.opts, partition)


def _to_json(offsets: Offsets) -> dict:
    return {t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(offsets.items())}


def _from_json(offsets: dict) -> Offsets:
    return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in offsets.items()}


def advance(start: Offsets, latest: Offsets, max_rows: int | None, joins: Offsets | None = None) -> Offsets:
    """Move each partition from ``start`` toward ``latest``, spending at most
    ``max_rows`` in total. Like the Kafka source, the budget is shared in
    proportion to each partition's backlog (so a busy partition cannot starve
    the others), rounded down, with the remainder handed out one message at a
    time to the largest backlogs; at least one message moves when any is due.
    A partition missing from ``start`` starts at its ``joins`` entry (default 0)."""
    end = {t: dict(parts) for t, parts in start.items()}
    backlog: dict[tuple[str, int], int] = {}
    for topic, parts in latest.items():
        for pid, hi in parts.items():
            known = start.get(topic, {})
            lo = known[pid] if pid in known else (joins or {}).get(topic, {}).get(pid, 0)  # new: from its start
            end.setdefault(topic, {})[pid] = lo
            if hi > lo:
                backlog[(topic, pid)] = hi - lo
    total = sum(backlog.values())
    if max_rows is None or total <= max_rows:
        for (topic, pid), n in backlog.items():
            end[topic][pid] += n
        return end
    share = {k: n * max_rows // total for k, n in backlog.items()}
    left = max_rows - sum(share.values())
    for k in sorted(backlog, key=lambda k: (share[k] - backlog[k], k)):  # largest remaining backlog first
        if left <= 0:
            break
        if share[k] < backlog[k]:
            share[k] += 1
            left -= 1
    for (topic, pid), n in share.items():
        end[topic][pid] += n
    return end


class FerryStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader; lives in one driver-side process per query (state kept between calls)."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._target: Offsets | None = None  # set by Trigger.AvailableNow
        self._seen: Offsets | None = None  # the gateway's ends at the last latestOffset call

    def _latest(self) -> Offsets:
        with self.opts.conn.session() as client:
            return current_ends(self.opts, client)

    def initialOffset(self) -> dict:
        with self.opts.conn.session() as client:
            ends = current_ends(self.opts, client)
            return _to_json(resolve(self.opts, client, self.opts.starting, ends, "startingOffsets"))

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = _from_json(start)
        with self.opts.conn.session() as client:
            latest = self._target if self._target is not None else current_ends(self.opts, client)
            # A partition or topic new to the query starts at its oldest stored offset
            # (0 unless retention already removed some): nothing written to it is skipped.
            joins = {t: {p: first_retained(self.opts, client, t, p, hi) for p, hi in parts.items()
                         if p not in begin.get(t, {})} for t, parts in latest.items()}
        self._seen = latest
        if isinstance(limit, ReadMinRows):
            due = advance(begin, latest, None, joins)
            origin = {t: joins.get(t, {}) | begin.get(t, {}) for t in due}
            waiting = sum(due[t][p] - origin[t].get(p, 0) for t in due for p in due[t])
            return start if waiting < limit.min_rows else _to_json(due)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return _to_json(advance(begin, latest, max_rows, joins))

    def reportLatestOffset(self) -> dict | None:
        """The ends seen by the last latestOffset (no extra request): query progress
        then shows how far a rate-limited query is behind (``sources[].latestOffset``)."""
        return _to_json(self._seen) if self._seen is not None else None

    def partitions(self, start: dict, end: dict) -> list[FerryRange]:
        return split_ranges(_from_json(start), _from_json(end), self.opts.max_records_per_partition)

    def read(self, partition: FerryRange) -> Iterator:
        return read_range(self.opts, partition)

    def commit(self, end: dict) -> None:
        # Spark commits lazily (a batch's commit arrives when the next one is
        # planned, and never for the last one before a stop: spark-datasource.md
        # section 2), so progress lives in the checkpoint only; nothing to do here.
        pass


__all__ = ["FerryDataLoss", "FerryDataSource", "FerryRange", "advance", "split_ranges"]
