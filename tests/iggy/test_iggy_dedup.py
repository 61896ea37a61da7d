"""Iggy message deduplication by id (issue 30; docs/iggy.md "Message deduplication").

The window (core/log/iddedup.py) on its own; the Iggy send paths through the
sans-I/O session (dialects 2 and 3), the server default and a topic's override
(adapters/iggy/dedup.py); then the real apache-iggy 0.9.0 client, ``kill -9`` of
``ferry serve`` and the HTTP API."""

from __future__ import annotations

import base64
import errno
import re
import struct

import httpx
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.iggy import dedup
from adapters.iggy.messages import WireMessage
from adapters.iggy.types import PartitioningValue
from core.flusher import run_broker_tasks
from core.broker import Broker
from core.errors import InvalidArgument, StorageError
from core.log.config import LogConfig
from core.log.iddedup import REBUILD_STEP, IdWindow, Rebuild, block_ids, drop_records, rebuild
from core.log.encoded import block_of
from core.log.partition import AppendInput, Partition
from ferry_harness import kill_process, running_gateway, serve_process
from gateway.registry import default_registry
from iggy_clients import run_scenario
from iggy_pair import Client

S = 1_000_000  # µs
ON = {"FERRY_IGGY_MESSAGE_DEDUPLICATION": "true"}


# -- the window ---------------------------------------------------------------------------
def test_window_expiry_forgets_old_ids():
    w = IdWindow(10, 60 * S)
    w.add_all([1, 2], 0)
    w.add(3, 30 * S)
    assert w.duplicates([1, 2, 3, 4], 59 * S) == [0, 1, 2]
    assert w.duplicates([1, 2, 3, 4], 61 * S) == [2]  # 1 and 2 expired; 3 has not
    assert len(w) == 1
    w.add(1, 61 * S)
    assert w.duplicates([1], 61 * S) == [0]


def test_window_keeps_at_most_max_entries_oldest_out_first():
    w = IdWindow(3, 0)  # no expiry: the count alone bounds it
    w.add_all([1, 2, 3, 4], 0)
    assert len(w) == 3 and 1 not in w and all(i in w for i in (2, 3, 4))
    w.add(2, 1)  # a repeat neither refreshes nor grows it
    w.add(5, 2)
    assert 2 not in w and len(w) == 3


def test_partial_duplicates_and_ids_repeated_within_one_batch():
    w = IdWindow()
    w.add_all([10, 11], 0)
    # 11 known; 12 twice in this batch (the second goes); 0 asks for a server id: never dropped
    assert w.duplicates([11, 12, 0, 12, 13, 0, 10], 1) == [0, 3, 6]


class _Model:
    """The window as a list, the slow obvious way: what IdWindow's fast paths must match."""

    def __init__(self, max_entries, expiry):
        self.max_entries, self.expiry, self.entries = max_entries, expiry, []  # [(id, time)], oldest first

    def duplicates(self, ids, now):
        self.entries = [(i, t) for i, t in self.entries if not self.expiry or t >= now - self.expiry]
        known, drop = {i for i, _t in self.entries}, []
        for n, msg_id in enumerate(ids):
            if msg_id and (msg_id in known or msg_id in ids[:n]):
                drop.append(n)
        return drop

    def add_all(self, ids, now):
        for msg_id in ids:
            if msg_id and msg_id not in {i for i, _t in self.entries}:
                self.entries = (self.entries + [(msg_id, now)])[-self.max_entries:]


@settings(max_examples=150, deadline=None)
@given(max_entries=st.integers(1, 6), expiry=st.sampled_from([0, 3, 10]),
       sends=st.lists(st.tuples(st.integers(0, 4), st.lists(st.integers(0, 9), min_size=1, max_size=6)), max_size=12))
def test_window_matches_a_brute_force_model(max_entries, expiry, sends):
    w, m, now = IdWindow(max_entries, expiry), _Model(max_entries, expiry), 0
    for step, ids in sends:
        now += step
        drop = w.duplicates(ids, now)
        assert drop == m.duplicates(ids, now)
        kept = [i for n, i in enumerate(ids) if n not in drop]
        w.add_all(kept, now)
        m.add_all(kept, now)
        assert list(w._ids.items()) == m.entries


