"""One error family for the core broker.

Every failure the core can report is a subclass of :class:`FerryError` with a
stable ``code`` string. Adapters map these classes to their own wire errors in
one table each (Iggy status codes, NATS ``-ERR`` texts, HTTP status + JSON,
Pravega error replies), never at call sites (STYLE.md section 5).

Input checks raise these exceptions; nothing here relies on ``assert``, which
``python -O`` removes.
"""

from __future__ import annotations


class FerryError(Exception):
    """Base of every error the core raises on purpose."""

    code = "error"

    def __init__(self, message: str = "", **details: object) -> None:
        super().__init__(message or self.code)
        self.message = message or self.code
        self.details = details


# -- invalid input -----------------------------------------------------------
class InvalidArgument(FerryError):
    code = "invalid_argument"


class InvalidName(InvalidArgument):
    code = "invalid_name"


class InvalidSubject(InvalidArgument):
    """A NATS subject or subscription pattern that nats-server would refuse."""

    code = "invalid_subject"


class HeaderError(InvalidArgument):
    code = "invalid_header"


class InvalidHeaderKey(HeaderError):
    code = "invalid_header_key"


class InvalidHeaderValue(HeaderError):
    code = "invalid_header_value"


class InvalidHeaderKind(HeaderError):
    code = "invalid_header_kind"


class HeadersTooLarge(HeaderError):
    code = "headers_too_large"


class MalformedHeaders(HeaderError):
    """A header block that ends inside an entry (truncated, or trailing bytes
    too short to be one): the framing itself is broken, not one key or value."""

    code = "malformed_headers"


class PayloadTooLarge(InvalidArgument):
    code = "payload_too_large"


class MalformedRecords(InvalidArgument):
    """A block of encoded records (``core.record`` layout) handed to
    ``Partition.append_encoded`` whose lengths do not frame exactly ``count``
    records: one runs past the block, or bytes are left after the last."""

    code = "malformed_records"


class RecordTruncated(MalformedRecords):
    """Fewer bytes left in the block than a record header (64 bytes)."""

    code = "record_truncated"


class RecordReservedField(MalformedRecords):
    """A record's reserved u64 is not zero (the Iggy 0.8 client rejects such records)."""

    code = "record_reserved_field"


class InvalidOffset(InvalidArgument):
    """An offset (or byte position) outside what the partition holds."""

    code = "invalid_offset"


class InvalidUsername(InvalidName):
    """A username outside Iggy's 3..50 bytes (Iggy code 43)."""

    code = "invalid_username"


class InvalidPassword(InvalidArgument):
    """A password outside Iggy's 3..100 bytes (Iggy code 44)."""

    code = "invalid_password"


class InvalidTokenName(InvalidName):
    """A personal access token name outside Iggy's 3..30 bytes (Iggy code 50)."""

    code = "invalid_personal_access_token_name"


class TooManyPartitions(InvalidArgument):
    """A partition count past the per-topic limit (Iggy code 2015)."""

    code = "too_many_partitions"


class TokenLimitReached(InvalidArgument):
    """The user already holds the most personal access tokens allowed (Iggy code 52)."""

    code = "personal_access_tokens_limit_reached"


# -- lookups -------------------------------------------------------------------
class NotFound(FerryError):
    code = "not_found"


class StreamNotFound(NotFound):
    code = "stream_not_found"


class TopicNotFound(NotFound):
    code = "topic_not_found"


class PartitionNotFound(NotFound):
    code = "partition_not_found"


class ConsumerGroupNotFound(NotFound):
    code = "consumer_group_not_found"


class ConsumerGroupMemberNotFound(NotFound):
    code = "consumer_group_member_not_found"


class ConsumerOffsetNotFound(NotFound):
    code = "consumer_offset_not_found"


class UserNotFound(NotFound):
    code = "user_not_found"


class TokenNotFound(NotFound):
    code = "personal_access_token_not_found"


class TableNotFound(NotFound):
    """A key-value table (``core.kvtables``) that does not exist. ``details["table"]``."""

    code = "table_not_found"


class AlreadyExists(FerryError):
    code = "already_exists"


