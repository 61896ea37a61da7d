"""POST /snapshot and DELETE .../partitions/{partition_id}?segments_count=N through httpx."""

from __future__ import annotations

import io
import json
import logging
import re
import zipfile

import pytest
import trio

from http_helpers import TEST_LIMIT_S, b64, client, gateway, login, make_topic, partition_value

ROOT_PASSWORD = "http-root-pw-7"
JWT_SECRET = "jwt-secret-not-to-leak-0123456789abcdef"
ENV = {"FERRY_AUTH_ROOT_PASSWORD": ROOT_PASSWORD, "FERRY_HTTP_JWT_SECRET": JWT_SECRET,
       "FERRY_LOG_SEGMENT_BYTES": "400"}  # a few records per segment
CREDS = {"username": "iggy", "password": ROOT_PASSWORD}


async def fill(c, n: int = 12) -> None:
    await make_topic(c, partitions=2)
    for i in range(n):  # one send each: its own batch, so segments roll
        r = await c.post("/streams/s1/topics/t1/messages", json={
            "partitioning": {"kind": "partition_id", "value": partition_value(0)},
            "messages": [{"payload": b64(f"m{i:02d}".ljust(40, "."))}]})
        assert r.status_code == 201, r.text


async def partition_0(c) -> dict:
    return (await c.get("/streams/s1/topics/t1")).json()["partitions"][0]


async def offsets(c, start: int = 0) -> list[int]:
    r = await c.get("/streams/s1/topics/t1/messages",
                    params={"partition_id": 0, "kind": "offset", "value": start, "count": 100})
    assert r.status_code == 200, r.text
    return [m["header"]["offset"] for m in r.json()["messages"]]


async def user_client(c, port, name: str, permissions, http2: bool = False):
    """A new user with ``permissions`` and a client logged in as it (the caller closes it)."""
    r = await c.post("/users", json={"username": name, "password": "secret1", "status": "active",
                                     "permissions": permissions})
    assert r.status_code == 200, r.text
    other = client(port, http2=http2)
    await login(other, {"username": name, "password": "secret1"})
    return other


@pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])
async def test_snapshot_is_a_zip_attachment_with_the_requested_files(tmp_path, http2):
    marker = logging.getLogger("ferry.test.snapshot")
    marker.setLevel(logging.INFO)
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path, **ENV) as port, client(port, http2=http2) as c:
            await login(c, CREDS)
            await fill(c)
            marker.warning("before the snapshot", extra={"probe": 42})
            r = await c.post("/snapshot", json={"snapshot_types": ["All"], "compression": "Deflated"})
            assert r.status_code == 200, r.text
            assert r.headers["content-type"] == "application/zip"
            assert re.fullmatch(r'attachment; filename="iggy_snapshot_\d{8}_\d{6}\.zip"',
                                r.headers["content-disposition"])
            zf = zipfile.ZipFile(io.BytesIO(r.content))
            assert sorted(zf.namelist()) == ["filesystem_overview.txt", "process_list.txt",
                                             "resource_usage.txt", "server_config.txt", "server_logs.txt"]
            overview = zf.read("filesystem_overview.txt").decode()
            segments = sorted((tmp_path / "data" / "streams" / "0" / "topics" / "0" / "partitions" / "0").glob("*.log"))
            assert len(segments) >= 3
            for seg in segments:
                assert f"streams/0/topics/0/partitions/0/{seg.name}" in overview
            config_text = zf.read("server_config.txt").decode()
            assert ROOT_PASSWORD not in config_text and JWT_SECRET not in config_text
            config = json.loads(config_text.split("\n", 1)[1])
            assert config["listeners"]["http"]["jwt_secret"] == "<redacted>"
            assert config["listeners"]["http"]["port"] == 0 and config["log"]["segment_bytes"] == 400
            logs = zf.read("server_logs.txt").decode()
            assert any("before the snapshot" in line and "probe=42" in line for line in logs.splitlines())
            usage = json.loads(zf.read("resource_usage.txt"))
            assert usage["broker"]["messages"] == 12 and usage["broker"]["partitions"] == 2
            r = await c.post("/snapshot", json={"snapshot_types": ["Test"], "compression": "Stored"})
            zf = zipfile.ZipFile(io.BytesIO(r.content))
            assert zf.read("test.txt") == b"test\n" and zf.infolist()[0].compress_type == zipfile.ZIP_STORED


