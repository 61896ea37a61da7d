"""Kafka's messages, declared once as tables, and :data:`API`, the one table of every API Ferry serves.

Theory of operation
-------------------
Each API Ferry serves is one :class:`~adapters.kafka.table.Api` entry: its
key, its name, the version range Ferry serves, its flexible versions, and
the fields of its request and response in wire order, as Kafka's message
spec files lay them out (``clients/src/main/resources/common/message`` in
apache/kafka; seed 004 gives their grammar). Fields keep the spec's names
(``spec_name``; the Python name is the snake_case form), version ranges,
nullable versions, tags and defaults; structs nested in arrays are declared
inline with :func:`~adapters.kafka.table.S`. The engine derives from each
entry, per version, the dataclasses, the codec and the hypothesis strategy.

The data-path APIs (ApiVersions, Metadata, Produce, Fetch, ListOffsets) are
declared here; the group, transaction and admin APIs in
:mod:`adapters.kafka.messages_groups`, :mod:`adapters.kafka.messages_txn` and
:mod:`adapters.kafka.messages_admin`. :data:`API` gathers them all;
ApiVersions' answer (:func:`api_versions`) is derived from it, never listed
by hand.

Version ranges: each API's range is what Ferry serves, within what the
clients of kafka.md section 2 use; fields whose versions all lie outside it
are left out. Records (Produce, Fetch) stay raw bytes here; the record batch
codec (adapters/kafka/records.py) reads and writes them.
"""

from __future__ import annotations

from .messages_admin import ADMIN_APIS
from .messages_groups import GROUP_APIS
from .messages_txn import TXN_APIS
from .table import Api, ApiTable, F, S
from .types import ARRAY, BOOL, INT8, INT16, INT32, INT64, RECORDS, STRING, UUID

_UNKNOWN_OPS = -(1 << 31)  # authorized operations not requested: Integer.MIN_VALUE

API_VERSIONS = Api(18, "ApiVersions", "0-3", flexible="3+", request=(
    F("ClientSoftwareName", STRING, "3+"),
    F("ClientSoftwareVersion", STRING, "3+"),
), response=(
    F("ErrorCode", INT16),
    F("ApiKeys", ARRAY(S("ApiVersion",
        F("ApiKey", INT16),
        F("MinVersion", INT16),
        F("MaxVersion", INT16)))),
    F("ThrottleTimeMs", INT32, "1+"),
    F("SupportedFeatures", ARRAY(S("SupportedFeatureKey",
        F("Name", STRING, "3+"),
        F("MinVersion", INT16, "3+"),
        F("MaxVersion", INT16, "3+"))), "3+", tag=0, tagged="3+"),
    F("FinalizedFeaturesEpoch", INT64, "3+", default=-1, tag=1, tagged="3+"),
    F("FinalizedFeatures", ARRAY(S("FinalizedFeatureKey",
        F("Name", STRING, "3+"),
        F("MaxVersionLevel", INT16, "3+"),
        F("MinVersionLevel", INT16, "3+"))), "3+", tag=2, tagged="3+"),
    F("ZkMigrationReady", BOOL, "3+", tag=3, tagged="3+"),
    # The response header stays v0 in every version, flexible or not (frames.py).
))

