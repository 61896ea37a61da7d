"""Fuzz targets for Pravega (adapters/pravega).

* ``pravega_wire``: a connection's bytes through the segment store's
  :class:`FrameDecoder` (the command table of commands.py over adapters/wire, and
  AppendBlock/PartialEvent/Padding reassembly), in pieces; the data of each
  :class:`Append` through ``split_events``. Contract (codec.py): every framing
  violation is :class:`PravegaProtocolError`. Each command it yields re-encodes
  (``commands.encode``) to a frame that decodes to the same command.
* ``pravega_protobuf``: one message of the controller's proto (controller_proto.py
  over protobuf.py), picked by the first byte. Contract (protobuf.py):
  :class:`ProtobufError`. What decodes re-encodes to bytes that decode to
  the same message (compared by their encoding: a double may be NaN).
* ``pravega_grpc``: an HTTP/2 connection's bytes (after the client preface) through
  :class:`GrpcServerConnection` (h2, the frame-size guard, gRPC message framing).
  Contract (grpc.py): refusals become gRPC statuses, RST_STREAM or GOAWAY in
  ``data_to_send``; ``receive_data`` raises nothing. Each completed call's body is
  decoded as its RPC's request message, as the controller does (``ProtobufError``).
"""

from __future__ import annotations

from fuzzlib import Picker, check, chunks, outcome

from adapters.pravega import commands
from adapters.pravega import controller_proto as proto
from adapters.pravega.codec import NEED_DATA, Append, FrameDecoder, split_events
from adapters.pravega.errors import PravegaProtocolError
from adapters.pravega.grpc import GrpcServerConnection
from adapters.pravega.protobuf import Message, ProtobufError

_MAX_EVENTS = 256


def pravega_wire(data: bytes) -> None:
    p = Picker(data)
    cuts = bytes(p.byte() for _ in range(3))
    decoder = FrameDecoder()
    events = 0
    try:
        for piece in chunks(p.rest(), cuts):
            decoder.receive_data(piece)
            while events < _MAX_EVENTS:
                event = decoder.next_event()
                if event is NEED_DATA:
                    break
                events += 1
                if isinstance(event, Append):
                    outcome(split_events, PravegaProtocolError, event.data)
                    continue
                frame = commands.encode(event)
                again = commands.decode_payload(commands.CODE_OF[type(event)], frame[commands.HEADER_SIZE:])
                check(again == event, f"{event!r} re-decoded as {again!r}")
        decoder.receive_data(b"")
        decoder.next_event()
    except PravegaProtocolError:
        pass


_MESSAGES = tuple(sorted({c for c in vars(proto).values()
                          if isinstance(c, type) and issubclass(c, Message) and c is not Message},
                         key=lambda c: c.__name__))


def pravega_protobuf(data: bytes) -> None:
    p = Picker(data)
    cls = p.pick(_MESSAGES)
    kind, msg = outcome(cls.decode, ProtobufError, p.rest())
    if kind == "ok":
        encoded = msg.encode()
        again = cls.decode(encoded)
        # Compared as bytes: a double field may hold NaN, which is never == itself.
        check(again.encode() == encoded, f"{cls.__name__} {msg!r} re-decoded as {again!r}")


_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def pravega_grpc(data: bytes) -> None:
    p = Picker(data)
    cuts = bytes(p.byte() for _ in range(3))
    conn = GrpcServerConnection()
    conn.initiate()
    conn.data_to_send()
    pieces = [_PREFACE, *chunks(p.rest(), cuts)]
    for piece in pieces:
        for call in conn.receive_data(piece):
            rpc = proto.RPCS.get(call.method) if call.service == proto.SERVICE else None
            if rpc is None:
                conn.fail(call.stream_id, 12, "unimplemented")
                continue
            kind, _ = outcome(rpc[0].decode, ProtobufError, call.body)
            if kind == "ok":
                conn.reply(call.stream_id, rpc[1]().encode())
            else:
                conn.fail(call.stream_id, 3, "malformed")
        conn.data_to_send()
        if conn.closed:
            break
    conn.receive_data(b"")


TARGETS = {"pravega_wire": pravega_wire, "pravega_protobuf": pravega_protobuf, "pravega_grpc": pravega_grpc}
