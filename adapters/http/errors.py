"""The HTTP adapter's one error family and its wire form.

Theory of operation
-------------------
Every failure a client can see becomes an :class:`HttpError`: an HTTP status
plus Iggy's error body ``{"id", "code", "reason", "field"}``
(../shared/protocols/iggy.md section 10.3). ``id`` is the Iggy error number and
``code`` its snake_case name; errors that only exist at the HTTP level (413,
405, a path nobody serves) use the HTTP status as ``id``, which is what Iggy
itself does for its generic 404 ``{"id": 404, "code": "not_found"}``.

Core errors (``core.errors``) are mapped in one table, :data:`CORE_ERRORS`,
walked along the exception's MRO, never at call sites (STYLE.md section 5).
Some core errors need the *entity* to pick Iggy's number (an invalid name is
1013 for a stream, 2014 for a topic, 5005 for a group); routes pass it.

Anything that is not an HttpError or a core error is a bug of ours: the caller
logs the traceback and answers :func:`internal_error`, never ``str(exc)``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from core import errors as ce

JSON_TYPE = (b"content-type", b"application/json")

# Iggy error numbers -> snake_case names (iggy.md section 9.1 and the list
# after it; the HTTP ``code`` strings are these names).
IGGY_CODES: dict[int, str] = {
    1: "error",
    3: "invalid_command",
    4: "invalid_format",
    5: "feature_unavailable",
    6: "invalid_identifier",
    20: "resource_not_found",
    40: "unauthenticated",
    41: "unauthorized",
    42: "invalid_credentials",
    43: "invalid_username",
    44: "invalid_password",
    45: "invalid_user_status",
    46: "user_already_exists",
    47: "user_inactive",
    48: "cannot_delete_user",
    49: "cannot_change_permissions",
    50: "invalid_personal_access_token_name",
    51: "personal_access_token_already_exists",
    52: "personal_access_tokens_limit_reached",
    53: "invalid_personal_access_token",
    54: "personal_access_token_expired",
    77: "access_token_missing",
    78: "invalid_access_token",
    81: "invalid_utf8",
    82: "invalid_number_encoding",
    209: "cannot_parse_header_kind",
    1009: "stream_id_not_found",
    1010: "stream_name_not_found",
    1011: "stream_id_already_exists",
    1012: "stream_name_already_exists",
    1013: "invalid_stream_name",
    1014: "invalid_stream_id",
    2010: "topic_id_not_found",
    2011: "topic_name_not_found",
    2012: "topic_id_already_exists",
    2013: "topic_name_already_exists",
    2014: "invalid_topic_name",
    2015: "too_many_partitions",
    2016: "invalid_topic_id",
    2018: "invalid_replication_factor",
    3007: "partition_not_found",
    3008: "no_partitions",
    3021: "consumer_offset_not_found",
    4009: "invalid_messages_count",
    4017: "too_big_headers_payload",
    4018: "invalid_header_key",
    4019: "invalid_header_value",
    4022: "too_big_message_payload",
    4024: "empty_message_payload",
    4028: "invalid_key_value_length",
    4100: "invalid_offset",
    5000: "consumer_group_id_not_found",
    5001: "consumer_group_id_already_exists",
    5002: "invalid_consumer_group_id",
    5003: "consumer_group_name_not_found",
    5004: "consumer_group_name_already_exists",
    5005: "invalid_consumer_group_name",
    5006: "consumer_group_member_not_found",
    9000: "snapshot_file_completion_failed",
}

# iggy.md section 10.3: these numbers answer 404 / 401 / 403; all others 400.
_NOT_FOUND = frozenset({1009, 2010, 3007, 4000, 100, 5000, 5003, 5006, 3021, 20})
_UNAUTHORIZED = frozenset({40, 77, 78, 53})
_FORBIDDEN = frozenset({41})

# HTTP-level errors: Iggy has no number for them, so id = status (as its 404 body).
HTTP_CODES: dict[int, str] = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "payload_too_large",
    431: "request_header_fields_too_large",
    500: "internal_error",
    503: "shutting_down",
}


def status_for(iggy_id: int) -> int:
    """The HTTP status Iggy answers for error number ``iggy_id`` (iggy.md 10.3)."""
    if iggy_id in _NOT_FOUND:
        return 404
    if iggy_id in _UNAUTHORIZED:
        return 401
    if iggy_id in _FORBIDDEN:
        return 403
    return 400


@dataclass(frozen=True, slots=True)
class Response:
    """A complete response: status, extra headers (lower-case bytes) and body.

    The connection adds ``content-length`` (and ``date``/``server`` on HTTP/1.1)."""

    status: int
    headers: tuple[tuple[bytes, bytes], ...] = ()
    body: bytes = b""


class HttpError(Exception):
    """A request the server refuses; :meth:`response` is what the client gets.

    ``empty_body`` answers with no body at all: Iggy's bearer check replies
    401 with an empty body (iggy.md section 10.2)."""

    def __init__(self, status: int, iggy_id: int, reason: str, field: str | None = None,
                 *, code: str | None = None, empty_body: bool = False,
                 headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
        super().__init__(reason)
        self.status = status
        self.iggy_id = iggy_id
        self.code = code or IGGY_CODES.get(iggy_id) or HTTP_CODES.get(iggy_id, "error")
        self.reason = reason
        self.field = field
        self.empty_body = empty_body
        self.headers = headers

    @classmethod
    def iggy(cls, iggy_id: int, reason: str, field: str | None = None) -> "HttpError":
        """An Iggy error number with the status Iggy gives it."""
        return cls(status_for(iggy_id), iggy_id, reason, field)

    @classmethod
    def http(cls, status: int, reason: str, field: str | None = None, **kw) -> "HttpError":
        """An HTTP-level error (no Iggy number): ``id`` is the status."""
        return cls(status, status, reason, field, **kw)

    def body(self) -> dict:
        return {"id": self.iggy_id, "code": self.code, "reason": self.reason, "field": self.field}

    def response(self) -> Response:
        if self.empty_body:
            return Response(self.status, self.headers)
        data = json.dumps(self.body(), ensure_ascii=False, separators=(",", ":")).encode()
        return Response(self.status, (JSON_TYPE, *self.headers), data)

    def __repr__(self) -> str:
        return f"HttpError({self.status}, {self.iggy_id}, {self.reason!r}, field={self.field!r})"


def bad_field(field: str, reason: str, iggy_id: int = 4) -> HttpError:
    """400 naming the offending JSON field (Iggy 4 invalid_format by default)."""
    return HttpError(400, iggy_id, f"{field}: {reason}", field)


def not_found_entity() -> HttpError:
    """Iggy's answer to a GET of one missing entity (iggy.md section 10.3)."""
    return HttpError(404, 404, "Resource not found", None, code="not_found")


