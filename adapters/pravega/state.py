"""What the Pravega segment store and controller share, one per broker.

Theory of operation
-------------------
The two Pravega listeners are separate sockets (12345 and 9090) but one
service: the controller's ``getURI`` must name the segment store's bound
address, and a transaction opened over gRPC is written through the segment
store and committed over gRPC again. :func:`state_of` gives the one
:class:`PravegaState` of a broker (kept in a weak map like the Iggy
adapter's session registry, so the core never learns about Pravega).

Transactions (pravega.md section 3, "not needed for the core flow"): events
written to ``<segment>#transaction.<id>`` are held here, per partition, until
the controller commits them -- then each partition's events are appended as
one call, so a reader sees all of a partition's events of the transaction or
none -- or aborts them. Open transactions live in memory: a gateway restart
aborts them (docs/pravega.md says so); their total size is bounded. In
scale-out mode they are this gateway's: a client opens, writes and commits a
transaction through one gateway's controller and the segment store it names.

Unsettled appends (scale-out mode, docs/scale-out.md): a partition that does
not apply an append when it returns (``Partition.is_applied`` False: the
JetStream store's, gateway/jetstream_store/partition.py, which takes it into
an outbox) makes it readable, and its writer's event number known, only once
the cluster stored it. So the segment store counts here, per (partition,
writer), such appends whose ``on_durable`` has not fired yet, and the
event-view bytes they add per partition: a writer that reconnects while its
old connection's blocks are still on their way gets its AppendSetup once they
settled (else the client resends them, re-batched, and they are stored
twice), and a conditional append compares its expected offset with the end
*including* this gateway's unsettled appends (the client pipelines
byte-stream writes). The embedded log applies appends at once, so nothing is
counted for it. Only the segment store's own appends are counted, not another
protocol's to the same partition through this gateway.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from typing import Callable

from core.perowner import PerOwner

PartKey = tuple[int, int, int]  # (stream_id, topic_id, partition_id)

# Bytes of uncommitted transaction events held per gateway: a client that
# opens transactions and never commits must not grow memory without bound.
MAX_TXN_BYTES = 256 * 1024 * 1024
MAX_OPEN_TXNS = 10_000  # open transactions per gateway (each costs a dict entry)
DEFAULT_LEASE_MS = 120_000  # the Rust client's default transaction lease (TxnWriter config)
MAX_LEASE_MS = 24 * 3600 * 1000  # Pravega's default max lease is far below one day


class TxnState(enum.IntEnum):
    """Controller.proto TxnState.State values."""

    UNKNOWN = 0
    OPEN = 1
    COMMITTING = 2
    COMMITTED = 3
    ABORTING = 4
    ABORTED = 5


@dataclass(slots=True)
class Txn:
    id: uuid.UUID
    stream: str  # Ferry stream (Pravega scope)
    topic: str  # Ferry topic (Pravega stream)
    deadline_ms: int  # lease end; past it the transaction is aborted
    state: TxnState = TxnState.OPEN
    events: dict[int, list[bytes]] = field(default_factory=dict)  # partition -> payloads
    writers: dict[tuple[int, uuid.UUID], int] = field(default_factory=dict)  # last event number
    nbytes: int = 0


def new_txn_id() -> uuid.UUID:
    """A random transaction id whose low 64 bits read as a non-negative i64.

    The 0.3.8 client rebuilds its u128 id from the two i64 halves of TxnId
    with a sign-extending cast, so a negative low half would turn the high
    half into all ones: its segment names and commit requests would then name
    another id (seen with the real client: ``#transaction.ffffffffffffffff…``).
    Ids from this function survive that cast unchanged (127 random bits)."""
    return uuid.UUID(int=uuid.uuid4().int & ~(1 << 63))


class TxnError(Exception):
    """A transaction cannot take this operation (unknown, not open, full)."""


class PravegaState:
    """Shared by one broker's segment store and controller."""

    def __init__(self) -> None:
        self.segment_store: tuple[str, int] | None = None  # advertised (host, port) for getURI
        # An auth.TokenIssuer: set by both Pravega listeners before they serve (always under
        # `ferry serve`); from then on every segment-store request is checked. None only for
        # sessions built without a gateway (unit tests, embedding).
        self.issuer = None
        self.anonymous = None  # an auth.Principal: who requests with an empty token act as
        self.txns: dict[uuid.UUID, Txn] = {}
        self.txn_bytes = 0
        # (stream_id, topic_id, created_at) -> "events" | "bytes" (topic attribute pravega.kind)
        self.kinds: dict[tuple[int, int, int], str] = {}
        # transient segment name -> the large event's bytes so far (until MergeSegments)
        self.transients: dict[str, bytearray] = {}
        # unsettled appends: applied after the call returned (module docstring)
        self.unsettled: dict[tuple[PartKey, str], int] = {}  # (partition, writer id) -> appends
        self.unsettled_bytes: dict[PartKey, int] = {}  # partition -> event-view bytes they add
        self._settle_waiters: dict[tuple[PartKey, str], list[Callable[[], None]]] = {}

    # -- unsettled appends (module docstring) ---------------------------------------
    def begin_append(self, key: PartKey, writer: str, nbytes: int) -> None:
        self.unsettled[(key, writer)] = self.unsettled.get((key, writer), 0) + 1
        self.unsettled_bytes[key] = self.unsettled_bytes.get(key, 0) + nbytes

    def end_append(self, key: PartKey, writer: str, nbytes: int) -> None:
        """An append's ``on_durable`` fired (stored or failed): once the writer has
        none left, call whoever waits for that (``when_settled``)."""
        left = self.unsettled.get((key, writer), 0) - 1
        rest = self.unsettled_bytes.get(key, 0) - nbytes
        if rest > 0:
            self.unsettled_bytes[key] = rest
        else:
            self.unsettled_bytes.pop(key, None)
        if left > 0:
            self.unsettled[(key, writer)] = left
            return
        self.unsettled.pop((key, writer), None)
        for fn in self._settle_waiters.pop((key, writer), ()):
            fn()

    def when_settled(self, key: PartKey, writer: str, fn: Callable[[], None]) -> bool:
        """Call ``fn`` once the writer's unsettled appends to ``key`` settle; False
        (and no call) when it has none now."""
        if not self.unsettled.get((key, writer)):
            return False
        self._settle_waiters.setdefault((key, writer), []).append(fn)
        return True

    # -- transactions -------------------------------------------------------------
    def open_txn(self, stream: str, topic: str, now_ms: int, lease_ms: int) -> Txn:
        self.expire(now_ms)
        if len(self.txns) >= MAX_OPEN_TXNS:
            raise TxnError(f"{MAX_OPEN_TXNS} transactions are open")
        lease = min(max(lease_ms, 1), MAX_LEASE_MS) if lease_ms > 0 else DEFAULT_LEASE_MS
        txn = Txn(new_txn_id(), stream, topic, now_ms + lease)
        self.txns[txn.id] = txn
        return txn

    def get(self, txn_id: uuid.UUID) -> Txn | None:
        return self.txns.get(txn_id)

    def add_events(self, txn: Txn, partition: int, writer: uuid.UUID, last_event: int,
                   payloads: list[bytes]) -> bool:
        """Hold events of an open transaction; False for a duplicate block
        (event numbers at or below the last held for this writer)."""
        if txn.state is not TxnState.OPEN:
            raise TxnError(f"transaction {txn.id} is {txn.state.name}")
        key = (partition, writer)
        if last_event <= txn.writers.get(key, -(1 << 63)):
            return False
        size = sum(map(len, payloads))
        if self.txn_bytes + size > MAX_TXN_BYTES:
            raise TxnError(f"open transactions hold more than {MAX_TXN_BYTES} bytes")
        txn.events.setdefault(partition, []).extend(payloads)
        txn.writers[key] = last_event
        txn.nbytes += size
        self.txn_bytes += size
        return True

    def finish(self, txn: Txn, state: TxnState) -> None:
        """Mark COMMITTED or ABORTED and free the held events."""
        txn.state = state
        self.txn_bytes -= txn.nbytes
        txn.nbytes = 0
        txn.events = {}

    def expire(self, now_ms: int) -> None:
        """Abort open transactions whose lease ran out; forget finished ones
        after a lease length (clients ask for their state for a while)."""
        for txn in list(self.txns.values()):
            if txn.state is TxnState.OPEN and now_ms > txn.deadline_ms:
                self.finish(txn, TxnState.ABORTED)
            elif txn.state in (TxnState.COMMITTED, TxnState.ABORTED) and now_ms > txn.deadline_ms + DEFAULT_LEASE_MS:
                del self.txns[txn.id]


_STATES: PerOwner[PravegaState] = PerOwner(PravegaState)


def state_of(broker) -> PravegaState:
    """The broker's Pravega state (created on first use)."""
    return _STATES.of(broker)


__all__ = ["PravegaState", "Txn", "TxnError", "TxnState", "state_of"]
