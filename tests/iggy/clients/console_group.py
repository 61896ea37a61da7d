"""apache-iggy 0.9.0: a consumer group that consumes part of a topic, for the console's Consumers view.

``python console_group.py PORT STREAM TOPIC SENT_P0 SENT_P1 CONSUME``: creates the stream and a
two-partition topic, sends SENT_P0 / SENT_P1 messages to partitions 0 / 1, joins group
``console-group`` (auto-commit off), takes CONSUME messages from it and stores, per partition,
the last offset it took. Prints one JSON line: the messages taken per partition (the client's
partition numbers) and the offsets stored.
"""

import asyncio
import os
import sys

from apache_iggy import AutoCommit, IggyClient, SendMessage
from scenario import out

STEP_TIMEOUT_S = 30  # per awaited step; the test kills the whole script at its own limit


async def main(port: int, stream: str, topic: str, sent: list[int], consume: int) -> None:
    c = IggyClient(f"127.0.0.1:{port}")
    await c.connect()
    await c.login_user("iggy", "iggy")
    await c.create_stream(stream)
    await c.create_topic(stream, topic, 2)
    for pid, n in enumerate(sent):
        await c.send_messages(stream, topic, pid, [SendMessage(f"m{pid}-{i}") for i in range(n)])
    group = await c.consumer_group("console-group", stream, topic, batch_length=consume,
                                   auto_commit=AutoCommit.Disabled())
    last: dict[int, int] = {}
    taken = 0
    messages = group.iter_messages()
    while taken < consume:
        m = await asyncio.wait_for(messages.__anext__(), STEP_TIMEOUT_S)
        last[m.partition_id()] = max(last.get(m.partition_id(), -1), m.offset())
        taken += 1
    for pid, offset in last.items():
        await asyncio.wait_for(group.store_offset(offset, pid), STEP_TIMEOUT_S)
    out("consumed", stored={str(p): o for p, o in sorted(last.items())}, taken=taken)


asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3], [int(sys.argv[4]), int(sys.argv[5])],
                 int(sys.argv[6])))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
