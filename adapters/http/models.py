"""Every conversion between core objects and Iggy's HTTP JSON, in one place.

Theory of operation
-------------------
The JSON shapes are the current Iggy server's HTTP API, the one apache-iggy
0.9.0's HTTP transport speaks (apache/iggy ``core/server/src/http``, JSON by the
serde forms of ``core/common``; the routes and error body of
../shared/protocols/iggy.md section 10, whose entity forms it kept). The
response records Iggy's binary replies also carry (stream,
topic, partition, group and member, offset, user, PAT, identity) are built by
``adapters/iggy/render.py`` from the declarations in ``adapters/iggy/replies.py``
and turned into JSON by :mod:`.forms`; request bodies, messages and headers
are read and written by hand here (docs/http.md, "Code map").

* **Ids**: streams, topics, partitions, groups and users are numbered from 0,
  as the current server numbers them and as the core does (docs/internals.md);
  ``wire = canonical + ID_BASE`` (0) for every entity id, in paths, bodies,
  responses and permission maps, so the numbering stays in one place. Consumer
  ids are the client's own numbers and pass unchanged.
* **Messages** are polled as the current ``PolledMessages`` (``header`` with
  the stored record's fields, base64 ``payload``, ``user_headers`` as a list of
  typed key/value entries) and sent as ``SendMessages`` with ``user_headers``
  (the seed era's ``headers`` map is still read); a send answers its
  confirmations.
* **Path identifiers** follow iggy.md 3.1: all digits -> numeric id,
  anything else -> a name; empty or over 255 bytes -> 400, error 6.
* **Sizes** are strings ``"<n> B"`` (10.1: the SDK parses byte-unit strings).
* **Never-expire / unlimited** are u64::MAX on the wire and 0 in the core.
* **Topic settings** on update are optional (a patch: what is left out keeps
  its value); ``options`` carries catalog keys as text, read by the same
  catalog as the binary transports (adapters/iggy/options.py).
* **Reading bodies**: :class:`Fields` checks each JSON value's type and names
  the offending field (``messages[2].user_headers[0].key.kind``) in a 400, so bad input
  never surfaces as a 500.
"""

from __future__ import annotations

import binascii
import json
import struct
from typing import Any

import xxhash

from core.errors import (
    ConsumerGroupNotFound, FerryError, NotFound, PartitionNotFound, StreamNotFound, TopicNotFound,
    UserNotFound,
)
from core.header_value import HeaderKind, HeaderValue
from core.log import AppendInput
from core.message import MAX_HEADERS_SIZE, Headers, Message
from core.record import RECORD_HEADER, RECORD_HEADER_SIZE
from core.metadata import UserInfo
from core.model import ConsumerGroupInfo, StreamInfo, TopicInfo
from core.permissions import Permissions

from adapters.iggy import options, render
from adapters.iggy import replies as R
from adapters.iggy.errors import IggyError, IggyStatus

from . import forms
from .errors import HttpError, bad_field, from_core, status_for
from .forms import size_text
from .limits import MAX_SEND_COUNT

ID_BASE = 0  # the current server's HTTP numbering starts at 0, as every Ferry transport
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
U128_LIMIT = 2**128
MAX_IDENT_BYTES = 255  # iggy.md 3.1: a string identifier is 1..255 bytes
# iggy.md 3.5: summed header *value* bytes of one batch (4017 TooBigHeadersPayload).
MAX_BATCH_HEADER_VALUES = 100_000
_U32 = struct.Struct("<I")


# -- ids -------------------------------------------------------------------------
def wire_id(canonical: int) -> int:
    return canonical + ID_BASE


# Which "not found" a numeric path id that can name nothing (below ID_BASE) raises.
_NOT_FOUND_FOR = {"stream_id": StreamNotFound, "topic_id": TopicNotFound, "group_id": ConsumerGroupNotFound,
                  "user_id": UserNotFound, "partition_id": PartitionNotFound}


