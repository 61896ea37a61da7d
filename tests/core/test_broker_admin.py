"""Broker: streams, topics and partitions -- create, list, update, delete,
purge -- with typed errors, and what a reopen keeps."""

from __future__ import annotations

from dataclasses import replace

import pytest
from broker_helpers import items, offsets, open_broker, payloads

from core.errors import (
    InvalidArgument,
    InvalidName,
    PartitionNotFound,
    StreamAlreadyExists,
    StreamNotFound,
    TooManyPartitions,
    TopicAlreadyExists,
    TopicNotFound,
)
from core.metadata import MAX_PARTITIONS
from core.model import TopicSettings


@pytest.fixture
def broker(tmp_path):
    b = open_broker(tmp_path)
    yield b
    b.close()


def test_create_list_get_update_stream(broker):
    a = broker.create_stream("orders")
    b = broker.create_stream("billing", stream_id=5)
    assert (a.id, a.name, a.topics_count) == (0, "orders", 0)
    assert b.id == 5
    assert [s.name for s in broker.list_streams()] == ["orders", "billing"]
    assert broker.get_stream("billing") == broker.get_stream(5)
    renamed = broker.update_stream("orders", "sales")
    assert renamed.id == 0 and broker.get_stream(0).name == "sales"
    with pytest.raises(StreamNotFound):
        broker.get_stream("orders")  # the old name is gone


@pytest.mark.parametrize("name", ["", "x" * 256, "é" * 128, 7, None])
def test_bad_stream_and_topic_names_are_refused(broker, name):
    with pytest.raises(InvalidName if isinstance(name, str) else InvalidArgument):
        broker.create_stream(name)
    broker.create_stream("s")
    with pytest.raises(InvalidName if isinstance(name, str) else InvalidArgument):
        broker.create_topic("s", name)
    assert broker.list_topics("s") == []


def test_longest_names_are_accepted(broker):
    name = "é" * 127 + "x"  # 255 bytes of UTF-8: Iggy's Str8 limit
    broker.create_stream(name)
    assert broker.create_topic(name, name).name == name


def test_duplicate_names_and_ids_are_typed_errors(broker):
    broker.create_stream("s", stream_id=1)
    with pytest.raises(StreamAlreadyExists) as by_name:
        broker.create_stream("s")
    with pytest.raises(StreamAlreadyExists) as by_id:
        broker.create_stream("other", stream_id=1)
    assert by_name.value.details["field"] == "name" and by_id.value.details["field"] == "id"
    broker.create_stream("t")
    with pytest.raises(StreamAlreadyExists):
        broker.update_stream("t", "s")
    broker.create_topic("s", "events")
    with pytest.raises(TopicAlreadyExists):
        broker.create_topic("s", "events")
    broker.create_topic("t", "events")  # topic names are unique per stream only
    broker.create_topic("s", "other")
    with pytest.raises(TopicAlreadyExists):
        broker.update_topic("s", "other", name="events")


def test_unknown_stream_topic_partition_are_typed_errors(broker):
    with pytest.raises(StreamNotFound):
        broker.create_topic("nope", "t")
    with pytest.raises(StreamNotFound):
        broker.append("nope", "t", items("x"))
    broker.create_stream("s")
    with pytest.raises(TopicNotFound):
        broker.append("s", "nope", items("x"))
    with pytest.raises(TopicNotFound):
        broker.read("s", 3, 0, 0, 1)
    broker.create_topic("s", "t", partitions=2)
    with pytest.raises(PartitionNotFound):
        broker.append("s", "t", items("x"), partition=2)
    with pytest.raises(PartitionNotFound):
        broker.read("s", "t", 2, 0, 1)
    with pytest.raises(PartitionNotFound):
        broker.partition("s", "t", -1)
    for call in (broker.delete_stream, broker.purge_stream, broker.get_stream):
        with pytest.raises(StreamNotFound):
            call("gone")
    with pytest.raises(TopicNotFound):
        broker.delete_topic("s", "gone")


