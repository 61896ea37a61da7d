"""The Iggy request table: every command, declared once (data only).

Dialects (Ferry's numbers; the ``versions`` ranges below name these):

===  =========================================  =====================================
 #   clients                                    reference
===  =========================================  =====================================
 1   iggy-py 0.4.0 (Rust SDK 0.6.202), and any  protocols/iggy.md
     legacy-framed login with a version < 0.7
 2   apache-iggy 0.7.0 and 0.8.0 (Rust SDK      protocols/iggy-middle.md, profile
     0.9 / 0.10; login versions >= 0.9)         "0.7/0.8" (64-byte message header)
 3   apache-iggy 0.9.0 (Rust SDK 0.11, VSR)     protocols/iggy-current.md
 4   apache-iggy 0.6.0 (Rust SDK 0.8; login     iggy-middle.md profile "0.6": 56-byte
     version 0.8.x)                             header, XXH3, header keys without kind
 5   apache-iggy 0.5.0 (Rust SDK 0.7; login     iggy-middle.md profile "0.5": as 4, but
     version 0.7.x)                             CRC32 checksums and dialect 1's numbering
                                                (1-based, ids on create, u32 partition)
===  =========================================  =====================================

Dialects 1, 2, 4 and 5 share the legacy framing (``u32 length, u32 code``;
``LEGACY``); 3 uses 256-byte VSR envelopes around the same bodies. 4 and 5
were numbered after 1-3 existed: the numbers name layouts, not an order.

``vsr_op`` is the operation byte of iggy-current.md section 5 (2 = a
NonReplicated read, the code travels at header byte 196). Codes 14, 103, 104
and 123 exist in the 0.9.0 wheel with unknown layouts; they are not declared,
so they get status 3 like any unknown code (iggy-current.md section 14).
"""

from __future__ import annotations

from adapters.wire.table import Field
from adapters.wire.types import ListOf, Rest

from .messages import Messages56, MessagesV1, MessagesV2, VsrBatch
from .table import LEGACY, ONE_BASED, Command, CommandTable
from .types import (
    U8, U32, U64, Bool, Bytes32, ConsumerRef, Identifier, OptU32, Optional,
    Partitioning, PollingStrategy, Str8, Str32,
)


def _ids(*names: str) -> tuple[Field, ...]:
    return tuple(Field(n, Identifier) for n in names)


def _send_metadata_length(v: dict) -> int:
    """iggy-middle.md 6.11: bytes of stream Id + topic Id + partitioning + u32 count."""
    return Identifier.size(v["stream_id"]) + Identifier.size(v["topic_id"]) + Partitioning.size(v["partitioning"]) + 4


_CONSUMER_PARTITION = (
    Field("consumer", ConsumerRef),
    *_ids("stream_id", "topic_id"),
    Field("partition_id", U32, versions=ONE_BASED, about="0 = none (single consumer: partition 1)"),
    Field("partition_id", OptU32, versions="2-4", about="u8 has + u32 (iggy-middle.md 6.10)"),
)
_TOPIC_SETTINGS = (
    Field("compression", U8, default=1, versions=LEGACY, about="1 none, 2 gzip"),
    Field("message_expiry", U64, default=0, versions=LEGACY, about="µs; 0 default, u64::MAX never"),
    Field("max_topic_size", U64, default=0, versions=LEGACY, about="bytes; 0 default, u64::MAX unlimited"),
    Field("replication_factor", U8, default=0, versions=LEGACY),
)

PING = Command(1, "system.ping", auth=False)
GET_STATS = Command(10, "system.stats", auth=False)
GET_SNAPSHOT = Command(11, "system.snapshot", (
    Field("compression", U8), Field("types", ListOf(U8, U8, max_items=255)),
))
GET_CLUSTER_METADATA = Command(12, "system.cluster_metadata", versions="2+")
DESCRIBE_OPTIONS = Command(13, "system.describe_options", (Field("scope", U8),), versions="3")
GET_ME = Command(20, "client.me")
GET_CLIENT = Command(21, "client.get", (Field("client_id", U32),))
GET_CLIENTS = Command(22, "client.list")

