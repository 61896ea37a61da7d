"""Kafka's producer-id and transaction APIs, declared once as tables (see :mod:`adapters.kafka.table`).

InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and
TxnOffsetCommit, request and response, in the versions Ferry serves (facts of
Kafka's message spec files). A default kafka-python producer calls
InitProducerId (kafka.md section 1), so it is served even without
transactions.
"""

from __future__ import annotations

from .table import Api, F, S
from .types import ARRAY, BOOL, INT16, INT32, INT64, STRING

INIT_PRODUCER_ID = Api(22, "InitProducerId", "0-4", flexible="2+", request=(
    F("TransactionalId", STRING, nullable="0+"),
    F("TransactionTimeoutMs", INT32),
    F("ProducerId", INT64, "3+", default=-1),
    F("ProducerEpoch", INT16, "3+", default=-1),
), response=(
    F("ThrottleTimeMs", INT32),
    F("ErrorCode", INT16),
    F("ProducerId", INT64, default=-1),
    F("ProducerEpoch", INT16),
))

ADD_PARTITIONS_TO_TXN = Api(24, "AddPartitionsToTxn", "0-3", flexible="3+", request=(
    F("V3AndBelowTransactionalId", STRING, "0-3"),
    F("V3AndBelowProducerId", INT64, "0-3"),
    F("V3AndBelowProducerEpoch", INT16, "0-3"),
    F("V3AndBelowTopics", ARRAY(S("AddPartitionsToTxnTopic",
        F("Name", STRING),
        F("Partitions", ARRAY(INT32)))), "0-3"),
), response=(
    F("ThrottleTimeMs", INT32),
    F("ResultsByTopicV3AndBelow", ARRAY(S("AddPartitionsToTxnTopicResult",
        F("Name", STRING),
        F("ResultsByPartition", ARRAY(S("AddPartitionsToTxnPartitionResult",
            F("PartitionIndex", INT32),
            F("PartitionErrorCode", INT16)))))), "0-3"),
))

ADD_OFFSETS_TO_TXN = Api(25, "AddOffsetsToTxn", "0-3", flexible="3+", request=(
    F("TransactionalId", STRING),
    F("ProducerId", INT64),
    F("ProducerEpoch", INT16),
    F("GroupId", STRING),
), response=(
    F("ThrottleTimeMs", INT32),
    F("ErrorCode", INT16),
))

END_TXN = Api(26, "EndTxn", "0-3", flexible="3+", request=(
    F("TransactionalId", STRING),
    F("ProducerId", INT64),
    F("ProducerEpoch", INT16),
    F("Committed", BOOL),
), response=(
    F("ThrottleTimeMs", INT32),
    F("ErrorCode", INT16),
))

TXN_OFFSET_COMMIT = Api(28, "TxnOffsetCommit", "0-3", flexible="3+", request=(
    F("TransactionalId", STRING),
    F("GroupId", STRING),
    F("ProducerId", INT64),
    F("ProducerEpoch", INT16),
    F("GenerationId", INT32, "3+", default=-1),
    F("MemberId", STRING, "3+"),
    F("GroupInstanceId", STRING, "3+", nullable="3+", default=None),
    F("Topics", ARRAY(S("TxnOffsetCommitRequestTopic",
        F("Name", STRING),
        F("Partitions", ARRAY(S("TxnOffsetCommitRequestPartition",
            F("PartitionIndex", INT32),
            F("CommittedOffset", INT64),
            F("CommittedLeaderEpoch", INT32, "2+", default=-1),
            F("CommittedMetadata", STRING, nullable="0+"))))))),
), response=(
    F("ThrottleTimeMs", INT32),
    F("Topics", ARRAY(S("TxnOffsetCommitResponseTopic",
        F("Name", STRING),
        F("Partitions", ARRAY(S("TxnOffsetCommitResponsePartition",
            F("PartitionIndex", INT32),
            F("ErrorCode", INT16))))))),
))

TXN_APIS = (INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT)

__all__ = [
    "ADD_OFFSETS_TO_TXN", "ADD_PARTITIONS_TO_TXN", "END_TXN", "INIT_PRODUCER_ID", "TXN_APIS",
    "TXN_OFFSET_COMMIT",
]
