"""``/jsz`` on a cold stream reads it in slices before answering (issue 30).

``/jsz`` reports every stream's state (``num_subjects`` included); on a stream
whose per-subject state the warm-up had not reached it read the whole stream
inside the request. The monitoring listener now runs
``jetstream.monitor.warm_for_jsz`` slices first, other tasks between two; the
document is then built from that state, reading at most a slice itself.
"""

from __future__ import annotations

from bigstream import BIG_STREAM, BIG_SUBJECTS, fill

from adapters.nats.jetstream.api import enable
from adapters.nats.jetstream.monitor import jsz, parse_options, warm_for_jsz
from adapters.nats.jetstream.streams import SCAN_CHUNK
from adapters.nats.jetstream.warmup import WARM_TAIL
from core.broker import Broker
from core.log.partition import Partition

MESSAGES = 8000


def test_jsz_waits_for_slices_then_reads_at_most_one_itself(tmp_path, monkeypatch):
    fill(tmp_path, MESSAGES, iggy=False)
    reads = [0]
    real = Partition.read

    def read(part, offset, count, max_bytes=None):
        batch = real(part, offset, count, max_bytes)
        reads[0] += batch.count
        return batch
    monkeypatch.setattr(Partition, "read", read)
    with Broker.open(tmp_path) as broker:
        api = enable(broker)
        assert not warm_for_jsz(broker, "/varz")                 # other endpoints wait for nothing
        slices = []
        while True:
            before = reads[0]
            if not warm_for_jsz(broker, "/jsz"):
                break
            slices.append(reads[0] - before)
        assert len(slices) >= (MESSAGES - WARM_TAIL) // WARM_TAIL
        assert max(slices) <= WARM_TAIL + SCAN_CHUNK
        before = reads[0]
        doc = jsz(api, "S", broker, 0.0, parse_options("streams=true"))
        assert reads[0] - before <= WARM_TAIL + SCAN_CHUNK + 8    # the tail, and the first/last records
        state = doc["account_details"][0]["stream_detail"][0]["state"]
        assert doc["messages"] == MESSAGES and state["num_subjects"] == BIG_SUBJECTS
        assert doc["account_details"][0]["stream_detail"][0]["name"] == BIG_STREAM