async def test_snapshot_errors(tmp_path):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path, **ENV) as port, client(port) as c:
            r = await c.post("/snapshot", json={"snapshot_types": ["Test"], "compression": "Stored"})
            assert r.status_code == 401 and r.content == b""
            await login(c, CREDS)
            for body, status, iggy_id, field in [
                (b"{not json", 400, 4, "body"),
                (b"[]", 400, 4, "body"),
                ({"snapshot_types": ["Test"]}, 400, 4, "compression"),
                ({"snapshot_types": ["Test"], "compression": "deflated"}, 400, 4, "compression"),
                ({"compression": "Stored"}, 400, 4, "snapshot_types"),
                ({"snapshot_types": ["Test", "Bogus"], "compression": "Stored"}, 400, 4, "snapshot_types[1]"),
                ({"snapshot_types": ["All", "Test"], "compression": "Stored"}, 400, 3, "snapshot_types"),
                ({"snapshot_types": ["Test"], "compression": "Zstd"}, 400, 3, "compression"),
                ({"snapshot_types": ["Test"], "compression": "Xz"}, 400, 3, "compression"),
            ]:
                kw = {"content": body} if isinstance(body, bytes) else {"json": body}
                r = await c.post("/snapshot", **kw)
                assert (r.status_code, r.json()["id"], r.json()["field"]) == (status, iggy_id, field), body
            bob = await user_client(c, port, "bob", {"global": {"read_streams": True}})
            reader = await user_client(c, port, "reader", {"global": {"read_servers": True}})
            try:
                r = await bob.post("/snapshot", json={"snapshot_types": ["Test"], "compression": "Stored"})
                assert (r.status_code, r.json()["id"]) == (403, 41)
                r = await reader.post("/snapshot", json={"snapshot_types": ["Test"], "compression": "Stored"})
                assert r.status_code == 200 and r.content[:2] == b"PK"
            finally:
                await bob.aclose()
                await reader.aclose()


async def test_delete_segments(tmp_path):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path, **ENV) as port, client(port) as c:
            await login(c, CREDS)
            await fill(c)
            before = await partition_0(c)
            assert before["segments_count"] >= 4 and before["messages_count"] == 12
            path = "/streams/s1/topics/t1/partitions/0"
            r = await c.delete(path, params={"segments_count": 2})
            assert r.status_code == 204 and r.content == b""
            after = await partition_0(c)
            assert after["segments_count"] == before["segments_count"] - 2
            got = await offsets(c)
            first = got[0]
            assert first > 0 and got == list(range(first, 12))  # a poll below the first starts there
            assert after["messages_count"] == 12 - first and after["current_offset"] == 11
            assert await offsets(c, first + 2) == list(range(first + 2, 12))
            r = await c.delete("/streams/0/topics/0/partitions/0", params={"segments_count": 1000})
            assert r.status_code == 204
            assert (await partition_0(c))["segments_count"] == 1  # the active one stays
            assert (await offsets(c))[-1] == 11
            for target, params, status, iggy_id, field in [
                (path, {}, 400, 4, "segments_count"),
                (path, {"segments_count": "x"}, 400, 4, "segments_count"),
                ("/streams/s1/topics/t1/partitions/9", {"segments_count": 1}, 404, 3007, "partition_id"),
                ("/streams/s1/topics/t1/partitions/2", {"segments_count": 1}, 404, 3007, "partition_id"),
                ("/streams/s1/topics/t1/partitions/p", {"segments_count": 1}, 400, 4, "partition_id"),
                ("/streams/s1/topics/9/partitions/0", {"segments_count": 1}, 404, 2010, "topic_id"),
                ("/streams/9/topics/t1/partitions/0", {"segments_count": 1}, 404, 1009, "stream_id"),
            ]:
                r = await c.delete(target, params=params)
                assert (r.status_code, r.json()["id"], r.json()["field"]) == (status, iggy_id, field), target
            bob = await user_client(c, port, "bob", {"global": {"read_topics": True, "read_streams": True}})
            ops = await user_client(c, port, "ops", {"global": {"manage_topics": True}})
            try:
                r = await bob.delete(path, params={"segments_count": 1})
                assert (r.status_code, r.json()["id"]) == (403, 41)
                assert (await ops.delete(path, params={"segments_count": 1})).status_code == 204
            finally:
                await bob.aclose()
                await ops.aclose()
