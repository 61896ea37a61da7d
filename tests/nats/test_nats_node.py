"""The real nats.js client (npm ``nats``) against Ferry: pub/sub, request, headers.

``make test`` installs the client into tests/nats/node/node_modules when
``node`` and ``npm`` are on PATH; the test skips, saying why, when they are not.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from core.broker import Broker
from ferry_harness import TEST_STORE, running_gateway

NODE_DIR = Path(__file__).parent / "node"
NODE = shutil.which("node")
ORDERS = '[[binding]]\nstream = "orders"\ntopic = "eu"\ncreate = true\n'

# store: also run with every gateway on a JetStream cluster (make test, docs/scale-out.md "Tests")
pytestmark = [
    pytest.mark.store,
    pytest.mark.skipif(NODE is None, reason="node is not installed"),
    pytest.mark.skipif(not (NODE_DIR / "node_modules" / "nats").is_dir(),
                       reason="nats.js not installed: run `make test` (npm install in tests/nats/node)"),
]


def test_nats_js_pub_sub_request_headers_and_puback(tmp_path):
    with running_gateway(tmp_path, ORDERS) as gw:
        user, password = gw.nats_credentials()
        done = subprocess.run([NODE, str(NODE_DIR / "scenario.js"), f"127.0.0.1:{gw.ports['nats']}",
                               "orders.eu.node"], cwd=NODE_DIR, capture_output=True, timeout=60,
                              env={**os.environ, "NATS_USER": user, "NATS_PASS": password})
    assert done.returncode == 0, done.stderr.decode()
    out = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert out["info"] == {"headers": True, "max_payload": 1024 * 1024}
    assert out["pubsub"] == {"subject": "node.a", "data": "hello", "multi": ["one", "two"], "other": "v"}
    assert out["request"] == "re:ping"
    # On a JetStream store a request may be answered on another gateway, so a gateway
    # cannot tell "nobody": the request times out (docs/scale-out.md, "Not guaranteed").
    assert out["no_responders"] == ("TIMEOUT" if TEST_STORE == "jetstream" else "503")
    assert out["puback"]["stream"] == "orders/eu" and out["puback"]["seq"] == 1
    with Broker.open(tmp_path / "data") as broker:
        assert [m.payload for m in broker.read_messages("orders", "eu", 0, 0, 5)] == [b"stored-by-node"]
