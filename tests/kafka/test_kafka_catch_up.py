"""The new leader's catch-up rules (adapters/kafka/catch_up.py), sans-I/O: ``log_end`` as
``Store.log_end`` answers, the stream's end asked at its previous call (None while asking).
The store-pass test with two gateways is tests/kafka/test_kafka_catch_up_store.py."""

from __future__ import annotations

from adapters.kafka.catch_up import MAX_PARTITIONS, CatchUp


class LogEnd:
    """``Store.log_end`` for one partition: each call answers what the previous one asked."""

    def __init__(self, end: int) -> None:
        self.end = end  # the stream's end now
        self.known: int | None = None
        self.asked = 0

    def __call__(self) -> int | None:
        if self.known is not None:
            known, self.known = self.known, None
            return known
        self.asked += 1
        self.known = self.end  # answered before the next call
        return None


def test_a_new_leader_takes_nothing_until_its_copy_holds_the_end_asked_after_it_took_over():
    c, end, placement = CatchUp(), LogEnd(9), object()
    assert not c.ready("p", placement, 6, end)  # asks
    assert not c.ready("p", placement, 6, end)  # the end (9) is known: the copy holds 6
    assert not c.ready("p", placement, 8, end)
    assert c.ready("p", placement, 9, end) and c.ready("p", placement, 9, end)
    assert end.asked == 1  # once caught up, no more questions


def test_an_answer_to_an_older_question_is_not_used():
    c, end, placement = CatchUp(), LogEnd(9), object()
    end.known = 3  # asked before this gateway led the partition (a Fetch's question)
    assert not c.ready("p", placement, 3, end)
    assert end.asked == 1 and not c.ready("p", placement, 3, end)  # 9 now: 3 is not enough
    assert c.ready("p", placement, 9, end)


def test_another_live_set_means_catching_up_again():
    c, end = CatchUp(), LogEnd(2)
    first, second = object(), object()
    assert not c.ready("p", first, 2, end) and c.ready("p", first, 2, end)
    end.end = 5  # another gateway led the partition meanwhile and stored 3 more
    assert not c.ready("p", second, 2, end) and not c.ready("p", second, 2, end)
    assert c.ready("p", second, 5, end)
    assert c.ready("q", first, 0, LogEnd(0)) is False  # each partition on its own


def test_a_gap_is_rechecked_once_on_a_copy_caught_up_after_it_was_seen():
    c, end, placement = CatchUp(), LogEnd(4), object()
    assert not c.ready("p", placement, 4, end) and c.ready("p", placement, 4, end)
    assert not c.recheck("other", ("pid", 0, 9))  # a partition never caught up: nothing to recheck
    gap = (1000, 12, 482)  # producer id, epoch, base sequence
    assert c.recheck("p", gap)  # the first time: retriable, catch up again
    end.end = 7
    assert not c.ready("p", placement, 4, end) and not c.ready("p", placement, 4, end)
    assert c.ready("p", placement, 7, end)
    assert not c.recheck("p", gap)  # seen again on the caught-up copy: the gap is real
    assert c.ready("p", placement, 7, end)


def test_partitions_are_bounded():
    c, placement = CatchUp(), object()
    for i in range(MAX_PARTITIONS + 5):
        c.ready(i, placement, 0, LogEnd(0))
    assert len(c) == MAX_PARTITIONS
