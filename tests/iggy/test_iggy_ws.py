"""Iggy over WebSocket (``iggy_ws``, adapters/iggy/ws.py + ws_driver.py).

Sans-I/O framing checks; the driver in process with trio-websocket's own
client (legacy and VSR frames, bad frames closed with their RFC 6455 code and
no traceback, the size cap); the real apache-iggy 0.9.0 client over
``iggy+ws://`` and ``wss://``; a message sent over WebSocket polled over TCP
and delivered to a nats-py subscriber; /metrics."""

from __future__ import annotations

import asyncio
import logging
import struct

import httpx
import nats
import pytest
import trio
import trustme
from ferry_harness import running_gateway
from iggy_clients import run_scenario
from trio_websocket import ConnectionClosed, open_websocket_url

from adapters.iggy import ws_driver
from adapters.iggy.codec import (
    legacy_reply,
    legacy_request,
    parse_vsr_reply,
    vsr_eviction,
    vsr_request,
)
from adapters.iggy.replies import LOGIN_REPLY
from adapters.iggy.spec import COMMANDS
from adapters.iggy.ws import (
    CLOSE_MESSAGE_TOO_BIG,
    CLOSE_PROTOCOL_ERROR,
    CLOSE_UNSUPPORTED_DATA,
    IggyWsFraming,
    WsError,
    frame_header,
)
from core.metrics import metrics_for

LIMIT_S = 30  # hard per-test limit, not a timing assertion
CLIENT = "apache-iggy==0.9.0"
ORDERS = '[[binding]]\nstream = "orders"\ntopic = "eu"\ncreate = true\npartitions = 1\n'


def frame(command: str, /, dialect: int = 2, **values) -> bytes:
    cmd = COMMANDS.by_name[command]
    body = cmd.encode(dialect, cmd.make(**values))
    if dialect != 3:
        return legacy_request(cmd.code, body)
    return vsr_request(cmd.vsr_op, body, code=cmd.code if cmd.vsr_op == 2 else 0)


# -- sans-I/O: one request per binary message ----------------------------------------------

PING = legacy_request(1)
VSR_PING = frame("system.ping", 3)
BAD_MESSAGES = [
    ("text", "hello", CLOSE_UNSUPPORTED_DATA),
    ("empty", b"", CLOSE_PROTOCOL_ERROR),
    ("shorter than 8", b"\x04\0\0\0\x01", CLOSE_PROTOCOL_ERROR),
    ("two frames", PING + PING, CLOSE_PROTOCOL_ERROR),
    ("half a frame", legacy_request(1, b"abcd")[:-2], CLOSE_PROTOCOL_ERROR),
    ("vsr shorter than a header", bytes(100), CLOSE_PROTOCOL_ERROR),
    ("vsr size past the message", VSR_PING[:-1] if len(VSR_PING) > 256 else VSR_PING + b"x", CLOSE_PROTOCOL_ERROR),
]


@pytest.mark.parametrize("name,message,code", BAD_MESSAGES, ids=[b[0] for b in BAD_MESSAGES])
def test_bad_messages_raise_their_close_code(name, message, code):
    with pytest.raises(WsError) as err:
        IggyWsFraming().request(message)
    assert err.value.close_code == code


def test_first_message_picks_the_framing_for_the_rest():
    legacy = IggyWsFraming()
    assert legacy.request(PING) == PING and legacy.legacy is True
    vsr = IggyWsFraming()
    assert vsr.request(VSR_PING) == VSR_PING and vsr.legacy is False
    with pytest.raises(WsError):  # a legacy-framed connection stays legacy
        legacy.request(VSR_PING)


def test_replies_are_cut_one_frame_per_message():
    legacy = IggyWsFraming()
    legacy.request(PING)
    a, b = legacy_reply(0), legacy_reply(0, b"body")
    assert legacy.replies(a + b) == [a, b]
    assert legacy.replies(a) == [a]
    assert legacy.replies(a + b"\0") == [a + b"\0"]  # does not tile: one message, nothing lost
    assert legacy.replies(b"") == []
    vsr = IggyWsFraming()
    vsr.request(VSR_PING)
    e1, e2 = vsr_eviction(bytes(16), 9), vsr_eviction(bytes(16), 3)
    assert vsr.replies(e1 + e2) == [e1, e2]


