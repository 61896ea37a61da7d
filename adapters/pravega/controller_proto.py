"""The Pravega controller's gRPC messages and RPC table, declared once.

Theory of operation
-------------------
Data only: every message of ``Controller.proto`` (package
``io.pravega.controller.stream.api.grpc.v1``) as a :class:`~.protobuf.Message`
field table, and :data:`RPCS`, the service's methods with their request and
response classes. :mod:`.protobuf` derives encoders, decoders and hypothesis
strategies from the tables; :data:`MESSAGES` lists every class (derived, not
written by hand) for the round-trip property test.

Source of truth: the Rust client's copy of the proto
(pravega-client-rust ``controller-client/proto/Controller.proto`` at tag
v0.3.7, the crate inside PyPI ``pravega`` 0.3.8). The Java controller's copy
(pravega/pravega ``shared/controller-api/src/main/proto/Controller.proto``)
is a strict superset; its extra fields and RPCs are declared too, marked
"Java only", so a Java client's requests decode as well. A Rust client skips
those fields (proto3 unknown-field rule), but it maps an enum value it does not
know (e.g. ``UpdateStreamStatus.Status.STREAM_SEALED``) to a generic error.

Naming: classes carry the proto's message names; nested proto messages and
enums are nested classes with the proto's names, so a status reads
``CreateScopeStatus.Status.SCOPE_EXISTS`` and a scaling type
``ScalingPolicy.ScalingPolicyType.FIXED_NUM_SEGMENTS`` (the same shape protoc's
Python output has). Field attributes are the snake_case forms of the proto
names (``streamInfo`` -> ``stream_info``, ``from`` -> ``from_``).
"""

from __future__ import annotations

from enum import IntEnum

from .protobuf import Field as F, Map, Message

SERVICE = "io.pravega.controller.stream.api.grpc.v1.ControllerService"


# -- names and identities -------------------------------------------------------
class ScopeInfo(Message):
    FIELDS = (F(1, "scope", "string"),)


class ContinuationToken(Message):
    FIELDS = (F(1, "token", "string", about="opaque; empty asks for the first page"),)


class StreamInfo(Message):
    class AccessOperation(IntEnum):
        UNSPECIFIED = 0
        NONE = 1
        ANY = 2
        READ = 3
        WRITE = 4
        READ_WRITE = 5

    FIELDS = (F(1, "scope", "string"), F(2, "stream", "string"),
              F(3, "accessOperation", AccessOperation, about="absent from old Java copies"))


class SegmentId(Message):
    FIELDS = (F(1, "streamInfo", StreamInfo),
              F(2, "segmentId", "int64", about="epoch in the high 32 bits, segment number in the low 32"))


class SegmentRange(Message):
    FIELDS = (F(1, "segmentId", SegmentId), F(2, "minKey", "double"), F(3, "maxKey", "double"))


class SegmentRanges(Message):
    FIELDS = (F(1, "segmentRanges", SegmentRange, repeated=True, about="must tile [0, 1)"),
              F(2, "delegationToken", "string"))


class NodeUri(Message):
    FIELDS = (F(1, "endpoint", "string"), F(2, "port", "int32"))


class ServerRequest(Message):
    FIELDS = ()


class ServerResponse(Message):
    FIELDS = (F(1, "nodeURI", NodeUri, repeated=True),)


class DelegationToken(Message):
    FIELDS = (F(1, "delegationToken", "string"),)


class ExistsResponse(Message):
    FIELDS = (F(1, "exists", "bool"),)


# -- stream configuration -----------------------------------------------------------
class ScalingPolicy(Message):
    class ScalingPolicyType(IntEnum):
        FIXED_NUM_SEGMENTS = 0
        BY_RATE_IN_KBYTES_PER_SEC = 1
        BY_RATE_IN_EVENTS_PER_SEC = 2

    FIELDS = (F(1, "scaleType", ScalingPolicyType), F(2, "targetRate", "int32"),
              F(3, "scaleFactor", "int32"), F(4, "minNumSegments", "int32", about="the partition count"))


