"""Reader groups of the 0.3.8 client, read back from their key-value tables (no trio, no I/O).

Theory of operation
-------------------
Ferry keeps no reader-group state of its own: the Rust client (PyPI pravega 0.3.8) keeps
it in a table segment ``<scope>/<group>_kvtable/0.#epoch.0`` (docs/pravega.md, "reader
group"), which lands in the broker's key-value tables (core/kvtables.py). This module
decodes that table for the web console (adapters/http/routes_console_readers.py), read
only, as the client's ``TableSynchronizer`` writes it (pravega-client-rust
``src/sync/table.rs`` and ``src/event/reader_group_state.rs``, read 2026-12):

* every key is a CBOR text ``"NN<outer>"`` (a map's marker) or ``"NN<outer>/<inner>"``,
  ``NN`` the outer key's length in two digits;
* every value is a CBOR map ``{"type_id": text, "data": [bytes as an array of ints]}``;
  ``type_id`` ``"tombstone"`` is a removed entry, and ``data`` is itself CBOR (serde_cbor);
* outer keys: ``assigned_segments`` (inner: reader id; data: map from a ScopedSegment
  ``{scope: {name}, stream: {name}, segment: {number, tx_id}}`` to an Offset ``{read}``),
  ``unassigned_segments`` (inner: the segment's qualified name; data: an Offset),
  ``distance_to_tail`` (inner: reader id; a u64, ``u64::MAX`` until measured), ``config``
  (inner ``default``: ``{"V1": {"starting_stream_cuts": {ScopedStream: cut}, ...}}``).

``read`` is a position in the segment's event view (8 + payload bytes per event,
core/log/reads.py), so the broker's partition turns it into events and bytes behind the
tail. The client writes an online reader's positions back only now and then (when it
releases a segment to another reader, or goes offline): what the table says is what the
rest of the group would resume from, which is the lag that matters.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from core.errors import FerryError

from .names import TABLE_SUFFIX, parse_segment, qualified

TABLE_TAIL = TABLE_SUFFIX + "/0.#epoch.0"  # the one table segment of a group (names.py)
ASSIGNED, UNASSIGNED, DISTANCE = "assigned_segments", "unassigned_segments", "distance_to_tail"
TOMBSTONE = "tombstone"
# A group's table holds a few entries per reader and segment; more than this is not a
# reader group we can show on one page (the console says the listing was cut).
MAX_TABLE_ENTRIES = 10_000
# Nesting the client's values never come near (a map of structs of structs: 4); a guard
# against a hostile table making the decoder recurse without end.
MAX_CBOR_DEPTH = 16
# Items per CBOR array or map: the client's largest (a reader's segments, a value's bytes
# as an array of ints) stay far below; a guard against a length that claims gigabytes.
MAX_CBOR_ITEMS = 1 << 20
U64_MAX = (1 << 64) - 1


class CborError(ValueError):
    """Bytes that are not the CBOR subset the client writes."""


def cbor_decode(data: bytes):
    """One CBOR item (RFC 8949) as Python values: maps become dicts, or lists of pairs when a
    key is itself a map (serde_cbor writes struct-keyed maps). Raises :class:`CborError`."""
    value, end = _item(memoryview(data), 0, 0)
    if end != len(data):
        raise CborError("trailing bytes after the CBOR item")
    return value


def _head(buf: memoryview, pos: int) -> tuple[int, int, int]:
    """(major type, argument, next position) of the item at ``pos``."""
    if pos >= len(buf):
        raise CborError("CBOR item cut short")
    first = buf[pos]
    major, info = first >> 5, first & 31
    if info < 24:
        return major, info, pos + 1
    if info > 27:
        raise CborError("indefinite lengths and reserved values are not written by the client")
    size = 1 << (info - 24)
    if pos + 1 + size > len(buf):
        raise CborError("CBOR item cut short")
    return major, int.from_bytes(buf[pos + 1:pos + 1 + size], "big"), pos + 1 + size


def _item(buf: memoryview, pos: int, depth: int):
    if depth > MAX_CBOR_DEPTH:
        raise CborError("CBOR nested too deep")
    start = pos
    major, arg, pos = _head(buf, pos)
    if major == 0:
        return arg, pos
    if major == 1:
        return -1 - arg, pos
    if major in (2, 3):
        if pos + arg > len(buf):
            raise CborError("CBOR string cut short")
        raw = bytes(buf[pos:pos + arg])
        if major == 2:
            return raw, pos + arg
        try:
            return raw.decode("utf-8"), pos + arg
        except UnicodeDecodeError:
            raise CborError("CBOR text is not UTF-8") from None
    if major in (4, 5) and arg > MAX_CBOR_ITEMS:
        raise CborError("CBOR container too large")
    if major == 4:
        items = []
        for _ in range(arg):
            value, pos = _item(buf, pos, depth + 1)
            items.append(value)
        return items, pos
    if major == 5:
        pairs = []
        for _ in range(arg):
            key, pos = _item(buf, pos, depth + 1)
            value, pos = _item(buf, pos, depth + 1)
            pairs.append((key, value))
        if all(isinstance(k, (str, int)) for k, _ in pairs):
            return dict(pairs), pos
        return pairs, pos
    if major == 6:  # a tag: the client writes none; keep the tagged value
        return _item(buf, pos, depth + 1)
    info = buf[start] & 31  # major 7: simple values and floats
    simple = {20: False, 21: True, 22: None, 23: None}
    if info in simple:
        return simple[info], pos
    if info == 25:
        return struct.unpack(">e", bytes(buf[start + 1:pos]))[0], pos
    if info in (26, 27):
        return struct.unpack(">f" if info == 26 else ">d", bytes(buf[start + 1:pos]))[0], pos
    raise CborError("unknown CBOR simple value")


# -- the table ---------------------------------------------------------------------------
@dataclass(slots=True)
class SegmentPosition:
    """One segment of a group: who holds it and where the group stands in it."""

    segment: str                 # qualified name, scope/stream/n.#epoch.0
    reader: str | None           # None: unassigned (waiting for a reader)
    read: int                    # event-view byte position the client stored
    # filled from the broker: the segment's ferry topic and how far behind its tail
    stream: str | None = None
    topic: str | None = None
    stream_id: int | None = None
    topic_id: int | None = None
    partition: int | None = None
    end: int | None = None       # the event view's length now
    lag_bytes: int | None = None
    lag_events: int | None = None


@dataclass(slots=True)
class ReaderGroup:
    scope: str
    name: str
    readers: list[str] = field(default_factory=list)      # online readers
    distance: dict[str, int] = field(default_factory=dict)  # reader -> client's distance to tail, when measured
    segments: list[SegmentPosition] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)     # entries that did not decode
    truncated: bool = False


def group_tables(tables) -> list[tuple[str, str, str]]:
    """(table name, scope, group) of every reader group's table, sorted."""
    out = []
    for name in tables.list():
        scope, sep, rest = name.partition("/")
        if sep and rest.endswith(TABLE_TAIL) and "/" not in rest[:-len(TABLE_TAIL)]:
            out.append((name, scope, rest[:-len(TABLE_TAIL)]))
    return out


