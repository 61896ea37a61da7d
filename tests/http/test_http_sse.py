"""GET .../messages/stream (server-sent events) with real clients: httpx and curl -N.

Issue 28: the driver queued the response head and sent nothing until the first body
chunk, so a client following an empty topic waited for its headers until the first
message or the first 15 s keep-alive. Here the heartbeat is pushed past the test's hang
guard: the head can only reach the client because it is flushed at once, and the first
body bytes must be the event appended after the client got its headers (no keep-alive
before it). HTTP/1.1 (chunked) and HTTP/2 (h2c prior knowledge; the h2c upgrade goes
through the same driver code), both with httpx and with the curl binary. Catch-up,
live delivery, Last-Event-ID and HEAD are test_http_live.py's.
"""

from __future__ import annotations

import shutil
import subprocess

import httpx
import pytest
import trio

import adapters.http.routes_messages as routes_messages
from http_helpers import TEST_LIMIT_S, b64, client, gateway, login, make_topic

M = "/streams/s1/topics/t1/messages"
FOLLOW = M + "/stream?partition_id=0&kind=first"


@pytest.fixture(autouse=True)
def no_heartbeat(monkeypatch):
    # Far past TEST_LIMIT_S: a head held back until the first chunk would never arrive
    # in time, so the test fails on the hang guard instead of passing late.
    monkeypatch.setattr(routes_messages, "SSE_HEARTBEAT_S", 3600.0)


async def _send(port: int, token: str, text: str) -> None:
    async with client(port) as c:
        c.headers["authorization"] = f"Bearer {token}"
        r = await c.post(M, json={"partitioning": {"kind": "balanced", "value": ""},
                                  "messages": [{"payload": b64(text)}]})
        assert r.status_code == 201, r.text


@pytest.mark.parametrize("http2", [False, True], ids=["http1.1", "h2c"])
async def test_httpx_gets_the_head_of_an_idle_follow_at_once(tmp_path, http2):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port, http2=http2) as c:
            token = await login(c)
            await make_topic(c)
            async with c.stream("GET", FOLLOW) as events:  # returns once the head is in
                assert events.status_code == 200
                assert events.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
                assert events.headers["content-type"] == "text/event-stream"
                if not http2:
                    assert events.headers["transfer-encoding"] == "chunked"
                await _send(port, token, "after the head")
                lines = events.aiter_lines()
                assert await anext(lines) == "id: 0"  # the event itself, nothing before it
                assert await anext(lines) == "event: message"
                data = await anext(lines)
                assert data.startswith("data: {") and b64("after the head") in data


async def _read_until(proc: trio.Process, buf: bytearray, marker: bytes) -> bytes:
    """Read curl's stdout until ``marker``; what came before it (and the marker)."""
    while marker not in buf:
        chunk = await proc.stdout.receive_some(65536)
        assert chunk, f"curl ended before {marker!r}: {bytes(buf)!r}"
        buf += chunk
    end = buf.index(marker) + len(marker)
    head = bytes(buf[:end])
    del buf[:end]
    return head


@pytest.mark.skipif(shutil.which("curl") is None, reason="the curl binary is not installed")
@pytest.mark.parametrize("mode,status_line", [("--http1.1", b"HTTP/1.1 200"), ("--http2-prior-knowledge", b"HTTP/2 200")],
                         ids=["h1", "h2c-prior"])
async def test_curl_no_buffer_prints_the_head_of_an_idle_follow_at_once(tmp_path, mode, status_line):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port) as c:
            token = await login(c)
            await make_topic(c)
            # -D - dumps the head to stdout as it arrives; -N turns off curl's output buffer
            proc = await trio.lowlevel.open_process(
                ["curl", "-sS", "-N", "-D", "-", mode, "-H", f"authorization: Bearer {token}",
                 f"http://127.0.0.1:{port}{FOLLOW}"], stdout=subprocess.PIPE)
            try:
                buf = bytearray()
                head = await _read_until(proc, buf, b"\r\n\r\n")  # the head alone: the topic is empty
                assert head.startswith(status_line), head
                assert b"content-type: text/event-stream" in head.lower()
                assert not buf, f"body bytes before any message: {bytes(buf)!r}"
                await _send(port, token, "curl follows")
                event = await _read_until(proc, buf, b"\n\n")
                assert event.startswith(b"id: 0\nevent: message\ndata: {"), event
                assert b64("curl follows").encode() in event
            finally:
                proc.kill()
                await proc.wait()
