"""apache-iggy 0.9.0 over WebSocket: python current_ws.py PORT MODE [CA_FILE].

The client is built from an ``iggy+ws://`` connection string (credentials in it:
the SDK logs in on connect). With CA_FILE it adds ``tls=true`` and verifies the
server against that CA (the SDK then opens ``wss://localhost:PORT``).

MODE ``basic``: ping, create a stream and a topic, send three messages (one of
2 MiB, past trio-websocket's default 1 MiB message cap), poll them back.
MODE ``send``: send one message with headers to orders/eu partition 0.
Prints one JSON line per step; the test compares them."""

import asyncio
import os
import sys

from apache_iggy import Consumer, IggyClient, PollingStrategy, SendMessage
from scenario import out


def connection_string(port: int, ca_file: str | None) -> str:
    url = f"iggy+ws://iggy:iggy@127.0.0.1:{port}?reconnection_retries=0"
    if ca_file:
        url += f"&tls=true&tls_domain=localhost&tls_ca_file={ca_file}&tls_validate_certificate=true"
    return url


async def main(port: int, mode: str, ca_file: str | None) -> None:
    c = IggyClient.from_connection_string(connection_string(port, ca_file))
    await c.connect()
    out("login")
    if mode == "send":
        await c.send_messages("orders", "eu", 0, [SendMessage(b"from-ws", user_headers={"trace": "ws"})])
        out("sent")
        return
    await c.ping()
    out("ping")
    await c.create_stream("ws")
    await c.create_topic("ws", "t", 1)
    stream = await c.get_stream("ws")
    out("stream", topics=stream.topics_count)
    await c.send_messages("ws", "t", 0, [SendMessage(b"over ws"), SendMessage(b"x" * 70_000),
                                         SendMessage(b"y" * (2 << 20))])
    got = await c.poll_messages("ws", "t", consumer=Consumer.Single(1), polling_strategy=PollingStrategy.First(),
                                count=10, auto_commit=False, partition_id=0)
    out("poll", got=[[m.offset(), len(m.payload()), bytes(m.payload()[:7]).hex()] for m in got])


asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None))
sys.stdout.flush()
os._exit(0)  # the client's runtime threads would keep the process alive
