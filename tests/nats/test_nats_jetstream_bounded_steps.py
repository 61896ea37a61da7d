"""Steps of the JetStream code that grow with the data are cut into bounded pieces (issue 30).

Issue 30's goal: with a long stream, no step of the event loop holds it
past ~100 ms. The steps proven bounded here, by counting what one step
does (no timings): a push consumer's delivery turn (a whole-bucket KV
``keys``), the save at a clean stop, loading a saved document at a start,
adopting a built index on an interest stream, ``/jsz?consumers=true`` and
the first step of a checkpoint.
"""

from __future__ import annotations

import json

import trio
from bigstream import BIG_STREAM, KV_BUCKET, fill

from adapters.nats import driver
from adapters.nats.jetstream import monitor, push, saved_index, saved_state
from adapters.nats.jetstream.api import enable
from adapters.nats.jetstream.config import parse_config
from adapters.nats.jetstream.warmup import RELEASE_SLICE
from adapters.nats.jetstream.streams import JS_STREAM, JetStreams
from adapters.nats.jetstream.warmup import STATE, cold
from core.addressing import SUBJECT_HEADER
from core.broker import Broker
from core.log import AppendInput
from core.message import Headers

KV = f"KV_{KV_BUCKET}"
KEYS = 3000


def keys_consumer(api) -> None:
    """The ordered push consumer nats-py's ``kv.keys()`` creates."""
    cfg = {"stream_name": KV, "config": {
        "deliver_subject": "_INBOX.keys", "deliver_policy": "last_per_subject", "ack_policy": "none",
        "max_deliver": 1, "filter_subject": f"$KV.{KV_BUCKET}.>", "headers_only": True,
        "flow_control": True, "idle_heartbeat": 5_000_000_000, "mem_storage": True, "num_replicas": 1,
        "inactive_threshold": 300_000_000_000}}
    answer = json.loads(api.handle(f"$JS.API.CONSUMER.CREATE.{KV}", json.dumps(cfg).encode()))
    assert "error" not in answer, answer



def _warmed(broker) -> JetStreams:
    """The broker's JetStream streams, loaded and warmed to the log's end."""
    streams = JetStreams(broker)
    streams.load()
    while streams.warm_step(1024):
        pass
    return streams

def test_a_whole_bucket_keys_consumer_is_delivered_in_bounded_turns(tmp_path):
    fill(tmp_path, 10, kv_keys=KEYS, iggy=False)
    with Broker.open(tmp_path) as broker:
        api = enable(broker)
        consumers = api.consumers
        consumers.interest = lambda inbox: True  # the client subscribes to its deliver subject
        while api.streams.warm_step(1024):
            pass
        keys_consumer(api)
        turns: list[tuple[int, int]] = []        # (messages, bytes) per timer turn
        delivered = 0
        while delivered < KEYS:
            out = consumers.tick(consumers.clock())
            msgs = [o for o in out if not (o.reply or "").startswith(push.FC_PREFIX) and o.inbox == "_INBOX.keys"
                    and o.ack]
            for o in out:                        # the client answers flow control at once
                if (o.reply or "").startswith(push.FC_PREFIX):
                    consumers.flow_reply(o.reply, consumers.clock())
            assert out, "delivery stopped early"
            turns.append((len(msgs), sum(len(o.inbox) + len(o.ack) + len(o.block) + len(o.payload) for o in msgs)))
            delivered += len(msgs)
        assert delivered == KEYS
        assert max(n for n, _ in turns) <= push.PUSH_BATCH == 64
        assert max(b for _, b in turns) <= push.PUSH_BATCH_BYTES
        assert len(turns) >= KEYS // push.PUSH_BATCH


# -- the save at a clean stop, the load at a start ----------------------------------------------

class TaskSteps(trio.abc.Instrument):
    """Scheduler steps of the tasks whose name contains ``name``, from ``armed`` on."""

    def __init__(self, name: str) -> None:
        self.name, self.armed, self.steps = name, False, 0

    def before_task_step(self, task) -> None:
        if self.armed and self.name in task.name:
            self.steps += 1


