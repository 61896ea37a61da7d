"""gateway.server.run_gateway in-process, with test-only listeners.

The listeners here exist only in this file (the product ships none of its
own): a TCP line server that can append to the broker and report
``broker.draining``, and a UDP echo, both started through the same
ListenerSpec/registry path real adapters use.
"""

from __future__ import annotations

import io
import socket

import pytest
import trio

from core.broker import Broker
from core.log import AppendInput
from gateway.config import load_config
from gateway.lock import DataDirLock, DataDirLocked
from gateway.registry import ListenerSpec, ListenerStartError, Registry
from gateway.server import run_gateway

# Hard per-test cap: a hang fails the test instead of stalling the suite.
TEST_LIMIT_S = 20


async def serve_lines(broker, cfg, conn_nursery, *, task_status=trio.TASK_STATUS_IGNORED):
    listeners = await trio.open_tcp_listeners(cfg.port, host=cfg.host)
    port = listeners[0].socket.getsockname()[1]

    async def session(stream: trio.SocketStream) -> None:
        async with stream:
            async for data in stream:
                cmd = data.decode().strip()
                if cmd == "draining?":
                    reply = str(broker.draining)
                elif cmd.startswith("append "):
                    result = broker.append("s", "t", [AppendInput(payload=cmd[7:].encode())], partition=0)
                    reply = str(result.base_offset)
                else:
                    reply = cmd
                await stream.send_all(reply.encode() + b"\n")

    task_status.started(port)
    await trio.serve_listeners(session, listeners, handler_nursery=conn_nursery)


async def serve_udp_echo(broker, cfg, conn_nursery, *, task_status=trio.TASK_STATUS_IGNORED):
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_DGRAM)
    with sock:
        await sock.bind((cfg.host, cfg.port))
        task_status.started(sock.getsockname()[1])
        while True:
            data, addr = await sock.recvfrom(2048)
            await sock.sendto(data, addr)


REG = Registry.of(ListenerSpec("lines", 7001, "tcp", serve_lines), ListenerSpec("udp_echo", 7002, "udp", serve_udp_echo))
BINDING = '[[binding]]\nstream = "s"\ntopic = "t"\ncreate = true\npartitions = 2\n'


def make_cfg(tmp_path, **env):
    path = tmp_path / "ferry.toml"
    path.write_text(BINDING)
    base = {"FERRY_SERVER_DATA_DIR": str(tmp_path / "data"), "FERRY_SERVER_HOST": "127.0.0.1",
            "FERRY_LINES_PORT": "0", "FERRY_UDP_ECHO_PORT": "0", "FERRY_SERVER_GRACE_SECONDS": "60",
            "FERRY_LOG_FSYNC": "never"}
    return load_config(path, env=base | env, registry=REG)


