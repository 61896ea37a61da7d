"""apache-iggy 0.9.0 (VSR) half of the power-loss test (tests/gateway/test_powerloss.py).

python current_powerloss.py PORT send BATCHES   create stream ``pl`` / topic ``t`` (1 partition)
                                                  and send BATCHES batches of 5 messages with
                                                  ids; one line per acknowledged send
python current_powerloss.py PORT stored           every stored (offset, id, payload) of partition 0

One JSON line per step."""

import asyncio
import os
import sys

from apache_iggy import Consumer, IggyClient, PollingStrategy, SendMessage
from scenario import out

PER_BATCH = 5


async def main(port: int, mode: str, batches: int) -> None:
    c = IggyClient(f"127.0.0.1:{port}")
    await c.connect()
    await c.login_user("iggy", "iggy")
    if mode == "send":
        await c.create_stream("pl")
        await c.create_topic("pl", "t", 1)
        for b in range(batches):
            msgs = [SendMessage(f"iggy-{b * PER_BATCH + j}", id=b * PER_BATCH + j + 1) for j in range(PER_BATCH)]
            await c.send_messages("pl", "t", 0, msgs)  # returns once the server acknowledged
            out("acked", batch=b, payloads=[f"iggy-{b * PER_BATCH + j}" for j in range(PER_BATCH)])
    else:
        got = await c.poll_messages("pl", "t", consumer=Consumer.Single(1), polling_strategy=PollingStrategy.Offset(0),
                                    count=10_000, auto_commit=False, partition_id=0)
        out("stored", messages=[[m.offset(), m.id(), m.payload().decode()] for m in got])


asyncio.run(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0))
sys.stdout.flush()
os._exit(0)  # apache-iggy 0.9.0 has no close() (apache/iggy#4163): skip the runtime's teardown
