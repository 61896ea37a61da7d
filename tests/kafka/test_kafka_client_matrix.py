"""Issue 25's per-client definition of done, one scenario per real client against a
gateway on 127.0.0.1 port 0 (docs/kafka.md "Tested clients"):

* a topic created and described through the client's admin API;
* idempotent ``acks=all`` producers, one per compression codec the client ships
  with, writing keyed records with headers;
* a consumer group of two members: the first reads wave 1 alone, a second joins
  (rebalance: one partition each) and they read wave 2, the first leaves (rebalance:
  the second takes both) and the second reads wave 3. Across the members every
  record is read once and each key's records arrive in the order produced
  (confluent-kafka also with the incremental cooperative-sticky assignor);
* seek by timestamp: ListOffsets with a time between waves 2 and 3 answers each
  partition's first wave-3 record, and reading from there gives wave 3 exactly; a
  lookup among records whose CreateTime the producer back-dated goes by CreateTime;
* committed offsets survive a gateway restart on the same data directory: after it,
  the group resumes where it committed (one test, every client, one restart).

SASL PLAIN and SCRAM are in test_kafka_clients.py, TLS in test_kafka_tls.py. The
clients get short group timeouts (GROUP_*) so a rebalance takes a heartbeat or two,
and the gateway no initial rebalance delay.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from dataclasses import dataclass

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from ferry_harness import running_gateway, store_env
from test_kafka_clients import NODE, NODE_DIR, WAIT_S, kp_sasl, sasl, topic_name

pytestmark = pytest.mark.store

KEYS = [f"k{i}" for i in range(8)]  # several keys over two partitions (the client's own partitioner)
PER_CODEC = 4  # records each codec's producer writes per wave
# Group timeouts: a member that left or joined is noticed within a heartbeat, and a
# rebalance that waits for a slow member ends well inside WAIT_S (Kafka's defaults are
# 45 s sessions and 5-minute poll intervals, far too slow for a test).
GROUP_SESSION_MS, GROUP_HEARTBEAT_MS, GROUP_POLL_INTERVAL_MS = 6000, 500, 10000
POLL_MS = 100  # one poll's wait: the loops below poll every member in turn
KP_POLL_MS = 1000  # kafka-python's (KafkaPythonOps.poll)
DATED, DATED_T0 = 5, 1_600_000_000_000  # back-dated records: their CreateTimes (ms), 10 ms apart


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with running_gateway(tmp_path_factory.mktemp("kafka-matrix"), FERRY_KAFKA_INITIAL_REBALANCE_DELAY_MS="0") as gw:
        yield gw


@dataclass(frozen=True)
class Rec:
    """A consumed record, whatever client read it."""

    member: str
    partition: int
    offset: int
    key: str
    value: str
    headers: tuple
    timestamp: int


# -- the scenario, shared by the Python clients -----------------------------------------------------
class Scenario:
    """Issue 25's producer, group and seek steps over one client (``ops``, below)."""

    def __init__(self, ops, topic: str) -> None:
        self.ops, self.topic = ops, topic
        self.produced: list[tuple[str, str, tuple]] = []  # (key, value, headers) in produce order
        self.got: list[Rec] = []  # in the order the members' polls returned them

    def wave(self, producers: dict, number: int) -> list[str]:
        values = []
        for codec, prod in producers.items():  # one producer after the other: per-key order is produce order
            for _ in range(PER_CODEC):
                n = len(self.produced)
                key, value = KEYS[n % len(KEYS)], f"w{number}-{n}"
                headers = (("wave", str(number).encode()), ("codec", codec.encode()))
                self.ops.send(prod, self.topic, key, value, headers)
                self.produced.append((key, value, headers))
                values.append(value)
            self.ops.flush(prod)
        return values

    def pump(self, members: dict, done, what: str) -> None:
        """Poll every member in turn until ``done()``; then poll once more each and check
        nothing else came (a duplicate would)."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            for name, c in members.items():
                self.got += [Rec(name, *r) for r in self.ops.poll(c)]
            if done():
                break
        else:
            raise AssertionError(f"{what}: {len(self.got)} records, assignments "
                                 f"{ {n: self.ops.assigned(c) for n, c in members.items()} }")
        before = len(self.got)
        for name, c in members.items():
            self.got += [Rec(name, *r) for r in self.ops.poll(c)]
        assert len(self.got) == before, self.got[before:]

    def run(self) -> None:
        ops, topic = self.ops, self.topic
        assert ops.create_and_describe(topic, 2) == [0, 1]
        producers = {codec: ops.producer(codec) for codec in ops.codecs}
        group = f"g-{topic}"
        a = ops.consumer(group, topic)
        members = {"a": a}
        wave1 = self.wave(producers, 1)
        self.pump(members, lambda: len(self.got) == len(wave1) and ops.assigned(a) == {0, 1}, "a alone")
        ops.commit(a)
        b = members["b"] = ops.consumer(group, topic)  # joins: the group rebalances
        self.pump(members, lambda: len(ops.assigned(a)) == len(ops.assigned(b)) == 1, "b joined")
        split = {"a": ops.assigned(a), "b": ops.assigned(b)}
        wave2 = self.wave(producers, 2)
        self.pump(members, lambda: len(self.got) == len(wave1) + len(wave2), "wave 2")
        for c in members.values():
            ops.commit(c)
        ops.close(members.pop("a"))  # leaves (committing first, as on close): the group rebalances
        self.pump(members, lambda: ops.assigned(b) == {0, 1}, "a left")
        boundary = ms_boundary()  # after wave 2 was acknowledged, before wave 3 is created
        wave3 = self.wave(producers, 3)
        self.pump(members, lambda: len(self.got) == len(self.produced), "wave 3")
        ops.close(b)
        for prod in producers.values():
            ops.close_producer(prod)

        check_read_once_in_key_order(self.produced, self.got)
        by_value = {r.value: r for r in self.got}
        assert {by_value[v].member for v in wave1} == {"a"}
        assert all(by_value[v].partition in split[by_value[v].member] for v in wave2)
        assert {by_value[v].member for v in wave3} == {"b"}
        first3 = {}  # partition -> its first wave-3 record
        for v in wave3:
            r = by_value[v]
            if r.partition not in first3 or r.offset < first3[r.partition].offset:
                first3[r.partition] = r
        assert set(first3) == {0, 1}, "the keys of wave 3 all landed in one partition"
        found = ops.offsets_for_times(topic, [0, 1], boundary)
        for p, (offset, ts) in found.items():
            assert offset == first3[p].offset, (p, offset, first3[p])
            assert ts is None or ts == first3[p].timestamp, (p, ts, first3[p])
        again = ops.read_from(topic, {p: o for p, (o, _ts) in found.items()}, len(wave3))
        assert sorted((r.partition, r.offset, r.value) for r in again) == sorted(
            (by_value[v].partition, by_value[v].offset, v) for v in wave3)
        self.back_dated()

    def back_dated(self) -> None:
        """Records whose CreateTime the producer set, long before they were appended: the
        lookup answers by CreateTime, as Kafka does on a CreateTime topic."""
        ops, dated = self.ops, f"{self.topic}-dated"
        prod = ops.producer("none")
        for i in range(DATED):
            ops.send(prod, dated, "k", f"d{i}", (), timestamp=DATED_T0 + 10 * i)
        ops.flush(prod)
        ops.close_producer(prod)
        found = ops.offsets_for_times(dated, [0], DATED_T0 + 25)
        assert found[0][0] == 3 and found[0][1] in (None, DATED_T0 + 30), found


def ms_boundary() -> int:
    """A time in ms after everything acknowledged so far and before anything produced next:
    the records before it were created and appended before it, those after it created (so
    appended) at or after it, whichever time a lookup goes by (docs/kafka.md "ListOffsets")."""
    t = time.time_ns() // 1_000_000 + 1
    while time.time_ns() // 1_000_000 < t:
        time.sleep(0.0005)
    return t


def check_read_once_in_key_order(produced: list, got: list) -> None:
    values = [r.value for r in got]
    assert len(values) == len(set(values)), sorted(v for v in values if values.count(v) > 1)
    assert sorted(values) == sorted(v for _k, v, _h in produced)
    sent = {v: (k, h) for k, v, h in produced}
    for r in got:
        assert (r.key, r.headers) == sent[r.value], r
    for key in KEYS:
        assert [r.value for r in got if r.key == key] == [v for k, v, _h in produced if k == key], key
    partition_of = {}
    for r in got:  # the partitioner keeps a key on one partition
        assert partition_of.setdefault(r.key, r.partition) == r.partition, r


# -- confluent-kafka (librdkafka) --------------------------------------------------------------------
class ConfluentOps:
    codecs = ("none", "gzip", "snappy", "lz4", "zstd")

    def __init__(self, gw, **group_conf) -> None:
        self.conf = sasl(gw)
        self.group_conf = group_conf  # more consumer settings (an assignor)
        self.errors: list = []

    def create_and_describe(self, topic: str, partitions: int) -> list[int]:
        admin = AdminClient(self.conf)
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(WAIT_S)
        (described,) = admin.describe_topics(TopicCollection([topic])).values()
        desc = described.result(WAIT_S)
        assert desc.name == topic
        return sorted(p.id for p in desc.partitions)

    def producer(self, codec: str):
        return Producer({**self.conf, "acks": "all", "enable.idempotence": True, "compression.type": codec,
                         "linger.ms": 5})

    def send(self, prod, topic, key, value, headers, timestamp: int = 0) -> None:
        prod.produce(topic, key=key.encode(), value=value.encode(), headers=list(headers), timestamp=timestamp,
                     on_delivery=lambda err, _msg: err is not None and self.errors.append(err))

    def flush(self, prod) -> None:
        assert prod.flush(WAIT_S) == 0 and not self.errors, self.errors

    def close_producer(self, prod) -> None:
        pass

    def consumer(self, group: str, topic: str):
        c = Consumer({**self.conf, "group.id": group, "auto.offset.reset": "earliest",
                      "session.timeout.ms": GROUP_SESSION_MS, "heartbeat.interval.ms": GROUP_HEARTBEAT_MS,
                      "max.poll.interval.ms": GROUP_POLL_INTERVAL_MS, **self.group_conf})
        c.subscribe([topic])
        return c

    @staticmethod
    def _rec(m) -> tuple:
        assert m.error() is None, m.error()
        return (m.partition(), m.offset(), m.key().decode(), m.value().decode(), tuple(m.headers() or ()),
                m.timestamp()[1])

    def poll(self, c) -> list:
        m = c.poll(POLL_MS / 1000)
        return [] if m is None else [self._rec(m)]

    def assigned(self, c) -> set:
        return {tp.partition for tp in c.assignment()}

    def commit(self, c) -> None:
        c.commit(asynchronous=False)

    def close(self, c) -> None:
        c.close()  # commits the stored offsets (enable.auto.commit), then LeaveGroup

    def offsets_for_times(self, topic, partitions, ts) -> dict:
        c = Consumer({**self.conf, "group.id": f"seek-{topic}"})
        try:
            found = c.offsets_for_times([TopicPartition(topic, p, ts) for p in partitions], WAIT_S)
        finally:
            c.close()
        return {tp.partition: (tp.offset, None) for tp in found}  # librdkafka drops the timestamp

    def read_from(self, topic, offsets: dict, n: int) -> list:
        c = Consumer({**self.conf, "group.id": f"seek-{topic}", "enable.auto.commit": False})
        c.assign([TopicPartition(topic, p, 0) for p in offsets])
        for p, o in offsets.items():
            c.seek(TopicPartition(topic, p, o))
        try:
            return read_n(lambda: self.poll(c), n)
        finally:
            c.close()


def read_n(poll, n: int) -> list:
    """Records from ``poll`` until ``n`` came, then one more poll that must find nothing."""
    got = []
    for _ in range(WAIT_S * 1000 // POLL_MS):
        got += poll()
        if len(got) >= n:
            break
    got += poll()
    return [Rec("seek", *r) for r in got]


# -- kafka-python ------------------------------------------------------------------------------------
class KafkaPythonOps:
    codecs = ("none", "gzip", "snappy", "lz4", "zstd")

    def __init__(self, gw) -> None:
        self.conf = kp_sasl(gw)
        self.futures: list = []

    def create_and_describe(self, topic, partitions) -> list[int]:
        from kafka.admin import KafkaAdminClient, NewTopic as KNewTopic
        admin = KafkaAdminClient(**self.conf)
        try:
            admin.create_topics([KNewTopic(topic, partitions, 1)])
            (desc,) = admin.describe_topics([topic])
        finally:
            admin.close()
        assert desc["error_code"] == 0 and desc["name"] == topic, desc  # Metadata v12's field names
        return sorted(p["partition_index"] for p in desc["partitions"])

    def producer(self, codec):
        from kafka import KafkaProducer
        return KafkaProducer(**self.conf, acks="all", enable_idempotence=True,
                             compression_type=None if codec == "none" else codec)

    def send(self, prod, topic, key, value, headers, timestamp: int | None = None) -> None:
        self.futures.append(prod.send(topic, key=key.encode(), value=value.encode(), headers=list(headers),
                                      timestamp_ms=timestamp))

    def flush(self, prod) -> None:
        prod.flush(WAIT_S)
        for f in self.futures:
            f.get(WAIT_S)  # raises the produce error, if any
        self.futures.clear()

    def close_producer(self, prod) -> None:
        prod.close()

    def consumer(self, group, topic):
        from kafka import KafkaConsumer
        # metadata_max_age_ms: a CI run saw kafka-python's group leader assign before its
        # first Metadata answer came ("No partition metadata for topic"), leaving the group
        # with nothing assigned until the next refresh (5 minutes by default); a changed
        # topic's metadata makes it rejoin, so refresh often.
        return KafkaConsumer(topic, **self.conf, group_id=group, auto_offset_reset="earliest",
                             session_timeout_ms=GROUP_SESSION_MS, heartbeat_interval_ms=GROUP_HEARTBEAT_MS,
                             max_poll_interval_ms=GROUP_POLL_INTERVAL_MS, metadata_max_age_ms=1000)

    @staticmethod
    def _rec(r) -> tuple:
        return (r.partition, r.offset, r.key.decode(), r.value.decode(), tuple(r.headers), r.timestamp)

    def poll(self, c) -> list:
        # kafka-python 3.0 runs a rebalance inside poll() on the poll's own time: the
        # pre-rebalance commit and the JoinGroup get what is left of it, and a CI run at
        # load 10 saw a member never give a partition up within 100 ms polls
        return [self._rec(r) for records in c.poll(timeout_ms=KP_POLL_MS).values() for r in records]

    def assigned(self, c) -> set:
        return {tp.partition for tp in c.assignment()}

    def commit(self, c) -> None:
        c.commit()

    def close(self, c) -> None:
        c.close()  # autocommit, then LeaveGroup

    def _plain_consumer(self):
        from kafka import KafkaConsumer
        return KafkaConsumer(**self.conf, enable_auto_commit=False)

    def offsets_for_times(self, topic, partitions, ts) -> dict:
        from kafka.structs import TopicPartition as KpPartition
        c = self._plain_consumer()
        try:
            found = c.offsets_for_times({KpPartition(topic, p): ts for p in partitions})
        finally:
            c.close()
        return {tp.partition: (-1, None) if ot is None else (ot.offset, ot.timestamp) for tp, ot in found.items()}

    def read_from(self, topic, offsets, n) -> list:
        from kafka.structs import TopicPartition as KpPartition
        c = self._plain_consumer()
        c.assign([KpPartition(topic, p) for p in offsets])
        for p, o in offsets.items():
            c.seek(KpPartition(topic, p), o)
        try:
            return read_n(lambda: self.poll(c), n)
        finally:
            c.close()


# -- aiokafka (driven through one event loop, run while each call lasts) -----------------------------
class AiokafkaOps(KafkaPythonOps):
    codecs = ("none", "gzip", "snappy", "lz4", "zstd")

    def __init__(self, gw, loop) -> None:
        super().__init__(gw)
        self.run = loop.run_until_complete

    def create_and_describe(self, topic, partitions) -> list[int]:
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic as ANewTopic

        async def go():
            admin = AIOKafkaAdminClient(**self.conf)
            await admin.start()
            try:
                await admin.create_topics([ANewTopic(topic, partitions, 1)])
                return await admin.describe_topics([topic])
            finally:
                await admin.close()
        (desc,) = self.run(go())
        assert desc["error_code"] == 0 and desc["topic"] == topic, desc
        return sorted(p["partition"] for p in desc["partitions"])

    def producer(self, codec):
        from aiokafka import AIOKafkaProducer
        return self.run(started(AIOKafkaProducer, **self.conf, acks="all", enable_idempotence=True,
                                compression_type=None if codec == "none" else codec))

    def send(self, prod, topic, key, value, headers, timestamp: int | None = None) -> None:
        self.futures.append(self.run(prod.send(topic, key=key.encode(), value=value.encode(), headers=list(headers),
                                               timestamp_ms=timestamp)))

    def flush(self, prod) -> None:
        self.run(prod.flush())
        for f in self.futures:
            self.run(f)  # raises the produce error, if any
        self.futures.clear()

    def close_producer(self, prod) -> None:
        self.run(prod.stop())

    def consumer(self, group, topic):
        from aiokafka import AIOKafkaConsumer
        return self.run(started(AIOKafkaConsumer, topic, **self.conf, group_id=group, auto_offset_reset="earliest",
                                session_timeout_ms=GROUP_SESSION_MS, heartbeat_interval_ms=GROUP_HEARTBEAT_MS,
                                max_poll_interval_ms=GROUP_POLL_INTERVAL_MS,
                                rebalance_timeout_ms=GROUP_POLL_INTERVAL_MS))

    def poll(self, c) -> list:
        batches = self.run(c.getmany(timeout_ms=POLL_MS))
        return [self._rec(r) for records in batches.values() for r in records]

    def commit(self, c) -> None:
        self.run(c.commit())

    def close(self, c) -> None:
        self.run(c.stop())  # autocommit, then LeaveGroup

    def _plain_consumer(self):
        from aiokafka import AIOKafkaConsumer
        return self.run(started(AIOKafkaConsumer, **self.conf, enable_auto_commit=False))

    def offsets_for_times(self, topic, partitions, ts) -> dict:
        from aiokafka.structs import TopicPartition as AioPartition
        c = self._plain_consumer()
        try:
            found = self.run(c.offsets_for_times({AioPartition(topic, p): ts for p in partitions}))
        finally:
            self.run(c.stop())
        return {tp.partition: (-1, None) if ot is None else (ot.offset, ot.timestamp) for tp, ot in found.items()}

    def read_from(self, topic, offsets, n) -> list:
        from aiokafka.structs import TopicPartition as AioPartition
        c = self._plain_consumer()

        async def seek():  # assign() needs the running loop
            c.assign([AioPartition(topic, p) for p in offsets])
            for p, o in offsets.items():
                c.seek(AioPartition(topic, p), o)
        self.run(seek())
        try:
            return read_n(lambda: self.poll(c), n)
        finally:
            self.run(c.stop())


async def started(cls, *args, **kwargs):
    """An aiokafka client made inside the loop (its constructor needs the running loop), started."""
    client = cls(*args, **kwargs)
    await client.start()
    return client


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    try:
        yield loop
    finally:
        loop.close()


def test_confluent_admin_codecs_group_join_leave_and_seek_by_timestamp(gw):
    Scenario(ConfluentOps(gw), topic_name("mx-ck")).run()


def test_confluent_cooperative_sticky_group_join_leave(gw):
    # KIP-429's incremental rebalances: the coordinator carries the assignor's bytes, and a
    # member that must give a partition up rejoins once more after revoking it.
    ops = ConfluentOps(gw, **{"partition.assignment.strategy": "cooperative-sticky"})
    ops.codecs = ("none", "lz4")  # every key in each wave; the codecs are covered above
    Scenario(ops, topic_name("mx-coop")).run()


def test_kafka_python_admin_codecs_group_join_leave_and_seek_by_timestamp(gw):
    Scenario(KafkaPythonOps(gw), topic_name("mx-kp")).run()


def test_aiokafka_admin_codecs_group_join_leave_and_seek_by_timestamp(gw, loop):
    Scenario(AiokafkaOps(gw, loop), topic_name("mx-aio")).run()


HAVE_KAFKAJS = NODE is not None and (NODE_DIR / "node_modules" / "kafkajs").is_dir()
needs_kafkajs = pytest.mark.skipif(not HAVE_KAFKAJS, reason="node or kafkajs missing: run `make test` "
                                   "(npm install in tests/kafka/node)")


def kafkajs(gw, mode: str, topic: str) -> dict:
    """Run tests/kafka/node/matrix.js in ``mode``; its last stdout line, parsed."""
    done = subprocess.run([NODE, str(NODE_DIR / "matrix.js"), mode, f"127.0.0.1:{gw.ports['kafka']}", topic],
                          cwd=NODE_DIR, capture_output=True, timeout=120,
                          env={**os.environ, "KAFKA_USER": gw.cfg.auth.root_username,
                               "KAFKA_PASS": gw.cfg.auth.root_password})
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


@needs_kafkajs
def test_kafkajs_admin_gzip_group_join_leave_and_seek_by_timestamp(gw):
    topic = topic_name("mx-js")
    out = kafkajs(gw, "matrix", topic)
    assert out["partitions"] == [0, 1]
    produced = [(k, v, tuple((hk, hv.encode()) for hk, hv in h)) for k, v, h in out["produced"]]
    got = [Rec(r["member"], r["partition"], int(r["offset"]), r["key"], r["value"],
               tuple((hk, hv.encode()) for hk, hv in r["headers"]), int(r["timestamp"])) for r in out["got"]]
    check_read_once_in_key_order(produced, got)
    assert {r.member for r in got if r.value.startswith("w1-")} == {"a"}
    assert {r.member for r in got if r.value.startswith("w3-")} == {"b"}
    assert sorted(len(s) for s in out["split"].values()) == [1, 1] and out["alone"] == [0, 1]
    wave3 = sorted((r.partition, r.offset, r.value) for r in got if r.value.startswith("w3-"))
    firsts = {}
    for p, o, _v in wave3:
        firsts.setdefault(p, o)
    assert set(firsts) == {0, 1}
    assert {int(p): int(o) for p, o in out["found"].items()} == firsts
    assert sorted((r["partition"], int(r["offset"]), r["value"]) for r in out["again"]) == wave3
    assert out["dated"] == "3"  # the back-dated records' lookup, by CreateTime (Scenario.back_dated)


# -- restart: committed offsets are where every client's group resumes -------------------------------
RESUME_FIRST, RESUME_MORE = 10, 5  # records read and committed before the restart, and produced after it


def test_every_client_resumes_its_group_where_it_committed_after_a_restart(tmp_path, loop):
    env = {"FERRY_KAFKA_INITIAL_REBALANCE_DELAY_MS": "0", **store_env()}  # the same store both times
    clients = {"ck": ConfluentOps, "kp": KafkaPythonOps, "aio": lambda gw: AiokafkaOps(gw, loop)}
    topics = {name: topic_name(f"rs-{name}") for name in [*clients, *(["js"] if HAVE_KAFKAJS else [])]}
    sent: dict = {}

    def produce_and_read(gw, name: str, first: int, count: int) -> list[Rec]:
        """Produce ``count`` records, then read through the group until they came (and no more)."""
        ops, topic = clients[name](gw), topics[name]
        scenario = Scenario(ops, topic)
        prod = ops.producer("none")
        for i in range(first, first + count):
            ops.send(prod, topic, KEYS[i % len(KEYS)], f"r{i}", (("n", str(i).encode()),))
        ops.flush(prod)
        ops.close_producer(prod)
        c = ops.consumer(f"g-{topic}", topic)
        scenario.pump({"only": c}, lambda: len(scenario.got) >= count, f"{name} group read")
        ops.commit(c)
        ops.close(c)
        return scenario.got

    with running_gateway(tmp_path, **env) as gw:
        for name in clients:
            sent[name] = produce_and_read(gw, name, 0, RESUME_FIRST)
        if HAVE_KAFKAJS:
            sent["js"] = kafkajs(gw, "commit", topics["js"])
    with running_gateway(tmp_path, **env) as gw:  # the same data directory
        # The stopped gateway deleted its lease key (store pass): Metadata names this
        # gateway alone at once, not the stopped one's port until its lease ran out.
        assert len(AdminClient(sasl(gw)).list_topics(timeout=WAIT_S).brokers) == 1
        for name in clients:
            again = produce_and_read(gw, name, RESUME_FIRST, RESUME_MORE)
            assert sorted(r.value for r in sent[name]) == [f"r{i}" for i in range(RESUME_FIRST)]
            after = sorted(f"r{i}" for i in range(RESUME_FIRST, RESUME_FIRST + RESUME_MORE))
            assert sorted(r.value for r in again) == after, (name, again)  # nothing before the commit
        if HAVE_KAFKAJS:
            resumed = kafkajs(gw, "resume", topics["js"])
            assert sorted(m["value"] for m in sent["js"]["got"]) == sorted(f"r{i}" for i in range(RESUME_FIRST))
            assert sorted(m["value"] for m in resumed["got"]) == sorted(
                f"r{i}" for i in range(RESUME_FIRST, RESUME_FIRST + RESUME_MORE))
