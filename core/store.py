"""Where the broker's durable state lives: the storage seam (docs/scale-out.md).

Theory of operation
-------------------
The broker keeps three kinds of durable state, and each has one seam:

* **messages** — one :class:`~core.log.partition.Partition` per partition,
  created by :meth:`Store.open_partition`; every append goes through
  :meth:`Store.append` / :meth:`Store.append_records`. Appends take an
  ``on_durable`` callback; reads go by offset, timestamp and byte position;
  tail wake-ups and retention are the partition's (``core.log``).
* **metadata** — streams, topics, users, tokens, permissions, consumer groups,
  consumer offsets, topic attributes, key-value tables: the SQLite file of
  ``core.metadb``, whose every write is one transaction. A store that keeps
  them elsewhere installs a :class:`~core.metadb.Replicator` on that file
  (``StoreEvents.meta.databases``).
* **topic life** — creating, growing, purging and deleting a topic's
  partitions: :meth:`Store.partitions_opened` and friends, so a store can make
  (or drop) whatever backs them.

The two directions are two objects. The broker calls the :class:`Store`; the
store calls the broker back only through the :class:`StoreEvents` it got once,
from ``Broker.open`` (:meth:`Store.attach`): appended records becoming readable
(``applied``: the broker's one visibility path, wake-ups, append listeners and
live delivery), metadata changed under the broker (``resync``), consumer-group
members across gateways (``group_members``), plain NATS publishes from other
gateways (``plain_publish``) and metrics (``add_metrics``).

Two more calls serve protocols whose clients pick a server themselves (Kafka's
brokers, docs/kafka.md "Scale-out"): a listener :meth:`Store.advertise` gives the
address its clients reach it at, and :meth:`Store.peers` lists every live
gateway's, so each gateway can compute the same placement of partitions and
groups; :meth:`Store.log_end` says how far the stored log reaches beyond this
gateway's copy of a partition, for a read above it.

:class:`EmbeddedStore` is the default: partitions are the on-disk log under
``data_dir``, the SQLite file is the metadata itself, an append is readable
when it returns (``applied`` fires before :meth:`Store.append` returns), and
its other hooks do nothing. The JetStream store (gateway/jetstream_store/)
opens caches whose records a NATS JetStream cluster orders and keeps:
``applied`` fires when its mirror applies a record (this gateway's or
another's), it replicates the SQLite file through the cluster's metadata log,
shares consumer-group members and forwards plain publishes to the other
gateways. The broker does not know which one it has.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

from .log import AppendInput, AppendResult, LogConfig, OnDurable, Partition

if TYPE_CHECKING:
    from .metadata import Metadata
    from .model import TopicInfo

PartKey = tuple[int, int, int]  # (stream id, topic id, partition id)
GroupKey = tuple[int, int, int]  # (stream id, topic id, group id)
# How an append was made, for live delivery of its records (Broker.append):
# (topic, live subject, origin, native, publisher, reply).
Published = tuple["TopicInfo", "str | None", str, object, object, "str | None"]
# Live gateways serving one listener (Store.peers): (gateway id, host, port), this one first.
Peers = tuple[tuple[str, str, int], ...]


@dataclass(frozen=True, slots=True)
class StoreEvents:
    """What the broker exposes to its store, handed over once (:meth:`Store.attach`)."""

    meta: "Metadata"
    # Records became readable: ``applied(key, part, result, items, published)``.
    # ``published`` is how the append was made when the store applies it before the
    # append returns (the embedded store); None when it comes later, from the stored
    # records (the broker looks the topic up again and takes the live subject from
    # the stored headers).
    applied: Callable[[PartKey, Partition, AppendResult, Sequence[AppendInput], "Published | None"], None]
    # The same for Store.append_records: ``(key, part, result, block, published)``;
    # the per-message view of ``block`` is built only when someone needs it.
    applied_block: Callable[[PartKey, Partition, AppendResult, bytearray, "Published"], None]
    # Metadata changed under the broker (another gateway's writes replayed): reload
    # the caches, open the partitions that appeared and close those that went.
    resync: Callable[[], None]
    # A consumer group's members across every gateway, in the order all of them use.
    group_members: Callable[[GroupKey, list], None]
    # A plain (not stored) NATS publish from another gateway, for local subscribers:
    # ``(subject, reply or None, header block, payload)``.
    plain_publish: Callable[[str, "str | None", bytes, bytes], None]
    # Add a metrics collector (core/metrics.py) to the broker's registry.
    add_metrics: Callable[[Callable], object]


class Store(Protocol):
    def attach(self, events: StoreEvents) -> None:
        """Called once by ``Broker.open`` before it reads anything."""

    def start_write(self, write: Callable[[], None]) -> None:
        """Run one of ``Broker.open``'s own metadata writes (the root user)."""

    def open_partition(self, path: Path, topic: "TopicInfo", partition_id: int, cfg: LogConfig) -> Partition:
        """Open (creating if needed) the partition's local state."""

    def append(self, key: PartKey, part: Partition, items: Sequence[AppendInput], producer: tuple[str, int] | None,
               on_durable: OnDurable | None, published: Published) -> AppendResult:
        """``part.append``; ``StoreEvents.applied`` once the records are readable."""

    def append_records(self, key: PartKey, part: Partition, block: bytearray, count: int,
                       producer: tuple[str, int] | None, on_durable: OnDurable | None,
                       published: Published) -> AppendResult:
        """``part.append_encoded``; ``StoreEvents.applied`` (or ``applied_block``) once readable."""

    def partitions_opened(self, topic: "TopicInfo", partition_ids: Sequence[int]) -> None:
        """A topic got these partitions (created, grown, or found at start-up)."""

    def partitions_dropped(self, stream_id: int, topic_id: int, partition_ids: Sequence[int]) -> None:
        """This gateway deleted these partitions (with their topic or on their own)."""

    def partitions_closed(self, keys: Sequence[PartKey]) -> None:
        """Another gateway deleted these partitions (``Broker.resync``): forget them here."""

    def topic_purged(self, topic: "TopicInfo") -> None:
        """Every record of the topic is to be deleted; offsets start again at 0."""

    def incarnation(self, topic: "TopicInfo") -> object:
        """What a partition opened for ``topic`` now would be tied to (``Broker.resync``
        reopens a partition whose ``incarnation`` differs); None: nothing."""

    def group_changed(self, key: GroupKey, member_id: int, joined: bool) -> None:
        """A local member joined or left a consumer group (to share with other gateways)."""

    def interest_elsewhere(self, subject: str) -> bool:
        """May a plain NATS publish on ``subject`` have subscribers this gateway does
        not see (other gateways')? Then :meth:`forward_publish` takes it."""

    def forward_publish(self, subject: str, reply: str, header: bytes, payload: bytes) -> bool:
        """Offer a plain (not stored) NATS publish to other gateways' subscribers; False
        when there are none to offer it to."""

    def advertise(self, listener: str, host: str, port: int) -> None:
        """This gateway's ``listener`` (e.g. "kafka") is reached at ``host:port``: tell
        the other gateways (:meth:`peers`)."""

    def peers(self, listener: str) -> Peers:
        """Every live gateway that advertised ``listener``, this gateway's own entry
        first, as ``(gateway id, host, port)``; the same tuple object while nothing
        changed (callers may cache on it). Empty: no peers, a single node."""

    def log_end(self, key: PartKey, part: Partition) -> int | None:
        """The offset after the last record the stored log holds for ``part``, at least
        ``part.next_offset``; None while it is not known (the store asks, and a later
        call answers). This gateway's copy may be behind the stored log."""