def test_topic_settings_and_partition_counts(broker):
    broker.create_stream("s")
    t = broker.create_topic("s", "t", partitions=3,
                            settings=TopicSettings(message_expiry=10, max_topic_size=1 << 20, compression="GZIP"))
    assert (t.partitions_count, t.message_expiry, t.max_topic_size, t.compression_algorithm) == (3, 10, 1 << 20, "gzip")
    assert [p.partition_id for p in broker.partitions()] == [0, 1, 2]
    u = broker.update_topic("s", "t", name="t2", settings=replace(t.settings, message_expiry=0))
    assert (u.name, u.message_expiry, u.max_topic_size) == ("t2", 0, 1 << 20)
    assert broker.get_stream("s").topics_count == 1
    with pytest.raises(InvalidArgument):
        broker.create_topic("s", "bad", settings=TopicSettings(compression="zstd"))
    with pytest.raises(TooManyPartitions):
        broker.create_topic("s", "huge", partitions=MAX_PARTITIONS + 1)
    with pytest.raises(InvalidArgument):
        broker.create_topic("s", "negative", partitions=-1)
    assert [x.name for x in broker.list_topics("s")] == ["t2"]


def test_add_and_delete_partitions(broker, tmp_path):
    broker.create_stream("s")
    broker.create_topic("s", "t", partitions=1)
    assert broker.add_partitions("s", "t", 2) == [1, 2]
    broker.append("s", "t", items("on-2"), partition=2)
    part_dir = broker.partition("s", "t", 2).path
    assert part_dir.is_dir()
    assert broker.get_topic("s", "t").partitions_count == 3
    assert broker.delete_partitions("s", "t", 2) == [1, 2]  # the highest ones go
    assert not part_dir.exists()
    with pytest.raises(PartitionNotFound):
        broker.append("s", "t", items("x"), partition=2)
    with pytest.raises(InvalidArgument):
        broker.delete_partitions("s", "t", 5)
    assert broker.add_partitions("s", "t", 1) == [1]
    assert broker.read("s", "t", 1, 0, 10).count == 0  # a re-added partition starts empty


def test_delete_stream_removes_topics_and_files(broker, tmp_path):
    broker.create_stream("s")
    broker.create_topic("s", "t", partitions=2)
    broker.append("s", "t", items("a"))
    broker.flush()
    sdir = tmp_path / "streams" / "0"
    assert any(sdir.rglob("*.log"))
    broker.delete_stream("s")
    assert not sdir.exists()
    assert broker.list_streams() == []
    assert list(broker.partitions()) == []
    again = broker.create_stream("s")  # the name and the id are free again
    assert again.id == 0
    broker.create_topic("s", "t")
    assert broker.read("s", "t", 0, 0, 10).count == 0  # nothing of the old topic leaks


def test_delete_topic_keeps_its_siblings(broker):
    broker.create_stream("s")
    broker.create_topic("s", "a")
    broker.create_topic("s", "b")
    broker.append("s", "a", items("in-a"))
    broker.append("s", "b", items("in-b"))
    broker.delete_topic("s", "a")
    with pytest.raises(TopicNotFound):
        broker.get_topic("s", "a")
    assert payloads(broker.read("s", "b", 0, 0, 10)) == [b"in-b"]


def test_purge_topic_and_stream_restart_offsets_and_forget_consumer_offsets(broker):
    from core.consumers import Consumer

    broker.create_stream("s")
    broker.create_topic("s", "a", partitions=2)
    broker.create_topic("s", "b")
    for i in range(3):
        broker.append("s", "a", items(f"a{i}"), partition=0)
        broker.append("s", "b", items(f"b{i}"))
    broker.consumers.store_offset(Consumer("consumer", 1), "s", "a", 0, 2)
    broker.purge_topic("s", "a")
    assert broker.read("s", "a", 0, 0, 10).count == 0
    assert broker.consumers.get_offset(Consumer("consumer", 1), "s", "a", 0) is None
    assert broker.append("s", "a", items("fresh"), partition=0).base_offset == 0  # as Iggy's purge
    assert payloads(broker.read("s", "b", 0, 0, 10)) == [b"b0", b"b1", b"b2"]
    broker.purge_stream("s")
    assert broker.read("s", "b", 0, 0, 10).count == 0
    assert broker.read("s", "a", 0, 0, 10).count == 0


