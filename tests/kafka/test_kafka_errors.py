"""Kafka's error-code table: numbers and names as Kafka's Errors list has them, and which
ones clients retry."""

from __future__ import annotations

import pytest

from adapters.kafka.errors import RETRIABLE, ErrorCode, is_retriable


@pytest.mark.parametrize("name,code", [
    ("UNKNOWN_SERVER_ERROR", -1), ("NONE", 0), ("OFFSET_OUT_OF_RANGE", 1), ("CORRUPT_MESSAGE", 2),
    ("UNKNOWN_TOPIC_OR_PARTITION", 3), ("NOT_LEADER_OR_FOLLOWER", 6), ("NOT_COORDINATOR", 16),
    ("ILLEGAL_GENERATION", 22), ("INCONSISTENT_GROUP_PROTOCOL", 23), ("UNKNOWN_MEMBER_ID", 25),
    ("REBALANCE_IN_PROGRESS", 27), ("UNSUPPORTED_SASL_MECHANISM", 33), ("UNSUPPORTED_VERSION", 35),
    ("TOPIC_ALREADY_EXISTS", 36), ("INVALID_REQUEST", 42), ("CONCURRENT_TRANSACTIONS", 51),
    ("SASL_AUTHENTICATION_FAILED", 58), ("MEMBER_ID_REQUIRED", 79), ("UNKNOWN_TOPIC_ID", 100),
    ("INVALID_REGULAR_EXPRESSION", 128),
])
def test_codes_by_name(name, code):
    assert ErrorCode[name] == code and ErrorCode(code).name == name


def test_the_list_is_complete_and_unique():
    assert sorted(ErrorCode) == list(range(-1, 129))


def test_retriable_codes():
    asked = {ErrorCode.NOT_COORDINATOR, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.REBALANCE_IN_PROGRESS}
    assert asked & RETRIABLE == {ErrorCode.NOT_COORDINATOR, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert is_retriable(14) and not is_retriable(0) and not is_retriable(35) and not is_retriable(-1)
