"""One function per Iggy command: ``handler(session, value) -> bytes | Reply | Deferred``.

Each handler resolves the wire's identifiers to canonical entities through the
session, checks the permission Iggy's permissioner checks for that command
(core/permissions.py table), calls the broker and renders the reply body
(adapters/iggy/render.py). Raising a core error or :class:`IggyStatus` is how
a handler fails; the session maps both to status codes.
"""

from __future__ import annotations

import contextlib
import os
import platform
import socket
import struct

import xxhash

from core import errors as ce
from core.message import HeaderKind, Headers
from core.permissions import Action

from . import render
from . import replies as R
from . import snapshot
from .errors import IggyError, IggyStatus
from .events import Reply
from .messages import MAX_BATCH_PAYLOAD, StoredBatch
from .producer import take_producer_block
from .permissions import decode_permissions, encode_permissions
from .session import SERVER_VERSION, Deferred, sessions_of

A = Action
_COMPRESSION = {1: "none", 2: "gzip"}
_U32 = struct.Struct("<I")
U64_MAX = (1 << 64) - 1
SEMVER = 10_000  # major*1e6 + minor*1e3 + patch of the Iggy server we resemble (0.10.0)


def _not_found_is_empty(fn):
    """GETs of one entity answer an empty OK when it (or a parent) is missing
    (iggy.md 9.2; iggy-middle.md 9; iggy-current.md 8)."""

    def wrapper(s, v):
        try:
            return fn(s, v)
        except ce.NotFound:
            return b""
        except IggyStatus as err:
            if err.code in (IggyError.STREAM_ID_NOT_FOUND, IggyError.TOPIC_ID_NOT_FOUND,
                            IggyError.CONSUMER_GROUP_ID_NOT_FOUND):
                return b""
            raise

    return wrapper


def _expiry_in(v: int) -> int:
    return 0 if v in (0, U64_MAX) else v


def _compression(code: int) -> str:
    try:
        return _COMPRESSION[code]
    except KeyError:
        raise IggyStatus(IggyError.INVALID_COMMAND, f"compression {code}") from None


# -- system ------------------------------------------------------------------------------
def ping(s, v):
    return b""


def get_stats(s, v):
    t = s.broker.totals()
    return R.STATS.encode(s.dialect, R.STATS.make(
        process_id=os.getpid(), cpu_usage=0, total_cpu_usage=0, memory_usage=0, total_memory=0, available_memory=0,
        run_time=0, start_time=0, read_bytes=0, written_bytes=t.stored_bytes, messages_size_bytes=t.stored_bytes,
        streams_count=t.streams, topics_count=t.topics, partitions_count=t.partitions, segments_count=t.segments,
        messages_count=t.messages, clients_count=len(sessions_of(s.broker)),
        consumer_groups_count=t.consumer_groups, hostname=socket.gethostname(),
        os_name=platform.system(), os_version=platform.release(), kernel_version=platform.version()[:200],
        server_version=SERVER_VERSION, server_semver=SEMVER))


def cluster_metadata(s, v):
    """A one-node cluster: the client then stays on this connection (iggy-middle.md 6.3)."""
    out: list[bytes] = []
    R.CLUSTER.write(s.dialect, out, R.CLUSTER.make(name="ferry", nodes_count=1))
    R.CLUSTER_NODE.write(s.dialect, out, R.CLUSTER_NODE.make(
        name="ferry-1", ip="127.0.0.1", tcp_port=8090, quic_port=8080, http_port=3000, websocket_port=8092))
    return b"".join(out)


