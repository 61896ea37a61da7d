"""Real pravega 0.3.8 writer across a gateway kill -9: ``killwrite.py CONTROLLER_PORT N``.

Writes N events (routing keys over 2 segments) in waves of 25 awaited acks,
printing ``{"step": "acked", "n": ...}`` after each wave; the test kills and
restarts the gateway meanwhile. The same writer object keeps going (the
client reconnects, re-runs SetupAppend and resends only what the server does
not hold). Then a reader group reads everything back: every event exactly once.
"""

import asyncio
import sys

from pvcommon import manager, out, read_texts, run

PORT, N = int(sys.argv[1]), int(sys.argv[2])
WAVE = 25


async def main():
    m = manager(PORT)
    m.create_scope("kill")
    m.create_stream("kill", "s", 2)
    w = m.create_writer("kill", "s")
    for start in range(0, N, WAVE):
        futs = [w.write_event_async(f"{i}", f"k{i % 7}") for i in range(start, min(N, start + WAVE))]
        for f in futs:
            await asyncio.wait_for(f, 120)
        out("acked", n=min(N, start + WAVE))
        await asyncio.sleep(0.02)
    w.flush()
    rg = m.create_reader_group("check", "kill", "s")
    r = rg.create_reader("c1")
    got = await read_texts(r, N, limit_s=60, decode=int)
    out("read", count=len(got), distinct=len(set(got)), missing=sorted(set(range(N)) - set(got))[:20])
    r.reader_offline()


run(main)
