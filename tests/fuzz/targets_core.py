"""Fuzz target for the stored record layout (core/record.py, core/message.py, core/log/encoded.py).

``core_record``: the first byte picks what the rest is:

* a run of stored records walked with ``record_size``/``parse_record`` (checksum
  verified or not), each record's header block through ``Headers.decode`` (and the
  seed-era ``decode_legacy``). Contract: ``CorruptSegment``/``InvalidArgument``
  for the framing, the ``HeaderError`` family for a header block (core/errors.py);
  nothing else. A record that parses with its checksum and a zero reserved field is
  exactly what ``encode_record`` writes for its fields; a header block that decodes
  encodes to the same bytes.
* an Iggy 0.8 send body (records in the stored layout, as apache-iggy 0.8 sends them)
  through ``stamp_records``, the check ``Partition.append_encoded`` makes before
  storing anything: the compiled ``core._speedups.stamp`` and its Python twin
  (``_stamp_python``) must give the same sizes and payload lengths, or the same error
  type and text (ids differ: each run draws fresh UUIDv7s for id 0).
"""

from __future__ import annotations

from fuzzlib import Picker, check, outcome

from core.errors import FerryError, HeaderError
from core.log import encoded
from core.message import Headers
from core.record import RECORD_HEADER, encode_record, parse_record, record_size

_MAX_RECORDS = 256


def _walk(buf: bytes, verify: bool) -> None:
    pos = 0
    for _ in range(_MAX_RECORDS):
        if pos >= len(buf):
            return
        kind, size = outcome(record_size, FerryError, buf, pos)
        kind, rv = outcome(parse_record, FerryError, buf, pos, verify=verify)
        if kind == "err":
            return
        check(rv.size == size, f"record_size {size} != parsed size {rv.size}")
        headers = bytes(rv.headers)
        kind, decoded = outcome(Headers.decode, HeaderError, headers)
        if kind == "ok":
            check(decoded.encode() == headers, f"header block {headers!r} re-encoded as {decoded.encode()!r}")
        outcome(Headers.decode_legacy, HeaderError, headers)
        reserved = RECORD_HEADER.unpack_from(buf, pos)[-1]
        if verify and not reserved:
            again = encode_record(rv.id, rv.offset, rv.timestamp, rv.origin_timestamp, headers, bytes(rv.payload))
            check(again == buf[pos:pos + rv.size], f"record at {pos} re-encoded differently")
        pos += rv.size


def _stamp(loop, body: bytes, count: int):
    try:
        return "ok", loop(bytearray(body), count, 1000, 1_700_000_000_000_000)
    except FerryError as exc:
        return "err", type(exc).__name__, str(exc)


def core_record(data: bytes) -> None:
    p = Picker(data)
    mode = p.byte()
    if mode % 3 == 2:
        count = 1 + (mode >> 2)
        body = p.rest()
        pure = _stamp(encoded._stamp_python, body, count)
        if encoded.COMPILED:
            compiled = _stamp(encoded._stamp_compiled, body, count)
            check(compiled == pure, f"stamp: compiled {compiled!r} != python {pure!r}")
        return
    _walk(p.rest(), verify=mode % 3 == 0)


TARGETS = {"core_record": core_record}
