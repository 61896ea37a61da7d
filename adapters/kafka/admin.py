"""Metadata and the topic admin APIs on Ferry's metadata, sans-I/O.

Theory of operation
-------------------
This gateway is the cluster's one broker: Metadata names it as the leader,
replica and in-sync replica of every partition, with the advertised host and
port (never a wildcard address: a client cannot connect to 0.0.0.0). Topic
names follow the one addressing rule (adapters/kafka/context.py); a topic's
Kafka id is derived from its stream id, topic id and creation time, so it is
stable for the topic's life and differs for a topic re-created under the same
name (Kafka's topic ids, KIP-516, serve the same purpose).

A Metadata request naming a topic that does not exist creates it when the
listener's ``auto_create_topics`` is on and the request allows it (v4+), as
Kafka's ``auto.create.topics.enable`` does, with ``default_partitions``
partitions, creating the stream first when the name needs one; the user
needs create_topic (and create_stream) for that, else the topic is
UNKNOWN_TOPIC_OR_PARTITION. Ferry creates the topic at once, so the answer
already lists its partitions (Kafka first answers LEADER_NOT_AVAILABLE).

Topic configs are one table, :data:`TOPIC_CONFIGS`, which CreateTopics,
IncrementalAlterConfigs and DescribeConfigs all read: each Kafka key Ferry
holds names the core field it lands in (retention.ms and retention.bytes are
the topic's settings, segment.bytes its segment size, fixed at creation) and
how its value crosses; a key with one fixed value (``cleanup.policy=delete``)
accepts that value as a no-op. Any other key is INVALID_CONFIG, naming it: a
topic whose ``cleanup.policy=compact`` was silently ignored would lose data its
users expect to keep. DescribeConfigs reports a key set on the topic as
DYNAMIC_TOPIC_CONFIG, else its default as DEFAULT_CONFIG, so an alter shows
in the next describe. Replication factors above 1 are
INVALID_REPLICATION_FACTOR with Kafka's message, since there is one broker;
a manual replica assignment (CreateTopics, CreatePartitions) is valid when
each partition's replica list names one registered broker (one copy; with one
gateway, this one), and is checked as Kafka's controller checks one
(INVALID_REPLICA_ASSIGNMENT otherwise).

IncrementalAlterConfigs (KIP-339) checks a request as Kafka's
``ConfigAdminManager.preprocess`` does before anything else (a resource named
twice, a key named twice in one resource, a null value for anything but
DELETE: INVALID_REQUEST), then the topic (UNKNOWN_TOPIC_OR_PARTITION), the
permission (manage_topic: Kafka's ALTER_CONFIGS) and the operations: APPEND
and SUBTRACT apply only to list keys (INVALID_CONFIG otherwise, as Kafka's
``ConfigurationControlManager`` answers). A resource's changes are all made or
none. Broker configs come from Ferry's configuration file and none can be
changed at run time: Kafka's answer for a broker config it cannot update
dynamically is INVALID_REQUEST (``DynamicBrokerConfig.validateConfigs``; the
code is kept for compatibility, KAFKA-13609).

DeleteRecords moves a partition's log start offset up to the given offset
(-1: the high watermark) by a logical truncation at the byte position of that
record (core/topicops.py ``truncate_partition_to_offset``), which Fetch and
ListOffsets then honour (adapters/kafka/dataplane.py); it needs manage_topic,
as purging a topic does (Kafka's DELETE on the topic).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Callable

from core.errors import FerryError, InvalidArgument, InvalidOffset, NotFound, StorageError
from core.metadb import MAX_INT64
from core.model import TopicSettings
from core.permissions import Action

from .context import can_describe
from .errors import ErrorCode as E
from .messages import METADATA
from .messages_admin import (CREATE_PARTITIONS, CREATE_TOPICS, DELETE_RECORDS, DELETE_TOPICS, DESCRIBE_CLUSTER,
                             DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS)
from .placement import topic_key

MAX_PARTITIONS = 1000  # Iggy's per-topic limit, which the core enforces
RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4  # ConfigResource.Type ids
SOURCE_TOPIC, SOURCE_DEFAULT = 1, 5  # DescribeConfigs config sources (DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG)
MS_PER_US = 1000

_M_BROKER = METADATA.response.structs["MetadataResponseBroker"]
_M_TOPIC = METADATA.response.structs["MetadataResponseTopic"]
_M_PART = METADATA.response.structs["MetadataResponsePartition"]
_CT_RESULT = CREATE_TOPICS.response.structs["CreatableTopicResult"]
_CT_CONFIG = CREATE_TOPICS.response.structs["CreatableTopicConfigs"]
_DT_RESULT = DELETE_TOPICS.response.structs["DeletableTopicResult"]
_CP_RESULT = CREATE_PARTITIONS.response.structs["CreatePartitionsTopicResult"]
_DC_RESULT = DESCRIBE_CONFIGS.response.structs["DescribeConfigsResult"]
_DC_CONFIG = DESCRIBE_CONFIGS.response.structs["DescribeConfigsResourceResult"]
_CLUSTER_BROKER = DESCRIBE_CLUSTER.response.structs["DescribeClusterBroker"]
_IAC_RESULT = INCREMENTAL_ALTER_CONFIGS.response.structs["AlterConfigsResourceResponse"]
_DR_TOPIC = DELETE_RECORDS.response.structs["DeleteRecordsTopicResult"]
_DR_PART = DELETE_RECORDS.response.structs["DeleteRecordsPartitionResult"]

# IncrementalAlterConfigs operations (Kafka's AlterConfigOp.OpType ids)
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
OP_NAMES = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}
HIGH_WATERMARK = -1  # DeleteRecords' offset for "everything" (DeleteRecordsRequest.HIGH_WATERMARK)
NO_LOW_WATERMARK = -1  # a failed DeleteRecords partition's low watermark (DeleteRecordsResponse.INVALID_LOW_WATERMARK)
# retention.ms is a Java long of ms; the core keeps µs in an int64, so longer retentions cannot be held.
MAX_RETENTION_MS = MAX_INT64 // MS_PER_US
# segment.bytes is a Java int in Kafka, at least the 14 bytes of a v0 record's
# overhead (LogConfig: LegacyRecord.RECORD_OVERHEAD_V0); both lie inside the
# core's 1..MAX_SEGMENT_BYTES.
MIN_SEGMENT_BYTES, MAX_SEGMENT_BYTES = 14, 2**31 - 1
_SETTINGS_FIELDS = frozenset(f.name for f in dataclasses.fields(TopicSettings))


class ConfigProblem(Exception):
    """A config Ferry refuses: INVALID_CONFIG with this message."""


def _whole(name: str, value: str, lo: int | None, hi: int) -> int:
    """``value`` as Kafka parses a LONG or INT config (decimal digits, surrounding
    blanks ignored), within ``lo..hi``; ConfigProblem otherwise."""
    text = value.strip()
    digits = text[1:] if text[:1] in "+-" else text
    if not digits or not digits.isascii() or not digits.isdigit():
        raise ConfigProblem(f"Invalid value {value} for configuration {name}: not a whole number")
    n = int(text)
    if n > hi or (lo is not None and n < lo):
        bound = f"at most {hi}" if lo is None else f"within {lo}..{hi}"
        raise ConfigProblem(f"Invalid value {value} for configuration {name}: must be {bound}")
    return n


def _retention_ms(value: str, _partitions: int) -> int:
    """retention.ms -> the core's message expiry in µs: -1 keeps records forever (the
    core's 0); 0, Kafka's "expire at once", becomes 1 µs, since 0 means never to the core."""
    ms = _whole("retention.ms", value, -1, MAX_RETENTION_MS)
    return 0 if ms < 0 else max(ms * MS_PER_US, 1)


def _retention_bytes(value: str, partitions: int) -> int:
    """retention.bytes (per partition in Kafka) -> the core's max topic size (per topic):
    negative is unlimited, as in Kafka. 0 cannot be held: it is "unlimited" to the core."""
    n = _whole("retention.bytes", value, None, MAX_INT64 // max(1, partitions))
    if n == 0:
        raise ConfigProblem("retention.bytes=0 is not supported by Ferry: its core reads a size cap of 0 as "
                            "unlimited (-1 is unlimited, a positive value a cap)")
    return 0 if n < 0 else n * partitions


def _segment_bytes(value: str, _partitions: int) -> int:
    return _whole("segment.bytes", value, MIN_SEGMENT_BYTES, MAX_SEGMENT_BYTES)


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """One Kafka topic config Ferry holds (module docstring). ``field`` is the
    ``TopicInfo`` field it lands in (a ``TopicSettings`` field, or one the core
    fixes at creation when ``at_creation``); None for a key with one ``fixed``
    value. ``to_core(value, partitions)`` gives the field's value (raises
    ConfigProblem); 0 in the field means "not set" and shows ``default``."""

    name: str
    field: str | None = None
    to_core: Callable[[str, int], int] | None = None
    to_kafka: Callable[[int, int], str] = lambda v, _partitions: str(v)
    default: Callable[[object], str] = lambda _broker: "-1"  # the broker -> Kafka value when unset
    fixed: str = ""
    list_type: bool = False  # Kafka's LIST type: APPEND and SUBTRACT apply (only to a fixed key here)
    at_creation: bool = False  # the core keeps it for the topic's life: alters may not change it

    def __post_init__(self) -> None:
        # apply_op's list arithmetic starts from the fixed value: a list key with a field
        # would need its stored list instead
        if (self.field is None) != (self.to_core is None) or (self.list_type and self.field):
            raise ValueError(f"topic config {self.name}: a field needs to_core, and only a fixed key may be a list")


TOPIC_CONFIGS = {c.name: c for c in (
    TopicConfig("retention.ms", "message_expiry", _retention_ms, lambda us, _p: str(us // MS_PER_US)),
    TopicConfig("retention.bytes", "max_topic_size", _retention_bytes, lambda size, p: str(size // max(1, p))),
    TopicConfig("segment.bytes", "segment_bytes", _segment_bytes,
                default=lambda broker: str(broker.cfg.log.segment_bytes), at_creation=True),
    TopicConfig("cleanup.policy", fixed="delete", list_type=True),  # no compaction here
    # records are stored decompressed, in the canonical form, and fetched uncompressed
    TopicConfig("compression.type", fixed="uncompressed"),
    TopicConfig("message.timestamp.type", fixed="CreateTime"),
    TopicConfig("min.insync.replicas", fixed="1"),  # one copy: the leader is every in-sync replica
)}


def _unsupported(name: str) -> str:
    return f"config {name!r} is not supported by Ferry (supported: {', '.join(TOPIC_CONFIGS)})"


def apply_op(entry: TopicConfig, op: int, value: str | None, partitions: int):
    """The field value ``entry`` has after operation ``op`` with ``value`` (None for a
    fixed key, whose one value is then all that is left). Raises ConfigProblem."""
    if op == OP_DELETE:
        return 0 if entry.field else None  # back to the default
    if op in (OP_APPEND, OP_SUBTRACT):
        if not entry.list_type:  # ConfigurationControlManager.incrementalAlterConfigResource
            raise ConfigProblem(f"cannot {OP_NAMES[op]} to {entry.name}: it is not a list")
        given = [v.strip() for v in value.split(",")]
        items = [entry.fixed]  # a list key is a fixed one (TopicConfig.list_type)
        items = items + [v for v in given if v not in items] if op == OP_APPEND else \
            [v for v in items if v not in given]
        value = ",".join(items)
    if entry.field is None:
        got = [v.strip() for v in value.split(",")] if entry.list_type else [value.strip()]
        if got != [entry.fixed]:
            raise ConfigProblem(f"{entry.name}={value} is not supported by Ferry (only {entry.fixed})")
        return None
    return entry.to_core(value, partitions)


def topic_uuid(info) -> uuid.UUID:
    """The topic's Kafka id (module docstring); never the zero UUID."""
    return uuid.uuid5(uuid.NAMESPACE_OID, f"ferry/{info.stream_id}/{info.id}/{info.created_at}")