def parse_identifier(text: str, field: str) -> int | str:
    """A path segment as a canonical id (int) or a name (str), by iggy.md 3.1's
    text rule: what parses as a u32 is an id, anything else a name. Empty or
    over 255 bytes -> 400 error 6; an id below ID_BASE (none while it is 0) ->
    that entity's "not found"."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if not 1 <= size <= MAX_IDENT_BYTES:
        raise HttpError.iggy(6, f"{field} must be 1..{MAX_IDENT_BYTES} bytes", field)
    if text.isascii() and text.isdigit() and int(text) <= U32_MAX:
        value = int(text)
        if value < ID_BASE:
            raise _NOT_FOUND_FOR.get(field, NotFound)(f"{field} {value} not found", field="id")
        return value - ID_BASE
    return text


def parse_wire_id(value: int, field: str) -> int:
    """A numeric entity id from a body or query (wire numbering) as canonical."""
    if not ID_BASE <= value <= U32_MAX:
        raise bad_field(field, f"must be within {ID_BASE}..{U32_MAX}")
    return value - ID_BASE


def consumer_id(text: str, field: str = "id") -> int:
    """Iggy's consumer key (iggy.md 3.2): the number itself, or XXH32 of a name."""
    if not text:
        raise bad_field(field, "must not be empty")
    if text.isascii() and text.isdigit():
        value = int(text) if len(text) <= 10 else U32_MAX
        if value > U32_MAX - 1:
            raise bad_field(field, f"must be at most {U32_MAX - 1}")
        return value
    return xxhash.xxh32_intdigest(text.encode("utf-8", "surrogatepass"))


# -- reading JSON bodies --------------------------------------------------------
def parse_json(body: bytes) -> Any:
    """The decoded JSON body; 400 (field ``body``) when it is not JSON."""
    if not body.strip():
        raise bad_field("body", "a JSON body is required")
    try:
        return json.loads(body)
    # ValueError also covers ints past Python's 4300-digit conversion limit.
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise bad_field("body", f"malformed JSON ({type(exc).__name__})") from None


def _type_name(value: Any) -> str:
    return "null" if value is None else {bool: "boolean", int: "integer", float: "number", str: "string",
                                         list: "array", dict: "object"}.get(type(value), type(value).__name__)


class Fields:
    """Typed access to one JSON object; errors name ``prefix + key``."""

    _MISSING = object()

    def __init__(self, obj: Any, prefix: str = "") -> None:
        if not isinstance(obj, dict):
            raise bad_field(prefix.rstrip(".") or "body", f"must be an object, got {_type_name(obj)}")
        self.obj = obj
        self.prefix = prefix

    def name(self, key: str) -> str:
        return self.prefix + key

    def _get(self, key: str, required: bool) -> Any:
        value = self.obj.get(key, self._MISSING)
        if value is self._MISSING or value is None:
            if required:
                raise bad_field(self.name(key), "is required")
            return None
        return value

    def str(self, key: str, *, required: bool = True) -> str | None:
        value = self._get(key, required)
        if value is not None and not isinstance(value, str):
            raise bad_field(self.name(key), f"must be a string, got {_type_name(value)}")
        return value

    def int(self, key: str, lo: int = 0, hi: int = U64_MAX, *, required: bool = True) -> int | None:
        value = self._get(key, required)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad_field(self.name(key), f"must be an integer, got {_type_name(value)}")
        if not lo <= value <= hi:
            raise bad_field(self.name(key), f"must be within {lo}..{hi}")
        return value

    def bool(self, key: str, *, required: bool = True) -> bool | None:
        value = self._get(key, required)
        if value is not None and not isinstance(value, bool):
            raise bad_field(self.name(key), f"must be true or false, got {_type_name(value)}")
        return value

    def b64(self, key: str, *, required: bool = True) -> bytes | None:
        text = self.str(key, required=required)
        return None if text is None else decode_b64(text, self.name(key))

    def sub(self, key: str, *, required: bool = True) -> "Fields | None":
        value = self._get(key, required)
        return None if value is None else Fields(value, self.name(key) + ".")


def decode_b64(text: str, field: str) -> bytes:
    """Standard base64 with padding (iggy.md 10.1); 400 naming ``field`` otherwise.

    ``strict_mode`` refuses characters outside the alphabet, missing padding
    and data after the padding, as ``b64decode(validate=True)`` does, in one C call."""
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        raise bad_field(field, "is not valid base64") from None


