"""Shared helpers for the NATS adapter tests: feeding bytes in chunks, connections."""

from __future__ import annotations

from typing import Iterable

from adapters.nats.codec import ServerCodec
from adapters.nats.connection import NatsLimits, NatsServerConnection, ServerInfo
from adapters.nats.errors import NatsError
from adapters.nats.events import NEED_DATA, Connect, Event

SERVER = ServerInfo("NTEST", version="2.10.0", host="127.0.0.1", port=4222, go="go-test")
# The CONNECT nats-py 2.16 sends (nats.md section 5), minus the name.
NATS_PY_CONNECT = (b'CONNECT {"echo": true, "headers": true, "lang": "python3", "no_responders": true,'
                   b' "pedantic": false, "protocol": 1, "verbose": false, "version": "2.16.0"}\r\n')


def chunks_at(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    """``data`` cut at the given offsets (sorted, deduplicated, inside the data)."""
    points = sorted({c for c in cuts if 0 < c < len(data)})
    out, prev = [], 0
    for p in points:
        out.append(data[prev:p])
        prev = p
    out.append(data[prev:])
    return out


def one_byte_chunks(data: bytes) -> list[bytes]:
    return [data[i:i + 1] for i in range(len(data))]


def codec_run(chunks: Iterable[bytes], *, headers: bool = True, connect_only: bool = False,
              **limits: int) -> tuple[list[Event], NatsError | None]:
    """Feed ``chunks`` to a fresh codec, draining events after each; returns
    the events and the error that stopped it (or None)."""
    codec = ServerCodec(**limits)
    codec.allow_headers = headers
    codec.connect_only = connect_only
    events: list[Event] = []
    try:
        for chunk in chunks:
            codec.receive_data(chunk)
            while (event := codec.next_event()) is not NEED_DATA:
                events.append(event)
    except NatsError as err:
        return events, err
    return events, None


def outcome(chunks: Iterable[bytes], **kw) -> tuple[list[Event], str | None, bool]:
    """Events, error text (None = silent or none) and whether an error stopped the codec."""
    events, err = codec_run(chunks, **kw)
    return events, (err.text if err else None), err is not None


def new_conn(*, now: float = 0.0, limits: NatsLimits | None = None, info: ServerInfo = SERVER,
             **kw) -> NatsServerConnection:
    """A connection with deterministic jitter; its INFO is drained."""
    kw.setdefault("rng", lambda: 0.0)
    conn = NatsServerConnection(info, limits or NatsLimits(), client_id=7, client_ip="10.0.0.1",
                                now=now, **kw)
    conn.data_to_send()
    return conn


def pump(conn: NatsServerConnection, data: bytes = b"", now: float | None = None) -> list[Event]:
    """Feed ``data`` (if any) and return every event up to NEED_DATA."""
    if data:
        conn.receive_data(data, now)
    events = []
    while (event := conn.next_event()) is not NEED_DATA:
        events.append(event)
    return events


def run_conn(conn: NatsServerConnection, chunks: Iterable[bytes]) -> tuple[list[Event], NatsError | None]:
    """Feed ``chunks`` one by one, keeping every event returned before an error."""
    events: list[Event] = []
    try:
        for chunk in chunks:
            conn.receive_data(chunk)
            while (event := conn.next_event()) is not NEED_DATA:
                events.append(event)
    except NatsError as err:
        return events, err
    return events, None


def connected(connect: bytes = b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\n',
              **kw) -> NatsServerConnection:
    """A connection past CONNECT, with its replies drained."""
    conn = new_conn(**kw)
    events = pump(conn, connect)
    if not events or not isinstance(events[0], Connect):
        raise RuntimeError(f"CONNECT was not accepted: {events}")
    conn.data_to_send()
    return conn
