"""The Pravega segment-store commands, declared once as a table (pravega.md sections 2-4).

Theory of operation
-------------------
Each command is one :class:`Command` entry: its type code, its Java name and
its fields in wire order, named in camelCase exactly as pravega.md section 4
writes them (so a grep against the doc finds them), each with a wire type
from :mod:`adapters.pravega.types`. From the entry, once, at import
(STYLE.md section 4, Kafka's message specs):

* a frozen, slotted dataclass named after the Java class, exposed here as a
  module attribute (``commands.SetupAppend(request_id=..., writer_id=...,
  segment=..., delegation_token=...)``), fields in snake_case;
* a decode plan: runs of required scalar fields fused into one big-endian
  ``struct.Struct``, every other field read by its type;
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

:class:`CommandTable` refuses a bad spec when it loads: duplicate codes or
names, a code outside a signed byte (section 1), a rest field that is not
last, a required field after an optional one, a default its type cannot write.
The retired codes 72/73 (MergeTableSegments, SealTableSegment; gone from the
Java enum) are left out: they decode as unknown types.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass
from typing import Any, Iterable

from .errors import PravegaProtocolError
from .types import (
    ENDS_EARLY,
    I8,
    I32,
    I64,
    Blob,
    Bool,
    EventFrame,
    ListOf,
    Record,
    Rest,
    TableEntries,
    TableKeys,
    Utf,
    Uuid,
    WireType,
    snake,
)

HEADER = struct.Struct(">ii")  # type code, payload length (section 1)
HEADER_SIZE = HEADER.size
REQUIRED = object()


class SpecError(Exception):
    """The command table is malformed: a bug in this file, raised at import."""


@dataclass(frozen=True)
class Field:
    """One field: ``wire`` is pravega.md's camelCase name; ``name`` the Python one."""

    wire: str
    type: WireType
    default: Any = REQUIRED

    @property
    def name(self) -> str:
        return snake(self.wire)

    @property
    def optional(self) -> bool:
        return self.default is not REQUIRED


def F(wire: str, type_: WireType) -> Field:
    """A required field."""
    return Field(wire, type_)


def Opt(wire: str, type_: WireType, default: Any) -> Field:
    """An optional trailing field: ``(opt default)`` in pravega.md."""
    return Field(wire, type_, default)


class Command:
    """One command: code, Java name, fields; derives the dataclass (``cls``) and its codec."""

    def __init__(self, code: int, name: str, fields: Iterable[Field] = (), *, block_only: bool = False,
                 ignore_tail: bool = False, about: str = "") -> None:
        self.code = code
        self.name = name
        self.fields = tuple(fields)
        self.block_only = block_only  # only inside an AppendBlock (section 5.2)
        self.ignore_tail = ignore_tail  # payload bytes after the fields are skipped, not refused
        self.about = about
        self._check()
        self.cls = self._make_class()
        self.steps = self._plan()

    # -- load-time checks and derivations ------------------------------------------------------
    def _check(self) -> None:
        if not self.name.isidentifier():
            raise SpecError(f"command name {self.name!r} is not an identifier")
        seen: set[str] = set()
        optional_seen = False
        for i, f in enumerate(self.fields):
            where = f"{self.name}.{f.wire}"
            if not isinstance(f.type, WireType):
                raise SpecError(f"{where}: {f.type!r} is not a WireType")
            if f.name in seen or not f.name.isidentifier():
                raise SpecError(f"{where}: duplicate or invalid field name")
            seen.add(f.name)
            if f.type.rest and i != len(self.fields) - 1:
                raise SpecError(f"{where}: a rest-of-frame field must be last")
            if f.optional:
                optional_seen = True
                if not f.type.valid(f.default):
                    raise SpecError(f"{where}: default {f.default!r} does not fit {f.type!r}")
            elif optional_seen:
                raise SpecError(f"{where}: a required field cannot follow an optional one")

    def _make_class(self):
        specs = []
        for f in self.fields:
            if f.optional:
                specs.append((f.name, f.type.py, dataclasses.field(default=f.default)))
            else:
                specs.append((f.name, f.type.py))
        cls = dataclasses.make_dataclass(self.name, specs, frozen=True, slots=True)
        cls.__module__ = __name__  # make_dataclass's module= needs Python 3.12
        layout = ", ".join(f"{f.wire} {f.type.name}" + (f" (opt {f.default!r})" if f.optional else "")
                           for f in self.fields)
        cls.__doc__ = f"{self.name} ({self.code}): {layout or 'no fields'}. {self.about}".rstrip()
        return cls

    def _plan(self) -> tuple:
        """Steps ``(struct_or_None, fields, optional)``: required scalars fuse into one Struct;
        each optional field is a step of its own, so decoding may stop before any of them."""
        steps: list[tuple] = []
        run: list[Field] = []

        def flush() -> None:
            if run:
                steps.append((struct.Struct(">" + "".join(f.type.fmt for f in run)), tuple(run), False))
                run.clear()

        for f in self.fields:
            if f.type.fmt is not None and not f.optional:
                run.append(f)
                continue
            flush()
            if f.type.fmt is not None:
                steps.append((struct.Struct(">" + f.type.fmt), (f,), True))
            else:
                steps.append((None, (f,), f.optional))
        flush()
        return tuple(steps)

    # -- codec -------------------------------------------------------------------------------------
    def decode(self, buf) -> Any:
        """The command whose payload is all of ``buf`` (bytes, bytearray or memoryview; copied
        out, so a view may be released afterwards). Raises :class:`PravegaProtocolError`."""
        end = len(buf)
        pos = 0
        values: list[Any] = []
        for st, fields, optional in self.steps:
            if optional and pos == end:
                break  # the frame stops before an optional field: defaults for the rest
            if st is not None:
                if end - pos < st.size:
                    raise self._short_run(fields, end - pos)
                values.extend(st.unpack_from(buf, pos))
                pos += st.size
            else:
                try:
                    value, pos = fields[0].type.read(buf, pos, end)
                except PravegaProtocolError as exc:
                    raise PravegaProtocolError(f"{self.name}.{fields[0].name}: {exc.reason}") from None
                values.append(value)
        if pos != end and not self.ignore_tail:
            raise PravegaProtocolError(f"{self.name}: {end - pos} trailing bytes")
        return self.cls(*values)

    def _short_run(self, fields: tuple[Field, ...], avail: int) -> PravegaProtocolError:
        for f in fields:  # name the first field of the fused run that does not fit
            if avail < f.type.fixed:
                break
            avail -= f.type.fixed
        return PravegaProtocolError(f"{self.name}.{f.name}: {ENDS_EARLY}")

    def write(self, out: list, value: Any) -> None:
        """Append the payload of ``value`` to ``out``; every field, optional or not.
        Raises ``ValueError``/``TypeError`` for values the wire cannot carry (our bug)."""
        try:
            for st, fields, _ in self.steps:
                if st is not None:
                    out.append(st.pack(*[getattr(value, f.name) for f in fields]))
                else:
                    fields[0].type.write(out, getattr(value, fields[0].name))
        except struct.error as exc:
            raise ValueError(f"{self.name}: {exc}") from None

    def strategy(self):
        """Hypothesis strategy of valid instances (test-only)."""
        from hypothesis import strategies as st

        return st.builds(self.cls, **{f.name: f.type.strategy() for f in self.fields})

    def __repr__(self) -> str:
        return f"<Command {self.code} {self.name}>"


