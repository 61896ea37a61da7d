"""The Kafka listener with TLS (``[listeners.kafka] tls_cert/tls_key``, docs/kafka.md "TLS"):
confluent-kafka, kafka-python, aiokafka and kafkajs produce and consume with
``security.protocol=SASL_SSL`` and a CA they trust, kcat reads metadata, a
plaintext client is refused while the listener keeps serving, and unusable
certificate files stop ``ferry serve`` with one config-error line."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from typing import Iterator

import pytest
import trustme
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from ferry_harness import running_gateway
from test_kafka_clients import KCAT, NODE, NODE_DIR, WAIT_S, drain, topic_name

from gateway.config import ConfigError
from gateway.listeners._tls import tls_options


@pytest.fixture(scope="module")
def tls_gw(tmp_path_factory):
    """A gateway whose kafka listener is TLS-only, the CA file its clients trust and
    the CA in PEM."""
    tmp = tmp_path_factory.mktemp("kafka-tls")
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")  # clients dial 127.0.0.1, what Metadata names
    server.cert_chain_pems[0].write_to_path(str(tmp / "server.pem"))
    server.private_key_pem.write_to_path(str(tmp / "server.key"))
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    toml = f'[listeners.kafka]\ntls_cert = "{tmp / "server.pem"}"\ntls_key = "{tmp / "server.key"}"\n'
    with running_gateway(tmp, toml, FERRY_KAFKA_INITIAL_REBALANCE_DELAY_MS="0") as gw:
        yield gw, str(tmp / "ca.pem"), ca.cert_pem.bytes().decode()


def sasl_ssl(gw, ca_file: str) -> dict:
    """confluent-kafka (librdkafka) settings: SASL/PLAIN as root inside TLS, the test CA trusted."""
    return {"bootstrap.servers": f"127.0.0.1:{gw.ports['kafka']}", "security.protocol": "SASL_SSL",
            "ssl.ca.location": ca_file, "sasl.mechanism": "PLAIN",
            "sasl.username": gw.cfg.auth.root_username, "sasl.password": gw.cfg.auth.root_password}


def kp_sasl_ssl(gw) -> dict:
    """kafka-python / aiokafka settings without the TLS part (each names its CA its own way)."""
    return {"bootstrap_servers": f"127.0.0.1:{gw.ports['kafka']}", "security_protocol": "SASL_SSL",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": gw.cfg.auth.root_username,
            "sasl_plain_password": gw.cfg.auth.root_password}


def test_confluent_sasl_ssl_produces_and_consumes_a_record_with_a_header(tls_gw):
    gw, ca_file, _pem = tls_gw
    topic = topic_name("tls")
    p = Producer({**sasl_ssl(gw, ca_file), "acks": "all"})
    reports = []
    p.produce(topic, value=b"over tls", key=b"k", headers=[("trace", b"t1")],
              on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert p.flush(WAIT_S) == 0
    assert reports == [(None, 0)]
    c = Consumer({**sasl_ssl(gw, ca_file), "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    try:
        got = drain(c, 1)
    finally:
        c.close()
    assert [(m.offset(), m.key(), m.value(), m.headers()) for m in got] == [(0, b"k", b"over tls", [("trace", b"t1")])]


def test_kafka_python_sasl_ssl_round_trip(tls_gw):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition
    gw, ca_file, _pem = tls_gw
    topic = topic_name("kptls")
    prod = KafkaProducer(**kp_sasl_ssl(gw), ssl_cafile=ca_file, acks="all")
    try:
        sent = prod.send(topic, value=b"kafka-python over tls").get(WAIT_S)
    finally:
        prod.close()
    assert (sent.partition, sent.offset) == (0, 0)
    cons = KafkaConsumer(**kp_sasl_ssl(gw), ssl_cafile=ca_file, enable_auto_commit=False)
    try:
        tp = KTopicPartition(topic, 0)
        cons.assign([tp])
        cons.seek_to_beginning(tp)
        got = []
        for _ in range(WAIT_S * 5):
            got += [r.value for records in cons.poll(timeout_ms=200).values() for r in records]
            if got:
                break
    finally:
        cons.close()
    assert got == [b"kafka-python over tls"]


def test_aiokafka_sasl_ssl_round_trip(tls_gw):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context
    from aiokafka.structs import TopicPartition as ATopicPartition
    gw, ca_file, _pem = tls_gw
    topic = topic_name("aiotls")

    async def scenario():
        conf = {**kp_sasl_ssl(gw), "ssl_context": create_ssl_context(cafile=ca_file)}
        prod = AIOKafkaProducer(**conf)
        await prod.start()
        try:
            sent = await prod.send_and_wait(topic, b"aiokafka over tls")
        finally:
            await prod.stop()
        cons = AIOKafkaConsumer(**conf, enable_auto_commit=False)
        await cons.start()
        try:
            tp = ATopicPartition(topic, 0)
            cons.assign([tp])
            await cons.seek_to_beginning(tp)
            msg = await asyncio.wait_for(cons.getone(), WAIT_S)
        finally:
            await cons.stop()
        return (sent.partition, sent.offset), msg.value

    assert asyncio.run(scenario()) == ((0, 0), b"aiokafka over tls")


@pytest.mark.skipif(NODE is None or not (NODE_DIR / "node_modules" / "kafkajs").is_dir(),
                    reason="node or kafkajs missing: run `make test` (npm install in tests/kafka/node)")
def test_kafkajs_over_tls(tls_gw):
    gw, _ca_file, pem = tls_gw
    topic = topic_name("jstls")
    done = subprocess.run([NODE, str(NODE_DIR / "scenario.js"), f"127.0.0.1:{gw.ports['kafka']}", topic],
                          cwd=NODE_DIR, capture_output=True, timeout=90,
                          env={**os.environ, "KAFKA_USER": gw.cfg.auth.root_username,
                               "KAFKA_PASS": gw.cfg.auth.root_password, "KAFKA_SSL_CA": pem})
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    out = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert out["created"] is True and out["partitions"] == 2
    assert [(m["partition"], m["offset"], m["key"], m["value"]) for m in out["got"]] == [
        (0, "0", "a", "one"), (0, "1", "c", "three"), (1, "0", "b", "two")]
    assert out["got"][0]["headers"] == {"trace": "t1"}


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (.ci/run installs it with apt)")
def test_kcat_lists_metadata_over_sasl_ssl(tls_gw):
    gw, ca_file, _pem = tls_gw
    port = gw.ports["kafka"]
    listed = subprocess.run([KCAT, "-b", f"127.0.0.1:{port}", "-X", "security.protocol=SASL_SSL",
                             "-X", f"ssl.ca.location={ca_file}", "-X", "sasl.mechanisms=PLAIN",
                             "-X", f"sasl.username={gw.cfg.auth.root_username}",
                             "-X", f"sasl.password={gw.cfg.auth.root_password}", "-L"],
                            capture_output=True, timeout=60)
    assert listed.returncode == 0, listed.stderr.decode()
    assert f"broker 1 at 127.0.0.1:{port}" in listed.stdout.decode()


@contextmanager
def kafka_log() -> Iterator[list[logging.LogRecord]]:
    """The ``ferry.kafka`` records logged while open, at INFO and above. A handler of its
    own on that logger: an earlier test in this worker may have run ``logs.configure``,
    which stops ``ferry`` records from reaching pytest's root handler."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("ferry.kafka")
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_plaintext_client_fails_and_the_listener_keeps_serving(tls_gw):
    gw, ca_file, _pem = tls_gw
    plain = {k: v for k, v in sasl_ssl(gw, ca_file).items() if not k.startswith("ssl.")}
    plain.update({"security.protocol": "SASL_PLAINTEXT", "reconnect.backoff.ms": 1000,
                  "reconnect.backoff.max.ms": 1000})
    with kafka_log() as records:
        with pytest.raises(KafkaException):
            AdminClient(plain).list_topics(timeout=3)  # its ApiVersions in clear never gets an answer
        for _ in range(WAIT_S * 10):  # the gateway thread logs the refusal; wait for it, not for a time
            if any("TLS handshake failed" in r.getMessage() for r in records):
                break
            time.sleep(0.1)
    assert any("TLS handshake failed" in r.getMessage() for r in records), [r.getMessage() for r in records]
    assert all(r.levelno == logging.INFO and r.exc_info is None for r in records)  # never a traceback
    md = AdminClient(sasl_ssl(gw, ca_file)).list_topics(timeout=WAIT_S)
    assert [b.id for b in md.brokers.values()] == [1]