@pytest.mark.parametrize("bad", [(0, 1), (1_000_001, 1), (10, -1), (True, 1)])
def test_window_bounds_are_checked(bad):
    with pytest.raises(InvalidArgument):
        IdWindow(*bad)


def test_block_ids_and_drop_records_keep_the_bytes_of_the_rest():
    items = [AppendInput(payload=b"p%d" % i, id=i, headers=b"") for i in range(5)]
    block = block_of(items)
    assert block_ids(block, 5) == [0, 1, 2, 3, 4]
    assert block_ids(block, 4) is None and block_ids(block[:-1], 5) is None  # framing off: left to the append
    kept = drop_records(block, 5, [1, 3])
    assert kept == block_of([items[0], items[2], items[4]])
    assert block_ids(block_of([AppendInput(payload=b"x", id=2**127 + 9)]), 1) == [2**127 + 9]


def _partition(path, clock):
    return Partition.open(path, 0, LogConfig(), clock=clock)


def test_rebuild_from_the_log_tail_after_reopen(tmp_path):
    now = [1_000 * S]
    part = _partition(tmp_path / "p", lambda: now[0])
    part.append([AppendInput(payload=b"old", id=7)])
    now[0] += 120 * S
    part.append([AppendInput(payload=b"x%d" % i, id=100 + i) for i in range(REBUILD_STEP + 50)])
    part.flush()
    part.close()
    part = _partition(tmp_path / "p", lambda: now[0])
    try:
        w = IdWindow(REBUILD_STEP + 10, 60 * S)
        read = rebuild(w, part.read, part.first_offset, part.next_offset, now[0])
        assert read > 0
        ids = [100 + i for i in range(REBUILD_STEP + 50)]
        assert len(w) == REBUILD_STEP + 10 and all(i in w for i in ids[-(REBUILD_STEP + 10):])  # the newest
        assert ids[0] not in w and 7 not in w
        w = IdWindow(10_000, 0)  # no expiry: the 2-minute-old id comes back too
        rebuild(w, part.read, part.first_offset, part.next_offset, now[0])
        assert 7 in w and len(w) == REBUILD_STEP + 51
        w = IdWindow(10_000, 60 * S)
        rebuild(w, part.read, part.first_offset, part.next_offset, now[0] + 61 * S)  # all expired
        assert len(w) == 0
    finally:
        part.close()


@pytest.mark.parametrize("slice_records", [1, 7, REBUILD_STEP, 100_000])
def test_a_rebuild_in_slices_fills_the_window_as_the_model_does(tmp_path, slice_records):
    """Rebuild.step with any slice size: the ids a window built one record at a time from the
    newest back (IdWindow.add, oldest first) would hold, in the same order and times, and
    nothing before the last step (a half-read log never answers)."""
    now = [1_000 * S]
    part = _partition(tmp_path / "p", lambda: now[0])
    stored = []  # (id, append µs) in log order
    for k in range(30):
        ids = [0 if i % 17 == 0 else (i % 250) + 1 + 1_000 * (k % 3) for i in range(k * 40, k * 40 + 40)]
        part.append([AppendInput(payload=b"p", id=i) for i in ids])
        stored += [(i, now[0]) for i in ids]
        now[0] += S
    part.flush()
    batch = part.read(0, len(stored), 1 << 30)  # id 0 was stored as a fresh UUIDv7
    stored = list(zip(block_ids(b"".join(batch.chunks), batch.count), [ts for _i, ts in stored]))
    for max_entries, expiry in ((10_000, 0), (900, 0), (10_000, 12 * S), (300, 20 * S)):
        model = IdWindow(max_entries, expiry)
        cutoff = now[0] - expiry if expiry else None
        tail = stored[-max_entries:]
        if cutoff is not None:
            tail = [(i, ts) for i, ts in tail if ts >= cutoff]
        for i, ts in tail:
            model.add(i, ts)
        w = IdWindow(max_entries, expiry)
        job = Rebuild(w, part.read, part.first_offset, part.next_offset, now[0])
        steps = 0
        while not job.step(slice_records):
            assert len(w) == 0 or not job.reading  # filled only once everything is read
            steps += 1
        assert list(w._ids.items()) == list(model._ids.items())
        assert steps >= min(len(stored), max_entries) // max(slice_records, REBUILD_STEP) - 1
    part.close()


