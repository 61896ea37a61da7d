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

Shorthand: every enum in this proto numbers its members 0, 1, 2, ... in order,
so :func:`_enum` takes the names only; the sixteen messages that are nothing
but one enum field (``CreateScopeStatus{Status status = 1}``) are one
:func:`_enum_message` line each. Field numbers and enum values were checked
against both proto copies when written; tests/pravega pins the golden bytes.
"""

from __future__ import annotations

from enum import IntEnum

from .protobuf import Field as F, Map, Message

SERVICE = "io.pravega.controller.stream.api.grpc.v1.ControllerService"


def _enum(name: str, members: str) -> type[IntEnum]:
    """A proto enum whose values are 0, 1, 2, ... in the order named: true of
    every enum in this proto (tests/pravega pins a few values)."""
    return IntEnum(name, members.split(), start=0, module=__name__)


def _enum_message(name: str, members: str, *, enum: str = "Status", field: str = "status") -> type[Message]:
    """The many messages that are one enum field (number 1) and that enum,
    nested under ``enum``: ``CreateScopeStatus{Status status = 1}``."""
    nested = _enum(enum, members)
    return type(name, (Message,), {enum: nested, "FIELDS": (F(1, field, nested),), "__module__": __name__})


# -- names and identities -------------------------------------------------------
class ScopeInfo(Message):
    FIELDS = (F(1, "scope", "string"),)


class ContinuationToken(Message):
    FIELDS = (F(1, "token", "string", about="opaque; empty asks for the first page"),)


class StreamInfo(Message):
    AccessOperation = _enum("AccessOperation", "UNSPECIFIED NONE ANY READ WRITE READ_WRITE")

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
    ScalingPolicyType = _enum("ScalingPolicyType",
                              "FIXED_NUM_SEGMENTS BY_RATE_IN_KBYTES_PER_SEC BY_RATE_IN_EVENTS_PER_SEC")

    FIELDS = (F(1, "scaleType", ScalingPolicyType), F(2, "targetRate", "int32"),
              F(3, "scaleFactor", "int32"), F(4, "minNumSegments", "int32", about="the partition count"))


class RetentionPolicy(Message):
    RetentionPolicyType = _enum("RetentionPolicyType", "UNKNOWN TIME SIZE")

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
CreateScopeStatus = _enum_message("CreateScopeStatus", "SUCCESS FAILURE SCOPE_EXISTS INVALID_SCOPE_NAME")
DeleteScopeStatus = _enum_message("DeleteScopeStatus", "SUCCESS FAILURE SCOPE_NOT_FOUND SCOPE_NOT_EMPTY")
CreateStreamStatus = _enum_message("CreateStreamStatus",
                                   "SUCCESS FAILURE STREAM_EXISTS SCOPE_NOT_FOUND INVALID_STREAM_NAME")
# STREAM_SEALED is Java only: the Rust 0.3.7 client turns it into a generic error
UpdateStreamStatus = _enum_message("UpdateStreamStatus",
                                   "SUCCESS FAILURE STREAM_NOT_FOUND SCOPE_NOT_FOUND STREAM_SEALED")
DeleteStreamStatus = _enum_message("DeleteStreamStatus", "SUCCESS FAILURE STREAM_NOT_FOUND STREAM_NOT_SEALED")


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
    Status = _enum("Status", "SUCCESS FAILURE SCOPE_NOT_FOUND")

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
    ScaleStreamStatus = _enum("ScaleStreamStatus", "STARTED FAILURE PRECONDITION_FAILED")

    FIELDS = (F(1, "status", ScaleStreamStatus), F(2, "segments", SegmentRange, repeated=True),
              F(3, "epoch", "int32"))


class ScaleStatusRequest(Message):
    FIELDS = (F(1, "streamInfo", StreamInfo), F(2, "epoch", "int32"))


ScaleStatusResponse = _enum_message("ScaleStatusResponse", "IN_PROGRESS SUCCESS INVALID_INPUT INTERNAL_ERROR",
                                    enum="ScaleStatus")


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


TxnStatus = _enum_message("TxnStatus", "SUCCESS FAILURE STREAM_NOT_FOUND TRANSACTION_NOT_FOUND")
# SCALE_GRACE_TIME_EXCEEDED is deprecated in the proto
PingTxnStatus = _enum_message("PingTxnStatus", "OK LEASE_TOO_LARGE MAX_EXECUTION_TIME_EXCEEDED"
                                               " SCALE_GRACE_TIME_EXCEEDED DISCONNECTED COMMITTED ABORTED UNKNOWN")
TxnState = _enum_message("TxnState", "UNKNOWN OPEN COMMITTING COMMITTED ABORTING ABORTED",
                         enum="State", field="state")


class ListCompletedTxnRequest(Message):  # Java only
    FIELDS = (F(1, "streamInfo", StreamInfo),)


class TxnResponse(Message):  # Java only
    Status = _enum("Status", "COMMITTED ABORTED")

    FIELDS = (F(1, "txnId", TxnId), F(2, "status", Status))


class ListCompletedTxnResponse(Message):  # Java only
    FIELDS = (F(2, "response", TxnResponse, repeated=True, about="number 2: the proto has no field 1"),)


# -- writers and watermarks ---------------------------------------------------
class RemoveWriterRequest(Message):
    FIELDS = (F(1, "writer", "string"), F(2, "stream", StreamInfo))


RemoveWriterResponse = _enum_message("RemoveWriterResponse",
                                     "SUCCESS UNKNOWN_WRITER STREAM_DOES_NOT_EXIST INTERNAL_ERROR", field="result")


class TimestampFromWriter(Message):
    FIELDS = (F(1, "writer", "string"), F(2, "position", StreamCut), F(3, "timestamp", "int64"))


TimestampResponse = _enum_message("TimestampResponse", "SUCCESS INVALID_TIME INVALID_POSITION INTERNAL_ERROR",
                                  field="result")


# -- key-value tables ---------------------------------------------------------------
class KeyValueTableConfig(Message):
    FIELDS = (F(1, "scope", "string"), F(2, "kvtName", "string"), F(3, "partitionCount", "int32"),
              F(4, "primaryKeyLength", "int32", about="Java only"),
              F(5, "secondaryKeyLength", "int32", about="Java only"),
              F(6, "rolloverSizeBytes", "int64", about="Java only"))


class KeyValueTableInfo(Message):
    FIELDS = (F(1, "scope", "string"), F(2, "kvtName", "string"))


# numbered as in both current copies (older Java copies put STREAM_EXISTS at 3)
CreateKeyValueTableStatus = _enum_message("CreateKeyValueTableStatus",
                                          "SUCCESS FAILURE TABLE_EXISTS SCOPE_NOT_FOUND INVALID_TABLE_NAME")


class KeyValueTableConfigResponse(Message):  # Java only
    Status = _enum("Status", "SUCCESS FAILURE TABLE_NOT_FOUND")

    FIELDS = (F(1, "config", KeyValueTableConfig), F(2, "status", Status))


class KVTablesInScopeRequest(Message):
    FIELDS = (F(1, "scope", ScopeInfo), F(2, "continuationToken", ContinuationToken))


class KVTablesInScopeResponse(Message):
    Status = _enum("Status", "SUCCESS FAILURE SCOPE_NOT_FOUND")

    FIELDS = (F(1, "kvtables", KeyValueTableInfo, repeated=True),
              F(2, "continuationToken", ContinuationToken), F(3, "status", Status))


DeleteKVTableStatus = _enum_message("DeleteKVTableStatus", "SUCCESS FAILURE TABLE_NOT_FOUND")


# -- subscribers --------------------------------------------------------------------
class StreamSubscriberInfo(Message):  # declared in the proto, used by no RPC
    FIELDS = (F(1, "scope", "string"), F(2, "stream", "string"), F(3, "subscriber", "string"),
              F(4, "operationGeneration", "int64"))


class SubscriberStreamCut(Message):
    FIELDS = (F(1, "subscriber", "string"), F(2, "generation", "int64"), F(3, "readerGroupId", "string"),
              F(4, "streamCut", StreamCut))


class SubscribersResponse(Message):
    Status = _enum("Status", "SUCCESS FAILURE STREAM_NOT_FOUND")

    FIELDS = (F(1, "subscribers", "string", repeated=True), F(2, "status", Status))


UpdateSubscriberStatus = _enum_message("UpdateSubscriberStatus", "SUCCESS FAILURE STREAM_NOT_FOUND SUBSCRIBER_NOT_FOUND"
                                                                 " STREAM_CUT_NOT_VALID GENERATION_MISMATCH")


# -- reader groups (the Rust client keeps them in a table segment instead) ---------
class ReaderGroupConfiguration(Message):
    # the values of the retentionType field, which the proto types int32
    RetentionType = _enum("RetentionType", "NONE MANUAL AUTOMATIC")

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
    Status = _enum("Status", "SUCCESS FAILURE RG_NOT_FOUND")

    FIELDS = (F(1, "config", ReaderGroupConfiguration), F(2, "status", Status))


class CreateReaderGroupResponse(Message):
    Status = _enum("Status", "SUCCESS FAILURE SCOPE_NOT_FOUND INVALID_RG_NAME")

    FIELDS = (F(1, "status", Status), F(2, "config", ReaderGroupConfiguration))


DeleteReaderGroupStatus = _enum_message("DeleteReaderGroupStatus", "SUCCESS FAILURE RG_NOT_FOUND")


class UpdateReaderGroupResponse(Message):
    Status = _enum("Status", "SUCCESS FAILURE RG_NOT_FOUND INVALID_CONFIG")

    FIELDS = (F(1, "status", Status), F(2, "generation", "int64"))


# -- controller buckets (Java only) -----------------------------------------------
ControllerToBucketMappingRequest = _enum_message("ControllerToBucketMappingRequest",
                                                 "RetentionService WatermarkingService",
                                                 enum="BucketType", field="serviceType")


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
for _cls in MESSAGES:  # qualify nested enums' names as protoc does: "CreateScopeStatus.Status"
    for _name, _value in vars(_cls).items():
        if isinstance(_value, type) and issubclass(_value, IntEnum):
            _value.__qualname__ = f"{_cls.__qualname__}.{_name}"
del _cls, _name, _value
