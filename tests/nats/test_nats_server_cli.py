"""``ferry nats-server``: nats-server's flags and config file, as a real process driven by nats-py."""

from __future__ import annotations

import asyncio
import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import nats
import pytest
import trustme
from nats.errors import TimeoutError as NatsTimeout

from gateway.config import load_config
from gateway.cli.nats_server import NatsCliError, build_parser, config_flags, normalize_argv, parse_duration, settings
from gateway.registry import default_registry
from ferry_harness import free_port, wait_for_port

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
START_LIMIT_S = 30   # a server that does not accept by then has failed to start
WAIT = 5


@pytest.mark.parametrize("argv, expected", [
    (["-DV"], ["-D", "-V"]), (["-DVV"], ["-D", "-V", "-V"]), (["-port", "5"], ["--port", "5"]),
    (["-port=5"], ["--port=5"]), (["-p=5"], ["-p", "5"]), (["-sd", "d"], ["-sd", "d"]),
    (["--user", "u"], ["--user", "u"]), (["-tlsverify"], ["--tlsverify"]),
])
def test_go_flag_spellings_become_argparse_ones(argv, expected):
    assert normalize_argv(argv) == expected


@pytest.mark.parametrize("text, secs", [("2m", 120), ("1m30s", 90), ("500ms", 0.5), (30, 30), ("1h", 3600)])
def test_go_durations(text, secs):
    assert parse_duration(text, "x") == secs


def _settings(tmp_path, conf: str, *argv: str):
    path = tmp_path / "n.conf"
    path.write_text(conf)
    return settings(build_parser().parse_args(normalize_argv(["-c", str(path), *argv])))


def test_config_file_then_flags_become_ferry_keys(tmp_path):
    s = _settings(tmp_path, 'listen: 127.0.0.1:4999\nhttp: 8999\nmax_payload: 2MB\nping_interval: "1m"\n'
                            "authorization { token: t }\nwebsocket { port: 9443, no_tls: true }\n", "-p", "5000")
    cfg = load_config(None, env={}, flags=config_flags(s, str(tmp_path / "d"), default_registry().known()))
    nats_l, mon, ws = cfg.listener("nats"), cfg.listener("nats_monitor"), cfg.listener("nats_ws")
    assert (nats_l.host, nats_l.port, mon.port, ws.port) == ("127.0.0.1", 5000, 8999, 9443)
    assert nats_l.options["max_payload"] == 2 * 1024 * 1024 and nats_l.options["ping_interval"] == 60
    assert nats_l.options["auth_file"] == str(tmp_path / "n.conf")
    assert [lc.name for lc in cfg.enabled_listeners()] == ["nats", "nats_monitor", "nats_ws"]


@pytest.mark.parametrize("conf, argv, words", [
    ("", ["--tls"], "needs --tlscert and --tlskey"),
    ("websocket { port: 1 }", [], "no_tls"),
    ("tls { cert_file: a, key_file: b, handshake_first: auto }", [], "true or false only"),
    ("ping_interval: soon", [], "not a duration"),
    ("port: x", [], "must be an integer"),
    ("", ["--cluster", "nats://x:6222"], "no clustering"),
    ("a {", [], "n.conf:1"),
])
def test_unusable_flags_and_config_are_refused(tmp_path, conf, argv, words):
    with pytest.raises(NatsCliError) as info:
        _settings(tmp_path, conf, *argv)
    assert words in str(info.value)


# -- as a process -------------------------------------------------------------------
class DropIn:
    """``python -m gateway nats-server ARGS`` until stopped with SIGTERM."""

    def __init__(self, tmp_path: Path, *args: str, wait_port: int) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FERRY_")}
        env["PYTHONPATH"] = str(REPO)
        self.err = open(tmp_path / f"stderr-{time.monotonic_ns()}.log", "w+b")
        self.proc = subprocess.Popen([sys.executable, "-m", "gateway", "nats-server", *args], cwd=tmp_path,
                                     env=env, stdout=subprocess.PIPE, stderr=self.err)
        if not wait_for_port(wait_port, timeout=START_LIMIT_S, proc=self.proc, interval=0.05):
            if self.proc.poll() is not None:
                raise AssertionError(f"exited {self.proc.returncode}: {self.stderr()}")
            self.proc.kill()
            raise AssertionError(f"not accepting: {self.stderr()}")

    def stderr(self) -> str:
        self.err.seek(0)
        return self.err.read().decode(errors="replace")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(START_LIMIT_S)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.err.close()