# The topic options a dialect-3 CreateTopic/UpdateTopic applies (_vsr_topic_options),
# as DescribeOptions describes them: key, header kind, default as that kind encodes
# it (Ferry's defaults: never expire, no size cap), description. Streams and users
# take no options, as on the reference server (apache/iggy server responses.rs).
TOPIC_OPTIONS = (
    ("compression_algorithm", HeaderKind.STRING, b"none", "how stored batches are compressed: none or gzip"),
    ("message_expiry", HeaderKind.UINT64, U64_MAX.to_bytes(8, "little"),
     "microseconds a message is kept; u64::MAX or 0 keeps it until the size cap or a purge"),
    ("max_topic_size", HeaderKind.UINT64, U64_MAX.to_bytes(8, "little"),
     "bytes the topic may hold before its oldest sealed segments are deleted; u64::MAX or 0 for no cap"),
)
_OPTION_SCOPES = {1: TOPIC_OPTIONS, 2: (), 3: ()}  # iggy-current.md 6.13: 1 topic, 2 stream, 3 user
# Topic keys the reference server knows and Ferry accepts without applying them: the
# 0.9.0 client sends the two durability keys on every create (iggy-current.md 6.8);
# the others tune the reference server's own storage. Any other key is 4041.
_TOPIC_OPTIONS_IGNORED = frozenset({
    "consumer_offset_durability", "durability", "segment_size", "enforce_fsync", "messages_required_to_save",
    "size_of_messages_required_to_save", "preallocate_segments",
})


def describe_options(s, v):
    options = _OPTION_SCOPES.get(v.scope)
    if options is None:
        raise IggyStatus(IggyError.INVALID_COMMAND, f"option scope {v.scope}")
    out = [_U32.pack(len(options))]
    for key, kind, default, description in options:
        R.OPTION_SPEC.write(3, out, R.OPTION_SPEC.make(key=key, kind=int(kind), default_value=default,
                                                        description=description))
    return b"".join(out)


def get_snapshot(s, v):
    """iggy.md 4.1, 5.10: a ZIP archive, built in a worker thread (snapshot.py).
    Permission: Iggy's ``get_snapshot`` rule, read_servers or manage_servers."""
    s.require(A.READ_SERVERS)
    try:
        request = snapshot.request_from_codes(v.compression, v.types)
    except snapshot.SnapshotRefused as err:
        raise IggyStatus(err.code, err.reason) from None
    inputs = snapshot.inputs_from_broker(s.broker, len(sessions_of(s.broker)))
    return Deferred(_snapshot_built, lambda: snapshot.build_snapshot(request, inputs))


def _snapshot_built(outcome):
    if isinstance(outcome, snapshot.SnapshotRefused):
        raise IggyStatus(outcome.code, outcome.reason)
    if isinstance(outcome, BaseException):
        raise outcome
    return Reply(0, outcome)


# -- login / users ----------------------------------------------------------------------------
def login_user(s, v):
    return s.login_password(v.username, v.password)


def login_register(s, v):
    return s.login_password(v.username, v.password, v.protocol_version)


def login_pat(s, v):
    return s.login_token(v.token)


def login_register_pat(s, v):
    return s.login_token(v.token, v.protocol_version)


def logout(s, v):
    s.user = None
    return b""


def _user_info(s, u, out):
    R.USER_INFO.write(s.dialect, out, render.user_value(u, s.edge))


@_not_found_is_empty
def get_user(s, v):
    u = s.broker.meta.get_user(s.ident(v.user_id, IggyError.RESOURCE_NOT_FOUND))
    if u.id != s.user.id:
        s.require(A.READ_USERS)
    return _user_details(s, u)


def _user_details(s, u) -> bytes:
    """UserInfo + ``u8 1, u32 length, blob``, or four zero bytes without permissions
    (iggy.md 5.6: the reference server writes u32 0; 0.11 decoders require all four)."""
    out: list[bytes] = []
    _user_info(s, u, out)
    if u.permissions is None:
        out.append(b"\x00\x00\x00\x00")
    else:
        blob = encode_permissions(u.permissions, s.edge)
        out += (b"\x01", _U32.pack(len(blob)), blob)
    return b"".join(out)


def get_users(s, v):
    s.require(A.READ_USERS)
    out: list[bytes] = []
    for u in s.broker.meta.list_users():
        _user_info(s, u, out)
    return b"".join(out)


