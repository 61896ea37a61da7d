"""Cross-protocol with real clients: apache-iggy 0.9.0 <-> nats-py through one gateway.

Topic orders/eu is NATS subject ``orders.eu`` (docs/addressing.md)."""

from __future__ import annotations

import asyncio
import json
import subprocess

import nats
import pytest

from ferry_harness import running_gateway
from iggy_clients import SCENARIO_TIMEOUT_S, SCRIPTS, client_python

# store: also run with every gateway on a JetStream cluster (make test, docs/scale-out.md "Tests")
pytestmark = pytest.mark.store
ORDERS = '[[binding]]\nstream = "orders"\ntopic = "eu"\ncreate = true\npartitions = 1\n'
WAIT = 30  # guards a hang only


def iggy(port: int, mode: str) -> list[dict]:
    proc = subprocess.run([str(client_python("apache-iggy==0.9.0")), str(SCRIPTS / "current_cross.py"), str(port),
                           mode], capture_output=True, text=True, timeout=SCENARIO_TIMEOUT_S, check=True)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_iggy_send_reaches_a_nats_subscriber_with_headers(tmp_path):
    with running_gateway(tmp_path, ORDERS) as gw:
        async def main():
            nc = await nats.connect(gw.url())
            sub = await nc.subscribe("orders.eu")
            await nc.flush()
            await asyncio.to_thread(iggy, gw.ports["iggy_tcp"], "send")
            msg = await sub.next_msg(WAIT)
            await nc.close()
            return msg

        msg = asyncio.run(main())
        assert msg.subject == "orders.eu" and msg.data == b"from-iggy"
        assert msg.headers["trace"] == "abc" and msg.headers["n"] == "7"  # typed value as its text form


def test_nats_publish_is_polled_by_iggy_with_headers(tmp_path):
    with running_gateway(tmp_path, ORDERS) as gw:
        async def main():
            nc = await nats.connect(gw.url())
            await nc.publish("orders.eu", b"from-nats", headers={"trace": "xyz"})
            await nc.flush()
            await nc.close()

        asyncio.run(main())
        got = iggy(gw.ports["iggy_tcp"], "poll")
        assert [g["payload"] for g in got] == ["from-nats"]
        assert got[0]["headers"]["trace"] == "xyz"
        assert got[0]["headers"]["ferry-nats-subject"] == "orders.eu"
