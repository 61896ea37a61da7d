"""The Pravega segment-store commands, declared once as a table (pravega.md sections 2-4).

Theory of operation
-------------------
Each command is one :class:`Command` entry: its type code, its Java name and
its fields in wire order, named in camelCase exactly as pravega.md section 4
writes them (so a grep against the doc finds them), each with a wire type
from :mod:`adapters.pravega.types`. From the entry, once, at import, the
shared engine (:mod:`adapters.wire.table`; STYLE.md section 4, Kafka's
message specs) derives:

* a frozen, slotted dataclass named after the Java class, exposed here as a
  module attribute (``commands.SetupAppend(request_id=..., writer_id=...,
  segment=..., delegation_token=...)``), fields in snake_case;
* a decode plan: runs of required scalar fields fused into one big-endian
  ``struct.Struct``, every other field read by its type (one layout: version
  :data:`V`);
* :func:`encode` (a whole frame: ``type i32``, ``length i32``, payload),
  :func:`decode_payload` and :func:`strategy` for hypothesis.

Optional trailing fields (``(opt d)`` in the doc) carry their default ``d``.
The *decoder* stops cleanly when the frame ends right before one of them,
since Java clients and older servers leave them out, and Java's own decoder
does the same (``in.available()`` checks). A frame that ends *inside* a field
is still an error. The *encoder* always writes every field: the Rust client
decodes strictly (section 0), and replies must carry everything.

Decoding is exact: bytes after the last field are an error. The exceptions
are KeepAlive, whose payload is ignored (section 2), and the rest-of-frame
fields, which take everything. Every decode failure is a
:class:`~adapters.pravega.errors.PravegaProtocolError` whose reason names
``Command.field``; upstream closes the connection on these (section 1).

Event (0), PartialEvent (-2) and Padding (-1) are in the table so that they
encode and decode like the rest, but they are *block-only*: legal only as
the frames inside an AppendBlock (section 5.2). :mod:`adapters.pravega.codec`
refuses them at top level.

The engine's :class:`~adapters.wire.table.CommandTable` refuses a bad spec when it loads: duplicate codes or
names, a code outside a signed byte (section 1), a rest field that is not
last, a required field after an optional one, a default its type cannot write.
The retired codes 72/73 (MergeTableSegments, SealTableSegment; gone from the
Java enum) are left out: they decode as unknown types.
"""

from __future__ import annotations

import struct
from typing import Any, Iterable

from adapters.wire import table
from adapters.wire.table import CommandTable, Field
from adapters.wire.types import ListOf, Record, WireType, snake

from .errors import PravegaProtocolError
from .types import (
    I8,
    I32,
    I64,
    PRAVEGA,
    Blob,
    Bool,
    EventFrame,
    Rest,
    TableEntries,
    TableKeys,
    Utf,
    Uuid,
)

HEADER = struct.Struct(">ii")  # type code, payload length (section 1)
HEADER_SIZE = HEADER.size
V = 0  # the one layout of every command (types.PRAVEGA: optional trailing fields, no versions)


def F(wire: str, type_: WireType) -> Field:
    """A required field: ``wire`` is pravega.md's camelCase name, the Python one its snake_case."""
    return Field(snake(wire), type_, spec_name=wire)


def Opt(wire: str, type_: WireType, default: Any) -> Field:
    """An optional trailing field: ``(opt default)`` in pravega.md."""
    return Field(snake(wire), type_, default, optional=True, spec_name=wire)


class Command(table.Command):
    """One command: code, Java name, fields; the engine derives the dataclass (``cls``)
    and its codec. ``block_only``: legal only inside an AppendBlock (section 5.2)."""

    wire = PRAVEGA
    module = __name__  # commands.SetupAppend is a module attribute

    def __init__(self, code: int, name: str, fields: Iterable[Field] = (), *, block_only: bool = False,
                 ignore_tail: bool = False, about: str = "") -> None:
        self.block_only = block_only
        super().__init__(code, name, fields, ignore_tail=ignore_tail, about=about)


# -- list item shapes ------------------------------------------------------------------------------
_ATTRIBUTE_UPDATE = Record("AttributeUpdate", (("attributeId", Uuid), ("updateType", I8), ("newValue", I64),
                                               ("oldValue", I64)), module=__name__)
_CHUNK_INFO = Record("ChunkInfo", (("lengthInMetadata", I64), ("lengthInStorage", I64), ("startOffset", I64),
                                   ("chunkName", Utf), ("existsInStorage", Bool)), module=__name__)
