"""JetStream as one NATS session sees it: routing of ``$JS.*`` publishes and stream appends (no trio).

Theory of operation
-------------------
:class:`~adapters.nats.session.NatsSession` hands every publish to
:func:`route` first while JetStream is on. It answers ``$JS.API`` requests
(``jetstream.api.JetStreamApi.handle``), pull requests
(``$JS.API.CONSUMER.MSG.NEXT``), acks (``$JS.ACK``) and flow control
answers (``$JS.FC``), and appends publishes on a stream's subjects with
nats-server's publish checks, the PubAck going out once the append is
durable. Anything else returns False: plain core NATS or topic capture.
A request or publish that needs a stream's state the warm-up has not caught
up yet (``warmup.request_need``, ``publish_need``) is parked on the session
(``NatsSession.park``) instead: the driver warms that state in slices,
serving other connections between them, and then handles it (issue 30).

:func:`send_js` delivers consumer outputs (``jetstream.pull.Out``) to the
subscribers of an inbox or deliver subject: a stored message keeps its own
subject on the MSG line, as nats-server sends it, and a queue group gets it
once, on a member picked at random (a push consumer's ``deliver_group``).
:func:`subscription_changed` tells the consumers that a subscription came or
went, so push consumers start and stop; :func:`room` says how much a
deliver subject's subscribers can take below their outbox high water mark,
so push delivery waits instead of filling an outbox (docs/nats.md "Push consumers").
"""

from __future__ import annotations

import logging
import random
from functools import partial

from core.errors import (
    FerryError,
    HeadersTooLarge,
    InvalidHeaderKey,
    InvalidHeaderValue,
    TopicSealed,
)
from core.live import Delivery
from core.log import AppendInput
from core.message import uuid7

from ..errors import NatsHeaderError
from ..headers import parse_headers
from .api import JetStreamApi, pub_ack, pub_error
from .direct import DIRECT_PREFIX, direct_get
from .consumers import ACK_PREFIX
from .dedup import first_copy, held
from .errors import JsApiError
from .fields import MSG_ID_HEADER
from .pull import Out
from .push import FC_PREFIX
from .streams import JS_STREAM
from .warmup import publish_need, request_need
from ..translate import block_to_canonical

ORIGIN = "nats"
API_PREFIX = "$JS.API."
PULL_PREFIX = "$JS.API.CONSUMER.MSG.NEXT."
UNSTORABLE = (NatsHeaderError, InvalidHeaderKey, InvalidHeaderValue, HeadersTooLarge)
_pick = random.Random()
log = logging.getLogger("ferry.nats")


def wire(broker, js: JetStreamApi) -> None:
    """Give the broker's consumers their way out (once per broker)."""
    consumers = js.consumers
    if consumers.emit is None:
        consumers.emit = partial(send_js, broker)
        consumers.room = partial(room, broker)


def route(session, js: JetStreamApi, subject: str, reply: str, header: bytes, payload: bytes) -> bool:
    """A ``$JS`` request or a publish on a JetStream stream's subjects:
    handled here (True), else False. JetStream subjects take precedence
    over topic capture (docs/addressing.md)."""
    consumers = js.consumers
    if subject.startswith("$JS."):
        if session.may_park and subject.startswith(API_PREFIX):
            need = request_need(js.streams, subject, payload)
            if need is not None:                     # cold state: answered once the warm-up has it
                session.park(need, subject, reply, header, payload)
                return True
        if subject.startswith(PULL_PREFIX):
            _pull(session, js, subject, reply, payload)
            return True
        if subject.startswith((ACK_PREFIX, FC_PREFIX)):
            now = consumers.clock()
            if subject.startswith(ACK_PREFIX):
                out = consumers.ack(subject, payload, reply, now)
            else:
                out = consumers.flow_reply(subject, now)
            if out is None:
                return False                 # no such consumer: a plain publish
            send_js(session.broker, out)
            return True
    if subject.startswith(DIRECT_PREFIX):
        if reply:
            out = direct_get(js.streams, subject, payload, reply)
            if out:
                send_js(session.broker, out)
            elif session.conn.no_responders:
                session._no_responders(subject, reply)      # no such stream, or not allow_direct
        return True
    if subject.startswith("$JS.API."):
        visible = getattr(session.conn.permissions, "visible_stream", None)   # ferryauth: NAMES/LIST
        data = js.handle(subject, payload, visible)
        if data is not None and reply:
            session._reply(reply, data)
        return True
    st = js.streams.stream_for(subject)
    if st is None:
        return False
    if session.may_park:
        need = publish_need(js.streams, st, header)
        if need is not None:
            session.park(need, subject, reply, header, payload)
            return True
    if st.config.get("no_ack"):
        reply = ""                                   # nats-server: a no_ack stream sends no PubAck
    try:
        block = parse_headers(header) if header else None
        tlv = block_to_canonical(block, subject)
    except UNSTORABLE as exc:
        if reply:
            session._ack(reply, st.name, exc, code=400)
        return True
    _publish(session, js, st, subject, reply, header, payload, block, tlv)
    return True


