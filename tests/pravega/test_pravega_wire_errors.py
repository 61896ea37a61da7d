"""Malformed input on the wire, against a running gateway (both Pravega listeners).

Each case sends what a broken or hostile client might and expects what the
real server does (pravega.md sections 1 and 5.2: the connection is closed;
where Ferry's mapping says a reply comes first, section 12, that reply) --
then checks that the listener still serves a fresh connection and that the
events stored before are intact, read back through that second connection.
No case may log a traceback: a protocol error is the client's fault, not ours.
"""

from __future__ import annotations

import base64
import logging
import socket
import struct
import uuid

import h2.config
import h2.connection
import h2.events
import pytest

from adapters.pravega import commands as C
from adapters.pravega import controller_proto as P
from adapters.pravega.codec import NEED_DATA, FrameDecoder, event_frame
from adapters.pravega.errors import PravegaProtocolError
from ferry_harness import running_gateway

BINDING = '[[binding]]\nstream = "sc"\ntopic = "st"\ncreate = true\npartitions = 1\n'
SEG = "sc/st/0.#epoch.0"
BEFORE = [b"stored-before-1", b"stored-before-2"]
HELLO = C.encode(C.Hello(high_version=15, low_version=5))
TIMEOUT_S = 10
ROOT_BASIC = "Basic " + base64.b64encode(b"iggy:iggy").decode()  # the root user's default credentials
TOKEN = {"value": ""}  # the current gateway's delegation token for sc/st (login())


def login(gw) -> str:
    """Log in as the root user at the controller and keep its delegation token for sc/st:
    every segment-store request below carries it, as the real client's do."""
    body, trailers = grpc_call(gw.ports["pravega_controller"], "getDelegationToken",
                               P.StreamInfo(scope="sc", stream="st").encode(), authorization=ROOT_BASIC)
    assert trailers[b"grpc-status"] == b"0", trailers
    TOKEN["value"] = P.DelegationToken.decode(body).delegation_token
    return TOKEN["value"]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    with running_gateway(tmp_path_factory.mktemp("pravega-wire"), BINDING, FERRY_PRAVEGA_TAIL_PARK_MS="100") as gw:
        login(gw)
        with Conn(gw.ports["pravega"]) as c:  # the data every case checks afterwards
            writer = uuid.uuid4()
            c.request(C.SetupAppend(request_id=1, writer_id=writer, segment=SEG, delegation_token=TOKEN["value"]))
            data = b"".join(map(event_frame, BEFORE))
            ack = c.request(C.AppendBlockEnd(writer_id=writer, size_of_whole_events=len(data), data=data,
                                             num_events=2, last_event_number=2, request_id=2))
            assert isinstance(ack, C.DataAppended) and ack.event_number == 2
        yield gw


class Logs:
    def __init__(self, caplog) -> None:
        self.caplog = caplog

    def records(self) -> list:  # the handler may see a record twice (here and at the root)
        # Only the gateway's own records: caplog also sees the root logger, where another
        # test's garbage (asyncio's "Unclosed client session" of an aiohttp session that a
        # test on this worker left behind, collected now) can land at ERROR level.
        return list({id(r): r for r in self.caplog.records if r.name.startswith("ferry")}.values())

    def errors(self) -> list:
        return [r for r in self.records() if r.levelno >= logging.ERROR or r.exc_info]

    def closed_for_protocol_errors(self) -> int:
        return sum("protocol error" in r.getMessage() for r in self.records())


@pytest.fixture
def logs(caplog):
    """The Pravega loggers' records while the test runs (the handler sits on the adapter's
    logger itself, so it sees them whatever the gateway's log setup did)."""
    logger = logging.getLogger("ferry.pravega")
    caplog.set_level(logging.INFO, logger="ferry.pravega")
    logger.addHandler(caplog.handler)
    try:
        yield Logs(caplog)
    finally:
        logger.removeHandler(caplog.handler)


