"""apache-iggy 0.9.0 (VSR): message deduplication by id (docs/iggy.md "Message deduplication").

python current_dedup.py PORT MODE, MODE one of:
  batches  the same 5 ids twice, a batch of 2 old + 1 new, a batch repeating one id,
           two messages without an id; then every stored (id, payload)
  send     one batch of 50 explicit ids (101..150)
  stored   every stored (id, payload) of partition 0

Creates stream ``dd`` / topic ``t`` (1 partition) when missing. One JSON line per step."""

import asyncio
import os
import sys

from apache_iggy import Consumer, IggyClient, PollingStrategy, SendMessage
from scenario import out


async def stored(c):
    got = await c.poll_messages("dd", "t", consumer=Consumer.Single(1), polling_strategy=PollingStrategy.Offset(0),
                                count=1000, auto_commit=False, partition_id=0)
    out("stored", messages=[[m.id(), m.payload().decode()] for m in got])


async def main(port: int, mode: str) -> None:
    c = IggyClient(f"127.0.0.1:{port}")
    await c.connect()
    await c.login_user("iggy", "iggy")
    if await c.get_stream("dd") is None:
        await c.create_stream("dd")
    if await c.get_topic("dd", "t") is None:
        await c.create_topic("dd", "t", 1)
    if mode == "batches":
        batch = [SendMessage(f"m{i}", id=i) for i in range(1, 6)]
        for step in ("first", "again"):
            r = await c.send_messages("dd", "t", 0, batch)
            out(step, confirmations=[[x.partition_id, x.base_offset] for x in r.confirmations])
        await c.send_messages("dd", "t", 0, [SendMessage("m4", id=4), SendMessage("m6", id=6), SendMessage("m5", id=5)])
        await c.send_messages("dd", "t", 0, [SendMessage("m7", id=7), SendMessage("m7bis", id=7)])
        await c.send_messages("dd", "t", 0, [SendMessage("auto"), SendMessage("auto")])  # id 0: server-made ids
        out("sent")
        await stored(c)
    elif mode == "send":
        await c.send_messages("dd", "t", 0, [SendMessage(f"k{i}", id=i) for i in range(101, 151)])
        out("sent")
    else:
        await stored(c)


asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
sys.stdout.flush()
os._exit(0)  # apache-iggy 0.9.0 has no close() (apache/iggy#4163): skip the runtime's teardown
