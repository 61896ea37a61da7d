"""The JetStream store's publish path: a partition's messages reach its stream in the order taken.

Theory of operation
-------------------
The pump (store.py) takes each partition's outbox (partition.py) and hands the calls to
:class:`Publisher`, which keeps one :class:`PartitionPublisher` per partition. A message is
one ``PUB`` with a reply subject, answered by the stream leader's PubAck.

The order problem (docs/scale-out.md, "Fault schedule", item 1): publishes are pipelined,
so when a stream leader goes away mid-call message *i* can be refused ("no responders"
while there is no leader) or lost with the old leader while *i+1*, sent a moment later,
is stored by the new one. Re-sending each failed message on its own timer then stored a
136-record Kafka batch as records 120-135, 11-86, 10..0, 119..87.

What the cluster offers (nats-server 2.15 source, server/jetstream_batching.go
``checkMsgHeadersPreClusteredProposal``, server/stream.go ``processJetStreamMsgWithBatch``):

* ``Nats-Expected-Last-Sequence: N`` is checked by the stream leader *before* it proposes
  the message, against its proposed sequence (``clseq - clfs``: stored plus in flight), so
  it pipelines. A refusal stages nothing. The ``Nats-Msg-Id`` duplicate check runs first,
  so a re-send of a stored message is still answered ``duplicate`` with its sequence,
  whatever it expected.
* ``Nats-Expected-Last-Msg-Id`` is checked only when the proposal is applied. A refused
  message leaves its id staged (sequence 0) on the leader, so its re-send is refused
  "duplicate message id is in process" (10158) until the window ends or the leader
  changes: no use for a chain whose links are re-sent.
* Atomic batches (``Nats-Batch-Id``, 2.12 and later, ``allow_atomic`` on the stream) keep one
  call together but not one call after another, stage every message on the leader, refuse a
  re-sent batch holding a stored id ("contains duplicate message", no sequence), allow 50
  open batches per stream, and need an option older servers refuse.

So each partition is published as a **chain**: every message expects the stream's last
sequence to be the one its predecessor gets (the previous ack's sequence plus the messages
sent since). A message whose predecessor was lost, refused or not yet stored cannot be
stored. Any failure (an error answer, no answer within the request timeout, a lost
connection) starts **recovery**: nothing new is sent; the messages in flight settle; the
failed ones (refused, unanswered) go back in front of the queue in their original order;
after a backoff (``RETRY_BACKOFF_S``, for the leader election) the first is sent
**alone**, with no expectation (everything before it is acknowledged, so it is safe), and
its ack gives the chain its sequence again. A re-send after a lost ack carries the same
``Nats-Msg-Id`` (layout.py), so JetStream answers it ``duplicate`` with the sequence it
stored it at. A call's answer names the sequence of its *first* message (the Kafka base
offset), not its lowest.

The chain needs one writer per stream. Kafka partitions have one leader gateway; Iggy,
NATS, HTTP and Pravega appends may come through any gateway, and there the chain would
do harm: a foreign message can take the sequence one of ours expected, so our next one
passes while ours is refused. A partition therefore publishes **shared** (pipelined,
no expectations; failures still settled and re-sent in order, the first alone) for
``SHARED_HOLD_S`` after the last sign of another writer: the mirror applied a message
this gateway did not publish (partition.py ``own_ids``, ``foreign_at``), an ack more
than one past the previous ack, or a chained message refused because the stream grew
past what it expected (the refusal names the last sequence). What that leaves
(docs/scale-out.md, "What is guaranteed"): while shared, a message may be stored after
the next one if a stream leader goes away between them; when a second writer starts
while the chain is on, the first of ours it overtakes before our mirror sees it may be
stored after the next of ours.

**A stale chain** (docs/scale-out.md, "Fault schedule", items 1 and 6). The chain's sequence
is only right while nobody else writes the stream. A Kafka partition's leadership can move
to another gateway and back while this one is idle past ``SHARED_HOLD_S``; the other's
messages then sit after the chain's last sequence. Pipelined, a call's messages expect
``tail``, ``tail + 1``, ...: the first ones are refused, but the one whose expectation
happens to equal the stream's real last sequence (``tail`` plus the other gateway's
count) is stored, and so is the rest of the call, before the refused head is re-sent.
Seeds 2 and 3 of bench/fault_schedule.py stored Kafka batches of 108 to 126 records that
way (the tail first, its head after it), and librdkafka numbered their records from the
call's base offset, naming other records. So the chain is dropped whenever the mirror has applied another writer's message
past its sequence (partition.py ``foreign_seq``): the next message goes alone. What the
mirror has not applied yet is the Kafka leader's catch-up (adapters/kafka/catch_up.py).
The chain went stale by itself too: after a freeze, one message's answer timed out while
the later ones' came back, and the lone re-send (answered duplicate at its old sequence)
set the chain's sequence below theirs; it now goes on from the highest acknowledged.

The chain uses only ``Nats-Expected-Last-Sequence`` and ``Nats-Msg-Id`` (JetStream since
nats-server 2.2), so it needs no stream option and works on every server Ferry supports.

Messages are given up ``PUBLISH_RETRY_S`` after the pump took their call, or at once when
the cluster refuses the message itself (a 4xx other than the chain's): the call fails (it
was never acknowledged), and so does every message the partition took before that moment
and has not stored: they were accepted after the failed one (a Kafka producer's later
batches were checked against its sequences), so storing them without it would break the
order they were given in. The clients send them again, in order.
"""

