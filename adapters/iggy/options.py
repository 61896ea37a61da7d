"""Iggy's topic options: the catalog, declared once, and everything derived from it.

Theory of operation
-------------------
The current Iggy generation (apache-iggy 0.9.0, dialect 3) sends a topic's
settings as an *options block* (iggy-current.md 6.1, 6.8): a TLV block of
string keys, the rest of a CreateTopic or UpdateTopic body. The reference server
(apache/iggy at the commit iggy-current.md 1 names) serves a catalog of the keys
it accepts (DescribeOptions, code 13, and ``GET /options/{scope}`` over HTTP)
and reports each topic's options in two blocks on GetTopic: *explicit* (the keys
the creating client sent) and *derived* (every other catalog key, as admission
resolved it). Facts taken from it, by file of that commit:

* catalog, kinds and defaults: ``core/server/src/responses.rs``
  ``topic_option_descriptors`` and ``build_describe_options_response`` (scope 1
  topic; 2 stream and 3 user are empty; any other scope is 3 InvalidCommand);
  ``core/common/src/types/options/mod.rs`` (``topic_option_keys``,
  ``UPDATABLE_TOPIC_OPTION_KEYS``, the ``DEFAULT_*``/``MIN_*``/``MAX_*`` bounds,
  ``absorb_strict`` and its ``parse_*`` helpers, ``derived_block``);
* block validity (else 3 InvalidCommand): ``core/binary_protocol/src/primitives/
  options.rs`` ``validate_options`` and ``user_headers.rs``
  ``validate_user_headers``: kinds non-zero, fields 1..255 bytes, pairs, string
  UTF-8 keys, no duplicates, at most 1024 pairs and 100 000 bytes;
* admission order: ``core/server/src/dispatch.rs`` (the pre-consensus
  ``bounds``): CreateTopic parses the block in wire order (first unknown key
  4041 UnsupportedOptionKey, first bad value 4042 InvalidOptionValue), then
  checks ``segment_size``, ``preallocate_segments``, the partition count (2015)
  and ``max_topic_size`` against the topic's segment size (1019 InvalidTopicSize,
  ``validate_topic_size_floor``; 0 = server default is exempt); UpdateTopic first
  refuses every key outside the updatable three with 4041
  (``validate_option_keys``), then parses, then checks the same floor against the
  topic's own segment size;
* the HTTP form: ``core/server/src/http.rs`` route ``/options/{scope}``,
  ``http/handlers.rs`` ``describe_options`` (``Vec<OptionSpec>`` as JSON:
  ``key``, ``kind`` by snake-case name, ``default_value`` as a byte array,
  ``description``; a bad scope is 400 InvalidCommand).

:data:`TOPIC_OPTIONS` is that catalog as one table. Each row says the key, its
canonical kind (its default and the values reported are encoded in it), whether
UpdateTopic may carry it, how a value is read (the canonical kind, or a string
parsed as the reference parses config text) and bounded, its default, and where
it lands in the core: ``compression_algorithm``, ``message_expiry`` and
``max_topic_size`` are the topic's settings (a ``core.model.TopicSettings`` for
``Broker.create_topic`` / ``update_topic``); ``segment_size`` and
``enforce_fsync`` are the topic's own log settings (``TopicInfo.segment_bytes``;
``TopicInfo.fsync`` ``always`` for true,
``never`` for false), fixed at creation, which its partitions roll and
fdatasync by (``Broker.topic_log_config``, ``core/flusher.py``). The last three
tune the reference server's journal and have no counterpart in Ferry's log: they
are checked and reported, not applied. Defaults are Ferry's: the broker's
``[log]`` segment size and fsync policy (true unless ``never``) where the
reference has build constants.

Which keys a topic's creator sent (and the values of the three unapplied ones)
is recorded in the topic attribute :data:`EXPLICIT_ATTR` (JSON); GetTopic's
explicit block shows those keys, the derived block every other catalog key, each
with the topic's effective value read from the core. The two keys the 0.9.0 wheel
always sends, ``durability`` and ``consumer_offset_durability`` (iggy-current.md
6.8; the wheel was built after that commit, whose catalog does not list them),
are accepted on create with the wheel's two values and otherwise ignored.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from core import errors as ce
from core.message import HeaderKind
from core.metadata import MAX_PARTITIONS
from core.model import TopicSettings

from .errors import IggyError, IggyStatus

U64_MAX = (1 << 64) - 1
U32_MAX = (1 << 32) - 1
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

# Bounds of the reference catalog (core/common/src/types/options/mod.rs).
MIN_SEGMENT_SIZE = 1 * MiB  # MIN_TOPIC_SEGMENT_SIZE
MAX_SEGMENT_SIZE = 1 * GiB  # MAX_TOPIC_SEGMENT_SIZE
SEGMENT_SIZE_STEP = 512  # segment_size is a 512-byte multiple
MAX_MESSAGES_REQUIRED_TO_SAVE = 16 * MiB  # 1..=this
MAX_SIZE_OF_MESSAGES_REQUIRED_TO_SAVE = 1 * GiB
MAX_PREALLOCATED_TOPIC_BYTES = 64 * GiB  # segment_size * partitions when preallocating
DEFAULT_MESSAGES_REQUIRED_TO_SAVE = 1024
DEFAULT_SIZE_OF_MESSAGES_REQUIRED_TO_SAVE = 1 * MiB
# Options blocks (core/binary_protocol/src/primitives/options.rs).
MAX_OPTIONS = 1024
MAX_OPTIONS_BYTES = 100_000
MAX_FIELD = 255

SCOPES = {"topic": 1, "stream": 2, "user": 3}  # DescribeOptions scope codes (iggy-current.md 6.13)
EXPLICIT_ATTR = "iggy.topic_options"  # topic attribute: the keys the creator sent (JSON)
# Sent by the 0.9.0 wheel on every create (not in the reference catalog): accepted, not applied.
DURABILITY_KEYS = frozenset({"durability", "consumer_offset_durability"})
DURABILITY_VALUES = frozenset({"replicated", "persisted"})  # the wheel's Durability enum

_KIND_LEN = struct.Struct("<BI")
_FSYNC_OF = {True: "always", False: "never"}


class _Bad(Exception):
    """A value the key's reader or bounds refuse: 4042 InvalidOptionValue."""


