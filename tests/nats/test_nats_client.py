"""The real nats-py client against a real Ferry gateway on loopback.

Each test starts the gateway (every listener on a free port, data in
tmp_path) and drives nats-py under asyncio, as a user's program would.
"""

from __future__ import annotations

import asyncio
import json
import socket

import nats
import pytest
from nats.errors import NoRespondersError, TimeoutError as NatsTimeout

from core.broker import Broker
from ferry_harness import free_port, gateway_config, running_gateway

# store: also run with every gateway on a JetStream cluster (make test, docs/scale-out.md "Tests")
pytestmark = pytest.mark.store

ORDERS = '[[binding]]\nstream = "orders"\ntopic = "eu"\ncreate = true\npartitions = 1\n'
WAIT = 5  # seconds; only guards a hang, a passing test never waits on it


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_connect_flush_rtt_and_server_info(tmp_path):
    with running_gateway(tmp_path) as gw:
        async def main():
            nc = await nats.connect(gw.url(), name="t")
            await nc.flush()
            assert await nc.rtt() >= 0
            info = nc._server_info
            assert info["headers"] is True and info["max_payload"] == 1024 * 1024
            assert info["port"] == gw.ports["nats"] and info["client_id"] > 0
            assert nc.max_payload == 1024 * 1024
            await nc.close()
        run(main())


def test_pub_sub_wildcards_and_multi_value_headers(tmp_path):
    with running_gateway(tmp_path) as gw:
        async def main():
            nc = await nats.connect(gw.url())
            star = await nc.subscribe("a.*")
            full = await nc.subscribe("a.>")
            exact = await nc.subscribe("a.b.c")
            await nc.publish("a.b", b"one", headers={"K": "v1"})
            await nc.publish("a.b.c", b"two")
            m = await star.next_msg(WAIT)
            assert (m.subject, m.data, m.headers) == ("a.b", b"one", {"K": "v1"})
            assert [(await full.next_msg(WAIT)).data for _ in range(2)] == [b"one", b"two"]
            assert (await exact.next_msg(WAIT)).data == b"two"
            with pytest.raises(NatsTimeout):
                await star.next_msg(0.2)  # a.b.c is not a.*
            # Repeated keys travel as written: check the raw block through a raw socket.
            await nc.close()
        run(main())
        raw = _raw_exchange(gw.ports["nats"],
                            b'CONNECT {"verbose":false,"headers":true,"user":"iggy","pass":"iggy"}\r\nSUB h 1\r\n'
                            b"HPUB h 30 32\r\nNATS/1.0\r\nK: 1\r\nK: 2\r\nk: 3\r\n\r\nhi\r\nPING\r\n")
        assert b"HMSG h 1 30 32\r\nNATS/1.0\r\nK: 1\r\nK: 2\r\nk: 3\r\n\r\nhi\r\n" in raw


