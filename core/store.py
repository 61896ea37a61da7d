"""Where the broker's durable state lives: the storage seam (docs/scale-out.md).

Theory of operation
-------------------
The broker keeps three kinds of durable state, and each has one seam:

* **messages** — one :class:`~core.log.partition.Partition` per partition,
  created by :meth:`Store.open_partition`. Appends take an ``on_durable``
  callback; reads go by offset, timestamp and byte position; tail wake-ups and
  retention are the partition's (``core.log``).
* **metadata** — streams, topics, users, tokens, permissions, consumer groups,
  consumer offsets, topic attributes, key-value tables: the SQLite file of
  ``core.metadb``, whose every write is one transaction. A store that keeps
  them elsewhere installs a :class:`~core.metadb.Replicator` on that file.
* **topic life** — creating, growing, purging and deleting a topic's
  partitions: :meth:`Store.partitions_opened` and friends, so a store can make
  (or drop) whatever backs them.

:class:`EmbeddedStore` is the default: partitions are the on-disk log under
``data_dir`` and the SQLite file is the metadata itself; its hooks do nothing.
The JetStream store (gateway/jetstream_store/store.py) opens
:class:`~gateway.jetstream_store.partition.RemotePartition` caches whose records a NATS
JetStream cluster orders and keeps, and replicates the SQLite file through
the cluster's metadata log. The broker does not know which one it has beyond
``Store.remote`` (appended records become visible when the store applies
them, not at once).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Sequence

from .log import LogConfig, Partition

if TYPE_CHECKING:
    from .metadata import TopicInfo


class Store(Protocol):
    remote: bool

    def open_partition(self, path: Path, topic: "TopicInfo", partition_id: int, cfg: LogConfig) -> Partition:
        """Open (creating if needed) the partition's local state."""

    def partitions_opened(self, topic: "TopicInfo", partition_ids: Sequence[int]) -> None:
        """A topic got these partitions (created, grown, or found at start-up)."""

    def partitions_dropped(self, stream_id: int, topic_id: int, partition_ids: Sequence[int]) -> None:
        """This gateway deleted these partitions (with their topic or on their own)."""

    def partitions_closed(self, keys: Sequence[tuple[int, int, int]]) -> None:
        """Another gateway deleted these partitions (``Broker.resync``): forget them here."""

    def topic_purged(self, topic: "TopicInfo") -> None:
        """Every record of the topic is to be deleted; offsets start again at 0."""

    def incarnation(self, topic: "TopicInfo") -> object:
        """What a partition opened for ``topic`` now would be tied to (``Broker.resync``
        reopens a partition whose ``incarnation`` differs); None: nothing."""


class EmbeddedStore:
    """The embedded log: everything on this machine's disk (module docstring)."""

    remote = False

    def open_partition(self, path: Path, topic: "TopicInfo", partition_id: int, cfg: LogConfig) -> Partition:
        return Partition.open(path, partition_id, cfg)

    def partitions_opened(self, topic: "TopicInfo", partition_ids: Sequence[int]) -> None:
        return None

    def partitions_dropped(self, stream_id: int, topic_id: int, partition_ids: Sequence[int]) -> None:
        return None

    def partitions_closed(self, keys: Sequence[tuple[int, int, int]]) -> None:
        return None

    def topic_purged(self, topic: "TopicInfo") -> None:
        return None

    def incarnation(self, topic: "TopicInfo") -> object:
        return None


__all__ = ["EmbeddedStore", "Store"]
