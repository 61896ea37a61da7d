"""One JetStream durable consumer across two scale-out gateways (docs/scale-out.md
"JetStream consumers"; issue 30, fault schedule finding 5).

Two gateways share one store (the store pass's 3-node nats-server cluster, one store
prefix): a stream and a durable pull consumer made through gateway A appear on B; half
of the messages fetched and acked through A are never sent through B; a nak and the
redelivery through B show on A (its delivery count goes on from B's); CONSUMER.INFO
agrees on both once idle. An ephemeral consumer stays on the gateway that made it.

Runs only in the store pass (FERRY_TEST_STORE=jetstream, `make test`'s second run)."""

from __future__ import annotations

import asyncio
import time
import uuid
from contextlib import ExitStack

import pytest
from ferry_harness import TEST_STORE, running_gateway, store_env

nats = pytest.importorskip("nats")
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import AckPolicy, ConsumerConfig
from nats.js.errors import NotFoundError

pytestmark = [pytest.mark.store,
              pytest.mark.skipif(TEST_STORE != "jetstream", reason="two gateways need the JetStream store pass")]
WAIT_S = 30.0   # a loop's limit: guards a hang only (a save is every 0.2 s, the mirror takes milliseconds)
ACK_WAIT_S = 2  # short, so what A delivered and did not ack is due again on B within the test


async def until(what: str, check, show=None):
    """``await check()`` until it is truthy (NotFoundError counts as not yet); on
    failure the message shows ``await show()``."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            got = await check()
        except NotFoundError:
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {WAIT_S} s: {what}" + (f": {await show()}" if show else ""))
        await asyncio.sleep(0.05)


def state(info) -> tuple:
    """The part of CONSUMER.INFO that is the consumer's, not the asking gateway's."""
    return (info.delivered.stream_seq, info.delivered.consumer_seq, info.ack_floor.stream_seq,
            info.ack_floor.consumer_seq, info.num_ack_pending, info.num_redelivered, info.num_pending)


async def fetch_all(psub, want: int) -> list:
    """Fetch until ``want`` messages came (or WAIT_S passed), then a short wait for an extra one."""
    got = []
    deadline = time.monotonic() + WAIT_S
    while len(got) < want and time.monotonic() < deadline:
        try:
            got += await psub.fetch(want - len(got), timeout=1)
        except (NatsTimeout, asyncio.TimeoutError):
            pass
    try:
        got += await psub.fetch(1, timeout=0.5)
    except (NatsTimeout, asyncio.TimeoutError):
        pass
    return got


async def scenario(url_a: str, url_b: str) -> dict:
    na, nb = await nats.connect(url_a), await nats.connect(url_b)
    try:
        ja, jb = na.jetstream(timeout=10), nb.jetstream(timeout=10)
        stream, durable, subject = f"SO{uuid.uuid4().hex[:8]}", "worker", "so.jobs"
        await ja.add_stream(name=stream, subjects=["so.>"])
        for i in range(1, 11):
            await ja.publish(subject, f"m{i}".encode())
        await ja.add_consumer(stream, ConsumerConfig(durable_name=durable, ack_policy=AckPolicy.EXPLICIT,
                                                     ack_wait=ACK_WAIT_S, max_ack_pending=100))
        # made on A, known on B (streams and durable consumers follow the replicated tables)
        await until("the consumer on B", lambda: jb.consumer_info(stream, durable))

        async def b_holds_all():
            return (await jb.stream_info(stream)).state.messages == 10
        await until("B's copy of the stream (its mirror)", b_holds_all)

        sub_a = await ja.pull_subscribe_bind(durable=durable, stream=stream)
        first = await fetch_all(sub_a, 10)
        assert [m.metadata.sequence.stream for m in first] == list(range(1, 11))
        for m in first[:5]:
            await m.ack_sync()
        acked_at = time.monotonic()

        async def b_has_acks():
            i = await jb.consumer_info(stream, durable)
            return i if i.ack_floor.stream_seq == 5 and i.num_ack_pending == 5 else None
        await until("A's acks on B", b_has_acks, lambda: jb.consumer_info(stream, durable))
        seen_after = time.monotonic() - acked_at
        info_a, info_b = await ja.consumer_info(stream, durable), await jb.consumer_info(stream, durable)
        assert state(info_a) == state(info_b) == (10, 10, 5, 5, 5, 0, 0)

        # The fetcher moves to B: only what A delivered and nobody acked comes again (once
        # ack_wait passed), then what is new; never 1-5.
        for i in range(11, 16):
            await ja.publish(subject, f"m{i}".encode())
        sub_b = await jb.pull_subscribe_bind(durable=durable, stream=stream)
        second = await fetch_all(sub_b, 10)
        seqs = sorted(m.metadata.sequence.stream for m in second)
        assert seqs == list(range(6, 16)), seqs
        assert {m.metadata.sequence.stream: m.metadata.num_delivered for m in second} == {
            **{s: 2 for s in range(6, 11)}, **{s: 1 for s in range(11, 16)}}
        for m in second:
            if m.metadata.sequence.stream == 11:
                await m.nak()                    # redelivered at once, through B
            else:
                await m.ack_sync()
        again = await fetch_all(sub_b, 1)
        assert [(m.metadata.sequence.stream, m.metadata.num_delivered) for m in again] == [(11, 2)]

        # A sees B's acks and B's redelivery: one message pending, delivered twice.
        async def a_has_b():
            i = await ja.consumer_info(stream, durable)
            return i if (i.delivered.stream_seq, i.ack_floor.stream_seq, i.num_ack_pending,
                         i.num_redelivered) == (15, 10, 1, 1) else None
        await until("B's acks and redelivery on A", a_has_b,
                    lambda: asyncio.gather(ja.consumer_info(stream, durable), jb.consumer_info(stream, durable)))
        # After ack_wait it is due on A too, as its third delivery (B's two counted).
        third = await fetch_all(sub_a, 1)
        assert [(m.metadata.sequence.stream, m.metadata.num_delivered) for m in third] == [(11, 3)]
        await third[0].ack_sync()

        async def converged():
            a, b = await ja.consumer_info(stream, durable), await jb.consumer_info(stream, durable)
            return (state(a), state(b)) if state(a) == state(b) and a.num_ack_pending == 0 else None
        final = await until("CONSUMER.INFO equal on A and B", converged)
        assert final[0][0] == 15 and final[0][2] == 15 and final[0][4:] == (0, 0, 0), final

        # Ephemeral consumers stay on the gateway that made them (documented).
        eph = await ja.add_consumer(stream, ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, inactive_threshold=30))
        await asyncio.sleep(1)
        with pytest.raises(NotFoundError):
            await jb.consumer_info(stream, eph.name)
        return {"acks_seen_on_b_s": seen_after}
    finally:
        await na.close()
        await nb.close()


def test_durable_consumer_is_one_consumer_across_gateways(tmp_path):
    env = store_env()  # one prefix: the same store
    with ExitStack() as stack:
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
        a, b = (stack.enter_context(running_gateway(tmp_path / name, **env)) for name in ("a", "b"))
        figures = asyncio.run(asyncio.wait_for(scenario(a.url(), b.url()), 180))
        print("figures", figures)
