"""What the NATS listeners of one gateway share, and where to find it (no trio).

Theory of operation
-------------------
nats-server is one server with several ports: clients (4222), WebSocket
clients and the monitoring port see the same connections, counters and
settings. In Ferry those are separate listeners (``nats``, ``nats_ws``,
``nats_monitor``) that may not import each other, so the state they share
lives here: :class:`NatsServerState` holds the settings (INFO, limits,
authentication, TLS) and the live :class:`ClientRecord` of every connection;
:func:`register` / :func:`shared_state` keep one state per broker (weakly, so
a stopped gateway's state goes with its broker).

The nats listener registers its state when it starts; the WebSocket and
monitoring listeners start after it (the registry's port table order) and
look it up. Counters of closed connections are folded into
:class:`Totals` so ``/varz`` keeps server-lifetime totals as nats-server does.

The same counts feed the broker's Prometheus registry (``core/metrics.py``,
``GET /metrics`` on the HTTP listener) through a :class:`Meter` per
connection, folded once per read or write batch, never per message, and once
more for every live connection before each render (:func:`meter_for`'s
refresher). That last fold is what keeps a long-lived subscriber's
``messages_out`` current: its deliveries are mostly written by the
publisher's pass (``Outbox.write_now``), so its own writer, which folds after
a write, may not run until it disconnects (issue 28: the count stood still
for a whole publish, then jumped when ``ferry sub`` exited). ``/varz`` and
``/connz`` read the sessions' counters directly and need no fold.
"""

from __future__ import annotations

import itertools
import time
import weakref
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

from core.metrics import listener_metrics, metrics_for
from core.perowner import PerOwner

from .connection import NatsLimits, ServerInfo
from .outbox import MAX_PENDING

# nats-server's TLS handshake timeout (tls_timeout, 2 s, nats.md section 11).
TLS_TIMEOUT = 2.0


@dataclass(slots=True)
class Totals:
    """Counters of connections that have closed (nats-server's server-wide stats)."""

    in_msgs: int = 0
    in_bytes: int = 0
    out_msgs: int = 0
    out_bytes: int = 0
    slow_consumers: int = 0


@dataclass(slots=True, eq=False)
class ClientRecord:
    """One open connection as the monitor sees it."""

    session: Any                     # adapters.nats.session.NatsSession
    kind: str = "nats"               # "nats" or "websocket" (connz "type" hint)
    ip: str = ""
    port: int = 0
    start: float = field(default_factory=time.time)   # wall clock, for connz "start"
    tls_version: str = ""
    tls_cipher: str = ""
    wake: Callable[[], None] = lambda: None           # interrupts an idle read (lame duck)
    revoke: Callable[[], None] = lambda: None         # -ERR 'Authorization Violation', then close
    meter: Any = None                                 # its Meter, folded before each /metrics render


@dataclass(eq=False)
class NatsServerState:
    """Settings and live connections shared by the NATS listeners of one broker."""

    broker: object
    info: ServerInfo
    limits: NatsLimits = field(default_factory=NatsLimits)
    max_pending: int = MAX_PENDING
    authenticate: Callable | None = None
    initial_permissions: Any = None  # rights before CONNECT (no_auth_user)
    ssl_context: Any = None          # ssl.SSLContext: TLS after the clear-text INFO
    tls_handshake_first: bool = False  # TLS before anything, INFO inside it (nats.md section 13)
    tls_timeout: float = TLS_TIMEOUT
    # nats-server's max_connections (DEFAULT_MAX_CONNECTIONS 64K): past it a new client
    # gets INFO, then -ERR 'maximum connections exceeded', then the close (client.go
    # maxConnExceeded); shared by the TCP and WebSocket listeners, as in nats-server.
    max_connections: int = 64 * 1024
    client_ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    clients: dict = field(default_factory=dict)        # client_id -> ClientRecord
    total_connections: int = 0
    totals: Totals = field(default_factory=Totals)
    start: float = field(default_factory=time.time)
    ports: dict = field(default_factory=dict)          # listener kind -> bound port
    lame_duck: bool = False
    # Outboxes that got bytes since a reader last flushed them (driver._read_loop
    # calls Outbox.write_now on each, then clears it): bounded by the live clients.
    touched: set = field(default_factory=set)
    # True while a reader runs its synchronous pass (receive -> process -> write_now
    # on every touched outbox): a wake-up during it may be left to that write_now
    # (driver.nats_connection's wake), sparing the parked writer a spurious turn.
    in_pass: bool = False

    @property
    def sessions(self) -> list:
        return [rec.session for rec in self.clients.values()]

    def add(self, client_id: int, record: ClientRecord) -> None:
        self.clients[client_id] = record
        self.total_connections += 1

    def remove(self, client_id: int) -> None:
        """Forget a closed connection, keeping its counters in :attr:`totals`."""
        record = self.clients.pop(client_id, None)
        if record is None:
            return
        s, t = record.session, self.totals
        t.in_msgs += s.msgs_in
        t.in_bytes += s.bytes_in
        t.out_msgs += s.msgs_out
        t.out_bytes += s.bytes_out
        t.slow_consumers += bool(s.slow)

    def enter_lame_duck(self) -> None:
        """Wake every connection's reader so it sees ``broker.draining`` now."""
        self.lame_duck = True
        for record in list(self.clients.values()):
            record.wake()