class Conn:
    """A blocking client socket speaking the segment store's framing."""

    def __init__(self, port: int, hello: bool = True) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
        self.decoder = FrameDecoder()
        if hello:
            assert self.request(C.Hello(high_version=15, low_version=5)) == C.Hello(15, 5)

    def __enter__(self) -> "Conn":
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()

    def request(self, cmd):
        self.sock.sendall(C.encode(cmd))
        return self.next_reply()

    def next_reply(self):
        while (reply := self.decoder.next_event()) is NEED_DATA:
            data = self.sock.recv(1 << 16)
            assert data, "the server closed the connection"
            self.decoder.receive_data(data)
        return reply

    def until_closed(self) -> list:
        """Every reply until the server closes; fails if it does not within the timeout."""
        got = []
        while True:
            try:
                data = self.sock.recv(1 << 16)
            except ConnectionResetError:
                data = b""
            self.decoder.receive_data(data)
            try:
                while (reply := self.decoder.next_event()) is not NEED_DATA:
                    got.append(reply)
            except PravegaProtocolError:
                pass  # EOF inside a frame: what came before it is what we got
            if not data:
                return got


def read_back(port: int) -> list[bytes]:
    with Conn(port) as c:
        reply = c.request(C.ReadSegment(segment=SEG, offset=0, suggested_length=1 << 16,
                                        delegation_token=TOKEN["value"], request_id=3))
    assert isinstance(reply, C.SegmentRead) and reply.offset == 0 and reply.request_id == 3
    view, out = memoryview(reply.data), []
    while view:
        _code, length = struct.unpack_from(">ii", view)
        out.append(bytes(view[8:8 + length]))
        view = view[8 + length:]
    return out


def setup(writer: uuid.UUID) -> bytes:
    return C.encode(C.SetupAppend(request_id=1, writer_id=writer, segment=SEG, delegation_token=TOKEN["value"]))


def block_end(writer: uuid.UUID, data: bytes, num: int = 1, last: int = 1) -> bytes:
    return C.encode(C.AppendBlockEnd(writer_id=writer, size_of_whole_events=len(data), data=data, num_events=num,
                                     last_event_number=last, request_id=9))


W = uuid.UUID(int=0xABC)
KEEPALIVE = C.encode(C.KeepAlive())
# (name, bytes after the Hello, shut the write side after sending, reply types expected before the close)
CASES = [
    ("truncated-frame-then-eof", KEEPALIVE + HELLO[:11], True, [C.KeepAlive]),
    ("eof-inside-a-header", HELLO[:5], True, []),
    ("negative-length", struct.pack(">ii", 100, -1), False, []),
    ("oversized-length", struct.pack(">ii", 9, 0x01000000), False, []),
    ("unknown-type", struct.pack(">ii", 6, 0), False, []),
    ("retired-type", struct.pack(">ii", 72, 0), False, []),
    ("event-at-top-level", C.encode(C.Event(data=b"x")), False, []),
    ("short-payload", struct.pack(">ii", 1, 3) + b"abc", False, []),
    ("append-from-a-writer-never-set-up", block_end(W, event_frame(b"x")), False, []),
    ("append-block-then-something-else", C.encode(C.AppendBlock(writer_id=W, data=event_frame(b"x"))) + KEEPALIVE,
     False, []),
    # (a callable: its SetupAppend carries the token of the gateway the test runs against)
    ("bad-inner-frame-type", lambda: setup(W) + block_end(W, struct.pack(">ii", 1, 1) + b"x"), False,
     [C.AppendSetup, C.ErrorMessage]),
    ("inner-event-cut-short", lambda: setup(W) + block_end(W, struct.pack(">ii", 0, 9) + b"x"), False,
     [C.AppendSetup, C.ErrorMessage]),
    ("event-count-mismatch", lambda: setup(W) + block_end(W, event_frame(b"x"), num=2, last=2), False,
     [C.AppendSetup]),
    ("hello-without-overlap", C.encode(C.Hello(high_version=30, low_version=20)), False, [C.Hello]),
]


