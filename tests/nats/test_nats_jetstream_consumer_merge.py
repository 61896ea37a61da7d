"""``consumer_store.merge``: one durable JetStream consumer kept by two scale-out gateways
(docs/scale-out.md "JetStream consumers"). Sans-I/O: two in-memory copies of a consumer
deliver, redeliver and ack on their own and trade their saved documents (``_dump``, as
the replicated table carries them) at random moments; after a full exchange both hold
the same state, nothing acked on either side is pending, and everything delivered and
never acked is pending on both (at least once)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.nats.jetstream.consumer_store import _dump, merge
from adapters.nats.jetstream.model import Consumer, Pending
from adapters.nats.jetstream.streams import JsStream

CFG = {"ack_policy": "explicit", "ack_wait": 30_000_000_000, "max_deliver": -1, "deliver_policy": "all"}


def consumer() -> Consumer:
    return Consumer(JsStream("S", {"name": "S", "retention": "limits"}, "t0", 1), "d", dict(CFG), "t0", True)


def doc(con: Consumer) -> dict:
    return json.loads(_dump(con))


def state(con: Consumer) -> tuple:
    return (con.sseq, con.cseq, con.floor_sseq, con.floor_cseq,
            {s: (p.cseq, p.deliveries) for s, p in sorted(con.pending.items())}, dict(sorted(con.rdc.items())))


# What a gateway does to its copy, as the cursor and the ack path do (cursor.deliver, JsConsumers._acked).
def deliver_new(con: Consumer) -> int:
    con.cseq += 1
    con.sseq += 1
    con.pending[con.sseq] = Pending(con.cseq, 1, 0.0, 0)
    return con.sseq


def redeliver(con: Consumer, seq: int) -> None:
    p = con.pending[seq]
    con.cseq += 1
    p.deliveries += 1
    con.rdc[seq] = p.deliveries


def ack(con: Consumer, seq: int) -> None:
    dseq = con.pending.pop(seq).cseq
    con.rdc.pop(seq, None)
    if not con.pending:
        con.floor_sseq, con.floor_cseq = con.sseq, con.cseq
    elif dseq == con.floor_cseq + 1:
        con.floor_sseq, con.floor_cseq = seq, dseq
        above = [s for s in con.pending if s > seq]
        if above:
            low = min(above)
            con.floor_sseq, con.floor_cseq = low - 1, con.pending[low].cseq - 1


def exchange(a: Consumer, b: Consumer) -> int:
    """Trade documents until neither side holds more than the other; the rounds it took."""
    for rounds in range(1, 6):
        _, a_ahead = merge(a, doc(b), 0.0)
        _, b_ahead = merge(b, doc(a), 0.0)
        if not a_ahead and not b_ahead:
            return rounds
    raise AssertionError(f"no convergence: {state(a)} vs {state(b)}")


STEP = st.tuples(st.sampled_from(["new", "redeliver", "ack", "a->b", "b->a"]), st.booleans(), st.integers(0, 50))


@settings(max_examples=400, deadline=None)
@given(st.lists(STEP, max_size=60))
def test_two_copies_converge_and_lose_no_ack_and_no_delivery(steps):
    a, b = consumer(), consumer()
    acked: set[int] = set()           # acked on some side
    delivered: set[int] = set()       # delivered on some side
    for kind, on_a, pick in steps:
        con = a if on_a else b
        pending = sorted(con.pending)
        if kind == "new":
            delivered.add(deliver_new(con))
        elif kind == "redeliver" and pending:
            redeliver(con, pending[pick % len(pending)])
        elif kind == "ack" and pending:
            seq = pending[pick % len(pending)]
            ack(con, seq)
            acked.add(seq)
        elif kind == "a->b":
            before = state(b)
            merge(b, doc(a), 0.0)
            assert state(b)[0] >= before[0] and state(b)[2] >= before[2]   # never backwards
        elif kind == "b->a":
            before = state(a)
            merge(a, doc(b), 0.0)
            assert state(a)[0] >= before[0] and state(a)[2] >= before[2]
    exchange(a, b)
    assert state(a) == state(b)
    assert not acked & set(a.pending)                      # an ack on either side holds
    assert set(a.pending) == delivered - acked             # the rest is delivered again: at least once
    if a.pending:
        assert a.floor_sseq == min(a.pending) - 1          # everything below the lowest pending is acked
    else:
        assert (a.floor_sseq, a.floor_cseq) == (a.sseq, a.cseq)
    merge(a, doc(b), 0.0)                                  # merging what is known changes nothing
    assert state(a) == state(b)


def test_fetcher_moving_to_another_gateway_resumes_after_the_acks():
    a, b = consumer(), consumer()
    for _ in range(10):
        deliver_new(a)
    merge(b, doc(a), 0.0)                                  # A's save reached B: 1-10 pending there
    for seq in range(1, 6):
        ack(a, seq)
    acked, ahead = merge(b, doc(a), 0.0)
    assert acked == [1, 2, 3, 4, 5] and not ahead
    assert state(b) == state(a) == (10, 10, 5, 5, {s: (s, 1) for s in range(6, 11)}, {})
    assert b.scan == 10                                    # B delivers new messages from 11 on


def test_ack_above_the_floor_on_one_side_and_redelivery_on_the_other():
    a, b = consumer(), consumer()
    for _ in range(4):
        deliver_new(a)
    merge(b, doc(a), 0.0)
    ack(a, 3)                                              # above the floor: no record but "not pending"
    redeliver(b, 2)
    redeliver(b, 3)                                        # B did not know 3 was acked yet
    exchange(a, b)
    assert sorted(a.pending) == sorted(b.pending) == [1, 2, 4]
    assert a.pending[2].deliveries == 2 and a.rdc == b.rdc == {2: 2}
    assert a.floor_sseq == b.floor_sseq == 0


def test_a_doc_from_before_changes_nothing():
    a, b = consumer(), consumer()
    for _ in range(3):
        deliver_new(a)
    old = doc(a)
    ack(a, 1)
    ack(a, 2)
    ack(a, 3)
    acked, ahead = merge(a, old, 0.0)
    assert acked == [] and ahead                           # A knows more: it writes back
    assert state(a) == (3, 3, 3, 3, {}, {})


# -- the follow path on one broker: another gateway's write is a direct table write plus
# Broker.resync, as the JetStream store's metadata mirror replays it (docs/scale-out.md) --
def _other_gateway_writes(broker, doc: dict) -> None:
    from adapters.nats.jetstream.consumer_store import TABLE
    from core.kvtables import NO_VERSION

    broker.tables.update(TABLE, [(f"{doc['stream']}/{doc['name']}".encode(),
                                  json.dumps(doc).encode(), NO_VERSION)])
    broker.resync()


def test_another_gateways_write_is_followed_and_a_crossed_write_is_merged_not_lost(tmp_path):
    from adapters.nats.jetstream.api import enable
    from adapters.nats.jetstream.config import parse_config
    from adapters.nats.jetstream.consumer_config import parse_consumer_config
    from adapters.nats.jetstream.consumer_store import TABLE
    from core.broker import Broker

    with Broker.open(tmp_path) as broker:
        js = enable(broker)
        consumers = js.consumers
        st = js.streams.create(parse_config({"name": "S", "subjects": ["s.>"]}))
        cfg = parse_consumer_config({"durable_name": "d", "ack_policy": "explicit"}, False, ["s.>"])
        con = consumers.add(st, "d", cfg, True, "create")
        for _ in range(6):
            deliver_new(con)                     # this gateway delivered 1-6
        consumers.store.mark(con)
        assert consumers.store.save_dirty(0.0)
        # the other gateway acked 1-4 from that state (and delivered 7)
        other = doc(con)
        other.update(delivered=[7, 7], ack_floor=[4, 4], pending=[[5, 5, 1, 0], [6, 6, 1, 0], [7, 7, 1, 0]])
        _other_gateway_writes(broker, other)
        assert consumers.stale
        assert consumers.get("S", "d") is con    # an entry point refreshes first
        assert not consumers.stale and state(con) == (7, 7, 4, 4, {5: (5, 1), 6: (6, 1), 7: (7, 1)}, {})
        assert con.scan == 7

        # Crossed writes: this gateway acks 5 while the other acks 6 and writes first.
        ack(con, 5)
        consumers.store.mark(con)
        crossed = dict(other, ack_floor=[4, 4], pending=[[5, 5, 1, 0], [7, 7, 1, 0]])
        broker.tables.update(TABLE, [(b"S/d", json.dumps(crossed).encode(), con.version)])  # not seen here yet
        assert consumers.store.save_dirty(0.0)   # refused on the version, merged, written
        saved = json.loads(broker.tables.get(TABLE, [b"S/d"])[0][1])
        assert saved["pending"] == [[7, 7, 1, 0]] and state(con)[4] == {7: (7, 1)}   # both acks hold
        assert saved["ack_floor"] == [6, 6] and (con.floor_sseq, con.floor_cseq) == (6, 6)   # 1-6 acked

        # deleted elsewhere: dropped here, without writing
        broker.tables.remove(TABLE, [(b"S/d", con.version)])
        broker.resync()
        assert consumers.names("S") == []
