"""JetStream pull consumers on Ferry's log: acks, redelivery, waiting pulls (no trio).

Theory of operation
-------------------
A :class:`Consumer` reads one stream (``jetstream_streams``: seq = offset + 1)
from a cursor. Its state is nats-server's: ``sseq``/``cseq`` (last stream
and consumer sequence delivered), the ack floor, and ``pending`` (stream seq
-> :class:`Pending`: consumer seq, delivery count, ack deadline, stored
time) for messages delivered and not yet acked. ``rdc`` counts deliveries of
redelivered messages until they are acked (``num_redelivered``).

Pull requests (``$JS.API.CONSUMER.MSG.NEXT``) wait in a bounded FIFO
(``max_waiting``). :meth:`JsConsumers.serve` hands them messages: due
redeliveries first (lowest stream seq), then new matching messages while
fewer than ``max_ack_pending`` are outstanding. Everything sent is an output
(:class:`Out`): a stored message with its ``$JS.ACK`` reply subject, or a
status (404, 408, 409, 400, 100 heartbeat) to a request's inbox, or the empty
reply to a synchronous ack. ``emit`` (set by the NATS session module) routes
outputs to the inboxes' subscribers.

Push consumers (``deliver_subject``) have a
:class:`~adapters.nats.jetstream.push.PushState`: :meth:`JsConsumers.serve_push`
sends to the deliver subject while someone subscribes to it (the session
reports subscription changes through :meth:`interest_changed`), with the
same ack, redelivery and ``max_ack_pending`` rules, plus flow control
(:meth:`flow_reply`) and idle heartbeats. Ordered consumers are push
consumers with ``ack_policy`` none, flow control and heartbeats: nothing
else is special about them on the server side.

Time is an argument (``now``, monotonic seconds): :meth:`JsConsumers.tick`
expires requests, sends heartbeats, makes unacked messages due after
``ack_wait`` (or their ``backoff`` step), drops those past ``max_deliver``,
deletes idle ephemerals and saves dirty state; :meth:`next_deadline` says
when to call it next. The NATS driver runs both in one task per broker and
is woken through ``wake`` when a deadline may have moved earlier.

Durable consumers are saved and restored by :class:`ConsumerStore`
(``jetstream_consumer_store``).
"""

from __future__ import annotations

import json
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from core.kvtables import NO_VERSION
from core.subjects import subject_matches

from adapters.nats.jetstream.consumer_config import filters_of
from adapters.nats.jetstream.consumer_store import SAVE_INTERVAL, TABLE, ConsumerStore, _key
from adapters.nats.jetstream.errors import JsApiError
from adapters.nats.jetstream.pull import Out, add_headers, heartbeat, parse_pull, status
from adapters.nats.jetstream.push import PushDelivery, PushState
from adapters.nats.jetstream.retention import RetentionRules
from adapters.nats.jetstream.streams import JetStreams, JsStream, go_time, parse_go_time
from adapters.nats.translate import canonical_to_nats

ACK_PREFIX = "$JS.ACK."
_NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


@dataclass(slots=True)
class Pending:
    cseq: int
    deliveries: int
    deadline: float
    ts: int                      # stored time, ns


@dataclass(eq=False)
class Consumer:
    stream: JsStream
    name: str
    config: dict[str, Any]
    created: str
    durable: bool
    sseq: int = 0
    cseq: int = 0
    floor_sseq: int = 0
    floor_cseq: int = 0
    pending: dict[int, Pending] = field(default_factory=dict)
    rdc: dict[int, int] = field(default_factory=dict)
    waiting: deque = field(default_factory=deque)
    delivered_ns: int = 0
    acked_ns: int = 0
    active: float = 0.0          # monotonic time of the last pull request or ack (push: since no subscriber)
    scan: int = 0                # last stream seq looked at for new messages
    np_count: int = 0            # matching messages in (scan, np_to]
    np_to: int = 0
    push: PushState | None = None
    ahead: deque = field(default_factory=deque)   # records read past the cursor, not yet looked at
    np_version: int = 0          # the stream index's hide events applied to np_count
    np_index: object = None      # ... of this index (a rebuilt one means counting again)
    lps: set | None = None       # last_per_subject: the seqs at or below lps_to it delivers
    lps_to: int = 0
    pause: tuple[str, int] = ("", 0)    # config pause_until text and its ns since the epoch
    replayed: tuple[float, int] | None = None   # replay original: (monotonic, stored ns) of the last new delivery
    replay_due: float = 0.0      # ... and when the next one may go

    @property
    def filters(self) -> list[str]:
        return filters_of(self.config)

    def takes(self, subject: str) -> bool:
        """Whether a message on ``subject`` passes the consumer's filters (none: every one)."""
        filters = self.filters
        return not filters or any(subject_matches(f, subject) for f in filters)

    @property
    def ack_none(self) -> bool:
        return self.config["ack_policy"] == "none"

    def ack_wait(self, deliveries: int) -> float:
        backoff = self.config.get("backoff")
        if backoff:
            return backoff[min(deliveries, len(backoff)) - 1] / 1e9
        return self.config.get("ack_wait", 0) / 1e9