@pytest.mark.parametrize("size", [0, 1, 125, 126, 65535, 65536, 180_000])
def test_frame_header_is_what_wsproto_writes(size):
    from wsproto.connection import Connection, ConnectionType
    from wsproto.events import BytesMessage
    payload = bytes(size)
    assert frame_header(size) + payload == Connection(ConnectionType.SERVER).send(BytesMessage(data=payload))


# -- the driver in process, trio-websocket's client ---------------------------------------

@pytest.fixture
async def ws_url(broker, nursery):
    port = await nursery.start(ws_driver.serve_iggy_ws, broker, "127.0.0.1", 0, nursery)
    return f"ws://127.0.0.1:{port}/"


async def _legacy_reply(ws) -> tuple[int, bytes]:
    message = await ws.get_message()
    status, length = struct.unpack_from("<II", message)
    assert len(message) == 8 + length  # one reply per message
    return status, message[8:]


async def test_legacy_framing_over_ws(ws_url):
    with trio.fail_after(LIMIT_S):
        async with open_websocket_url(ws_url) as ws:
            await ws.send_message(PING)
            assert await _legacy_reply(ws) == (0, b"")
            await ws.send_message(frame("user.login", username="iggy", password="bad", version="0.10.0"))
            assert (await _legacy_reply(ws))[0] == 42  # an Iggy error reply; the connection goes on
            await ws.send_message(frame("user.login", username="iggy", password="iggy", version="0.10.0"))
            assert await _legacy_reply(ws) == (0, struct.pack("<I", 0))
            await ws.send_message(frame("stream.create", name="s"))
            assert (await _legacy_reply(ws))[0] == 0
            await ws.send_message(frame("client.me"))
            status, body = await _legacy_reply(ws)
            assert status == 0 and body[8] == ws_driver.TRANSPORT_WEBSOCKET  # client_id, user_id, transport
            await ws.ping()  # answered by the WebSocket layer


async def test_replies_through_send_message_where_the_fast_path_is_missing(ws_url, monkeypatch):
    plain_init = ws_driver.IggyWsStream.__init__

    def without_fast_path(self, ws, metrics):
        plain_init(self, ws, metrics)
        self._raw = None  # as with a trio-websocket without the internals the fast path uses

    monkeypatch.setattr(ws_driver.IggyWsStream, "__init__", without_fast_path)
    with trio.fail_after(LIMIT_S):
        async with open_websocket_url(ws_url) as ws:
            await ws.send_message(PING)
            assert await _legacy_reply(ws) == (0, b"")
            await ws.send_message(frame("user.login", username="iggy", password="iggy", version="0.10.0"))
            assert await _legacy_reply(ws) == (0, struct.pack("<I", 0))


async def test_vsr_login_over_ws(ws_url):
    with trio.fail_after(LIMIT_S):
        async with open_websocket_url(ws_url) as ws:
            await ws.send_message(frame("user.login_register", 3, protocol_version=0x2C00, sdk_name="t",
                                        sdk_version="0.11.0", username="iggy", password="iggy"))
            _op, status, body = parse_vsr_reply(await ws.get_message())
            assert status == 0 and LOGIN_REPLY.decode(3, body[4:]).session != 0


@pytest.mark.parametrize("name,message,code", [BAD_MESSAGES[0], BAD_MESSAGES[3], BAD_MESSAGES[4]],
                         ids=["text", "two frames", "half a frame"])
async def test_bad_frames_close_with_their_code_and_no_traceback(ws_url, broker, caplog, name, message, code):
    with trio.fail_after(LIMIT_S):
        async with open_websocket_url(ws_url) as ws:
            await ws.send_message(PING)
            assert await _legacy_reply(ws) == (0, b"")
            await ws.send_message(message)
            with pytest.raises(ConnectionClosed) as closed:
                await ws.get_message()
            assert closed.value.reason.code == code
        async with open_websocket_url(ws_url) as other:  # the listener keeps serving
            await other.send_message(PING)
            assert await _legacy_reply(other) == (0, b"")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert f'ferry_iggy_ws_protocol_closes_total{{code="{code}"}} 1' in metrics_for(broker).render()


