"""One local SparkSession for the tests (tests/spark/conftest.py and cross-protocol tests).

Two local cores, no UI, UTC, loopback only, a small driver heap, and Ferry's
data source registered: what the Spark tests need. One per test process:
``SparkSession.builder.getOrCreate`` hands every caller in a process the same
session, so a module fixture that stopped "its" session stopped the one the
Spark tests on the same pytest-xdist worker were still using (a CI run lost
four Spark tests that way). :func:`shared_session` is that one session; only
the session-scoped fixture in tests/spark/conftest.py stops it, at the end.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest


def build_session(tmp: Path, app_name: str):
    """A SparkSession with Ferry's data source registered, its scratch dirs under ``tmp``."""
    from pyspark.sql import SparkSession

    from adapters.spark import FerryDataSource

    s = (SparkSession.builder.master("local[2]").appName(app_name)
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.driver.memory", "1g")
         .config("spark.local.dir", str(tmp / "local")).config("spark.sql.warehouse.dir", str(tmp / "wh"))
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    s.dataSource.register(FerryDataSource)
    return s


_SHARED = None


def shared_session(tmp: Path, app_name: str):
    """This process's one SparkSession (module docstring): built on first use, built
    again only if something stopped it."""
    global _SHARED
    if _SHARED is None or _SHARED.sparkContext._jsc.sc().isStopped():
        _SHARED = build_session(tmp, app_name)
    return _SHARED


def session_or_skip(tmp: Path, app_name: str):
    """:func:`shared_session`, or a skip saying what is missing (pyspark 4.2+ with its
    Python data source API, pyarrow, Java); with FERRY_REQUIRE_SPARK (CI) a missing part
    is a failure instead. The environment the session's workers need is set first
    (../shared/protocols/spark-datasource.md pitfalls 1 and 10)."""
    if os.environ.get("FERRY_REQUIRE_SPARK"):  # CI: a missing Spark or Java is a failure, not a skip
        import pyarrow  # noqa: F401
        import pyspark.sql.datasource  # noqa: F401

        assert shutil.which("java"), "FERRY_REQUIRE_SPARK is set but there is no java on PATH"
    pytest.importorskip("pyspark.sql.datasource", reason="pyspark 4.2+ (the Python data source API) not installed")
    pytest.importorskip("pyarrow", reason="pyarrow not installed")
    if shutil.which("java") is None:
        pytest.skip("no Java on PATH")
    # Workers must run this interpreter (it has pyarrow and Ferry installed), loopback only.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Test-only JVM flags: C1 only and the serial GC start the session about a third faster.
    os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    return shared_session(tmp, app_name)
