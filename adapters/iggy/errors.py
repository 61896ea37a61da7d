"""Iggy status codes, the one Iggy error exception, and the core-error table.

Theory of operation
-------------------
:class:`IggyError` is an ``IntEnum`` whose values *are* Iggy's status codes
(protocols/iggy.md section 9.1, iggy-middle.md section 9, iggy-current.md
section 9); what goes on the wire for an error is always that number with an
empty body (a legacy response ``status, length 0``; a VSR reply header with
the status at byte 216). :class:`IggyStatus` is the exception that carries
one: codecs and sessions raise it, the connection turns it into a reply.

Core errors (``core.errors``) become Iggy codes in **one** table,
:func:`status_for` (STYLE.md section 5, Kafka ``Errors.forException``): the
most specific class wins, and ``details["field"]`` ("id" / "name"), which the
metadata store sets, picks Iggy's id-vs-name variant (1009 StreamIdNotFound
vs 1010 StreamNameNotFound) for the older generations; the current one (dialect 3)
always answers a missing stream, topic or group with the id variant (``dialect``
argument; docs/iggy.md "Not-found codes per generation").
"""

from __future__ import annotations

from enum import IntEnum

from core import errors as ce


class IggyError(IntEnum):
    """Iggy status codes Ferry sends (names are Iggy's variant names in snake case)."""

    OK = 0
    ERROR = 1
    INVALID_COMMAND = 3
    INVALID_FORMAT = 4
    FEATURE_UNAVAILABLE = 5
    INVALID_IDENTIFIER = 6
    RESOURCE_NOT_FOUND = 20
    UNAUTHENTICATED = 40
    UNAUTHORIZED = 41
    INVALID_CREDENTIALS = 42
    INVALID_USERNAME = 43
    INVALID_PASSWORD = 44
    INVALID_USER_STATUS = 45
    USER_ALREADY_EXISTS = 46
    USER_INACTIVE = 47
    CANNOT_DELETE_USER = 48
    CANNOT_CHANGE_PERMISSIONS = 49
    INVALID_PAT_NAME = 50
    PAT_ALREADY_EXISTS = 51
    PAT_LIMIT_REACHED = 52
    INVALID_PAT = 53
    PAT_EXPIRED = 54
    CLIENT_NOT_FOUND = 100
    INVALID_CLIENT_ID = 101
    STREAM_ID_NOT_FOUND = 1009
    STREAM_NAME_NOT_FOUND = 1010
    STREAM_ID_ALREADY_EXISTS = 1011
    STREAM_NAME_ALREADY_EXISTS = 1012
    INVALID_STREAM_NAME = 1013
    INVALID_STREAM_ID = 1014
    INVALID_TOPIC_SIZE = 1019
    TOPIC_ID_NOT_FOUND = 2010
    TOPIC_NAME_NOT_FOUND = 2011
    TOPIC_ID_ALREADY_EXISTS = 2012
    TOPIC_NAME_ALREADY_EXISTS = 2013
    INVALID_TOPIC_NAME = 2014
    TOO_MANY_PARTITIONS = 2015
    INVALID_TOPIC_ID = 2016
    INVALID_PARTITIONS_COUNT = 2019  # new in the middle generation (iggy-middle.md 9)
    PARTITION_NOT_FOUND = 3007
    NO_PARTITIONS = 3008
    CONSUMER_OFFSET_NOT_FOUND = 3021
    INVALID_MESSAGES_COUNT = 4009
    TOO_BIG_HEADERS_PAYLOAD = 4017
    INVALID_HEADER_KEY = 4018
    INVALID_HEADER_VALUE = 4019
    TOO_BIG_MESSAGE_PAYLOAD = 4022
    EMPTY_MESSAGE_PAYLOAD = 4024
    INVALID_KEY_VALUE_LENGTH = 4028
    MISSING_INDEX = 4033
    INVALID_MESSAGES_SIZE = 4036
    TOO_SMALL_MESSAGE = 4037
    INVALID_HEADER_KIND = 4040
    UNSUPPORTED_OPTION_KEY = 4041  # a VSR options block names a key the server does not know
    INVALID_OPTION_VALUE = 4042  # a known option key with a value of the wrong kind or out of bounds
    INVALID_OFFSET = 4100
    INVALID_RESERVED_FIELD = 4101
    CONSUMER_GROUP_ID_NOT_FOUND = 5000
    CONSUMER_GROUP_ID_ALREADY_EXISTS = 5001
    INVALID_CONSUMER_GROUP_ID = 5002
    CONSUMER_GROUP_NAME_NOT_FOUND = 5003
    CONSUMER_GROUP_NAME_ALREADY_EXISTS = 5004
    INVALID_CONSUMER_GROUP_NAME = 5005
    CONSUMER_GROUP_MEMBER_NOT_FOUND = 5006
    CONSUMER_GROUP_PARTITION_NOT_OWNED = 5009
    SNAPSHOT_FILE_COMPLETION_FAILED = 9000


