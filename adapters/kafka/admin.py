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

CreateTopics takes the topic configs Ferry can honour (:data:`TOPIC_CONFIGS`)
and refuses others with INVALID_CONFIG, naming the key: a topic whose
``cleanup.policy=compact`` was silently ignored would lose data its users
expect to keep. Replication factors above 1 are INVALID_REPLICATION_FACTOR
with Kafka's message, since there is one broker.
"""

from __future__ import annotations

import dataclasses
import uuid

from core.errors import FerryError, NotFound
from core.model import TopicSettings
from core.permissions import Action

from .context import can_describe
from .errors import ErrorCode as E
from .messages import METADATA
from .messages_admin import CREATE_PARTITIONS, CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CLUSTER, DESCRIBE_CONFIGS

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

# Topic configs CreateTopics accepts: Kafka name -> how it sets TopicSettings.
# retention.ms is Ferry's message expiry; retention.bytes is per partition in
# Kafka and Ferry's max_topic_size is per topic, so it is multiplied by the
# partition count; cleanup.policy may only be "delete" (no compaction here).
TOPIC_CONFIGS = ("retention.ms", "retention.bytes", "cleanup.policy")


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
        brokers = (_M_BROKER.make(node_id=ctx.node_id, host=ctx.host, port=ctx.port, rack=None),)
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
        node = self.ctx.node_id
        parts = tuple(_M_PART.make(error_code=0, partition_index=pid, leader_id=node, leader_epoch=0,
                                   replica_nodes=(node,), isr_nodes=(node,), offline_replicas=())
                      for pid in range(info.partitions_count))
        return _M_TOPIC.make(error_code=0, name=name, topic_id=topic_uuid(info), is_internal=False,
                             partitions=parts)

    # -- creating --------------------------------------------------------------------------
    def create(self, pair: tuple[str, str], partitions: int, settings=None, *, validate_only: bool = False):
        """Create topic ``pair``: (TopicInfo, 0, None), or (None, error code, message)."""
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
            return broker.create_topic(stream.id, topic_name, partitions, **kwargs), 0, None
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
            return _CT_RESULT.make(name=t.name, error_code=int(E.INVALID_REQUEST),
                                   error_message="replica assignments are not accepted: there is one broker")
        if t.replication_factor not in (-1, 1):
            return _CT_RESULT.make(
                name=t.name, error_code=int(E.INVALID_REPLICATION_FACTOR),
                error_message=(f"Unable to replicate the partition {t.replication_factor} time(s): The target "
                               "replication factor of {0} cannot be reached because only 1 broker(s) are "
                               "registered.").replace("{0}", str(t.replication_factor)))
        partitions = ctx.options.default_partitions if t.num_partitions == -1 else t.num_partitions
        settings, problem = self._settings(t.configs, partitions)
        if problem:
            return _CT_RESULT.make(name=t.name, error_code=int(E.INVALID_CONFIG), error_message=problem)
        info, err, msg = self.create(pair, partitions, settings, validate_only=validate_only)
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

    def _settings(self, configs, partitions: int):
        """(TopicSettings or None, problem or None) from CreateTopics configs."""
        settings = TopicSettings()
        for c in configs:
            if c.name not in TOPIC_CONFIGS:
                return None, f"config {c.name!r} is not supported by Ferry (supported: {', '.join(TOPIC_CONFIGS)})"
            try:
                if c.name == "retention.ms":
                    ms = int(c.value) if c.value is not None else -1
                    settings = dataclasses.replace(settings, message_expiry=0 if ms < 0 else ms * MS_PER_US)
                elif c.name == "retention.bytes":
                    n = int(c.value) if c.value is not None else -1
                    settings = dataclasses.replace(settings, max_topic_size=0 if n < 0 else n * partitions)
                elif c.value != "delete":
                    return None, f"cleanup.policy={c.value} is not supported by Ferry (only delete)"
            except ValueError:
                return None, f"Invalid value {c.value} for configuration {c.name}"
        return settings, None

    def _configs(self, info) -> list[tuple[str, str, int]]:
        """(name, value, source) of a topic's configs as Kafka names them."""
        expiry = info.message_expiry
        size = info.max_topic_size
        return [
            ("retention.ms", str(expiry // MS_PER_US) if expiry else "-1", SOURCE_TOPIC if expiry else SOURCE_DEFAULT),
            ("retention.bytes", str(size // max(1, info.partitions_count)) if size else "-1",
             SOURCE_TOPIC if size else SOURCE_DEFAULT),
            ("cleanup.policy", "delete", SOURCE_DEFAULT),
            ("compression.type", "producer", SOURCE_DEFAULT),
            ("message.timestamp.type", "CreateTime", SOURCE_DEFAULT),
            ("min.insync.replicas", "1", SOURCE_DEFAULT),
        ]

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
            elif t.assignments:
                err, msg = int(E.INVALID_REQUEST), "replica assignments are not accepted: there is one broker"
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

    @staticmethod
    def _config_values(items, keys, version: int):
        wanted = None if keys is None else set(keys)
        return tuple(_DC_CONFIG.make(name=n, value=v, read_only=False, is_default=src == SOURCE_DEFAULT,
                                     config_source=src, is_sensitive=False)
                     for n, v, src in items if wanted is None or n in wanted)

    def describe_cluster(self, version: int, body):
        ctx = self.ctx
        return DESCRIBE_CLUSTER.response.make(
            cluster_id=ctx.cluster_id, controller_id=ctx.node_id,
            brokers=(_CLUSTER_BROKER.make(broker_id=ctx.node_id, host=ctx.host, port=ctx.port, rack=None),))
