"""The Iggy TCP listener with TLS (``[listeners.iggy_tcp] tls_cert/tls_key``):
the real apache-iggy 0.9.0 client with ``tls_enabled`` and a CA it trusts, a
raw ssl socket speaking the 0.8 framing, and a plaintext client refused."""

from __future__ import annotations

import socket
import ssl
import struct

import pytest
import trustme
from ferry_harness import running_gateway
from iggy_clients import run_scenario

from adapters.iggy.codec import legacy_request
from adapters.iggy.spec import COMMANDS

WAIT_S = 30  # socket timeout: a hung server fails the test instead of blocking it


@pytest.fixture
def tls_gateway(tmp_path):
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    server.cert_chain_pems[0].write_to_path(str(tmp_path / "server.pem"))
    server.private_key_pem.write_to_path(str(tmp_path / "server.key"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    toml = f'[listeners.iggy_tcp]\ntls_cert = "{tmp_path / "server.pem"}"\ntls_key = "{tmp_path / "server.key"}"\n'
    with running_gateway(tmp_path, toml) as gw:
        yield gw, ca, tmp_path / "ca.pem"


def _frame(name: str, **values) -> bytes:
    cmd = COMMANDS.by_name[name]
    return legacy_request(cmd.code, cmd.encode(2, cmd.make(**values)))


def _reply(sock) -> tuple[int, bytes]:
    def exactly(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    status, length = struct.unpack("<II", exactly(8))
    return status, exactly(length)


def test_apache_iggy_0_9_0_over_tls(tls_gateway):
    gw, _ca, ca_file = tls_gateway
    got = run_scenario("apache-iggy==0.9.0", "current_tls.py", gw.ports["iggy_tcp"], str(ca_file))
    assert got == [{"step": "login"},
                   {"step": "poll", "got": [[0, 8, b"over tls".hex()], [1, 70_000, (b"x" * 8).hex()]]}]


def test_raw_tls_socket_speaks_the_legacy_framing(tls_gateway):
    gw, ca, _ca_file = tls_gateway
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ca.configure_trust(ctx)
    with socket.create_connection(("127.0.0.1", gw.ports["iggy_tcp"]), timeout=WAIT_S) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as s:
        s.sendall(legacy_request(1))
        assert _reply(s) == (0, b"")
        s.sendall(_frame("user.login", username="iggy", password="bad", version="0.10.0"))
        assert _reply(s)[0] == 42  # invalid credentials, the connection goes on
        s.sendall(_frame("user.login", username="iggy", password="iggy", version="0.10.0"))
        assert _reply(s) == (0, struct.pack("<I", 0))


def test_plaintext_client_on_a_tls_listener_is_closed(tls_gateway):
    gw, _ca, _ca_file = tls_gateway
    with socket.create_connection(("127.0.0.1", gw.ports["iggy_tcp"]), timeout=WAIT_S) as s:
        s.sendall(legacy_request(1))
        try:
            data = s.recv(100)
        except ConnectionResetError:
            data = b""
        assert not data.startswith(struct.pack("<II", 0, 0))  # never an Iggy reply in clear
