"""Incremental fetch sessions (KIP-227), sans-I/O: the cache's rules alone, then through
the session on a real broker (adapters/kafka/fetch_sessions.py, dataplane.py)."""

from __future__ import annotations

import pytest

# the session tests' broker and ctx fixtures (a broker on tmp_path with a root user)
from test_kafka_session import Client, batch, broker, ctx, produce  # noqa: F401 - fixtures

from adapters.kafka.errors import ErrorCode as E
from adapters.kafka.fetch_sessions import FetchSessions
from adapters.kafka.messages import FETCH
from adapters.kafka.records import decode_batches

S = FETCH.request.structs


def request(parts=(), *, session_id=0, epoch=-1, forgotten=(), max_bytes=1 << 20, min_bytes=1, max_wait_ms=0):
    """A Fetch body: ``parts`` is ``[(topic, partition, offset, partition_max_bytes)]``."""
    topics: dict[str, list] = {}
    for name, index, offset, limit in parts:
        topics.setdefault(name, []).append(S["FetchPartition"].make(
            partition=index, fetch_offset=offset, partition_max_bytes=limit))
    return dict(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, session_id=session_id,
                session_epoch=epoch, topics=tuple(S["FetchTopic"].make(topic=t, partitions=tuple(p))
                                                  for t, p in topics.items()),
                forgotten_topics_data=tuple(S["ForgottenTopic"].make(topic=t, partitions=tuple(p))
                                            for t, p in forgotten))


def body(**kw):
    return FETCH.request.make(**request(**kw))


def listed(plan) -> list:
    return [(t, w.partition, w.fetch_offset) for t, ws in plan.topics for w in ws]


# -- the cache's rules ------------------------------------------------------------------------
def test_epoch_minus_one_is_sessionless_and_old_versions_never_open_one():
    cache = FetchSessions()
    plan = cache.plan(12, body(parts=[("a", 0, 5, 100)]), "conn", 0)
    assert (plan.session_id, plan.incremental, listed(plan)) == (0, False, [("a", 0, 5)])
    assert cache.plan(6, body(parts=[("a", 0, 5, 100)], epoch=0), "conn", 0).session is None
    assert len(cache) == 0


def test_a_session_opens_at_epoch_zero_and_takes_incremental_changes():
    cache = FetchSessions()
    full = cache.plan(12, body(parts=[("a", 0, 5, 100), ("a", 1, 7, 100), ("b", 0, 0, 100)], epoch=0), "c", 0)
    sid = full.session_id
    assert sid > 0 and not full.incremental and len(cache) == 1
    # epoch 1: a's partition 0 moved on, b forgotten, c added; a/1 stays as it was
    inc = cache.plan(12, body(parts=[("a", 0, 9, 100), ("c", 3, 1, 50)], session_id=sid, epoch=1,
                              forgotten=[("b", [0])]), "c", 10)
    assert inc.incremental and inc.session_id == sid
    assert sorted(listed(inc)) == [("a", 0, 9), ("a", 1, 7), ("c", 3, 1)]
    # the next one must carry epoch 2
    assert cache.plan(12, body(session_id=sid, epoch=1), "c", 20).error == E.INVALID_FETCH_SESSION_EPOCH
    assert not cache.plan(12, body(session_id=sid, epoch=2), "c", 20).error


def test_unknown_ids_other_connections_and_closing():
    cache = FetchSessions()
    sid = cache.plan(12, body(parts=[("a", 0, 0, 100)], epoch=0), "one", 0).session_id
    assert cache.plan(12, body(session_id=sid + 1, epoch=1), "one", 0).error == E.FETCH_SESSION_ID_NOT_FOUND
    assert cache.plan(12, body(session_id=sid, epoch=1), "two", 0).error == E.FETCH_SESSION_ID_NOT_FOUND
    closed = cache.plan(12, body(parts=[("a", 0, 0, 100)], session_id=sid, epoch=-1), "one", 0)
    assert closed.session_id == 0 and len(cache) == 0
    sid = cache.plan(12, body(parts=[("a", 0, 0, 100)], epoch=0), "one", 0).session_id
    cache.forget("one")
    assert len(cache) == 0
    assert cache.plan(12, body(session_id=sid, epoch=1), "one", 0).error == E.FETCH_SESSION_ID_NOT_FOUND


def test_a_full_cache_evicts_only_an_idle_session():
    cache = FetchSessions(max_sessions=2, idle_ms=1000)
    first = cache.plan(12, body(parts=[("a", 0, 0, 1)], epoch=0), "x", 0).session_id
    cache.plan(12, body(parts=[("a", 0, 0, 1)], epoch=0), "y", 500)
    assert cache.plan(12, body(parts=[("a", 0, 0, 1)], epoch=0), "z", 900).session is None  # none idle yet
    third = cache.plan(12, body(parts=[("a", 0, 0, 1)], epoch=0), "z", 1000).session_id  # x idle 1000 ms
    assert third and len(cache) == 2
    assert cache.plan(12, body(session_id=first, epoch=1), "x", 1000).error == E.FETCH_SESSION_ID_NOT_FOUND


