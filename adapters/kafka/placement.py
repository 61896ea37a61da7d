"""Which Kafka broker leads a partition and coordinates a group, sans-I/O.

Theory of operation
-------------------
A Kafka client picks its server per request: Metadata names the brokers and
each partition's leader, FindCoordinator a group's coordinator, and a broker
asked about a partition it does not lead answers NOT_LEADER_OR_FOLLOWER, about
a group it does not coordinate NOT_COORDINATOR (Kafka's
``ReplicaManager`` and ``GroupCoordinator.isCoordinatorForGroup`` checks), so
the client asks Metadata or FindCoordinator again and goes there.

Over the JetStream store every gateway serving Kafka is a broker: the store
lists the live ones (core/store.py ``Store.peers``, the ``FERRY_GROUPS``
leases), and :class:`Placement` turns that list into the answers:

* a broker's node id is a 31-bit hash of its gateway id (:func:`node_id_of`;
  two gateways collide with odds of one in 2**31 per pair);
* a partition's leader is the rendezvous (highest random weight) choice over
  the peers for ``(topic, partition)`` (:func:`topic_key`), a group's coordinator the same
  choice for the group id. Every gateway computes it from the same live set
  alone, and a gateway leaving moves only what it led or coordinated.

With no peers (the embedded store, or a listener that did not advertise)
this gateway is the one broker, node id :data:`SINGLE_NODE_ID`, leading and
coordinating everything: Ferry's single-node answers. Transactional ids are
always coordinated by the gateway asked: a transaction's state is in the
shared metadata log and any gateway completes a decided commit
(adapters/kafka/txn.py).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from .errors import ErrorCode as E
from .messages_groups import (CONSUMER_GROUP_HEARTBEAT, HEARTBEAT, JOIN_GROUP, LEAVE_GROUP, OFFSET_COMMIT, OFFSET_DELETE,
                              OFFSET_FETCH, SYNC_GROUP)

SINGLE_NODE_ID = 1  # the one broker's id without peers; any non-negative id works for clients
NODE_ID_MASK = 0x7FFF_FFFF  # Kafka node ids are non-negative int32s
MAX_CACHED_LEADERS = 100_000  # leaders remembered per live set: bounds memory with very many partitions


@dataclass(frozen=True, slots=True)
class Broker:
    """One Kafka broker as Metadata names it."""

    node_id: int
    host: str
    port: int


def node_id_of(gateway: str) -> int:
    """A gateway's node id: the same on every gateway, for the gateway's life."""
    return int.from_bytes(hashlib.sha256(gateway.encode()).digest()[:4], "big") & NODE_ID_MASK


def topic_key(info) -> str:
    """What a partition's leader is chosen by: the topic's ids (the same on every gateway,
    the metadata being shared), not its Kafka name, which has two spellings for a topic of
    the default stream (``orders`` and ``kafka.orders``) and differs between Fetch by name
    and Fetch by topic id."""
    return f"{info.stream_id}/{info.id}"


def _weight(gateway: str, key: bytes) -> int:
    """Rendezvous weight of ``gateway`` for ``key`` (8 bytes of BLAKE2b: uniform, cheap)."""
    return int.from_bytes(hashlib.blake2b(key, digest_size=8, key=gateway.encode()[:64]).digest(), "big")


class Placement:
    """Brokers, leaders and coordinators for one live set (module docstring).
    ``peers`` is ``Store.peers``' answer: ``(gateway id, host, port)``, this gateway first."""

    def __init__(self, peers, *, host: str, port: int) -> None:
        if peers:
            self._gateways = tuple(g for g, _h, _p in peers)
            self._brokers = {g: Broker(node_id_of(g), h, p) for g, h, p in peers}
            self.me = self._brokers[self._gateways[0]]
        else:
            self._gateways = ()
            self.me = Broker(SINGLE_NODE_ID, host, port)
            self._brokers = {}
        self._leaders: dict[tuple[str, int], Broker] = {}  # cache: the live set is fixed for this object

    @property
    def single(self) -> bool:
        return not self._gateways

    def brokers(self) -> tuple[Broker, ...]:
        """Every live broker, by node id (Metadata, DescribeCluster)."""
        if self.single:
            return (self.me,)
        return tuple(sorted(self._brokers.values(), key=lambda b: b.node_id))

    def _choose(self, key: bytes) -> Broker:
        if self.single:
            return self.me
        best = max(self._gateways, key=lambda g: (_weight(g, key), g))
        return self._brokers[best]

    def leader(self, topic: str, partition: int) -> Broker:
        """The broker leading partition ``partition`` of the topic :func:`topic_key` names."""
        found = self._leaders.get((topic, partition))
        if found is None:
            found = self._choose(b"p\0%s\0%d" % (topic.encode(), partition))
            if len(self._leaders) < MAX_CACHED_LEADERS:
                self._leaders[(topic, partition)] = found
        return found

    def coordinator(self, group_id: str) -> Broker:
        """The broker coordinating consumer group ``group_id``."""
        return self._choose(b"g\0" + group_id.encode())

    def leads(self, topic: str, partition: int) -> bool:
        return self.single or self.leader(topic, partition) is self.me

    def coordinates(self, group_id: str) -> bool:
        return self.single or self.coordinator(group_id) is self.me




# -- NOT_COORDINATOR answers ------------------------------------------------------------------
def not_coordinator_fields(api_key: int, version: int, body) -> dict | None:
    """The response fields of a one-group request refused with NOT_COORDINATOR, in the
    field each API and version carries it (Kafka's ``KafkaApis`` error answers), or None
    for an API that names no single group."""
    code = int(E.NOT_COORDINATOR)  # retriable: the client asks FindCoordinator again
    if api_key == JOIN_GROUP.key:
        return {"error_code": code, "generation_id": -1, "member_id": body.member_id, "leader": "",
                "protocol_name": None if version >= 7 else ""}
    if api_key in (SYNC_GROUP.key, HEARTBEAT.key, LEAVE_GROUP.key, OFFSET_DELETE.key):
        return {"error_code": code}
    if api_key == CONSUMER_GROUP_HEARTBEAT.key:
        return {"error_code": code, "error_message": f"this broker is not the coordinator of {body.group_id}",
                "member_id": None, "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}
    if api_key == OFFSET_COMMIT.key:  # per partition: OffsetCommitResponse has no top-level error
        S = OFFSET_COMMIT.response.structs
        return {"topics": tuple(S["OffsetCommitResponseTopic"].make(name=t.name, partitions=tuple(
            S["OffsetCommitResponsePartition"].make(partition_index=p.partition_index, error_code=code)
            for p in t.partitions)) for t in body.topics)}
    if api_key == OFFSET_FETCH.key:
        if version >= 2:  # the top-level ErrorCode from v2
            return {"error_code": code, "topics": ()}
        S = OFFSET_FETCH.response.structs
        return {"topics": tuple(S["OffsetFetchResponseTopic"].make(name=t.name, partitions=tuple(
            S["OffsetFetchResponsePartition"].make(partition_index=p, committed_offset=-1, metadata="",
                                                   error_code=code)
            for p in t.partition_indexes)) for t in body.topics or ())}
    return None


__all__ = ["Broker", "Placement", "SINGLE_NODE_ID", "node_id_of", "not_coordinator_fields", "topic_key"]
