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
from core.permissions import Action

from . import options, render
from . import replies as R
from . import snapshot
from .errors import CURRENT_DIALECT, IggyError, IggyStatus, status_for
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
# The empty poll's partition id that tells a dialect-3 group member to re-sync its
# assignment (apache/iggy core/common/src/lib.rs RESYNC_REQUIRED_PARTITION_SENTINEL).
RESYNC_PARTITION = 0xFFFF_FFFF


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


def _current_codes(fn):
    """Dialect 3 answers a missing stream, topic or group with the id variant of its
    code whichever way the request named it (errors._CURRENT_NOT_FOUND); the other
    dialects keep the variant that matches the identifier."""

    def wrapper(s, v):
        try:
            return fn(s, v)
        except ce.NotFound as exc:
            if s.dialect != CURRENT_DIALECT:
                raise
            raise IggyStatus(status_for(exc, dialect=CURRENT_DIALECT), str(exc)) from None

    wrapper.__name__ = fn.__name__
    return wrapper


@contextlib.contextmanager
def _partition_plane(s):
    """SendMessages and Store/DeleteConsumerOffset of dialect 3: a stream, topic,
    partition or group the request names that does not resolve is 20 ResourceNotFound
    (apache/iggy core/server/src/dispatch.rs dispatch_partition_request: every
    ``resolve_partition_request_namespace`` error is denied with ResourceNotFound)."""
    if s.dialect != CURRENT_DIALECT:
        yield
        return
    try:
        yield
    except ce.NotFound as exc:
        raise IggyStatus(IggyError.RESOURCE_NOT_FOUND, str(exc)) from None


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


def describe_options(s, v):
    """The option catalog of a scope (adapters/iggy/options.py; iggy-current.md 6.13)."""
    specs = options.describe(s.broker, v.scope)
    out = [_U32.pack(len(specs))]
    for spec in specs:
        R.OPTION_SPEC.write(3, out, R.OPTION_SPEC.make(key=spec.key, kind=int(spec.kind),
                                                        default_value=spec.default_value,
                                                        description=spec.description))
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
    if v.client_id == 0 and s.dialect != CURRENT_DIALECT:
        # Dialect 3 looks the id up like any other and finds nothing: an empty OK
        # (apache/iggy core/server/src/dispatch.rs, GET_CLIENT_CODE arm).
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
    if s.dialect == CURRENT_DIALECT:
        try:
            st = s.stream(v.stream_id)
        except ce.StreamNotFound:
            # An empty list, not 1009 (apache/iggy core/server/src/responses.rs
            # build_get_topics_response: an unresolved stream is ``topics: Vec::new()``).
            return _U32.pack(0)
    else:
        st = s.stream(v.stream_id)
    s.require(A.READ_TOPICS, st.id)
    topics = s.broker.list_topics(st.id)
    out: list[bytes] = [_U32.pack(len(topics))] if s.dialect == 3 else []  # iggy-current.md 6.8
    for t in topics:
        render.topic_record(s.broker, t, s.dialect, out)
    return b"".join(out)


def create_topic(s, v):
    """Dialect 3 takes its settings from the options block, checked against the
    catalog (options.py: 4041, 4042, 2015, 1019 as the reference server, in its
    order); the legacy dialects from fixed fields, with the same size floor (iggy.md
    3.6: a cap below the segment size is 1019)."""
    st = s.stream(v.stream_id)
    s.require(A.CREATE_TOPIC, st.id)
    wanted = v.topic_id - 1 if s.one_based and v.topic_id else None
    if s.dialect == 3:
        given = options.parse_create(v.options)
        options.check_create(given, v.partitions_count, s.broker)
        settings = options.create_args(given)
    else:
        given = {}
        options.check_size_floor(v.max_topic_size, s.broker.cfg.log.segment_bytes)
        settings = {"message_expiry": _expiry_in(v.message_expiry), "max_topic_size": _expiry_in(v.max_topic_size),
                    "compression": _compression(v.compression)}
    t = s.broker.create_topic(st.id, v.name, v.partitions_count, topic_id=wanted,
                              replication_factor=max(v.replication_factor or 1, 1), **settings)
    options.record_explicit(s.broker, t, given)
    return render.topic_details(s.broker, t, s.dialect)