_MERGED_SOURCE = Record("MergedSource", (("source", Utf), ("newTargetWriteOffset", I64)), module=__name__)
AttributeUpdate = _ATTRIBUTE_UPDATE.cls
ChunkInfo = _CHUNK_INFO.cls
MergedSource = _MERGED_SOURCE.cls

# Field shorthands for the names that recur in almost every command.
_RID = F("requestId", I64)
_RID_OPT = Opt("requestId", I64, -1)  # Java decoders default a missing requestId to -1
_SEGMENT = F("segment", Utf)
_SEGMENT_NAME = F("segmentName", Utf)
_TOKEN = F("delegationToken", Utf)
_WRITER = F("writerId", Uuid)
_TRACE_OPT = Opt("serverStackTrace", Utf, "")  # "" unless the server sends traces (section 4.4)
_TRACE = F("serverStackTrace", Utf)
_OFFSET_OPT = Opt("offset", I64, -1)
_TABLE_OFFSET_OPT = Opt("tableSegmentOffset", I64, -1)  # -1 = no condition; upstream decodes it as optional


def _named(code: int, name: str, *extra: Field, about: str = "") -> Command:
    """The many ``requestId, segment[, ...]`` commands (replies mostly)."""
    return Command(code, name, (_RID, _SEGMENT, *extra), about=about)


def _iterator_args(count_field: str) -> tuple[Field, ...]:
    """ReadTableKeys / ReadTableEntries: a count, then TableIteratorArgs (section 4.5): the
    continuation token, then three blobs only Java >= 0.10 sends (prefix, always empty)."""
    return (F(count_field, I32), F("continuationToken", Blob), Opt("prefix", Blob, b""),
            Opt("fromKey", Blob, b""), Opt("toKey", Blob, b""))


