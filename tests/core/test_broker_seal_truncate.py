"""Broker: sealed topics, logical truncation at a byte position, the byte
bounds of a partition and topic attributes (core/topicops.py,
core/topicstate.py, metadata migration 2)."""

from __future__ import annotations

import logging

import pytest
from broker_helpers import Acks, items, offsets, open_broker, payloads

from core import metadb
from core.errors import (
    InvalidArgument,
    InvalidName,
    InvalidOffset,
    PreconditionFailed,
    TopicNotFound,
    TopicSealed,
)
from core.log import AppendInput
from core.log.encoded import block_of
from core import topicstate
from core.model import TopicSettings

# Records of 40-byte payloads, two per flush: a batch is 56 + 2 x 104 bytes, so
# a 550-byte segment holds two batches, four records. In the Pravega byte view
# each record is 8 + 40 = 48 bytes: segment k covers bytes 192k .. 192(k+1).
PAYLOAD = 40
EVENT = 8 + PAYLOAD
SEGMENT_BYTES = 550


def _open(path):
    return open_broker(path, segment_bytes=SEGMENT_BYTES)


@pytest.fixture
def broker(tmp_path):
    b = _open(tmp_path)
    b.create_stream("s")
    b.create_topic("s", "t", partitions=2)
    yield b
    b.close()


def _fill(broker, n=20, pid=0):
    """``n`` records in partition ``pid`` of s/t, flushed two at a time (five segments for 20)."""
    for i in range(0, n, 2):
        broker.append("s", "t", [AppendInput(f"m{j:06d}".encode().ljust(PAYLOAD, b".")) for j in (i, i + 1)],
                      partition=pid)
        broker.partition("s", "t", pid).flush()


def _segments(broker, pid=0):
    return [base for base, _n, _size in broker.partition("s", "t", pid).segment_positions()]


# -- sealing ----------------------------------------------------------------------------
def test_seal_refuses_both_append_paths_and_is_idempotent(broker):
    broker.append("s", "t", items("before"), partition=0)
    info = broker.topic_state.seal_topic("s", "t")
    assert info.sealed and broker.get_topic("s", "t").sealed
    assert broker.topic_state.seal_topic("s", "t") == info  # again: same answer, nothing changes
    with pytest.raises(TopicSealed) as err:
        broker.append("s", "t", items("after"), partition=1)
    assert isinstance(err.value, PreconditionFailed)
    assert err.value.details == {"stream_id": info.stream_id, "topic_id": info.id}
    with pytest.raises(TopicSealed):
        broker.append_records("s", "t", block_of(items("after")), 1)
    assert payloads(broker.read("s", "t", 0, 0, 10)) == [b"before"]  # reads go on
    assert payloads(broker.read("s", "t", 1, 0, 10)) == []


def test_other_topics_and_new_topics_are_not_sealed(broker):
    broker.create_topic("s", "u")
    broker.topic_state.seal_topic("s", "t")
    broker.append("s", "u", items("x"))
    assert not broker.get_topic("s", "u").sealed
    assert [t.sealed for t in broker.list_topics("s")] == [True, False]


def test_seal_unknown_topic_is_topic_not_found(broker):
    with pytest.raises(TopicNotFound):
        broker.topic_state.seal_topic("s", "nope")


def test_sealing_waits_for_nothing_accepted_appends_still_become_durable(broker):
    acks = Acks()
    result = broker.append("s", "t", items("a", "b"), partition=0, on_durable=acks)
    broker.topic_state.seal_topic("s", "t")
    assert acks.outcomes == []  # nothing was written yet, and sealing did not wait for it
    broker.flush()
    assert acks.outcomes == [result]  # acknowledged as usual, not failed