# -- value readers: (wire kind code, bytes) -> value; None = "server default" ----------------
def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Bad from None


def _u64_or(text_parser: Callable[[str], int], zero_is_default: bool = True) -> Callable[[int, bytes], Any]:
    """A UINT64 value as it is, or a STRING through ``text_parser`` (reference ``parse_u64_or``)."""

    def read(kind: int, data: bytes) -> int | None:
        if kind == HeaderKind.UINT64 and len(data) == 8:
            value = int.from_bytes(data, "little")
        elif kind == HeaderKind.STRING:
            value = text_parser(_text(data))
        else:
            raise _Bad
        return None if value == 0 and zero_is_default else value

    return read


def _read_u32(kind: int, data: bytes) -> int:
    if kind == HeaderKind.UINT32 and len(data) == 4:
        return int.from_bytes(data, "little")
    if kind == HeaderKind.STRING:
        return _rust_uint(_text(data), U32_MAX)
    raise _Bad


def _read_bool(kind: int, data: bytes) -> bool:
    if kind == HeaderKind.BOOL and data in (b"\x00", b"\x01"):  # exactly one byte 0 or 1
        return data == b"\x01"
    if kind == HeaderKind.STRING and data in (b"true", b"false"):  # Rust's bool::from_str
        return data == b"true"
    raise _Bad


def _read_compression(kind: int, data: bytes) -> str:
    names = {1: "none", 2: "gzip"}  # CompressionAlgorithm codes (iggy.md 3.6)
    if kind == HeaderKind.UINT8 and len(data) == 1 and data[0] in names:
        return names[data[0]]
    if kind == HeaderKind.STRING and _text(data).lower() in names.values():
        return _text(data).lower()
    raise _Bad


def _rust_uint(text: str, hi: int) -> int:
    """Rust's ``u32``/``u64`` ``from_str``: ASCII digits, an optional ``+``."""
    digits = text.removeprefix("+")
    if not (digits.isascii() and digits.isdigit()) or int(digits) > hi:
        raise _Bad
    return int(digits)


_BYTE_UNITS = {"": 1, "b": 1}
for _i, _p in enumerate("kmgtpe", start=1):
    _BYTE_UNITS |= {_p: 1000**_i, _p + "b": 1000**_i, _p + "i": 1024**_i, _p + "ib": 1024**_i}
_BYTE_TEXT = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)")


