"""The durable partitioned log (docs/internals.md "Log", docs/storage.md)."""

import importlib

from .config import FSYNC_ALWAYS, FSYNC_BATCH, FSYNC_NEVER, FSYNC_POLICIES, LogConfig

# The rest loads on first use (PEP 562), so ``core.log.config`` alone (the
# gateway's config and CLI read its defaults) does not import the log itself.
_LAZY = {"AppendInput": "results", "AppendResult": "results", "OnDurable": "results",
         "Partition": "partition", "ReadBatch": "readbatch", "LogRegistry": "registry",
         "PartitionSet": "registry"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "FSYNC_ALWAYS",
    "FSYNC_BATCH",
    "FSYNC_NEVER",
    "FSYNC_POLICIES",
    "AppendInput",
    "AppendResult",
    "LogConfig",
    "LogRegistry",
    "OnDurable",
    "Partition",
    "PartitionSet",
    "ReadBatch",
]