def test_reopen_keeps_streams_topics_partitions_and_messages(tmp_path):
    b = open_broker(tmp_path)
    b.create_stream("s", stream_id=3)
    b.create_topic("s", "t", partitions=2, settings=TopicSettings(message_expiry=99))
    b.append("s", "t", items("p0-a", "p0-b"), partition=0)
    b.append("s", "t", items("p1-a"), partition=1)  # never flushed by hand: close does it
    b.close()
    again = open_broker(tmp_path)
    try:
        assert [(s.id, s.name, s.topics_count) for s in again.list_streams()] == [(3, "s", 1)]
        t = again.get_topic(3, "t")
        assert (t.partitions_count, t.message_expiry) == (2, 99)
        assert payloads(again.read("s", "t", 0, 0, 10)) == [b"p0-a", b"p0-b"]
        assert payloads(again.read("s", "t", 1, 0, 10)) == [b"p1-a"]
        assert again.append("s", "t", items("next"), partition=0).base_offset == 2
    finally:
        again.close()


def test_directories_without_metadata_are_removed_at_open(tmp_path):
    b = open_broker(tmp_path)
    b.create_stream("s")
    b.create_topic("s", "t")
    b.close()
    ghost_stream = tmp_path / "streams" / "9" / "topics" / "0" / "partitions" / "0"
    ghost_topic = tmp_path / "streams" / "0" / "topics" / "4"
    ghost_stream.mkdir(parents=True)
    ghost_topic.mkdir(parents=True)
    again = open_broker(tmp_path)
    again.close()
    assert not (tmp_path / "streams" / "9").exists()
    assert not ghost_topic.exists()
    assert (tmp_path / "streams" / "0" / "topics" / "0").is_dir()


def test_close_is_idempotent_and_refuses_appends_after(tmp_path):
    from core.errors import ShuttingDown

    b = open_broker(tmp_path)
    b.create_stream("s")
    b.create_topic("s", "t")
    b.close()
    b.close()
    with pytest.raises(ShuttingDown):
        b.append("s", "t", items("late"))


def test_draining_refuses_appends_but_still_serves_reads(broker):
    from core.errors import ShuttingDown

    broker.create_stream("s")
    broker.create_topic("s", "t")
    broker.append("s", "t", items("a"))
    broker.draining = True
    with pytest.raises(ShuttingDown):
        broker.append("s", "t", items("b"))
    assert offsets(broker.read("s", "t", 0, 0, 10)) == [0]


def test_partition_directory_left_by_a_crash_is_not_resurrected_issue_3(tmp_path):
    """delete_partitions commits the metadata, then removes the directories. A
    crash in between left partition 2's directory behind; re-adding partition 2
    later opened it and served the deleted records again."""
    b = open_broker(tmp_path)
    b.create_stream("s")
    b.create_topic("s", "t", partitions=3)
    b.append("s", "t", items("deleted long ago"), partition=2)
    b.meta.delete_partitions("s", "t", 1)  # the metadata step only: the crash came next
    b.close()
    again = open_broker(tmp_path)
    try:
        assert not (tmp_path / "streams" / "0" / "topics" / "0" / "partitions" / "2").exists()
        assert again.add_partitions("s", "t", 1) == [2]
        assert again.read("s", "t", 2, 0, 10).count == 0
    finally:
        again.close()


