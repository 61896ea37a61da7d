"""The trio driver over in-memory streams (STYLE.md 6.5): lockstep replies,
durability-gated send acks, fatal framing closes, other connections go on."""

from __future__ import annotations

import struct

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.iggy.codec import legacy_request
from adapters.iggy.connection import IggyServerConnection
from adapters.iggy.driver import iggy_connection
from adapters.iggy.events import NEED_DATA, Reply
from adapters.iggy.messages import WireMessage
from adapters.iggy.spec import COMMANDS
from adapters.iggy.types import ConsumerId, PartitioningValue, Strategy

LIMIT_S = 30  # hard per-test limit, not a timing assertion


def frame(command: str, /, dialect: int = 2, **values) -> bytes:
    cmd = COMMANDS.by_name[command]
    return legacy_request(cmd.code, cmd.encode(dialect, cmd.make(**values)))


async def reply(stream) -> tuple[int, bytes]:
    head = b""
    while len(head) < 8:
        head += await stream.receive_some(8 - len(head))
    status, length = struct.unpack("<II", head)
    body = b""
    while len(body) < length:
        body += await stream.receive_some(length - len(body))
    return status, body


async def test_lockstep_session_with_durable_send(broker, nursery):
    with trio.fail_after(LIMIT_S):
        client, server = trio.testing.memory_stream_pair()
        nursery.start_soon(iggy_connection, broker, server)
        await client.send_all(legacy_request(1))
        assert await reply(client) == (0, b"")
        await client.send_all(frame("user.login", username="iggy", password="iggy", version="0.10.0"))
        assert await reply(client) == (0, struct.pack("<I", 0))
        await client.send_all(frame("stream.create", name="s"))
        assert (await reply(client))[0] == 0
        await client.send_all(frame("topic.create", stream_id="s", partitions_count=1, name="t"))
        assert (await reply(client))[0] == 0
        await client.send_all(frame("message.send", stream_id="s", topic_id="t",
                                    partitioning=PartitioningValue(2, bytes(4)),
                                    messages=(WireMessage(0, b"x", b"", 1),)))
        assert await reply(client) == (0, b"")  # sent once the flusher made it durable
        assert broker.partition("s", "t", 0).durable_next_offset == 1
        await client.aclose()


async def test_fatal_frame_gets_status_then_close(broker, nursery):
    with trio.fail_after(LIMIT_S):
        client, server = trio.testing.memory_stream_pair()
        nursery.start_soon(iggy_connection, broker, server)
        await client.send_all(legacy_request(1))
        assert await reply(client) == (0, b"")
        await client.send_all(struct.pack("<II", 1, 1))  # length below 4
        assert await reply(client) == (3, b"")
        assert await client.receive_some(10) == b""  # closed


@settings(max_examples=50, deadline=None)
@given(cuts=st.lists(st.integers(0, 400), max_size=8))
def test_arbitrary_splits_do_not_change_events(cuts):
    poll = bytes.fromhex("01010400000000020273310202743101000000000100000000000000000a00000000")
    data = (legacy_request(1) + frame("user.login", username="iggy", password="iggy", version="0.10.0")
            + legacy_request(100, poll))

    def run(chunks):
        conn, out = IggyServerConnection(), []
        for chunk in chunks:
            conn.receive_data(chunk)
            while (ev := conn.next_event()) is not NEED_DATA:
                out.append(ev)
                conn.send(Reply(0))
        return out

    points = sorted({min(c, len(data)) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]
    assert run(chunks) == run([data])


async def test_pipelined_sends_are_answered_in_order_after_durability(broker, nursery):
    """A producer that does not wait (the raw bench generator, driver.MAX_PIPELINED):
    every request is answered, in order, each send only once durable; a poll
    queued behind sends sees their records."""
    with trio.fail_after(LIMIT_S):
        client, server = trio.testing.memory_stream_pair()
        nursery.start_soon(iggy_connection, broker, server)
        await client.send_all(frame("user.login", username="iggy", password="iggy", version="0.10.0"))
        assert (await reply(client))[0] == 0
        await client.send_all(frame("stream.create", name="s") + frame("topic.create", stream_id="s",
                                                                           partitions_count=1, name="t"))
        assert (await reply(client))[0] == 0 and (await reply(client))[0] == 0
        sends = [frame("message.send", stream_id="s", topic_id="t", partitioning=PartitioningValue(2, bytes(4)),
                       messages=tuple(WireMessage(0, b"m%d.%d" % (i, j), b"", 1) for j in range(3)))
                 for i in range(10)]
        poll = frame("message.poll", consumer=ConsumerId(1, 1), stream_id="s", topic_id="t", partition_id=0,
                     strategy=Strategy(1, 0), count=100)
        bad = legacy_request(9999)
        await client.send_all(b"".join(sends) + bad + poll + legacy_request(1))
        for _ in sends:
            assert await reply(client) == (0, b"")
        assert (await reply(client))[0] == 3  # the unknown code, answered in its place
        status, body = await reply(client)
        assert status == 0 and struct.unpack_from("<I", body, 12)[0] == 30
        assert await reply(client) == (0, b"")  # ping
        assert broker.partition("s", "t", 0).durable_next_offset == 30
        await client.aclose()


async def test_a_connection_that_never_logs_in_is_closed_after_the_login_timeout(broker, nursery, monkeypatch):
    """docs/security.md "Floods": pings do not keep an unauthenticated connection open;
    a logged-in one stays, and so does one that logged out and in again."""
    import adapters.iggy.driver as driver

    monkeypatch.setattr(driver, "LOGIN_TIMEOUT_S", 0.3)
    with trio.fail_after(LIMIT_S):
        idle, server = trio.testing.memory_stream_pair()
        nursery.start_soon(iggy_connection, broker, server)
        ready, server2 = trio.testing.memory_stream_pair()
        nursery.start_soon(iggy_connection, broker, server2)
        await ready.send_all(frame("user.login", username="iggy", password="iggy", version="0.10.0"))
        assert (await reply(ready))[0] == 0
        closed = False
        with trio.move_on_after(5):
            while not closed:   # a ping every 50 ms: answered until the deadline, then closed
                try:
                    await idle.send_all(legacy_request(1))
                    head = await idle.receive_some(8)
                except trio.BrokenResourceError:
                    head = b""
                closed = head == b""
                assert closed or head == bytes(8)
                await trio.sleep(0.05)
        assert closed
        await trio.sleep(0.4)   # past the deadline: the logged-in connection is still served
        await ready.send_all(frame("user.logout"))
        assert (await reply(ready))[0] == 0
        await ready.send_all(legacy_request(1))
        assert await reply(ready) == (0, b"")
        await ready.aclose()


async def test_connections_past_max_connections_are_closed_at_once(broker, nursery):
    from adapters.iggy.driver import IggyMeter

    meter = IggyMeter(broker, "iggy_limits_test")
    with trio.fail_after(LIMIT_S):
        first, server = trio.testing.memory_stream_pair()
        nursery.start_soon(lambda: iggy_connection(broker, server, meter=meter, max_connections=1))
        await first.send_all(legacy_request(1))
        assert await reply(first) == (0, b"")
        second, server2 = trio.testing.memory_stream_pair()
        nursery.start_soon(lambda: iggy_connection(broker, server2, meter=meter, max_connections=1))
        assert await second.receive_some(8) == b""       # refused: closed without an answer
        assert meter.c["connections_refused"].value("iggy_limits_test") == 1
        await first.send_all(legacy_request(1))            # the first is unaffected
        assert await reply(first) == (0, b"")
        await first.aclose()
