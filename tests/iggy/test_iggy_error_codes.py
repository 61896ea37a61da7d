"""Not-found and invalid-argument replies per generation (issue 15), table-tested with
the real clients against one gateway on 127.0.0.1 port 0.

The current generation (dialect 3, apache-iggy 0.9.0) is checked against apache/iggy's
server at commit cc269ef70 (the one protocols/iggy-current.md was written from): each row
cites the reference source that decides its answer. Paths are in that repository:
``result.rs`` = core/metadata/src/stm/result.rs, ``responses.rs`` =
core/server/src/responses.rs, ``dispatch.rs`` = core/server/src/dispatch.rs, ``sdk
messages.rs`` = core/common/src/traits/binary_impls/messages.rs. The texts are the 0.9.0
client's Display forms with defaulted fields (iggy-current.md 9), so the code a row
stands for is written next to it. Rows whose answer differs by generation are also run
with apache-iggy 0.8.0 and iggy-py 0.4.0, which keep their own codes (name variants).
Every scenario ends with a ping and a read on the same connection: no error closed it."""

from __future__ import annotations

import pytest

from adapters.iggy.errors import IggyError as E
from adapters.iggy.types import ConsumerId
from core.broker import Broker
from iggy_clients import run_scenario
from iggy_pair import Client

STREAM = "Stream with ID: 0 was not found."  # 1009 StreamIdNotFound
TOPIC = "Topic with ID: 0 for stream with ID: 0 was not found."  # 2010 TopicIdNotFound
PARTITION = "Partition with ID: 0 for topic with ID: 0 for stream with ID: 0 was not found."  # 3007
GROUP = "Consumer group with ID: 0 for topic with ID: 0 was not found."  # 5000 ConsumerGroupIdNotFound
MEMBER = "Consumer group member with client ID: 0 for group with ID: 0 for topic with ID: 0 was not found."  # 5006
RESOURCE = "Resource with key:  was not found."  # 20 ResourceNotFound
EMPTY = {"raw": ""}  # status 0, empty body