class RetentionPolicy(Message):
    class RetentionPolicyType(IntEnum):
        UNKNOWN = 0
        TIME = 1
        SIZE = 2

    FIELDS = (F(1, "retentionType", RetentionPolicyType), F(2, "retentionParam", "int64"),
              F(3, "retentionMax", "int64"))


class Tags(Message):
    FIELDS = (F(1, "tag", "string", repeated=True),)


class StreamConfig(Message):
    FIELDS = (F(1, "streamInfo", StreamInfo), F(2, "scalingPolicy", ScalingPolicy),
              F(3, "retentionPolicy", RetentionPolicy), F(4, "tags", Tags),
              F(5, "timestampAggregationTimeout", "int64", about="Java only"),
              F(6, "rolloverSizeBytes", "int64", about="Java only"))


class StreamCut(Message):
    FIELDS = (F(1, "streamInfo", StreamInfo), F(2, "cut", Map("int64", "int64"), about="segment id -> offset"))


class StreamCutRange(Message):
    FIELDS = (F(1, "streamInfo", StreamInfo), F(2, "from", Map("int64", "int64")),
              F(3, "to", Map("int64", "int64")))


class StreamCutRangeResponse(Message):
    FIELDS = (F(1, "segments", SegmentId, repeated=True), F(2, "delegationToken", "string"))


class StreamCutValidityResponse(Message):
    FIELDS = (F(1, "response", "bool"),)


class SegmentValidityResponse(Message):
    FIELDS = (F(1, "response", "bool"),)


# -- status replies ---------------------------------------------------------------
class CreateScopeStatus(Message):
    class Status(IntEnum):
        SUCCESS = 0
        FAILURE = 1
        SCOPE_EXISTS = 2
        INVALID_SCOPE_NAME = 3

    FIELDS = (F(1, "status", Status),)


class DeleteScopeStatus(Message):
    class Status(IntEnum):
        SUCCESS = 0
        FAILURE = 1
        SCOPE_NOT_FOUND = 2
        SCOPE_NOT_EMPTY = 3

    FIELDS = (F(1, "status", Status),)


class CreateStreamStatus(Message):
    class Status(IntEnum):
        SUCCESS = 0
        FAILURE = 1
        STREAM_EXISTS = 2
        SCOPE_NOT_FOUND = 3
        INVALID_STREAM_NAME = 4

    FIELDS = (F(1, "status", Status),)


class UpdateStreamStatus(Message):
    class Status(IntEnum):
        SUCCESS = 0
        FAILURE = 1
        STREAM_NOT_FOUND = 2
        SCOPE_NOT_FOUND = 3
        STREAM_SEALED = 4  # Java only: the Rust 0.3.7 client turns it into a generic error

    FIELDS = (F(1, "status", Status),)


class DeleteStreamStatus(Message):
    class Status(IntEnum):
        SUCCESS = 0
        FAILURE = 1
        STREAM_NOT_FOUND = 2
        STREAM_NOT_SEALED = 3

    FIELDS = (F(1, "status", Status),)


# -- listing ------------------------------------------------------------------
class ScopesRequest(Message):
    FIELDS = (F(1, "continuationToken", ContinuationToken),)


class ScopesResponse(Message):
    FIELDS = (F(1, "scopes", "string", repeated=True), F(2, "continuationToken", ContinuationToken))


class StreamsInScopeRequest(Message):
    FIELDS = (F(1, "scope", ScopeInfo), F(2, "continuationToken", ContinuationToken))


class StreamsInScopeWithTagRequest(Message):
    FIELDS = (F(1, "scope", ScopeInfo), F(2, "tag", "string"), F(3, "continuationToken", ContinuationToken))


class StreamsInScopeResponse(Message):
    class Status(IntEnum):
        SUCCESS = 0
        FAILURE = 1
        SCOPE_NOT_FOUND = 2

    FIELDS = (F(1, "streams", StreamInfo, repeated=True), F(2, "continuationToken", ContinuationToken),
              F(3, "status", Status))


