"""The JetStream store: a gateway's durable state in a NATS JetStream cluster (docs/scale-out.md).

Theory of operation
-------------------
``ferry serve --store nats://h1:4222,...`` builds one :class:`JetStreamStore`
and hands it to ``Broker.open`` (core/store.py is the seam). Two connections
reach the cluster, both speaking NATS through Ferry's own client code
(adapters/nats/client_codec.py), so no asyncio loop or second thread runs
beside trio:

* :class:`~gateway.jetstream_store.blocking.BlockingNats`, a plain socket used from the
  trio thread for the rare calls the broker makes synchronously: metadata
  writes (each one a compare-and-set publish to the metadata log, see
  core/metadb.py), catching the metadata up before a write, and creating or
  deleting a partition's stream. Each is one or two round trips, bounded by
  ``REQUEST_TIMEOUT_S``; the gateway's other connections wait meanwhile, which
  is why nothing per message goes this way.
* :class:`~gateway.jetstream_store.client.TrioNats` for everything per message: the
  *pump* hands what :class:`~gateway.jetstream_store.partition.RemotePartition` appends
  queued to the :class:`~gateway.jetstream_store.publisher.Publisher` (pipelined, one
  PubAck each, chained so a partition's messages are stored in the order taken), and
  one *mirror* per stream (an ordered
  push consumer: no acks, flow control, heartbeats) applies every stored
  message, in sequence order, to the partition's local cache; the metadata
  log has a mirror too, so other gateways' changes arrive without a write.

A re-send after a lost acknowledgement carries the same ``Nats-Msg-Id``
(layout.py), so JetStream stores it once; re-sends go in order and stop after
``PUBLISH_RETRY_S`` (publisher.py), and the append fails (it was never acknowledged).
"""

from __future__ import annotations

import base64
import logging
import ssl
import time
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Callable

import trio

from adapters.nats.client_codec import STATUS_CONTROL, ServerMsg, headers_of, status_of
from adapters.nats.headers import HeaderBlock, encode_headers
from adapters.nats.translate import nats_to_canonical
from core.errors import FerryError, InvalidArgument, StorageConflict, StorageError
from core.log import AppendInput
from core.log.config import FSYNC_NEVER
from core.message import uuid7_parts

from .blocking import BlockingNats, new_inbox_prefix
from .client import TrioNats
from .errors import ClusterServerError, ClusterUnreachable, ConnectionLost, NoResponders, SlowCluster
from .groups import GroupCoordinator
from .layout import (
    STREAM_NAME_EXISTS, STREAM_NOT_FOUND, WRONG_LAST_SEQUENCE, ApiError, Layout, ack_info, api_answer,
    decode_entry, decode_message, encode_entry, mirror_consumer, pub_ack, request_json,
)  # fmt: skip
from .iggyids import IggyIds
from .msgids import ClientIds
from .partition import RemotePartition
from .publisher import RETRY_BACKOFF_S, Publisher

if TYPE_CHECKING:
    from core.model import TopicInfo
    from core.metadb import MetaDb
    from core.store import StoreEvents

    from ..config import StoreConfig

log = logging.getLogger("ferry.store")

EPOCH_ATTR = "store.epoch"  # topic attribute: how many times the topic was purged (part of stream names)

