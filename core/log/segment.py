"""One segment: a ``<base>.log`` file of batches plus its two index tables.

Theory of operation
-------------------
A segment is *active* (the one flushes append to: its index tables live in
growable ``bytearray``s and are also appended to their files) or *sealed*
(immutable: its tables are mapped read-only). Only the trio thread touches a
``Segment``'s Python state; the flusher's worker thread only writes through the
file descriptors handed to it in a ``FlushJob`` (``core/log/pending.py``).

Reads slice records out of one ``pread`` of the needed byte range. A sealed
segment is trusted batch by batch: the first read touching a batch reads the
whole batch and checks its CRC (``batch.py``); verified batch numbers are
remembered so later reads only fetch the records they return. A failed check
raises :class:`CorruptSegment`; the partition then quarantines the segment.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..compiled import load
from ..errors import CorruptSegment
from .batch import batch_crc_ok, batch_entries, parse_batch_header
from .index import I_BYTE, I_LEN, I_POS, INDEX_ENTRY, T_FIRST, T_POS, TIME_ENTRY, EntryTable

log = logging.getLogger("ferry.log")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_SUFFIX = ".timeindex"
SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_SUFFIX)
# 20 digits: a u64 offset always fits, and names sort in offset order (Kafka's
# 00000000000000000000.log convention).
NAME_DIGITS = 20
_PAYLOAD_LEN_AT = 52  # core.record: payload_length u32 at byte 52
# The compiled record walk of read() (core/_speedups.c index_spans), or None: pure Python.
_index_spans = getattr(load("core._speedups"), "index_spans", None)
_APPEND_FLAGS = os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)


def segment_name(base_offset: int) -> str:
    return f"{base_offset:0{NAME_DIGITS}d}"


def pread_exact(fd: int, n: int, pos: int) -> bytes:
    """``n`` bytes at ``pos``; CorruptSegment if the file is shorter (it shrank under us)."""
    data = os.pread(fd, n, pos)
    while len(data) < n:
        more = os.pread(fd, n - len(data), pos + len(data))
        if not more:
            raise CorruptSegment("segment file shorter than its index", position=pos + len(data))
        data += more
    return data


def fsync_dir(path: Path) -> None:
    """Make a created, renamed or removed directory entry durable (POSIX needs
    an fsync of the directory itself, see fsync(2) NOTES)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(path: Path, fsync: bool = True) -> None:
    """``path.mkdir(parents=True, exist_ok=True)`` with every directory it creates made
    durable (when ``fsync``): a new directory's name lives in its parent, so the parent is
    fsynced, else a power cut can take the directory away with every file acknowledged in
    it (fsync(2) NOTES; found by tests/gateway/test_powerloss.py on lazyfs)."""
    missing = []
    at = path
    while not at.exists() and at.parent != at:
        missing.append(at)
        at = at.parent
    path.mkdir(parents=True, exist_ok=True)
    if fsync:
        for created in reversed(missing):
            fsync_dir(created.parent)


def fsync_unsynced_dirs(partitions, root: Path) -> OSError | None:
    """At a clean shutdown, fsync the directories of every ``never`` partition and those
    above it up to ``root``, deepest first; the first failure (logged) or None. Under
    ``never`` segments and directories were created without syncing their names, so the
    final fdatasyncs alone left the records unreachable after a power cut (lazyfs showed
    a clean shutdown then a cut keeping none of them): with this a clean shutdown is
    durable under any policy, as docs/storage.md promises."""
    dirs: set[Path] = set()
    for part in partitions:
        cfg, path = getattr(part, "cfg", None), getattr(part, "path", None)
        if cfg is not None and not cfg.fsyncs and path is not None and path.is_relative_to(root):
            dirs |= {path, *(p for p in path.parents if p.is_relative_to(root))}
    first: OSError | None = None
    for path in sorted(dirs, key=lambda p: -len(p.parts)):
        try:
            fsync_dir(path)
        except OSError as exc:
            log.error("final fsync of directory %s failed: %s", path, exc)
            first = first or exc
    return first


# A read's byte budget as the compiled walk takes it (Py_ssize_t); sys.maxsize, "no limit", fits.
_MAX_BUDGET = (1 << 63) - 1


def _spans_python(buf, rel: int, end_rel: int, budget: int, need_one: bool) -> tuple[list[int], list[tuple[int, int]]]:
    """Records ``rel..end_rel-1`` of the offset index ``buf`` while they fit in
    ``budget`` bytes (the first regardless when ``need_one``): their lengths and
    the contiguous runs ``(start, end)`` of file bytes they occupy (a batch header
    between two records splits a run). The Python twin of ``_speedups.index_spans``."""
    unpack, esize = INDEX_ENTRY.unpack_from, INDEX_ENTRY.size
    lens: list[int] = []
    runs: list[tuple[int, int]] = []
    total = run_start = run_end = 0
    for i in range(rel, end_rel):
        entry = unpack(buf, i * esize)
        pos, ln = entry[I_POS], entry[I_LEN]
        if total + ln > budget and (lens or not need_one):
            break
        if not lens:
            run_start = pos
        elif pos != run_end:
            runs.append((run_start, run_end))
            run_start = pos
        lens.append(ln)
        run_end = pos + ln
        total += ln
    if lens:
        runs.append((run_start, run_end))
    return lens, runs

