"""Cross-protocol with real clients: HTTP (httpx) <-> nats-py and apache-iggy 0.9.0, one gateway.

Topic orders/eu is NATS subject ``orders.eu`` (docs/addressing.md). The gateway
runs in a thread (tests/support/ferry_harness.py) with every listener on port 0.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx
import nats
import pytest

from ferry_harness import running_gateway
from iggy_clients import client_python

# store: also run with every gateway on a JetStream cluster (make test, docs/scale-out.md "Tests")
pytestmark = pytest.mark.store
ORDERS = '[[binding]]\nstream = "orders"\ntopic = "eu"\ncreate = true\npartitions = 1\n'
WAIT = 30  # guards a hang only
ROOT = Path(__file__).resolve().parents[2]
IGGY_SCRIPT = ROOT / "tests" / "iggy" / "clients" / "current_cross.py"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@contextmanager
def http_client(gw) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://127.0.0.1:{gw.ports['http']}", timeout=WAIT) as c:
        r = c.post("/users/login", json={"username": "iggy", "password": "iggy"})
        c.headers["authorization"] = f"Bearer {r.json()['access_token']['token']}"
        yield c


HEADERS = {"trace": {"kind": "string", "value": b64(b"abc")},
           "n": {"kind": "uint32", "value": b64((7).to_bytes(4, "little"))},
           "ok": {"kind": "bool", "value": b64(b"\x01")}}


def test_http_send_reaches_a_nats_subscriber_with_headers(tmp_path):
    with running_gateway(tmp_path, ORDERS) as gw, http_client(gw) as c:
        async def main():
            nc = await nats.connect(gw.url())
            sub = await nc.subscribe("orders.eu")
            await nc.flush()
            r = await asyncio.to_thread(c.post, "/streams/orders/topics/eu/messages",
                                        json={"messages": [{"payload": b64(b"from-http"), "headers": HEADERS}]})
            assert r.status_code == 201, r.text
            msg = await sub.next_msg(WAIT)
            await nc.close()
            return msg

        msg = asyncio.run(main())
        assert msg.subject == "orders.eu" and msg.data == b"from-http"
        # typed values reach NATS as their text form (docs/addressing.md, "Headers")
        assert (msg.headers["trace"], msg.headers["n"], msg.headers["ok"]) == ("abc", "7", "true")


def test_nats_publish_is_polled_over_http(tmp_path):
    with running_gateway(tmp_path, ORDERS) as gw, http_client(gw) as c:
        async def main():
            nc = await nats.connect(gw.url())
            await nc.publish("orders.eu.x", b"from-nats", headers={"trace": "xyz"})
            await nc.flush()
            await nc.close()

        asyncio.run(main())
        r = c.get("/streams/orders/topics/eu/messages", params={"kind": "first", "count": 10, "wait_ms": 10_000})
        (msg,) = r.json()["messages"]
        assert base64.b64decode(msg["payload"]) == b"from-nats"
        headers = {base64.b64decode(e["key"]["value"]).decode(): e["value"] for e in msg["user_headers"]}
        assert headers["trace"] == {"kind": "string", "value": b64(b"xyz")}
        assert headers["ferry-nats-subject"] == {"kind": "string", "value": b64(b"orders.eu.x")}


def test_http_send_is_polled_by_apache_iggy(tmp_path):
    iggy_py = client_python("apache-iggy==0.9.0")  # built once, shared with tests/iggy
    with running_gateway(tmp_path, ORDERS) as gw, http_client(gw) as c:
        r = c.post("/streams/orders/topics/eu/messages",
                   json={"partitioning": {"kind": "partition_id", "value": b64((0).to_bytes(4, "little"))},
                         "messages": [{"payload": b64(b"from-http"), "headers": HEADERS}]})
        assert r.status_code == 201, r.text
        proc = subprocess.run([str(iggy_py), str(IGGY_SCRIPT), str(gw.ports["iggy_tcp"]), "poll"],
                              capture_output=True, text=True, timeout=300, check=True)
        got = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        assert [g["payload"] for g in got] == ["from-http"]
        assert got[0]["headers"]["trace"] == "abc" and got[0]["headers"]["n"] == 7
        assert got[0]["headers"]["ok"] is True
