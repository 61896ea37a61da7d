"""Pravega authentication: Basic credentials at the controller, delegation tokens at the segment store.

Theory of operation
-------------------
Under ``ferry serve`` both Pravega listeners always check who is asking, the
way a Pravega cluster with auth enabled does (pravega.md sections 4.4 and 10),
against Ferry's one user store and permission model (core/auth.py,
core/permissions.py; docs/security.md):

1. The client (``StreamManager(uri, auth_enabled=True)`` with
   ``pravega_client_auth_method=Basic`` and ``..._username`` / ``..._password``
   in its environment) sends ``authorization: Basic base64(user:password)``
   with every controller RPC. :class:`Authenticator` checks it against
   Ferry's users and the RPC's permission (:data:`core.permissions.Action`).
2. ``getDelegationToken(scope, stream)`` returns a JWT naming the user (id and
   ``created_at``, which tells it from a later user given the same id), the
   scope and stream and what it may do there (read and/or write, from the
   user's poll/send permissions), valid ``TOKEN_LIFETIME_S``. The client
   reads ``exp`` to refresh it in time.
3. Every segment-store request carries that token; :func:`check_segment`
   verifies signature, expiry and scope/stream (:meth:`TokenIssuer.check`),
   then re-checks *live*: the token's user still exists (same ``created_at``)
   and still has the permission now (``meta.users.live_user`` is an in-memory
   lookup). So deleting a user or revoking a permission fails that user's
   next append or read, whatever the token says. A bad or refused token is
   answered ``AuthTokenCheckFailed`` with error code 0, an expired one with 1
   (the client fetches a new token and retries).
4. Opening a door is explicit: ``anonymous_user`` (on either listener) names a
   Ferry user that requests *without* credentials (controller) or with an
   empty token (segment store) act as, with exactly its current permissions
   (:class:`Principal` with ``anonymous``). Requests that carry credentials or
   a token are checked as usual.

Argon2 password checks cost tens of milliseconds and the Rust client sends
its credentials on every RPC, so a verified credential is remembered for
``CREDENTIAL_CACHE_S`` (bounded), and forgotten as soon as the user store's
``meta.users.version`` moves (any user, password, permission or token change).
Failed or throttled logins are never remembered. The signing key is random
and kept in ``<data_dir>/pravega-token-secret``, so tokens outlive a restart.
Sans-I/O apart from that one key file: the clock is an argument.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import jwt

from core import access
from core.errors import FerryError, InvalidArgument, NotFound
from core.keyfile import persistent_key
from core.permissions import Action

TOKEN_LIFETIME_S = 600  # Pravega's default delegation token TTL (controller.auth.tokenTtlInSeconds)
CREDENTIAL_CACHE_S = 60.0  # a remembered credential; any user store change forgets it at once
MAX_CACHED_CREDENTIALS = 1024  # distinct credentials remembered (bounded: a client cycling passwords)
SECRET_FILE = "pravega-token-secret"
SECRET_BYTES = 32  # HS256 key size (RFC 7518 section 3.2: at least the hash output size)
ALGORITHM = "HS256"
ISSUER = "ferry-pravega"
AUTH_CHECK_FAILED, AUTH_TOKEN_EXPIRED = 0, 1  # AuthTokenCheckFailed error codes (pravega.md 4.4)
READ, WRITE = "read", "write"
TABLE_SUFFIX = "_kvtable"  # a reader group's table: scope/<group>_kvtable (names.py)
# What a token operation needs of the user, live, on a stream's topic (core.permissions).
OP_ACTIONS = {READ: Action.POLL_MESSAGES, WRITE: Action.SEND_MESSAGES}


class AuthError(Exception):
    """``code``: a GrpcStatus name for the controller ("UNAUTHENTICATED",
    "PERMISSION_DENIED") or an AuthTokenCheckFailed error code for the segment store.
    ``action`` (an Action value) is set when a permission was refused: the audit line's."""

    def __init__(self, code, message: str, action: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.action = code, message, action


@dataclass(frozen=True, slots=True)
class Grant:
    """What a verified delegation token allows."""

    user_id: int
    created_at: int  # µs: the user's, when the token was issued
    scope: str
    stream: str
    ops: frozenset[str]

    @property
    def principal(self) -> "Principal":
        return Principal(self.user_id, self.created_at)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request acts as: a token's user, or the configured anonymous user
    (``anonymous``). :meth:`live` reads the user as stored now."""

    user_id: int
    created_at: int
    anonymous: bool = False

    @classmethod
    def anonymous_user(cls, users, name: str, key: str) -> "Principal":
        """The ``anonymous_user`` option's user; InvalidArgument (``key``: the option's
        dotted name) when there is no such user."""
        try:
            user = users.get_user(name)
        except (NotFound, InvalidArgument):
            raise InvalidArgument(f"{key}: no Ferry user {name!r}") from None
        return cls(user.id, user.created_at, anonymous=True)

    def live(self, users):
        """The user now (UserInfo); AuthError (check failed) when it was deleted, or,
        for the anonymous user, deactivated. A token's user keeps acting while inactive,
        as a logged-in session does (core/credentials.py): a deactivation refuses logins."""
        user = users.live_user(self.user_id)
        if user is None or user.created_at != self.created_at:
            who = "the anonymous user" if self.anonymous else "the delegation token's user"
            raise AuthError(AUTH_CHECK_FAILED, f"{who} (id {self.user_id}) no longer exists")
        if self.anonymous and not user.active:
            raise AuthError(AUTH_CHECK_FAILED, f"the anonymous user {user.username!r} is inactive")
        return user

    def can(self, users, user, action: Action, stream_id: int | None, topic_id: int | None = None) -> bool:
        return users.can(user, action, stream_id, topic_id, ignore_status=not self.anonymous)


def load_secret(data_dir: Path) -> bytes:
    """The signing key kept under ``data_dir`` (created on first use, mode 0600)."""
    return persistent_key(Path(data_dir) / SECRET_FILE, SECRET_BYTES)


def parse_basic(header: str) -> tuple[str, str]:
    """``Basic base64(user:password)`` -> (user, password); AuthError otherwise."""
    kind, _, blob = header.strip().partition(" ")
    if kind.lower() != "basic" or not blob:
        raise AuthError("UNAUTHENTICATED", "expected Basic credentials")
    try:
        text = base64.b64decode(blob.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise AuthError("UNAUTHENTICATED", "malformed Basic credentials") from None
    user, sep, password = text.partition(":")
    if not sep:
        raise AuthError("UNAUTHENTICATED", "malformed Basic credentials")
    return user, password


def scope_stream(segment: str) -> tuple[str, str]:
    """(scope, stream) of a segment name (``scope/stream/0.#epoch.0...``)."""
    parts = segment.split("/")
    return (parts[0], parts[1]) if len(parts) >= 2 else (segment, "")


class TokenIssuer:
    """Issues and checks delegation tokens; see the module docstring."""

    def __init__(self, secret: bytes, *, clock: Callable[[], float] = time.time,
                 lifetime_s: int = TOKEN_LIFETIME_S) -> None:
        self._secret, self._clock, self.lifetime_s = secret, clock, lifetime_s
        self._last: tuple[str, Grant, int] | None = None  # one verified token: a connection reuses it

    def issue(self, user_id: int, scope: str, stream: str, ops: frozenset[str], *, created_at: int) -> str:
        now = int(self._clock())
        claims = {"iss": ISSUER, "sub": str(user_id), "cat": created_at, "iat": now, "exp": now + self.lifetime_s,
                  "scope": scope, "stream": stream, "ops": sorted(ops)}
        return jwt.encode(claims, self._secret, algorithm=ALGORITHM)

    def check(self, token: str, scope: str, stream: str, op: str) -> Grant:
        """The grant of ``token`` for ``op`` on ``scope/stream`` (a reader group's table
        ``scope/<group>_kvtable`` counts as the scope's); AuthError with an
        AuthTokenCheckFailed code otherwise. Says nothing about the user now:
        :func:`check_segment` adds that."""
        grant = self._verify(token)
        if grant.scope != scope or (grant.stream not in (stream, "") and not stream.endswith(TABLE_SUFFIX)):
            raise AuthError(AUTH_CHECK_FAILED, f"the token is for {grant.scope}/{grant.stream}, not {scope}/{stream}")
        if op not in grant.ops:
            raise AuthError(AUTH_CHECK_FAILED, f"the token does not allow {op} on {scope}/{stream}",
                            action=OP_ACTIONS[op].value)
        return grant

    def _verify(self, token: str) -> Grant:
        now = self._clock()
        last = self._last
        if last is not None and last[0] == token:
            if now >= last[2]:
                raise AuthError(AUTH_TOKEN_EXPIRED, "the delegation token expired")
            return last[1]
        if not token:
            raise AuthError(AUTH_CHECK_FAILED, "a delegation token is required")
        try:
            raw = jwt.decode(token, self._secret, algorithms=[ALGORITHM], issuer=ISSUER,
                             options={"verify_exp": False, "require": ["exp", "sub", "cat"]})
            grant = Grant(int(raw["sub"]), int(raw["cat"]), str(raw["scope"]), str(raw["stream"]),
                          frozenset(raw["ops"]))
            exp = int(raw["exp"])
        except (jwt.PyJWTError, KeyError, TypeError, ValueError):
            raise AuthError(AUTH_CHECK_FAILED, "invalid delegation token") from None
        if now >= exp:
            raise AuthError(AUTH_TOKEN_EXPIRED, "the delegation token expired")
        self._last = (token, grant, exp)
        return grant


# -- the segment store's check ---------------------------------------------------------------
def check_segment(broker, issuer: TokenIssuer, anonymous: Principal | None, token: str, segment: str,
                  op: str) -> Principal:
    """Who may do ``op`` on ``segment`` with ``token`` (an empty one: the anonymous user,
    when there is one); AuthError with an AuthTokenCheckFailed code otherwise."""
    scope, stream = scope_stream(segment)
    if not token and anonymous is not None:
        principal = anonymous
    else:
        principal = issuer.check(token, scope, stream, op).principal
    user = principal.live(broker.meta.users)
    target = segment_target(broker, scope, stream, op)
    if target is not None:
        permit(broker.meta.users, principal, user, *target, broker=broker)
    _logged_in(user)
    return principal


def segment_target(broker, scope: str, stream: str, op: str) -> tuple[Action, int | None, int | None] | None:
    """(action, stream id, topic id) that ``op`` on a segment of ``scope/stream`` needs:
    a stream's poll/send permission, or for a reader group's table reading its scope.
    None when the stream is missing (the handler answers NoSuchSegment: nothing to protect)."""
    table = stream.endswith(TABLE_SUFFIX)
    names = broker.addressing.topic_for_pravega(scope, stream)  # a [[binding]]'s names included
    try:
        sid = broker.get_stream(names[0] if names else scope).id
    except (NotFound, InvalidArgument):
        if table:  # a table under no scope: nobody may make one
            return Action.READ_STREAM, None, None
        return None
    if table:
        return Action.READ_STREAM, sid, None  # permit() also admits who may poll a topic of the scope
    try:
        topic = broker.get_topic(*names) if names else None
    except NotFound:
        topic = None
    return None if topic is None else (OP_ACTIONS[op], topic.stream_id, topic.id)


def permit(users, principal: Principal, user, action: Action, stream_id: int | None,
           topic_id: int | None = None, *, broker=None) -> None:
    """AuthError (check failed) unless ``user`` may do ``action`` now (a reader group's
    table, READ_STREAM with ``broker`` given: see :func:`table_reader`)."""
    if stream_id is not None and principal.can(users, user, action, stream_id, topic_id):
        return
    if (stream_id is not None and broker is not None and action is Action.READ_STREAM
            and table_reader(broker, users, user, stream_id, ignore_status=not principal.anonymous)):
        return
    raise AuthError(AUTH_CHECK_FAILED, f"user {user.username!r} may not {action.value}", action=action.value)


def table_reader(broker, users, user, stream_id: int, *, ignore_status: bool = False) -> bool:
    """May ``user`` keep reader-group state under this scope? Who may read the scope, or poll
    one of its topics (a reader group's table names no topic: a reader of any may have one)."""
    if users.can(user, Action.READ_STREAM, stream_id, ignore_status=ignore_status):
        return True
    return any(users.can(user, Action.POLL_MESSAGES, stream_id, t.id, ignore_status=ignore_status)
               for t in broker.list_topics(stream_id))


def _authorization(metadata) -> str | None:
    return next((v for k, v in metadata if k.lower() == "authorization"), None)


def _logged_in(user) -> None:
    actor = access.current_actor()
    if actor is not access.LOCAL and actor.user_id != user.id:
        actor.logged_in(user.username, user.id)


# -- the controller's check ------------------------------------------------------------------
class Authenticator:
    """Checks controller credentials against Ferry's users, with a short cache.
    ``anonymous``: who a call without an ``authorization`` header acts as (None: refused)."""

    def __init__(self, broker, issuer: TokenIssuer, *, anonymous: Principal | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.broker, self.issuer, self.anonymous, self._clock = broker, issuer, anonymous, clock
        self._cache: OrderedDict[str, tuple[object, float]] = OrderedDict()
        self._version = broker.meta.users.version
        # The outcome of a check the driver ran in a worker thread (prepare), for the
        # very next user() call of that header: (header, version, UserInfo or FerryError).
        self._settled: tuple[str, int, object] | None = None

    def prepare(self, metadata) -> "Callable[[], object] | None":
        """The password check a call needs before :meth:`user` can answer it without
        argon2 on the event loop (tens of milliseconds): a function for a worker
        thread, whose outcome goes to :meth:`settle`; None when nothing is slow
        (no credentials, or remembered)."""
        header = _authorization(metadata)
        if header is None:
            return None
        self._fresh()
        hit = self._cache.get(header)
        if hit is not None and hit[1] > self._clock():
            return None
        try:
            name, password = parse_basic(header)
        except AuthError:
            return None   # malformed: user() answers it, no check needed
        users = self.broker.meta.users
        version = users.version

        def work() -> object:
            try:
                return users.authenticate(name, password)   # audits failures; LoginThrottled is one
            except FerryError as exc:
                return exc

        def settle(outcome: object) -> None:
            self._settled = (header, version, outcome)

        work.settle = settle  # type: ignore[attr-defined]
        return work

    def _fresh(self) -> None:
        if self._version != self.broker.meta.users.version:  # a user, password, permission or token changed
            self._cache.clear()
            self._version = self.broker.meta.users.version

    def user(self, metadata) -> object:
        """The UserInfo of a call's ``authorization`` metadata; AuthError otherwise."""
        header = _authorization(metadata)
        users = self.broker.meta.users
        if header is None:
            if self.anonymous is None:
                raise AuthError("UNAUTHENTICATED", "this controller requires credentials (a Ferry user's, "
                                                   "Basic: auth_enabled=True)")
            try:
                info = self.anonymous.live(users)
            except AuthError as exc:
                raise AuthError("UNAUTHENTICATED", exc.message) from None
            _logged_in(info)
            return info
        self._fresh()
        now = self._clock()
        hit = self._cache.get(header)
        if hit is not None and hit[1] > now:
            self._cache.move_to_end(header)
            _logged_in(hit[0])
            return hit[0]
        name, password = parse_basic(header)
        settled, self._settled = self._settled, None
        if settled is not None and settled[0] == header:   # checked in a worker thread just now
            version, outcome = settled[1], settled[2]
        else:
            version = users.version
            try:
                outcome = users.authenticate(name, password)  # audits failures; LoginThrottled is one
            except FerryError as exc:
                outcome = exc
        if isinstance(outcome, FerryError):
            raise AuthError("UNAUTHENTICATED", outcome.message) from None
        try:
            info = users.recheck(outcome)   # deleted or deactivated while the check ran
        except FerryError as exc:
            raise AuthError("UNAUTHENTICATED", exc.message) from None
        if version == users.version:  # nothing changed during the check: safe to remember
            self._cache[header] = (info, now + CREDENTIAL_CACHE_S)
            while len(self._cache) > MAX_CACHED_CREDENTIALS:
                self._cache.popitem(last=False)
        _logged_in(info)
        return info

    def require(self, user, action: Action, stream_id: int | None = None, topic_id: int | None = None) -> None:
        if not self.broker.meta.users.can(user, action, stream_id, topic_id):
            raise AuthError("PERMISSION_DENIED", f"user {user.username!r} may not {action.value}",
                            action=action.value)

    def require_any(self, user, actions, stream_id: int | None = None, topic_id: int | None = None) -> None:
        """PERMISSION_DENIED (naming the first action) unless ``user`` may do one of ``actions``."""
        if not any(self.broker.meta.users.can(user, a, stream_id, topic_id) for a in actions):
            raise AuthError("PERMISSION_DENIED", f"user {user.username!r} may not {actions[0].value}",
                            action=actions[0].value)


__all__ = ["AUTH_CHECK_FAILED", "AUTH_TOKEN_EXPIRED", "AuthError", "Authenticator", "Grant", "OP_ACTIONS",
           "Principal", "READ", "TokenIssuer", "WRITE", "check_segment", "load_secret", "parse_basic", "permit",
           "scope_stream", "segment_target", "TABLE_SUFFIX", "table_reader"]
