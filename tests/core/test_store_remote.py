"""The storage seam's cluster side without a cluster: gateway/jetstream_store/partition.py (RemotePartition)
and core/metadb.py's replication hooks, driven by hand (docs/scale-out.md)."""

from __future__ import annotations

import sqlite3

import pytest

from core.errors import InvalidArgument, PayloadTooLarge, StorageError
from core.log import AppendInput, LogConfig
from core.log.encoded import block_of
from core.message import now_us
from core.metadb import MetaDb
from metalog import MemoryMetaLog
from gateway.jetstream_store.partition import CLUSTER_DEDUP_TRUST_US, RemotePartition


def part(tmp_path) -> RemotePartition:
    return RemotePartition.open(tmp_path / "p", 0, LogConfig(fsync="never"))


def payloads(p, offset=0, count=100) -> list[bytes]:
    return [bytes(rv.payload) for rv in p.read(offset, count).records()]


def test_appends_wait_in_the_outbox_until_the_cluster_orders_them(tmp_path):
    p = part(tmp_path)
    woken = []
    p.set_remote_wakeup(lambda: woken.append(1))
    acks = []
    r1 = p.append([AppendInput(b"a"), AppendInput(b"b")], on_durable=acks.append)
    r2 = p.append_encoded(block_of([AppendInput(b"c")]), 1, on_durable=acks.append)
    assert (r1.base_offset, r1.count, r2.base_offset) == (0, 2, 2)  # the gateway's guess
    assert woken == [1] and p.outbox_bytes == 3 and p.read(0, 10).count == 0  # not readable yet
    out = p.take_outbox()
    assert [[m[3] for m in o.messages] for o in out] == [[b"a", b"b"], [b"c"]]
    assert p.in_flight == 3 and not p.outbox
    # another gateway's message got sequence 1: ours are 2-3 and 4
    p.await_applied(2, 3, 2, out[0].on_durable)
    p.await_applied(4, 4, 1, out[1].on_durable)
    assert acks == []  # acknowledged by the cluster, not applied here yet
    ids = [m[0] for o in out for m in o.messages]
    p.apply(1, 99, 1000, 0, b"", b"other")
    p.apply(2, ids[0], 2000, 0, b"", b"a")
    assert acks == []
    p.apply(3, ids[1], 1500, 0, b"", b"b")  # an earlier clock: stored time never goes back
    assert [(a.base_offset, a.count) for a in acks] == [(1, 2)]
    p.apply(4, ids[2], 3000, 0, b"", b"c")
    assert [(a.base_offset, a.count) for a in acks] == [(1, 2), (3, 1)]
    assert payloads(p) == [b"other", b"a", b"b", b"c"]
    assert [rv.timestamp for rv in p.read(0, 10).records()] == [1000, 2000, 2000, 3000]
    assert [rv.id for rv in p.read(1, 3).records()] == ids


def test_apply_ignores_what_it_holds_and_refuses_gaps(tmp_path):
    p = part(tmp_path)
    assert p.apply(1, 1, 1, 0, b"", b"x") is not None
    assert p.apply(1, 1, 1, 0, b"", b"x") is None
    with pytest.raises(StorageError, match="sequence 3 after 1"):
        p.apply(3, 3, 1, 0, b"", b"z")
    assert p.next_sequence == 2


def test_skip_to_restarts_the_cache_where_the_stream_now_starts(tmp_path):
    p = part(tmp_path)
    p.apply(1, 1, 1, 0, b"", b"old")
    p.skip_to(10)
    p.apply(11, 2, 2, 0, b"", b"new")
    assert p.first_offset == 10 and payloads(p) == [b"new"]
    assert payloads(p, 10) == [b"new"] and p.next_sequence == 12


def test_failures_and_duplicates_reach_on_durable(tmp_path):
    p = part(tmp_path)
    acks = []
    p.append([AppendInput(b"a")], producer=("w", 1), on_durable=acks.append)
    (out,) = p.take_outbox()
    p.fail_in_flight(1, StorageError("no leader"), out.on_durable)
    assert isinstance(acks[-1], StorageError) and p.in_flight == 0
    p.append([AppendInput(b"a")], producer=("w", 1), on_durable=acks.append)
    (out,) = p.take_outbox()
    p.await_applied(1, 1, 1, out.on_durable, duplicate=True)
    # answered once the cache holds the first copy (the mirror applies it): the Kafka listener
    # finds there where it went, not DUPLICATE_SEQUENCE_NUMBER with offset -1
    assert len(acks) == 1
    p.apply(1, 9, now_us(), 0, b"", b"a", ("w", 1))
    assert acks[-1].duplicate and acks[-1].count == 0 and acks[-1].base_offset == 0
    # once applied with its producer tag, a retry goes to the cluster again while the cluster
    # remembers the call's message ids (the stored ones are answered duplicate there, what a
    # gateway killed mid-call never sent is stored); past that window it is refused here
    clock = [now_us()]
    q = RemotePartition.open(tmp_path / "q", 0, LogConfig(fsync="never"), clock=lambda: clock[0])
    q.apply(1, 5, clock[0], 0, b"", b"a", ("w", 1))  # (a producer idle past its TTL starts over)
    assert not q.append([AppendInput(b"a")], producer=("w", 1)).duplicate and len(q.outbox) == 1
    clock[0] += CLUSTER_DEDUP_TRUST_US
    assert q.append([AppendInput(b"a")], producer=("w", 1)).duplicate and len(q.outbox) == 1


