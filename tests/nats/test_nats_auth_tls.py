"""nats-py against Ferry with nats-server's per-user permissions (auth_file, ``auth_mode =
"nats-server"``, the model ``ferry nats-server`` runs) and TLS (trustme certificates).
Ferry's own users and permissions under ``ferry serve``: test_nats_ferry_auth.py."""

from __future__ import annotations

import asyncio
import socket
import ssl

import nats
import pytest
import trustme
from nats.errors import TimeoutError as NatsTimeout

from ferry_harness import running_gateway

WAIT = 5  # seconds; only guards a hang

AUTH_CONF = """
authorization {
  users = [
    {user: alice, password: a1, permissions: {
        publish: {allow: ["orders.>", "_INBOX.>"], deny: ["orders.secret"]}
        subscribe: ["orders.*", "work.> workers", "_INBOX.>"]
    }}
    {user: bob, password: b2}
  ]
}
"""


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def settle(nc) -> None:
    """Make every SUB this client queued reach the server before we go on.

    nats-py's flush() writes its PING straight to the transport while a SUB
    from subscribe() still waits in the client's pending list for its flusher
    task, so the first PONG can come back before the server saw the SUB; a
    second flush's PING is written after it (nats/aio/client.py, _send_ping)."""
    await nc.flush()
    await nc.flush()


async def _until(predicate) -> None:
    while not predicate():
        await asyncio.sleep(0.01)


def _errors():
    seen: list[str] = []

    async def cb(e):
        seen.append(str(e).lower())
    return seen, cb


def test_per_user_permissions_refuse_without_closing(tmp_path):
    (tmp_path / "auth.conf").write_text(AUTH_CONF)
    with running_gateway(tmp_path, FERRY_NATS_AUTH_FILE=str(tmp_path / "auth.conf"),
                         FERRY_NATS_AUTH_MODE="nats-server") as gw:
        async def main():
            seen, cb = _errors()
            alice = await nats.connect(gw.url(), user="alice", password="a1", error_cb=cb, allow_reconnect=False)
            bob = await nats.connect(gw.url(), user="bob", password="b2")
            watch = await bob.subscribe(">")
            await settle(bob)
            await alice.publish("orders.secret", b"no")
            await alice.publish("billing.x", b"no")
            await alice.publish("orders.eu", b"yes")
            await alice.flush()
            assert (await watch.next_msg(WAIT)).subject == "orders.eu"   # the refused two never arrived
            denied = await alice.subscribe("billing.>")
            await alice.flush()
            queue_bad = await alice.subscribe("work.a", queue="others")
            queue_ok = await alice.subscribe("work.a", queue="workers")
            await settle(alice)
            await bob.publish("work.a", b"job")
            await bob.publish("billing.y", b"bill")
            assert (await queue_ok.next_msg(WAIT)).data == b"job"
            for sub in (denied, queue_bad):
                with pytest.raises(NatsTimeout):
                    await sub.next_msg(0.2)
            assert alice.is_connected
            await alice.flush()
            await asyncio.wait_for(_until(lambda: len(seen) >= 4), WAIT)
            assert 'permissions violation for publish to "orders.secret"' in " ".join(seen)
            assert 'permissions violation for publish to "billing.x"' in " ".join(seen)
            assert 'permissions violation for subscription to "billing.>"' in " ".join(seen)
            assert 'permissions violation for subscription to "work.a" using queue "others"' in " ".join(seen)
            with pytest.raises(Exception) as info:
                await nats.connect(gw.url(), user="alice", password="wrong", allow_reconnect=False)
            assert "authorization violation" in str(info.value).lower()
            await alice.close()
            await bob.close()
        run(main())
        raw = _raw(gw.ports["nats"], b'CONNECT {"verbose":false,"user":"alice","pass":"a1"}\r\n'
                                     b"PUB orders.secret 1\r\nx\r\nSUB billing 1\r\nSUB work.a other 2\r\nPING\r\n")
        assert raw.endswith(b"-ERR 'Permissions Violation for Publish to \"orders.secret\"'\r\n"
                            b"-ERR 'Permissions Violation for Subscription to \"billing\"'\r\n"
                            b"-ERR 'Permissions Violation for Subscription to \"work.a\" using queue \"other\"'\r\n"
                            b"PONG\r\n")