def test_unloadable_tls_cert_is_a_config_error_exit_2(tmp_path):
    (tmp_path / "ferry.toml").write_text('[listeners.kafka]\ntls_cert = "missing.pem"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("FERRY_")}
    done = subprocess.run([sys.executable, "-m", "gateway", "serve", "--config", "ferry.toml", "--data", "data",
                           "--host", "127.0.0.1", "--only", "kafka", "--kafka-port", "0", "--log-level", "error"],
                          cwd=tmp_path, env=env, capture_output=True, timeout=60)
    assert done.returncode == 2, done.stderr.decode()
    assert done.stdout == b""  # no banner: the listener never started
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("ferry: config error: listeners.kafka.tls_cert = 'missing.pem': cannot load")


def test_tls_options_refuse_a_key_alone_and_a_file_that_is_not_pem(tmp_path):
    assert tls_options({"tls_cert": "", "tls_key": ""}, "kafka") is None  # plaintext
    with pytest.raises(ConfigError, match=r"^listeners\.kafka: tls_key needs tls_cert$"):
        tls_options({"tls_cert": "", "tls_key": "k.pem"}, "kafka")
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(ConfigError) as err:
        tls_options({"tls_cert": str(junk), "tls_key": ""}, "kafka")
    assert err.value.key == "listeners.kafka.tls_cert" and "\n" not in str(err.value)