TABLE = CommandTable([
    # -- handshake and liveness (section 2) --
    Command(-127, "Hello", (F("highVersion", I32), F("lowVersion", I32)), about="Both directions, client first."),
    Command(100, "KeepAlive", (), ignore_tail=True, about="Echoed by the server; any payload is skipped."),
    # -- append path (section 4.1) --
    Command(0, "Event", (F("data", Rest),), block_only=True,
            about="The frame format of stored data; at top level only inside an AppendBlock."),
    Command(-1, "Padding", (F("data", Rest),), block_only=True, about="Zero bytes filling an AppendBlock."),
    Command(-2, "PartialEvent", (F("data", Rest),), block_only=True,
            about="Prefix of one event frame closing an AppendBlock; the rest is in AppendBlockEnd.data."),
    Command(1, "SetupAppend", (_RID, _WRITER, _SEGMENT, _TOKEN)),
    Command(2, "AppendSetup", (_RID, _SEGMENT, _WRITER, F("lastEventNumber", I64)),
            about="lastEventNumber is NULL_ATTRIBUTE_VALUE for a writer never seen."),
    Command(3, "AppendBlock", (_WRITER, F("data", Rest)), about="Java only; must be followed by its AppendBlockEnd."),
    Command(4, "AppendBlockEnd", (_WRITER, F("sizeOfWholeEvents", I32), F("data", Blob), F("numEvents", I32),
                                  F("lastEventNumber", I64), _RID_OPT)),
    Command(5, "ConditionalAppend", (_WRITER, F("eventNumber", I64), F("expectedOffset", I64),
                                     F("event", EventFrame), _RID_OPT),
            about="event is the payload of the embedded Event frame."),
    Command(89, "ConditionalBlockEnd", (_WRITER, F("eventNumber", I64), F("expectedOffset", I64), F("data", Blob),
                                        _RID), about="Rust byte streams send raw bytes, not event frames."),
    Command(7, "DataAppended", (_WRITER, F("eventNumber", I64), Opt("previousEventNumber", I64, -1), _RID_OPT,
                                Opt("currentSegmentWriteOffset", I64, -1))),
    Command(8, "ConditionalCheckFailed", (_WRITER, F("eventNumber", I64), _RID_OPT)),
    # -- read path (section 4.2) --
    Command(9, "ReadSegment", (_SEGMENT, F("offset", I64), F("suggestedLength", I32), _TOKEN, _RID_OPT)),
    Command(10, "SegmentRead", (_SEGMENT, F("offset", I64), F("atTail", Bool), F("endOfSegment", Bool),
                                F("data", Blob), _RID_OPT), about="offset echoes the requested offset."),
    # -- segment information and management (section 4.3) --
    Command(11, "GetStreamSegmentInfo", (_RID, _SEGMENT_NAME, _TOKEN)),
    Command(12, "StreamSegmentInfo", (_RID, _SEGMENT_NAME, F("exists", Bool), F("isSealed", Bool),
                                      F("isDeleted", Bool), F("lastModified", I64), F("writeOffset", I64),
                                      Opt("startOffset", I64, 0))),
    Command(20, "CreateSegment", (_RID, _SEGMENT, F("targetRate", I32), F("scaleType", I8), _TOKEN,
                                  Opt("rolloverSizeBytes", I64, 0)), about="Note: rate before type."),
    _named(21, "SegmentCreated", about="Also answers CreateTransientSegment and CreateTableSegment."),
    Command(28, "SealSegment", (_RID, _SEGMENT, _TOKEN)),
    _named(29, "SegmentSealed"),
    Command(30, "DeleteSegment", (_RID, _SEGMENT, _TOKEN)),
    _named(31, "SegmentDeleted", about="Also answers DeleteTableSegment."),
    Command(32, "UpdateSegmentPolicy", (_RID, _SEGMENT, F("targetRate", I32), F("scaleType", I8), _TOKEN)),
    _named(33, "SegmentPolicyUpdated"),
    Command(34, "GetSegmentAttribute", (_RID, _SEGMENT_NAME, F("attributeId", Uuid), _TOKEN)),
    Command(35, "SegmentAttribute", (_RID, F("value", I64)), about="NULL_ATTRIBUTE_VALUE = none."),
    Command(36, "UpdateSegmentAttribute", (_RID, _SEGMENT_NAME, F("attributeId", Uuid), F("newValue", I64),
                                           F("expectedValue", I64), _TOKEN)),
    Command(37, "SegmentAttributeUpdated", (_RID, F("success", Bool))),
    Command(38, "TruncateSegment", (_RID, _SEGMENT, F("truncationOffset", I64), _TOKEN)),
    _named(39, "SegmentTruncated"),
    Command(40, "CreateTransientSegment", (_RID, _WRITER, F("parentSegment", Utf), _TOKEN)),
    Command(41, "LocateOffset", (_RID, _SEGMENT, F("targetOffset", I64), _TOKEN)),
    _named(42, "OffsetLocated", F("offset", I64)),
    Command(58, "MergeSegments", (_RID, F("target", Utf), F("source", Utf), _TOKEN,
                                  Opt("attributeUpdates", ListOf(I32, _ATTRIBUTE_UPDATE), ())),
            about="Rust and pre-v5 Java send no attribute list."),
    Command(59, "SegmentsMerged", (_RID, F("target", Utf), F("source", Utf), Opt("newTargetWriteOffset", I64, -1))),
    Command(90, "MergeSegmentsBatch", (_RID, F("target", Utf), F("sources", ListOf(I32, Utf)), _TOKEN)),
    Command(91, "SegmentsBatchMerged", (_RID, F("target", Utf), F("merged", ListOf(I32, _MERGED_SOURCE)))),
    # -- error replies (section 4.4) --
    _named(50, "WrongHost", F("correctHost", Utf), _TRACE_OPT),
    _named(51, "SegmentIsSealed", _TRACE_OPT, _OFFSET_OPT, about="offset carries the event number for appends."),
    _named(52, "SegmentAlreadyExists", _TRACE_OPT),
    _named(53, "NoSuchSegment", _TRACE_OPT, _OFFSET_OPT),
    Command(55, "InvalidEventNumber", (_WRITER, _RID, _TRACE_OPT, Opt("eventNumber", I64, -1)),
            about="The server closes the connection after sending it."),
    _named(56, "SegmentIsTruncated", F("startOffset", I64), _TRACE_OPT, _OFFSET_OPT),
    Command(57, "OperationUnsupported", (_RID, F("operationName", Utf), _TRACE_OPT)),
    Command(60, "AuthTokenCheckFailed", (_RID, _TRACE_OPT, Opt("errorCode", I32, -1)),
            about="errorCode -1 unspecified, 0 check failed, 1 expired."),
    _named(61, "ErrorMessage", F("message", Utf), F("errorCode", I32),
           about="errorCode -1 unspecified, 0 illegal argument."),
    # -- table segments (section 4.5) --
    Command(68, "GetTableSegmentInfo", (_RID, _SEGMENT_NAME, _TOKEN)),
    Command(69, "TableSegmentInfo", (_RID, _SEGMENT_NAME, F("startOffset", I64), F("length", I64),
                                     F("entryCount", I64), F("keyLength", I32))),
    Command(70, "CreateTableSegment", (_RID, _SEGMENT, _TOKEN, Opt("sortedDeprecated", Bool, False),
                                       Opt("keyLength", I32, 0), Opt("rolloverSizeBytes", I64, 0)),
            about="pravega 0.3.8 sends none of the optional fields."),
    Command(71, "DeleteTableSegment", (_RID, _SEGMENT, F("mustBeEmpty", Bool), _TOKEN)),
    Command(74, "UpdateTableEntries", (_RID, _SEGMENT, _TOKEN, F("entries", TableEntries), _TABLE_OFFSET_OPT)),
    Command(75, "TableEntriesUpdated", (_RID, F("updatedVersions", ListOf(I32, I64))),
            about="One new version per entry, in request order."),
    Command(76, "RemoveTableKeys", (_RID, _SEGMENT, _TOKEN, F("keys", TableKeys), _TABLE_OFFSET_OPT)),
    _named(77, "TableKeysRemoved"),
    Command(78, "ReadTable", (_RID, _SEGMENT, _TOKEN, F("keys", TableKeys))),
    _named(79, "TableRead", F("entries", TableEntries)),
    _named(80, "TableSegmentNotEmpty", _TRACE),
    _named(81, "TableKeyDoesNotExist", _TRACE),
    _named(82, "TableKeyBadVersion", _TRACE),
    Command(83, "ReadTableKeys", (_RID, _SEGMENT, _TOKEN, *_iterator_args("suggestedKeyCount"))),
    _named(84, "TableKeysRead", F("keys", TableKeys), F("continuationToken", Blob)),
    Command(85, "ReadTableEntries", (_RID, _SEGMENT, _TOKEN, *_iterator_args("suggestedEntryCount")),
            about="Rust sends only the continuation token."),
    _named(86, "TableEntriesRead", F("entries", TableEntries), F("continuationToken", Blob)),
    _named(87, "TableEntriesDeltaRead", F("entries", TableEntries), F("shouldClear", Bool), F("reachedEnd", Bool),
           F("lastPosition", I64)),
    Command(88, "ReadTableEntriesDelta", (_RID, _SEGMENT, _TOKEN, F("fromPosition", I64),
                                          F("suggestedEntryCount", I32))),
    # -- admin only, never sent by clients (section 4.6) --
    Command(-3, "FlushToStorage", (F("containerId", I32), _TOKEN, _RID)),
    Command(-4, "StorageFlushed", (_RID,)),
    Command(-5, "ListStorageChunks", (_SEGMENT, _TOKEN, _RID)),
    Command(-6, "StorageChunksListed", (_RID, F("chunks", ListOf(I32, _CHUNK_INFO)))),
])