class IggyStatus(Exception):
    """An Iggy error reply. ``fatal`` closes the connection after the reply
    (only for framing that cannot be resynchronised, e.g. a length prefix past
    :data:`adapters.iggy.codec.MAX_FRAME`)."""

    def __init__(self, code: IggyError, detail: str = "", *, fatal: bool = False) -> None:
        super().__init__(f"{code.name.lower()} ({int(code)}){': ' + detail if detail else ''}")
        self.code = code
        self.detail = detail
        self.fatal = fatal


# (core class, code when details["field"] == "id", code otherwise). Order
# matters only between a class and its subclasses: most specific first.
_TABLE: tuple[tuple[type[ce.FerryError], IggyError, IggyError], ...] = (
    (ce.StreamNotFound, IggyError.STREAM_ID_NOT_FOUND, IggyError.STREAM_NAME_NOT_FOUND),
    (ce.TopicNotFound, IggyError.TOPIC_ID_NOT_FOUND, IggyError.TOPIC_NAME_NOT_FOUND),
    (ce.PartitionNotFound, IggyError.PARTITION_NOT_FOUND, IggyError.PARTITION_NOT_FOUND),
    (ce.ConsumerGroupMemberNotFound, IggyError.CONSUMER_GROUP_MEMBER_NOT_FOUND,
     IggyError.CONSUMER_GROUP_MEMBER_NOT_FOUND),
    (ce.ConsumerGroupNotFound, IggyError.CONSUMER_GROUP_ID_NOT_FOUND, IggyError.CONSUMER_GROUP_NAME_NOT_FOUND),
    (ce.ConsumerOffsetNotFound, IggyError.CONSUMER_OFFSET_NOT_FOUND, IggyError.CONSUMER_OFFSET_NOT_FOUND),
    (ce.UserNotFound, IggyError.RESOURCE_NOT_FOUND, IggyError.RESOURCE_NOT_FOUND),
    (ce.TokenNotFound, IggyError.RESOURCE_NOT_FOUND, IggyError.RESOURCE_NOT_FOUND),
    (ce.NotFound, IggyError.RESOURCE_NOT_FOUND, IggyError.RESOURCE_NOT_FOUND),
    (ce.StreamAlreadyExists, IggyError.STREAM_ID_ALREADY_EXISTS, IggyError.STREAM_NAME_ALREADY_EXISTS),
    (ce.TopicAlreadyExists, IggyError.TOPIC_ID_ALREADY_EXISTS, IggyError.TOPIC_NAME_ALREADY_EXISTS),
    (ce.ConsumerGroupAlreadyExists, IggyError.CONSUMER_GROUP_ID_ALREADY_EXISTS,
     IggyError.CONSUMER_GROUP_NAME_ALREADY_EXISTS),
    (ce.UserAlreadyExists, IggyError.USER_ALREADY_EXISTS, IggyError.USER_ALREADY_EXISTS),
    (ce.TokenAlreadyExists, IggyError.PAT_ALREADY_EXISTS, IggyError.PAT_ALREADY_EXISTS),
    (ce.InvalidToken, IggyError.INVALID_PAT, IggyError.INVALID_PAT),
    (ce.TokenExpired, IggyError.PAT_EXPIRED, IggyError.PAT_EXPIRED),
    (ce.UserInactive, IggyError.USER_INACTIVE, IggyError.USER_INACTIVE),
    (ce.InvalidCredentials, IggyError.INVALID_CREDENTIALS, IggyError.INVALID_CREDENTIALS),
    (ce.Unauthenticated, IggyError.UNAUTHENTICATED, IggyError.UNAUTHENTICATED),
    (ce.CannotDeleteUser, IggyError.CANNOT_DELETE_USER, IggyError.CANNOT_DELETE_USER),
    (ce.CannotChangePermissions, IggyError.CANNOT_CHANGE_PERMISSIONS, IggyError.CANNOT_CHANGE_PERMISSIONS),
    (ce.PermissionDenied, IggyError.UNAUTHORIZED, IggyError.UNAUTHORIZED),
    (ce.InvalidUsername, IggyError.INVALID_USERNAME, IggyError.INVALID_USERNAME),
    (ce.InvalidPassword, IggyError.INVALID_PASSWORD, IggyError.INVALID_PASSWORD),
    (ce.InvalidTokenName, IggyError.INVALID_PAT_NAME, IggyError.INVALID_PAT_NAME),
    (ce.TokenLimitReached, IggyError.PAT_LIMIT_REACHED, IggyError.PAT_LIMIT_REACHED),
    (ce.TooManyPartitions, IggyError.TOO_MANY_PARTITIONS, IggyError.TOO_MANY_PARTITIONS),
    (ce.HeadersTooLarge, IggyError.TOO_BIG_HEADERS_PAYLOAD, IggyError.TOO_BIG_HEADERS_PAYLOAD),
    (ce.InvalidHeaderKey, IggyError.INVALID_HEADER_KEY, IggyError.INVALID_HEADER_KEY),
    (ce.InvalidHeaderValue, IggyError.INVALID_HEADER_VALUE, IggyError.INVALID_HEADER_VALUE),
    (ce.InvalidHeaderKind, IggyError.INVALID_HEADER_KIND, IggyError.INVALID_HEADER_KIND),
    (ce.MalformedHeaders, IggyError.INVALID_COMMAND, IggyError.INVALID_COMMAND),
    (ce.PayloadTooLarge, IggyError.TOO_BIG_MESSAGE_PAYLOAD, IggyError.TOO_BIG_MESSAGE_PAYLOAD),
    (ce.RecordTruncated, IggyError.TOO_SMALL_MESSAGE, IggyError.TOO_SMALL_MESSAGE),
    (ce.RecordReservedField, IggyError.INVALID_RESERVED_FIELD, IggyError.INVALID_RESERVED_FIELD),
    (ce.MalformedRecords, IggyError.INVALID_MESSAGES_SIZE, IggyError.INVALID_MESSAGES_SIZE),
    (ce.InvalidOffset, IggyError.INVALID_OFFSET, IggyError.INVALID_OFFSET),
    # Iggy has no sealed topics. SendMessages to one is refused on purpose, for good:
    # not the client's malformed request (3 InvalidCommand) nor its permissions
    # (41 Unauthorized, which HTTP would answer 403), but an operation this topic no
    # longer offers; 5 FeatureUnavailable is also what a command with no handler gets.
    (ce.TopicSealed, IggyError.FEATURE_UNAVAILABLE, IggyError.FEATURE_UNAVAILABLE),
    (ce.ShuttingDown, IggyError.ERROR, IggyError.ERROR),
)