class JsConsumers(PushDelivery, ConsumerStore, RetentionRules):
    """Every consumer of one broker's JetStream streams."""

    def __init__(self, streams: JetStreams, tables=None, clock: Callable[[], float] = time.monotonic) -> None:
        self.streams = streams
        self.tables = tables
        self.clock = clock
        self.by_stream: dict[str, dict[str, Consumer]] = {}
        self.dirty: set[Consumer] = set()
        self.next_save = 0.0
        self.emit: Callable[[list[Out]], None] | None = None
        self.wake: Callable[[], None] = lambda: None
        self.interest: Callable[[str], bool] = lambda inbox: True
        # Bytes a deliver subject's subscribers can take below their outbox high water (session module).
        self.room: Callable[[str], int] = lambda subject: 1 << 62
        self.push_subjects: dict[str, set[Consumer]] = {}      # deliver subject -> push consumers
        streams.needed = self.needed

    # -- registry ---------------------------------------------------------------------
    def count(self, stream: str | None = None) -> int:
        if stream is not None:
            return len(self.by_stream.get(stream, ()))
        return sum(len(c) for c in self.by_stream.values())

    def get(self, stream: str, name: str) -> Consumer:
        self.streams.get(stream)
        con = self.by_stream.get(stream, {}).get(name)
        if con is None:
            raise JsApiError("JSConsumerNotFoundErr")
        return con

    def names(self, stream: str) -> list[str]:
        self.streams.get(stream)
        return sorted(self.by_stream.get(stream, {}))

    def add(self, st: JsStream, name: str | None, cfg: dict, durable: bool, action: str) -> Consumer:
        """Create (or find, or update) a consumer; ``name`` None = a new ephemeral name."""
        from adapters.nats.jetstream.consumer_config import check_consumer_update, same_settings
        consumers = self.by_stream.setdefault(st.name, {})
        name = name or "".join(secrets.choice(_NAME_CHARS) for _ in range(8))
        con = consumers.get(name)
        if con is not None:
            if same_settings(con.config, cfg):
                return con
            if action == "create":
                raise JsApiError("JSConsumerAlreadyExists")
            check_consumer_update(con.config, cfg)
            old = con.config.get("deliver_subject")
            if old and old != cfg.get("deliver_subject") and self.interest(old):
                raise JsApiError("JSConsumerNameExistErr")
            self._unindex(con)
            con.config = cfg
            self._set_push(con, self.clock())
            self._save(con)
            return con
        if action == "update":
            raise JsApiError("JSConsumerDoesNotExist")
        if st.config["retention"] == "workqueue":
            self._check_work_queue(st, name, cfg)
        con = Consumer(st, name, cfg, go_time(time.time_ns()), durable, active=self.clock())
        start = self._start_seq(con)
        con.sseq = con.floor_sseq = con.scan = con.np_to = start - 1
        consumers[name] = con
        self._set_push(con, con.active)
        self._save(con)
        return con

    def delete(self, stream: str, name: str) -> None:
        con = self.get(stream, name)
        self._drop(con)

    def _drop(self, con: Consumer) -> None:
        self.by_stream.get(con.stream.name, {}).pop(con.name, None)
        self._unindex(con)
        self.dirty.discard(con)
        if con.durable and self.tables is not None:
            self.tables.remove(TABLE, [(_key(con), NO_VERSION)])
        st = con.stream
        if st.config["retention"] != "limits" and st.index is not None:
            self.streams.release(st, list(st.index.live))    # what only it still needed goes

    def _start_seq(self, con: Consumer) -> int:
        streams, st, cfg = self.streams, con.stream, con.config
        first, last = streams.first_seq(st), streams.last_seq(st)
        policy = cfg["deliver_policy"]
        if policy == "new":
            return last + 1
        if policy == "last":
            if not con.filters:
                return max(last, first)
            for view in streams._backwards(st, first):
                if self._matches(con, view):
                    return view.offset + 1
            return last + 1
        if policy == "by_start_sequence":
            return max(cfg["opt_start_seq"], first)
        if policy == "by_start_time":
            return max(streams.seq_at_time(st, parse_go_time(cfg["opt_start_time"])), first)
        if policy == "last_per_subject":
            # nats-server: each matching subject's last message as of now, in
            # stream order, then everything new.
            idx = streams.index(st, force=True)
            con.lps = {seqs[-1] for subj, seqs in idx.subjects.items() if con.takes(subj)}
            con.lps_to = last
            return min(con.lps) if con.lps else last + 1
        return first

    # -- info ---------------------------------------------------------------------------
    def info(self, con: Consumer) -> dict[str, Any]:
        delivered: dict[str, Any] = {"consumer_seq": con.cseq, "stream_seq": con.sseq}
        if con.delivered_ns:
            delivered["last_active"] = go_time(con.delivered_ns)
        floor: dict[str, Any] = {"consumer_seq": con.floor_cseq, "stream_seq": con.floor_sseq}
        if con.acked_ns:
            floor["last_active"] = go_time(con.acked_ns)
        doc = {"stream_name": con.stream.name, "name": con.name, "created": con.created, "config": con.config,
               "delivered": delivered, "ack_floor": floor, "num_ack_pending": len(con.pending),
               # nats-server reports no redeliveries when max_deliver is 1 (there are none)
               "num_redelivered": len(con.rdc) if con.config["max_deliver"] != 1 else 0,
               "num_waiting": len(con.waiting), "num_pending": self.num_pending(con)}
        if con.push is not None and con.push.active:
            doc["push_bound"] = True
        paused = self.paused_ns(con)
        if paused:
            doc["paused"], doc["pause_remaining"] = True, paused
        doc["ts"] = go_time(time.time_ns())
        return doc

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
            if con.np_to < last:
                for view in streams._forwards(st, max(con.np_to + 1, first)):
                    if self._matches(con, view):
                        con.np_count += 1
                con.np_to = last
            return con.np_count
        hides = idx.hides_since(con.np_version) if con.np_index is idx else None
        con.np_index = idx
        if hides is None:                            # too far behind, or a new index: count again
            con.np_to, con.np_count = con.scan, 0
        else:
            for seq, subject in hides:
                if con.scan < seq <= con.np_to and self._wanted(con, seq, subject):
                    con.np_count -= 1
        con.np_version = idx.version
        if con.np_to < last:
            live = idx.live
            for seq in range(max(con.np_to + 1, first), last + 1):
                subject = live.get(seq)
                if subject is not None and self._wanted(con, seq, subject):
                    con.np_count += 1
            con.np_to = last
        return max(con.np_count, 0)

    def _counted(self, con: Consumer) -> bool:
        """Whether :meth:`num_pending` counts (rather than subtracts) for this consumer."""
        return bool(con.filters) or con.stream.index is not None

    def _wanted(self, con: Consumer, seq: int, subject: str) -> bool:
        if con.lps is not None and seq <= con.lps_to and seq not in con.lps:
            return False
        return con.takes(subject)

    def _matches(self, con: Consumer, view) -> bool:
        seq = view.offset + 1
        if not self.streams.visible(con.stream, seq):
            return False
        if not con.filters and con.lps is None:
            return True
        return self._wanted(con, seq, self.streams.subject_of(con.stream, view))

    # -- pull requests ----------------------------------------------------------------------
    def pull(self, stream: str, name: str, inbox: str, payload: bytes, now: float) -> list[Out] | None:
        """A ``MSG.NEXT`` request; None when there is no such consumer (no responders)."""
        con = self.by_stream.get(stream, {}).get(name)
        if con is None or stream not in self.streams.streams:
            return None
        con.active = now
        if con.push is not None:
            return [status(inbox, 409, "Consumer is push based")]
        try:
            req = parse_pull(payload, inbox, now)
        except ValueError as exc:
            return [status(inbox, 400, f"Bad Request - {exc}")]
        if req is None:
            return []
        if len(con.waiting) >= con.config["max_waiting"]:
            return [status(inbox, 409, "Exceeded MaxWaiting")]
        con.waiting.append(req)
        out = self.serve(con, now)
        self.wake()
        return out

    def serve(self, con: Consumer, now: float) -> list[Out]:
        """Hand waiting requests what is available now, in arrival order."""
        out: list[Out] = []
        while con.waiting:
            req = con.waiting[0]
            if not self.interest(req.inbox):
                con.waiting.popleft()
                continue
            got = self._next(con, now)
            if got is None:
                break
            seq, view, redelivery = got
            msg = self._message(con, seq, view, redelivery, now, req.inbox)
            size = len(msg.subject) + len(msg.headers) + len(msg.payload) + len(msg.ack)
            if req.max_bytes and size > req.bytes_left:
                con.waiting.popleft()
                if not redelivery:
                    con.scan = seq - 1           # not handed out: the next request sees it again
                out.append(status(req.inbox, 409, "Message Size Exceeds MaxBytes",
                                  req.pending_headers()))
                continue
            self._deliver(con, seq, view, redelivery, now)
            out.append(msg)
            req.taken(size, now)
            if req.left <= 0:
                con.waiting.popleft()
        for req in list(con.waiting):
            if req.no_wait and (req.delivered or req.expires is None):
                con.waiting.remove(req)
                out.append(status(req.inbox, 404, "No Messages"))
            req.no_wait = False
        return out

    def paused_ns(self, con: Consumer) -> int:
        """How long the consumer stays paused (``pause_until``), ns; 0 = not paused."""
        text = con.config.get("pause_until")
        if not text:
            return 0
        if con.pause[0] != text:
            con.pause = (text, parse_go_time(text))
        return max(con.pause[1] - time.time_ns(), 0)

    def set_pause(self, con: Consumer, until: str | None) -> None:
        """``CONSUMER.PAUSE``: pause until ``until`` (RFC 3339), or resume (None)."""
        cfg = {k: v for k, v in con.config.items() if k != "pause_until"}
        if until and parse_go_time(until) > 0:
            cfg["pause_until"] = go_time(parse_go_time(until))
        con.config = cfg
        self._save(con)
        self.wake()

    def _next(self, con: Consumer, now: float):
        """(seq, record view, is redelivery) of the next message to hand out, or None."""
        if "pause_until" in con.config and self.paused_ns(con):
            return None                          # nats-server: requests wait, heartbeats go on
        streams, st = self.streams, con.stream
        first = streams.first_seq(st)
        for seq in sorted(s for s, p in con.pending.items() if p.deadline <= now):
            p = con.pending[seq]
            view = streams.record(st, seq) if seq >= first else None
            if view is None:
                self._forget(con, seq)
                continue
            if 0 < con.config["max_deliver"] <= p.deliveries:
                del con.pending[seq]     # nats-server keeps it counted as redelivered
                self._mark(con)
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
                ahead = con.ahead = deque(streams.views(st, seq))
                if not ahead:
                    return None
            view = ahead.popleft()
            con.scan = view.offset + 1
            if self._matches(con, view):
                if con.replayed is not None and con.config["replay_policy"] == "original":
                    # nats-server's replay original: the stored gap to the previous one
                    due = con.replayed[0] + max(view.timestamp * 1000 - con.replayed[1], 0) / 1e9
                    if due > now:
                        ahead.appendleft(view)
                        con.scan, con.replay_due = con.scan - 1, due
                        return None
                return con.scan, view, False
        return None

    def _message(self, con: Consumer, seq: int, view, redelivery: bool, now: float, inbox: str) -> Out:
        p = con.pending.get(seq) if redelivery else None
        deliveries = p.deliveries + 1 if p is not None else 1
        cseq = con.cseq + 1
        pending = self.num_pending(con)           # the cursor is already past a new message
        if self._counted(con) and not redelivery:
            pending -= 1                         # counted until _deliver
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

    def _deliver(self, con: Consumer, seq: int, view, redelivery: bool, now: float) -> None:
        con.cseq += 1
        con.delivered_ns = time.time_ns()
        if not redelivery:
            con.sseq = seq
            con.replayed = (now, view.timestamp * 1000)
            if self._counted(con):
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
            con.pending[seq] = Pending(con.cseq, deliveries, now + con.ack_wait(deliveries), view.timestamp * 1000)
        self._mark(con)

    def _forget(self, con: Consumer, seq: int) -> None:
        con.pending.pop(seq, None)
        con.rdc.pop(seq, None)
        self._mark(con)

    # -- acks ---------------------------------------------------------------------------------
    def ack(self, subject: str, payload: bytes, reply: str, now: float) -> list[Out] | None:
        """A client's publish on a ``$JS.ACK`` subject; None when it names no consumer."""
        parsed = parse_ack_subject(subject)
        if parsed is None:
            return None
        stream, name, seq = parsed
        con = self.by_stream.get(stream, {}).get(name)
        if con is None:
            return None
        con.active = now
        kind, _, rest = bytes(payload).strip().partition(b" ")
        out: list[Out] = []
        if kind in (b"", b"+ACK", b"+NXT", b"+TERM"):
            self._acked(con, seq)
        elif kind == b"-NAK":
            p = con.pending.get(seq)
            if p is not None:
                p.deadline = now + _nak_delay(rest)
        elif kind == b"+WPI":
            p = con.pending.get(seq)
            if p is not None:
                p.deadline = now + con.ack_wait(p.deliveries)
        if kind == b"+NXT" and con.push is not None:
            if reply:
                out.append(status(reply, 409, "Consumer is push based"))
        elif kind == b"+NXT":
            if reply:
                try:
                    req = parse_pull(rest, reply, now)
                except ValueError:
                    req = None
                if req is not None and len(con.waiting) < con.config["max_waiting"]:
                    con.waiting.append(req)
        elif reply:
            out.append(Out(reply))
        out.extend(self.serve_push(con, now) if con.push is not None else self.serve(con, now))
        self.wake()
        return out

    def _acked(self, con: Consumer, seq: int) -> None:
        if con.ack_none:
            return
        if con.config["ack_policy"] == "all":
            done = [s for s in con.pending if s <= seq]
        else:
            done = [seq] if seq in con.pending else []
        if not done:
            return
        dseq = con.pending[seq].cseq if seq in con.pending else 0
        for s in done:
            del con.pending[s]
            con.rdc.pop(s, None)
        if con.stream.config["retention"] != "limits":
            self.streams.release(con.stream, done)
        if not con.pending:
            con.floor_sseq, con.floor_cseq = con.sseq, con.cseq
        elif dseq == con.floor_cseq + 1 or (con.config["ack_policy"] == "all" and dseq > con.floor_cseq):
            # The floor moves only when the delivery right above it is acked
            # (nats-server's rule), then up to just below the next pending one.
            con.floor_sseq, con.floor_cseq = seq, dseq
            above = [s for s in con.pending if s > seq]
            if above:
                low = min(above)
                con.floor_sseq, con.floor_cseq = low - 1, con.pending[low].cseq - 1
        con.acked_ns = time.time_ns()
        self._mark(con)

    # -- appends and timers -------------------------------------------------------------------
    def appended(self, st: JsStream, now: float) -> list[Out]:
        """New messages in ``st``: serve its waiting requests and push consumers."""
        out: list[Out] = []
        pushed = False
        for con in self.by_stream.get(st.name, {}).values():
            if con.push is not None:
                got = self.serve_push(con, now)
                pushed = pushed or bool(got) or con.push.retry is not None
                out.extend(got)
            elif con.waiting:
                out.extend(self.serve(con, now))
        if pushed:
            self.wake()                          # new ack deadlines, or a turn to finish
        return out

    def tick(self, now: float) -> list[Out]:
        """Expire requests, heartbeats, redeliveries, idle ephemerals, saves."""
        out: list[Out] = []
        for consumers in list(self.by_stream.values()):
            for con in list(consumers.values()):
                out.extend(self._tick_one(con, now))
        if (self.dirty or self.streams.unsaved) and now >= self.next_save:
            self.save_dirty()
            self.next_save = now + SAVE_INTERVAL
        return out

    def _tick_one(self, con: Consumer, now: float) -> list[Out]:
        out: list[Out] = []
        for req in list(con.waiting):
            if req.expires is not None and req.expires <= now:
                con.waiting.remove(req)
                out.append(status(req.inbox, 408, "Request Timeout", req.pending_headers()))
            elif req.heartbeat and req.next_beat <= now:
                req.next_beat = now + req.heartbeat
                out.append(heartbeat(req.inbox, con.cseq, con.sseq))
        if con.waiting:
            out.extend(self.serve(con, now))
        push = con.push
        if push is not None:
            out.extend(self._tick_push(con, push, now))
        threshold = con.config.get("inactive_threshold", 0) / 1e9
        if threshold and not con.waiting and now - con.active >= threshold and not con.durable \
                and (push is None or not push.active):
            self._drop(con)
        return out

    def next_deadline(self) -> float | None:
        best: float | None = self.next_save if self.dirty or self.streams.unsaved else None
        for consumers in self.by_stream.values():
            for con in consumers.values():
                for when in _deadlines(con):
                    if best is None or when < best:
                        best = when
                due = con.replay_due
                if due and (con.waiting or con.push is not None):
                    best = due if best is None else min(best, due)
                    if due <= self.clock():
                        con.replay_due = 0.0     # asked for once more (a tick at once), then never again
                if "pause_until" in con.config and (con.waiting or con.push is not None):
                    paused = self.paused_ns(con)
                    if paused:                   # deliver again when the pause ends
                        when = self.clock() + paused / 1e9
                        best = when if best is None else min(best, when)
        return best

