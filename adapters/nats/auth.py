"""NATS authentication and per-user permissions, nats-server's model (no I/O).

Theory of operation
-------------------
nats-server's ``authorization`` block (nats.md section 12) names either one
``token``, one ``user``/``password``, or a ``users`` list where each user may
carry ``permissions``::

    authorization {
      users = [
        {user: alice, password: a1, permissions: {
            publish: {allow: ["orders.>"], deny: ["orders.secret"]},
            subscribe: ["orders.*", "work.> workers"]}}   # "subject queue"
        {user: bob, password: b2}                         # no restrictions
      ]
      default_permissions: {publish: "public.>"}          # users without their own
      timeout: 2                                          # seconds to send CONNECT
    }

:func:`auth_from_block` turns that block (as :mod:`adapters.nats.natsconf`
reads it) into an :class:`Auth`, whose :meth:`Auth.authenticate` is the
connection state machine's ``authenticate(Connect)`` hook: ``False`` refuses,
``True`` lets the client in unrestricted, a :class:`UserPermissions`
lets it in with those rights. Secrets are compared in constant time.

Permission checks follow nats-server's ``canPublish`` / ``canSubscribe``
(server/client.go): a list entry is a subscription pattern. ``allow`` absent
means everything is allowed; ``deny`` is checked after ``allow``. A
subscription is allowed when an allow pattern covers every subject it can
match (:func:`covers`: ``allow: foo.*`` lets ``SUB foo.*`` and ``SUB foo.bar``
through, not ``SUB foo.>``), and denied when a deny pattern matches its
subject with the subscription's wildcards read as literal tokens (the
sublist's reading, so ``deny: $SYS.>`` refuses ``SUB $SYS.>`` while
``SUB >`` stays allowed); deliveries on denied subjects are then filtered
out of such wide subscriptions (:meth:`UserPermissions.delivery_filter`),
as nats-server does. A subscribe entry ``"subject queue"``
names a queue group (the queue may use wildcards too): for a queue
subscription, matching queue entries decide, otherwise plain entries do; a
plain subscription is never allowed by a queue-only entry.

``no_auth_user`` (a top-level key in nats-server's config) names the user a
client without credentials becomes: INFO then says no auth is required, and
operations run with that user's permissions even before ``CONNECT`` (as
nats-server 2.15.1 does; :attr:`Auth.initial_permissions`). A client that
does send credentials is checked as usual.

Not supported (refused with a clear error so nothing is silently open):
``nkey`` users, bcrypt password hashes unless the optional ``bcrypt``
package is installed, ``allow_responses`` and auth callout.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from core.errors import InvalidArgument
from core.subjects import is_valid_pattern, subject_matches

from .connection import AUTH_TIMEOUT
from .events import Connect

# A bcrypt hash as nats-server stores one ("$2a$11$..."): it checks the "$2" prefix.
_BCRYPT_PREFIX = "$2"
_UNSUPPORTED_USER_KEYS = {"nkey": "nkey users", "allowed_connection_types": "allowed_connection_types"}
_UNSUPPORTED_PERM_KEYS = {"allow_responses": "allow_responses", "responses": "allow_responses"}


class AuthConfigError(InvalidArgument):
    """The authorization block cannot be used; the message says where."""


@dataclass(frozen=True, slots=True)
class SubjectRule:
    """One permission entry: a pattern, and for subscribe entries maybe a queue pattern."""

    subject: str
    queue: str = ""


@dataclass(frozen=True, slots=True)
class RuleList:
    """The allow or deny list of one direction (None = no list)."""

    rules: tuple[SubjectRule, ...]

    def plain_match(self, subject: str, match=subject_matches) -> bool:
        return any(not r.queue and match(r.subject, subject) for r in self.rules)

    def queue_matches(self, subject: str, match=subject_matches) -> list[str]:
        return [r.queue for r in self.rules if r.queue and match(r.subject, subject)]


def intersects(a: str, b: str) -> bool:
    """Whether some subject matches both patterns."""
    at, bt = a.split("."), b.split(".")
    for i, (x, y) in enumerate(zip(at, bt)):
        if x == ">" or y == ">":
            return True
        if x != y and x != "*" and y != "*":
            return False
    return len(at) == len(bt)


def covers(rule: str, pattern: str) -> bool:
    """Whether every subject ``pattern`` can match is matched by ``rule``.

    Stricter than nats-server's allow check, which matches the subscription
    subject with its wildcards read as literal tokens (so ``allow: a.*``
    would let ``SUB a.>`` through); here ``SUB a.>`` needs ``a.>`` or ``>``."""
    rt, pt = rule.split("."), pattern.split(".")
    for i, r in enumerate(rt):
        if r == ">":
            return i < len(pt)
        if i >= len(pt) or pt[i] == ">":
            return False
        if r != "*" and (pt[i] == "*" or pt[i] != r):
            return False
    return len(rt) == len(pt)


@dataclass(frozen=True, slots=True)
class UserPermissions:
    """A user's rights; satisfies :class:`adapters.nats.connection.Permissions`."""

    pub_allow: RuleList | None = None
    pub_deny: RuleList | None = None
    sub_allow: RuleList | None = None
    sub_deny: RuleList | None = None

    def can_publish(self, subject: str) -> bool:
        if self.pub_allow is not None and not self.pub_allow.plain_match(subject):
            return False
        return self.pub_deny is None or not self.pub_deny.plain_match(subject)

    def delivery_filter(self, pattern: str) -> "Callable[[str], bool] | None":
        """For an allowed subscription whose pattern reaches into denied
        subjects (``SUB x.>`` with ``deny: x.secret``): a check that a
        delivered subject may be given to it; None when nothing needs checking."""
        if self.sub_deny is None:
            return None
        denied = tuple(r.subject for r in self.sub_deny.rules if not r.queue and intersects(r.subject, pattern))
        if not denied:
            return None
        return lambda subject: not any(subject_matches(d, subject) for d in denied)

    def can_subscribe(self, subject: str, queue: str) -> bool:
        allowed = True
        if self.sub_allow is not None:
            allowed = self.sub_allow.plain_match(subject, covers)
            queues = self.sub_allow.queue_matches(subject, covers) if queue else []
            if queues:   # a queue entry for this subject decides for queue subscriptions
                allowed = any(subject_matches(q, queue) for q in queues)
        if allowed and self.sub_deny is not None:
            allowed = not self.sub_deny.plain_match(subject)
            queues = self.sub_deny.queue_matches(subject) if queue else []
            if queues:
                allowed = not any(subject_matches(q, queue) for q in queues)
        return allowed


