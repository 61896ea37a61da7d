"""apache-iggy 0.9.0 half of the Pravega cross-protocol test: python pravega_cross.py PORT MODE STREAM TOPIC.

MODE ``poll``: every message of every partition of STREAM/TOPIC, as JSON lines
``{"partition": p, "payload": ...}``. MODE ``send``: one message "from-iggy" to partition 0."""

import asyncio
import json
import os
import sys

from apache_iggy import Consumer, IggyClient, PollingStrategy, SendMessage


async def main(port: int, mode: str, stream: str, topic: str) -> None:
    c = IggyClient(f"127.0.0.1:{port}")
    await c.connect()
    await c.login_user("iggy", "iggy")
    if mode == "send":
        await c.send_messages(stream, topic, 0, [SendMessage(b"from-iggy", user_headers={"trace": "abc"})])
        return
    t = await c.get_topic(stream, topic)
    for p in range(t.partitions_count):
        msgs = await c.poll_messages(stream, topic, consumer=Consumer.Single(1), polling_strategy=PollingStrategy.First(),
                                     count=1000, auto_commit=False, partition_id=p)
        for m in msgs:
            print(json.dumps({"partition": p, "payload": m.payload().decode()}), flush=True)


asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
