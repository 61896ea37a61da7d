"""A user without grants, for the legacy-framed clients (iggy-py 0.4.0, apache-iggy
0.5.0-0.8.0): python unauthorized.py PORT USER PASSWORD.

The test creates the user and stream "orders" first. Prints one JSON line per
step: the error text of each refused call, as the client raises it."""

import asyncio
import os
import sys

try:
    from iggy_py import IggyClient, PollingStrategy, SendMessage  # 0.4.0: 1-based, ids on create
    FIRST = 1
except ImportError:
    import importlib.metadata

    from apache_iggy import IggyClient, PollingStrategy, SendMessage
    FIRST = 1 if importlib.metadata.version("apache-iggy") == "0.5.0" else 0

from scenario import call, expect_error


async def main(port: int, user: str, password: str) -> None:
    c = IggyClient(f"127.0.0.1:{port}")
    await call(c.connect)
    await call(c.login_user, user, password)
    await expect_error("create_stream", c.create_stream, "mine", *((FIRST + 5,) if FIRST else ()))
    await expect_error("get_stream", c.get_stream, "orders")
    await expect_error("send", c.send_messages, "orders", "t", FIRST, [SendMessage("x")])
    await expect_error("poll", c.poll_messages, "orders", "t", FIRST, PollingStrategy.First(), 1, False)


asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3]))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