from __future__ import annotations

import logging
import re
import time
from collections import deque
from typing import Callable

import trio

from adapters.nats.client_codec import ServerMsg
from core.errors import StorageError
from core.message import now_us

from .errors import ConnectionLost, SlowCluster
from .layout import EXPECTED_LAST_SEQ, WRONG_LAST_SEQUENCE, ApiError, encode_message, pub_ack
from .partition import Outgoing, RemotePartition

log = logging.getLogger("ferry.store")

# How long the pump keeps re-sending a message whose acknowledgement did not come
# (no stream leader during an election, a lost connection): past it the append fails.
PUBLISH_RETRY_S = 30.0
# Pauses before a partition's failed messages are sent again, by consecutive failed
# attempts: a JetStream leader election takes about 5 s on loopback (store.py).
RETRY_BACKOFF_S = (0.1, 0.25, 0.5, 1.0, 2.0)
# How long a partition publishes without the chain after the last sign of another
# gateway writing the same stream (module docstring). Gateways writing one partition
# together renew it with every message the mirror applies, so it can be short: a Kafka
# partition whose leader gateway changed chains again 2 s after the old one's last write.
SHARED_HOLD_S = 2.0
# nats-server server/errors.json JSStreamDuplicateMessageConflict: the message id is staged
# on the leader by a proposal not yet applied (an earlier send of this very message).
DUPLICATE_IN_PROCESS = 10158
# Ids of this gateway's messages awaiting the mirror, per partition (partition.py
# own_ids): past this many (ids of messages never applied pile up: failed calls,
# duplicates), forgotten at once; the cost is 2 s unchained for what is in flight.
OWN_IDS_MAX = 100_000
_LAST_SEQ = re.compile(r"wrong last sequence: (\d+)")


class _Call:
    """One append call's messages awaiting their PubAcks."""

    __slots__ = ("part", "out", "left", "seqs", "dups", "error")

    def __init__(self, part: RemotePartition, out: Outgoing) -> None:
        self.part, self.out = part, out
        self.left = len(out.messages)
        self.seqs = [0] * self.left
        self.dups = 0
        self.error: BaseException | None = None

    def done(self, index: int, outcome) -> None:
        if isinstance(outcome, BaseException):
            self.error = self.error or outcome
        else:
            self.seqs[index] = outcome[0]
            self.dups += outcome[1]
        self.left -= 1
        if self.left:
            return
        n = len(self.out.messages)
        if self.error is not None:
            self.part.fail_in_flight(n, self.error, self.out.on_durable)
        else:
            # The first message's sequence: the call's base offset names its first record.
            self.part.await_applied(self.seqs[0], max(self.seqs), n, self.out.on_durable,
                                    duplicate=self.dups == n and self.out.producer is not None)


class _Msg:
    __slots__ = ("call", "index", "header", "payload", "deadline", "order")

    def __init__(self, call: _Call, index: int, header: bytes, payload: bytes, deadline: float, order: int):
        self.call, self.index, self.header, self.payload = call, index, header, payload
        self.deadline, self.order = deadline, order