def _publish(session, js: JetStreamApi, st, subject, reply, header, payload, block, tlv) -> None:
    """nats-server's publish checks, then the append or the duplicate's answer."""
    try:
        duplicate = js.check_publish(st, block, len(payload))
        if duplicate is None:
            js.check_subject_seq(st, block, subject)
    except JsApiError as err:
        if reply:
            session._reply(reply, pub_error(st.name, err))
        return
    if duplicate is not None:
        _answer_duplicate(session, js, st, block.get(MSG_ID_HEADER), reply,
                          partial(_publish, session, js, st, subject, reply, header, payload, block, tlv))
        return
    _store(session, js, st, subject, reply, header, payload, block, tlv)


def _answer_duplicate(session, js: JetStreamApi, st, msg_id: str, reply: str, again) -> None:
    """A publish whose ``Nats-Msg-Id`` is in the window: answered ``duplicate: true`` once
    the first copy's append settled, with the sequence the first copy got; if that copy
    failed meanwhile (its id is forgotten, :func:`_store`), the answer is the store error,
    so the client publishes again rather than take an ack for a message never stored
    (bench/fault_schedule.py found such acks). A first copy appended through this gateway
    is waited for itself: a JetStream-store partition holds appends in flight outside the
    local log, so waiting for what is pending there (the embedded log's rule, still used
    for a copy not in flight here) answered at once, with the sequence only guessed.

    The answer's sequence is checked against the log (``dedup.held``): a window entry the
    log does not back (a saved window from a gateway whose append was in flight, dedup.py)
    is dropped and the publish goes through the checks again (``again``), so it is stored,
    as nats-server stores a message whose id it has no stored copy of."""
    name = st.name
    window = js.streams.dedup_window(st)

    def answer(_outcome=None) -> None:
        seq = js.streams.duplicate_of(st, msg_id)
        if seq is not None and not held(js.streams, st, msg_id, seq):
            log.warning("stream %s: msg id %r was remembered at sequence %d, which holds no copy of it; "
                        "storing the publish", name, msg_id, seq)
            js.streams.dedup_window(st).drop(msg_id)
            again()
        elif not reply:
            return
        elif seq is None:
            err = JsApiError("JSStreamStoreFailedF", err="the first copy of this message id was not stored")
            session._reply(reply, pub_error(name, err))
        else:
            session._reply(reply, pub_ack(name, seq, duplicate=True))
    parked = window.after_settled(msg_id, answer)
    if parked is None:
        session.broker.partition(JS_STREAM, st.topic_id, 0).ack_after_pending(answer)
    elif not parked and reply:
        err = JsApiError("JSStreamStoreFailedF", err="the first copy of this message id is still being stored")
        session._reply(reply, pub_error(name, err))