def _raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
        s.sendall(data)
        got = b""
        while not got.endswith(b"PONG\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        return got.split(b"\r\n", 1)[1]   # drop the INFO line


@pytest.fixture
def pki(tmp_path):
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    server.cert_chain_pems[0].write_to_path(str(tmp_path / "server.pem"))
    server.private_key_pem.write_to_path(str(tmp_path / "server.key"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    return ca


def _client_ctx(ca: trustme.CA, with_cert: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ca.configure_trust(ctx)
    if with_cert:
        ca.issue_cert("client@example.test").configure_cert(ctx)
    return ctx


def _tls_env(tmp_path, verify: bool) -> dict:
    env = {"FERRY_NATS_TLS_CERT": str(tmp_path / "server.pem"), "FERRY_NATS_TLS_KEY": str(tmp_path / "server.key")}
    if verify:
        env |= {"FERRY_NATS_TLS_CA": str(tmp_path / "ca.pem"), "FERRY_NATS_TLS_VERIFY": "true"}
    return env


def test_tls_info_first_then_upgrade(tmp_path, pki):
    with running_gateway(tmp_path, **_tls_env(tmp_path, verify=False)) as gw:
        with socket.create_connection(("127.0.0.1", gw.ports["nats"]), timeout=WAIT) as s:
            line = s.recv(4096)   # INFO arrives in clear text before any handshake
            assert line.startswith(b"INFO ") and b'"tls_required":true' in line and b"tls_verify" not in line

        async def main():
            nc = await nats.connect(gw.url("nats", "tls"), tls=_client_ctx(pki, False))
            sub = await nc.subscribe("t")
            await nc.publish("t", b"secret")
            assert (await sub.next_msg(WAIT)).data == b"secret"
            assert nc._server_info["tls_required"] is True
            await nc.close()
        run(main())


def test_tls_client_certificates_required_when_verify(tmp_path, pki):
    with running_gateway(tmp_path, **_tls_env(tmp_path, verify=True)) as gw:
        url = gw.url("nats", "tls")

        async def main():
            nc = await nats.connect(url, tls=_client_ctx(pki, True))
            assert nc._server_info["tls_verify"] is True
            await nc.publish("x", b"1")
            await nc.flush()
            await nc.close()
            # Without a client certificate the server aborts the handshake. Under TLS 1.3
            # the client may only notice on its first read, and nats-py's connect()
            # then returns without raising (an empty reply to its PING is not an
            # error there), so the refusal shows on the first use instead.
            try:
                bad = await nats.connect(url, tls=_client_ctx(pki, False), allow_reconnect=False,
                                         connect_timeout=2)
            except Exception:
                return
            with pytest.raises(Exception):
                await bad.flush(timeout=2)
            await bad.close()
        run(main())


def test_plaintext_client_on_tls_listener_is_closed_without_err(tmp_path, pki):
    with running_gateway(tmp_path, **_tls_env(tmp_path, verify=False)) as gw:
        with socket.create_connection(("127.0.0.1", gw.ports["nats"]), timeout=WAIT) as s:
            assert s.recv(4096).startswith(b"INFO ")
            s.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')   # not a ClientHello
            rest = b""
            while chunk := s.recv(4096):
                rest += chunk
            assert b"PONG" not in rest and b"-ERR" not in rest   # nats-server closes silently too


def test_wss_listener_with_its_own_certificate(tmp_path, pki):
    pytest.importorskip("aiohttp")
    env = {"FERRY_NATS_WS_TLS_CERT": str(tmp_path / "server.pem"),
           "FERRY_NATS_WS_TLS_KEY": str(tmp_path / "server.key")}
    with running_gateway(tmp_path, **env) as gw:
        async def main():
            nc = await nats.connect(gw.url("nats_ws", "wss"), tls=_client_ctx(pki, False))
            sub = await nc.subscribe("w")
            await nc.flush()
            await nc.flush()
            await nc.publish("w", b"over wss")
            assert (await sub.next_msg(WAIT)).data == b"over wss"
            await nc.close()
        run(main())


def test_tls_handshake_first_sends_info_inside_tls(tmp_path, pki):
    env = _tls_env(tmp_path, verify=False) | {"FERRY_NATS_TLS_HANDSHAKE_FIRST": "true"}
    with running_gateway(tmp_path, **env) as gw:
        async def main():
            nc = await nats.connect(gw.url("nats", "tls"), tls=_client_ctx(pki, False),
                                    tls_handshake_first=True)
            sub = await nc.subscribe("hf")
            await nc.flush()
            await nc.flush()
            await nc.publish("hf", b"first")
            assert (await sub.next_msg(WAIT)).data == b"first"
            await nc.close()
        run(main())
        with socket.create_connection(("127.0.0.1", gw.ports["nats"]), timeout=WAIT) as s:
            s.settimeout(0.3)
            with pytest.raises(socket.timeout):
                s.recv(4096)    # nothing in clear text: the server waits for the ClientHello


def test_no_auth_user_with_nats_py(tmp_path):
    (tmp_path / "auth.conf").write_text(AUTH_CONF + "\nno_auth_user: alice\n")
    with running_gateway(tmp_path, FERRY_NATS_AUTH_FILE=str(tmp_path / "auth.conf"),
                         FERRY_NATS_AUTH_MODE="nats-server") as gw:
        async def main():
            seen, cb = _errors()
            anon = await nats.connect(gw.url(), error_cb=cb)     # no credentials: alice's rights
            assert not anon._server_info.get("auth_required")
            bob = await nats.connect(gw.url(), user="bob", password="b2")
            watch = await bob.subscribe(">")
            await settle(bob)
            await anon.publish("billing.x", b"no")
            await anon.publish("orders.eu", b"yes")
            assert (await watch.next_msg(WAIT)).subject == "orders.eu"
            await anon.flush()     # the -ERR came before this PONG; nats-py reports it from a task
            await asyncio.wait_for(_until(lambda: seen), WAIT)
            assert 'permissions violation for publish to "billing.x"' in " ".join(seen)
            with pytest.raises(Exception) as info:
                await nats.connect(gw.url(), user="bob", password="wrong", allow_reconnect=False)
            assert "authorization violation" in str(info.value).lower()
            await anon.close()
            await bob.close()
        run(main())
