"""HTTP JSON forms of Iggy's response records, derived from adapters/iggy/replies.py.

Theory of operation
-------------------
Iggy's HTTP API returns the same entities as its binary replies (iggy.md
10.5 vs 5.x). The records are declared once, in ``adapters/iggy/replies.py``,
and filled once, by the builders of ``adapters/iggy/render.py``; the HTTP
side turns such a record into JSON through the table's own derivation
(``Struct.to_json``) and a small declarative :class:`JsonForm` per record
that says only where the HTTP JSON differs from the binary record:

* ``keys``: the HTTP keys in output order (the binary order differs, and a
  record field the HTTP form lacks, e.g. ``options``, is simply not listed);
* ``source``: an HTTP key read from another record field (``partitions_count``
  of a member is computed from ``partitions``);
* ``convert``: per key, a function of the record's JSON value (wire ids,
  ``"N B"`` sizes, compression and status names, PAT expiry ``null``);
* ``extras``: keys the caller supplies (nested lists, the access token); an
  extra not supplied is left out;
* ``schemas``: a key's JSON Schema where the wire type does not say it; the
  rest of each OpenAPI component schema is derived from the wire types.

This module and the ``adapters/iggy`` modules it and ``models.py`` import
(table, types, replies, render, errors, messages), and the shared engine under
them (``adapters/wire``), are pure: none imports trio. That dependency of
``adapters/http`` on ``adapters/iggy`` is declared in docs/internals.md,
"Adapter dependencies".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from adapters.iggy import replies as R
from adapters.iggy.table import Struct
from adapters.iggy.types import Text
from adapters.wire.table import SpecError
from adapters.wire.types import Int, ListOf

ID_BASE = 0  # the current Iggy server's HTTP numbering starts at 0, as every Ferry transport (models.ID_BASE)

US = {"type": "integer", "description": "microseconds since the Unix epoch"}
SIZE = {"type": "string", "description": "byte size, e.g. \"42 B\""}
ID = {"type": "integer", "minimum": ID_BASE, "maximum": 2**32 - 1}
NAME = {"type": "string", "minLength": 1, "maxLength": 255}


def wire(value: int) -> int:
    return value + ID_BASE


def wire_all(values: list) -> list:
    return [v + ID_BASE for v in values]


def size_text(n: int) -> str:
    return f"{n} B"


@dataclass(frozen=True)
class JsonForm:
    """How one record appears in Iggy's HTTP JSON (see the module docstring)."""

    record: Struct
    keys: tuple[str, ...]
    source: dict[str, str] = field(default_factory=dict)
    convert: dict[str, Callable[[Any], Any]] = field(default_factory=dict)
    extras: tuple[str, ...] = ()
    schemas: dict[str, dict] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = {f.name for f in self.record.fields}
        for key in self.keys:
            if key not in self.extras and self.source.get(key, key) not in names:
                raise SpecError(f"{self.record.name}: HTTP key {key!r} is neither a record field nor an extra")
        for key in (*self.source, *self.convert, *self.extras, *self.schemas):
            if key not in self.keys:
                raise SpecError(f"{self.record.name}: {key!r} is not one of the HTTP keys")

    def json(self, value, **extras) -> dict:
        """The HTTP JSON of one record ``value`` (a ``record.cls``), with ``extras``."""
        base = self.record.to_json(value)
        out: dict[str, Any] = {}
        for key in self.keys:
            if key in self.extras:
                if key in extras:
                    out[key] = extras[key]
                continue
            v = base[self.source.get(key, key)]
            conv = self.convert.get(key)
            out[key] = v if conv is None else conv(v)
        return out

    def schema(self, *, with_extras: tuple[str, ...] = ()) -> dict:
        """The properties of this form's JSON Schema: overrides, else from the wire type."""
        props: dict[str, dict] = {}
        for key in self.keys:
            if key in self.extras and key not in with_extras:
                continue
            if key in self.schemas:
                props[key] = self.schemas[key]
                continue
            f = next(f for f in self.record.fields if f.name == self.source.get(key, key))
            props[key] = _type_schema(f.type)
        return props


def _type_schema(t) -> dict:
    if isinstance(t, Int):
        return {"type": "integer", "minimum": t.lo, "maximum": t.hi}
    if isinstance(t, Text):
        return {"type": "string", "minLength": max(t.min_len, 1), "maxLength": t.max_len}
    if isinstance(t, ListOf):
        return {"type": "array", "items": _type_schema(t.item)}
    raise SpecError(f"no JSON Schema for wire type {t!r}; declare one in the form")


