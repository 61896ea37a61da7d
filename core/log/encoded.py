"""Appending records that arrive already encoded: a block in the stored layout.

Theory of operation
-------------------
A SendMessages batch of the Iggy 0.8 generation is, byte for byte, a run of
stored records (``core.record``; iggy-middle.md 7.1) with the fields the server
owns left blank: checksum, offset, timestamp, and an id or origin timestamp of
0 when the client leaves them to the server. :func:`stamp_records` fills those
in place in one pass over the block, checking the framing as it goes, so
``Partition.append_encoded`` keeps the block as *one* pending chunk: no
per-message objects, no re-encoding, and the batch write joins it as it is.
Other framings (Iggy 0.9's VSR frames) convert into this layout in one pass
in their adapter, then take the same path.

The loop has a compiled twin, ``core._speedups.stamp`` (core/_speedups.c,
built by setup.py where a C compiler is there): same results and the same
errors, about 10x faster. :data:`COMPILED` says which one runs; the
environment variable ``FERRY_PURE_PYTHON=1`` forces the Python loop.

Pure functions: no I/O, no trio.
"""

from __future__ import annotations

import struct

import xxhash

from ..compiled import load as load_compiled
from ..errors import (
    HeadersTooLarge, InvalidArgument, MalformedRecords, PayloadTooLarge, RecordReservedField, RecordTruncated,
)
from ..message import MAX_HEADERS_SIZE, Headers, reserve_uuid7, uuid7_parts
from ..record import MAX_PAYLOAD, RECORD_HEADER, RECORD_HEADER_SIZE, RecordView, parse_record

# What stamp_records reads of each record (id lo/hi, origin, H, P, reserved) and
# what it writes back (id lo/hi, offset, timestamp, origin) from byte 8: one
# unpack and one pack per record (STYLE.md section 7).
_STAMP_IN = struct.Struct("<8xQQ16xQIIQ")
_STAMP_OUT = struct.Struct("<QQQQQ")
_U64 = struct.Struct("<Q")
_xxh3 = xxhash.xxh3_64_intdigest


def _load_compiled():
    """The ``core._speedups`` module when it is built, its hash agrees with the
    xxhash package on every length class of XXH3 (0..4 KiB), and
    FERRY_PURE_PYTHON is not set; else None (the Python loop runs)."""
    _speedups = load_compiled("core._speedups")
    if _speedups is None:
        return None
    sample = bytes(range(256)) * 17
    if any(_speedups.xxh3_64(sample[:n]) != _xxh3(sample[:n]) for n in (0, 1, 3, 4, 8, 9, 16, 17, 128, 129,
                                                                         240, 241, 1024, 4096)):
        return None
    return _speedups


_speedups = _load_compiled()
COMPILED = _speedups is not None
_compiled_stamp = _speedups.stamp if COMPILED else None
# Compiled twins used elsewhere (None: take the Python path): the offset-index
# entries of a block (core.log.pending.index_entries), and a read-only framing
# walk over stored records (adapters.iggy.messages, apache-iggy 0.8 sends).
index_block = _speedups.index_block if COMPILED else None
walk_records = _speedups.walk if COMPILED else None


def stamp_records(
    buf: bytearray, count: int, base_offset: int, timestamp: int
) -> tuple[list[int], list[int]]:
    """Turn ``buf``, exactly ``count`` records in the stored layout (as a client
    of the Iggy 0.8 generation sends them: checksum, offset and timestamp are
    ignored), into stored records, in place and in one pass: check the framing,
    give record *i* offset ``base_offset + i`` and ``timestamp``, a UUIDv7 where
    the id is 0, ``timestamp`` as origin where that is 0, then its checksum.

    Returns ``(sizes, payload_lengths)``, per record: what the index entries
    and the Pravega byte view (``8 + payload_length`` each, docs/storage.md) need.
    Raises RecordTruncated, RecordReservedField, MalformedRecords (lengths do
    not frame exactly ``count`` records), PayloadTooLarge, HeadersTooLarge or a
    HeaderError (a header block that is not a valid TLV block, core.message);
    ``buf`` may then be half stamped, but nothing else changed."""
    if count < 1:
        raise InvalidArgument("no records to append")
    if _compiled_stamp is not None:
        return _stamp_compiled(buf, count, base_offset, timestamp)
    return _stamp_python(buf, count, base_offset, timestamp)


def _stamp_compiled(buf: bytearray, count: int, base_offset: int, timestamp: int) -> tuple[list[int], list[int]]:
    with memoryview(buf) as view:
        out = _compiled_stamp(buf, count, base_offset, timestamp, MAX_PAYLOAD, MAX_HEADERS_SIZE, view, _check_record,
                              _id_block)
    if out[0] is not None:
        return out
    if out[1] == "truncated":
        raise RecordTruncated(f"record {out[2]} is shorter than its header", index=out[2])
    raise MalformedRecords(f"{out[2]} bytes after the last of {count} records")