def _store(session, js: JetStreamApi, st, subject, reply, header, payload, block, tlv) -> None:
    """Append to the stream's topic; the PubAck goes out once durable. The msg id is
    remembered at the sequence the append was given, corrected to the one it was stored
    at (a JetStream-store partition only guesses it at append), and forgotten if the
    append fails, so a retry stores the message instead of being told it is a duplicate.

    In scale-out mode the cluster de-duplicates the msg id across gateways
    (gateway/jetstream_store/msgids.py) and reports the first copy's sequence: when the
    message stored there is not this one (its Ferry id differs), the publish was a
    duplicate and is answered ``duplicate: true``, as nats-server answers it. The
    embedded log stores every append at the sequence it was given, so it never looks."""
    name = st.name
    msg_id = block.get(MSG_ID_HEADER) if block is not None else None
    own_id = uuid7() if msg_id else 0                # this copy's Ferry id, to know it again
    window = js.streams.dedup_window(st) if msg_id else None
    guessed = 0
    fired = False                                    # on_durable ran before append() returned

    def on_durable(result) -> None:
        nonlocal fired
        fired = True
        if isinstance(result, BaseException):
            if msg_id:
                window.settled(msg_id, stored=False)  # forgotten; the duplicates that waited: the store error
            if reply:
                session._reply(reply, pub_error(name, JsApiError("JSStreamStoreFailedF", err=str(result))))
            return
        seq = result.base_offset + 1
        duplicate = False
        if msg_id:
            if seq != guessed:
                first = first_copy(js.streams, st, seq)
                duplicate = first is not None and first[0] != own_id
                if duplicate:
                    window.remember_stored(msg_id, seq, first[1])
                else:
                    js.streams.remember(st, msg_id, seq)
            window.settled(msg_id)                   # the duplicates that waited: this sequence
        if reply:
            session._reply(reply, pub_ack(name, seq, duplicate=duplicate))

    if msg_id:
        window.appending(msg_id)

    try:
        result = session.broker.append(JS_STREAM, st.topic_id, [AppendInput(payload=payload, headers=tlv, id=own_id)],
                                       partition=0, on_durable=on_durable, live_subject=subject, origin=ORIGIN,
                                       native=header, publisher=session, reply=reply or None)
    except FerryError as exc:
        if msg_id:
            window.settled(msg_id, stored=False)     # nothing appended: the waiting duplicates' error
        if reply:
            sealed = isinstance(exc, TopicSealed)
            err = JsApiError("JSStreamSealedErr") if sealed else JsApiError("JSStreamStoreFailedF", err=str(exc))
            session._reply(reply, pub_error(name, err))
        return
    guessed = result.base_offset + 1
    # The id is a guess (DedupWindow.guessed) until on_durable settles it; one settled
    # already (a durability that fired at once) was remembered, or forgotten, there.
    js.stored(st, None if fired else block, guessed, subject)


def _pull(session, js: JetStreamApi, subject: str, reply: str, payload: bytes) -> None:
    """``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>``: a pull request.
    No such consumer: nobody answers (nats-server has no responder then)."""
    stream, _, name = subject[len(PULL_PREFIX):].partition(".")
    consumers = js.consumers
    out = consumers.pull(stream, name, reply, payload, consumers.clock()) if reply else []
    if out is None:
        if reply and session.conn.no_responders:
            session._no_responders(subject, reply)
        return
    send_js(session.broker, out)


def subscription_changed(broker, js: JetStreamApi, pattern: str) -> None:
    """A NATS subscription on ``pattern`` was added or removed."""
    consumers = js.consumers
    push = consumers.push_delivery
    if push.subjects:
        out = push.interest_changed(pattern, consumers.clock())
        if out:
            send_js(broker, out)


def send_js(broker, outs: list[Out]) -> None:
    """Deliver JetStream consumer outputs to the subscribers of their inboxes
    (or deliver subjects): every plain subscriber, one member per queue group."""
    match = broker.live.trie.match
    for out in outs:
        if out.ack:
            delivery = Delivery(subject=out.subject, payload=out.payload, headers=out.headers, reply=out.ack,
                                origin=ORIGIN, native=out.block)
        else:
            delivery = Delivery(subject=out.inbox, payload=out.payload, origin=ORIGIN, native=out.block,
                                reply=out.reply or None)
        result = match(out.inbox)
        for sink in result.plain:
            sink.deliver(delivery)
        for members in result.queues.values():
            if members:
                members[_pick.randrange(len(members))].deliver(delivery)


def room(broker, subject: str) -> int:
    """Bytes the subscribers of ``subject`` can still take below their outbox
    high water mark (the fullest one counts; a queue group counts whole,
    as any member may be picked)."""
    result = broker.live.trie.match(subject)
    best = _UNBOUNDED
    for sink in result.plain:
        best = min(best, _room(sink))
    for members in result.queues.values():
        for sink in members:
            best = min(best, _room(sink))
    return best


_UNBOUNDED = 1 << 62


def _room(sink) -> int:
    outbox = getattr(getattr(sink, "session", None), "outbox", None)
    return _UNBOUNDED if outbox is None else outbox.high_water - outbox.pending


__all__ = ["ORIGIN", "PULL_PREFIX", "UNSTORABLE", "room", "route", "send_js", "subscription_changed", "wire"]
