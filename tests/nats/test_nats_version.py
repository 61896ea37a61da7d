"""One NATS server version everywhere: INFO over TCP and WebSocket, /varz,
``ferry nats-server -v``/``--version`` and docs/nats.md all say
adapters/nats/connection.py SERVER_VERSION (the nats-server release Ferry was
checked against), and ``ferry nats-server`` prints no Iggy default-password
warning (it runs no listener that takes Ferry logins)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import nats
import pytest

from adapters.nats.connection import SERVER_VERSION
from ferry_harness import free_port, running_gateway, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
START_LIMIT_S = 60  # bound on a subprocess start; not a timing assertion


def info_version(port: int) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        line = s.makefile("rb").readline()
    assert line.startswith(b"INFO ")
    return json.loads(line[5:])["version"]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gateway", "nats-server", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=START_LIMIT_S)


def test_every_place_reports_the_same_nats_version(tmp_path):
    assert re.fullmatch(r"\d+\.\d+\.\d+", SERVER_VERSION)  # nats.js needs strict x.y.z
    with running_gateway(tmp_path) as gw:
        seen = {"info_tcp": info_version(gw.ports["nats"])}

        async def over_ws() -> str:
            nc = await nats.connect(gw.url("nats_ws", "ws"))
            try:
                return str(nc.connected_server_version).removeprefix("<nats server v").removesuffix(">")
            finally:
                await nc.close()

        seen["info_ws"] = asyncio.run(over_ws())
        seen["varz"] = httpx.get(f"http://127.0.0.1:{gw.ports['nats_monitor']}/varz", timeout=10).json()["version"]
    for flag in ("-v", "--version"):
        done = cli(flag)
        assert done.returncode == 0, done.stderr
        seen[flag] = re.match(r"nats-server: v(\S+) \(ferry ", done.stdout).group(1)
    docs = (ROOT / "docs" / "nats.md").read_text()
    seen["docs"] = re.search(r"reports itself as nats-server \*\*(\S+?)\*\*", docs).group(1)
    assert seen == dict.fromkeys(seen, SERVER_VERSION)
    # every "checked against nats-server x.y.z" in the docs names the same release
    assert set(re.findall(r"nats-server(?: -js -m`)? (\d+\.\d+\.\d+)", docs)) == {SERVER_VERSION}


def test_nats_server_mode_prints_no_iggy_password_warning(tmp_path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "nats-server", "-a", "127.0.0.1", "-p", str(port),
                             "-sd", str(tmp_path / "store")], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for_port(port, timeout=START_LIMIT_S, proc=proc), "ferry nats-server did not start"
        assert info_version(port) == SERVER_VERSION
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=START_LIMIT_S)
    assert proc.returncode == 0, err
    assert "Server is ready" in err  # its start-up notices were printed ...
    assert "default password" not in out + err  # ... and no Iggy credential warning
    assert "WARNING" not in out + err


@pytest.mark.parametrize("enabled, warns", [
    ({"FERRY_IGGY_TCP_ENABLED": "true"}, True),
    ({"FERRY_HTTP_ENABLED": "true"}, True),
    ({"FERRY_PRAVEGA_CONTROLLER_ENABLED": "true"}, True),   # every listener takes Ferry logins
    ({"FERRY_NATS_ENABLED": "true", "FERRY_NATS_WS_ENABLED": "true"}, True),
    ({"FERRY_NATS_MONITOR_ENABLED": "true"}, False),   # monitoring only: no login at all
])
def test_the_warning_follows_the_listeners_that_take_ferry_logins(enabled, warns):
    from gateway.banner import credential_warning
    from gateway.config import load_config
    from gateway.registry import default_registry

    off = {f"FERRY_{name.upper()}_ENABLED": "false" for name in default_registry().known()}
    cfg = load_config(None, env=off | enabled, registry=default_registry())
    assert (credential_warning(cfg) is not None) is warns
