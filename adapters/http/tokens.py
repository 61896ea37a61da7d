"""Access tokens of the HTTP API: JWTs (PyJWT, HS256), refresh and revocation.

Theory of operation
-------------------
Login answers a JWT whose claims follow Iggy (../shared/protocols/iggy.md
section 10.2): ``jti`` (a UUIDv7 string), ``iss``/``aud``, ``sub`` (the user's
wire id), ``iat``, ``nbf`` and ``exp = iat + lifetime``. Every other request
carries it as ``Authorization: Bearer``.

* **Secret.** Iggy ships a well-known default secret (iggy.md section 8); we
  never do. ``[listeners.http] jwt_secret`` sets one (at least 32 bytes, the
  HS256 key size RFC 7518 section 3.2 requires); otherwise 32 random bytes are
  generated on first start and kept in ``<data_dir>/http-jwt-secret``
  (mode 0600), so tokens survive a restart.
* **Revocation.** Logout and refresh revoke the token's ``jti`` until its
  ``exp`` (after that the signature check refuses it anyway). The revoked set
  is pruned of expired entries and persisted through ``persist`` (the
  metadata store's settings), so a restart does not resurrect a logged-out
  token. It holds at most :data:`MAX_REVOKED` entries; past that the ones
  expiring soonest are dropped first.
* **Whose token.** A private claim (RFC 7519 4.3), ``ferry_uc``, the user's
  ``created_at`` (µs), ties a token to its user, so a token of a deleted user
  never passes for a later user given the same (reused) id.
  ``HttpApp._authenticate`` checks it on every request (docs/iggy.md "What a
  credential change does to live sessions"). A token without it (issued
  before it existed) is held to the rest only.
* The clock is an argument (``clock() -> seconds``) so tests can move time.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import jwt

from core.keyfile import persistent_key
from core.message import uuid7

ISSUER = AUDIENCE = "iggy.rs"  # iggy.md 10.2 claim values
ALGORITHM = "HS256"
DEFAULT_LIFETIME_S = 3600  # iggy.md section 8: access tokens live 1 h
LEEWAY_S = 5  # iggy.md section 8: clock skew 5 s
MIN_SECRET_BYTES = 32  # RFC 7518 3.2: an HS256 key must be at least 256 bits
SECRET_FILE = "http-jwt-secret"
# One entry per logged-out, not yet expired token: 100 000 entries is ~10 MB
# of JSON at most and far above any plausible logout rate per token lifetime.
MAX_REVOKED = 100_000
REVOKED_SETTING = "http.revoked_tokens"
# Tokens whose signature is remembered as checked: a few KB each at most
# (the header limit bounds a token), so 4096 of them stay under ~10 MB.
VERIFIED_CACHE = 4096


class TokenError(Exception):
    """A bearer or refresh token that is missing, malformed, expired or revoked.

    ``revoked`` tells a token that was valid but already used up (revoked)."""

    def __init__(self, reason: str, *, revoked: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.revoked = revoked


@dataclass(frozen=True, slots=True)
class Claims:
    user_id: int  # canonical (0-based)
    jti: str
    exp: int
    user_created_at: int | None = None  # µs; the ``ferry_uc`` claim


def load_secret(data_dir: Path, configured: str = "") -> bytes:
    """The signing key: ``configured`` if set, else the persisted random one.

    Called once when the listener starts (blocking file I/O). Raises
    ValueError for a configured secret shorter than MIN_SECRET_BYTES."""
    if configured:
        key = configured.encode("utf-8")
        if len(key) < MIN_SECRET_BYTES:
            raise ValueError(f"listeners.http.jwt_secret must be at least {MIN_SECRET_BYTES} bytes")
        return key
    return persistent_key(Path(data_dir) / SECRET_FILE, MIN_SECRET_BYTES)


class TokenService:
    """Issues, verifies, refreshes and revokes access tokens."""

    def __init__(self, secret: bytes, *, lifetime_s: int = DEFAULT_LIFETIME_S,
                 clock: Callable[[], float] = time.time, id_base: int = 1,
                 persist: Callable[[str], None] | None = None, revoked: str | None = None) -> None:
        self._secret = secret
        self.lifetime_s = lifetime_s
        self._clock = clock
        self._id_base = id_base
        self._persist = persist
        self._revoked: dict[str, int] = {}
        self._verified: dict[str, Claims] = {}
        if revoked:
            try:
                loaded = json.loads(revoked)
                self._revoked = {str(k): int(v) for k, v in loaded.items()}
            except (ValueError, TypeError, AttributeError):
                self._revoked = {}  # unreadable: start empty rather than refuse to serve

    def issue(self, user_id: int, *, user_created_at: int | None = None) -> tuple[str, int]:
        """A fresh token for canonical ``user_id``: (token, exp in unix seconds).
        ``user_created_at`` becomes the ``ferry_uc`` claim (module docstring)."""
        now = int(self._clock())
        exp = now + self.lifetime_s
        claims = {"jti": str(uuid.UUID(int=uuid7())), "iss": ISSUER, "aud": AUDIENCE,
                  "sub": str(user_id + self._id_base), "iat": now, "nbf": now, "exp": exp}
        if user_created_at is not None:
            claims["ferry_uc"] = user_created_at
        return jwt.encode(claims, self._secret, algorithm=ALGORITHM), exp

    def verify(self, token: str) -> Claims:
        """The claims of a valid, unrevoked token; raises TokenError.

        A token whose signature was checked once is remembered (the check
        costs ~0.2 ms, more than a whole small request): a signature is a
        property of the exact string, so only expiry and revocation are
        re-checked on a hit. At most VERIFIED_CACHE tokens are remembered."""
        if not token:
            raise TokenError("empty token")
        claims = self._verified.get(token)
        if claims is None:
            claims = self._verify_signature(token)
            if len(self._verified) >= VERIFIED_CACHE:
                self._verified.pop(next(iter(self._verified)))  # oldest first (insertion order)
            self._verified[token] = claims
        elif self._clock() > claims.exp + LEEWAY_S:
            del self._verified[token]
            raise TokenError("invalid token (ExpiredSignatureError)")
        if claims.jti in self._revoked:
            raise TokenError("token revoked", revoked=True)
        return claims

    def _verify_signature(self, token: str) -> Claims:
        try:
            raw = self._decode_at(token)
        except jwt.PyJWTError as exc:
            raise TokenError(f"invalid token ({type(exc).__name__})") from None
        sub, jti, exp = raw.get("sub"), raw.get("jti"), raw.get("exp")
        # ASCII digits only: str.isdigit() also takes "²" and other Unicode digits that
        # int() refuses (a ValueError, not a TokenError; tests/fuzz/regressions/http_jwt).
        if not (isinstance(sub, str) and sub.isascii() and sub.isdigit() and len(sub) <= 10 and isinstance(jti, str)
                and isinstance(exp, int)):
            raise TokenError("invalid token claims")
        created = raw.get("ferry_uc")
        if created is not None and (not isinstance(created, int) or isinstance(created, bool)):
            raise TokenError("invalid token claims")
        return Claims(int(sub) - self._id_base, jti, exp, created)

    def _decode_at(self, token: str) -> dict:
        """Check signature, issuer and audience with PyJWT, then the times
        against our own (injectable) clock."""
        raw = jwt.decode(token, self._secret, algorithms=[ALGORITHM], audience=AUDIENCE, issuer=ISSUER,
                         options={"verify_exp": False, "verify_nbf": False, "verify_iat": False,
                                  "require": ["exp", "iat", "sub", "jti"]})
        now = self._clock()
        exp, nbf = raw.get("exp"), raw.get("nbf", raw.get("iat"))
        if not isinstance(exp, int) or now > exp + LEEWAY_S:
            raise jwt.ExpiredSignatureError("expired")
        if isinstance(nbf, int) and now + LEEWAY_S < nbf:
            raise jwt.ImmatureSignatureError("not yet valid")
        return raw

    def revoke(self, claims: Claims) -> None:
        now = int(self._clock())
        self._revoked = {k: v for k, v in self._revoked.items() if v + LEEWAY_S >= now}
        self._revoked[claims.jti] = claims.exp
        if len(self._revoked) > MAX_REVOKED:
            keep = sorted(self._revoked.items(), key=lambda kv: kv[1])[-MAX_REVOKED:]
            self._revoked = dict(keep)
        if self._persist is not None:
            self._persist(json.dumps(self._revoked, separators=(",", ":")))

    def refresh(self, token: str, check=None) -> tuple[Claims, str, int]:
        """Trade a valid token for a new one for the same user (and ``ferry_uc``);
        the old one is revoked (usable once). ``check(claims)`` runs before
        anything changes and may raise to refuse the trade."""
        claims = self.verify(token)
        if check is not None:
            check(claims)
        self.revoke(claims)
        new, exp = self.issue(claims.user_id, user_created_at=claims.user_created_at)
        return claims, new, exp


__all__ = ["Claims", "TokenError", "TokenService", "load_secret"]