def test_sealed_survives_reopen_and_update_and_purge(tmp_path, broker):
    broker.append("s", "t", items("x"), partition=0)
    broker.topic_state.seal_topic("s", "t")
    broker.update_topic("s", "t", settings=TopicSettings(message_expiry=5))
    broker.purge_topic("s", "t")  # purging drops records, not the seal
    assert broker.get_topic("s", "t").sealed
    broker.close()
    again = _open(tmp_path)
    try:
        assert again.get_topic("s", "t").sealed
        with pytest.raises(TopicSealed):
            again.append("s", "t", items("y"))
    finally:
        again.close()


def test_seal_drops_cached_subject_lookups(broker):
    assert broker.topic_for_subject("s.t").sealed is False
    broker.topic_state.seal_topic("s", "t")
    assert broker.topic_for_subject("s.t").sealed is True


def test_a_version_1_store_migrates_to_unsealed_topics(tmp_path):
    db = metadb.MetaDb(tmp_path / "metadata.sqlite")  # the schema Ferry shipped first, written by hand
    db.migrate(metadb.MIGRATIONS[:1])
    with db.transaction() as conn:
        conn.execute("INSERT INTO streams (id, name, created_at) VALUES (0, 's', 1)")
        conn.execute("INSERT INTO topics (stream_id, id, name, created_at, message_expiry, max_topic_size,"
                     " compression, replication_factor) VALUES (0, 0, 't', 1, 0, 0, 'none', 1)")
        conn.executemany("INSERT INTO partitions (stream_id, topic_id, id, created_at) VALUES (0, 0, ?, 1)",
                         [(0,), (1,)])
    db.close()
    new = _open(tmp_path)
    try:
        assert new.meta.schema_version() == metadb.MIGRATIONS[-1].version
        info = new.get_topic("s", "t")
        assert not info.sealed and info.partitions_count == 2
        assert (info.segment_bytes, info.fsync) == (0, "")  # migration 3: the broker's log settings
        assert new.topic_state.partition_byte_start("s", "t", 1) == 0 and new.topic_state.topic_attrs("s", "t") == {}
        assert new.tables.list() == []
        new.append("s", "t", items("works"), partition=0)
    finally:
        new.close()


# -- truncation -------------------------------------------------------------------------
def test_truncate_records_the_position_and_deletes_whole_segments_below(broker):
    _fill(broker)
    assert _segments(broker) == [0, 4, 8, 12, 16]
    pos = 2 * 4 * EVENT + EVENT + 5  # inside record 9, the second of segment 8
    assert broker.topic_state.truncate_partition("s", "t", 0, pos) == pos
    assert broker.topic_state.partition_byte_start("s", "t", 0) == pos
    assert _segments(broker) == [8, 12, 16]  # segments 0 and 4 end before pos; 8 holds it
    part = broker.partition("s", "t", 0)
    assert part.byte_start == 8 * EVENT < pos  # the log keeps whole segments
    # Other protocols read by offset: only the whole-segment deletion shows.
    assert part.first_offset == 8
    assert offsets(broker.read("s", "t", 0, 0, 3)) == [8, 9, 10]
    assert broker.topic_state.partition_byte_start("s", "t", 1) == 0  # per partition


def test_truncate_at_a_segment_boundary_deletes_that_segment_too(broker):
    _fill(broker)
    assert broker.topic_state.truncate_partition("s", "t", 0, 8 * EVENT) == 8 * EVENT
    assert _segments(broker) == [8, 12, 16]


