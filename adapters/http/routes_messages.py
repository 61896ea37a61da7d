"""Messages (send, poll, long poll, flush), consumer offsets and consumer groups.

Sends answer only once the records are durable under the configured fsync
policy (ARCHITECTURE.md: "every producer is acknowledged only after its batch
is durable"), through a :class:`~.handler.Park` on the append's ``on_durable``.

Polls accept ``wait_ms`` (Ferry's addition to Iggy's query): when nothing is
there yet, the request parks on ``broker.wait_for_append`` for that partition
until a message arrives or the time is up (at most ``limits.max_wait_ms``),
then answers whatever the poll finds, possibly nothing. Long polls end early
when the gateway drains (``broker.live.wake_all`` wakes them).
"""

from __future__ import annotations

from typing import Callable

from core.consumers import Consumer, PollStrategy
from core.log.encoded import block_of
from core.errors import FerryError, NotFound
from core.permissions import Action
from core.record import MAX_PAYLOAD

from adapters.iggy.dedup import filter_send, hold_send

from . import models
from .errors import JSON_TYPE, HttpError, Response, from_core, internal_error, not_found_entity
from .handler import App, Ctx, EventStream, Park, Route, empty, json_response
from .limits import MAX_POLL_BYTES, MAX_POLL_COUNT
from .routes_streams import T, topic_of

# Messages per SSE read: small enough that the first bytes go out quickly.
SSE_BATCH = 100
# An SSE comment this often on an idle stream: proxies commonly cut reads idle
# for 60 s (nginx proxy_read_timeout), and a write is how we notice a peer that left.
SSE_HEARTBEAT_S = 15.0

POLL_KINDS = {"offset": "offset", "o": "offset", "timestamp": "timestamp", "t": "timestamp",
              "first": "first", "f": "first", "last": "last", "l": "last", "next": "next", "n": "next"}


class _Durable:
    """Bridges ``on_durable`` (called from the flusher) to a Park's wake-up."""

    __slots__ = ("result", "_wake", "_done", "_where")

    def __init__(self, stream_id: int, topic_id: int) -> None:
        self._where = (stream_id, topic_id)
        self.result: object = None
        self._wake: Callable[[], None] | None = None
        self._done = False

    def done(self, result: object) -> None:
        self.result, self._done = result, True
        if self._wake is not None:
            self._wake()

    def subscribe(self, wake: Callable[[], None]) -> Callable[[], None]:
        if self._done:
            wake()
        else:
            self._wake = wake
        return self._unsubscribe

    def _unsubscribe(self) -> None:
        self._wake = None

    def outcome(self, _timed_out: bool):
        if isinstance(self.result, FerryError):
            return from_core(self.result).response()
        if isinstance(self.result, BaseException):
            return internal_error().response()
        # 201 with where the batch went, as the current server (its SendMessagesConfirmations)
        return json_response(models.confirmations_json(*self._where, self.result), 201)


def send_messages(app: App, ctx: Ctx):
    topic = topic_of(app, ctx)
    ctx.require(Action.SEND_MESSAGES, topic.stream_id, topic.id)
    partition, key, items = models.parse_send(ctx.json(), MAX_PAYLOAD)
    ack = _Durable(topic.stream_id, topic.id)
    # One unstamped block, stamped in one pass by the core (core/log/encoded.py), not
    # one record encoding per message; the core checks sizes and header blocks the same.
    block, count = block_of(items), len(items)

    def go(partition, key) -> None:
        # Iggy's message deduplication, as on the binary send (adapters/iggy/dedup.py).
        kept = filter_send(app.broker, topic, partition, key, block, count)
        if kept is not None and not kept.count:  # every message was a duplicate: 201 all the same
            kept.part.ack_after_pending(ack.done)
            return
        app.broker.append_records(topic.stream_id, topic.id, kept.block if kept else block,
                                  kept.count if kept else count, partition=kept.partition if kept else partition,
                                  key=None if kept else key,
                                  on_durable=ack.done if kept is None else kept.on_durable(ack.done), origin="http")
        if kept is not None:
            kept.stored()
    # The first deduplicated send after a start waits while the window is rebuilt in slices.
    held, partition, key = hold_send(app.broker, topic, partition, key, go, ack.done)
    if not held:
        go(partition, key)
    app.counters["messages_in"].inc(app.listener, amount=len(items))
    app.counters["bytes_in"].inc(app.listener, amount=sum(len(i.payload) for i in items))
    return Park(ack.subscribe, ack.outcome, None)