def test_a_cold_window_holds_the_sends_and_runs_them_in_order_on_the_event_loop(tmp_path):
    """hold_send with the broker's tasks running: the first deduplicated send after a
    start hands the rebuild to ``Broker.in_slices`` and waits; a second one joins it; both
    run in order once the window is filled (from the log: the stored id is a duplicate),
    after more than one step; a later send goes at once. A bare broker (no tasks) does
    the rebuild in one piece in filter_send."""
    broker = Broker.open(tmp_path / "data")
    try:
        broker.create_stream("s")
        topic = broker.create_topic("s", "t", 1)
        broker.append("s", "t", [AppendInput(payload=b"x", id=i) for i in range(1, 9_001)], partition=0)
        dedup.configure(broker, dedup.DedupSettings(True, 10_000, 3_600 * S))
        ran = []

        def go(name):
            def run(partition, key):
                kept = dedup.filter_send(broker, topic, partition, key, block_of(
                    [AppendInput(payload=b"y", id=5), AppendInput(payload=b"y", id=20_000)]), 2)
                ran.append((name, partition, key, kept.dropped))
            return run

        assert broker.in_slices is None
        assert dedup.hold_send(broker, topic, None, None, go("bare"), ran.append) == (False, 0, None)
        steps = []

        async def main():
            async with trio.open_nursery() as nursery:
                await nursery.start(run_broker_tasks, broker)
                runner = broker.in_slices

                def counted(step, done):
                    runner(lambda: steps.append(1) or step(), done)
                broker.in_slices = counted
                first = dedup.hold_send(broker, topic, None, None, go("first"), ran.append)
                second = dedup.hold_send(broker, topic, 0, None, go("second"), ran.append)
                assert first == (True, 0, None) and second == (True, 0, None) and ran == []
                while len(ran) < 2:
                    await trio.sleep(0)
                assert ran == [("first", 0, None, 1), ("second", 0, None, 1)]  # id 5 found in the log
                assert len(steps) > 2  # 9,000 records read and filled in slices of REBUILD_SLICE
                assert dedup.hold_send(broker, topic, None, None, go("third"), ran.append) == (False, 0, None)
                nursery.cancel_scope.cancel()
        trio.run(main)
        assert broker.in_slices is None  # uninstalled with the tasks
    finally:
        broker.close()


# -- the Iggy send path (sans-I/O session over a real broker) ----------------------------------
@pytest.fixture
def b(tmp_path):
    broker = Broker.open(tmp_path / "data")
    yield broker
    broker.close()


def _client(b, dialect):
    c = Client(b, dialect)
    assert c.login() == 0
    if not b.meta.list_streams():
        c.ok("stream.create", name="s")
        c.ok("topic.create", stream_id="s", partitions_count=2, name="t")
    return c


def _send(c, *ids, partitioning=PartitioningValue(2, struct.pack("<I", 0))):
    msgs = [WireMessage(i, b"m%d" % i, b"", 1_700_000_000_000_000) for i in ids]
    return c.call("message.send", stream_id="s", topic_id="t", partitioning=partitioning, messages=msgs)[0]


def _ids(b, pid=0):
    batch = b.read("s", "t", pid, 0, 1000)
    return block_ids(b"".join(batch.chunks), batch.count)  # stored records: the same layout


