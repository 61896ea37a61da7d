"""The rows of the not-found table whose answer differs by generation, with an older
client: apache-iggy 0.8.0 (dialect 2) or iggy-py 0.4.0 (dialect 1, 1-based ids), run in
its own venv: python older_errors.py PORT. One JSON line per case; the expected replies
are in tests/iggy/test_iggy_error_codes.py. Both wheels share these calls' signatures."""

import asyncio
import os
import sys

try:
    from apache_iggy import IggyClient, PollingStrategy, SendMessage
    FIRST = 0  # partition ids are 0-based from apache-iggy 0.6.0 on (iggy-middle.md 5)
except ImportError:
    from iggy_py import IggyClient, PollingStrategy, SendMessage
    FIRST = 1
from scenario import call, out


async def case(step, fn, *args):
    try:
        value = await call(fn, *args)
    except RuntimeError as exc:
        out(step, error=str(exc))
    else:
        out(step, value=None if value is None else repr(type(value).__name__))


async def main(port: int) -> None:
    c = IggyClient(f"127.0.0.1:{port}")
    await call(c.connect)
    await call(c.login_user, "iggy", "iggy")
    if FIRST:
        await call(c.create_stream, "s", 1)
        await call(c.create_topic, "s", "t", 2, None, 1, None)
    else:
        await call(c.create_stream, "s")
        await call(c.create_topic, "s", "t", 2)
    await call(c.send_messages, "s", "t", FIRST, [SendMessage("m0")])

    def poll(stream="s", topic="t", partition=FIRST):
        return (c.poll_messages, stream, topic, partition, PollingStrategy.Offset(0), 10, False)

    def send(stream="s", topic="t", partition=FIRST):
        return (c.send_messages, stream, topic, partition, [SendMessage("x")])

    for step, (fn, *args) in [
        ("get_stream_missing", (c.get_stream, "nope")),
        ("get_topic_missing", (c.get_topic, "s", "nope")),
        ("poll_missing_stream", poll(stream="nope")),
        ("poll_missing_topic", poll(topic="nope")),
        ("poll_missing_partition", poll(partition=FIRST + 5)),
        ("send_missing_stream", send(stream="nope")),
        ("send_missing_topic", send(topic="nope")),
        ("send_missing_partition", send(partition=FIRST + 5)),
    ]:
        await case(step, fn, *args)
    s = await call(c.get_stream, "s")  # every error above left the connection open
    out("still_open", name=s.name, topics=s.topics_count)


asyncio.run(main(int(sys.argv[1])))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