BY_CODE: dict[int, type] = {c.code: c.cls for c in TABLE}
CODE_OF: dict[type, int] = {c.cls: c.code for c in TABLE}
SPEC_OF: dict[type, Command] = TABLE.by_cls
globals().update({c.name: c.cls for c in TABLE})  # commands.SetupAppend, commands.DataAppended, ...


def encode(cmd: Any) -> bytes:
    """The whole frame of ``cmd``: ``type i32``, ``length i32``, payload with every field.

    Raises ``TypeError`` for an object that is not a command, ``ValueError`` for a value
    the wire cannot carry (an ``i32`` out of range, a string over 65 535 bytes)."""
    spec = SPEC_OF.get(type(cmd))
    if spec is None:
        raise TypeError(f"not a Pravega command: {cmd!r}")
    out: list[bytes] = [b""]
    try:
        spec.write(V, out, cmd)
    except struct.error as exc:
        raise ValueError(f"{spec.name}: {exc}") from None
    out[0] = HEADER.pack(spec.code, sum(map(len, out)))
    return b"".join(out)


def decode_payload(code: int, payload) -> Any:
    """The command of type ``code`` whose payload is exactly ``payload``.

    Raises :class:`PravegaProtocolError` for an unknown code or a malformed payload."""
    spec = TABLE.by_code.get(code)
    if spec is None:
        raise PravegaProtocolError(f"unknown command type {code}")
    return spec.decode(V, payload)


def strategy(cls: type):
    """Hypothesis strategy of valid ``cls`` instances, derived from the table (test-only)."""
    return SPEC_OF[cls].strategy(V)


__all__ = ["AttributeUpdate", "BY_CODE", "CODE_OF", "ChunkInfo", "Command", "F", "HEADER", "HEADER_SIZE",
           "MergedSource", "Opt", "SPEC_OF", "TABLE", "V", "decode_payload", "encode", "strategy",
           *(c.name for c in TABLE)]
