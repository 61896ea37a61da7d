"""NATS clients as Ferry users: one identity model, one permission model (no I/O, no trio).

Theory of operation
-------------------
Under ``ferry serve`` every NATS client (TCP and WebSocket) logs in as a Ferry
user (docs/nats.md "Authentication and permissions", docs/security.md):

* **Who.** :class:`FerryAuthenticator` is the connection state machine's
  ``authenticate(Connect)`` hook. CONNECT ``user``/``pass`` is a Ferry user
  (``meta.users.authenticate``), ``auth_token`` a personal access token
  (``meta.users.login_with_pat``); both apply the per-address login guard and write
  the audit lines (core/access.py) for the actor the driver bound to the
  connection's task. A client without credentials is refused unless the
  listener names an ``anonymous_user`` (nats-server's ``no_auth_user`` idea).
  An argon2 check costs 50-170 ms of CPU, so a password not seen before is
  checked in a worker thread (the connection's ``DeferredAuth``: it parses
  nothing more until the answer), and verified credentials are remembered (a
  SHA-256 of user and password, or of the token; bounded, LRU) while
  ``meta.users.version`` stays the same; a remembered login is still re-read
  (``meta.users.recheck``): a deleted or deactivated user does not get in.
* **What.** :class:`FerryPermissions` (one per logged-in user, shared by its
  connections) is the connection's ``Permissions``: a subject is mapped to the
  Ferry topic that stores it (a JetStream stream's subjects first, as
  ``jetstream.session.route`` does, then the addressing rule,
  ``broker.topic_for_subject``) and Iggy's permission model decides
  (``meta.users.can``): a publish needs SEND_MESSAGES, a literal subscription and
  every delivery POLL_MESSAGES; a wildcard subscription is allowed and its
  deliveries are filtered per subject (:meth:`FerryPermissions.delivery_filter`),
  as nats-server filters denied subjects out of a wide subscription. Subjects
  no topic stores (plain core NATS, ``_INBOX.>``) are open to any logged-in
  user. ``$JS.API`` requests map to actions by :data:`API_RULES`.
  Decisions are cached per subject and dropped whenever
  ``meta.users.version``, the broker's subject generation or the JetStream
  streams' generation moves, so a permission change applies to the very next
  publish, subscription or delivery. Every refusal writes one audit line
  (``core.access.denied``, for the actor of the task that asked).
* **Narrowing.** An ``auth_file`` (nats-server's authorization block) may add
  a subject filter per user name (:func:`subject_filters`): both must allow.

The root user (id 0) without a filter gets no permissions object at all, so
its connections keep the connection's fast publish path.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any, Callable, Mapping

from core import access
from core.errors import FerryError
from core.permissions import Action

from .auth import AuthConfigError, UserPermissions, permissions_from
from .connection import DeferredAuth
from .events import Connect
from .jetstream.api import jetstream_for
from .jetstream.streams import JS_STREAM

# Verified logins remembered by the authenticator: enough for every client of
# a busy gateway reconnecting at once; an LRU, so memory stays flat (~200 B each).
MAX_REMEMBERED_LOGINS = 1024
# Subject decisions one user's permissions keep per direction before starting over
# (a client cycling through more subjects costs lookups, never wrong answers).
MAX_DECISIONS = 4096
# Logged-in users whose permissions objects are kept for sharing between connections.
MAX_USERS = 1024

API_PREFIX = "$JS.API."
ACK_PREFIX = "$JS.ACK."
FC_PREFIX = "$JS.FC."
ANY = None  # a rule with no action: any logged-in user
CREATE = "create"  # STREAM.CREATE: CREATE_TOPIC on stream "jetstream" (or global rights before it exists)
LISTED = "listed"  # STREAM.NAMES/LIST: answered, streams the user may not read left out

# $JS.API.<suffix> -> the action it needs on the stream named by the next token,
# first match wins (nats-server's API subjects, docs/nats.md "JetStream"; Iggy's
# rules: consumer groups need READ_TOPIC, reading messages POLL_MESSAGES).
API_RULES: tuple[tuple[str, Any], ...] = (
    ("INFO", ANY),
    ("STREAM.CREATE.", CREATE),
    ("STREAM.UPDATE.", Action.MANAGE_TOPIC),
    ("STREAM.DELETE.", Action.MANAGE_TOPIC),
    ("STREAM.PURGE.", Action.MANAGE_TOPIC),
    ("STREAM.MSG.DELETE.", Action.MANAGE_TOPIC),
    ("STREAM.MSG.GET.", Action.POLL_MESSAGES),
    ("STREAM.INFO.", Action.READ_TOPIC),
    ("STREAM.NAMES", LISTED),
    ("STREAM.LIST", LISTED),
    ("DIRECT.GET.", Action.POLL_MESSAGES),
    ("CONSUMER.MSG.NEXT.", Action.POLL_MESSAGES),
    ("CONSUMER.DURABLE.CREATE.", Action.READ_TOPIC),
    ("CONSUMER.CREATE.", Action.READ_TOPIC),
    ("CONSUMER.INFO.", Action.READ_TOPIC),
    ("CONSUMER.NAMES.", Action.READ_TOPIC),
    ("CONSUMER.LIST.", Action.READ_TOPIC),
    ("CONSUMER.DELETE.", Action.READ_TOPIC),
    ("CONSUMER.PAUSE.", Action.READ_TOPIC),
)
_ALLOWED = (True, "")


def _is_wildcard(subject: str) -> bool:
    return any(t == "*" or t == ">" for t in subject.split("."))


def subject_filters(block: Mapping[str, Any], where: str = "authorization") -> tuple[dict, bool]:
    """The per-user subject filters of a nats-server ``authorization`` block read
    under ``ferry serve``: ``({user name: UserPermissions | None}, has_passwords)``.
    Passwords are not needed (and are ignored); a user without a permissions block
    gets ``default_permissions`` or no filter. Raises :class:`AuthConfigError`."""
    if not isinstance(block, Mapping):
        raise AuthConfigError(f"{where}: must be a block {{...}}")
    low = {k.lower(): v for k, v in block.items()}
    default = None
    if "default_permissions" in low:
        default = permissions_from(low["default_permissions"], f"{where}.default_permissions")
    has_passwords = bool(low.get("password") or low.get("pass") or low.get("token"))
    filters: dict[str, UserPermissions | None] = {}
    single = low.get("user", low.get("username"))
    if single:
        filters[str(single)] = default
    users = low.get("users") or []
    if not isinstance(users, list):
        raise AuthConfigError(f"{where}.users: must be an array of user blocks")
    for i, entry in enumerate(users):
        if not isinstance(entry, Mapping):
            raise AuthConfigError(f"{where}.users[{i}]: must be a block {{user: ..., permissions: ...}}")
        u = {k.lower(): v for k, v in entry.items()}
        name = u.get("user", u.get("username"))
        if not isinstance(name, str) or not name:
            raise AuthConfigError(f"{where}.users[{i}]: needs user")
        if name in filters:
            raise AuthConfigError(f"{where}.users[{i}].user: {name!r} is listed twice")
        has_passwords = has_passwords or bool(u.get("password") or u.get("pass"))
        perms = default
        if "permissions" in u:
            perms = permissions_from(u["permissions"], f"{where}.users[{i}].permissions")
        filters[name] = perms
    return filters, has_passwords


class FerryAuthenticator:
    """The ``authenticate(Connect)`` hook of a ``ferry serve`` NATS listener:
    False (refused: ``Authorization Violation``), True (root: no restrictions)
    or the user's :class:`FerryPermissions`."""

    def __init__(self, broker, *, anonymous_user: str = "",
                 filters: Mapping[str, UserPermissions | None] | None = None,
                 denied: Callable[..., None] = access.denied) -> None:
        self.broker = broker
        self.users = broker.meta.users
        self.anonymous_user = anonymous_user
        self.filters = dict(filters or {})
        self.denied = denied
        self._remembered: OrderedDict[bytes, Any] = OrderedDict()   # key -> UserInfo
        self._version = -1
        self._perms: dict[tuple[int, int], FerryPermissions] = {}

    def __call__(self, connect: Connect) -> "bool | FerryPermissions | DeferredAuth":
        """A password not verified before is checked in a worker thread (a
        :class:`DeferredAuth`: argon2 costs tens of milliseconds, which the event
        loop of every listener would otherwise wait); everything else answers now."""
        users = self.users
        if connect.auth_token:
            token = connect.auth_token
            key = b"t" + _digest(token)
            check = lambda: users.login_with_pat(token)   # noqa: E731 - a hash lookup: quick
            slow = False
        elif connect.user or connect.password:
            name, password = connect.user, connect.password
            key = b"u" + _digest(name + "\0" + password)
            check = lambda: users.authenticate(name, password)   # noqa: E731
            slow = True
        elif self.anonymous_user:
            name = self.anonymous_user
            key = b"a"
            check = lambda: users.get_user(name)   # noqa: E731
            slow = False
        else:
            access.audit("login", "failed", target="-", reason="no_credentials")
            return False
        remembered = self._remembered
        if self._version != users.version:   # a user, password or token changed: verify afresh
            remembered.clear()
            self._version = users.version
        user = remembered.get(key)
        if user is not None:
            remembered.move_to_end(key)
            try:
                user = users.recheck(user)             # deleted or deactivated since: refused
            except FerryError:
                return False
            return self._admitted(user)
        version = self._version
        if slow:
            return DeferredAuth(check, lambda outcome: self._checked(key, version, outcome))
        try:
            outcome = check()
        except FerryError as exc:
            outcome = exc
        return self._checked(key, version, outcome)

    def _checked(self, key: bytes, version: int, outcome) -> "bool | FerryPermissions":
        """The verdict for a credential check's ``outcome`` (a user or the error it raised)."""
        if isinstance(outcome, BaseException):
            if isinstance(outcome, FerryError):   # bad credentials, throttled, inactive, expired, unknown
                return False
            raise outcome
        users = self.users
        try:
            user = users.recheck(outcome)              # deleted or deactivated while the check ran
        except FerryError:
            return False
        if version == users.version == self._version:   # not remembered across a change made meanwhile
            self._remembered[key] = user
            if len(self._remembered) > MAX_REMEMBERED_LOGINS:
                self._remembered.popitem(last=False)
        return self._admitted(user)

    def _admitted(self, user) -> "bool | FerryPermissions":
        access.current_actor().logged_in(user.username, user.id)
        perms = self.permissions_for(user)
        return True if perms is None else perms

    def permissions_for(self, user) -> "FerryPermissions | None":
        """The permissions object of a logged-in ``user`` (shared by its
        connections); None for root without a subject filter."""
        nats_filter = self.filters.get(user.username)
        if user.is_root and nats_filter is None:
            return None
        key = (user.id, user.created_at)
        perms = self._perms.get(key)
        if perms is None or perms.nats_filter is not nats_filter:
            if len(self._perms) >= MAX_USERS:
                self._perms.clear()
            perms = self._perms[key] = FerryPermissions(self.broker, user, nats_filter, self.denied)
        return perms

    def initial_permissions(self) -> "FerryPermissions | None":
        """Rights before CONNECT: the anonymous user's (None: root, or none set)."""
        if not self.anonymous_user:
            return None
        return self.permissions_for(self.users.get_user(self.anonymous_user))


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class FerryPermissions:
    """One Ferry user's NATS rights; satisfies :class:`adapters.nats.connection.Permissions`.

    ``user_id`` and ``created_at`` say whose they are (credential watchers close
    the user's connections when it is deleted)."""

    __slots__ = ("broker", "users", "user_id", "created_at", "username", "nats_filter", "denied",
                 "_stamp", "_pub", "_recv", "_js_stream", "_js")

    def __init__(self, broker, user, nats_filter: UserPermissions | None = None,
                 denied: Callable[..., None] = access.denied) -> None:
        self.broker = broker
        self.users = broker.meta.users
        self.user_id = user.id
        self.created_at = user.created_at
        self.username = user.username
        self.nats_filter = nats_filter
        self.denied = denied
        self._stamp: tuple = ()
        self._pub: dict[str, tuple[bool, str]] = {}
        self._recv: dict[str, bool] = {}
        self._js_stream: int | None = None
        self._js = None      # the broker's JetStreamApi, looked up until there is one

    # -- the connection's Permissions protocol ------------------------------------
    def can_publish(self, subject: str) -> bool:
        pub = self._fresh_pub()
        verdict = pub.get(subject)
        if verdict is None:
            if len(pub) >= MAX_DECISIONS:
                pub.clear()
            verdict = pub[subject] = self._publish_verdict(subject)
        ok, action = verdict
        if ok and self.nats_filter is not None and not self.nats_filter.can_publish(subject):
            ok, action = False, "nats_publish"
        if not ok:
            self.denied(action, subject=subject)
        return ok

    def can_subscribe(self, subject: str, queue: str) -> bool:
        if self.nats_filter is not None and not self.nats_filter.can_subscribe(subject, queue):
            self.denied("nats_subscribe", subject=subject, queue=queue or None)
            return False
        if _is_wildcard(subject):
            return self._alive()      # deliveries are filtered per subject (delivery_filter)
        if not self.may_receive(subject):
            self.denied(Action.POLL_MESSAGES, subject=subject, queue=queue or None)
            return False
        return True

    def delivery_filter(self, pattern: str) -> Callable[[str], bool]:
        """The check every delivery to a subscription on ``pattern`` passes: the
        user may poll the topic of the delivered subject (always installed, so a
        later permission change applies to live subscriptions at once)."""
        extra = self.nats_filter.delivery_filter(pattern) if self.nats_filter is not None else None
        if extra is None:
            return self.may_receive
        may_receive = self.may_receive
        return lambda subject: extra(subject) and may_receive(subject)

    def may_receive(self, subject: str) -> bool:
        """Whether a message on ``subject`` may be delivered to this user (cached)."""
        self._fresh_pub()
        recv = self._recv
        ok = recv.get(subject)
        if ok is None:
            if len(recv) >= MAX_DECISIONS:
                recv.clear()
            ok = False
            if self._alive():
                topic = self._topic_of(subject)
                ok = topic is None or self._allowed(Action.POLL_MESSAGES, *topic)
            recv[subject] = ok
        return ok

    def visible_stream(self, name: str) -> bool:
        """Whether STREAM.NAMES / STREAM.LIST show JetStream stream ``name``."""
        topic = self._js_topic(name)
        return topic is None or self._allowed(Action.READ_TOPIC, *topic)

    # -- decisions ------------------------------------------------------------------
    def _fresh_pub(self) -> dict:
        broker = self.broker
        js = self._jetstream()
        stamp = (self.users.version, broker.subject_generation, js.streams.generation if js else 0)
        if stamp != self._stamp:
            self._pub.clear()
            self._recv.clear()
            self._js_stream = None
            self._stamp = stamp
        return self._pub

    def _jetstream(self):
        js = self._js
        if js is None:
            js = self._js = jetstream_for(self.broker)
        return js

    def _user(self):
        live = self.users.live_user(self.user_id)
        if live is None or live.created_at != self.created_at:
            return None
        return live

    def _alive(self) -> bool:
        return self._user() is not None

    def _allowed(self, action: Action, stream_id: int | None = None, topic_id: int | None = None) -> bool:
        user = self._user()
        if user is None:
            return False
        # Iggy's rule for live sessions: a deactivation only refuses new logins (core/credentials.py).
        return self.users.can(user, action, stream_id, topic_id, ignore_status=True)

    def _publish_verdict(self, subject: str) -> tuple[bool, str]:
        if not self._alive():
            return (False, "login")
        if subject.startswith(API_PREFIX):
            return self._api_verdict(subject[len(API_PREFIX):])
        if subject.startswith(ACK_PREFIX):   # $JS.ACK.<stream>.<consumer>...: reading the stream
            topic = self._js_topic(subject[len(ACK_PREFIX):].split(".", 1)[0])
            return self._verdict(Action.POLL_MESSAGES, topic)
        if subject.startswith(FC_PREFIX):
            return _ALLOWED
        return self._verdict(Action.SEND_MESSAGES, self._topic_of(subject))

    def _api_verdict(self, rest: str) -> tuple[bool, str]:
        for prefix, action in API_RULES:
            if rest.startswith(prefix):
                break
        else:
            return _ALLOWED                  # unknown: no reply anyway (nats-server stays silent)
        if action is ANY or action == LISTED:
            return _ALLOWED
        name = rest[len(prefix):].split(".", 1)[0]
        if action == CREATE:
            stream_id = self._js_stream_id()
            if stream_id is not None:
                ok = self._allowed(Action.CREATE_TOPIC, stream_id)
            else:                            # stream "jetstream" not created yet: global rights
                ok = self._allowed(Action.CREATE_STREAM) or self._global("manage_topics")
            return (True, "") if ok else (False, Action.CREATE_TOPIC.value)
        return self._verdict(action, self._js_topic(name))

    def _verdict(self, action: Action, topic: tuple[int, int] | None) -> tuple[bool, str]:
        if topic is None or self._allowed(action, *topic):
            return _ALLOWED
        return (False, action.value)

    def _global(self, flag: str) -> bool:
        user = self._user()
        perms = user.permissions if user is not None else None
        return bool(perms is not None and getattr(perms.global_, flag, False))

    def _topic_of(self, subject: str) -> tuple[int, int] | None:
        """(stream id, topic id) of the topic a publish on ``subject`` is stored in, or None."""
        js = self._jetstream()
        if js is not None and js.streams.streams:
            st = js.streams.stream_for(subject)
            if st is not None:
                stream_id = self._js_stream_id()
                return None if stream_id is None else (stream_id, st.topic_id)
        info = self.broker.topic_for_subject(subject)
        return None if info is None else (info.stream_id, info.id)

    def _js_topic(self, name: str) -> tuple[int, int] | None:
        js = self._jetstream()
        st = js.streams.streams.get(name) if js is not None else None
        stream_id = self._js_stream_id() if st is not None else None
        return None if stream_id is None else (stream_id, st.topic_id)

    def _js_stream_id(self) -> int | None:
        if self._js_stream is None:
            try:
                self._js_stream = self.broker.get_stream(JS_STREAM).id
            except FerryError:
                return None
        return self._js_stream


__all__ = ["API_RULES", "FerryAuthenticator", "FerryPermissions", "MAX_DECISIONS", "MAX_REMEMBERED_LOGINS",
           "subject_filters"]
