"""Where a JetStream consumer is in its stream: what it hands out next (no trio).

Theory of operation
-------------------
A consumer reads one stream (``streams``: seq = offset + 1) from a cursor
(``Consumer.scan``). :class:`Cursor` answers the questions pull requests and
push delivery both ask, by the same rules: where a new consumer starts
(``deliver_policy``), the next message to hand out (:meth:`Cursor.next`: due
redeliveries first, lowest stream seq, then new matching messages while fewer
than ``max_ack_pending`` are outstanding, paced by ``replay_policy``
original, nothing while paused), the output for it with its ``$JS.ACK``
reply (:meth:`Cursor.message`), what delivering it changes
(:meth:`Cursor.deliver`), and ``num_pending``, counted incrementally (for an
indexed stream from the index's hide events). Every state change is reported
through ``mark`` (the consumer store saves durable consumers it marks).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable

from core.subjects import is_literal

from .index import matching
from .model import Consumer, Pending
from .pull import Out, add_headers
from .streams import JetStreams, parse_go_time
from ..translate import canonical_to_nats

ACK_PREFIX = "$JS.ACK."
# Scale-out: a due message another gateway delivered that this gateway's copy of the
# stream does not hold yet (its mirror is behind) is looked at again this much later
# (the mirror applies within milliseconds; a shorter wait only spins the timers task).
NOT_HERE_RETRY_S = 0.1


class Cursor:
    """The delivery rules every consumer of one broker's streams shares."""

    def __init__(self, streams: JetStreams, mark: Callable[[Consumer], None]) -> None:
        self.streams = streams
        self.mark = mark

    def start_seq(self, con: Consumer) -> int:
        """The first stream seq a new consumer looks at (its ``deliver_policy``)."""
        streams, st, cfg = self.streams, con.stream, con.config
        first, last = streams.first_seq(st), streams.last_seq(st)
        policy = cfg["deliver_policy"]
        if policy == "new":
            return last + 1
        if policy == "last":
            if not con.filters:
                return max(last, first)
            # the per-subject state knows each subject's last seq (no scan back, issue 30)
            seq = streams.last_matching(st, con.takes, con.filters[0] if len(con.filters) == 1 else None)
            return seq if seq >= first else last + 1
        if policy == "by_start_sequence":
            return max(cfg["opt_start_seq"], first)
        if policy == "by_start_time":
            return max(streams.seq_at_time(st, parse_go_time(cfg["opt_start_time"])), first)
        if policy == "last_per_subject":
            # nats-server: each matching subject's last message as of now, in
            # stream order, then everything new.
            idx = streams.index(st, force=True)
            # the stream's own patterns bound its subjects, unless another protocol's
            # records are there (stored under the stream's name: streams._default_subject)
            bound = st.config["subjects"] if st.name not in idx.subjects else ()
            con.lps = {seqs[-1] for seqs in matching(idx.subjects, con.filters, bound)}
            con.lps_to = last
            return min(con.lps) if con.lps else last + 1
        return first

    # -- counting ---------------------------------------------------------------------------
    def num_pending(self, con: Consumer) -> int:
        """Matching messages after the cursor, counted incrementally (for an
        indexed stream: live ones, minus those hidden since they were counted)."""
        streams, st = self.streams, con.stream
        first, last = streams.first_seq(st), streams.last_seq(st)     # catches the index up
        idx = st.index
        if con.scan < first - 1:
            con.scan = con.np_to = first - 1
            con.np_count = 0
            con.np_version = idx.version if idx is not None else 0
        if idx is None:
            if not con.filters:
                return max(0, last - con.scan)
            if con.np_to < first and con.scan < first and first <= last and con.lps is None:
                # Counting from the stream's first message: the per-subject counts
                # hold the answer (nats-server's NumPending from its psim), no scan.
                counts = streams.subject_counts(st, first, last)
                con.np_count = sum(n for subj, n in counts.subjects.items() if con.takes(subj))
                con.np_to = last
                return con.np_count
            if con.np_to < last:
                for view in streams._forwards(st, max(con.np_to + 1, first)):
                    if self.matches(con, view):
                        con.np_count += 1
                con.np_to = last
            return con.np_count
        hides = idx.hides_since(con.np_version) if con.np_index is idx else None
        con.np_index = idx
        if hides is None:                            # too far behind, or a new index: count again
            con.np_to, con.np_count = con.scan, 0
        else:
            for seq, subject in hides:
                if con.scan < seq <= con.np_to and self.wanted(con, seq, subject):
                    con.np_count -= 1
        con.np_version = idx.version
        if con.np_to < last and con.lps is None and con.filters and all(is_literal(f) for f in con.filters):
            # literal filters: their subjects' live seqs, not every seq after the cursor
            # (a KV history of one key counted the whole bucket: ~400 ms at 100,000 keys, issue 30)
            low = max(con.np_to, first - 1)
            con.np_count += sum(1 for f in set(con.filters) for q in idx.subjects.get(f, ()) if low < q <= last)
            con.np_to = last
        if con.lps is not None and con.np_to < min(con.lps_to, last):
            # last per subject: up to lps_to only the kept seqs count (a whole-bucket KV
            # keys or watch otherwise tests every seq of the bucket in one go)
            low, high, live = max(con.np_to, first - 1), min(con.lps_to, last), idx.live
            con.np_count += sum(1 for q in con.lps if low < q <= high and q in live)
            con.np_to = high
        if con.np_to < last:
            live = idx.live
            for seq in range(max(con.np_to + 1, first), last + 1):
                subject = live.get(seq)
                if subject is not None and self.wanted(con, seq, subject):
                    con.np_count += 1
            con.np_to = last
        return max(con.np_count, 0)

    def counted(self, con: Consumer) -> bool:
        """Whether :meth:`num_pending` counts (rather than subtracts) for this consumer."""
        return bool(con.filters) or con.stream.index is not None

    def wanted(self, con: Consumer, seq: int, subject: str) -> bool:
        if con.lps is not None and seq <= con.lps_to:
            # start_seq kept only seqs whose subject the filters take: no second
            # subject_matches per message (~1 us each here, issue 30)
            return seq in con.lps
        return con.takes(subject)

    def matches(self, con: Consumer, view) -> bool:
        seq = view.offset + 1
        if not self.streams.visible(con.stream, seq):
            return False
        if not con.filters and con.lps is None:
            return True
        return self.wanted(con, seq, self.streams.subject_of(con.stream, view))

    def paused_ns(self, con: Consumer) -> int:
        """How long the consumer stays paused (``pause_until``), ns; 0 = not paused."""
        text = con.config.get("pause_until")
        if not text:
            return 0
        if con.pause[0] != text:
            con.pause = (text, parse_go_time(text))
        return max(con.pause[1] - time.time_ns(), 0)

    # -- handing out ------------------------------------------------------------------------
    def next(self, con: Consumer, now: float):
        """(seq, record view, is redelivery) of the next message to hand out, or None."""
        if "pause_until" in con.config and self.paused_ns(con):
            return None                          # nats-server: requests wait, heartbeats go on
        streams, st = self.streams, con.stream
        first = streams.first_seq(st)
        for seq in sorted(s for s, p in con.pending.items() if p.deadline <= now):
            p = con.pending[seq]
            view = streams.record(st, seq) if seq >= first else None
            if view is None:
                if seq > streams.last_seq(st):   # scale-out: delivered elsewhere, not in this copy yet
                    p.deadline = now + NOT_HERE_RETRY_S
                    continue
                self.forget(con, seq)
                continue
            if 0 < con.config["max_deliver"] <= p.deliveries:
                del con.pending[seq]     # nats-server keeps it counted as redelivered
                self.mark(con)
                continue
            return seq, view, True
        limit = con.config.get("max_ack_pending", 0)
        if not con.ack_none and 0 < limit <= len(con.pending):
            return None
        self.num_pending(con)
        last = streams.last_seq(st)
        while con.scan < last:
            seq = max(con.scan + 1, first)
            ahead = con.ahead
            if not ahead or ahead[0].offset + 1 != seq:      # empty, or the cursor moved: read on from it
                if con.filters and con.lps is None:
                    # jump over what the per-subject state says cannot match (a
                    # one-key KV watch read every record before it, issue 30)
                    at = streams.next_candidate(st, con.filters, seq)
                    if at is None:
                        con.scan, con.ahead = last, deque()
                        return None
                    seq = at
                ahead = con.ahead = deque(streams.views(st, seq))
                if not ahead:
                    return None
            view = ahead.popleft()
            con.scan = view.offset + 1
            if self.matches(con, view):
                if con.replayed is not None and con.config["replay_policy"] == "original":
                    # nats-server's replay original: the stored gap to the previous one
                    due = con.replayed[0] + max(view.timestamp * 1000 - con.replayed[1], 0) / 1e9
                    if due > now:
                        ahead.appendleft(view)
                        con.scan, con.replay_due = con.scan - 1, due
                        return None
                return con.scan, view, False
        return None

    def message(self, con: Consumer, seq: int, view, redelivery: bool, now: float, inbox: str) -> Out:
        p = con.pending.get(seq) if redelivery else None
        deliveries = p.deliveries + 1 if p is not None else 1
        cseq = con.cseq + 1
        pending = self.num_pending(con)           # the cursor is already past a new message
        if self.counted(con) and not redelivery:
            pending -= 1                         # counted until deliver
        ts = view.timestamp * 1000
        ack = f"{ACK_PREFIX}{con.stream.name}.{con.name}.{deliveries}.{seq}.{cseq}.{ts}.{max(pending, 0)}"
        headers = bytes(view.headers)
        block = canonical_to_nats(headers)
        payload = bytes(view.payload)
        if con.config.get("headers_only"):
            # nats-server: no body, its size in Nats-Msg-Size
            block = add_headers(block, (("Nats-Msg-Size", len(payload)),))
            payload = b""
        return Out(inbox, self.streams.subject_of(con.stream, view), ack, headers, payload, block)

    def deliver(self, con: Consumer, seq: int, view, redelivery: bool, now: float) -> None:
        con.cseq += 1
        con.delivered_ns = time.time_ns()
        if not redelivery:
            con.sseq = seq
            con.replayed = (now, view.timestamp * 1000)
            if self.counted(con):
                con.np_count = max(con.np_count - 1, 0)
        if con.ack_none:
            con.floor_sseq, con.floor_cseq = con.sseq, con.cseq
            if con.stream.config["retention"] != "limits":
                self.streams.release(con.stream, (seq,))
        else:
            p = con.pending.get(seq)
            deliveries = p.deliveries + 1 if p is not None else 1
            if deliveries > 1:
                con.rdc[seq] = deliveries
            # a redelivery keeps the first delivery's consumer seq, as nats-server's trackPending
            # does: the ack floor moves by it (consumers._acked)
            cseq = p.cseq if p is not None else con.cseq
            con.pending[seq] = Pending(cseq, deliveries, now + con.ack_wait(deliveries), view.timestamp * 1000)
        self.mark(con)

    def forget(self, con: Consumer, seq: int) -> None:
        con.pending.pop(seq, None)
        con.rdc.pop(seq, None)
        self.mark(con)


__all__ = ["ACK_PREFIX", "Cursor"]