def _split_key(raw: bytes) -> tuple[str, str | None]:
    text = cbor_decode(raw)
    if not isinstance(text, str) or len(text) < 2 or not text[:2].isdigit():
        raise CborError("not a synchronizer key")
    n = int(text[:2])
    outer, rest = text[2:2 + n], text[2 + n:]
    if len(outer) != n or (rest and not rest.startswith("/")):
        raise CborError("not a synchronizer key")
    return outer, (rest[1:] if rest else None)


def _value(raw: bytes) -> tuple[str, object]:
    doc = cbor_decode(raw)
    if not isinstance(doc, dict) or not isinstance(doc.get("type_id"), str):
        raise CborError("not a synchronizer value")
    data = doc.get("data")
    if doc["type_id"] == TOMBSTONE:
        return TOMBSTONE, None
    if isinstance(data, list) and all(isinstance(b, int) and 0 <= b < 256 for b in data):
        data = bytes(data)
    if not isinstance(data, bytes):
        raise CborError("synchronizer value without data")
    return doc["type_id"], cbor_decode(data)


def _segment_name(doc) -> str:
    """A serde ScopedSegment as its qualified name."""
    if not isinstance(doc, dict):
        raise CborError("not a ScopedSegment")
    try:
        scope, stream = doc["scope"]["name"], doc["stream"]["name"]
        number = doc["segment"]["number"]
    except (KeyError, TypeError):
        raise CborError("not a ScopedSegment") from None
    if not (isinstance(scope, str) and isinstance(stream, str) and isinstance(number, int)):
        raise CborError("not a ScopedSegment")
    # Ferry's streams never scale: every segment is of epoch 0 (names.py)
    return qualified(scope, stream, number & 0xFFFF_FFFF, number >> 32)