def _records_json(batch) -> tuple[list[tuple[int, bytes]], int]:
    """A read batch as ``(offset, message JSON bytes)`` pairs, and its payload byte count."""
    messages, size = [], 0
    entry = models.record_json_entry
    for raw in batch.raw_records():
        offset, plen, body = entry(raw)
        messages.append((offset, body))
        size += plen
    return messages, size


def _consumer(ctx: Ctx) -> Consumer:
    # The current server's key is `consumer_id` (apache/iggy Consumer, serde rename);
    # the seed-era server's `id` is accepted too. Default 1, as both.
    text = ctx.query.get("consumer_id") or ctx.query.get("id") or "1"
    return Consumer("consumer", models.consumer_id(text))


def _partition(ctx: Ctx) -> int:
    """The query's ``partition_id`` as canonical; default the first partition
    (the current server's DEFAULT_PARTITION_ID, 0)."""
    return ctx.q_int("partition_id", models.ID_BASE, models.ID_BASE, models.U32_MAX) - models.ID_BASE


def _poll_target(app: App, ctx: Ctx):
    """What a poll and a follow share: the topic (poll permission checked), the
    consumer, the partition and the ``kind``/``value`` polling strategy."""
    topic = topic_of(app, ctx)
    ctx.require(Action.POLL_MESSAGES, topic.stream_id, topic.id)
    kind = POLL_KINDS.get(ctx.query.get("kind", "offset").lower())
    consumer, partition = _consumer(ctx), _partition(ctx)
    if kind is None:
        raise models.bad_field("kind", "must be offset, timestamp, first, last or next")
    return topic, consumer, partition, PollStrategy(kind, ctx.q_int("value", 0))


def poll_messages(app: App, ctx: Ctx):
    topic, consumer, partition, strategy = _poll_target(app, ctx)
    count = ctx.q_int("count", 10, 0, MAX_POLL_COUNT)
    if count == 0:
        raise HttpError.iggy(4009, "count must be greater than 0", "count")
    auto_commit = ctx.q_bool("auto_commit", False)
    wait_s = ctx.q_int("wait_ms", 0, 0, app.limits.max_wait_ms) / 1000
    deadline = app.clock() + wait_s

    def attempt(_timed_out: bool = False):
        result = app.broker.consumers.poll(topic.stream_id, topic.id, consumer, strategy, count, partition=partition,
                                 auto_commit=auto_commit, max_bytes=MAX_POLL_BYTES)
        remaining = deadline - app.clock()
        if result.batch.count == 0 and remaining > 0 and not app.broker.draining:
            return Park(lambda wake: app.broker.wait_for_append(topic.stream_id, topic.id, partition, wake),
                        attempt, remaining)
        messages, size = _records_json(result.batch)
        app.counters["messages_out"].inc(app.listener, amount=len(messages))
        app.counters["bytes_out"].inc(app.listener, amount=size)
        body = models.polled_json_bytes(result.partition_id, result.current_offset, [m for _o, m in messages])
        return Response(200, (JSON_TYPE,), body)

    return attempt()


