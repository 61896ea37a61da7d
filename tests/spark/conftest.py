"""Fixtures of the Spark tests: one gateway and one SparkSession per test run.

Spark starts a JVM (~10 s) and its first data-source job costs several more
seconds (../shared/protocols/spark-datasource.md section 7), so both are
session-scoped; tests keep apart by using their own stream names. The gateway
runs in its own thread (ferry_harness), so plain sync tests can call Spark,
which blocks, without stalling the gateway's trio loop (pitfall 12 there).
"""

from __future__ import annotations

import itertools
import os
import sys

import pytest

from ferry_harness import running_gateway

# Workers must run this interpreter (it has pyarrow and Ferry installed);
# these must be set before the JVM starts (spark-datasource.md pitfall 1).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # bind loopback only (pitfall 10)
# Test-only JVM flags: C1 only and the serial GC start the session about a third faster.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

_names = itertools.count()


@pytest.fixture(scope="session")
def ferry(tmp_path_factory):
    """A running gateway shared by the Spark tests (Iggy TCP on ``ferry.ports["iggy_tcp"]``)."""
    with running_gateway(tmp_path_factory.mktemp("ferry")) as gw:
        yield gw


@pytest.fixture
def stream_name(request):
    """A stream name no other test uses."""
    return f"s{next(_names)}_{request.node.name[:40]}".replace("[", "_").replace("]", "_")


@pytest.fixture
def client(ferry):
    from adapters.spark.client import FerryClient

    with FerryClient("127.0.0.1", ferry.ports["iggy_tcp"]) as c:
        yield c


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from spark_session import session_or_skip

    s = session_or_skip(tmp_path_factory.mktemp("spark"), "ferry-tests")
    yield s
    for q in s.streams.active:
        q.stop()
    s.stop()
