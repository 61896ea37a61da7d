"""The durable partitioned log (docs/internals.md "Log", docs/storage.md)."""

from .config import FSYNC_ALWAYS, FSYNC_BATCH, FSYNC_NEVER, FSYNC_POLICIES, LogConfig
from .partition import AppendInput, AppendResult, OnDurable, Partition
from .readbatch import ReadBatch
from .registry import LogRegistry, PartitionSet

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
