"""Real pravega 0.3.8 client: a reader group that reads part of a stream, for the console's Consumers view.

``console_readers.py CONTROLLER_PORT SCOPE STREAM WRITE READ``: creates the scope and a
one-segment stream, writes WRITE events ``e0``, ``e1``, ... (two bytes each), makes reader
group ``console-rg`` with one reader, takes READ events and releases the segment, then takes the
reader offline, which stores its position in the group's table (what the console shows).
"""

import asyncio
import sys

from pvcommon import STEP_TIMEOUT_S, manager, out, run

PORT, SCOPE, STREAM, WRITE, READ = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])


async def main():
    m = manager(PORT)
    m.create_scope(SCOPE)
    m.create_stream(SCOPE, STREAM, 1)
    w = m.create_writer(SCOPE, STREAM)
    for i in range(WRITE):
        w.write_event(f"e{i}")
    w.flush()
    rg = m.create_reader_group("console-rg", SCOPE, STREAM)
    r = rg.create_reader("reader-1")
    got = []
    while len(got) < READ:
        slice_ = await asyncio.wait_for(r.get_segment_slice_async(), STEP_TIMEOUT_S)
        for event in slice_:  # the slice remembers how far it was iterated
            got.append(bytes(event.data()).decode())
            if len(got) == READ:
                break
        r.release_segment(slice_)
    r.reader_offline()
    out("read", got=got)


run(main)