def test_truncate_is_monotonic_and_bounded(broker):
    _fill(broker)
    end = broker.topic_state.partition_byte_end("s", "t", 0)
    assert end == 20 * EVENT
    assert broker.topic_state.truncate_partition("s", "t", 0, 500) == 500
    assert broker.topic_state.truncate_partition("s", "t", 0, 100) == 500  # lower: nothing changes
    assert broker.topic_state.truncate_partition("s", "t", 0, 500) == 500
    with pytest.raises(InvalidOffset):
        broker.topic_state.truncate_partition("s", "t", 0, end + 1)
    with pytest.raises(InvalidOffset):
        broker.topic_state.truncate_partition("s", "t", 0, -1)
    with pytest.raises(InvalidArgument):
        broker.topic_state.truncate_partition("s", "t", 0, "7")
    assert broker.topic_state.partition_byte_start("s", "t", 0) == 500
    assert broker.topic_state.truncate_partition("s", "t", 0, end) == end  # everything: all sealed segments go
    assert _segments(broker) == [16]  # the active segment never does
    assert broker.topic_state.partition_byte_start("s", "t", 0) == end
    broker.append("s", "t", items("new"), partition=0)
    assert broker.topic_state.partition_byte_end("s", "t", 0) == end + 8 + 3  # pending appends count


def test_truncation_survives_reopen(tmp_path, broker):
    _fill(broker)
    broker.topic_state.truncate_partition("s", "t", 0, 300)
    broker.close()
    again = _open(tmp_path)
    try:
        assert again.topic_state.partition_byte_start("s", "t", 0) == 300
        assert again.topic_state.partition_byte_start("s", "t", 1) == 0
    finally:
        again.close()


def test_open_finishes_a_truncation_cut_short_by_a_crash(tmp_path, broker):
    _fill(broker)
    sid, tid = broker.get_topic("s", "t").stream_id, broker.get_topic("s", "t").id
    broker.meta.topic_state.set_logical_start(sid, tid, 0, 9 * EVENT)  # recorded, segments not yet deleted
    assert _segments(broker) == [0, 4, 8, 12, 16]
    broker.close()
    again = _open(tmp_path)
    try:
        assert _segments(again) == [8, 12, 16]
        assert again.topic_state.partition_byte_start("s", "t", 0) == 9 * EVENT
    finally:
        again.close()


def test_open_moves_back_a_start_past_the_end_of_a_log_that_lost_its_tail(tmp_path, broker, caplog):
    _fill(broker, 4)
    sid, tid = broker.get_topic("s", "t").stream_id, broker.get_topic("s", "t").id
    # A truncation at a position that was only pending when the process died.
    broker.meta.topic_state.set_logical_start(sid, tid, 0, 10 * EVENT)
    broker.close()
    with caplog.at_level(logging.WARNING, logger="ferry.broker"):
        again = _open(tmp_path)
    try:
        state = again.topic_state
        assert state.partition_byte_start("s", "t", 0) == 4 * EVENT == state.partition_byte_end("s", "t", 0)
        assert "past the log's end" in caplog.text
        again.append("s", "t", items("readable"), partition=0)  # new appends lie after the start
        assert again.topic_state.partition_byte_end("s", "t", 0) > again.topic_state.partition_byte_start("s", "t", 0)
    finally:
        again.close()


def test_retention_past_the_recorded_start_wins(broker):
    _fill(broker)
    broker.topic_state.truncate_partition("s", "t", 0, 10)
    broker.delete_segments("s", "t", 0, 3)
    assert broker.topic_state.partition_byte_start("s", "t", 0) == 12 * EVENT


def test_purge_clears_the_recorded_start(broker):
    _fill(broker)
    broker.topic_state.truncate_partition("s", "t", 0, 300)
    broker.purge_topic("s", "t")
    state = broker.topic_state
    assert state.partition_byte_start("s", "t", 0) == 0 == state.partition_byte_end("s", "t", 0)
    broker.append("s", "t", items("again"), partition=0)
    assert broker.topic_state.truncate_partition("s", "t", 0, 4) == 4  # byte positions restarted at 0


