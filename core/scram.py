"""SCRAM credentials (RFC 5802, RFC 7677) kept beside the argon2 password hashes.

Theory of operation
-------------------
A SCRAM server never sees the password: it proves the client knows it by
checking a proof against the user's *StoredKey*, and proves itself with the
*ServerKey* (RFC 5802 section 3). Both come from the salted password,
``Hi(password, salt, i)`` (PBKDF2 with HMAC over the mechanism's hash, section
2.2), which cannot be computed from an argon2id hash. So whenever the
plaintext is at hand, :class:`core.auth.UserStore` has one credential per
mechanism derived here and stored in the ``scram_credentials`` table
(metadata migration 4): salt, iteration count, StoredKey and ServerKey, the
four values Kafka keeps per user and mechanism (its ``ScramCredential``,
derived by ``ScramFormatter.generateCredential``). That happens when a
password is set (a new user, a password change) and, for a user created
before this table existed, at its next successful password login through any
protocol (:meth:`ScramStore.backfill`).

A user without a credential (unknown, or not backfilled yet) gets a *mock*
credential: salt and keys derived from a server secret and the user name, so
the same name always meets the same salt and nothing in the exchange tells
whether the user exists; its proof can never verify (the StoredKey is no
hash of any key a client could know). PostgreSQL's SCRAM does the same
(``mock_scram_secret`` in its ``auth-scram.c``); Kafka's ``ScramSaslServer``
instead refuses an unknown user at the first message. The secret is one row
of the ``settings`` table, so every gateway of a scale-out store (which
replicates that table) mocks alike.

Nothing here knows a protocol: the exchange itself (message syntax, nonces)
is the adapter's (adapters/kafka/scram.py), which calls :func:`verify_proof`
and :func:`server_signature`.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import FerryError, InvalidArgument

if TYPE_CHECKING:  # pragma: no cover
    from .metadb import MetaDb

log = logging.getLogger("ferry.metadata")

# The mechanisms kept for every user, by their IANA SASL names (RFC 7677 for
# SHA-256; SHA-512 is the same construction, Kafka's ScramMechanism offers both),
# with the hashlib name of each one's hash.
MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's ScramMechanism refuses fewer than 4096 iterations for either
# mechanism (minIterations), and RFC 7677 section 4 asks for at least 4096:
# what each login makes the client compute, ~4 ms of CPU per mechanism here.
SCRAM_ITERATIONS = 4096
# Fresh random salt per credential; 32 bytes is also what the mock derivation
# (HMAC-SHA-256) gives, so a mock salt has the length of a real one.
SALT_BYTES = 32
# The settings row holding the mock-credential secret (module docstring).
MOCK_SECRET_SETTING = "scram_mock_secret"
MOCK_SECRET_BYTES = 32


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """One user's SCRAM credential for one mechanism; ``user_id`` is None for a mock."""

    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes
    user_id: int | None = None

    @property
    def mock(self) -> bool:
        return self.user_id is None


def hash_name(mechanism: str) -> str:
    """The hashlib name of ``mechanism``'s hash; InvalidArgument for another mechanism."""
    try:
        return MECHANISMS[mechanism]
    except (KeyError, TypeError):
        raise InvalidArgument(f"SCRAM mechanism must be one of {tuple(MECHANISMS)}, got {mechanism!r}") from None


def _hmac(name: str, key: bytes, data: bytes) -> bytes:
    return hmac.digest(key, data, name)


def derive(mechanism: str, password: str, *, salt: bytes | None = None,
           iterations: int = SCRAM_ITERATIONS) -> ScramCredential:
    """The credential of ``password`` (RFC 5802 section 3): SaltedPassword = Hi(password,
    salt, i), ClientKey = HMAC(SaltedPassword, "Client Key"), StoredKey = H(ClientKey),
    ServerKey = HMAC(SaltedPassword, "Server Key"). The password is taken as its UTF-8
    bytes without SASLprep, as Kafka's ScramFormatter does (clients do the same)."""
    name = hash_name(mechanism)
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(name, password.encode("utf-8"), salt, iterations)
    client_key = _hmac(name, salted, b"Client Key")
    return ScramCredential(mechanism, salt, iterations, hashlib.new(name, client_key).digest(),
                           _hmac(name, salted, b"Server Key"))


def derive_all(password: str) -> list[ScramCredential]:
    """One fresh credential per mechanism: what a new password is stored as."""
    return [derive(mechanism, password) for mechanism in MECHANISMS]


