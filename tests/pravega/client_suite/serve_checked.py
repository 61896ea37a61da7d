#!/usr/bin/env python3
"""``ferry serve`` with a deliberately slow fsync and a watch on every Pravega read (issue 30).

Run by ``run_suite.py`` (once per ``--fsync-delays`` value) in place of ``python -m gateway serve``::

    python serve_checked.py --fsync-delay-ms 50 --report FILE -- serve --data DIR ...

Two things are added to the gateway process before the CLI starts, nothing else changes:

* **A slow disk.** The log's ``fdatasync`` (``core.log.pending.fdatasync``, called by the
  flusher's worker thread: tests/support/held_fsync.py patches the same name in-process)
  sleeps ``--fsync-delay-ms`` before the real call, so every append stays accepted but not
  durable for that long: a reader parked at the tail, or one reading right behind a writer,
  would get undurable bytes then if the segment store served them.
* **A read watch** (:class:`ReadWatch`) on every reply a segment-store session sends
  (``SegmentStoreSession.send``): per segment, the end of the last acknowledged append
  (``DataAppended.currentSegmentWriteOffset``: the segment's length right after that
  append, sent only once it is durable, in order; ``SegmentsMerged`` likewise for its
  target), and for every ``SegmentRead`` with data, whether the bytes it carries end at or
  before that acknowledged end. Upstream's segment store serves only what its durable log
  acknowledged (protocols/pravega.md section 5.4), so a reader must never get a byte its
  writer has not been told is stored: a read past the acknowledged end is a violation. The
  watch also counts the reads served, or parked at the durable end, while more bytes were
  accepted than durable (the partition's accepted end past its durable end), and the parked
  reads later answered with data: they show that undurable data really lay within a reader's
  reach and that waiting readers got it only after the ack.

The watch is an observer: it never changes a reply. Its figures are written as JSON to
``--report`` every ``REPORT_EVERY_S`` seconds and at exit.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import sys
import threading
import time
from pathlib import Path

REPORT_EVERY_S = 0.5  # the runner reads the report after the gateway stopped; this is for a killed one
MAX_VIOLATIONS_KEPT = 50  # the first violations in full; the rest are counted


class ReadWatch:
    """Acknowledged ends per segment and the reads checked against them (pure: no I/O)."""

    def __init__(self) -> None:
        self.acked: dict[str, int] = {}  # segment name -> end of its last acknowledged append
        self.reads = 0  # SegmentRead replies with data, on segments with an acknowledged append
        self.unverified = 0  # ... on segments with none seen (written by a transaction commit or before start)
        self.empty = 0  # SegmentRead replies without data (at the tail: parked and timed out, or sealed)
        self.pending_beyond = 0  # reads served while the segment held accepted, undurable bytes
        self.parks = 0  # reads that found no durable byte at their offset and waited
        self.parks_undurable = 0  # ... while accepted, undurable bytes lay right there
        self.woken = 0  # waiting reads answered with data, once the end moved
        self.violations: list[dict] = []
        self.violation_count = 0

    def ack(self, segment: str, end: int) -> None:
        if end > self.acked.get(segment, -1):
            self.acked[segment] = end

    def park(self, undurable: int) -> None:
        """A read waits at the durable end; ``undurable``: accepted bytes past it then."""
        self.parks += 1
        if undurable > 0:
            self.parks_undurable += 1

    def read(self, segment: str, offset: int, length: int, undurable: int, woken: bool = False) -> None:
        """A SegmentRead of ``length`` bytes at ``offset``; ``undurable``: accepted bytes past
        the durable end when the read was served (0 when unknown); ``woken``: it had waited."""
        if length == 0:
            self.empty += 1
            return
        self.woken += woken
        acked = self.acked.get(segment)
        if acked is None:
            self.unverified += 1
            return
        self.reads += 1
        if undurable > 0:
            self.pending_beyond += 1
        if offset + length > acked:
            self.violation_count += 1
            if len(self.violations) < MAX_VIOLATIONS_KEPT:
                self.violations.append({"segment": segment, "offset": offset, "end": offset + length,
                                        "acknowledged_end": acked, "at": time.time()})

    def summary(self) -> dict:
        return {"reads_checked": self.reads, "reads_unverified": self.unverified, "reads_empty": self.empty,
                "reads_with_undurable_bytes_pending": self.pending_beyond, "parked_reads": self.parks,
                "parked_with_undurable_bytes_pending": self.parks_undurable, "parked_reads_answered": self.woken,
                "segments": len(self.acked),
                "violations": self.violation_count, "first_violations": self.violations}


def install(watch: ReadWatch, delay_s: float):
    """Slow the log's fdatasync by ``delay_s`` and route every segment-store reply past ``watch``;
    returns a function that undoes both (for tests; the gateway process keeps them). Sessions
    made before the call keep their unwatched ``read`` handler."""
    import core.log.pending as pending
    from adapters.pravega import commands as C
    from adapters.pravega import session as S
    from adapters.pravega.reads import raw_end

    real_sync = pending.fdatasync
    real_durable_end, real_read, real_send = S.durable_end, S.SegmentStoreSession.read, S.SegmentStoreSession.send

    def slow_fdatasync(fd: int) -> None:
        time.sleep(delay_s)
        real_sync(fd)

    if delay_s > 0:
        pending.fdatasync = slow_fdatasync

    # SegmentStoreSession.read asks durable_end(part, raw) once, then answers in the same
    # synchronous call: remember how far the accepted end was past it for that answer.
    last = {"undurable": 0, "woken": False}

    def durable_end(part, raw: bool) -> int:
        end = real_durable_end(part, raw)
        last["undurable"] = (raw_end(part) if raw else part.byte_end) - end
        return end

    S.durable_end = durable_end

    def read(self, cmd, parked: bool = False):
        last["undurable"], last["woken"] = 0, parked
        try:
            result = real_read(self, cmd, parked)
            if isinstance(result, S.Park):
                watch.park(last["undurable"])
            return result
        finally:
            last["woken"] = False

    S.SegmentStoreSession.read = read

    def send(self, reply) -> None:
        kind = type(reply)
        if kind is C.DataAppended:
            w = self.writers.get(reply.writer_id)
            if w is not None and w.txn is None and w.transient is None:
                watch.ack(w.segment, reply.current_segment_write_offset)
        elif kind is C.SegmentsMerged:
            watch.ack(reply.target, reply.new_target_write_offset)
        elif kind is C.SegmentRead:
            watch.read(reply.segment, reply.offset, len(reply.data), last["undurable"], last["woken"])
        last["undurable"] = 0
        real_send(self, reply)

    S.SegmentStoreSession.send = send

    def uninstall() -> None:
        pending.fdatasync, S.durable_end = real_sync, real_durable_end
        S.SegmentStoreSession.read, S.SegmentStoreSession.send = real_read, real_send

    return uninstall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fsync-delay-ms", type=float, required=True)
    ap.add_argument("--report", type=Path, required=True)
    ap.add_argument("cli", nargs=argparse.REMAINDER, help="-- then the ferry CLI's arguments (serve ...)")
    args = ap.parse_args()
    cli = args.cli[1:] if args.cli[:1] == ["--"] else args.cli
    watch = ReadWatch()
    install(watch, args.fsync_delay_ms / 1000)

    def dump() -> None:
        tmp = args.report.with_suffix(".tmp")
        tmp.write_text(json.dumps({"fsync_delay_ms": args.fsync_delay_ms, **watch.summary()}))
        os.replace(tmp, args.report)

    def every() -> None:
        while True:
            time.sleep(REPORT_EVERY_S)
            dump()

    threading.Thread(target=every, daemon=True, name="read-watch-report").start()
    atexit.register(dump)
    from gateway.cli import main as ferry_main

    code = ferry_main(cli)
    dump()
    return code


if __name__ == "__main__":
    sys.exit(main())
