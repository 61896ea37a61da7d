"""Kafka's consumer-group APIs, declared once as tables (see :mod:`adapters.kafka.table`).

FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete,
ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848), request and
response, in the versions Ferry serves. Fields, version ranges, nullable
versions, tags and defaults are the facts of Kafka's message spec files
(``clients/src/main/resources/common/message``); :mod:`adapters.kafka.messages`
gathers every API into the one table.
"""

from __future__ import annotations

from .table import Api, F, S
from .types import ARRAY, BOOL, BYTES, INT16, INT32, INT64, INT8, STRING, UUID

FIND_COORDINATOR = Api(10, "FindCoordinator", "0-4", flexible="3+", request=(
    F("Key", STRING, "0-3"),
    F("KeyType", INT8, "1+"),
    F("CoordinatorKeys", ARRAY(STRING), "4+"),
), response=(
    F("ThrottleTimeMs", INT32, "1+"),
    F("ErrorCode", INT16, "0-3"),
    F("ErrorMessage", STRING, "1-3", nullable="1-3"),
    F("NodeId", INT32, "0-3"),
    F("Host", STRING, "0-3"),
    F("Port", INT32, "0-3"),
    F("Coordinators", ARRAY(S("Coordinator",
        F("Key", STRING, "4+"),
        F("NodeId", INT32, "4+"),
        F("Host", STRING, "4+"),
        F("Port", INT32, "4+"),
        F("ErrorCode", INT16, "4+"),
        F("ErrorMessage", STRING, "4+", nullable="4+"))), "4+"),
))

JOIN_GROUP = Api(11, "JoinGroup", "0-7", flexible="6+", request=(
    F("GroupId", STRING),
    F("SessionTimeoutMs", INT32),
    F("RebalanceTimeoutMs", INT32, "1+", default=-1),
    F("MemberId", STRING),
    F("GroupInstanceId", STRING, "5+", nullable="5+", default=None),
    F("ProtocolType", STRING),
    F("Protocols", ARRAY(S("JoinGroupRequestProtocol",
        F("Name", STRING),
        F("Metadata", BYTES)))),
), response=(
    F("ThrottleTimeMs", INT32, "2+"),
    F("ErrorCode", INT16),
    F("GenerationId", INT32, default=-1),
    F("ProtocolType", STRING, "7+", nullable="7+", default=None),
    F("ProtocolName", STRING, nullable="7+"),
    F("Leader", STRING),
    F("MemberId", STRING),
    F("Members", ARRAY(S("JoinGroupResponseMember",
        F("MemberId", STRING),
        F("GroupInstanceId", STRING, "5+", nullable="5+", default=None),
        F("Metadata", BYTES)))),
))

SYNC_GROUP = Api(14, "SyncGroup", "0-5", flexible="4+", request=(
    F("GroupId", STRING),
    F("GenerationId", INT32),
    F("MemberId", STRING),
    F("GroupInstanceId", STRING, "3+", nullable="3+", default=None),
    F("ProtocolType", STRING, "5+", nullable="5+", default=None),
    F("ProtocolName", STRING, "5+", nullable="5+", default=None),
    F("Assignments", ARRAY(S("SyncGroupRequestAssignment",
        F("MemberId", STRING),
        F("Assignment", BYTES)))),
), response=(
    F("ThrottleTimeMs", INT32, "1+"),
    F("ErrorCode", INT16),
    F("ProtocolType", STRING, "5+", nullable="5+", default=None),
    F("ProtocolName", STRING, "5+", nullable="5+", default=None),
    F("Assignment", BYTES),
))

HEARTBEAT = Api(12, "Heartbeat", "0-4", flexible="4+", request=(
    F("GroupId", STRING),
    F("GenerationId", INT32),
    F("MemberId", STRING),
    F("GroupInstanceId", STRING, "3+", nullable="3+", default=None),
), response=(
    F("ThrottleTimeMs", INT32, "1+"),
    F("ErrorCode", INT16),
))

LEAVE_GROUP = Api(13, "LeaveGroup", "0-4", flexible="4+", request=(
    F("GroupId", STRING),
    F("MemberId", STRING, "0-2"),
    F("Members", ARRAY(S("MemberIdentity",
        F("MemberId", STRING, "3+"),
        F("GroupInstanceId", STRING, "3+", nullable="3+", default=None))), "3+"),
), response=(
    F("ThrottleTimeMs", INT32, "1+"),
    F("ErrorCode", INT16),
    F("Members", ARRAY(S("MemberResponse",
        F("MemberId", STRING, "3+"),
        F("GroupInstanceId", STRING, "3+", nullable="3+"),
        F("ErrorCode", INT16, "3+"))), "3+"),
))

