"""apache-iggy 0.9.0, one program for every transport: python current_transports.py PORT tcp|quic|ws|http.

The same calls over the binary TCP transport and over the client's HTTP transport
(``HttpConfig``, the current Iggy server's HTTP API); tests/http/test_http_current_client.py
runs it both ways against one gateway each and compares the JSON lines. What the
client itself words differently per transport (error texts) is printed apart, under
``text``, and left out of the comparison; ``error`` says only whether a call failed."""

import asyncio
import os
import sys
from datetime import timedelta

from apache_iggy import (
    Consumer, GlobalPermissions, HttpConfig, IggyClient, IggyExpiry, MaxTopicSize, Partitioning, Permissions,
    PollingStrategy, QuicConfig, SendMessage, StreamPermissions, UserStatus, WebSocketConfig,
)
from scenario import out


async def failed(step, awaitable):
    """Whether ``awaitable`` raised the client's RuntimeError; its text goes apart."""
    try:
        await awaitable
    except RuntimeError as exc:
        out(step, error=True, text=str(exc))
        return True
    out(step, error=False)
    return False


def setting(value):
    """IggyExpiry / MaxTopicSize: seconds or bytes when set, else the variant's name."""
    for name in ("duration", "bytes"):
        if hasattr(value, name):
            got = getattr(value, name)
            got = got() if callable(got) else got
            return got.total_seconds() if name == "duration" else got
    return type(value).__name__


def scalar(m):
    headers = m.user_headers()
    if headers is None:
        return None
    return {str(k): (v if isinstance(v, (int, float, str, bool)) else repr(v))
            for k, v in headers.to_scalar_dict().items()}


def texts(headers):
    """Options as ``{key: value text}``: HTTP carries them as text (the current server's
    ResourceOptions JSON), the binary transports in their kinds."""
    return {str(k): str(v).lower() for k, v in headers.to_scalar_dict().items()} if headers is not None else None


def client(port: int, transport: str) -> IggyClient:
    if transport == "http":
        return IggyClient(HttpConfig(api_url=f"http://127.0.0.1:{port}", retries=0))
    if transport == "quic":   # self-signed localhost cert: the SDK does not verify by default
        return IggyClient(QuicConfig(server_address=f"127.0.0.1:{port}"))
    if transport == "ws":
        return IggyClient(WebSocketConfig(server_address=f"127.0.0.1:{port}"))
    return IggyClient(f"127.0.0.1:{port}")


async def logged_in(port, transport, username="iggy", password="iggy"):
    c = client(port, transport)
    await c.connect()
    await c.login_user(username, password)
    return c


def topic_view(t):
    return {"id": t.id, "name": t.name, "partitions": t.partitions_count,
            "partition_ids": [p.id for p in t.partitions], "messages": t.messages_count,
            "expiry": setting(t.message_expiry), "max_size": setting(t.max_topic_size),
            "compression": t.compression_algorithm}


