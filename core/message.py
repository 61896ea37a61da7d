"""The canonical message model: ordered typed headers, messages, ids.

Theory of operation
-------------------
Every protocol's message becomes one :class:`Message`: an id, two timestamps,
an ordered multi-map of typed headers and a payload. Header keys and values
are both :class:`HeaderValue` (a kind plus its bytes, see
:mod:`core.header_value`, re-exported here) because the newest Iggy generation
types keys too (../shared/protocols/iggy-current.md section 6.1); string keys
are the common case and every helper takes a ``str`` key.

Wire forms of a header block (no count field; the enclosing record or frame
carries the block's length):

* ``encode``/``decode``: TLV with key kinds, ``u8 key_kind, u32 key_len, key,
  u8 value_kind, u32 value_len, value`` repeated (iggy-middle.md section 7.2 =
  iggy-current.md section 6.1). This is what ``core.record`` stores.
* ``encode_legacy``/``decode_legacy``: the seed-era map, ``u32 key_len, key,
  u8 kind, u32 value_len, value`` (seeds/000, iggy.md section 3.5), keys are
  implicitly strings.

Decoding is strict (a peer's bad block is an error, never a partial result)
and copies each field once into ``bytes``.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Callable

from .errors import (
    HeadersTooLarge,
    InvalidHeaderKey,
    InvalidHeaderKind,
    InvalidHeaderValue,
    MalformedHeaders,
)
from .header_value import (
    KIND_BY_CODE,
    MAX_HEADER_FIELD,
    HeaderKind,
    HeaderValue,
    trusted_value,
    validate_field,
)
from .record import RecordView

# Total encoded size of one message's header block. Iggy:
# `pub const MAX_USER_HEADERS_SIZE: u32 = 100 * 1000;` in
# apache/iggy core/common/src/types/message/iggy_message.rs (the seed's "100 KB"
# is 100 000 bytes, decimal). Iggy compares it with the encoded block length.
MAX_HEADERS_SIZE = 100 * 1000

# u8 kind + u32 LE length: the head of every TLV field (iggy-middle.md section 7.2).
_KIND_LEN = struct.Struct("<BI")
_U32 = struct.Struct("<I")  # legacy key length (seeds/000)
_ENTRY_OVERHEAD = 2 * _KIND_LEN.size  # 10 bytes of heads per TLV entry
_STRING = HeaderKind.STRING
_BOOL = HeaderKind.BOOL
_FIXED_SIZE_BY_CODE = tuple(k.fixed_size if k else None for k in KIND_BY_CODE)


# -- keys ------------------------------------------------------------------------
def _as_key(key: str | HeaderValue) -> HeaderValue:
    """A validated key: a HeaderValue as it is, a str as STRING; InvalidHeaderKey."""
    if isinstance(key, HeaderValue):
        return key
    if isinstance(key, str):
        try:
            data = key.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidHeaderKey("header key is not encodable as UTF-8") from exc
        if not 1 <= len(data) <= MAX_HEADER_FIELD:
            raise InvalidHeaderKey(f"header key is {len(data)} bytes, must be 1..{MAX_HEADER_FIELD}")
        return trusted_value(_STRING, data)
    raise InvalidHeaderKey(f"header key must be str or HeaderValue, not {type(key).__name__}")


def _lookup_key(key: str | HeaderValue) -> HeaderValue | None:
    """A key to compare with, unvalidated: a lookup of an impossible key finds nothing."""
    if isinstance(key, HeaderValue):
        return key
    if isinstance(key, str):
        try:
            return trusted_value(_STRING, key.encode("utf-8"))
        except UnicodeEncodeError:
            return None
    raise InvalidHeaderKey(f"header key must be str or HeaderValue, not {type(key).__name__}")


def _key_repr(key: HeaderValue) -> str:
    return repr(key.data.decode("utf-8")) if key.kind is _STRING else repr(key)


# -- block decoding ----------------------------------------------------------------
Buffer = bytes | bytearray | memoryview


def _field(buf: Buffer, start: int, end: int, length: int, kind: HeaderKind, err: type[Exception]) -> HeaderValue:
    """The ``length`` bytes at ``start`` as a validated ``kind`` value (``err`` if not)."""
    if not 0 < length <= MAX_HEADER_FIELD:
        raise err(f"header field length {length} at byte {start}, must be 1..{MAX_HEADER_FIELD}")
    stop = start + length
    if stop > end:
        raise MalformedHeaders(f"header field at byte {start} runs past the block end", position=start)
    data = buf[start:stop] if buf.__class__ is bytes else bytes(buf[start:stop])  # one copy
    size = _FIXED_SIZE_BY_CODE[kind]
    if size is None:
        if kind is _STRING:
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                validate_field(kind, data, err)  # raises with the precise message
    elif length != size or (kind is _BOOL and data[0] > 1):
        validate_field(kind, data, err)
    return trusted_value(kind, data)


def _decode_block(buf: Buffer, legacy: bool) -> tuple[list, int]:
    """The pairs of a block and its byte length."""
    if buf.__class__ is bytes:
        return _decode_pairs(buf, legacy)
    # Release the view even on error: a traceback that keeps it alive would stop
    # the caller from resizing its receive bytearray (BufferError).
    with memoryview(buf) as view, view.cast("B") as flat:
        return _decode_pairs(flat, legacy)


def _decode_pairs(buf: Buffer, legacy: bool) -> tuple[list, int]:
    end = len(buf)
    if end > MAX_HEADERS_SIZE:
        raise HeadersTooLarge(f"header block of {end} bytes exceeds {MAX_HEADERS_SIZE}")
    pairs: list[tuple[HeaderValue, HeaderValue]] = []
    pos = 0
    while pos < end:
        if legacy:  # u32 key_len, key (a string)
            if end - pos < _U32.size:
                raise MalformedHeaders(f"header block truncated at byte {pos}", position=pos)
            (length,) = _U32.unpack_from(buf, pos)
            kind = _STRING
            start = pos + _U32.size
        else:  # u8 key_kind, u32 key_len, key
            kind, length, start = _field_head(buf, pos, end)
        key = _field(buf, start, end, length, kind, InvalidHeaderKey)
        pos = start + length
        if pos == end:
            raise MalformedHeaders("header key without a value at the block end", position=pos)
        kind, length, start = _field_head(buf, pos, end)
        pairs.append((key, _field(buf, start, end, length, kind, InvalidHeaderValue)))
        pos = start + length
    return pairs, end


def _field_head(buf: Buffer, pos: int, end: int) -> tuple[HeaderKind, int, int]:
    """``u8 kind, u32 length`` at ``pos``: (kind, length, start of the bytes)."""
    if end - pos < _KIND_LEN.size:
        raise MalformedHeaders(f"header block truncated at byte {pos}", position=pos)
    code, length = _KIND_LEN.unpack_from(buf, pos)
    kind = KIND_BY_CODE[code]
    if kind is None:
        raise InvalidHeaderKind(f"unknown header kind {code} at byte {pos}", position=pos)
    return kind, length, pos + _KIND_LEN.size


class Headers:
    """An ordered multi-map of ``(key, value)`` HeaderValue pairs.

    Order and repeated keys are kept (NATS allows both). Iterating yields the
    pairs, like the list it is; ``keys()``, ``get()`` and ``in`` look at keys.
    The total encoded size never exceeds :data:`MAX_HEADERS_SIZE`."""

    __slots__ = ("_pairs", "_size", "_encoded")

    def __init__(
        self,
        pairs: Iterable[tuple[str | HeaderValue, Any]] | Mapping[str | HeaderValue, Any] = (),
    ) -> None:
        self._pairs: list[tuple[HeaderValue, HeaderValue]] = []
        self._size = 0
        self._encoded: bytes | None = b""
        if isinstance(pairs, Mapping):
            pairs = pairs.items()
        for key, value in pairs:
            self.add(key, value)

    @classmethod
    def _of_pairs(cls, pairs: list, size: int, encoded: bytes | None) -> Headers:
        if size > MAX_HEADERS_SIZE:
            raise HeadersTooLarge(f"headers of {size} encoded bytes exceed {MAX_HEADERS_SIZE}")
        headers = cls.__new__(cls)
        headers._pairs = pairs
        headers._size = size
        headers._encoded = encoded
        return headers

    def add(self, key: str | HeaderValue, value: Any) -> None:
        """Append a pair. ``value`` is a HeaderValue or a Python value for :meth:`HeaderValue.of`.
        Raises InvalidHeaderKey, InvalidHeaderValue or HeadersTooLarge (nothing added)."""
        k = _as_key(key)
        v = value if isinstance(value, HeaderValue) else HeaderValue.of(value)
        size = self._size + _ENTRY_OVERHEAD + len(k.data) + len(v.data)
        if size > MAX_HEADERS_SIZE:
            raise HeadersTooLarge(f"headers would be {size} encoded bytes, max {MAX_HEADERS_SIZE}")
        self._pairs.append((k, v))
        self._size = size
        self._encoded = None

    def remove(self, key: str | HeaderValue) -> int:
        """Drop every pair with ``key``; returns how many were dropped."""
        k = _lookup_key(key)
        kept = [pair for pair in self._pairs if pair[0] != k]
        dropped = len(self._pairs) - len(kept)
        if dropped:
            self._pairs = kept
            self._size = sum(_ENTRY_OVERHEAD + len(a.data) + len(b.data) for a, b in kept)
            self._encoded = None
        return dropped

    def get(self, key: str | HeaderValue, default: HeaderValue | None = None) -> HeaderValue | None:
        """The first value stored under ``key``, else ``default``."""
        k = _lookup_key(key)
        for pk, pv in self._pairs:
            if pk == k:
                return pv
        return default

    def get_all(self, key: str | HeaderValue) -> list[HeaderValue]:
        """Every value stored under ``key``, in order."""
        k = _lookup_key(key)
        return [pv for pk, pv in self._pairs if pk == k]

    def items(self) -> list[tuple[HeaderValue, HeaderValue]]:
        return list(self._pairs)

    def keys(self) -> list[HeaderValue]:
        return [k for k, _ in self._pairs]

    def values(self) -> list[HeaderValue]:
        return [v for _, v in self._pairs]

    def to_dict(self) -> dict[HeaderValue, HeaderValue]:
        """A map view for dialects that carry maps (Iggy seed era, HTTP JSON).

        A repeated key keeps its **last** value: a later header overrides an
        earlier one, as setting a map key twice does, and as Iggy's own decoder
        (a HashMap insert per entry) resolves a repeated key (iggy.md section 3.5)."""
        return dict(self._pairs)

    @classmethod
    def from_dict(cls, mapping: Mapping[str | HeaderValue, Any]) -> Headers:
        return cls(mapping.items())

    @property
    def encoded_size(self) -> int:
        """Length of :meth:`encode`'s output, without encoding."""
        return self._size

    def encode(self) -> bytes:
        """The TLV block: ``u8 key_kind, u32 key_len, key, u8 value_kind, u32 value_len,
        value`` per pair, no count (iggy-middle.md section 7.2)."""
        encoded = self._encoded
        if encoded is None:
            pack = _KIND_LEN.pack
            parts: list[bytes] = []
            for k, v in self._pairs:
                parts += (pack(k.kind, len(k.data)), k.data, pack(v.kind, len(v.data)), v.data)
            encoded = self._encoded = b"".join(parts)
        return encoded

    @classmethod
    def decode(cls, buf: Buffer) -> Headers:
        """Parse a TLV block, strictly: raises MalformedHeaders (truncated or trailing
        bytes), InvalidHeaderKind (zero or unknown kind), InvalidHeaderKey /
        InvalidHeaderValue (bad length or content), HeadersTooLarge."""
        pairs, size = _decode_block(buf, legacy=False)
        return cls._of_pairs(pairs, size, buf if buf.__class__ is bytes else None)

    def encode_legacy(self) -> bytes:
        """The seed-era map: ``u32 key_len, key, u8 kind, u32 value_len, value``.

        That dialect carries a map with string keys, so a repeated key is sent
        once with its last value (as :meth:`to_dict`). A non-string key is sent
        as its text form (:meth:`HeaderValue.to_text`; its kind is lost), and
        skipped when that text is longer than 255 bytes (only long RAW keys)."""
        entries: dict[bytes, HeaderValue] = {}
        for k, v in self._pairs:
            kd = k.data if k.kind is _STRING else k.to_text().encode("utf-8")
            if len(kd) <= MAX_HEADER_FIELD:
                entries[kd] = v  # first position, last value: as to_dict()
        parts: list[bytes] = []
        pack = _KIND_LEN.pack
        for kd, v in entries.items():
            parts += (_U32.pack(len(kd)), kd, pack(v.kind, len(v.data)), v.data)
        return b"".join(parts)

    @classmethod
    def decode_legacy(cls, buf: Buffer) -> Headers:
        """Parse a seed-era map block (keys become STRING), as strictly as :meth:`decode`.
        Repeated keys are kept in order; :meth:`to_dict` gives the map a client sees."""
        pairs, size = _decode_block(buf, legacy=True)
        # the canonical TLV form spends one more byte per entry: the key kind
        return cls._of_pairs(pairs, size + len(pairs), None)

    # -- container protocol ---------------------------------------------------
    def __iter__(self) -> Iterator[tuple[HeaderValue, HeaderValue]]:
        return iter(self._pairs)

    def __len__(self) -> int:
        return len(self._pairs)

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, (str, HeaderValue)):
            return False
        k = _lookup_key(key)
        return any(pk == k for pk, _ in self._pairs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Headers):
            return NotImplemented
        return self._pairs == other._pairs

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        inner = ", ".join(f"({_key_repr(k)}, {v!r})" for k, v in self._pairs)
        return f"Headers([{inner}])"


