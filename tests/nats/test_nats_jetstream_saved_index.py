"""The subject index saved with a stream's checkpoint (issue 30, ``jetstream/saved_index.py``).

A KV bucket or an interest/workqueue stream (or one with filtered purges or
deletes) keeps an index of its live sequences; it used to be rebuilt from
the log after every start. It is now saved in the same document as the
per-subject counts and the msg-id window, and a start decodes it in steps
and reads only the records stored after it. What is proven here: the
decoded index, with the removals saved after it and the records after it
added, equals the index rebuilt from the whole log, after a clean stop and
after a "kill -9" between two checkpoints (the tail read, not the stream);
over its byte limit or damaged, it is rebuilt from the log as before.
"""

from __future__ import annotations

import json

import pytest
from bigstream import KV_BUCKET, fill
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.nats.jetstream import saved_index
from adapters.nats.jetstream.index import SubjectIndex
from adapters.nats.jetstream.streams import JS_STREAM, JetStreams
from core.addressing import SUBJECT_HEADER
from core.broker import Broker
from core.log import AppendInput
from core.log.partition import Partition
from core.message import Headers

KV = f"KV_{KV_BUCKET}"
KEYS = 3000


def rebuilt(idx: SubjectIndex, log, floors, deleted) -> SubjectIndex:
    out = SubjectIndex(1, idx.per_subject, idx.rollups, idx.ttls, floors, deleted)
    for seq, (subject, rollup, ttl) in enumerate(log, 1):
        out.add(seq, subject, seq * 10, rollup, ttl)
    return out


def shape(idx: SubjectIndex):
    """What a reader sees: live seqs, each subject's seqs in order, live TTLs, the first."""
    return (idx.live, {s: list(q) for s, q in idx.subjects.items()},
            sorted(e for e in idx.expiry if e[1] in idx.live), idx.first(), idx.to)


def roundtrip(idx: SubjectIndex, floors, deleted) -> SubjectIndex:
    part = None
    for part in saved_index.encode(idx):
        pass
    assert part is not None
    doc = json.loads(part)
    assert saved_index.matches(doc, {"max_msgs_per_subject": idx.per_subject, "allow_rollup_hdrs": idx.rollups,
                                     "allow_msg_ttl": idx.ttls})
    out = None
    for out in saved_index.decode(doc, idx.to, floors, deleted):
        pass
    return out