def create_user(s, v):
    s.require(A.MANAGE_USERS)
    perms = None if v.permissions is None else decode_permissions(v.permissions, s.edge)
    status = {1: "active", 2: "inactive"}.get(v.status)
    if status is None:
        raise IggyStatus(IggyError.INVALID_USER_STATUS)

    def work():
        return s.broker.meta.create_user(v.username, v.password, status, perms)

    def finish(u):
        if isinstance(u, BaseException):
            raise u
        return Reply(0, _user_details(s, u))

    return Deferred(finish, work)


def delete_user(s, v):
    s.require(A.MANAGE_USERS)
    s.broker.meta.delete_user(s.ident(v.user_id, IggyError.RESOURCE_NOT_FOUND))
    return b""


def update_user(s, v):
    s.require(A.MANAGE_USERS)
    status = None if v.status is None else {1: "active", 2: "inactive"}.get(v.status, "?")
    s.broker.meta.update_user(s.ident(v.user_id, IggyError.RESOURCE_NOT_FOUND), username=v.username, status=status)
    return b""


def update_permissions(s, v):
    s.require(A.MANAGE_USERS)
    perms = None if v.permissions is None else decode_permissions(v.permissions, s.edge)
    s.broker.meta.update_permissions(s.ident(v.user_id, IggyError.RESOURCE_NOT_FOUND), perms)
    return b""


def change_password(s, v):
    target = s.broker.meta.get_user(s.ident(v.user_id, IggyError.RESOURCE_NOT_FOUND))
    if target.id != s.user.id:
        s.require(A.MANAGE_USERS)
    return Deferred(lambda r: _raise_or(r, b""),
                    lambda: s.broker.meta.change_password(target.id, v.current_password, v.new_password))


def _raise_or(result, body: bytes):
    if isinstance(result, BaseException):
        raise result
    return Reply(0, body)


def get_pats(s, v):
    out: list[bytes] = []
    for t in s.broker.meta.list_pats(s.user.id):
        R.PAT_INFO.write(s.dialect, out, render.pat_value(t))
    return b"".join(out)


def create_pat(s, v):
    expiry = None if v.expiry in (0, U64_MAX) else v.expiry
    token = s.broker.meta.create_pat(s.user.id, v.name, expiry)
    return R.RAW_PAT.encode(s.dialect, R.RAW_PAT.make(token=token))


def delete_pat(s, v):
    s.broker.meta.delete_pat(s.user.id, v.name)
    return b""


def _client_info(s, other, out: list) -> None:
    """ClientInfo (iggy.md 5.7), built by render.client_value."""
    R.CLIENT_INFO.write(s.dialect, out, render.client_value(other, s.edge))


def _client_details(s, other) -> bytes:
    """ClientInfoDetails (iggy.md 5.8): the ClientInfo, then one entry per consumer
    group the client is a member of (as many as its consumer_groups_count says)."""
    out: list[bytes] = []
    _client_info(s, other, out)
    for value in render.client_group_values(other, s.edge):
        R.CLIENT_GROUP.write(s.dialect, out, value)
    return b"".join(out)


def get_me(s, v):
    return _client_details(s, s)


def get_client(s, v):
    s.require(A.READ_SERVERS)
    if v.client_id == 0:
        raise IggyStatus(IggyError.INVALID_CLIENT_ID)
    other = sessions_of(s.broker).get(v.client_id)
    if other is None:
        return b""  # iggy.md 9.2: a missing single entity is an empty OK
    return _client_details(s, other)


def get_clients(s, v):
    s.require(A.READ_SERVERS)
    out: list[bytes] = []
    for _cid, other in sorted(sessions_of(s.broker).items()):
        _client_info(s, other, out)
    return b"".join(out)


# -- streams -----------------------------------------------------------------------------------
@_not_found_is_empty
def get_stream(s, v):
    st = s.stream(v.stream_id)
    s.require(A.READ_STREAM, st.id)
    return render.stream_details(s.broker, st, s.dialect)