@dataclass(slots=True)
class Message:
    """One canonical message. ``id`` is a u128 (0 = the broker assigns a UUIDv7),
    timestamps are microseconds since the Unix epoch, ``offset`` and ``checksum``
    are filled in once the message is stored (core/record.py)."""

    id: int
    timestamp: int
    origin_timestamp: int
    headers: Headers
    payload: bytes
    offset: int = 0
    checksum: int = 0

    @classmethod
    def from_record(cls, view: RecordView) -> Message:
        """Build a Message from a parsed record, decoding its header block
        (raises the HeaderError family if the stored block is malformed)."""
        raw_headers = view.headers
        return cls(
            id=view.id,
            timestamp=view.timestamp,
            origin_timestamp=view.origin_timestamp,
            headers=Headers.decode(raw_headers) if len(raw_headers) else Headers(),
            payload=bytes(view.payload),
            offset=view.offset,
            checksum=view.checksum,
        )


# -- ids and clocks ------------------------------------------------------------------
# UUIDv7 (RFC 9562 section 5.7): 48-bit Unix ms | ver 0111 | 12 bits | var 10 | 62 bits.
# The 74 bits after the timestamp act as one counter (RFC 9562 section 6.2,
# "Fixed Bit-Length Dedicated Counter", here the whole random field): seeded
# randomly with its top bit clear at each new millisecond and incremented within
# one, so ids from this process are strictly increasing.
_COUNTER_BITS = 74
_RAND_B_BITS = 62
_RAND_B_MASK = (1 << _RAND_B_BITS) - 1
_UUID7_FIXED = (0x7 << 76) | (0b10 << 62)  # version and variant bits


