"""apache-iggy 0.9.0 (VSR): a batch resent through another gateway of one store
(tests/gateway/test_scaleout_iggy_dedup.py; docs/iggy.md "Message deduplication").

python current_dedup_scaleout.py PORT MODE TOPIC, MODE one of:
  ids      one batch of 20 explicit ids (101..120) to partition 0
  noids    one batch of 5 messages with id 0 (the server makes the ids)
  stored   every stored (id, payload) of partition 0

Creates stream ``sx`` / topic TOPIC (1 partition) when missing. One JSON line per step."""

import asyncio
import os
import sys

from apache_iggy import Consumer, IggyClient, PollingStrategy, SendMessage
from scenario import out


async def main(port: int, mode: str, topic: str) -> None:
    c = IggyClient(f"127.0.0.1:{port}")
    await c.connect()
    await c.login_user("iggy", "iggy")
    if await c.get_stream("sx") is None:
        await c.create_stream("sx")
    if await c.get_topic("sx", topic) is None:
        await c.create_topic("sx", topic, 1)
    if mode == "ids":
        r = await c.send_messages("sx", topic, 0, [SendMessage(f"k{i}", id=i) for i in range(101, 121)])
        out("sent", confirmations=[[x.partition_id, x.base_offset] for x in r.confirmations])
    elif mode == "noids":
        await c.send_messages("sx", topic, 0, [SendMessage(f"n{i}") for i in range(5)])
        out("sent")
    else:
        got = await c.poll_messages("sx", topic, consumer=Consumer.Single(1), polling_strategy=PollingStrategy.Offset(0),
                                    count=1000, auto_commit=False, partition_id=0)
        out("stored", messages=[[m.id(), m.payload().decode()] for m in got])


asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3]))
sys.stdout.flush()
os._exit(0)  # apache-iggy 0.9.0 has no close() (apache/iggy#4163): skip the runtime's teardown
