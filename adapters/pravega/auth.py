"""Pravega authentication: Basic credentials at the controller, delegation tokens at the segment store.

Theory of operation
-------------------
With ``[listeners.pravega_controller] auth = true`` the two Pravega listeners
check who is asking, the way a Pravega cluster with auth enabled does
(pravega.md sections 4.4 and 10):

1. The client (``StreamManager(uri, auth_enabled=True)`` with
   ``pravega_client_auth_method=Basic`` and ``..._username`` / ``..._password``
   in its environment) sends ``authorization: Basic base64(user:password)``
   with every controller RPC. :class:`Authenticator` checks it against
   Ferry's users (the same accounts Iggy, HTTP and NATS use) and the RPC's
   permission (:data:`core.permissions.Action`); failures are gRPC
   UNAUTHENTICATED / PERMISSION_DENIED.
2. ``getDelegationToken(scope, stream)`` returns a JWT naming the user, the
   scope and stream and what it may do there (read and/or write, from the
   user's poll/send permissions), valid ``TOKEN_LIFETIME_S``. The client
   reads ``exp`` to refresh it in time.
3. Every segment-store request carries that token; :meth:`TokenIssuer.check`
   verifies signature, expiry and scope/stream. A bad token is answered
   ``AuthTokenCheckFailed`` with error code 0 (check failed), an expired one
   with 1 (expired: the client fetches a new token and retries).

Argon2 password checks cost tens of milliseconds and the Rust client sends
its credentials on every RPC, so a verified credential is remembered for
``CREDENTIAL_CACHE_S`` (bounded). The signing key is random and kept in
``<data_dir>/pravega-token-secret``, so tokens outlive a restart.
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

from core.errors import FerryError
from core.keyfile import persistent_key
from core.permissions import Action

TOKEN_LIFETIME_S = 600  # Pravega's default delegation token TTL (controller.auth.tokenTtlInSeconds)
CREDENTIAL_CACHE_S = 60.0  # a changed password or disabled user takes effect within this
MAX_CACHED_CREDENTIALS = 1024  # distinct credentials remembered (bounded: a client cycling passwords)
SECRET_FILE = "pravega-token-secret"
SECRET_BYTES = 32  # HS256 key size (RFC 7518 section 3.2: at least the hash output size)
ALGORITHM = "HS256"
ISSUER = "ferry-pravega"
AUTH_CHECK_FAILED, AUTH_TOKEN_EXPIRED = 0, 1  # AuthTokenCheckFailed error codes (pravega.md 4.4)
READ, WRITE = "read", "write"


class AuthError(Exception):
    """``code``: a GrpcStatus name for the controller ("UNAUTHENTICATED",
    "PERMISSION_DENIED") or an AuthTokenCheckFailed error code for the segment store."""

    def __init__(self, code, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass(frozen=True, slots=True)
class Grant:
    """What a verified delegation token allows."""

    user_id: int
    scope: str
    stream: str
    ops: frozenset[str]


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


class TokenIssuer:
    """Issues and checks delegation tokens; see the module docstring."""

    def __init__(self, secret: bytes, *, clock: Callable[[], float] = time.time,
                 lifetime_s: int = TOKEN_LIFETIME_S) -> None:
        self._secret, self._clock, self.lifetime_s = secret, clock, lifetime_s
        self._last: tuple[str, Grant, int] | None = None  # one verified token: a connection reuses it

    def issue(self, user_id: int, scope: str, stream: str, ops: frozenset[str]) -> str:
        now = int(self._clock())
        claims = {"iss": ISSUER, "sub": str(user_id), "iat": now, "exp": now + self.lifetime_s,
                  "scope": scope, "stream": stream, "ops": sorted(ops)}
        return jwt.encode(claims, self._secret, algorithm=ALGORITHM)

    def check(self, token: str, scope: str, stream: str, op: str) -> Grant:
        """The grant of ``token`` for ``op`` on ``scope/stream`` (a reader group's table
        ``scope/<group>_kvtable`` counts as the scope's); AuthError with an
        AuthTokenCheckFailed code otherwise."""
        grant = self._verify(token)
        if grant.scope != scope or (grant.stream not in (stream, "") and not stream.endswith("_kvtable")):
            raise AuthError(AUTH_CHECK_FAILED, f"the token is for {grant.scope}/{grant.stream}, not {scope}/{stream}")
        if op not in grant.ops:
            raise AuthError(AUTH_CHECK_FAILED, f"the token does not allow {op} on {scope}/{stream}")
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
                             options={"verify_exp": False, "require": ["exp", "sub"]})
            grant = Grant(int(raw["sub"]), str(raw["scope"]), str(raw["stream"]), frozenset(raw["ops"]))
            exp = int(raw["exp"])
        except (jwt.PyJWTError, KeyError, TypeError, ValueError):
            raise AuthError(AUTH_CHECK_FAILED, "invalid delegation token") from None
        if now >= exp:
            raise AuthError(AUTH_TOKEN_EXPIRED, "the delegation token expired")
        self._last = (token, grant, exp)
        return grant


class Authenticator:
    """Checks controller credentials against Ferry's users, with a short cache."""

    def __init__(self, broker, issuer: TokenIssuer, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.broker, self.issuer, self._clock = broker, issuer, clock
        self._cache: OrderedDict[str, tuple[object, float]] = OrderedDict()

    def user(self, metadata) -> object:
        """The UserInfo of a call's ``authorization`` metadata; AuthError otherwise."""
        header = next((v for k, v in metadata if k.lower() == "authorization"), None)
        if header is None:
            raise AuthError("UNAUTHENTICATED", "this controller requires credentials (auth is enabled)")
        now = self._clock()
        hit = self._cache.get(header)
        if hit is not None and hit[1] > now:
            self._cache.move_to_end(header)
            return hit[0]
        name, password = parse_basic(header)
        try:
            info = self.broker.meta.authenticate(name, password)
        except FerryError as exc:
            raise AuthError("UNAUTHENTICATED", exc.message) from None
        self._cache[header] = (info, now + CREDENTIAL_CACHE_S)
        while len(self._cache) > MAX_CACHED_CREDENTIALS:
            self._cache.popitem(last=False)
        return info

    def require(self, user, action: Action, stream_id: int | None = None, topic_id: int | None = None) -> None:
        if not self.broker.meta.can(user, action, stream_id, topic_id):
            raise AuthError("PERMISSION_DENIED", f"user {user.username!r} may not {action.value}")


__all__ = ["AUTH_CHECK_FAILED", "AUTH_TOKEN_EXPIRED", "AuthError", "Authenticator", "Grant", "READ",
           "TokenIssuer", "WRITE", "load_secret", "parse_basic"]