# -- segments -----------------------------------------------------------------
class GetSegmentsRequest(Message):
    FIELDS = (F(1, "streamInfo", StreamInfo), F(2, "timestamp", "int64", about="0 = the head of the stream"))


class GetEpochSegmentsRequest(Message):
    FIELDS = (F(1, "streamInfo", StreamInfo), F(2, "epoch", "int32"))


class SegmentsAtTime(Message):
    class SegmentLocation(Message):
        FIELDS = (F(1, "segmentId", SegmentId), F(2, "offset", "int64", about="start offset (after truncation)"))

    FIELDS = (F(1, "segments", SegmentLocation, repeated=True), F(2, "delegationToken", "string"))


class SuccessorResponse(Message):
    class SegmentEntry(Message):
        FIELDS = (F(1, "segment", SegmentRange), F(2, "value", "int64", repeated=True, about="predecessor ids"))

    FIELDS = (F(1, "segments", SegmentEntry, repeated=True), F(2, "delegationToken", "string"))


# -- scaling ------------------------------------------------------------------
class ScaleRequest(Message):
    class KeyRangeEntry(Message):
        FIELDS = (F(1, "start", "double"), F(2, "end", "double"))

    FIELDS = (F(1, "streamInfo", StreamInfo), F(2, "sealedSegments", "int64", repeated=True),
              F(3, "newKeyRanges", KeyRangeEntry, repeated=True), F(4, "scaleTimestamp", "int64"))


class ScaleResponse(Message):
    class ScaleStreamStatus(IntEnum):
        STARTED = 0
        FAILURE = 1
        PRECONDITION_FAILED = 2

    FIELDS = (F(1, "status", ScaleStreamStatus), F(2, "segments", SegmentRange, repeated=True),
              F(3, "epoch", "int32"))


class ScaleStatusRequest(Message):
    FIELDS = (F(1, "streamInfo", StreamInfo), F(2, "epoch", "int32"))


class ScaleStatusResponse(Message):
    class ScaleStatus(IntEnum):
        IN_PROGRESS = 0
        SUCCESS = 1
        INVALID_INPUT = 2
        INTERNAL_ERROR = 3

    FIELDS = (F(1, "status", ScaleStatus),)


# -- transactions -------------------------------------------------------------
class TxnId(Message):
    FIELDS = (F(1, "highBits", "int64"), F(2, "lowBits", "int64"))


class CreateTxnRequest(Message):
    FIELDS = (F(1, "streamInfo", StreamInfo), F(2, "lease", "int64"),
              F(3, "scaleGracePeriod", "int64", about="Java only, deprecated there"))


class CreateTxnResponse(Message):
    FIELDS = (F(1, "txnId", TxnId), F(2, "activeSegments", SegmentRange, repeated=True),
              F(3, "delegationToken", "string"))


class TxnRequest(Message):
    FIELDS = (F(1, "streamInfo", StreamInfo), F(2, "txnId", TxnId), F(3, "writerId", "string"),
              F(4, "timestamp", "int64"))


class PingTxnRequest(Message):
    FIELDS = (F(1, "streamInfo", StreamInfo), F(2, "txnId", TxnId), F(3, "lease", "int64"))


class TxnStatus(Message):
    class Status(IntEnum):
        SUCCESS = 0
        FAILURE = 1
        STREAM_NOT_FOUND = 2
        TRANSACTION_NOT_FOUND = 3

    FIELDS = (F(1, "status", Status),)


class PingTxnStatus(Message):
    class Status(IntEnum):
        OK = 0
        LEASE_TOO_LARGE = 1
        MAX_EXECUTION_TIME_EXCEEDED = 2
        SCALE_GRACE_TIME_EXCEEDED = 3  # deprecated in the proto
        DISCONNECTED = 4
        COMMITTED = 5
        ABORTED = 6
        UNKNOWN = 7

    FIELDS = (F(1, "status", Status),)


class TxnState(Message):
    class State(IntEnum):
        UNKNOWN = 0
        OPEN = 1
        COMMITTING = 2
        COMMITTED = 3
        ABORTING = 4
        ABORTED = 5

    FIELDS = (F(1, "state", State),)


