"""Bridging without sockets: a NATS session on a real broker (issue 4, "Bridging tests").

A NatsServerConnection + NatsSession pair is fed client bytes; what the
broker stored and what the client would be sent are checked directly.
"""

from __future__ import annotations

import pytest

from adapters.nats.connection import NatsServerConnection, ServerInfo
from adapters.nats.events import NEED_DATA
from adapters.nats.outbox import Outbox
from adapters.nats.session import NatsSession
from core.addressing import SUBJECT_HEADER
from core.broker import Broker
from core.header_value import HeaderValue as HV
from core.log import AppendInput
from core.message import Headers

CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\n'

# store: also run with every gateway on a JetStream cluster (make test, docs/scale-out.md "Tests")
pytestmark = pytest.mark.store


@pytest.fixture
def broker(tmp_path):
    with Broker.open(tmp_path) as b:
        b.create_stream("orders")
        b.create_topic("orders", "eu", 1)
        yield b


def client(broker, *data: bytes) -> NatsSession:
    conn = NatsServerConnection(ServerInfo(server_id="TEST"), client_id=1, client_ip="127.0.0.1")
    session = NatsSession(broker, conn, Outbox())
    feed(session, CONNECT, *data)
    return session


def feed(session: NatsSession, *data: bytes) -> bytes:
    conn = session.conn
    for chunk in data:
        conn.receive_data(chunk)
        while (event := conn.next_event()) is not NEED_DATA:
            session.outbox.offer(conn.data_to_send())
            session.handle(event)
    session.outbox.offer(conn.data_to_send())
    return session.outbox.take()


def test_hpub_with_repeated_headers_is_stored_with_headers_in_order(broker):
    block = b"NATS/1.0\r\nA: 1\r\nB: x\r\nA: 2\r\na: 3\r\n\r\n"
    payload = b"order-1"
    client(broker, b"HPUB orders.eu.new %d %d\r\n" % (len(block), len(block) + len(payload))
           + block + payload + b"\r\n")
    (msg,) = broker.read_messages("orders", "eu", 0, 0, 10)
    assert msg.payload == payload
    assert [(k.as_str(), v.as_str()) for k, v in msg.headers] == [
        ("A", "1"), ("B", "x"), ("A", "2"), ("a", "3"), (SUBJECT_HEADER, "orders.eu.new")]


def test_append_through_the_core_api_reaches_a_nats_subscriber_with_typed_headers(broker):
    sub = client(broker, b"SUB orders.> 7\r\n")
    sub.outbox.take()
    headers = Headers()
    headers.add("trace", "abc")
    headers.add("n", HV.uint32(7))
    broker.append("orders", "eu", [AppendInput(payload=b"from-core", headers=headers.encode())])
    out = sub.outbox.take()
    block = b"NATS/1.0\r\ntrace: abc\r\nn: 7\r\nFerry-Header-Kinds: 1:string:uint32\r\n\r\n"
    assert out == (b"HMSG orders.eu 7 %d %d\r\n" % (len(block), len(block) + 9) + block + b"from-core\r\n")


def test_client_without_headers_gets_the_payload_only(broker):
    conn = NatsServerConnection(ServerInfo(server_id="TEST"), client_id=2, client_ip="")
    session = NatsSession(broker, conn, Outbox())
    feed(session, b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB orders.eu 1\r\n')
    session.outbox.take()
    headers = Headers()
    headers.add("trace", "abc")
    broker.append("orders", "eu", [AppendInput(payload=b"p", headers=headers.encode())])
    assert session.outbox.take() == b"MSG orders.eu 1 1\r\np\r\n"


def test_publish_replayed_to_a_subscriber_keeps_the_published_subject(broker):
    listener = client(broker, b"SUB orders.eu.> 1\r\n")
    listener.outbox.take()
    client(broker, b"PUB orders.eu.special 2\r\nhi\r\n")
    assert listener.outbox.take() == b"MSG orders.eu.special 1 2\r\nhi\r\n"
    (msg,) = broker.read_messages("orders", "eu", 0, 0, 10)
    assert msg.headers.get(SUBJECT_HEADER).as_str() == "orders.eu.special"


def test_partition_key_header_picks_the_partition_case_insensitively(broker):
    import xxhash

    broker.create_topic("orders", "keyed", 4)
    block = b"NATS/1.0\r\nferry-partition-key: user-42\r\nFerry-Partition-Key: second\r\n\r\n"
    frame = b"HPUB orders.keyed %d %d\r\n" % (len(block), len(block) + 1) + block + b"x\r\n"
    client(broker, frame, frame)
    want = xxhash.xxh32_intdigest(b"user-42") % 4  # Iggy's messages_key rule, first value wins
    stored = {pid: len(broker.read_messages("orders", "keyed", pid, 0, 10)) for pid in range(4)}
    assert stored == {pid: (2 if pid == want else 0) for pid in range(4)}


def test_publish_to_a_sealed_topic_is_answered_like_jetstream_and_not_stored(broker):
    """A sealed topic (core broker.topic_state.seal_topic) refuses appends; the request's reply
    gets nats-server's JSStreamSealedErr (400, 10109), not a 500."""
    import json

    broker.topic_state.seal_topic("orders", "eu")
    requester = client(broker, b"SUB _INBOX.r 9\r\n")
    requester.outbox.take()
    out = feed(requester, b"PUB orders.eu.new _INBOX.r 2\r\nhi\r\n")
    head, payload, _ = out.split(b"\r\n", 2)
    assert head.startswith(b"MSG _INBOX.r 9 ")
    assert json.loads(payload) == {"error": {"code": 400, "err_code": 10109,
                                             "description": "invalid operation on sealed stream"}}
    assert broker.read_messages("orders", "eu", 0, 0, 10) == []
