"""One logged-in session of a legacy-framed client (iggy-py 0.4.0, apache-iggy
0.5.0-0.8.0), driven a call at a time while the test changes the user's
credentials: python legacy_session.py PORT USER PASSWORD.

Logs in and prints {"step": "login"}; then, for each line read from stdin, runs
that call and prints one JSON line: ``get_stream`` (stream "orders": its name,
or the client's error), ``create_stream`` (the error, or null) and
``login PASSWORD`` (a login again on the same connection)."""

import asyncio
import os
import sys

try:
    from iggy_py import IggyClient  # 0.4.0: ids chosen on create
    CREATE_ID = (6,)
except ImportError:
    import importlib.metadata

    from apache_iggy import IggyClient
    CREATE_ID = (6,) if importlib.metadata.version("apache-iggy") == "0.5.0" else ()

from scenario import call, expect_error, out


async def main(port: int, user: str, password: str) -> None:
    c = IggyClient(f"127.0.0.1:{port}")
    await call(c.connect)
    await call(c.login_user, user, password)
    out("login")
    for line in sys.stdin:
        step, *args = line.split()
        if step == "get_stream":
            try:
                stream = await call(c.get_stream, "orders")
            except RuntimeError as exc:
                out(step, error=str(exc))
            else:
                out(step, name=None if stream is None else stream.name)
        elif step == "create_stream":
            await expect_error(step, c.create_stream, "mine", *CREATE_ID)
        elif step == "login":
            await expect_error(step, c.login_user, user, args[0])
        else:
            out(step, error="unknown step")


asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3]))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
