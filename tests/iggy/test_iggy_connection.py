"""The connection state machine: framing, dialect detection, malformed input (STYLE.md 6.1-6.2)."""

from __future__ import annotations

import struct

import pytest

from adapters.iggy.codec import legacy_request, parse_vsr_reply, vsr_request
from adapters.iggy.connection import IggyServerConnection, LocalProtocolError, State, dialect_for_version
from adapters.iggy.errors import IggyError, IggyStatus
from adapters.iggy.events import NEED_DATA, BadRequest, Evict, Reply, Request

# Captured frames from the references (hex, spaces ignored).
PING = "04000000 01000000"
LOGIN_SEED = "1d000000 26000000 04 69676779 04 69676779 07000000 302e362e323032 00000000"  # iggy.md 4.2
LOGIN_MIDDLE = "1c000000 26000000 04 69676779 04 69676779 06000000 302e31302e30 00000000"  # iggy-middle.md 3.1
POLL_MIDDLE = ("26000000 64000000 01 01 04 00000000 02 02 7331 02 02 7431 01 00000000 "
               "01 0000000000000000 0a000000 00")  # iggy-middle.md 6.12
SEND_MIDDLE = ("6c000000 65000000 12000000 02 02 7331 02 02 7431 02 04 01000000 01000000 "
               "00000000 42000000 0000000000000000 0000000000000000 00000000000000000000000000000000 "
               "0000000000000000 0000000000000000 becfa4f9de600600 00000000 02000000 0000000000000000 7031")
LOGIN_06 = "1b000000 26000000 04 69676779 04 69676779 05000000 302e382e30 00000000"  # apache-iggy 0.6.0: SDK 0.8.0
# SEND_MIDDLE with the 56-byte header of profiles 0.5/0.6 (iggy-middle.md 7.1: no reserved field)
SEND_56 = ("64000000 65000000 12000000 02 02 7331 02 02 7431 02 04 01000000 01000000 "
           "00000000 3a000000 0000000000000000 0000000000000000 00000000000000000000000000000000 "
           "0000000000000000 0000000000000000 becfa4f9de600600 00000000 02000000 7031")
LOGIN_VSR_BODY = "002c0000 08 727573742d73646b 06 302e31312e30 04 69676779 04 69676779 00000000"  # current 6.3


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def events_of(conn: IggyServerConnection, data: bytes, *, step: int | None = None) -> list:
    """Feed ``data`` (whole, or ``step`` bytes at a time); answer each request with an empty OK."""
    out = []
    chunks = [data] if step is None else [data[i : i + step] for i in range(0, len(data), step)]
    for chunk in chunks:
        conn.receive_data(chunk)
        while (ev := conn.next_event()) is not NEED_DATA:
            out.append(ev)
            conn.send(Reply(0))
    return out


def summary(evs):
    return [(type(e).__name__, e.command.name if e.command else None, getattr(e, "dialect", None)) for e in evs]