# Starts with fresh ports when another test took a port between free_port() and the
# server's bind (a CI run lost the websocket port that way: "Address already in use").
PORT_RACE_ATTEMPTS = 3


def start_on_free_ports(tmp_path: Path, count: int, args_for) -> tuple[DropIn, list[int]]:
    """``DropIn`` with ``args_for(ports)`` on ``count`` free ports (the first is waited on)."""
    for attempt in range(PORT_RACE_ATTEMPTS):
        ports = [free_port() for _ in range(count)]
        try:
            return DropIn(tmp_path, *args_for(ports), wait_port=ports[0]), ports
        except AssertionError as exc:
            if "Address already in use" not in str(exc) or attempt + 1 == PORT_RACE_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def settle(nc) -> None:
    """Make every SUB this client queued reach the server before we go on.

    nats-py's flush() writes its PING straight to the transport while a SUB
    from subscribe() still waits in the client's pending list for its flusher
    task, so the first PONG can come back before the server saw the SUB; a
    second flush's PING is written after it (nats/aio/client.py, _send_ping)."""
    await nc.flush()
    await nc.flush()


def test_flags_user_pass_monitor_and_log_file(tmp_path):
    log = tmp_path / "nats.log"
    srv, (port, mport) = start_on_free_ports(tmp_path, 2, lambda p: (
        "-a", "127.0.0.1", "-p", str(p[0]), "-m", str(p[1]), "--user", "u", "--pass", "p",
        "-DV", "-l", str(log), "-P", str(tmp_path / "pid")))
    try:
        async def main():
            nc = await nats.connect(f"nats://u:p@127.0.0.1:{port}")
            sub = await nc.subscribe("x")
            await nc.publish("x", b"drop-in")
            assert (await sub.next_msg(WAIT)).data == b"drop-in"
            await nc.close()
            with pytest.raises(Exception) as info:
                await nats.connect(f"nats://u:bad@127.0.0.1:{port}", allow_reconnect=False)
            assert "authorization violation" in str(info.value).lower()
        run(main())
        varz = httpx.get(f"http://127.0.0.1:{mport}/varz").json()
        assert varz["in_msgs"] == 1 and varz["auth_required"] is True and varz["port"] == port
        assert (tmp_path / "pid").read_text().strip() == str(srv.proc.pid)
    finally:
        assert srv.stop() == 0
    text = log.read_text()                 # banner and logs went to -l, stdout stayed empty
    assert f"Listening for client connections on 127.0.0.1:{port}" in text and "Server is ready" in text
    assert f"Starting http monitor on 127.0.0.1:{mport}" in text
    assert srv.proc.stdout.read() == b""


