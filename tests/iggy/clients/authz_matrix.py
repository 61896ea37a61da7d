"""apache-iggy 0.9.0: one identity's read, write and manage on secret/payroll
(tests/gateway/test_authz_matrix.py).

python authz_matrix.py PORT TAG [USER PASSWORD]

Without USER the client does not log in. Prints one JSON line per step: the
client's error text (null when the call succeeded) and, for the read, the payloads."""

import asyncio
import os
import sys

from apache_iggy import Consumer, IggyClient, PollingStrategy, SendMessage
from scenario import out


async def step(name, coro, got=None):
    try:
        value = await coro
    except RuntimeError as exc:
        out(name, error=str(exc))
    else:
        out(name, error=None, **({"got": got(value)} if got else {}))


async def main(port: int, tag: str, user: str = "", password: str = "") -> None:
    c = IggyClient(f"127.0.0.1:{port}")
    await c.connect()
    if user:
        await step("login", c.login_user(user, password))
    await step("read", c.poll_messages("secret", "payroll", consumer=Consumer.Single(1),
                                       polling_strategy=PollingStrategy.Offset(0), count=100,
                                       auto_commit=False, partition_id=0),
               got=lambda msgs: [m.payload().decode() for m in msgs])
    await step("write", c.send_messages("secret", "payroll", 0, [SendMessage(f"from-{tag}")]))
    await step("manage", c.create_topic("secret", f"m-{tag}", 1))


asyncio.run(main(int(sys.argv[1]), *sys.argv[2:]))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
