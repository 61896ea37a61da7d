"""Response body records, declared with the same machinery as the requests (data only).

Lists are plain concatenations of records (iggy.md section 5: "no count; the
client parses until the end"), except where a reference says otherwise
(GetTopics in dialect 3 has a u32 count prefix, iggy-current.md 6.8).
Sources per record: iggy.md 5.1-5.13, iggy-middle.md 6.3-6.10,
iggy-current.md 6.3-6.11.
"""

from __future__ import annotations

from adapters.wire.table import Field
from adapters.wire.types import ListOf

from .table import LEGACY, Struct
from .types import F32, U8, U16, U32, U64, Bytes32, Str8, Str32

F = Field

STREAM = Struct("stream_record", (
    F("id", U32), F("created_at", U64), F("topics_count", U32), F("size", U64), F("messages_count", U64),
    F("name", Str8), F("options", Bytes32, default=b"", versions="3"),
))
TOPIC = Struct("topic_record", (
    F("id", U32), F("created_at", U64), F("partitions_count", U32), F("message_expiry", U64),
    F("compression", U8), F("max_topic_size", U64),
    F("replication_factor", U8, default=1, versions=LEGACY, about="gone in dialect 3"),
    F("size", U64), F("messages_count", U64), F("name", Str8),
    F("options", Bytes32, default=b"", versions="3"), F("derived_options", Bytes32, default=b"", versions="3"),
))
PARTITION = Struct("partition_record", (
    F("id", U32), F("created_at", U64), F("segments_count", U32), F("current_offset", U64),
    F("size", U64), F("messages_count", U64),
))
GROUP = Struct("group_record", (
    F("id", U32), F("partitions_count", U32), F("members_count", U32), F("name", Str8),
))
MEMBER = Struct("group_member", (F("id", U32), F("partitions", ListOf(U32, U32, max_items=1000))))
OFFSET_INFO = Struct("consumer_offset_info", (
    F("partition_id", U32), F("current_offset", U64), F("stored_offset", U64),
))
POLL_PREFIX = Struct("polled_messages_prefix", (
    F("partition_id", U32), F("current_offset", U64), F("count", U32),
))
IDENTITY = Struct("identity_info", (F("user_id", U32),), versions=LEGACY)
LOGIN_REPLY = Struct("login_register_reply", (
    F("user_id", U32), F("session", U64), F("protocol_version", U32), F("server_version", Str8),
), versions="3")
CLUSTER = Struct("cluster_metadata", (F("name", Str32), F("nodes_count", U32)), versions="2+")
CLUSTER_NODE = Struct("cluster_node", (
    F("name", Str32), F("ip", Str32), F("tcp_port", U16), F("quic_port", U16), F("http_port", U16),
    F("websocket_port", U16), F("role", U8, default=0), F("status", U8, default=0),
), versions="2+")
SYNC_GROUP = Struct("consumer_group_sync", (
    F("generation", U64), F("partitions", ListOf(U32, U32, max_items=1000)),
), versions="3")
SEND_CONFIRMATION = Struct("send_confirmation", (
    F("stream_id", U32), F("topic_id", U32), F("partition_id", U32), F("base_offset", U64),
), versions="3")
# DescribeOptions (code 13) lists these after a u32 count (iggy-current.md 6.13;
# apache/iggy responses/system/describe_options.rs): the default is the value's
# bytes as its header kind encodes them, empty when there is none.
OPTION_SPEC = Struct("option_spec", (
    F("key", Str8), F("kind", U8), F("default_value", Bytes32), F("description", Str32),
), versions="3")
USER_INFO = Struct("user_info", (
    F("id", U32), F("created_at", U64), F("status", U8), F("username", Str8),
    F("options", Bytes32, default=b"", versions="3"),  # apache/iggy responses/users/user_response.rs
))
CLIENT_INFO = Struct("client_info", (
    F("client_id", U32), F("user_id", U32), F("transport", U8), F("address", Str32),
    F("consumer_groups_count", U32),
))
# ClientInfoDetails (GetMe, GetClient) is a CLIENT_INFO, then consumer_groups_count of these
# (iggy.md 5.8; unchanged in the later generations, iggy-middle.md 6).
CLIENT_GROUP = Struct("client_group", (F("stream_id", U32), F("topic_id", U32), F("group_id", U32)))
PAT_INFO = Struct("pat_info", (F("name", Str8), F("expiry_at", U64)))
RAW_PAT = Struct("raw_pat", (F("token", Str8),))
# cpu fields are f32 bit patterns (Ferry sends 0); the last three are mandatory
# for SDK 0.10+ (iggy-middle.md 6.9) and ignored by the 0.6.202 decoder.
STATS = Struct("stats", (
    F("process_id", U32), F("cpu_usage", F32), F("total_cpu_usage", F32), F("memory_usage", U64),
    F("total_memory", U64), F("available_memory", U64), F("run_time", U64), F("start_time", U64),
    F("read_bytes", U64), F("written_bytes", U64), F("messages_size_bytes", U64), F("streams_count", U32),
    F("topics_count", U32), F("partitions_count", U32), F("segments_count", U32), F("messages_count", U64),
    F("clients_count", U32), F("consumer_groups_count", U32), F("hostname", Str32), F("os_name", Str32),
    F("os_version", Str32), F("kernel_version", Str32), F("server_version", Str32), F("server_semver", U32),
    F("cache_metrics_count", U32, default=0),
    F("threads_count", U32, default=0), F("free_disk_space", U64, default=0), F("total_disk_space", U64, default=0),
))

RECORDS = (STREAM, TOPIC, PARTITION, GROUP, MEMBER, OFFSET_INFO, POLL_PREFIX, IDENTITY, LOGIN_REPLY, CLUSTER,
           CLUSTER_NODE, SYNC_GROUP, SEND_CONFIRMATION, OPTION_SPEC, USER_INFO, CLIENT_INFO, CLIENT_GROUP, PAT_INFO, RAW_PAT,
           STATS)

__all__ = ["RECORDS"]
