"""pravega 0.3.8, run in its own venv by tests/http/test_http_console_connections.py:
``hold_pravega.py CONTROLLER_PORT SCOPE STREAM COUNT``.

Creates SCOPE/STREAM (one segment), writes COUNT events, prints one JSON line, then
keeps its writer (and so its connections) open until stdin closes."""

import json
import os
import sys

import pravega_client


def main(port: int, scope: str, stream: str, count: int) -> None:
    m = pravega_client.StreamManager(f"tcp://127.0.0.1:{port}", auth_enabled=True)
    m.create_scope(scope)
    m.create_stream(scope, stream, 1)
    w = m.create_writer(scope, stream)
    events = [f"pravega event {i}" for i in range(count)]
    for e in events:
        w.write_event(e)
    w.flush()
    sys.stdout.write(json.dumps({"step": "ready", "sent": len(events), "sent_bytes": sum(len(e) for e in events)})
                     + "\n")
    sys.stdout.flush()
    sys.stdin.read()   # until the test closes stdin
    del w


main(int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]))
sys.stdout.flush()
os._exit(0)  # the client's Tokio runtime may panic at teardown; skip it
