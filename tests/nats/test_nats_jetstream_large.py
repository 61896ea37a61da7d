"""A long JetStream stream does not stall the gateway (issue 30).

The first STREAM.INFO of a 620,000-message stream after a restart read the
whole stream on the event loop (5.2 s; another client's PING waited). Now the
per-stream state is saved at shutdown and restored, and whatever is cold is
read by the warm-up in slices that let other tasks run between them
(adapters/nats/driver.py ``warm_streams``), and checkpointed while serving,
so a start after a kill -9 reads only the tail stored after the last
checkpoint. A request that needs state not warm yet is parked and its
connection's task warms it in the same slices (``driver._warm_parked``): a
filtered purge's first subject index too. No timings are asserted; the
structure is: the warm-up and a parked purge read in bounded slices while
another connection's PINGs are answered between them, and after a kill -9
the restart reads the tail, not the stream.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from bigstream import BIG_STREAM, BIG_SUBJECTS, fill
from ferry_harness import running_gateway

from adapters.nats import driver
from adapters.nats.connection import NatsServerConnection, ServerInfo
from adapters.nats.jetstream.api import enable
from adapters.nats.outbox import Outbox
from adapters.nats.session import NatsSession
from adapters.nats.jetstream.saved_state import SavedState
from adapters.nats.jetstream.streams import SCAN_CHUNK, JetStreams
from adapters.nats.jetstream.warmup import STATE, WARM_TAIL, cold, warm_for
from core.broker import Broker
from core.log.partition import Partition

nats = pytest.importorskip("nats")

MESSAGES = 200_000
TAIL = 3000             # stored after the checkpoint and before the kill: what the next start must read
LIMIT_S = 120           # a hung step fails the test instead of hanging it (not a timing assertion)


class ReadCounter:
    """Records read from any partition, by the gateway's thread (the test's own reads do not count)."""

    def __init__(self) -> None:
        self.records = 0
        self.thread: int | None = None
        self.real = Partition.read

    def install(self, monkeypatch) -> None:
        counter = self

        def read(part, offset, count, max_bytes=None):
            batch = counter.real(part, offset, count, max_bytes)
            if threading.get_ident() == counter.thread:
                counter.records += batch.count
            return batch
        monkeypatch.setattr(Partition, "read", read)


class WarmWatch:
    """``JetStreams.warm_step`` held back until the test's probe runs (so the two
    overlap), then each working slice's records read and when it ended."""

    def __init__(self, counter: ReadCounter) -> None:
        self.counter, self.gate, self.done = counter, threading.Event(), threading.Event()
        self.slices: list[tuple[int, float]] = []       # (records read, perf_counter at its end)
        self.real = JetStreams.warm_step

    def install(self, monkeypatch) -> None:
        watch = self

        def warm_step(streams, budget):
            watch.counter.thread = threading.get_ident()
            if not watch.gate.is_set():
                time.sleep(0.005)                       # the test is connecting: nothing yet
                return True
            before = watch.counter.records
            more = watch.real(streams, budget)
            if more:
                watch.slices.append((watch.counter.records - before, time.perf_counter()))
                # The gateway and the probe share this process: let the probe's thread take
                # the GIL and send its PING, so the loop has something to serve between two
                # slices (what is tested); without it a fast warm-up could finish before the
                # probe's thread ran at all (a CI run saw one PING, just before the first).
                time.sleep(0.001)
            else:
                watch.done.set()
            return more
        monkeypatch.setattr(JetStreams, "warm_step", warm_step)


async def api(nc, subject: str, body: dict | None = None) -> dict:
    msg = await nc.request("$JS.API." + subject, json.dumps(body or {}).encode(), timeout=LIMIT_S)
    return json.loads(msg.data)


async def probe_during_warm_up(url: str, watch: WarmWatch) -> list[float]:
    """PING another connection over and over while the warm-up runs; the answer times."""
    nc = await nats.connect(url)
    answered: list[float] = []
    watch.gate.set()
    deadline = time.monotonic() + LIMIT_S
    while not watch.done.is_set() and time.monotonic() < deadline:
        await nc.flush(LIMIT_S)
        answered.append(time.perf_counter())
    await nc.close()
    return answered


