"""Real pravega 0.3.8 half of the cross-protocol tests: ``cross.py CONTROLLER_PORT MODE [ARG]``.

MODE ``write [SCOPE]``: scope SCOPE (default "x"), stream "events" with 4 segments,
20 events "p<i>" with routing keys. MODE ``read N``: a new reader group on x/events
reads N events; prints them."""

import sys
import uuid

from pvcommon import manager, out, read_texts, run

PORT, MODE = int(sys.argv[1]), sys.argv[2]


async def main():
    m = manager(PORT)
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
    out("read", got=sorted(await read_texts(r, want)))
    r.reader_offline()


run(main)