class StreamAlreadyExists(AlreadyExists):
    code = "stream_already_exists"


class TopicAlreadyExists(AlreadyExists):
    code = "topic_already_exists"


class ConsumerGroupAlreadyExists(AlreadyExists):
    code = "consumer_group_already_exists"


class UserAlreadyExists(AlreadyExists):
    code = "user_already_exists"


class TokenAlreadyExists(AlreadyExists):
    code = "personal_access_token_already_exists"


# -- auth --------------------------------------------------------------------
class Unauthenticated(FerryError):
    code = "unauthenticated"


class InvalidCredentials(Unauthenticated):
    code = "invalid_credentials"


class LoginThrottled(InvalidCredentials):
    """Too many failed logins from this address: refused without checking
    (core/access.py); every protocol answers it as invalid credentials."""

    code = "invalid_credentials"


class InvalidToken(InvalidCredentials):
    """A personal access token that matches none stored (Iggy code 53)."""

    code = "invalid_personal_access_token"


class TokenExpired(Unauthenticated):
    """A personal access token past its expiry (Iggy code 54)."""

    code = "personal_access_token_expired"


class UserInactive(Unauthenticated):
    """Right credentials, but the user's status is inactive (Iggy code 47)."""

    code = "user_inactive"


class PermissionDenied(FerryError):
    code = "permission_denied"


class CannotDeleteUser(PermissionDenied):
    """The root user cannot be deleted (Iggy code 48)."""

    code = "cannot_delete_user"


class CannotChangePermissions(PermissionDenied):
    """The root user's permissions cannot be changed (Iggy code 49)."""

    code = "cannot_change_permissions"


# -- state: a well-formed request the current state refuses -------------------
class PreconditionFailed(FerryError):
    """The request is well-formed, but the current state of what it names refuses
    it (gRPC's FAILED_PRECONDITION): repeating it unchanged fails the same way
    until that state changes. Not an InvalidArgument (the request itself is
    fine) and not a NotFound (the target exists)."""

    code = "precondition_failed"


class TopicSealed(PreconditionFailed):
    """An append to a sealed topic (``broker.topic_state.seal_topic``; Pravega's sealStream /
    SealSegment, reply SegmentIsSealed). ``details``: stream_id, topic_id."""

    code = "topic_sealed"


class TableNotEmpty(PreconditionFailed):
    """A delete with ``must_be_empty`` of a table that holds entries (Pravega
    TableSegmentNotEmpty). ``details["table"]``."""

    code = "table_not_empty"


class TableKeyBadVersion(PreconditionFailed):
    """A conditional table update or removal whose key has another version than
    the one expected, or exists when it must not (Pravega TableKeyBadVersion).
    ``details``: table, key (bytes), expected, actual (None: the key is missing)."""

    code = "table_key_bad_version"


class TableKeyDoesNotExist(TableKeyBadVersion):
    """A specific version was expected but the key is missing (Pravega
    TableKeyDoesNotExist). A subclass of TableKeyBadVersion on purpose: the
    pravega 0.3.8 Rust client only treats TableKeyBadVersion as a conflict on
    updates (protocols/pravega.md 4.5), so a mapping that names only the base
    answers the form every client understands; one that wants the upstream reply
    checks this class first."""

    code = "table_key_does_not_exist"


class TableLengthMismatch(PreconditionFailed):
    """A table change conditioned on the table's length (Pravega's
    ``tableSegmentOffset``) when the length is another. ``details``: table,
    expected, actual."""

    code = "table_length_mismatch"


# -- storage -----------------------------------------------------------------
class StorageError(FerryError):
    """The disk refused an operation (ENOSPC, EIO, ...)."""

    code = "storage_error"


class StorageConflict(StorageError):
    """A replicated metadata write lost a race: another gateway of the same store wrote
    the metadata log at the same moment (gateway/jetstream_store/store.py). Nothing was
    written; reading again and retrying is safe. Clients see it as any StorageError."""


class CorruptSegment(StorageError):
    """Stored bytes failed their checksum. The segment is quarantined, never served."""

    code = "corrupt_segment"


class ShuttingDown(FerryError):
    code = "shutting_down"
