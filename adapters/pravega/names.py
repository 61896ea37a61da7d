"""Pravega's qualified segment names and how they land on Ferry topics.

Theory of operation
-------------------
A Pravega client names every segment it touches with one string
(pravega.md section 9)::

    <scope>/<stream>/<number>.#epoch.<epoch>                 a stream segment
    <scope>/<stream>/<number>.#epoch.<epoch>#transaction.<32 hex>   a transaction's segment
    <scope>/<stream>/<number>.#epoch.<epoch>#transient.<hex>.<hex>  a large event's parts
    <scope>/<readerGroup>_kvtable/0.#epoch.0                  a 0.3.8 reader group's table

and the controller hands out segment ids as ``epoch << 32 | number``. Ferry
maps scope/stream onto stream/topic with the one rule in
:mod:`core.addressing` and segment number onto partition id. Streams never
scale here, so every epoch is 0 and a name with another epoch names nothing
(NoSuchSegment). Table segments are not topics: they live in the broker's
key-value tables under their full name (``core.kvtables``).

This module is pure: strings in, tuples out.
"""

from __future__ import annotations

from dataclasses import dataclass

EPOCH_MARK = ".#epoch."
TXN_MARK = "#transaction."
TRANSIENT_MARK = "#transient."
TABLE_SUFFIX = "_kvtable"  # the 0.3.8 client's reader-group tables (pravega.md section 8)
MAX_SEGMENT_NUMBER = (1 << 32) - 1  # the low half of a segment id (pravega.md section 9)
TXN_HEX = 32  # a transaction id is a UUID written as 32 hex digits


@dataclass(frozen=True, slots=True)
class SegmentName:
    """A parsed stream-segment name. ``txn`` is the 32-hex transaction id of a
    transaction segment, ``transient`` the suffix of a large event's part."""

    scope: str
    stream: str
    number: int
    epoch: int = 0
    txn: str | None = None
    transient: str | None = None

    @property
    def segment_id(self) -> int:
        return (self.epoch << 32) | self.number

    @property
    def base(self) -> str:
        """The name of the stream segment itself (without a txn/transient suffix)."""
        return qualified(self.scope, self.stream, self.number, self.epoch)


def qualified(scope: str, stream: str, number: int, epoch: int = 0) -> str:
    """``scope/stream/number.#epoch.epoch``: what clients send for a segment."""
    return f"{scope}/{stream}/{number}{EPOCH_MARK}{epoch}"


def parse_segment(name: str) -> SegmentName | None:
    """The parts of a stream-segment name, or ``None`` when it is not one."""
    parts = name.split("/")
    if len(parts) != 3 or not parts[0] or not parts[1]:
        return None
    scope, stream, rest = parts
    txn = transient = None
    if TXN_MARK in rest:
        rest, txn = rest.split(TXN_MARK, 1)
        if len(txn) != TXN_HEX or not _is_hex(txn):
            return None
    elif TRANSIENT_MARK in rest:
        rest, transient = rest.split(TRANSIENT_MARK, 1)
        if not transient:
            return None
    number, sep, epoch = rest.partition(EPOCH_MARK)
    if not sep:
        number, epoch = rest, "0"  # Pravega accepts a bare number for epoch 0
    if not (number.isdigit() and epoch.isdigit() and number.isascii() and epoch.isascii()):
        return None
    n, e = int(number), int(epoch)
    if n > MAX_SEGMENT_NUMBER or e > MAX_SEGMENT_NUMBER:
        return None
    return SegmentName(scope, stream, n, e, txn, transient)


def is_table_segment(name: str) -> bool:
    """True for a reader group's table (``scope/<name>_kvtable/...``)."""
    parts = name.split("/")
    return len(parts) >= 2 and parts[1].endswith(TABLE_SUFFIX)


def split_segment_id(segment_id: int) -> tuple[int, int]:
    """``(epoch, number)`` of a controller segment id."""
    return segment_id >> 32, segment_id & MAX_SEGMENT_NUMBER


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)


__all__ = [
    "SegmentName",
    "TABLE_SUFFIX",
    "is_table_segment",
    "parse_segment",
    "qualified",
    "split_segment_id",
]
