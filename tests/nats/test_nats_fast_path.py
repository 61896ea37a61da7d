"""The PUB batch path agrees with the general path (docs/nats.md, "Performance").

``ServerCodec.scan_pubs``, ``NatsServerConnection.next_pubs`` and
``NatsSession.publish_batch`` parse and fan out runs of plain PUBs without an
event per message. Each is checked against the event-by-event path it
shortcuts: the same events, errors and replies for any stream split at any
point (whole, random cuts, one byte at a time), and the same bytes queued for
every subscriber (STYLE.md section 6).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.nats.codec import ServerCodec
from adapters.nats.connection import NatsServerConnection, ServerInfo
from adapters.nats.errors import NatsError
from adapters.nats.events import NEED_DATA, Pub
from adapters.nats.outbox import Outbox
from adapters.nats.session import NatsSession
from core.broker import Broker

from natsproto_helpers import chunks_at, codec_run, new_conn, one_byte_chunks, run_conn
from test_nats_properties import CUTS, JUNK, LIMITS, OPS

CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true,"protocol":1}\r\n'

# PUBs in the exact form the batch path takes, with subjects and replies that
# hit the reserved prefixes nats-server refuses (connection.py _publish_refusal).
SUBJ = st.sampled_from(["a", "a.b", "bench", "_INBOX.x", "_GR_.x", "$NRG.y", "$SYS.z", "_R_", "orders.eu"])
REPLY = st.sampled_from(["", "_INBOX.r", "_R_.r", "$JS.ACK.r", "$JS.ACK.", "_GR_.r", "r.s"])


@st.composite
def plain_pub(draw):
    subject, reply = draw(SUBJ), draw(REPLY)
    payload = draw(st.binary(max_size=30))
    return (f"PUB {subject}{' ' + reply if reply else ''} {len(payload)}\r\n".encode()
            + payload + b"\r\n")


STREAM = st.lists(st.one_of(plain_pub(), plain_pub(), OPS.map(lambda op: op[0]), JUNK),
                  min_size=1, max_size=14).map(b"".join).filter(bool)   # b"" would mean EOF


def _as_pubs(batch: list) -> list[Pub]:
    return [Pub(subject, reply, bytes(payload)) for subject, reply, _arg, payload in batch]


def fast_codec_run(chunks, *, headers=True, connect_only=False, refuse=None, **limits):
    """codec_run with ``scan_pubs`` tried before every ``next_event``."""
    codec = ServerCodec(**limits)
    codec.allow_headers, codec.connect_only = headers, connect_only
    events, batch = [], []
    try:
        for chunk in chunks:
            codec.receive_data(chunk)
            while True:
                if codec.scan_pubs(batch, refuse):
                    events += _as_pubs(batch)
                    batch.clear()
                event = codec.next_event()
                if event is NEED_DATA:
                    break
                events.append(event)
    except NatsError as err:
        return events, err.text, True
    return events, None, False


def slow_codec_run(chunks, **kw):
    events, err = codec_run(chunks, **kw)
    return events, err and err.text, err is not None


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(STREAM, CUTS, LIMITS, st.booleans(), st.booleans())
def test_scan_pubs_same_outcome_as_next_event(stream, cuts, limits, headers, connect_only):
    kw = dict(limits, headers=headers, connect_only=connect_only)
    expected = slow_codec_run([stream], **kw)
    assert fast_codec_run([stream], **kw) == expected
    assert fast_codec_run(chunks_at(stream, cuts), **kw) == expected
    assert fast_codec_run(one_byte_chunks(stream), **kw) == expected


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(STREAM, CUTS)
def test_scan_pubs_refused_frames_are_left_for_next_event(stream, cuts):
    """A refused PUB is not consumed: next_event returns it, in order."""
    seen = []

    def refuse(subject, reply):
        seen.append((subject, reply))
        return subject.startswith("$") or reply.startswith("$")

    expected = slow_codec_run([stream])
    assert fast_codec_run(chunks_at(stream, cuts), refuse=refuse) == expected
    assert all(s[0] in "_$" or r[:1] in ("_", "$") for s, r in seen)


def test_scan_pubs_batches_a_whole_receive_and_keeps_the_rest():
    codec = ServerCodec()
    codec.receive_data(b"PUB a 1\r\nx\r\nPUB b r 2\r\nyy\r\nPUB  c 0\r\n\r\nPUB d 5\r\nab")
    batch: list = []
    assert codec.scan_pubs(batch) == 2
    assert [(s, r, bytes(a), bytes(p)) for s, r, a, p in batch] == [
        ("a", "", b"a 1\r\n", b"x"), ("b", "r", b"b r 2\r\n", b"yy")]  # arg keeps its CRLF for MSG
    assert codec.scan_pubs(batch) == 0            # two blanks: the general path's job
    assert codec.next_event() == Pub("c", "", b"")
    assert codec.scan_pubs(batch) == 0            # payload incomplete
    codec.receive_data(b"cde\r\n")
    assert codec.scan_pubs(batch) == 1 and bytes(batch[-1][3]) == b"abcde"


def test_scan_pubs_leaves_over_limit_sizes_to_the_general_path():
    codec = ServerCodec(max_payload=4)
    codec.receive_data(b"PUB a 5\r\nhello\r\n")
    assert codec.scan_pubs([]) == 0
    with pytest.raises(NatsError) as info:
        codec.next_event()
    assert info.value.text == "Maximum Payload Violation"


# -- the connection: next_pubs only where _on_pub would change nothing --------------
def fast_conn_outcome(conn: NatsServerConnection, chunks):
    events, batch = [], []
    try:
        for chunk in chunks:
            conn.receive_data(chunk)
            while True:
                if conn.next_pubs(batch):
                    events += _as_pubs(batch)
                    batch.clear()
                event = conn.next_event()
                if event is NEED_DATA:
                    break
                events.append(event)
    except NatsError as err:
        return events, err.text, True, conn.data_to_send()
    return events, None, False, conn.data_to_send()


def slow_conn_outcome(conn: NatsServerConnection, chunks):
    events, err = run_conn(conn, chunks)
    return events, err and err.text, err is not None, conn.data_to_send()


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(STREAM, CUTS, st.sampled_from([b"", CONNECT, b'CONNECT {"verbose":true}\r\n',
                                      b'CONNECT {"verbose":false,"pedantic":true}\r\n']))
def test_next_pubs_same_events_and_replies(stream, cuts, connect):
    """Reserved prefixes, verbose +OK, pedantic checks and telnet defaults
    (no CONNECT yet) all come out as the general path makes them."""
    data = connect + stream
    expected = slow_conn_outcome(new_conn(), [data])
    assert fast_conn_outcome(new_conn(), [data]) == expected
    assert fast_conn_outcome(new_conn(), chunks_at(data, cuts)) == expected
    assert fast_conn_outcome(new_conn(), one_byte_chunks(data)) == expected


def test_next_pubs_refused_with_auth_pending_or_permissions():
    info = ServerInfo("NTEST", auth_required=True)
    conn = new_conn(info=info, authenticate=lambda c: True)
    conn.receive_data(b"PUB a 1\r\nx\r\n")
    assert conn.next_pubs([]) == 0
    with pytest.raises(NatsError) as err:
        conn.next_event()
    assert err.value.text == "Authorization Violation"

    class OnlyB:
        def can_publish(self, subject):
            return subject == "b"

        def can_subscribe(self, subject, queue):
            return True

    conn = new_conn(permissions=OnlyB())
    conn.receive_data(CONNECT + b"PUB a 1\r\nx\r\n")
    assert conn.next_pubs([]) == 0
    events = []
    while (event := conn.next_event()) is not NEED_DATA:
        events.append(event)
    assert b"Permissions Violation for Publish to \"a\"" in conn.data_to_send()
    assert not any(isinstance(e, Pub) for e in events)


# -- the session: the same bytes for every subscriber --------------------------------
SESSION_SUBS = [b"SUB a 1\r\n", b"SUB a.* 2\r\nSUB > 3\r\n", b"SUB _INBOX.> 4\r\n",
                b"SUB bench 5\r\nUNSUB 5 3\r\n", b"SUB orders.> 6\r\n", b"SUB r.s 7\r\n"]


def _session(broker, cid: int, max_pending: int | None = None) -> NatsSession:
    conn = NatsServerConnection(ServerInfo("NTEST"), client_id=cid, client_ip="")
    return NatsSession(broker, conn, Outbox() if max_pending is None else Outbox(max_pending))


def _feed_general(session: NatsSession, chunks) -> None:
    conn = session.conn
    for chunk in chunks:
        conn.receive_data(chunk)
        while (event := conn.next_event()) is not NEED_DATA:
            session.outbox.offer(conn.data_to_send())
            session.handle(event)
    session.outbox.offer(conn.data_to_send())


def _feed_batch(session: NatsSession, chunks) -> None:
    conn = session.conn
    for chunk in chunks:
        conn.receive_data(chunk)
        session.process()
    session.outbox.offer(conn.data_to_send())


def _deliveries(tmp_path, name: str, stream: bytes, cuts, feed, echo: bool) -> list[bytes]:
    with Broker.open(tmp_path / name) as broker:
        broker.create_stream("orders")
        broker.create_topic("orders", "eu", 1)
        subscribers = [_session(broker, 10 + i) for i in range(len(SESSION_SUBS))]
        for session, subs in zip(subscribers, SESSION_SUBS):
            _feed_general(session, [CONNECT, subs])
        publisher = _session(broker, 1)
        connect = CONNECT if echo else CONNECT.replace(b"{", b'{"echo":false,')
        _feed_general(publisher, [connect, b"SUB a 99\r\nSUB _INBOX.r 98\r\n"])
        feed(publisher, chunks_at(stream, cuts))
        return [s.outbox.take() for s in [publisher, *subscribers]] + [
            repr((publisher.msgs_in, publisher.bytes_in, [(s.msgs_out, s.bytes_out) for s in subscribers]))
            .encode()]


@settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
          deadline=None)
@given(st.lists(plain_pub(), min_size=1, max_size=12).map(b"".join), CUTS, st.booleans())
def test_publish_batch_queues_the_same_bytes(tmp_path_factory, stream, cuts, echo):
    """Plain, wildcard and max_msgs subscribers, echo off, no-responders, a
    captured (stored) subject: each client gets the same bytes either way."""
    tmp = tmp_path_factory.mktemp("fast")
    general = _deliveries(tmp, "general", stream, cuts, _feed_general, echo)
    batched = _deliveries(tmp, "batched", stream, [], _feed_batch, echo)
    assert batched == general


def test_a_run_to_a_client_with_two_matching_subscriptions_keeps_message_order(tmp_path):
    """Runs of one subject are rendered per sid, except for a client holding two
    matching subscriptions: it gets message 1 for each sid, then message 2."""
    stream = b"PUB a.b 1\r\nx\r\nPUB a.b 1\r\ny\r\nPUB a.b 1\r\nz\r\n"
    assert _deliveries(tmp_path, "batched", stream, [], _feed_batch, True) == \
        _deliveries(tmp_path, "general", stream, [], _feed_general, True)
    with Broker.open(tmp_path / "order") as broker:
        sub = _session(broker, 10)
        _feed_general(sub, [CONNECT, b"SUB a.* 2\r\nSUB > 3\r\n"])
        publisher = _session(broker, 1)
        _feed_batch(publisher, [CONNECT + stream])
        frames = sub.outbox.take().split(b"MSG ")[1:]
        assert [f[-3:-2] for f in frames] == [b"x", b"x", b"y", b"y", b"z", b"z"]
        assert {f.split(b" ")[1] for f in frames[:2]} == {b"2", b"3"}


def test_publish_batch_queue_group_member_gets_each_message_once(tmp_path):
    with Broker.open(tmp_path) as broker:
        broker.live._rng = random.Random(7)   # noqa: SLF001 - deterministic pick
        members = [_session(broker, 10 + i) for i in range(3)]
        for session in members:
            _feed_general(session, [CONNECT, b"SUB q workers 1\r\n"])
        plain = _session(broker, 20)
        _feed_general(plain, [CONNECT, b"SUB q 1\r\n"])
        publisher = _session(broker, 1)
        _feed_batch(publisher, [CONNECT + b"PUB q 2\r\nhi\r\n" * 30])
        got = [m.outbox.take().count(b"MSG q 1 2\r\nhi\r\n") for m in members]
        assert sum(got) == 30
        assert plain.outbox.take().count(b"MSG q 1 2\r\nhi\r\n") == 30


def _slow_run(tmp_path, feed) -> tuple:
    with Broker.open(tmp_path) as broker:
        slow = _session(broker, 10, max_pending=100)
        _feed_general(slow, [CONNECT, b"SUB s 1\r\n"])
        publisher = _session(broker, 1)
        feed(publisher, [CONNECT, (b"PUB s 40\r\n" + b"x" * 40 + b"\r\n") * 5])
        return slow.slow, slow.msgs_out, slow.outbox.pending, slow.outbox.take()


def test_publish_batch_slow_consumer_same_as_general_path(tmp_path):
    batched = _slow_run(tmp_path / "b", _feed_batch)
    assert batched == _slow_run(tmp_path / "g", _feed_general)
    assert batched[0] is True


def _stall_run(tmp_path, feed) -> tuple:
    """A subscriber with a 1000-byte outbox (high water 750) fed 54-byte MSGs."""
    with Broker.open(tmp_path) as broker:
        sub = _session(broker, 10, max_pending=1000)
        _feed_general(sub, [CONNECT, b"SUB s 1\r\n"])
        sub.outbox.take()
        publisher = _session(broker, 1)
        feed(publisher, [CONNECT + b"SUB s 2\r\n"])
        seen = []
        for _ in range(16):
            feed(publisher, [b"PUB s 40\r\n" + b"x" * 40 + b"\r\n"])
            seen.append(sub.outbox in publisher.stalled)
        return seen, sub.outbox.pending, sub.slow


def test_producer_stall_marks_past_high_water_in_both_paths(tmp_path):
    """nats-server stalls a fast producer once a consumer is past its mark
    (nats.md section 11); its own outbox never stalls it that way."""
    batched = _stall_run(tmp_path / "b", _feed_batch)
    assert batched == _stall_run(tmp_path / "g", _feed_general)
    seen, pending, slow = batched
    assert seen == [54 * (i + 1) > 750 for i in range(16)] and pending == 16 * 54 and not slow


def test_outbox_counts_bytes_in_flight_until_written():
    outbox = Outbox(100)
    outbox.offer(b"x" * 60)
    data = outbox.take_for_write()
    assert data == b"x" * 60 and not outbox.frames and outbox.pending == 60
    outbox.offer(b"y" * 10)
    outbox.written(60)
    assert outbox.pending == 10 and outbox.high_water == 75


def test_write_now_sends_only_while_the_writer_is_parked_and_keeps_order():
    class Drained:
        sets = 0

        def set(self):
            self.sets += 1

    took: list[bytes] = []
    room = [5]

    def direct(frames):  # a socket that takes room[0] bytes, then would block
        data = b"".join(frames)
        n = min(len(data), room[0])
        took.append(data[:n])
        return n

    wakes = []
    outbox = Outbox(100, lambda: wakes.append(1))
    outbox.direct, outbox.drained = direct, Drained()
    outbox.offer(b"MSG 1\r\n")
    outbox.write_now()                        # the writer task is busy: nothing is written here
    assert took == [] and outbox.pending == 7
    outbox.writer_idle = True
    outbox.write_now()                        # 5 bytes go, the rest is first in line for the writer
    assert took == [b"MSG 1"] and outbox.pending == 2 and len(wakes) == 2
    outbox.offer(b"PONG\r\n")
    outbox.offer(b"+OK\r\n")
    room[0] = 6                               # across a frame boundary: "\r\n" and "PONG"
    outbox.write_now()
    assert took[-1] == b"\r\nPONG" and outbox.pending == 7
    assert [bytes(f) for f in outbox.frames] == [b"\r\n", b"+OK\r\n"]
    room[0] = 100
    outbox.write_now()
    assert took[-1] == b"\r\n+OK\r\n" and outbox.pending == 0 and not outbox.frames
    assert outbox.drained.sets == 3
    room[0] = 0
    outbox.offer(b"MSG 2\r\n")
    outbox.write_now()                        # would block: all of it stays for the writer task
    assert outbox.frames == [b"MSG 2\r\n"] and outbox.pending == 7
    calls = len(took)
    outbox.closed = True
    outbox.frames.append(b"late")
    outbox.write_now()                        # a closed outbox is left alone
    assert len(took) == calls


def test_wakeup_with_two_waiters_rearms_once():
    """A reader over its high water mark and a producer stalled on the same
    outbox both wait on its drained wake-up; each later set reaches both
    (re-arming on every wake lost the other waiter's wake-ups)."""
    import trio
    import trio.testing

    from adapters.nats.driver import _Wakeup

    async def main():
        wakeup, woken = _Wakeup(), []

        async def waiter(name):
            for _ in range(3):
                await wakeup.wait()
                woken.append(name)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter, "reader")
            nursery.start_soon(waiter, "producer")
            for _ in range(3):
                await trio.testing.wait_all_tasks_blocked()
                wakeup.set()
        return sorted(woken)

    assert trio.run(main) == ["producer"] * 3 + ["reader"] * 3


