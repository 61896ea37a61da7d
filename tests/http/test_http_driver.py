"""The trio driver over memory streams, with trio's autojump clock (STYLE.md section 6.5).

No sockets and no real waiting: timeouts run on virtual time.
"""

from __future__ import annotations

import h2.config
import h2.connection
import h2.events
import pytest
import trio
import trio.testing

from adapters.http.app import HttpApp
from adapters.http.driver import http_session
from adapters.http.limits import HttpLimits
from adapters.http.tokens import TokenService
from core.broker import Broker, BrokerConfig
from core.log import LogConfig
from core.metrics import MetricsRegistry


@pytest.fixture
def app(tmp_path):
    broker = Broker.open(tmp_path / "data", BrokerConfig(log=LogConfig(fsync="never")))
    broker.create_stream("s")
    broker.create_topic("s", "t", 1)
    yield HttpApp(broker, TokenService(b"k" * 32), MetricsRegistry(), clock=trio.current_time)
    broker.close()


LIMITS = HttpLimits(idle_timeout_s=30, request_timeout_s=10)


async def read_all(stream) -> bytes:
    data = b""
    while chunk := await stream.receive_some():
        data += chunk
    return data


async def test_idle_connection_closes_on_virtual_time(app, autojump_clock):
    client, server = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(http_session, app, LIMITS, trio.Event(), server)
        await client.send_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        start = trio.current_time()
        data = await read_all(client)
        assert data.startswith(b"HTTP/1.1 200") and data.endswith(b"pong")
        assert trio.current_time() - start >= LIMITS.idle_timeout_s  # closed by the idle timer, not before
    assert app.counters["connections_open"].value("http") == 0


async def test_partial_request_is_cut_after_request_timeout(app, autojump_clock):
    client, server = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(http_session, app, LIMITS, trio.Event(), server)
        await client.send_all(b"GET /ping HTTP/1.1\r\n")
        start = trio.current_time()
        assert await read_all(client) == b""
        elapsed = trio.current_time() - start
        assert LIMITS.request_timeout_s <= elapsed < LIMITS.idle_timeout_s


async def test_drain_closes_an_idle_connection_at_once(app, autojump_clock):
    client, server = trio.testing.memory_stream_pair()
    drain = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(http_session, app, LIMITS, drain, server)
        await client.send_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        await trio.sleep(1)
        start = trio.current_time()
        drain.set()
        data = await read_all(client)
        assert data.endswith(b"pong") and trio.current_time() - start < LIMITS.idle_timeout_s


async def test_h2_reset_cancels_a_parked_long_poll(app, autojump_clock):
    client_stream, server = trio.testing.memory_stream_pair()
    token, _ = app.tokens.issue(0)
    h2c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
    h2c.initiate_connection()
    h2c.send_headers(1, [(b":method", b"GET"), (b":path", b"/streams/s/topics/t/messages?wait_ms=50000"),
                         (b":scheme", b"http"), (b":authority", b"x"),
                         (b"authorization", b"Bearer " + token.encode())], end_stream=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(http_session, app, LIMITS, trio.Event(), server)
        await client_stream.send_all(h2c.data_to_send())
        await trio.sleep(1)  # virtual: the poll is parked on the partition now
        assert app.broker.live._waiters  # one waiter registered
        h2c.reset_stream(1)
        await client_stream.send_all(h2c.data_to_send())
        await trio.sleep(1)
        assert not app.broker.live._waiters  # the reset cancelled the parked task and its waiter
        # the connection still serves new streams
        h2c.send_headers(3, [(b":method", b"GET"), (b":path", b"/ping"), (b":scheme", b"http"),
                             (b":authority", b"x")], end_stream=True)
        await client_stream.send_all(h2c.data_to_send())
        got = []
        while not any(isinstance(e, h2.events.StreamEnded) and e.stream_id == 3 for e in got):
            got += h2c.receive_data(await client_stream.receive_some())
        assert b"".join(e.data for e in got if isinstance(e, h2.events.DataReceived)) == b"pong"
        await client_stream.aclose()


async def test_connections_over_capacity_are_closed_at_once(app, autojump_clock):
    limits = HttpLimits(max_connections=1)
    first_client, first_server = trio.testing.memory_stream_pair()
    second_client, second_server = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(http_session, app, limits, trio.Event(), first_server)
        await trio.sleep(0)
        nursery.start_soon(http_session, app, limits, trio.Event(), second_server)
        assert await read_all(second_client) == b""  # refused without a byte
        assert app.counters["connections_refused"].value("http") == 1
        await first_client.send_all(b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert (await read_all(first_client)).endswith(b"pong")
