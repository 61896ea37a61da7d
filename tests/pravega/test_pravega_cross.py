"""Pravega <-> every other protocol through one gateway (issue 12, "Cross-protocol").

Events written by the real pravega 0.3.8 client are polled from all four
partitions by apache-iggy 0.9.0 and received live by a nats-py subscriber on
the topic's subject (`x.events`); messages sent through Iggy, NATS and HTTP
are read back by a Pravega reader group. Pravega events carry no headers:
other protocols see the payload only, and headers of their messages are not
visible to Pravega readers (docs/headers.md)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess

import httpx
import nats
import pytest

from ferry_harness import running_gateway
from iggy_clients import SCENARIO_TIMEOUT_S, SCRIPTS, client_python
from pravega_clients import run_scenario

# store: also run with every gateway on a JetStream cluster (make test, docs/scale-out.md "Tests")
pytestmark = [pytest.mark.slow, pytest.mark.store]


def iggy(port: int, *args: str) -> list[dict]:
    proc = subprocess.run([str(client_python("apache-iggy==0.9.0")), str(SCRIPTS / "pravega_cross.py"), str(port),
                           *args], capture_output=True, text=True, timeout=SCENARIO_TIMEOUT_S,
                          env={**os.environ, "PYTHONPATH": ""})
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_pravega_events_reach_iggy_and_nats_and_back(tmp_path):
    with running_gateway(tmp_path, FERRY_PRAVEGA_TAIL_PARK_MS="500") as gw:
        controller = str(gw.ports["pravega_controller"])
        received: list[bytes] = []

        async def subscribe_then_write() -> None:
            nc = await nats.connect(gw.url("nats"))

            async def on_msg(msg) -> None:
                received.append(msg.data)

            await nc.subscribe("x.events", cb=on_msg)
            await nc.flush()
            await asyncio.to_thread(run_scenario, "cross.py", controller, "write")
            for _ in range(100):
                if len(received) >= 20:
                    break
                await asyncio.sleep(0.05)
            await nc.close()

        asyncio.run(subscribe_then_write())
        want = {f"p{i}" for i in range(20)}
        assert {m.decode() for m in received} == want  # live delivery to NATS, payload only

        polled = iggy(gw.ports["iggy_tcp"], "poll", "x", "events")
        assert {m["payload"] for m in polled} == want and len(polled) == 20
        assert {m["partition"] for m in polled} == {0, 1, 2, 3}  # the client's key ranges spread them

        # ... and the other way: Iggy, NATS and HTTP messages read by a Pravega reader group.
        iggy(gw.ports["iggy_tcp"], "send", "x", "events")

        async def publish() -> None:
            nc = await nats.connect(gw.url("nats"))
            await nc.publish("x.events", b"from-nats", headers={"trace": "n1"})
            await nc.flush()
            await nc.close()

        asyncio.run(publish())
        base = f"http://127.0.0.1:{gw.ports['http']}"
        with httpx.Client(base_url=base, timeout=10) as http:
            token = http.post("/users/login", json={"username": "iggy", "password": "iggy"}).json()["access_token"]
            two = base64.b64encode((2).to_bytes(4, "little")).decode()  # Iggy HTTP: u32 LE, base64
            body = {"partitioning": {"kind": "partition_id", "value": two},
                    "messages": [{"payload": "ZnJvbS1odHRw", "headers": {"k": {"kind": "string", "value": "dg=="}}}]}
            r = http.post("/streams/x/topics/events/messages", json=body,
                          headers={"authorization": f"Bearer {token['token']}"})
            assert r.status_code in (200, 201), r.text
        got = run_scenario("cross.py", controller, "read", "23")
        assert got["read"] == {"got": sorted(want | {"from-iggy", "from-nats", "from-http"})}
        metrics = httpx.get(f"{base}/metrics", timeout=10).text
        assert 'ferry_messages_in_total{listener="pravega"} 20' in metrics
        assert 'ferry_pravega_controller_requests_total{method="createStream",code="OK"} 1' in metrics