# Invalid names are reported per entity (iggy.md 9.1: 1013 / 2014 / 5005).
_INVALID_NAME = {
    "stream": IggyError.INVALID_STREAM_NAME,
    "topic": IggyError.INVALID_TOPIC_NAME,
    "group": IggyError.INVALID_CONSUMER_GROUP_NAME,
}


# The current generation (dialect 3) has one not-found code per entity, the id variant,
# whether the request named the entity by id or by name: its state machine commits
# StreamNotFound = 1009 / TopicNotFound = 2010 / ConsumerGroupNotFound = 5000 for every
# metadata op (apache/iggy core/metadata/src/stm/result.rs, the *Result enums), and its
# reads build StreamIdNotFound / TopicIdNotFound from either identifier kind
# (core/server/src/responses.rs stream_not_found, topic_not_found). The name variants
# 1010 / 2011 / 5003 stay for dialects 1, 2, 4 and 5 (iggy.md 9.1, iggy-middle.md 9).
_CURRENT_NOT_FOUND = {
    IggyError.STREAM_NAME_NOT_FOUND: IggyError.STREAM_ID_NOT_FOUND,
    IggyError.TOPIC_NAME_NOT_FOUND: IggyError.TOPIC_ID_NOT_FOUND,
    IggyError.CONSUMER_GROUP_NAME_NOT_FOUND: IggyError.CONSUMER_GROUP_ID_NOT_FOUND,
}
CURRENT_DIALECT = 3


def status_for(exc: ce.FerryError, entity: str = "", dialect: int = 0) -> IggyError:
    """The Iggy status code for a core error (``entity`` names what a create or
    rename was about, for the invalid-name codes; ``dialect`` 3 answers every
    not-found with the id variant, ``_CURRENT_NOT_FOUND``)."""
    field = exc.details.get("field") if isinstance(exc.details, dict) else None
    for cls, by_id, by_name in _TABLE:
        if isinstance(exc, cls):
            code = by_id if field == "id" else by_name
            return _CURRENT_NOT_FOUND.get(code, code) if dialect == CURRENT_DIALECT else code
    if isinstance(exc, ce.InvalidName) and entity in _INVALID_NAME:
        return _INVALID_NAME[entity]
    if isinstance(exc, ce.InvalidArgument):
        return IggyError.INVALID_COMMAND
    return IggyError.ERROR


__all__ = ["CURRENT_DIALECT", "IggyError", "IggyStatus", "status_for"]
