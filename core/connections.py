"""Every open client connection of a broker, and the last errors of each listener (no trio).

Theory of operation
-------------------
The web console's "Connections" and "Errors" views (docs/http.md "Web console") list what
every listener serves, whatever the protocol. Each driver registers a connection when it
accepts one (:meth:`ConnectionDirectory.open`) and forgets it when it ends
(:meth:`ConnectionDirectory.closed`); :func:`directory_for` gives one directory per broker,
kept in a weak map as :func:`core.metrics.metrics_for` keeps the registry.

A :class:`Connection` holds what the console shows: listener, remote address, connected
since, the client's name and version where its protocol says them (NATS ``CONNECT``, an
Iggy login, a Pravega ``Hello``, an HTTP ``user-agent``), the Ferry user, counters and
subscriptions, and ``close``: the driver's own way to end it.

Counts are never kept twice. A driver that counts in the shared per-listener families
hands its counter dict through :meth:`Connection.metered` (or, where the counting code
runs in the connection's own tasks but is shared by all of them, through
:func:`per_connection` with :func:`bind_connection`): one ``inc`` then moves both the
listener's series and the connection's number, so the console agrees with ``/metrics``
at every moment. A driver whose protocol state already counts per connection (the NATS
session, which ``/varz`` and ``/connz`` read) passes ``refresh`` instead, which copies
those numbers in when the directory is read.

Errors: each listener keeps its last :data:`MAX_ERRORS_PER_LISTENER` errors in a ring
(:class:`ErrorLog`), recorded where the listener counts ``ferry_errors_total``, with the
protocol's own words for them (``-ERR`` text, Iggy status name, HTTP reason, Pravega
reply, gRPC status).
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Callable, Iterable

from .perowner import PerOwner

# Per listener: one screen of the console's Errors view. Older errors are in the
# gateway's log (each protocol logs its refusals) and counted in ferry_errors_total.
MAX_ERRORS_PER_LISTENER = 100
# An error text may quote client input (a subject, a path): enough to read it,
# bounded so a hostile client cannot make the ring large (100 x 9 listeners x 512).
MAX_ERROR_TEXT = 512
# Client names, versions and user agents are client input too: shown, but bounded.
MAX_CLIENT_TEXT = 200
# Subscriptions listed per connection in the directory's snapshot (the count is
# always exact): a NATS client may hold thousands, one screen shows a few.
MAX_SUBSCRIPTIONS_LISTED = 50

# What a metered counter dict's keys move on the connection (core/metrics.py listener_metrics keys).
_FIELDS = {"messages_in": "messages_in", "bytes_in": "bytes_in", "messages_out": "messages_out",
           "bytes_out": "bytes_out", "errors": "errors"}


def clip(text: str, limit: int = MAX_CLIENT_TEXT) -> str:
    """``text`` as shown: at most ``limit`` characters, control characters replaced."""
    text = "".join(c if c.isprintable() else "?" for c in str(text)[:limit])
    return text


@dataclass(slots=True, eq=False)
class Connection:
    """One open connection as the console shows it (see the module docstring)."""

    id: int
    listener: str                   # the listener's registry name: "nats", "iggy_tcp", "http", ...
    remote: str                     # "host:port" of the peer
    since: float                    # wall clock, unix seconds
    close: Callable[[], None] | None = None        # ends the connection (the driver's own way)
    refresh: Callable[["Connection"], None] | None = None  # copies live protocol state in
    directory: "ConnectionDirectory | None" = field(default=None, repr=False)
    client: str = ""                # client name / SDK / user agent, when the protocol says it
    version: str = ""
    user: str = ""                  # the Ferry user; "" = anonymous (not logged in)
    messages_in: int = 0
    bytes_in: int = 0
    messages_out: int = 0
    bytes_out: int = 0
    errors: int = 0
    subscriptions: int = 0          # NATS subscriptions, Iggy groups joined, Pravega writers
    subjects: tuple[str, ...] = ()  # what those are (at most MAX_SUBSCRIPTIONS_LISTED)

    def metered(self, counters: dict) -> dict:
        """``counters`` (a ``listener_metrics`` dict) whose message, byte and error
        counters also count on this connection; other entries pass unchanged."""
        return {key: _Tee(c, self, _FIELDS[key]) if key in _FIELDS else c for key, c in counters.items()}

    def error(self, message: str) -> None:
        """Record an error of this connection in its listener's ring (the count is the caller's)."""
        if self.directory is not None:
            self.directory.errors.record(self.listener, self.remote, message)

    def snapshot(self) -> dict:
        """The JSON form the console reads."""
        if self.refresh is not None:
            self.refresh(self)
        return {"id": self.id, "listener": self.listener, "remote": self.remote, "since": self.since,
                "client": self.client, "version": self.version, "user": self.user,
                "messages_in": self.messages_in, "bytes_in": self.bytes_in, "messages_out": self.messages_out,
                "bytes_out": self.bytes_out, "errors": self.errors, "subscriptions": self.subscriptions,
                "subjects": list(self.subjects[:MAX_SUBSCRIPTIONS_LISTED]), "closable": self.close is not None}


class _Tee:
    """A shared counter that also adds to one connection's field (see Connection.metered)."""

    __slots__ = ("shared", "conn", "name")

    def __init__(self, shared, conn: Connection | None, name: str) -> None:
        self.shared, self.conn, self.name = shared, conn, name

    def inc(self, *labels: str, amount: float = 1) -> None:
        self.shared.inc(*labels, amount=amount)
        conn = self.conn if self.conn is not None else _CURRENT.get()
        if conn is not None:
            setattr(conn, self.name, getattr(conn, self.name) + int(amount))

    def __getattr__(self, name: str):   # value(), dec(), ...: the shared counter's
        return getattr(self.shared, name)