def b64(data: bytes | memoryview) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def expiry_in(value: int) -> int:
    """Wire message_expiry / max_topic_size -> core (0 and u64::MAX both mean none)."""
    return 0 if value in (0, U64_MAX) else value


def expiry_out(value: int) -> int:
    return U64_MAX if value == 0 else value


# -- streams, topics, partitions ---------------------------------------------------
# Response records: filled by adapters/iggy/render.py (canonical ids, e=0; the HTTP
# JSON has always shown stored segment counts and replication factors, floors=False)
# and turned into JSON by the record's form in .forms.
def topic_json(broker, topic: TopicInfo, details: bool) -> dict:
    value = render.topic_value(broker, topic, 0, floors=False)
    opts = topic_options_json(broker, topic)
    if not details:
        return forms.TOPIC.json(value, options=opts)
    parts = [forms.PARTITION.json(p) for p in render.partition_values(broker, topic, 0, floors=False)]
    return forms.TOPIC.json(value, partitions=parts, options=opts)


def topic_options_json(broker, topic: TopicInfo) -> dict:
    """A topic's ``options`` as the current server's JSON (serde ``resource_options_json``):
    every catalog key -> ``{"value": its text form, "explicit": whether the creator (or an
    update) sent it}``, keys in byte order; the same two blocks as the binary GetTopic
    (adapters/iggy/options.py ``option_blocks``)."""
    out = {}
    for block, explicit in zip(options.option_blocks(broker, topic), (True, False)):
        for key, value in Headers.decode(block).items():
            out[key.as_str()] = {"value": value.to_text(), "explicit": explicit}
    return dict(sorted(out.items(), key=lambda kv: kv[0].encode()))


def stream_json(broker, stream: StreamInfo, details: bool) -> dict:
    topics = broker.list_topics(stream.id)
    value = render.stream_value(broker, stream, 0, topics)
    if not details:
        return forms.STREAM.json(value)
    return forms.STREAM.json(value, topics=[topic_json(broker, t, False) for t in topics])


def create_topic_args(f: Fields) -> tuple[dict, dict]:
    """POST /streams/{s}/topics body -> (name, partitions, topic_id, replication_factor;
    the catalog keys given, which ``options.create_args`` turns into the topic's
    ``TopicSettings``). The three named settings are required, as the current
    server's ``CreateTopic`` has them; ``options`` carries catalog keys as text
    (:func:`topic_options`), and a named setting other than its default goes over
    the same key there, as the reference's typed fields do. The caller checks the
    keys together (``options.check_create``) and records them after the create."""
    topic_id = f.int("topic_id", 0, U32_MAX, required=False)
    rf = f.int("replication_factor", 0, 255, required=False)
    name, partitions = f.str("name"), f.int("partitions_count", 0, U32_MAX)
    given = _catalog(options.parse_create, topic_options(f))
    algo = _compression(f.str("compression_algorithm"), f.name("compression_algorithm"))
    if algo != "none":
        given["compression_algorithm"] = algo
    for key in ("message_expiry", "max_topic_size"):
        value = f.int(key)
        if value:  # 0 = server default: resolves like a key left out
            given[key] = value
    return {
        "name": name,
        "partitions": partitions,
        # 0 / null = "server assigns" (the current server assigns every id itself)
        "topic_id": None if not topic_id else parse_wire_id(topic_id, f.name("topic_id")),
        "replication_factor": rf or 1,  # 0 / null = "not given", stored as 1 (iggy.md 3.6)
    }, given


def update_topic_args(f: Fields) -> tuple[str, dict, dict]:
    """PUT /streams/{s}/topics/{t} body -> (the name, the ``TopicSettings`` fields it
    changes, the catalog keys given): a patch, as the current server's ``UpdateTopic``, whose
    ``compression_algorithm``, ``message_expiry`` and ``max_topic_size`` are
    ``Option``s: one left out (or null) keeps the topic's value, ``0`` resets it to
    the default; ``options`` may carry the same three keys as text (others are 4041)."""
    name = f.str("name")
    given = _catalog(options.parse_update, topic_options(f))
    algo = f.str("compression_algorithm", required=False)
    if algo is not None:
        given["compression_algorithm"] = _compression(algo, f.name("compression_algorithm"))
    for key in ("message_expiry", "max_topic_size"):
        value = f.int(key, required=False)
        if value is not None:
            given[key] = value or None  # 0: back to the server default
    changes = options.update_args(given)
    rf = f.int("replication_factor", 0, 255, required=False)
    if rf:
        changes["replication_factor"] = rf
    return name, changes, given


