"""apache-iggy 0.9.0 (VSR) scenario, run in its own venv: python current_basic.py PORT [tcp|quic].

Prints one JSON line per step; the test compares them."""

import asyncio
import os
import sys

from apache_iggy import Consumer, IggyClient, PollingStrategy, QuicConfig, SendMessage
from scenario import expect_error, out


def scalar(m):
    return {str(k): (v if isinstance(v, (int, float, str, bool)) else repr(v))
            for k, v in m.user_headers().to_scalar_dict().items()}


async def main(port: int, transport: str) -> None:
    if transport == "quic":  # self-signed localhost cert: the SDK does not verify by default
        c = IggyClient(QuicConfig(server_address=f"127.0.0.1:{port}"))
    else:
        c = IggyClient(f"127.0.0.1:{port}")
    await c.connect()
    await c.ping()
    await expect_error("bad_login", c.login_user("iggy", "wrong-password"))
    await c.login_user("iggy", "iggy")
    out("login")
    await c.create_stream("orders")
    await expect_error("dup_stream", c.create_stream("orders"))
    s = await c.get_stream("orders")
    out("get_stream", id=s.id, name=s.name, topics=s.topics_count)
    out("missing_stream", value=await c.get_stream("nope"))
    await c.create_topic("orders", "created", 2)
    t = await c.get_topic("orders", "created")
    out("get_topic", id=t.id, name=t.name, partitions=t.partitions_count)
    r = await c.send_messages("orders", "created", 0, [
        SendMessage("hello", user_headers={"trace": "abc", "n": 7}), SendMessage(b"\x00\x01")])
    out("send", confirmations=[[x.partition_id, x.base_offset] for x in r.confirmations])
    await c.send_messages("orders", "created", 1, [SendMessage("p1")])
    one = Consumer.Single(1)
    msgs = await c.poll_messages("orders", "created", consumer=one, polling_strategy=PollingStrategy.Offset(0),
                                 count=10, auto_commit=False, partition_id=0)
    out("poll_offset", got=[[m.offset(), m.payload().hex(), m.partition_id()] for m in msgs])
    out("headers", got=scalar(msgs[0]))
    ts = msgs[1].timestamp()

    async def poll(strategy, count=10, auto=False, partition=0):
        got = await c.poll_messages("orders", "created", consumer=one, polling_strategy=strategy, count=count,
                                    auto_commit=auto, partition_id=partition)
        return [m.offset() for m in got]

    out("poll_first", got=await poll(PollingStrategy.First(), 1))
    out("poll_last", got=await poll(PollingStrategy.Last(), 1))
    out("poll_ts", got=await poll(PollingStrategy.Timestamp(ts)))
    out("poll_next1", got=await poll(PollingStrategy.Next(), 1, True))
    out("poll_next2", got=await poll(PollingStrategy.Next(), 1, True))
    out("poll_next3", got=await poll(PollingStrategy.Next(), 1, True))
    await expect_error("poll_missing_topic", c.poll_messages(
        "orders", "nope", consumer=one, polling_strategy=PollingStrategy.Offset(0), count=1, auto_commit=False))

    consumer = await c.consumer_group("g1", "orders", "created", batch_length=10)
    got = []
    async for m in consumer.iter_messages():
        got.append(m.payload().hex())
        if len(got) == 3:
            break
    out("group_iter", got=sorted(got))
    await consumer.store_offset(1, 0)
    await consumer.delete_offset(0)
    await expect_error("delete_offset_again", consumer.delete_offset(0))
    await c.delete_stream("orders")
    await expect_error("delete_missing", c.delete_stream("orders"))


asyncio.run(main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "tcp"))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
