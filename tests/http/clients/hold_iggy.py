"""apache-iggy 0.9.0, run in its own venv by tests/http/test_http_console_connections.py:
``hold_iggy.py PORT STREAM TOPIC COUNT``.

Logs in, sends COUNT messages to partition 0 of STREAM/TOPIC (which the test made),
polls them back, provokes one error reply (creating STREAM again), prints one JSON line
with what it sent and received, then keeps its connection open until stdin closes."""

import asyncio
import json
import os
import sys

from apache_iggy import Consumer, IggyClient, PollingStrategy, SendMessage


async def main(port: int, stream: str, topic: str, count: int) -> None:
    c = IggyClient(f"127.0.0.1:{port}")
    await c.connect()
    await c.login_user("iggy", "iggy")
    payloads = [f"iggy message {i}".encode() for i in range(count)]
    await c.send_messages(stream, topic, 0, [SendMessage(p) for p in payloads])
    got = await c.poll_messages(stream, topic, consumer=Consumer.Single(1), polling_strategy=PollingStrategy.Offset(0),
                                count=count, auto_commit=False, partition_id=0)
    try:
        await c.create_stream(stream)   # exists: an error reply the console's Errors view lists
        duplicate = "accepted"
    except Exception as exc:  # noqa: BLE001 - the error is the point
        duplicate = type(exc).__name__
    sys.stdout.write(json.dumps({"step": "ready", "sent": len(payloads), "sent_bytes": sum(map(len, payloads)),
                                 "polled": len(got), "duplicate": duplicate}) + "\n")
    sys.stdout.flush()
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)   # until the test closes stdin


asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