def _compression(text: str, field: str) -> str:
    algo = text.lower()  # case-insensitive on input (iggy.md 3.6)
    if algo not in ("none", "gzip"):
        raise bad_field(field, "must be none or gzip")
    return algo


def topic_options(f: Fields) -> bytes:
    """A topic body's ``options`` (the current server's ``BTreeMap<String, String>``) as
    the options block the binary transports carry (string keys, string values), so one
    catalog reads both (adapters/iggy/options.py: values as the reference reads config
    text, e.g. ``"7 days"``, ``"1 GiB"``, ``"unlimited"``)."""
    sub = f.sub("options", required=False)
    block = Headers()
    for key, value in (sub.obj.items() if sub is not None else ()):
        if not isinstance(value, str):
            raise bad_field(sub.name(key), f"must be a string, got {_type_name(value)}")
        try:
            block.add(key, HeaderValue.string(value))
        except FerryError:
            raise bad_field(sub.name(key), "keys and values must be 1..255 bytes") from None
    return block.encode()


def _catalog(fn, *args):
    """``fn(*args)`` of adapters/iggy/options.py, its Iggy error as this API's (400:
    4041 unsupported_option_key, 4042 invalid_option_value, 1019, 3)."""
    try:
        return fn(*args)
    except IggyStatus as exc:
        field = "options" if exc.code in (IggyError.UNSUPPORTED_OPTION_KEY, IggyError.INVALID_OPTION_VALUE) else None
        raise HttpError(status_for(int(exc.code)), int(exc.code), exc.detail or exc.code.name.lower(), field,
                        code=exc.code.name.lower()) from None


def check_topic(fn, *args) -> None:
    """A cross-key check of adapters/iggy/options.py (``check_create``,
    ``check_size_floor``), its Iggy error as this API's."""
    _catalog(fn, *args)


# -- consumer groups and offsets ----------------------------------------------------------
def group_json(group: ConsumerGroupInfo, partitions_count: int, members: dict[int, tuple[int, ...]],
               details: bool) -> dict:
    value = render.group_value(group, partitions_count, len(members), 0)
    if not details:
        return forms.GROUP.json(value)
    return forms.GROUP.json(value, members=[forms.MEMBER.json(render.member_value(mid, parts, 0))
                                            for mid, parts in members.items()])


def offset_json(partition_id: int, current: int, stored: int) -> dict:
    return forms.OFFSET.json(render.offset_value(partition_id, current, stored, 0))


# -- users, permissions, tokens ---------------------------------------------------------
def _shift_ids(mapping: dict | None, delta: int, field: str) -> dict | None:
    if mapping is None:
        return None
    out = {}
    for key, value in mapping.items():
        if not (isinstance(key, str) and key.isascii() and key.isdigit() and len(key) <= 10) or int(key) + delta < 0:
            raise bad_field(field, f"key {key!r} is not a valid id")
        out[str(int(key) + delta)] = value
    return out


def permissions_json(perms: Permissions | None) -> dict | None:
    if perms is None:
        return None
    data = perms.to_dict()
    streams = _shift_ids(data["streams"], ID_BASE, "permissions.streams")
    for sp in (streams or {}).values():
        sp["topics"] = _shift_ids(sp["topics"], ID_BASE, "permissions.streams.topics")
    data["streams"] = streams
    return data


def permissions_from_json(value: Any, field: str = "permissions") -> Permissions | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad_field(field, f"must be an object or null, got {_type_name(value)}")
    data = dict(value)
    streams = data.get("streams")
    if streams is not None:
        if not isinstance(streams, dict):
            raise bad_field(f"{field}.streams", "must be an object or null")
        streams = _shift_ids(streams, -ID_BASE, f"{field}.streams")
        for sid, sp in streams.items():
            if isinstance(sp, dict) and isinstance(sp.get("topics"), dict):
                streams[sid] = dict(sp, topics=_shift_ids(sp["topics"], -ID_BASE, f"{field}.streams.{sid}.topics"))
        data["streams"] = streams
    try:
        return Permissions.from_dict(data)
    except FerryError as exc:
        raise bad_field(field, exc.message) from None


