"""apache-iggy 0.5.0-0.8.0 scenario, run in its own venv: python middle_basic.py PORT.

The four middle releases have nearly the same Python API; the differences are
bridged here: 0.5.0 numbers partitions from 1 (its server generation did,
iggy-middle.md 2) and its SendMessage takes only str; ``partition_id()`` of a
received message exists from 0.7.0 on (printed as null before); before 0.7.0
``consumer_group()`` is not awaited and has only ``consume_messages``.

Prints one JSON line per step; the test compares them. Any exception fails
the script with a traceback (exit status 1)."""

import asyncio
import importlib.metadata
import os
import sys

from apache_iggy import IggyClient, PollingStrategy, SendMessage
from scenario import expect_error, out


VERSION = importlib.metadata.version("apache-iggy")
FIRST = 1 if VERSION == "0.5.0" else 0  # the first partition's id at this client's edge


def message(data: bytes) -> SendMessage:
    try:
        return SendMessage(data)
    except TypeError:  # apache-iggy 0.5.0: str only (sent as its UTF-8 bytes)
        return SendMessage(data.decode())


def partition_of(m):
    return m.partition_id() if hasattr(m, "partition_id") else None


async def group_payloads(c, n: int) -> tuple[object, list[str]]:
    """The high-level consumer-group flow: the first ``n`` payloads it hands over."""
    if VERSION in ("0.5.0", "0.6.0"):
        consumer = c.consumer_group("g1", "orders", "created", batch_length=10)
        got, done = [], asyncio.Event()

        async def take(m):
            got.append(m.payload().hex())
            if len(got) == n:
                done.set()

        await consumer.consume_messages(take, done)
        return consumer, got
    consumer = await c.consumer_group("g1", "orders", "created", batch_length=10)
    got = []
    async for m in consumer.iter_messages():
        got.append(m.payload().hex())
        if len(got) == n:
            break
    return consumer, got


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
    await c.send_messages("orders", "created", FIRST, [SendMessage("hello"), message(b"\x00\x01")])
    await c.send_messages("orders", "created", FIRST + 1, [SendMessage("p1")])
    msgs = await c.poll_messages("orders", "created", FIRST, PollingStrategy.Offset(0), 10, False)
    out("poll_offset", got=[[m.offset(), m.payload().hex(), partition_of(m)] for m in msgs])
    ts = msgs[1].timestamp()

    async def offsets(strategy, count, auto_commit=False):
        msgs = await c.poll_messages("orders", "created", FIRST, strategy, count, auto_commit)
        return [m.offset() for m in msgs]

    out("poll_first", got=await offsets(PollingStrategy.First(), 1))
    out("poll_last", got=await offsets(PollingStrategy.Last(), 1))
    out("poll_ts", got=await offsets(PollingStrategy.Timestamp(ts), 10))
    for step in ("poll_next1", "poll_next2", "poll_next3"):
        out(step, got=await offsets(PollingStrategy.Next(), 1, True))
    p1 = await c.poll_messages("orders", "created", FIRST + 1, PollingStrategy.Offset(0), 10, False)
    out("poll_p1", got=[m.payload().hex() for m in p1])
    missing = c.poll_messages("orders", "nope", FIRST, PollingStrategy.Offset(0), 10, False)
    await expect_error("poll_missing_topic", missing)

    consumer, got = await group_payloads(c, 3)
    out("group_iter", got=sorted(got))
    await consumer.store_offset(1, FIRST)
    await consumer.delete_offset(FIRST)
    try:
        await consumer.delete_offset(FIRST)
        out("delete_offset_again", error=None)
    except RuntimeError as exc:
        out("delete_offset_again", error=str(exc))


asyncio.run(main(int(sys.argv[1])))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
