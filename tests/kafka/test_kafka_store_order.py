"""A Kafka idempotent producer's records stay in order in the JetStream store while the
partition stream's leader changes under it (issue 30, fault-schedule finding 1;
gateway/jetstream_store/publisher.py, docs/scale-out.md "Fault schedule").

A real 3-node nats-server cluster and one ``ferry serve --store`` gateway (in a thread).
confluent-kafka (``enable.idempotence``, ``acks=all``) produces numbered records to one
partition in rounds while the test steps the partition stream's leader down
(``$JS.API.STREAM.LEADER.STEPDOWN.<stream>``) again and again, then SIGKILLs the leader
node and starts it again. Whatever the faults did to the publishes, the stream must hold
the records in the order produced, each once, and every delivery report's offset must
name its own record: librdkafka numbers a batch's records from the answer's base offset,
so a base offset naming another record shows up here as a wrong value at an offset.
Before the publish chain the re-sends landed in any order (docs/scale-out.md)."""

from __future__ import annotations

import json
import re
import threading
import time

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ferry_harness import running_gateway
from kafka_support import sasl_conf as conf
from kafka_support import until as wait_until
from gateway.jetstream_store.blocking import BlockingNats
from nats_cluster import NatsCluster, find_nats_server
from nats_cluster_fixtures import SKIP_REASON

pytestmark = [pytest.mark.slow, pytest.mark.skipif(find_nats_server() is None, reason=SKIP_REASON)]
WAIT_S = 90  # a loop's limit: guards a hang only (an election is ~5 s, a node restart more)
STEPDOWNS = 8
STEPDOWN_PAUSE_S = 0.4  # between stepdowns: records are in flight at each (rounds every 20 ms)
ROUND = 100  # records per produce round
ROUND_PAUSE_S = 0.02


def until(what: str, check):
    return wait_until(what, check, WAIT_S)


class Api:
    """JetStream API requests from the test, on Ferry's own blocking NATS client."""

    def __init__(self, cluster: NatsCluster) -> None:
        self.nc = BlockingNats(cluster.urls, name="order-test", connect_timeout_s=5, request_timeout_s=5)

    def call(self, subject: str, body: dict | None = None) -> dict | None:
        try:
            if not self.nc.connected:
                self.nc.connect()
            return json.loads(self.nc.request(subject, json.dumps(body).encode() if body else b"").payload)
        except Exception:  # noqa: BLE001 - no leader, no responders, a node just killed: ask again
            self.nc.close()
            return None

    def leader(self, stream: str) -> str | None:
        doc = self.call(f"$JS.API.STREAM.INFO.{stream}")
        return (doc or {}).get("cluster", {}).get("leader") if doc and "error" not in doc else None


def test_records_keep_their_order_and_offsets_across_stream_leader_changes(tmp_path):
    with NatsCluster(tmp_path / "c") as cluster, \
            running_gateway(tmp_path, FERRY_STORE_URL=cluster.url, FERRY_STORE_PREFIX="ORD") as gw:
        api = Api(cluster)
        admin = AdminClient(conf(gw))
        topic = "ordered"
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(WAIT_S)
        stream = until("the partition stream", lambda: (api.call("$JS.API.STREAM.NAMES", {"subject": "ord.p.>"})
                                                        or {}).get("streams"))[0]
        until("a stream leader", lambda: api.leader(stream))

        acked: list[tuple[int, bytes]] = []
        failed: list[str] = []
        stop = threading.Event()

        def delivered(err, msg) -> None:
            if err is not None:
                failed.append(str(err))
            else:
                acked.append((msg.offset(), msg.value()))

        def produce() -> None:
            p = Producer({**conf(gw), "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                          "message.timeout.ms": 120_000, "request.timeout.ms": 60_000})
            n = 0
            while not stop.is_set():
                for _ in range(ROUND):
                    p.produce(topic, value=b"%08d" % n, partition=0, on_delivery=delivered)
                    n += 1
                p.poll(ROUND_PAUSE_S)
            p.flush(WAIT_S)
            produced.append(n)

        produced: list[int] = []
        writer = threading.Thread(target=produce, name="producer")
        writer.start()
        try:
            until("records acknowledged before the faults", lambda: len(acked) >= 2 * ROUND)
            leaders = []
            for _ in range(STEPDOWNS):
                doc = api.call(f"$JS.API.STREAM.LEADER.STEPDOWN.{stream}")
                if doc and doc.get("success"):
                    leaders.append(doc)
                time.sleep(STEPDOWN_PAUSE_S)
            victim = cluster.index(until("the stream leader", lambda: api.leader(stream)))
            cluster.kill(victim)
            until("a new stream leader", lambda: api.leader(stream))
            time.sleep(1.0)
            cluster.start(victim)
            cluster.wait_ready()
            time.sleep(1.0)
        finally:
            stop.set()
            writer.join(WAIT_S + 30)
        assert not writer.is_alive()
        assert len(leaders) >= STEPDOWNS // 2, "the stepdowns were refused"
        assert failed == [] and len(acked) == produced[0], (failed[:5], len(acked), produced)

        # The partition as stored, read back through the gateway from offset 0.
        c = Consumer({**conf(gw), "group.id": "order-check", "enable.auto.commit": False})
        c.assign([TopicPartition(topic, 0, 0)])
        stored: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + WAIT_S
        while len(stored) < len(acked) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                stored.append((m.offset(), m.value()))
        c.close()
        # The faults did hit the publish path: publishes failed and were sent again.
        metrics = httpx.get(f"http://127.0.0.1:{gw.ports['http']}/metrics", timeout=10).text
        recoveries = re.search(r"^ferry_store_publish_recoveries_total (\S+)$", metrics, re.M)
        assert recoveries is not None and float(recoveries.group(1)) >= 1, metrics[-2000:]

        offsets = [o for o, _ in stored]
        assert offsets == list(range(len(stored)))
        values = [v for _, v in stored]
        out_of_order = [(o, values[o - 1], values[o]) for o in range(1, len(values)) if values[o] <= values[o - 1]]
        if out_of_order:  # what the stream itself holds there (the read above came through the cache)
            o = out_of_order[0][0]
            raw = [api.call(f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq}) for seq in range(o - 1, o + 3)]
            count = values.count(values[o])
            have = set(values)
            missing = [i for i in range(produced[0]) if b"%08d" % i not in have]
            pytest.fail(f"{len(out_of_order)} records stored after a later one: {out_of_order[:5]}; "
                        f"{count} copies; {len(missing)} missing, from {missing[:3]}; {len(values)} read; "
                        f"offsets {o - 2}..{o + 1}: {values[o - 2:o + 2]}; stream: "
                        f"{[(r or {}).get('message', {}).get('data') for r in raw]}")
        assert values == [b"%08d" % i for i in range(produced[0])]  # each once, none missing
        wrong = [(o, v, values[o] if o < len(values) else None) for o, v in acked
                 if o >= len(values) or values[o] != v]
        assert wrong == [], f"{len(wrong)} delivery reports name another record's offset: {wrong[:5]}"
        api.nc.close()
