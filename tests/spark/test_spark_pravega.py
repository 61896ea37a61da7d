"""Events written by the real pravega 0.3.8 client, read by Spark (issue 12, cross-protocol).

A Pravega scope/stream is a Ferry stream/topic; the Spark data source reads it
like any other topic: one row per event, payload only (Pravega events carry no
headers), every segment a partition."""

from __future__ import annotations

import itertools

import pytest

from pravega_clients import run_scenario
from spark_helpers import read_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]
_scopes = itertools.count()


def test_spark_reads_what_a_pravega_writer_wrote(spark, ferry):
    scope = f"pv{next(_scopes)}spark"  # Pravega names: [A-Za-z0-9.-]
    got = run_scenario("cross.py", str(ferry.ports["pravega_controller"]), "write", scope)
    assert got["written"] == {"value": 20}
    rows = read_rows(spark, ferry, scope, "events")
    assert sorted(bytes(r.payload).decode() for r in rows) == sorted(f"p{i}" for i in range(20))
    assert {r.topic for r in rows} == {"events"}
    assert {r.partition for r in rows} == {0, 1, 2, 3}
    assert all(list(r.headers) == [] for r in rows)