def test_the_save_at_a_stop_runs_in_steps_between_other_tasks(tmp_path, monkeypatch):
    """The timers task's stop used to build and write every document in its last
    step; now each chunk is its own step and the writes go to a worker thread."""
    fill(tmp_path, KEYS, kv_keys=KEYS, iggy=False)            # BIG: KEYS msg ids; KV_big: KEYS keys
    monkeypatch.setattr(saved_index, "CHUNK_RUNS", 100)       # KEYS / 100 texts: many steps
    monkeypatch.setattr(saved_state, "CHECKPOINT_CHUNK", 100)
    watch = TaskSteps("run_jetstream_timers")
    with Broker.open(tmp_path) as broker:
        api = enable(broker)
        streams = api.streams
        while streams.warm_step(1024):
            pass

        async def main():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(driver.run_jetstream_timers, api.consumers)
                await trio.sleep(0.2)
                watch.armed = True
                nursery.cancel_scope.cancel()
        trio.run(main, instruments=[watch])
        kv, big = streams.saved.load(KV), streams.saved.load(BIG_STREAM)
    assert len(kv["index"]["seqs"]) >= KEYS // 100 and len(big["dedup"]) >= KEYS // 100
    # a step per index text and per msg-id chunk (and the writes awaited), not one in all
    assert watch.steps >= 2 * KEYS // 100


def saved_lines(broker, name: str) -> list[bytes]:
    """The lines of a stream's saved document (the head first)."""
    parts = int(broker.tables.get(saved_state.TABLE, [name.encode()])[0][1])
    data = b"".join(v[1] for v in broker.tables.get(saved_state.TABLE, [f"{name}\x1f{i}".encode()
                                                                          for i in range(parts)]))
    return data.split(b"\n")


def test_a_start_parses_the_saved_document_a_chunk_per_step(tmp_path, monkeypatch):
    """A start parsed a saved document whole (35-161 ms for a 100,000-key index);
    now the head, then a chunk per step."""
    fill(tmp_path, KEYS, kv_keys=KEYS, iggy=False)
    monkeypatch.setattr(saved_index, "CHUNK_RUNS", 100)
    monkeypatch.setattr(saved_state, "CHECKPOINT_CHUNK", 100)
    with Broker.open(tmp_path) as broker:
        streams = _warmed(broker)
        streams.save_state()
        lines = saved_lines(broker, KV)[1:] + saved_lines(broker, BIG_STREAM)[1:]
    assert len(lines) >= 2 * KEYS // 100
    parsed: list[int] = []                    # bytes each json.loads call parsed
    real = json.loads

    def loads(text, *args, **kwargs):
        parsed.append(len(text))
        return real(text, *args, **kwargs)
    monkeypatch.setattr(json, "loads", loads)
    with Broker.open(tmp_path) as broker:
        streams = JetStreams(broker)
        streams.load()
        kv, big = streams.streams[KV], streams.streams[BIG_STREAM]
        parsed.clear()
        streams._restore(kv)                   # the heads only
        streams._restore(big)
        assert kv.loading is not None and big.refill is not None
        assert len(parsed) == 2 and max(parsed) < 1000
        parsed.clear()
        steps = 0
        while streams.warm_step(1024):         # then the chunks, a few per step
            steps += 1
        assert kv.index is not None and len(kv.index.live) == KEYS and len(big.dedup) == KEYS
        assert len(parsed) >= len(lines) and max(parsed) <= max(map(len, lines))
        assert steps >= KEYS // 100


# -- adopting an index on an interest stream -----------------------------------------------------

INTEREST = 6000


def interest_stream(tmp_path) -> None:
    """Stream IN (interest retention) with INTEREST messages written straight to
    its log (no consumer: after a start none of them is needed any more)."""
    with Broker.open(tmp_path) as broker:
        streams = JetStreams(broker)
        streams.load()
        st = streams.create(parse_config({"name": "IN", "subjects": ["in.>"], "retention": "interest"}))
        for start in range(0, INTEREST, 1000):
            batch = []
            for i in range(start, start + 1000):
                headers = Headers()
                headers.add(SUBJECT_HEADER, f"in.s{i % 7}")
                batch.append(AppendInput(payload=b"x", headers=headers.encode()))
            broker.append(JS_STREAM, st.topic_id, batch, partition=0)


def test_adopting_an_interest_streams_index_releases_in_slices(tmp_path, monkeypatch):
    """Putting a built index in use checked every live message's need in one
    piece; now a slice per warm-up step, and calls that read the state wait."""
    interest_stream(tmp_path)
    sizes: list[int] = []
    real = JetStreams.release

    def release(streams, st, seqs):
        seqs = list(seqs)
        sizes.append(len(seqs))
        return real(streams, st, seqs)
    monkeypatch.setattr(JetStreams, "release", release)
    with Broker.open(tmp_path) as broker:
        api = enable(broker)                   # its consumers answer which messages are needed
        streams = api.streams
        st = streams.streams["IN"]
        adopted = False
        while streams.warm_step(1024):
            if st.index is not None and not adopted:
                adopted = True
                assert len(st.index.live) == INTEREST and cold(streams, st, STATE)   # not released yet
        assert sum(sizes) == INTEREST and max(sizes) <= RELEASE_SLICE < INTEREST
        assert len(sizes) >= INTEREST // RELEASE_SLICE
        assert not st.index.live and not cold(streams, st, STATE)
        assert streams.state(st)["messages"] == 0