def revoke_user(state: NatsServerState, change) -> int:
    """A credential watcher (``broker.meta.users.watch_credentials``): when a Ferry user
    is deleted, close its connections at once with ``-ERR 'Authorization
    Violation'``, as nats-server does when it revokes a user. Permission
    changes need nothing here: the connections' decisions follow
    ``meta.users.version`` (adapters/nats/ferryauth.py). Returns how many closed."""
    if not change.deleted:
        return 0
    closed = 0
    for record in list(state.clients.values()):
        perms = record.session.conn.permissions
        if getattr(perms, "user_id", None) == change.user_id and getattr(perms, "created_at", None) == change.created_at:
            record.revoke()
            closed += 1
    return closed


_METRIC_KEYS = ("messages_in", "bytes_in", "messages_out", "bytes_out", "errors")


class Meter:
    """Moves one session's counters into the listener metrics, as deltas."""

    __slots__ = ("counters", "label", "session", "seen")

    def __init__(self, counters: dict, label: str, session: Any) -> None:
        self.counters = counters
        self.label = label
        self.session = session
        self.seen = (0, 0, 0, 0, 0)
        counters["connections_total"].inc(label)
        counters["connections_open"].inc(label)

    def fold(self) -> None:
        s = self.session
        now = (s.msgs_in, s.bytes_in, s.msgs_out, s.bytes_out, s.conn.errors_sent)
        if now != self.seen:
            for key, new, old in zip(_METRIC_KEYS, now, self.seen):
                if new != old:
                    self.counters[key].inc(self.label, amount=new - old)
            self.seen = now

    def close(self, fatal_error: bool = False) -> None:
        """The last fold; ``fatal_error``: the connection ends with a fatal ``-ERR``
        (counted as one more error, after the non-fatal ones it sent)."""
        self.fold()
        if fatal_error:
            self.counters["errors"].inc(self.label)
        self.counters["connections_open"].dec(self.label)


def meter_for(state: NatsServerState, session: Any, listener: str) -> Meter:
    """A :class:`Meter` counting ``session`` under ``listener`` ("nats", "nats_ws");
    the caller keeps it in the connection's :attr:`ClientRecord.meter`.

    The first call of a state also registers a refresher that folds every live
    connection's meter before the registry renders (``/metrics``, the console's
    ``/console/api/metrics``): one fold per open connection per scrape, as
    ``/varz`` sums them, instead of a fold per subscriber on every delivering pass."""
    counters = getattr(state, "_counters", None)
    if counters is None:
        registry = metrics_for(state.broker)
        counters = state._counters = listener_metrics(registry)  # type: ignore[attr-defined]
        # Weakly: the registry lives as long as the broker, a state only as long as its listener.
        remove = registry.add_refresher(partial(_fold_live, weakref.ref(state)))
        weakref.finalize(state, remove)
    return Meter(counters, listener, session)


def _fold_live(state_ref: "weakref.ref[NatsServerState]") -> None:
    """Fold the meter of every open connection of the state (a registry refresher)."""
    state = state_ref()
    if state is None:
        return
    for record in state.clients.values():
        if record.meter is not None:
            record.meter.fold()


def refresh_entry(session: Any, entry: Any) -> None:
    """Copy one connection's live state into its console entry (core/connections.py
    ``Connection.refresh``): the session counters ``/connz`` and ``/varz`` read, the
    CONNECT's name, lang and version, the Ferry user (nats-server mode: the CONNECT
    user, when the server requires auth) and the subscriptions."""
    conn = session.conn
    opts = conn.options
    entry.messages_in, entry.bytes_in = session.msgs_in, session.bytes_in
    entry.messages_out, entry.bytes_out = session.msgs_out, session.bytes_out
    entry.errors = conn.errors_sent
    entry.client = opts.name or ""
    entry.version = " ".join(v for v in (opts.lang, opts.version) if v)
    entry.user = getattr(conn.permissions, "username", "") or (opts.user if conn.info.auth_required else "")
    subs = conn.subscriptions
    entry.subscriptions = len(subs)
    entry.subjects = tuple(sorted(s.subject for s in subs))


_STATES: PerOwner[NatsServerState] = PerOwner()


def register(state: NatsServerState) -> None:
    """Make ``state`` the one the other NATS listeners of its broker use."""
    _STATES.set(state.broker, state)


def shared_state(broker) -> NatsServerState | None:
    """The registered state of ``broker``'s nats listener, or None."""
    return _STATES.get(broker)


__all__ = ["ClientRecord", "Meter", "NatsServerState", "meter_for", "TLS_TIMEOUT", "Totals", "refresh_entry",
           "register", "revoke_user", "shared_state"]
