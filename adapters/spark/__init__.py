"""Ferry's PySpark data source (``format("ferry")``) and its blocking Iggy client.

``from adapters.spark import FerryDataSource`` imports pyspark; the client
(:mod:`adapters.spark.client`) needs only the standard library and the Iggy
command table, so tools can use it without Spark installed.
"""

from __future__ import annotations

__all__ = ["FerryDataSource"]


def __getattr__(name: str):
    # Lazy, so importing the client does not import pyspark.
    if name == "FerryDataSource":
        from .source import FerryDataSource

        return FerryDataSource
    raise AttributeError(name)