SAMPLES = {
    "seed": h(PING + LOGIN_SEED + PING),
    "middle": h(PING + LOGIN_MIDDLE + POLL_MIDDLE + SEND_MIDDLE),
    "middle56": h(PING + LOGIN_06 + POLL_MIDDLE + SEND_56),
    "vsr": vsr_request(2, b"", code=1) + vsr_request(1, h(LOGIN_VSR_BODY)) + vsr_request(2, b"", code=12),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_whole_bytewise_and_with_trailing_bytes(name):
    data = SAMPLES[name]
    whole = summary(events_of(IggyServerConnection(), data))
    assert summary(events_of(IggyServerConnection(), data, step=1)) == whole
    assert summary(events_of(IggyServerConnection(), data, step=7)) == whole
    conn = IggyServerConnection()
    assert summary(events_of(conn, data + data[:5])) == whole  # a partial next frame stays buffered
    assert conn.next_event() is NEED_DATA and conn.state is not State.ERROR
    assert all(isinstance(e, Request) for e in events_of(IggyServerConnection(), data))


def test_dialects_are_detected():
    seed = events_of(IggyServerConnection(), SAMPLES["seed"])
    assert [e.dialect for e in seed] == [2, 1, 1]  # legacy frames are dialect 2 until the login says 0.6
    middle = events_of(IggyServerConnection(), SAMPLES["middle"])
    assert [e.dialect for e in middle] == [2, 2, 2, 2]
    assert middle[3].value.messages[0].payload == b"p1"
    vsr = events_of(IggyServerConnection(), SAMPLES["vsr"])
    assert [e.command.name for e in vsr] == ["system.ping", "user.login_register", "system.cluster_metadata"]
    assert vsr[1].value.username == "iggy" and vsr[1].dialect == 3


@pytest.mark.parametrize("version,dialect", [("", 1), ("0.6.202", 1), ("0.7.0", 5), ("0.7.9", 5), ("0.8.0", 4),
                                             ("0.9.0", 2), ("0.10.0", 2), ("0.10.3-edge.1", 2), ("1.2.3", 2),
                                             ("junk", 1)])
def test_dialect_for_version(version, dialect):
    assert dialect_for_version(version) == dialect


# -- malformed input: each gets the exact status, the connection goes on --------------------
LOGGED_IN_MIDDLE = h(PING + LOGIN_MIDDLE)
MALFORMED = [
    ("unknown code", legacy_request(9999), IggyError.INVALID_COMMAND),
    ("ping with a body byte", legacy_request(1, b"\x00"), IggyError.INVALID_COMMAND),
    ("identifier kind 3", legacy_request(200, h("03 04 01000000")), IggyError.INVALID_COMMAND),
    ("numeric identifier of 3 bytes", legacy_request(200, h("01 03 010000")), IggyError.INVALID_IDENTIFIER),
    ("empty string identifier", legacy_request(200, h("02 00")), IggyError.INVALID_IDENTIFIER),
    ("identifier past the end", legacy_request(200, h("02 09 7331")), IggyError.INVALID_COMMAND),
    ("stream name not UTF-8", legacy_request(202, h("02 ffff")), IggyError.INVALID_COMMAND),
    ("polling kind 9", legacy_request(100, h(POLL_MIDDLE)[8:].replace(h("01 0000000000000000"), h("09 0000000000000000"))),
     IggyError.INVALID_COMMAND),
    ("send: reserved field set", legacy_request(101, h(SEND_MIDDLE)[8:-10] + h("01000000000000007031")),
     IggyError.INVALID_RESERVED_FIELD),
    ("send: index does not match", legacy_request(101, h(SEND_MIDDLE)[8:].replace(h("42000000"), h("43000000"), 1)),
     IggyError.INVALID_MESSAGES_SIZE),
    ("send: metadata length wrong", legacy_request(101, h("13000000") + h(SEND_MIDDLE)[12:]),
     IggyError.INVALID_COMMAND),
    ("send: zero messages", legacy_request(101, h("12000000 02027331 02027431 020401000000 00000000")),
     IggyError.INVALID_MESSAGES_COUNT),
    ("optional partition flag 2", legacy_request(120, h("01010400000000 02027331 02027431 0200000000")),
     IggyError.INVALID_COMMAND),
]


@pytest.mark.parametrize("frame,status", [(f, s) for _n, f, s in MALFORMED], ids=[n for n, _f, _s in MALFORMED])
def test_malformed_input_table(frame, status):
    conn = IggyServerConnection()
    events_of(conn, LOGGED_IN_MIDDLE)
    conn.data_to_send()
    conn.receive_data(frame + h(PING))
    ev = conn.next_event()
    assert isinstance(ev, BadRequest) and ev.status == status
    conn.send(Reply(ev.status))
    assert conn.data_to_send() == struct.pack("<II", int(status), 0)  # errors have empty bodies
    nxt = conn.next_event()  # the connection goes on
    assert isinstance(nxt, Request) and nxt.command.name == "system.ping"


LOGGED_IN_06 = h(PING + LOGIN_06)
MALFORMED_56 = [  # the same checks as dialect 2's, on 56-byte headers (4 and 5 share the codec)
    ("send: index does not match", h(SEND_56)[8:].replace(h("3a000000"), h("3b000000"), 1),
     IggyError.INVALID_MESSAGES_SIZE),
    ("send: message shorter than its header", h(SEND_56)[8:74] + h("0000"), IggyError.TOO_SMALL_MESSAGE),
    ("send: payload runs past the frame", h(SEND_56)[8:].replace(h("02000000 7031"), h("03000000 7031")),
     IggyError.INVALID_MESSAGES_SIZE),
    ("send: bytes after the last message", h(SEND_56)[8:] + b"x", IggyError.INVALID_MESSAGES_SIZE),
    ("send: a 64-byte message (dialect 2's)", h(SEND_MIDDLE)[8:], IggyError.INVALID_MESSAGES_SIZE),
    ("send: zero messages", h("12000000 02027331 02027431 020401000000 00000000"), IggyError.INVALID_MESSAGES_COUNT),
]


@pytest.mark.parametrize("body,status", [(b, s) for _n, b, s in MALFORMED_56], ids=[n for n, _b, _s in MALFORMED_56])
def test_malformed_56_byte_sends(body, status):
    conn = IggyServerConnection()
    events_of(conn, LOGGED_IN_06)
    assert conn.dialect == 4
    conn.data_to_send()
    conn.receive_data(legacy_request(101, body) + h(PING))
    ev = conn.next_event()
    assert isinstance(ev, BadRequest) and ev.status == status
    conn.send(Reply(ev.status))
    assert conn.next_event().command.name == "system.ping"


def test_a_56_byte_send_decodes_in_dialects_4_and_5():
    for login, dialect in ((LOGIN_06, 4), (LOGIN_06.replace("382e30", "372e30"), 5)):  # "0.8.0", "0.7.0"
        conn = IggyServerConnection()
        [_ping, _login, send] = events_of(conn, h(PING + login + SEND_56))
        assert conn.dialect == dialect and send.dialect == dialect
        [m] = send.value.messages
        assert (m.payload, m.headers, m.origin_timestamp) == (b"p1", b"", 0x0006_60de_f9a4_cfbe)


def test_every_truncation_of_a_frame_waits_or_answers():
    frame = h(SEND_MIDDLE)
    for cut in range(len(frame)):
        conn = IggyServerConnection()
        events_of(conn, LOGGED_IN_MIDDLE)
        conn.receive_data(frame[:cut])
        assert conn.next_event() is NEED_DATA
    # a length prefix that lies (shorter than the body): the body decodes as truncated -> status 3
    body = frame[8:]
    for cut in range(len(body)):
        conn = IggyServerConnection()
        events_of(conn, LOGGED_IN_MIDDLE)
        conn.receive_data(legacy_request(101, body[:cut]))
        ev = conn.next_event()
        assert isinstance(ev, BadRequest), cut


def test_fatal_frame_length_closes_with_status_3():
    conn = IggyServerConnection()
    events_of(conn, h(PING))
    conn.data_to_send()
    conn.receive_data(struct.pack("<II", 2, 1))
    with pytest.raises(IggyStatus) as info:
        conn.next_event()
    assert info.value.fatal and conn.state is State.ERROR
    assert conn.data_to_send() == struct.pack("<II", 3, 0)
    assert conn.next_event() is NEED_DATA  # stays in ERROR


def test_vsr_reply_framing_and_result_section():
    conn = IggyServerConnection()
    conn.receive_data(vsr_request(128, h("02 7331"), request=1))  # CreateStream, op 128
    ev = conn.next_event()
    assert ev.command.name == "stream.create" and ev.value.name == "s1"
    conn.send(Reply(0, b"BODY"))
    op, status, body = parse_vsr_reply(conn.data_to_send())
    assert (op, status, body) == (128, 0, b"\0\0\0\0BODY")  # iggy-current.md 4.3
    conn.receive_data(vsr_request(2, h("01 04 00000000"), code=200))
    conn.next_event()
    conn.send(Reply(1009, b"ignored"))
    assert parse_vsr_reply(conn.data_to_send()) == (2, 1009, b"")


def test_vsr_eviction_closes():
    conn = IggyServerConnection()
    conn.receive_data(vsr_request(1, b"\x00"))
    ev = conn.next_event()
    assert isinstance(ev, BadRequest)
    conn.send(Evict(15))
    frame = conn.data_to_send()
    assert len(frame) == 256 and frame[60] == 13 and frame[255] == 15
    assert conn.state is State.CLOSED


def test_send_without_a_request_is_a_local_error():
    with pytest.raises(LocalProtocolError):
        IggyServerConnection().send(Reply(0))