RECORD = st.tuples(st.sampled_from(["a", "b", "c", "d.1", "d.2"]),
                   st.sampled_from([None, None, None, "sub", "all"]), st.sampled_from([0, 0, 5]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(per=st.sampled_from([0, 1, 2]), before=st.lists(RECORD, max_size=40), after=st.lists(RECORD, max_size=20),
       removals=st.lists(st.tuples(st.booleans(), st.booleans(), st.integers(1, 60),
                                   st.sampled_from(["a", "b", "d.1"])), max_size=8))
def test_saved_index_with_later_removals_and_tail_equals_the_rebuilt_one(per, before, after, removals):
    """Saved at ``len(before)``; then (before or after the save, as a kill -9 between
    checkpoints leaves them) deletes and subject floors, and the records after it."""
    floors: dict[str, int] = {}
    deleted: set[int] = set()
    live = SubjectIndex(1, per, True, True, floors, deleted)
    for seq, (subject, rollup, ttl) in enumerate(before, 1):
        live.add(seq, subject, seq * 10, rollup, ttl)

    def remove(is_delete, seq, subject):
        if is_delete:
            if seq in live.live:
                deleted.add(seq)
                live.hide(seq)
        else:
            floors[subject] = max(floors.get(subject, 0), seq)
            for q in [q for q in live.subjects.get(subject, ()) if q < seq]:
                live.hide(q)
    for early, is_delete, seq, subject in removals:
        if early:
            remove(is_delete, seq, subject)
    saved = None
    for saved in saved_index.encode(live):
        pass
    for early, is_delete, seq, subject in removals:
        if not early:
            remove(is_delete, seq, subject)
    for seq, (subject, rollup, ttl) in enumerate(after, len(before) + 1):
        live.add(seq, subject, seq * 10, rollup, ttl)
    restored = None
    for restored in saved_index.decode(json.loads(saved), len(before), floors, deleted):
        pass
    for seq, (subject, rollup, ttl) in enumerate(after, len(before) + 1):
        restored.add(seq, subject, seq * 10, rollup, ttl)
    expected = rebuilt(live, before + after, floors, deleted)
    assert shape(restored) == shape(expected) == shape(live)


def test_runs_keep_a_round_robin_stream_small_and_a_kv_key_a_tuple():
    rr = SubjectIndex(1, 0, False, False, {}, set())
    for seq in range(1, 100_001):
        rr.add(seq, f"s{seq % 10}", 0)
    part = b"".join(p for p in saved_index.encode(rr) if p)
    assert len(part) < 10_000                  # 10 subjects x 13 runs of 8,192, not 100,000 numbers
    back = roundtrip(rr, {}, set())
    assert shape(back) == shape(rr)
    kv = SubjectIndex(1, 1, True, False, {}, set())
    for seq in range(1, 5001):
        kv.add(seq, f"$KV.b.k{seq % 2000}", 0)
    back = roundtrip(kv, {}, set())
    assert shape(back) == shape(kv) and all(type(q) is tuple for q in back.subjects.values())


def test_steps_are_bounded():
    """Each step handles at most CHUNK_SEQS sequences (dict entries), either way."""
    idx = SubjectIndex(1, 1, True, False, {}, set())
    for seq in range(1, 60_001):
        idx.add(seq, f"k{seq}", 0)
    steps = list(saved_index.encode(idx))
    assert steps[-1] is not None and steps[:-1] == [None] * (len(steps) - 1)
    assert len(steps) - 1 >= 2 * 60_000 // saved_index.CHUNK_SEQS     # grouping, then the texts
    doc = json.loads(steps[-1])
    assert all(len(json.loads(t)) <= saved_index.CHUNK_RUNS for t in doc["seqs"])


def test_a_damaged_or_foreign_part_is_refused():
    idx = SubjectIndex(1, 0, False, False, {}, set())
    for seq in range(1, 50):
        idx.add(seq, "a" if seq % 3 else "b", 0)
    doc = json.loads(b"".join(p for p in saved_index.encode(idx) if p))
    assert not saved_index.matches(doc, {"max_msgs_per_subject": 1, "allow_rollup_hdrs": False})
    with pytest.raises(ValueError):
        list(saved_index.decode(doc, 48, {}, set()))                 # another document's `to`
    bad = dict(doc, seqs=[json.dumps({"a": [[60, 1, 5]]})])          # past `to`
    with pytest.raises(ValueError):
        list(saved_index.decode(bad, 49, {}, set()))
    bad = dict(doc, seqs=[json.dumps({"a": [3, 2]})])                # not ascending
    with pytest.raises(ValueError):
        list(saved_index.decode(bad, 49, {}, set()))
    bad = dict(doc, seqs=[json.dumps({"a": [3]}), json.dumps({"b": [3]})])   # one seq, two subjects
    with pytest.raises(ValueError):
        list(saved_index.decode(bad, 49, {}, set()))


# -- through the broker and the streams module ------------------------------------------------

def kv_records(keys) -> list[AppendInput]:
    out = []
    for key in keys:
        headers = Headers()
        headers.add(SUBJECT_HEADER, f"$KV.{KV_BUCKET}.k{key}")
        out.append(AppendInput(payload=b"v", headers=headers.encode()))
    return out


class Reads:
    def __init__(self, monkeypatch) -> None:
        self.records, real = 0, Partition.read

        def read(part, offset, count, max_bytes=None):
            batch = real(part, offset, count, max_bytes)
            self.records += batch.count
            return batch
        monkeypatch.setattr(Partition, "read", read)


def warm(streams: JetStreams) -> int:
    slices = 0
    while streams.warm_step(1024):
        slices += 1
    return slices


def from_log(streams: JetStreams, st) -> SubjectIndex:
    idx = streams._new_index(st)
    streams._index_catch_up(st, idx)
    return idx


def checkpoint(streams: JetStreams, st) -> None:
    """What the driver's warm-up task does with a due checkpoint."""
    data = None
    for data in streams.saved.snapshot(streams, st):
        pass
    assert data and streams.saved.write(st.name, data)


def test_kv_index_restored_after_a_clean_stop_and_after_a_kill_between_checkpoints(tmp_path, monkeypatch):
    fill(tmp_path, 50, kv_keys=KEYS, iggy=False)
    with Broker.open(tmp_path) as broker:        # first start: built from the log, saved at the stop
        streams = JetStreams(broker)
        streams.load()
        warm(streams)
        broker.append(JS_STREAM, streams.streams[KV].topic_id, kv_records(range(0, 600, 3)), partition=0)
        streams.index(streams.streams[KV])
        streams.save_state()
    reads = Reads(monkeypatch)
    with Broker.open(tmp_path) as broker:        # a restart: decoded, nothing read but a few records
        streams = JetStreams(broker)
        streams.load()
        st = streams.streams[KV]
        streams._restore(st)
        assert st.loading is not None and st.index is None
        reads.records = 0
        warm(streams)
        assert reads.records < 50                # the documents' last records, not the bucket's 3,200
        assert st.index is not None and st.loading is None
        assert shape(st.index) == shape(from_log(streams, st))
        assert len(st.index.live) == KEYS
        # a checkpoint, then (unsaved: a kill -9) updates, a delete and a filtered purge
        checkpoint(streams, st)
        tail = list(range(1, 900, 2))
        broker.append(JS_STREAM, st.topic_id, kv_records(tail), partition=0)
        last = streams.last_seq(st)
        assert streams.delete_msg(st, last)
        assert streams.purge(KV, {"filter": f"$KV.{KV_BUCKET}.k7"}) == 1
        expected = shape(streams.index(st))
        broker.partition(JS_STREAM, st.topic_id, 0).flush(fsync=False)
    with Broker.open(tmp_path) as broker:        # no save_state: the checkpoint and the tail
        streams = JetStreams(broker)
        streams.load()
        st = streams.streams[KV]
        reads.records = 0
        warm(streams)
        assert reads.records < len(tail) + 3 * 256
        assert shape(streams.index(st))[:2] == expected[:2]
        assert shape(st.index) == shape(from_log(streams, st))
        assert last not in st.index.live and f"$KV.{KV_BUCKET}.k7" not in st.index.subjects


def test_an_index_over_its_limit_is_not_saved_and_rebuilt(tmp_path, monkeypatch):
    fill(tmp_path, 50, kv_keys=KEYS, iggy=False)
    monkeypatch.setattr(saved_index, "MAX_INDEX_BYTES", 10_000)
    with Broker.open(tmp_path) as broker:
        streams = JetStreams(broker)
        streams.load()
        warm(streams)
        streams.save_state()
        assert "index" not in streams.saved.load(KV) and "dedup" in streams.saved.load(KV)
    with Broker.open(tmp_path) as broker:
        streams = JetStreams(broker)
        streams.load()
        st = streams.streams[KV]
        streams._restore(st)
        assert st.loading is None
        warm(streams)
        assert shape(st.index) == shape(from_log(streams, st)) and len(st.index.live) == KEYS


def test_a_damaged_saved_index_is_rebuilt_from_the_log(tmp_path):
    fill(tmp_path, 50, kv_keys=KEYS, iggy=False)
    with Broker.open(tmp_path) as broker:
        streams = JetStreams(broker)
        streams.load()
        warm(streams)
        streams.save_state()
        doc = streams.saved.load(KV)
        doc["index"]["seqs"][1] = json.dumps({f"$KV.{KV_BUCKET}.k1": [[10**9, 1, 2]]})
        assert streams.saved.save(KV, doc)
    with Broker.open(tmp_path) as broker:
        streams = JetStreams(broker)
        streams.load()
        st = streams.streams[KV]
        warm(streams)
        assert shape(st.index) == shape(from_log(streams, st)) and len(st.index.live) == KEYS