_COMPRESSION_NAMES = {1: "none", 2: "gzip"}
_STATUS_NAMES = {1: "active", 2: "inactive"}
_TRANSPORT_NAMES = {1: "TCP", 2: "QUIC", 4: "WebSocket"}  # iggy.md 3.6; 4: upstream wire_conversions.rs

STREAM = JsonForm(
    R.STREAM, ("id", "created_at", "name", "size", "messages_count", "topics_count", "topics"),
    convert={"id": wire, "size": size_text}, extras=("topics",),
    schemas={"id": ID, "created_at": US, "name": NAME, "size": SIZE},
)
TOPIC = JsonForm(
    R.TOPIC, ("id", "created_at", "name", "size", "message_expiry", "compression_algorithm", "max_topic_size",
              "replication_factor", "messages_count", "partitions_count", "partitions", "options"),
    source={"compression_algorithm": "compression"},
    convert={"id": wire, "size": size_text, "compression_algorithm": _COMPRESSION_NAMES.__getitem__},
    # options: the current server's ResourceOptions JSON (models.topic_options_json)
    extras=("partitions", "options"),
    schemas={"id": ID, "created_at": US, "name": NAME, "size": SIZE,
             "compression_algorithm": {"enum": ["none", "gzip"]}, "replication_factor": {"type": "integer"},
             "options": {"type": "object", "additionalProperties": {
                 "type": "object", "properties": {"value": {"type": "string"}, "explicit": {"type": "boolean"}},
                 "required": ["value", "explicit"]}}},
)
PARTITION = JsonForm(
    R.PARTITION, ("id", "created_at", "segments_count", "current_offset", "size", "messages_count"),
    convert={"id": wire, "size": size_text}, schemas={"id": ID, "created_at": US, "size": SIZE},
)
GROUP = JsonForm(
    R.GROUP, ("id", "name", "partitions_count", "members_count", "members"),
    convert={"id": wire}, extras=("members",), schemas={"id": ID, "name": NAME},
)
MEMBER = JsonForm(
    R.MEMBER, ("id", "partitions_count", "partitions"),
    source={"partitions_count": "partitions"}, convert={"partitions_count": len, "partitions": wire_all},
    schemas={"partitions_count": {"type": "integer", "minimum": 0, "maximum": 2**32 - 1},
             "partitions": {"type": "array", "items": ID}},
)
OFFSET = JsonForm(
    R.OFFSET_INFO, ("partition_id", "current_offset", "stored_offset"),
    convert={"partition_id": wire}, schemas={"partition_id": ID},
)
USER = JsonForm(
    R.USER_INFO, ("id", "created_at", "status", "username", "permissions"),
    convert={"id": wire, "status": _STATUS_NAMES.__getitem__}, extras=("permissions",),
    schemas={"id": ID, "created_at": US, "status": {"enum": ["active", "inactive"]}, "username": NAME,
             "permissions": {"anyOf": [{"type": "object"}, {"type": "null"}]}},
)
PAT = JsonForm(
    R.PAT_INFO, ("name", "expiry_at"),
    convert={"expiry_at": lambda us: us or None},  # 0 on the binary wire = never expires = null here
    schemas={"name": NAME, "expiry_at": {"anyOf": [US, {"type": "null"}]}},
)
CLIENT = JsonForm(
    R.CLIENT_INFO, ("client_id", "user_id", "address", "transport", "consumer_groups_count", "consumer_groups"),
    # built with e=1 (models.client_json), so 0 stays "not logged in" (null here) even for the root
    # user, whose canonical id is 0; anything else is shown as its wire id
    convert={"user_id": lambda uid: uid - 1 + ID_BASE if uid else None, "transport": _TRANSPORT_NAMES.__getitem__},
    extras=("consumer_groups",),
    schemas={"user_id": {"anyOf": [ID, {"type": "null"}]}, "address": {"type": "string"},
             "transport": {"enum": ["TCP", "QUIC", "WebSocket"]},
             "consumer_groups": {"type": "array", "items": {"type": "object"}}},
)
IDENTITY = JsonForm(
    R.IDENTITY, ("user_id", "access_token"), convert={"user_id": wire}, extras=("access_token",),
    schemas={"user_id": ID},
)

__all__ = ["CLIENT", "GROUP", "IDENTITY", "JsonForm", "MEMBER", "OFFSET", "PARTITION", "PAT", "STREAM", "TOPIC", "USER",
           "size_text"]
