"""Admin commands while a server runs: they go through its HTTP API (gateway/remote.py),
by default (the config's [listeners.http]) and with --local/--data when the server holds
that data directory."""

from __future__ import annotations

import json
import signal

import pytest

from ferry_harness import free_port
from gw_helpers import run_ferry
from test_gw_serve_process import Server, servers  # noqa: F401 - the fixture stops what a test started


@pytest.mark.parametrize("mode", ["default", "local_dir_held_by_server"])
def test_admin_commands_reach_a_running_server(tmp_path, servers, mode):  # noqa: F811
    port = free_port()
    config = tmp_path / "ferry.toml"
    config.write_text(f'[auth]\nroot_password = "secret-pw"\n[listeners.http]\nport = {port}\n')
    server = Server(tmp_path, "--config", str(config), "--http-port", str(port))
    servers.append(server)

    where = ["--config", str(config)] + (["--data", str(server.data)] if mode != "default" else [])

    def ferry(*args: str, stdin: bytes | None = None):
        done = run_ferry(*args, *where, cwd=tmp_path, stdin=stdin)
        assert done.returncode == 0, done.stderr.decode()
        return done.stdout.decode()

    assert "created stream 'orders' with id 0" in ferry("stream", "create", "orders")
    assert "and 2 partition(s)" in ferry("topic", "create", "orders", "eu", "--partitions", "2")
    streams = json.loads(ferry("stream", "list", "--json"))
    assert [(s["id"], s["name"], s["topics"]) for s in streams] == [(0, "orders", 1)]
    out = ferry("produce", "orders/eu", "hello", "--partition", "1", "--header", "src=cli",
                "--header", "n:uint32=7")
    assert out == "partition=1 offset=0\n"  # the send confirmation's base offset
    assert ferry("produce", "orders/eu", "-", "--lines", "--partition", "0", stdin=b"a\nb\n") == \
        "partition=0 offsets=0..1\n"
    lines = [json.loads(line) for line in ferry("tail", "orders/eu", "--json").splitlines()]
    assert [(m["partition"], m["offset"], m["payload"]) for m in lines] == [(0, 0, "a"), (0, 1, "b"), (1, 0, "hello")]
    assert lines[2]["headers"] == [{"key": "src", "kind": "string", "value": "cli"},
                                   {"key": "n", "kind": "uint32", "value": "7"}]
    topics = json.loads(ferry("topic", "list", "orders", "--json"))
    assert topics[0]["name"] == "eu" and topics[0]["partitions"] == 2
    assert "deleted topic 'eu'" in ferry("topic", "delete", "orders", "eu")
    bad = run_ferry("topic", "delete", "orders", "eu", *where, cwd=tmp_path)
    assert bad.returncode != 0 and "ferry: error:" in bad.stderr.decode() and "Traceback" not in bad.stderr.decode()
    assert server.stop(signal.SIGTERM) == 0