async def calls(url: str) -> dict:
    """The calls that read the whole stream before issue 30's fix."""
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=LIMIT_S)
    out = {"info": (await api(nc, f"STREAM.INFO.{BIG_STREAM}"))["state"]}
    out["missing"] = (await api(nc, f"STREAM.MSG.GET.{BIG_STREAM}", {"last_by_subj": "big.none"}))["error"]["code"]
    out["last"] = (await api(nc, f"STREAM.MSG.GET.{BIG_STREAM}", {"last_by_subj": "big.s3"}))["message"]["seq"]
    created = await api(nc, f"CONSUMER.CREATE.{BIG_STREAM}.C", {"stream_name": BIG_STREAM, "config": {
        "durable_name": "C", "deliver_policy": "all", "ack_policy": "explicit", "filter_subject": "big.s3"}})
    out["pending"] = created["num_pending"]
    await api(nc, f"CONSUMER.DELETE.{BIG_STREAM}.C")
    out["dup"] = (await js.publish("big.s1", b"again", headers={"Nats-Msg-Id": f"m{MESSAGES - 9}"})).duplicate
    await nc.close()
    return out


class SliceWatch:
    """``driver.warm_for`` (a parked request's slices) wrapped: each slice's records and end."""

    def __init__(self, counter: ReadCounter) -> None:
        self.counter = counter
        self.slices: list[tuple[int, float]] = []
        self.real = driver.warm_for

    def install(self, monkeypatch) -> None:
        watch = self

        def warm_for(streams, st, what, budget):
            before = watch.counter.records
            moved = watch.real(streams, st, what, budget)
            watch.slices.append((watch.counter.records - before, time.perf_counter()))
            return moved
        monkeypatch.setattr(driver, "warm_for", warm_for)


async def publish_tail(url: str) -> int:
    """TAIL plain publishes on the stream's subjects (stored, no PubAck); the stream's last seq after."""
    nc = await nats.connect(url)
    for j in range(TAIL):
        await nc.publish(f"big.s{j % BIG_SUBJECTS}", b"tail")
    await nc.flush(LIMIT_S)
    last = (await api(nc, f"STREAM.INFO.{BIG_STREAM}"))["state"]["last_seq"]
    await nc.close()
    return last


async def purge_with_probe(url: str) -> tuple[dict, list[float]]:
    """A filtered purge on one connection while another PINGs; its answer and the PING answer times."""
    nc, other = await nats.connect(url), await nats.connect(url)
    answered: list[float] = []
    done = asyncio.Event()

    async def probe() -> None:
        while not done.is_set():
            await other.flush(LIMIT_S)
            answered.append(time.perf_counter())
    task = asyncio.create_task(probe())
    await asyncio.sleep(0)
    reply = await api(nc, f"STREAM.PURGE.{BIG_STREAM}", {"filter": "big.s9", "seq": 100})
    done.set()
    await task
    await nc.close()
    await other.close()
    return reply, answered


def between(answered: list[float], slices: list[tuple[int, float]]) -> int:
    """PINGs answered between the first and the last slice's end."""
    start, end = slices[0][1], slices[-1][1]
    return sum(1 for t in answered if start < t < end)


