"""JSON Schemas of the HTTP API's bodies (OpenAPI 3.1 components), data only.

They describe the shapes that :mod:`.models` reads and writes (iggy.md 10.5,
10.6); ``models.py`` stays the one place that *converts*, this module only
documents, for ``/openapi.json`` and for schema-driven tests (schemathesis).
The response records (stream, topic, partition, consumer group and member,
consumer offset, user, PAT, client, identity) take their properties from the Iggy
reply declarations through :mod:`.forms`; request bodies, messages, headers,
errors and the nested references stay written here.
"""

from __future__ import annotations

from adapters.iggy.snapshot import COMPRESSIONS as SNAPSHOT_COMPRESSIONS, TYPES as SNAPSHOT_TYPES

from . import forms

U32 = {"type": "integer", "minimum": 0, "maximum": 2**32 - 1}
U64 = {"type": "integer", "minimum": 0, "maximum": 2**64 - 1}
ID = {"type": "integer", "minimum": forms.ID_BASE, "maximum": 2**32 - 1}  # numbered from 0, as the current server
NAME = {"type": "string", "minLength": 1, "maxLength": 255}
B64 = {"type": "string", "contentEncoding": "base64"}
US = {"type": "integer", "description": "microseconds since the Unix epoch"}
HEADER_KINDS = ["raw", "string", "bool", "int8", "int16", "int32", "int64", "int128", "uint8", "uint16",
                "uint32", "uint64", "uint128", "float32", "float64"]


def obj(props: dict, required: tuple[str, ...] = (), extra: bool = True) -> dict:
    out = {"type": "object", "properties": props, "required": list(required)}
    if not extra:
        out["additionalProperties"] = False
    return out


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def array(item: dict) -> dict:
    return {"type": "array", "items": item}


def nullable(schema: dict) -> dict:
    return {"anyOf": [schema, {"type": "null"}]}


# Response records: properties derived from the Iggy reply declarations via .forms.
_PARTITION = obj(forms.PARTITION.schema())
_TOPIC = forms.TOPIC.schema(with_extras=("options",))
_STREAM = forms.STREAM.schema()
_GROUP = forms.GROUP.schema()
_USER = forms.USER.schema()
_HEADER = obj({"kind": {"enum": HEADER_KINDS}, "value": B64}, ("kind", "value"))
# the current server's HeaderEntry: a typed key and a typed value
_HEADER_ENTRY = obj({"key": ref("Header"), "value": ref("Header")}, ("key", "value"))
_TOPIC_SETTINGS = {"compression_algorithm": {"enum": ["none", "gzip"]}, "message_expiry": U64,
                   "max_topic_size": U64, "replication_factor": nullable({"type": "integer", "minimum": 0,
                                                                           "maximum": 255}),
                   "options": {"type": "object", "additionalProperties": {"type": "string"},
                               "description": "option keys as text (compression_algorithm, message_expiry, "
                                              "max_topic_size; the reference server's other keys are accepted "
                                              "and not applied)"}}
_NULLABLE_SETTINGS = {k: nullable(v) if k in ("compression_algorithm", "message_expiry", "max_topic_size") else v
                      for k, v in _TOPIC_SETTINGS.items()}
_TOKEN = obj({"token": {"type": "string"}, "expiry": {"type": "integer"}}, ("token", "expiry"))

