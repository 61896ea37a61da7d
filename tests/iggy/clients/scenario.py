"""What the scenario scripts share: one JSON line per step, calls whose result may
or may not be awaitable (iggy-py 0.4.0 and apache-iggy 0.5.0/0.6.0 mix both), and
expected errors printed as the client's own text.

The scripts run in the real clients' venvs; Python puts a script's directory
first on ``sys.path``, so ``from scenario import ...`` finds this file there."""

import inspect
import json


def out(step, **kw):
    print(json.dumps({"step": step, **kw}), flush=True)


async def call(fn, *args, **kw):
    r = fn(*args, **kw)
    return await r if inspect.isawaitable(r) else r


async def expect_error(step, target, *args):
    """Run ``target`` (an awaitable, or a function and its arguments) and print the
    text of the ``RuntimeError`` it raises (every Iggy Python client's error type),
    or ``null`` when it succeeds."""
    try:
        if inspect.isawaitable(target):
            await target
        else:
            await call(target, *args)
    except RuntimeError as exc:
        out(step, error=str(exc))
    else:
        out(step, error=None)


async def logged_in(client_class, address, username="iggy", password="iggy"):
    """A connected client of ``client_class`` (each wheel's IggyClient), logged in."""
    client = client_class(address)
    await call(client.connect)
    await call(client.login_user, username, password)
    return client