def test_bad_appends_fail_before_the_round_trip(tmp_path):
    p = part(tmp_path)
    p.max_message_bytes = 1024
    with pytest.raises(PayloadTooLarge, match="max_payload"):
        p.append([AppendInput(b"x" * 1000)])
    with pytest.raises(InvalidArgument):
        p.append([])
    assert not p.outbox


def test_close_fails_what_was_never_acknowledged(tmp_path):
    p = part(tmp_path)
    acks = []
    p.append([AppendInput(b"q")], on_durable=acks.append)  # still queued
    p.append([AppendInput(b"w")], on_durable=acks.append)
    (a, b) = p.take_outbox()
    p.await_applied(1, 1, 1, b.on_durable)  # acknowledged, not applied
    p.outbox.append(a)
    p.close()
    assert len(acks) == 2 and all(isinstance(x, StorageError) for x in acks)


def db_with(tmp_path, name, log) -> MetaDb:
    db = MetaDb(tmp_path / name)
    db.conn.execute("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v INTEGER NOT NULL)")
    db.conn.execute("CREATE TABLE IF NOT EXISTS consumer_offsets (k TEXT PRIMARY KEY, v INTEGER)")
    db.replicate(log)
    return db


def test_writes_replay_on_every_replica_in_log_order(tmp_path):
    log = MemoryMetaLog()
    a, b = db_with(tmp_path, "a.sqlite", log), db_with(tmp_path, "b.sqlite", log)
    with a.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (?, ?)", ("x", 1))
        conn.execute("SELECT * FROM t")  # reads are not logged
    with b.transaction() as conn:  # b catches up first, then writes after a
        conn.execute("UPDATE t SET v = v + 1 WHERE k = ?", ("x",))
    assert log.entries == [[("INSERT INTO t VALUES (?, ?)", ("x", 1))], [("UPDATE t SET v = v + 1 WHERE k = ?", ("x",))]]
    log.before_write(a)
    assert a.all("SELECT k, v FROM t") == b.all("SELECT k, v FROM t") == [("x", 2)]
    assert a.replica_seq == b.replica_seq == 2
    # the sequence survives a reopen (it is stored with the data)
    a.close()
    again = MetaDb(tmp_path / "a.sqlite")
    again.replicate(log)
    assert again.replica_seq == 2


def test_a_refused_publish_rolls_the_local_write_back(tmp_path):
    log = MemoryMetaLog()
    a = db_with(tmp_path, "a.sqlite", log)
    log.entries.append([("INSERT INTO t VALUES (?, ?)", ("y", 5))])  # another gateway, unseen
    a.replicator = type("Stale", (), {"before_write": lambda self, db: None, "publish": log.publish})()
    with pytest.raises(StorageError, match="conflict"):
        with a.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (?, ?)", ("x", 1))
    assert a.all("SELECT k FROM t") == [] and a.replica_seq == 0


def test_entries_apply_once_in_order_and_bad_ones_are_skipped_alike(tmp_path):
    log = MemoryMetaLog()
    a = db_with(tmp_path, "a.sqlite", log)
    assert a.apply_entry(1, [("INSERT INTO t VALUES (?, ?)", ("x", 1))])
    assert not a.apply_entry(1, [("INSERT INTO t VALUES (?, ?)", ("x", 1))])
    with pytest.raises(StorageError, match="gap"):
        a.apply_entry(3, [])
    # a constraint failure skips the whole entry but moves the sequence on
    assert a.apply_entry(2, [("INSERT INTO t VALUES (?, ?)", ("z", 1)), ("INSERT INTO t VALUES (?, ?)", ("x", 2))])
    assert a.all("SELECT k, v FROM t") == [("x", 1)] and a.replica_seq == 2
    with pytest.raises(sqlite3.OperationalError):
        a.apply_entry(3, [("INSERT INTO nope VALUES (1)", ())])  # not a constraint: the caller sees it
    assert a.replica_seq == 2


def test_a_stored_offset_skips_the_catch_up(tmp_path):
    log = MemoryMetaLog()
    a = db_with(tmp_path, "a.sqlite", log)
    before = log.caught_up
    a.execute("INSERT INTO consumer_offsets (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
              ("c", 4))
    assert a.one("SELECT v FROM consumer_offsets") == (4,) and a.replica_seq == 1
    assert log.caught_up == before + 1  # only publish_anywhere's own (this Log catches up there)


def test_resync_follows_topics_deleted_and_grown_under_the_broker(tmp_path):
    """What a replicated store's replay does (core/metadb.py): the metadata changes
    without the broker's own calls; resync closes, opens and rebalances to match."""
    from core.broker import Broker

    with Broker.open(tmp_path / "d") as b:
        b.create_stream("s")
        gone = b.create_topic("s", "gone", 2)
        kept = b.create_topic("s", "kept", 1)
        b.consumers.create_group("s", "gone", "g")
        b.consumers.join_group("s", "gone", "g", 7)
        b.consumers.create_group("s", "kept", "h")
        assert b.consumers.join_group("s", "kept", "h", 7) == (0,)
        b.meta.delete_topic(gone.stream_id, gone.id)
        b.meta.add_partitions(kept.stream_id, kept.id, 1)
        b.resync()
        assert sorted(k for k in b._partitions) == [(0, kept.id, 0), (0, kept.id, 1)]
        assert b.consumers.group_members("s", "kept", "h") == {7: (0, 1)}
        assert (0, gone.id, 0) not in b.consumers._groups and b.consumers.groups_of(7) == [(0, kept.id, 0)]
