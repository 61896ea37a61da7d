"""Kafka's admin and authentication APIs, declared once as tables (see :mod:`adapters.kafka.table`).

CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
IncrementalAlterConfigs, DeleteRecords, DescribeCluster, SaslHandshake and
SaslAuthenticate, request and response, in the versions Ferry serves (facts of
Kafka's message spec files). CreateTopics spells two of its fields with a
lower-case first letter (``timeoutMs``, ``validateOnly``); ``spec_name``
keeps that spelling.
"""

from __future__ import annotations

from .table import Api, F, S
from .types import ARRAY, BOOL, BYTES, INT16, INT32, INT64, INT8, STRING, UUID

CREATE_TOPICS = Api(19, "CreateTopics", "0-7", flexible="5+", request=(
    F("Topics", ARRAY(S("CreatableTopic",
        F("Name", STRING),
        F("NumPartitions", INT32),
        F("ReplicationFactor", INT16),
        F("Assignments", ARRAY(S("CreatableReplicaAssignment",
            F("PartitionIndex", INT32),
            F("BrokerIds", ARRAY(INT32))))),
        F("Configs", ARRAY(S("CreatableTopicConfig",
            F("Name", STRING),
            F("Value", STRING, nullable="0+"))))))),
    F("timeoutMs", INT32, default=60000),
    F("validateOnly", BOOL, "1+"),
), response=(
    F("ThrottleTimeMs", INT32, "2+"),
    F("Topics", ARRAY(S("CreatableTopicResult",
        F("Name", STRING),
        F("TopicId", UUID, "7+"),
        F("ErrorCode", INT16),
        F("ErrorMessage", STRING, "1+", nullable="0+"),
        F("TopicConfigErrorCode", INT16, "5+", tag=0, tagged="5+"),
        F("NumPartitions", INT32, "5+", default=-1),
        F("ReplicationFactor", INT16, "5+", default=-1),
        F("Configs", ARRAY(S("CreatableTopicConfigs",
            F("Name", STRING, "5+"),
            F("Value", STRING, "5+", nullable="5+"),
            F("ReadOnly", BOOL, "5+"),
            F("ConfigSource", INT8, "5+", default=-1),
            F("IsSensitive", BOOL, "5+"))), "5+", nullable="5+")))),
))

DELETE_TOPICS = Api(20, "DeleteTopics", "0-6", flexible="4+", request=(
    F("Topics", ARRAY(S("DeleteTopicState",
        F("Name", STRING, "6+", nullable="6+", default=None),
        F("TopicId", UUID, "6+"))), "6+"),
    F("TopicNames", ARRAY(STRING), "0-5"),
    F("TimeoutMs", INT32),
), response=(
    F("ThrottleTimeMs", INT32, "1+"),
    F("Responses", ARRAY(S("DeletableTopicResult",
        F("Name", STRING, nullable="6+"),
        F("TopicId", UUID, "6+"),
        F("ErrorCode", INT16),
        F("ErrorMessage", STRING, "5+", nullable="5+", default=None)))),
))

CREATE_PARTITIONS = Api(37, "CreatePartitions", "0-3", flexible="2+", request=(
    F("Topics", ARRAY(S("CreatePartitionsTopic",
        F("Name", STRING),
        F("Count", INT32),
        F("Assignments", ARRAY(S("CreatePartitionsAssignment",
            F("BrokerIds", ARRAY(INT32)))), nullable="0+")))),
    F("TimeoutMs", INT32),
    F("ValidateOnly", BOOL),
), response=(
    F("ThrottleTimeMs", INT32),
    F("Results", ARRAY(S("CreatePartitionsTopicResult",
        F("Name", STRING),
        F("ErrorCode", INT16),
        F("ErrorMessage", STRING, nullable="0+", default=None)))),
))