# step of clients/current_errors.py -> what the reference server answers (and where it decides)
CURRENT = {
    # -- streams
    "get_stream_missing": {"value": None},  # responses.rs:922 build_get_stream_response -> Empty
    "update_stream_missing": {"error": STREAM},  # result.rs:154 UpdateStreamResult::StreamNotFound = 1009 (by name too)
    "update_stream_missing_id": {"error": STREAM},  # result.rs:154
    "purge_stream_missing": {"error": STREAM},  # result.rs:160 PurgeStreamResult
    "delete_stream_missing": {"error": STREAM},  # result.rs:159 DeleteStreamResult
    # -- topics
    "get_topic_missing_stream": {"value": None},  # responses.rs:1166 build_get_topic_response -> Ok(None)
    "get_topic_missing": {"value": None},  # responses.rs:1166
    "get_topics_missing_stream": {"list": []},  # responses.rs:1204 build_get_topics_response: topics: Vec::new()
    "get_topics_missing_stream_id": {"list": []},  # responses.rs:1204
    "create_topic_missing_stream": {"error": STREAM},  # result.rs:163 CreateTopicResult::StreamNotFound
    "update_topic_missing": {"error": TOPIC},  # result.rs:171 UpdateTopicResult::TopicNotFound = 2010
    "purge_topic_missing": {"error": TOPIC},  # result.rs:181 PurgeTopicResult
    "delete_topic_missing_stream": {"error": STREAM},  # result.rs:177 DeleteTopicResult
    "delete_topic_missing": {"error": TOPIC},  # result.rs:177
    # -- partitions and segments
    "create_partitions_missing_topic": {"error": TOPIC},  # result.rs:190 CreatePartitionsResult
    "create_partitions_zero": {"error": "Too many partitions"},  # 2015: dispatch.rs:805 (pre-consensus)
    "delete_partitions_zero": {"error": "Too many partitions"},  # 2015: dispatch.rs:805 (pre-consensus)
    "delete_partitions_too_many": {"error": "Invalid partitions count"},  # 2019: result.rs:196 DeletePartitionsResult
    "delete_segments_missing_stream": {"error": STREAM},  # result.rs:204 TruncatePartitionResult (dispatch.rs:3284)
    # -- consumer groups
    "get_group_missing": {"value": None},  # responses.rs:603 consumer_group_details None -> Empty
    "get_group_missing_stream": {"error": STREAM},  # responses.rs:603 -> responses.rs:1236 ensure_topic_exists
    "get_group_missing_topic": {"error": TOPIC},  # responses.rs:1236
    "get_groups_missing_stream": {"error": STREAM},  # responses.rs:628 build_consumer_groups_response -> :1236
    "get_groups_missing_topic": {"error": TOPIC},  # responses.rs:628
    "create_group_missing_topic": {"error": TOPIC},  # result.rs:244 CreateConsumerGroupResult
    "join_missing_group": {"error": GROUP},  # result.rs:262 JoinConsumerGroupResult::ConsumerGroupNotFound = 5000
    "join_missing_group_id": {"error": GROUP},  # result.rs:262
    "join_missing_stream": {"error": STREAM},  # result.rs:262
    "leave_missing_group": {"error": GROUP},  # result.rs:267 LeaveConsumerGroupResult
    "leave_not_a_member": {"error": MEMBER},  # result.rs:267, metadata/src/stm/consumer_group.rs:691
    "delete_missing_group": {"error": GROUP},  # result.rs:257 DeleteConsumerGroupResult
    "sync_missing_group": EMPTY,  # dispatch.rs:2333 handle_sync_consumer_group: any miss -> Bytes::new()
    "sync_missing_stream": EMPTY,  # dispatch.rs:2333
    "sync_not_a_member": EMPTY,  # dispatch.rs:2333
    # -- messages
    "poll_missing_stream": {"error": STREAM},  # dispatch.rs:2125 handle_poll_messages denies 1009/2010/3007 typed
    "poll_missing_topic": {"error": TOPIC},  # dispatch.rs:2125
    "poll_missing_partition": {"error": PARTITION},  # dispatch.rs:2125, responses.rs:434 resolve_partition_namespace
    "poll_count_zero": {"error": "Invalid messages count"},  # 4009 raised by the client: sdk binary_message.rs:40
    # partition 0, current offset 0, count 0: iggy_partition.rs:1502 (count 0 -> PollTier::Empty)
    "poll_count_zero_raw": {"raw": "00000000" "0000000000000000" "00000000"},
    # dispatch.rs:2482 resolve_poll_request fences a group poll (consumer_group_fence) -> empty poll with the
    # re-sync partition u32::MAX (dispatch.rs:2125); an explicit-partition poll returns it as no messages
    "poll_group_not_a_member": {"list": []},
    "poll_group_missing_group": {"list": []},
    # sdk messages.rs:171 poll_group_messages: SyncConsumerGroup is empty -> the client's own 5006
    "poll_group_no_assignment": {"error": MEMBER.replace("group with ID: 0 for topic with ID: 0",
                                                         "group with ID: nope for topic with ID: t")},
    "send_missing_stream": {"error": RESOURCE},  # dispatch.rs:1470 dispatch_partition_request -> 20 (:1510)
    "send_missing_topic": {"error": RESOURCE},  # dispatch.rs:1510
    "send_missing_partition": {"error": RESOURCE},  # dispatch.rs:1510
    # sdk messages.rs:132 resolve_partitioning: GetTopic is empty -> the client's own 2010, named as sent
    "send_balanced_missing_topic": {"error": "Topic with ID: nope for stream with ID: s was not found."},
    "flush_missing_stream": {"error": "Feature is unavailable"},  # 5: responses.rs:588 FLUSH_UNSAVED_BUFFER_CODE
    "flush": {"error": "Feature is unavailable"},  # responses.rs:588 (no on-demand flush at all)
    # -- consumer offsets
    "get_offset_missing_stream": EMPTY,  # dispatch.rs:2246 handle_get_consumer_offset: other errors -> empty
    "get_offset_missing_partition": {"error": PARTITION},  # dispatch.rs:2246: PartitionNotFound denied typed
    "get_offset_missing_group": EMPTY,  # dispatch.rs:2549 resolve_consumer_offset_request -> InvalidIdentifier -> empty
    "get_offset_none_stored": EMPTY,  # dispatch.rs:2246 stored: None -> Bytes::new()
    "store_offset_missing_stream": {"error": RESOURCE},  # responses.rs:329 -> dispatch.rs:1510
    "store_offset_missing_partition": {"error": RESOURCE},  # responses.rs:434 PartitionNotFound -> dispatch.rs:1510
    "store_offset_no_partition": {"error": RESOURCE},  # responses.rs:434 partition None -> InvalidIdentifier -> 20
    "store_offset_group_not_a_member": {"error": RESOURCE},  # responses.rs:259 fence_group_offset -> 20
    "store_offset_past_end": {"error": "Invalid offset: 0"},  # 4100: iggy_partition.rs:1973
    "store_offset_empty_partition": {"error": "Invalid offset: 0"},  # 4100: iggy_partition.rs:1973
    "delete_offset_missing_stream": {"error": RESOURCE},  # responses.rs:329 -> dispatch.rs:1510
    # 3021: iggy_partition.rs:1445 ensure_consumer_offset_exists
    "delete_offset_none_stored": {"error": "Consumer offset for consumer with ID: 0 was not found."},
    # -- clients
    "get_client_zero": EMPTY,  # dispatch.rs:1682 GET_CLIENT_CODE: no id check, not found -> empty
    "get_client_missing": EMPTY,  # dispatch.rs:1682
    "still_open": {"name": "s", "topics": 1},
}


