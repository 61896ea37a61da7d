"""What a read returns: stored record bytes, ready to send as they are."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate
from typing import Iterator

from ..record import RecordView, parse_record


@dataclass(slots=True)
class ReadBatch:
    """Consecutive records ``first_offset .. first_offset + count - 1`` of one partition.

    ``chunks`` are runs of stored record bytes (``bytes`` or ``memoryview``),
    each holding whole records; together, back to back, they are the records in
    order, exactly as stored (``core.record`` layout). ``sizes`` gives each
    record's length, ``positions`` where each starts in that concatenation, so a
    caller can hand the chunks to ``sendmsg``/``send_all`` without re-encoding,
    or frame records individually. Offsets past the end give an empty batch.
    """

    partition_id: int
    first_offset: int
    chunks: list[bytes | memoryview] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.sizes)

    def __len__(self) -> int:
        return len(self.sizes)

    @property
    def nbytes(self) -> int:
        return sum(self.sizes)

    @property
    def next_offset(self) -> int:
        """The offset just after the last record (== first_offset when empty)."""
        return self.first_offset + len(self.sizes)

    @property
    def last_offset(self) -> int | None:
        return self.first_offset + len(self.sizes) - 1 if self.sizes else None

    @property
    def positions(self) -> list[int]:
        """Start of each record in the concatenation of ``chunks``."""
        return list(accumulate(self.sizes, initial=0))[:-1]

    def to_bytes(self) -> bytes:
        """All records as one ``bytes`` (one join)."""
        return b"".join(self.chunks)

    def raw_records(self) -> Iterator[memoryview]:
        """Each record's stored bytes, in offset order."""
        sizes = iter(self.sizes)
        for chunk in self.chunks:
            view = memoryview(chunk)
            pos, end = 0, len(view)
            while pos < end:
                size = next(sizes)
                yield view[pos : pos + size]
                pos += size

    def records(self) -> Iterator[RecordView]:
        """Parsed views of each record (fields decoded, payload and headers as
        memoryviews into the chunks). The batch CRC was checked when the bytes
        were read, so the per-record checksum is not recomputed here."""
        for raw in self.raw_records():
            yield parse_record(raw, 0, verify=False)