def get_streams(s, v):
    s.require(A.READ_STREAMS)
    out: list[bytes] = []
    for st in s.broker.list_streams():
        render.stream_record(s.broker, st, s.dialect, out)
    return b"".join(out)


def create_stream(s, v):
    s.require(A.CREATE_STREAM)
    wanted = v.stream_id - 1 if s.one_based and v.stream_id else None
    st = s.broker.create_stream(v.name, wanted)
    return render.stream_details(s.broker, st, s.dialect)


def update_stream(s, v):
    st = s.stream(v.stream_id)
    s.require(A.MANAGE_STREAM, st.id)
    s.broker.update_stream(st.id, v.name)
    return b""


def delete_stream(s, v):
    st = s.stream(v.stream_id)
    s.require(A.MANAGE_STREAM, st.id)
    s.broker.delete_stream(st.id)
    return b""


def purge_stream(s, v):
    st = s.stream(v.stream_id)
    s.require(A.MANAGE_STREAM, st.id)
    s.broker.purge_stream(st.id)
    return b""


# -- topics -------------------------------------------------------------------------------------
@_not_found_is_empty
def get_topic(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.READ_TOPIC, t.stream_id, t.id)
    return render.topic_details(s.broker, t, s.dialect)


def get_topics(s, v):
    st = s.stream(v.stream_id)
    s.require(A.READ_TOPICS, st.id)
    topics = s.broker.list_topics(st.id)
    out: list[bytes] = [_U32.pack(len(topics))] if s.dialect == 3 else []  # iggy-current.md 6.8
    for t in topics:
        render.topic_record(s.broker, t, s.dialect, out)
    return b"".join(out)


def create_topic(s, v):
    st = s.stream(v.stream_id)
    s.require(A.CREATE_TOPIC, st.id)
    wanted = v.topic_id - 1 if s.one_based and v.topic_id else None
    if s.dialect == 3:
        given = _vsr_topic_options(v.options)
        expiry, max_size = given.get("message_expiry", 0), given.get("max_topic_size", 0)
        compression = given.get("compression", "none")
    else:
        expiry, max_size = _expiry_in(v.message_expiry), _expiry_in(v.max_topic_size)
        compression = _compression(v.compression)
    t = s.broker.create_topic(st.id, v.name, v.partitions_count, topic_id=wanted, message_expiry=expiry,
                              max_topic_size=max_size, compression=compression,
                              replication_factor=max(v.replication_factor or 1, 1))
    return render.topic_details(s.broker, t, s.dialect)


def _vsr_topic_options(block: bytes) -> dict:
    """The topic settings a VSR options block gives (``message_expiry``,
    ``max_topic_size``, ``compression``; only those present): the same TLV as user
    headers, string keys (iggy-current.md 6.1, 6.8). Keys the reference server knows
    but Ferry does not apply are accepted and ignored; unknown ones are 4041."""
    given: dict = {}
    if not block:
        return given
    try:
        pairs = Headers.decode(block).items()
    except ce.HeaderError:
        raise IggyStatus(IggyError.INVALID_COMMAND, "malformed options block") from None
    for key, value in pairs:
        name = key.as_str() if key.kind == HeaderKind.STRING else ""
        try:
            if name in ("message_expiry", "max_topic_size"):
                given[name] = _expiry_in(value.as_int())
            elif name == "compression_algorithm":
                given["compression"] = value.as_str().lower()
                if given["compression"] not in _COMPRESSION.values():
                    raise IggyStatus(IggyError.INVALID_COMMAND, f"compression {given['compression']!r}")
            elif name not in _TOPIC_OPTIONS_IGNORED:
                raise IggyStatus(IggyError.UNSUPPORTED_OPTION_KEY, f"option {key.to_text()!r}")
        except (ce.FerryError, TypeError, ValueError):
            raise IggyStatus(IggyError.INVALID_COMMAND, f"option {name!r}") from None
    return given