def steps(lines):
    return {line["step"]: {k: v for k, v in line.items() if k != "step"} for line in lines}


def test_current_generation_not_found_and_invalid_argument_table(iggy_gateway, caplog):
    got = steps(run_scenario("apache-iggy==0.9.0", "current_errors.py", iggy_gateway.ports["iggy_tcp"]))
    assert list(got) == list(CURRENT)  # every case ran, in order, on one connection
    assert {step: reply for step, reply in got.items() if reply != CURRENT[step]} == {}
    assert not [r for r in caplog.records if r.exc_info], "a bad request logged a traceback"


# The rows that differ by generation, with the older clients: the name variants of
# iggy.md 9.1 / iggy-middle.md 9 (Debug forms), a 3007 for a missing partition on send
# and poll, where apache-iggy 0.9.0 gets 1009/2010 (poll) and 20 (send) above.
OLDER = {
    "get_stream_missing": {"value": None},  # iggy.md 9.2, iggy-middle.md 9: empty OK -> None
    "get_topic_missing": {"value": None},
    "poll_missing_stream": {"error": 'StreamNameNotFound("")'},  # 1010
    "poll_missing_topic": {"error": 'TopicNameNotFound("", "")'},  # 2011
    "poll_missing_partition": {"error": "PartitionNotFound(0, {zero}, {zero})"},  # 3007
    "send_missing_stream": {"error": 'StreamNameNotFound("")'},  # 1010
    "send_missing_topic": {"error": 'TopicNameNotFound("", "")'},  # 2011
    "send_missing_partition": {"error": "PartitionNotFound(0, {zero}, {zero})"},  # 3007
    "still_open": {"name": "s", "topics": 1},
}
ZERO_ID = {  # how each client's Debug form prints a defaulted identifier
    "apache-iggy==0.8.0": "Identifier { kind: Numeric, length: 4, value: [0, 0, 0, 0] }",
    "iggy-py==0.4.0": "0",
}