def parse_byte_size(text: str) -> int:
    """IggyByteSize's text (byte-unit): ``1048576``, ``128MiB``, ``1 GiB``, ``2GB``
    (units case-insensitive, ``i`` = powers of 1024); ``0``, ``unlimited``,
    ``Unlimited``, ``none``, ``None`` are 0."""
    if text in ("0", "unlimited", "Unlimited", "none", "None"):
        return 0
    m = _BYTE_TEXT.fullmatch(text.strip())
    if m is None or m.group(2).lower() not in _BYTE_UNITS:
        raise _Bad
    try:
        value = int(Decimal(m.group(1)) * _BYTE_UNITS[m.group(2).lower()])
    except InvalidOperation:
        raise _Bad from None
    if value > U64_MAX:
        raise _Bad
    return value


def _max_topic_size_text(text: str) -> int:
    """MaxTopicSize's text: ``unlimited``; ``0`` / ``server_default``; else a byte size."""
    if text == "unlimited":
        return U64_MAX
    if text in ("0", "server_default"):
        return 0
    return parse_byte_size(text)


_NS = 10**9
_DURATION_UNITS: dict[str, int] = {}
for _names, _ns in (
    (("nanos", "nsec", "ns"), 1), (("usec", "us", "µs"), 1000), (("millis", "msec", "ms"), 10**6),
    (("seconds", "second", "secs", "sec", "s"), _NS), (("minutes", "minute", "mins", "min", "m"), 60 * _NS),
    (("hours", "hour", "hrs", "hr", "h"), 3600 * _NS), (("days", "day", "d"), 86_400 * _NS),
    (("weeks", "week", "wks", "wk", "w"), 604_800 * _NS), (("months", "month", "M"), 2_630_016 * _NS),
    (("years", "year", "yrs", "yr", "y"), 31_557_600 * _NS),
):
    _DURATION_UNITS |= dict.fromkeys(_names, _ns)
_DURATION_ITEM = re.compile(r"\s*([0-9]+)\s*([A-Za-zµ]+)")