def update_topic(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.MANAGE_TOPIC, t.stream_id, t.id)
    changes = {"name": v.name}
    if s.dialect == 3:  # only the options sent change (the others keep their values)
        changes.update(_vsr_topic_options(v.options))
    else:
        changes.update(message_expiry=_expiry_in(v.message_expiry), max_topic_size=_expiry_in(v.max_topic_size),
                       compression=_compression(v.compression))
    s.broker.update_topic(t.stream_id, t.id, **changes)
    return b""


def delete_topic(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.MANAGE_TOPIC, t.stream_id, t.id)
    s.broker.delete_topic(t.stream_id, t.id)
    return b""


def purge_topic(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.MANAGE_TOPIC, t.stream_id, t.id)
    s.broker.purge_topic(t.stream_id, t.id)
    return b""


def create_partitions(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.MANAGE_TOPIC, t.stream_id, t.id)
    with _partitions_count_errors(s):
        s.broker.add_partitions(t.stream_id, t.id, v.partitions_count)
    return b""


def delete_partitions(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.MANAGE_TOPIC, t.stream_id, t.id)
    with _partitions_count_errors(s):
        s.broker.delete_partitions(t.stream_id, t.id, v.partitions_count)
    return b""


@contextlib.contextmanager
def _partitions_count_errors(s):
    """A count of 0, or more partitions than a topic has to delete, is 2019
    InvalidPartitionsCount from the middle generation on (iggy-middle.md 9; apache/iggy
    metadata ``DeletePartitionsResult``); the seed-era server had no such code (3)."""
    try:
        yield
    except ce.InvalidArgument:
        if s.dialect == 1:
            raise
        raise IggyStatus(IggyError.INVALID_PARTITIONS_COUNT) from None


def delete_segments(s, v):
    """iggy-middle.md 6 / iggy-current.md op 138: the partition's oldest sealed
    segments; the permission is apache/iggy's ``delete_segments`` rule (= update topic)."""
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.MANAGE_TOPIC, t.stream_id, t.id)
    s.broker.delete_segments(t.stream_id, t.id, v.partition_id, v.segments_count)  # dialects 2+: 0-based ids
    return b""


# -- consumer groups ------------------------------------------------------------------------------
def _group_body(s, t, g, *, members=True) -> bytes:
    m = s.broker.group_members(t.stream_id, t.id, g.id)
    return render.group_details(g, t, m, s.dialect, with_members=members)


@_not_found_is_empty
def get_group(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.READ_TOPIC, t.stream_id, t.id)
    return _group_body(s, t, s.group(t, v.group_id))


def get_groups(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.READ_TOPIC, t.stream_id, t.id)
    return b"".join(_group_body(s, t, g, members=False) for g in s.broker.list_groups(t.stream_id, t.id))


def create_group(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.READ_TOPIC, t.stream_id, t.id)
    wanted = v.group_id - 1 if s.one_based and v.group_id else None
    g = s.broker.create_group(t.stream_id, t.id, v.name, wanted)
    return _group_body(s, t, g)


def delete_group(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.READ_TOPIC, t.stream_id, t.id)
    s.broker.delete_group(t.stream_id, t.id, s.group(t, v.group_id).id)
    return b""


def join_group(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.READ_TOPIC, t.stream_id, t.id)
    s.broker.join_group(t.stream_id, t.id, s.group(t, v.group_id).id, s.client_id)
    return b""


def leave_group(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.READ_TOPIC, t.stream_id, t.id)
    s.broker.leave_group(t.stream_id, t.id, s.group(t, v.group_id).id, s.client_id)
    return b""


def sync_group(s, v):
    """iggy-current.md 6.9: ``u64 generation, u32 n, n partitions``; empty = not a member."""
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.READ_TOPIC, t.stream_id, t.id)
    found = s.broker.group_assignment(t.stream_id, t.id, s.group(t, v.group_id).id, s.client_id)
    if found is None:
        return b""
    return R.SYNC_GROUP.encode(3, R.SYNC_GROUP.make(generation=found[0], partitions=found[1]))


