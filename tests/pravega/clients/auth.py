"""Real pravega 0.3.8 client against a controller with auth on: ``auth.py CONTROLLER_PORT MODE``.

The credentials come from the environment as the client reads them
(pravega_client_auth_method=Basic, pravega_client_auth_username/_password).
MODE ``ok``: create, write, read back through a reader group (delegation tokens
on every segment-store request). MODE ``refused``: create_scope must fail."""

import asyncio
import json
import os
import sys
import time

import pravega_client

PORT, MODE = int(sys.argv[1]), sys.argv[2]


def out(step, **kw):
    print(json.dumps({"step": step, **kw}), flush=True)


async def main():
    m = pravega_client.StreamManager(f"tcp://127.0.0.1:{PORT}", auth_enabled=os.environ.get("AUTH", "1") == "1")
    if MODE == "refused":
        try:
            m.create_scope("denied")
            out("create_scope", value=True)
        except Exception as exc:  # noqa: BLE001 - the test checks the error
            out("create_scope", error=type(exc).__name__, text=str(exc)[:300])
        return
    out("create_scope", value=m.create_scope("secure"))
    out("create_stream", value=m.create_stream("secure", "s", 2))
    w = m.create_writer("secure", "s")
    for i in range(10):
        w.write_event(f"a{i}", f"k{i}")
    w.flush()
    rg = m.create_reader_group("authrg", "secure", "s")
    r = rg.create_reader("r")
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        slice_ = await asyncio.wait_for(r.get_segment_slice_async(), 30)
        got.extend(bytes(e.data()).decode() for e in slice_)
        r.release_segment(slice_)
    out("read", got=sorted(got))
    r.reader_offline()


asyncio.run(main())
sys.stdout.flush()
os._exit(0)  # the Rust client's runtime can abort at interpreter teardown; the verdict is printed
