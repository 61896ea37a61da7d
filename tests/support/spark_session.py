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

from pathlib import Path


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
