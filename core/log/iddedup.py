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
from bisect import bisect_left
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
_LENS = struct.Struct("<48xII")
_ID_LENS = struct.Struct("<8xQQ24xII")  # one unpack per record (STYLE.md section 7)
_ID_TS = struct.Struct("<8xQQ8xQ")  # id (lo, hi) and append time, one unpack per record


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

# Records one Rebuild.step reads at most: a few ms of the event loop (4,096 records of
# 128 B took ~3 ms here), so a large window (max_entries up to MAX_ENTRIES_LIMIT, the
# REBUILD_MAX_BYTES budget) is read in slices with other work between them.
REBUILD_SLICE = 4096


class Rebuild:
    """:func:`rebuild` in slices: :meth:`step` handles at most ``max_records`` records
    (read back from the tail, then put into the window oldest first) and says whether
    the window is filled. The caller uses the window only once it is, so a half-read log
    never answers :meth:`IdWindow.duplicates`. Records appended after the rebuild began
    are not read (the caller holds the sends that would add them until it is done)."""

    __slots__ = ("window", "read", "cutoff", "low", "hi", "budget", "ids", "times", "reading", "filled")

    def __init__(self, window: IdWindow, read: ReadTail, first_offset: int, next_offset: int, now: int) -> None:
        self.window, self.read = window, read
        self.cutoff = now - window.expiry_us if window.expiry_us else None
        self.low = max(first_offset, next_offset - window.max_entries)
        self.hi = next_offset
        self.budget = REBUILD_MAX_BYTES
        # ids and their append µs: newest first while reading, then oldest first. Two lists
        # of ints, not a tuple per record: ints are not tracked by the cyclic GC, so 131,072
        # records read bring no full collection into a slice.
        self.ids: list[int] = []
        self.times: list[int] = []
        self.reading = True
        self.filled = 0  # entries put into the window

    @property
    def nbytes(self) -> int:
        """Record bytes read so far."""
        return REBUILD_MAX_BYTES - self.budget

    def step(self, max_records: int = REBUILD_SLICE) -> bool:
        """Up to ``max_records`` more records; True once the window is filled (then
        every later call is a no-op)."""
        if self.reading:
            self._read(max_records)
            return False
        start = self.filled
        stop = min(len(self.ids), start + max_records)
        known = self.window._ids
        # IdWindow.add: id 0 never, a repeat keeps its first time
        for msg_id, ts in zip(self.ids[start:stop], self.times[start:stop]):
            if msg_id and msg_id not in known:
                known[msg_id] = ts
        while len(known) > self.window.max_entries:
            known.popitem(last=False)
        self.filled = stop
        if stop < len(self.ids):
            return False
        self.ids, self.times = [], []
        return True

    def _read(self, max_records: int) -> None:
        cutoff, ids, times, read = self.cutoff, self.ids, self.times, self.read
        left = max_records
        while left > 0:
            hi = self.hi
            if hi <= self.low or self.budget <= 0:
                break
            lo = max(self.low, hi - REBUILD_STEP)
            batch = read(lo, hi - lo, self.budget)
            got_ids, got_times = _records(batch)
            n = len(got_ids)
            if not n:
                break
            self.budget -= batch.nbytes
            left -= n
            if cutoff is None or got_times[0] >= cutoff:  # all within the expiry (times never decrease)
                ids.extend(reversed(got_ids))
                times.extend(reversed(got_times))
            else:
                keep = n - bisect_left(got_times, cutoff)  # the newest ``keep`` are within it
                ids.extend(reversed(got_ids[n - keep:]))
                times.extend(reversed(got_times[n - keep:]))
                break  # all before are older
            if batch.first_offset + n < hi:  # cut short by the budget
                break
            self.hi = batch.first_offset
        else:
            return  # the slice is used up: more to read
        ids.reverse()  # oldest first, the window's order
        times.reverse()
        self.reading = False


def rebuild(window: IdWindow, read: ReadTail, first_offset: int, next_offset: int, now: int) -> int:
    """Fill ``window`` from a partition's stored records (``read`` is its
    ``Partition.read``): from the newest back, at most ``window.max_entries``
    records, none appended before ``now - expiry_us``, at most
    :data:`REBUILD_MAX_BYTES` (+ one record) read. Each id is remembered at its
    record's append time, so the expiry runs on from when it was stored.
    Returns the number of record bytes read. In one piece: :class:`Rebuild` slices it."""
    job = Rebuild(window, read, first_offset, next_offset, now)
    while not job.step():
        pass
    return job.nbytes


def _records(batch) -> tuple[list[int], list[int]]:
    """The ids and append µs of the records of a ReadBatch (its chunks are whole records)."""
    ids: list[int] = []
    times: list[int] = []
    sizes, i = batch.sizes, 0
    unpack = _ID_TS.unpack_from
    add_id, add_ts = ids.append, times.append
    for chunk in batch.chunks:
        pos, end = 0, len(chunk)
        while pos < end:
            lo, hi, ts = unpack(chunk, pos)
            add_id(lo | hi << 64 if hi else lo)
            add_ts(ts)
            pos += sizes[i]
            i += 1
    return ids, times


__all__ = ["DEFAULT_EXPIRY_US", "DEFAULT_MAX_ENTRIES", "IdWindow", "MAX_ENTRIES_LIMIT", "MAX_EXPIRY_US",
           "REBUILD_MAX_BYTES", "REBUILD_SLICE", "REBUILD_STEP", "Rebuild", "block_ids", "drop_records", "rebuild"]