def verify_proof(credential: ScramCredential, auth_message: bytes, proof: bytes) -> bool:
    """Does ``proof`` (the client-final ``p=``, decoded) prove the password? RFC 5802
    section 3: ClientSignature = HMAC(StoredKey, AuthMessage), ClientKey = proof XOR
    ClientSignature, and H(ClientKey) must be StoredKey (compared in constant time)."""
    name = hash_name(credential.mechanism)
    signature = _hmac(name, credential.stored_key, auth_message)
    if len(proof) != len(signature):
        return False
    client_key = bytes(a ^ b for a, b in zip(proof, signature))
    return hmac.compare_digest(hashlib.new(name, client_key).digest(), credential.stored_key)


def server_signature(credential: ScramCredential, auth_message: bytes) -> bytes:
    """ServerSignature = HMAC(ServerKey, AuthMessage): the server-final ``v=``."""
    return _hmac(hash_name(credential.mechanism), credential.server_key, auth_message)


_COLUMNS = "mechanism, salt, iterations, stored_key, server_key, user_id"


class ScramStore:
    """The ``scram_credentials`` rows of the metadata file ``db`` (module docstring).
    :class:`core.auth.UserStore` owns one and calls :meth:`write` inside its own
    password transactions; the rows go with their user (ON DELETE CASCADE)."""

    def __init__(self, db: "MetaDb") -> None:
        self._db = db
        self._secret: bytes | None = None

    def write(self, conn, user_id: int, credentials: list[ScramCredential], *, replace: bool = True) -> None:
        """Inside the caller's transaction: store ``credentials`` for the user, replacing
        what it had (a new password) or, ``replace=False``, keeping any it has."""
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        conn.executemany(
            f"{verb} INTO scram_credentials (user_id, mechanism, salt, iterations, stored_key, server_key)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [(user_id, c.mechanism, c.salt, c.iterations, c.stored_key, c.server_key) for c in credentials])

    def missing(self, user_id: int) -> bool:
        """True when the user lacks a credential for some mechanism."""
        row = self._db.one("SELECT COUNT(*) FROM scram_credentials WHERE user_id = ?", (user_id,))
        return row[0] < len(MECHANISMS)

    def backfill(self, user_id: int, password: str, pw_hash: str) -> bool:
        """After a successful password login: give a user that has none its credentials,
        unless its password changed since ``pw_hash`` was verified (the credentials
        would then be the old password's). Never fails the login: a refused write
        (a full disk, an unreachable scale-out cluster) is logged and tried again
        at the next login. Returns True when written."""
        if not self.missing(user_id):
            return False
        credentials = derive_all(password)  # outside the lock: PBKDF2 costs milliseconds
        try:
            with self._db.transaction() as conn:
                current = conn.execute("SELECT 1 FROM users WHERE id = ? AND password_hash = ?",
                                       (user_id, pw_hash)).fetchone()
                if current is None:
                    return False
                self.write(conn, user_id, credentials, replace=False)
        except FerryError as exc:
            log.warning("SCRAM credentials not stored", extra={"user_id": user_id, "error": str(exc)})
            return False
        return True

    def get(self, user_id: int, mechanism: str) -> ScramCredential | None:
        """The user's stored credential for ``mechanism``, or None."""
        row = self._db.one(f"SELECT {_COLUMNS} FROM scram_credentials WHERE user_id = ? AND mechanism = ?",
                           (user_id, mechanism))
        return None if row is None else ScramCredential(*row)

    def mock(self, username: str, mechanism: str) -> ScramCredential:
        """The mock credential of ``username`` (module docstring): the same for the same
        name and secret, of the same shape as a real one, never verifiable."""
        name = hash_name(mechanism)
        size = hashlib.new(name).digest_size
        seed = b"\0".join((mechanism.encode(), username.encode("utf-8", "surrogatepass")))
        secret = self._mock_secret()

        def part(label: bytes, length: int) -> bytes:
            return hmac.digest(secret, label + b"\0" + seed, "sha512")[:length]

        return ScramCredential(mechanism, part(b"salt", SALT_BYTES), SCRAM_ITERATIONS,
                               part(b"stored-key", size), part(b"server-key", size))

    def _mock_secret(self) -> bytes:
        if self._secret is None:
            row = self._db.one("SELECT value FROM settings WHERE key = ?", (MOCK_SECRET_SETTING,))
            if row is None:
                # Created once per store; INSERT OR IGNORE: another gateway of a scale-out
                # store may have made it first, and then its value is the one read back.
                with self._db.transaction() as conn:
                    conn.execute("INSERT OR IGNORE INTO settings (key, value) VALUES (?, ?)",
                                 (MOCK_SECRET_SETTING, secrets.token_hex(MOCK_SECRET_BYTES)))
                row = self._db.one("SELECT value FROM settings WHERE key = ?", (MOCK_SECRET_SETTING,))
            self._secret = bytes.fromhex(row[0])
        return self._secret


__all__ = [
    "MECHANISMS",
    "SCRAM_ITERATIONS",
    "ScramCredential",
    "ScramStore",
    "derive",
    "derive_all",
    "server_signature",
    "verify_proof",
]