def follow_messages(app: App, ctx: Ctx):
    """Server-sent events (WHATWG HTML "Server-sent events"): every message of
    one partition from the chosen start, then live as they arrive. Each event
    is ``id: <offset>``, ``event: message``, ``data: <message JSON>``; a
    reconnecting EventSource sends ``Last-Event-ID`` and resumes after it."""
    topic, consumer, partition, strategy = _poll_target(app, ctx)
    last_id = (ctx.request.header(b"last-event-id") or b"").strip()
    if last_id.isdigit() and len(last_id) <= 20:
        strategy = PollStrategy("offset", int(last_id) + 1)
    count = ctx.q_int("count", SSE_BATCH, 1, MAX_POLL_COUNT)
    auto_commit = ctx.q_bool("auto_commit", False)
    app.broker.partition(topic.stream_id, topic.id, partition)  # 404 now rather than an empty stream
    headers = ((b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"))
    if ctx.request.method == "HEAD":
        return Response(200, headers)  # a HEAD has no body to stream
    state = {"strategy": strategy}

    def next_chunk() -> bytes:
        result = app.broker.consumers.poll(topic.stream_id, topic.id, consumer, state["strategy"], count,
                                 partition=partition, auto_commit=auto_commit, max_bytes=MAX_POLL_BYTES)
        if not result.batch.count:
            return b""
        state["strategy"] = PollStrategy("offset", result.batch.next_offset)
        messages, size = _records_json(result.batch)
        app.counters["messages_out"].inc(app.listener, amount=len(messages))
        app.counters["bytes_out"].inc(app.listener, amount=size)
        return b"".join(b"id: %d\nevent: message\ndata: %s\n\n" % pair for pair in messages)

    return EventStream(
        headers=headers,
        next_chunk=next_chunk,
        subscribe=lambda wake: app.broker.wait_for_append(topic.stream_id, topic.id, partition, wake),
        heartbeat_s=SSE_HEARTBEAT_S,
    )


def flush_messages(app: App, ctx: Ctx):
    topic = topic_of(app, ctx)
    ctx.require(Action.SEND_MESSAGES, topic.stream_id, topic.id)
    pid = models.parse_identifier(ctx.params["partition_id"], "partition_id")
    fsync = ctx.params["fsync"].lower()
    if isinstance(pid, str) or fsync not in ("true", "false"):
        raise models.bad_field("fsync" if not isinstance(pid, str) else "partition_id",
                               "expected /flush/{partition_id}/{true|false}")
    # A synchronous write (+fsync) of what is pending; an explicit admin call.
    app.broker.partition(topic.stream_id, topic.id, pid).flush(fsync=fsync == "true")
    return empty(200)


# -- consumer offsets ----------------------------------------------------------------------
def get_offset(app: App, ctx: Ctx):
    topic = topic_of(app, ctx)
    ctx.require(Action.POLL_MESSAGES, topic.stream_id, topic.id)
    consumer, partition = _consumer(ctx), _partition(ctx)
    stored = app.broker.consumers.get_offset(consumer, topic.stream_id, topic.id, partition)
    if stored is None:
        raise not_found_entity()
    part = app.broker.partition(topic.stream_id, topic.id, partition)
    return json_response(models.offset_json(partition, max(part.next_offset - 1, 0), stored))


def store_offset(app: App, ctx: Ctx):
    topic = topic_of(app, ctx)
    ctx.require(Action.POLL_MESSAGES, topic.stream_id, topic.id)
    f = ctx.fields()
    # `consumer_id` (the current server's StoreConsumerOffset, flattened Consumer), or
    # the seed-era `id`; a string (digits or a name) or a number; default 1.
    key = "consumer_id" if f.obj.get("consumer_id") is not None else "id"
    raw_id = f.obj.get(key)
    if raw_id is None:
        cid = 1
    elif isinstance(raw_id, str):  # both servers' clients send the id as a STRING
        cid = models.consumer_id(raw_id, key)
    else:
        cid = f.int(key, 0, models.U32_MAX - 1)
    wire_pid = f.int("partition_id", models.ID_BASE, models.U32_MAX, required=False)
    partition = 0 if wire_pid is None else wire_pid - models.ID_BASE  # absent or null: the first partition
    offset = f.int("offset", 0, 2**63 - 1)
    app.broker.consumers.store_offset(Consumer("consumer", cid), topic.stream_id, topic.id, partition, offset)
    return empty()


def delete_offset(app: App, ctx: Ctx):
    topic = topic_of(app, ctx)
    ctx.require(Action.POLL_MESSAGES, topic.stream_id, topic.id)
    consumer = Consumer("consumer", models.consumer_id(ctx.params["consumer_id"], "consumer_id"))
    app.broker.consumers.delete_offset(consumer, topic.stream_id, topic.id, _partition(ctx))
    return empty()


# -- consumer groups -----------------------------------------------------------------------
def _group_json(app: App, topic, group, details: bool) -> dict:
    members = app.broker.consumers.group_members(topic.stream_id, topic.id, group.id)
    return models.group_json(group, topic.partitions_count, members, details)


def get_groups(app: App, ctx: Ctx):
    topic = topic_of(app, ctx)
    ctx.require(Action.READ_TOPIC, topic.stream_id, topic.id)
    groups = app.broker.consumers.list_groups(topic.stream_id, topic.id)
    return json_response([_group_json(app, topic, g, False) for g in groups])


def get_group(app: App, ctx: Ctx):
    try:
        topic = topic_of(app, ctx)
        group = app.broker.consumers.get_group(topic.stream_id, topic.id, ctx.ident("group_id"))
    except NotFound:
        raise not_found_entity() from None
    ctx.require(Action.READ_TOPIC, topic.stream_id, topic.id)
    return json_response(_group_json(app, topic, group, True))


def create_group(app: App, ctx: Ctx):
    topic = topic_of(app, ctx)
    ctx.require(Action.READ_TOPIC, topic.stream_id, topic.id)
    f = ctx.fields()
    # iggy.md 10.4: the key is `group_id`; `consumer_group_id` is accepted too.
    key = "group_id" if f.obj.get("group_id") is not None else "consumer_group_id"
    wire = f.int(key, 0, models.U32_MAX, required=False)
    group_id = models.parse_wire_id(wire, key) if wire else None
    group = app.broker.consumers.create_group(topic.stream_id, topic.id, f.str("name"), group_id)
    return json_response(_group_json(app, topic, group, True), 201)  # iggy.md 10.4: 201 details


def delete_group(app: App, ctx: Ctx):
    topic = topic_of(app, ctx)
    ctx.require(Action.READ_TOPIC, topic.stream_id, topic.id)
    app.broker.consumers.delete_group(topic.stream_id, topic.id, ctx.ident("group_id"))
    return empty()


ROUTES = [
    Route("GET", T + "/messages", poll_messages, entity="topic", command="message.poll",
          ok=(200, "PolledMessages"),
          query=("consumer_id", "id", "partition_id", "kind", "value", "count", "auto_commit", "wait_ms")),
    Route("POST", T + "/messages", send_messages, entity="topic", command="message.send", body="SendMessages",
          ok=(201, "SendMessagesConfirmations")),
    Route("GET", T + "/messages/stream", follow_messages, entity="topic", ok=(200, "events"),
          query=("consumer_id", "id", "partition_id", "kind", "value", "count", "auto_commit")),
    Route("GET", T + "/messages/flush/{partition_id}/{fsync}", flush_messages, entity="topic",
          command="message.flush"),
    Route("GET", T + "/consumer-offsets", get_offset, entity="topic", command="consumer_offset.get",
          ok=(200, "ConsumerOffsetInfo"), query=("consumer_id", "id", "partition_id")),
    Route("PUT", T + "/consumer-offsets", store_offset, entity="topic", command="consumer_offset.store",
          body="StoreConsumerOffset", ok=(204, None)),
    Route("DELETE", T + "/consumer-offsets/{consumer_id}", delete_offset, entity="topic",
          command="consumer_offset.delete", ok=(204, None), query=("partition_id",)),
    Route("GET", T + "/consumer-groups", get_groups, entity="group", command="consumer_group.list",
          ok=(200, "[ConsumerGroup]")),
    Route("POST", T + "/consumer-groups", create_group, entity="group", command="consumer_group.create",
          body="CreateConsumerGroup", ok=(201, "ConsumerGroupDetails")),
    Route("GET", T + "/consumer-groups/{group_id}", get_group, entity="group", command="consumer_group.get",
          ok=(200, "ConsumerGroupDetails")),
    Route("DELETE", T + "/consumer-groups/{group_id}", delete_group, entity="group",
          command="consumer_group.delete", ok=(204, None)),
]

__all__ = ["ROUTES"]
