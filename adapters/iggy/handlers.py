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
import time
from dataclasses import replace


from core import errors as ce
from core.model import TopicSettings
from core.permissions import Action
from core.procstats import START_US, process_stats

from . import options, render
from . import replies as R
from . import snapshot
from .errors import CURRENT_DIALECT, IggyError, IggyStatus
from .events import Deferred, Reply
from .handler_rules import _current_codes, _not_found_is_empty
from .handlers_data import (
    create_group,
    delete_group,
    delete_offset,
    flush_unsaved_buffer,
    get_group,
    get_groups,
    get_offset,
    join_group,
    leave_group,
    poll_messages,
    send_messages,
    store_offset,
    sync_group,
)
from .permissions import decode_permissions, encode_permissions

A = Action
_COMPRESSION = {1: "none", 2: "gzip"}
_U32 = struct.Struct("<I")
U64_MAX = (1 << 64) - 1
SEMVER = 10_000  # major*1e6 + minor*1e3 + patch of the Iggy server we resemble (0.10.0)
SERVER_VERSION = "0.10.0-ferry"  # what Stats and the VSR login reply name as our version


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
    """The process and host figures of HTTP /stats (core/procstats.py), in the binary Stats record."""
    t = s.broker.totals()
    used = process_stats().read(s.broker.data_dir)
    now_us = int(time.time() * 1_000_000)
    return R.STATS.encode(s.dialect, R.STATS.make(
        process_id=os.getpid(), cpu_usage=used.cpu_usage, total_cpu_usage=used.total_cpu_usage,
        memory_usage=used.memory_usage, total_memory=used.total_memory, available_memory=used.available_memory,
        run_time=now_us - START_US, start_time=START_US, read_bytes=used.read_bytes, written_bytes=used.written_bytes,
        messages_size_bytes=t.stored_bytes, threads_count=used.threads_count,
        free_disk_space=used.free_disk_space, total_disk_space=used.total_disk_space,
        streams_count=t.streams, topics_count=t.topics, partitions_count=t.partitions, segments_count=t.segments,
        messages_count=t.messages, clients_count=len(s.live_sessions()),
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
    inputs = snapshot.inputs_from_broker(s.broker, len(s.live_sessions()))
    return Deferred(_snapshot_built, lambda: snapshot.build_snapshot(request, inputs))


def _snapshot_built(outcome):
    if isinstance(outcome, snapshot.SnapshotRefused):
        raise IggyStatus(outcome.code, outcome.reason)
    if isinstance(outcome, BaseException):
        raise outcome
    return Reply(0, outcome)


# -- login / users ----------------------------------------------------------------------------
def login_user(s, v):
    s.client_version = v.version   # the legacy login names only the SDK's version
    return s.login_password(v.username, v.password)


def login_register(s, v):
    s.client_name, s.client_version = v.sdk_name, v.sdk_version
    return s.login_password(v.username, v.password, v.protocol_version)


def login_pat(s, v):
    return s.login_token(v.token)


def login_register_pat(s, v):
    s.client_name, s.client_version = v.sdk_name, v.sdk_version
    return s.login_token(v.token, v.protocol_version)


def logout(s, v):
    s.user = None
    s.actor.logged_out()
    return b""


def _user_info(s, u, out):
    R.USER_INFO.write(s.dialect, out, render.user_value(u, s.edge))


@_not_found_is_empty
def get_user(s, v):
    u = s.broker.meta.users.get_user(s.ident(v.user_id, IggyError.RESOURCE_NOT_FOUND))
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
    for u in s.broker.meta.users.list_users():
        _user_info(s, u, out)
    return b"".join(out)


def create_user(s, v):
    s.require(A.MANAGE_USERS)
    perms = None if v.permissions is None else decode_permissions(v.permissions, s.edge)
    status = {1: "active", 2: "inactive"}.get(v.status)
    if status is None:
        raise IggyStatus(IggyError.INVALID_USER_STATUS)

    def work():
        return s.broker.meta.users.create_user(v.username, v.password, status, perms)

    def finish(u):
        if isinstance(u, BaseException):
            raise u
        return Reply(0, _user_details(s, u))

    return Deferred(finish, work)


def delete_user(s, v):
    s.require(A.MANAGE_USERS)
    s.broker.meta.users.delete_user(s.ident(v.user_id, IggyError.RESOURCE_NOT_FOUND))
    return b""


def update_user(s, v):
    s.require(A.MANAGE_USERS)
    status = None if v.status is None else {1: "active", 2: "inactive"}.get(v.status, "?")
    s.broker.meta.users.update_user(s.ident(v.user_id, IggyError.RESOURCE_NOT_FOUND), username=v.username, status=status)
    return b""


def update_permissions(s, v):
    s.require(A.MANAGE_USERS)
    perms = None if v.permissions is None else decode_permissions(v.permissions, s.edge)
    s.broker.meta.users.update_permissions(s.ident(v.user_id, IggyError.RESOURCE_NOT_FOUND), perms)
    return b""


def change_password(s, v):
    target = s.broker.meta.users.get_user(s.ident(v.user_id, IggyError.RESOURCE_NOT_FOUND))
    if target.id != s.user.id:
        s.require(A.MANAGE_USERS)
    return Deferred(lambda r: _raise_or(r, b""),
                    lambda: s.broker.meta.users.change_password(target.id, v.current_password, v.new_password))


def _raise_or(result, body: bytes):
    if isinstance(result, BaseException):
        raise result
    return Reply(0, body)


def get_pats(s, v):
    out: list[bytes] = []
    for t in s.broker.meta.users.list_pats(s.user.id):
        R.PAT_INFO.write(s.dialect, out, render.pat_value(t))
    return b"".join(out)


def create_pat(s, v):
    expiry = None if v.expiry in (0, U64_MAX) else v.expiry
    token = s.broker.meta.users.create_pat(s.user.id, v.name, expiry)
    return R.RAW_PAT.encode(s.dialect, R.RAW_PAT.make(token=token))


def delete_pat(s, v):
    s.broker.meta.users.delete_pat(s.user.id, v.name)
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
    other = s.live_sessions().get(v.client_id)
    if other is None:
        return b""  # iggy.md 9.2: a missing single entity is an empty OK
    return _client_details(s, other)


def get_clients(s, v):
    s.require(A.READ_SERVERS)
    out: list[bytes] = []
    for _cid, other in sorted(s.live_sessions().items()):
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
    rf = max(v.replication_factor or 1, 1)  # 0 = "not given", stored as 1 (iggy.md 3.6)
    if s.dialect == 3:
        given = options.parse_create(v.options)
        options.check_create(given, v.partitions_count, s.broker)
        args = options.create_args(given, rf)
    else:
        given = {}
        options.check_size_floor(v.max_topic_size, s.broker.cfg.log.segment_bytes)
        args = {"settings": TopicSettings(message_expiry=_expiry_in(v.message_expiry),
                                          max_topic_size=_expiry_in(v.max_topic_size),
                                          compression=_compression(v.compression), replication_factor=rf)}
    t = s.broker.create_topic(st.id, v.name, v.partitions_count, topic_id=wanted, **args)
    options.record_explicit(s.broker, t, given)
    return render.topic_details(s.broker, t, s.dialect)


def update_topic(s, v):
    """Dialect 3 changes only the keys its block sends (the updatable three; others
    4041), with the size floor against the topic's own segment size."""
    t = s.topic(v.stream_id, v.topic_id)
    s.require(A.MANAGE_TOPIC, t.stream_id, t.id)
    segment = s.broker.topic_log_config(t).segment_bytes
    if s.dialect == 3:
        given = options.parse_update(v.options)
        options.check_size_floor(given.get("max_topic_size"), segment)
        changes = options.update_args(given)
    else:
        given = {}
        options.check_size_floor(v.max_topic_size, segment)
        changes = {"message_expiry": _expiry_in(v.message_expiry), "max_topic_size": _expiry_in(v.max_topic_size),
                   "compression": _compression(v.compression)}
    t = s.broker.update_topic(t.stream_id, t.id, name=v.name, settings=replace(t.settings, **changes))
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
