"""core.metadata: streams, topics, partitions, groups, offsets, settings,
persistence, migrations and crash consistency (users and auth: test_metadata_auth.py)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

import core.metadata as metadata_mod
from core import metadb
from core.errors import (
    AlreadyExists,
    ConsumerGroupAlreadyExists,
    ConsumerGroupNotFound,
    ConsumerOffsetNotFound,
    InvalidArgument,
    InvalidName,
    PartitionNotFound,
    StorageError,
    StreamAlreadyExists,
    StreamNotFound,
    TooManyPartitions,
    TopicAlreadyExists,
    TopicNotFound,
)
from core.metadata import MAX_PARTITIONS
from core.model import ConsumerOffsetInfo, PartitionInfo, TopicSettings
from metadata_helpers import T0, FakeClock, open_meta, raw_rows

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "metadata.sqlite"


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def meta(db_path, clock):
    m = open_meta(db_path, clock)
    yield m
    m.close()


@pytest.fixture
def topic(meta):
    """Stream "s" (id 0) with topic "t" (id 0) of 3 partitions."""
    meta.create_stream("s")
    return meta.create_topic("s", "t", 3)


# -- streams -------------------------------------------------------------------------
def test_create_get_list_stream(meta, clock):
    a = meta.create_stream("alpha")
    clock.advance(5)
    b = meta.create_stream("beta")
    assert (a.id, a.name, a.created_at, a.topics_count) == (0, "alpha", T0, 0)
    assert (b.id, b.created_at) == (1, T0 + 5)
    assert meta.get_stream(0) == a and meta.get_stream("beta") == b
    assert meta.list_streams() == [a, b]


def test_duplicate_stream_name_and_id(meta):
    meta.create_stream("s")
    with pytest.raises(StreamAlreadyExists) as name_err:
        meta.create_stream("s")
    with pytest.raises(StreamAlreadyExists) as id_err:
        meta.create_stream("other", stream_id=0)
    assert name_err.value.details["field"] == "name" and id_err.value.details["field"] == "id"
    assert isinstance(id_err.value, AlreadyExists)
    assert [s.name for s in meta.list_streams()] == ["s"]


def test_explicit_ids_and_lowest_free_id_reuse(meta):
    assert meta.create_stream("five", stream_id=5).id == 5
    assert [meta.create_stream(n).id for n in ("a", "b", "c")] == [0, 1, 2]
    meta.delete_stream("b")
    assert meta.create_stream("d").id == 1  # the hole left by "b" (Iggy 0.6+ slab)
    assert meta.create_stream("e").id == 3
    assert meta.create_stream("f").id == 4
    assert meta.create_stream("g").id == 6  # 5 was taken explicitly


@pytest.mark.parametrize(
    "name", ["", "x" * 256, "é" * 128, "\ud800", 7, None, b"bytes"], ids=repr
)
def test_bad_stream_names(meta, name):
    with pytest.raises(InvalidName):
        meta.create_stream(name)
    assert meta.list_streams() == []


def test_name_limit_counts_utf8_bytes(meta):
    assert meta.create_stream("é" * 127 + "a").name == "é" * 127 + "a"  # 255 bytes
    assert meta.create_stream("x" * 255).id == 1
    assert meta.create_stream("日本").name == "日本"


@pytest.mark.parametrize("bad", [-1, 2**32 - 1, True, 1.5, "1"], ids=repr)
def test_bad_explicit_stream_ids(meta, bad):
    with pytest.raises(InvalidArgument):
        meta.create_stream("s", stream_id=bad)


def test_stream_lookup_errors(meta):
    meta.create_stream("s")
    with pytest.raises(StreamNotFound) as by_id:
        meta.get_stream(9)
    with pytest.raises(StreamNotFound) as by_name:
        meta.get_stream("nope")
    assert (by_id.value.details["field"], by_name.value.details["field"]) == ("id", "name")
    assert meta.get_stream("s").id == 0
    with pytest.raises(InvalidArgument):
        meta.get_stream(True)  # a bool is not an id
    with pytest.raises(InvalidArgument):
        meta.get_stream(-1)


def test_update_stream(meta):
    meta.create_stream("a")
    meta.create_stream("b")
    assert meta.update_stream("a", "a2").name == "a2"
    assert meta.get_stream("a2").id == 0
    with pytest.raises(StreamNotFound):
        meta.get_stream("a")
    with pytest.raises(StreamAlreadyExists):
        meta.update_stream(0, "b")
    assert meta.update_stream(1, "b").name == "b"  # same name: no change, no error
    with pytest.raises(InvalidName):
        meta.update_stream(1, "")
    with pytest.raises(StreamNotFound):
        meta.update_stream(7, "z")


def test_delete_missing_stream(meta):
    with pytest.raises(StreamNotFound):
        meta.delete_stream("ghost")


# -- topics --------------------------------------------------------------------------
def test_create_topic_defaults_and_partitions(meta, clock):
    meta.create_stream("s")
    t = meta.create_topic("s", "t", 3)
    assert (t.stream_id, t.id, t.name, t.created_at, t.partitions_count) == (0, 0, "t", T0, 3)
    assert (t.message_expiry, t.max_topic_size, t.compression_algorithm, t.replication_factor) == (0, 0, "none", 1)
    assert meta.list_partitions("s", "t") == [PartitionInfo(0, 0, pid, T0) for pid in range(3)]
    assert meta.get_stream("s").topics_count == 1
    assert meta.get_topic(0, 0) == meta.get_topic("s", "t") == t


def test_create_topic_settings(meta):
    meta.create_stream("s")
    t = meta.create_topic(
        0, "t", 0, topic_id=4,
        settings=TopicSettings(message_expiry=60_000_000, max_topic_size=10**9, compression="GZIP",
                               replication_factor=3),
    )
    assert (t.id, t.partitions_count, t.message_expiry, t.max_topic_size) == (4, 0, 60_000_000, 10**9)
    assert (t.compression_algorithm, t.replication_factor) == ("gzip", 3)
    # the flat fields read back as one (normalized) TopicSettings
    assert t.settings == TopicSettings(60_000_000, 10**9, "gzip", 3)


def test_topic_settings_checked_normalizes_and_refuses():
    assert TopicSettings(compression="GZip").checked() == TopicSettings(compression="gzip")
    assert TopicSettings().checked() == TopicSettings(0, 0, "none", 1)
    with pytest.raises(InvalidArgument, match=r"compression must be one of \('none', 'gzip'\), got 'lz4'"):
        TopicSettings(compression="lz4").checked()
    with pytest.raises(InvalidArgument, match=r"replication factor must be within 1\.\.255, got 0"):
        TopicSettings(replication_factor=0).checked()
    with pytest.raises(InvalidArgument, match=r"message expiry \(µs\) must be an int, got str"):
        TopicSettings(message_expiry="1").checked()


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"partitions": -1}, InvalidArgument),
        ({"partitions": MAX_PARTITIONS + 1}, TooManyPartitions),
        ({"partitions": True}, InvalidArgument),
        ({"settings": TopicSettings(compression="zstd")}, InvalidArgument),
        ({"settings": TopicSettings(compression=None)}, InvalidArgument),
        ({"settings": TopicSettings(replication_factor=0)}, InvalidArgument),
        ({"settings": TopicSettings(replication_factor=256)}, InvalidArgument),
        ({"settings": TopicSettings(message_expiry=-1)}, InvalidArgument),
        ({"settings": TopicSettings(max_topic_size=-1)}, InvalidArgument),
        ({"topic_id": -1}, InvalidArgument),
        ({"name": ""}, InvalidName),
        ({"name": "x" * 256}, InvalidName),
    ],
)
def test_bad_topic_arguments(meta, kwargs, error):
    meta.create_stream("s")
    args = {"name": "t", "partitions": 1, **kwargs}
    with pytest.raises(error):
        meta.create_topic("s", args.pop("name"), args.pop("partitions"), **args)
    assert meta.list_topics("s") == []
    assert raw_rows(meta.path, "SELECT COUNT(*) FROM partitions") == [(0,)]


def test_topic_names_and_ids_are_per_stream(meta):
    meta.create_stream("a")
    meta.create_stream("b")
    assert meta.create_topic("a", "t", 1).id == 0
    assert meta.create_topic("b", "t", 1).id == 0  # same name, other stream
    with pytest.raises(TopicAlreadyExists) as by_name:
        meta.create_topic("a", "t", 1)
    with pytest.raises(TopicAlreadyExists) as by_id:
        meta.create_topic("a", "u", 1, topic_id=0)
    assert (by_name.value.details["field"], by_id.value.details["field"]) == ("name", "id")
    with pytest.raises(StreamNotFound):
        meta.create_topic("c", "t", 1)


def test_topic_lowest_free_id_and_name_reuse(meta):
    meta.create_stream("s")
    for name in ("t0", "t1", "t2"):
        meta.create_topic("s", name, 1)
    meta.delete_topic("s", "t1")
    assert meta.get_stream("s").topics_count == 2
    again = meta.create_topic("s", "t1", 2)
    assert (again.id, again.partitions_count) == (1, 2)
    assert [t.id for t in meta.list_topics("s")] == [0, 1, 2]


def test_topic_lookup_errors(meta, topic):
    with pytest.raises(TopicNotFound) as by_id:
        meta.get_topic("s", 5)
    with pytest.raises(TopicNotFound) as by_name:
        meta.get_topic("s", "nope")
    assert (by_id.value.details["field"], by_name.value.details["field"]) == ("id", "name")
    with pytest.raises(StreamNotFound):
        meta.get_topic("nope", "t")
    with pytest.raises(StreamNotFound):
        meta.list_topics(3)


def test_update_topic(meta, topic):
    meta.create_topic("s", "other", 1)
    new = meta.update_topic("s", "t", name="t2", settings=TopicSettings(message_expiry=5, max_topic_size=7,
                                                                        compression="gzip", replication_factor=2))
    assert (new.name, new.message_expiry, new.max_topic_size, new.compression_algorithm) == ("t2", 5, 7, "gzip")
    assert (new.replication_factor, new.partitions_count, new.created_at) == (2, 3, topic.created_at)
    assert meta.get_topic("s", "t2") == new
    with pytest.raises(TopicNotFound):
        meta.get_topic("s", "t")
    kept = meta.update_topic("s", 0, settings=replace(new.settings, message_expiry=9))
    assert (kept.name, kept.message_expiry, kept.max_topic_size, kept.compression_algorithm) == ("t2", 9, 7, "gzip")
    assert meta.update_topic("s", 0, name="t3").settings == kept.settings  # no settings: all kept
    meta.update_topic("s", 0, name="t2")
    with pytest.raises(TopicAlreadyExists):
        meta.update_topic("s", "t2", name="other")
    with pytest.raises(InvalidArgument):
        meta.update_topic("s", "t2", settings=replace(kept.settings, compression="lz4"))
    with pytest.raises(TypeError):
        meta.update_topic("s", "t2", message_expiry=1)  # the settings travel as one TopicSettings
    with pytest.raises(TypeError):
        meta.update_topic("s", "t2", partitions=4)  # not a setting: use add/delete_partitions


def test_delete_topic(meta, topic):
    meta.delete_topic("s", "t")
    assert meta.list_topics("s") == []
    with pytest.raises(TopicNotFound):
        meta.delete_topic("s", "t")
    assert raw_rows(meta.path, "SELECT COUNT(*) FROM partitions") == [(0,)]


# -- partitions ----------------------------------------------------------------------
def test_add_and_delete_partitions(meta, topic, clock):
    clock.advance(10)
    assert meta.add_partitions("s", "t", 2) == [3, 4]
    assert meta.get_topic("s", "t").partitions_count == 5
    assert meta.list_partitions("s", "t")[-1] == PartitionInfo(0, 0, 4, T0 + 10)
    assert meta.delete_partitions("s", "t", 3) == [2, 3, 4]  # the highest ones, as Iggy
    assert [p.id for p in meta.list_partitions("s", "t")] == [0, 1]
    assert meta.add_partitions(0, 0, 1) == [2]


def test_partition_limits(meta, topic):
    with pytest.raises(InvalidArgument):
        meta.add_partitions("s", "t", 0)
    with pytest.raises(TooManyPartitions):
        meta.add_partitions("s", "t", MAX_PARTITIONS - 2)
    with pytest.raises(InvalidArgument):
        meta.delete_partitions("s", "t", 4)
    with pytest.raises(InvalidArgument):
        meta.delete_partitions("s", "t", 0)
    assert meta.get_topic("s", "t").partitions_count == 3
    assert meta.delete_partitions("s", "t", 3) == [0, 1, 2]
    assert meta.get_topic("s", "t").partitions_count == 0


def test_delete_partitions_drops_their_offsets(meta, topic):
    for pid in range(3):
        meta.store_offset("consumer", 1, 0, 0, pid, 10 + pid)
    meta.delete_partitions("s", "t", 1)
    assert [(o.partition_id, o.offset) for o in meta.list_offsets("s", "t")] == [(0, 10), (1, 11)]
    meta.add_partitions("s", "t", 1)
    assert meta.get_offset("consumer", 1, 0, 0, 2) is None  # a new partition 2 starts clean


# -- consumer groups -------------------------------------------------------------------
def test_consumer_groups(meta, topic):
    g0 = meta.create_group("s", "t", "g0")
    g1 = meta.create_group(0, 0, "g1")
    assert (g0.stream_id, g0.topic_id, g0.id, g0.name, g1.id) == (0, 0, 0, "g0", 1)
    assert meta.get_group("s", "t", "g1") == meta.get_group(0, 0, 1) == g1
    assert meta.list_groups("s", "t") == [g0, g1]
    with pytest.raises(ConsumerGroupAlreadyExists) as by_name:
        meta.create_group("s", "t", "g0")
    with pytest.raises(ConsumerGroupAlreadyExists) as by_id:
        meta.create_group("s", "t", "g9", group_id=1)
    assert (by_name.value.details["field"], by_id.value.details["field"]) == ("name", "id")
    meta.delete_group("s", "t", "g0")
    assert meta.create_group("s", "t", "g2").id == 0  # lowest free id
    assert meta.create_group("s", "t", "g7", group_id=7).id == 7
    with pytest.raises(ConsumerGroupNotFound):
        meta.get_group("s", "t", "g0")
    with pytest.raises(ConsumerGroupNotFound):
        meta.delete_group("s", "t", 3)
    with pytest.raises(InvalidName):
        meta.create_group("s", "t", "")
    with pytest.raises(TopicNotFound):
        meta.create_group("s", "nope", "g")


def test_group_names_are_per_topic(meta, topic):
    meta.create_topic("s", "u", 1)
    assert meta.create_group("s", "t", "g").id == meta.create_group("s", "u", "g").id == 0


def test_delete_group_drops_its_offsets_only(meta, topic):
    g = meta.create_group("s", "t", "g")
    meta.store_offset("group", g.id, 0, 0, 0, 5)
    meta.store_offset("consumer", g.id, 0, 0, 0, 6)  # a single consumer with the same number
    meta.delete_group("s", "t", "g")
    assert meta.get_offset("group", g.id, 0, 0, 0) is None
    assert meta.get_offset("consumer", g.id, 0, 0, 0) == 6


# -- consumer offsets ------------------------------------------------------------------
def test_store_get_delete_offset(meta, topic):
    assert meta.get_offset("consumer", 1, 0, 0, 0) is None
    meta.store_offset("consumer", 1, 0, 0, 0, 5)
    meta.store_offset("consumer", 1, 0, 0, 0, 9)  # UPSERT: overwrite
    meta.store_offset("group", 1, 0, 0, 0, 2)  # same id, other kind: separate
    assert meta.get_offset("consumer", 1, 0, 0, 0) == 9
    assert meta.get_offset("group", 1, 0, 0, 0) == 2
    meta.delete_offset("consumer", 1, 0, 0, 0)
    assert meta.get_offset("consumer", 1, 0, 0, 0) is None
    with pytest.raises(ConsumerOffsetNotFound):
        meta.delete_offset("consumer", 1, 0, 0, 0)


@pytest.mark.parametrize(
    "args, error",
    [
        (("reader", 1, 0, 0, 0, 1), InvalidArgument),
        (("consumer", -1, 0, 0, 0, 1), InvalidArgument),
        (("consumer", 1, 0, 0, 0, -1), InvalidArgument),
        (("consumer", 1, 0, 0, 0, 2**63), InvalidArgument),
        (("consumer", 1, 0, 0, 3, 1), PartitionNotFound),
        (("consumer", 1, 0, 9, 0, 1), TopicNotFound),
        (("consumer", 1, 9, 0, 0, 1), StreamNotFound),
    ],
)
def test_bad_offsets(meta, topic, args, error):
    with pytest.raises(error):
        meta.store_offset(*args)
    assert meta.list_offsets("s", "t") == []


def test_store_offsets_batch_is_all_or_nothing(meta, topic):
    meta.store_offsets([
        ("consumer", 1, 0, 0, 0, 3),
        ConsumerOffsetInfo("group", 2, 0, 0, 1, 4),
    ])
    assert meta.list_offsets("s", "t") == [
        ConsumerOffsetInfo("consumer", 1, 0, 0, 0, 3),
        ConsumerOffsetInfo("group", 2, 0, 0, 1, 4),
    ]
    with pytest.raises(PartitionNotFound):
        meta.store_offsets([("consumer", 1, 0, 0, 0, 99), ("consumer", 1, 0, 0, 7, 1)])
    assert meta.get_offset("consumer", 1, 0, 0, 0) == 3
    with pytest.raises(InvalidArgument):
        meta.store_offsets([("consumer", 1, 0, 0)])
    meta.store_offsets([])


def test_delete_topic_offsets(meta, topic):
    meta.store_offset("consumer", 1, 0, 0, 0, 3)
    meta.store_offset("consumer", 2, 0, 0, 1, 3)
    assert meta.delete_topic_offsets("s", "t") == 2
    assert meta.list_offsets("s", "t") == []


def test_offsets_without_fsync_round_trip(db_path, clock):
    with open_meta(db_path, clock, fsync_offsets=False) as m:
        m.create_stream("s")
        m.create_topic("s", "t", 2)
        m.store_offset("consumer", 1, 0, 0, 1, 42)
        m.store_offsets([("group", 3, 0, 0, 0, 7)])
        assert m.get_offset("consumer", 1, 0, 0, 1) == 42
    with open_meta(db_path, clock) as m:
        assert [(o.kind, o.offset) for o in m.list_offsets("s", "t")] == [("group", 7), ("consumer", 42)]


# -- cascades ------------------------------------------------------------------------
def test_delete_stream_cascades(meta, topic):
    meta.create_topic("s", "u", 2)
    meta.create_group("s", "t", "g")
    meta.store_offset("consumer", 1, 0, 0, 2, 8)
    meta.store_offset("group", 0, 0, 1, 1, 8)
    meta.create_stream("keep")
    meta.create_topic("keep", "k", 1)
    meta.store_offset("consumer", 1, 1, 0, 0, 1)
    meta.delete_stream("s")
    for table, left in [("streams", 1), ("topics", 1), ("partitions", 1), ("consumer_groups", 0),
                        ("consumer_offsets", 1)]:
        assert raw_rows(meta.path, f"SELECT COUNT(*) FROM {table}") == [(left,)], table
    again = meta.create_stream("s")  # takes id 0 again, with nothing under it
    assert (again.id, again.topics_count) == (0, 0)
    meta.create_topic("s", "t", 3)
    assert meta.list_groups("s", "t") == [] and meta.list_offsets("s", "t") == []
    assert meta.get_offset("consumer", 1, 1, 0, 0) == 1


def test_delete_topic_cascades_to_groups_and_offsets(meta, topic):
    meta.create_group("s", "t", "g")
    meta.store_offset("consumer", 1, 0, 0, 0, 8)
    meta.delete_topic("s", "t")
    assert raw_rows(meta.path, "SELECT COUNT(*) FROM consumer_groups") == [(0,)]
    assert raw_rows(meta.path, "SELECT COUNT(*) FROM consumer_offsets") == [(0,)]


# -- settings ------------------------------------------------------------------------
def test_settings(db_path, clock):
    with open_meta(db_path, clock) as m:
        assert m.get_setting("jwt_secret") is None
        assert m.get_setting("jwt_secret", "d") == "d"
        m.set_setting("jwt_secret", "s1")
        m.set_setting("jwt_secret", "s2")
        with pytest.raises(InvalidArgument):
            m.set_setting("jwt_secret", b"bytes")
        with pytest.raises(InvalidName):
            m.set_setting("", "x")
    with open_meta(db_path, clock) as m:
        assert m.get_setting("jwt_secret") == "s2"


# -- durability, persistence, migrations ---------------------------------------------------
def test_connection_is_wal_and_synchronous_full(meta):
    assert meta._db.one("PRAGMA journal_mode")[0] == "wal"
    assert meta._db.one("PRAGMA synchronous")[0] == 2  # FULL
    assert meta._db.one("PRAGMA foreign_keys")[0] == 1


def test_reopen_restores_everything(db_path, clock):
    with open_meta(db_path, clock) as m:
        m.create_stream("a")
        m.create_stream("b", stream_id=3)
        t = m.create_topic("b", "t", 2, settings=TopicSettings(message_expiry=9, compression="gzip"))
        g = m.create_group("b", "t", "g")
        m.store_offset("group", g.id, 3, 0, 1, 77)
        before = (m.list_streams(), m.list_topics("b"), m.list_groups("b", "t"), m.list_offsets("b", "t"),
                  m.list_partitions("b", "t"))
    with open_meta(db_path, clock) as m:
        after = (m.list_streams(), m.list_topics("b"), m.list_groups("b", "t"), m.list_offsets("b", "t"),
                 m.list_partitions("b", "t"))
        assert after == before and m.get_topic(3, "t") == t
        assert m.create_stream("c").id == 1  # allocation continues from the stored state
        assert m.schema_version() == metadb.MIGRATIONS[-1].version


def test_migration_hook_runs_new_steps_once(db_path, clock, monkeypatch):
    open_meta(db_path, clock).close()
    calls = []
    last = metadb.MIGRATIONS[-1].version  # the steps below come after every shipped one

    def seed(conn):
        calls.append(1)
        conn.execute("INSERT INTO settings (key, value) VALUES ('migrated', 'yes')")

    steps = metadb.MIGRATIONS + (
        metadb.Migration(last + 1, "audit table", "CREATE TABLE audit (id INTEGER PRIMARY KEY, what TEXT)"),
        metadb.Migration(last + 2, "seed a setting", seed),
    )
    monkeypatch.setattr(metadb, "MIGRATIONS", steps)
    for _ in range(2):  # the second open finds the last version and runs nothing
        with open_meta(db_path, clock) as m:
            assert m.schema_version() == last + 2
            assert m.get_setting("migrated") == "yes"
    assert calls == [1]
    assert raw_rows(db_path, "SELECT name FROM sqlite_master WHERE name = 'audit'") == [("audit",)]


def test_failed_migration_rolls_back(db_path, clock, monkeypatch):
    open_meta(db_path, clock).close()
    last = metadb.MIGRATIONS[-1].version
    bad = metadb.MIGRATIONS + (
        metadb.Migration(last + 1, "broken", "CREATE TABLE half (x); SELECT * FROM missing"),)
    monkeypatch.setattr(metadb, "MIGRATIONS", bad)
    with pytest.raises(StorageError, match=f"migration {last + 1}"):
        open_meta(db_path, clock)
    assert raw_rows(db_path, "SELECT version FROM schema_version") == [(last,)]
    assert raw_rows(db_path, "SELECT name FROM sqlite_master WHERE name = 'half'") == []


def test_newer_schema_is_refused(db_path, clock):
    open_meta(db_path, clock).close()
    conn = sqlite3.connect(db_path)
    conn.execute("UPDATE schema_version SET version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(StorageError, match="newer"):
        open_meta(db_path, clock)


def test_unopenable_path_is_a_storage_error(tmp_path):
    with pytest.raises(StorageError):
        open_meta(tmp_path / "missing-dir" / "m.sqlite")


# -- crash consistency -----------------------------------------------------------------
def test_exception_mid_transaction_leaves_no_half_topic(meta, monkeypatch):
    meta.create_stream("s")
    real = metadata_mod._insert_partitions

    def half_then_fail(conn, sid, tid, ids, created):
        real(conn, sid, tid, list(ids)[:2], created)  # some partitions written...
        raise OSError("simulated failure before COMMIT")

    monkeypatch.setattr(metadata_mod, "_insert_partitions", half_then_fail)
    with pytest.raises(OSError):
        meta.create_topic("s", "t", 5)
    monkeypatch.undo()
    assert meta.list_topics("s") == [] and meta.get_stream("s").topics_count == 0
    assert raw_rows(meta.path, "SELECT COUNT(*) FROM topics") == [(0,)]
    assert raw_rows(meta.path, "SELECT COUNT(*) FROM partitions") == [(0,)]
    assert meta.create_topic("s", "t", 5).id == 0  # the store is still usable


# The child commits a stream, then is SIGKILLed by its own SQLite trace hook
# in the middle of the next transaction, after that transaction's first
# statement(s) ran. Nothing of the killed transaction may be visible afterwards.
_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from core.metadata import Metadata
    path, prepare, victim, kill_at = sys.argv[1:5]
    m = Metadata(path)
    exec(prepare)
    def trace(sql):
        if sql.startswith(kill_at):
            os.kill(os.getpid(), signal.SIGKILL)
    m._db.conn.set_trace_callback(trace)
    exec(victim)
    sys.exit(3)  # not reached: the kill comes first
    """
)


