"""A ``Nats-Msg-Id`` duplicate is answered only when the log backs it (docs/scale-out.md,
"Fault schedule" item 3; bench/fault_schedule.py seed 2 lost 2 messages this way).

A stream's msg-id window comes back from the saved state after a start, and in scale-out
mode that document is shared by every gateway. One saved by an older gateway could hold an
id whose append was still on its way to the cluster, at a sequence the gateway had only
guessed: the retry of that message was answered ``duplicate: true`` and it was never stored.
nats-server answers a duplicate only for a copy it stored (server/stream.go, the msg-id map
is filled from stored messages; an id still being proposed is refused with error 10158, not
answered ``duplicate``). Here a saved window names an id at a sequence past the log's end and
the gateway, started on it, stores the client's publish, while a real duplicate is still one.
The gateway runs in this process; the clients are nats-py.
"""

from __future__ import annotations

import asyncio
import json
import time

import nats

from adapters.nats.jetstream.dedup import DedupWindow
from adapters.nats.jetstream.saved_state import SavedState
from core.broker import Broker
from ferry_harness import running_gateway


async def _publish(gw, subject: str, data: bytes, msg_id: str):
    nc = await nats.connect(gw.url())
    try:
        js = nc.jetstream()
        ack = await js.publish(subject, data, headers={"Nats-Msg-Id": msg_id})
        return ack.seq, bool(ack.duplicate), (await js.stream_info("HELD")).state.messages
    finally:
        await nc.close()


async def _add_stream(gw) -> None:
    nc = await nats.connect(gw.url())
    try:
        await nc.jetstream().add_stream(name="HELD", subjects=["held.>"])
    finally:
        await nc.close()


def test_a_saved_id_the_log_does_not_hold_is_stored_not_answered_duplicate(tmp_path):
    with running_gateway(tmp_path) as gw:
        asyncio.run(_add_stream(gw))
        assert asyncio.run(_publish(gw, "held.a", b"a", "m0")) == (1, False, 1)
    # The stop saved the window ({m0: 1}); the document now also names "ghost" at 2, as one
    # saved with an append in flight did (the first layout, which a start still reads).
    with Broker.open(tmp_path / "data") as broker:
        saved = SavedState(broker)
        doc = saved.load("HELD")
        assert doc is not None and doc["to"] == 1
        now = time.time_ns()
        ids = [["m0", 1, now], ["ghost", 2, now]]
        assert saved.save("HELD", {"topic": doc["topic"], "to": doc["to"], "id": doc["id"],
                                   "dedup": [json.dumps(ids)]})
    with running_gateway(tmp_path) as gw:
        assert asyncio.run(_publish(gw, "held.g", b"g", "ghost")) == (2, False, 2)   # stored, not a duplicate
        assert asyncio.run(_publish(gw, "held.g", b"g", "ghost")) == (2, True, 2)    # now it is one
        assert asyncio.run(_publish(gw, "held.a", b"a", "m0")) == (1, True, 2)       # the saved real id too


def test_an_id_whose_append_is_in_flight_is_found_but_not_among_the_stored_ones():
    """What a saved window writes is ``ids`` (saved_state.snapshot): a guess never gets there."""
    window = DedupWindow()
    window.appending("a")
    window.remember("a", 7, 100)                   # the sequence the append was given
    assert window.duplicate_of("a", 0) == 7 and "a" not in window.ids   # a retry waits for it
    window.remember("a", 9, 100)                   # stored at 9 (another gateway wrote 7)
    window.settled("a")
    assert window.ids == {"a": (9, 100)} and window.guessed == {}
    window.appending("b")
    window.remember("b", 10, 100)
    window.settled("b", stored=False)              # the append failed: a retry is stored
    assert window.duplicate_of("b", 0) is None and "b" not in window.ids
    window.remember("c", 11, 100)                  # nothing in flight for it: stored
    assert window.ids["c"] == (11, 100)