@pytest.mark.slow
def test_long_stream_warms_in_slices_and_restarts_after_kill_from_a_checkpoint(tmp_path, monkeypatch):
    fill(tmp_path / "data", MESSAGES, iggy=False)
    counter = ReadCounter()
    counter.install(monkeypatch)
    watch = WarmWatch(counter)
    watch.install(monkeypatch)
    real_save = SavedState.stop_steps
    monkeypatch.setattr(SavedState, "stop_steps", lambda saved, streams: iter(()))   # the stop saves nothing: kill -9
    written, real_write = threading.Event(), SavedState.write

    def write(saved, name, data):
        done = real_write(saved, name, data)
        if name == BIG_STREAM:
            written.set()
        return done
    monkeypatch.setattr(SavedState, "write", write)

    with running_gateway(tmp_path) as gw:
        answered = asyncio.run(probe_during_warm_up(gw.url(), watch))
        first = asyncio.run(calls(gw.url()))
        last = asyncio.run(publish_tail(gw.url()))   # after the checkpoint the warm-up's end took
        # its steps run between other tasks: written before the "kill", holding what it took
        assert written.wait(LIMIT_S)
    # The cold state was read in many bounded slices, and the probe's PINGs were
    # answered between the first and the last of them: the loop kept serving.
    assert watch.done.is_set()
    assert len(watch.slices) > 10
    assert max(n for n, _ in watch.slices) <= driver.WARM_SLICE + SCAN_CHUNK
    assert between(answered, watch.slices) > 0
    assert last == MESSAGES + TAIL

    # A start after that kill: the periodic checkpoint (taken once the warm-up had
    # caught up) is restored and only the tail stored after it is read.
    monkeypatch.setattr(SavedState, "stop_steps", real_save)
    counter.records, watch.slices = 0, []
    watch.done.clear()
    slices = SliceWatch(counter)
    slices.install(monkeypatch)
    with running_gateway(tmp_path) as gw:
        again = asyncio.run(calls(gw.url()))
        assert watch.done.wait(LIMIT_S)
        restart_reads = counter.records
        # A filtered purge on this fresh start needs a subject index the stream
        # never had: built in the parked request's slices, PINGs served between them.
        slices.slices, before = [], counter.records
        purged, pinged = asyncio.run(purge_with_probe(gw.url()))
        purge_reads = counter.records - before
        info = asyncio.run(calls(gw.url()))["info"]
    assert first["info"]["messages"] == MESSAGES and first["info"].get("num_subjects") == BIG_SUBJECTS
    assert again["info"]["messages"] == MESSAGES + TAIL and again["info"]["num_subjects"] == BIG_SUBJECTS
    assert first["missing"] == again["missing"] == 404
    assert first["last"] == MESSAGES - 6      # message i is on big.s<i % 10>, seq i + 1
    assert again["last"] == MESSAGES + TAIL - 6
    assert first["pending"] == MESSAGES // BIG_SUBJECTS
    assert again["pending"] == (MESSAGES + TAIL) // BIG_SUBJECTS
    assert first["dup"] is True and again["dup"] is True
    # the tail (its counts and its msg ids) and a few records per call, not the stream
    assert restart_reads < 3 * TAIL + 8 * SCAN_CHUNK
    assert purged["purged"] == 9                                   # seqs 10, 20, ... 90 are on big.s9
    assert len(slices.slices) > 10
    assert max(n for n, _ in slices.slices) <= driver.WARM_SLICE + SCAN_CHUNK
    assert between(pinged, slices.slices) > 0
    # the call itself read at most the warm-up's tail after the slices built the index
    assert purge_reads - sum(n for n, _ in slices.slices) <= WARM_TAIL + SCAN_CHUNK
    assert info["messages"] == MESSAGES + TAIL - 9 and info["num_deleted"] == 9


def test_a_parked_request_is_answered_before_what_its_connection_sent_after_it(tmp_path):
    """Without sockets: a STREAM.INFO on a cold stream is parked with the publish the
    same client sent after it (nothing stored yet); slices warm the stream's counts,
    then the request is answered from them and only then the publish is stored, as
    nats-server's read loop answers an API call before it reads on."""
    fill(tmp_path, 5000, iggy=False)
    with Broker.open(tmp_path) as broker:
        js = enable(broker)
        conn = NatsServerConnection(ServerInfo(server_id="TEST"), client_id=1, client_ip="127.0.0.1")
        session = NatsSession(broker, conn, Outbox())
        session.may_park = True
        conn.receive_data(b'CONNECT {"verbose":false,"headers":true}\r\nSUB _INBOX.a 1\r\n'
                          b"PUB $JS.API.STREAM.INFO." + BIG_STREAM.encode() + b" _INBOX.a 0\r\n\r\n"
                          b"PUB big.s1 2\r\nhi\r\nPING\r\n")
        session.process()
        streams, st = js.streams, js.streams.streams[BIG_STREAM]
        assert session.parked_on == (st, STATE)
        assert session.parked[0][0] == f"$JS.API.STREAM.INFO.{BIG_STREAM}"
        # the rest waits: queued behind it if already parsed, else still unparsed
        before = session.outbox.take() + conn.data_to_send()
        assert streams.last_seq(st) == 5000 and b"PONG" not in before and b"MSG" not in before
        slices = 0
        while cold(streams, *session.parked_on):
            assert warm_for(streams, st, STATE, driver.WARM_SLICE)
            slices += 1
        # slices until at most WARM_TAIL records are left for the call itself
        assert slices > (5000 - WARM_TAIL) // driver.WARM_SLICE and 0 <= 5000 - st.counts.to <= WARM_TAIL
        session.resume_parked()
        session.process()
        out = session.outbox.take()
        head = out.index(b"MSG _INBOX.a 1 ")
        start = out.index(b"\r\n", head) + 2
        info = json.loads(out[start:out.index(b"\r\n", start)])
        assert info["state"]["messages"] == 5000 and info["state"]["num_subjects"] == BIG_SUBJECTS
        assert streams.last_seq(st) == 5001 and session.parked is None
        assert head < out.index(b"PONG")                    # the PING after it is answered after it