DESCRIBE_CONFIGS = Api(32, "DescribeConfigs", "0-4", flexible="4+", request=(
    F("Resources", ARRAY(S("DescribeConfigsResource",
        F("ResourceType", INT8),
        F("ResourceName", STRING),
        F("ConfigurationKeys", ARRAY(STRING), nullable="0+")))),
    F("IncludeSynonyms", BOOL, "1+"),
    F("IncludeDocumentation", BOOL, "3+"),
), response=(
    F("ThrottleTimeMs", INT32),
    F("Results", ARRAY(S("DescribeConfigsResult",
        F("ErrorCode", INT16),
        F("ErrorMessage", STRING, nullable="0+"),
        F("ResourceType", INT8),
        F("ResourceName", STRING),
        F("Configs", ARRAY(S("DescribeConfigsResourceResult",
            F("Name", STRING),
            F("Value", STRING, nullable="0+"),
            F("ReadOnly", BOOL),
            F("IsDefault", BOOL, "0"),
            F("ConfigSource", INT8, "1+", default=-1),
            F("IsSensitive", BOOL),
            F("Synonyms", ARRAY(S("DescribeConfigsSynonym",
                F("Name", STRING, "1+"),
                F("Value", STRING, "1+", nullable="0+"),
                F("Source", INT8, "1+"))), "1+"),
            F("ConfigType", INT8, "3+"),
            F("Documentation", STRING, "3+", nullable="0+"))))))),
))

SASL_HANDSHAKE = Api(17, "SaslHandshake", "0-1", flexible=None, request=(
    F("Mechanism", STRING),
), response=(
    F("ErrorCode", INT16),
    F("Mechanisms", ARRAY(STRING)),
))

SASL_AUTHENTICATE = Api(36, "SaslAuthenticate", "0-2", flexible="2+", request=(
    F("AuthBytes", BYTES),
), response=(
    F("ErrorCode", INT16),
    F("ErrorMessage", STRING, nullable="0+"),
    F("AuthBytes", BYTES),
    F("SessionLifetimeMs", INT64, "1+"),
))

DESCRIBE_CLUSTER = Api(60, "DescribeCluster", "0-1", flexible="0+", request=(
    F("IncludeClusterAuthorizedOperations", BOOL),
    F("EndpointType", INT8, "1+", default=1),
), response=(
    F("ThrottleTimeMs", INT32),
    F("ErrorCode", INT16),
    F("ErrorMessage", STRING, nullable="0+", default=None),
    F("EndpointType", INT8, "1+", default=1),
    F("ClusterId", STRING),
    F("ControllerId", INT32, default=-1),
    F("Brokers", ARRAY(S("DescribeClusterBroker",
        F("BrokerId", INT32),
        F("Host", STRING),
        F("Port", INT32),
        F("Rack", STRING, nullable="0+", default=None)))),
    F("ClusterAuthorizedOperations", INT32, default=-2147483648),
))

DELETE_RECORDS = Api(21, "DeleteRecords", "0-2", flexible="2+", request=(
    F("Topics", ARRAY(S("DeleteRecordsTopic",
        F("Name", STRING),
        F("Partitions", ARRAY(S("DeleteRecordsPartition",
            F("PartitionIndex", INT32),
            F("Offset", INT64))))))),
    F("TimeoutMs", INT32),
), response=(
    F("ThrottleTimeMs", INT32),
    F("Topics", ARRAY(S("DeleteRecordsTopicResult",
        F("Name", STRING),
        F("Partitions", ARRAY(S("DeleteRecordsPartitionResult",
            F("PartitionIndex", INT32),
            F("LowWatermark", INT64),
            F("ErrorCode", INT16))))))),
))

INCREMENTAL_ALTER_CONFIGS = Api(44, "IncrementalAlterConfigs", "0-1", flexible="1+", request=(
    F("Resources", ARRAY(S("AlterConfigsResource",
        F("ResourceType", INT8),
        F("ResourceName", STRING),
        F("Configs", ARRAY(S("AlterableConfig",
            F("Name", STRING),
            F("ConfigOperation", INT8),
            F("Value", STRING, nullable="0+"))))))),
    F("ValidateOnly", BOOL),
), response=(
    F("ThrottleTimeMs", INT32),
    F("Responses", ARRAY(S("AlterConfigsResourceResponse",
        F("ErrorCode", INT16),
        F("ErrorMessage", STRING, nullable="0+"),
        F("ResourceType", INT8),
        F("ResourceName", STRING)))),
))

ADMIN_APIS = (
    CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, DESCRIBE_CONFIGS, SASL_HANDSHAKE, SASL_AUTHENTICATE,
    DESCRIBE_CLUSTER, DELETE_RECORDS, INCREMENTAL_ALTER_CONFIGS,
)

__all__ = [
    "ADMIN_APIS", "CREATE_PARTITIONS", "CREATE_TOPICS", "DELETE_RECORDS", "DELETE_TOPICS", "DESCRIBE_CLUSTER",
    "DESCRIBE_CONFIGS", "INCREMENTAL_ALTER_CONFIGS", "SASL_AUTHENTICATE", "SASL_HANDSHAKE",
]
