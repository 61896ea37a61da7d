"""Transports: TLS with ALPN (trustme certificates), h2c upgrade, and the real curl binary."""

from __future__ import annotations

import json
import shutil
import ssl

import httpx
import pytest
import trio
import trustme

from http_helpers import TEST_LIMIT_S, b64, gateway, login, make_topic

M = "/streams/s1/topics/t1/messages"


@pytest.fixture
def tls_files(tmp_path):
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    pem = tmp_path / "server.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(pem))
    ca_pem = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_pem))
    return ca, pem, ca_pem


@pytest.mark.parametrize("http2", [False, True], ids=["alpn-http1.1", "alpn-h2"])
async def test_tls_alpn(tmp_path, tls_files, http2):
    ca, pem, _ = tls_files
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path, FERRY_HTTP_TLS_CERT=str(pem)) as port:
            async with httpx.AsyncClient(base_url=f"https://127.0.0.1:{port}", verify=ctx, http2=http2,
                                         timeout=20) as c:
                r = await c.get("/ping")
                assert r.status_code == 200 and r.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
                await login(c)
                await make_topic(c)
                r = await c.post(M, json={"messages": [{"payload": b64("secure")}]})
                assert r.status_code == 201
                r = await c.get(M)
                assert r.json()["messages"][0]["payload"] == b64("secure")


async def _curl(*args: str) -> tuple[int, str]:
    result = await trio.run_process(["curl", "-sS", "--max-time", "20", "-o", "-", "-w", "\n%{http_code} %{http_version}",
                                     *args], capture_stdout=True, capture_stderr=True, check=False)
    out = result.stdout.decode()
    body, _, tail = out.rpartition("\n")
    return body, tail


@pytest.mark.skipif(shutil.which("curl") is None, reason="the curl binary is not installed")
@pytest.mark.parametrize("mode,version", [("--http1.1", "1.1"), ("--http2", "2"),
                                         ("--http2-prior-knowledge", "2")], ids=["h1", "h2c-upgrade", "h2c-prior"])
async def test_curl_login_send_poll(tmp_path, mode, version):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port:
            base = f"http://127.0.0.1:{port}"
            json_hdr = ["-H", "content-type: application/json"]
            body, tail = await _curl(mode, *json_hdr, "-d", '{"username":"iggy","password":"iggy"}',
                                     f"{base}/users/login")
            assert tail == f"200 {version}", (body, tail)
            auth = ["-H", f"authorization: Bearer {json.loads(body)['access_token']['token']}"]
            body, tail = await _curl(mode, *json_hdr, *auth, "-d", '{"name":"s1"}', f"{base}/streams")
            assert tail.startswith("200"), body
            topic = ('{"name":"t1","partitions_count":1,"compression_algorithm":"none",'
                     '"message_expiry":0,"max_topic_size":0}')
            body, tail = await _curl(mode, *json_hdr, *auth, "-d", topic, f"{base}/streams/s1/topics")
            assert tail.startswith("200"), body
            src = [{"key": {"kind": "string", "value": b64("src")}, "value": {"kind": "string", "value": b64("curl")}}]
            msg = json.dumps({"partitioning": {"kind": "balanced", "value": ""},
                              "messages": [{"payload": b64("from curl"), "user_headers": src}]})
            body, tail = await _curl(mode, *json_hdr, *auth, "-d", msg, f"{base}{M}")
            assert tail == f"201 {version}", body
            assert json.loads(body)["confirmations"][0]["base_offset"] == 0
            body, tail = await _curl(mode, *auth, f"{base}{M}?kind=first&count=10")
            assert tail == f"200 {version}", body
            polled = json.loads(body)["messages"]
            assert polled[0]["payload"] == b64("from curl")
            assert polled[0]["user_headers"] == src


@pytest.mark.skipif(shutil.which("curl") is None, reason="the curl binary is not installed")
async def test_curl_h2c_upgrade_with_body(tmp_path):
    """curl --http2 upgrades a request that has a body too: the body arrives before the 101."""
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port:
            body, tail = await _curl("--http2", "-H", "content-type: application/json", "-d",
                                     '{"username":"iggy","password":"wrong"}',
                                     f"http://127.0.0.1:{port}/users/login")
            assert tail == "400 2" and json.loads(body)["id"] == 42


@pytest.mark.skipif(shutil.which("curl") is None, reason="the curl binary is not installed")
async def test_curl_tls_alpn_h2(tmp_path, tls_files):
    _, pem, ca_pem = tls_files
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path, FERRY_HTTP_TLS_CERT=str(pem)) as port:
            body, tail = await _curl("--http2", "--cacert", str(ca_pem), f"https://127.0.0.1:{port}/ping")
            assert (body, tail) == ("pong", "200 2")


async def _read_until_eof(stream: trio.SocketStream) -> bytes:
    data = b""
    while chunk := await stream.receive_some(4096):
        data += chunk
    return data


async def test_idle_keepalive_connection_is_closed(tmp_path):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path, FERRY_HTTP_IDLE_TIMEOUT_S="0.2") as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
            data = await _read_until_eof(stream)  # answered, then closed once idle
            assert data.startswith(b"HTTP/1.1 200") and data.endswith(b"pong")


async def test_slow_request_is_cut(tmp_path):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path, FERRY_HTTP_REQUEST_TIMEOUT_S="0.2") as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(b"POST /streams HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
            assert await _read_until_eof(stream) == b""  # never completed: closed without an answer


async def test_keep_alive_and_pipelining_on_one_socket(tmp_path):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            req = b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"
            await stream.send_all(req)
            data = b""
            while not data.endswith(b"pong"):
                data += await stream.receive_some(4096)
            await stream.send_all(req + req + b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            rest = await _read_until_eof(stream)
            assert rest.count(b"HTTP/1.1 200 ") == 3 and rest.endswith(b'{"status":"ok"}')
            assert rest.index(b"pong") < rest.rindex(b"pong") < rest.index(b"status")  # in order


async def test_plain_http_on_the_tls_port_is_dropped_and_serving_continues(tmp_path, tls_files):
    ca, pem, _ = tls_files
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path, FERRY_HTTP_TLS_CERT=str(pem)) as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
            assert b"pong" not in await _read_until_eof(stream)
            async with httpx.AsyncClient(base_url=f"https://127.0.0.1:{port}", verify=ctx) as c:
                assert (await c.get("/ping")).text == "pong"
            async with httpx.AsyncClient(base_url=f"https://127.0.0.1:{port}", verify=ctx) as c:
                r = await c.head("/streams/s/topics/t/messages/stream")
                assert r.status_code == 401  # HEAD is routed like GET, auth first
