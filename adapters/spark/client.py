"""A small blocking Iggy-binary client, for Spark executors and tools.

Theory of operation
-------------------
Spark runs the data source's ``read()``/``write()`` in plain Python worker
processes, one task at a time per worker, and pickles every object it ships
(../shared/protocols/spark-datasource.md section 1). So this client is
synchronous, owns one TCP socket, and is opened and closed inside a single
call; nothing here may be kept on a pickled object. It imports no trio and
no gateway code: only the standard library and the Iggy command table
(``adapters.iggy.spec``/``replies``/``codec``), which are pure data and
codecs, so requests and reply records are encoded and decoded by the same
declarations the server uses (STYLE.md section 4) and cannot drift.

Dialect: the client always speaks **dialect 2** (legacy ``length, code``
framing; a LoginUser whose version is >= 0.7, iggy-middle.md section 3.1).
Of the three dialects, 2 and 3 carry typed header keys and values losslessly
(dialect 1 collapses headers into a string-keyed map, docs/iggy.md), and in
dialect 2 a poll reply is the stored records byte for byte (the 64-byte
header of ``core.record``), so the gateway answers by slicing segment bytes
and the client decodes one layout with one ``struct``. Dialect 3 would make
the gateway re-frame every record into VSR batches and wrap each request in
a 256-byte envelope, for the same information.

Iggy clients are lockstep (one request in flight, iggy.md 1.1); so is this
one. Replies are ``u32 status, u32 length, body``; a non-zero status has an
empty body and becomes :class:`FerryClientError` carrying the Iggy code.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Iterable, Iterator, NamedTuple, Sequence

from adapters.iggy import replies as R
from adapters.iggy import spec as S
from adapters.iggy.codec import LEGACY_HEAD
from adapters.iggy.errors import IggyError
from adapters.iggy.messages import WireMessage
from adapters.iggy.types import ConsumerId, PartitioningValue, Strategy

DIALECT = 2  # see the module docstring for why
# The version a LoginUser announces: anything >= 0.7 selects dialect 2 on the
# gateway (adapters/iggy/connection.py, dialect_for_version); 0.10 is the SDK
# line of apache-iggy 0.8.0, whose wire layout dialect 2 is.
CLIENT_VERSION = "0.10.0"
CLIENT_CONTEXT = "ferry-spark"
DEFAULT_TIMEOUT_S = 30.0  # connect and per-reply; a stalled gateway fails the Spark task, which Spark retries
# Messages per poll: an upper bound; poll_range sizes each poll by bytes. Fewer,
# larger polls cut per-request costs on both sides: on this machine a 1M-message
# Spark read went from ~0.47M to ~0.52M rows/s when polls grew from 10k to 50k
# messages of 100 B (bench/spark_bench.py --option pollCount=...).
DEFAULT_POLL_COUNT = 50_000
MAX_POLL_COUNT = 100_000
# What one poll reply should weigh: ~44k stored 100-byte messages, ~8k of 1 KiB.
# Iggy's poll has no byte limit, so poll_range aims for this from the sizes seen so
# far; it bounds a task's memory and keeps replies far below MAX_REPLY.
TARGET_POLL_BYTES = 8 * 1024 * 1024
FIRST_POLL_COUNT = 64  # before any size is known: 64 even of 1 MiB messages stays below MAX_REPLY
MAX_REPLY = 256 * 1024 * 1024  # a sanity bound on one reply's length prefix (a corrupt one must not allocate GBs)
# Messages per SendMessages. Bounded by bytes as well (MAX_SEND_BYTES), since
# the gateway refuses frames above codec.MAX_FRAME.
DEFAULT_SEND_COUNT = 5_000
MAX_SEND_BYTES = 8 * 1024 * 1024  # well under the 64 MiB frame cap; keeps one send's ack latency small
RECORD_HEADER = struct.Struct("<QQQQQQII8x")  # core.record: checksum, id lo/hi, offset, ts, origin, H, P
POLL_PREFIX = struct.Struct("<IQI")  # partition id, current offset, count (replies.POLL_PREFIX)
_U32 = struct.Struct("<I")
_CONSUMER = ConsumerId(1, 0)  # a single consumer; nothing is auto-committed, so the id never matters


class FerryClientError(Exception):
    """The gateway answered with an Iggy error status (``code``), or the
    connection failed (``code`` is None)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