def update_topic(s, v):
    """Dialect 3 changes only the keys its block sends (the updatable three; others
    4041), with the size floor against the topic's own segment size."""
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.MANAGE_TOPIC, t.stream_id, t.id)
    segment = s.broker.topic_log_config(t).segment_bytes
    changes = {"name": v.name}
    if s.dialect == 3:
        given = options.parse_update(v.options)
        options.check_size_floor(given.get("max_topic_size"), segment)
        changes.update(options.update_args(given))
    else:
        given = {}
        options.check_size_floor(v.max_topic_size, segment)
        changes.update(message_expiry=_expiry_in(v.message_expiry), max_topic_size=_expiry_in(v.max_topic_size),
                       compression=_compression(v.compression))
    t = s.broker.update_topic(t.stream_id, t.id, **changes)
    if given:
        options.record_explicit(s.broker, t, given, update=True)
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
    _check_partitions_change(s, v.partitions_count)
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.MANAGE_TOPIC, t.stream_id, t.id)
    with _partitions_count_errors(s):
        s.broker.add_partitions(t.stream_id, t.id, v.partitions_count)
    return b""


def delete_partitions(s, v):
    _check_partitions_change(s, v.partitions_count)
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


def _check_partitions_change(s, count: int) -> None:
    """Dialect 3 refuses to add or delete 0 partitions before anything else, with 2015
    TooManyPartitions (apache/iggy core/server/src/dispatch.rs
    validate_partitions_change_count, run pre-consensus)."""
    if count == 0 and s.dialect == CURRENT_DIALECT:
        raise IggyStatus(IggyError.TOO_MANY_PARTITIONS, "partitions_count 0")


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


def get_group(s, v):
    """A missing group is an empty OK; in dialect 3 a missing stream or topic is its
    error (apache/iggy core/server/src/responses.rs build_consumer_group_response:
    ``ensure_topic_exists`` first), in the others an empty OK too."""
    if s.dialect != CURRENT_DIALECT:
        return _get_group_or_empty(s, v)
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.READ_TOPIC, t.stream_id, t.id)
    try:
        g = s.group(t, v.group_id)
    except ce.ConsumerGroupNotFound:
        return b""
    return _group_body(s, t, g)


@_not_found_is_empty
def _get_group_or_empty(s, v):
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
    """iggy-current.md 6.9: ``u64 generation, u32 n, n partitions``; empty = not a member,
    and also when the stream, topic or group does not exist (apache/iggy
    core/server/src/dispatch.rs handle_sync_consumer_group: no permission rule, any
    miss of ``consumer_group_member_assignment`` is an empty body)."""
    try:
        t = s.topic(v.stream_id, v.topic_id)
        gid = s.group(t, v.group_id).id
    except ce.NotFound:
        return b""
    found = s.broker.group_assignment(t.stream_id, t.id, gid, s.client_id)
    if found is None:
        return b""
    return R.SYNC_GROUP.encode(3, R.SYNC_GROUP.make(generation=found[0], partitions=found[1]))


# -- messages and offsets ---------------------------------------------------------------------------
def send_messages(s, v):
    with _partition_plane(s):  # dialect 3: a missing stream, topic or partition is 20
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
    with _partition_plane(s):
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
    if s.dialect == CURRENT_DIALECT:
        return _poll_current(s, v)
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
                # A member polls only its own partitions; older clients get the empty
                # answer of the 0.8 server (iggy-middle.md 6.8).
                return render.polled(s.dialect, -s.edge, 0, None)  # wire partition 0
        res = b.poll(t.stream_id, t.id, consumer, strategy, v.count, partition=partition, auto_commit=v.auto_commit)
    return render.polled(s.dialect, res.partition_id, res.current_offset, res.batch)


def _poll_current(s, v):
    """PollMessages of dialect 3, as apache/iggy core/server/src/dispatch.rs
    handle_poll_messages and resolve_poll_request answer it:

    * a group poll names its partition (the 0.9.0 client always does) and is fenced
      first: unless the stream, topic and group resolve and this client is a member
      owning that partition, the answer is an empty poll whose partition is
      RESYNC_PARTITION (the client re-syncs), not 5000/5006/5009;
    * a single consumer's poll: missing stream/topic/partition are 1009/2010/3007
      (id variants, ``_current_codes``); no partition reads partition 0;
    * ``count`` 0 is an empty poll, not 4009 (the partition's poll plan is empty).

    A group poll without a partition is served as for the other dialects (the server
    picks the member's next partition), which the reference server answers empty."""
    fenced = v.consumer.kind == 2 and v.partition_id is not None
    resync = render.polled(CURRENT_DIALECT, RESYNC_PARTITION, 0, None)
    try:
        t = s.topic(v.stream_id, v.topic_id)
    except ce.NotFound:
        if fenced:
            return resync
        raise
    s.require(A.POLL_MESSAGES, t.stream_id, t.id)
    b = s.broker
    if fenced:
        try:
            gid = s.group(t, v.consumer.id).id
        except ce.ConsumerGroupNotFound:
            return resync
        found = b.group_assignment(t.stream_id, t.id, gid, s.client_id)
        if found is None or v.partition_id not in found[1]:
            return resync
    consumer = s.consumer(t, v.consumer)
    strategy = s.poll_strategy(v.strategy)
    if consumer.kind == "group" and v.partition_id is None:
        if v.count == 0:
            return render.polled(CURRENT_DIALECT, 0, 0, None)
        res = b.poll_group(t.stream_id, t.id, consumer.id, s.client_id, strategy, v.count, auto_commit=v.auto_commit)
        if res is None:  # a member without partitions
            return render.polled(CURRENT_DIALECT, 0, 0, None)
        return render.polled(CURRENT_DIALECT, res.partition_id, res.current_offset, res.batch)
    partition = 0 if v.partition_id is None else v.partition_id
    if v.count == 0:
        b.partition(t.stream_id, t.id, partition)  # 3007 when it does not exist
        _segments, current, _size, _n = render.partition_stats(b, t.stream_id, t.id, partition)
        return render.polled(CURRENT_DIALECT, partition, current, None)
    res = b.poll(t.stream_id, t.id, consumer, strategy, v.count, partition=partition, auto_commit=v.auto_commit)
    return render.polled(CURRENT_DIALECT, res.partition_id, res.current_offset, res.batch)