def _expiry_text(text: str) -> int:
    """IggyExpiry's text, in µs: never (``none``, ``unlimited``, ...), server default
    (``default``, ``server_default``, ...), or a humantime duration (``7 days``,
    ``1h 30m``) of at most u32::MAX seconds."""
    if text in ("unlimited", "none", "None", "Unlimited", "never_expire"):
        return U64_MAX
    if text in ("default", "server_default", "Default", "Server_default"):
        return 0
    pos, total = 0, None
    while (m := _DURATION_ITEM.match(text, pos)) is not None:
        if m.group(2) not in _DURATION_UNITS:
            raise _Bad
        total = (total or 0) + int(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if total is None or text[pos:].strip() or total // _NS > U32_MAX:
        raise _Bad
    return total // 1000


# -- the catalog ---------------------------------------------------------------------------
@dataclass(frozen=True)
class TopicOption:
    """One catalog row (see the module docstring)."""

    key: str
    kind: HeaderKind  # canonical: the default's and the reported values' kind
    updatable: bool  # UpdateTopic may carry it (else 4041 there: create-time only)
    read: Callable[[int, bytes], Any]  # (wire kind, bytes) -> value, None = server default; _Bad
    valid: Callable[[Any], bool]  # bounds of a value read (4042 when False)
    default: Callable[[Any], Any]  # broker -> what a topic gets without the key
    effective: Callable[[Any, Any, dict], Any] | None  # (broker, topic, recorded) -> value; None: recorded/default
    core: str  # where it lands in the core (docs/iggy.md "Topic options")
    description: str


def _log(broker, topic):
    return broker.topic_log_config(topic)


def _wire_u64(core_value: int) -> int:
    """The core's 0 ("never" / "no cap") as the wire's u64::MAX."""
    return core_value or U64_MAX


def _segment_ok(n: int) -> bool:
    return MIN_SEGMENT_SIZE <= n <= MAX_SEGMENT_SIZE and n % SEGMENT_SIZE_STEP == 0


TOPIC_OPTIONS: tuple[TopicOption, ...] = (
    TopicOption(
        "compression_algorithm", HeaderKind.STRING, True, _read_compression, lambda v: True,
        lambda b: "none", lambda b, t, r: t.compression_algorithm, "TopicInfo.compression_algorithm",
        "Compression of stored batches: none or gzip (case-insensitive; also u8 1 or 2)"),
    TopicOption(
        "message_expiry", HeaderKind.UINT64, True, _u64_or(_expiry_text), lambda v: True,
        lambda b: U64_MAX, lambda b, t, r: _wire_u64(t.message_expiry), "TopicInfo.message_expiry (µs, 0 = never)",
        "Microseconds a message is kept, or a humantime string (e.g. 7 days, at most u32::MAX s); "
        "u64::MAX or none keeps messages until the size cap; 0 is the server default"),
    TopicOption(
        "max_topic_size", HeaderKind.UINT64, True, _u64_or(_max_topic_size_text), lambda v: True,
        lambda b: U64_MAX, lambda b, t, r: _wire_u64(t.max_topic_size), "TopicInfo.max_topic_size (0 = no cap)",
        "Bytes the topic keeps before its oldest sealed segments are deleted, or a byte-size string "
        "(e.g. 1 GiB); u64::MAX or unlimited for no cap; must be at least the topic's segment size"),
    TopicOption(
        "segment_size", HeaderKind.UINT64, False, _u64_or(parse_byte_size), _segment_ok,
        lambda b: b.cfg.log.segment_bytes, lambda b, t, r: _log(b, t).segment_bytes,
        "TopicInfo.segment_bytes: the topic's partitions roll to a new segment past it",
        f"Segment size in bytes, or a byte-size string (e.g. 128 MiB); a {SEGMENT_SIZE_STEP}-byte multiple "
        f"within {MIN_SEGMENT_SIZE}..={MAX_SEGMENT_SIZE}; set at creation only; the default is the broker's "
        "log.segment_bytes"),
    TopicOption(
        "enforce_fsync", HeaderKind.BOOL, False, _read_bool, lambda v: True,
        lambda b: b.cfg.log.fsyncs, lambda b, t, r: _log(b, t).fsyncs,
        "TopicInfo.fsync: true = always (each batch fdatasynced before its ack), false = never",
        "Whether writes to this topic's partitions are fsynced before they are acknowledged (bool, or the "
        "strings true/false); set at creation only; the default follows the broker's log.fsync "
        "(true unless never)"),
    TopicOption(
        "messages_required_to_save", HeaderKind.UINT32, False, _read_u32,
        lambda v: 1 <= v <= MAX_MESSAGES_REQUIRED_TO_SAVE,
        lambda b: DEFAULT_MESSAGES_REQUIRED_TO_SAVE, None, "none: checked and reported, not applied",
        f"The reference server's journal flush threshold in messages, 1..={MAX_MESSAGES_REQUIRED_TO_SAVE}; "
        "Ferry writes on its own schedule (log.fsync), so it is recorded only"),
    TopicOption(
        "size_of_messages_required_to_save", HeaderKind.UINT64, False, _u64_or(parse_byte_size),
        lambda v: v <= MAX_SIZE_OF_MESSAGES_REQUIRED_TO_SAVE,
        lambda b: DEFAULT_SIZE_OF_MESSAGES_REQUIRED_TO_SAVE, None, "none: checked and reported, not applied",
        f"The reference server's journal flush threshold in bytes, or a byte-size string; at most "
        f"{MAX_SIZE_OF_MESSAGES_REQUIRED_TO_SAVE}; recorded only"),
    TopicOption(
        "preallocate_segments", HeaderKind.BOOL, False, _read_bool, lambda v: True,
        lambda b: False, None, "none: checked and reported, not applied",
        f"Reserve each segment's bytes up front (bool); segment_size * partitions_count must then stay within "
        f"{MAX_PREALLOCATED_TOPIC_BYTES}; recorded only (Ferry's segments grow as written)"),
)
BY_KEY = {opt.key: opt for opt in TOPIC_OPTIONS}
UPDATABLE = frozenset(opt.key for opt in TOPIC_OPTIONS if opt.updatable)
_SCOPE_OPTIONS = {1: TOPIC_OPTIONS, 2: (), 3: ()}  # streams and users have no keys yet


# -- wire encoding -----------------------------------------------------------------------------
def encode_value(kind: HeaderKind, value: Any) -> bytes:
    """A value in its canonical kind's bytes."""
    if kind == HeaderKind.STRING:
        return value.encode("utf-8")
    if kind == HeaderKind.BOOL:
        return b"\x01" if value else b"\x00"
    if kind == HeaderKind.UINT32:
        return value.to_bytes(4, "little")
    return value.to_bytes(8, "little")  # UINT64


def _block(entries: list[tuple[str, HeaderKind, Any]]) -> bytes:
    """An options block (the user-headers TLV, string keys), keys in byte order as the
    reference's ``BTreeMap`` writes them."""
    out: list[bytes] = []
    for key, kind, value in sorted(entries, key=lambda e: e[0].encode()):
        k, v = key.encode("utf-8"), encode_value(kind, value)
        out += (_KIND_LEN.pack(HeaderKind.STRING, len(k)), k, _KIND_LEN.pack(kind, len(v)), v)
    return b"".join(out)


def _entries(block: bytes) -> list[tuple[str, int, bytes]]:
    """``(key, value kind, value bytes)`` per pair, in wire order; 3 InvalidCommand for a
    block the reference's ``validate_options`` refuses."""

    def bad(why: str) -> IggyStatus:
        return IggyStatus(IggyError.INVALID_COMMAND, f"options block: {why}")

    if len(block) > MAX_OPTIONS_BYTES:
        raise bad(f"{len(block)} bytes, more than {MAX_OPTIONS_BYTES}")
    fields, pos, end = [], 0, len(block)
    while pos < end:
        if end - pos < 5:
            raise bad("truncated")
        kind, length = _KIND_LEN.unpack_from(block, pos)
        if kind == 0 or not 1 <= length <= MAX_FIELD or pos + 5 + length > end:
            raise bad(f"field at {pos}")
        fields.append((kind, bytes(block[pos + 5:pos + 5 + length])))
        pos += 5 + length
    if len(fields) % 2:
        raise bad("odd number of fields")
    if len(fields) // 2 > MAX_OPTIONS:
        raise bad(f"more than {MAX_OPTIONS} options")
    out, seen = [], set()
    for (kkind, kdata), (vkind, vdata) in zip(fields[::2], fields[1::2]):
        if kkind != HeaderKind.STRING:
            raise bad("a key is not a string")
        try:
            key = kdata.decode("utf-8")
        except UnicodeDecodeError:
            raise bad("a key is not UTF-8") from None
        if key in seen:
            raise bad(f"duplicate key {key!r}")
        seen.add(key)
        out.append((key, vkind, vdata))
    return out


def _unsupported(key: str) -> IggyStatus:
    return IggyStatus(IggyError.UNSUPPORTED_OPTION_KEY, f"option {key[:64]!r}")


def _read(key: str, kind: int, data: bytes) -> Any:
    opt = BY_KEY[key]
    try:
        value = opt.read(kind, data)
        if value is not None and not opt.valid(value):
            raise _Bad
    except _Bad:
        raise IggyStatus(IggyError.INVALID_OPTION_VALUE, f"option {key!r}") from None
    return value


# -- CreateTopic / UpdateTopic ---------------------------------------------------------------
def parse_create(block: bytes) -> dict[str, Any]:
    """The catalog keys a CreateTopic block sets, as values (a key whose value is the
    server-default sentinel, 0, is left out: it resolves like an absent one)."""
    given: dict[str, Any] = {}
    for key, kind, data in _entries(block):
        if key in DURABILITY_KEYS:
            if kind != HeaderKind.STRING or data.decode("utf-8", "replace") not in DURABILITY_VALUES:
                raise IggyStatus(IggyError.INVALID_OPTION_VALUE, f"option {key!r}")
            continue
        if key not in BY_KEY:
            raise _unsupported(key)
        value = _read(key, kind, data)
        if value is not None:
            given[key] = value
    return given


def parse_update(block: bytes) -> dict[str, Any]:
    """The keys an UpdateTopic block sets; a sentinel (0) resets a key to its default
    (the value ``None``). Keys outside the updatable three are 4041, before any value
    is read."""
    entries = _entries(block)
    for key, _kind, _data in entries:
        if key not in UPDATABLE:
            raise _unsupported(key)
    return {key: _read(key, kind, data) for key, kind, data in entries}


def check_size_floor(max_topic_size: int | None, segment_bytes: int) -> None:
    """1019 InvalidTopicSize for a cap below one segment (``max_topic_size`` as on the
    wire: None or 0 = server default, exempt; u64::MAX = no cap, passes)."""
    if max_topic_size and max_topic_size < segment_bytes:
        raise IggyStatus(IggyError.INVALID_TOPIC_SIZE,
                         f"max_topic_size {max_topic_size} is below the segment size {segment_bytes}")


def check_create(given: dict[str, Any], partitions: int, broker) -> None:
    """The cross-key checks of CreateTopic, in the reference's order."""
    segment = given.get("segment_size") or broker.cfg.log.segment_bytes
    if given.get("preallocate_segments") and segment * partitions > MAX_PREALLOCATED_TOPIC_BYTES:
        raise IggyStatus(IggyError.INVALID_OPTION_VALUE, "option 'preallocate_segments'")
    if partitions > MAX_PARTITIONS:
        raise ce.TooManyPartitions(f"at most {MAX_PARTITIONS} partitions, got {partitions}")
    check_size_floor(given.get("max_topic_size"), segment)


def _core_u64(wire: int | None) -> int:
    return 0 if wire in (None, 0, U64_MAX) else wire


def create_args(given: dict[str, Any], replication_factor: int = 1) -> dict[str, Any]:
    """``Broker.create_topic`` keyword arguments (``settings``, ``segment_bytes``, ``fsync``)
    for the keys given (the rest: the core's defaults); the replication factor is no
    catalog key, the caller passes the one its request carries."""
    fsync = given.get("enforce_fsync")
    settings = TopicSettings(message_expiry=_core_u64(given.get("message_expiry")),
                             max_topic_size=_core_u64(given.get("max_topic_size")),
                             compression=given.get("compression_algorithm", "none"),
                             replication_factor=replication_factor)
    return {"settings": settings,
            "segment_bytes": given.get("segment_size", 0),
            "fsync": "" if fsync is None else _FSYNC_OF[fsync]}


def update_args(given: dict[str, Any]) -> dict[str, Any]:
    """The ``TopicSettings`` fields an update's keys change (others keep their values):
    ``dataclasses.replace(topic.settings, **update_args(given))``."""
    changes: dict[str, Any] = {}
    if "compression_algorithm" in given:
        changes["compression"] = given["compression_algorithm"] or "none"
    for key in ("message_expiry", "max_topic_size"):
        if key in given:
            changes[key] = _core_u64(given[key])
    return changes


def recorded(broker, topic) -> dict[str, Any]:
    """The explicit keys recorded for ``topic`` (empty when none, or unreadable)."""
    try:
        text = broker.topic_state.topic_attrs(topic.stream_id, topic.id).get(EXPLICIT_ATTR)
        found = json.loads(text) if text else {}
    except (ce.NotFound, ValueError):
        return {}
    return {k: v for k, v in found.items() if k in BY_KEY} if isinstance(found, dict) else {}


def record_explicit(broker, topic, given: dict[str, Any], *, update: bool = False) -> None:
    """Remember which keys were sent (an update adds its keys and drops those it reset)."""
    keys = dict(recorded(broker, topic)) if update else {}
    for key, value in given.items():
        if value is None:
            keys.pop(key, None)
        else:
            keys[key] = value
    if keys or update:
        broker.topic_state.set_topic_attrs(topic.stream_id, topic.id, {EXPLICIT_ATTR: json.dumps(keys, sort_keys=True)})


# -- GetTopic and DescribeOptions ------------------------------------------------------------
def option_blocks(broker, topic) -> tuple[bytes, bytes]:
    """The topic record's ``(options, derived_options)`` blocks: the keys its creator
    (or a later update) sent, and every other catalog key; each with the topic's
    effective value (the core's for the applied keys)."""
    mine = recorded(broker, topic)
    explicit, derived = [], []
    for opt in TOPIC_OPTIONS:
        if opt.effective is not None:
            value = opt.effective(broker, topic, mine)
        else:
            value = mine.get(opt.key, opt.default(broker))
        (explicit if opt.key in mine else derived).append((opt.key, opt.kind, value))
    return _block(explicit), _block(derived)


@dataclass(frozen=True)
class OptionSpec:
    key: str
    kind: HeaderKind
    default_value: bytes
    description: str

    def to_json(self) -> dict[str, Any]:
        """The reference's HTTP form (serde of ``OptionSpec``)."""
        return {"key": self.key, "kind": self.kind.json_name, "default_value": list(self.default_value),
                "description": self.description}


def describe(broker, scope: int) -> list[OptionSpec]:
    """The catalog of a scope code (1 topic, 2 stream, 3 user); 3 InvalidCommand otherwise."""
    options = _SCOPE_OPTIONS.get(scope)
    if options is None:
        raise IggyStatus(IggyError.INVALID_COMMAND, f"option scope {scope}")
    return [OptionSpec(o.key, o.kind, encode_value(o.kind, o.default(broker)), o.description) for o in options]


__all__ = [
    "BY_KEY", "EXPLICIT_ATTR", "SCOPES", "TOPIC_OPTIONS", "OptionSpec", "TopicOption", "check_create",
    "check_size_floor", "create_args", "describe", "option_blocks", "parse_create", "parse_update",
    "record_explicit", "update_args",
]