METADATA = Api(3, "Metadata", "0-12", flexible="9+", request=(
    # Every topic: an empty array in v0, null from v1 (where an empty array asks for none).
    F("Topics", ARRAY(S("MetadataRequestTopic",
        F("TopicId", UUID, "10+"),
        F("Name", STRING, nullable="10+"))), nullable="1+"),
    F("AllowAutoTopicCreation", BOOL, "4+", default=True),
    F("IncludeClusterAuthorizedOperations", BOOL, "8-10"),
    F("IncludeTopicAuthorizedOperations", BOOL, "8+"),
), response=(
    F("ThrottleTimeMs", INT32, "3+"),
    F("Brokers", ARRAY(S("MetadataResponseBroker",
        F("NodeId", INT32),
        F("Host", STRING),
        F("Port", INT32),
        F("Rack", STRING, "1+", nullable="1+", default=None)))),
    F("ClusterId", STRING, "2+", nullable="2+", default=None),
    F("ControllerId", INT32, "1+", default=-1),
    F("Topics", ARRAY(S("MetadataResponseTopic",
        F("ErrorCode", INT16),
        F("Name", STRING, nullable="12+"),
        F("TopicId", UUID, "10+"),
        F("IsInternal", BOOL, "1+"),
        F("Partitions", ARRAY(S("MetadataResponsePartition",
            F("ErrorCode", INT16),
            F("PartitionIndex", INT32),
            F("LeaderId", INT32),
            F("LeaderEpoch", INT32, "7+", default=-1),
            F("ReplicaNodes", ARRAY(INT32)),
            F("IsrNodes", ARRAY(INT32)),
            F("OfflineReplicas", ARRAY(INT32), "5+")))),
        F("TopicAuthorizedOperations", INT32, "8+", default=_UNKNOWN_OPS)))),
    F("ClusterAuthorizedOperations", INT32, "8-10", default=_UNKNOWN_OPS),
))

PRODUCE = Api(0, "Produce", "3-9", flexible="9+", request=(
    F("TransactionalId", STRING, "3+", nullable="3+", default=None),
    F("Acks", INT16),
    F("TimeoutMs", INT32),
    F("TopicData", ARRAY(S("TopicProduceData",
        F("Name", STRING),
        F("PartitionData", ARRAY(S("PartitionProduceData",
            F("Index", INT32),
            F("Records", RECORDS, nullable="0+"))))))),
), response=(
    F("Responses", ARRAY(S("TopicProduceResponse",
        F("Name", STRING),
        F("PartitionResponses", ARRAY(S("PartitionProduceResponse",
            F("Index", INT32),
            F("ErrorCode", INT16),
            F("BaseOffset", INT64),
            F("LogAppendTimeMs", INT64, "2+", default=-1),
            F("LogStartOffset", INT64, "5+", default=-1),
            F("RecordErrors", ARRAY(S("BatchIndexAndErrorMessage",
                F("BatchIndex", INT32, "8+"),
                F("BatchIndexErrorMessage", STRING, "8+", nullable="8+", default=None))), "8+"),
            F("ErrorMessage", STRING, "8+", nullable="8+", default=None))))))),
    F("ThrottleTimeMs", INT32, "1+"),
))

