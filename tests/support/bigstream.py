"""Fill a data directory with long streams, straight through the core (issue 30).

Publishing a million messages through a client takes minutes on this machine;
appending them with the core's ``Broker`` before ``ferry serve`` starts takes
seconds. The JetStream streams are made with the same functions the API uses
(``jetstream.config.parse_config`` and ``JetStreams.create``: the topic, its
config attribute), and each record carries what a NATS publish stores: the
publish subject (``ferry-nats-subject``) and a ``Nats-Msg-Id`` header.
Used by ``bench/stall_probe.py`` and ``tests/nats/test_nats_jetstream_large.py``.
"""

from __future__ import annotations

from pathlib import Path

from adapters.nats.jetstream.config import parse_config
from adapters.nats.jetstream.streams import JS_STREAM, JetStreams
from core.addressing import SUBJECT_HEADER
from core.broker import Broker
from core.log import AppendInput
from core.message import Headers

BIG_STREAM = "BIG"            # the JetStream stream: subjects big.s0 .. big.s<SUBJECTS-1>
BIG_SUBJECTS = 10
KV_BUCKET = "big"             # a KV bucket (stream KV_big): one revision per key
IGGY_STREAM, IGGY_TOPIC = "bigiggy", "t"
CHUNK = 2000                  # messages per append call
FLUSH_EVERY = 100_000         # write the pending records out this often (bounded memory)


def kv_config(bucket: str) -> dict:
    """The stream config nats-py 2.16's ``create_key_value`` sends (history 1, direct get)."""
    return {"name": f"KV_{bucket}", "subjects": [f"$KV.{bucket}.>"], "max_msgs_per_subject": 1,
            "discard": "new", "allow_rollup_hdrs": True, "deny_delete": True, "allow_direct": True,
            "max_msgs": -1, "max_bytes": -1, "max_age": 0, "max_msg_size": -1, "storage": "file",
            "num_replicas": 1, "duplicate_window": 120_000_000_000}


def _records(n: int, subject_of, with_id: bool, size: int):
    payload = b"x" * size
    batch = []
    for i in range(n):
        headers = Headers()
        if with_id:
            headers.add("Nats-Msg-Id", f"m{i}")
        subject = subject_of(i)
        if subject:
            headers.add(SUBJECT_HEADER, subject)
        batch.append(AppendInput(payload=payload, headers=headers.encode() if len(headers) else b""))
        if len(batch) == CHUNK:
            yield batch
            batch = []
    if batch:
        yield batch


def _append(broker: Broker, stream: str, topic: int | str, batches) -> None:
    done = 0
    for batch in batches:
        broker.append(stream, topic, batch, partition=0)
        done += len(batch)
        if done % FLUSH_EVERY < CHUNK:
            broker.partition(stream, topic, 0).flush(fsync=False)


def fill(data: Path, messages: int, *, kv_keys: int = 0, iggy: bool = True, size: int = 64) -> None:
    """Write ``messages`` JetStream messages to stream BIG (subjects ``big.s0..s9`` in
    turn, each with a Nats-Msg-Id), ``kv_keys`` keys to bucket ``big`` and, with
    ``iggy``, ``messages`` Iggy messages to ``bigiggy/t`` (one partition) into ``data``."""
    broker = Broker.open(data)
    try:
        streams = JetStreams(broker)
        streams.load()
        st = streams.create(parse_config({"name": BIG_STREAM, "subjects": ["big.>"], "allow_direct": True}))
        _append(broker, JS_STREAM, st.topic_id,
                _records(messages, lambda i: f"big.s{i % BIG_SUBJECTS}", True, size))
        if kv_keys:
            kv = streams.create(parse_config(kv_config(KV_BUCKET)))
            _append(broker, JS_STREAM, kv.topic_id,
                    _records(kv_keys, lambda i: f"$KV.{KV_BUCKET}.k{i}", False, size))
        if iggy:
            broker.create_stream(IGGY_STREAM)
            broker.create_topic(IGGY_STREAM, IGGY_TOPIC, 1)
            _append(broker, IGGY_STREAM, IGGY_TOPIC, _records(messages, lambda i: None, False, size))
    finally:
        broker.close()


__all__ = ["BIG_STREAM", "BIG_SUBJECTS", "IGGY_STREAM", "IGGY_TOPIC", "KV_BUCKET", "fill", "kv_config"]