def _status_text(code: int) -> str:
    try:
        return f"{IggyError(code).name.lower()} ({code})"
    except ValueError:
        return f"Iggy status {code}"


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    id: int  # 0-based (dialect 2 ids are canonical)
    current_offset: int
    messages_count: int

    @property
    def next_offset(self) -> int:
        """The offset the next append gets. Iggy reports ``current_offset`` as the
        last offset (0 when empty, so a lone message at 0 looks the same); the
        message count tells the two apart. A partition whose every record has
        expired while only offset 0 was ever written reads as empty: harmless,
        nothing is there to read."""
        return self.current_offset + 1 if (self.current_offset or self.messages_count) else 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    id: int
    name: str
    partitions: tuple[PartitionInfo, ...]

    def next_offsets(self) -> dict[int, int]:
        return {p.id: p.next_offset for p in self.partitions}


@dataclass(frozen=True, slots=True)
class StreamInfo:
    id: int
    name: str
    topics: tuple[str, ...] = ()


class Record(NamedTuple):
    """One polled message, decoded (tests and tools; readers decode to columns)."""

    offset: int
    timestamp: int  # µs since the epoch (append time)
    origin_timestamp: int
    id: int
    headers: bytes  # the TLV block (core.message.Headers.decode reads it)
    payload: bytes


class Polled(NamedTuple):
    """A PollMessages reply: ``body`` holds ``count`` stored records from ``start``."""

    partition_id: int
    current_offset: int
    count: int
    body: bytes
    start: int  # where the first record begins in ``body``

    def records(self) -> Iterator[Record]:
        body, pos = self.body, self.start
        for _ in range(self.count):
            _c, lo, hi, off, ts, origin, hlen, plen = RECORD_HEADER.unpack_from(body, pos)
            p = pos + 64
            yield Record(off, ts, origin, lo | (hi << 64), bytes(body[p + plen : p + plen + hlen]),
                         bytes(body[p : p + plen]))
            pos = p + plen + hlen


