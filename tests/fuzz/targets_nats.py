"""Fuzz targets for NATS (adapters/nats).

* ``nats_server``: a client's byte stream through :class:`ServerCodec` (control lines,
  PUB/HPUB payloads, CONNECT/INFO JSON, the PUB fast path and the run scanner), in
  pieces. Contract (codec.py): ``NatsProtocolError`` with nats-server's text, nothing
  else. Each HPUB's header block goes through ``parse_headers`` (``NatsHeaderError``).
  A PUB/HPUB it accepts, written again by ``client_codec.encode_pub``, parses to the
  same event. The same bytes go through the compiled scanner
  (``adapters.nats._speedups.scan_pubs``/``scan_runs``/``render_msgs``) and its Python
  twin (``pubscan.*_py``): same frames, same runs, same MSG bytes, same end position.
* ``nats_client``: a server's byte stream through :class:`ClientCodec` (what the
  scale-out store and the CLI read). Contract: ``NatsClientProtocolError``.
* ``nats_headers``: one header block through ``parse_headers``; what it accepts
  encodes (``encode_headers``) to a block that parses to the same value.
"""

from __future__ import annotations

from fuzzlib import Picker, check, chunks, outcome

from adapters.nats import pubscan
from adapters.nats.client_codec import ClientCodec, NatsClientProtocolError, encode_pub
from adapters.nats.codec import ServerCodec
from adapters.nats.errors import NatsHeaderError, NatsProtocolError
from adapters.nats.events import NEED_DATA, Connect, HPub, Pub
from adapters.nats.headers import encode_headers, parse_headers

_MAX_EVENTS = 256  # a bound per input: a run of tiny PINGs must not take a second


def _refuse(subject: str, reply: str) -> bool:
    return subject.startswith("$SYS") or reply.startswith("_R")


def _same_pub(event) -> None:
    """A PUB/HPUB written again by the client codec parses to the same event."""
    try:
        header = event.header if isinstance(event, HPub) else None
        frame = encode_pub(event.subject, event.payload, event.reply or None, header)
    except ValueError:
        return  # a subject the client side refuses to write (whitespace): nothing to compare
    codec = ServerCodec()
    codec.allow_headers = True
    codec.receive_data(frame)
    again = codec.next_event()
    check(again == event, f"{event!r} re-parsed as {again!r}")


def nats_server(data: bytes) -> None:
    p = Picker(data)
    flags = p.byte()
    cuts = bytes(p.byte() for _ in range(3))
    body = p.rest()
    # Control lines of 64 B to 4 KiB: the top is nats-server's default (codec.MAX_CONTROL_LINE).
    codec = ServerCodec(max_payload=1 << (8 + flags % 8), max_control_line=64 << 2 * (flags >> 6))
    codec.connect_only = bool(flags & 8)
    codec.allow_headers = bool(flags & 16)
    scan = (flags >> 5) & 3
    events = 0
    try:
        for piece in chunks(body, cuts):
            codec.receive_data(piece)
            while events < _MAX_EVENTS:
                if scan:
                    found: list = []
                    (codec.scan_pubs if scan == 1 else codec.scan_runs)(found, _refuse)
                event = codec.next_event()
                if event is NEED_DATA:
                    break
                events += 1
                if isinstance(event, Connect):
                    codec.connect_only = False
                    codec.allow_headers = event.headers
                elif isinstance(event, (Pub, HPub)):
                    if isinstance(event, HPub):
                        outcome(parse_headers, NatsHeaderError, event.header)
                    _same_pub(event)
        codec.receive_data(b"")
        codec.next_event()
    except NatsProtocolError:
        pass
    _scanners_agree(flags, body)


def _plain(frames: list) -> list:
    return [tuple(bytes(x) if isinstance(x, (bytes, bytearray, memoryview)) else x for x in f) for f in frames]


def _scanners_agree(flags: int, buf: bytes) -> None:
    compiled = pubscan._compiled
    if compiled is None or not pubscan.COMPILED:
        return
    limits = (16 << (flags & 7), 1 << (flags >> 4), 1 + flags % 9)
    for c_loop, py_loop in ((compiled.scan_pubs, pubscan.scan_pubs_py), (compiled.scan_runs, pubscan.scan_runs_py)):
        c_out: list = []
        py_out: list = []
        c_end = c_loop(buf, 0, *limits, c_out, _refuse)
        py_end = py_loop(buf, 0, *limits, py_out, _refuse)
        check((c_end, _plain(c_out)) == (py_end, _plain(py_out)),
              f"{py_loop.__name__}: compiled {(c_end, c_out)!r} != python {(py_end, py_out)!r}")
        if py_loop is pubscan.scan_runs_py:
            for run in py_out:
                _subject, _reply, count, _nbytes, start, end = run
                c_msgs = compiled.render_msgs(buf, start, end, count, b"42")
                py_msgs = pubscan.render_msgs_py(buf, start, end, count, b"42")
                check(bytes(c_msgs) == py_msgs, f"render_msgs differs on {run!r}")


def nats_client(data: bytes) -> None:
    p = Picker(data)
    flags = p.byte()
    cuts = bytes(p.byte() for _ in range(3))
    codec = ClientCodec(max_payload=1 << (8 + flags % 8), max_control_line=64 << 2 * (flags >> 6),
                        max_info_line=1024 << 2 * ((flags >> 3) & 3))
    events = 0
    try:
        for piece in chunks(p.rest(), cuts):
            codec.receive_data(piece)
            while events < _MAX_EVENTS and codec.next_event() is not NEED_DATA:
                events += 1
    except NatsClientProtocolError:
        pass


def nats_headers(data: bytes) -> None:
    kind, block = outcome(parse_headers, NatsHeaderError, data)
    if kind == "ok":
        again = parse_headers(encode_headers(block))
        check(again == block, f"{block!r} re-parsed as {again!r}")


TARGETS = {"nats_server": nats_server, "nats_client": nats_client, "nats_headers": nats_headers}