def flush_unsaved_buffer(s, v):
    if s.dialect == CURRENT_DIALECT:
        # The reference server has no on-demand flush and says so for any target, even
        # a missing one (apache/iggy core/server/src/responses.rs
        # build_non_replicated_response, FLUSH_UNSAVED_BUFFER_CODE arm).
        raise IggyStatus(IggyError.FEATURE_UNAVAILABLE, "flush")
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.POLL_MESSAGES, t.stream_id, t.id)
    pid = s.partition_in(v.partition_id) if s.one_based else v.partition_id
    s.broker.partition(t.stream_id, t.id, 0 if pid is None else pid)
    return b""  # appends are already on their way to disk (the flusher owns fsync)


def _offset_target(s, v, *, write: bool = False):
    if s.dialect == CURRENT_DIALECT:
        return _current_offset_target(s, v, write)
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.POLL_MESSAGES, t.stream_id, t.id)
    pid = s.partition_in(v.partition_id)
    return t, s.consumer(t, v.consumer), 0 if pid is None else pid


def _current_offset_target(s, v, write: bool):
    """The consumer offset a dialect-3 request names, resolved as apache/iggy does.

    GetConsumerOffset (core/server/src/dispatch.rs resolve_consumer_offset_request): no
    partition reads partition 0; a missing partition of an existing topic is 3007; a
    missing stream, topic or group is an empty OK (get_offset's decorator).

    Store/DeleteConsumerOffset are partition-plane ops (core/server/src/responses.rs
    fence_and_resolve_offset_namespace, then dispatch_partition_request): no partition,
    a missing stream/topic/partition/group, or a group this client is not a member of
    owning that partition are all 20 ResourceNotFound."""
    b = s.broker
    if not write:
        t = s.topic(v.stream_id, v.topic_id)
        s.require(A.POLL_MESSAGES, t.stream_id, t.id)
        pid = 0 if v.partition_id is None else v.partition_id
        try:
            b.partition(t.stream_id, t.id, pid)
        except ce.PartitionNotFound:
            raise IggyStatus(IggyError.PARTITION_NOT_FOUND, f"partition {pid}") from None
        return t, s.consumer(t, v.consumer), pid
    pid = v.partition_id
    with _partition_plane(s):
        if pid is None:
            raise IggyStatus(IggyError.RESOURCE_NOT_FOUND, "no partition")
        t = s.topic(v.stream_id, v.topic_id)
        b.partition(t.stream_id, t.id, pid)
        consumer = s.consumer(t, v.consumer)
        if consumer.kind == "group":
            found = b.group_assignment(t.stream_id, t.id, consumer.id, s.client_id)
            if found is None or pid not in found[1]:
                raise IggyStatus(IggyError.RESOURCE_NOT_FOUND, f"partition {pid} is not this member's")
    s.require(A.POLL_MESSAGES, t.stream_id, t.id)
    return t, consumer, pid


@_not_found_is_empty
def get_offset(s, v):
    t, consumer, pid = _offset_target(s, v)
    stored = s.broker.get_offset(consumer, t.stream_id, t.id, pid)
    if stored is None:
        return b""
    _segs, current, _size, _n = render.partition_stats(s.broker, t.stream_id, t.id, pid)
    return R.OFFSET_INFO.encode(s.dialect, render.offset_value(pid, current, stored, s.edge))


def store_offset(s, v):
    t, consumer, pid = _offset_target(s, v, write=True)
    s.broker.store_offset(consumer, t.stream_id, t.id, pid, v.offset)  # past the end: InvalidOffset -> 4100
    return b""


def delete_offset(s, v):
    t, consumer, pid = _offset_target(s, v, write=True)
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

HANDLERS = {name: _current_codes(fn) for name, fn in HANDLERS.items()}

__all__ = ["HANDLERS"]
