"""The page at / in a real browser: headless Chromium renders streams, topics and a posted message."""

from __future__ import annotations

import shutil

import pytest
import trio

from http_helpers import TEST_LIMIT_S, b64, client, gateway, login, make_topic

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install chromium)")
async def test_page_lists_streams_and_last_messages(tmp_path):
    with trio.fail_after(TEST_LIMIT_S * 2):
        async with gateway(tmp_path) as port, client(port) as c:
            token = await login(c)
            await make_topic(c, "orders", "eu")
            r = await c.post("/streams/orders/topics/eu/messages", json={"messages": [
                {"payload": b64("<b>hello from the browser test</b>"),
                 "headers": {"source": {"kind": "string", "value": b64("pytest")}}}]})
            assert r.status_code == 201
            page = (await c.get("/", headers={"accept": "text/html"}))
            assert page.headers["content-type"].startswith("text/html")
            assert "default-src 'none'" in page.headers["content-security-policy"]
            url = f"http://127.0.0.1:{port}/#token={token}&stream=orders&topic=eu"
            result = await trio.run_process(
                [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--user-data-dir={tmp_path / 'chromium'}", "--virtual-time-budget=10000", "--dump-dom", url],
                capture_stdout=True, capture_stderr=True, check=False)
    dom = result.stdout.decode(errors="replace")
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-2000:]
    assert "orders (1 messages)" in dom and "eu (1 partitions, 1 messages)" in dom
    assert "Messages of orders/eu" in dom
    # the payload is shown as text, escaped, never as markup
    assert "&lt;b&gt;hello from the browser test&lt;/b&gt;" in dom and "source=pytest" in dom
