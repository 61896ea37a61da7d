"""The pending side of a partition: appended records not yet written, and the
job that writes them.

Theory of operation
-------------------
``Partition.append`` encodes its records at once and keeps them, per call, in
a :class:`PendingCall` (records as separate ``bytes`` objects: no join until
the write, so a payload is copied once into its record and once into the
batch). Readers are served from these objects until the write completes.

A flush takes a prefix of the pending calls and turns it into a
:class:`FlushJob`: the batch header and index entries are prepared on the trio
thread, and :meth:`FlushJob.run` does only I/O (CRC, the one join, one
``os.write``, one ``fdatasync``), so it can run in a worker thread
(``trio.to_thread``) while the trio thread keeps appending. The job never
touches the partition; the partition applies its outcome afterwards
(``Partition.complete_flush``), on the trio thread, and fires the callbacks.
"""

from __future__ import annotations

import os
import struct
import threading
from itertools import accumulate, chain, repeat
from operator import add
from pathlib import Path
from typing import Callable

from .batch import seal_batch
from .encoded import index_block
from .index import INDEX_ENTRY
from .segment import Segment, fsync_dir, write_all

# fdatasync(2) skips metadata that is not needed to read the data back (mtime);
# macOS has no fdatasync, where fsync is the closest.
fdatasync = getattr(os, "fdatasync", os.fsync)

Callback = Callable[[object], None]
_PAYLOAD_LEN = struct.Struct("<I")  # core.record payload_length, at byte 52


class PendingCall:
    """The records of one ``append`` call, from encoding until they are durable.

    ``followers`` are acks of duplicate appends that arrived after this call:
    they fire right after this call's own callback, never before.

    ``records`` holds one ``bytes`` per record, except for a call made by
    ``Partition.append_encoded``: then it holds the one block of all its
    records and ``sizes`` gives each record's size (``None`` otherwise)."""

    __slots__ = ("base_offset", "count", "timestamp", "byte_pos", "byte_end", "records", "nbytes", "producer",
                 "callback", "result", "followers", "sizes", "plens")  # fmt: skip

    def __init__(
        self, base_offset: int, timestamp: int, byte_pos: int, byte_end: int, records: list[bytes], nbytes: int,
        producer: tuple[str, int] | None, callback: Callback | None, result: object,
        sizes: list[int] | None = None,
    ) -> None:  # fmt: skip
        self.base_offset = base_offset
        self.sizes = sizes
        self.plens: list[int] | None = None  # payload lengths, with ``sizes``
        self.count = len(records) if sizes is None else len(sizes)
        self.timestamp = timestamp
        self.byte_pos = byte_pos  # Pravega byte position of the first record
        self.byte_end = byte_end  # ... and just past the last one
        self.records = records
        self.nbytes = nbytes
        self.producer = producer
        self.callback = callback
        self.result = result
        self.followers: list[tuple[Callback, object]] | None = None

    def record_list(self) -> list[bytes | memoryview]:
        """One bytes-like per record (views into the block of an encoded call)."""
        if self.sizes is None:
            return self.records
        view, out, pos = memoryview(self.records[0]), [], 0
        for size in self.sizes:
            out.append(view[pos : pos + size])
            pos += size
        return out


