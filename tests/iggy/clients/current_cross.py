"""apache-iggy 0.9.0 half of the NATS cross-protocol test: python current_cross.py PORT MODE.

MODE ``send``: send one message with headers to orders/eu partition 0.
MODE ``poll``: print every message of orders/eu partition 0 with its headers."""

import asyncio
import json
import os
import sys

from apache_iggy import Consumer, IggyClient, PollingStrategy, SendMessage


async def main(port: int, mode: str) -> None:
    c = IggyClient(f"127.0.0.1:{port}")
    await c.connect()
    await c.login_user("iggy", "iggy")
    if mode == "send":
        await c.send_messages("orders", "eu", 0, [SendMessage(b"from-iggy", user_headers={"trace": "abc", "n": 7})])
        return
    msgs = await c.poll_messages("orders", "eu", consumer=Consumer.Single(1), polling_strategy=PollingStrategy.First(),
                                 count=10, auto_commit=False, partition_id=0)
    for m in msgs:
        headers = {str(k): v for k, v in m.user_headers().to_scalar_dict().items()}
        print(json.dumps({"payload": m.payload().decode(), "headers": headers}), flush=True)


asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