# One synchronous cluster call (a metadata write, a stream create): the longest the
# trio thread waits; a JetStream leader election takes about 5 s on loopback
# (tests/support/nats_cluster.py measured 4.5-7 s), so a little more than that.
REQUEST_TIMEOUT_S = 8.0
# Bytes the cluster connection may hold unsent: above the largest message a gateway stores
# (a Pravega event of 8 MiB; nats-server's max_payload caps it at 64 MiB), with room for
# a burst of others.
CLUSTER_OUTBOX_BYTES = 64 * 1024 * 1024
PUBLISH_ANYWHERE_TRIES = 20  # a reorderable metadata write's attempts against a busy log
# A stream another gateway has just created answers nothing (no responders) until its
# replicas elect a leader, a few seconds on a 3-node cluster (the start-up steps above
# wait for the same). Gateways started together on an empty store write the root user
# in that window; a metadata write waits this long for the leader before it fails.
NO_LEADER_WAIT_S = 10.0
NO_LEADER_PAUSE_S = 0.1
INFO_TIMEOUT_S = 2.0  # one start-up probe of JetStream (retried until the start-up budget is spent)
RUNNING_DIAL_TIMEOUT_S = 1.0  # one TCP dial of the blocking connection once the gateway runs
WITHDRAW_TIMEOUT_S = 1.0  # a clean stop's lease delete: past it the lease runs out by itself
# A mirror that hears nothing (no message, no heartbeat) for this long recreates its
# consumer: the server holding it died or forgot it (3 missed 5 s heartbeats).
MIRROR_SILENCE_S = 15.0


