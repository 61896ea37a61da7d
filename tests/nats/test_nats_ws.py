"""nats-py over WebSocket (ws://, aiohttp) against the nats_ws listener, mixed with TCP clients."""

from __future__ import annotations

import asyncio

import httpx
import nats
import pytest

from ferry_harness import running_gateway

WAIT = 5


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def refused(url: str, **options) -> Exception:
    """The error of a WebSocket connect whose login is refused. nats-py (2.x) leaves the
    failed connection's aiohttp session open; collected later, it logs "Unclosed client
    session" at ERROR inside whatever test runs then. Closed here."""
    nc = nats.NATS()
    try:
        await nc.connect(url, allow_reconnect=False, **options)
    except Exception as exc:  # noqa: BLE001 - the refusal is what the caller checks
        transport = nc._transport
        if transport is not None:
            transport.close()
            await transport.wait_closed()
        return exc
    await nc.close()
    raise AssertionError(f"the connection to {url} was accepted")


async def settle(nc) -> None:
    """Make every SUB this client queued reach the server before we go on.

    nats-py's flush() writes its PING straight to the transport while a SUB
    from subscribe() still waits in the client's pending list for its flusher
    task, so the first PONG can come back before the server saw the SUB; a
    second flush's PING is written after it (nats/aio/client.py, _send_ping)."""
    await nc.flush()
    await nc.flush()


def test_websocket_client_talks_to_tcp_clients(tmp_path):
    pytest.importorskip("aiohttp")
    with running_gateway(tmp_path) as gw:
        async def main():
            ws = await nats.connect(gw.url("nats_ws", "ws"), name="browserish")
            tcp = await nats.connect(gw.url())
            assert ws._server_info["headers"] is True and not ws._server_info.get("tls_required")
            from_tcp = await ws.subscribe("chat.>")
            await settle(ws)
            await tcp.publish("chat.room", b"hi ws", headers={"K": "v"})
            m = await from_tcp.next_msg(WAIT)
            assert (m.subject, m.data, m.headers) == ("chat.room", b"hi ws", {"K": "v"})

            async def echo(msg):
                await msg.respond(msg.data.upper())
            await ws.subscribe("svc.upper", cb=echo)
            await settle(ws)
            assert (await tcp.request("svc.upper", b"abc", timeout=WAIT)).data == b"ABC"
            big = bytes(range(256)) * 3000          # 768 KB: spans many WebSocket reads
            back = await tcp.subscribe("big")
            await settle(tcp)
            await ws.publish("big", big)
            assert (await back.next_msg(WAIT)).data == big
            connz = httpx.get(f"http://127.0.0.1:{gw.ports['nats_monitor']}/connz").json()
            assert {c.get("name"): c["type"] for c in connz["connections"]}["browserish"] == "websocket"
            await ws.close()
            await tcp.close()
        run(main())


def test_websocket_shares_the_nats_listener_auth(tmp_path):
    pytest.importorskip("aiohttp")
    with running_gateway(tmp_path) as gw:
        url = gw.url("nats_ws", "ws", login=False)
        user, password = gw.nats_credentials()

        async def main():
            nc = await nats.connect(url, user=user, password=password)   # a Ferry user, as over TCP
            assert nc._server_info["auth_required"] is True
            await nc.close()
            assert "authorization violation" in str(await refused(url, token="bad")).lower()
        run(main())


def test_websocket_alone_uses_defaults_and_the_monitor_still_sees_it(tmp_path, caplog):
    pytest.importorskip("aiohttp")
    with running_gateway(tmp_path, FERRY_NATS_ENABLED="false") as gw:
        assert "nats" not in gw.ports
        async def main():
            # still Ferry's users: no open door
            error = await refused(gw.url("nats_ws", "ws", login=False))
            assert "authorization violation" in str(error).lower()
            nc = await nats.connect(gw.url("nats_ws", "ws"), name="alone")
            assert nc._server_info.get("auth_required")
            await nc.flush()
            connz = httpx.get(f"http://127.0.0.1:{gw.ports['nats_monitor']}/connz").json()
            assert [c["name"] for c in connz["connections"]] == ["alone"]
            await nc.close()
        run(main())
    assert any("clients log in as Ferry users" in r.getMessage() for r in caplog.records)
