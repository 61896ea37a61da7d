"""Broker.topic_for_subject caches answers and forgets them when topics change."""

from __future__ import annotations

from core.broker import SUBJECT_CACHE_MAX, Broker


def test_cached_answer_follows_create_rename_and_delete(tmp_path):
    with Broker.open(tmp_path) as broker:
        assert broker.topic_for_subject("s.t") is None          # nothing yet: cached as None
        broker.create_stream("s")
        broker.create_topic("s", "t", 2)
        assert broker.topic_for_subject("s.t.x").name == "t"     # create dropped the cache
        broker.update_topic("s", "t", name="u")
        assert broker.topic_for_subject("s.t.x") is None
        assert broker.topic_for_subject("s.u").name == "u"
        broker.add_partitions("s", "u", 1)
        assert broker.topic_for_subject("s.u").partitions_count == 3
        broker.delete_topic("s", "u")
        assert broker.topic_for_subject("s.u") is None


def test_cache_is_bounded(tmp_path):
    with Broker.open(tmp_path) as broker:
        for i in range(SUBJECT_CACHE_MAX + 10):
            broker.topic_for_subject(f"_INBOX.{i}")
        assert len(broker._subject_topics) <= SUBJECT_CACHE_MAX
