"""apache-iggy 0.8.0 half of the kill -9 test: python middle_durability.py PORT MODE.

MODE ``send``: create orders/eu, send 20 batches of 50 messages; print each acked batch.
MODE ``poll``: print the payloads of partition 0, in order."""

import asyncio
import json
import os
import sys

from apache_iggy import IggyClient, PollingStrategy, SendMessage

BATCHES, PER_BATCH = 20, 50


async def main(port: int, mode: str) -> None:
    c = IggyClient(f"127.0.0.1:{port}")
    await c.connect()
    await c.login_user("iggy", "iggy")
    if mode == "send":
        await c.create_stream("orders")
        await c.create_topic("orders", "eu", 1)
        for b in range(BATCHES):
            await c.send_messages("orders", "eu", 0, [SendMessage(f"m-{b}-{i}") for i in range(PER_BATCH)])
            print(json.dumps({"acked": b}), flush=True)
        return
    got, offset = [], 0
    while True:
        msgs = await c.poll_messages("orders", "eu", 0, PollingStrategy.Offset(offset), 500, False)
        if not msgs:
            break
        got += [m.payload().decode() for m in msgs]
        offset = msgs[-1].offset() + 1
    print(json.dumps({"payloads": got}), flush=True)


asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