@pytest.mark.parametrize("name,data,shut,expected", CASES, ids=[c[0] for c in CASES])
def test_malformed_input_closes_the_connection_and_nothing_else(gateway, logs, name, data, shut, expected):
    port = gateway.ports["pravega"]
    with Conn(port) as bad, Conn(port) as bystander:
        bad.sock.sendall(data() if callable(data) else data)
        if shut:
            bad.sock.shutdown(socket.SHUT_WR)
        replies = bad.until_closed()
        assert [type(r) for r in replies] == expected
        if C.ErrorMessage in expected:
            assert replies[-1].request_id == 9 and replies[-1].segment == SEG
        assert bystander.request(C.KeepAlive()) == C.KeepAlive()  # an open connection is unaffected
    assert read_back(port) == BEFORE  # nothing of the bad input was stored
    assert logs.errors() == [] and logs.closed_for_protocol_errors() == 1


def test_a_client_that_vanishes_mid_append_is_no_error(gateway, logs):
    port = gateway.ports["pravega"]
    writer = uuid.uuid4()
    with Conn(port) as c:
        c.sock.sendall(setup(writer) + block_end(writer, event_frame(b"y") * 2, num=2, last=2)[:-5])
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a RST
    assert read_back(port) == BEFORE
    assert logs.errors() == []


# -- the driver's tail parking -------------------------------------------------------------------
def tail_read(c: Conn, offset: int):
    c.sock.sendall(C.encode(C.ReadSegment(segment=SEG, offset=offset, suggested_length=1 << 16,
                                          delegation_token=TOKEN["value"], request_id=11)))


def test_a_tail_read_is_answered_empty_at_tail_after_the_park(gateway, logs):
    end = sum(map(len, map(event_frame, BEFORE)))
    with Conn(gateway.ports["pravega"]) as c:
        tail_read(c, end)  # parked for tail_park_ms (100 here), then answered
        reply = c.next_reply()
        assert reply == C.SegmentRead(segment=SEG, offset=end, at_tail=True, end_of_segment=False, data=b"",
                                      request_id=11)
        assert c.request(C.KeepAlive()) == C.KeepAlive()
    assert logs.errors() == []


def test_a_parked_read_wakes_on_an_append_from_another_connection(tmp_path):
    with running_gateway(tmp_path, BINDING, FERRY_PRAVEGA_TAIL_PARK_MS="20000") as gw:
        port = gw.ports["pravega"]
        module_token = TOKEN["value"]
        login(gw)  # this gateway's token, for this test only
        try:
            with Conn(port) as reader, Conn(port) as writer:
                tail_read(reader, 0)
                reader.sock.settimeout(10)  # far below the park: only the append can answer in time
                w = uuid.uuid4()
                writer.request(C.SetupAppend(request_id=1, writer_id=w, segment=SEG,
                                             delegation_token=TOKEN["value"]))
                writer.sock.sendall(block_end(w, event_frame(b"wake")))
                reply = reader.next_reply()
                assert reply.offset == 0 and reply.at_tail and reply.data == event_frame(b"wake")
        finally:
            TOKEN["value"] = module_token


# -- the controller port ---------------------------------------------------------------------
def grpc_call(port: int, method: str, body: bytes, authorization: str = ROOT_BASIC) -> tuple[bytes, dict]:
    """One unary call over h2c with prior knowledge, logged in as root: (response message, trailers)."""
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
    conn.initiate_connection()
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        conn.send_headers(1, [(b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"localhost"),
                              (b":path", f"/{P.SERVICE}/{method}".encode()), (b"content-type", b"application/grpc"),
                              (b"te", b"trailers"), (b"authorization", authorization.encode())])
        conn.send_data(1, struct.pack(">BI", 0, len(body)) + body, end_stream=True)
        data, trailers = bytearray(), {}
        while not trailers:
            sock.sendall(conn.data_to_send())
            chunk = sock.recv(1 << 16)
            assert chunk, "the controller closed the connection"
            for ev in conn.receive_data(chunk):
                if isinstance(ev, h2.events.DataReceived):
                    data += ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, (h2.events.TrailersReceived, h2.events.ResponseReceived)):
                    trailers = {k: v for k, v in ev.headers if k.startswith(b"grpc-")} or trailers
    return bytes(data[5:]), trailers


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def closes(port: int, data: bytes, timeout: float = TIMEOUT_S) -> bytes:
    """Send ``data``; return what came back before the server closed (fails on a timeout)."""
    got = bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        while True:
            try:
                chunk = sock.recv(1 << 16)
            except ConnectionResetError:
                return bytes(got)
            if not chunk:
                return bytes(got)
            got += chunk