class JetStreamStore:
    """core/store.py's Store over a JetStream cluster (module docstring)."""

    def __init__(self, cfg: "StoreConfig", *, name: str = "ferry-gateway") -> None:
        self.cfg = cfg
        self.layout = Layout(cfg.prefix, cfg.replicas)
        try:
            self.tls = _tls_context(cfg)
        except (OSError, ssl.SSLError) as exc:  # a certificate or key that does not load
            raise ClusterUnreachable(f"TLS settings for the cluster: {exc}") from None
        auth = dict(user=cfg.user or None, password=cfg.password or None, token=cfg.token or None, tls=self.tls)
        self._auth = auth
        self.name = name
        self.blocking = BlockingNats(cfg.urls, name=name, connect_timeout_s=cfg.connect_timeout_seconds,
                                     request_timeout_s=REQUEST_TIMEOUT_S, **auth)
        self.nc: TrioNats | None = None
        self.events: "StoreEvents | None" = None  # the broker's side of the seam (attach)
        self.parts: dict[tuple[int, int, int], tuple[RemotePartition, str, str]] = {}
        self.max_payload = 1024 * 1024
        self._dirty: set[tuple[int, int, int]] = set()
        self._dirty_event = trio.Event()
        self._mirrors: dict[object, _Mirror] = {}
        self._nursery: trio.Nursery | None = None
        self._running = False
        self._inbox = new_inbox_prefix()
        self._mirror_ids = 0
        self.groups = GroupCoordinator(self.layout, self._ensure_stream_config)
        self.client_ids = ClientIds(self)  # JetStream msg ids the cluster de-duplicates (msgids.py)
        self.iggy_ids = IggyIds(self)  # Iggy message ids the cluster de-duplicates (iggyids.py)
        self.publisher: Publisher | None = None  # made by the pump once the connection runs (publisher.py)
        self._live = f"{self.layout.prefix.lower()}.l"  # plain NATS publishes between gateways
        self._sharing = False  # plain publishes go to other gateways (from run on)
        self.forward_dropped = 0  # publishes the cluster connection could not take (at most once)

    # -- start-up -------------------------------------------------------------------
    def check(self) -> dict:
        """Connect and ask JetStream for its account info. Raises ClusterUnreachable
        with a message for people (no server, refused login, JetStream off)."""
        if not self.blocking.connected:
            self.blocking.connect()
        self.max_payload = int((self.blocking.server_info or {}).get("max_payload", self.max_payload))
        # A cluster that lost a node answers JetStream requests again once it has
        # elected a meta leader (about 5 s): ask until the start-up budget is spent.
        deadline = time.monotonic() + self.cfg.connect_timeout_seconds
        while True:
            try:
                return api_answer(self.blocking.request("$JS.API.INFO", timeout_s=INFO_TIMEOUT_S).payload)
            except NoResponders:
                problem = (f"{self.blocking.server_url} answers, but JetStream is not enabled there "
                           "(start nats-server with -js / a jetstream block)")
            except ApiError as exc:
                problem = f"JetStream at {self.blocking.server_url}: {exc}"
            except TimeoutError:
                problem = f"JetStream at {self.blocking.server_url} did not answer"
            if time.monotonic() + INFO_TIMEOUT_S > deadline:
                raise ClusterUnreachable(f"{problem} (waited {self.cfg.connect_timeout_seconds:g} s, "
                                         "store.connect_timeout_seconds)")
            time.sleep(0.25)

    def attach(self, events: "StoreEvents") -> None:
        """Called by ``Broker.open`` before it reads anything: make the metadata log,
        replicate the SQLite file through it and catch it up."""
        self.events = events
        self.groups.events = events
        events.add_metrics(self._metrics)
        self.check()
        meta = events.meta
        # Each step is retried within the start-up budget: a node lost just before we
        # started leaves streams without a leader until their election (about 5 s).
        deadline = time.monotonic() + self.cfg.connect_timeout_seconds
        steps = [
            lambda: self._ensure_stream(self.layout.meta_stream, self.layout.meta_subject),
            lambda: [db.replicate(self) for db in meta.databases],
            lambda: self.before_write(meta.db),
            self.groups.ensure_bucket,
        ]
        for step in steps:
            while True:
                try:
                    step()
                    break
                except StorageError as exc:
                    if time.monotonic() > deadline:
                        raise ClusterUnreachable(f"{exc} (waited {self.cfg.connect_timeout_seconds:g} s, "
                                                 "store.connect_timeout_seconds)") from None
                    time.sleep(0.25)

    def start_write(self, write) -> None:
        """``Broker.open``'s own metadata write: another gateway of the same store may
        write at that moment (its compare-and-set then fails): tried 3 times."""
        for attempt in range(3):
            try:
                write()
                return
            except StorageError:
                if attempt == 2:
                    raise

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """The store's tasks: the cluster connection, the pump and the mirrors."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            # echo off: this gateway's forwarded publishes must not come back to it.
            self.nc = TrioNats(self.cfg.urls, name=self.name, request_timeout_s=REQUEST_TIMEOUT_S, echo=False,
                               max_pending_bytes=CLUSTER_OUTBOX_BYTES, **self._auth)
            await self.nc.connect(nursery)
            self.groups.nc = self.nc
            self.nc.on_reconnect.append(lambda _nc: self._restart_mirrors())
            self._running = True
            # From now on the blocking connection's reconnects hold the event loop: keep
            # each dial short (a dead host's SYN would otherwise wait out the start-up budget).
            self.blocking.connect_timeout_s = min(self.blocking.connect_timeout_s, RUNNING_DIAL_TIMEOUT_S)
            self.nc.subscribe(f"{self._live}.>", self._live_in)
            self._sharing = True
            self._start_mirror("meta", self.layout.meta_stream, self._apply_meta,
                               lambda: self.events.meta.db.replica_seq + 1)
            self._start_mirror("groups", self.groups.stream, self.groups.receive, lambda: 1, gaps_ok=True)
            nursery.start_soon(self.groups.run)
            for key in list(self.parts):
                self._start_partition_mirror(key)
            nursery.start_soon(self._pump)
            task_status.started()

    def close(self) -> None:
        if self._running:  # a clean stop: the other gateways drop our lease now (groups.py)
            subject, payload, header = self.groups.withdrawal()
            try:
                self.blocking.request(subject, payload, header, timeout_s=WITHDRAW_TIMEOUT_S)
            except (StorageError, TimeoutError, OSError, NoResponders, ClusterUnreachable, ClusterServerError):
                pass  # the lease then runs out by itself (LEASE_S)
        self._running = False
        for mirror in self._mirrors.values():
            mirror.stop()
        if self.nc is not None:
            self.nc.close()
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
        self.blocking.close()

    def _metrics(self):
        """``/metrics`` families of the store (core/metrics.py collectors)."""
        parts = [entry[0] for entry in self.parts.values()]
        connected = 1 if self.nc is not None and self.nc.connected else 0
        yield ("ferry_store_connected", "gauge", "1 while the cluster connection is up", [({}, connected)])
        yield ("ferry_store_outbox_bytes", "gauge", "message bytes queued for the cluster, all partitions",
               [({}, sum(p.outbox_bytes for p in parts))])
        yield ("ferry_store_in_flight_messages", "gauge", "messages published and not yet applied here",
               [({}, sum(p.in_flight for p in parts))])
        yield ("ferry_store_metadata_sequence", "gauge", "last metadata log entry this gateway holds",
               [({}, self.events.meta.db.replica_seq if self.events is not None else 0)])
        yield ("ferry_store_forward_dropped_total", "counter",
               "plain NATS publishes the cluster connection could not take", [({}, self.forward_dropped)])
        yield ("ferry_store_mirrors", "gauge", "streams this gateway mirrors", [({}, len(self._mirrors))])
        publisher = self.publisher
        yield ("ferry_store_publish_recoveries_total", "counter",
               "publish failures after which a partition re-sent in order",
               [({}, publisher.recoveries if publisher else 0)])
        yield ("ferry_store_publish_resent_total", "counter", "messages published again",
               [({}, publisher.resent if publisher else 0)])

    # -- metadata: core.metadb.Replicator ----------------------------------------------
    def before_write(self, db: "MetaDb") -> None:
        """Apply every metadata log entry past the one ``db`` holds."""
        stream = self.layout.meta_stream
        try:
            info = self._call(f"$JS.API.STREAM.INFO.{stream}")
        except ApiError as exc:
            # e.g. 503/10008 "JetStream system temporarily unavailable" while a node
            # restarts: the write fails as a storage error each protocol answers as its
            # own retriable error (Kafka's OffsetCommit: COORDINATOR_NOT_AVAILABLE), not
            # as a gateway exception escaping to the connection (a fault-schedule run saw
            # "kafka connection failed" with this traceback).
            raise StorageError(f"the cluster could not say where the metadata log ends: {exc}") from None
        last = int(info.get("state", {}).get("last_seq", 0))
        changed = False
        while db.replica_seq < last:
            seq = db.replica_seq + 1
            try:
                doc = self._call(f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq})
                data = base64.b64decode(doc["message"].get("data", "") or "")
                entry = decode_entry(data)
            except ApiError:  # no such message (never the case for this log): an empty entry
                entry = []
            db.apply_entry(seq, entry)
            changed = True
        if changed:
            self._metadata_changed()

    def publish(self, statements, after_seq: int) -> int:
        header = encode_headers(HeaderBlock((("Nats-Expected-Last-Sequence", str(after_seq)),)))
        entry = encode_entry(statements)
        deadline = time.monotonic() + NO_LEADER_WAIT_S
        try:
            while True:
                try:
                    msg = self.blocking.request(self.layout.meta_subject, entry, header=header)
                    break
                except NoResponders:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(NO_LEADER_PAUSE_S)  # the stream's leader election (NO_LEADER_WAIT_S)
            return pub_ack(msg.payload)[0]
        except ApiError as exc:
            if exc.err_code == WRONG_LAST_SEQUENCE:
                raise _Conflict("the metadata changed on another gateway at the same moment; "
                                "try again") from None
            raise StorageError(f"the cluster refused a metadata write: {exc}") from None
        except (ClusterUnreachable, TimeoutError, NoResponders, OSError) as exc:
            raise StorageError(f"the cluster did not take a metadata write: {exc or type(exc).__name__}") from None

    def publish_anywhere(self, statements, db: "MetaDb") -> int:
        for _attempt in range(PUBLISH_ANYWHERE_TRIES):
            try:
                return self.publish(statements, db.replica_seq)
            except _Conflict:
                self.before_write(db)
        raise StorageError("the metadata log kept moving on other gateways; try again")

    def _apply_meta(self, seq: int, msg: ServerMsg, _stored_ns: int) -> None:
        db = self.events.meta.db
        if seq <= db.replica_seq:
            return
        if seq != db.replica_seq + 1:
            self.before_write(db)  # fetch what is missing, in order
            return
        db.apply_entry(seq, decode_entry(msg.payload))
        self._metadata_changed()

    def _metadata_changed(self) -> None:
        if self._running and self.events is not None:
            self.events.resync()
        elif self.events is not None:
            self.events.meta.reload()

    # -- partitions: core.store.Store ---------------------------------------------------
    def append(self, key, part: RemotePartition, items, producer, on_durable, published):
        """Queued for the cluster: readable (StoreEvents.applied) once the mirror applies it."""
        if part.client_ids:
            self.client_ids.before_append(key, published[0])
        return part.append(items, producer=producer, on_durable=on_durable)

    def append_records(self, key, part: RemotePartition, block, count, producer, on_durable, published):
        self.iggy_ids.before_append(key, published[0])
        return part.append_encoded(block, count, producer=producer, on_durable=on_durable)

    def group_changed(self, key, member_id: int, joined: bool) -> None:
        self.groups.changed(key, member_id, joined)

    # -- Store.advertise, Store.peers (through the FERRY_GROUPS keys), Store.log_end ----------
    def advertise(self, listener: str, host: str, port: int) -> None:
        self.groups.advertise(listener, host, port)

    def peers(self, listener: str):
        return self.groups.peers(listener)

    def log_end(self, key, part: RemotePartition) -> int | None:
        """The stream's end as the partition last asked it (RemotePartition.log_end)."""
        def ask(answered) -> None:
            def reply(outcome) -> None:
                try:
                    answered(int(api_answer(outcome.payload).get("state", {}).get("last_seq", 0)))
                except (AttributeError, ApiError, ValueError, TypeError):
                    answered(None)  # no answer: the next call asks again
            self.nc.request_cb(f"$JS.API.STREAM.INFO.{self.parts[key][1]}", b"", None, reply)
        try:
            return part.log_end(ask)
        except (AttributeError, KeyError, ConnectionLost, SlowCluster):  # not running, or no such stream
            return None

    def unsettled(self) -> bool:
        """Appends taken and not yet acknowledged (queued for, or awaiting, the cluster)."""
        return any(entry[0].unsettled for entry in self.parts.values())

    def open_partition(self, path, topic: "TopicInfo", partition_id: int, cfg) -> RemotePartition:
        # The cluster keeps the records durable; the local copy is a cache the mirror
        # refills from the offset it holds, so it is never fsynced.
        part = RemotePartition.open(path, partition_id, replace(cfg, fsync=FSYNC_NEVER))
        key = (topic.stream_id, topic.id, partition_id)
        incarnation = self.incarnation(topic)
        stream = self.layout.partition_stream(*key, incarnation)
        subject = self.layout.partition_subject(*key, incarnation)
        part.incarnation = incarnation
        part.max_message_bytes = self.max_payload
        part.client_ids = self.client_ids.opened(topic, key) or self.iggy_ids.opened(topic, key)
        self.parts[key] = (part, stream, subject)
        part.set_remote_wakeup(partial(self._mark_dirty, key))
        return part

    def partitions_opened(self, topic: "TopicInfo", partition_ids) -> None:
        per_part = topic.max_topic_size // max(topic.partitions_count, 1) if topic.max_topic_size else 0
        for pid in partition_ids:
            key = (topic.stream_id, topic.id, pid)
            _part, stream, subject = self.parts[key]
            try:
                self._ensure_stream(stream, subject, max_age_us=topic.message_expiry, max_bytes=per_part)
            finally:  # a slow cluster's refusal must not leave the partition unmirrored for good:
                if self._running:  # the mirror retries until the stream is there
                    self._start_partition_mirror(key)

    def partitions_dropped(self, stream_id: int, topic_id: int, partition_ids) -> None:
        for pid in partition_ids:
            entry = self.parts.get((stream_id, topic_id, pid))
            self.partitions_closed([(stream_id, topic_id, pid)])
            if entry is not None:
                self._delete_stream(entry[1])

    def partitions_closed(self, keys) -> None:
        for key in keys:
            self.parts.pop(key, None)
            self.client_ids.closed(key)
            self.iggy_ids.closed(key)
            mirror = self._mirrors.pop(key, None)
            if mirror is not None:
                mirror.stop()

    def incarnation(self, topic: "TopicInfo") -> str:
        """The topic's creation time, plus its purge count once purged: part of its
        streams' names, so a purge (or a later topic reusing the ids) starts new streams."""
        epoch = self.events.meta.topic_state.topic_attrs(topic.stream_id, topic.id).get(EPOCH_ATTR, "")
        return f"{topic.created_at}e{epoch}" if epoch else str(topic.created_at)

    def topic_purged(self, topic: "TopicInfo") -> None:
        """Purge = new streams: bump the topic's epoch (a metadata write every gateway
        replays, so each reopens its caches empty on the new streams), then delete the
        old streams. Offsets start again at 0, as Iggy's purge does."""
        old = [entry[1] for pid in range(topic.partitions_count)
               if (entry := self.parts.get((topic.stream_id, topic.id, pid))) is not None]
        epoch = int(self.events.meta.topic_state.topic_attrs(topic.stream_id, topic.id).get(EPOCH_ATTR, "0") or 0) + 1
        self.events.meta.topic_state.set_topic_attrs(topic.stream_id, topic.id, {EPOCH_ATTR: str(epoch)})
        self.events.resync()
        for name in old:
            self._delete_stream(name)

    def _delete_stream(self, name: str) -> None:
        """Delete one of our streams; one already gone is fine, a refusal only logged
        (the stream is orphaned, nothing reads it)."""
        try:
            self._call(f"$JS.API.STREAM.DELETE.{name}")
        except ApiError as exc:
            if exc.err_code != STREAM_NOT_FOUND:
                log.warning("could not delete stream %s: %s", name, exc)
        except StorageError as exc:
            log.warning("could not delete stream %s: %s", name, exc)

    def _ensure_stream(self, name: str, subject: str, *, max_age_us: int = 0, max_bytes: int = 0) -> None:
        self._ensure_stream_config(name, self.layout.stream_config(name, subject, max_age_us=max_age_us,
                                                                   max_bytes=max_bytes))

    def _ensure_stream_config(self, name: str, config: dict) -> None:
        try:
            self._call(f"$JS.API.STREAM.CREATE.{name}", config)
        except ApiError as exc:
            if exc.err_code != STREAM_NAME_EXISTS:  # made by another gateway first
                raise StorageError(f"cannot create stream {name} in the cluster: {exc}") from None

    def _call(self, subject: str, body: dict | None = None) -> dict:
        """One JetStream API round trip on the blocking connection."""
        try:
            msg = self.blocking.request(subject, request_json(body) if body is not None else b"")
        except NoResponders:
            raise StorageError("JetStream did not answer (no leader, or not enabled)") from None
        except (ClusterUnreachable, TimeoutError, OSError) as exc:
            raise StorageError(f"the cluster did not answer: {exc or type(exc).__name__}") from None
        return api_answer(msg.payload)

    # -- the pump: outboxes to the cluster ------------------------------------------------
    def _mark_dirty(self, key) -> None:
        self._dirty.add(key)
        self._dirty_event.set()

    async def _pump(self) -> None:
        publisher = self.publisher = Publisher(self.nc, self._nursery, lambda: self._running)
        while True:
            await self._dirty_event.wait()
            self._dirty_event = trio.Event()
            dirty, self._dirty = self._dirty, set()
            for key in dirty:
                entry = self.parts.get(key)
                if entry is None:
                    publisher.forget(key)
                    continue
                part, _stream, subject = entry
                outs = part.take_outbox()
                if outs:
                    publisher.submit(key, part, subject, outs)

    # -- plain NATS between gateways ----------------------------------------------------------
    def interest_elsewhere(self, subject: str) -> bool:
        """Other gateways may subscribe to anything: once the store runs, every plain
        publish is offered to them (:meth:`forward_publish`)."""
        return self._sharing

    def forward_publish(self, subject: str, reply: str, header: bytes, payload: bytes) -> bool:
        """A publish no topic captures: to the cluster as ``<prefix>.l.<subject>``, for the
        other gateways' subscribers (core NATS: at most once, as nats-server's routes)."""
        if not self._sharing:
            return False
        try:
            self.nc.publish(f"{self._live}.{subject}", bytes(payload), header or None, reply or None)
        except (ConnectionLost, SlowCluster, ValueError):
            self.forward_dropped += 1
        return True

    def _live_in(self, msg: ServerMsg) -> None:
        subject = msg.subject[len(self._live) + 1:]
        if self.events is not None and subject:
            self.events.plain_publish(subject, msg.reply, msg.header or b"", msg.payload)

    # -- mirrors: the cluster's streams into the caches -------------------------------------
    def _start_partition_mirror(self, key) -> None:
        entry = self.parts.get(key)
        if entry is None or key in self._mirrors:
            return
        part, stream, _subject = entry
        self._start_mirror(key, stream, partial(self._apply_record, key, part), lambda: part.next_sequence,
                           on_gap=partial(self._partition_gap, part, stream))

    def _start_mirror(self, key, stream: str, apply: Callable[[int, ServerMsg, int], None],
                      next_seq: Callable[[], int], gaps_ok: bool = False, on_gap=None) -> None:
        self._mirror_ids += 1
        mirror = _Mirror(self, stream, f"{self._inbox}.m{self._mirror_ids}", apply, next_seq, gaps_ok)
        mirror.on_gap = on_gap
        self._mirrors[key] = mirror
        self._nursery.start_soon(mirror.run)

    def _restart_mirrors(self) -> None:
        for mirror in self._mirrors.values():
            mirror.restart.set()

    def _partition_gap(self, part: RemotePartition, stream: str, seq: int) -> bool:
        """A mirror got ``seq`` while expecting less. True when the stream's retention
        removed what lies between (the cache then restarts at its first message)."""
        try:
            first = int(self._call(f"$JS.API.STREAM.INFO.{stream}").get("state", {}).get("first_seq", 0))
        except (ApiError, StorageError):
            return False
        if first > part.next_sequence and seq >= first:
            log.info("stream %s starts at %d (retention): cache restarts there", stream, first)
            part.skip_to(first - 1)
            return True
        return False

    def _apply_record(self, key, part: RemotePartition, seq: int, msg: ServerMsg, stored_ns: int) -> None:
        try:
            sm = decode_message(msg.header)
        except (InvalidArgument, FerryError, ValueError):
            # Not written by Ferry (a NATS client published to the stream's subject):
            # stored as such, with an id and time every gateway derives alike.
            ms = stored_ns // 1_000_000
            lo, hi = uuid7_parts(ms, seq)
            try:
                tlv = nats_to_canonical(msg.header, msg.subject) if msg.header else b""
            except Exception:  # noqa: BLE001 - headers Ferry cannot hold: payload only
                tlv = b""
            mid, timestamp, origin, headers, producer = (hi << 64) | lo, stored_ns // 1000, 0, tlv, None
        else:
            mid, timestamp, origin, headers = sm.id, sm.timestamp, sm.origin_timestamp, sm.headers
            producer = sm.producer
        result = part.apply(seq, mid, timestamp, origin, headers, msg.payload, producer)
        if result is not None and self.events is not None:  # readable here now: the broker's visibility path
            self.events.applied(key, part, result, [AppendInput(msg.payload, headers, mid, origin)], None)