def test_random_port_is_announced_and_sigusr2_stops_with_lame_duck(tmp_path):
    import re
    env = {k: v for k, v in os.environ.items() if not k.startswith("FERRY_")} | {"PYTHONPATH": str(REPO)}
    err = tmp_path / "err.log"
    with open(err, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "gateway", "nats-server", "-a", "127.0.0.1", "-p", "-1"],
                                cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=fh)
    try:
        deadline = time.monotonic() + START_LIMIT_S
        while not (m := re.search(r"Listening for client connections on 127\.0\.0\.1:(\d+)", err.read_text())):
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.05)
        port = int(m.group(1))

        async def main():
            ldm = asyncio.Event()

            async def on_ldm():
                ldm.set()
            nc = await nats.connect(f"nats://127.0.0.1:{port}", lame_duck_mode_cb=on_ldm, allow_reconnect=False)
            await nc.flush()
            proc.send_signal(signal.SIGUSR2)
            await asyncio.wait_for(ldm.wait(), START_LIMIT_S)
            await nc.close()
        run(main())
        assert proc.wait(START_LIMIT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_config_file_with_users_tls_and_websocket(tmp_path):
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "s.pem"))
    cert.private_key_pem.write_to_path(str(tmp_path / "s.key"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))

    def config(ports):
        port, wsport, mport = ports
        (tmp_path / "server.conf").write_text(f"""
            # a nats-server config, unchanged
            port: {port}
            host: 127.0.0.1
            http_port: {mport}
            server_name: "drop-in"
            tls {{
              cert_file: "{tmp_path / 's.pem'}"
              key_file: "{tmp_path / 's.key'}"
              ca_file: "{tmp_path / 'ca.pem'}"
              verify: true
            }}
            authorization {{
              users = [
                {{user: app, password: pw, permissions: {{publish: "app.>", subscribe: ["app.>", "_INBOX.>"]}}}}
              ]
            }}
            websocket {{ port: {wsport}, no_tls: true }}
        """)
        return ("-c", str(tmp_path / "server.conf"))
    srv, (port, wsport, mport) = start_on_free_ports(tmp_path, 3, config)
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    ca.issue_cert("app@example.test").configure_cert(ctx)
    try:
        async def main():
            errors = []

            async def on_error(e):
                errors.append(str(e).lower())
            nc = await nats.connect(f"tls://app:pw@127.0.0.1:{port}", tls=ctx, error_cb=on_error)
            assert nc._server_info["server_name"] == "drop-in" and nc._server_info["tls_verify"] is True
            ws = await nats.connect(f"ws://127.0.0.1:{wsport}", user="app", password="pw")
            sub = await ws.subscribe("app.events")
            await settle(ws)
            await nc.publish("other.x", b"refused")
            await nc.publish("app.events", b"ok")
            assert (await sub.next_msg(WAIT)).data == b"ok"
            await nc.flush()

            async def reported():       # nats-py hands -ERR to error_cb from a task
                while not errors:
                    await asyncio.sleep(0.01)
            await asyncio.wait_for(reported(), WAIT)
            assert any('permissions violation for publish to "other.x"' in e for e in errors)
            assert nc.is_connected
            with pytest.raises(NatsTimeout):
                await sub.next_msg(0.2)
            await nc.close()
            await ws.close()
        run(main())
        varz = httpx.get(f"http://127.0.0.1:{mport}/varz").json()
        assert varz["tls_verify"] is True and varz["server_name"] == "drop-in"
        assert varz["in_msgs"] == 1    # the refused publish was dropped before it counted
    finally:
        assert srv.stop() == 0


def test_killed_drop_ins_without_store_dir_leave_at_most_one_directory(tmp_path, monkeypatch):
    """Without -sd the data goes to <tmp>/ferry-nats-server/<port>: SIGKILL twice, one directory."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    port = free_port()
    for _ in range(2):
        server = DropIn(tmp_path, "-p", str(port), wait_port=port)
        server.proc.kill()
        server.proc.wait(START_LIMIT_S)
        server.err.close()
    left = [p for p in scratch.rglob("*") if p.is_dir() and p.parent == scratch / "ferry-nats-server"]
    assert [p.name for p in scratch.iterdir()] == ["ferry-nats-server"]
    assert [p.name for p in left] == [str(port)]


def test_scratch_dir_is_emptied_and_skips_a_held_one(tmp_path):
    from gateway.lock import DataDirLock
    from gateway.cli.nats_server import scratch_dir

    first = scratch_dir(4999, base=tmp_path)
    (first / "old").write_text("x")
    assert scratch_dir(4999, base=tmp_path) == first and not (first / "old").exists()
    with DataDirLock(first):
        assert scratch_dir(4999, base=tmp_path) == tmp_path / "4999-1"
    assert scratch_dir(-1, base=tmp_path).name == "random"