@dataclass(frozen=True, slots=True)
class User:
    name: str
    password: str = field(repr=False)
    permissions: UserPermissions | None = None


@dataclass(frozen=True)
class Auth:
    """Who may connect: a token, or users (one from ``user``/``password`` or a list)."""

    token: str = field(default="", repr=False)
    users: Mapping[str, User] = field(default_factory=dict)
    timeout: float = AUTH_TIMEOUT
    no_auth_user: str = ""

    @property
    def enabled(self) -> bool:
        """Credentials are checked (the state machine needs the hook)."""
        return bool(self.token or self.users)

    @property
    def required(self) -> bool:
        """INFO's ``auth_required``: false when ``no_auth_user`` lets anyone in."""
        return self.enabled and not self.no_auth_user

    @property
    def initial_permissions(self) -> UserPermissions | None:
        """Rights of a client before its CONNECT (the no_auth_user's, if any)."""
        user = self.users.get(self.no_auth_user) if self.no_auth_user else None
        return user.permissions if user is not None else None

    def authenticate(self, connect: Connect) -> "bool | UserPermissions":
        """The state machine's hook: False, True, or the user's permissions."""
        if self.no_auth_user and not (connect.user or connect.password or connect.auth_token):
            user = self.users[self.no_auth_user]
            return user.permissions if user.permissions is not None else True
        if self.token:
            return _same(connect.auth_token, self.token)
        user = self.users.get(connect.user)
        # Compare against something even for an unknown user, so timing does not tell.
        ok = _check_password(connect.password, user.password if user else "\0")
        if user is None or not ok:
            return False
        return user.permissions if user.permissions is not None else True


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def _check_password(given: str, stored: str) -> bool:
    if stored.startswith(_BCRYPT_PREFIX):
        import bcrypt  # checked available when the config was read
        return bcrypt.checkpw(given.encode(), stored.encode())
    return _same(given, stored)


