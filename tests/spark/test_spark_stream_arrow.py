"""The streaming reader hands Spark the same Arrow batches as the batch reader.

Issue 17 asked whether micro-batches are slower because the streaming path converts
rows one by one. pyspark runs one function for both readers on the executor
(``records_to_arrow_batches`` in pyspark/sql/worker/plan_data_source_read.py): when
``read()`` yields ``pyarrow.RecordBatch`` objects of the declared schema it passes them
through untouched, otherwise it builds batches from tuples in Python. These tests run
that function on what ``FerryStreamReader`` yields (gateway only, no JVM) and check it
is the pass-through case and that the micro-batches together are exactly the batch
read's rows.
"""

from __future__ import annotations

import pytest

from spark_helpers import ferry_options, produce

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark.sql.datasource")

from pyspark.sql.pandas.types import from_arrow_schema  # noqa: E402
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows  # noqa: E402
from pyspark.sql.worker.plan_data_source_read import records_to_arrow_batches  # noqa: E402

from adapters.spark.batches import ARROW_SCHEMA  # noqa: E402
from adapters.spark.options import source_options  # noqa: E402
from adapters.spark.source import FerryBatchReader, FerryDataSource, FerryRange, FerryStreamReader  # noqa: E402

COUNTS = {0: 70, 1: 33}  # uneven, so the read limit is shared unevenly too
LIMIT = 40  # maxOffsetsPerTrigger: several micro-batches


def spark_sees(reader, part, ds):
    """What pyspark's executor function returns for one task, and what read() yielded."""
    yielded = list(reader.read(part))
    out = list(records_to_arrow_batches(iter(yielded), 10_000, from_arrow_schema(ARROW_SCHEMA), ds))
    return yielded, out


def micro_batches(reader: FerryStreamReader, limit) -> list[list[FerryRange]]:
    start, out = reader.initialOffset(), []
    while (end := reader.latestOffset(start, limit)) != start:
        out.append(reader.partitions(start, end))
        start = end
    return out


@pytest.fixture
def filled(ferry, client, stream_name):
    client.ensure_topic(stream_name, "t", len(COUNTS))
    for p, n in COUNTS.items():
        produce(client, stream_name, "t", p, [b"%d-%d" % (p, i) for i in range(n)])
    return ferry_options(ferry, stream_name, startingOffsets="earliest")


@pytest.mark.parametrize("limit", [ReadMaxRows(LIMIT), ReadAllAvailable()], ids=["maxOffsetsPerTrigger", "all"])
def test_micro_batches_pass_arrow_batches_through_and_match_the_batch_read(filled, limit):
    ds = FerryDataSource(filled)
    stream = FerryStreamReader(source_options(filled, streaming=True))
    batch = FerryBatchReader(source_options(filled, streaming=False))
    streamed = []
    batches = micro_batches(stream, limit)
    assert len(batches) == (3 if isinstance(limit, ReadMaxRows) else 1)  # 103 rows, 40 at a time
    for ranges in batches:
        assert sum(r.end - r.start for r in ranges) <= (LIMIT if isinstance(limit, ReadMaxRows) else 103)
        for r in ranges:
            yielded, out = spark_sees(stream, r, ds)
            assert yielded and all(isinstance(b, pa.RecordBatch) and b.schema.equals(ARROW_SCHEMA) for b in yielded)
            assert len(out) == len(yielded) and all(a is b for a, b in zip(out, yielded))  # untouched
            streamed.extend(out)
    whole = [b for r in batch.partitions() for b in spark_sees(batch, r, ds)[1]]
    key = [("partition", "ascending"), ("offset", "ascending")]
    got, want = pa.Table.from_batches(streamed).sort_by(key), pa.Table.from_batches(whole).sort_by(key)
    assert got.num_rows == sum(COUNTS.values())
    assert got.equals(want)


def test_stream_and_batch_readers_yield_the_same_batches_for_one_range(filled):
    stream = FerryStreamReader(source_options(filled, streaming=True))
    batch = FerryBatchReader(source_options(filled, streaming=False))
    r = FerryRange("t", 0, 5, 60)
    a, b = list(stream.read(r)), list(batch.read(r))
    assert [x.num_rows for x in a] == [x.num_rows for x in b] and sum(x.num_rows for x in a) == 55
    assert pa.Table.from_batches(a).equals(pa.Table.from_batches(b))
