"""The Iggy session: decoded requests in, broker calls, reply events out.

Theory of operation
-------------------
One :class:`IggySession` per connection (TCP today, QUIC later), owning an
:class:`~adapters.iggy.connection.IggyServerConnection`. It is synchronous and
does no I/O: the driver feeds bytes, calls :meth:`handle` for every event and
writes what the connection queues.

``handle`` returns a :class:`~adapters.iggy.events.Reply`, an ``Evict``, or a
:class:`~adapters.iggy.events.Deferred` when the answer must wait: for a
worker thread (password hashing at login) or for the log's durability ack (a
send is acknowledged only once its records are durable under the fsync
policy, ARCHITECTURE.md "log"). The driver completes a Deferred and calls its
``finish``. The handlers (handlers.py, handlers_data.py) are a table this
module imports; they see only the session object they are handed, never this
module, so the import graph has no cycle.

Every handler works on canonical (0-based) ids: :meth:`_sid`/:meth:`_topic`
translate the wire's identifiers (``- edge`` for dialect 1, render.edge) and
all output goes through :mod:`adapters.iggy.render`. Errors from the core
become Iggy codes in one place, :func:`adapters.iggy.errors.status_for`.

Authentication and permissions follow iggy.md section 7: only commands whose
table entry says ``auth=False`` run before login (40 Unauthenticated
otherwise); a logged-in user needs the core permission each handler names
(core.permissions; 41 Unauthorized). GETs of one missing entity answer an
empty OK (iggy.md 9.2, iggy-current.md 8).

A login is checked again on every request that needs one (core/credentials.py):
the session acts with the user's current record (``meta.users.live_user``), so a
permission change applies at once, and deleting the user ends the login: at
once, through the store's credential watcher (:func:`_credentials_changed`,
one per broker, covering every session whatever listener made it), and
otherwise on the next request. An ended login answers 40 Unauthenticated from
then on and leaves its consumer groups. As on apache/iggy, a deactivation or
deleting the personal access token the session logged in with ends nothing:
both only refuse new logins, and the session keeps the user's grants
(docs/iggy.md "What a credential change does to live sessions").
"""

from __future__ import annotations

import functools
import itertools
import logging
from typing import Callable

import xxhash

from core import errors as ce
from core.consumers import Consumer, PollStrategy
from core.access import Actor, acting, denied, host_of, use_actor
from core.credentials import CredentialChange
from core.log.encoded import block_of
from core.message import Headers
from core.perowner import PerOwner
from core.permissions import Action

from . import render
from . import replies as R
from .connection import IggyServerConnection
from .errors import IggyError, IggyStatus, status_for
from .events import BadRequest, Deferred, Evict, Reply, Request
from .handlers import HANDLERS, SERVER_VERSION
from .messages import StoredBatch

log = logging.getLogger("ferry.iggy")

_U64_MASK = (1 << 64) - 1
_POLL_KINDS = {1: "offset", 2: "timestamp", 3: "first", 4: "last", 5: "next"}
_VSR_SESSIONS = itertools.count(1)  # login replies need a non-zero session (iggy-current.md 6.3)
TRANSPORT_TCP, TRANSPORT_QUIC = 1, 2
# The live Iggy sessions of each broker, for GetClients/GetClient/GetStats
# (iggy.md 5.7). Keyed weakly so a closed broker (tests open many) leaves nothing.
_SESSIONS: "PerOwner[dict[int, IggySession]]" = PerOwner()


def sessions_of(broker) -> dict[int, "IggySession"]:
    """client id -> session, for every open Iggy connection of ``broker``."""
    sessions = _SESSIONS.get(broker)
    return {} if sessions is None else sessions


