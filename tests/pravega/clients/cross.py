"""Real pravega 0.3.8 half of the cross-protocol tests: ``cross.py CONTROLLER_PORT MODE [ARG]``.

MODE ``write [SCOPE]``: scope SCOPE (default "x"), stream "events" with 4 segments,
20 events "p<i>" with routing keys. MODE ``read N``: a new reader group on x/events
reads N events; prints them."""

import asyncio
import json
import os
import sys
import time
import uuid

import pravega_client

PORT, MODE = int(sys.argv[1]), sys.argv[2]


def out(step, **kw):
    print(json.dumps({"step": step, **kw}), flush=True)


async def main():
    m = pravega_client.StreamManager(f"tcp://127.0.0.1:{PORT}")
    if MODE == "write":
        scope = sys.argv[3] if len(sys.argv) > 3 else "x"
        m.create_scope(scope)
        m.create_stream(scope, "events", 4)
        w = m.create_writer(scope, "events")
        for i in range(20):
            w.write_event(f"p{i}", f"key{i}")
        w.flush()
        out("written", value=20)
        return
    want = int(sys.argv[3])
    rg = m.create_reader_group("rg" + uuid.uuid4().hex[:8], "x", "events")
    r = rg.create_reader("r")
    got = []
    deadline = time.monotonic() + 30
    while len(got) < want and time.monotonic() < deadline:
        slice_ = await asyncio.wait_for(r.get_segment_slice_async(), 30)
        got.extend(bytes(e.data()).decode() for e in slice_)
        r.release_segment(slice_)
    out("read", got=sorted(got))
    r.reader_offline()


asyncio.run(main())
sys.stdout.flush()
os._exit(0)  # the Rust client's runtime can abort at interpreter teardown; the verdict is printed