class ListCompletedTxnRequest(Message):  # Java only
    FIELDS = (F(1, "streamInfo", StreamInfo),)


class TxnResponse(Message):  # Java only
    class Status(IntEnum):
        COMMITTED = 0
        ABORTED = 1

    FIELDS = (F(1, "txnId", TxnId), F(2, "status", Status))


class ListCompletedTxnResponse(Message):  # Java only
    FIELDS = (F(2, "response", TxnResponse, repeated=True, about="number 2: the proto has no field 1"),)


# -- writers and watermarks ---------------------------------------------------
class RemoveWriterRequest(Message):
    FIELDS = (F(1, "writer", "string"), F(2, "stream", StreamInfo))


class RemoveWriterResponse(Message):
    class Status(IntEnum):
        SUCCESS = 0
        UNKNOWN_WRITER = 1
        STREAM_DOES_NOT_EXIST = 2
        INTERNAL_ERROR = 3

    FIELDS = (F(1, "result", Status),)


class TimestampFromWriter(Message):
    FIELDS = (F(1, "writer", "string"), F(2, "position", StreamCut), F(3, "timestamp", "int64"))


class TimestampResponse(Message):
    class Status(IntEnum):
        SUCCESS = 0
        INVALID_TIME = 1
        INVALID_POSITION = 2
        INTERNAL_ERROR = 3

    FIELDS = (F(1, "result", Status),)


# -- key-value tables ---------------------------------------------------------------
class KeyValueTableConfig(Message):
    FIELDS = (F(1, "scope", "string"), F(2, "kvtName", "string"), F(3, "partitionCount", "int32"),
              F(4, "primaryKeyLength", "int32", about="Java only"),
              F(5, "secondaryKeyLength", "int32", about="Java only"),
              F(6, "rolloverSizeBytes", "int64", about="Java only"))


class KeyValueTableInfo(Message):
    FIELDS = (F(1, "scope", "string"), F(2, "kvtName", "string"))


class CreateKeyValueTableStatus(Message):
    class Status(IntEnum):  # numbered as in both current copies (older Java copies differ)
        SUCCESS = 0
        FAILURE = 1
        TABLE_EXISTS = 2
        SCOPE_NOT_FOUND = 3
        INVALID_TABLE_NAME = 4

    FIELDS = (F(1, "status", Status),)


class KeyValueTableConfigResponse(Message):  # Java only
    class Status(IntEnum):
        SUCCESS = 0
        FAILURE = 1
        TABLE_NOT_FOUND = 2

    FIELDS = (F(1, "config", KeyValueTableConfig), F(2, "status", Status))


class KVTablesInScopeRequest(Message):
    FIELDS = (F(1, "scope", ScopeInfo), F(2, "continuationToken", ContinuationToken))


class KVTablesInScopeResponse(Message):
    class Status(IntEnum):
        SUCCESS = 0
        FAILURE = 1
        SCOPE_NOT_FOUND = 2

    FIELDS = (F(1, "kvtables", KeyValueTableInfo, repeated=True),
              F(2, "continuationToken", ContinuationToken), F(3, "status", Status))


class DeleteKVTableStatus(Message):
    class Status(IntEnum):
        SUCCESS = 0
        FAILURE = 1
        TABLE_NOT_FOUND = 2

    FIELDS = (F(1, "status", Status),)


# -- subscribers --------------------------------------------------------------------
class StreamSubscriberInfo(Message):  # declared in the proto, used by no RPC
    FIELDS = (F(1, "scope", "string"), F(2, "stream", "string"), F(3, "subscriber", "string"),
              F(4, "operationGeneration", "int64"))


class SubscriberStreamCut(Message):
    FIELDS = (F(1, "subscriber", "string"), F(2, "generation", "int64"), F(3, "readerGroupId", "string"),
              F(4, "streamCut", StreamCut))


class SubscribersResponse(Message):
    class Status(IntEnum):
        SUCCESS = 0
        FAILURE = 1
        STREAM_NOT_FOUND = 2

    FIELDS = (F(1, "subscribers", "string", repeated=True), F(2, "status", Status))


