"""iggy-py 0.4.0 (seed era) scenario, run in its own venv: python seed_basic.py PORT.

Prints one JSON line per step; the test compares them. Ids are 1-based in
this generation (Ferry translates at the edge)."""

import asyncio
import os
import sys
import zlib

from iggy_py import IggyClient, PollingStrategy, SendMessage
from scenario import call, expect_error, out


async def main(port: int) -> None:
    c = IggyClient(f"127.0.0.1:{port}")
    await call(c.connect)
    await call(c.ping)
    await call(c.login_user, "iggy", "iggy")
    out("login")
    await call(c.create_stream, "orders", 1)
    await expect_error("dup_stream", c.create_stream, "orders", 2)
    s = await call(c.get_stream, "orders")
    out("get_stream", id=s.id, name=s.name, topics=s.topics_count)
    out("missing_stream", value=await call(c.get_stream, "nope"))
    await call(c.create_topic, "orders", "created", 2, None, 1, None)
    t = await call(c.get_topic, 1, 1)
    out("get_topic", id=t.id, name=t.name, partitions=t.topics_count)  # iggy.md 12: the getter is misnamed
    await call(c.send_messages, "orders", "created", 1, [SendMessage("hello"), SendMessage("w")])
    await call(c.send_messages, "orders", "created", 2, [SendMessage("p2")])
    msgs = await call(c.poll_messages, "orders", "created", 1, PollingStrategy.Offset(0), 10, False)
    out("poll_offset", got=[[m.offset(), bytes(m.payload()).hex(), m.checksum() == zlib.crc32(bytes(m.payload()))]
                            for m in msgs])
    ts = msgs[1].timestamp()

    async def poll(strategy, count=10, auto=False, partition=1):
        got = await call(c.poll_messages, "orders", "created", partition, strategy, count, auto)
        return [m.offset() for m in got]

    out("poll_first", got=await poll(PollingStrategy.First(), 1))
    out("poll_last", got=await poll(PollingStrategy.Last(), 1))
    out("poll_ts", got=await poll(PollingStrategy.Timestamp(ts)))
    out("poll_next1", got=await poll(PollingStrategy.Next(), 1, True))
    out("poll_next2", got=await poll(PollingStrategy.Next(), 1, True))
    out("poll_next3", got=await poll(PollingStrategy.Next(), 1, True))
    out("poll_p2", got=await poll(PollingStrategy.Offset(0), partition=2))
    await expect_error("poll_missing_topic", c.poll_messages, "orders", 9, 1, PollingStrategy.Offset(0), 1, False)


asyncio.run(main(int(sys.argv[1])))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