def user_json(user: UserInfo, details: bool) -> dict:
    value = render.user_value(user, 0)
    if not details:
        return forms.USER.json(value)
    return forms.USER.json(value, permissions=permissions_json(user.permissions))


def identity_json(user_id: int, token: str, expiry: int) -> dict:
    return forms.IDENTITY.json(R.IDENTITY.make(user_id=user_id), access_token={"token": token, "expiry": expiry})


def pat_json(token) -> dict:
    return forms.PAT.json(render.pat_value(token))


def client_json(session, details: bool) -> dict:
    """ClientInfo(Details) of an Iggy session (iggy.md 10.5): the details add the
    consumer groups it is a member of, as ``{stream_id, topic_id, group_id}`` wire ids
    (the same list as the binary GetClient, render.client_group_values)."""
    value = render.client_value(session, 1)  # 0 stays "not logged in" (forms.CLIENT shows the wire id)
    if not details:
        return forms.CLIENT.json(value)
    groups = [{"stream_id": g.stream_id, "topic_id": g.topic_id, "group_id": g.group_id}
              for g in render.client_group_values(session, ID_BASE)]
    return forms.CLIENT.json(value, consumer_groups=groups)


# -- messages -------------------------------------------------------------------------------
def _field_json(value: HeaderValue) -> dict:
    return {"kind": value.kind.json_name, "value": b64(value.data)}


def headers_json(headers: Headers) -> list:
    """``user_headers`` of the current server's IggyMessage JSON: one
    ``{"key": {kind, value}, "value": {kind, value}}`` entry per stored pair, in
    stored order, values base64 (apache/iggy ``HeaderEntry``). A repeated key
    (possible from NATS) appears each time; the client's map keeps the last.
    No headers is ``[]``, as the reference writes it: apache-iggy 0.7.0 refuses
    anything but an array (0.9.0 would take ``null`` too, and reads ``[]`` as an
    empty map where its binary transports give None; docs/http.md)."""
    return [{"key": _field_json(key), "value": _field_json(value)} for key, value in headers.items()]


def message_json(msg: Message) -> dict:
    """The current server's IggyMessage JSON: the stored record's 64-byte header as
    ``header`` (checksum = the stored XXH3-64, core/record.py), base64 ``payload``
    and ``user_headers`` (:func:`headers_json`, ``[]`` when none)."""
    return {
        "header": {"checksum": msg.checksum, "id": msg.id, "offset": msg.offset, "timestamp": msg.timestamp,
                   # a record stored without an origin shows its append time, as the binary replies do
                   "origin_timestamp": msg.origin_timestamp or msg.timestamp,
                   "user_headers_length": msg.headers.encoded_size if msg.headers else 0,
                   "payload_length": len(msg.payload), "reserved": 0},
        "payload": b64(msg.payload),
        "user_headers": headers_json(msg.headers),
    }


# message_json's keys, in its order, for %-formatting: dumps() of that dict gives
# exactly these bytes (compact separators; the payload is base64, pure ASCII), so
# a poll skips a dict and an encoder pass per message (tests/http check the bytes
# are the same).
_RECORD_JSON = (b'{"header":{"checksum":%d,"id":%d,"offset":%d,"timestamp":%d,"origin_timestamp":%d,'
                b'"user_headers_length":%d,"payload_length":%d,"reserved":0},"payload":"%s","user_headers":%s}')
_POLLED_JSON = b'{"partition_id":%d,"current_offset":%d,"count":%d,"messages":[%s]}'


