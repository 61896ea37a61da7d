import trio

from http_helpers import TEST_LIMIT_S, client, gateway, login


async def test_ping_h1_and_h2(tmp_path):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port:
            for http2 in (False, True):
                async with client(port, http2=http2) as c:
                    r = await c.get("/ping")
                    assert r.status_code == 200 and r.text == "pong"
                    assert r.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
                    await login(c)
                    r = await c.get("/streams")
                    assert r.status_code == 200 and r.json() == []