def test_deleting_a_topic_or_partitions_clears_recorded_starts(broker):
    _fill(broker, 4, pid=0)
    _fill(broker, 4, pid=1)
    broker.topic_state.truncate_partition("s", "t", 0, 50)
    broker.topic_state.truncate_partition("s", "t", 1, 60)
    broker.delete_partitions("s", "t", 1)
    broker.add_partitions("s", "t", 1)  # id 1 again, empty
    assert broker.topic_state.partition_byte_start("s", "t", 1) == 0
    assert broker.topic_state.partition_byte_start("s", "t", 0) == 50
    tid = broker.get_topic("s", "t").id
    broker.delete_topic("s", "t")
    assert broker.meta.topic_state.logical_starts() == {}
    broker.create_topic("s", "t", partitions=1, topic_id=tid)  # same ids, fresh state
    assert broker.topic_state.partition_byte_start("s", "t", 0) == 0


# -- attributes --------------------------------------------------------------------------
def test_topic_attrs_replace_given_keys_and_survive_reopen(tmp_path, broker):
    assert broker.topic_state.topic_attrs("s", "t") == {}
    broker.topic_state.set_topic_attrs("s", "t", {"tags": "a,b", "retention": "time:60000"})
    broker.topic_state.set_topic_attrs("s", "t", {"tags": "c", "scaling": "fixed:2"})
    broker.topic_state.set_topic_attrs("s", "t", {})  # nothing to do
    want = {"retention": "time:60000", "scaling": "fixed:2", "tags": "c"}
    assert broker.topic_state.topic_attrs("s", "t") == want
    broker.close()
    again = _open(tmp_path)
    try:
        assert again.topic_state.topic_attrs("s", "t") == want
    finally:
        again.close()


def test_topic_attrs_go_with_the_topic(broker):
    tid = broker.get_topic("s", "t").id
    broker.topic_state.set_topic_attrs("s", "t", {"k": "v"})
    broker.delete_topic("s", "t")
    with pytest.raises(TopicNotFound):
        broker.topic_state.topic_attrs("s", "t")
    broker.create_topic("s", "t", topic_id=tid)
    assert broker.topic_state.topic_attrs("s", "t") == {}


@pytest.mark.parametrize("attrs, error", [
    ({"": "v"}, InvalidName),
    ({"k" * (topicstate.MAX_ATTR_KEY_BYTES + 1): "v"}, InvalidName),
    ({"k": "v" * (topicstate.MAX_ATTR_VALUE_BYTES + 1)}, InvalidArgument),
    ({"k": 7}, InvalidArgument),
    ({"k": "\ud800"}, InvalidArgument),  # a lone surrogate is not UTF-8
    ([("k", "v")], InvalidArgument),
])
def test_bad_topic_attrs_are_refused_and_change_nothing(broker, attrs, error):
    broker.topic_state.set_topic_attrs("s", "t", {"keep": "me"})
    with pytest.raises(error):
        broker.topic_state.set_topic_attrs("s", "t", {"fine": "x", **attrs} if isinstance(attrs, dict) else attrs)
    assert broker.topic_state.topic_attrs("s", "t") == {"keep": "me"}


def test_topic_attr_count_is_bounded_atomically(broker, monkeypatch):
    monkeypatch.setattr(topicstate, "MAX_ATTRS_PER_TOPIC", 3)
    broker.topic_state.set_topic_attrs("s", "t", {"a": "1", "b": "2"})
    broker.topic_state.set_topic_attrs("s", "t", {"a": "9", "c": "3"})  # replacing a key does not count twice
    with pytest.raises(InvalidArgument):
        broker.topic_state.set_topic_attrs("s", "t", {"b": "0", "d": "4"})
    assert broker.topic_state.topic_attrs("s", "t") == {"a": "9", "b": "2", "c": "3"}


def test_longest_attr_key_and_value_are_accepted(broker):
    key = "é" * (topicstate.MAX_ATTR_KEY_BYTES // 2)  # 254 bytes of UTF-8
    value = "v" * topicstate.MAX_ATTR_VALUE_BYTES
    broker.topic_state.set_topic_attrs("s", "t", {key: value, "empty": ""})
    assert broker.topic_state.topic_attrs("s", "t") == {key: value, "empty": ""}
