"""RecentBatches: what Kafka answers a retried idempotent batch (unit tier)."""

from adapters.kafka.recent_batches import BATCHES_PER_PRODUCER, MAX_PRODUCER_PARTITIONS, RecentBatches

KEY = (1, 2, 0, "kafka:7:0")


def test_finds_a_batch_by_its_exact_sequences_only():
    recent = RecentBatches()
    recent.remember(KEY, 0, 4, 100)
    recent.remember(KEY, 5, 9, 105)
    assert recent.find(KEY, 0, 4) == 100
    assert recent.find(KEY, 5, 9) == 105
    assert recent.find(KEY, 0, 9) is None  # not a batch that was sent
    assert recent.find((1, 2, 1, "kafka:7:0"), 0, 4) is None  # another partition


def test_keeps_the_last_five_batches_of_a_producer():
    recent = RecentBatches()
    for i in range(BATCHES_PER_PRODUCER + 2):
        recent.remember(KEY, i, i, 50 + i)
    assert recent.find(KEY, 0, 0) is None and recent.find(KEY, 1, 1) is None
    assert [recent.find(KEY, i, i) for i in range(2, BATCHES_PER_PRODUCER + 2)] == [52, 53, 54, 55, 56]


def test_forgets_the_least_recently_written_producer_past_its_bound():
    recent = RecentBatches()
    for n in range(MAX_PRODUCER_PARTITIONS + 1):
        recent.remember((1, 2, 0, f"kafka:{n}:0"), 0, 0, n)
    assert len(recent) == MAX_PRODUCER_PARTITIONS
    assert recent.find((1, 2, 0, "kafka:0:0"), 0, 0) is None
    assert recent.find((1, 2, 0, "kafka:1:0"), 0, 0) == 1