class FerryClient:
    """One blocking connection to a Ferry gateway's Iggy TCP listener.

    Use as a context manager: ``with FerryClient(host, port, username=..., password=...) as c:``.
    Every method raises :class:`FerryClientError` on an error status or a broken connection."""

    def __init__(self, host: str, port: int, *, username: str = "iggy", password: str = "iggy",
                 token: str | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.host, self.port = host, port
        self.username, self.password = username, password
        self.token = token  # a personal access token replaces username/password when given
        self.timeout = timeout
        self._sock: socket.socket | None = None

    # -- connection ------------------------------------------------------------------
    def connect(self) -> "FerryClient":
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        except OSError as exc:
            raise FerryClientError(f"cannot connect to Ferry at {self.host}:{self.port}: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # lockstep requests: no Nagle delay
        self._sock = sock
        try:
            if self.token:
                # A PAT login carries no version; the gateway keeps such legacy-framed
                # connections on dialect 2 unless a later frame is shaped like dialect 1
                # (adapters/iggy/connection.py), and ours never are.
                self._call(S.LOGIN_PAT, token=self.token)
            else:
                self._call(S.LOGIN_USER, username=self.username, password=self.password,
                           version=CLIENT_VERSION, context=CLIENT_CONTEXT)
        except BaseException:
            self.close()
            raise
        return self

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def __enter__(self) -> "FerryClient":
        return self.connect() if self._sock is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- framing -----------------------------------------------------------------------
    def _call(self, cmd, **fields) -> bytes:
        """Send one request, return the reply body; raise on a non-zero status."""
        self._send(cmd, **fields)
        return self._reply(cmd)

    def _send(self, cmd, **fields) -> None:
        body = cmd.encode(DIALECT, cmd.make(**fields))
        sock = self._sock
        if sock is None:
            raise FerryClientError("not connected")
        try:
            sock.sendall(LEGACY_HEAD.pack(4 + len(body), cmd.code) + body)
        except OSError as exc:
            self.close()
            raise FerryClientError(f"{cmd.name}: connection to {self.host}:{self.port} failed: {exc}") from exc

    def _reply(self, cmd) -> bytes:
        if self._sock is None:
            raise FerryClientError("not connected")
        try:
            status, length = LEGACY_HEAD.unpack(self._recv_exact(8))
            if length > MAX_REPLY:
                raise FerryClientError(f"{cmd.name}: reply of {length} bytes exceeds {MAX_REPLY}")
            reply = self._recv_exact(length) if length else b""
        except OSError as exc:
            self.close()
            raise FerryClientError(f"{cmd.name}: connection to {self.host}:{self.port} failed: {exc}") from exc
        if status:
            raise FerryClientError(f"{cmd.name}: {_status_text(status)}", status)
        return reply

    def _recv_exact(self, n: int) -> bytes:
        """``n`` bytes as ``bytes``: one copy of the reply, after which slicing it is
        ~1.5x cheaper than slicing a memoryview (readers slice every record)."""
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self._sock.recv_into(view[got:])
            if not k:
                raise OSError("connection closed by the gateway")
            got += k
        view.release()
        return bytes(buf)

    # -- metadata ----------------------------------------------------------------------
    def ping(self) -> None:
        self._call(S.PING)

    def streams(self) -> list[StreamInfo]:
        body = self._call(S.GET_STREAMS)
        out, pos = [], 0
        while pos < len(body):
            rec, pos = R.STREAM.decode(DIALECT, body, pos, exact=False)
            out.append(StreamInfo(rec.id, rec.name))
        return out

    def stream(self, stream: int | str) -> StreamInfo | None:
        """The stream and its topic names, or None when it does not exist."""
        body = self._call(S.GET_STREAM, stream_id=stream)
        if not body:
            return None
        rec, pos = R.STREAM.decode(DIALECT, body, 0, exact=False)
        names = []
        while pos < len(body):
            t, pos = R.TOPIC.decode(DIALECT, body, pos, exact=False)
            names.append(t.name)
        return StreamInfo(rec.id, rec.name, tuple(names))

    def topic(self, stream: int | str, topic: int | str) -> TopicInfo | None:
        """The topic with its partitions, or None when the stream or topic does not exist."""
        try:
            body = self._call(S.GET_TOPIC, stream_id=stream, topic_id=topic)
        except FerryClientError as exc:
            if exc.code in (IggyError.STREAM_ID_NOT_FOUND, IggyError.STREAM_NAME_NOT_FOUND):
                return None
            raise
        if not body:
            return None
        rec, pos = R.TOPIC.decode(DIALECT, body, 0, exact=False)
        parts = []
        while pos < len(body):
            p, pos = R.PARTITION.decode(DIALECT, body, pos, exact=False)
            parts.append(PartitionInfo(p.id, p.current_offset, p.messages_count))
        return TopicInfo(rec.id, rec.name, tuple(sorted(parts, key=lambda p: p.id)))

    def next_offsets(self, stream: int | str, topic: int | str) -> dict[int, int]:
        """``{partition id: next offset}``; raises FerryClientError when the topic is missing."""
        info = self.topic(stream, topic)
        if info is None:
            raise FerryClientError(f"topic {stream}/{topic} not found", IggyError.TOPIC_NAME_NOT_FOUND)
        return info.next_offsets()

    def create_token(self, name: str, expiry_us: int = 0) -> str:
        """A new personal access token for the logged-in user (expiry 0: never)."""
        body = self._call(S.CREATE_PAT, name=name, expiry=expiry_us)
        return R.RAW_PAT.decode(DIALECT, body).token

    def create_stream(self, name: str) -> None:
        self._call(S.CREATE_STREAM, name=name)

    def create_topic(self, stream: int | str, name: str, partitions: int, *, message_expiry_us: int = 0) -> None:
        """Create a topic; ``message_expiry_us`` 0 keeps the server's default retention."""
        self._call(S.CREATE_TOPIC, stream_id=stream, partitions_count=partitions, name=name,
                   message_expiry=message_expiry_us)

    def create_partitions(self, stream: int | str, topic: int | str, count: int) -> None:
        self._call(S.CREATE_PARTITIONS, stream_id=stream, topic_id=topic, partitions_count=count)

    def ensure_topic(self, stream: str, topic: str, partitions: int = 1) -> TopicInfo:
        """Create the stream and topic when missing (already-exists races are fine)."""
        if self.stream(stream) is None:
            try:
                self.create_stream(stream)
            except FerryClientError as exc:
                if exc.code != IggyError.STREAM_NAME_ALREADY_EXISTS:
                    raise
        info = self.topic(stream, topic)
        if info is None:
            try:
                self.create_topic(stream, topic, partitions)
            except FerryClientError as exc:
                if exc.code != IggyError.TOPIC_NAME_ALREADY_EXISTS:
                    raise
            info = self.topic(stream, topic)
        return info

    # -- messages --------------------------------------------------------------------------
    def poll(self, stream: int | str, topic: int | str, partition: int, offset: int,
             count: int = DEFAULT_POLL_COUNT) -> Polled:
        """Up to ``count`` records from ``offset`` (or from the first retained one)."""
        return self._poll(stream, topic, partition, Strategy(1, offset), count)

    def first_offset(self, stream: int | str, topic: int | str, partition: int) -> int | None:
        """The oldest offset still stored (retention may have removed older ones), or
        None when the partition holds no records."""
        got = self._poll(stream, topic, partition, Strategy(3, 0), 1)
        return RECORD_HEADER.unpack_from(got.body, got.start)[3] if got.count else None

    def offset_for_timestamp(self, stream: int | str, topic: int | str, partition: int, ts_us: int) -> int | None:
        """The first offset whose append time is >= ``ts_us``, or None when there is none yet."""
        got = self._poll(stream, topic, partition, Strategy(2, ts_us), 1)
        if not got.count:
            return None
        return RECORD_HEADER.unpack_from(got.body, got.start)[3]

    def _poll(self, stream, topic, partition: int, strategy: Strategy, count: int) -> Polled:
        if not 1 <= count <= MAX_POLL_COUNT:
            raise ValueError(f"poll count must be 1..{MAX_POLL_COUNT}, got {count}")
        self._send(S.POLL_MESSAGES, consumer=_CONSUMER, stream_id=stream, topic_id=topic,
                   partition_id=partition, strategy=strategy, count=count, auto_commit=False)
        return self._read_poll()

    def poll_range(self, stream: int | str, topic: int | str, partition: int, start: int, end: int,
                   count: int = DEFAULT_POLL_COUNT) -> Iterator[Polled]:
        """Polls covering offsets ``[start, end)``; the last one may hold records at or
        past ``end`` (callers cut them). Stops early when the partition has no more
        (records below ``start`` may be gone to retention: the first poll then
        starts at the first retained offset).

        ``count`` caps each poll; within it, polls are sized to weigh about
        :data:`TARGET_POLL_BYTES` from the average record size seen so far. The
        next poll is requested *before* this one is yielded, so the gateway reads
        it while the caller decodes (still lockstep: a request goes out only after
        the previous reply was read). Offsets in a partition are contiguous (the
        log never compacts), so a reply's first offset and count tell where the
        next poll starts without walking the records."""
        if start >= end:
            return
        want = min(count, FIRST_POLL_COUNT)
        in_flight = True
        self._send_poll(stream, topic, partition, start, min(want, end - start))
        try:
            while in_flight:
                got = self._read_poll()
                in_flight = False
                if not got.count:
                    return
                at = RECORD_HEADER.unpack_from(got.body, got.start)[3] + got.count
                if at < end:
                    per_record = max(1, (len(got.body) - got.start) // got.count)
                    want = max(1, min(count, TARGET_POLL_BYTES // per_record))
                    self._send_poll(stream, topic, partition, at, min(want, end - at))
                    in_flight = True
                yield got
        finally:
            if in_flight and self._sock is not None:  # the caller stopped early: drop the pending reply
                try:
                    self._read_poll()
                except FerryClientError:
                    self.close()

    def _send_poll(self, stream, topic, partition: int, offset: int, count: int) -> None:
        if not 1 <= count <= MAX_POLL_COUNT:
            raise ValueError(f"poll count must be 1..{MAX_POLL_COUNT}, got {count}")
        self._send(S.POLL_MESSAGES, consumer=_CONSUMER, stream_id=stream, topic_id=topic, partition_id=partition,
                   strategy=Strategy(1, offset), count=count, auto_commit=False)

    def _read_poll(self) -> Polled:
        body = self._reply(S.POLL_MESSAGES)
        pid, current, n = POLL_PREFIX.unpack_from(body, 0)
        return Polled(pid, current, n, body, POLL_PREFIX.size)

    def send(self, stream: int | str, topic: int | str, partition: int | None,
             messages: Sequence[WireMessage], *, key: bytes | None = None) -> None:
        """Append ``messages`` (one SendMessages) to ``partition``, or by ``key``, or
        balanced when both are None. Returns once the gateway acknowledged them as
        durable under its fsync policy."""
        if partition is not None:
            part = PartitioningValue(2, _U32.pack(partition))
        elif key is not None:
            part = PartitioningValue(3, key)
        else:
            part = PartitioningValue(1, b"")
        self._call(S.SEND_MESSAGES, stream_id=stream, topic_id=topic, partitioning=part, messages=tuple(messages))

    def send_encoded(self, stream: int | str, topic: int | str, partition: int, messages: Sequence) -> None:
        """:meth:`send` to ``partition`` of messages already encoded: ``messages`` are
        buffers that, back to back, are the dialect-2 messages field exactly as the
        command table writes it (adapters/iggy/messages.py ``_MessagesV2.write``: u32
        count, index entries, records), as adapters/spark/sink.py builds it without a
        Python object per message. They are sent as they are, not joined (a chunk is
        up to MAX_SEND_BYTES). The request around them comes from the same table: an
        empty send ends in its u32 count 0, which ``messages`` replaces."""
        cmd = S.SEND_MESSAGES
        head = cmd.encode(DIALECT, cmd.make(stream_id=stream, topic_id=topic,
                                            partitioning=PartitioningValue(2, _U32.pack(partition)), messages=()))
        if head[-4:] != bytes(4):
            raise AssertionError("SendMessages: an empty message list no longer encodes as a trailing u32 0")
        size = len(head) - 4 + sum(len(m) for m in messages)
        sock = self._sock
        if sock is None:
            raise FerryClientError("not connected")
        try:
            sock.sendall(LEGACY_HEAD.pack(4 + size, cmd.code) + head[:-4])
            for m in messages:
                sock.sendall(m)
        except OSError as exc:
            self.close()
            raise FerryClientError(f"{cmd.name}: connection to {self.host}:{self.port} failed: {exc}") from exc
        self._reply(cmd)

    def send_many(self, stream: int | str, topic: int | str, partition: int | None,
                  messages: Iterable[WireMessage], *, max_count: int = DEFAULT_SEND_COUNT) -> int:
        """Send in chunks bounded by ``max_count`` and :data:`MAX_SEND_BYTES`; returns the count."""
        total = 0
        for chunk in chunked(messages, max_count):
            self.send(stream, topic, partition, chunk)
            total += len(chunk)
        return total


def chunked(messages: Iterable[WireMessage], max_count: int) -> Iterator[list[WireMessage]]:
    """Split into lists of at most ``max_count`` messages and about :data:`MAX_SEND_BYTES`."""
    chunk: list[WireMessage] = []
    size = 0
    for m in messages:
        n = 64 + 16 + len(m.payload) + len(m.headers)  # stored header + index entry + body
        if chunk and (len(chunk) >= max_count or size + n > MAX_SEND_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(m)
        size += n
    if chunk:
        yield chunk


__all__ = [
    "DIALECT", "FerryClient", "FerryClientError", "PartitionInfo", "Polled", "Record", "StreamInfo",
    "TopicInfo", "WireMessage", "chunked",
]
