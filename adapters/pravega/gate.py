"""The segment store's door: who each request acts as, and whether it still may (no I/O).

Theory of operation
-------------------
Every segment-store request that names a segment carries the delegation token
the controller gave for its scope/stream (:data:`TOKEN_RULES`: the field naming
the segment and what the token must allow). :class:`SegmentGate` checks it
(adapters/pravega/auth.py ``check_segment``: the signature and expiry, the
anonymous user for an empty token where the listener names one, and the user's
permission *now*, so a deletion or a revocation applies at once) and answers
the refusals Pravega's way, ``AuthTokenCheckFailed``, after one audit line
(core/access.py; an expired token is no denial: the client fetches a new one
and retries). Append blocks carry no token: the principal that set the writer
up is re-checked on every block (:meth:`SegmentGate.still_sending`).
Reader-group tables need READ: a reader keeps its group's state there.

The gate is the session's collaborator: it owns nothing but the broker and the
shared listener state (``issuer``, ``anonymous``); the session asks it and acts.
"""

from __future__ import annotations

from core.access import denied
from core.permissions import Action

from . import commands as C
from .auth import AUTH_CHECK_FAILED, OP_ACTIONS, READ, WRITE, AuthError, Principal, check_segment, permit
from .errors import Reply

TOKEN_RULES = {
    C.SetupAppend: ("segment", WRITE), C.ReadSegment: ("segment", READ),
    C.GetStreamSegmentInfo: ("segment_name", READ), C.SealSegment: ("segment", WRITE),
    C.TruncateSegment: ("segment", WRITE), C.GetSegmentAttribute: ("segment_name", READ),
    C.CreateTransientSegment: ("parent_segment", WRITE), C.MergeSegments: ("target", WRITE),
    C.GetTableSegmentInfo: ("segment_name", READ),
    **dict.fromkeys((C.CreateTableSegment, C.DeleteTableSegment, C.UpdateTableEntries, C.RemoveTableKeys,
                     C.ReadTable, C.ReadTableEntries, C.ReadTableKeys, C.ReadTableEntriesDelta), ("segment", READ)),
}


class SegmentGate:
    """Token and live permission checks for one segment-store session."""

    __slots__ = ("broker", "state")

    def __init__(self, broker, state) -> None:
        self.broker, self.state = broker, state

    @property
    def on(self) -> bool:
        """Checks run (the listener state has a token issuer: always under ``ferry serve``)."""
        return self.state.issuer is not None

    def admit(self, cmd) -> Principal | None:
        """Who ``cmd`` acts as: None for a request that carries no token (or checks
        off); raises :class:`Reply` (AuthTokenCheckFailed) when it may not."""
        rule = TOKEN_RULES.get(type(cmd))
        if rule is None or not self.on:
            return None
        return self.check(cmd, *rule)

    def check(self, cmd, field: str, op: str) -> Principal:
        """``cmd``'s token (or the anonymous user) for ``op`` on the segment in ``field``."""
        segment = getattr(cmd, field)
        try:
            return check_segment(self.broker, self.state.issuer, self.state.anonymous, cmd.delegation_token,
                                 segment, op)
        except AuthError as exc:
            raise self.refusal(cmd.request_id, segment, op, exc) from None

    def still_sending(self, principal: Principal | None, stream_id: int, topic_id: int, rid: int,
                      segment: str) -> Reply | None:
        """Before a writer's block is stored: None if its principal may still send to
        the topic, else the refusal to answer (the writer must set up again, and its
        next token request meets the same check at the controller)."""
        if principal is None:
            return None
        users = self.broker.meta.users
        try:
            permit(users, principal, principal.live(users), Action.SEND_MESSAGES, stream_id, topic_id)
        except AuthError as exc:
            return self.refusal(rid, segment, WRITE, exc)
        return None

    @staticmethod
    def refusal(rid: int, segment: str, op: str, exc: AuthError) -> Reply:
        """The AuthTokenCheckFailed reply, after the audit line of a denial."""
        if exc.code == AUTH_CHECK_FAILED:
            scope, _, rest = segment.partition("/")
            denied(exc.action or OP_ACTIONS[op].value, scope=scope, stream=rest.partition("/")[0], reason=exc.message)
        return Reply(C.AuthTokenCheckFailed(request_id=rid, server_stack_trace=exc.message, error_code=exc.code))


__all__ = ["SegmentGate", "TOKEN_RULES"]