def _stamp_python(buf: bytearray, count: int, base_offset: int, timestamp: int) -> tuple[list[int], list[int]]:
    end = len(buf)
    unpack, pack_into, set_sum = _STAMP_IN.unpack_from, _STAMP_OUT.pack_into, _U64.pack_into
    hash_of = _xxh3
    sizes: list[int] = []
    plens: list[int] = []
    add_size, add_plen = sizes.append, plens.append
    head, max_payload = RECORD_HEADER_SIZE, MAX_PAYLOAD  # locals: read once per record
    id_lo = id_hi = -1  # the block's UUIDv7s, reserved at the first record without an id
    pos = 0
    with memoryview(buf) as view:
        for offset in range(base_offset, base_offset + count):
            if end - pos < head:
                raise RecordTruncated(f"record {offset - base_offset} is shorter than its header",
                                      index=offset - base_offset)
            lo, hi, origin, hlen, plen, reserved = unpack(buf, pos)
            stop = pos + head + plen + hlen
            if reserved or hlen or stop > end or plen > max_payload:  # one test on the common path
                _check_record(view, stop, end, hlen, plen, reserved, offset - base_offset)
            if not (lo or hi):
                if id_hi < 0:
                    id_lo, id_hi = _id_block(count, offset)
                lo, hi = id_lo + offset, id_hi
            pack_into(buf, pos + 8, lo, hi, offset, timestamp, origin or timestamp)
            set_sum(buf, pos, hash_of(view[pos + 8 : stop]))
            add_size(stop - pos)
            add_plen(plen)
            pos = stop
    if pos != end:
        raise MalformedRecords(f"{end - pos} bytes after the last of {count} records")
    return sizes, plens


def _check_record(view: memoryview, stop: int, end: int, hlen: int, plen: int, reserved: int, index: int) -> None:
    """The rare cases of :func:`stamp_records`: raise for a bad record, or validate
    its header block (a TLV block every dialect can read back, core.message)."""
    if reserved:
        raise RecordReservedField("reserved field is not zero", index=index)
    if stop > end:
        raise MalformedRecords(f"record {index} runs past the block", index=index)
    if plen > MAX_PAYLOAD:
        raise PayloadTooLarge(f"payload of {plen} bytes exceeds {MAX_PAYLOAD}")
    if hlen > MAX_HEADERS_SIZE:
        raise HeadersTooLarge(f"header block of {hlen} bytes exceeds {MAX_HEADERS_SIZE}")
    Headers.decode(view[stop - hlen : stop])  # validates; the bytes stay as they are


def _id_block(count: int, first_offset: int) -> tuple[int, int]:
    """``(lo_base, hi)``: the record at ``offset`` (from ``first_offset`` on) gets
    the UUIDv7 with low u64 ``lo_base + offset`` and high u64 ``hi``: one block
    of ``count`` ids, which never carries into the high half (Uuid7Generator.reserve)."""
    ms, counter = reserve_uuid7(count)
    lo, hi = uuid7_parts(ms, counter)
    return lo - first_offset, hi


def records_of(block: bytes | bytearray | memoryview) -> list[RecordView]:
    """Parsed views of every record of a stamped block, for listeners that need
    per-message objects (the checksums were just computed: not re-verified)."""
    out, pos, end = [], 0, len(block)
    while pos < end:
        rv = parse_record(block, pos, verify=False)
        out.append(rv)
        pos += rv.size
    return out


def block_of(items) -> bytearray:
    """``AppendInput``-like items (``payload``, ``headers``, ``id``, ``origin_timestamp``)
    as one unstamped block for :func:`stamp_records` (``Broker.append_records``):
    checksum, offset and timestamp left 0, payload then header block. Raises
    InvalidArgument for a field that does not fit its slot."""
    head, mask = RECORD_HEADER.pack, (1 << 64) - 1
    parts: list = []
    try:
        for item in items:
            parts += (head(0, item.id & mask, item.id >> 64, 0, 0, item.origin_timestamp, len(item.headers),
                           len(item.payload), 0), item.payload, item.headers)
    except struct.error as exc:  # an id outside u128, a negative or too large origin (as encode_record)
        raise InvalidArgument(f"record field out of range: {exc}") from exc
    return bytearray().join(parts)


def payload_block(payloads) -> bytearray:
    """Messages that are only a payload (no headers, id or origin: the core assigns them),
    as one unstamped block for :func:`stamp_records` -- what :func:`block_of` gives for
    ``AppendInput(payload)`` items, without building them (Pravega events, one per frame)."""
    head = RECORD_HEADER.pack
    parts: list = []
    for payload in payloads:
        parts += (head(0, 0, 0, 0, 0, 0, 0, len(payload), 0), payload)
    return bytearray().join(parts)


__all__ = ["COMPILED", "block_of", "payload_block", "index_block", "records_of", "stamp_records", "walk_records"]