def _deadlines(con: Consumer) -> Iterator[float]:
    for req in con.waiting:
        if req.expires is not None:
            yield req.expires
        if req.heartbeat:
            yield req.next_beat
    if con.waiting and con.pending:
        yield min(p.deadline for p in con.pending.values())
    push = con.push
    if push is not None:
        if push.retry is not None:
            yield push.retry
        elif push.active and con.pending and not push.blocked():
            yield min(p.deadline for p in con.pending.values())
        if push.active and push.heartbeat:
            yield push.next_beat
    threshold = con.config.get("inactive_threshold", 0) / 1e9
    if threshold and not con.durable and not con.waiting and (push is None or not push.active):
        yield con.active + threshold


def parse_ack_subject(subject: str) -> tuple[str, str, int] | None:
    """(stream, consumer, stream seq) of a ``$JS.ACK`` subject, either form:
    ``$JS.ACK.<stream>.<consumer>.<n>.<sseq>.<cseq>.<ts>.<pending>`` or the
    one with domain and account hash before the stream (12+ tokens)."""
    tokens = subject.split(".")
    if len(tokens) == 9:
        stream, name, sseq = tokens[2], tokens[3], tokens[5]
    elif len(tokens) >= 12:
        stream, name, sseq = tokens[4], tokens[5], tokens[7]
    else:
        return None
    try:
        return stream, name, int(sseq)
    except ValueError:
        return None


def _nak_delay(rest: bytes) -> float:
    """``-NAK {"delay": ns}`` or ``-NAK <Go duration>``; 0 = redeliver now."""
    rest = rest.strip()
    if not rest:
        return 0.0
    try:
        doc = json.loads(rest)
        if isinstance(doc, dict) and isinstance(doc.get("delay"), int):
            return max(doc["delay"], 0) / 1e9
    except ValueError:
        pass
    return 0.0


__all__ = [
    "ACK_PREFIX",
    "SAVE_INTERVAL",
    "TABLE",
    "Consumer",
    "JsConsumers",
    "Out",
    "Pending",
    "parse_ack_subject",
]
