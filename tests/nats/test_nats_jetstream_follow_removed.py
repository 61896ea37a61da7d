"""Following another gateway's purges and deletes, in slices (adapters/nats/jetstream/replicated.py
``follow_removed``; the live check with two gateways is test_nats_jetstream_scaleout_removed.py).

In scale-out mode a second gateway's ``JetStreams`` reads the same key-value table
(``nats.jetstream.removed``) as the first writes it. Here both sit on one broker: the
API (the gateway that purges) and a second ``JetStreams`` loaded from the same
metadata, as another gateway's is at its start. A filtered purge of thousands of
messages reaches the second one a bounded slice per call (never more than the
budget of sequences hidden), and in the end its view is the API's, which does not
read its own writes back.
"""

from __future__ import annotations

import json

from adapters.nats.jetstream.api import enable
from adapters.nats.jetstream.replicated import follow_removed
from adapters.nats.jetstream.streams import JetStreams
from core.addressing import SUBJECT_HEADER
from core.broker import Broker
from core.log import AppendInput
from core.message import Headers

A_MESSAGES = 3000


def append(broker, topic_id: int, subjects: list[str]) -> None:
    records = []
    for subject in subjects:
        headers = Headers()
        headers.add(SUBJECT_HEADER, subject)
        records.append(AppendInput(payload=b"x", headers=headers.encode()))
    for i in range(0, len(records), 500):
        broker.append("jetstream", topic_id, records[i:i + 500], partition=0)


def test_a_large_purge_elsewhere_is_followed_in_bounded_slices(tmp_path):
    with Broker.open(tmp_path) as broker:
        api = enable(broker)
        api.handle("$JS.API.STREAM.CREATE.P", json.dumps({"name": "P", "subjects": ["p.>"]}).encode())
        topic_id = api.streams.get("P").topic_id
        append(broker, topic_id, ["p.a"] * A_MESSAGES + ["p.b"] * 10 + ["p.c"] * 5)
        other = JetStreams(broker)                   # the other gateway, started now
        other.load()
        st = other.get("P")
        api.handle("$JS.API.STREAM.MSG.DELETE.P", json.dumps({"seq": A_MESSAGES + 1}).encode())
        idx = other.index(st, force=True)            # this side's index, in use before the removals
        assert len(idx.live) == A_MESSAGES + 15      # (the delete was saved after this side loaded)

        purged = json.loads(api.handle("$JS.API.STREAM.PURGE.P", json.dumps({"filter": "p.a", "keep": 1}).encode()))
        assert (purged["success"], purged["purged"]) == (True, A_MESSAGES - 1)
        api.handle("$JS.API.STREAM.MSG.DELETE.P", json.dumps({"seq": A_MESSAGES + 15}).encode())

        budget, calls = 100, 0
        while True:
            before = idx.version
            more = follow_removed(other, budget)
            calls += 1
            assert idx.version - before <= budget   # sequences hidden in this call
            if not more:
                break
            assert calls < 1000
        assert calls >= (A_MESSAGES - 1) // budget   # the purge took many slices, not one
        assert other.state(st) | {"consumer_count": 0} == api.streams.state(api.streams.get("P")) | {
            "consumer_count": 0}
        assert other.state(st)["messages"] == 1 + 9 + 4
        assert other.record(st, 1) is None and other.record(st, A_MESSAGES) is not None
        assert other.record(st, A_MESSAGES + 1) is None and other.record(st, A_MESSAGES + 15) is None

        # The gateway that purged does not read its own rows back.
        assert not follow_removed(api.streams) and not api.streams.removed.todo
