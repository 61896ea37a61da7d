"""Shared helpers of the HTTP tests: an in-process gateway with only the HTTP listener."""

from __future__ import annotations

import base64
import io
import struct
from contextlib import asynccontextmanager

import httpx
import trio

from gateway.config import load_config
from gateway.listeners.http import LISTENER
from gateway.registry import Registry
from gateway.server import run_gateway

# Hard per-test cap: a hang fails the test instead of stalling the suite.
TEST_LIMIT_S = 30
REG = Registry.of(LISTENER)
ROOT = {"username": "iggy", "password": "iggy"}


def make_cfg(tmp_path, **env):
    base = {"FERRY_SERVER_DATA_DIR": str(tmp_path / "data"), "FERRY_SERVER_HOST": "127.0.0.1",
            "FERRY_HTTP_PORT": "0", "FERRY_LOG_FSYNC": "never", "FERRY_SERVER_GRACE_SECONDS": "5"}
    return load_config(None, env=base | env, registry=REG)


@asynccontextmanager
async def gateway(tmp_path, **env):
    """Run the gateway (HTTP listener only) on 127.0.0.1:0; yields the bound port."""
    cfg = make_cfg(tmp_path, **env)
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        ports = await nursery.start(lambda task_status: run_gateway(cfg, stop, registry=REG, out=io.StringIO(),
                                                                    task_status=task_status))
        try:
            yield ports["http"]
        finally:
            stop.set()


def client(port: int, *, http2: bool = False, **kw) -> httpx.AsyncClient:
    """httpx over HTTP/1.1, or HTTP/2 with prior knowledge (h2c) when ``http2``."""
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", http1=not http2, http2=http2,
                             timeout=20, **kw)


async def login(c: httpx.AsyncClient, creds=ROOT) -> str:
    r = await c.post("/users/login", json=creds)
    assert r.status_code == 200, r.text
    token = r.json()["access_token"]["token"]
    c.headers["authorization"] = f"Bearer {token}"
    return token


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def partition_value(pid: int) -> str:
    return b64(struct.pack("<I", pid))


async def make_topic(c: httpx.AsyncClient, stream="s1", topic="t1", partitions=1):
    r = await c.post("/streams", json={"name": stream})
    assert r.status_code == 200, r.text
    r = await c.post(f"/streams/{stream}/topics", json={
        "name": topic, "partitions_count": partitions, "compression_algorithm": "none",
        "message_expiry": 0, "max_topic_size": 0})
    assert r.status_code == 200, r.text
    return r.json()
