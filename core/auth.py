"""Users, passwords and personal access tokens of the metadata store.

Theory of operation
-------------------
:class:`UserStore` is a collaborator that :class:`core.metadata.Metadata`
constructs and hands out as ``metadata.users``; it shares the store's
:class:`core.metadb.MetaDb` and clock (µs), given to its constructor. The
metadata store calls :meth:`UserStore.forget_grants` inside its delete
transactions and :meth:`UserStore.invalidate` when the file changed under it.

* Passwords are hashed with argon2id (argon2-cffi ``PasswordHasher``); only
  the PHC-format hash is stored. A successful login whose hash was made with
  older parameters stores a fresh hash (``check_needs_rehash``).
* ``authenticate`` answers :class:`InvalidCredentials` for an unknown user and
  for a wrong password alike, and verifies a dummy hash for an unknown user so
  the two take the same time. The status is checked *after* the password:
  Iggy checks it first (``login_user_with_credentials`` in apache/iggy
  ``core/server/src/shard/system/users.rs``), which tells anyone without the
  password that the account exists.
* SCRAM credentials (core/scram.py, :class:`ScramStore`, ``self.scram``) are
  written beside the hash whenever the plaintext is at hand: in the same
  transaction as a new user or a new password, and after the first successful
  password login of a user that has none (one made before they existed).
  :meth:`scram_credential` answers a mock credential for an unknown user, and
  :meth:`scram_login` puts the outcome of a SCRAM exchange through the login
  guard and the audit log, as :meth:`authenticate` does.
* Personal access tokens (PATs) are 50 random bytes, URL-safe base64 (67
  characters; Iggy's are base64 of 50 random bytes too, protocols/iggy.md
  section 5.9). The raw token is returned once; the store keeps its SHA-256,
  which suffices for a 400-bit random secret (no salt or slow hash needed:
  nothing to brute-force), and looks it up by that hash.
* The root user (id 0) cannot be deleted, deactivated, or given other
  permissions (Iggy's CannotDeleteUser / CannotChangePermissions).
* Live logins (core/credentials.py): ``live_user`` answers a user's current
  record from memory (dropped on every write to ``users``), so a session can
  check who it acts for on every request for the price of a dict lookup; and
  deleting a user calls the watchers (``watch_credentials``) once the
  deletion committed, so the transports end the user's logins at once.

Hashing costs tens of milliseconds of CPU. The store's lock is never held
while hashing, so ``authenticate``, ``create_user`` and ``change_password``
can run in a worker thread (``trio.to_thread.run_sync``) without stalling the
trio thread's metadata calls.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from .access import LoginGuard, audit, current_actor
from .credentials import CHANGED, CredentialChange, Watcher, Watchers
from .errors import (
    CannotChangePermissions,
    CannotDeleteUser,
    InvalidArgument,
    InvalidCredentials,
    InvalidPassword,
    InvalidToken,
    InvalidTokenName,
    InvalidUsername,
    LoginThrottled,
    PermissionDenied,
    TokenAlreadyExists,
    TokenExpired,
    TokenLimitReached,
    TokenNotFound,
    UserAlreadyExists,
    UserInactive,
    UserNotFound,
)
from .metadb import MAX_ID, MAX_INT64, Ident, check_ident, check_int, check_name, lowest_free_id
from .permissions import ROOT_USER_ID, Action, Permissions, allowed
from .scram import ScramCredential, ScramStore, derive_all, hash_name

if TYPE_CHECKING:  # pragma: no cover
    from .metadb import MetaDb

# Iggy's limits, apache/iggy core/common/src/commands/users/defaults.rs
# (also protocols/iggy.md sections 4.2 and 4.3), counted in bytes.
from .auth_limits import MAX_PASSWORD_BYTES, MAX_USERNAME_BYTES, MIN_PASSWORD_BYTES, MIN_USERNAME_BYTES  # noqa: E402
MIN_TOKEN_NAME_BYTES, MAX_TOKEN_NAME_BYTES = 3, 30
# LoginWithPersonalAccessToken accepts 1..100 bytes (MAX_PAT_LENGTH); longer
# input cannot be one of ours, so it is refused before hashing.
MAX_TOKEN_BYTES = 100
# Iggy server.toml `[personal_access_token] max_tokens_per_user = 100`
# (protocols/iggy.md section 8).
MAX_TOKENS_PER_USER = 100
# 50 random bytes, as Iggy's tokens (protocols/iggy.md section 5.9).
TOKEN_RANDOM_BYTES = 50

ACTIVE, INACTIVE = "active", "inactive"
USER_STATUSES = (ACTIVE, INACTIVE)  # Iggy UserStatus 1 / 2 (protocols/iggy.md 3.6)

_USER_COLUMNS = "id, username, status, created_at, permissions"


@dataclass(frozen=True, slots=True)
class UserInfo:
    """A user as Iggy's GetUser reports it; never carries the password hash."""

    id: int
    username: str
    status: str  # "active" | "inactive"
    created_at: int  # µs
    permissions: Permissions | None

    @property
    def is_root(self) -> bool:
        return self.id == ROOT_USER_ID

    @property
    def active(self) -> bool:
        return self.status == ACTIVE


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A personal access token's public part (Iggy's GetPersonalAccessTokens)."""

    user_id: int
    name: str
    created_at: int  # µs
    expiry_at: int | None  # µs since the epoch; None = never expires

    def expired(self, now_us: int) -> bool:
        return self.expiry_at is not None and self.expiry_at <= now_us


class UserStore:
    """Users, permissions and PATs in the metadata file ``db``; ``clock`` returns
    µs since the epoch; ``hasher`` hashes passwords (argon2id by default)."""

    def __init__(self, db: "MetaDb", clock: Callable[[], int], hasher: PasswordHasher | None = None) -> None:
        self._db = db
        self._clock = clock
        self._hasher = hasher or PasswordHasher()
        self._dummy_hash: str | None = None
        # id -> UserInfo as committed; filled under the db lock by live_user and
        # cleared inside every transaction that writes `users` (so it never
        # holds a row a commit replaced: readers and writers share that lock).
        self._live: dict[int, UserInfo] = {}
        self._watchers = Watchers()
        # Failed logins per source address, on every protocol together (core/access.py).
        self.login_guard = LoginGuard()
        # SCRAM credentials beside the hashes (core/scram.py).
        self.scram = ScramStore(db)
        # Bumped by every write to `users`: a session that caches a decision
        # (adapters/nats/ferryauth.py) compares it instead of re-reading.
        self.version = 0

    def invalidate(self) -> None:
        """Inside a transaction that wrote `users`, or once the file changed under
        the store (``Metadata.reload``): no cached copy survives it."""
        self._live.clear()
        self.version += 1

    # -- users -------------------------------------------------------------------
    def create_user(
        self,
        username: str,
        password: str,
        status: str = ACTIVE,
        permissions: Permissions | None = None,
        *,
        user_id: int | None = None,
    ) -> UserInfo:
        """Create a user; the lowest free id from 1 (0 is root's) unless ``user_id`` is given.

        Raises InvalidUsername, InvalidPassword, InvalidArgument (status, id,
        permissions) or UserAlreadyExists (``field`` = "name" or "id")."""
        check_name(username, "user", InvalidUsername, MIN_USERNAME_BYTES, MAX_USERNAME_BYTES)
        _check_password(password)
        _check_status(status)
        perms_json = _perms_json(permissions)
        if user_id is not None:
            check_int(user_id, "user id", 0, MAX_ID)
        pw_hash = self._hasher.hash(password)  # outside the lock: slow on purpose
        scram = derive_all(password)
        with self._db.transaction() as conn:
            if conn.execute("SELECT 1 FROM users WHERE username = ?", (username,)).fetchone():
                raise UserAlreadyExists(f"user {username!r} already exists", field="name")
            if user_id is None:  # id 0 stays reserved for root (ensure_root)
                user_id = lowest_free_id(conn, "users", first=ROOT_USER_ID + 1)
            elif conn.execute("SELECT 1 FROM users WHERE id = ?", (user_id,)).fetchone():
                raise UserAlreadyExists(f"user id {user_id} already exists", field="id")
            conn.execute(
                "INSERT INTO users (id, username, password_hash, status, created_at, permissions)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (user_id, username, pw_hash, status, self._clock(), perms_json),
            )
            self.scram.write(conn, user_id, scram)
            self.invalidate()
        audit("user.create", target=username, target_id=user_id, status=status)
        return self.get_user(user_id)

    def ensure_root(self, username: str, password: str) -> UserInfo:
        """Create the root user (id 0, every permission) unless it exists.

        An existing root keeps its name and password (as Iggy, which reads
        IGGY_ROOT_USERNAME/PASSWORD only on first start)."""
        row = self._db.one(f"SELECT {_USER_COLUMNS} FROM users WHERE id = ?", (ROOT_USER_ID,))
        if row is not None:
            return _user(row)
        try:
            return self.create_user(username, password, ACTIVE, Permissions.root(), user_id=ROOT_USER_ID)
        except UserAlreadyExists:
            # Another gateway of the same store cluster created it first (docs/scale-out.md).
            row = self._db.one(f"SELECT {_USER_COLUMNS} FROM users WHERE id = ?", (ROOT_USER_ID,))
            if row is None:
                raise
            return _user(row)

    def get_user(self, user: Ident) -> UserInfo:
        """The user by id or username; raises UserNotFound."""
        return _user(self._user_row(user, _USER_COLUMNS))

    def list_users(self) -> list[UserInfo]:
        return [_user(r) for r in self._db.all(f"SELECT {_USER_COLUMNS} FROM users ORDER BY id")]

    def update_user(self, user: Ident, *, username: str | None = None, status: str | None = None) -> UserInfo:
        """Rename and/or (de)activate a user. Raises UserNotFound, UserAlreadyExists,
        InvalidUsername, InvalidArgument, PermissionDenied (deactivating root)."""
        if username is not None:
            check_name(username, "user", InvalidUsername, MIN_USERNAME_BYTES, MAX_USERNAME_BYTES)
        if status is not None:
            _check_status(status)
        with self._db.transaction() as conn:
            uid = self._user_row(user, "id", conn)[0]
            if username is not None:
                taken = conn.execute("SELECT id FROM users WHERE username = ?", (username,)).fetchone()
                if taken is not None and taken[0] != uid:
                    raise UserAlreadyExists(f"user {username!r} already exists", field="name")
                conn.execute("UPDATE users SET username = ? WHERE id = ?", (username, uid))
            if status is not None:
                if uid == ROOT_USER_ID and status != ACTIVE:
                    raise PermissionDenied("the root user cannot be deactivated")
                conn.execute("UPDATE users SET status = ? WHERE id = ?", (status, uid))
            self.invalidate()
        info = self.get_user(uid)
        audit("user.update", target=info.username, target_id=uid, renamed=username is not None, status=status)
        self._watchers.announce(CredentialChange(uid, info.created_at, CHANGED))
        return info

    def update_permissions(self, user: Ident, permissions: Permissions | None) -> UserInfo:
        """Replace a user's permissions (``None`` = none). Raises UserNotFound,
        CannotChangePermissions (root)."""
        perms_json = _perms_json(permissions)
        with self._db.transaction() as conn:
            uid = self._user_row(user, "id", conn)[0]
            if uid == ROOT_USER_ID:
                raise CannotChangePermissions("the root user's permissions cannot be changed")
            conn.execute("UPDATE users SET permissions = ? WHERE id = ?", (perms_json, uid))
            self.invalidate()
        info = self.get_user(uid)
        audit("user.permissions", target=info.username, target_id=uid)
        self._watchers.announce(CredentialChange(uid, info.created_at, CHANGED))
        return info

    def change_password(self, user: Ident, current_password: str, new_password: str) -> None:
        """Raises UserNotFound, InvalidCredentials (wrong current), InvalidPassword."""
        _check_password(new_password)
        uid, old_hash = self._user_row(user, "id, password_hash")
        if not self._verify(old_hash, current_password):
            raise InvalidCredentials("invalid credentials")
        new_hash = self._hasher.hash(new_password)
        scram = derive_all(new_password)
        with self._db.transaction() as conn:
            # Compare-and-set: a change that raced ours wins, and we report it.
            cur = conn.execute(
                "UPDATE users SET password_hash = ? WHERE id = ? AND password_hash = ?", (new_hash, uid, old_hash)
            )
            if cur.rowcount != 1:
                raise InvalidCredentials("the password changed meanwhile")
            self.scram.write(conn, uid, scram)
        self.version += 1   # remembered verifications of the old password are void
        audit("user.password", target_id=uid)

    def delete_user(self, user: Ident) -> None:
        """Delete a user and its tokens (the foreign key cascades), then tell the
        watchers. Raises UserNotFound, CannotDeleteUser (root)."""
        with self._db.transaction() as conn:
            uid, created_at = self._user_row(user, "id, created_at", conn)
            if uid == ROOT_USER_ID:
                raise CannotDeleteUser("the root user cannot be deleted")
            conn.execute("DELETE FROM users WHERE id = ?", (uid,))
            self.invalidate()
        audit("user.delete", target_id=uid)
        self._watchers.announce(CredentialChange(uid, created_at))

    def authenticate(self, username: Ident, password: str) -> UserInfo:
        """The user whose credentials these are, for the current actor's address
        (core/access.py: the login guard and the audit log).

        Raises InvalidCredentials (unknown user or wrong password, the same
        error), LoginThrottled (too many failures from this address: not
        checked), UserInactive (right password, inactive user)."""
        return self._guarded(self._check_password, username, password, target=str(username)[:MAX_USERNAME_BYTES])

    def _guarded(self, check, *args, target: str) -> UserInfo:
        actor = current_actor()
        wait = self.login_guard.retry_after(actor.addr)
        if wait > 0:
            audit("login", "throttled", target=target, retry_after_s=round(wait, 1))
            raise LoginThrottled(f"too many failed logins from {actor.addr}; retry in {wait:.0f} s")
        try:
            info = check(*args)
        except (InvalidCredentials, UserInactive, TokenExpired) as exc:
            self.login_guard.failed(actor.addr)
            audit("login", "failed", target=target, reason=exc.code)
            raise
        self.login_guard.succeeded(actor.addr)
        return info

    def _check_password(self, username: Ident, password: str) -> UserInfo:
        try:
            row = self._user_row(username, f"{_USER_COLUMNS}, password_hash")
        except (UserNotFound, InvalidArgument):
            row = None
        pw_hash = row[-1] if row is not None else self._dummy()
        if not self._verify(pw_hash, password) or row is None:
            raise InvalidCredentials("invalid credentials")
        info = _user(row[:-1])
        if not info.active:
            raise UserInactive(f"user {info.username!r} is inactive")
        if self._hasher.check_needs_rehash(pw_hash):
            pw_hash = self._rehash(info.id, pw_hash, password)
        self.scram.backfill(info.id, password, pw_hash)  # a user from before SCRAM credentials
        return info

    # -- SCRAM (core/scram.py) ---------------------------------------------------------
    def scram_credential(self, username: str, mechanism: str) -> ScramCredential:
        """The user's stored credential for ``mechanism`` (a name of
        ``core.scram.MECHANISMS``, else InvalidArgument), or the mock credential of
        ``username`` when there is no such user or it has none yet: a SCRAM server's
        first answer then looks the same whether or not the user exists."""
        hash_name(mechanism)
        row = None
        if isinstance(username, str):
            row = self._db.one("SELECT id FROM users WHERE username = ?", (username,))
        found = self.scram.get(row[0], mechanism) if row is not None else None
        return found if found is not None else self.scram.mock(str(username), mechanism)

    def scram_login(self, username: str, ok: bool, *, credential: ScramCredential | None = None) -> UserInfo:
        """The user a SCRAM exchange authenticated, for the current actor's address:
        ``ok`` says whether the client's proof verified against ``credential`` (what
        :meth:`scram_credential` gave). Through the same guard and audit lines as
        :meth:`authenticate`. Raises InvalidCredentials (not ok, unknown user, or the
        credential is no longer the user's: a password change or a re-created user
        between the exchange's two messages), LoginThrottled, UserInactive."""
        return self._guarded(self._check_scram, username, ok, credential,
                             target=str(username)[:MAX_USERNAME_BYTES])

    def _check_scram(self, username: str, ok: bool, credential: ScramCredential | None) -> UserInfo:
        try:
            info = self.get_user(username) if ok and isinstance(username, str) else None
        except (UserNotFound, InvalidArgument):
            info = None
        if info is None:
            raise InvalidCredentials("invalid credentials")
        if credential is not None:
            current = self.scram.get(info.id, credential.mechanism)
            if current is None or current.stored_key != credential.stored_key:
                raise InvalidCredentials("invalid credentials")
        if not info.active:
            raise UserInactive(f"user {info.username!r} is inactive")
        return info

    def live_user(self, user_id: int) -> UserInfo | None:
        """The user with id ``user_id`` as last committed, or None if there is none.

        From memory after the first read: what a logged-in session calls on
        every request to act with the user's current status and permissions."""
        info = self._live.get(user_id)
        if info is None:
            with self._db.lock:
                row = self._db.one(f"SELECT {_USER_COLUMNS} FROM users WHERE id = ?", (user_id,))
                if row is None:
                    return None
                info = self._live[user_id] = _user(row)
        return info

    def recheck(self, user: UserInfo) -> UserInfo:
        """``user`` as stored now, for a login admitted by a password check that ran
        in a worker thread: raises InvalidCredentials if the user was deleted meanwhile
        (or its id is now another user's), UserInactive if it was deactivated."""
        live = self.live_user(user.id)
        if live is None or live.created_at != user.created_at:
            raise InvalidCredentials("invalid credentials")
        if not live.active:
            raise UserInactive(f"user {live.username!r} is inactive")
        return live

    def watch_credentials(self, watcher: Watcher) -> Callable[[], None]:
        """Call ``watcher(change)`` after each committed user deletion
        (core/credentials.py); returns the function that stops it."""
        return self._watchers.add(watcher)

    def can(self, user: UserInfo | int, action: Action | str, stream_id: int | None = None,
            topic_id: int | None = None, *, ignore_status: bool = False) -> bool:
        """May ``user`` (a UserInfo, or an id read fresh from the store) do ``action``?

        Evaluated as Iggy's permissioner does (core.permissions); root may do
        everything, an inactive user nothing, unless ``ignore_status``: Iggy's
        status only refuses new logins, and a session that logged in before a
        deactivation keeps acting with the user's grants (the Iggy adapters;
        docs/iggy.md "What a credential change does to live sessions"). Raises
        InvalidArgument for an unknown action or a missing stream/topic id,
        UserNotFound for an id."""
        info = user if isinstance(user, UserInfo) else self.get_user(check_int(user, "user id", 0, MAX_ID))
        return allowed(info.permissions, action, stream_id, topic_id, is_root=info.is_root,
                       active=ignore_status or info.active)

    # -- personal access tokens ------------------------------------------------------
    def create_pat(self, user_id: int, name: str, expiry_us: int | None = None) -> str:
        """Create a token named ``name`` for the user, valid for ``expiry_us`` µs
        (``None`` = never expires); returns the raw token, which is not stored.

        Expired tokens of the user are dropped first. Raises UserNotFound,
        InvalidTokenName, InvalidArgument, TokenAlreadyExists, TokenLimitReached."""
        check_name(name, "personal access token", InvalidTokenName, MIN_TOKEN_NAME_BYTES, MAX_TOKEN_NAME_BYTES)
        if expiry_us is not None:
            check_int(expiry_us, "token expiry (µs)", 1, MAX_INT64)
        raw = secrets.token_urlsafe(TOKEN_RANDOM_BYTES)
        while raw.startswith("-"):
            # A token is typed after an option (`ferry ... --token T`, `nats --user T`),
            # where a leading '-' reads as another option (argparse's rule): one in 64
            # tokens would fail there. Drawing again keeps the tokens uniform otherwise.
            raw = secrets.token_urlsafe(TOKEN_RANDOM_BYTES)
        now = self._clock()
        expiry_at = None if expiry_us is None else min(now + expiry_us, MAX_INT64)
        with self._db.transaction() as conn:
            uid = self._user_row(user_id, "id", conn)[0]
            conn.execute("DELETE FROM personal_access_tokens WHERE user_id = ? AND expiry_at <= ?", (uid, now))
            if conn.execute("SELECT 1 FROM personal_access_tokens WHERE user_id = ? AND name = ?",
                            (uid, name)).fetchone():
                raise TokenAlreadyExists(f"personal access token {name!r} already exists")
            count = conn.execute("SELECT COUNT(*) FROM personal_access_tokens WHERE user_id = ?", (uid,)).fetchone()[0]
            if count >= MAX_TOKENS_PER_USER:
                raise TokenLimitReached(f"user already has {count} personal access tokens")
            conn.execute(
                "INSERT INTO personal_access_tokens (user_id, name, token_hash, created_at, expiry_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (uid, name, _token_hash(raw), now, expiry_at),
            )
        audit("token.create", target_id=uid, name=name)
        return raw

    def list_pats(self, user_id: int) -> list[TokenInfo]:
        """The user's tokens by name (expired ones too, until dropped). Raises UserNotFound."""
        uid = self._user_row(user_id, "id")[0]
        rows = self._db.all(
            "SELECT user_id, name, created_at, expiry_at FROM personal_access_tokens WHERE user_id = ? ORDER BY name",
            (uid,),
        )
        return [TokenInfo(*r) for r in rows]

    def delete_pat(self, user_id: int, name: str) -> None:
        """Raises UserNotFound, TokenNotFound."""
        with self._db.transaction() as conn:
            uid = self._user_row(user_id, "id", conn)[0]
            cur = conn.execute("DELETE FROM personal_access_tokens WHERE user_id = ? AND name = ?", (uid, name))
            if cur.rowcount == 0:
                raise TokenNotFound(f"personal access token {name!r} not found")
        self.version += 1   # remembered token logins are void
        audit("token.delete", target_id=uid, name=name)

    def delete_expired_pats(self) -> int:
        """Drop every expired token (Iggy runs a periodic cleaner); returns how many."""
        with self._db.transaction() as conn:
            cur = conn.execute("DELETE FROM personal_access_tokens WHERE expiry_at <= ?", (self._clock(),))
            return cur.rowcount

    def login_with_pat(self, token: str) -> UserInfo:
        """The user owning ``token``. Raises InvalidToken (unknown), TokenExpired,
        UserInactive, LoginThrottled (as :meth:`authenticate`)."""
        return self._guarded(self._check_pat, token, target="<token>")

    def _check_pat(self, token: str) -> UserInfo:
        if not isinstance(token, str) or not 1 <= len(token.encode("utf-8", "replace")) <= MAX_TOKEN_BYTES:
            raise InvalidToken("invalid personal access token")
        row = self._db.one(
            "SELECT user_id, expiry_at FROM personal_access_tokens WHERE token_hash = ?", (_token_hash(token),)
        )
        if row is None:
            raise InvalidToken("invalid personal access token")
        if row[1] is not None and row[1] <= self._clock():
            raise TokenExpired("personal access token expired")
        info = self.get_user(row[0])
        if not info.active:
            raise UserInactive(f"user {info.username!r} is inactive")
        return info

    # -- helpers ---------------------------------------------------------------------
    def _user_row(self, user: Ident, columns: str, conn=None) -> tuple:
        ident = check_ident(user, "user")
        where = "username" if isinstance(ident, str) else "id"
        sql = f"SELECT {columns} FROM users WHERE {where} = ?"
        row = (conn.execute(sql, (ident,)).fetchone() if conn is not None else self._db.one(sql, (ident,)))
        if row is None:
            raise UserNotFound(f"user {ident!r} not found", field="name" if isinstance(ident, str) else "id")
        return row

    def _verify(self, pw_hash: str, password: object) -> bool:
        if not isinstance(password, str):
            return False
        try:
            return self._hasher.verify(pw_hash, password)
        except (VerificationError, InvalidHashError):
            return False

    def _dummy(self) -> str:
        if self._dummy_hash is None:
            self._dummy_hash = self._hasher.hash(secrets.token_hex(16))
        return self._dummy_hash

    def _rehash(self, uid: int, old_hash: str, password: str) -> str:
        """Store a fresh hash of ``password`` unless the hash changed meanwhile; returns
        the hash now stored, as far as this call knows."""
        new_hash = self._hasher.hash(password)
        with self._db.transaction() as conn:
            cur = conn.execute(
                "UPDATE users SET password_hash = ? WHERE id = ? AND password_hash = ?", (new_hash, uid, old_hash)
            )
        return new_hash if cur.rowcount == 1 else old_hash

    def forget_grants(self, conn, stream_id: int, topic_id: int | None = None) -> None:
        """Inside a delete transaction: drop grants on a stream (or one topic).

        Ids are reused (lowest free id), so a grant left behind would silently
        apply to the next stream or topic that gets the same id."""
        for uid, text in conn.execute("SELECT id, permissions FROM users WHERE permissions IS NOT NULL").fetchall():
            perms = Permissions.from_json(text)
            new = perms.without_stream(stream_id) if topic_id is None else perms.without_topic(stream_id, topic_id)
            if new is not perms:
                conn.execute("UPDATE users SET permissions = ? WHERE id = ?", (new.to_json(), uid))
                self.invalidate()


def _user(row: tuple) -> UserInfo:
    uid, username, status, created_at, perms = row
    return UserInfo(uid, username, status, created_at, None if perms is None else Permissions.from_json(perms))


def _check_password(password: object) -> None:
    if not isinstance(password, str):
        raise InvalidPassword("password must be a string")
    size = len(password.encode("utf-8", "replace"))
    if not MIN_PASSWORD_BYTES <= size <= MAX_PASSWORD_BYTES:
        raise InvalidPassword(f"password must be {MIN_PASSWORD_BYTES}..{MAX_PASSWORD_BYTES} bytes, got {size}")


def _check_status(status: object) -> None:
    if status not in USER_STATUSES:
        raise InvalidArgument(f"user status must be one of {USER_STATUSES}, got {status!r}")


def _perms_json(permissions: object) -> str | None:
    if permissions is None:
        return None
    if not isinstance(permissions, Permissions):
        raise InvalidArgument("permissions must be a Permissions value or None")
    return permissions.to_json()


def _token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


__all__ = [
    "ACTIVE",
    "INACTIVE",
    "MAX_TOKENS_PER_USER",
    "TokenInfo",
    "UserInfo",
    "UserStore",
]