GET_USER = Command(31, "user.get", _ids("user_id"))
GET_USERS = Command(32, "user.list")
CREATE_USER = Command(33, "user.create", (
    Field("username", Str8), Field("password", Str8), Field("status", U8, default=1),
    Field("permissions", Optional(Bytes32), default=None, about="iggy.md 3.7 blob"),
    Field("options", Rest, default=b"", versions="3"),
), vsr_op=141)
DELETE_USER = Command(34, "user.delete", _ids("user_id"), vsr_op=143)
UPDATE_USER = Command(35, "user.update", (
    Field("user_id", Identifier), Field("username", Optional(Str8), default=None),
    Field("status", Optional(U8), default=None),
    Field("options", Rest, default=b"", versions="3"),
), vsr_op=142)
UPDATE_PERMISSIONS = Command(36, "user.permissions", (
    Field("user_id", Identifier), Field("permissions", Optional(Bytes32), default=None),
), vsr_op=145)
CHANGE_PASSWORD = Command(37, "user.password", (
    Field("user_id", Identifier), Field("current_password", Str8), Field("new_password", Str8),
), vsr_op=144)
LOGIN_USER = Command(38, "user.login", (
    Field("username", Str8), Field("password", Str8),
    Field("version", Str32, default="", about="SDK version; picks dialect 1 or 2"),
    Field("context", Str32, default=""),
), versions=LEGACY, auth=False)
LOGOUT_USER = Command(39, "user.logout", vsr_op=3)
LOGIN_REGISTER = Command(40, "user.login_register", (
    Field("protocol_version", U32), Field("sdk_name", Str8), Field("sdk_version", Str8),
    Field("username", Str8), Field("password", Str8), Field("context", Bytes32, default=b""),
), versions="3", auth=False, vsr_op=1)
GET_PATS = Command(41, "pat.list")
CREATE_PAT = Command(42, "pat.create", (Field("name", Str8), Field("expiry", U64, default=0)), vsr_op=146)
DELETE_PAT = Command(43, "pat.delete", (Field("name", Str8),), vsr_op=147)
LOGIN_PAT = Command(44, "pat.login", (Field("token", Str8),), versions=LEGACY, auth=False)
LOGIN_REGISTER_PAT = Command(45, "pat.login_register", (
    Field("protocol_version", U32), Field("sdk_name", Str8), Field("sdk_version", Str8),
    Field("token", Str8), Field("context", Bytes32, default=b""),
), versions="3", auth=False, vsr_op=1)

POLL_MESSAGES = Command(100, "message.poll", (
    *_CONSUMER_PARTITION,
    Field("strategy", PollingStrategy), Field("count", U32), Field("auto_commit", Bool, default=False),
))
SEND_MESSAGES = Command(101, "message.send", (
    Field("metadata_length", U32, versions="2+", derive=_send_metadata_length),
    *_ids("stream_id", "topic_id"),
    Field("partitioning", Partitioning),
    Field("messages", MessagesV1, versions="1", about="headers before payload"),
    Field("messages", MessagesV2, versions="2", about="64-byte header; headers after payload"),
    Field("messages", VsrBatch, versions="3", about="256-byte batch, 48-byte frames"),
    Field("messages", Messages56, versions="4-5", about="56-byte header; seed map after payload"),
), vsr_op=160)
FLUSH_UNSAVED_BUFFER = Command(102, "message.flush", (
    *_ids("stream_id", "topic_id"), Field("partition_id", U32), Field("fsync", Bool, default=False),
))

GET_CONSUMER_OFFSET = Command(120, "consumer_offset.get", _CONSUMER_PARTITION)
STORE_CONSUMER_OFFSET = Command(121, "consumer_offset.store", (
    *_CONSUMER_PARTITION, Field("offset", U64), Field("ack_level", U8, default=0, versions="3"),
), vsr_op=161)
DELETE_CONSUMER_OFFSET = Command(122, "consumer_offset.delete", (
    *_CONSUMER_PARTITION, Field("ack_level", U8, default=0, versions="3"),
), vsr_op=162)

GET_STREAM = Command(200, "stream.get", _ids("stream_id"))
GET_STREAMS = Command(201, "stream.list")
CREATE_STREAM = Command(202, "stream.create", (
    Field("stream_id", U32, default=0, versions=ONE_BASED, about="0 lets the server choose"),
    Field("name", Str8),
    Field("options", Rest, default=b"", versions="3"),
), vsr_op=128)
DELETE_STREAM = Command(203, "stream.delete", _ids("stream_id"), vsr_op=130)
UPDATE_STREAM = Command(204, "stream.update", (
    Field("stream_id", Identifier), Field("name", Str8), Field("options", Rest, default=b"", versions="3"),
), vsr_op=129)
PURGE_STREAM = Command(205, "stream.purge", _ids("stream_id"), vsr_op=131)