def test_the_partition_bound():
    cache = FetchSessions(max_partitions=2)
    assert cache.plan(12, body(parts=[("a", i, 0, 1) for i in range(3)], epoch=0), "c", 0).session is None
    sid = cache.plan(12, body(parts=[("a", 0, 0, 1)], epoch=0), "c", 0).session_id
    grow = cache.plan(12, body(parts=[("a", 1, 0, 1), ("a", 2, 0, 1)], session_id=sid, epoch=1), "c", 0)
    assert grow.error == E.FETCH_SESSION_ID_NOT_FOUND and len(cache) == 0


def test_epochs_wrap_to_one():
    cache = FetchSessions()
    plan = cache.plan(12, body(parts=[("a", 0, 0, 1)], epoch=0), "c", 0)
    plan.session.epoch = 0x7FFFFFFF
    assert not cache.plan(12, body(session_id=plan.session_id, epoch=0x7FFFFFFF), "c", 0).error
    assert plan.session.epoch == 1


# -- through the session, on a real broker ---------------------------------------------------------
@pytest.fixture
def two(ctx, broker):
    broker.create_stream("f")
    broker.create_topic("f", "t", 2)
    c = Client(ctx)
    c.login()
    return c


def fetch(c, version=12, **kw):
    out = c.call(FETCH, version, **request(**kw))
    return out


def partitions(resp) -> dict:
    return {(t.topic, p.partition_index): p for t in resp.responses for p in t.partitions}


def values(part) -> list:
    return [r.value for b in decode_batches(part.records) for r in b.records]


def test_incremental_answers_list_only_partitions_with_news(two):
    c = two
    produce(c, "f.t", batch(b"a", b"b"), partition=0)
    full = fetch(c, parts=[("f.t", 0, 0, 1 << 20), ("f.t", 1, 0, 1 << 20)], epoch=0)
    sid = full.session_id
    assert sid > 0 and full.error_code == 0
    got = partitions(full)
    assert set(got) == {("f.t", 0), ("f.t", 1)} and values(got[("f.t", 0)]) == [b"a", b"b"]
    # nothing new: an empty answer (no partition has records or a moved watermark)
    quiet = fetch(c, parts=[("f.t", 0, 2, 1 << 20)], session_id=sid, epoch=1)
    assert (quiet.error_code, quiet.session_id, quiet.responses) == (0, sid, ())
    # a record on partition 1: only partition 1 answers, at the offset the session kept (0)
    produce(c, "f.t", batch(b"c"), partition=1)
    news = partitions(fetch(c, session_id=sid, epoch=2))
    assert list(news) == [("f.t", 1)] and values(news[("f.t", 1)]) == [b"c"]
    # a wrong epoch is a top-level error and reads nothing
    stale = fetch(c, session_id=sid, epoch=2)
    assert (stale.error_code, stale.session_id, stale.responses) == (E.INVALID_FETCH_SESSION_EPOCH, 0, ())


def test_a_long_poll_moves_the_epoch_once_and_reports_the_append(two, ctx):
    c = two
    sid = fetch(c, parts=[("f.t", 0, 0, 1 << 20)], epoch=0).session_id
    waiting = fetch(c, session_id=sid, epoch=1, max_wait_ms=500)
    assert waiting.kind == "wait"
    writer = Client(ctx)
    writer.login()
    produce(writer, "f.t", batch(b"late"), partition=0)
    value = c.finish(FETCH, 12, c.session.resume(waiting.wait, c.now + 10))
    assert values(partitions(value)[("f.t", 0)]) == [b"late"]
    assert fetch(c, parts=[("f.t", 0, 1, 1 << 20)], session_id=sid, epoch=2).error_code == 0


def test_a_closed_connection_drops_its_sessions(two, ctx):
    c = two
    fetch(c, parts=[("f.t", 0, 0, 1 << 20)], epoch=0)
    assert len(ctx.fetch_sessions) == 1
    c.session.data.closed()
    assert len(ctx.fetch_sessions) == 0


def test_sessionless_fetch_still_answers_every_partition(two):
    c = two
    resp = fetch(c, parts=[("f.t", 0, 0, 1 << 20), ("f.t", 1, 0, 1 << 20)])
    assert resp.session_id == 0 and set(partitions(resp)) == {("f.t", 0), ("f.t", 1)}
    old = c.call(FETCH, 4, **request(parts=[("f.t", 0, 0, 1 << 20)]))
    assert list(partitions(old)) == [("f.t", 0)]
