"""apache-iggy 0.8.0 scenario, run in its own venv: python middle_basic.py PORT.

Prints one JSON line per step; the test compares them. Any exception fails
the script with a traceback (exit status 1)."""

import asyncio
import json
import os
import sys

from apache_iggy import IggyClient, PollingStrategy, SendMessage


def out(step, **kw):
    print(json.dumps({"step": step, **kw}), flush=True)


async def expect_error(step, coro):
    try:
        await coro
    except RuntimeError as exc:
        out(step, error=str(exc))
    else:
        out(step, error=None)


async def main(port: int) -> None:
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
    await c.send_messages("orders", "created", 0, [SendMessage("hello"), SendMessage(b"\x00\x01")])
    await c.send_messages("orders", "created", 1, [SendMessage("p1")])
    msgs = await c.poll_messages("orders", "created", 0, PollingStrategy.Offset(0), 10, False)
    out("poll_offset", got=[[m.offset(), m.payload().hex(), m.partition_id()] for m in msgs])
    ts = msgs[1].timestamp()
    out("poll_first", got=[m.offset() for m in await c.poll_messages("orders", "created", 0, PollingStrategy.First(), 1, False)])
    out("poll_last", got=[m.offset() for m in await c.poll_messages("orders", "created", 0, PollingStrategy.Last(), 1, False)])
    out("poll_ts", got=[m.offset() for m in await c.poll_messages("orders", "created", 0, PollingStrategy.Timestamp(ts), 10, False)])
    out("poll_next1", got=[m.offset() for m in await c.poll_messages("orders", "created", 0, PollingStrategy.Next(), 1, True)])
    out("poll_next2", got=[m.offset() for m in await c.poll_messages("orders", "created", 0, PollingStrategy.Next(), 1, True)])
    out("poll_next3", got=[m.offset() for m in await c.poll_messages("orders", "created", 0, PollingStrategy.Next(), 1, True)])
    out("poll_p1", got=[m.payload().hex() for m in await c.poll_messages("orders", "created", 1, PollingStrategy.Offset(0), 10, False)])
    await expect_error("poll_missing_topic", c.poll_messages("orders", "nope", 0, PollingStrategy.Offset(0), 10, False))

    consumer = await c.consumer_group("g1", "orders", "created", batch_length=10)
    got = []
    async for m in consumer.iter_messages():
        got.append(m.payload().hex())
        if len(got) == 3:
            break
    out("group_iter", got=sorted(got))
    await consumer.store_offset(1, 0)
    await consumer.delete_offset(0)
    try:
        await consumer.delete_offset(0)
        out("delete_offset_again", error=None)
    except RuntimeError as exc:
        out("delete_offset_again", error=str(exc))


asyncio.run(main(int(sys.argv[1])))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
