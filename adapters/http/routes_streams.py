"""Streams, topics, partitions and segments (iggy.md section 10.4), over core.broker."""

from __future__ import annotations

from dataclasses import replace

from adapters.iggy import options
from core.errors import NotFound
from core.permissions import Action

from . import models
from .errors import bad_field, not_found_entity
from .handler import App, Ctx, Route, empty, json_response


# -- helpers shared with the other route modules ---------------------------------------
def topic_of(app: App, ctx: Ctx):
    """The TopicInfo named by the path's stream_id and topic_id (errors as Iggy's)."""
    return app.broker.get_topic(ctx.ident("stream_id"), ctx.ident("topic_id"))


def topic_details(app: App, topic, details: bool) -> dict:
    return models.topic_json(app.broker, topic, details)


def stream_details(app: App, stream, details: bool) -> dict:
    return models.stream_json(app.broker, stream, details)


# -- streams --------------------------------------------------------------------------------
def get_streams(app: App, ctx: Ctx):
    ctx.require(Action.READ_STREAMS)
    return json_response([stream_details(app, s, False) for s in app.broker.list_streams()])


def get_stream(app: App, ctx: Ctx):
    ident = ctx.ident("stream_id")
    try:
        stream = app.broker.get_stream(ident)
    except NotFound:
        raise not_found_entity() from None
    ctx.require(Action.READ_STREAM, stream.id)
    return json_response(stream_details(app, stream, True))


def create_stream(app: App, ctx: Ctx):
    ctx.require(Action.CREATE_STREAM)
    f = ctx.fields()
    wire = f.int("stream_id", 0, models.U32_MAX, required=False)
    name = f.str("name")
    stream_id = models.parse_wire_id(wire, "stream_id") if wire else None
    stream = app.broker.create_stream(name, stream_id)
    return json_response(stream_details(app, stream, True))  # iggy.md 10.4: 200 StreamDetails


def update_stream(app: App, ctx: Ctx):
    stream = app.broker.get_stream(ctx.ident("stream_id"))
    ctx.require(Action.MANAGE_STREAM, stream.id)
    app.broker.update_stream(stream.id, ctx.fields().str("name"))
    return empty()


def delete_stream(app: App, ctx: Ctx):
    stream = app.broker.get_stream(ctx.ident("stream_id"))
    ctx.require(Action.MANAGE_STREAM, stream.id)
    app.broker.delete_stream(stream.id)
    return empty()


def purge_stream(app: App, ctx: Ctx):
    stream = app.broker.get_stream(ctx.ident("stream_id"))
    ctx.require(Action.MANAGE_STREAM, stream.id)
    app.broker.purge_stream(stream.id)
    return empty()


# -- topics ---------------------------------------------------------------------------------
def get_topics(app: App, ctx: Ctx):
    stream = app.broker.get_stream(ctx.ident("stream_id"))
    ctx.require(Action.READ_TOPICS, stream.id)
    return json_response([topic_details(app, t, False) for t in app.broker.list_topics(stream.id)])


def get_topic(app: App, ctx: Ctx):
    sid, tid = ctx.ident("stream_id"), ctx.ident("topic_id")
    try:
        topic = app.broker.get_topic(sid, tid)
    except NotFound:
        raise not_found_entity() from None
    ctx.require(Action.READ_TOPIC, topic.stream_id, topic.id)
    return json_response(topic_details(app, topic, True))


def create_topic(app: App, ctx: Ctx):
    stream = app.broker.get_stream(ctx.ident("stream_id"))
    ctx.require(Action.CREATE_TOPIC, stream.id)
    args, given = models.create_topic_args(ctx.fields())
    # the catalog's cross-key checks and defaults, as the binary CreateTopic (adapters/iggy/options.py)
    models.check_topic(options.check_create, given, args["partitions"], app.broker)
    topic = app.broker.create_topic(stream.id, args["name"], args["partitions"], topic_id=args["topic_id"],
                                    **options.create_args(given, args["replication_factor"]))
    options.record_explicit(app.broker, topic, given)
    return json_response(topic_details(app, topic, True))  # iggy.md 10.4: 200 TopicDetails