class FlushJob:
    """One batch write. Built by ``Partition.begin_flush`` on the trio thread;
    :meth:`run` may then run in any thread; ``Partition.complete_flush`` applies it."""

    __slots__ = ("segment", "new_segment", "sealing", "directory", "new_base", "new_start_byte", "ncalls",
                 "nrecords", "head", "chunks", "records_len", "batch_len", "index_data", "time_data", "end_byte",
                 "producers", "fsync", "error", "done", "completed")  # fmt: skip

    def __init__(self) -> None:
        self.segment: Segment | None = None  # target when no roll is needed
        self.new_segment: Segment | None = None  # created by run() on a roll
        self.sealing: Segment | None = None  # the active segment a roll closes
        self.directory: Path | None = None
        self.new_base = 0
        self.new_start_byte = 0
        self.ncalls = 0
        self.nrecords = 0
        self.head = b""
        self.chunks: list[bytes] = []
        self.records_len = 0
        self.batch_len = 0
        self.index_data = b""
        self.time_data = b""
        self.end_byte = 0
        self.producers: list[tuple[str, int, int]] = []  # (id, last sequence, write µs)
        self.fsync = True
        self.error: BaseException | None = None
        # Held until run() ends: a sync flush waits by acquiring it (a Lock is far
        # cheaper to create than an Event, and one is made per batch).
        self.done = threading.Lock()
        self.done.acquire()
        self.completed = False

    @property
    def target(self) -> Segment | None:
        return self.new_segment if self.sealing is not None else self.segment

    def wait(self) -> None:
        """Block until :meth:`run` has finished (in whatever thread runs it)."""
        with self.done:
            pass

    def run(self) -> None:
        """The I/O of the flush. Never raises: an error is kept in ``error``."""
        try:
            if self.sealing is not None:
                self._roll()
            seg = self.target
            write_all(seg.fd, seal_batch(self.head, self.chunks))  # the one write of the batch
            if self.fsync:
                fdatasync(seg.fd)
            # Indexes are rebuildable from the log, so they are written but not
            # synced per batch (recovery.py); a roll syncs them once.
            write_all(seg.index_fd, self.index_data)
            write_all(seg.time_fd, self.time_data)
        except BaseException as exc:  # noqa: BLE001 - handed to the callbacks, never lost
            self.error = exc
        finally:
            self.chunks = []
            self.done.release()

    def _roll(self) -> None:
        # The old segment's indexes become durable before the new file exists, so
        # recovery may trust a sealed segment's index once a later segment is there.
        old = self.sealing
        if self.fsync:
            fdatasync(old.fd)
            os.fsync(old.index_fd)
            os.fsync(old.time_fd)
        self.new_segment = Segment.create(self.directory, self.new_base, self.new_start_byte)
        if self.fsync:
            fsync_dir(self.directory)


def written_producers(taken: list[PendingCall]) -> list[tuple[str, int, int]]:
    """``(producer id, last sequence, its append time)`` of the producers among
    ``taken``, in write order."""
    written: dict[str, tuple[str, int, int]] = {}
    for call in taken:
        if call.producer is not None:
            pid, seq = call.producer
            written.pop(pid, None)
            written[pid] = (pid, seq, call.timestamp)
    return list(written.values())


_ENTRY_STRUCTS: dict[int, struct.Struct] = {}
# Batches of a client come in a few sizes (Iggy's default is 1 000); the cache
# of n-entry formats is dropped past this many sizes rather than grown.
_ENTRY_STRUCTS_MAX = 64


def _entries_struct(n: int) -> struct.Struct:
    """A Struct packing ``n`` offset-index entries at once (``INDEX_ENTRY`` n times)."""
    st = _ENTRY_STRUCTS.get(n)
    if st is None:
        if len(_ENTRY_STRUCTS) >= _ENTRY_STRUCTS_MAX:
            _ENTRY_STRUCTS.clear()
        st = _ENTRY_STRUCTS[n] = struct.Struct("<" + INDEX_ENTRY.format.lstrip("<") * n)
    return st


def index_entries(taken: list[PendingCall], pos: int) -> bytes:
    """Offset-index entries for the records of ``taken`` placed in the segment from ``pos``."""
    pack, plen_of = INDEX_ENTRY.pack, _PAYLOAD_LEN.unpack_from
    parts = []
    for call in taken:
        if call.sizes is not None and index_block is not None:  # core/_speedups.c
            parts.append(index_block(call.sizes, call.plens, pos, call.byte_pos, call.timestamp))
            pos += call.nbytes
            continue
        if call.sizes is not None:  # an encoded block: every entry in one pack, no Python loop
            sizes = call.sizes
            entries = zip(accumulate(sizes, initial=pos), sizes,
                          accumulate(map(add, call.plens, repeat(8)), initial=call.byte_pos), repeat(call.timestamp))
            parts.append(_entries_struct(len(sizes)).pack(*chain.from_iterable(entries)))
            pos += call.nbytes
            continue
        if call.count == 1:  # no need to read the payload length back
            parts.append(pack(pos, call.nbytes, call.byte_pos, call.timestamp))
            pos += call.nbytes
            continue
        byte, ts = call.byte_pos, call.timestamp
        for record in call.records:
            size = len(record)
            parts.append(pack(pos, size, byte, ts))
            pos += size
            byte += 8 + plen_of(record, 52)[0]
    return b"".join(parts)
