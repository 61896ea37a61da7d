"""What the pravega 0.3.8 scenario scripts share (imported from the scripts' own folder).

The Rust client prints its logs to stdout, so scenario output is one JSON object
per line (``out``) and the tests keep only lines starting with ``{``.

Ferry's Pravega listeners require a Ferry user's credentials (docs/pravega.md,
"Authentication"): ``manager`` makes a client with auth enabled, which reads
``pravega_client_auth_method=Basic`` and the user name and password from the
environment (tests/support/pravega_clients.py passes the root user's unless a
test gives others); ``AUTH=0`` makes one without credentials.
"""

import asyncio
import json
import os
import sys
import time

STEP_TIMEOUT_S = 30  # per awaited step; the test also kills the whole script at its own limit


def manager(port, host="127.0.0.1"):
    """A StreamManager for the controller at ``host:port``, logged in (see the module docstring)."""
    import pravega_client

    return pravega_client.StreamManager(f"tcp://{host}:{port}", auth_enabled=os.environ.get("AUTH", "1") == "1")


def out(step, **kw):
    # One write for the line and its newline: the client's log threads write to the same
    # stdout, and print() would write them separately, letting a log line in between.
    sys.stdout.write(json.dumps({"step": step, **kw}) + "\n")
    sys.stdout.flush()


def attempt(step, fn, *args):
    """Call ``fn``; print its value, or the exception's type and text (the tests compare them)."""
    try:
        value = fn(*args)
    except Exception as exc:  # noqa: BLE001 - the test asserts on the error's type and text
        out(step, error=type(exc).__name__, text=str(exc)[:300])
        return None
    out(step, value=value if isinstance(value, (bool, int, str, list, type(None))) else repr(value)[:80])
    return value


async def read_texts(reader, want, limit_s=STEP_TIMEOUT_S, decode=lambda b: b.decode()):
    """Events of ``reader`` (decoded), whole slices at a time, until ``want`` of them or
    ``limit_s`` pass (then fewer: the caller asserts on what came)."""
    got = []
    deadline = time.monotonic() + limit_s
    while len(got) < want and (left := deadline - time.monotonic()) > 0:
        try:
            slice_ = await asyncio.wait_for(reader.get_segment_slice_async(), left)
        except asyncio.TimeoutError:
            break
        got.extend(decode(bytes(e.data())) for e in slice_)
        reader.release_segment(slice_)
    return got


def run(main):
    """Run ``main()`` and exit at once: the client's runtime can abort at interpreter
    teardown, after the verdict is printed."""
    asyncio.run(main())
    sys.stdout.flush()
    os._exit(0)