class UpdateSubscriberStatus(Message):
    class Status(IntEnum):
        SUCCESS = 0
        FAILURE = 1
        STREAM_NOT_FOUND = 2
        SUBSCRIBER_NOT_FOUND = 3
        STREAM_CUT_NOT_VALID = 4
        GENERATION_MISMATCH = 5

    FIELDS = (F(1, "status", Status),)


# -- reader groups (the Rust client keeps them in a table segment instead) ---------
class ReaderGroupConfiguration(Message):
    class RetentionType(IntEnum):  # the values of retentionType, which the proto types int32
        NONE = 0
        MANUAL = 1
        AUTOMATIC = 2

    FIELDS = (F(1, "scope", "string"), F(2, "readerGroupName", "string"),
              F(3, "groupRefreshTimeMillis", "int64"), F(4, "automaticCheckpointIntervalMillis", "int64"),
              F(5, "maxOutstandingCheckpointRequest", "int32"),
              F(6, "retentionType", "int32", about="a RetentionType value, typed int32 in the proto"),
              F(7, "generation", "int64"), F(8, "readerGroupId", "string"),
              F(9, "startingStreamCuts", StreamCut, repeated=True),
              F(10, "endingStreamCuts", StreamCut, repeated=True),
              F(11, "rolloverSizeBytes", "int64", about="Java only"))


class ReaderGroupInfo(Message):
    FIELDS = (F(1, "scope", "string"), F(2, "readerGroup", "string"), F(3, "readerGroupId", "string"),
              F(4, "generation", "int64"))


class ReaderGroupConfigResponse(Message):
    class Status(IntEnum):
        SUCCESS = 0
        FAILURE = 1
        RG_NOT_FOUND = 2

    FIELDS = (F(1, "config", ReaderGroupConfiguration), F(2, "status", Status))


class CreateReaderGroupResponse(Message):
    class Status(IntEnum):
        SUCCESS = 0
        FAILURE = 1
        SCOPE_NOT_FOUND = 2
        INVALID_RG_NAME = 3

    FIELDS = (F(1, "status", Status), F(2, "config", ReaderGroupConfiguration))


class DeleteReaderGroupStatus(Message):
    class Status(IntEnum):
        SUCCESS = 0
        FAILURE = 1
        RG_NOT_FOUND = 2

    FIELDS = (F(1, "status", Status),)


class UpdateReaderGroupResponse(Message):
    class Status(IntEnum):
        SUCCESS = 0
        FAILURE = 1
        RG_NOT_FOUND = 2
        INVALID_CONFIG = 3

    FIELDS = (F(1, "status", Status), F(2, "generation", "int64"))


# -- controller buckets (Java only) -----------------------------------------------
class ControllerToBucketMappingRequest(Message):
    class BucketType(IntEnum):
        RetentionService = 0
        WatermarkingService = 1

    FIELDS = (F(1, "serviceType", BucketType),)


class BucketIds(Message):
    FIELDS = (F(1, "id", "int32", repeated=True),)


class ControllerToBucketMappingResponse(Message):
    FIELDS = (F(1, "mapping", Map("string", BucketIds)),)