FETCH = Api(1, "Fetch", "4-12", flexible="12+", request=(
    F("ClusterId", STRING, "12+", nullable="12+", default=None, tag=0, tagged="12+"),
    F("ReplicaId", INT32, "0-14", default=-1),
    F("MaxWaitMs", INT32),
    F("MinBytes", INT32),
    F("MaxBytes", INT32, "3+", default=0x7FFFFFFF),
    F("IsolationLevel", INT8, "4+"),
    F("SessionId", INT32, "7+"),
    F("SessionEpoch", INT32, "7+", default=-1),
    F("Topics", ARRAY(S("FetchTopic",
        F("Topic", STRING, "0-12"),
        F("Partitions", ARRAY(S("FetchPartition",
            F("Partition", INT32),
            F("CurrentLeaderEpoch", INT32, "9+", default=-1),
            F("FetchOffset", INT64),
            F("LastFetchedEpoch", INT32, "12+", default=-1),
            F("LogStartOffset", INT64, "5+", default=-1),
            F("PartitionMaxBytes", INT32))))))),
    F("ForgottenTopicsData", ARRAY(S("ForgottenTopic",
        F("Topic", STRING, "7-12"),
        F("Partitions", ARRAY(INT32), "7+"))), "7+"),
    F("RackId", STRING, "11+"),
), response=(
    F("ThrottleTimeMs", INT32, "1+"),
    F("ErrorCode", INT16, "7+"),
    F("SessionId", INT32, "7+"),
    F("Responses", ARRAY(S("FetchableTopicResponse",
        F("Topic", STRING, "0-12"),
        F("Partitions", ARRAY(S("PartitionData",
            F("PartitionIndex", INT32),
            F("ErrorCode", INT16),
            F("HighWatermark", INT64),
            F("LastStableOffset", INT64, "4+", default=-1),
            F("LogStartOffset", INT64, "5+", default=-1),
            F("DivergingEpoch", S("EpochEndOffset",
                F("Epoch", INT32, "12+", default=-1),
                F("EndOffset", INT64, "12+", default=-1)), "12+", tag=0, tagged="12+"),
            F("CurrentLeader", S("LeaderIdAndEpoch",
                F("LeaderId", INT32, "12+", default=-1),
                F("LeaderEpoch", INT32, "12+", default=-1)), "12+", tag=1, tagged="12+"),
            F("SnapshotId", S("SnapshotId",
                F("EndOffset", INT64, default=-1),
                F("Epoch", INT32, default=-1)), "12+", tag=2, tagged="12+"),
            F("AbortedTransactions", ARRAY(S("AbortedTransaction",
                F("ProducerId", INT64, "4+"),
                F("FirstOffset", INT64, "4+"))), "4+", nullable="4+"),
            # -1: read from the leader; librdkafka fails to parse another value from a broker
            # that has no replicas to prefer (kafka.md section 3).
            F("PreferredReadReplica", INT32, "11+", default=-1),
            # The whole batch holding the fetch offset and those after it; clients skip the
            # records before the offset (kafka.md section 3).
            F("Records", RECORDS, nullable="0+"))))))),
))

LIST_OFFSETS = Api(2, "ListOffsets", "0-7", flexible="6+", request=(
    F("ReplicaId", INT32),
    F("IsolationLevel", INT8, "2+"),
    F("Topics", ARRAY(S("ListOffsetsTopic",
        F("Name", STRING),
        F("Partitions", ARRAY(S("ListOffsetsPartition",
            F("PartitionIndex", INT32),
            F("CurrentLeaderEpoch", INT32, "4+", default=-1),
            F("Timestamp", INT64),
            F("MaxNumOffsets", INT32, "0", default=1))))))),
), response=(
    F("ThrottleTimeMs", INT32, "2+"),
    F("Topics", ARRAY(S("ListOffsetsTopicResponse",
        F("Name", STRING),
        F("Partitions", ARRAY(S("ListOffsetsPartitionResponse",
            F("PartitionIndex", INT32),
            F("ErrorCode", INT16),
            F("OldStyleOffsets", ARRAY(INT64), "0"),
            F("Timestamp", INT64, "1+", default=-1),
            F("Offset", INT64, "1+", default=-1),
            F("LeaderEpoch", INT32, "4+", default=-1))))))),
))

API = ApiTable((API_VERSIONS, METADATA, PRODUCE, FETCH, LIST_OFFSETS, *GROUP_APIS, *TXN_APIS, *ADMIN_APIS))

_API_VERSION = API_VERSIONS.response.structs["ApiVersion"].cls


def api_versions(*, error_code: int = 0, throttle_time_ms: int = 0, keys=None):
    """The ApiVersions response body (a dataclass value, for any version): every API in
    :data:`API` with its served range, by key. With ``error_code`` 35 (UNSUPPORTED_VERSION),
    encoded as v0, it answers an ApiVersions request of a version Ferry does not serve, so
    the client can retry with one it does (adapters/kafka/frames.py). ``keys``: only these
    API keys (a listener advertises the APIs it handles)."""
    ranges = tuple(_API_VERSION(api_key=key, min_version=lo, max_version=hi) for key, lo, hi in API.ranges()
                   if keys is None or key in keys)
    return API_VERSIONS.response.make(error_code=error_code, api_keys=ranges, throttle_time_ms=throttle_time_ms)


__all__ = ["API", "API_VERSIONS", "FETCH", "LIST_OFFSETS", "METADATA", "PRODUCE", "api_versions"]
