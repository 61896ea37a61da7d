"""What every Kafka connection of one listener shares, and who a connection acts as.

Theory of operation
-------------------
:class:`KafkaContext` is made once per listener: the broker, this gateway as
a Kafka node (advertised host and port, cluster id; the node id and the other
brokers come from :meth:`KafkaContext.placement`, adapters/kafka/placement.py,
over the live gateways the store lists: ``Store.peers``), the
listener's options (:class:`KafkaOptions`), the group coordinator's request
handlers (``groups``, :mod:`adapters.kafka.group_api`), the transaction
coordinator (``txn``, :mod:`adapters.kafka.txn`) and the producer-id
allocator. Topic names go through the one addressing rule
(``core.addressing.topic_for_kafka`` / ``kafka_name_for``): ``S.T`` is topic
``T`` of stream ``S``, a name without a dot is a topic of the default stream.

:class:`Access` is one connection's identity: the Ferry user it logged in as
over SASL (or the configured anonymous user), kept as id and ``created_at``
and read afresh on every check (``UserStore.live_user``), so a permission
change applies to the next request and a deleted user's connection is refused
from then on (core/credentials.py). Kafka's ACL operations map onto Ferry's
actions (docs/kafka.md "Security"): Describe -> read_topic, Write ->
send_messages, Read -> poll_messages, Create -> create_topic (and
create_stream for a new stream), Delete and Alter -> manage_topic.

Producer ids (InitProducerId) come from a counter in the broker's key-value
tables (durable, core/kvtables.py), taken in blocks of
:data:`PRODUCER_ID_BLOCK` so one SQLite write serves many producers; ids of a
block not handed out before a restart are skipped, never reused (Kafka's
ProducerIdManager does the same with its blocks). Taking a block is a conditional
update on the version read (a compare-and-set): with several gateways over the
JetStream store (docs/scale-out.md) the write catches up with the metadata log first,
so a gateway that read a stale counter gets TableKeyBadVersion and reads again
instead of handing out a block another gateway took.
"""

from __future__ import annotations

import base64
import hashlib
import struct
import uuid
from dataclasses import dataclass
from typing import Iterator

from core.addressing import DEFAULT_KAFKA_STREAM, kafka_name_for, topic_for_kafka
from core.errors import FerryError, StorageConflict, TableKeyBadVersion
from core.kvtables import NOT_EXISTS
from core.permissions import Action

from .catch_up import CatchUp
from .fetch_sessions import FetchSessions
from .placement import SINGLE_NODE_ID, Placement
from .producer_state import ProducerStates
from .recent_batches import RecentBatches
from .txn import TxnCoordinator

NODE_ID = SINGLE_NODE_ID  # this gateway's node id without peers (adapters/kafka/placement.py)
LISTENER_NAME = "kafka"  # the name the listener advertises under (core/store.py Store.advertise)
PRODUCER_ID_TABLE = "_kafka/producer-ids"
PRODUCER_ID_KEY = b"next"
CLUSTER_TABLE = "_kafka/cluster"
CLUSTER_ID_KEY = b"id"
PRODUCER_ID_BLOCK = 1000  # ids taken per durable write (Kafka's ProducerIdManager blocks are 1000 too)
PRODUCER_ID_TRIES = 5  # reads of the counter while other gateways take blocks at the same moment
MAX_DEFAULT_PARTITIONS = 1000  # Iggy's per-topic partition limit, which the core enforces
_I64 = struct.Struct(">q")


class AccessDenied(FerryError):
    """The connection's user no longer exists (or the anonymous user is inactive)."""


@dataclass(frozen=True, slots=True)
class KafkaOptions:
    """The ``[listeners.kafka]`` options the connections use (gateway/listeners/kafka.py)."""

    default_stream: str = DEFAULT_KAFKA_STREAM
    auto_create_topics: bool = True  # Kafka's auto.create.topics.enable default
    default_partitions: int = 1  # Kafka's num.partitions default
    fetch_wait_max_ms: int = 30_000  # a client's max_wait_ms above this is cut to it


class Access:
    """Who one connection acts as (module docstring); ``None`` user until SASL succeeds."""

    def __init__(self, users, user=None, *, anonymous: bool = False) -> None:
        self.users = users
        self.user_id = None if user is None else user.id
        self.created_at = None if user is None else user.created_at
        self.username = "" if user is None else user.username
        self.anonymous = anonymous

    @property
    def known(self) -> bool:
        return self.user_id is not None

    def login(self, user) -> None:
        self.user_id, self.created_at, self.username = user.id, user.created_at, user.username
        self.anonymous = False

    def live(self):
        """The user now; AccessDenied when it is gone (or, anonymous, inactive)."""
        user = self.users.live_user(self.user_id) if self.user_id is not None else None
        if user is None or user.created_at != self.created_at:
            raise AccessDenied(f"the user of this connection (id {self.user_id}) no longer exists")
        if self.anonymous and not user.active:
            raise AccessDenied(f"the anonymous user {user.username!r} is inactive")
        return user

    def can(self, action: Action, stream_id: int | None = None, topic_id: int | None = None) -> bool:
        # A logged-in session keeps acting while its user is inactive, as on Iggy
        # (core/credentials.py); the anonymous door closes with its user's status.
        return self.users.can(self.live(), action, stream_id, topic_id, ignore_status=not self.anonymous)


DESCRIBE_IMPLIED_BY = (Action.READ_TOPIC, Action.POLL_MESSAGES, Action.SEND_MESSAGES, Action.MANAGE_TOPIC)


def can_describe(access: Access, stream_id: int, topic_id: int) -> bool:
    """Kafka's Describe on a topic, which its ACLs imply from Read, Write, Alter and
    Delete (``AclEntry.supportedOperations`` implications): a user who may consume or
    produce may also see the topic in Metadata and ListOffsets."""
    return any(access.can(action, stream_id, topic_id) for action in DESCRIBE_IMPLIED_BY)