@pytest.mark.parametrize("dialect", [2, 3])
def test_server_default_on_drops_repeats_and_still_succeeds(b, dialect):
    dedup.configure(b, dedup.DedupSettings(True))
    c = _client(b, dialect)
    assert _send(c, 1, 2, 3) == 0
    assert _send(c, 1, 2, 3) == 0  # every message a duplicate: OK, nothing stored
    assert _send(c, 3, 4, 4) == 0
    assert _ids(b) == [1, 2, 3, 4]
    assert _send(c, 0, 0) == 0  # id 0: server-made ids, never duplicates
    assert len(_ids(b)) == 6


def test_dedup_is_per_partition_and_follows_balanced_partitioning(b):
    dedup.configure(b, dedup.DedupSettings(True))
    c = _client(b, 3)
    _send(c, 1)
    assert _send(c, 1, partitioning=PartitioningValue(2, struct.pack("<I", 1))) == 0
    assert _ids(b, 0) == [1] and _ids(b, 1) == [1]  # another partition: another window
    balanced = PartitioningValue(1, b"")
    assert _send(c, 5, partitioning=balanced) == 0 and _send(c, 5, partitioning=balanced) == 0
    assert sorted(_ids(b, 0) + _ids(b, 1)) == [1, 1, 5, 5]  # round robin: one per partition


def test_default_off_and_topic_override(b):
    c = _client(b, 3)
    assert _send(c, 1) == 0 and _send(c, 1) == 0
    assert _ids(b) == [1, 1]  # off by default, as upstream
    t = b.meta.get_topic("s", "t")
    dedup.set_topic_dedup(b, t, True)
    assert dedup.topic_dedup(b, t)
    _send(c, 1), _send(c, 2), _send(c, 2)
    assert _ids(b) == [1, 1, 2]  # the window was rebuilt from the log: 1 was stored
    dedup.configure(b, dedup.DedupSettings(True))
    dedup.set_topic_dedup(b, t, False)  # a topic may also opt out of a server-wide default
    _send(c, 2)
    assert _ids(b) == [1, 1, 2, 2]
    dedup.set_topic_dedup(b, t, None)
    assert dedup.topic_dedup(b, t)


def test_ids_of_a_failed_write_are_forgotten_so_the_resend_is_not_acked_as_stored(b, monkeypatch):
    """A send whose write fails is answered with the error; its ids must not stay in the
    window, or the client's resend would be dropped as a duplicate and acknowledged
    although nothing was stored."""
    from core.log import pending as pending_mod

    dedup.configure(b, dedup.DedupSettings(True))
    c = _client(b, 3)
    assert _send(c, 1) == 0

    def enospc(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pending_mod, "write_all", enospc)
    with pytest.raises(StorageError):  # the harness flushes in line; the driver's flusher answers the error
        _send(c, 2, 3)
    part = b.partition("s", "t", 0)
    window = dedup._STATE.of(b).windows[part]
    assert 1 in window and 2 not in window and 3 not in window
    again = _client(b, 3)  # the client reconnects and resends
    assert _send(again, 2, 3) != 0  # appended, and refused (the partition is read-only), not acked
    assert _ids(b) == [1]


# -- real clients ------------------------------------------------------------------------------
@pytest.mark.parametrize("env,expected", [
    (ON, [[i, f"m{i}"] for i in range(1, 8)]),
    ({}, [[i, f"m{i}"] for i in range(1, 6)] * 2 + [[4, "m4"], [6, "m6"], [5, "m5"], [7, "m7"], [7, "m7bis"]]),
], ids=["on", "off"])
def test_apache_iggy_batches_sent_twice(tmp_path, env, expected):
    with running_gateway(tmp_path, **env) as gw:
        lines = run_scenario("apache-iggy==0.9.0", "current_dedup.py", gw.ports["iggy_tcp"], "batches")
    steps = {line["step"]: line for line in lines}
    assert steps["again"]["confirmations"][0][0] == 0  # the resend is confirmed like any send
    stored = steps["stored"]["messages"]
    assert stored[:-2] == expected
    assert [p for _i, p in stored[-2:]] == ["auto", "auto"] and stored[-1][0] != stored[-2][0] != 0