def _read_of(offset) -> int:
    if not isinstance(offset, dict) or not isinstance(offset.get("read"), int):
        raise CborError("not an Offset")
    return offset["read"]


def read_group(tables, table: str, scope: str, name: str) -> ReaderGroup:
    """The group kept in ``table`` as its client last wrote it (positions not yet placed)."""
    group = ReaderGroup(scope, name)
    entries = tables.entries(table, None, MAX_TABLE_ENTRIES + 1)
    if len(entries) > MAX_TABLE_ENTRIES:
        entries, group.truncated = entries[:MAX_TABLE_ENTRIES], True
    for key, value, _version in entries:
        try:
            outer, inner = _split_key(key)
            if inner is None or outer not in (ASSIGNED, UNASSIGNED, DISTANCE):
                continue  # a map's marker, or the group's config (the segments say what it reads)
            type_id, data = _value(value)
            if type_id == TOMBSTONE:
                continue  # a reader that went offline, a segment handed to a reader
            if outer == ASSIGNED:
                group.readers.append(inner)
                pairs = list(data.items()) if isinstance(data, dict) else data
                if not isinstance(pairs, list):
                    raise CborError("not a segment map")
                for seg, offset in pairs:
                    group.segments.append(SegmentPosition(_segment_name(seg), inner, _read_of(offset)))
            elif outer == UNASSIGNED:
                group.segments.append(SegmentPosition(inner, None, _read_of(data)))
            elif isinstance(data, int) and data != U64_MAX:  # u64::MAX: not measured yet
                group.distance[inner] = data
        except CborError as exc:
            group.problems.append(f"{key[:64]!r}: {exc}")
    group.readers.sort()
    group.segments.sort(key=lambda s: s.segment)
    return group


def place(broker, group: ReaderGroup) -> None:
    """Fill each segment's topic, partition and lag from the broker (a segment whose topic
    is gone keeps None there)."""
    for seg in group.segments:
        parsed = parse_segment(seg.segment)
        names = broker.addressing.topic_for_pravega(parsed.scope, parsed.stream) if parsed else None
        if names is None:
            continue
        try:
            topic = broker.get_topic(*names)
            if parsed.number >= topic.partitions_count:
                continue
            part = broker.partition(topic.stream_id, topic.id, parsed.number)
            start = broker.topic_state.partition_byte_start(topic.stream_id, topic.id, parsed.number)
            end = broker.topic_state.partition_byte_end(topic.stream_id, topic.id, parsed.number)
            # a position below a truncation resumes at the start (the segment store says so)
            at = min(max(seg.read, start, part.byte_start), end)
            behind = part.next_offset - part.offset_for_byte_pos(at)
        except FerryError:
            continue
        seg.stream, seg.topic, seg.partition = names[0], names[1], parsed.number
        seg.stream_id, seg.topic_id = topic.stream_id, topic.id
        seg.end, seg.lag_bytes, seg.lag_events = end, max(end - seg.read, 0), max(behind, 0)


__all__ = ["MAX_TABLE_ENTRIES", "CborError", "ReaderGroup", "SegmentPosition", "cbor_decode", "group_tables",
           "place", "read_group"]