# v9 is v8 on the wire; it is the version KIP-848 members must commit with
# (ConsumerGroup.validateOffsetCommit), and an unknown group answers GROUP_ID_NOT_FOUND.
OFFSET_COMMIT = Api(8, "OffsetCommit", "0-9", flexible="8+", request=(
    F("GroupId", STRING),
    F("GenerationIdOrMemberEpoch", INT32, "1+", default=-1),
    F("MemberId", STRING, "1+"),
    F("GroupInstanceId", STRING, "7+", nullable="7+", default=None),
    F("RetentionTimeMs", INT64, "2-4", default=-1),
    F("Topics", ARRAY(S("OffsetCommitRequestTopic",
        F("Name", STRING),
        F("Partitions", ARRAY(S("OffsetCommitRequestPartition",
            F("PartitionIndex", INT32),
            F("CommittedOffset", INT64),
            F("CommittedLeaderEpoch", INT32, "6+", default=-1),
            F("CommitTimestamp", INT64, "1", default=-1),
            F("CommittedMetadata", STRING, nullable="0+"))))))),
), response=(
    F("ThrottleTimeMs", INT32, "3+"),
    F("Topics", ARRAY(S("OffsetCommitResponseTopic",
        F("Name", STRING),
        F("Partitions", ARRAY(S("OffsetCommitResponsePartition",
            F("PartitionIndex", INT32),
            F("ErrorCode", INT16))))))),
))

OFFSET_FETCH = Api(9, "OffsetFetch", "0-7", flexible="6+", request=(
    F("GroupId", STRING, "0-7"),
    F("Topics", ARRAY(S("OffsetFetchRequestTopic",
        F("Name", STRING, "0-7"),
        F("PartitionIndexes", ARRAY(INT32), "0-7"))), "0-7", nullable="2-7"),
    F("RequireStable", BOOL, "7+"),
), response=(
    F("ThrottleTimeMs", INT32, "3+"),
    F("Topics", ARRAY(S("OffsetFetchResponseTopic",
        F("Name", STRING, "0-7"),
        F("Partitions", ARRAY(S("OffsetFetchResponsePartition",
            F("PartitionIndex", INT32, "0-7"),
            F("CommittedOffset", INT64, "0-7"),
            F("CommittedLeaderEpoch", INT32, "5-7", default=-1),
            F("Metadata", STRING, "0-7", nullable="0-7"),
            F("ErrorCode", INT16, "0-7"))), "0-7"))), "0-7"),
    F("ErrorCode", INT16, "2-7"),
))

LIST_GROUPS = Api(16, "ListGroups", "0-4", flexible="3+", request=(
    F("StatesFilter", ARRAY(STRING), "4+"),
), response=(
    F("ThrottleTimeMs", INT32, "1+"),
    F("ErrorCode", INT16),
    F("Groups", ARRAY(S("ListedGroup",
        F("GroupId", STRING),
        F("ProtocolType", STRING),
        F("GroupState", STRING, "4+")))),
))

DESCRIBE_GROUPS = Api(15, "DescribeGroups", "0-5", flexible="5+", request=(
    F("Groups", ARRAY(STRING)),
    F("IncludeAuthorizedOperations", BOOL, "3+"),
), response=(
    F("ThrottleTimeMs", INT32, "1+"),
    F("Groups", ARRAY(S("DescribedGroup",
        F("ErrorCode", INT16),
        F("GroupId", STRING),
        F("GroupState", STRING),
        F("ProtocolType", STRING),
        F("ProtocolData", STRING),
        F("Members", ARRAY(S("DescribedGroupMember",
            F("MemberId", STRING),
            F("GroupInstanceId", STRING, "4+", nullable="4+", default=None),
            F("ClientId", STRING),
            F("ClientHost", STRING),
            F("MemberMetadata", BYTES),
            F("MemberAssignment", BYTES)))),
        F("AuthorizedOperations", INT32, "3+", default=-2147483648)))),
))

DELETE_GROUPS = Api(42, "DeleteGroups", "0-2", flexible="2+", request=(
    F("GroupsNames", ARRAY(STRING)),
), response=(
    F("ThrottleTimeMs", INT32),
    F("Results", ARRAY(S("DeletableGroupResult",
        F("GroupId", STRING),
        F("ErrorCode", INT16)))),
))

OFFSET_DELETE = Api(47, "OffsetDelete", "0", flexible=None, request=(
    F("GroupId", STRING),
    F("Topics", ARRAY(S("OffsetDeleteRequestTopic",
        F("Name", STRING),
        F("Partitions", ARRAY(S("OffsetDeleteRequestPartition",
            F("PartitionIndex", INT32))))))),
), response=(
    F("ErrorCode", INT16),
    F("ThrottleTimeMs", INT32),
    F("Topics", ARRAY(S("OffsetDeleteResponseTopic",
        F("Name", STRING),
        F("Partitions", ARRAY(S("OffsetDeleteResponsePartition",
            F("PartitionIndex", INT32),
            F("ErrorCode", INT16))))))),
))

