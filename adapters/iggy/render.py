"""Reply bodies per dialect, from broker state (pure: no trio, no I/O).

Theory of operation
-------------------
Canonical ids are 0-based (docs/internals.md); dialects 1 and 5 are 1-based,
so every id that leaves here goes through ``+ edge`` where ``edge = 1`` for
them and 0 otherwise (iggy-current.md 14, "Id spaces").

Polled messages are rendered from stored records (``core.record``, the
64-byte Iggy-0.8 layout):

* dialect 2: the stored bytes *are* the wire messages (iggy-middle.md 7), so
  the reply is the 16-byte prefix plus the read's chunks, joined once;
* dialect 1: each record is re-framed as iggy.md 5.12 (CRC32 of the payload,
  the seed-era header map, iggy.md 6.3 and 3.5);
* dialects 4 and 5: each record re-framed with the 56-byte header and the
  seed-era header map (iggy-middle.md 7.1), XXH3-64 (4) or CRC32 (5) of the
  message from byte 8 on (iggy-middle.md 8);
* dialect 3: consecutive records that share one append timestamp become one
  VSR batch (iggy-current.md 7); a new batch starts when the timestamp
  changes or an origin-timestamp delta would not fit the frame's u32.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib

import xxhash

from core.errors import NotFound
from core.message import Headers

from . import options
from . import replies as R
from ._compiled import vsr_render as _vsr_render
from .messages import MIDDLE56_HEADER, VSR_BATCH_HEADER, VSR_FRAME_HEADER
from .table import ONE_BASED as _ONE_BASED, parse_versions

ONE_BASED = parse_versions(_ONE_BASED)

U64_MAX = (1 << 64) - 1
_U32 = struct.Struct("<I")
_V1_MSG = struct.Struct("<QBQQQII")  # offset, state, timestamp, id lo, id hi, crc32, headers length
_REC = struct.Struct("<QQQQQQII8x")  # the stored 64-byte header (core.record)
STATE_AVAILABLE = 1  # iggy.md 3.6 MessageState
_U32_MAX = 0xFFFFFFFF
_U64 = struct.Struct("<Q")
# The 48-byte frame header after its checksum field (what the checksum covers, with the body).
_VSR_FRAME_TAIL = struct.Struct("<" + VSR_FRAME_HEADER.format.lstrip("<")[1:])
_VSR_SUM_PREFIX = struct.Struct("<QQQQQI")  # what the batch checksum covers before the frame checksums


def edge(dialect: int) -> int:
    return 1 if dialect in ONE_BASED else 0


def expiry_out(us: int) -> int:
    return U64_MAX if not us else us


def size_out(n: int) -> int:
    return U64_MAX if not n else n


def partition_stats(broker, sid: int, tid: int, pid: int) -> tuple[int, int, int, int]:
    """``(segments, current_offset, size, messages)`` of one partition (zeros if gone)."""
    try:
        part = broker.partition(sid, tid, pid)
    except NotFound:
        return 0, 0, 0, 0
    return part.segment_count, max(part.next_offset - 1, 0), part.size_bytes, part.record_count


def topic_totals(broker, topic) -> tuple[int, int]:
    size = count = 0
    for pid in range(topic.partitions_count):
        _s, _c, sz, n = partition_stats(broker, topic.stream_id, topic.id, pid)
        size += sz
        count += n
    return size, count


# -- record values (shared with adapters/http/forms.py, which derives the HTTP JSON) ------
# ``e`` is the id offset (edge(dialect) here; 0 for HTTP, whose forms add their own base).
# ``floors``: the binary replies never report 0 segments or a replication factor of 0
# (Iggy's clients read them as counts); the HTTP JSON has always shown the stored values.
COMPRESSION_CODES = {"none": 1, "gzip": 2}


def topic_value(broker, topic, e: int, *, floors: bool = True):
    size, count = topic_totals(broker, topic)
    rf = topic.replication_factor
    return R.TOPIC.make(
        id=topic.id + e, created_at=topic.created_at, partitions_count=topic.partitions_count,
        message_expiry=expiry_out(topic.message_expiry),
        compression=COMPRESSION_CODES.get(topic.compression_algorithm, 1),
        max_topic_size=size_out(topic.max_topic_size), replication_factor=max(rf, 1) if floors else rf,
        size=size, messages_count=count, name=topic.name)


def partition_values(broker, topic, e: int, *, floors: bool = True) -> list:
    created = {p.id: p.created_at for p in broker.meta.list_partitions(topic.stream_id, topic.id)}
    out = []
    for pid in range(topic.partitions_count):
        segs, cur, size, n = partition_stats(broker, topic.stream_id, topic.id, pid)
        out.append(R.PARTITION.make(
            id=pid + e, created_at=created.get(pid, topic.created_at), segments_count=max(segs, 1) if floors else segs,
            current_offset=cur, size=size, messages_count=n))
    return out


def stream_value(broker, stream, e: int, topics=None):
    topics = broker.list_topics(stream.id) if topics is None else topics
    size = count = 0
    for t in topics:
        s, c = topic_totals(broker, t)
        size += s
        count += c
    return R.STREAM.make(id=stream.id + e, created_at=stream.created_at, topics_count=len(topics), size=size,
                         messages_count=count, name=stream.name)


def group_value(group, partitions_count: int, members_count: int, e: int):
    return R.GROUP.make(id=group.id + e, partitions_count=partitions_count, members_count=members_count,
                        name=group.name)


def member_value(member_id: int, partitions, e: int):
    return R.MEMBER.make(id=member_id, partitions=tuple(p + e for p in partitions))


def user_value(user, e: int):
    return R.USER_INFO.make(id=user.id + e, created_at=user.created_at, status=1 if user.active else 2,
                            username=user.username)


def pat_value(token):
    return R.PAT_INFO.make(name=token.name, expiry_at=token.expiry_at or 0)


def offset_value(partition_id: int, current: int, stored: int, e: int):
    return R.OFFSET_INFO.make(partition_id=partition_id + e, current_offset=current, stored_offset=stored)


def client_value(session, e: int):
    """ClientInfo (iggy.md 5.7) of an Iggy session; user id 0 means "not logged in" on the
    wire, so a logged-in root shows as its wire id (1 with ``e=1``, 0 with ``e=0``, as Iggy's)."""
    user_id = 0 if session.user is None else session.user.id + e
    return R.CLIENT_INFO.make(client_id=session.client_id & 0xFFFFFFFF, user_id=user_id,
                              transport=session.transport, address=session.address,
                              consumer_groups_count=len(session.broker.consumers.groups_of(session.client_id)))


def client_group_values(session, e: int) -> list:
    """The consumer groups a session is a member of, as ClientInfoDetails lists them
    after its ClientInfo (iggy.md 5.8): wire ids (``+ e``), sorted."""
    return [R.CLIENT_GROUP.make(stream_id=sid + e, topic_id=tid + e, group_id=gid + e)
            for sid, tid, gid in session.broker.consumers.groups_of(session.client_id)]


# -- reply bodies ---------------------------------------------------------------------------
def topic_record(broker, topic, dialect: int, out: list) -> None:
    value = topic_value(broker, topic, edge(dialect))
    if dialect == 3:  # the explicit and derived option blocks (options.py, iggy-current.md 6.8)
        explicit, derived = options.option_blocks(broker, topic)
        value = dataclasses.replace(value, options=explicit, derived_options=derived)
    R.TOPIC.write(dialect, out, value)


def topic_details(broker, topic, dialect: int) -> bytes:
    out: list[bytes] = []
    topic_record(broker, topic, dialect, out)
    for value in partition_values(broker, topic, edge(dialect)):
        R.PARTITION.write(dialect, out, value)
    return b"".join(out)


def stream_record(broker, stream, dialect: int, out: list, topics=None) -> None:
    R.STREAM.write(dialect, out, stream_value(broker, stream, edge(dialect), topics))


def stream_details(broker, stream, dialect: int) -> bytes:
    topics = broker.list_topics(stream.id)
    out: list[bytes] = []
    stream_record(broker, stream, dialect, out, topics)
    for t in topics:
        topic_record(broker, t, dialect, out)
    return b"".join(out)


def group_details(group, topic, members: dict, dialect: int, *, with_members: bool = True) -> bytes:
    e = edge(dialect)
    out: list[bytes] = []
    R.GROUP.write(dialect, out, group_value(group, topic.partitions_count, len(members), e))
    if with_members:
        for mid, parts in members.items():
            R.MEMBER.write(dialect, out, member_value(mid & 0xFFFFFFFF, parts, e))
    return b"".join(out)


# -- polled messages ----------------------------------------------------------------
def polled(dialect: int, partition_id: int, current_offset: int, batch) -> bytes:
    """The PollMessages reply body; ``batch`` is a ``core.log`` ReadBatch or None."""
    n = batch.count if batch is not None else 0
    prefix = R.POLL_PREFIX.encode(dialect, R.POLL_PREFIX.make(
        partition_id=partition_id + edge(dialect), current_offset=max(current_offset, 0), count=n))
    if not n:
        return prefix
    if dialect == 2:
        return b"".join([prefix, *batch.chunks])
    if dialect == 1:
        return b"".join([prefix, *_legacy_messages(batch)])
    if dialect in (4, 5):
        checksum = xxhash.xxh3_64_intdigest if dialect == 4 else zlib.crc32
        return b"".join([prefix, *_middle56_messages(batch, checksum)])
    if _vsr_render is not None:  # adapters/iggy/_speedups.c: the same batches as _vsr_batches
        chunks = batch.chunks
        return _vsr_render(prefix, chunks[0] if len(chunks) == 1 else b"".join(chunks), batch.sizes, partition_id)
    return b"".join([prefix, *_vsr_batches(partition_id, batch)])


def _legacy_messages(batch):
    for raw in batch.raw_records():
        _c, lo, hi, offset, ts, _origin, hlen, plen = _REC.unpack_from(raw, 0)
        payload = raw[64 : 64 + plen]
        headers = Headers.decode(raw[64 + plen : 64 + plen + hlen]).encode_legacy() if hlen else b""
        yield _V1_MSG.pack(offset, STATE_AVAILABLE, ts, lo, hi, zlib.crc32(payload), len(headers))
        yield headers
        yield _U32.pack(plen)
        yield bytes(payload)


def _middle56_messages(batch, checksum):
    """Stored records as profiles 0.5/0.6 carry them (iggy-middle.md 7.1, 8): the
    56-byte header (no reserved field), payload, then the seed-era header map,
    with ``checksum`` (XXH3-64 or CRC32) of the message from byte 8 on."""
    for raw in batch.raw_records():
        _c, lo, hi, offset, ts, origin, hlen, plen = _REC.unpack_from(raw, 0)
        payload = raw[64 : 64 + plen]
        headers = Headers.decode(raw[64 + plen : 64 + plen + hlen]).encode_legacy() if hlen else b""
        tail = MIDDLE56_HEADER.pack(0, lo, hi, offset, ts, origin, len(headers), plen)[8:] + payload + headers
        yield _U64.pack(checksum(tail))
        yield tail


def _vsr_batches(partition_id: int, batch):
    """Runs of records sharing one append timestamp, each as one VSR batch. The
    batch's origin is its first record's (a smaller origin, or a delta past u32,
    starts the next batch), so no run is ever scanned twice."""
    run: list = []
    ts0 = first_origin = max_origin = 0
    for raw in batch.raw_records():
        _c, lo, hi, offset, ts, origin, hlen, plen = _REC.unpack_from(raw, 0)
        origin = origin or ts
        if run and (ts != ts0 or origin < first_origin or origin - first_origin > _U32_MAX
                    or max_origin - origin > _U32_MAX):
            yield from _one_batch(partition_id, run, ts0, first_origin)
            run = []
        if not run:
            ts0, first_origin, max_origin = ts, origin, origin
        elif origin > max_origin:
            max_origin = origin
        run.append((lo, hi, offset, origin, hlen, plen, raw[64:]))
    if run:
        yield from _one_batch(partition_id, run, ts0, first_origin)


def _one_batch(partition_id: int, run: list, ts: int, origin: int):
    """The parts of one VSR batch (iggy-current.md 7.1-7.3; the layout
    messages.encode_vsr_batch writes): header, then per frame its XXH3-64 of
    bytes 8..end, the rest of its 48-byte header, payload and headers as stored."""
    base = run[0][2]
    tail, xxh = _VSR_FRAME_TAIL.pack, xxhash.xxh3_64_intdigest
    frames: list = []
    sums: list[bytes] = []
    total = VSR_BATCH_HEADER.size
    for lo, hi, offset, o, hlen, plen, body in run:
        head = tail(lo, hi, offset - base, o - origin, hlen, plen, 0)
        csum = _U64.pack(xxh(head + body))
        sums.append(csum)
        frames += (csum, head, body)
        total += 48 + hlen + plen
    n = len(run)
    digest = xxh(_VSR_SUM_PREFIX.pack(partition_id, base, ts, origin, total, n) + b"".join(sums))
    yield VSR_BATCH_HEADER.pack(partition_id, base, ts, origin, total, digest, n)
    yield from frames


__all__ = ["client_group_values", "client_value", "edge", "group_details", "group_value", "member_value",
           "offset_value", "partition_values", "pat_value", "polled", "stream_details", "stream_value",
           "topic_details", "topic_value", "user_value"]