class CommandTable:
    """All commands, checked when built; lookups by code, by name and by class."""

    def __init__(self, commands: Iterable[Command]) -> None:
        self.commands = tuple(commands)
        self.by_code: dict[int, Command] = {}
        self.by_name: dict[str, Command] = {}
        self.by_cls: dict[type, Command] = {}
        for c in self.commands:
            if c.code in self.by_code:
                raise SpecError(f"duplicate command code {c.code}")
            if c.name in self.by_name:
                raise SpecError(f"duplicate command name {c.name!r}")
            if not -128 <= c.code <= 127:  # section 1: codes fit a signed byte, sent as i32
                raise SpecError(f"command code {c.code} outside a signed byte")
            self.by_code[c.code] = c
            self.by_name[c.name] = c
            self.by_cls[c.cls] = c

    def __iter__(self):
        return iter(self.commands)

    def __len__(self) -> int:
        return len(self.commands)


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
                                  Opt("attributeUpdates", ListOf(_ATTRIBUTE_UPDATE), ())),
            about="Rust and pre-v5 Java send no attribute list."),
    Command(59, "SegmentsMerged", (_RID, F("target", Utf), F("source", Utf), Opt("newTargetWriteOffset", I64, -1))),
    Command(90, "MergeSegmentsBatch", (_RID, F("target", Utf), F("sources", ListOf(Utf)), _TOKEN)),
    Command(91, "SegmentsBatchMerged", (_RID, F("target", Utf), F("merged", ListOf(_MERGED_SOURCE)))),
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
    Command(75, "TableEntriesUpdated", (_RID, F("updatedVersions", ListOf(I64))),
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
    Command(-6, "StorageChunksListed", (_RID, F("chunks", ListOf(_CHUNK_INFO)))),
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
    spec.write(out, cmd)
    out[0] = HEADER.pack(spec.code, sum(map(len, out)))
    return b"".join(out)


def decode_payload(code: int, payload) -> Any:
    """The command of type ``code`` whose payload is exactly ``payload``.

    Raises :class:`PravegaProtocolError` for an unknown code or a malformed payload."""
    spec = TABLE.by_code.get(code)
    if spec is None:
        raise PravegaProtocolError(f"unknown command type {code}")
    return spec.decode(payload)


def strategy(cls: type):
    """Hypothesis strategy of valid ``cls`` instances, derived from the table (test-only)."""
    return SPEC_OF[cls].strategy()


__all__ = ["AttributeUpdate", "BY_CODE", "CODE_OF", "ChunkInfo", "Command", "CommandTable", "F", "Field",
           "HEADER", "HEADER_SIZE", "MergedSource", "Opt", "SPEC_OF", "SpecError", "TABLE", "decode_payload",
           "encode", "strategy", *(c.name for c in TABLE)]
