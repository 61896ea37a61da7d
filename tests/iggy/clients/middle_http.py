"""apache-iggy 0.7.0 / 0.8.0 over their HTTP transport: python middle_http.py PORT.

Those wheels reach HTTP through ``from_connection_string("iggy+http://user:pass@host:port")``
(0.5.0 has no connection strings and no HTTP; iggy-py 0.4.0 has no HTTP transport).
One JSON line per step; tests/http/test_http_current_client.py checks the numbering."""

import asyncio
import inspect
import os
import sys

from apache_iggy import IggyClient, PollingStrategy, SendMessage
from scenario import out


async def aw(value):
    return await value if inspect.isawaitable(value) else value


async def main(port: int) -> None:
    c = IggyClient.from_connection_string(f"iggy+http://iggy:iggy@127.0.0.1:{port}")
    await aw(c.connect())
    await aw(c.login_user("iggy", "iggy"))
    await aw(c.create_stream("orders"))
    s = await aw(c.get_stream("orders"))
    out("get_stream", id=s.id, name=s.name)
    await aw(c.create_topic("orders", "t", 2))
    t = await aw(c.get_topic("orders", "t"))
    out("get_topic", id=t.id, partitions=t.partitions_count)
    await aw(c.send_messages("orders", "t", 1, [SendMessage("hi"), SendMessage("there")]))
    msgs = await aw(c.poll_messages("orders", "t", 1, PollingStrategy.First(), 10, False))
    out("poll_p1", got=[[m.offset(), bytes(m.payload()).decode()] for m in msgs])
    msgs = await aw(c.poll_messages("orders", "t", 0, PollingStrategy.First(), 10, False))
    out("poll_p0", got=[m.offset() for m in msgs])


asyncio.run(main(int(sys.argv[1])))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
