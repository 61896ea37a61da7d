"""Cross-generation half, for any real client: python xgen.py PORT MODE.

The installed client is found by its distribution (iggy-py 0.4.0, apache-iggy
0.5.0-0.9.0). Topic x/t (1 partition) is partition 1 for the 1-based
generations (iggy-py 0.4.0, apache-iggy 0.5.0) and 0 for the others.
MODE ``setup``: create x/t.  ``send``: send "from-<client>" with headers where
the client can set them.  ``poll``: print every payload (and headers where the
client exposes them)."""

import asyncio
import importlib.metadata
import json
import os
import sys

try:
    import iggy_py as lib  # 0.4.0
    NAME = "iggy-py-0.4.0"
except ImportError:
    import apache_iggy as lib
    NAME = "apache-iggy-" + importlib.metadata.version("apache-iggy")

from scenario import call


async def main(port: int, mode: str) -> None:
    c = lib.IggyClient(f"127.0.0.1:{port}")
    await call(c.connect)
    await call(c.login_user, "iggy", "iggy")
    pid = 1 if NAME in ("iggy-py-0.4.0", "apache-iggy-0.5.0") else 0
    if mode == "setup":
        await call(c.create_stream, "x")
        await call(c.create_topic, "x", "t", 1)
    elif mode == "send":
        if NAME == "apache-iggy-0.9.0":
            msg = lib.SendMessage(f"from-{NAME}", user_headers={"gen": NAME, "n": 7, "ok": True, "f": 1.5})
        else:
            msg = lib.SendMessage(f"from-{NAME}")
        await call(c.send_messages, "x", "t", pid, [msg])
    else:
        if NAME == "apache-iggy-0.9.0":
            msgs = await c.poll_messages("x", "t", consumer=lib.Consumer.Single(9),
                                         polling_strategy=lib.PollingStrategy.First(), count=10,
                                         auto_commit=False, partition_id=0)
        else:
            msgs = await call(c.poll_messages, "x", "t", pid, lib.PollingStrategy.First(), 10, False)
        for m in msgs:
            headers = None
            if NAME == "apache-iggy-0.9.0" and m.user_headers() is not None:
                headers = {str(k): v for k, v in m.user_headers().to_scalar_dict().items()}
            print(json.dumps({"payload": bytes(m.payload()).decode(), "headers": headers}), flush=True)


asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