def record_json_entry(raw) -> tuple[int, int, bytes]:
    """``(offset, payload length, dumps(message_json(...)))`` of one stored record, built
    straight from its bytes (a ReadBatch's ``raw_records``: its batch CRC was
    checked on read)."""
    checksum, lo, hi, offset, timestamp, origin, hlen, plen, _r = RECORD_HEADER.unpack_from(raw, 0)
    payload = raw[RECORD_HEADER_SIZE : RECORD_HEADER_SIZE + plen]
    if hlen:
        block = bytes(raw[RECORD_HEADER_SIZE + plen : RECORD_HEADER_SIZE + plen + hlen])
        headers = dumps(headers_json(Headers.decode(block)))
    else:
        headers = b"[]"
    return offset, plen, _RECORD_JSON % (checksum, lo | (hi << 64), offset, timestamp, origin or timestamp, hlen,
                                         plen, binascii.b2a_base64(payload, newline=False), headers)


def polled_json_bytes(partition_id: int, current_offset: int, records: list[bytes]) -> bytes:
    """PolledMessages (``partition_id``, ``current_offset``, ``count``, ``messages``)
    as JSON bytes, from the JSON of :func:`record_json_entry`."""
    return _POLLED_JSON % (wire_id(partition_id), max(current_offset, 0), len(records), b",".join(records))


def confirmations_json(stream_id: int, topic_id: int, result) -> dict:
    """The current server's ``SendMessagesConfirmations`` for one append (core
    AppendResult): where the batch went, in wire ids; empty when nothing was stored."""
    if result is None or not result.count:
        return {"confirmations": []}
    return {"confirmations": [{"stream_id": wire_id(stream_id), "topic_id": wire_id(topic_id),
                               "partition_id": wire_id(result.partition_id), "base_offset": result.base_offset}]}


def _header_field(f: Fields, key: str) -> HeaderValue:
    """One ``{"kind", "value"}`` of a header entry as a HeaderValue."""
    entry = f.sub(key)
    kind_name = entry.str("kind")
    try:
        kind = HeaderKind.from_json_name(kind_name)
    except FerryError:
        raise HttpError.iggy(209, f"unknown header kind {kind_name!r}", entry.name("kind")) from None
    data = entry.b64("value")
    try:
        return HeaderValue(kind, data)
    except FerryError as exc:
        raise _core_field(exc, entry.name("value")) from None


def parse_user_headers(value: Any, field: str) -> tuple[Headers, int]:
    """The current ``user_headers`` of a sent message -> (Headers, summed value bytes):
    a list of ``{"key": {kind, value}, "value": {kind, value}}`` entries, or one
    base64 string of the TLV block itself (apache/iggy SendMessages reads both)."""
    if isinstance(value, str):
        block = decode_b64(value, field)
        try:
            headers = Headers.decode(block)
        except FerryError as exc:
            raise _core_field(exc, field) from None
        return headers, sum(len(v.data) for _k, v in headers.items())
    if not isinstance(value, list):
        raise bad_field(field, f"must be an array or a base64 string, got {_type_name(value)}")
    headers = Headers()
    value_bytes = 0
    for i, raw in enumerate(value):
        entry = Fields(raw, f"{field}[{i}].")
        key, val = _header_field(entry, "key"), _header_field(entry, "value")
        try:
            headers.add(key, val)
        except FerryError as exc:
            raise _core_field(exc, f"{field}[{i}]") from None
        value_bytes += len(val.data)
    return headers, value_bytes


def parse_headers(f: Fields) -> tuple[Headers, int]:
    """The seed era's header map (``{"name": {kind, value}}``, still read on send)
    -> (Headers, summed value bytes)."""
    headers = Headers()
    value_bytes = 0
    for key in f.obj:
        value = _header_field(f, key)
        try:
            headers.add(key, value)
        except FerryError as exc:
            raise _core_field(exc, f.prefix + key) from None
        value_bytes += len(value.data)
    return headers, value_bytes


def _core_field(exc: FerryError, field: str) -> HttpError:
    err = from_core(exc)
    err.field = field
    return err


