"""Power loss: what Ferry acknowledged survives a crash of the machine, not only of the process.

``kill -9`` (test_gw_kill.py) leaves the kernel's page cache alone, so it cannot show
that Ferry's fsyncs are the right ones. Here the data directory lives on lazyfs
(tests/support/lazyfs.py), a FUSE filesystem that at a simulated power cut drops every
write not yet fsynced and every directory entry whose directory was not fsynced. After
the cut, what is left is opened again and compared with what was acknowledged:

* the filesystem's own model (a few operations, checked after a cut);
* core level, in this process: a Broker under ``always`` and ``batch`` appending across
  segment rolls, creating and deleting topics, writing key-value tables and consumer
  offsets; every acknowledged append, commit and offset must be there after the cut, and
  under ``never`` recovery must start and keep only records as they were acknowledged;
* a cut in the middle of a salvage (the damaged original must stay on disk);
* process level: ``ferry serve`` on the mount, real clients (nats-py JetStream with a
  durable consumer, the Iggy HTTP API through httpx, the Iggy binary protocol through
  apache-iggy 0.9.0, confluent-kafka acks=all, the pravega writer), SIGKILL, the cut, a restart on what the disk kept
  (bench/powerloss.py runs more cycles).
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import subprocess
from pathlib import Path

import httpx
import nats
import pytest
import trio
from confluent_kafka import Producer

import lazyfs
from ferry_harness import free_port, kill_process, serve_process
from iggy_clients import run_scenario
from pravega_clients import finish, json_head, start_scenario
from core.broker import Broker, BrokerConfig
from core.consumers import Consumer
from core.flusher import run_broker_tasks
from core.log import AppendInput, AppendResult, LogConfig

pytestmark = pytest.mark.slow

SEGMENT_BYTES = 4096  # small: a few dozen appends roll several segments (index fsyncs, dir fsyncs)


@pytest.fixture
def lazy(tmp_path):
    reason = lazyfs.unavailable()
    if reason:
        pytest.skip(reason)
    fs = lazyfs.LazyFS(tmp_path / "disk", tmp_path / "mnt").start()
    try:
        yield fs
    finally:
        fs.stop()  # nothing to do after a crash


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write(path: Path, data: bytes, *, sync: bool) -> None:
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


# -- the filesystem's model ---------------------------------------------------------------
def test_lazyfs_keeps_only_what_was_synced(lazy):
    m, disk = lazy.mount, lazy.backing
    (m / "d").mkdir()
    _sync(m)  # "d" itself is durable from here on
    _write(m / "d" / "synced", b"kept", sync=True)
    _write(m / "d" / "unsynced", b"lost", sync=False)
    _write(m / "d" / "renamed", b"old name", sync=True)
    _write(m / "d" / "unlinked", b"still here", sync=True)
    _sync(m / "d")  # the four names are durable
    _write(m / "d" / "no-dir-sync", b"data synced, name not", sync=True)
    (m / "d" / "renamed").rename(m / "d" / "new-name")
    (m / "d" / "unlinked").unlink()
    (m / "e").mkdir()  # root not synced again: the directory is gone after the cut
    assert (m / "d" / "unsynced").read_bytes() == b"lost"  # the page cache serves it until the cut
    lazy.crash()
    assert sorted(p.name for p in disk.iterdir()) == ["d"]
    assert {p.name: p.read_bytes() for p in (disk / "d").iterdir()} == {
        "synced": b"kept", "unsynced": b"", "renamed": b"old name", "unlinked": b"still here",
    }  # fmt: skip


def test_lazyfs_directory_sync_persists_names_and_clean_unmount_keeps_all(lazy, tmp_path):
    m, disk = lazy.mount, lazy.backing
    _write(m / "a", b"synced", sync=True)
    _sync(m)
    (m / "a").rename(m / "b")
    _sync(m)
    _write(m / "c", b"clean shutdown", sync=False)
    lazy.stop()  # clean unmount: everything reaches the disk, synced or not
    assert {p.name: p.read_bytes() for p in disk.iterdir()} == {"b": b"synced", "c": b"clean shutdown"}
    fs = lazyfs.LazyFS(disk, tmp_path / "mnt").start()  # the same disk, mounted again
    try:
        assert (fs.mount / "b").read_bytes() == b"synced"
        fd = os.open(fs.mount / "b", os.O_WRONLY)
        try:
            os.ftruncate(fd, 2)  # a truncate is data too: lost without its fsync
        finally:
            os.close(fd)
        fs.crash()
    finally:
        fs.stop()
    assert (disk / "b").read_bytes() == b"synced"


# -- core level -------------------------------------------------------------------------------
def _abandon(broker: Broker) -> None:
    """Drop a broker whose disk vanished under it, as a dead machine would: close its
    descriptors (errors ignored: the mount is gone), flush nothing."""
    for part in broker.partitions():
        for seg in part._segments:  # noqa: SLF001 - nothing public closes without flushing
            for name in ("fd", "index_fd", "time_fd"):
                fd = getattr(seg, name)
                if fd >= 0:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                    setattr(seg, name, -1)
            for table in (seg.index, seg.times):
                try:
                    table.close()
                except (OSError, ValueError, BufferError):
                    pass
        part._closed = True  # noqa: SLF001
    broker.closed = True
    try:
        broker.meta.close()
    except Exception:  # noqa: BLE001 - sqlite3 reports the dead disk on close
        pass


def _payload(tag: str, i: int) -> bytes:
    return f"{tag}-{i:05d}-".encode() + bytes([i % 251]) * (40 + i % 60)


async def _core_workload(data: Path, policy: str, fs: lazyfs.LazyFS, state: dict) -> None:
    broker = Broker.open(data, BrokerConfig(log=LogConfig(fsync=policy, segment_bytes=SEGMENT_BYTES)))
    state["broker"] = broker
    acked: dict[tuple[int, int], bytes] = state["acked"]  # (partition, offset) -> payload

    def on_durable(payloads):
        def done(outcome):
            if isinstance(outcome, AppendResult):
                for k, p in enumerate(payloads):
                    acked[(outcome.partition_id, outcome.base_offset + k)] = p
        return done

    async with trio.open_nursery() as nursery:
        await nursery.start(run_broker_tasks, broker)
        broker.create_stream("s")
        broker.create_topic("s", "gone", partitions=2)
        gone = []
        for j in range(4):  # durable records of a topic deleted next: they must not come back under "t"
            broker.append("s", "gone", [AppendInput(_payload("gone", j), b"")], partition=j % 2,
                          on_durable=gone.append)
        with trio.fail_after(30):
            while len(gone) < 4:
                await trio.sleep(0.005)
        broker.delete_topic("s", "gone")
        broker.create_topic("s", "t", partitions=2)  # takes the deleted topic's id and directories
        state["committed"].append("topics")
        broker.tables.create("kv")
        for i in range(20):
            broker.tables.update("kv", [(f"k{i}".encode(), f"v{i}".encode(), -1)])
        state["committed"].append("kv")
        n = 0
        for round_ in range(6):  # lockstep rounds: each waits for its acks, as producers do
            want = len(acked) + 24
            for _ in range(12):
                batch = [_payload("m", n + j) for j in range(2)]
                broker.append("s", "t", [AppendInput(p, b"") for p in batch], partition=n % 2,
                              on_durable=on_durable(batch))
                n += 2
            with trio.fail_after(30):
                while len(acked) < want:
                    await trio.sleep(0.005)
            if round_ == 2:
                broker.consumers.store_offset(Consumer("consumer", 7), "s", "t", 0, 5)
                state["committed"].append("offset")
        for j in range(10):  # appended, maybe being written, never acknowledged: the cut comes now
            broker.append("s", "t", [AppendInput(_payload("late", j), b"")], partition=j % 2,
                          on_durable=on_durable([_payload("late", j)]))
        await trio.sleep(0)
        fs.crash()
        nursery.cancel_scope.cancel()


def _run_and_cut(lazy, policy: str) -> tuple[Path, dict]:
    state = {"acked": {}, "committed": []}
    try:
        trio.run(_core_workload, lazy.mount / "data", policy, lazy, state)
    finally:
        if "broker" in state:
            _abandon(state["broker"])
    return lazy.backing / "data", state


def _stored(broker: Broker) -> dict[tuple[int, int], bytes]:
    got = {}
    for pid in (0, 1):
        part = broker.partition("s", "t", pid)
        offset = part.first_offset
        while offset < part.next_offset:
            batch = broker.read("s", "t", pid, offset, 1000)
            records = list(batch.records())
            assert records, f"partition {pid} stops serving at {offset} before {part.next_offset}"
            for rv in records:
                got[(pid, rv.offset)] = bytes(rv.payload)
            offset = records[-1].offset + 1
    return got


@pytest.mark.parametrize("policy", ["always", "batch"])
def test_core_acknowledged_survives_power_loss(lazy, policy):
    data, state = _run_and_cut(lazy, policy)
    assert state["committed"] == ["topics", "kv", "offset"] and len(state["acked"]) == 144
    broker = Broker.open(data)  # the disk after the cut; recovery must not refuse
    try:
        assert [t.name for t in broker.list_topics("s")] == ["t"]
        stored = _stored(broker)
        for key, payload in state["acked"].items():
            assert stored.get(key) == payload, f"acknowledged record {key} lost or changed"
        for key, payload in stored.items():  # the rest can only be appends the cut interrupted
            assert key in state["acked"] or payload.startswith(b"late-"), (key, payload[:12])
        assert broker.tables.get("kv", [f"k{i}".encode() for i in range(20)]) == [
            (f"k{i}".encode(), f"v{i}".encode(), i) for i in range(20)
        ]
        assert broker.consumers.get_offset(Consumer("consumer", 7), "s", "t", 0) == 5
        assert sum(broker.partition("s", "t", p).segment_count for p in (0, 1)) > 2  # rolls happened
    finally:
        broker.close()


def test_core_never_recovers_keeping_records_as_acknowledged(lazy):
    """Under ``never`` Ferry fsyncs no record, so the window is everything written since
    the last clean shutdown (on a real disk the kernel's writeback, about 30 s); this model
    writes nothing back on its own. Recovery starts, the metadata (always FULL) is all
    there, and whatever records survived are the acknowledged ones at their offsets."""
    data, state = _run_and_cut(lazy, "never")
    broker = Broker.open(data)
    try:
        assert [t.name for t in broker.list_topics("s")] == ["t"]
        assert broker.consumers.get_offset(Consumer("consumer", 7), "s", "t", 0) == 5
        for key, payload in _stored(broker).items():
            assert state["acked"].get(key) == payload, f"record {key} is not what was acknowledged"
        broker.append("s", "t", [AppendInput(b"after", b"")], partition=0)  # writable again
        broker.flush()
    finally:
        broker.close()




def test_core_never_clean_shutdown_then_cut_keeps_everything(lazy):
    """A clean shutdown writes and fsyncs everything whatever the policy (docs/storage.md).
    Under ``never`` the directories holding the segments were never synced, so before
    Broker.close synced them a cut after a clean shutdown kept no record at all."""
    data = lazy.mount / "data"
    broker = Broker.open(data, BrokerConfig(log=LogConfig(fsync="never", segment_bytes=SEGMENT_BYTES)))
    broker.create_stream("s")
    broker.create_topic("s", "t", partitions=2)
    sent = {(j % 2, j // 2): _payload("m", j) for j in range(60)}
    for j in range(60):
        broker.append("s", "t", [AppendInput(sent[(j % 2, j // 2)], b"")], partition=j % 2)
    broker.close()
    lazy.crash()
    with Broker.open(lazy.backing / "data") as again:
        assert _stored(again) == sent


def test_salvage_keeps_the_damaged_original_through_a_cut(lazy, monkeypatch):
    """A sealed segment found damaged at open is moved to quarantine/ and its good runs
    written back. The cut comes right after salvage's last fsync of the partition
    directory: the original must be on disk somewhere (it used to be lost when that
    directory was synced before quarantine/), and the records of the good runs too."""
    from core.log import salvage as salvage_mod

    data = lazy.mount / "data"
    broker = Broker.open(data, BrokerConfig(log=LogConfig(fsync="always", segment_bytes=1500)))
    broker.create_stream("s")
    broker.create_topic("s", "t")
    for i in range(0, 60, 3):  # one 3-record batch per flush, several segments
        broker.append("s", "t", [AppendInput(_payload("m", j), b"") for j in range(i, i + 3)], partition=0)
        broker.flush()
    broker.close()
    pdir = data / "streams" / "0" / "topics" / "0" / "partitions" / "0"
    victim = sorted(pdir.glob("*.log"))[1]
    damaged = bytearray(victim.read_bytes())
    damaged[56 + 64 + 2] ^= 0x20  # the first record's payload (after the batch and record headers)
    _write(victim, bytes(damaged), sync=True)
    victim.with_suffix(".index").unlink()  # a rebuild at open walks every CRC and finds it
    _sync(pdir)
    real = salvage_mod.fsync_dir

    def fsync_then_cut(path):
        real(path)
        if Path(path) == pdir and (pdir / "quarantine" / victim.name).exists():  # after the move
            lazy.crash()

    monkeypatch.setattr(salvage_mod, "fsync_dir", fsync_then_cut)
    with pytest.raises(Exception):  # the disk vanished in the middle of opening
        Broker.open(data, BrokerConfig(log=LogConfig(fsync="always", segment_bytes=1500)))
    monkeypatch.setattr(salvage_mod, "fsync_dir", real)
    disk = lazy.backing / "data" / pdir.relative_to(data)
    kept = [p.read_bytes() for p in (*disk.glob("*.log"), *disk.glob("quarantine/*"))]
    assert bytes(damaged) in kept, "the damaged original is gone from the disk"
    with Broker.open(lazy.backing / "data") as again:
        got, offset = {}, 0
        while msgs := again.read_messages("s", "t", 0, offset, 100):  # a read inside the gap skips it
            got |= {m.offset: m.payload for m in msgs}
            offset = msgs[-1].offset + 1
        assert set(got) == set(range(60)) - {9, 10, 11}  # only the damaged batch is gone
        assert all(got[o] == _payload("m", o) for o in got)


# -- process level -----------------------------------------------------------------------------
PROC_BINDING = '[[binding]]\nstream = "k"\ntopic = "t"\ncreate = true\npartitions = 2\n'
PORT_LINE = re.compile(r"^\s+(nats|http|kafka|iggy_tcp)\s+127\.0\.0\.1:(\d+)/tcp", re.M)
ROOT = ("iggy", "iggy")  # ferry serve's root user until changed
JS_MESSAGES, JS_ACKED = 30, 5  # JetStream publishes; consumer acks among the first fetched
HTTP_SENDS, KAFKA_RECORDS = 10, 60
IGGY_BATCHES = 8  # apache-iggy 0.9.0 sends of 5 messages each (tests/iggy/clients/current_powerloss.py)
IGGY = "apache-iggy==0.9.0"


def serve_on(cwd: Path, data: Path) -> tuple[subprocess.Popen, dict[str, int]]:
    proc, banner = serve_process(cwd, data, "--config", str(cwd / "ferry.toml"), "--only",
                                 "nats,http,kafka,iggy_tcp", "--nats-port", "0", "--http-port", "0",
                                 "--kafka-port", "0", "--iggy-tcp-port", "0", "--fsync", "batch")
    ports = {name: int(port) for name, port in PORT_LINE.findall(banner)}
    assert set(ports) == {"nats", "http", "kafka", "iggy_tcp"}, banner
    return proc, ports


async def _js_and_http(ports: dict[str, int], token: str, acked: dict) -> None:
    nc = await nats.connect(f"nats://127.0.0.1:{ports['nats']}", token=token, allow_reconnect=False)
    try:
        js = nc.jetstream()
        await js.add_stream(name="PL", subjects=["pl.>"])
        for i in range(JS_MESSAGES):
            payload = _payload("js", i)
            ack = await js.publish("pl.x", payload)  # PubAck: durable under the policy
            acked["js"][ack.seq] = payload
        sub = await js.pull_subscribe("pl.x", durable="dur")
        for msg in await sub.fetch(JS_ACKED, timeout=10):  # none left delivered-but-unacked (ack_wait)
            await msg.ack_sync()  # the server confirmed this ack: it must not come back
            acked["js_consumed"].append(msg.metadata.sequence.stream)
    finally:
        await nc.close()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{ports['http']}", timeout=20) as c:
        r = await c.post("/users/login", json={"username": ROOT[0], "password": ROOT[1]})
        acked["http_token"] = r.json()["access_token"]["token"]  # signed with the key in the data dir
        c.headers["authorization"] = f"Bearer {acked['http_token']}"
        assert (await c.post("/streams", json={"name": "h"})).status_code == 200
        r = await c.post("/streams/h/topics", json={"name": "t", "partitions_count": 1, "compression_algorithm": "none",
                                                    "message_expiry": 0, "max_topic_size": 0})
        assert r.status_code == 200, r.text
        for i in range(HTTP_SENDS):
            batch = [_payload("http", 3 * i + j) for j in range(3)]
            r = await c.post("/streams/h/topics/t/messages", json={
                "partitioning": {"kind": "balanced"},
                "messages": [{"payload": base64.b64encode(p).decode()} for p in batch]})
            assert r.status_code == 201, r.text
            acked["http"] += batch


def _kafka(ports: dict[str, int], acked: dict) -> None:
    p = Producer({"bootstrap.servers": f"127.0.0.1:{ports['kafka']}", "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "PLAIN", "sasl.username": ROOT[0], "sasl.password": ROOT[1], "acks": "all"})

    def report(err, msg):
        if err is None:
            acked["kafka"][(msg.partition(), msg.offset())] = msg.value()

    for i in range(KAFKA_RECORDS):
        p.produce("k.t", _payload("kafka", i), partition=i % 2, on_delivery=report)
    assert p.flush(60) == 0, "records still unreported"


async def _http_after(ports: dict[str, int], token: str) -> list[bytes]:
    """The HTTP topic's messages, read with the token issued before the cut: the
    signing key (core/keyfile.py) must have survived it."""
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{ports['http']}", timeout=20,
                                 headers={"authorization": f"Bearer {token}"}) as c:
        r = await c.get("/streams/h/topics/t/messages",
                        params={"partition_id": 0, "kind": "offset", "value": 0, "count": 1000})
        assert r.status_code == 200, r.text
        return [base64.b64decode(m["payload"]) for m in r.json()["messages"]]


async def _js_after(ports: dict[str, int], token: str) -> tuple[dict[int, bytes], list[int]]:
    nc = await nats.connect(f"nats://127.0.0.1:{ports['nats']}", token=token, allow_reconnect=False)
    try:
        js = nc.jetstream()
        stored = {}
        for seq in range(1, JS_MESSAGES + 1):
            stored[seq] = (await js.get_msg("PL", seq)).data
        sub = await js.pull_subscribe("pl.x", durable="dur")
        # Exactly as many as were never acked: the fetch returns once they are in, and an
        # acked message coming back would take the place of one of them.
        pending = JS_MESSAGES - JS_ACKED
        delivered = [m.metadata.sequence.stream for m in await sub.fetch(pending, timeout=10)]
        return stored, delivered
    finally:
        await nc.close()


def test_process_acknowledged_survives_power_loss(lazy, tmp_path):
    (tmp_path / "ferry.toml").write_text(PROC_BINDING)
    acked = {"js": {}, "js_consumed": [], "http": [], "kafka": {}}
    # NATS logs in with a personal access token (a hash lookup, as test_gw_kill.py does): a
    # password costs argon2 at every connect, too slow for the server's auth timeout on a
    # loaded machine. Committed before the cut, it must work after it too.
    with Broker.open(lazy.mount / "data") as broker:
        token = broker.meta.users.create_pat(0, "powerloss")
    proc, ports = serve_on(tmp_path, lazy.mount / "data")
    try:
        asyncio.run(_js_and_http(ports, token, acked))
        _kafka(ports, acked)
        # the Iggy binary protocol through the real client: each line is one acknowledged send
        acked["iggy"] = [p for line in run_scenario(IGGY, "current_powerloss.py", ports["iggy_tcp"], "send",
                                                    str(IGGY_BATCHES)) for p in line["payloads"]]
    finally:
        kill_process(proc)  # SIGKILL: no flush, no close
    lazy.crash()  # then the power goes
    assert len(acked["kafka"]) == KAFKA_RECORDS and acked["js_consumed"] == list(range(1, JS_ACKED + 1))
    data = lazy.backing / "data"
    proc, ports = serve_on(tmp_path, data)  # restarts on what the disk kept
    try:
        stored, delivered = asyncio.run(_js_after(ports, token))
        http_read = asyncio.run(_http_after(ports, acked["http_token"]))
        (iggy_read,) = run_scenario(IGGY, "current_powerloss.py", ports["iggy_tcp"], "stored")
    finally:
        kill_process(proc)
    assert stored == acked["js"]
    assert sorted(delivered) == list(range(JS_ACKED + 1, JS_MESSAGES + 1)), delivered  # acked: never again
    with Broker.open(data) as broker:
        http = [m.payload for m in broker.read_messages("h", "t", 0, 0, 1000)]
        assert http == http_read == acked["http"]
        assert len(acked["iggy"]) == 5 * IGGY_BATCHES
        iggy = [m.payload.decode() for m in broker.read_messages("pl", "t", 0, 0, 1000)]
        assert iggy == [p for _o, _id, p in iggy_read["messages"]] == acked["iggy"]
        assert [i for _o, i, _p in iggy_read["messages"]] == list(range(1, 5 * IGGY_BATCHES + 1))  # ids kept
        for (pid, offset), value in acked["kafka"].items():
            assert [m.payload for m in broker.read_messages("k", "t", pid, offset, 1)] == [value]


PRAVEGA_EVENTS = 300


def test_pravega_writer_survives_power_loss(lazy, tmp_path):
    """The real pravega writer (killwrite.py, as in tests/pravega/test_pravega_durability.py)
    awaits its acks in waves; after a third, SIGKILL and the cut; ferry restarts on what the
    disk kept, on the same ports, and the same writer carries on: it learns from SetupAppend
    the last event stored for its writer id (the dedup state in the log's batch headers)
    and resends only what is missing. A reader group then reads every event exactly once."""
    seg_port, ctl_port = free_port(), free_port()

    def start(data: Path) -> subprocess.Popen:
        return serve_process(tmp_path, data, "--fsync", "batch", "--only", "pravega,pravega_controller",
                             "--pravega-port", str(seg_port), "--pravega-controller-port", str(ctl_port),
                             busy_port_wait_s=30)[0]

    server = start(lazy.mount / "data")
    client = start_scenario("killwrite.py", str(ctl_port), str(PRAVEGA_EVENTS), rust_log="warn")
    killed_at = None
    try:
        for line in client.stdout:  # the client's JSON lines, among its own log lines
            if line.startswith("{") and json_head(line).get("step") == "acked" and json_head(line)["n"] >= 100:
                killed_at = json_head(line)["n"]
                break
        assert killed_at is not None, "the writer ended before the cut"
        kill_process(server)
        lazy.crash()
        server = start(lazy.backing / "data")
        rest = finish(client, "killwrite.py")
    finally:
        if client.poll() is None:
            client.kill()
        kill_process(server)
    read = [line for line in rest if line["step"] == "read"][0]
    assert read == {"step": "read", "count": PRAVEGA_EVENTS, "distinct": PRAVEGA_EVENTS, "missing": []}