GET_TOPIC = Command(300, "topic.get", _ids("stream_id", "topic_id"))
GET_TOPICS = Command(301, "topic.list", _ids("stream_id"))
CREATE_TOPIC = Command(302, "topic.create", (
    Field("stream_id", Identifier),
    Field("topic_id", U32, default=0, versions=ONE_BASED, about="0 lets the server choose"),
    Field("partitions_count", U32),
    *_TOPIC_SETTINGS,
    Field("name", Str8),
    Field("options", Rest, default=b"", versions="3", about="TLV options (iggy-current.md 6.8)"),
), vsr_op=132)
DELETE_TOPIC = Command(303, "topic.delete", _ids("stream_id", "topic_id"), vsr_op=134)
UPDATE_TOPIC = Command(304, "topic.update", (
    *_ids("stream_id", "topic_id"), *_TOPIC_SETTINGS, Field("name", Str8),
    Field("options", Rest, default=b"", versions="3"),
), vsr_op=133)
PURGE_TOPIC = Command(305, "topic.purge", _ids("stream_id", "topic_id"), vsr_op=135)

CREATE_PARTITIONS = Command(402, "partition.create", (
    *_ids("stream_id", "topic_id"), Field("partitions_count", U32),
), vsr_op=136)
DELETE_PARTITIONS = Command(403, "partition.delete", (
    *_ids("stream_id", "topic_id"), Field("partitions_count", U32),
), vsr_op=137)
# The one op of 128..149 whose VSR reply has no result section: it is neither a
# metadata nor a partition operation (apache/iggy ``Operation::is_result_framed``),
# and the 0.9.0 client keeps such a section on its reply as payload.
DELETE_SEGMENTS = Command(503, "segment.delete", (
    *_ids("stream_id", "topic_id"), Field("partition_id", U32), Field("segments_count", U32),
), versions="2+", vsr_op=138, result_framed=False)

GET_CONSUMER_GROUP = Command(600, "consumer_group.get", _ids("stream_id", "topic_id", "group_id"))
GET_CONSUMER_GROUPS = Command(601, "consumer_group.list", _ids("stream_id", "topic_id"))
CREATE_CONSUMER_GROUP = Command(602, "consumer_group.create", (
    *_ids("stream_id", "topic_id"),
    Field("group_id", U32, default=0, versions=ONE_BASED, about="0 lets the server choose"),
    Field("name", Str8),
), vsr_op=139)
DELETE_CONSUMER_GROUP = Command(603, "consumer_group.delete", _ids("stream_id", "topic_id", "group_id"),
                                vsr_op=140)
JOIN_CONSUMER_GROUP = Command(604, "consumer_group.join", _ids("stream_id", "topic_id", "group_id"), vsr_op=148)
LEAVE_CONSUMER_GROUP = Command(605, "consumer_group.leave", _ids("stream_id", "topic_id", "group_id"),
                               vsr_op=149)
SYNC_CONSUMER_GROUP = Command(606, "consumer_group.sync", _ids("stream_id", "topic_id", "group_id"),
                              versions="3")

COMMANDS = CommandTable([
    PING, GET_STATS, GET_SNAPSHOT, GET_CLUSTER_METADATA, DESCRIBE_OPTIONS, GET_ME, GET_CLIENT, GET_CLIENTS,
    GET_USER, GET_USERS, CREATE_USER, DELETE_USER, UPDATE_USER, UPDATE_PERMISSIONS, CHANGE_PASSWORD,
    LOGIN_USER, LOGOUT_USER, LOGIN_REGISTER, GET_PATS, CREATE_PAT, DELETE_PAT, LOGIN_PAT, LOGIN_REGISTER_PAT,
    POLL_MESSAGES, SEND_MESSAGES, FLUSH_UNSAVED_BUFFER,
    GET_CONSUMER_OFFSET, STORE_CONSUMER_OFFSET, DELETE_CONSUMER_OFFSET,
    GET_STREAM, GET_STREAMS, CREATE_STREAM, DELETE_STREAM, UPDATE_STREAM, PURGE_STREAM,
    GET_TOPIC, GET_TOPICS, CREATE_TOPIC, DELETE_TOPIC, UPDATE_TOPIC, PURGE_TOPIC,
    CREATE_PARTITIONS, DELETE_PARTITIONS, DELETE_SEGMENTS,
    GET_CONSUMER_GROUP, GET_CONSUMER_GROUPS, CREATE_CONSUMER_GROUP, DELETE_CONSUMER_GROUP,
    JOIN_CONSUMER_GROUP, LEAVE_CONSUMER_GROUP, SYNC_CONSUMER_GROUP,
])

__all__ = ["COMMANDS"] + [n for n in dir() if n.isupper() and n not in ("LEGACY", "ONE_BASED", "COMMANDS")]
