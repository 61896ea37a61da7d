"""A window of recently stored message ids: deduplication by the canonical u128 id.

Theory of operation
-------------------
Iggy's server can drop a message whose id it stored a short while ago (its
``[system.message_deduplication]`` setting, off by default: apache/iggy
server-0.8.0 ``core/common/src/deduplication/message_deduplicator.rs``, applied
per partition in ``core/common/src/types/message/messages_batch_mut.rs``
``prepare_for_persistence``). A client that resends a batch after a lost reply
(a crash between storing and answering) then stores it once. This module owns
that window for one partition; the protocol decides when to use it (the Iggy
adapter, ``adapters/iggy/dedup.py``).

* :class:`IdWindow` remembers ids in arrival order with the time each arrived:
  at most ``max_entries`` (the oldest goes first) and none older than
  ``expiry_us`` (0: no expiry, the count alone bounds it). A repeat does not
  refresh an entry (upstream's ``try_insert`` leaves an existing id alone).
* :meth:`IdWindow.duplicates` says which records of a batch to drop: an id in
  the window, or one seen earlier in the same batch (upstream inserts each id as
  it walks the batch, so the second of two equal ids is the duplicate). Id 0
  asks the server for a fresh UUIDv7 and is never a duplicate.
* :func:`block_ids` reads the ids of a block in the stored layout
  (``core.record``) without decoding anything else; :func:`drop_records` copies
  out the records to keep, once.
* :func:`rebuild` refills a window from the tail of a partition's log (ids are
  stored in the records), so a window survives ``kill -9``: the newest records
  first, no further back than ``max_entries`` records, the expiry, or
  :data:`REBUILD_MAX_BYTES` read, whichever comes first.

Pure: no I/O beyond the ``read`` callable handed in, no clock (``now`` is an
argument), no trio.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from typing import Callable, Sequence

from ..errors import InvalidArgument
from ..record import RECORD_HEADER_SIZE

# Upstream's server.toml defaults (server-0.8.0 core/server/config.toml,
# [system.message_deduplication]): max_entries = 10000, expiry = "1 m".
DEFAULT_MAX_ENTRIES = 10_000
DEFAULT_EXPIRY_US = 60 * 1_000_000
# Upstream lets 0 mean "unbounded" (a moka cache without max_capacity). Ferry keeps a
# bound: an entry costs ~150 bytes here (an OrderedDict node, a 128-bit int, a time),
# so one partition's window stays under ~150 MiB at this count.
MAX_ENTRIES_LIMIT = 1_000_000
# Past ten years an expiry is surely a unit mistake (seconds vs µs).
MAX_EXPIRY_US = 10 * 365 * 24 * 3600 * 1_000_000
# Rebuilding a window reads at most this many record bytes from the log's tail, so
# the first deduplicated send after a start is not held up by a large window of
# large messages (16 MiB: a few ms of reading from the page cache; at most one
# record more, since a read always returns one record, core/log/reads.py).
REBUILD_MAX_BYTES = 16 * 1024 * 1024
# Records asked for per read while walking back from the tail: small enough that a
# read cut short by the byte budget wastes little, large enough to keep reads few.
REBUILD_STEP = 256

# The id of a stored record: u128 little-endian at bytes 8..24 (lo, hi), its append
# time at 32..40, header-block and payload lengths at 48..56 (core.record RECORD_HEADER).
_ID = struct.Struct("<8xQQ")
_TS = struct.Struct("<32xQ")
_LENS = struct.Struct("<48xII")
_ID_LENS = struct.Struct("<8xQQ24xII")  # one unpack per record (STYLE.md section 7)


class IdWindow:
    """The ids stored in one partition recently: at most ``max_entries``, none older
    than ``expiry_us`` (0 = no expiry). Times are µs, handed in by the caller."""

    __slots__ = ("max_entries", "expiry_us", "_ids")

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES, expiry_us: int = DEFAULT_EXPIRY_US) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) \
                or not 1 <= max_entries <= MAX_ENTRIES_LIMIT:
            raise InvalidArgument(f"max_entries must be in 1..{MAX_ENTRIES_LIMIT}, got {max_entries!r}")
        if isinstance(expiry_us, bool) or not isinstance(expiry_us, int) or not 0 <= expiry_us <= MAX_EXPIRY_US:
            raise InvalidArgument(f"expiry must be in 0..{MAX_EXPIRY_US} µs, got {expiry_us!r}")
        self.max_entries = max_entries
        self.expiry_us = expiry_us
        self._ids: OrderedDict[int, int] = OrderedDict()  # id -> arrival µs, oldest first

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, msg_id: int) -> bool:
        return msg_id in self._ids

    def expire(self, now: int) -> None:
        """Forget ids that arrived more than ``expiry_us`` before ``now``."""
        if not self.expiry_us:
            return
        cutoff, ids = now - self.expiry_us, self._ids
        while ids:
            oldest = next(iter(ids))
            if ids[oldest] >= cutoff:
                return
            ids.popitem(last=False)

    def duplicates(self, ids: Sequence[int], now: int) -> list[int]:
        """Indexes of ``ids`` to drop: non-zero ids in the window, or repeated
        earlier in ``ids``. Changes nothing but expiry (see :meth:`add_all`)."""
        self.expire(now)
        known = self._ids
        distinct = set(ids)
        distinct.discard(0)
        # The common case in C: no id known, none repeated (0s aside).
        if known.keys().isdisjoint(distinct) and len(distinct) + ids.count(0) == len(ids):
            return []
        seen: set[int] = set()
        drop: list[int] = []
        for i, msg_id in enumerate(ids):
            if not msg_id:
                continue
            if msg_id in known or msg_id in seen:
                drop.append(i)
            else:
                seen.add(msg_id)
        return drop

    def add(self, msg_id: int, now: int) -> None:
        """Remember ``msg_id`` as arrived at ``now`` (an id already there keeps its time);
        past ``max_entries`` the oldest entry goes."""
        ids = self._ids
        if not msg_id or msg_id in ids:
            return
        ids[msg_id] = now
        if len(ids) > self.max_entries:
            ids.popitem(last=False)

    def forget(self, ids: Sequence[int]) -> None:
        """Drop ``ids``: the append that carried them failed, so a resend must be stored."""
        known = self._ids
        for msg_id in ids:
            known.pop(msg_id, None)

    def add_all(self, ids: Sequence[int], now: int) -> None:
        """:meth:`add` each id: call it once the records that carry them are stored."""
        known = self._ids
        if known.keys().isdisjoint(ids):  # the common case: one update in C, then trim
            known.update(dict.fromkeys(ids, now))
            known.pop(0, None)
            while len(known) > self.max_entries:
                known.popitem(last=False)
            return
        for msg_id in ids:
            self.add(msg_id, now)


def block_ids(block: bytes | bytearray | memoryview, count: int) -> list[int] | None:
    """The u128 id of each of the ``count`` records in ``block`` (stored layout,
    as a send hands it over: server fields may be blank), or None when the lengths
    do not frame exactly ``count`` records (the append then refuses the block with
    its own error, core/log/encoded.py)."""
    out: list[int] = []
    pos, end = 0, len(block)
    unpack, head, add = _ID_LENS.unpack_from, RECORD_HEADER_SIZE, out.append
    for _ in range(count):
        if end - pos < head:
            return None
        lo, hi, hlen, plen = unpack(block, pos)
        add(lo | hi << 64 if hi else lo)
        pos += head + hlen + plen
    return out if pos == end else None


def drop_records(block: bytes | bytearray, count: int, drop: Sequence[int]) -> bytearray:
    """A new block: ``block``'s records (``count``, framed as :func:`block_ids`
    checked) without those at the indexes in ``drop`` (ascending); one join."""
    skip, parts, pos = set(drop), [], 0
    unpack_lens, head = _LENS.unpack_from, RECORD_HEADER_SIZE
    with memoryview(block) as view:
        for i in range(count):
            hlen, plen = unpack_lens(block, pos)
            stop = pos + head + hlen + plen
            if i not in skip:
                parts.append(view[pos:stop])
            pos = stop
        return bytearray().join(parts)


ReadTail = Callable[[int, int, int], "object"]  # (offset, count, max_bytes) -> ReadBatch


def rebuild(window: IdWindow, read: ReadTail, first_offset: int, next_offset: int, now: int) -> int:
    """Fill ``window`` from a partition's stored records (``read`` is its
    ``Partition.read``): from the newest back, at most ``window.max_entries``
    records, none appended before ``now - expiry_us``, at most
    :data:`REBUILD_MAX_BYTES` (+ one record) read. Each id is remembered at its
    record's append time, so the expiry runs on from when it was stored.
    Returns the number of record bytes read."""
    cutoff = now - window.expiry_us if window.expiry_us else None
    low = max(first_offset, next_offset - window.max_entries)
    found: list[tuple[int, int]] = []  # (id, append µs), newest first
    budget, hi = REBUILD_MAX_BYTES, next_offset
    while hi > low and budget > 0:
        lo = max(low, hi - REBUILD_STEP)
        batch = read(lo, hi - lo, budget)
        records = _records(batch)
        if not records:
            break
        budget -= batch.nbytes
        older = False
        for msg_id, ts in reversed(records):
            if cutoff is not None and ts < cutoff:
                older = True  # append times never decrease in a partition: all before are older
                break
            found.append((msg_id, ts))
        if older or batch.first_offset + len(records) < hi:  # expired, or cut short by the budget
            break
        hi = batch.first_offset
    for msg_id, ts in reversed(found):
        window.add(msg_id, ts)
    return REBUILD_MAX_BYTES - budget


def _records(batch) -> list[tuple[int, int]]:
    """``(id, append µs)`` of each record of a ReadBatch (its chunks are whole records)."""
    out = []
    sizes, i = batch.sizes, 0
    unpack_id, unpack_ts = _ID.unpack_from, _TS.unpack_from
    for chunk in batch.chunks:
        pos, end = 0, len(chunk)
        while pos < end:
            lo, hi = unpack_id(chunk, pos)
            out.append((lo | hi << 64, unpack_ts(chunk, pos)[0]))
            pos += sizes[i]
            i += 1
    return out


__all__ = ["DEFAULT_EXPIRY_US", "DEFAULT_MAX_ENTRIES", "IdWindow", "MAX_ENTRIES_LIMIT", "MAX_EXPIRY_US",
           "REBUILD_MAX_BYTES", "REBUILD_STEP", "block_ids", "drop_records", "rebuild"]
