"""JetStream consumers on Ferry's log: the registry, pull requests, acks and timers (no trio).

Theory of operation
-------------------
:class:`JsConsumers` holds every consumer of one broker's streams
(``model.Consumer``: stream and consumer sequences, ack floor, ``pending``,
``rdc``), and owns the parts that act on them, each handed what it needs:
the :class:`~adapters.nats.jetstream.cursor.Cursor` (where a consumer
starts, what it hands out next, ``num_pending``), push delivery
(:class:`~adapters.nats.jetstream.push.PushDelivery`), durable state
(:class:`~adapters.nats.jetstream.consumer_store.ConsumerStore`) and
interest / work-queue retention
(:class:`~adapters.nats.jetstream.retention.RetentionRules`, which the
streams module asks through ``JetStreams.needed``).

Pull requests (``$JS.API.CONSUMER.MSG.NEXT``) wait in a bounded FIFO
(``max_waiting``). :meth:`JsConsumers.serve` hands them what the cursor
gives, in arrival order. Everything sent is an output (:class:`Out`): a
stored message with its ``$JS.ACK`` reply subject, or a status (404, 408,
409, 400, 100 heartbeat) to a request's inbox, or the empty reply to a
synchronous ack. ``emit`` (set by the NATS session module) routes outputs to
the inboxes' subscribers.

Push consumers (``deliver_subject``) send to the deliver subject while
someone subscribes to it (the session reports subscription changes to
``push_delivery.interest_changed``), with the same ack, redelivery and
``max_ack_pending`` rules, plus flow control (:meth:`flow_reply`) and idle
heartbeats. Ordered consumers are push consumers with ``ack_policy`` none,
flow control and heartbeats: nothing else is special about them on the
server side.

Time is an argument (``now``, monotonic seconds): :meth:`JsConsumers.tick`
expires requests, sends heartbeats, makes unacked messages due after
``ack_wait`` (or their ``backoff`` step), drops those past ``max_deliver``,
deletes idle ephemerals and saves dirty state; :meth:`next_deadline` says
when to call it next. The NATS driver runs both in one task per broker and
is woken through ``wake`` when a deadline may have moved earlier.

Scale-out (docs/scale-out.md "JetStream consumers"): the key-value tables'
watcher marks the registry stale when other gateways' writes arrive;
:meth:`JsConsumers.refresh`, run first by every entry point and the tick,
follows the streams (``replicated``) and merges the durable consumers' saved
state (``consumer_store.merge``), so a durable is one consumer across gateways.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from typing import Any, Callable, Iterator

from core.errors import FerryError

from .consumer_config import check_consumer_update, same_settings
from .consumer_store import SAVE_INTERVAL, TABLE, ConsumerStore, merge
from .cursor import ACK_PREFIX, Cursor
from .errors import JsApiError
from .model import Consumer, Pending
from .pull import Out, heartbeat, parse_pull, status
from .push import PushDelivery, parse_fc_subject
from .replicated import follow_removed, follow_streams
from .retention import RetentionRules
from .streams import JetStreams, JsStream, go_time, parse_go_time

_NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
log = logging.getLogger("ferry.nats.jetstream")


class JsConsumers:
    """Every consumer of one broker's JetStream streams."""

    def __init__(self, streams: JetStreams, tables=None, clock: Callable[[], float] = time.monotonic) -> None:
        self.streams = streams
        self.clock = clock
        self.by_stream: dict[str, dict[str, Consumer]] = {}
        self.emit: Callable[[list[Out]], None] | None = None
        self.wake: Callable[[], None] = lambda: None
        self.interest: Callable[[str], bool] = lambda inbox: True
        # Bytes a deliver subject's subscribers can take below their outbox high water (session module).
        self.room: Callable[[str], int] = lambda subject: 1 << 62
        self.store = ConsumerStore(streams, tables, self.by_stream)
        self.cursor = Cursor(streams, self.store.mark)
        self.retention = RetentionRules(self.by_stream)
        # The session module and the driver set interest, room and wake after this:
        # push delivery asks for them through these, so it always gets the current ones.
        self.push_delivery = PushDelivery(self.cursor, lambda subject: self.interest(subject),
                                          lambda subject: self.room(subject), lambda: self.wake())
        streams.needed = self.retention.needed
        # Scale-out: the key-value tables say when other gateways' writes arrived
        # (KvTables.watch); refresh() applies them at the next safe point.
        self.stale = False
        self._thread = threading.get_ident()
        if tables is not None and hasattr(tables, "watch"):
            tables.watch(self._replayed)

    def load(self) -> None:
        """Rebuild the durable consumers from the table (at start)."""
        now = self.clock()
        for con in self.store.load(now):
            self.by_stream.setdefault(con.stream.name, {})[con.name] = con
            self.push_delivery.set_push(con, now)

    # -- other gateways' writes (scale-out) ------------------------------------------------
    def _replayed(self) -> None:
        """The tables' watcher: writes from elsewhere arrived. It may run inside one of
        this registry's own writes (their catch-up) or on a worker thread, so it only
        takes note; the timers task wakes (from its own thread) and refreshes."""
        self.stale = True
        if threading.get_ident() == self._thread:
            self.wake()

    def refresh(self) -> None:
        """Apply what other gateways changed since the last call: streams that
        appeared, changed or went (``replicated``), then the durable consumers
        they saved: new ones added, deleted ones dropped, the state of the
        others merged (``consumer_store.merge``), one consumer across gateways."""
        if not (self.stale or self.streams.removed.behind):
            return
        stale, self.stale = self.stale, False
        try:
            if stale:
                self._refresh(self.clock())
            follow_removed(self.streams)         # purges and deletes made elsewhere: one slice a call
        except (FerryError, ValueError, KeyError, TypeError) as exc:
            # a table read failed, or an entry this version cannot read: the timers and
            # the request that called must go on; the next write from elsewhere retries
            log.error("following other gateways' JetStream changes failed: %r", exc)

    def _refresh(self, now: float) -> None:
        added, dropped = follow_streams(self.streams)
        for name in dropped:                     # deleted elsewhere: its consumers went with it
            for con in list(self.by_stream.pop(name, {}).values()):
                self.push_delivery.unindex(con)
                self.store.dirty.discard(con)
        for doc, version in self.store.changes():
            self._follow(doc, version, now)
        if added:                                # consumers saved before this gateway knew their stream
            names = {st.name for st in added}
            for doc, version in self.store.entries():
                if doc["stream"] in names:
                    self._follow(doc, version, now)
        if self.store.removals:                  # deleted elsewhere
            saved = [c for cons in self.by_stream.values() for c in cons.values() if c.version is not None]
            for con in self.store.gone(saved):
                self.by_stream.get(con.stream.name, {}).pop(con.name, None)
                self.push_delivery.unindex(con)
                self.store.dirty.discard(con)

    def _follow(self, doc: dict, version: int, now: float) -> None:
        """One saved consumer from the table (maybe this gateway's own write)."""
        st = self.streams.streams.get(doc["stream"])
        if st is None:
            return
        consumers = self.by_stream.setdefault(st.name, {})
        con = consumers.get(doc["name"])
        if con is not None and con.version is not None and con.version >= version:
            return                               # written here, or already merged
        if con is None or not con.durable or con.stream is not st or con.created != doc["created"]:
            new = self.store.restore(doc, now)   # made (or made again) elsewhere
            if new is None:
                return
            new.version = version
            if con is not None:
                new.waiting = con.waiting        # requests waiting here stay with the name
                self.push_delivery.unindex(con)
                self.store.dirty.discard(con)
            consumers[new.name] = new
            self.push_delivery.set_push(new, now)
            return
        if doc["config"] != json.loads(json.dumps(con.config)):   # updated or paused elsewhere (as saved)
            self.push_delivery.unindex(con)
            con.config = doc["config"]
            self.push_delivery.set_push(con, now)
        acked, ahead = merge(con, doc, now)
        self.streams.release(st, acked)          # interest / work queue: what acks elsewhere freed
        con.version = version
        if ahead:
            self.store.mark(con)                 # this side knows more: write the join back
        if con.waiting or con.push is not None:
            self.wake()

    # -- registry ---------------------------------------------------------------------
    def count(self, stream: str | None = None) -> int:
        if stream is not None:
            return len(self.by_stream.get(stream, ()))
        return sum(len(c) for c in self.by_stream.values())

    def get(self, stream: str, name: str) -> Consumer:
        self.refresh()
        self.streams.get(stream)
        con = self.by_stream.get(stream, {}).get(name)
        if con is None:
            raise JsApiError("JSConsumerNotFoundErr")
        return con

    def names(self, stream: str) -> list[str]:
        self.refresh()
        self.streams.get(stream)
        return sorted(self.by_stream.get(stream, {}))

    def add(self, st: JsStream, name: str | None, cfg: dict, durable: bool, action: str) -> Consumer:
        """Create (or find, or update) a consumer; ``name`` None = a new ephemeral name."""
        self.refresh()
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
            self.push_delivery.unindex(con)
            con.config = cfg
            self.push_delivery.set_push(con, self.clock())
            self.store.save(con)
            return con
        if action == "update":
            raise JsApiError("JSConsumerDoesNotExist")
        if st.config["retention"] == "workqueue":
            self.retention.check_work_queue(st, name, cfg)
        con = Consumer(st, name, cfg, go_time(time.time_ns()), durable, active=self.clock())
        start = self.cursor.start_seq(con)
        con.sseq = con.floor_sseq = con.scan = con.np_to = start - 1
        consumers[name] = con
        self.push_delivery.set_push(con, con.active)
        self.store.save(con)
        return con

    def delete(self, stream: str, name: str) -> None:
        con = self.get(stream, name)
        self._drop(con)

    def drop_stream(self, stream: str) -> None:
        """The stream is deleted: so are its consumers."""
        for con in list(self.by_stream.get(stream, {}).values()):
            self._drop(con)
        self.by_stream.pop(stream, None)

    def _drop(self, con: Consumer) -> None:
        self.by_stream.get(con.stream.name, {}).pop(con.name, None)
        self.push_delivery.unindex(con)
        self.store.remove(con)
        st = con.stream
        if st.config["retention"] != "limits" and st.index is not None:
            # what only it still needed goes, checked in the warm-up's slices (warmup.release_step)
            st.index.to_release = list(reversed(st.index.live))

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
               "num_waiting": len(con.waiting), "num_pending": self.cursor.num_pending(con)}
        if con.push is not None and con.push.active:
            doc["push_bound"] = True
        paused = self.cursor.paused_ns(con)
        if paused:
            doc["paused"], doc["pause_remaining"] = True, paused
        doc["ts"] = go_time(time.time_ns())
        return doc

    # -- pull requests ----------------------------------------------------------------------
    def pull(self, stream: str, name: str, inbox: str, payload: bytes, now: float) -> list[Out] | None:
        """A ``MSG.NEXT`` request; None when there is no such consumer (no responders)."""
        self.refresh()
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
            got = self.cursor.next(con, now)
            if got is None:
                break
            seq, view, redelivery = got
            msg = self.cursor.message(con, seq, view, redelivery, now, req.inbox)
            size = len(msg.subject) + len(msg.headers) + len(msg.payload) + len(msg.ack)
            if req.max_bytes and size > req.bytes_left:
                con.waiting.popleft()
                if not redelivery:
                    con.scan = seq - 1           # not handed out: the next request sees it again
                out.append(status(req.inbox, 409, "Message Size Exceeds MaxBytes",
                                  req.pending_headers()))
                continue
            self.cursor.deliver(con, seq, view, redelivery, now)
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

    def set_pause(self, con: Consumer, until: str | None) -> None:
        """``CONSUMER.PAUSE``: pause until ``until`` (RFC 3339), or resume (None)."""
        cfg = {k: v for k, v in con.config.items() if k != "pause_until"}
        if until and parse_go_time(until) > 0:
            cfg["pause_until"] = go_time(parse_go_time(until))
        con.config = cfg
        self.store.save(con)
        self.wake()

    # -- acks ---------------------------------------------------------------------------------
    def ack(self, subject: str, payload: bytes, reply: str, now: float) -> list[Out] | None:
        """A client's publish on a ``$JS.ACK`` subject; None when it names no consumer."""
        parsed = parse_ack_subject(subject)
        if parsed is None:
            return None
        stream, name, seq = parsed
        self.refresh()
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
        out.extend(self.push_delivery.serve(con, now) if con.push is not None else self.serve(con, now))
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
        self.store.mark(con)

    def flow_reply(self, subject: str, now: float) -> list[Out] | None:
        """A publish on a ``$JS.FC`` subject; None when it names no push consumer."""
        parsed = parse_fc_subject(subject)
        if parsed is None:
            return None
        con = self.by_stream.get(parsed[0], {}).get(parsed[1])
        if con is None or con.push is None:
            return None
        return self.push_delivery.flow_reply(con, subject, now)

    # -- appends and timers -------------------------------------------------------------------
    def appended(self, st: JsStream, now: float) -> list[Out]:
        """New messages in ``st``: serve its waiting requests and push consumers."""
        out: list[Out] = []
        pushed = False
        for con in self.by_stream.get(st.name, {}).values():
            if con.push is not None:
                got = self.push_delivery.serve(con, now)
                pushed = pushed or bool(got) or con.push.retry is not None
                out.extend(got)
            elif con.waiting:
                out.extend(self.serve(con, now))
        if pushed:
            self.wake()                          # new ack deadlines, or a turn to finish
        return out

    def tick(self, now: float) -> list[Out]:
        """Expire requests, heartbeats, redeliveries, idle ephemerals, saves."""
        self.refresh()
        out: list[Out] = []
        for consumers in list(self.by_stream.values()):
            for con in list(consumers.values()):
                out.extend(self._tick_one(con, now))
        self.store.tick(now)
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
            out.extend(self.push_delivery.tick(con, push, now))
        threshold = con.config.get("inactive_threshold", 0) / 1e9
        if threshold and not con.waiting and now - con.active >= threshold and not con.durable \
                and (push is None or not push.active):
            self._drop(con)
        return out

    def next_deadline(self) -> float | None:
        if self.stale or self.streams.removed.behind:
            return self.clock()                  # writes from elsewhere to apply (refresh)
        best: float | None = self.store.next_deadline()
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
                    paused = self.cursor.paused_ns(con)
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
    except (ValueError, RecursionError):  # not JSON (deep nesting included: tests/fuzz): no delay
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