SCHEMAS: dict[str, dict] = {
    "Error": obj({"id": {"type": "integer"}, "code": {"type": "string"}, "reason": {"type": "string"},
                  "field": nullable({"type": "string"})}, ("id", "code", "reason", "field")),
    "Partition": _PARTITION,
    "Topic": obj(_TOPIC),
    "TopicDetails": obj({**_TOPIC, "partitions": array(ref("Partition"))}),
    "Stream": obj(_STREAM),
    "StreamDetails": obj({**_STREAM, "topics": array(ref("Topic"))}),
    "ConsumerGroup": obj(_GROUP),
    "ConsumerGroupDetails": obj({**_GROUP, "members": array(obj(forms.MEMBER.schema()))}),
    "ConsumerOffsetInfo": obj(forms.OFFSET.schema()),
    "UserInfo": obj(_USER),
    "UserInfoDetails": obj(forms.USER.schema(with_extras=("permissions",))),
    "ClientInfo": obj(forms.CLIENT.schema()),
    "ClientInfoDetails": obj(forms.CLIENT.schema(with_extras=("consumer_groups",))),
    "IdentityInfo": obj({**forms.IDENTITY.schema(), "access_token": nullable(_TOKEN)}),
    "PersonalAccessTokenInfo": obj(forms.PAT.schema()),
    "RawPersonalAccessToken": obj({"token": {"type": "string"}}, ("token",)),
    "Header": _HEADER,
    "HeaderEntry": _HEADER_ENTRY,
    "MessageHeader": obj({"checksum": {**U64, "description": "XXH3-64 of the stored record from byte 8"},
                          "id": {"type": "integer", "minimum": 0, "maximum": 2**128 - 1}, "offset": U64,
                          "timestamp": US, "origin_timestamp": US, "user_headers_length": U32,
                          "payload_length": U32, "reserved": {"const": 0}},
                         ("checksum", "id", "offset", "timestamp", "origin_timestamp", "user_headers_length",
                          "payload_length", "reserved")),
    "PolledMessage": obj({"header": ref("MessageHeader"), "payload": B64,
                          "user_headers": array(ref("HeaderEntry"))}, ("header", "payload", "user_headers")),
    "PolledMessages": obj({"partition_id": ID, "current_offset": U64, "count": U32,
                           "messages": array(ref("PolledMessage"))},
                          ("partition_id", "current_offset", "count", "messages")),
    "SendMessagesConfirmations": obj({"confirmations": array(obj(
        {"stream_id": ID, "topic_id": ID, "partition_id": ID, "base_offset": U64},
        ("stream_id", "topic_id", "partition_id", "base_offset")))}, ("confirmations",)),
    "Health": obj({"status": {"enum": ["ok", "draining"]}}),
    # -- request bodies ----------------------------------------------------------------
    "CreateStream": obj({"stream_id": nullable(U32), "name": NAME}, ("name",)),
    "UpdateStream": obj({"name": NAME}, ("name",)),
    "CreateTopic": obj({"topic_id": nullable(U32), "name": NAME, "partitions_count": U32, **_TOPIC_SETTINGS},
                       ("name", "partitions_count", "compression_algorithm", "message_expiry", "max_topic_size")),
    "UpdateTopic": obj({"name": NAME, **_NULLABLE_SETTINGS}, ("name",)),  # a patch: left out = kept
    "CreatePartitions": obj({"partitions_count": U32}, ("partitions_count",)),
    "SendMessages": obj({
        "partitioning": obj({"kind": {"enum": ["balanced", "partition_id", "messages_key"]}, "value": B64},
                            ("kind",)),
        "messages": {**array(obj({"id": {"type": "integer", "minimum": 0, "maximum": 2**128 - 1},
                                  "payload": B64,
                                  "user_headers": nullable({"anyOf": [array(ref("HeaderEntry")), B64]}),
                                  # the seed era's header map, still read (not together with user_headers)
                                  "headers": nullable({"type": "object", "additionalProperties": ref("Header")})},
                                 ("payload",))), "minItems": 1},
    }, ("messages",)),
    "StoreConsumerOffset": obj({"consumer_id": {"type": "string"}, "id": {"type": "string"},
                                "partition_id": nullable(ID), "offset": U64}, ("offset",)),
    "CreateConsumerGroup": obj({"group_id": nullable(U32), "name": NAME}, ("name",)),
    "Login": obj({"username": {"type": "string"}, "password": {"type": "string"},
                  "version": nullable({"type": "string"}), "context": nullable({"type": "string"})},
                 ("username", "password")),
    "Token": obj({"token": {"type": "string"}}, ("token",)),
    "CreateUser": obj({"username": {"type": "string"}, "password": {"type": "string"},
                       "status": {"enum": ["active", "inactive"]}, "permissions": nullable({"type": "object"})},
                      ("username", "password")),
    "UpdateUser": obj({"username": nullable({"type": "string"}), "status": nullable({"enum": ["active", "inactive"]})}),
    "UpdatePermissions": obj({"permissions": nullable({"type": "object"})}),
    "ChangePassword": obj({"current_password": {"type": "string"}, "new_password": {"type": "string"}},
                          ("current_password", "new_password")),
    "CreatePersonalAccessToken": obj({"name": {"type": "string"}, "expiry": U64}, ("name",)),
    "GetSnapshot": obj({"snapshot_types": array({"enum": list(SNAPSHOT_TYPES.values())}),
                        "compression": {"enum": list(SNAPSHOT_COMPRESSIONS.values())}},
                       ("snapshot_types", "compression")),
}

__all__ = ["SCHEMAS", "array", "ref"]