def _raw_exchange(port: int, data: bytes) -> bytes:
    """Send ``data`` (ending in PING) and read up to the matching PONG."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
        s.sendall(data)
        got = b""
        while b"PONG\r\n" not in got:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        return got


def test_queue_groups_deliver_each_message_once(tmp_path):
    with running_gateway(tmp_path) as gw:
        async def main():
            nc = await nats.connect(gw.url())
            q1 = await nc.subscribe("work", queue="workers")
            q2 = await nc.subscribe("work", queue="workers")
            plain = await nc.subscribe("work")
            for i in range(40):
                await nc.publish("work", str(i).encode())
            await nc.flush()
            got_plain = [(await plain.next_msg(WAIT)).data for _ in range(40)]
            got_q = []
            for sub in (q1, q2):
                while True:
                    try:
                        got_q.append((await sub.next_msg(0.3)).data)
                    except NatsTimeout:
                        break
            assert sorted(got_q, key=int) == got_plain == [str(i).encode() for i in range(40)]
            await nc.close()
        run(main())


@pytest.mark.embedded_only  # a store gateway cannot tell "no responder anywhere" (docs/scale-out.md)
def test_request_reply_old_and_new_style_and_no_responders(tmp_path):
    with running_gateway(tmp_path) as gw:
        async def main():
            nc = await nats.connect(gw.url())

            async def responder(msg):
                await msg.respond(b"re:" + msg.data)
            await nc.subscribe("svc", cb=responder)
            assert (await nc.request("svc", b"x", timeout=WAIT)).data == b"re:x"
            assert (await nc.request("svc", b"y", timeout=WAIT, old_style=True)).data == b"re:y"
            with pytest.raises(NoRespondersError):
                await nc.request("nobody.home", b"?", timeout=WAIT)
            await nc.close()
        run(main())


def test_auto_unsubscribe_and_drain(tmp_path):
    with running_gateway(tmp_path) as gw:
        async def main():
            nc = await nats.connect(gw.url())
            sub = await nc.subscribe("n", max_msgs=3)
            for i in range(5):
                await nc.publish("n", b"%d" % i)
            await nc.flush()
            got = [(await sub.next_msg(WAIT)).data for _ in range(3)]
            assert got == [b"0", b"1", b"2"]
            with pytest.raises(Exception):
                await sub.next_msg(0.3)
            seen = []

            async def cb(msg):
                seen.append(msg.data)
            await nc.subscribe("d", cb=cb)
            for i in range(10):
                await nc.publish("d", b"%d" % i)
            await nc.drain()  # flushes, lets callbacks finish, closes
            assert seen == [b"%d" % i for i in range(10)]
        run(main())


def test_captured_subject_is_stored_acked_and_survives_restart(tmp_path):
    with running_gateway(tmp_path, ORDERS) as gw:
        async def main():
            nc = await nats.connect(gw.url())
            live = await nc.subscribe("orders.>")
            acks = []
            for i in range(5):
                msg = await nc.request("orders.eu.new", b"order-%d" % i, timeout=WAIT,
                                       headers={"Trace": "t%d" % i})
                acks.append(json.loads(msg.data))
            got = [await live.next_msg(WAIT) for _ in range(5)]
            assert [m.data for m in got] == [b"order-%d" % i for i in range(5)]
            assert got[0].subject == "orders.eu.new" and got[0].headers == {"Trace": "t0"}
            js = nc.jetstream()
            ack = await js.publish("orders.eu", b"via-js")
            await nc.close()
            return acks, ack
        acks, ack = run(main())
    assert [a["seq"] for a in acks] == [1, 2, 3, 4, 5]
    assert {a["stream"] for a in acks} == {"orders/eu"}
    assert (ack.stream, ack.seq) == ("orders/eu", 6)
    with Broker.open(tmp_path / "data") as broker:  # the gateway has stopped: read its files
        msgs = broker.read_messages("orders", "eu", 0, 0, 10)
    assert [m.payload for m in msgs] == [b"order-%d" % i for i in range(5)] + [b"via-js"]
    first = {k.as_str(): v.as_str() for k, v in msgs[0].headers}
    assert first == {"Trace": "t0", "ferry-nats-subject": "orders.eu.new"}


def test_plain_subject_is_not_stored(tmp_path):
    with running_gateway(tmp_path, ORDERS) as gw:
        async def main():
            nc = await nats.connect(gw.url())
            await nc.publish("orders.us.x", b"not captured: topic orders/us does not exist")
            await nc.flush()
            await nc.close()
        run(main())
    with Broker.open(tmp_path / "data") as broker:
        assert broker.read_messages("orders", "eu", 0, 0, 10) == []


def test_reconnect_after_server_restart(tmp_path):
    port = free_port()
    env = {"FERRY_NATS_PORT": str(port)}

    async def main():
        reconnected = asyncio.Event()

        async def on_reconnect():
            reconnected.set()
        from ferry_harness import GatewayThread
        gw = GatewayThread(gateway_config(tmp_path, "", **env)).start()
        nc = await nats.connect(f"nats://iggy:iggy@127.0.0.1:{port}", reconnected_cb=on_reconnect,
                                reconnect_time_wait=0.2, max_reconnect_attempts=100)
        sub = await nc.subscribe("r")
        await asyncio.to_thread(gw.stop)
        gw = await asyncio.to_thread(lambda: GatewayThread(gateway_config(tmp_path, "", **env)).start())
        try:
            await asyncio.wait_for(reconnected.wait(), 20)
            await nc.publish("r", b"after")  # the subscription was replayed on reconnect
            assert (await sub.next_msg(WAIT)).data == b"after"
            await nc.close()
        finally:
            await asyncio.to_thread(gw.stop)
    run(main())


@pytest.mark.parametrize("creds, good, bad", [
    (("alice", "s3cret", ""), {"user": "alice", "password": "s3cret"}, {"user": "alice", "password": "wrong"}),
    (("", "", "tok"), {"token": "tok"}, {"token": "nope"}),
])
def test_nats_server_mode_user_password_and_token_auth(tmp_path, creds, good, bad):
    # `ferry nats-server --user/--pass` / `--auth`: nats-server's own credentials
    # (Ferry's users under `ferry serve`: test_nats_ferry_auth.py).
    from ferry_harness import GatewayThread
    from gateway.listeners.nats import with_credentials
    cfg = with_credentials(gateway_config(tmp_path, "", FERRY_NATS_AUTH_MODE="nats-server"), *creds)
    gw = GatewayThread(cfg).start()
    try:
        async def main():
            nc = await nats.connect(gw.url(), **good)
            assert nc._server_info.get("auth_required") is True
            await nc.close()
            errors = []

            async def err_cb(e):
                errors.append(e)
            with pytest.raises(Exception) as info:
                await nats.connect(gw.url(), allow_reconnect=False, error_cb=err_cb, **bad)
            assert "authorization violation" in str(info.value).lower()
        run(main())
    finally:
        gw.stop()


def test_slow_consumer_is_closed_without_err_and_others_keep_going(tmp_path):
    # nats.md section 11: past max_pending nats-server closes the slow connection
    # with no -ERR; the publisher and other subscribers are not affected.
    env = {"FERRY_NATS_MAX_PENDING": str(1024 * 1024), "FERRY_NATS_MAX_PAYLOAD": str(64 * 1024)}
    with running_gateway(tmp_path, **env) as gw:
        slow = socket.create_connection(("127.0.0.1", gw.ports["nats"]), timeout=WAIT)
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # and never read: a slow consumer
        slow.sendall(b'CONNECT {"verbose":false,"user":"iggy","pass":"iggy"}\r\nSUB flood 1\r\nPING\r\n')

        async def main():
            nc = await nats.connect(gw.url())
            fast = await nc.subscribe("flood")
            await asyncio.sleep(0.2)  # the slow client's SUB is in
            chunk = b"x" * 32 * 1024
            for _ in range(400):  # 12.5 MiB: far past the slow client's 1 MiB limit
                await nc.publish("flood", chunk)
            await nc.flush()
            got = 0
            while got < 400:
                await fast.next_msg(WAIT)
                got += 1
            await nc.close()
            return got
        assert run(main()) == 400
        slow.settimeout(WAIT)
        received = b""
        while True:  # read what was sent before the close, then EOF
            try:
                chunk = slow.recv(1 << 20)
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
        slow.close()
        assert received.startswith(b"INFO ") and b"-ERR" not in received
        assert received.count(b"MSG flood 1 32768\r\n") < 400