# -- messages and offsets ---------------------------------------------------------------------------
def send_messages(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.SEND_MESSAGES, t.stream_id, t.id)
    if not v.messages:
        raise IggyStatus(IggyError.INVALID_MESSAGES_COUNT)
    partition, key = _partitioning(s, v.partitioning, t.partitions_count)
    pending = Deferred(lambda outcome: _sent(s, t, outcome))
    msgs = v.messages
    # Dialects 2 and 3 decode to the stored layout already (messages.StoredBatch); 1, 4 and
    # 5 (seed-era header maps) convert here. The block is then stored as it is (core/log/encoded.py).
    batch = msgs if isinstance(msgs, StoredBatch) else s.to_stored_batch(msgs)
    if batch.payload_bytes > MAX_BATCH_PAYLOAD:
        raise IggyStatus(IggyError.TOO_BIG_MESSAGE_PAYLOAD, "batch payload too large")
    block, producer = take_producer_block(batch)  # Ferry's idempotent-send tag (producer.py)
    s.broker.append_records(t.stream_id, t.id, block, batch.count, partition=partition, key=key,
                            producer=producer, on_durable=pending.fire, origin="iggy")
    return pending


def _partitioning(s, p, partitions: int) -> tuple[int | None, bytes | None]:
    """Iggy Partitioning -> (explicit canonical partition, key for the core's rule)."""
    if p.kind == 1:
        return None, None
    if p.kind == 2:
        if len(p.value) != 4:
            raise IggyStatus(IggyError.INVALID_KEY_VALUE_LENGTH, "partition id must be 4 bytes")
        pid = s.partition_in(_U32.unpack(p.value)[0])
        if pid is None:
            raise IggyStatus(IggyError.PARTITION_NOT_FOUND)
        return pid, None
    if not 1 <= len(p.value) <= 255:
        raise IggyStatus(IggyError.INVALID_KEY_VALUE_LENGTH)
    if s.one_based and partitions > 0:
        # The 0.4 server (and 0.5, still 1-based: iggy-middle.md 5) maps XXH32(key) mod n
        # to a 1-based partition with 0 -> n (iggy.md 3.3): canonically (h mod n) - 1,
        # wrapping to n - 1. Later servers use h mod n 0-based, which is the core's own
        # rule (broker.choose_partition).
        return (xxhash.xxh32_intdigest(p.value) % partitions - 1) % partitions, None
    return None, p.value


def _sent(s, t, outcome):
    if isinstance(outcome, BaseException):
        raise outcome
    if s.dialect != 3:
        return Reply(0)
    body = _U32.pack(1) + R.SEND_CONFIRMATION.encode(3, R.SEND_CONFIRMATION.make(
        stream_id=t.stream_id, topic_id=t.id, partition_id=outcome.partition_id, base_offset=outcome.base_offset))
    return Reply(0, body)


def poll_messages(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.POLL_MESSAGES, t.stream_id, t.id)
    if v.count == 0:
        raise IggyStatus(IggyError.INVALID_MESSAGES_COUNT)
    consumer = s.consumer(t, v.consumer)
    strategy = s.poll_strategy(v.strategy)
    partition = s.partition_in(v.partition_id)
    b = s.broker
    if consumer.kind == "group" and partition is None:
        res = b.poll_group(t.stream_id, t.id, consumer.id, s.client_id, strategy, v.count, auto_commit=v.auto_commit)
        if res is None:  # a member without partitions (iggy.md 4.9)
            return render.polled(s.dialect, -s.edge, 0, None)  # wire partition 0
    else:
        if consumer.kind == "group":
            found = b.group_assignment(t.stream_id, t.id, consumer.id, s.client_id)
            if found is None:
                raise IggyStatus(IggyError.CONSUMER_GROUP_MEMBER_NOT_FOUND)
            if partition not in found[1]:
                # A member polls only its own partitions. Dialect 3 re-syncs on 5009
                # (iggy-current.md 6.9); older clients get the empty answer of the 0.8
                # server (iggy-middle.md 6.8).
                if s.dialect == 3:
                    raise IggyStatus(IggyError.CONSUMER_GROUP_PARTITION_NOT_OWNED)
                return render.polled(s.dialect, -s.edge, 0, None)  # wire partition 0
        res = b.poll(t.stream_id, t.id, consumer, strategy, v.count, partition=partition, auto_commit=v.auto_commit)
    return render.polled(s.dialect, res.partition_id, res.current_offset, res.batch)