def update_topic(app: App, ctx: Ctx):
    """A patch (models.update_topic_args): settings left out keep their values; a size
    cap below the topic's segment size is 1019, as on the binary transports."""
    topic = topic_of(app, ctx)
    ctx.require(Action.MANAGE_TOPIC, topic.stream_id, topic.id)
    name, changes, given = models.update_topic_args(ctx.fields())
    models.check_topic(options.check_size_floor, given.get("max_topic_size"),
                       app.broker.topic_log_config(topic).segment_bytes)
    topic = app.broker.update_topic(topic.stream_id, topic.id, name=name, settings=replace(topic.settings, **changes))
    if given:
        options.record_explicit(app.broker, topic, given, update=True)
    return empty()


def delete_topic(app: App, ctx: Ctx):
    topic = topic_of(app, ctx)
    ctx.require(Action.MANAGE_TOPIC, topic.stream_id, topic.id)
    app.broker.delete_topic(topic.stream_id, topic.id)
    return empty()


def purge_topic(app: App, ctx: Ctx):
    topic = topic_of(app, ctx)
    ctx.require(Action.MANAGE_TOPIC, topic.stream_id, topic.id)
    app.broker.purge_topic(topic.stream_id, topic.id)
    return empty()


# -- partitions -----------------------------------------------------------------------------
def create_partitions(app: App, ctx: Ctx):
    topic = topic_of(app, ctx)
    ctx.require(Action.MANAGE_TOPIC, topic.stream_id, topic.id)
    count = ctx.fields().int("partitions_count", 1, models.U32_MAX)
    app.broker.add_partitions(topic.stream_id, topic.id, count)
    return empty(201)  # iggy.md 10.4: 201, empty body


def delete_partitions(app: App, ctx: Ctx):
    topic = topic_of(app, ctx)
    ctx.require(Action.MANAGE_TOPIC, topic.stream_id, topic.id)
    count = ctx.q_int("partitions_count", None, 1, models.U32_MAX)
    app.broker.delete_partitions(topic.stream_id, topic.id, count)
    return empty()


def delete_segments(app: App, ctx: Ctx):
    """Iggy's DeleteSegments: the partition's ``segments_count`` oldest sealed
    segments (core Broker.delete_segments); permission as updating the topic."""
    topic = topic_of(app, ctx)
    ctx.require(Action.MANAGE_TOPIC, topic.stream_id, topic.id)
    pid = models.parse_identifier(ctx.params["partition_id"], "partition_id")
    if isinstance(pid, str):
        raise bad_field("partition_id", "must be a partition id (from 0)")
    count = ctx.q_int("segments_count", None, 0, models.U32_MAX)
    app.broker.delete_segments(topic.stream_id, topic.id, pid, count)
    return empty()


S = "/streams/{stream_id}"
T = S + "/topics/{topic_id}"

ROUTES = [
    Route("GET", "/streams", get_streams, entity="stream", command="stream.list", ok=(200, "[Stream]")),
    Route("POST", "/streams", create_stream, entity="stream", command="stream.create", body="CreateStream",
          ok=(200, "StreamDetails")),
    Route("GET", S, get_stream, entity="stream", command="stream.get", ok=(200, "StreamDetails")),
    Route("PUT", S, update_stream, entity="stream", command="stream.update", body="UpdateStream", ok=(204, None)),
    Route("DELETE", S, delete_stream, entity="stream", command="stream.delete", ok=(204, None)),
    Route("DELETE", S + "/purge", purge_stream, entity="stream", command="stream.purge", ok=(204, None)),
    Route("GET", S + "/topics", get_topics, entity="topic", command="topic.list", ok=(200, "[Topic]")),
    Route("POST", S + "/topics", create_topic, entity="topic", command="topic.create", body="CreateTopic",
          ok=(200, "TopicDetails")),
    Route("GET", T, get_topic, entity="topic", command="topic.get", ok=(200, "TopicDetails")),
    Route("PUT", T, update_topic, entity="topic", command="topic.update", body="UpdateTopic", ok=(204, None)),
    Route("DELETE", T, delete_topic, entity="topic", command="topic.delete", ok=(204, None)),
    Route("DELETE", T + "/purge", purge_topic, entity="topic", command="topic.purge", ok=(204, None)),
    Route("POST", T + "/partitions", create_partitions, entity="topic", command="partition.create",
          body="CreatePartitions", ok=(201, None)),
    Route("DELETE", T + "/partitions", delete_partitions, entity="topic", command="partition.delete",
          ok=(204, None), query=("partitions_count",)),
    Route("DELETE", T + "/partitions/{partition_id}", delete_segments, entity="topic", command="segment.delete",
          ok=(204, None), query=("segments_count",)),
]

__all__ = ["ROUTES", "T", "S", "stream_details", "topic_details", "topic_of"]