class Publisher:
    """Every partition's :class:`PartitionPublisher`, on the store's cluster connection."""

    def __init__(self, nc, nursery: trio.Nursery, running: Callable[[], bool]) -> None:
        self.nc, self.nursery, self.running = nc, nursery, running
        self.parts: dict[object, PartitionPublisher] = {}
        self.recoveries = 0  # failure episodes, all partitions
        self.resent = 0  # messages sent again

    def submit(self, key, part: RemotePartition, subject: str, outs: list[Outgoing]) -> None:
        pub = self.parts.get(key)
        if pub is None or pub.part is not part:  # first use, or the partition was reopened
            pub = self.parts[key] = PartitionPublisher(self, part, subject)
        pub.submit(outs)

    def forget(self, key) -> None:
        """The partition is closed: its publisher finishes what it holds, then goes."""
        self.parts.pop(key, None)


class PartitionPublisher:
    """One partition's chain of publishes (module docstring)."""

    def __init__(self, owner: Publisher, part: RemotePartition, subject: str) -> None:
        self.owner, self.part, self.subject = owner, part, subject
        self.queue: deque[_Msg] = deque()
        self.in_flight = 0
        self.tail: int | None = None  # sequence the next chained message expects; None: send one alone
        self.alone = True  # the next message goes by itself, the rest wait for its answer
        self.lone: _Msg | None = None  # the message sent alone, until its answer
        self.failed: list[_Msg] = []  # this episode's messages to send again
        self.recovering = False
        self.waiting = False  # a backoff timer is armed
        self.attempt = 0
        self.shared_until = float("-inf")  # unchained until then: another writer showed in the answers
        self.last_seq = 0  # the last non-duplicate ack's sequence
        self._order = 0
        self.cut = 0  # messages up to this order fail: an earlier one failed for good (_give_up)

    # -- taking calls -------------------------------------------------------------------
    def submit(self, outs: list[Outgoing]) -> None:
        ts = now_us()
        deadline = trio.current_time() + PUBLISH_RETRY_S
        own = self.part.own_ids
        if len(own) > OWN_IDS_MAX:  # ids of messages never applied (failed, duplicates)
            own.clear()
        for out in outs:
            call = _Call(self.part, out)
            for i, (mid, origin, headers, payload) in enumerate(out.messages):
                own.add(mid)
                self._order += 1
                header = encode_message(mid, ts, origin, headers, out.producer, i, self.part.client_ids)
                self.queue.append(_Msg(call, i, header, payload, deadline, self._order))
        self._drive()

    # -- sending ------------------------------------------------------------------------
    def _drive(self) -> None:
        if self.recovering:
            if self.in_flight or self.waiting:
                return  # let what is in flight settle first
            self.waiting = True
            delay = RETRY_BACKOFF_S[min(self.attempt, len(RETRY_BACKOFF_S) - 1)]
            self.attempt += 1
            self.owner.nursery.start_soon(self._resume, delay)
            return
        now = trio.current_time()
        shared = now < self.shared_until or time.monotonic() - self.part.foreign_at < SHARED_HOLD_S
        if self.tail is not None and self.part.foreign_seq > self.tail:
            # Another writer stored past the chain's last known sequence (module docstring,
            # "A stale chain"): the next message goes alone and gives the chain its sequence.
            self.tail = None
        running = self.owner.running()
        while self.queue and not self.recovering and self.lone is None:
            alone = self.alone or (not shared and self.tail is None)
            if alone and self.in_flight:
                return  # a message sent alone goes after every earlier answer
            m = self.queue.popleft()
            call = m.call
            if call.error is not None:  # an earlier message of the call failed: not this one either
                call.done(m.index, call.error)
                continue
            if m.order <= self.cut:
                call.done(m.index, StorageError("an earlier append on the partition failed"))
                continue
            if self.part.closed or not running:
                call.done(m.index, StorageError(f"partition {self.part.partition_id} is closed"))
                continue
            if now >= m.deadline:
                self._give_up(m, StorageError(f"the cluster did not store the message within {PUBLISH_RETRY_S:g} s"))
                continue
            expected = None
            if alone:
                self.lone, self.alone = m, False
            elif shared:
                self.tail = None  # unchained: the chain starts again from a lone message
            else:
                expected = self.tail
                self.tail += 1
            self._send(m, expected)
        if self.recovering:
            self._drive()  # a send failed at once: settle and back off

    def _send(self, m: _Msg, expected: int | None) -> None:
        header = m.header
        if expected is not None:  # as the block's last line: layout.decode_message drops it
            header = b"%s%s: %d\r\n\r\n" % (header[:-2], EXPECTED_LAST_SEQ.encode(), expected)
        self.in_flight += 1
        try:
            self.owner.nc.request_cb(self.subject, m.payload, header,
                                     lambda outcome: self._answered(m, expected, outcome))
        except (ConnectionLost, SlowCluster) as exc:
            self.in_flight -= 1
            self._failed(m, exc)
        except ValueError as exc:  # over the cluster's max_payload
            self.in_flight -= 1
            self._give_up(m, StorageError(f"message refused by the cluster: {exc}"))

    async def _resume(self, delay: float) -> None:
        await trio.sleep(delay)
        self.waiting = False
        self.recovering = False
        failed, self.failed = sorted(self.failed, key=lambda m: m.order), []
        self.owner.resent += len(failed)
        self.queue.extendleft(reversed(failed))
        self.alone, self.tail = True, None
        self._drive()

    # -- answers ------------------------------------------------------------------------
    def _answered(self, m: _Msg, expected: int | None, outcome) -> None:
        self.in_flight -= 1
        if isinstance(outcome, ServerMsg):
            try:
                seq, dup = pub_ack(outcome.payload)
            except ApiError as exc:
                self._refused(m, expected, exc)
            else:
                self._stored(m, expected, seq, dup)
        else:  # TimeoutError, NoResponders, ConnectionLost
            self._failed(m, outcome)
        self._drive()

    def _stored(self, m: _Msg, expected: int | None, seq: int, dup: bool) -> None:
        self.attempt = 0
        lone = self.lone is m
        if lone:
            self.lone = None
        if lone:
            # Nothing else was in flight: the chain goes on from it. A duplicate's sequence
            # too: with one writer what is stored of ours is a prefix of what we sent, so
            # the next ones are either duplicates at the following sequences or new there.
            # But a re-sent message whose first answer was lost may sit before later ones
            # already acknowledged (recovery re-sends only the failed): the chain goes on
            # from the highest sequence acknowledged, or it is stale (module docstring).
            self.tail = max(seq, self.last_seq)
        if not dup:
            if self.last_seq and seq > self.last_seq + 1 and expected is None and not lone \
                    and trio.current_time() < self.shared_until:
                self._shared()  # still interleaved with another writer
            self.last_seq = max(self.last_seq, seq)
        m.call.done(m.index, (seq, dup))

    def _refused(self, m: _Msg, expected: int | None, exc: ApiError) -> None:
        if exc.err_code == WRONG_LAST_SEQUENCE:
            found = _LAST_SEQ.search(exc.description)
            if expected is not None and found is not None and int(found.group(1)) > expected:
                self._shared()  # the stream grew past our chain: another gateway writes it
            self._failed(m, exc)
        elif exc.code >= 500 or exc.err_code == DUPLICATE_IN_PROCESS or "no response" in exc.description.lower():
            self._failed(m, exc)  # no stream leader yet, a server busy; an earlier send still being proposed
        else:  # the message itself (its size, its headers): sending it again changes nothing
            self._give_up(m, StorageError(f"the cluster refused the message: {exc}"))

    def _give_up(self, m: _Msg, exc: StorageError) -> None:
        """``m``'s call fails, and with it every message taken so far and not stored yet:
        they were accepted after it (a Kafka producer's later batches were checked against
        its sequence), so storing them without it would break the order it was given in."""
        if self.lone is m:
            self.lone = None
        if self.cut < self._order:
            log.warning("partition %d: an append failed (%s); failing the ones taken after it",
                        self.part.partition_id, exc)
        self.cut = self._order
        m.call.done(m.index, exc)

    def _failed(self, m: _Msg, exc) -> None:
        if self.lone is m:
            self.lone = None
        if not self.recovering:
            self.owner.recoveries += 1
            log.debug("partition %d: publish failed (%s); settling, then sending again in order",
                      self.part.partition_id, exc or type(exc).__name__)
        self.recovering = True
        if m.order <= self.cut:
            m.call.done(m.index, StorageError("an earlier append on the partition failed"))
        elif trio.current_time() >= m.deadline or not self.owner.running():
            self._give_up(m, StorageError(f"the cluster did not store the message: {exc or type(exc).__name__}"))
        else:
            self.failed.append(m)

    def _shared(self) -> None:
        self.shared_until = trio.current_time() + SHARED_HOLD_S


__all__ = ["PUBLISH_RETRY_S", "RETRY_BACKOFF_S", "Publisher"]
