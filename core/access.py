"""Who is asking, from where, through which door: the login guard and the audit log.

Theory of operation
-------------------
Every listener authenticates against the one user store (core/auth.py) and
checks the one permission model (core/permissions.py); this module holds the
two pieces of that model that are about *requests* rather than users
(docs/security.md):

* **The actor.** A connection (or an HTTP request) says once who it is
  speaking for: :func:`bind_actor` puts an :class:`Actor` (protocol, source
  address, and after a login the user) in a context variable of the task that
  serves it. trio copies context variables into worker threads
  (``trio.to_thread.run_sync``), so a password check or a metadata write made
  on the connection's behalf knows its actor without being told. Core code
  that is not called for a connection (start-up, the CLI's local commands)
  sees :data:`LOCAL`.
* **The login guard.** Failed logins are counted per source address (the IP,
  not the port: a client opens a new connection per attempt), on every
  protocol together, so a password guessed over NATS costs the same as over
  Iggy. ``FREE_FAILURES`` mistakes cost nothing; after that each further
  failure closes the address for a back-off window that doubles from
  ``FIRST_DELAY_S`` up to ``MAX_DELAY_S``, and an attempt inside the window is
  refused *without* checking the password (:class:`core.errors.LoginThrottled`,
  which every protocol answers as its own invalid-credentials error). So a
  guesser gets at most one real try per window, the server spends no argon2
  time on it, and nothing has to sleep (the check is synchronous and
  sans-I/O). A success from the address forgets its failures; another address
  is never affected. The table is an LRU of at most ``MAX_TRACKED_ADDRESSES``
  entries, each forgotten after ``FORGET_AFTER_S`` quiet, so memory stays flat
  whatever a flood of addresses does. The same idea as sshd's ``PerSourcePenalties``
  and fail2ban, kept inside the process.
* **The audit log.** :func:`audit` writes one structured line on the
  ``ferry.audit`` logger for every login failure, permission denial and change
  of users, permissions, tokens, streams and topics: the event, the outcome,
  who (user), from where (address) and through which protocol, plus the
  object's fields. Secrets are never among them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Callable

audit_log = logging.getLogger("ferry.audit")
# A LogRecord's own attributes cannot be extra fields (logging raises KeyError).
_RECORD_ATTRS = frozenset(vars(logging.LogRecord("x", 0, "x", 0, "x", None, None))) | {"message", "asctime"}

# -- the login guard's limits ---------------------------------------------------------
FREE_FAILURES = 5          # typos a person makes before being slowed
FIRST_DELAY_S = 1.0        # the first back-off window after FREE_FAILURES
MAX_DELAY_S = 30.0         # a guesser's best rate: one real try per 30 s per address
FORGET_AFTER_S = 900.0     # an address quiet this long starts afresh (15 min, as fail2ban's findtime default x1.5)
MAX_TRACKED_ADDRESSES = 10_000  # bounded table: ~1 MiB at most, oldest forgotten first


@dataclass(slots=True)
class Actor:
    """Who a connection speaks for: ``protocol`` ("iggy", "http", "nats", ...),
    ``addr`` (the peer's IP, or "local"), and once logged in ``user``/``user_id``."""

    protocol: str
    addr: str = "local"
    user: str = ""
    user_id: int | None = None

    def logged_in(self, username: str, user_id: int) -> None:
        self.user, self.user_id = username, user_id

    def logged_out(self) -> None:
        self.user, self.user_id = "", None


LOCAL = Actor("local")
_ACTOR: ContextVar[Actor] = ContextVar("ferry_actor", default=LOCAL)


def bind_actor(protocol: str, addr: str = "local") -> Actor:
    """Make a new :class:`Actor` the current task's (and its worker threads') actor."""
    actor = Actor(protocol, host_of(addr))
    _ACTOR.set(actor)
    return actor


def use_actor(actor: Actor) -> None:
    """Make an existing actor current (an HTTP request, served by the connection's task)."""
    _ACTOR.set(actor)


def current_actor() -> Actor:
    return _ACTOR.get()


def acting(actor: Actor, fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` run as ``actor`` wherever it runs (a worker thread started by a task
    that serves many connections, such as the Iggy QUIC server's, inherits no
    connection's actor)."""
    def run() -> object:
        _ACTOR.set(actor)
        return fn()

    return run


def host_of(addr: object) -> str:
    """The host part of a peer address: ``("1.2.3.4", 5)`` / ``"1.2.3.4:5"`` / ``"[::1]:5"`` -> the IP."""
    if isinstance(addr, tuple):
        return str(addr[0]) if addr else "local"
    text = str(addr or "local")
    if text.startswith("["):
        return text[1:].split("]", 1)[0]
    if text.count(":") == 1:
        return text.split(":", 1)[0]
    return text


def audit(event: str, outcome: str = "ok", *, actor: Actor | None = None, **fields: object) -> None:
    """One line on ``ferry.audit``: ``event`` (``login``, ``denied``, ``user.create``, ...),
    ``outcome`` (``ok``, ``failed``, ``denied``), who, from where, through which protocol."""
    who = actor or _ACTOR.get()
    level = logging.INFO if outcome == "ok" else logging.WARNING
    if not audit_log.isEnabledFor(level):
        return
    extra = {"event": event, "outcome": outcome, "protocol": who.protocol, "addr": who.addr,
             "user": who.user or "-"}
    for key, value in fields.items():
        if value is not None:
            extra["obj_" + key if key in extra or key in _RECORD_ATTRS else key] = value
    audit_log.log(level, "audit", extra=extra)


def denied(what: str, **fields: object) -> None:
    """A permission denial, as every protocol reports it: ``what`` is the action refused."""
    audit("denied", "denied", action=what, **fields)


@dataclass(slots=True)
class _Entry:
    failures: int = 0
    until: float = 0.0     # refused before this time
    last: float = 0.0


@dataclass
class LoginGuard:
    """Failed logins per source address; see the module docstring. Thread-safe
    (password checks run in worker threads), no I/O; ``clock`` in seconds."""

    clock: Callable[[], float] = time.monotonic
    max_addresses: int = MAX_TRACKED_ADDRESSES
    _table: OrderedDict = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def retry_after(self, addr: str) -> float:
        """Seconds before ``addr`` may try a login again (0: now)."""
        if addr in ("", "local"):
            return 0.0
        now = self.clock()
        with self._lock:
            entry = self._table.get(addr)
            if entry is None:
                return 0.0
            if now - entry.last > FORGET_AFTER_S:
                del self._table[addr]
                return 0.0
            return max(entry.until - now, 0.0)

    def failed(self, addr: str) -> float:
        """Count a failed login of ``addr``; returns the back-off it now has (0: none yet)."""
        if addr in ("", "local"):
            return 0.0
        now = self.clock()
        with self._lock:
            entry = self._table.pop(addr, None)
            if entry is None or now - entry.last > FORGET_AFTER_S:
                entry = _Entry()
            entry.failures += 1
            entry.last = now
            over = entry.failures - FREE_FAILURES
            delay = 0.0 if over <= 0 else min(FIRST_DELAY_S * 2 ** min(over - 1, 30), MAX_DELAY_S)
            entry.until = now + delay
            self._table[addr] = entry          # most recent last
            while len(self._table) > self.max_addresses:
                self._table.popitem(last=False)
            return delay

    def succeeded(self, addr: str) -> None:
        with self._lock:
            self._table.pop(addr, None)

    def __len__(self) -> int:
        return len(self._table)


__all__ = ["Actor", "acting", "FIRST_DELAY_S", "FREE_FAILURES", "LOCAL", "LoginGuard", "MAX_DELAY_S",
           "MAX_TRACKED_ADDRESSES", "audit", "bind_actor", "current_actor", "denied", "host_of", "use_actor"]