class _Conflict(StorageConflict):
    """The metadata log moved past the entry this write followed."""


class _Mirror:
    """An ordered push consumer applying one stream to its cache (module docstring)."""

    def __init__(self, store: JetStreamStore, stream: str, inbox: str, apply, next_seq, gaps_ok: bool) -> None:
        self.store, self.stream, self.inbox = store, stream, inbox
        self.gaps_ok = gaps_ok  # a KV bucket keeps one message per key: sequences skip
        self.on_gap = None  # (seq) -> True when the gap is real (retention) and was handled
        self.apply, self.next_seq = apply, next_seq
        self.restart = trio.Event()
        self.stopped = False
        self.expect = 0
        self.heard = 0.0
        self.sid: int | None = None
        self.consumer = ""

    def stop(self) -> None:
        self.stopped = True
        self.restart.set()

    async def run(self) -> None:
        nc = self.store.nc
        attempt = 0
        while not self.stopped:
            self.restart = trio.Event()
            self.expect = self.next_seq()
            self.sid = nc.subscribe(self.inbox, self._deliver) if nc.connected else None
            try:
                if self.sid is None:
                    raise ConnectionLost("not connected")
                doc = api_answer((await nc.request(f"$JS.API.CONSUMER.CREATE.{self.stream}", request_json(
                    mirror_consumer(self.stream, self.inbox, self.expect)))).payload)
                self.consumer = doc.get("name", "")
                attempt = 0
            except (ApiError, ConnectionLost, TimeoutError, NoResponders, SlowCluster) as exc:
                log.info("mirror of %s not started yet: %s", self.stream, exc)
                self._drop()
                await trio.sleep(RETRY_BACKOFF_S[min(attempt, len(RETRY_BACKOFF_S) - 1)])
                attempt += 1
                continue
            self.heard = trio.current_time()
            while not self.stopped:
                with trio.move_on_after(MIRROR_SILENCE_S):
                    await self.restart.wait()
                if self.restart.is_set() or trio.current_time() - self.heard >= MIRROR_SILENCE_S:
                    break
            self._drop()

    def _drop(self) -> None:
        nc = self.store.nc
        if self.sid is not None:
            nc.unsubscribe(self.sid)
            self.sid = None
        if self.consumer and nc.connected:
            try:
                nc.request_cb(f"$JS.API.CONSUMER.DELETE.{self.stream}.{self.consumer}", b"", None,
                              lambda _outcome: None)
            except (ConnectionLost, SlowCluster):
                pass
        self.consumer = ""

    def _deliver(self, msg: ServerMsg) -> None:
        self.heard = trio.current_time()
        if self.restart.is_set():
            return
        header = msg.header
        # A status line ("NATS/1.0 100 ...") marks a control message; stored messages' blocks
        # start "NATS/1.0\r\n", so one byte tells them apart without parsing the block.
        if header is not None and header[8:9] == b" " and status_of(msg)[0] == STATUS_CONTROL:
            if msg.reply:  # flow control: answer so the server sends on (ADR-9)
                self.store.nc.publish(msg.reply, b"")
            else:  # idle heartbeat: it names the last sequence sent; past ours = a gap
                block = headers_of(msg)
                last = block.get("Nats-Last-Stream") if block is not None else None
                if last is not None and last.isdigit() and int(last) >= self.expect and not self.gaps_ok:
                    self.restart.set()
            return
        info = ack_info(msg.reply)
        if info is None:
            return
        seq, stored_ns = info
        if seq < self.expect:
            return
        if seq > self.expect and not self.gaps_ok:
            if self.on_gap is not None and self.on_gap(seq):
                self.expect = self.next_seq()
            if seq != self.expect:
                self.restart.set()  # a message went missing in flight: start again from ours
                return
        try:
            self.apply(seq, msg, stored_ns)
        except FerryError as exc:
            log.warning("mirror of %s could not apply %d (%s); it starts again from there", self.stream, seq, exc)
            self.restart.set()
            return
        self.expect = seq + 1


def _tls_context(cfg: "StoreConfig") -> ssl.SSLContext | None:
    if not (cfg.tls_ca or cfg.tls_cert or any(u.startswith("tls://") for u in cfg.urls)):
        return None
    ctx = ssl.create_default_context(cafile=cfg.tls_ca or None)
    if cfg.tls_cert:
        ctx.load_cert_chain(cfg.tls_cert, cfg.tls_key or None)
    return ctx


__all__ = ["JetStreamStore"]