def simple_auth(user: str = "", password: str = "", token: str = "",
                timeout: float = AUTH_TIMEOUT) -> Auth:
    """``--user/--pass`` or ``--auth`` as an :class:`Auth` (empty = no auth)."""
    if token and (user or password):
        raise AuthConfigError("set a token or a user and password, not both")
    if bool(user) != bool(password):
        raise AuthConfigError("user and password go together")
    if user:
        _check_hash_support(password, "password")
        return Auth(users={user: User(user, password)}, timeout=timeout)
    return Auth(token=token, timeout=timeout)


def auth_from_block(block: Mapping[str, Any], where: str = "authorization", no_auth_user: str = "") -> Auth:
    """An :class:`Auth` from a parsed ``authorization`` block (and the config's
    top-level ``no_auth_user``). Raises :class:`AuthConfigError` naming the field."""
    auth = _auth_from_block(block, where)
    if no_auth_user:
        if no_auth_user not in auth.users:
            raise AuthConfigError(f"no_auth_user: {no_auth_user!r} is not a user of {where}")
        auth = Auth(users=auth.users, timeout=auth.timeout, no_auth_user=no_auth_user)
    return auth


def _auth_from_block(block: Mapping[str, Any], where: str) -> Auth:
    if not isinstance(block, Mapping):
        raise AuthConfigError(f"{where}: must be a block {{...}}")
    low = {k.lower(): v for k, v in block.items()}
    if "no_auth_user" in low:
        raise AuthConfigError(f"{where}.no_auth_user: belongs at the top level of the file, as in nats-server")
    for key in ("nkeys", "auth_callout"):
        if key in low:
            raise AuthConfigError(f"{where}.{key}: not supported by Ferry")
    timeout = _seconds(low.get("timeout", AUTH_TIMEOUT), f"{where}.timeout")
    default_perms = None
    if "default_permissions" in low:
        default_perms = permissions_from(low["default_permissions"], f"{where}.default_permissions")
    token = _text(low.get("token", ""), f"{where}.token")
    user = _text(low.get("user", low.get("username", "")), f"{where}.user")
    password = _text(low.get("password", low.get("pass", "")), f"{where}.password")
    users_list = low.get("users")
    if users_list is not None and (user or token):
        raise AuthConfigError(f"{where}: a users list cannot be combined with user/password or token")
    if users_list is None:
        auth = simple_auth(user, password, token, timeout)
        if default_perms is not None and auth.users:
            only = next(iter(auth.users.values()))
            auth = Auth(users={only.name: User(only.name, only.password, default_perms)}, timeout=timeout)
        return auth
    if not isinstance(users_list, list):
        raise AuthConfigError(f"{where}.users: must be an array of user blocks")
    users: dict[str, User] = {}
    for i, entry in enumerate(users_list):
        u = _user(entry, f"{where}.users[{i}]", default_perms)
        if u.name in users:
            raise AuthConfigError(f"{where}.users[{i}].user: {u.name!r} is listed twice")
        users[u.name] = u
    return Auth(users=users, timeout=timeout)


