"""JetStream push delivery: a push consumer's interest, flow control and heartbeats (no trio).

Theory of operation
-------------------
A push consumer (``deliver_subject`` set) sends its messages to that
subject instead of waiting for pull requests. :class:`PushState` is the part
of a :class:`~adapters.nats.jetstream.model.Consumer` that only push
consumers have; :class:`PushDelivery`, which ``JsConsumers`` owns, drives it
with the cursor pull requests use (``cursor.Cursor``: next message, ack
reply, pending set and redelivery). The rules are
nats-server's (``server/consumer.go``, loopAndGatherMsgs, deliverMsg,
needFlowControl, processFlowControl, sendIdleHeartbeat):

* **Interest.** Messages go out only while someone subscribes to the
  deliver subject (``active``, nats-server's ``o.active`` and ``push_bound``).
  The NATS session reports subscription changes; an ephemeral push
  consumer with no subscriber is deleted after ``inactive_threshold``.
* **Flow control** (``flow_control``). Every delivery adds its size
  (deliver subject + ack reply + header block + payload) to ``pbytes``.
  Past half the window (``maxpb``, 2 MiB at first) a ``100 FlowControl
  Request`` status goes out with a ``$JS.FC.<stream>.<consumer>.<id>``
  reply; past the whole window delivery stops until the client publishes
  to that reply. Each answer frees the bytes counted when the request was
  sent and doubles the window, up to :data:`FC_MAX_PENDING`.
* **Idle heartbeats** (``idle_heartbeat``). After that long without a
  delivery, a ``100 Idle Heartbeat`` status with the last consumer and
  stream sequences, and ``Nats-Consumer-Stalled: <reply>`` while a flow
  control request is unanswered (the client answers that reply too).
* **Bounded turns.** One call delivers at most :data:`PUSH_BATCH` messages,
  :data:`PUSH_BATCH_BYTES`, and no more than the subscriber's outbox has
  room for below its high water mark (``room``; at least one message when
  there is any room); the timer task calls again (at once, or after
  :data:`PUSH_RETRY` when the outbox was full). ``max_ack_pending`` bounds what is unacked, so a
  slow subscriber never makes Ferry queue more than its outbox allows.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Callable

from core.subjects import is_literal, subject_matches

from .pull import Out, status

FC_PREFIX = "$JS.FC."
# nats-server's JsFlowControlMaxPending: the largest flow-control window; the first is 1/16 of it.
FC_MAX_PENDING = 32 * 1024 * 1024
FC_FIRST_WINDOW = FC_MAX_PENDING // 16
# One delivery turn (a publish, an ack, a timer tick) sends at most this much,
# then leaves the rest to the timer task, so no turn builds an unbounded list and
# other tasks run between two turns (issue 30: a whole-bucket KV ``keys`` or
# ``watch`` held the event loop 51-69 ms per 256-message turn at load 15 in the
# gateway, about 0.2 ms a message with the frames' encoding and writing; 64 keep
# a turn near 15 ms at that rate, ~1.5 ms in-process at load 2). The byte budget
# bounds the turns of large messages the same way: 256 KiB is 64 messages of 4 KiB.
PUSH_BATCH = 64
PUSH_BATCH_BYTES = 256 * 1024
PUSH_RETRY = 0.01            # seconds before a turn that stopped on a full outbox tries again
_ID_CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"   # nats-server's base 62 digits
_FC_REQUEST = b"NATS/1.0 100 FlowControl Request\r\n\r\n"


@dataclass(slots=True)
class PushState:
    """Delivery state of one push consumer."""

    subject: str                 # deliver_subject
    group: str                   # deliver_group ("" = none)
    heartbeat: float             # seconds, 0 = none
    flow: bool
    active: bool = False         # someone subscribes to ``subject``
    next_beat: float = 0.0
    pbytes: int = 0              # bytes delivered since the last answered flow control request
    maxpb: int = 0               # flow-control window (0 = no flow control)
    fcid: str = ""               # reply subject of the unanswered request
    fcsz: int = 0                # pbytes when it was sent
    retry: float | None = None   # when an unfinished turn continues

    @classmethod
    def of(cls, config: dict, now: float) -> PushState | None:
        """The push state for a consumer config, or None for a pull consumer."""
        subject = config.get("deliver_subject")
        if not subject:
            return None
        heartbeat = config.get("idle_heartbeat", 0) / 1e9
        flow = bool(config.get("flow_control"))
        return cls(subject, config.get("deliver_group", ""), heartbeat, flow,
                   next_beat=now + heartbeat, maxpb=FC_FIRST_WINDOW if flow else 0)

    def blocked(self) -> bool:
        """Waiting for a flow control answer (nats-server: pbytes over the window)."""
        return self.maxpb > 0 and self.pbytes > self.maxpb

    def sent(self, size: int, now: float, stream: str, consumer: str) -> Out | None:
        """Account a delivery of ``size`` bytes; returns a flow control request when one is due."""
        if self.heartbeat:
            self.next_beat = now + self.heartbeat
        if not self.maxpb:
            return None
        self.pbytes += size
        if not self.fcid and self.pbytes > self.maxpb // 2:
            self.fcid = f"{FC_PREFIX}{stream}.{consumer}." + "".join(secrets.choice(_ID_CHARS) for _ in range(4))
            self.fcsz = self.pbytes
            return Out(self.subject, block=_FC_REQUEST, reply=self.fcid)
        if self.fcid and self.pbytes - self.fcsz >= self.maxpb:
            self.fcsz += size
        return None

    def answered(self, subject: str) -> bool:
        """A publish on a flow control reply; True if it was the latest request's."""
        if not self.fcid or subject != self.fcid:
            return False
        self.maxpb = min(self.maxpb * 2, FC_MAX_PENDING)
        self.pbytes = max(self.pbytes - self.fcsz, 0)
        self.fcid, self.fcsz = "", 0
        return True

    def beat(self, cseq: int, sseq: int, now: float) -> Out:
        """The idle heartbeat status, and the next one scheduled."""
        self.next_beat = now + self.heartbeat
        headers = [("Nats-Last-Consumer", str(cseq)), ("Nats-Last-Stream", str(sseq))]
        if self.fcid:
            headers.append(("Nats-Consumer-Stalled", self.fcid))
        return status(self.subject, 100, "Idle Heartbeat", headers)