def parse_partitioning(f: Fields | None) -> tuple[int | None, bytes | None]:
    """-> (canonical partition or None, key or None); balanced when absent."""
    if f is None:
        return None, None
    kind = f.str("kind")
    if kind == "balanced":
        return None, None
    value = f.b64("value")
    if kind == "partition_id":
        if len(value) != 4:  # iggy.md 3.3: exactly a u32 LE, else 82
            raise HttpError.iggy(82, "partition_id value must be 4 bytes (u32 LE)", f.name("value"))
        return parse_wire_id(_U32.unpack(value)[0], f.name("value")), None
    if kind == "messages_key":
        if not 1 <= len(value) <= 255:
            raise HttpError.iggy(4028, "messages_key must be 1..255 bytes", f.name("value"))
        return None, value
    raise bad_field(f.name("kind"), "must be balanced, partition_id or messages_key")


def parse_send(body: Any, max_payload: int) -> tuple[int | None, bytes | None, list[AppendInput]]:
    """SendMessages JSON -> (partition, key, items). A message is ``{"id"?, "payload",
    "user_headers"?}`` (the current form, :func:`parse_user_headers`) or the seed
    era's ``{"id"?, "payload", "headers"?}`` map (iggy.md 10.6), not both."""
    f = Fields(body)
    partition, key = parse_partitioning(f.sub("partitioning", required=False))
    messages = f._get("messages", True)
    if not isinstance(messages, list):
        raise bad_field("messages", f"must be an array, got {_type_name(messages)}")
    if not messages:
        raise HttpError.iggy(4009, "no messages to send", "messages")
    if len(messages) > MAX_SEND_COUNT:
        raise HttpError.iggy(4009, f"at most {MAX_SEND_COUNT} messages per request", "messages")
    items, header_values = [], 0
    a2b, error = binascii.a2b_base64, binascii.Error
    for i, raw in enumerate(messages):
        # Fast path for the common shape, {"payload": <base64>} with an optional
        # int id and no headers (the Fields path below costs ~4 µs a message);
        # anything else, including every error, takes the checked path.
        if (type(raw) is dict and raw.get("headers") is None and not raw.get("user_headers")
                and type(raw.get("payload")) is str):
            msg_id = raw.get("id") or 0
            if type(msg_id) is int and 0 <= msg_id < U128_LIMIT:
                try:
                    payload = a2b(raw["payload"], strict_mode=True)
                except (error, ValueError):
                    payload = b""
                if payload and len(payload) <= max_payload:
                    items.append(AppendInput(payload=payload, id=msg_id))
                    continue
        m = Fields(raw, f"messages[{i}].")
        payload = m.b64("payload")
        if not payload:
            raise HttpError.iggy(4024, "empty message payload", m.name("payload"))
        if len(payload) > max_payload:
            raise HttpError.iggy(4022, f"payload over {max_payload} bytes", m.name("payload"))
        hf = m.sub("headers", required=False)
        uh = m._get("user_headers", False)
        encoded = b""
        if hf is not None and uh is not None:
            raise bad_field(m.name("user_headers"), "give user_headers or headers, not both")
        if hf is not None or uh is not None:
            headers, size = parse_headers(hf) if hf is not None else parse_user_headers(uh, m.name("user_headers"))
            header_values += size
            encoded = headers.encode()
        msg_id = m.int("id", 0, U128_LIMIT - 1, required=False) or 0
        items.append(AppendInput(payload=payload, headers=encoded, id=msg_id))
    if header_values > MAX_BATCH_HEADER_VALUES:
        raise HttpError.iggy(4017, f"header values total {header_values} bytes, max {MAX_BATCH_HEADER_VALUES}",
                             "messages")
    return partition, key, items


def dumps(value: Any) -> bytes:
    """Compact JSON; big ints (u128 ids) stay exact integers."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


__all__ = [
    "Fields",
    "ID_BASE",
    "MAX_HEADERS_SIZE",
    "U64_MAX",
    "client_json",
    "confirmations_json",
    "consumer_id",
    "create_topic_args",
    "decode_b64",
    "dumps",
    "group_json",
    "identity_json",
    "message_json",
    "offset_json",
    "parse_identifier",
    "parse_json",
    "parse_send",
    "parse_user_headers",
    "parse_wire_id",
    "pat_json",
    "size_text",
    "permissions_from_json",
    "permissions_json",
    "polled_json_bytes",
    "record_json_entry",
    "check_topic",
    "stream_json",
    "topic_options",
    "topic_json",
    "update_topic_args",
    "user_json",
    "wire_id",
]