class Segment:
    """Files and index tables of one segment; see the module docstring."""

    __slots__ = (
        "directory", "base_offset", "fd", "index_fd", "time_fd", "size", "index", "times",
        "sealed", "start_byte", "end_byte", "_verified",
    )  # fmt: skip

    def __init__(self, directory: Path, base_offset: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.fd = -1
        self.index_fd = -1
        self.time_fd = -1
        self.size = 0
        self.index = EntryTable(INDEX_ENTRY)
        self.times = EntryTable(TIME_ENTRY)
        self.sealed = False
        self.start_byte = 0  # Pravega byte position of the first record
        self.end_byte = 0  # ... and just past the last one
        # Sealed segments: one bit per batch, set once its CRC was checked (a
        # bitmap, not a set: a segment of tiny batches may hold a million).
        self._verified = bytearray()

    # -- paths and files ------------------------------------------------------
    def path(self, suffix: str) -> Path:
        return self.directory / (segment_name(self.base_offset) + suffix)

    @classmethod
    def create(cls, directory: Path, base_offset: int, start_byte: int) -> "Segment":
        """A new, empty active segment with its three files created."""
        seg = cls(directory, base_offset)
        seg.start_byte = seg.end_byte = start_byte
        seg.open_files(writable=True)
        return seg

    def open_files(self, *, writable: bool) -> None:
        """Open the log file (and, when ``writable``, the index files for appending)."""
        flags = _APPEND_FLAGS if writable else os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
        self.fd = os.open(self.path(LOG_SUFFIX), flags, 0o644)
        if writable:
            self.index_fd = os.open(self.path(INDEX_SUFFIX), _APPEND_FLAGS, 0o644)
            self.time_fd = os.open(self.path(TIME_SUFFIX), _APPEND_FLAGS, 0o644)
        self.size = os.fstat(self.fd).st_size

    def load_tables(self, *, mapped: bool) -> None:
        self.index.close()
        self.times.close()
        self.index = EntryTable.load(INDEX_ENTRY, str(self.path(INDEX_SUFFIX)), mapped=mapped)
        self.times = EntryTable.load(TIME_ENTRY, str(self.path(TIME_SUFFIX)), mapped=mapped)

    def rewrite_tables(self) -> None:
        """Replace both index files with the in-memory tables (after a rebuild)."""
        for suffix, table in ((INDEX_SUFFIX, self.index), (TIME_SUFFIX, self.times)):
            fd = os.open(self.path(suffix), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                write_all(fd, bytes(table.buf[: table.nbytes]))
                os.fsync(fd)
            finally:
                os.close(fd)

    # -- state -----------------------------------------------------------------
    @property
    def count(self) -> int:
        return self.index.count

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.index.count

    @property
    def max_timestamp(self) -> int | None:
        """Append time of the newest record, None when empty."""
        return self.times.last()[0] if self.times.count else None

    def compute_end_byte(self) -> None:
        """Derive ``start_byte``/``end_byte`` from the index and the last record's
        payload length (one 4-byte read)."""
        if not self.index.count:
            self.end_byte = self.start_byte
            return
        self.start_byte = self.index.get(0)[I_BYTE]
        pos, _ln, byte_pos, _ts = self.index.last()
        plen = int.from_bytes(pread_exact(self.fd, 4, pos + _PAYLOAD_LEN_AT), "little")
        self.end_byte = byte_pos + 8 + plen

    def commit(self, batch_len: int, index_data: bytes, time_data: bytes, end_byte: int) -> None:
        """Account for a batch the flusher wrote (trio thread, after the write)."""
        self.size += batch_len
        self.index.extend(index_data)
        self.times.extend(time_data)
        self.end_byte = end_byte

    def seal(self) -> None:
        """Active -> sealed: stop appending, map the index files read-only
        (loaded first, so a failure leaves the segment as it was). Its batches
        are re-verified on their first read from now on."""
        index = EntryTable.load(INDEX_ENTRY, str(self.path(INDEX_SUFFIX)), mapped=True)
        times = EntryTable.load(TIME_ENTRY, str(self.path(TIME_SUFFIX)), mapped=True)
        self.index.close()
        self.times.close()
        self.index, self.times = index, times
        for name in ("index_fd", "time_fd"):
            fd = getattr(self, name)
            if fd >= 0:
                os.close(fd)
                setattr(self, name, -1)
        self.reset_verified(False)
        self.sealed = True

    def reset_verified(self, all_good: bool) -> None:
        """Forget (or, right after a full CRC walk, assert) which batches were checked."""
        self._verified = bytearray((b"\xff" if all_good else b"\x00") * ((self.times.count + 7) // 8))

    def _is_verified(self, k: int) -> bool:
        return bool(self._verified[k >> 3] & (1 << (k & 7)))

    def close(self) -> None:
        for name in ("fd", "index_fd", "time_fd"):
            fd = getattr(self, name)
            if fd >= 0:
                os.close(fd)
                setattr(self, name, -1)
        self.index.close()
        self.times.close()

    def remove(self) -> None:
        """Close and delete the three files."""
        self.close()
        for suffix in SUFFIXES:
            self.path(suffix).unlink(missing_ok=True)

    def quarantine(self, qdir: Path) -> list[Path]:
        """Close and move the files into ``qdir``; returns their new paths. A
        name already taken there (a segment salvaged twice) gets ``.1``, ``.2``..."""
        self.close()
        qdir.mkdir(exist_ok=True)
        moved = []
        for suffix in SUFFIXES:
            src = self.path(suffix)
            if src.exists():
                dst, n = qdir / src.name, 0
                while dst.exists():
                    n += 1
                    dst = qdir / f"{src.name}.{n}"
                os.replace(src, dst)
                moved.append(dst)
        return moved

    # -- lookups ---------------------------------------------------------------
    def batch_of(self, rel: int) -> int:
        """Number of the batch holding relative offset ``rel``."""
        return self.times.bisect_right(T_FIRST, rel) - 1

    def batch_end(self, k: int) -> int:
        return self.times.get(k + 1)[T_POS] if k + 1 < self.times.count else self.size

    # -- reads -----------------------------------------------------------------
    def read(self, rel: int, max_count: int, budget: int, need_one: bool) -> tuple[list[memoryview], list[int]]:
        """Records from relative offset ``rel``: up to ``max_count`` of them and
        ``budget`` bytes (at least one record when ``need_one``). Returns the
        contiguous runs of record bytes and each record's size."""
        end_rel = min(self.index.count, rel + max_count)
        spans = _index_spans or _spans_python
        lens, runs = spans(self.index.buf, rel, end_rel, min(budget, _MAX_BUDGET), need_one)
        if not lens:
            return [], []
        lo, hi = runs[0][0], runs[-1][1]
        verified = self._verify(rel, rel + len(lens) - 1) if self.sealed else None
        start, data = verified if verified is not None else (lo, pread_exact(self.fd, hi - lo, lo))
        view = memoryview(data)
        return [view[a - start : b - start] for a, b in runs], lens

    def _verify(self, first_rel: int, last_rel: int) -> tuple[int, bytes] | None:
        """Check the CRC of every not-yet-verified batch holding records
        ``first_rel..last_rel``. Returns ``(start, bytes)`` of the batches read to
        do so (the caller slices records from them), or None when all were known good."""
        k0, k1 = self.batch_of(first_rel), self.batch_of(last_rel)
        if k0 < 0:
            raise CorruptSegment("index does not cover its first record", segment=self.base_offset)
        if all(self._is_verified(k) for k in range(k0, k1 + 1)):
            return None
        start = self.times.get(k0)[T_POS]
        end = self.batch_end(k1)
        data = pread_exact(self.fd, end - start, start)
        for k in range(k0, k1 + 1):
            if self._is_verified(k):
                continue
            _ts, pos, first, count = self.times.get(k)
            info = parse_batch_header(data, pos - start, pos)
            if (
                info.base_offset != self.base_offset + first
                or info.count != count
                or not batch_crc_ok(data, pos - start, info)
            ):
                raise CorruptSegment(
                    "batch checksum mismatch", segment=self.base_offset, position=pos,
                )  # fmt: skip
            # The CRC vouches for the batch, not for the index that slices it: a
            # flipped index entry would serve the wrong bytes as a record.
            with memoryview(data)[pos - start : pos - start + info.length] as view:
                idx, tim, _end = batch_entries(view, info, self.base_offset)
            isz = INDEX_ENTRY.size
            if self.times.get(k) != TIME_ENTRY.unpack(tim) or self.index.buf[first * isz : first * isz + len(idx)] != idx:
                raise CorruptSegment("index does not match its batch", segment=self.base_offset, position=pos)
            self._verified[k >> 3] |= 1 << (k & 7)
        return start, data


def write_all(fd: int, data: bytes | memoryview) -> None:
    """os.write until every byte is written (a regular file may take fewer)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


__all__ = [
    "Segment",
    "fsync_dir",
    "fsync_unsynced_dirs",
    "make_dirs",
    "pread_exact",
    "segment_name",
    "write_all",
]