class PushDelivery:
    """Delivery to every push consumer of one broker's streams. ``cursor``
    (``cursor.Cursor``) picks, builds and delivers each message; ``interest``
    says whether a subject has subscribers, ``room`` how many bytes its
    subscribers' outboxes take below high water, ``wake`` that a deadline may
    have moved (the NATS session module and driver supply all three)."""

    def __init__(self, cursor, interest: Callable[[str], bool], room: Callable[[str], int],
                 wake: Callable[[], None]) -> None:
        self.cursor = cursor
        self.interest = interest
        self.room = room
        self.wake = wake
        self.subjects: dict[str, set] = {}      # deliver subject -> its push consumers

    def set_push(self, con, now: float) -> None:
        """(Re)build a consumer's push state from its config and index it."""
        con.push = PushState.of(con.config, now)
        if con.push is not None:
            self.subjects.setdefault(con.push.subject, set()).add(con)
            con.push.active = self.interest(con.push.subject)
            if con.push.active:
                con.push.retry = now             # the timer task starts delivering

    def unindex(self, con) -> None:
        if con.push is not None:
            group = self.subjects.get(con.push.subject)
            if group is not None:
                group.discard(con)
                if not group:
                    del self.subjects[con.push.subject]

    def serve(self, con, now: float) -> list[Out]:
        """Send a push consumer what is due, within one bounded turn."""
        push = con.push
        out: list[Out] = []
        if push is None:
            return out
        push.retry = None
        if not push.active:
            return out
        cursor = self.cursor
        stream, name, subject = con.stream.name, con.name, push.subject
        budget = min(self.room(subject), PUSH_BATCH_BYTES)
        if budget <= 0:                          # the subscriber's outbox is past high water: wait
            push.retry = now + PUSH_RETRY
            return out
        # What is left goes on the timer task's next turn: at once, or a little
        # later when the subscriber's outbox (not the turn's own cap) was the limit.
        later = now + PUSH_RETRY if budget < PUSH_BATCH_BYTES else now
        count = nbytes = 0
        while not push.blocked():
            if count >= PUSH_BATCH:
                push.retry = now
                break
            if nbytes >= budget:
                push.retry = later
                break
            got = cursor.next(con, now)
            if got is None:
                break
            seq, view, redelivery = got
            msg = cursor.message(con, seq, view, redelivery, now, subject)
            size = len(subject) + len(msg.ack) + len(msg.block) + len(msg.payload)   # nats-server's pmsg.size()
            if count and nbytes + size > budget:
                if not redelivery:               # not handed out: first in line next turn
                    con.scan = seq - 1
                    con.ahead.appendleft(view)
                push.retry = later
                break
            cursor.deliver(con, seq, view, redelivery, now)
            out.append(msg)
            request = push.sent(size, now, stream, name)
            if request is not None:
                out.append(request)
            count += 1
            nbytes += size
        return out

    def tick(self, con, push: PushState, now: float) -> list[Out]:
        active = self.interest(push.subject)
        if active != push.active:
            self._activate(con, active, now)
        out = self.serve(con, now)
        if push.active and push.heartbeat and push.next_beat <= now:
            out.append(push.beat(con.cseq, con.sseq, now))
        return out

    def _activate(self, con, active: bool, now: float) -> None:
        push = con.push
        if push is None:
            return
        push.active = active
        if active:
            push.next_beat = now + push.heartbeat
        else:
            con.active = now                     # the inactive threshold counts from here

    def interest_changed(self, pattern: str, now: float) -> list[Out]:
        """A subscription on ``pattern`` came or went: start or stop the push
        consumers whose deliver subject it matches."""
        if is_literal(pattern):
            found = list(self.subjects.get(pattern, ()))
        else:
            found = [c for subject, group in self.subjects.items() if subject_matches(pattern, subject)
                     for c in group]
        out: list[Out] = []
        for con in found:
            active = self.interest(con.push.subject)  # type: ignore[union-attr]
            if active != con.push.active:  # type: ignore[union-attr]
                self._activate(con, active, now)
                out.extend(self.serve(con, now))
        if found:
            self.wake()
        return out

    def flow_reply(self, con, subject: str, now: float) -> list[Out]:
        """A publish on ``con``'s ``$JS.FC`` subject (``parse_fc_subject``)."""
        if not con.push.answered(subject):
            return []
        out = self.serve(con, now)
        self.wake()
        return out


def parse_fc_subject(subject: str) -> tuple[str, str] | None:
    """(stream, consumer) of a ``$JS.FC.<stream>.<consumer>.<id>`` subject, or None."""
    tokens = subject.split(".")
    if len(tokens) != 5:
        return None
    return tokens[2], tokens[3]


__all__ = ["FC_MAX_PENDING", "FC_PREFIX", "PUSH_BATCH", "PUSH_BATCH_BYTES", "PUSH_RETRY", "PushDelivery",
           "PushState", "parse_fc_subject"]