def leaves(exc: BaseException) -> list[BaseException]:
    """The non-group exceptions inside nested ExceptionGroups (trio nurseries nest them)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaves(sub)]
    return [exc]


async def ask(stream: trio.SocketStream, line: str) -> str:
    await stream.send_all(line.encode() + b"\n")
    data = b""
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some(1024)
        if not chunk:
            break
        data += chunk
    return data.decode().strip()


async def test_reports_bound_ports_serves_and_stops(tmp_path):
    cfg = make_cfg(tmp_path)
    stop, out = trio.Event(), io.StringIO()
    with trio.fail_after(TEST_LIMIT_S):
        async with trio.open_nursery() as nursery:
            ports = await nursery.start(lambda task_status: run_gateway(cfg, stop, registry=REG, out=out,
                                                                        task_status=task_status))
            assert set(ports) == {"lines", "udp_echo"} and all(ports.values())
            stream = await trio.open_tcp_stream("127.0.0.1", ports["lines"])
            assert await ask(stream, "hello") == "hello"
            udp = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_DGRAM)
            with udp:
                await udp.sendto(b"ping", ("127.0.0.1", ports["udp_echo"]))
                assert (await udp.recvfrom(64))[0] == b"ping"
            await stream.aclose()
            stop.set()
    banner = out.getvalue()
    assert f"127.0.0.1:{ports['lines']}/tcp" in banner and f"127.0.0.1:{ports['udp_echo']}/udp" in banner
    assert banner.endswith("ready\n")


async def test_drain_refuses_new_connections_and_lets_open_ones_finish(tmp_path):
    cfg = make_cfg(tmp_path)  # 60 s of grace: the run must end because the client left, not the timer
    stop = trio.Event()
    with trio.fail_after(TEST_LIMIT_S):
        async with trio.open_nursery() as nursery:
            ports = await nursery.start(lambda task_status: run_gateway(cfg, stop, registry=REG, out=io.StringIO(),
                                                                        task_status=task_status))
            stream = await trio.open_tcp_stream("127.0.0.1", ports["lines"])
            assert await ask(stream, "draining?") == "False"
            stop.set()
            await trio.testing.wait_all_tasks_blocked()
            assert await ask(stream, "draining?") == "True"  # still served during the grace period
            with pytest.raises(OSError):
                await trio.open_tcp_stream("127.0.0.1", ports["lines"])
            await stream.aclose()  # the last connection leaves: shutdown completes at once


async def test_grace_period_cuts_connections_that_stay(tmp_path):
    cfg = make_cfg(tmp_path, FERRY_SERVER_GRACE_SECONDS="0")
    stop = trio.Event()
    with trio.fail_after(TEST_LIMIT_S):
        async with trio.open_nursery() as nursery:
            ports = await nursery.start(lambda task_status: run_gateway(cfg, stop, registry=REG, out=io.StringIO(),
                                                                        task_status=task_status))
            stream = await trio.open_tcp_stream("127.0.0.1", ports["lines"])
            assert await ask(stream, "hi") == "hi"
            stop.set()
            assert await stream.receive_some(1024) == b""  # the server closed it
            await stream.aclose()


async def test_bound_topics_are_created_and_appends_survive_shutdown(tmp_path):
    cfg = make_cfg(tmp_path)
    stop = trio.Event()
    with trio.fail_after(TEST_LIMIT_S):
        async with trio.open_nursery() as nursery:
            ports = await nursery.start(lambda task_status: run_gateway(cfg, stop, registry=REG, out=io.StringIO(),
                                                                        task_status=task_status))
            stream = await trio.open_tcp_stream("127.0.0.1", ports["lines"])
            assert [await ask(stream, f"append m{i}") for i in range(3)] == ["0", "1", "2"]
            await stream.aclose()
            stop.set()
    with DataDirLock(cfg.server.data_dir), Broker.open(cfg.server.data_dir, cfg.broker_config()) as broker:
        assert broker.get_topic("s", "t").partitions_count == 2
        assert [m.payload for m in broker.read_messages("s", "t", 0, 0, 10)] == [b"m0", b"m1", b"m2"]


async def test_a_taken_port_fails_the_start_and_releases_everything(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    with taken:
        cfg = make_cfg(tmp_path, FERRY_LINES_PORT=str(taken.getsockname()[1]))
        with trio.fail_after(TEST_LIMIT_S), pytest.raises(BaseExceptionGroup) as info:
            await run_gateway(cfg, trio.Event(), registry=REG, out=io.StringIO())
    (err,) = leaves(info.value)
    assert isinstance(err, ListenerStartError)
    assert "listener lines cannot listen on 127.0.0.1:" in str(err)
    DataDirLock(cfg.server.data_dir).acquire().release()  # lock released, broker closed


async def test_a_locked_data_dir_is_refused(tmp_path):
    cfg = make_cfg(tmp_path)
    with DataDirLock(cfg.server.data_dir):
        with pytest.raises(DataDirLocked):
            await run_gateway(cfg, trio.Event(), registry=REG, out=io.StringIO())


async def test_disabled_listeners_are_not_started(tmp_path):
    cfg = make_cfg(tmp_path, FERRY_UDP_ECHO_ENABLED="false")
    stop = trio.Event()
    out = io.StringIO()
    with trio.fail_after(TEST_LIMIT_S):
        async with trio.open_nursery() as nursery:
            ports = await nursery.start(lambda task_status: run_gateway(cfg, stop, registry=REG, out=out,
                                                                        task_status=task_status))
            stop.set()
    assert set(ports) == {"lines"}
    assert "udp_echo             disabled" in out.getvalue()
