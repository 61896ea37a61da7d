"""User deletions, announced to the transports' live sessions.

Theory of operation
-------------------
A login outlives the check that admitted it: an Iggy connection (TCP, QUIC,
WebSocket) stays logged in, an HTTP access token stays valid until it expires.
What a later credential change does to it follows the reference server,
apache/iggy (docs/iggy.md "What a credential change does to live sessions"),
whatever transport made the login or the change:

* **Read the user afresh.** A session keeps who logged in (id and
  ``created_at``, which tells a user from a later one given the same reused id)
  and reads the user's current record, permissions included, on each request
  (``UserStore.live_user``, an in-memory copy dropped on every user write). A
  permission change therefore applies to the very next request, as on Iggy,
  whose permissioner is updated in place (apache/iggy
  ``core/metadata/src/stm/user.rs`` ``UpdatePermissionsRequest::apply``).
* **A deleted user's logins end at once.** After a deletion commits, the user
  store calls every watcher (``UserStore.watch_credentials``) with one
  :class:`CredentialChange`. A watcher ends the user's logins right away (the
  Iggy sessions log out and leave their consumer groups,
  adapters/iggy/session.py), so nothing waits for the session's next request
  and ``GetClients`` shows no stale login.

Nothing else ends a login, as on Iggy: a deactivation only refuses new logins
(``UpdateUserRequest::apply`` only sets the status), deleting a personal
access token only refuses new logins with it
(``DeletePersonalAccessTokenRequest::apply``), and a password change only
replaces the hash (``ChangePasswordRequest::apply``).

Watchers run synchronously, on the thread that made the change, after its
transaction committed. In the gateway ``delete_user`` runs on the trio thread,
where the sessions live. A watcher that raises is logged and skipped: a change
that committed is never reported as failed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

log = logging.getLogger("ferry.auth")


DELETED, CHANGED = "deleted", "changed"


@dataclass(frozen=True, slots=True)
class CredentialChange:
    """A user deleted (``kind`` DELETED) or its status or permissions changed
    (CHANGED): its id and ``created_at`` (µs), which tells it from a later user
    given the same id. Sessions that cache a decision (NATS subscriptions,
    Pravega delegation grants) drop it on CHANGED; the rest read the user afresh."""

    user_id: int
    created_at: int
    kind: str = DELETED

    @property
    def deleted(self) -> bool:
        return self.kind == DELETED


Watcher = Callable[[CredentialChange], None]


class Watchers:
    """The registered watchers of one user store."""

    def __init__(self) -> None:
        self._watchers: list[Watcher] = []

    def add(self, watcher: Watcher) -> Callable[[], None]:
        """Register ``watcher``; returns the function that unregisters it."""
        self._watchers.append(watcher)

        def remove() -> None:
            if watcher in self._watchers:
                self._watchers.remove(watcher)

        return remove

    def announce(self, change: CredentialChange) -> None:
        for watcher in list(self._watchers):
            try:
                watcher(change)
            except Exception:  # a watcher's bug must not fail a committed change (STYLE.md 5)
                log.exception("credential watcher failed", extra={"user_id": change.user_id})


__all__ = ["CHANGED", "CredentialChange", "DELETED", "Watcher", "Watchers"]