class IggySession:
    """Per-connection state: who is logged in, which dialect, which groups."""

    def __init__(self, broker, *, client_id: int, address: str = "", transport: int = TRANSPORT_TCP) -> None:
        self.broker = broker
        self.conn = IggyServerConnection()
        self.client_id = client_id
        self.address = address
        self.transport = transport
        self.user = None
        self.vsr_session = 0
        # What the client's login said about itself (the SDK's name and version, where
        # its login command carries them: handlers.py), and its entry in the broker's
        # connection directory (core/connections.py; set by the driver's IggyMeter).
        self.client_name = self.client_version = ""
        self.console = None
        # Who this connection speaks for, in audit lines and the login guard (core/access.py).
        self.actor = Actor("iggy", host_of(address))
        # The handler table lives next door (module size); handlers.py builds its answers
        # from events.py and reaches the other sessions through live_sessions(), so it
        # never imports this module.
        self._handlers: dict[str, Callable] = HANDLERS
        sessions = _SESSIONS.get(broker)
        if sessions is None:
            sessions = {}
            _SESSIONS.set(broker, sessions)
            broker.meta.users.watch_credentials(functools.partial(_credentials_changed, sessions))
        sessions[client_id] = self

    @property
    def dialect(self) -> int:
        return self.conn.dialect

    # -- dispatch ----------------------------------------------------------------------
    def handle(self, event: Request | BadRequest) -> Reply | Evict | Deferred:
        """Answer one event. Never raises for anything the peer sent."""
        use_actor(self.actor)  # a QUIC server task serves many sessions: set per request
        if isinstance(event, BadRequest):
            # Not logged in beats "undecodable": before login the legacy dialect
            # is still a guess (connection.py), so a body may only look malformed.
            if event.command is not None and event.command.auth and self.user is None:
                return Reply(IggyError.UNAUTHENTICATED, command=event.command)
            return Reply(event.status, command=event.command)
        cmd = event.command
        if cmd.auth and (self.user is None or not self.still_logged_in()):
            if cmd.name == "user.logout" and self.dialect == 3:
                # A VSR Logout without a login answers OK: the state it asks for holds
                # (apache/iggy core/server/src/dispatch.rs handle_logout_request). The
                # 0.9 client sends one before every re-login, e.g. after a credential
                # change ended its login; 40 there would fail the re-login.
                return Reply(0, command=cmd)
            return Reply(IggyError.UNAUTHENTICATED, command=cmd)
        handler = self._handlers.get(cmd.name)
        if handler is None:
            return Reply(IggyError.FEATURE_UNAVAILABLE, command=cmd)
        try:
            out = handler(self, event.value)
        except IggyStatus as err:
            return Reply(err.code, command=cmd)
        except ce.FerryError as exc:
            if isinstance(exc, ce.PermissionDenied):   # the core's own refusals (e.g. root's status)
                denied(cmd.name, reason=exc.message)
            return Reply(status_for(exc, _entity_of(cmd.name)), command=cmd)
        except Exception:  # a bug of ours (STYLE.md 5): log it, answer a generic error, keep serving
            log.exception("iggy handler failed", extra={"command": cmd.name})
            return Reply(IggyError.ERROR, command=cmd)
        if isinstance(out, Deferred):
            if out.work is not None:   # a worker thread: it must know whom it acts for too
                out.work = acting(self.actor, out.work)
            return out
        if isinstance(out, (Reply, Evict)):
            return out
        return Reply(0, out or b"", command=cmd)

    def finish(self, deferred: Deferred, command) -> Reply | Evict:
        """Complete a Deferred (called by the driver)."""
        try:
            return deferred.finish(deferred.outcome)
        except IggyStatus as err:
            return Reply(err.code, command=command)
        except ce.FerryError as exc:
            return Reply(status_for(exc), command=command)
        except Exception:
            log.exception("iggy deferred reply failed")
            return Reply(IggyError.ERROR, command=command)

    def close(self) -> None:
        """The connection ended: leave every consumer group (core rebalances)."""
        sessions_of(self.broker).pop(self.client_id, None)
        self.broker.consumers.disconnect(self.client_id)

    # -- the login's validity (core/credentials.py) -------------------------------------------
    def still_logged_in(self) -> bool:
        """Act with the logged-in user's current record; end the login (False)
        when the user is gone or is a later user given the same id. An inactive
        user's login goes on (Iggy's status only refuses new logins)."""
        user = self.user
        live = self.broker.meta.users.live_user(user.id)
        if live is None or live.created_at != user.created_at:
            self.end_login("user deleted")
            return False
        self.user = live
        return True

    def end_login(self, reason: str) -> None:
        """The user was deleted: log out and leave every consumer group
        (a session that may not poll must not hold partitions)."""
        if self.user is None:
            return
        log.info("iggy login ended", extra={"client_id": self.client_id, "user_id": self.user.id, "reason": reason})
        self.user = None
        self.actor.logged_out()
        self.broker.consumers.disconnect(self.client_id)

    # -- helpers for handlers -------------------------------------------------------------
    def live_sessions(self) -> dict[int, IggySession]:
        """client id -> session, for every open Iggy connection of this broker."""
        return sessions_of(self.broker)

    @property
    def edge(self) -> int:
        return render.edge(self.dialect)

    def require(self, action: Action, sid: int | None = None, tid: int | None = None) -> None:
        # The grants whatever the status: a deactivation does not stop a live login (as Iggy).
        if not self.broker.meta.users.can(self.user, action, sid, tid, ignore_status=True):
            denied(str(action), stream_id=sid, topic_id=tid)
            raise IggyStatus(IggyError.UNAUTHORIZED, str(action))

    def ident(self, value: int | str, missing: IggyError) -> int | str:
        """A wire identifier as a canonical id or a name."""
        if isinstance(value, str):
            return value
        canonical = value - self.edge
        if canonical < 0:
            raise IggyStatus(missing, f"id {value}")
        return canonical

    def stream(self, value):
        return self.broker.get_stream(self.ident(value, IggyError.STREAM_ID_NOT_FOUND))

    def topic(self, stream_value, topic_value):
        s = self.stream(stream_value)
        return self.broker.get_topic(s.id, self.ident(topic_value, IggyError.TOPIC_ID_NOT_FOUND))

    def group(self, topic, value):
        gid = self.ident(value, IggyError.CONSUMER_GROUP_ID_NOT_FOUND)
        return self.broker.consumers.get_group(topic.stream_id, topic.id, gid)

    @property
    def one_based(self) -> bool:
        """Seed-era numbering (dialects 1 and 5): 1-based ids, ids chosen on create,
        a u32 partition where 0 means none."""
        return self.dialect in render.ONE_BASED

    def partition_in(self, value) -> int | None:
        """The wire partition (1-based dialects: u32, 0 = none; later: None or u32) as canonical."""
        if value is None:
            return None
        if self.one_based:
            return None if value == 0 else value - 1
        return value

    def consumer(self, topic, ref) -> Consumer:
        """Iggy Consumer -> core Consumer. A single consumer named by a string is
        keyed by XXH32 of the name (iggy.md 3.2); a group by its canonical id."""
        if ref.kind == 2:
            return Consumer("group", self.group(topic, ref.id).id)
        cid = ref.id if isinstance(ref.id, int) else xxhash.xxh32_intdigest(ref.id.encode("utf-8"))
        return Consumer("consumer", cid)

    # -- login (shared by the four login commands) ------------------------------------------
    def login_password(self, username: str, password: str, protocol: int = 0) -> Deferred:
        def work():  # in a worker thread, as this session's actor (handle: core.access.acting)
            return self.broker.meta.users.authenticate(username, password)

        return Deferred(lambda user: self._logged_in(_unchanged_since(self.broker.meta.users, user), protocol), work)

    def login_token(self, token: str, protocol: int = 0):
        try:
            user = self.broker.meta.users.login_with_pat(token)
        except ce.FerryError as exc:
            user = exc
        return self._logged_in(user, protocol)

    def _logged_in(self, user, protocol: int) -> Reply:
        if isinstance(user, BaseException):
            if isinstance(user, ce.FerryError):
                return Reply(status_for(user))
            raise user
        self.user = user
        self.actor.logged_in(user.username, user.id)
        if self.dialect == 3:
            self.vsr_session = next(_VSR_SESSIONS)
            body = R.LOGIN_REPLY.encode(3, R.LOGIN_REPLY.make(
                user_id=user.id, session=self.vsr_session, protocol_version=protocol, server_version=SERVER_VERSION))
            return Reply(0, body, command=None)
        return Reply(0, R.IDENTITY.encode(self.dialect, R.IDENTITY.make(user_id=user.id + self.edge)))

    def poll_strategy(self, s) -> PollStrategy:
        return PollStrategy(_POLL_KINDS[s.kind], s.value)

    def to_stored_batch(self, messages) -> StoredBatch:
        """Wire messages with a seed-era header map (dialects 1, 4 and 5) -> the
        stored record layout, in one pass, validating each header block
        (a malformed block is the peer's fault: 3 / 4017 / 4018-4019 / 4040)."""
        decode_legacy = Headers.decode_legacy
        canonical = [m._replace(headers=decode_legacy(m.headers).encode()) if m.headers else m for m in messages]
        return StoredBatch(len(canonical), block_of(canonical), sum(len(m.payload) for m in canonical))


def _unchanged_since(users, user):
    """A password check ran in a worker thread: the user it admitted, unless the
    user was deleted or deactivated meanwhile (then the error a login would get now)."""
    if isinstance(user, BaseException):
        return user
    try:
        return users.recheck(user)
    except ce.FerryError as exc:
        return exc


def _credentials_changed(sessions: dict[int, IggySession], change: CredentialChange) -> None:
    """The store's watcher (one per broker): end the deleted user's logins, on every
    session of the broker, whatever listener (TCP, QUIC, WebSocket) made it. Other
    changes need nothing here: every request reads the user afresh."""
    if not change.deleted:
        return
    for session in list(sessions.values()):
        user = session.user
        if user is not None and user.id == change.user_id and user.created_at == change.created_at:
            session.end_login("user deleted")


def _entity_of(name: str) -> str:
    head = name.split(".", 1)[0]
    return {"consumer_group": "group"}.get(head, head)


__all__ = ["IggySession", "TRANSPORT_QUIC", "TRANSPORT_TCP", "sessions_of"]