async def test_oversize_message_closes_1009(broker, nursery, monkeypatch, caplog):
    monkeypatch.setattr(ws_driver, "WS_MAX_MESSAGE", 64 * 1024)  # the real cap is codec.MAX_FRAME
    port = await nursery.start(ws_driver.serve_iggy_ws, broker, "127.0.0.1", 0, nursery)
    with trio.fail_after(LIMIT_S):
        async with open_websocket_url(f"ws://127.0.0.1:{port}/") as ws:
            await ws.send_message(legacy_request(1, bytes(100 * 1024)))
            with pytest.raises(ConnectionClosed) as closed:
                await ws.get_message()
            assert closed.value.reason.code == CLOSE_MESSAGE_TOO_BIG
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


# -- real clients through a whole gateway --------------------------------------------------

def _steps(lines: list[dict]) -> dict:
    return {line["step"]: line for line in lines}


def test_apache_iggy_over_ws_and_metrics(tmp_path):
    with running_gateway(tmp_path) as gw:
        got = _steps(run_scenario(CLIENT, "current_ws.py", gw.ports["iggy_ws"], "basic"))
        metrics = httpx.get(f"http://127.0.0.1:{gw.ports['http']}/metrics", timeout=LIMIT_S).text
    assert got["stream"]["topics"] == 1
    assert got["poll"]["got"] == [[0, 7, b"over ws".hex()], [1, 70_000, (b"x" * 7).hex()],
                                  [2, 2 << 20, (b"y" * 7).hex()]]
    lines = set(metrics.splitlines())
    assert 'ferry_connections_total{listener="iggy_ws"} 1' in lines
    assert 'ferry_connections_open{listener="iggy_ws"} 0' in lines
    assert 'ferry_messages_in_total{listener="iggy_ws"} 3' in lines
    assert 'ferry_messages_out_total{listener="iggy_ws"} 3' in lines
    assert any(line.startswith('ferry_iggy_ws_messages_total{direction="in"} ') for line in lines)


def test_apache_iggy_over_wss(tmp_path):
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1", "::1")
    server.cert_chain_pems[0].write_to_path(str(tmp_path / "server.pem"))
    server.private_key_pem.write_to_path(str(tmp_path / "server.key"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    toml = f'[listeners.iggy_ws]\ntls_cert = "{tmp_path / "server.pem"}"\ntls_key = "{tmp_path / "server.key"}"\n'
    with running_gateway(tmp_path, toml) as gw:
        got = _steps(run_scenario(CLIENT, "current_ws.py", gw.ports["iggy_ws"], "basic", str(tmp_path / "ca.pem")))
    assert got["poll"]["got"][0] == [0, 7, b"over ws".hex()] and len(got["poll"]["got"]) == 3


def test_ws_send_is_polled_over_tcp_and_reaches_nats(tmp_path):
    with running_gateway(tmp_path, ORDERS) as gw:
        async def main():
            nc = await nats.connect(gw.url())
            sub = await nc.subscribe("orders.eu")
            await nc.flush()
            sent = await asyncio.to_thread(run_scenario, CLIENT, "current_ws.py", gw.ports["iggy_ws"], "send")
            msg = await sub.next_msg(LIMIT_S)
            await nc.close()
            return sent, msg

        sent, msg = asyncio.run(main())
        polled = run_scenario(CLIENT, "current_cross.py", gw.ports["iggy_tcp"], "poll")
    assert [s["step"] for s in sent] == ["login", "sent"]
    assert msg.subject == "orders.eu" and msg.data == b"from-ws" and msg.headers["trace"] == "ws"
    assert [p["payload"] for p in polled] == ["from-ws"] and polled[0]["headers"]["trace"] == "ws"