# KIP-848's heartbeat (ConsumerGroupHeartbeatRequest/Response.json): v0 has the coordinator
# name the member, v1 (KIP-1082) lets the client do it and adds SubscribedTopicRegex.
# librdkafka 2.16 sends v1 only (rd_kafka_ConsumerGroupHeartbeatRequest).
CONSUMER_GROUP_HEARTBEAT = Api(68, "ConsumerGroupHeartbeat", "0-1", flexible="0+", request=(
    F("GroupId", STRING),
    F("MemberId", STRING),
    F("MemberEpoch", INT32),
    F("InstanceId", STRING, nullable="0+", default=None),
    F("RackId", STRING, nullable="0+", default=None),
    F("RebalanceTimeoutMs", INT32, default=-1),
    F("SubscribedTopicNames", ARRAY(STRING), nullable="0+", default=None),
    F("SubscribedTopicRegex", STRING, "1+", nullable="1+", default=None),
    F("ServerAssignor", STRING, nullable="0+", default=None),
    F("TopicPartitions", ARRAY(S("TopicPartitions",
        F("TopicId", UUID),
        F("Partitions", ARRAY(INT32)))), nullable="0+", default=None),
), response=(
    F("ThrottleTimeMs", INT32),
    F("ErrorCode", INT16),
    F("ErrorMessage", STRING, nullable="0+", default=None),
    F("MemberId", STRING, nullable="0+", default=None),
    F("MemberEpoch", INT32),
    F("HeartbeatIntervalMs", INT32),
    F("Assignment", S("Assignment",
        F("TopicPartitions", ARRAY(S("TopicPartitions",
            F("TopicId", UUID),
            F("Partitions", ARRAY(INT32)))))), nullable="0+", default=None),
))

# ConsumerGroupDescribe{Request,Response}.json: v0 is what librdkafka 2.16's admin client
# sends (rd_kafka_ConsumerGroupDescribeRequest), falling back to DescribeGroups for a group
# answered GROUP_ID_NOT_FOUND; v1 (MemberType) is not served.
_CGD_ASSIGNMENT = S("Assignment",
    F("TopicPartitions", ARRAY(S("TopicPartitions",
        F("TopicId", UUID),
        F("TopicName", STRING),
        F("Partitions", ARRAY(INT32))))))

CONSUMER_GROUP_DESCRIBE = Api(69, "ConsumerGroupDescribe", "0", flexible="0+", request=(
    F("GroupIds", ARRAY(STRING)),
    F("IncludeAuthorizedOperations", BOOL),
), response=(
    F("ThrottleTimeMs", INT32),
    F("Groups", ARRAY(S("DescribedGroup",
        F("ErrorCode", INT16),
        F("ErrorMessage", STRING, nullable="0+", default=None),
        F("GroupId", STRING),
        F("GroupState", STRING),
        F("GroupEpoch", INT32),
        F("AssignmentEpoch", INT32),
        F("AssignorName", STRING),
        F("Members", ARRAY(S("Member",
            F("MemberId", STRING),
            F("InstanceId", STRING, nullable="0+", default=None),
            F("RackId", STRING, nullable="0+", default=None),
            F("MemberEpoch", INT32),
            F("ClientId", STRING),
            F("ClientHost", STRING),
            F("SubscribedTopicNames", ARRAY(STRING)),
            F("SubscribedTopicRegex", STRING, nullable="0+", default=None),
            F("Assignment", _CGD_ASSIGNMENT),
            F("TargetAssignment", _CGD_ASSIGNMENT)))),
        F("AuthorizedOperations", INT32, default=-2147483648)))),
))

GROUP_APIS = (
    FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP, OFFSET_COMMIT, OFFSET_FETCH, LIST_GROUPS,
    DESCRIBE_GROUPS, DELETE_GROUPS, OFFSET_DELETE, CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE,
)

__all__ = [
    "CONSUMER_GROUP_DESCRIBE", "CONSUMER_GROUP_HEARTBEAT",
    "DELETE_GROUPS", "DESCRIBE_GROUPS", "FIND_COORDINATOR", "GROUP_APIS", "HEARTBEAT", "JOIN_GROUP",
    "LEAVE_GROUP", "LIST_GROUPS", "OFFSET_COMMIT", "OFFSET_DELETE", "OFFSET_FETCH", "SYNC_GROUP",
]
