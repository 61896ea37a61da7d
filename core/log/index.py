"""The two per-segment index files, as tables of fixed-size entries.

Offset index (``<base>.index``), one 28-byte entry per record, entry ``i``
describing offset ``base + i`` (offsets are dense inside a segment):

    position u64   where the record starts in the segment file
    length   u32   stored record size (64-byte header + payload + headers)
    byte_pos u64   Pravega byte position: sum of (8 + payload_len) of all earlier records
    timestamp u64  append time, µs

Time index (``<base>.timeindex``), sparse, one 24-byte entry per batch:

    max_timestamp u64  append time of the batch's last record
    position      u64  where the batch header starts
    first         u32  offset of its first record, relative to the segment base
    count         u32  records in the batch

The active segment keeps its tables in a ``bytearray`` that grows with each
flush; a sealed segment maps its files read-only (``mmap``), so a partition
with thousands of segments holds no per-record Python objects. Lookups are
binary searches that unpack single fields in place.
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct

INDEX_ENTRY = struct.Struct("<QIQQ")  # position, length, byte_pos, timestamp
TIME_ENTRY = struct.Struct("<QQII")  # max_timestamp, position, first (relative), count

# Field numbers inside the unpacked tuples.
I_POS, I_LEN, I_BYTE, I_TS = 0, 1, 2, 3
T_MAXTS, T_POS, T_FIRST, T_COUNT = 0, 1, 2, 3


class _Column:
    """A read-only sequence view of one field, so :mod:`bisect` can search it."""

    __slots__ = ("_unpack", "_buf", "_size", "_k", "_n")

    def __init__(self, table: "EntryTable", k: int) -> None:
        self._unpack = table.entry.unpack_from
        self._buf = table.buf
        self._size = table.entry.size
        self._k = k
        self._n = table.count

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> int:
        return self._unpack(self._buf, i * self._size)[self._k]


class EntryTable:
    """Fixed-size entries over a ``bytearray`` (growable) or a read-only ``mmap``."""

    __slots__ = ("entry", "buf", "count", "_mapped")

    def __init__(self, entry: struct.Struct, buf: bytearray | mmap.mmap | bytes | None = None) -> None:
        self.entry = entry
        self.buf = bytearray() if buf is None else buf
        self.count = len(self.buf) // entry.size
        self._mapped = isinstance(self.buf, mmap.mmap)

    @classmethod
    def load(cls, entry: struct.Struct, path: str, *, mapped: bool) -> "EntryTable":
        """Read ``path`` into a bytearray, or map it read-only when ``mapped``.
        A missing file is an empty table (recovery rebuilds it)."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return cls(entry)
        try:
            size = os.fstat(fd).st_size
            if mapped and size:
                return cls(entry, mmap.mmap(fd, size, access=mmap.ACCESS_READ))
            data = bytearray()
            while len(data) < size:
                chunk = os.read(fd, size - len(data))
                if not chunk:
                    break
                data += chunk
            return cls(entry, data)
        finally:
            os.close(fd)

    @property
    def nbytes(self) -> int:
        return self.count * self.entry.size

    def __len__(self) -> int:
        return self.count

    def get(self, i: int) -> tuple:
        return self.entry.unpack_from(self.buf, i * self.entry.size)

    def last(self) -> tuple:
        return self.entry.unpack_from(self.buf, (self.count - 1) * self.entry.size)

    def bisect_left(self, k: int, value: int, lo: int = 0, hi: int | None = None) -> int:
        """First entry index in ``[lo, hi)`` whose field ``k`` is >= ``value``
        (fields searched this way are non-decreasing)."""
        return bisect.bisect_left(_Column(self, k), value, lo, self.count if hi is None else hi)

    def bisect_right(self, k: int, value: int, lo: int = 0, hi: int | None = None) -> int:
        """First entry index in ``[lo, hi)`` whose field ``k`` is > ``value``."""
        return bisect.bisect_right(_Column(self, k), value, lo, self.count if hi is None else hi)

    def extend(self, data: bytes) -> None:
        """Append packed entries (active segments only)."""
        self.buf += data
        self.count = len(self.buf) // self.entry.size

    def truncate(self, count: int) -> None:
        """Keep the first ``count`` entries (active segments only)."""
        del self.buf[count * self.entry.size :]
        self.count = count

    def close(self) -> None:
        if self._mapped:
            self.buf.close()
        self.buf = b""
        self.count = 0
        self._mapped = False
