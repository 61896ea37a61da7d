"""One NATS client as seen by the broker: events in, broker calls out (no trio).

Theory of operation
-------------------
:class:`NatsSession` sits between a :class:`~adapters.nats.connection.NatsServerConnection`
(protocol state) and the :class:`~core.broker.Broker` (subjects, storage).
The trio driver feeds it the connection's events with :meth:`handle`; every
frame for the client, replies and deliveries alike, goes into one bounded
:class:`~adapters.nats.outbox.Outbox` that the driver's write loop drains.

* ``Sub``/``Unsub`` add and remove :class:`_Sink` objects in the broker's
  subject trie (``core.live``); a sink delivers to one subscription.
* ``Pub``/``HPub`` on a subject that a stored topic captures
  (``Broker.topic_for_subject``, docs/addressing.md) is appended to the log:
  headers translated to canonical (``adapters.nats.translate``), the subject
  kept in ``ferry-nats-subject``, the client's own header block passed along
  so live NATS subscribers get it byte for byte. When the publish has a reply
  subject, a JetStream-style PubAck (``{"stream","seq"}``) is published to it
  once the append is durable under the fsync policy (nats.md section 10).
  Any other publish is plain core NATS: offered to live subscribers, not
  stored; if nobody listens and the client asked for ``no_responders``, the
  client gets the 503 status message on its reply subscription.
* Fan-out never awaits (STYLE.md section 3): :meth:`Outbox.offer` refuses once
  ``max_pending`` bytes are queued, and the session is marked slow. The driver
  then closes the connection without an ``-ERR``, as nats-server does
  (nats.md section 11). A publisher that fills another client's outbox past
  its high water mark notes it in ``stalled``; the driver then holds that
  publisher's next read back briefly (nats-server's fast-producer stall).
* :meth:`process` is the driver's one call per receive. Plain PUBs come from
  :meth:`NatsServerConnection.next_runs` as runs of one subject and reply and
  go through :meth:`publish_runs`, which counts a run nobody subscribes to,
  renders a run's ``MSG`` frames once per subscriber, or hands its messages to
  :meth:`publish_batch`, which queues ``MSG`` fragments straight into NATS
  subscribers' outboxes (no ``Delivery``, no event) whenever the general path
  would do exactly that; everything else goes through :meth:`handle`.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from typing import Callable

from core.addressing import PARTITION_KEY_HEADER
from core.errors import FerryError
from core.live import Delivery
from core.log import AppendInput
from core.subjects import subject_matches

from .codec import CRLF, PreparedMessage
from .connection import NatsServerConnection
from .events import (
    NEED_DATA,
    Connect,
    ConnectionClosed,
    Event,
    HPub,
    Ping,
    Pong,
    Pub,
    Sub,
    Unsub,
)
from .headers import HeaderBlock, no_responders_block, parse_headers
from .outbox import Outbox
from .pubscan import expand_run as _expand_run
from .pubscan import render_msgs as _render_msgs
from .jetstream.api import JetStreamApi, jetstream_for
from .jetstream.errors import ERRORS
from .jetstream.session import UNSTORABLE as _UNSTORABLE
from .jetstream.session import route as _route_js
from .jetstream.session import subscription_changed, wire
from .subscriptions import Subscription
from .translate import block_to_canonical, canonical_to_nats

log = logging.getLogger("ferry.nats")

ORIGIN = "nats"
# JetStream API error codes nats-py understands (APIError): 503 while the
# broker shuts down, 400 for a message Ferry cannot store, 500 otherwise.
_STORE_ERROR_CODE = {"ShuttingDown": 503, "TopicSealed": ERRORS["JSStreamSealedErr"].code}
# Where JetStream has the same refusal, its err_code and text from the one
# table (jetstream/errors.py), so a client's APIError matches the one
# nats-server sends.
_STORE_ERROR_JS = {"TopicSealed": ERRORS["JSStreamSealedErr"]}


# Subjects whose routing one session remembers (publish_runs): a client cycling
# through more subjects than this starts over, which costs lookups, never answers.
ROUTE_CACHE_MAX = 1024
# Average payload above which a run for several subscribers is fanned out message by
# message instead of rendered: rendering copies every payload once per subscriber,
# fragments share one copy, and past a few KiB those copies cost more than the
# per-message Python (fanout4: rendering won at 1 KiB and lost at 16 KiB,
# bench/nats_anchors.sh). A lone subscriber's run is always rendered: one copy either way.
RENDER_MAX_PAYLOAD = 4096
_UNKNOWN = object()   # no route cached yet
_GENERAL = object()   # route: message by message (publish_batch)


class _Sink:
    """The broker-side subscriber of one NATS subscription."""

    __slots__ = ("session", "sub")

    def __init__(self, session: NatsSession, sub: Subscription) -> None:
        self.session = session
        self.sub = sub

    def deliver(self, delivery: Delivery) -> bool:
        return self.session.deliver(self.sub, delivery)


class _FilteredSink(_Sink):
    """A sink that drops subjects its user may not receive: a wildcard
    subscription allowed although a deny pattern lies inside it (nats-server
    filters such deliveries too; adapters/nats/auth.py)."""

    __slots__ = ("allowed",)

    def __init__(self, session: NatsSession, sub: Subscription, allowed: Callable[[str], bool]) -> None:
        super().__init__(session, sub)
        self.allowed = allowed

    def deliver(self, delivery: Delivery) -> bool:
        if not self.allowed(delivery.subject):
            return True
        return self.session.deliver(self.sub, delivery)


def _sink_for(session: NatsSession, sub: Subscription) -> _Sink:
    perms = session.conn.permissions
    check = perms.delivery_filter(sub.subject) if hasattr(perms, "delivery_filter") else None
    return _Sink(session, sub) if check is None else _FilteredSink(session, sub, check)


class NatsSession:
    """The broker side of one NATS connection. Synchronous."""

    # Slots: one of these lives per connection (docs/internals.md "Memory").
    __slots__ = ("broker", "conn", "outbox", "slow", "msgs_in", "bytes_in", "msgs_out", "bytes_out", "stalled",
                 "_batch", "js", "_routes", "_routes_stamp", "parked", "parked_on", "may_park")

    def __init__(self, broker, conn: NatsServerConnection, outbox: Outbox) -> None:
        self.broker = broker
        self.conn = conn
        self.outbox = outbox
        self.slow = False
        self.msgs_in = self.bytes_in = self.msgs_out = self.bytes_out = 0
        # Outboxes of other clients this one published into past their high
        # water mark; the driver stalls this client's reads on them, briefly.
        self.stalled: set[Outbox] = set()
        self._batch: list = []
        # publish_runs' routing decisions per subject (None until this client publishes).
        self._routes: dict | None = None
        self._routes_stamp: tuple = ()
        # JetStream (adapters/nats/jetstream/api.py), None when the listener runs without it.
        self.js: JetStreamApi | None = jetstream_for(broker)
        if self.js is not None:
            wire(broker, self.js)
        # A JetStream request waiting for the streams' warm-up (jetstream/warmup.py,
        # issue 30): what it waits for, and it and the publishes after it, in order
        # (at most what one read held: the connection is not read on meanwhile).
        # Only a driver that resumes them (driver._read_loop) lets requests park.
        self.parked: deque | None = None
        self.parked_on: tuple | None = None
        self.may_park = False

    # -- events from the client ----------------------------------------------------
    def process(self) -> None:
        """Act on everything the connection can parse from what it was fed:
        runs of plain PUBs through the batch path (:meth:`publish_runs`),
        every other operation through :meth:`handle`, the connection's
        replies queued before each event's deliveries so nats-server's order
        holds. Raises what :meth:`NatsServerConnection.next_event` raises."""
        conn, outbox, batch = self.conn, self.outbox, self._batch
        next_runs, next_event, handle = conn.next_runs, conn.next_event, self.handle
        while self.parked is None:          # parked: the rest stays unparsed until resume_parked
            if next_runs(batch):
                try:
                    self.publish_runs(batch, conn.pub_buffer)
                finally:
                    batch.clear()
                if self.parked is not None:
                    return
            event = next_event()
            if event is NEED_DATA:
                return
            outbox.offer(conn.data_to_send())   # replies before this event's deliveries
            handle(event)

    def handle(self, event: Event) -> None:
        """Act on one event from the connection (replies already queued there)."""
        kind = type(event)
        if kind is Pub or kind is HPub:
            self._publish(event)  # type: ignore[arg-type]
        elif kind is Sub:
            sub = event.subscription  # type: ignore[union-attr]
            sub.owner = _sink_for(self, sub)
            self.broker.live.subscribe(sub.subject, sub.owner, sub.queue or None)
            if self.js is not None:
                subscription_changed(self.broker, self.js, sub.subject)   # push consumers start
        elif kind is Unsub:
            sub = event.subscription  # type: ignore[union-attr]
            if sub.closed:
                self._drop(sub)
        elif kind is ConnectionClosed:
            self.close()
        elif kind in (Connect, Ping, Pong):
            pass

    def close(self) -> None:
        """Remove every subscription from the broker (idempotent)."""
        for sub in self.conn.subscriptions.clear():
            self._drop(sub)
        self.outbox.closed = True

    def _drop(self, sub: Subscription) -> None:
        if sub.owner is not None:
            self.broker.live.unsubscribe(sub.subject, sub.owner, sub.queue or None)
            sub.owner = None
            if self.js is not None:
                subscription_changed(self.broker, self.js, sub.subject)   # push consumers stop

    # -- publishing -----------------------------------------------------------------
    def _publish(self, event: Pub | HPub) -> None:
        header = event.header if type(event) is HPub else b""  # type: ignore[union-attr]
        self.msgs_in += 1
        self.bytes_in += len(header) + len(event.payload)  # nats-server's in_bytes: header block + payload
        self._publish_parts(event.subject, event.reply, header, event.payload)

    def park(self, need: tuple, subject: str, reply: str, header: bytes, payload) -> None:
        """Hold a JetStream request until the warm-up has what it ``need``s
        (``(stream, what)``, jetstream/warmup.py); the driver warms in slices and
        calls :meth:`resume_parked`. Publishes after it queue behind it."""
        self.parked_on = need
        self.parked = deque([(subject, reply, header, bytes(payload))])

    def resume_parked(self) -> None:
        """Handle the parked request and the publishes queued behind it, in order
        (one of them may park again: the rest stays queued behind it)."""
        items, self.parked, self.parked_on = self.parked, None, None
        while items:
            self._publish_parts(*items.popleft())
            if self.parked is not None:
                self.parked.extend(items)
                return

    def _publish_parts(self, subject: str, reply: str, header: bytes, payload: bytes) -> None:
        if self.parked is not None:       # behind a parked request: in order, after it
            self.parked.append((subject, reply, header, bytes(payload)))
            return
        broker = self.broker
        if self.js is not None and _route_js(self, self.js, subject, reply, header, payload):
            return
        topic = broker.topic_for_subject(subject)
        if topic is not None:
            self._store(topic, subject, reply, header, payload)
            return
        # Most publishes in a busy system have no local subscriber (or a cached
        # match says so): skip building the Delivery then (the trie caches matches).
        delivered = 0
        # Subscribers on other gateways too (scale-out, docs/scale-out.md); False: there are none.
        shared = broker.store.forward_publish(subject, reply, header, payload)
        if broker.live.has_interest(subject):
            delivered = broker.publish(Delivery(subject=subject, payload=payload, headers=b"", reply=reply or None,
                                                origin=ORIGIN, native=header, publisher=self)).delivered
        if not delivered and reply and self.conn.no_responders and not shared:
            self._no_responders(subject, reply)

    def publish_runs(self, runs: list, buf) -> None:
        """Publish runs of one subject and reply from
        :meth:`NatsServerConnection.next_runs` (``buf`` is the receive buffer
        they point into) as :meth:`publish_batch` would their messages, in
        order. A run whose subscribers are all plain NATS subscriptions (no
        queue group, no other protocol) and that
        needs no per-message answer is fanned out a run at a time: its MSG
        frames rendered once per sid (adapters/nats/pubscan.py), one frame per
        subscriber; a run nobody is subscribed to is only counted. Anything
        else is expanded into messages for :meth:`publish_batch`; so is a run
        for a subscriber with an auto-unsubscribe count, or that it would take
        past max_pending (a slow consumer is found at the very message
        nats-server finds it)."""
        broker = self.broker
        js = self.js
        stamp = (broker.live.trie.generation, broker.subject_generation, js.streams.generation if js else 0)
        routes = self._routes
        if routes is None or self._routes_stamp != stamp or len(routes) >= ROUTE_CACHE_MAX:
            routes = self._routes = {}
            self._routes_stamp = stamp
        answers = self.conn.no_responders
        msgs = nbytes = 0
        for subject, reply, count, size, start, end in runs:
            if self.parked is not None:   # behind a parked request: queued (copied) in order
                self.publish_batch(_expand_run(buf, start, end))
                continue
            route = routes.get(subject, _UNKNOWN)
            if route is _UNKNOWN:
                route = routes[subject] = self._route(subject)
            if route is not _GENERAL and not (reply and answers):
                msgs += count
                nbytes += size
                if not route:
                    continue
                if count == 1:   # the PUB line and payload sliced here: cheaper than any scan
                    nl = buf.find(b"\n", start)
                    arg = buf[start + 4:nl + 1]
                    head = _msg_head(arg)
                    self._fan_out(route, head, arg[len(head) - 5:], buf[nl + 1:end - 2])
                elif type(route) is tuple and (len(route) == 1 or size <= RENDER_MAX_PAYLOAD * count):
                    self._fan_out_run(route, buf, start, end, count, size)
                else:
                    self._fan_out_each(route, buf, start, end)
                continue
            self.publish_batch(_expand_run(buf, start, end))
        self.msgs_in += msgs
        self.bytes_in += nbytes

    def _route(self, subject: str):
        """Where a plain publish on ``subject`` goes, for :meth:`publish_runs`:
        ``()`` nobody, the plain NATS subscribers (``_Sink``: a tuple, or a list
        when one client holds several of them), or ``_GENERAL``
        (a stored or JetStream subject, a queue group, another protocol's
        subscriber, a subject other gateways may subscribe to: message by message). Cached per session until the trie,
        the captured topics or the JetStream streams change (the stamp)."""
        broker, js = self.broker, self.js
        if js is not None and (subject.startswith("$JS.") or js.streams.stream_for(subject) is not None):
            return _GENERAL
        if broker.topic_for_subject(subject) is not None or broker.store.interest_elsewhere(subject):
            return _GENERAL   # stored, or other gateways' subscribers may want it (store.forward_publish)
        result = broker.live.trie.match(subject)
        plain = result.plain
        if result.queues or any(type(sink) is not _Sink for sink in plain):
            return _GENERAL
        if len({id(sink.session) for sink in plain}) < len(plain):
            # A client with two matching subscriptions gets each message once per
            # subscription, in message order: rendering a run per sid would queue all of
            # the first sid's copies first. A list (not a tuple) says "message by message".
            return list(plain)
        return tuple(plain)

    def _fan_out_each(self, sinks, buf, start: int, end: int) -> None:
        """:meth:`_fan_out` of every message of the run ``buf[start:end]``: one
        payload copy shared by every subscriber's MSG fragments, where a
        rendered run would copy it once per sid (one-message runs, large
        payloads). The run has one subject: its ``MSG <subject> `` head is built once."""
        fan_out = self._fan_out
        head = None
        for _subject, _reply, arg, payload in _expand_run(buf, start, end):
            if head is None:
                head = _msg_head(arg)
                cut = len(head) - 5
            fan_out(sinks, head, arg[cut:], payload)

    def _fan_out_run(self, sinks, buf, start: int, end: int, count: int, size: int) -> None:
        """:meth:`_fan_out` for a run of ``count`` messages (``size`` payload
        bytes) at ``buf[start:end]``: one rendered frame per subscriber."""
        rendered: dict = {}   # sid -> MSG frames: subscribers often share sids ("1")
        echo = self.conn.echo
        for sink in sinks:
            session, sub = sink.session, sink.sub
            if session.slow or sub.closed or (session is self and not echo):
                continue
            outbox = session.outbox
            if sub.max_msgs > 0 or outbox.pending + (end - start) + count * (len(sub.sid) + 1) > outbox.max_pending:
                # an auto-unsubscribe count, or a slow consumer to find at its very message: one by one
                self._fan_out_each((sink,), buf, start, end)
                continue
            sid = sub.sid
            data = rendered.get(sid)
            if data is None:
                data = rendered[sid] = _render_msgs(buf, start, end, count, sid)
            frames = outbox.frames
            was_empty = not frames
            frames.append(data)
            outbox.pending += len(data)
            session.msgs_out += count
            session.bytes_out += size
            if outbox.pending > outbox.high_water and session is not self:
                self.stalled.add(outbox)
            sub.delivered += count
            if was_empty:
                outbox.wake()

    def publish_batch(self, batch: list) -> None:
        """Publish ``(subject, reply, arg, payload)`` tuples from
        :meth:`NatsServerConnection.next_pubs` as :meth:`_publish` would, in
        order. When every matching subscriber is a plain NATS subscription
        (no queue group, no delivery filter, no other protocol), the ``MSG``
        line is built from the PUB's own argument (subject, reply and size
        digits reused, PERF-ANCHORS.md recommendation 4) and queued with no
        ``Delivery`` or ``PreparedMessage``; anything else takes the general
        path."""
        broker = self.broker
        elsewhere = broker.store.interest_elsewhere
        trie = broker.live.trie
        topic_for, match = broker.topic_for_subject, trie.match
        js = self.js
        nbytes = 0
        last = None          # producers repeat subjects: look up a run of them once
        generation = -1
        topic = result = None
        head_of = head = None  # "MSG <subject> " is the same for a run of one subject
        for subject, reply, arg, payload in batch:
            nbytes += len(payload)
            if self.parked is not None:   # behind a parked request: queued in order
                self._publish_parts(subject, reply, b"", payload)
                continue
            if subject != last or trie.generation != generation:
                topic, result = topic_for(subject), match(subject)
                last, generation = subject, trie.generation
                if js is not None and (subject.startswith("$JS.") or js.streams.stream_for(subject) is not None):
                    topic = True                 # JetStream: the general path below
                elif topic is None and elsewhere(subject):
                    topic = True                 # other gateways' subscribers: the general path forwards it
            if topic is not None:
                last = None
                self._publish_parts(subject, reply, b"", bytes(payload))
                continue
            plain = result.plain
            if result.queues or not plain:
                if result.queues:
                    self._publish_parts(subject, reply, b"", bytes(payload))
                elif reply and self.conn.no_responders:
                    self._no_responders(subject, reply)
                continue
            for sink in plain:
                if type(sink) is not _Sink:
                    self._publish_parts(subject, reply, b"", bytes(payload))
                    break
            else:
                if subject != head_of:
                    head, head_of = _msg_head(arg), subject
                tail = arg[len(head) - 5:]               # " [reply ]<size>\r\n": arg ends in CRLF
                if not self._fan_out(plain, head, tail, payload) and reply and self.conn.no_responders:
                    self._no_responders(subject, reply)
        self.msgs_in += len(batch)
        self.bytes_in += nbytes

    def _fan_out(self, sinks, head, tail, payload) -> int:
        """Queue one ``MSG`` per NATS subscription in ``sinks``; returns how many
        were accepted (as ``LiveHub.publish`` counts ``deliver``). This is
        :meth:`deliver` plus :meth:`_queued` inlined (the two calls per
        delivery cost about a third of a fan-out in a profile), and the MSG
        line is left in fragments (``head`` "MSG <subject> ", the sid, ``tail``
        " [reply ]<size>\r\n", payload, CRLF), so nothing is concatenated per
        subscriber."""
        plen = len(payload)  # what nats-server counts as sent (out_bytes): the payload, no framing
        fixed = len(head) + len(tail) + plen + 2
        delivered = 0
        for sink in sinks:
            session, sub = sink.session, sink.sub
            if session.slow or sub.closed or (session is self and not self.conn.echo):
                delivered += 1
                continue
            sid = sub.sid
            outbox = session.outbox
            frames = outbox.frames
            was_empty = not frames
            frames += (head, sid, tail, payload, CRLF)
            size = fixed + len(sid)
            outbox.pending += size
            session.msgs_out += 1
            session.bytes_out += plen
            if outbox.pending > outbox.high_water:
                if outbox.pending > outbox.max_pending:
                    session._slow_consumer()
                    continue
                if session is not self:
                    self.stalled.add(outbox)
            sub.delivered += 1                          # Subscription.record_delivery
            if 0 < sub.max_msgs <= sub.delivered:
                session.conn.subscriptions.remove(sub)
                session._drop(sub)
            if was_empty:
                outbox.wake()
            delivered += 1
        return delivered

    def _store(self, topic, subject: str, reply: str, header: bytes, payload: bytes) -> None:
        """Append a captured publish; PubAck (or its error) to ``reply`` once durable."""
        broker = self.broker
        stream_name = broker.get_stream(topic.stream_id).name
        ack_stream = f"{stream_name}/{topic.name}"
        try:
            block = parse_headers(header) if header else None  # parsed once: key and stored headers
            tlv = block_to_canonical(block, subject)
            key = _partition_key(block)

            def on_durable(result) -> None:
                if reply:
                    self._ack(reply, ack_stream, result)

            result = broker.append(topic.stream_id, topic.id, [AppendInput(payload=payload, headers=tlv)],
                                   key=key, on_durable=on_durable, live_subject=subject, origin=ORIGIN,
                                   native=header, publisher=self, reply=reply or None)
            if result.duplicate and reply:
                self._ack(reply, ack_stream, result)
        except _UNSTORABLE as exc:
            # Not storable as canonical headers: still core NATS for live subscribers.
            broker.publish(Delivery(subject=subject, payload=payload, reply=reply or None,
                                    origin=ORIGIN, native=header, publisher=self))
            if reply:
                self._ack(reply, ack_stream, exc, code=400)
        except FerryError as exc:
            if reply:
                self._ack(reply, ack_stream, exc)

    def _reply(self, reply: str, data: bytes) -> None:
        self.broker.publish(Delivery(subject=reply, payload=data, origin=ORIGIN, native=b""))

    def _ack(self, reply: str, stream: str, result, code: int | None = None) -> None:
        if isinstance(result, BaseException):
            name = type(result).__name__
            code = code or _STORE_ERROR_CODE.get(name, 500)
            js = _STORE_ERROR_JS.get(name)
            error = {"code": code, "description": str(result) or name} if js is None else \
                {"code": code, "err_code": js.err_code, "description": js.description}
            body = {"error": error}
        else:
            body = {"stream": stream, "seq": result.base_offset + 1,
                    "partition": result.partition_id, "offset": result.base_offset}
            if result.duplicate:
                body["duplicate"] = True
        self._reply(reply, json.dumps(body, separators=(",", ":")).encode())

    def _no_responders(self, subject: str, reply: str) -> None:
        """nats-server sends the 503 status only to the requester, on the
        subscription that matches the reply subject (nats.md section 9)."""
        for sub in self.conn.subscriptions:
            if not sub.closed and subject_matches(sub.subject, reply):
                block = no_responders_block(subject)
                frames: list = []
                PreparedMessage(_wire(reply), b"", b"", block).append_to(frames, sub.sid, True)
                self.outbox.offer(b"".join(frames))
                return

    # -- delivery to this client -----------------------------------------------------
    def deliver(self, sub: Subscription, delivery: Delivery) -> bool:
        """Queue ``delivery`` for ``sub``; False once the client is a slow consumer."""
        if self.slow or sub.closed:
            return True
        if delivery.publisher is self and not self.conn.echo:
            return True
        prepared = delivery.prepared
        if type(prepared) is not PreparedMessage:
            prepared = delivery.prepared = _prepare(delivery)
        outbox = self.outbox
        frames = outbox.frames
        was_empty = not frames
        size = prepared.append_to(frames, sub.sid, self.conn.headers)
        publisher = delivery.publisher
        if outbox.pending + size > outbox.high_water and publisher is not self \
                and type(publisher) is NatsSession:
            publisher.stalled.add(outbox)
        return self._queued(sub, size, was_empty, prepared.counted(self.conn.headers))

    def _queued(self, sub: Subscription, size: int, was_empty: bool, counted: int) -> bool:
        """Account for ``size`` bytes just appended to the outbox for ``sub``:
        slow-consumer check, ``max_msgs``, and a wake-up for the writer when
        the outbox was empty (otherwise one is already pending: every append
        to an empty outbox wakes the writer, which takes all frames at once)."""
        outbox = self.outbox
        outbox.pending += size
        self.msgs_out += 1
        self.bytes_out += counted  # nats-server's out_bytes: headers + payload, not the frame
        if outbox.pending > outbox.max_pending:
            self._slow_consumer()
            return False
        if sub.record_delivery():
            self.conn.subscriptions.remove(sub)
            self._drop(sub)
        if was_empty:
            outbox.wake()
        return True

    def _slow_consumer(self) -> None:
        """Over ``max_pending``: the driver closes the connection without -ERR."""
        self.slow = True
        log.warning("slow consumer detected", extra={"client_id": self.conn.client_id,
                                                     "pending": self.outbox.pending})
        self.outbox.kick()   # closed by the writer, never flushed by write_now


def _msg_head(arg) -> bytes:
    """``MSG <subject> `` from a PUB argument: its subject and the blank after it (the
    rest of the argument, from ``len(head) - 5`` on, is the MSG line's tail)."""
    return b"MSG " + arg[:arg.find(b" ") + 1]


def _prepare(delivery: Delivery) -> PreparedMessage:
    """Encode a delivery once for every NATS subscriber."""
    if delivery.origin == ORIGIN:
        header = delivery.native or b""
    else:
        header = canonical_to_nats(delivery.headers) if delivery.headers else b""
    reply = _wire(delivery.reply) if delivery.reply else b""
    return PreparedMessage(_wire(delivery.subject), reply, delivery.payload, header)  # type: ignore[arg-type]


def _partition_key(block: HeaderBlock | None) -> bytes | None:
    """The first ``Ferry-Partition-Key`` value, compared without case (docs/addressing.md)."""
    if block is None:
        return None
    wanted = PARTITION_KEY_HEADER.lower()
    for k, v in block.items:
        if k.lower() == wanted:
            return v.encode()
    return None


def _wire(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


__all__ = ["NatsSession"]