def _user(entry: Any, where: str, default_perms: UserPermissions | None) -> User:
    if not isinstance(entry, Mapping):
        raise AuthConfigError(f"{where}: must be a block {{user: ..., password: ...}}")
    low = {k.lower(): v for k, v in entry.items()}
    for key, what in _UNSUPPORTED_USER_KEYS.items():
        if key in low:
            raise AuthConfigError(f"{where}.{key}: {what} are not supported by Ferry")
    name = _text(low.get("user", low.get("username", "")), f"{where}.user")
    password = _text(low.get("password", low.get("pass", "")), f"{where}.password")
    if not name or not password:
        raise AuthConfigError(f"{where}: needs user and password")
    _check_hash_support(password, f"{where}.password")
    perms = default_perms
    if "permissions" in low:
        perms = permissions_from(low["permissions"], f"{where}.permissions")
    return User(name, password, perms)


def permissions_from(block: Any, where: str) -> UserPermissions:
    """``{publish: ..., subscribe: ...}`` where each side is a pattern, a list of
    patterns (the allow list) or ``{allow: [...], deny: [...]}``."""
    if not isinstance(block, Mapping):
        raise AuthConfigError(f"{where}: must be a block {{publish: ..., subscribe: ...}}")
    low = {k.lower(): v for k, v in block.items()}
    for key, what in _UNSUPPORTED_PERM_KEYS.items():
        if key in low:
            raise AuthConfigError(f"{where}.{key}: {what} is not supported by Ferry")
    unknown = set(low) - {"publish", "pub", "subscribe", "sub"}
    if unknown:
        raise AuthConfigError(f"{where}.{sorted(unknown)[0]}: unknown permission key "
                              "(expected publish, subscribe)")
    pub = low.get("publish", low.get("pub"))
    sub = low.get("subscribe", low.get("sub"))
    pub_allow, pub_deny = _direction(pub, f"{where}.publish", queues=False)
    sub_allow, sub_deny = _direction(sub, f"{where}.subscribe", queues=True)
    return UserPermissions(pub_allow, pub_deny, sub_allow, sub_deny)


def _direction(value: Any, where: str, queues: bool) -> tuple[RuleList | None, RuleList | None]:
    if value is None:
        return None, None
    if isinstance(value, Mapping):
        low = {k.lower(): v for k, v in value.items()}
        unknown = set(low) - {"allow", "deny"}
        if unknown:
            raise AuthConfigError(f"{where}.{sorted(unknown)[0]}: expected allow or deny")
        allow = _rules(low["allow"], f"{where}.allow", queues) if "allow" in low else None
        deny = _rules(low["deny"], f"{where}.deny", queues) if "deny" in low else None
        return allow, deny
    return _rules(value, where, queues), None


def _rules(value: Any, where: str, queues: bool) -> RuleList:
    items = value if isinstance(value, list) else [value]
    rules = []
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise AuthConfigError(f"{where}[{i}]: must be a subject string")
        parts = item.split()
        if len(parts) == 2 and queues:
            subject, queue = parts
        elif len(parts) == 1:
            subject, queue = parts[0], ""
        else:
            raise AuthConfigError(f"{where}[{i}]: {item!r} must be a subject"
                                  + (" or 'subject queue'" if queues else ""))
        if not is_valid_pattern(subject) or (queue and not is_valid_pattern(queue)):
            raise AuthConfigError(f"{where}[{i}]: {item!r} is not a valid subject pattern")
        rules.append(SubjectRule(subject, queue))
    return RuleList(tuple(rules))


def _text(value: Any, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise AuthConfigError(f"{where}: must be a string")
    return str(value)


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise AuthConfigError(f"{where}: must be a positive number of seconds")
    return float(value)


def _check_hash_support(password: str, where: str) -> None:
    if password.startswith(_BCRYPT_PREFIX):
        try:
            import bcrypt  # noqa: F401
        except ImportError:
            raise AuthConfigError(f"{where}: bcrypt hashes need the optional 'bcrypt' package") from None


__all__ = ["Auth", "AuthConfigError", "covers", "intersects", "RuleList", "SubjectRule", "User", "UserPermissions",
           "auth_from_block", "permissions_from", "simple_auth"]