def test_failed_open_releases_what_it_opened_issue_3(tmp_path, monkeypatch):
    """A partition that could not be opened made Broker.open raise with the
    metadata store and the partitions opened before it left open."""
    from core.errors import StorageError
    from core.log import Partition

    b = open_broker(tmp_path)
    b.create_stream("s")
    b.create_topic("s", "t", partitions=2)
    b.close()
    opened, real_open = [], Partition.open

    def open_or_fail(path, partition_id, cfg, **kw):
        if partition_id == 1:
            raise StorageError("disk says no")
        part = real_open(path, partition_id, cfg, **kw)
        opened.append(part)
        return part

    closed_meta = []
    from core.metadata import Metadata

    real_close = Metadata.close
    monkeypatch.setattr(Metadata, "close", lambda self: (closed_meta.append(self), real_close(self)))
    monkeypatch.setattr(Partition, "open", open_or_fail)
    with pytest.raises(StorageError):
        open_broker(tmp_path)
    assert [p.closed for p in opened] == [True]
    assert len(closed_meta) == 1 and closed_meta[0].closed


def test_delete_segments_removes_oldest_sealed_segments_but_not_unconsumed_ones(tmp_path):
    from core.consumers import Consumer

    broker = open_broker(tmp_path, segment_bytes=400)
    try:
        broker.create_stream("s")
        broker.create_topic("s", "t", partitions=2)
        for i in range(12):
            broker.append("s", "t", items(f"m{i:02d}".ljust(40, ".")), partition=0)
            broker.flush()  # one batch each: a new segment every few records
        part = broker.partition("s", "t", 0)
        bases = [b for b, _n, _s in part.segment_positions()]
        assert len(bases) >= 4
        group = broker.consumers.create_group("s", "t", "g")
        broker.consumers.store_offset(Consumer("group", group.id), "s", "t", 0, bases[2] - 1)  # read segments 0 and 1
        broker.append("s", "t", items("p1"), partition=1)
        broker.consumers.store_offset(Consumer("consumer", 7), "s", "t", 1, 0)  # another partition: no barrier here
        assert broker.delete_segments("s", "t", 0, 10) == 2
        assert part.first_offset == bases[2]
        assert offsets(broker.read("s", "t", 0, 0, 100)) == list(range(bases[2], 12))
        assert broker.consumers.get_offset(Consumer("group", group.id), "s", "t", 0) == bases[2] - 1  # untouched
        broker.consumers.store_offset(Consumer("group", group.id), "s", "t", 0, 11)
        assert broker.delete_segments("s", "t", 0, 10) == len(bases) - 3  # all sealed ones, not the active
        assert part.segment_count == 1
        assert broker.append("s", "t", items("next"), partition=0).base_offset == 12
        assert broker.delete_segments("s", "t", 1, 1) == 0  # nothing sealed there
        with pytest.raises(PartitionNotFound):
            broker.delete_segments("s", "t", 2, 1)
        with pytest.raises(TopicNotFound):
            broker.delete_segments("s", "nope", 0, 1)
        with pytest.raises(StreamNotFound):
            broker.delete_segments("nope", "t", 0, 1)
    finally:
        broker.close()


def test_totals_count_the_whole_broker(broker):
    from core.broker import BrokerTotals

    assert broker.totals() == BrokerTotals(0, 0, 0, 0, 0, 0, 0, 0)
    broker.create_stream("a")
    broker.create_stream("b")
    broker.create_topic("a", "t", partitions=2)
    broker.create_topic("b", "u", partitions=3)
    broker.consumers.create_group("a", "t", "g")
    broker.append("a", "t", items("xy", "z"), partition=1)
    broker.append("b", "u", items("q"), partition=2)
    before = broker.totals()
    assert (before.streams, before.topics, before.partitions, before.segments, before.messages,
            before.consumer_groups) == (2, 2, 5, 5, 3, 1)
    broker.flush()
    after = broker.totals()
    assert after.pending_bytes == 0 and after.stored_bytes == sum(
        broker.partition(s, t, p).size_bytes for s, t, n in (("a", "t", 2), ("b", "u", 3)) for p in range(n)) > 0