def _random_counter_seed() -> int:
    # 73 random bits (RFC 9562 section 6.9: use a CSPRNG), leaving the top bit as
    # rollover guard: at least 2**73 ids fit in one millisecond before it advances.
    return int.from_bytes(os.urandom(10), "big") >> (80 - (_COUNTER_BITS - 1))


class Uuid7Generator:
    """Monotonic UUIDv7 source. ``clock_ms`` and ``seed`` are injectable for tests.

    If the clock goes backwards, the last millisecond is reused (RFC 9562
    section 6.2 allows a generator to run ahead of the clock); a counter overflow
    moves to the next millisecond."""

    __slots__ = ("_clock_ms", "_seed", "_lock", "_last_ms", "_counter")

    def __init__(
        self,
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        seed: Callable[[], int] = _random_counter_seed,
    ) -> None:
        self._clock_ms = clock_ms
        self._seed = seed
        self._lock = threading.Lock()  # callers may be worker threads (trio.to_thread)
        self._last_ms = -1
        self._counter = 0

    def __call__(self) -> int:
        """Return the next id as a u128 (``uuid.UUID(int=...)`` shows the UUID)."""
        ms = self._clock_ms()
        with self._lock:
            if ms > self._last_ms:
                counter = self._seed()
            else:
                ms = self._last_ms
                counter = self._counter + 1
                if counter >> _COUNTER_BITS:
                    ms += 1
                    counter = self._seed()
            self._last_ms = ms
            self._counter = counter
        return (ms << 80) | _UUID7_FIXED | ((counter >> _RAND_B_BITS) << 64) | (counter & _RAND_B_MASK)


    def reserve(self, n: int) -> tuple[int, int]:
        """Take ``n`` consecutive ids at once (a batch append stamps many): returns
        ``(ms, first_counter)``; id *i* of the block is :func:`uuid7_parts` of
        ``first_counter + i``, whose high u64 is the same for the whole block.
        Later ids are greater than all ``n``, as if ``__call__`` had run ``n`` times."""
        if n < 1:
            raise ValueError("reserve at least one id")
        ms = self._clock_ms()
        with self._lock:
            if ms > self._last_ms:
                counter = self._seed()
            else:
                ms = self._last_ms
                counter = self._counter + 1
            # The block must neither overflow the counter nor carry out of its low
            # 62 bits (rand_b), so a caller can add to the low u64 alone; either
            # way (the carry has odds of about n / 2**62) move to the next millisecond.
            while (counter + n - 1) >> _COUNTER_BITS or (counter & _RAND_B_MASK) + n - 1 > _RAND_B_MASK:
                ms += 1
                counter = self._seed()
            self._last_ms = ms
            self._counter = counter + n - 1
        return ms, counter