async def main(port: int, transport: str) -> None:
    anon = client(port, transport)
    await anon.connect()
    await anon.ping()
    out("ping")
    await failed("bad_login", anon.login_user("iggy", "wrong-password"))
    c = await logged_in(port, transport)
    out("login")

    # streams
    await c.create_stream("orders")
    await failed("dup_stream", c.create_stream("orders"))
    await c.create_stream("audit")
    s = await c.get_stream("orders")
    out("get_stream", id=s.id, name=s.name, topics=s.topics_count)
    out("get_stream_by_id", name=(await c.get_stream(s.id)).name)
    out("streams", got=sorted([x.id, x.name] for x in await c.get_streams()))
    out("missing_stream", value=await c.get_stream("nope"))
    await c.update_stream("audit", "audit2")
    out("renamed_stream", name=(await c.get_stream("audit2")).name)

    # topics and partitions
    await c.create_topic("orders", "created", 2)
    await c.create_topic("orders", "shipped", 1, message_expiry=IggyExpiry.ExpireDuration(timedelta(hours=2)),
                         max_topic_size=MaxTopicSize.Custom(2_000_000_000))
    t = await c.get_topic("orders", "created")
    out("get_topic", **topic_view(t))
    out("get_topic_by_id", name=(await c.get_topic(s.id, t.id)).name)
    out("topics", got=sorted([x.id, x.name, x.partitions_count] for x in await c.get_topics("orders")))
    out("missing_topic", value=await c.get_topic("orders", "nope"))
    # the option catalog: a key set at create shows as explicit, the others as derived
    await c.create_topic("orders", "tuned", 1, segment_size=2 * 1024 * 1024)
    tuned = await c.get_topic("orders", "tuned")
    out("topic_options", explicit=texts(tuned.options), derived=texts(tuned.derived_options))
    await failed("unknown_option", c.create_topic("orders", "bad", 1, options={"bogus_key": "1"}))
    await failed("bad_option_value", c.create_topic("orders", "bad", 1, options={"segment_size": "7"}))
    await failed("small_size_cap", c.create_topic("orders", "bad", 1, max_topic_size=MaxTopicSize.Custom(1000)))
    await c.delete_topic("orders", "tuned")
    await c.create_partitions("orders", "created", 2)
    out("added_partitions", **topic_view(await c.get_topic("orders", "created")))
    await c.delete_partitions("orders", "created", 1)
    out("deleted_partitions", **topic_view(await c.get_topic("orders", "created")))

    # update_topic with the optional settings left out keeps them; with one given, changes only it
    await c.update_topic("orders", "shipped", "shipped2")
    out("update_name_only", **topic_view(await c.get_topic("orders", "shipped2")))
    await c.update_topic("orders", "shipped2", "shipped2", compression_algorithm="gzip")
    out("update_compression_only", **topic_view(await c.get_topic("orders", "shipped2")))
    await c.update_topic("orders", "shipped2", "shipped2", message_expiry=IggyExpiry.NeverExpire(),
                         max_topic_size=MaxTopicSize.Unlimited())
    out("update_expiry_and_size", **topic_view(await c.get_topic("orders", "shipped2")))

    # send and poll
    r = await c.send_messages("orders", "created", 0, [
        SendMessage("hello", user_headers={"trace": "abc", "n": 7, "ok": True}, id=42),
        SendMessage(b"\x00\x01")])
    out("send", confirmations=[[x.partition_id, x.base_offset] for x in r.confirmations])
    await c.send_messages("orders", "created", Partitioning.partition_id(1), [SendMessage("p1")])
    await c.send_messages("orders", "created", 2, [SendMessage("p2a"), SendMessage("p2b")])
    await c.send_messages("orders", "created", Partitioning.messages_key("k1"), [SendMessage("keyed")])
    await failed("send_missing_partition", c.send_messages("orders", "created", 9, [SendMessage("x")]))
    one = Consumer.Single(1)
    msgs = await c.poll_messages("orders", "created", consumer=one, polling_strategy=PollingStrategy.Offset(0),
                                 count=10, auto_commit=False, partition_id=0)
    out("poll_offset", got=[[m.offset(), bytes(m.payload()).hex(), m.partition_id(), m.length()] for m in msgs])
    out("message_ids", first=msgs[0].id(), minted=msgs[1].id() != 0)
    # no headers: None over TCP, an empty map over HTTP (the reference server's [] too)
    out("headers", got=scalar(msgs[0]), none=not scalar(msgs[1]))
    out("timestamps", ordered=msgs[0].timestamp() <= msgs[1].timestamp(),
        origin=msgs[0].origin_timestamp() > 0)
    ts = msgs[1].timestamp()

    async def poll(strategy, count=10, auto=False, partition=0, consumer=one):
        got = await c.poll_messages("orders", "created", consumer=consumer, polling_strategy=strategy, count=count,
                                    auto_commit=auto, partition_id=partition)
        return [[m.offset(), bytes(m.payload()).decode("latin-1")] for m in got]

    out("poll_p1", got=await poll(PollingStrategy.First(), partition=1))
    out("poll_p2", got=await poll(PollingStrategy.Offset(1), partition=2))
    out("poll_default_partition", got=[m.offset() for m in await c.poll_messages(
        "orders", "created", consumer=one, polling_strategy=PollingStrategy.First(), count=10, auto_commit=False)])
    out("poll_first", got=await poll(PollingStrategy.First(), 1))
    out("poll_last", got=await poll(PollingStrategy.Last(), 1))
    out("poll_ts", got=await poll(PollingStrategy.Timestamp(ts)))
    await failed("poll_missing_topic", c.poll_messages(
        "orders", "nope", consumer=one, polling_strategy=PollingStrategy.Offset(0), count=1, auto_commit=False))
    await failed("poll_missing_partition", c.poll_messages(
        "orders", "created", consumer=one, polling_strategy=PollingStrategy.Offset(0), count=1, auto_commit=False,
        partition_id=9))

    # consumer offsets: auto_commit stores them, Next reads after them, per consumer and partition
    seven, named = Consumer.Single(7), Consumer.Single("reader")
    out("next1", got=await poll(PollingStrategy.Next(), 1, True, consumer=seven))
    out("next2", got=await poll(PollingStrategy.Next(), 1, True, consumer=seven))
    out("next3", got=await poll(PollingStrategy.Next(), 1, True, consumer=seven))
    out("next_other_consumer", got=await poll(PollingStrategy.Next(), 10, True, consumer=named))
    out("next_named_again", got=await poll(PollingStrategy.Next(), 10, True, consumer=named))
    out("next_p2", got=await poll(PollingStrategy.Next(), 1, True, partition=2, consumer=seven))
    out("next_p2_again", got=await poll(PollingStrategy.Next(), 1, True, partition=2, consumer=seven))

    # consumer groups (the calls both transports offer; join/leave are binary only)
    await c.create_consumer_group("orders", "created", "g1")
    await failed("dup_group", c.create_consumer_group("orders", "created", "g1"))
    await c.create_consumer_group("orders", "created", "g2")
    g = await c.get_consumer_group("orders", "created", "g1")
    out("get_group", id=g.id, name=g.name, partitions=g.partitions_count, members=g.members_count)
    out("get_group_by_id", name=(await c.get_consumer_group("orders", "created", g.id)).name)
    out("groups", got=sorted([x.id, x.name, x.partitions_count] for x in await c.get_consumer_groups("orders", "created")))
    await c.delete_consumer_group("orders", "created", "g2")
    out("group_deleted", value=await c.get_consumer_group("orders", "created", "g2"))
    await failed("delete_missing_group", c.delete_consumer_group("orders", "created", "g2"))

    # users and permissions
    me = await c.get_user("iggy")
    out("root", id=me.id, username=me.username, status=str(me.status), manage=me.permissions.global_permissions.manage_servers)
    perms = Permissions(GlobalPermissions(read_streams=True), {s.id: StreamPermissions(read_topics=True, poll_messages=True)})
    alice = await c.create_user("alice", "secret1", UserStatus.Active, perms)
    out("create_user", id=alice.id, username=alice.username, streams=sorted(alice.permissions.streams))
    got = await c.get_user(alice.id)
    out("get_user", username=got.username, read_streams=got.permissions.global_permissions.read_streams,
        streams=sorted(got.permissions.streams))
    out("users", got=sorted([u.id, u.username] for u in await c.get_users()))
    await failed("dup_user", c.create_user("alice", "secret1"))
    await c.update_user("alice", username="alice2")
    await c.update_permissions("alice2", Permissions(GlobalPermissions(read_streams=True), None))
    a = await logged_in(port, transport, "alice2", "secret1")
    out("alice_streams", got=sorted(x.name for x in await a.get_streams()))
    await failed("alice_create_stream", a.create_stream("nope"))
    await failed("alice_wrong_password", a.change_password("alice2", "nope", "secret2"))
    await a.change_password("alice2", "secret1", "secret2")
    await failed("old_password", logged_in(port, transport, "alice2", "secret1"))
    await logged_in(port, transport, "alice2", "secret2")
    out("new_password")
    await c.delete_user("alice2")
    out("users_after_delete", got=sorted(u.username for u in await c.get_users()))

    # stats, purges and deletes
    stats = await c.get_stats()
    out("stats", streams=stats.streams_count, topics=stats.topics_count, partitions=stats.partitions_count,
        messages=stats.messages_count, groups=stats.consumer_groups_count)
    await c.purge_topic("orders", "created")
    out("purged_topic", got=await poll(PollingStrategy.First(), partition=2),
        partitions=(await c.get_topic("orders", "created")).partitions_count)
    await c.send_messages("orders", "created", 0, [SendMessage("after")])
    await c.purge_stream("orders")
    out("purged_stream", got=await poll(PollingStrategy.First()))
    await c.delete_topic("orders", "shipped2")
    out("topic_deleted", value=await c.get_topic("orders", "shipped2"))
    await c.delete_stream("orders")
    out("stream_deleted", value=await c.get_stream("orders"))
    await failed("delete_missing_stream", c.delete_stream("orders"))
    await c.logout_user()
    await failed("after_logout", c.get_streams())


asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
