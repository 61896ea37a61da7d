"""kill -9 of the gateway under idempotent, acks=all Kafka production (issue 25):
every acknowledged record is stored exactly once after restart.

A real ``ferry serve`` process (kafka listener only, fsync batch: group commit)
takes records from a confluent-kafka producer (``enable.idempotence``,
``acks=all``) writing to a topic of two partitions from a thread. Once the
cycle's first acknowledgements have come back the process gets SIGKILL mid-
production; the producer's delivery reports say which records were
acknowledged (err None). The gateway restarts on the same data directory for
the next cycle, with a new producer (a new producer id). After the last kill
the data directory is opened directly and checked:

* every acknowledged record is stored;
* no record is stored twice (acknowledged or not);
* each partition's offsets run from 0 without a gap, and every stored
  record parses with a valid checksum (recovery cut a torn tail, never
  served one).

Each record's value is its unique id ``p{cycle}-{n}``; producers log in with
SASL/PLAIN as the root user.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer
from ferry_harness import kill_process, serve_process

from core.broker import Broker

pytestmark = pytest.mark.slow

CYCLES = 3
PARTITIONS = 2
TOPIC = "k.t"  # topic t of stream k (docs/kafka.md "Topic names")
BINDING = f'[[binding]]\nstream = "k"\ntopic = "t"\ncreate = true\npartitions = {PARTITIONS}\n'
# Acknowledgements to wait for before the kill: enough that the kill lands in steady
# production, a new batch in flight behind every acknowledged one, not in the login.
KILL_AFTER_ACKS = (300, 1000, 2000)
# Records handed to the producer and not yet reported: bounds the producer's queue so the
# thread does not spin filling librdkafka's buffer (100,000 records) with work the kill
# throws away; a few batches' worth keeps every partition busy.
WINDOW = 500
FIRST_ACKS_LIMIT_S = 60     # a cycle without its acks by then fails (a hung start, not a timing check)
REPORTS_LIMIT_S = 10        # bound on serving the delivery reports after the kill (purged ones come at once)
START_LIMIT_S = 60          # a server that is not ready by then fails the test
READ_CHUNK = 1000           # records per read when checking the data directory
KAFKA_PORT = re.compile(r"^\s+kafka\s+127\.0\.0\.1:(\d+)/tcp", re.MULTILINE)


class Cycle:
    """One cycle's producer thread and what its delivery reports said."""

    def __init__(self, cycle: int, port: int, root: tuple[str, str]) -> None:
        self.cycle = cycle
        self.acked: list[str] = []   # ids whose delivery report had err None
        self.failed = 0              # reports with an error (killed, purged)
        self.sent = 0
        self.stop = threading.Event()
        self.producer = Producer({
            "bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": root[0], "sasl.password": root[1],
            "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            "reconnect.backoff.ms": 500, "reconnect.backoff.max.ms": 500,  # the server is gone for good
        })
        self.thread = threading.Thread(target=self._produce, name=f"kafka-kill-{cycle}", daemon=True)

    def _report(self, err, msg) -> None:  # runs in the producer thread, inside poll()
        if err is None:
            self.acked.append(msg.value().decode())
        else:
            self.failed += 1

    def _produce(self) -> None:
        p = self.producer
        while not self.stop.is_set():
            if self.sent - len(self.acked) - self.failed >= WINDOW:
                p.poll(0.05)
                continue
            try:
                p.produce(TOPIC, value=f"p{self.cycle}-{self.sent}".encode(), on_delivery=self._report)
            except BufferError:
                p.poll(0.05)
                continue
            self.sent += 1
            p.poll(0)

    def finish(self) -> None:
        """After the kill: stop producing, serve the reports of acks already received,
        then purge what is left (those report errors: not acknowledged)."""
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), "producer thread did not stop"
        p = self.producer
        while p.poll(0):
            pass
        p.purge(in_queue=True, in_flight=True, blocking=False)
        p.flush(REPORTS_LIMIT_S)


def _start(tmp_path: Path) -> tuple[object, int]:
    proc, banner = serve_process(tmp_path, tmp_path / "data", "--config", str(tmp_path / "ferry.toml"),
                                 "--only", "kafka", "--kafka-port", "0", "--fsync", "batch", limit_s=START_LIMIT_S)
    found = KAFKA_PORT.search(banner)
    assert found, banner
    return proc, int(found.group(1))


def _stored(data: Path) -> dict[int, list[str]]:
    """Partition -> the ids stored there, in offset order, checking offsets run 0..N-1."""
    out = {}
    with Broker.open(data) as broker:
        for pid in range(PARTITIONS):
            end = broker.partition("k", "t", pid).next_offset
            ids, offset = [], 0
            while offset < end:
                msgs = broker.read_messages("k", "t", pid, offset, READ_CHUNK)
                assert msgs, f"partition {pid}: nothing readable at offset {offset} of {end}"
                assert [m.offset for m in msgs] == list(range(offset, offset + len(msgs))), f"gap in partition {pid}"
                ids += [m.payload.decode() for m in msgs]
                offset += len(msgs)
            out[pid] = ids
    return out


def test_acknowledged_kafka_records_survive_kill_9_once(tmp_path):
    (tmp_path / "ferry.toml").write_text(BINDING)
    acked: list[str] = []
    seen = []  # (cycle, acked, failed, sent) for the failure message and the report
    for cycle in range(CYCLES):
        proc, port = _start(tmp_path)
        try:
            run = Cycle(cycle, port, ("iggy", "iggy"))  # ferry serve's root user by default
            run.thread.start()
            deadline = time.monotonic() + FIRST_ACKS_LIMIT_S
            while len(run.acked) < KILL_AFTER_ACKS[cycle] and time.monotonic() < deadline:
                time.sleep(0.01)  # wait for acknowledgements, not for a time
            proc.send_signal(signal.SIGKILL)  # mid-production: batches in flight, some torn
            proc.wait(10)
        finally:
            kill_process(proc)
        run.finish()
        assert len(run.acked) >= KILL_AFTER_ACKS[cycle], f"cycle {cycle}: only {len(run.acked)} acks"
        seen.append((cycle, len(run.acked), run.failed, run.sent))
        acked += run.acked

    stored = _stored(tmp_path / "data")
    counts = Counter(i for ids in stored.values() for i in ids)
    per_cycle = Counter(i.split("-")[0] for i in counts)
    print("cycles (cycle, acked, failed, sent, stored):",
          [(c, a, f, s, per_cycle[f"p{c}"]) for c, a, f, s in seen],
          "stored per partition:", {pid: len(ids) for pid, ids in stored.items()})
    twice = [i for i, n in counts.items() if n > 1]
    assert not twice, f"stored more than once: {twice[:5]}"
    lost = [i for i in acked if i not in counts]
    assert not lost, f"acknowledged and lost: {lost[:5]} ({len(lost)} of {len(acked)}; {seen})"
    assert len(set(acked)) == len(acked)  # one delivery report per record
    assert set(counts) <= {f"p{c}-{n}" for c, _a, _f, sent in seen for n in range(sent)}  # nothing unsent stored
