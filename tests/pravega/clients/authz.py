"""Real pravega 0.3.8 client acting as some Ferry user, or none: ``authz.py PORT MODE SCOPE STREAM [TAG]``.

Credentials come from the environment as the client reads them (``AUTH=0``: a
client with auth disabled, which sends none). Every step prints its value or
its error (the tests compare them), so a refusal is an answer, not a crash.

MODE ``create``: create_scope, create_stream (1 segment).
MODE ``write``: write one event ``TAG`` and wait for its ack (``WRITE_LIMIT_S``).
MODE ``read``: a new reader group reads what the stream holds (``READ_LIMIT_S``).
MODE ``live``: write ``TAG-1`` and read it back through a reader group, print
``ready``, wait for a line on stdin (the test changes the user meanwhile), then
write ``TAG-2`` and read on with the same writer and reader.
"""

import asyncio
import sys
import uuid

from pvcommon import manager, out, read_texts, run

PORT, MODE, SCOPE, STREAM = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
TAG = sys.argv[5] if len(sys.argv) > 5 else "event"
# A refused request fails fast (PERMISSION_DENIED is final for the client); these bound the
# cases where the client keeps retrying in a background task instead of raising.
WRITE_LIMIT_S = 20
READ_LIMIT_S = 8
REFUSED_LIMIT_S = 8  # live mode's second write: refused by the segment store, the client retries unacked


def failed(step, exc):
    out(step, error=type(exc).__name__, text=str(exc)[:400])


def attempt(step, fn, *args):
    """Call ``fn``; print its value or its error. The client refuses some calls with a Rust
    panic (pyo3's PanicException, a BaseException), which is an answer here too."""
    try:
        value = fn(*args)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - the test checks the error
        failed(step, exc)
        return None
    out(step, value=value if isinstance(value, (bool, int, str, type(None))) else repr(value)[:80])
    return value


async def write(step, w, text, limit_s=WRITE_LIMIT_S):
    try:
        await asyncio.wait_for(w.write_event_async(text), limit_s)
    except asyncio.TimeoutError:
        out(step, error="Timeout", text=f"no ack within {limit_s} s")
        return False
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - the test checks the error (a panic too)
        failed(step, exc)
        return False
    out(step, value=True)
    return True


def reader(step, m):
    """A reader of a new reader group, or None after printing the error."""
    rg = attempt(step, m.create_reader_group, f"rg{uuid.uuid4().hex[:8]}", SCOPE, STREAM)
    if rg is None:
        return None
    return attempt(step + "_reader", rg.create_reader, "r1")


async def main():
    m = manager(PORT)
    if MODE == "create":
        attempt("create_scope", m.create_scope, SCOPE)
        attempt("create_stream", m.create_stream, SCOPE, STREAM, 1)
    elif MODE == "write":
        w = attempt("create_writer", m.create_writer, SCOPE, STREAM)
        if w is not None:
            await write("write", w, TAG)
    elif MODE == "read":
        r = reader("reader_group", m)
        if r is not None:
            out("read", got=await read_texts(r, 1000, limit_s=READ_LIMIT_S))
    elif MODE == "live":
        w = m.create_writer(SCOPE, STREAM)
        await write("write_1", w, f"{TAG}-1")
        r = reader("reader_group", m)
        out("read_1", got=await read_texts(r, 1, limit_s=30))
        out("ready")
        sys.stdin.readline()
        await write("write_2", w, f"{TAG}-2", REFUSED_LIMIT_S)
        try:
            out("read_2", got=await read_texts(r, 1, limit_s=READ_LIMIT_S))
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - a refused read may surface as a panic
            failed("read_2", exc)


run(main)