def flush_unsaved_buffer(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.POLL_MESSAGES, t.stream_id, t.id)
    pid = s.partition_in(v.partition_id) if s.one_based else v.partition_id
    s.broker.partition(t.stream_id, t.id, 0 if pid is None else pid)
    return b""  # appends are already on their way to disk (the flusher owns fsync)


def _offset_target(s, v):
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.POLL_MESSAGES, t.stream_id, t.id)
    pid = s.partition_in(v.partition_id)
    return t, s.consumer(t, v.consumer), 0 if pid is None else pid


@_not_found_is_empty
def get_offset(s, v):
    t, consumer, pid = _offset_target(s, v)
    stored = s.broker.get_offset(consumer, t.stream_id, t.id, pid)
    if stored is None:
        return b""
    _segs, current, _size, _n = render.partition_stats(s.broker, t.stream_id, t.id, pid)
    return R.OFFSET_INFO.encode(s.dialect, render.offset_value(pid, current, stored, s.edge))


def store_offset(s, v):
    t, consumer, pid = _offset_target(s, v)
    s.broker.store_offset(consumer, t.stream_id, t.id, pid, v.offset)  # past the end: InvalidOffset -> 4100
    return b""


def delete_offset(s, v):
    t, consumer, pid = _offset_target(s, v)
    if s.broker.get_offset(consumer, t.stream_id, t.id, pid) is None:
        raise IggyStatus(IggyError.CONSUMER_OFFSET_NOT_FOUND)
    s.broker.delete_offset(consumer, t.stream_id, t.id, pid)
    return b""


HANDLERS = {
    "system.ping": ping, "system.stats": get_stats, "system.snapshot": get_snapshot,
    "system.cluster_metadata": cluster_metadata, "system.describe_options": describe_options,
    "client.me": get_me, "client.get": get_client, "client.list": get_clients,
    "user.get": get_user, "user.list": get_users, "user.create": create_user, "user.delete": delete_user,
    "user.update": update_user, "user.permissions": update_permissions, "user.password": change_password,
    "user.login": login_user, "user.logout": logout, "user.login_register": login_register,
    "pat.list": get_pats, "pat.create": create_pat, "pat.delete": delete_pat, "pat.login": login_pat,
    "pat.login_register": login_register_pat,
    "message.poll": poll_messages, "message.send": send_messages, "message.flush": flush_unsaved_buffer,
    "consumer_offset.get": get_offset, "consumer_offset.store": store_offset,
    "consumer_offset.delete": delete_offset,
    "stream.get": get_stream, "stream.list": get_streams, "stream.create": create_stream,
    "stream.delete": delete_stream, "stream.update": update_stream, "stream.purge": purge_stream,
    "topic.get": get_topic, "topic.list": get_topics, "topic.create": create_topic, "topic.delete": delete_topic,
    "topic.update": update_topic, "topic.purge": purge_topic,
    "partition.create": create_partitions, "partition.delete": delete_partitions,
    "segment.delete": delete_segments,
    "consumer_group.get": get_group, "consumer_group.list": get_groups, "consumer_group.create": create_group,
    "consumer_group.delete": delete_group, "consumer_group.join": join_group, "consumer_group.leave": leave_group,
    "consumer_group.sync": sync_group,
}

__all__ = ["HANDLERS"]
