"""adapters/nats/jetstream/dedup.py: duplicates wait for their first copy's append to settle,
and an id found through the cluster leaves the window at its first copy's stored time
(docs/scale-out.md "Fault schedule", items 3 and 4)."""

from __future__ import annotations

import time

from adapters.nats.jetstream.dedup import MAX_SETTLING_WAITERS, DedupWindow


def test_duplicates_wait_for_the_first_copys_append_and_then_fire_in_order():
    window = DedupWindow()
    fired: list[int] = []
    assert window.after_settled("a", lambda: fired.append(0)) is None  # nothing in flight: not parked
    window.appending("a")
    assert window.after_settled("a", lambda: fired.append(1)) is True
    assert window.after_settled("a", lambda: fired.append(2)) is True
    assert fired == []
    window.settled("b")  # another id's append settles: nothing fires
    assert fired == []
    window.settled("a")
    assert fired == [1, 2]
    window.settled("a")  # once only
    assert fired == [1, 2] and window.settling == {}


def test_waiters_are_bounded():
    window = DedupWindow()
    window.appending("a")
    for _ in range(MAX_SETTLING_WAITERS):
        assert window.after_settled("a", lambda: None) is True
    assert window.after_settled("a", lambda: None) is False


def test_an_id_remembered_at_an_earlier_store_time_expires_with_it():
    window = DedupWindow()
    now_mono, now_us = time.monotonic_ns(), time.time_ns() // 1000
    window.remember("new", 9, now_mono)
    window.remember_stored("old", 5, now_us - 10_000_000)  # stored 10 s ago elsewhere, found now
    assert list(window.ids) == ["new", "old"]  # behind a newer id: the front-first expiry misses it
    horizon = now_mono - 5_000_000_000  # a 5 s window
    assert window.duplicate_of("old", horizon) is None
    assert window.duplicate_of("new", horizon) == 9
    assert window.duplicate_of("old", now_mono - 20_000_000_000) == 5  # a 20 s window still holds it