_UUID7_HI_FIXED = 0x7 << 12  # version nibble in the high u64
_UUID7_LO_FIXED = 0b10 << 62  # variant bits in the low u64


def uuid7_parts(ms: int, counter: int) -> tuple[int, int]:
    """``(low u64, high u64)`` of the UUIDv7 for ``ms`` and ``counter`` (see
    :meth:`Uuid7Generator.reserve`): the two halves a record header stores."""
    return _UUID7_LO_FIXED | (counter & _RAND_B_MASK), (ms << 16) | _UUID7_HI_FIXED | (counter >> _RAND_B_BITS)


_UUID7 = Uuid7Generator()
reserve_uuid7 = _UUID7.reserve


def uuid7() -> int:
    """A new RFC 9562 UUIDv7 as a u128, greater than every earlier one from this process."""
    return _UUID7()


def now_us() -> int:
    """Wall-clock time in microseconds since the Unix epoch (Iggy's timestamp unit)."""
    return time.time_ns() // 1000


__all__ = [
    "MAX_HEADERS_SIZE",
    "MAX_HEADER_FIELD",
    "HeaderKind",
    "HeaderValue",
    "Headers",
    "Message",
    "Uuid7Generator",
    "now_us",
    "reserve_uuid7",
    "uuid7",
    "uuid7_parts",
]
