"""The broker: the single owner of Ferry's state.

Theory of operation
-------------------
Adapters call the broker synchronously from the trio thread. It ties
together the metadata store (``core.metadata``, SQLite), one
:class:`core.log.Partition` per partition (the durable log), the live hub
(subject subscriptions and wake-ups, ``core.live``) and the addressing rule
(``core.addressing``). Nothing here blocks on fsync: appends land in each
partition's pending buffer and ``core.flusher`` (the one trio task in core)
makes them durable and fires the ``on_durable`` callbacks.

Where partitions live under ``data_dir``, how the directories stay consistent
with the metadata across a crash, and each topic's log settings: ``core.datadir``.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable, Iterable, Sequence

import xxhash

from .access import audit
from .addressing import Addressing, Binding, stored_subject
from .consumers import Consumers
from .datadir import DataDir
from .errors import HeadersTooLarge, InvalidArgument, PartitionNotFound, ShuttingDown
from .kvtables import KvTables
from .live import Delivery, LiveHub
from .log import AppendInput, AppendResult, LogConfig, Partition
from .log.encoded import records_of
from .log.segment import fsync_dir, fsync_unsynced_dirs, make_dirs
from .message import MAX_HEADERS_SIZE, Headers, Message, now_us
from .metadata import Ident, Metadata
from .metrics import metrics_for
from .model import StreamInfo, TopicInfo, TopicSettings
from .store import EmbeddedStore, Published, Store, StoreEvents
from .topicops import TopicState, topic_sealed

log = logging.getLogger("ferry.broker")

METADATA_FILE = "metadata.sqlite"

OnDurable = Callable[[AppendResult | BaseException], None]
AppendListener = Callable[["TopicInfo", int, AppendResult, Sequence[AppendInput]], None]


# Distinct publish subjects remembered by topic_for_subject; a client that
# publishes on ever-new subjects (inboxes) only ever costs a cleared cache.
SUBJECT_CACHE_MAX = 10_000


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    log: LogConfig = field(default_factory=LogConfig)
    bindings: tuple[Binding, ...] = ()
    root_username: str = "iggy"
    root_password: str = "iggy"
    # How often the retention task checks topics with an expiry or a size cap.
    retention_interval_s: float = 30.0


@dataclass(frozen=True, slots=True)
class BrokerTotals:
    """Counts over every stream, topic and partition of a broker (:meth:`Broker.totals`)."""

    streams: int
    topics: int
    partitions: int
    segments: int
    messages: int
    stored_bytes: int
    pending_bytes: int
    consumer_groups: int


class Broker:
    """Synchronous facade over metadata, log, live delivery and addressing.

    Stream and topic arguments are an int id (canonical, 0-based) or a name. Consumer
    offsets, groups and polling are ``consumers`` (:class:`core.consumers.Consumers`);
    sealing, truncation, byte bounds and topic attributes ``topic_state`` (core/topicops.py)."""

    def __init__(self, data_dir: Path, cfg: BrokerConfig, meta: Metadata, store: Store | None = None) -> None:
        self.data_dir = data_dir
        self.cfg = cfg
        self.meta = meta
        # Where messages and metadata are kept (core/store.py): the embedded log, or
        # a JetStream cluster whose appends become visible when the store applies them.
        self.store: Store = store or EmbeddedStore()
        self.tables = KvTables(meta.db)  # key-value tables (Pravega table segments), same file
        self.live = LiveHub()
        self.addressing = Addressing(list(cfg.bindings))
        self.draining = False
        self.closed = False
        # Set by the gateway (gateway/diagnostics.py): the effective configuration and
        # recent log lines a snapshot reports (Iggy's GetSnapshotFile); None if bare.
        self.diagnostics = None
        # Set while the broker's background tasks run (core/flusher.py SliceRunner):
        # ``in_slices(step, done)`` runs work that grows with the data a step at a time,
        # other tasks between two. None when bare (a test, a CLI tool): callers then do
        # the work in one piece.
        self.in_slices: Callable[[Callable[[], bool], Callable[[bool], None]], None] | None = None
        self._partitions: dict[tuple[int, int, int], Partition] = {}
        self.dirs = DataDir(data_dir, cfg.log)
        self._round_robin: dict[tuple[int, int], int] = {}
        # NATS subject -> captured topic (or None), for the publish hot path;
        # cleared whenever streams or topics change (nats-server's sublist
        # cache follows the same "drop on change" rule, keyed by genid).
        self._subject_topics: dict[str, TopicInfo | None] = {}
        # Moves on whenever a subject's capturing topic may have changed (topics and
        # streams created, renamed, deleted; bindings): caches of routing decisions
        # built on topic_for_subject (adapters/nats/session.py) compare it.
        self.subject_generation = 0
        self._append_listeners: list[AppendListener] = []
        self._wake_flusher: Callable[[], None] = lambda: None
        self.consumers = Consumers(meta, self._partition, self.store)
        self.topic_state = TopicState(meta, self._partition, sealed=self._subject_topics.clear)

    # -- lifecycle ---------------------------------------------------------
    @classmethod
    def open(cls, data_dir: Path | str, cfg: BrokerConfig | None = None, store=None) -> "Broker":
        """Open (creating if needed) the data directory and recover every partition.
        ``store`` (core/store.py) is the embedded log when None; it gets the
        broker's :class:`~core.store.StoreEvents` before anything is read (the
        JetStream store replicates the metadata and catches it up there)."""
        data_dir = Path(data_dir)
        make_dirs(data_dir)
        # Its name must survive a power cut whoever created it (``ferry serve`` takes its
        # lock in it first): without this fsync the whole directory, metadata and
        # acknowledged records, was gone after a cut (tests/gateway/test_powerloss.py).
        fsync_dir(data_dir.resolve().parent)
        cfg = cfg or BrokerConfig()
        meta = Metadata(data_dir / METADATA_FILE)
        broker = cls(data_dir, cfg, meta, store)
        try:
            broker.store.attach(broker._store_events())
            broker.store.start_write(partial(meta.users.ensure_root, cfg.root_username, cfg.root_password))
            broker._recover()
        except BaseException:
            # Release whatever was opened before the failure: a caller that
            # retries must not inherit open files or a second SQLite writer.
            for part in broker._partitions.values():
                part.close()  # nothing was appended yet: closes files only
            broker._partitions.clear()
            meta.close()
            raise
        return broker

    def _recover(self) -> None:
        wanted: set[Path] = set()
        for stream in self.meta.list_streams():
            wanted.add(self.dirs.stream_dir(stream.id))
            for topic in self.meta.list_topics(stream.id):
                wanted.add(self.dirs.topic_dir(stream.id, topic.id))
                for pid in range(topic.partitions_count):
                    wanted.add(self._open_partition(topic, pid).path)
                self.store.partitions_opened(topic, range(topic.partitions_count))
        self.dirs.remove_orphans(wanted)
        self.topic_state.apply_logical_starts(self._partitions)

    def close(self) -> None:
        """Flush and fsync every partition, then close files and the metadata store."""
        if self.closed:
            return
        self.closed = True
        self.wake_readers()
        # One partition's failed final write must not keep the others from being
        # written and closed, nor leave the metadata store open: finish them all,
        # then report the first failure (its appends already got the error).
        first_error: BaseException | None = None
        parts = list(self._partitions.values())
        for part in parts:
            try:
                part.flush()
            except Exception as exc:  # noqa: BLE001 - re-raised below, after the rest
                log.error("final flush of %r failed: %s", part, exc)
                first_error = first_error or exc
            finally:
                part.close()
        self._partitions.clear()
        first_error = first_error or fsync_unsynced_dirs(parts, self.data_dir)
        self.meta.close()
        if first_error is not None:
            raise first_error

    def __enter__(self) -> "Broker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_flusher_wakeup(self, wake: Callable[[], None]) -> None:
        """Called by ``core.flusher``: ``wake()`` is invoked whenever a partition has pending data."""
        self._wake_flusher = wake
        for part in self._partitions.values():
            part.set_wakeup(wake)

    def partitions(self) -> Iterable[Partition]:
        return self._partitions.values()

    def flush(self) -> None:
        for part in self._partitions.values():
            part.flush()

    def _open_partition(self, topic: TopicInfo, pid: int) -> Partition:
        sid, tid = topic.stream_id, topic.id
        path = self.dirs.partition_dir(sid, tid, pid)
        part = self.store.open_partition(path, topic, pid, self.topic_log_config(topic))
        part.set_wakeup(self._wake_flusher)
        self._partitions[(sid, tid, pid)] = part
        return part

    def resync(self) -> None:
        """Metadata changed under the broker (another gateway's writes replayed by
        a replicated store): reload the metadata caches, open the partitions that
        appeared and close those that went."""
        self.meta.reload()
        self.tables.replayed()  # key-value tables' watchers (JetStream durable consumers)
        self._forget_subjects()
        wanted: dict[tuple[int, int, int], TopicInfo] = {}
        for stream in self.meta.list_streams():
            for topic in self.meta.list_topics(stream.id):
                for pid in range(topic.partitions_count):
                    wanted[(stream.id, topic.id, pid)] = topic
        # Gone, or a later topic that reuses the ids, or purged (the store's incarnation differs).
        incarnations: dict[tuple[int, int], object] = {}
        gone = []
        for k, p in self._partitions.items():
            topic = wanted.get(k)
            if topic is not None:
                tk = (k[0], k[1])
                if tk not in incarnations:
                    incarnations[tk] = self.store.incarnation(topic)
                if incarnations[tk] == p.incarnation:
                    continue
            gone.append(k)
        for key in gone:
            part = self._partitions.pop(key)
            part.delete()
            self.live.wake(key)
        if gone:
            self.store.partitions_closed(gone)
            for sid, tid in {(k[0], k[1]) for k in gone}:
                if any(k[:2] == (sid, tid) for k in wanted):
                    self.consumers.partitions_changed(sid, tid)
                else:  # the topic itself went: its groups and round robin go too, as in delete_topic
                    self._forget_topic(sid, tid)
        opened: dict[tuple[int, int], list[int]] = {}
        for key, topic in wanted.items():
            if key not in self._partitions:
                self._open_partition(topic, key[2])
                opened.setdefault((key[0], key[1]), []).append(key[2])
        for (sid, tid), pids in opened.items():
            self.store.partitions_opened(wanted[(sid, tid, pids[0])], pids)
            self.consumers.partitions_changed(sid, tid)

    def topic_log_config(self, topic: TopicInfo) -> LogConfig:
        """The log settings of ``topic``'s partitions (``core.datadir``); the flusher reads each partition's."""
        return self.dirs.log_config(topic)

    def _close_topic_partitions(self, sid: int, tid: int) -> None:
        for key in [k for k in self._partitions if k[0] == sid and k[1] == tid]:
            self._partitions.pop(key).close()
            self.live.wake(key)

    def _forget_topic(self, sid: int, tid: int) -> None:
        """A topic went: its groups' runtime state and its round-robin position go too."""
        self.consumers.forget_topic(sid, tid)
        self._round_robin.pop((sid, tid), None)

    # -- streams -----------------------------------------------------------
    def create_stream(self, name: str, stream_id: int | None = None) -> StreamInfo:
        self._forget_subjects()
        return self.meta.create_stream(name, stream_id)

    def get_stream(self, stream: Ident) -> StreamInfo:
        return self.meta.get_stream(stream)

    def list_streams(self) -> list[StreamInfo]:
        return self.meta.list_streams()

    def update_stream(self, stream: Ident, name: str) -> StreamInfo:
        self._forget_subjects()
        return self.meta.update_stream(stream, name)

    def delete_stream(self, stream: Ident) -> None:
        self._forget_subjects()
        info = self.meta.get_stream(stream)
        topics = self.meta.list_topics(info.id)
        self.meta.delete_stream(info.id)
        for topic in topics:
            self._close_topic_partitions(info.id, topic.id)
            self._forget_topic(info.id, topic.id)
            self.store.partitions_dropped(info.id, topic.id, range(topic.partitions_count))
        shutil.rmtree(self.dirs.stream_dir(info.id), ignore_errors=True)

    def purge_stream(self, stream: Ident) -> None:
        info = self.meta.get_stream(stream)
        for topic in self.meta.list_topics(info.id):
            self.purge_topic(info.id, topic.id)

    # -- topics ------------------------------------------------------------
    def create_topic(
        self,
        stream: Ident,
        name: str,
        partitions: int = 1,
        *,
        topic_id: int | None = None,
        settings: TopicSettings = TopicSettings(),
        segment_bytes: int = 0,
        fsync: str = "",
    ) -> TopicInfo:
        """Create a topic with ``settings`` and open its partitions. ``segment_bytes`` and ``fsync``
        (one of ``core.log.FSYNC_POLICIES``) give the topic its own segment size and
        fsync policy instead of the broker's ``[log]`` ones (0 / "" keep those); they
        are fixed for the topic's life (:meth:`topic_log_config`)."""
        self._forget_subjects()
        sinfo = self.meta.get_stream(stream)
        topic = self.meta.create_topic(
            sinfo.id,
            name,
            partitions,
            topic_id=topic_id,
            settings=settings,
            segment_bytes=segment_bytes,
            fsync=fsync,
        )
        for pid in range(topic.partitions_count):
            self._open_partition(topic, pid)
        self.store.partitions_opened(topic, range(topic.partitions_count))
        return topic

    def get_topic(self, stream: Ident, topic: Ident) -> TopicInfo:
        return self.meta.get_topic(stream, topic)

    def list_topics(self, stream: Ident) -> list[TopicInfo]:
        return self.meta.list_topics(stream)

    def update_topic(self, stream: Ident, topic: Ident, *, name: str | None = None,
                     settings: TopicSettings | None = None) -> TopicInfo:
        """Rename and/or replace the settings (``None`` keeps either; change some with
        ``dataclasses.replace(topic.settings, ...)``)."""
        self._forget_subjects()
        return self.meta.update_topic(stream, topic, name=name, settings=settings)

    def delete_topic(self, stream: Ident, topic: Ident) -> None:
        self._forget_subjects()
        info = self.meta.get_topic(stream, topic)
        self.meta.delete_topic(info.stream_id, info.id)
        self._close_topic_partitions(info.stream_id, info.id)
        self._forget_topic(info.stream_id, info.id)
        shutil.rmtree(self.dirs.topic_dir(info.stream_id, info.id), ignore_errors=True)
        self.store.partitions_dropped(info.stream_id, info.id, range(info.partitions_count))

    def purge_topic(self, stream: Ident, topic: Ident) -> None:
        info = self.meta.get_topic(stream, topic)
        self.store.topic_purged(info)  # a remote store refuses before anything changed
        for pid in range(info.partitions_count):
            self._partitions[(info.stream_id, info.id, pid)].purge()
        self.meta.delete_topic_offsets(info.stream_id, info.id)
        self.meta.topic_state.clear_logical_starts(info.stream_id, info.id)  # byte positions restart at 0
        audit("topic.purge", stream_id=info.stream_id, topic=info.name, topic_id=info.id)

    def add_partitions(self, stream: Ident, topic: Ident, count: int) -> list[int]:
        self._forget_subjects()
        info = self.meta.get_topic(stream, topic)
        new_ids = self.meta.add_partitions(info.stream_id, info.id, count)
        for pid in new_ids:
            self._open_partition(info, pid)
        self.store.partitions_opened(info, new_ids)
        self.consumers.partitions_changed(info.stream_id, info.id)
        return new_ids

    def delete_partitions(self, stream: Ident, topic: Ident, count: int) -> list[int]:
        self._forget_subjects()
        info = self.meta.get_topic(stream, topic)
        removed = self.meta.delete_partitions(info.stream_id, info.id, count)
        for pid in removed:
            key = (info.stream_id, info.id, pid)
            part = self._partitions.pop(key, None)
            if part is not None:
                part.delete()
            self.live.wake(key)
        self.store.partitions_dropped(info.stream_id, info.id, removed)
        self.consumers.partitions_changed(info.stream_id, info.id)
        return removed

    def partition(self, stream: Ident, topic: Ident, partition_id: int) -> Partition:
        info = self.meta.get_topic(stream, topic)
        return self._partition(info, partition_id)

    def _partition(self, info: TopicInfo, partition_id: int) -> Partition:
        part = self._partitions.get((info.stream_id, info.id, partition_id))
        if part is None:
            raise PartitionNotFound(
                f"partition {partition_id} not found in topic {info.name!r}",
                partition_id=partition_id,
            )
        return part

    # -- append ------------------------------------------------------------
    def add_append_listener(self, listener: AppendListener) -> Callable[[], None]:
        """``listener(topic, partition_id, result, items)`` runs after every append, any protocol."""
        self._append_listeners.append(listener)
        return lambda: self._append_listeners.remove(listener)

    def choose_partition(self, info: TopicInfo, partition: int | None, key: bytes | None) -> int:
        """Explicit id, else ``XXH32(key) % n`` (Iggy's messages_key rule,
        iggy-middle.md section 5), else per-topic round robin from 0 (balanced)."""
        n = info.partitions_count
        if n <= 0:
            raise PartitionNotFound(f"topic {info.name!r} has no partitions")
        if partition is not None:
            if not 0 <= partition < n:
                raise PartitionNotFound(f"partition {partition} not found in topic {info.name!r}")
            return partition
        if key is not None:
            return xxhash.xxh32_intdigest(key) % n
        rr_key = (info.stream_id, info.id)
        pid = self._round_robin.get(rr_key, 0) % n
        self._round_robin[rr_key] = pid + 1
        return pid

    def append(
        self,
        stream: Ident,
        topic: Ident,
        items: Sequence[AppendInput],
        *,
        partition: int | None = None,
        key: bytes | None = None,
        producer: tuple[str, int] | None = None,
        on_durable: OnDurable | None = None,
        live_subject: str | None = None,
        origin: str = "",
        native: object = None,
        publisher: object = None,
        reply: str | None = None,
    ) -> AppendResult:
        """Append ``items`` to one partition of a topic.

        Returns at once (records are readable immediately); ``on_durable`` fires
        from the flusher once the records are durable under the fsync policy.
        Live subscribers of the topic's subject get the records now.
        Raises ShuttingDown, InvalidArgument, HeadersTooLarge, StreamNotFound,
        TopicNotFound, PartitionNotFound, TopicSealed (``seal_topic``), and what
        ``Partition.append`` raises.
        """
        if self.draining or self.closed:
            raise ShuttingDown("the broker is shutting down")
        if not items:
            raise InvalidArgument("no messages to append")
        # Header blocks arrive encoded (Headers.encode() in the adapter); their
        # size is the one limit checked again here, since a block past it would
        # be stored and then refused by every dialect that reads it back.
        for item in items:
            if len(item.headers) > MAX_HEADERS_SIZE:
                raise HeadersTooLarge(f"header block of {len(item.headers)} bytes exceeds {MAX_HEADERS_SIZE}")
        info = self.meta.get_topic(stream, topic)
        if info.sealed:
            raise topic_sealed(info)
        pid = self.choose_partition(info, partition, key)
        part = self._partition(info, pid)
        # Readable (and announced, _applied) when the store applies it: at once for the embedded log.
        return self.store.append((info.stream_id, info.id, pid), part, items, producer, on_durable,
                                 (info, live_subject, origin, native, publisher, reply))

    def append_records(
        self,
        stream: Ident,
        topic: Ident,
        block: bytearray,
        count: int,
        *,
        partition: int | None = None,
        key: bytes | None = None,
        producer: tuple[str, int] | None = None,
        on_durable: OnDurable | None = None,
        origin: str = "",
    ) -> AppendResult:
        """Append ``count`` records already in the stored layout (``core.record``),
        back to back in ``block``, to one partition of a topic: ``append`` without
        per-message inputs (``Partition.append_encoded``, which takes ``block``
        over and stamps it). Append listeners and live subscribers still see
        each message; their per-message view is built only when one exists.
        Raises what ``append`` raises, and MalformedRecords (and its subclasses)
        for a block whose lengths do not frame ``count`` records: nothing is stored."""
        if self.draining or self.closed:
            raise ShuttingDown("the broker is shutting down")
        info = self.meta.get_topic(stream, topic)
        if info.sealed:
            raise topic_sealed(info)
        pid = self.choose_partition(info, partition, key)
        part = self._partition(info, pid)
        return self.store.append_records((info.stream_id, info.id, pid), part, block, count, producer,
                                         on_durable, (info, None, origin, None, None, None))

    # -- the store's events (core/store.py) ------------------------------------
    def _store_events(self) -> StoreEvents:
        return StoreEvents(meta=self.meta, applied=self._applied, applied_block=self._applied_block,
                           resync=self.resync, group_members=self.consumers.set_group_members,
                           plain_publish=self._plain_publish,
                           add_metrics=lambda collector: metrics_for(self).add_collector(collector))

    def _applied(self, key, part, result: AppendResult, items: Sequence[AppendInput],
                 published: Published | None) -> None:
        """Records of an append became readable (``StoreEvents.applied``): wake the
        partition's waiters, tell the append listeners, deliver live. ``published``
        None: the store applied a stored record later (this gateway's or another's,
        JetStream store); the publish subject a NATS client used travels in the
        stored headers, so live delivery finds it from them."""
        if published is None:
            if self._partitions.get(key) is not part:
                return
            try:
                info = self.meta.get_topic(key[0], key[1])
            except Exception:  # noqa: BLE001 - deleted meanwhile: nothing to deliver
                return
            published = (info, stored_subject(items[0].headers) if self.live.trie.count else None,
                         "", None, None, None)
        info = published[0]
        pid = key[2]
        self.live.wake(key)
        for listener in self._append_listeners:
            listener(info, pid, result, items)
        self._deliver_live(info, pid, result, items, *published[1:])

    def _applied_block(self, key, part, result: AppendResult, block: bytearray, published: Published) -> None:
        """``_applied`` for ``append_records``: the per-message view of ``block`` is
        built only when an append listener or a live subscriber exists."""
        self.live.wake(key)
        if self._append_listeners or self.live.trie.count:
            items = [
                AppendInput(bytes(rv.payload), bytes(rv.headers), rv.id, rv.origin_timestamp)
                for rv in records_of(block)
            ]
            info, pid = published[0], key[2]
            for listener in self._append_listeners:
                listener(info, pid, result, items)
            self._deliver_live(info, pid, result, items, *published[1:])

    def _plain_publish(self, subject: str, reply: str | None, header: bytes, payload: bytes) -> None:
        """A plain NATS publish from another gateway (``StoreEvents.plain_publish``)."""
        if self.live.has_interest(subject):
            self.live.publish(Delivery(subject=subject, payload=payload, reply=reply, origin="nats", native=header))

    def _deliver_live(self, info, pid, result, items, live_subject, origin, native, publisher, reply) -> None:
        if not self.live.trie.count:  # nobody subscribed to anything: skip the subject lookups (a
            return  # quarter of an append's cost on a gateway with no NATS subscribers)
        subject = live_subject or self.addressing.live_subject_for(self._stream_name(info), info.name)
        if subject is None or not self.live.has_interest(subject):
            return
        for i, item in enumerate(items):
            self.live.publish(
                Delivery(
                    subject=subject,
                    payload=item.payload,
                    headers=item.headers,
                    origin=origin,
                    native=native if len(items) == 1 else None,
                    stream_id=info.stream_id,
                    topic_id=info.id,
                    partition_id=pid,
                    offset=result.base_offset + i,
                    timestamp=result.timestamp,
                    id=item.id,
                    publisher=publisher,
                    reply=reply,
                )
            )

    def _stream_name(self, info: TopicInfo) -> str:
        return self.meta.get_stream(info.stream_id).name

    def publish(self, delivery: Delivery):
        """Offer a message that is not stored (plain core NATS) to live subscribers."""
        return self.live.publish(delivery)

    def topic_for_subject(self, subject: str) -> TopicInfo | None:
        """The stored topic a NATS subject is captured by, if any (core.addressing)."""
        cache = self._subject_topics
        try:
            return cache[subject]
        except KeyError:
            pass
        found = self.addressing.topic_for_subject(subject, self._topic_exists)
        info = None if found is None else self.meta.get_topic(found[0], found[1])
        if len(cache) >= SUBJECT_CACHE_MAX:
            cache.clear()
        cache[subject] = info
        return info

    def _forget_subjects(self) -> None:
        self._subject_topics.clear()
        self.subject_generation += 1

    def _topic_exists(self, stream: str, topic: str) -> bool:
        try:
            self.meta.get_topic(stream, topic)
        except Exception:  # noqa: BLE001 - any lookup failure means "not captured"
            return False
        return True

    # -- reads -------------------------------------------------------------
    def read(self, stream: Ident, topic: Ident, partition: int, offset: int, count: int, max_bytes: int | None = None):
        """Raw read: a ``core.log`` ReadBatch of stored record bytes."""
        info = self.meta.get_topic(stream, topic)
        return self._partition(info, partition).read(offset, count, max_bytes)

    def read_messages(self, stream: Ident, topic: Ident, partition: int, offset: int, count: int) -> list[Message]:
        """Decoded read: canonical :class:`Message` objects (headers parsed)."""
        batch = self.read(stream, topic, partition, offset, count)
        return [Message.from_record(rv) for rv in batch.records()]

    def wait_for_append(self, stream_id: int, topic_id: int, partition_id: int, wake: Callable[[], None]):
        """One-shot ``wake()`` after the next append to that partition; returns a cancel function."""
        return self.live.add_waiter((stream_id, topic_id, partition_id), wake)

    def wake_readers(self) -> None:
        """Wake every parked reader, appends' and durable-end waiters alike (shutdown:
        long polls and parked Pravega reads re-check and see ``draining``)."""
        self.live.wake_all()
        for part in self._partitions.values():
            part.durable.wake()

    def wait_for_durable(self, stream_id: int, topic_id: int, partition_id: int, wake: Callable[[], None]):
        """One-shot ``wake()`` once that partition's durable end moves (``Partition.durable``): for
        readers served durable data only (Pravega, Kafka). Returns a cancel function. A partition
        not open here waits as ``wait_for_append`` does (deleting one wakes those waiters)."""
        part = self._partitions.get((stream_id, topic_id, partition_id))
        if part is None:
            return self.wait_for_append(stream_id, topic_id, partition_id, wake)
        return part.durable.add_waiter(wake)

    def totals(self) -> BrokerTotals:
        """Counts over the whole broker, for Iggy's GetStats, HTTP ``/stats`` and
        snapshots (one walk, so the three report the same numbers)."""
        streams = self.list_streams()
        topics = [t for s in streams for t in self.list_topics(s.id)]
        parts = [part for t in topics for pid in range(t.partitions_count)
                 if (part := self._partitions.get((t.stream_id, t.id, pid))) is not None]
        return BrokerTotals(
            streams=len(streams), topics=len(topics), partitions=sum(t.partitions_count for t in topics),
            segments=sum(p.segment_count for p in parts), messages=sum(p.record_count for p in parts),
            stored_bytes=sum(p.size_bytes for p in parts), pending_bytes=sum(p.pending_bytes for p in parts),
            consumer_groups=sum(len(self.meta.list_groups(t.stream_id, t.id)) for t in topics),
        )

    # -- retention -----------------------------------------------------------
    def delete_segments(self, stream: Ident, topic: Ident, partition_id: int, count: int) -> int:
        """Delete up to ``count`` of the partition's oldest sealed segments (Iggy's
        DeleteSegments); returns how many went. Segments holding an offset past the
        lowest offset a consumer or group stored for this partition stay
        (:meth:`Partition.delete_oldest_segments`). Raises StreamNotFound,
        TopicNotFound, PartitionNotFound, InvalidArgument (negative count)."""
        info = self.meta.get_topic(stream, topic)
        part = self._partition(info, partition_id)
        stored = [o.offset for o in self.meta.list_offsets(info.stream_id, info.id) if o.partition_id == partition_id]
        return part.delete_oldest_segments(count, min(stored, default=None))

    def enforce_retention(self, now: int | None = None) -> int:
        """Apply each topic's message expiry and size cap; returns segments removed."""
        now = now_us() if now is None else now
        removed = 0
        for stream in self.meta.list_streams():
            for topic in self.meta.list_topics(stream.id):
                if not topic.message_expiry and not topic.max_topic_size:
                    continue
                per_part = topic.max_topic_size // max(topic.partitions_count, 1) if topic.max_topic_size else 0
                for pid in range(topic.partitions_count):
                    part = self._partitions.get((stream.id, topic.id, pid))
                    if part is not None:
                        removed += part.enforce_retention(now, topic.message_expiry, per_part)
        return removed


__all__ = ["Broker", "BrokerConfig", "Delivery", "Headers"]
