"""apache-iggy 0.9.0: the client calls current_admin.py and current_basic.py leave out.

python current_admin2.py PORT; one JSON line per step. Consumer groups by the
low-level calls, purges, topic and partition updates, user updates, password
change, logout, option descriptions, and the high-level producer."""

import asyncio
import os
import sys
from datetime import timedelta

from apache_iggy import (
    Consumer, GlobalPermissions, IggyClient, IggyExpiry, MaxTopicSize, Partitioning, Permissions,
    PollingStrategy, SendMessage, UserStatus,
)
from scenario import expect_error, logged_in, out


def setting(value):
    """IggyExpiry / MaxTopicSize as JSON: seconds or bytes when set, else the variant's name."""
    if hasattr(value, "duration"):
        return value.duration.total_seconds() if not callable(value.duration) else value.duration().total_seconds()
    if hasattr(value, "bytes"):
        return value.bytes if not callable(value.bytes) else value.bytes()
    return type(value).__name__


async def payloads(c, stream, topic, partition=0):
    msgs = await c.poll_messages(stream, topic, consumer=Consumer.Single(7), polling_strategy=PollingStrategy.First(),
                                 count=100, auto_commit=False, partition_id=partition)
    return [bytes(m.payload()).decode() for m in msgs]


async def main(port: int) -> None:
    addr = f"127.0.0.1:{port}"
    root = await logged_in(IggyClient, addr)
    await root.create_stream("s")
    await root.create_topic("s", "t", 3, segment_size=1_048_576)  # small segments: a 50 MB cap is above them

    # consumer groups, one call at a time
    await root.create_consumer_group("s", "t", "g")
    await expect_error("dup_group", root.create_consumer_group("s", "t", "g"))
    await root.join_consumer_group("s", "t", "g")
    g = await root.get_consumer_group("s", "t", "g")
    out("group_joined", id=g.id, name=g.name, partitions=g.partitions_count, members=g.members_count,
        member_partitions=sorted(p for m in g.members for p in m.partitions))
    out("groups", names=[x.name for x in await root.get_consumer_groups("s", "t")])
    await root.leave_consumer_group("s", "t", "g")
    out("group_left", members=(await root.get_consumer_group("s", "t", "g")).members_count)
    await root.delete_consumer_group("s", "t", "g")
    out("group_deleted", value=await root.get_consumer_group("s", "t", "g"))
    await expect_error("join_missing_group", root.join_consumer_group("s", "t", "g"))

    # the high-level producer: direct mode, explicit and balanced partitioning
    producer = await root.producer("s", "t", partitioning=Partitioning.partition_id(1),
                                   create_stream_if_not_exists=False, create_topic_if_not_exists=False)
    async with producer:
        await producer.send([SendMessage("a"), SendMessage("b")])
        await producer.send_one(SendMessage("c"))
        await producer.send_with_partitioning([SendMessage("d")], Partitioning.partition_id(2))
    out("producer", p1=await payloads(root, "s", "t", 1), p2=await payloads(root, "s", "t", 2))
    made = await root.producer("s2", "t2", topic_partitions_count=2)  # creates what it needs
    async with made:
        await made.send_one(SendMessage("new"))
    out("producer_created", partitions=(await root.get_topic("s2", "t2")).partitions_count)

    # purges keep the topic and partitions, drop the messages
    await root.purge_topic("s", "t")
    out("purged_topic", p1=await payloads(root, "s", "t", 1), partitions=(await root.get_topic("s", "t")).partitions_count)
    await root.send_messages("s", "t", 0, [SendMessage("after")])
    await root.purge_stream("s")
    out("purged_stream", p0=await payloads(root, "s", "t", 0))

    # topic and partition updates
    await root.update_topic("s", "t", "t-renamed", message_expiry=IggyExpiry.ExpireDuration(timedelta(hours=1)),
                            max_topic_size=MaxTopicSize.Custom(50_000_000))
    t = await root.get_topic("s", "t-renamed")
    out("updated_topic", name=t.name, partitions=t.partitions_count, expiry=setting(t.message_expiry),
        max_size=setting(t.max_topic_size), compression=t.compression_algorithm)
    await root.update_topic("s", "t-renamed", "t-renamed", compression_algorithm="gzip")  # the rest stays
    t = await root.get_topic("s", "t-renamed")
    out("updated_compression", expiry=setting(t.message_expiry), compression=t.compression_algorithm)
    await root.delete_partitions("s", "t-renamed", 2)
    out("deleted_partitions", partitions=(await root.get_topic("s", "t-renamed")).partitions_count)
    await expect_error("delete_too_many_partitions", root.delete_partitions("s", "t-renamed", 5))
    await root.delete_topic("s", "t-renamed")
    out("deleted_topic", value=await root.get_topic("s", "t-renamed"))

    # users: update, permissions, password, logout
    await root.create_user("bob", "secret1", UserStatus.Active, None)
    await root.update_user("bob", username="robert")
    await root.update_permissions("robert", Permissions(GlobalPermissions(read_streams=True), None))
    u = await root.get_user("robert")
    out("updated_user", username=u.username, read_streams=u.permissions.global_permissions.read_streams)
    await root.update_user("robert", status=UserStatus.Inactive)
    bob = IggyClient(addr)
    await bob.connect()
    await expect_error("inactive_login", bob.login_user("robert", "secret1"))
    await root.update_user("robert", status=UserStatus.Active)
    await bob.login_user("robert", "secret1")
    await expect_error("wrong_current_password", bob.change_password("robert", "nope", "secret2"))
    await bob.change_password("robert", "secret1", "secret2")
    await bob.logout_user()
    await expect_error("after_logout", bob.get_streams())
    fresh = IggyClient(addr)
    await fresh.connect()
    await expect_error("old_password", fresh.login_user("robert", "secret1"))
    await fresh.login_user("robert", "secret2")
    out("new_password", streams=sorted(s.name for s in await fresh.get_streams()))

    # option descriptions (iggy-current.md 6.10)
    await expect_error("unknown_option", root.create_topic("s", "opt", 1, options={"bogus_key": "1"}))
    await root.create_topic("s", "opt", 1, options={"segment_size": "1048576"})  # a catalog key, as a string
    out("known_option", partitions=(await root.get_topic("s", "opt")).partitions_count)

    specs = await root.describe_options("topic")
    out("describe_options", options={s.key: [s.kind, repr(s.default_value)] for s in specs},
        described=all(s.description for s in specs))
    out("describe_stream_options", count=len(await root.describe_options("stream")))


asyncio.run(main(int(sys.argv[1])))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