class Admin:
    """Metadata and the admin APIs for one connection (module docstring)."""

    def __init__(self, ctx, access) -> None:
        self.ctx = ctx
        self.broker = ctx.broker
        self.access = access

    # -- Metadata --------------------------------------------------------------------------
    def metadata(self, version: int, body):
        ctx = self.ctx
        topics = []
        if body.topics is None or (version == 0 and not body.topics):
            for name, info in sorted(ctx.topics(), key=lambda item: item[0]):
                if can_describe(self.access, info.stream_id, info.id):
                    topics.append(self._topic_metadata(name, info))
        else:
            by_id = None
            for req in body.topics:
                name = req.name
                if name is None:  # v10+: by topic id
                    by_id = by_id if by_id is not None else {topic_uuid(i): (n, i) for n, i in ctx.topics()}
                    found = by_id.get(req.topic_id)
                    if found is None:
                        topics.append(_M_TOPIC.make(error_code=int(E.UNKNOWN_TOPIC_ID), name=None,
                                                    topic_id=req.topic_id))
                        continue
                    name = found[0]
                allow = body.allow_auto_topic_creation if version >= 4 else True
                topics.append(self._named_metadata(name, allow))
        # every gateway serving Kafka is a broker (adapters/kafka/placement.py); the one asked
        # names itself controller: any gateway takes the admin requests a controller gets
        brokers = tuple(_M_BROKER.make(node_id=b.node_id, host=b.host, port=b.port, rack=None)
                        for b in ctx.placement().brokers())
        return METADATA.response.make(brokers=brokers, cluster_id=ctx.cluster_id, controller_id=ctx.node_id,
                                      topics=tuple(topics))

    def _named_metadata(self, name: str, allow_create: bool):
        ctx = self.ctx
        pair = ctx.resolve(name)
        if pair is None:
            return _M_TOPIC.make(error_code=int(E.INVALID_TOPIC_EXCEPTION), name=name)
        info = ctx.topic(name)
        if info is None:
            if not (allow_create and ctx.options.auto_create_topics):
                return _M_TOPIC.make(error_code=int(E.UNKNOWN_TOPIC_OR_PARTITION), name=name)
            info, err, _msg = self.create(pair, ctx.options.default_partitions)
            if info is None:
                if err == int(E.TOPIC_AUTHORIZATION_FAILED):
                    err = int(E.UNKNOWN_TOPIC_OR_PARTITION)  # Kafka hides what the user may not create
                return _M_TOPIC.make(error_code=err, name=name)
        if not can_describe(self.access, info.stream_id, info.id):
            return _M_TOPIC.make(error_code=int(E.TOPIC_AUTHORIZATION_FAILED), name=name)
        return self._topic_metadata(name, info)

    def _topic_metadata(self, name: str, info):
        placement = self.ctx.placement()  # one copy per partition: its leader is its one replica
        key = topic_key(info)
        leaders = [placement.leader(key, pid).node_id for pid in range(info.partitions_count)]
        parts = tuple(_M_PART.make(error_code=0, partition_index=pid, leader_id=node, leader_epoch=0,
                                   replica_nodes=(node,), isr_nodes=(node,), offline_replicas=())
                      for pid, node in enumerate(leaders))
        return _M_TOPIC.make(error_code=0, name=name, topic_id=topic_uuid(info), is_internal=False,
                             partitions=parts)

    # -- creating --------------------------------------------------------------------------
    def create(self, pair: tuple[str, str], partitions: int, settings=None, *, validate_only: bool = False,
               **at_creation):
        """Create topic ``pair``: (TopicInfo, 0, None), or (None, error code, message).
        ``at_creation`` are the core's create-time fields (``segment_bytes``)."""
        stream_name, topic_name = pair
        broker = self.broker
        try:
            stream = broker.get_stream(stream_name)
        except NotFound:
            stream = None
        except FerryError as exc:
            return None, int(E.INVALID_TOPIC_EXCEPTION), str(exc)
        if stream is None and not self.access.can(Action.CREATE_STREAM):
            return None, int(E.TOPIC_AUTHORIZATION_FAILED), f"may not create stream {stream_name!r}"
        if stream is not None and not self.access.can(Action.CREATE_TOPIC, stream.id):
            return None, int(E.TOPIC_AUTHORIZATION_FAILED), f"may not create topics in stream {stream_name!r}"
        if not 1 <= partitions <= MAX_PARTITIONS:
            return None, int(E.INVALID_PARTITIONS), f"Number of partitions must be in 1..{MAX_PARTITIONS}."
        if validate_only:
            return None, 0, None
        try:
            if stream is None:
                stream = broker.create_stream(stream_name)
            kwargs = {"settings": settings} if settings is not None else {}
            return broker.create_topic(stream.id, topic_name, partitions, **kwargs, **at_creation), 0, None
        except FerryError as exc:
            try:
                broker.get_topic(stream_name, topic_name)
            except FerryError:
                return None, int(E.INVALID_REQUEST), str(exc)
            return None, int(E.TOPIC_ALREADY_EXISTS), f"Topic '{topic_name}' already exists."

    def create_topics(self, version: int, body):
        results = []
        for t in body.topics:
            results.append(self._create_one(version, t, body.validate_only))
        return CREATE_TOPICS.response.make(topics=tuple(results))

    def _create_one(self, version: int, t, validate_only: bool):
        ctx = self.ctx
        pair = ctx.resolve(t.name)
        if pair is None:
            return _CT_RESULT.make(name=t.name, error_code=int(E.INVALID_TOPIC_EXCEPTION),
                                   error_message=f"Topic name {t.name!r} is illegal")
        if ctx.topic(t.name) is not None:
            return _CT_RESULT.make(name=t.name, error_code=int(E.TOPIC_ALREADY_EXISTS),
                                   error_message=f"Topic '{t.name}' already exists.")
        if t.assignments:
            err, msg = self._manual_assignment(t)
            if err:
                return _CT_RESULT.make(name=t.name, error_code=err, error_message=msg)
            partitions = len(t.assignments)
        elif t.replication_factor not in (-1, 1):
            return _CT_RESULT.make(
                name=t.name, error_code=int(E.INVALID_REPLICATION_FACTOR),
                error_message=(f"Unable to replicate the partition {t.replication_factor} time(s): The target "
                               "replication factor of {0} cannot be reached because only 1 broker(s) are "
                               "registered.").replace("{0}", str(t.replication_factor)))
        else:
            partitions = ctx.options.default_partitions if t.num_partitions == -1 else t.num_partitions
        try:
            settings, at_creation = self._settings(t.configs, partitions)
        except ConfigProblem as exc:
            return _CT_RESULT.make(name=t.name, error_code=int(E.INVALID_CONFIG), error_message=str(exc))
        info, err, msg = self.create(pair, partitions, settings, validate_only=validate_only, **at_creation)
        if err:
            return _CT_RESULT.make(name=t.name, error_code=err, error_message=msg)
        result = {"name": t.name, "error_code": 0, "error_message": None, "num_partitions": partitions,
                  "replication_factor": 1}
        if info is not None:
            result["topic_id"] = topic_uuid(info)
            result["configs"] = tuple(_CT_CONFIG.make(name=k, value=v, read_only=False, config_source=src,
                                                      is_sensitive=False)
                                      for k, v, src in self._configs(info))
        return _CT_RESULT.make(**result)

    @staticmethod
    def _settings(configs, partitions: int) -> tuple[TopicSettings, dict]:
        """(TopicSettings, the core's create-time fields) from CreateTopics configs, through
        :data:`TOPIC_CONFIGS`; raises ConfigProblem (a null value too: Kafka's controller
        refuses null topic configs)."""
        values = {c.field: 0 for c in TOPIC_CONFIGS.values() if c.field}
        for c in configs:
            entry = TOPIC_CONFIGS.get(c.name)
            if entry is None:
                raise ConfigProblem(_unsupported(c.name))
            if c.value is None:
                raise ConfigProblem(f"config {c.name!r} has a null value")
            if entry.field:
                values[entry.field] = apply_op(entry, OP_SET, c.value, partitions)
            else:
                apply_op(entry, OP_SET, c.value, partitions)
        settings = TopicSettings(**{k: v for k, v in values.items() if k in _SETTINGS_FIELDS})
        return settings, {k: v for k, v in values.items() if k not in _SETTINGS_FIELDS}

    def _configs(self, info) -> list[tuple[str, str, int]]:
        """(name, value, source) of a topic's configs as Kafka names them (:data:`TOPIC_CONFIGS`):
        DYNAMIC_TOPIC_CONFIG for a value set on the topic, else DEFAULT_CONFIG."""
        out = []
        for c in TOPIC_CONFIGS.values():
            value = getattr(info, c.field) if c.field else 0
            if value:
                out.append((c.name, c.to_kafka(value, info.partitions_count), SOURCE_TOPIC))
            else:
                out.append((c.name, c.fixed if c.field is None else c.default(self.broker), SOURCE_DEFAULT))
        return out

    # -- deleting, growing ----------------------------------------------------------------
    def delete_topics(self, version: int, body):
        names = list(body.topic_names) if version < 6 else [t.name for t in body.topics]
        if version >= 6:
            by_id = None
            for i, t in enumerate(body.topics):
                if t.name is None:
                    by_id = by_id if by_id is not None else {topic_uuid(inf): n for n, inf in self.ctx.topics()}
                    names[i] = by_id.get(t.topic_id)
        results = []
        for i, name in enumerate(names):
            tid = body.topics[i].topic_id if version >= 6 else None
            if name is None:
                results.append(_DT_RESULT.make(name=None, topic_id=tid, error_code=int(E.UNKNOWN_TOPIC_ID)))
                continue
            info = self.ctx.topic(name)
            if info is None:
                err, msg = int(E.UNKNOWN_TOPIC_OR_PARTITION), "This server does not host this topic-partition."
            elif not self.access.can(Action.MANAGE_TOPIC, info.stream_id, info.id):
                err, msg = int(E.TOPIC_AUTHORIZATION_FAILED), f"may not delete topic {name!r}"
            else:
                err, msg = 0, None
                try:
                    self.broker.delete_topic(info.stream_id, info.id)
                    if self.ctx.groups is not None:  # its committed offsets go with it
                        self.ctx.groups.topic_deleted(name)
                except FerryError as exc:
                    err, msg = int(E.UNKNOWN_SERVER_ERROR), str(exc)
            results.append(_DT_RESULT.make(name=name, topic_id=topic_uuid(info) if info else (tid or uuid.UUID(int=0)),
                                           error_code=err, error_message=msg))
        return DELETE_TOPICS.response.make(responses=tuple(results))

    def _manual_assignment(self, t) -> tuple[int, str | None]:
        """(0, None) when CreateTopics topic ``t``'s replica assignments are valid on this
        one-broker cluster, else (error code, message): Kafka's checks
        (ReplicationControlManager.createTopic): replication factor and partition count
        -1 (INVALID_REQUEST), partitions once each and numbered 0..n-1, replica lists
        valid (INVALID_REPLICA_ASSIGNMENT, :meth:`_replicas_problem`)."""
        if t.replication_factor != -1:
            return int(E.INVALID_REQUEST), ("A manual partition assignment was specified, but replication factor "
                                            "was not set to -1.")
        if t.num_partitions != -1:
            return int(E.INVALID_REQUEST), ("A manual partition assignment was specified, but numPartitions was "
                                            "not set to -1.")
        seen = set()
        for a in t.assignments:
            if a.partition_index in seen:
                return int(E.INVALID_REPLICA_ASSIGNMENT), ("Found multiple manual partition assignments for "
                                                           f"partition {a.partition_index}")
            seen.add(a.partition_index)
        problem = self._replicas_problem(a.broker_ids for a in t.assignments)
        if problem:
            return int(E.INVALID_REPLICA_ASSIGNMENT), problem
        if seen != set(range(len(seen))):
            return int(E.INVALID_REPLICA_ASSIGNMENT), "partitions should be a consecutive 0-based integer sequence"
        return 0, None

    def _replicas_problem(self, replica_lists) -> str | None:
        """Why a manual assignment's replica lists are invalid here, or None. Kafka's
        ReplicationControlManager.validateManualPartitionAssignment refuses an empty list,
        a broker not registered, a broker named twice; Ferry keeps one copy of a partition,
        so a list names one broker (which gateway leads it is Ferry's placement,
        adapters/kafka/placement.py: with one gateway, this one)."""
        registered = {b.node_id for b in self.ctx.placement().brokers()}
        for ids in replica_lists:
            if not ids:
                return "The manual partition assignment includes an empty replica list."
            for broker_id in ids:
                if broker_id not in registered:
                    return (f"The manual partition assignment includes broker {broker_id}, but no such broker is "
                            "registered.")
            if len(set(ids)) != len(ids):
                twice = next(b for b in ids if ids.count(b) > 1)
                return f"The manual partition assignment includes the broker {twice} more than once."
            if len(ids) > 1:
                return (f"The manual partition assignment names {len(ids)} replicas: Ferry keeps one copy of a "
                        "partition, so an assignment names one broker.")
        return None

    def create_partitions(self, version: int, body):
        results = []
        for t in body.topics:
            info = self.ctx.topic(t.name)
            err, msg = 0, None
            if info is None:
                err, msg = int(E.UNKNOWN_TOPIC_OR_PARTITION), "This server does not host this topic."
            elif not self.access.can(Action.MANAGE_TOPIC, info.stream_id, info.id):
                err, msg = int(E.TOPIC_AUTHORIZATION_FAILED), f"may not alter topic {t.name!r}"
            elif t.count <= info.partitions_count:
                err, msg = int(E.INVALID_PARTITIONS), (f"Topic currently has {info.partitions_count} partitions, "
                                                       f"which is higher than the requested {t.count}.")
            elif t.count > MAX_PARTITIONS:
                err, msg = int(E.INVALID_PARTITIONS), f"Number of partitions must be at most {MAX_PARTITIONS}."
            elif t.assignments is not None and len(t.assignments) != t.count - info.partitions_count:
                err, msg = int(E.INVALID_REPLICA_ASSIGNMENT), (
                    f"Attempted to add {t.count - info.partitions_count} additional partition(s), but only "
                    f"{len(t.assignments)} assignment(s) were specified.")
            elif t.assignments and (problem := self._replicas_problem(a.broker_ids for a in t.assignments)):
                err, msg = int(E.INVALID_REPLICA_ASSIGNMENT), problem
            elif not body.validate_only:
                try:
                    self.broker.add_partitions(info.stream_id, info.id, t.count - info.partitions_count)
                except FerryError as exc:
                    err, msg = int(E.INVALID_PARTITIONS), str(exc)
            results.append(_CP_RESULT.make(name=t.name, error_code=err, error_message=msg))
        return CREATE_PARTITIONS.response.make(results=tuple(results))

    # -- configs, cluster -------------------------------------------------------------------
    def describe_configs(self, version: int, body):
        results = []
        for r in body.resources:
            configs, err, msg = (), 0, None
            if r.resource_type == RESOURCE_TOPIC:
                info = self.ctx.topic(r.resource_name)
                if info is None:
                    err, msg = int(E.UNKNOWN_TOPIC_OR_PARTITION), "This server does not host this topic."
                elif not can_describe(self.access, info.stream_id, info.id):
                    err, msg = int(E.TOPIC_AUTHORIZATION_FAILED), None
                else:
                    configs = self._config_values(self._configs(info), r.configuration_keys, version)
            elif r.resource_type == RESOURCE_BROKER:
                broker_configs = [("auto.create.topics.enable", str(self.ctx.options.auto_create_topics).lower(),
                                   SOURCE_DEFAULT),
                                  ("num.partitions", str(self.ctx.options.default_partitions), SOURCE_DEFAULT),
                                  ("default.replication.factor", "1", SOURCE_DEFAULT)]
                configs = self._config_values(broker_configs, r.configuration_keys, version)
            else:
                err, msg = int(E.INVALID_REQUEST), f"resource type {r.resource_type} is not supported"
            results.append(_DC_RESULT.make(error_code=err, error_message=msg, resource_type=r.resource_type,
                                           resource_name=r.resource_name, configs=configs))
        return DESCRIBE_CONFIGS.response.make(results=tuple(results))

    def incremental_alter_configs(self, version: int, body):
        """IncrementalAlterConfigs v0-1 (module docstring)."""
        named = Counter((r.resource_type, r.resource_name) for r in body.resources)
        results = []
        for r in body.resources:
            if named[(r.resource_type, r.resource_name)] > 1:  # ConfigAdminManager.preprocess: both refused
                err, msg = int(E.INVALID_REQUEST), "a resource may appear once in a request"
            else:
                err, msg = self._alter_resource(r, body.validate_only)
            results.append(_IAC_RESULT.make(error_code=err, error_message=msg, resource_type=r.resource_type,
                                            resource_name=r.resource_name))
        return INCREMENTAL_ALTER_CONFIGS.response.make(responses=tuple(results))

    def _alter_resource(self, r, validate_only: bool) -> tuple[int, str | None]:
        names = [c.name for c in r.configs]
        if len(set(names)) != len(names):
            return int(E.INVALID_REQUEST), "a config key may appear once per resource"
        nulls = [c.name for c in r.configs if c.config_operation != OP_DELETE and c.value is None]
        if nulls:
            return int(E.INVALID_REQUEST), f"a null value is only for DELETE: {', '.join(nulls)}"
        unknown = [c.config_operation for c in r.configs if c.config_operation not in OP_NAMES]
        if unknown:
            return int(E.INVALID_REQUEST), f"unknown config operation {unknown[0]}"
        if r.resource_type == RESOURCE_BROKER:
            return self._alter_broker(r)
        if r.resource_type != RESOURCE_TOPIC:
            return int(E.INVALID_REQUEST), f"resource type {r.resource_type} is not supported"
        info = self.ctx.topic(r.resource_name)
        if info is None:
            return int(E.UNKNOWN_TOPIC_OR_PARTITION), "This server does not host this topic."
        if not self.access.can(Action.MANAGE_TOPIC, info.stream_id, info.id):
            return int(E.TOPIC_AUTHORIZATION_FAILED), f"may not alter the configs of topic {r.resource_name!r}"
        try:
            settings = self._altered(info, r.configs)
            settings = settings.checked()
            if not validate_only and settings != info.settings:
                self.broker.update_topic(info.stream_id, info.id, settings=settings)
        except (ConfigProblem, InvalidArgument) as exc:  # InvalidArgument: TopicSettings.checked()
            return int(E.INVALID_CONFIG), str(exc)
        except NotFound:  # deleted since the lookup
            return int(E.UNKNOWN_TOPIC_OR_PARTITION), "This server does not host this topic."
        except FerryError as exc:
            return int(E.UNKNOWN_SERVER_ERROR), str(exc)
        return 0, None

    @staticmethod
    def _altered(info, configs) -> TopicSettings:
        """The topic's settings after ``configs``' operations, all checked before any is
        made (a resource's changes are made together or not at all); ConfigProblem."""
        values = {c.field: getattr(info, c.field) for c in TOPIC_CONFIGS.values() if c.field}
        for c in configs:
            entry = TOPIC_CONFIGS.get(c.name)
            if entry is None:
                raise ConfigProblem(_unsupported(c.name))
            value = apply_op(entry, c.config_operation, c.value, info.partitions_count)
            if entry.field:
                if entry.at_creation and value != values[entry.field]:
                    raise ConfigProblem(f"{entry.name} is fixed when a topic is created (the core keeps a "
                                        "topic's log settings for its life)")
                values[entry.field] = value
        return dataclasses.replace(info.settings, **{k: v for k, v in values.items() if k in _SETTINGS_FIELDS})

    def _alter_broker(self, r) -> tuple[int, str | None]:
        """Broker configs: the resource name is empty (the cluster default) or this node's
        id, as Kafka's preprocess checks; no key can be changed at run time (module docstring)."""
        if r.resource_name not in ("", str(self.ctx.node_id)):
            return int(E.INVALID_REQUEST), f"broker {r.resource_name!r} is not this one (node id {self.ctx.node_id})"
        if not r.configs:
            return 0, None
        return int(E.INVALID_REQUEST), (f"broker configs cannot be changed at run time: "
                                        f"{', '.join(c.name for c in r.configs)} (Ferry reads them from its "
                                        "configuration at start)")

    @staticmethod
    def _config_values(items, keys, version: int):
        wanted = None if keys is None else set(keys)
        return tuple(_DC_CONFIG.make(name=n, value=v, read_only=False, is_default=src == SOURCE_DEFAULT,
                                     config_source=src, is_sensitive=False)
                     for n, v, src in items if wanted is None or n in wanted)

    # -- records ---------------------------------------------------------------------------
    def delete_records(self, version: int, body):
        """DeleteRecords v0-2 (module docstring): each partition's new low watermark."""
        topics = []
        for t in body.topics:
            info = self.ctx.topic(t.name)
            err = 0
            if info is None:
                err = int(E.UNKNOWN_TOPIC_OR_PARTITION)
            elif not self.access.can(Action.MANAGE_TOPIC, info.stream_id, info.id):
                err = int(E.TOPIC_AUTHORIZATION_FAILED)
            parts = []
            for p in t.partitions:
                low, code = (NO_LOW_WATERMARK, err) if err else self._delete_before(info, p.partition_index, p.offset)
                parts.append(_DR_PART.make(partition_index=p.partition_index, low_watermark=low, error_code=code))
            topics.append(_DR_TOPIC.make(name=t.name, partitions=tuple(parts)))
        return DELETE_RECORDS.response.make(topics=tuple(topics))

    def _delete_before(self, info, pid: int, offset: int) -> tuple[int, int]:
        """(low watermark, 0) after moving partition ``pid``'s start to ``offset``, or
        (-1, error code). Kafka's ``Partition.deleteRecordsOnLeader``: -1 is the high
        watermark, another negative offset or one past the high watermark is
        OFFSET_OUT_OF_RANGE, and an offset at or below the start answers the start."""
        if not 0 <= pid < info.partitions_count:
            return NO_LOW_WATERMARK, int(E.UNKNOWN_TOPIC_OR_PARTITION)
        try:
            if offset == HIGH_WATERMARK:
                offset = self.broker.partition(info.stream_id, info.id, pid).durable_next_offset  # the HW
            return self.broker.topic_state.truncate_partition_to_offset(info.stream_id, info.id, pid, offset), 0
        except InvalidOffset:
            return NO_LOW_WATERMARK, int(E.OFFSET_OUT_OF_RANGE)
        except NotFound:
            return NO_LOW_WATERMARK, int(E.UNKNOWN_TOPIC_OR_PARTITION)
        except StorageError:
            return NO_LOW_WATERMARK, int(E.KAFKA_STORAGE_ERROR)
        except FerryError:
            return NO_LOW_WATERMARK, int(E.UNKNOWN_SERVER_ERROR)

    def describe_cluster(self, version: int, body):
        ctx = self.ctx
        return DESCRIBE_CLUSTER.response.make(
            cluster_id=ctx.cluster_id, controller_id=ctx.node_id,
            brokers=tuple(_CLUSTER_BROKER.make(broker_id=b.node_id, host=b.host, port=b.port, rack=None)
                          for b in ctx.placement().brokers()))