@pytest.mark.parametrize("spec", list(ZERO_ID))
def test_older_generations_keep_their_codes(iggy_gateway, spec, caplog):
    got = steps(run_scenario(spec, "older_errors.py", iggy_gateway.ports["iggy_tcp"]))
    expected = {step: {k: v.format(zero=ZERO_ID[spec]) if isinstance(v, str) else v for k, v in reply.items()}
                for step, reply in OLDER.items()}
    assert got == expected
    assert not [r for r in caplog.records if r.exc_info]


# -- every dialect, in process (no sockets): the same rows through the session -------------------
GROUP_ARGS = {"stream_id": "s", "topic_id": "t", "group_id": "nope"}
# command, arguments, dialect 3 (the current server, as CURRENT above), dialects 1, 2, 4, 5
BY_DIALECT = [
    ("consumer_group.join", GROUP_ARGS, (E.CONSUMER_GROUP_ID_NOT_FOUND, b""), (E.CONSUMER_GROUP_NAME_NOT_FOUND, b"")),
    ("consumer_group.delete", GROUP_ARGS, (E.CONSUMER_GROUP_ID_NOT_FOUND, b""),
     (E.CONSUMER_GROUP_NAME_NOT_FOUND, b"")),
    ("consumer_group.get", GROUP_ARGS, (0, b""), (0, b"")),
    ("consumer_group.get", {**GROUP_ARGS, "stream_id": "nope"}, (E.STREAM_ID_NOT_FOUND, b""), (0, b"")),
    ("consumer_group.list", {"stream_id": "nope", "topic_id": "t"}, (E.STREAM_ID_NOT_FOUND, b""),
     (E.STREAM_NAME_NOT_FOUND, b"")),
    ("stream.delete", {"stream_id": "nope"}, (E.STREAM_ID_NOT_FOUND, b""), (E.STREAM_NAME_NOT_FOUND, b"")),
    ("topic.purge", {"stream_id": "s", "topic_id": "nope"}, (E.TOPIC_ID_NOT_FOUND, b""),
     (E.TOPIC_NAME_NOT_FOUND, b"")),
    ("topic.list", {"stream_id": "nope"}, (0, b"\0\0\0\0"), (E.STREAM_NAME_NOT_FOUND, b"")),
    ("client.get", {"client_id": 0}, (0, b""), (E.INVALID_CLIENT_ID, b"")),
    ("message.flush", {"stream_id": "nope", "topic_id": "t", "partition_id": 0}, (E.FEATURE_UNAVAILABLE, b""),
     (E.STREAM_NAME_NOT_FOUND, b"")),
]


@pytest.mark.parametrize("dialect", [1, 2, 3, 4, 5])
def test_each_dialect_answers_as_its_server(tmp_path, dialect):
    """Dialect 3 as the current server; 1, 2, 4 and 5 keep the variant matching the
    identifier sent (iggy.md 9.1, iggy-middle.md 9) and their empty GETs."""
    broker = Broker.open(tmp_path / "data")
    try:
        c = Client(broker, dialect)
        assert c.login() == 0
        c.ok("stream.create", name="s")
        c.ok("topic.create", stream_id="s", partitions_count=2, name="t")
        c.ok("consumer_group.create", stream_id="s", topic_id="t", name="g")
        for command, args, current, older in BY_DIALECT:
            assert c.call(command, **args) == (current if dialect == 3 else older), (command, args)
        # a missing partition of a store: 20 for dialect 3 (a partition-plane op), 3007 before
        first = 1 if dialect in (1, 5) else 0
        status, _ = c.call("consumer_offset.store", consumer=ConsumerId(1, 1), stream_id="s", topic_id="t",
                           partition_id=first + 5, offset=0)
        assert status == (E.RESOURCE_NOT_FOUND if dialect == 3 else E.PARTITION_NOT_FOUND)
        assert c.call("stream.get", stream_id="s")[0] == 0  # the session goes on
    finally:
        broker.close()
