"""apache-iggy 0.9.0 steps of the scale-out tests: python current_scaleout.py PORT MODE [ARGS].

MODE ``setup``: create stream ``orders`` and topic ``eu`` with 2 partitions.
MODE ``send N START``: send N messages (payload ``m<i>``, headers trace/n) to partition 0, one call.
MODE ``poll COUNT``: print the next COUNT messages of partition 0 for consumer 7, committing the offset.
MODE ``sendp PARTITION N START``: send N messages to one partition.
MODE ``group SECONDS [UNTIL]``: join consumer group ``g`` (created if missing), print ``ready``, then poll
as a member (auto commit) for SECONDS, or until a payload ending in UNTIL, printing each message's
partition and payload."""

import time

import asyncio
import json
import os
import sys

from apache_iggy import Consumer, IggyClient, PollingStrategy, SendMessage


async def main(port: int, mode: str, args: list[str]) -> None:
    c = IggyClient(f"127.0.0.1:{port}")
    await c.connect()
    await c.login_user("iggy", "iggy")
    if mode == "setup":
        await c.create_stream("orders")
        await c.create_topic("orders", "eu", 2)
        print(json.dumps({"setup": True}), flush=True)
    elif mode == "sendp":
        pid, n, start = int(args[0]), int(args[1]), int(args[2])
        await c.send_messages("orders", "eu", pid, [SendMessage(f"p{pid}-{i}".encode()) for i in range(start, start + n)])
        print(json.dumps({"sent": n}), flush=True)
    elif mode == "group":
        try:
            await c.create_consumer_group("orders", "eu", "g")
        except RuntimeError:
            pass  # made by the other member first
        await c.join_consumer_group("orders", "eu", "g")
        print(json.dumps({"ready": True}), flush=True)
        end = time.monotonic() + float(args[0])
        until = args[1] if len(args) > 1 else None  # stop early once a payload ends with this
        while time.monotonic() < end:
            msgs = await c.poll_messages("orders", "eu", consumer=Consumer.Group("g"),
                                         polling_strategy=PollingStrategy.Next(), count=100, auto_commit=True)
            for m in msgs:
                print(json.dumps({"partition": m.partition_id(), "payload": m.payload().decode()}), flush=True)
            if until and any(m.payload().decode().endswith(until) for m in msgs):
                break
            if not msgs:
                await asyncio.sleep(0.1)
    elif mode == "send":
        n, start = int(args[0]), int(args[1])
        await c.send_messages("orders", "eu", 0, [SendMessage(f"m{i}".encode(), user_headers={"trace": "abc", "n": i})
                                                 for i in range(start, start + n)])
        print(json.dumps({"sent": n}), flush=True)
    else:
        msgs = await c.poll_messages("orders", "eu", consumer=Consumer.Single(7), polling_strategy=PollingStrategy.Next(),
                                     count=int(args[0]), auto_commit=True, partition_id=0)
        for m in msgs:
            uh = m.user_headers()
            headers = {str(k): v for k, v in uh.to_scalar_dict().items()} if uh is not None else {}
            print(json.dumps({"offset": m.offset(), "payload": m.payload().decode(), "headers": headers}), flush=True)


asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3:]))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
