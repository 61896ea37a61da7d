"""Reads over messages that retention removed first: ``failOnDataLoss`` (as the Kafka source)."""

from __future__ import annotations

import time

import pytest

from adapters.spark.client import FerryClient
from ferry_harness import running_gateway
from spark_helpers import ferry_options, produce

pytestmark = pytest.mark.spark
WAIT_S = 60  # guards a hang only: the retention sweep runs every 0.1 s here


@pytest.fixture(scope="module")
def expiring(tmp_path_factory):
    """A gateway whose topic t of stream r lost its first sealed segments to retention:
    messages expire after 1 s, segments roll every 1 KiB, the sweep runs every 0.1 s.
    The active segment is never removed, so once the sweep ran the state is stable."""
    with running_gateway(tmp_path_factory.mktemp("expiring"), FERRY_LOG_SEGMENT_BYTES="1024",
                         FERRY_LOG_RETENTION_INTERVAL_SECONDS="0.1") as gw:
        with FerryClient("127.0.0.1", gw.ports["iggy_tcp"]) as c:
            c.create_stream("r")
            c.create_topic("r", "t", 1, message_expiry_us=1_000_000)
            for i in range(40):  # separate appends: one record batch each, so segments roll between them
                produce(c, "r", "t", 0, [b"%03d" % i + bytes(100)])
            # Every sealed segment expires 1 s after its last append; the sweep then
            # removes it within 0.1 s. Wait for that, then for the oldest offset to
            # hold still across several sweeps: from then on nothing else expires.
            time.sleep(1.0)
            deadline = time.monotonic() + WAIT_S
            first, previous = c.first_offset("r", "t", 0), None
            while not first or first != previous:
                assert time.monotonic() < deadline, "retention did not settle"
                time.sleep(0.5)
                previous, first = first, c.first_offset("r", "t", 0)
        yield gw, first


def test_earliest_means_the_oldest_stored_message(spark, expiring):
    gw, first = expiring
    rows = spark.read.format("ferry").options(**ferry_options(gw, "r")).load().collect()
    assert sorted(r.offset for r in rows) == list(range(first, 40))


def test_an_explicit_start_below_the_oldest_message_fails_or_skips(spark, expiring):
    gw, first = expiring
    opts = ferry_options(gw, "r", startingOffsets='{"t": {"0": 0}}')
    with pytest.raises(Exception) as err:
        spark.read.format("ferry").options(**opts).load().collect()
    assert "failOnDataLoss" in str(err.value) and f"offsets 0..{first - 1}" in str(err.value)
    rows = spark.read.format("ferry").options(**opts, failOnDataLoss="false").load().collect()
    assert sorted(r.offset for r in rows) == list(range(first, 40))


def test_a_stream_joins_a_partition_at_its_oldest_message(spark, expiring, tmp_path):
    gw, first = expiring
    q = (spark.readStream.format("ferry").options(**ferry_options(gw, "r", startingOffsets="earliest")).load()
         .writeStream.format("memory").queryName("expiring_stream").trigger(availableNow=True).start())
    try:
        q.awaitTermination()
    finally:
        q.stop()
    got = sorted(r.offset for r in spark.sql("select offset from expiring_stream").collect())
    assert got == list(range(first, 40))