def _run_killed_child(path: Path, prepare: str, victim: str, kill_at: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(path), prepare, victim, kill_at],
                          cwd=REPO, env=env, capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()


def test_sigkill_during_topic_creation_leaves_no_half_topic(db_path, clock):
    _run_killed_child(db_path, "m.create_stream('s')", "m.create_topic('s', 't', 8)",
                      "INSERT INTO partitions")
    with open_meta(db_path, clock) as m:
        assert [s.name for s in m.list_streams()] == ["s"]  # committed before the kill
        assert m.list_topics("s") == []
        assert raw_rows(db_path, "SELECT COUNT(*) FROM partitions") == [(0,)]
        assert m.create_topic("s", "t", 8).partitions_count == 8


def test_sigkill_during_stream_deletion_keeps_the_whole_stream(db_path, clock):
    prepare = ("m.create_stream('s'); m.create_topic('s', 't', 4); m.create_group('s', 't', 'g');"
               "m.store_offset('consumer', 1, 0, 0, 3, 9)")
    # The cascade DELETE has run inside the transaction when the grants
    # clean-up (the next statement) starts: that is where the child dies.
    _run_killed_child(db_path, prepare, "m.delete_stream('s')", "SELECT id, permissions FROM users")
    with open_meta(db_path, clock) as m:
        assert m.get_topic("s", "t").partitions_count == 4
        assert [g.name for g in m.list_groups("s", "t")] == ["g"]
        assert m.get_offset("consumer", 1, 0, 0, 3) == 9