def test_the_writer_sends_frames_gathered_in_order_through_a_full_socket():
    """Plain TCP: the writer task sends the queued frames as they are (no join),
    waiting for room when the socket is full; frames queued meanwhile follow in
    order, and every byte is counted written (pending back to 0)."""
    import socket
    from types import SimpleNamespace

    import trio

    from adapters.nats.driver import _write_gathered

    class Drained:
        sets = 0

        def set(self):
            self.sets += 1

    async def main():
        a, b = socket.socketpair()
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        ours, theirs = trio.socket.from_stdlib_socket(a), trio.socket.from_stdlib_socket(b)
        outbox = Outbox(1 << 30)
        payload = bytes(range(256)) * 64  # 16 KiB, the same object for every frame (as a fan-out queues it)
        expected = []
        for i in range(40):
            hdr = f"MSG s {i} {len(payload)}\r\n".encode()
            outbox.offer(hdr)
            outbox.frames += (payload, b"\r\n")
            outbox.pending += len(payload) + 2
            expected += (hdr, payload, b"\r\n")
        got = bytearray()
        drained = Drained()

        async def reader():
            while len(got) < sum(map(len, expected)):
                await trio.sleep(0.001)  # a slow reader: the socket fills and the writer must wait
                got.extend(await theirs.recv(3000))

        session = SimpleNamespace(outbox=outbox, slow=False)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            await _write_gathered(ours, session, drained)
        assert bytes(got) == b"".join(expected)
        assert outbox.pending == 0 and not outbox.frames and drained.sets > 1
        theirs.close()
        outbox.offer(b"PING\r\n" * 100_000)  # the peer is gone: the connection ends as with send_all
        with pytest.raises(trio.BrokenResourceError):
            await _write_gathered(ours, session, drained)
        session.slow = True  # a slow consumer's queue is dropped with the connection, not sent
        await _write_gathered(ours, session, drained)
        assert outbox.frames
        ours.close()

    trio.run(main)