class EmbeddedStore:
    """The embedded log: everything on this machine's disk (module docstring)."""

    def __init__(self) -> None:
        self._applied = self._applied_block = None

    def attach(self, events: StoreEvents) -> None:
        self._applied, self._applied_block = events.applied, events.applied_block

    def start_write(self, write: Callable[[], None]) -> None:
        write()

    def open_partition(self, path: Path, topic: "TopicInfo", partition_id: int, cfg: LogConfig) -> Partition:
        return Partition.open(path, partition_id, cfg)

    def append(self, key, part, items, producer, on_durable, published) -> AppendResult:
        result = part.append(items, producer=producer, on_durable=on_durable)
        if not result.duplicate:  # readable now (the flusher makes them durable later)
            self._applied(key, part, result, items, published)
        return result

    def append_records(self, key, part, block, count, producer, on_durable, published) -> AppendResult:
        result = part.append_encoded(block, count, producer=producer, on_durable=on_durable)
        if not result.duplicate:
            self._applied_block(key, part, result, block, published)
        return result

    def partitions_opened(self, topic: "TopicInfo", partition_ids: Sequence[int]) -> None:
        return None

    def partitions_dropped(self, stream_id: int, topic_id: int, partition_ids: Sequence[int]) -> None:
        return None

    def partitions_closed(self, keys: Sequence[PartKey]) -> None:
        return None

    def topic_purged(self, topic: "TopicInfo") -> None:
        return None

    def incarnation(self, topic: "TopicInfo") -> object:
        return None

    def group_changed(self, key: GroupKey, member_id: int, joined: bool) -> None:
        return None

    def interest_elsewhere(self, subject: str) -> bool:
        return False

    def forward_publish(self, subject: str, reply: str, header: bytes, payload: bytes) -> bool:
        return False

    def advertise(self, listener: str, host: str, port: int) -> None:
        return None

    def peers(self, listener: str) -> Peers:
        return ()  # one gateway: every protocol's single-node answers

    def log_end(self, key: PartKey, part: Partition) -> int | None:
        return part.next_offset  # the embedded log is the stored log


__all__ = ["EmbeddedStore", "GroupKey", "PartKey", "Peers", "Published", "Store", "StoreEvents"]
