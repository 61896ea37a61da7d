"""The ack floor after a redelivery, side by side with nats-server: a redelivered message
keeps its first delivery's consumer sequence in the pending set (nats-server's
``trackPending``), so acking it moves the floor as the first delivery would
(``processAckMsg``: only the ack right above the floor moves it). The floor rule is
also what ``consumer_store.merge`` reproduces across scale-out gateways."""

from __future__ import annotations

import asyncio

import pytest
from test_nats_jetstream_streams import (  # noqa: F401 - real_js is a fixture
    assert_same_results,
    needs_server,
    real_js,
)

nats = pytest.importorskip("nats")
from nats.js.api import AckPolicy, ConsumerConfig


def floor(info) -> list:
    return [info.delivered.stream_seq, info.delivered.consumer_seq, info.ack_floor.stream_seq,
            info.ack_floor.consumer_seq, info.num_ack_pending, info.num_redelivered]


async def redelivered_then_acked(url: str) -> list:
    nc = await nats.connect(url)
    js = nc.jetstream()
    out = []
    try:
        await js.add_stream(name="RF", subjects=["rf.>"])
        for i in range(5):
            await js.publish("rf.x", f"m{i}".encode())
        await js.add_consumer("RF", ConsumerConfig(durable_name="d", ack_policy=AckPolicy.EXPLICIT, ack_wait=1))
        sub = await js.pull_subscribe_bind(durable="d", stream="RF")
        first = await sub.fetch(4, timeout=5)                  # 1-4, consumer seqs 1-4
        for m in first[1:3]:
            await m.ack_sync()                                 # 2 and 3: above the floor
        out.append(floor(await js.consumer_info("RF", "d")))
        await asyncio.sleep(1.5)                               # 1 and 4 are due again
        again = await sub.fetch(2, timeout=5)
        out.append([(m.metadata.sequence.stream, m.metadata.sequence.consumer, m.metadata.num_delivered)
                    for m in again])
        await again[0].ack_sync()                              # 1: the floor goes up to 3
        out.append(floor(await js.consumer_info("RF", "d")))
        await again[1].ack_sync()                              # 4: nothing pending, the floor is delivered
        out.append(floor(await js.consumer_info("RF", "d")))
    finally:
        await nc.close()
    return out


@needs_server
def test_floor_after_a_redelivery_is_nats_servers(tmp_path, real_js):  # noqa: F811 - the fixture imported above
    assert_same_results(tmp_path, real_js, redelivered_then_acked)