# The connection the running task serves (for per_connection counters): each driver
# binds it in its connection task; trio copies it into the tasks that one starts.
_CURRENT: ContextVar[Connection | None] = ContextVar("ferry_connection", default=None)


def bind_connection(conn: Connection | None) -> None:
    """The current task (and tasks it starts from now on) serves ``conn``."""
    _CURRENT.set(conn)


def current_connection() -> Connection | None:
    return _CURRENT.get()


def per_connection(counters: dict) -> dict:
    """``counters`` whose message, byte and error counters also count on the connection
    bound in the running task (:func:`bind_connection`), if any: for counting code shared
    by every connection of a listener (an HTTP app's routes, the Pravega controller)."""
    return {key: _Tee(c, None, _FIELDS[key]) if key in _FIELDS else c for key, c in counters.items()}


@dataclass(frozen=True, slots=True)
class ErrorEntry:
    time: float      # unix seconds
    listener: str
    remote: str
    message: str
    seq: int = 0     # order of recording: ties of a coarse clock keep it

    def to_json(self) -> dict:
        return {"time": self.time, "listener": self.listener, "remote": self.remote, "message": self.message}


class ErrorLog:
    """The last :data:`MAX_ERRORS_PER_LISTENER` errors of each listener, newest last."""

    def __init__(self, limit: int = MAX_ERRORS_PER_LISTENER, clock: Callable[[], float] = time.time) -> None:
        self.limit = limit
        self.clock = clock
        self._seq = itertools.count()
        # Keyed by listener name: the registry's fixed set, never client input.
        self._rings: dict[str, deque[ErrorEntry]] = {}

    def record(self, listener: str, remote: str, message: str) -> None:
        ring = self._rings.get(listener)
        if ring is None:
            ring = self._rings[listener] = deque(maxlen=self.limit)
        ring.append(ErrorEntry(self.clock(), listener, clip(remote, MAX_CLIENT_TEXT),
                               clip(message, MAX_ERROR_TEXT)))

    def entries(self, listener: str | None = None) -> list[ErrorEntry]:
        """Every kept error (of ``listener`` only, if given), newest first."""
        rings: Iterable[deque] = self._rings.values() if listener is None else [self._rings.get(listener, ())]
        return sorted((e for ring in rings for e in ring), key=lambda e: (e.time, e.seq), reverse=True)


class ConnectionDirectory:
    """The open connections of one broker, by id, and its listeners' :class:`ErrorLog`."""

    def __init__(self) -> None:
        self._conns: dict[int, Connection] = {}
        self._ids = itertools.count(1)
        self.errors = ErrorLog()

    def open(self, listener: str, remote: str, *, close: Callable[[], None] | None = None,
             refresh: Callable[[Connection], None] | None = None, client: str = "", version: str = "",
             user: str = "") -> Connection:
        """Register a connection the caller just accepted; returns it (give it to :meth:`closed`)."""
        conn = Connection(next(self._ids), listener, remote, time.time(), close=close, refresh=refresh,
                          directory=self, client=clip(client), version=clip(version), user=user)
        self._conns[conn.id] = conn
        return conn

    def closed(self, conn: Connection) -> None:
        """The connection ended: forget it (idempotent)."""
        self._conns.pop(conn.id, None)

    def get(self, conn_id: int) -> Connection | None:
        return self._conns.get(conn_id)

    def __len__(self) -> int:
        return len(self._conns)

    def connections(self) -> list[Connection]:
        """Every open connection, oldest first."""
        return sorted(self._conns.values(), key=lambda c: c.id)

    def close(self, conn_id: int) -> Connection | None:
        """Ask the connection's driver to end it; the connection, or None when there is no
        such open connection or its driver cannot close it. The driver forgets it when it ends."""
        conn = self._conns.get(conn_id)
        if conn is None or conn.close is None:
            return None
        conn.close()
        return conn

    def error(self, listener: str, message: str, remote: str | None = None) -> None:
        """Record an error of ``listener``; the address is the connection bound in the
        running task (:func:`bind_connection`) unless given."""
        if remote is None:
            conn = _CURRENT.get()
            remote = conn.remote if conn is not None else ""
        self.errors.record(listener, remote, message)


_DIRECTORIES: PerOwner[ConnectionDirectory] = PerOwner(ConnectionDirectory, fresh_if_unweakable=True)


def directory_for(owner: object) -> ConnectionDirectory:
    """The directory of ``owner`` (a Broker), created on first use. An owner that cannot be
    weakly referenced (a slotted test double) gets a fresh one each call."""
    return _DIRECTORIES.of(owner)


def address(peer) -> str:
    """``"host:port"`` of a socket peer tuple (IPv6: ``[host]:port``), or ``str(peer)``."""
    if isinstance(peer, (tuple, list)) and len(peer) >= 2:
        host = str(peer[0])
        return f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"
    return str(peer) if peer else ""


__all__ = ["Connection", "ConnectionDirectory", "ErrorEntry", "ErrorLog", "MAX_CLIENT_TEXT", "MAX_ERROR_TEXT",
           "MAX_ERRORS_PER_LISTENER", "MAX_SUBSCRIPTIONS_LISTED", "address", "bind_connection", "clip",
           "current_connection", "directory_for", "per_connection"]