def _serve(tmp_path, data):
    config = tmp_path / "dedup.toml"
    config.write_text("[iggy]\nmessage_deduplication = true\n")
    ports = [a for name in default_registry().known() for a in (f"--{name.replace('_', '-')}-port", "0")]
    proc, banner = serve_process(tmp_path, data, "--config", str(config), "--fsync", "always", *ports)
    port = re.search(r"^\s+iggy_tcp +127\.0\.0\.1:(\d+)/tcp", banner, re.M)
    assert port, banner
    return proc, int(port.group(1))


@pytest.mark.slow
def test_resend_after_kill_9_stores_nothing_new(tmp_path):
    data = tmp_path / "data"
    proc, port = _serve(tmp_path, data)
    try:
        run_scenario("apache-iggy==0.9.0", "current_dedup.py", port, "send")
    finally:
        kill_process(proc)  # SIGKILL: the window existed only in that process's memory
    proc, port = _serve(tmp_path, data)
    try:
        run_scenario("apache-iggy==0.9.0", "current_dedup.py", port, "send")  # the client resends the batch
        stored = run_scenario("apache-iggy==0.9.0", "current_dedup.py", port, "stored")[-1]["messages"]
    finally:
        kill_process(proc)
    assert stored == [[i, f"k{i}"] for i in range(101, 151)]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("env,count", [(ON, 4), ({}, 8)], ids=["on", "off"])
def test_http_send_twice(tmp_path, env, count):
    where = {"kind": "partition_id", "value": base64.b64encode(struct.pack("<I", 0)).decode()}
    body = {"partitioning": where, "messages": [{"id": 1, "payload": _b64("a")}, {"id": 2, "payload": _b64("b")},
                                                {"id": 2, "payload": _b64("b again")}]}
    with running_gateway(tmp_path, **env) as gw, \
            httpx.Client(base_url=f"http://127.0.0.1:{gw.ports['http']}", timeout=20) as c:
        r = c.post("/users/login", json={"username": "iggy", "password": "iggy"})
        c.headers["authorization"] = f"Bearer {r.json()['access_token']['token']}"
        assert c.post("/streams", json={"name": "s1"}).status_code == 200
        r = c.post("/streams/s1/topics", json={"name": "t1", "partitions_count": 1, "compression_algorithm": "none",
                                                "message_expiry": 0, "max_topic_size": 0})
        assert r.status_code == 200, r.text
        sent = [c.post("/streams/s1/topics/t1/messages", json=body) for _ in range(2)]
        assert [r.status_code for r in sent] == [201, 201], sent[1].text
        assert [len(r.json()["confirmations"]) for r in sent] == [1, 0 if env else 1]  # empty: nothing stored
        r = c.post("/streams/s1/topics/t1/messages", json={"partitioning": where, "messages": [
            {"id": 3, "payload": _b64("c")}, {"payload": _b64("d")}]})
        assert r.status_code == 201, r.text
        r = c.get("/streams/s1/topics/t1/messages",
                  params={"partition_id": 0, "kind": "offset", "value": 0, "count": 100})
        assert r.status_code == 200, r.text
        got = [m["header"]["id"] for m in r.json()["messages"]]
    assert len(got) == count
    if env:
        assert got[:3] == [1, 2, 3] and got[3] not in (0, 1, 2, 3)
    else:
        assert got[:6] == [1, 2, 2, 1, 2, 2]


def test_config_keys_default_off_and_bounded():
    from gateway.config import ConfigError, load_config

    assert load_config(None, env={}).iggy.message_deduplication is False  # upstream's default
    cfg = load_config(None, env={**ON, "FERRY_IGGY_DEDUPLICATION_MAX_ENTRIES": "5",
                                 "FERRY_IGGY_DEDUPLICATION_EXPIRY_SECONDS": "0.5"})
    assert (cfg.iggy.message_deduplication, cfg.iggy.deduplication_max_entries,
            cfg.iggy.deduplication_expiry_seconds) == (True, 5, 0.5)
    with pytest.raises(ConfigError, match="deduplication_max_entries"):
        load_config(None, env={"FERRY_IGGY_DEDUPLICATION_MAX_ENTRIES": "0"})