def unauthenticated() -> HttpError:
    """Missing/invalid/expired/revoked bearer: 401 with an empty body (iggy.md 10.2)."""
    return HttpError(401, 40, "unauthenticated", empty_body=True,
                     headers=((b"www-authenticate", b"Bearer"),))


def forbidden(what: str) -> HttpError:
    return HttpError.iggy(41, f"not allowed to {what}")


def internal_error() -> HttpError:
    return HttpError.http(500, "internal server error")


# -- core errors -> wire -------------------------------------------------------
# Entity-dependent numbers: (id-field number, name-field number).
_NOT_FOUND_BY_FIELD = {
    ce.StreamNotFound: (1009, 1010),
    ce.TopicNotFound: (2010, 2011),
    ce.ConsumerGroupNotFound: (5000, 5003),
}
_EXISTS_BY_FIELD = {
    ce.StreamAlreadyExists: (1011, 1012),
    ce.TopicAlreadyExists: (2012, 2013),
    ce.ConsumerGroupAlreadyExists: (5001, 5004),
}
# iggy.md 10.3 lists which numbers carry which ``field``.
_FIELD_OF = {1009: "stream_id", 1011: "stream_id", 1014: "stream_id", 2010: "topic_id", 2012: "topic_id",
             2016: "topic_id", 3007: "partition_id", 1012: "name", 1013: "name", 2013: "name", 2014: "name",
             5004: "name", 51: "name", 4100: "offset", 5001: "consumer_group_id", 5002: "consumer_group_id",
             46: "username"}
_INVALID_NAME = {"stream": 1013, "topic": 2014, "group": 5005, "user": 43, "token": 50}

CORE_ERRORS: dict[type, int] = {
    ce.PartitionNotFound: 3007,
    ce.ConsumerGroupMemberNotFound: 5006,
    ce.ConsumerOffsetNotFound: 3021,
    ce.UserNotFound: 20,
    ce.TokenNotFound: 20,
    ce.NotFound: 20,
    ce.UserAlreadyExists: 46,
    ce.TokenAlreadyExists: 51,
    ce.InvalidUsername: 43,
    ce.InvalidPassword: 44,
    ce.InvalidTokenName: 50,
    ce.TokenLimitReached: 52,
    ce.TooManyPartitions: 2015,
    ce.InvalidHeaderKind: 209,
    ce.InvalidHeaderKey: 4018,
    ce.InvalidHeaderValue: 4019,
    ce.MalformedHeaders: 4019,
    ce.HeadersTooLarge: 4017,
    ce.PayloadTooLarge: 4022,
    ce.InvalidOffset: 4100,
    ce.InvalidArgument: 3,
    ce.TopicSealed: 5,  # feature_unavailable, 400: the number the Iggy binary table gives it
    ce.InvalidToken: 53,
    ce.TokenExpired: 54,
    ce.UserInactive: 47,
    ce.InvalidCredentials: 42,
    ce.Unauthenticated: 40,
    ce.CannotDeleteUser: 48,
    ce.CannotChangePermissions: 49,
    ce.PermissionDenied: 41,
}


def from_core(exc: ce.FerryError, entity: str | None = None) -> HttpError:
    """The wire error for a core error; ``entity`` ("stream", "topic", "group",
    "user", "token") picks Iggy's number for an invalid name."""
    if isinstance(exc, ce.ShuttingDown):
        return HttpError.http(503, "the server is shutting down")
    if isinstance(exc, ce.StorageError):
        return HttpError.http(500, "storage error")
    by_name = exc.details.get("field") == "name"
    for cls in type(exc).__mro__:
        pair = _NOT_FOUND_BY_FIELD.get(cls) or _EXISTS_BY_FIELD.get(cls)
        if pair is not None:
            iggy_id = pair[1] if by_name else pair[0]
            break
        if cls is ce.InvalidName and entity in _INVALID_NAME:
            iggy_id = _INVALID_NAME[entity]
            break
        if cls in CORE_ERRORS:
            iggy_id = CORE_ERRORS[cls]
            break
    else:
        iggy_id = 1
    field = exc.details.get("json_field") or _FIELD_OF.get(iggy_id)
    return HttpError.iggy(iggy_id, exc.message, field if isinstance(field, str) else None)


__all__ = [
    "CORE_ERRORS",
    "HttpError",
    "IGGY_CODES",
    "JSON_TYPE",
    "Response",
    "bad_field",
    "forbidden",
    "from_core",
    "internal_error",
    "not_found_entity",
    "status_for",
    "unauthenticated",
]
