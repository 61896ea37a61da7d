"""Iggy over QUIC without sockets: an aioquic client and the server glue wired
back to back (STYLE.md 6.3, aioquic's client_and_server), plus the trio driver
with a real UDP socket is covered by the real-client tests (test_iggy_real_clients.py)."""

from __future__ import annotations

import ssl
import struct

import pytest
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import StreamDataReceived

from adapters.iggy.codec import legacy_request, parse_vsr_reply, vsr_request
from adapters.iggy.events import Deferred
from adapters.iggy.quic import IggyQuicGlue
from adapters.iggy.quic_driver import server_configuration
from adapters.iggy.session import IggySession
from core.broker import Broker

LOGIN_MIDDLE = bytes.fromhex(  # iggy-middle.md 3.1, apache-iggy 0.8.0's login
    "1c000000 26000000 04 69676779 04 69676779 06000000 302e31302e30 00000000".replace(" ", ""))
ADDR = ("127.0.0.1", 4433)


@pytest.fixture
def broker(tmp_path):
    b = Broker.open(tmp_path / "data")
    yield b
    b.close()


class Pair:
    def __init__(self, broker) -> None:
        self.now = 1000.0
        ccfg = QuicConfiguration(is_client=True, server_name="localhost", verify_mode=ssl.CERT_NONE)
        self.client = QuicConnection(configuration=ccfg)
        self.client.connect(ADDR, now=self.now)
        self.server = None
        self.broker = broker
        self.scfg = server_configuration()
        self.glue = None
        self.replies: dict[int, bytes] = {}
        self.exchange()

    def exchange(self) -> None:
        for _ in range(40):  # a fixed number of rounds: enough for a handshake or a request
            self.now += 0.05  # lets aioquic's pacer release the next packets
            for data, _addr in self.client.datagrams_to_send(now=self.now):
                if self.server is None:
                    self.server = QuicConnection(configuration=self.scfg,
                                                 original_destination_connection_id=self.client.original_destination_connection_id)
                    self.glue = IggyQuicGlue(self.server, IggySession(self.broker, client_id=1))
                self.server.receive_datagram(data, ("127.0.0.1", 5555), now=self.now)
            if self.server is not None:
                events = []
                while (ev := self.server.next_event()) is not None:
                    events.append(ev)
                self.glue.feed_events(events)
                self.serve()
                for data, _addr in self.server.datagrams_to_send(now=self.now):
                    self.client.receive_datagram(data, ADDR, now=self.now)
            while (ev := self.client.next_event()) is not None:
                if isinstance(ev, StreamDataReceived):
                    self.replies[ev.stream_id] = self.replies.get(ev.stream_id, b"") + ev.data

    def serve(self) -> None:
        while self.glue.ready:
            stream_id, data = self.glue.ready.popleft()
            event, err = self.glue.request_events(data)
            if err is not None:
                self.glue.fail(stream_id, err)
                continue
            answer = self.glue.session.handle(event)
            if isinstance(answer, Deferred):
                if answer.work is not None:
                    answer.outcome = answer.work()
                else:
                    self.broker.flush()  # the flusher's job: fires the durability ack
                answer = self.glue.session.finish(answer, event.command)
            self.glue.reply(stream_id, answer)

    def request(self, frame: bytes) -> bytes:
        sid = self.client.get_next_available_stream_id()
        self.client.send_stream_data(sid, frame, end_stream=True)
        self.exchange()
        return self.replies.pop(sid)


def test_one_request_per_stream_legacy(broker):
    pair = Pair(broker)
    assert pair.request(legacy_request(1)) == struct.pack("<II", 0, 0)
    assert pair.request(LOGIN_MIDDLE) == struct.pack("<III", 0, 4, 0)
    assert pair.request(legacy_request(201))[:4] == b"\0\0\0\0"


def test_one_request_per_stream_vsr(broker):
    pair = Pair(broker)
    assert parse_vsr_reply(pair.request(vsr_request(2, b"", code=1))) == (2, 0, b"")
    assert parse_vsr_reply(pair.request(vsr_request(2, b"", code=201)))[1] == 40  # not logged in


def test_a_stream_ending_inside_a_frame_closes(broker):
    pair = Pair(broker)
    assert pair.request(legacy_request(1)) == struct.pack("<II", 0, 0)
    sid = pair.client.get_next_available_stream_id()
    pair.client.send_stream_data(sid, legacy_request(1)[:6], end_stream=True)
    pair.exchange()
    assert pair.server._close_event is not None or pair.server._state.name in ("CLOSING", "DRAINING", "TERMINATED")