# -- the service ----------------------------------------------------------------
# method name (as in the proto, case-sensitive: it is the second part of the
# gRPC path) -> (request class, response class). Order follows the proto.
RPCS: dict[str, tuple[type[Message], type[Message]]] = {
    "getControllerServerList": (ServerRequest, ServerResponse),
    "createStream": (StreamConfig, CreateStreamStatus),
    "updateStream": (StreamConfig, UpdateStreamStatus),
    "truncateStream": (StreamCut, UpdateStreamStatus),
    "sealStream": (StreamInfo, UpdateStreamStatus),
    "deleteStream": (StreamInfo, DeleteStreamStatus),
    "getCurrentSegments": (StreamInfo, SegmentRanges),
    "getEpochSegments": (GetEpochSegmentsRequest, SegmentRanges),
    "getSegments": (GetSegmentsRequest, SegmentsAtTime),
    "getSegmentsImmediatlyFollowing": (SegmentId, SuccessorResponse),  # sic: the deprecated misspelt twin
    "getSegmentsImmediatelyFollowing": (SegmentId, SuccessorResponse),
    "getSegmentsBetween": (StreamCutRange, StreamCutRangeResponse),
    "scale": (ScaleRequest, ScaleResponse),
    "checkScale": (ScaleStatusRequest, ScaleStatusResponse),
    "getURI": (SegmentId, NodeUri),
    "isSegmentValid": (SegmentId, SegmentValidityResponse),
    "isStreamCutValid": (StreamCut, StreamCutValidityResponse),
    "createTransaction": (CreateTxnRequest, CreateTxnResponse),
    "commitTransaction": (TxnRequest, TxnStatus),
    "abortTransaction": (TxnRequest, TxnStatus),
    "pingTransaction": (PingTxnRequest, PingTxnStatus),
    "checkTransactionState": (TxnRequest, TxnState),
    "listCompletedTransactions": (ListCompletedTxnRequest, ListCompletedTxnResponse),
    "createScope": (ScopeInfo, CreateScopeStatus),
    "listScopes": (ScopesRequest, ScopesResponse),
    "checkScopeExists": (ScopeInfo, ExistsResponse),
    "checkStreamExists": (StreamInfo, ExistsResponse),
    "listStreamsInScope": (StreamsInScopeRequest, StreamsInScopeResponse),
    "deleteScope": (ScopeInfo, DeleteScopeStatus),
    "deleteScopeRecursive": (ScopeInfo, DeleteScopeStatus),
    "getDelegationToken": (StreamInfo, DelegationToken),
    "removeWriter": (RemoveWriterRequest, RemoveWriterResponse),
    "noteTimestampFromWriter": (TimestampFromWriter, TimestampResponse),
    "createKeyValueTable": (KeyValueTableConfig, CreateKeyValueTableStatus),
    "getCurrentSegmentsKeyValueTable": (KeyValueTableInfo, SegmentRanges),
    "listKeyValueTablesInScope": (KVTablesInScopeRequest, KVTablesInScopeResponse),
    "deleteKeyValueTable": (KeyValueTableInfo, DeleteKVTableStatus),
    "getKeyValueTableConfiguration": (KeyValueTableInfo, KeyValueTableConfigResponse),
    "listSubscribers": (StreamInfo, SubscribersResponse),
    "updateSubscriberStreamCut": (SubscriberStreamCut, UpdateSubscriberStatus),
    "createReaderGroup": (ReaderGroupConfiguration, CreateReaderGroupResponse),
    "getReaderGroupConfig": (ReaderGroupInfo, ReaderGroupConfigResponse),
    "deleteReaderGroup": (ReaderGroupInfo, DeleteReaderGroupStatus),
    "updateReaderGroup": (ReaderGroupConfiguration, UpdateReaderGroupResponse),
    "getStreamConfiguration": (StreamInfo, StreamConfig),
    "listStreamsInScopeForTag": (StreamsInScopeWithTagRequest, StreamsInScopeResponse),
    "getControllerToBucketMapping": (ControllerToBucketMappingRequest, ControllerToBucketMappingResponse),
}
# RPCs only the Java controller's proto has; the Rust client never calls them.
JAVA_ONLY_RPCS = frozenset({"listCompletedTransactions", "deleteScopeRecursive",
                            "getKeyValueTableConfiguration", "getControllerToBucketMapping"})


def _declared(namespace: dict) -> list[type[Message]]:
    """The message classes declared in ``namespace``, each followed by its nested ones."""
    found: list[type[Message]] = []
    for value in namespace.values():
        if isinstance(value, type) and issubclass(value, Message) and value.__module__ == __name__:
            found.append(value)
            found.extend(_declared(vars(value)))
    return found


# Every message class of this module, nested ones included: derived, never listed by hand.
MESSAGES: tuple[type[Message], ...] = tuple(dict.fromkeys(_declared(dict(globals()))))
