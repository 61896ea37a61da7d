"""Real pravega 0.3.8 client against a controller with auth on: ``auth.py CONTROLLER_PORT MODE``.

The credentials come from the environment as the client reads them
(pravega_client_auth_method=Basic, pravega_client_auth_username/_password).
MODE ``ok``: create, write, read back through a reader group (delegation tokens
on every segment-store request). MODE ``refused``: create_scope must fail."""

import sys

from pvcommon import manager, out, read_texts, run

PORT, MODE = int(sys.argv[1]), sys.argv[2]


async def main():
    m = manager(PORT)
    if MODE == "refused":
        try:
            m.create_scope("denied")
            out("create_scope", value=True)
        except Exception as exc:  # noqa: BLE001 - the test checks the error
            out("create_scope", error=type(exc).__name__, text=str(exc)[:300])
        return
    out("create_scope", value=m.create_scope("secure"))
    out("create_stream", value=m.create_stream("secure", "s", 2))
    w = m.create_writer("secure", "s")
    for i in range(10):
        w.write_event(f"a{i}", f"k{i}")
    w.flush()
    rg = m.create_reader_group("authrg", "secure", "s")
    r = rg.create_reader("r")
    out("read", got=sorted(await read_texts(r, 10)))
    r.reader_offline()


run(main)
