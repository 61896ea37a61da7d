"""Fuzz targets for the Iggy binary protocol (adapters/iggy).

* ``iggy_command``: one command body of one dialect through the spec table
  (adapters/iggy/spec.py over adapters/wire/table.py, the message layouts of
  adapters/iggy/messages.py). Contract (codec.py, STYLE.md 4): bad bytes raise
  :class:`IggyStatus`, nothing else. A body it accepts re-encodes to a body that
  decodes to the same value. Send bodies also run with the compiled record walks
  (``core._speedups.walk`` through ``walk_records``, ``adapters.iggy._speedups.
  vsr_frames``) switched off, and both must give the same value or the same status
  and detail (docs/internals.md "Compiled loops").
* ``iggy_frames``: a whole connection's bytes through
  :class:`IggyServerConnection` (framing detection, legacy and VSR envelopes,
  login dialect switches); every request is answered so the next one is read.
"""

from __future__ import annotations

from fuzzlib import Picker, check, chunks, outcome

from adapters.iggy import messages
from adapters.iggy.connection import IggyServerConnection
from adapters.iggy.errors import IggyStatus
from adapters.iggy.events import NEED_DATA, Reply
from adapters.iggy.spec import COMMANDS

_COMMANDS = tuple(COMMANDS)
# The compiled loops messages.py calls through module globals, and None (the Python loops).
_COMPILED = {"walk_records": messages.walk_records, "_vsr_frames": messages._vsr_frames}
_PURE = {name: None for name in _COMPILED}


def _decode(cmd, dialect: int, body: bytes, loops: dict):
    for name, fn in loops.items():
        setattr(messages, name, fn)
    try:
        return outcome(cmd.decode, IggyStatus, dialect, body)
    finally:
        for name, fn in _COMPILED.items():
            setattr(messages, name, fn)


def _key(result):
    kind, value = result
    return (kind, value.code, value.detail) if kind == "err" else (kind, value)


def iggy_command(data: bytes) -> None:
    p = Picker(data)
    cmd = p.pick(_COMMANDS)
    dialect = p.pick(sorted(cmd.dialects))
    body = p.rest()
    compiled = _decode(cmd, dialect, body, _COMPILED)
    if any(fn is not None for fn in _COMPILED.values()):
        pure = _decode(cmd, dialect, body, _PURE)
        check(_key(compiled) == _key(pure), f"{cmd.name} d{dialect}: compiled {compiled!r} != python {pure!r}")
    kind, value = compiled
    if kind == "ok":
        again = cmd.decode(dialect, cmd.encode(dialect, value))
        check(again == value, f"{cmd.name} d{dialect}: {value!r} re-decoded as {again!r}")


# Requests answered before the connection reads on (the driver's max_in_flight is 32).
_MAX_EVENTS = 64


def iggy_frames(data: bytes) -> None:
    p = Picker(data)
    cuts = bytes(p.byte() for _ in range(4))
    conn = IggyServerConnection()
    events = 0
    try:
        for piece in chunks(p.rest(), cuts):
            conn.receive_data(piece)
            while events < _MAX_EVENTS:
                event = conn.next_event()
                if event is NEED_DATA:
                    break
                events += 1
                conn.send(Reply(0, b""))
        conn.receive_data(b"")
    except IggyStatus as err:
        check(err.fatal, f"non-fatal status escaped next_event: {err!r}")
    conn.data_to_send()


TARGETS = {"iggy_command": iggy_command, "iggy_frames": iggy_frames}
