"""apache-iggy 0.9.0 traffic for the /metrics test: python current_metrics.py PORT tcp|quic|ws N.

Logs in, makes stream ``m_<transport>`` with topic ``t`` (1 partition), sends N
messages of 10-byte payloads, polls them back, and creates the stream again
(one error reply). tests/gateway/test_gw_metrics_listeners.py reads /metrics
around it."""

import asyncio
import os
import sys

from apache_iggy import Consumer, IggyClient, PollingStrategy, QuicConfig, SendMessage, WebSocketConfig
from scenario import out


def client(port: int, transport: str) -> IggyClient:
    if transport == "quic":  # self-signed localhost cert: the SDK does not verify by default
        return IggyClient(QuicConfig(server_address=f"127.0.0.1:{port}"))
    if transport == "ws":
        return IggyClient(WebSocketConfig(server_address=f"127.0.0.1:{port}"))
    return IggyClient(f"127.0.0.1:{port}")


async def main(port: int, transport: str, n: int) -> None:
    c = client(port, transport)
    await c.connect()
    await c.login_user("iggy", "iggy")
    stream = f"m_{transport}"
    await c.create_stream(stream)
    await c.create_topic(stream, "t", 1)
    await c.send_messages(stream, "t", 0, [SendMessage(f"payload{i:03d}") for i in range(n)])
    got = await c.poll_messages(stream, "t", consumer=Consumer.Single(1), polling_strategy=PollingStrategy.First(),
                                count=n, auto_commit=False, partition_id=0)
    try:
        await c.create_stream(stream)  # exists already: an error status (1012)
        again = "created"
    except RuntimeError:
        again = "error"
    out("done", polled=len(got), payload_bytes=sum(len(m.payload()) for m in got), again=again)


asyncio.run(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
sys.stdout.flush()
os._exit(0)  # the client's runtime threads would keep the process alive (or abort at exit)
