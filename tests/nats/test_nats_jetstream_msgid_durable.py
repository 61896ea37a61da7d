"""A ``Nats-Msg-Id`` duplicate is acknowledged only for a first copy that was stored (issue 30).

bench/fault_schedule.py found JetStream acks for messages never stored: the msg id was
remembered when the append was queued, so when the append then failed, the client's retry
was answered ``duplicate: true`` and nothing was ever stored. Now a duplicate is answered
once what is pending on the stream is durable, with the first copy's sequence, and an
append that fails forgets its id, so the retry is stored. The gateway runs in this
process and the test holds its fdatasync (tests/support/held_fsync.py), with nats-py;
forgetting a failed copy's id is shown on the window itself (a failed append leaves an
embedded partition read-only until a restart, which refills the window from the log; the
JetStream store fails appends and goes on, where the forgetting matters).
"""

from __future__ import annotations

import asyncio

import nats
import pytest

from adapters.nats.jetstream.dedup import DedupWindow
from held_fsync import HOLD_LIMIT_S, held_fsync, held_gateway  # noqa: F401 - the fixtures

# How long the duplicate gets to be answered while the first copy is not durable; a pass
# never depends on it (a gateway that waits for durability answers nothing however long).
HELD_WINDOW_S = 1.0


def test_a_forgotten_id_is_only_the_failed_copys():
    window = DedupWindow()
    window.remember("a", 5, 100)
    window.forget("a", 4)  # another copy's failure: "a" still stands for seq 5
    assert window.duplicate_of("a", 0) == 5
    window.forget("a", 5)
    assert window.duplicate_of("a", 0) is None


@pytest.fixture
def gw(held_gateway):
    return held_gateway


def test_a_duplicate_is_acknowledged_once_the_first_copy_is_durable(gw, held_fsync):  # noqa: F811
    async def run() -> None:
        nc = await nats.connect(gw.url())
        try:
            js = nc.jetstream()
            await js.add_stream(name="MSGID", subjects=["msgid.>"])
            held_fsync.hold()
            first = asyncio.ensure_future(js.publish("msgid.a", b"one", headers={"Nats-Msg-Id": "m1"}))
            assert await asyncio.to_thread(held_fsync.entered.wait, HOLD_LIMIT_S)
            again = asyncio.ensure_future(js.publish("msgid.a", b"one", headers={"Nats-Msg-Id": "m1"}))
            done, _ = await asyncio.wait({first, again}, timeout=HELD_WINDOW_S)
            assert done == set()  # neither the first copy nor its duplicate is acknowledged yet
            held_fsync.release()
            ack1, ack2 = await first, await again
            assert (ack1.seq, bool(ack1.duplicate)) == (1, False)
            assert (ack2.seq, bool(ack2.duplicate)) == (1, True)
            assert (await js.stream_info("MSGID")).state.messages == 1
        finally:
            await nc.close()
    asyncio.run(run())
