"""Real pravega 0.3.8 client: scopes, streams, writers with routing keys, a reader group.

Run by tests/pravega/test_pravega_real_client.py in the client's own venv:
``basic.py CONTROLLER_PORT``. Prints one JSON line per step (the test compares
them); a step that raises prints its exception type and text instead.
"""

import asyncio
import sys

from pvcommon import STEP_TIMEOUT_S, attempt, manager, out, read_texts, run

PORT = int(sys.argv[1])


async def main():
    m = manager(PORT)
    attempt("create_scope", m.create_scope, "sc1")
    attempt("create_scope_again", m.create_scope, "sc1")
    attempt("create_stream", m.create_stream, "sc1", "st1", 4)
    attempt("create_stream_again", m.create_stream, "sc1", "st1", 4)
    attempt("create_stream_missing_scope", m.create_stream, "nosuchscope", "st1", 1)
    attempt("create_scope_bad_name", m.create_scope, "bad scope!")
    attempt("create_stream_bad_name", m.create_stream, "sc1", "bad/stream", 1)

    w = m.create_writer("sc1", "st1")
    for i in range(40):  # blocking writes
        w.write_event(f"k{i % 5}:{i}", f"k{i % 5}")
    for i in range(40, 60):  # async writes, each awaited before the next: still in key order
        await asyncio.wait_for(w.write_event_async(f"k{i % 5}:{i}", f"k{i % 5}"), STEP_TIMEOUT_S)
    # Concurrent async writes: the binding spawns each as its own task, so the client itself
    # does not order them; checked for completeness only.
    futs = [w.write_event_async(f"z{i % 3}:{i}", f"z{i % 3}") for i in range(60, 80)]
    for f in futs:
        await asyncio.wait_for(f, STEP_TIMEOUT_S)
    w.write_event_bytes(b"k9:80", "k9")
    w.flush()
    out("written", value=81)

    rg = m.create_reader_group("rg1", "sc1", "st1")
    r = rg.create_reader("r1")
    got = await read_texts(r, 81)
    per_key = {}
    for e in got:
        k, i = e.split(":")
        per_key.setdefault(k, []).append(int(i))
    ordered = {k: v for k, v in per_key.items() if k.startswith("k")}
    out("read", count=len(got), ordered=all(v == sorted(v) for v in ordered.values()),
        keys=sorted(per_key), distinct=len(set(got)),
        unordered={k: v for k, v in ordered.items() if v != sorted(v)})
    r.reader_offline()

    out("list_scopes", value=sorted(s for s in m.list_scope() if not s.startswith("_")))
    out("list_streams", value=sorted(str(s) for s in m.list_stream("sc1")))
    attempt("delete_unsealed", m.delete_stream, "sc1", "st1")
    attempt("seal", m.seal_stream, "sc1", "st1")
    attempt("delete_sealed", m.delete_stream, "sc1", "st1")
    attempt("delete_scope", m.delete_scope, "sc1")


run(main)