# -- /jsz?consumers=true --------------------------------------------------------------------------

CONSUMERS = 700


def test_jsz_builds_consumer_infos_in_slices_before_it_answers(tmp_path, monkeypatch):
    """``/jsz?consumers=true`` built every consumer's info inside the answer;
    now ``warm_for_jsz`` builds CONSUMER_SLICE of them per slice and the answer none."""
    fill(tmp_path, 50, iggy=False)
    with Broker.open(tmp_path) as broker:
        api = enable(broker)
        for i in range(CONSUMERS):
            cfg = {"stream_name": BIG_STREAM, "config": {"durable_name": f"d{i}", "ack_policy": "explicit",
                                                         "filter_subject": f"big.s{i % 10}"}}
            answer = json.loads(api.handle(f"$JS.API.CONSUMER.CREATE.{BIG_STREAM}.d{i}", json.dumps(cfg).encode()))
            assert "error" not in answer, answer
        built = [0]
        real = type(api.consumers).info

        def info(consumers, con):
            built[0] += 1
            return real(consumers, con)
        monkeypatch.setattr(type(api.consumers), "info", info)
        slices = []
        while True:
            built[0] = 0
            if not monitor.warm_for_jsz(broker, "/jsz?consumers=true"):
                break
            slices.append(built[0])
        assert max(slices) <= monitor.CONSUMER_SLICE < CONSUMERS and sum(slices) == CONSUMERS
        built[0] = 0
        doc = monitor.jsz(api, "S", broker, 0.0, monitor.parse_options("consumers=true"))
        assert built[0] == 0                   # every info was ready
        detail = doc["account_details"][0]["stream_detail"][0]["consumer_detail"]
        assert len(detail) == CONSUMERS and {d["name"] for d in detail} == {f"d{i}" for i in range(CONSUMERS)}
        assert not monitor.warm_for_jsz(broker, "/jsz")               # no consumers asked: no slices


# -- the first step of a checkpoint ---------------------------------------------------------------

def test_a_checkpoint_reads_the_msg_id_window_a_chunk_per_step(tmp_path, monkeypatch):
    """A checkpoint copied the msg-id window's ids and values in its first step;
    now the ids only, their values a chunk per step, right while ids come and go."""
    fill(tmp_path, KEYS, iggy=False)
    monkeypatch.setattr(saved_state, "CHECKPOINT_CHUNK", 100)
    with Broker.open(tmp_path) as broker:
        streams = _warmed(broker)
        st = streams.streams[BIG_STREAM]
        window = streams.dedup_window(st).ids
        assert len(window) == KEYS
        steps, data = 0, None
        for data in streams.saved.snapshot(streams, st):
            steps += 1
            if steps == 1:                           # after the first step took the ids
                for _ in range(250):
                    window.popitem(last=False)       # evicted meanwhile
                window["later"] = (KEYS + 1, window[next(reversed(window))][1])   # stored after `to`
        assert steps >= KEYS // 100
        lines = data.split(b"\n")
        assert json.loads(lines[0])["dedup"] == len(lines) - 1
        saved = [m for line in lines[1:] for m, _, _ in json.loads(line)]
        assert all(len(json.loads(line)) <= 100 for line in lines[1:])
        assert saved == [f"m{i}" for i in range(250, KEYS)]  # what is left of the window at `to`, in order


def test_a_document_without_chunk_lines_is_restored(tmp_path, monkeypatch):
    """A stream with per-subject counts and no msg-id window: its document is the head alone."""
    with Broker.open(tmp_path) as broker:
        streams = JetStreams(broker)
        streams.load()
        st = streams.create(parse_config({"name": "N", "subjects": ["n.>"], "duplicate_window": 0}))
        headers = Headers()
        headers.add(SUBJECT_HEADER, "n.a")
        broker.append(JS_STREAM, st.topic_id, [AppendInput(payload=b"x", headers=headers.encode())] * 50, partition=0)
        while streams.warm_step(1024):
            pass
        streams.save_state()
        assert b"\n" not in saved_lines(broker, "N")[0]
    with Broker.open(tmp_path) as broker:
        streams = JetStreams(broker)
        streams.load()
        st = streams.streams["N"]
        streams._restore(st)
        assert st.counts is not None and st.counts.subjects == {"n.a": 50}