class KafkaContext:
    """One listener's shared state (module docstring)."""

    def __init__(self, broker, *, host: str, port: int, options: KafkaOptions = KafkaOptions(),
                 groups=None, anonymous=None) -> None:
        self.broker = broker
        self.host, self.port = host, port
        self._placement: tuple[object, Placement] | None = None  # (what it was built from, it)
        self.options = options
        self.groups = groups
        self.anonymous = anonymous  # UserInfo the `anonymous_user` option names, or None
        self._cluster_id: str | None = None  # read or made once (the property below)
        self.fetch_sessions = FetchSessions()  # KIP-227, per listener (adapters/kafka/fetch_sessions.py)
        self.recent_batches = RecentBatches()  # retries' answers (adapters/kafka/recent_batches.py)
        self.producer_states = ProducerStates()  # epochs and open appends (adapters/kafka/producer_state.py)
        self.catch_up = CatchUp()  # a new leader's copy caught up before sequences (adapters/kafka/catch_up.py)
        self._pid_next = 0
        self._pid_end = 0
        self.txn = TxnCoordinator(self)

    @property
    def cluster_id(self) -> str:
        """The cluster's id, the same on every gateway of one store: kept in the key-value
        tables (replicated by the JetStream store), made on first use from the data
        directory (the id a single gateway always reported). A per-gateway id made
        librdkafka warn that one client was "connected to multiple clusters" in
        scale-out (bench/fault_schedule.py); Kafka keeps one in ZooKeeper/KRaft meta.properties."""
        if self._cluster_id is None:
            self._cluster_id = self._stored_cluster_id()
        return self._cluster_id

    def _stored_cluster_id(self) -> str:
        tables = self.broker.tables
        for _ in range(PRODUCER_ID_TRIES):
            try:
                tables.create(CLUSTER_TABLE)  # no-op when it exists
                (entry,) = tables.get(CLUSTER_TABLE, [CLUSTER_ID_KEY])
                if entry is not None:
                    return entry[1].decode()
                made = cluster_id_of(str(self.broker.data_dir))
                tables.update(CLUSTER_TABLE, [(CLUSTER_ID_KEY, made.encode(), NOT_EXISTS)])
                return made
            # Another gateway stored its id first (read that one), or wrote the replicated
            # metadata at the same moment (two gateways starting together): read again.
            except (TableKeyBadVersion, StorageConflict):
                continue
        raise TableKeyBadVersion(f"{CLUSTER_TABLE}: the cluster id kept changing")

    # -- brokers (adapters/kafka/placement.py) -----------------------------------------
    def placement(self) -> Placement:
        """Leaders and coordinators for the live gateways now: rebuilt only when the
        store's peer list (the same tuple while unchanged) or this address changed."""
        store = getattr(self.broker, "store", None)
        peers = store.peers(LISTENER_NAME) if store is not None else ()
        made = self._placement
        if made is None or made[0] is not peers or (not peers and made[1].me.port != self.port):
            made = self._placement = (peers, Placement(peers, host=self.host, port=self.port))
        return made[1]

    @property
    def node_id(self) -> int:
        return self.placement().me.node_id

    # -- names -------------------------------------------------------------------------
    def resolve(self, name: str) -> tuple[str, str] | None:
        return topic_for_kafka(name, self.options.default_stream)

    def name_of(self, stream: str, topic: str) -> str | None:
        return kafka_name_for(stream, topic, self.options.default_stream)

    def topic(self, name: str):
        """The TopicInfo a Kafka name means, or None (illegal name, no such topic)."""
        pair = self.resolve(name)
        if pair is None:
            return None
        try:
            return self.broker.get_topic(*pair)
        except FerryError:
            return None

    def topics(self) -> Iterator[tuple[str, object]]:
        """Every Kafka-visible topic as ``(kafka name, TopicInfo)``."""
        for stream in self.broker.list_streams():
            for info in self.broker.list_topics(stream.id):
                name = self.name_of(stream.name, info.name)
                if name is not None:
                    yield name, info

    # -- producer ids --------------------------------------------------------------------
    def next_producer_id(self) -> int:
        """A producer id never handed out before (module docstring)."""
        if self._pid_next >= self._pid_end:
            self._pid_next, self._pid_end = self._take_producer_ids()
        pid = self._pid_next
        self._pid_next += 1
        return pid

    def _take_producer_ids(self) -> tuple[int, int]:
        """The next block of producer ids, taken by a conditional update of the counter
        (module docstring); TableKeyBadVersion after PRODUCER_ID_TRIES lost races."""
        tables = self.broker.tables
        tries = 0
        while True:
            try:
                tables.create(PRODUCER_ID_TABLE)  # no-op when it exists
                (entry,) = tables.get(PRODUCER_ID_TABLE, [PRODUCER_ID_KEY])
                start, version = (_I64.unpack(entry[1])[0], entry[2]) if entry is not None else (0, NOT_EXISTS)
                tables.update(PRODUCER_ID_TABLE, [(PRODUCER_ID_KEY, _I64.pack(start + PRODUCER_ID_BLOCK), version)])
                return start, start + PRODUCER_ID_BLOCK
            except (TableKeyBadVersion, StorageConflict):  # lost a race with another gateway: read again
                tries += 1
                if tries >= PRODUCER_ID_TRIES:
                    raise


def cluster_id_of(seed: str) -> str:
    """A stable cluster id (Kafka's form: a UUID in URL-safe base64, 22 characters) derived
    from the data directory, so clients see the same id across restarts."""
    raw = uuid.UUID(bytes=hashlib.sha256(seed.encode()).digest()[:16]).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
