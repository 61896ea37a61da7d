"""Where the broker's partitions live on disk, and with which log settings.

Theory of operation
-------------------
Layout under ``data_dir``::

    metadata.sqlite
    streams/<stream_id>/topics/<topic_id>/partitions/<partition_id>/...

Consistency between metadata and these directories (core/broker.py): creation
commits the metadata first and then creates the directories (opening a partition
creates it); deletion commits the metadata first and then removes them. At start-up
:meth:`DataDir.remove_orphans` removes the directories no metadata row names: what
a crash between a delete's commit and its ``rmtree`` leaves. Partition ids are
reused by the next ``add_partitions``, which must start empty, not with the deleted
partition's records.

A topic's partitions write with the broker's ``[log]`` settings, overridden by the
topic's own segment size and fsync policy where it has them (set at creation:
``TopicInfo.segment_bytes`` / ``.fsync``); :meth:`DataDir.log_config` keeps one
:class:`LogConfig` per distinct pair, shared by the topics that have it.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import replace
from pathlib import Path

from .log import LogConfig
from .model import TopicInfo

log = logging.getLogger("ferry.broker")


class DataDir:
    """The partition directories of one data directory and their log settings."""

    __slots__ = ("root", "log", "_configs")

    def __init__(self, root: Path, log_cfg: LogConfig) -> None:
        self.root = root
        self.log = log_cfg
        self._configs: dict[tuple[int, str], LogConfig] = {}

    def stream_dir(self, sid: int) -> Path:
        return self.root / "streams" / str(sid)

    def topic_dir(self, sid: int, tid: int) -> Path:
        return self.stream_dir(sid) / "topics" / str(tid)

    def partition_dir(self, sid: int, tid: int, pid: int) -> Path:
        return self.topic_dir(sid, tid) / "partitions" / str(pid)

    def log_config(self, topic: TopicInfo) -> LogConfig:
        """The log settings of ``topic``'s partitions (module docstring)."""
        if not topic.segment_bytes and not topic.fsync:
            return self.log
        key = (topic.segment_bytes, topic.fsync)
        cfg = self._configs.get(key)
        if cfg is None:
            cfg = self._configs[key] = replace(self.log, segment_bytes=topic.segment_bytes or self.log.segment_bytes,
                                               fsync=topic.fsync or self.log.fsync)
        return cfg

    def remove_orphans(self, wanted: set[Path]) -> None:
        """Remove stream, topic and partition directories not in ``wanted`` (the ones
        the metadata names; module docstring)."""
        parents = [self.root / "streams"]
        for level, sub in (("stream", "topics"), ("topic", "partitions"), ("partition", "")):
            kept = []
            for parent in parents:
                for path in parent.iterdir() if parent.is_dir() else ():
                    if path in wanted:
                        kept.append(path)
                    elif path.is_dir():
                        log.warning("removing %s directory with no metadata: %s", level, path)
                        shutil.rmtree(path, ignore_errors=True)
            parents = [k / sub for k in kept]


__all__ = ["DataDir"]
