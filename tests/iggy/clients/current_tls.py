"""apache-iggy 0.9.0 over TLS, run in its own venv: python current_tls.py PORT CA_FILE.

Prints one JSON line per step; the test compares them."""

import asyncio
import sys

from apache_iggy import Consumer, IggyClient, PollingStrategy, SendMessage, TcpConfig
from scenario import out


async def main(port: int, ca_file: str) -> None:
    c = IggyClient(TcpConfig(server_address=f"127.0.0.1:{port}", tls_enabled=True, tls_domain="localhost",
                             tls_ca_file=ca_file, tls_validate_certificate=True))
    await c.connect()
    await c.login_user("iggy", "iggy")
    out("login")
    await c.create_stream("tls")
    await c.create_topic("tls", "t", 1)
    await c.send_messages("tls", "t", 0, [SendMessage(b"over tls"), SendMessage(b"x" * 70_000)])
    got = await c.poll_messages("tls", "t", consumer=Consumer.Single(1), polling_strategy=PollingStrategy.First(),
                                count=10, auto_commit=False, partition_id=0)
    out("poll", got=[[m.offset(), len(m.payload()), bytes(m.payload()[:8]).hex()] for m in got])


asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
import os  # noqa: E402

os._exit(0)  # the client's runtime threads would keep the process alive