@pytest.mark.parametrize("data", [
    b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n",
    b"POST /io.pravega.controller.stream.api.grpc.v1.ControllerService/createScope HTTP/1.1\r\n"
    b"Host: localhost\r\nContent-Type: application/grpc\r\nContent-Length: 0\r\n\r\n",
    bytes(range(256)) * 4,
    PREFACE + struct.pack(">I", 4)[1:] + b"\x00\x00" + b"\x00" * 4 + b"abcd",  # DATA on stream 0
], ids=["http1-get", "http1-grpc-post", "garbage", "preface-then-data-on-stream-0"])
def test_controller_closes_on_non_h2_input_and_keeps_serving(gateway, logs, data):
    port = gateway.ports["pravega_controller"]
    back = closes(port, data)
    assert b"HTTP/1.1 200" not in back
    body, trailers = grpc_call(port, "checkScopeExists", P.ScopeInfo("sc").encode())
    assert trailers[b"grpc-status"] == b"0" and P.ExistsResponse.decode(body).exists
    assert logs.errors() == []


def test_controller_closes_on_an_oversized_frame_header_at_once(gateway):
    closes(gateway.ports["pravega_controller"], PREFACE + b"\xff" * 9, timeout=1)


def test_controller_malformed_message_is_invalid_argument(gateway, logs):
    port = gateway.ports["pravega_controller"]
    _body, trailers = grpc_call(port, "createScope", b"\x0a\x09short")
    assert trailers[b"grpc-status"] == b"3"
    _body, trailers = grpc_call(port, "noSuchRpc", b"")
    assert trailers[b"grpc-status"] == b"12"
    assert logs.errors() == []


def test_java_client_block_framing_is_stored_and_read_back(gateway):
    """The Java client's framing (pravega.md section 5.2) through a live gateway: a block whose
    last event is cut in a PartialEvent and finished in AppendBlockEnd's data, then a block
    filled with Padding; both are acknowledged in order and read back as whole events."""
    port = gateway.ports["pravega"]
    writer = uuid.uuid4()
    e1, e2, e3 = event_frame(b"java-1"), event_frame(b"java-2, cut by the block"), event_frame(b"java-3")
    with Conn(port) as c:
        assert isinstance(c.request(C.SetupAppend(request_id=1, writer_id=writer, segment=SEG,
                                                  delegation_token=TOKEN["value"])), C.AppendSetup)
        cut = 5  # inside e2's 8-byte frame header
        c.sock.sendall(C.encode(C.AppendBlock(writer_id=writer, data=e1 + C.encode(C.PartialEvent(data=e2[:cut]))))
                       + C.encode(C.AppendBlockEnd(writer_id=writer, size_of_whole_events=len(e1), data=e2[cut:],
                                                   num_events=2, last_event_number=2, request_id=3))
                       + C.encode(C.AppendBlock(writer_id=writer, data=e3 + C.encode(C.Padding(data=bytes(7)))))
                       + C.encode(C.AppendBlockEnd(writer_id=writer, size_of_whole_events=len(e3), data=b"",
                                                   num_events=1, last_event_number=3, request_id=4)))
        acks = [c.next_reply(), c.next_reply()]
    assert [(a.event_number, a.previous_event_number, a.request_id) for a in acks] == [(2, -(1 << 63), 3), (3, 2, 4)]
    assert read_back(port)[-3:] == [b"java-1", b"java-2, cut by the block", b"java-3"]
