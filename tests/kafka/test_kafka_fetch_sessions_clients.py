"""kafka-python, the one client here that uses incremental fetch sessions (KIP-227), against
a gateway on port 0: it gets a session and reads every record once through incremental
fetches (adapters/kafka/fetch_sessions.py)."""

from __future__ import annotations

import pytest
from ferry_harness import running_gateway

pytestmark = pytest.mark.store

WAIT_S = 30


def test_kafka_python_reads_through_an_incremental_fetch_session(tmp_path):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic
    with running_gateway(tmp_path) as gw:
        conf = {"bootstrap_servers": f"127.0.0.1:{gw.ports['kafka']}", "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "PLAIN", "sasl_plain_username": gw.cfg.auth.root_username,
                "sasl_plain_password": gw.cfg.auth.root_password}
        admin = KafkaAdminClient(**conf)
        admin.create_topics([NewTopic("sess", 3, 1)])
        admin.close()
        prod = KafkaProducer(**conf, acks="all")
        consumer = KafkaConsumer(**conf, enable_auto_commit=False, fetch_max_wait_ms=100)
        consumer.assign([TopicPartition("sess", p) for p in range(3)])
        consumer.seek_to_beginning()
        got: dict[int, list] = {0: [], 1: [], 2: []}
        try:
            for round_ in range(3):  # each round lands on one partition only: the others stay quiet
                for i in range(5):
                    prod.send("sess", f"{round_}-{i}".encode(), partition=round_).get(WAIT_S)
                for _ in range(WAIT_S * 5):
                    for tp, records in consumer.poll(timeout_ms=200).items():
                        got[tp.partition] += [r.value.decode() for r in records]
                    if len(got[round_]) >= 5:
                        break
            handlers = list(consumer._fetcher._session_handlers.values())  # the client's own state
        finally:
            consumer.close()
            prod.close()
    assert got == {p: [f"{p}-{i}" for i in range(5)] for p in range(3)}
    # the gateway gave a session and the client went on incrementally (epoch past 1)
    assert handlers and all(h.next_metadata.session_id > 0 and h.next_metadata.epoch > 1 for h in handlers)
