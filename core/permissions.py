"""Iggy's permission model and its evaluation (pure: no I/O, no trio).

Theory of operation
-------------------
A user holds ``Permissions`` or none at all (Iggy's ``Option<Permissions>``):

* ten **global** flags that apply to every stream: manage_servers,
  read_servers, manage_users, read_users, manage_streams, read_streams,
  manage_topics, read_topics, poll_messages, send_messages;
* optional **per-stream** grants (by canonical stream id): manage_stream,
  read_stream, manage_topics, read_topics, poll_messages, send_messages, each
  with optional **per-topic** grants (by canonical topic id): manage_topic,
  read_topic, poll_messages, send_messages.

Stream and topic grants extend the global flags; nothing ever takes a right
away. The flag sets and their binary layout are protocols/iggy.md section 3.7
and apache/iggy ``core/common/src/types/permissions/permissions_global.rs``.

:func:`allowed` answers "may this user do this action here?" with one table,
:data:`RULES`: for each :class:`Action`, the global, stream and topic flags
any one of which grants it. The table reproduces the checks of Iggy's server,
apache/iggy ``core/server/src/streaming/users/permissioner_rules/`` (files
``system.rs``, ``users.rs``, ``streams.rs``, ``topics.rs``, ``messages.rs``,
``consumer_groups.rs``, ``consumer_offsets.rs``, ``partitions.rs``). Where the
server and the flag doc-comments of ``permissions_global.rs`` disagree, the
server wins, since that is what a client observes:

* only the global ``poll_messages`` / ``send_messages`` flags grant polling or
  sending everywhere; global ``read_streams`` or ``manage_streams`` do not;
* at stream level, polling is granted by read_stream, manage_topics,
  read_topics or poll_messages (not manage_stream); sending by manage_stream,
  manage_topics or send_messages.

One deliberate difference: Iggy's ``get_topics`` looks the *stream id* up in
the topic grants (a slip); listing a stream's topics here needs a global or a
stream-level grant only.

The root user (id 0) may do everything, whatever its stored flags (the caller
passes ``is_root``). An inactive user may do nothing.

Which adapter request needs which action (the permissioner's own mapping):

=====================================================  ==================
get_stats, get_clients, get_client                     READ_SERVERS
get_user(s) of another user                            READ_USERS
create/update/delete user, permissions, others' pwd    MANAGE_USERS
get_streams                                            READ_STREAMS
create_stream                                          CREATE_STREAM
get_stream                                             READ_STREAM
update/delete/purge stream                             MANAGE_STREAM
get_topics                                             READ_TOPICS
create_topic                                           CREATE_TOPIC
get_topic, consumer groups (all six commands)          READ_TOPIC
update/delete/purge topic, create/delete partitions    MANAGE_TOPIC
poll messages, get/store/delete consumer offset        POLL_MESSAGES
send messages                                          SEND_MESSAGES
=====================================================  ==================
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Mapping

from .errors import InvalidArgument

ROOT_USER_ID = 0  # Iggy 0.6+ root (apache/iggy core/common/src/commands/users/defaults.rs)


def _flags(cls) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls) if f.type == "bool")


@dataclass(frozen=True, slots=True)
class GlobalPermissions:
    manage_servers: bool = False
    read_servers: bool = False
    manage_users: bool = False
    read_users: bool = False
    manage_streams: bool = False
    read_streams: bool = False
    manage_topics: bool = False
    read_topics: bool = False
    poll_messages: bool = False
    send_messages: bool = False


@dataclass(frozen=True, slots=True)
class TopicPermissions:
    manage_topic: bool = False
    read_topic: bool = False
    poll_messages: bool = False
    send_messages: bool = False


@dataclass(frozen=True, slots=True)
class StreamPermissions:
    manage_stream: bool = False
    read_stream: bool = False
    manage_topics: bool = False
    read_topics: bool = False
    poll_messages: bool = False
    send_messages: bool = False
    topics: Mapping[int, TopicPermissions] | None = None

    def __post_init__(self) -> None:
        if self.topics is not None:
            object.__setattr__(self, "topics", _frozen_map(self.topics, TopicPermissions, "topic"))


@dataclass(frozen=True, slots=True)
class Permissions:
    """A user's rights. ``streams`` maps canonical stream ids to their grants.

    The mappings are read-only views, so a ``Permissions`` value cannot change
    under a session that holds it."""

    global_: GlobalPermissions = GlobalPermissions()
    streams: Mapping[int, StreamPermissions] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.global_, GlobalPermissions):
            raise InvalidArgument("global permissions must be GlobalPermissions")
        if self.streams is not None:
            object.__setattr__(self, "streams", _frozen_map(self.streams, StreamPermissions, "stream"))

    @classmethod
    def root(cls) -> "Permissions":
        """Every global flag set, no stream grants (Iggy's ``Permissions::root``)."""
        return cls(GlobalPermissions(**dict.fromkeys(GLOBAL_FLAGS, True)))

    # -- Iggy's JSON shape (HTTP API and our storage) -------------------------------
    def to_dict(self) -> dict:
        """``{"global": {...}, "streams": {"<id>": {..., "topics": {"<id>": {...}}}}}``.

        Ids are canonical; adapters of the 1-based dialect translate them."""
        streams = None
        if self.streams is not None:
            streams = {str(sid): _stream_to_dict(sp) for sid, sp in sorted(self.streams.items())}
        return {"global": _flags_to_dict(self.global_, GLOBAL_FLAGS), "streams": streams}

    @classmethod
    def from_dict(cls, data: object) -> "Permissions":
        """Parse :meth:`to_dict` output (missing flags are false); InvalidArgument if malformed."""
        if not isinstance(data, Mapping):
            raise InvalidArgument("permissions must be an object")
        glob = GlobalPermissions(**_flags_from(data.get("global") or {}, GLOBAL_FLAGS))
        raw = data.get("streams")
        if raw is None:
            return cls(glob)
        if not isinstance(raw, Mapping):
            raise InvalidArgument("permissions.streams must be an object")
        return cls(glob, {_id(k, "stream"): _stream_from_dict(v) for k, v in raw.items()})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Permissions":
        return cls.from_dict(json.loads(text))

    # -- keeping grants from outliving their stream or topic -------------------------
    def without_stream(self, stream_id: int) -> "Permissions":
        """These permissions minus any grant on ``stream_id`` (ids are reused)."""
        if not self.streams or stream_id not in self.streams:
            return self
        return Permissions(self.global_, {k: v for k, v in self.streams.items() if k != stream_id})

    def without_topic(self, stream_id: int, topic_id: int) -> "Permissions":
        sp = (self.streams or {}).get(stream_id)
        if sp is None or not sp.topics or topic_id not in sp.topics:
            return self
        topics = {k: v for k, v in sp.topics.items() if k != topic_id}
        new_sp = StreamPermissions(**{f: getattr(sp, f) for f in STREAM_FLAGS}, topics=topics)
        return Permissions(self.global_, {**self.streams, stream_id: new_sp})


GLOBAL_FLAGS = _flags(GlobalPermissions)
STREAM_FLAGS = _flags(StreamPermissions)
TOPIC_FLAGS = _flags(TopicPermissions)


class Action(enum.StrEnum):
    """What a request wants to do; see the mapping table in the module docstring."""

    READ_SERVERS = "read_servers"
    MANAGE_SERVERS = "manage_servers"
    READ_USERS = "read_users"
    MANAGE_USERS = "manage_users"
    READ_STREAMS = "read_streams"
    CREATE_STREAM = "create_stream"
    READ_STREAM = "read_stream"
    MANAGE_STREAM = "manage_stream"
    READ_TOPICS = "read_topics"
    CREATE_TOPIC = "create_topic"
    READ_TOPIC = "read_topic"
    MANAGE_TOPIC = "manage_topic"
    POLL_MESSAGES = "poll_messages"
    SEND_MESSAGES = "send_messages"


class Scope(enum.IntEnum):
    GLOBAL = 0  # no stream or topic involved
    STREAM = 1  # needs stream_id
    TOPIC = 2  # needs stream_id and topic_id


@dataclass(frozen=True, slots=True)
class Rule:
    scope: Scope
    global_any: tuple[str, ...]
    stream_any: tuple[str, ...] = ()
    topic_any: tuple[str, ...] = ()


_READ_TOPIC_GLOBAL = ("read_streams", "manage_streams", "manage_topics", "read_topics")
_MANAGE_TOPIC_GLOBAL = ("manage_streams", "manage_topics")

RULES: Mapping[Action, Rule] = MappingProxyType({
    Action.READ_SERVERS: Rule(Scope.GLOBAL, ("manage_servers", "read_servers")),
    Action.MANAGE_SERVERS: Rule(Scope.GLOBAL, ("manage_servers",)),
    Action.READ_USERS: Rule(Scope.GLOBAL, ("manage_users", "read_users")),
    Action.MANAGE_USERS: Rule(Scope.GLOBAL, ("manage_users",)),
    Action.READ_STREAMS: Rule(Scope.GLOBAL, ("manage_streams", "read_streams")),
    Action.CREATE_STREAM: Rule(Scope.GLOBAL, ("manage_streams",)),
    Action.READ_STREAM: Rule(Scope.STREAM, ("manage_streams", "read_streams"), ("manage_stream", "read_stream")),
    Action.MANAGE_STREAM: Rule(Scope.STREAM, ("manage_streams",), ("manage_stream",)),
    Action.READ_TOPICS: Rule(Scope.STREAM, _READ_TOPIC_GLOBAL, ("manage_topics", "read_topics")),
    Action.CREATE_TOPIC: Rule(Scope.STREAM, _MANAGE_TOPIC_GLOBAL, ("manage_topics",)),
    Action.READ_TOPIC: Rule(
        Scope.TOPIC, _READ_TOPIC_GLOBAL, ("manage_topics", "read_topics"), ("manage_topic", "read_topic")
    ),
    Action.MANAGE_TOPIC: Rule(Scope.TOPIC, _MANAGE_TOPIC_GLOBAL, ("manage_topics",), ("manage_topic",)),
    Action.POLL_MESSAGES: Rule(
        Scope.TOPIC,
        ("poll_messages",),
        ("read_stream", "manage_topics", "read_topics", "poll_messages"),
        ("manage_topic", "read_topic", "poll_messages"),
    ),
    Action.SEND_MESSAGES: Rule(
        Scope.TOPIC,
        ("send_messages",),
        ("manage_stream", "manage_topics", "send_messages"),
        ("manage_topic", "send_messages"),
    ),
})


def allowed(
    permissions: Permissions | None,
    action: Action | str,
    stream_id: int | None = None,
    topic_id: int | None = None,
    *,
    is_root: bool = False,
    active: bool = True,
) -> bool:
    """True if a user with ``permissions`` may perform ``action`` (Iggy's permissioner).

    ``stream_id`` / ``topic_id`` are canonical ids, required by stream- and
    topic-scoped actions (InvalidArgument otherwise, as for an unknown action).
    """
    rule = _rule(action)
    if rule.scope >= Scope.STREAM and stream_id is None:
        raise InvalidArgument(f"action {action!s} needs a stream id")
    if rule.scope == Scope.TOPIC and topic_id is None:
        raise InvalidArgument(f"action {action!s} needs a topic id")
    if not active:
        return False
    if is_root:
        return True
    if permissions is None:
        return False
    if _any(permissions.global_, rule.global_any):
        return True
    if rule.scope == Scope.GLOBAL or not permissions.streams:
        return False
    sp = permissions.streams.get(stream_id)
    if sp is None:
        return False
    if _any(sp, rule.stream_any):
        return True
    if rule.scope != Scope.TOPIC or not sp.topics:
        return False
    tp = sp.topics.get(topic_id)
    return tp is not None and _any(tp, rule.topic_any)


def _rule(action: Action | str) -> Rule:
    try:
        return RULES[Action(action)]
    except ValueError:
        raise InvalidArgument(f"unknown action {action!r}") from None


def _any(obj: object, names: tuple[str, ...]) -> bool:
    return any(getattr(obj, n) for n in names)


# -- dict conversion helpers --------------------------------------------------------
def _frozen_map(raw: object, value_type: type, what: str) -> Mapping:
    if not isinstance(raw, Mapping):
        raise InvalidArgument(f"{what} permissions must be a mapping of id to grants")
    out = {}
    for key, value in raw.items():
        if not isinstance(value, value_type):
            raise InvalidArgument(f"{what} {key!r} grants must be {value_type.__name__}")
        out[_id(key, what)] = value
    return MappingProxyType(out)


def _id(key: object, what: str) -> int:
    if isinstance(key, str) and key.isdigit():
        key = int(key)
    if isinstance(key, bool) or not isinstance(key, int) or key < 0:
        raise InvalidArgument(f"{what} id in permissions must be a non-negative int, got {key!r}")
    return key


def _flags_to_dict(obj: object, names: tuple[str, ...]) -> dict:
    return {n: getattr(obj, n) for n in names}


def _flags_from(data: object, names: tuple[str, ...]) -> dict[str, bool]:
    if not isinstance(data, Mapping):
        raise InvalidArgument("permission flags must be an object")
    out = {}
    for name in names:
        value = data.get(name, False)
        if not isinstance(value, bool):
            raise InvalidArgument(f"permission {name} must be true or false, got {value!r}")
        out[name] = value
    return out


def _stream_to_dict(sp: StreamPermissions) -> dict:
    out = _flags_to_dict(sp, STREAM_FLAGS)
    out["topics"] = None if sp.topics is None else {
        str(tid): _flags_to_dict(tp, TOPIC_FLAGS) for tid, tp in sorted(sp.topics.items())
    }
    return out


def _stream_from_dict(data: object) -> StreamPermissions:
    flags = _flags_from(data, STREAM_FLAGS)
    raw = data.get("topics") if isinstance(data, Mapping) else None
    if raw is None:
        return StreamPermissions(**flags)
    if not isinstance(raw, Mapping):
        raise InvalidArgument("stream permissions.topics must be an object")
    topics = {_id(k, "topic"): TopicPermissions(**_flags_from(v, TOPIC_FLAGS)) for k, v in raw.items()}
    return StreamPermissions(**flags, topics=topics)


__all__ = [
    "Action",
    "GLOBAL_FLAGS",
    "GlobalPermissions",
    "Permissions",
    "ROOT_USER_ID",
    "RULES",
    "STREAM_FLAGS",
    "StreamPermissions",
    "TOPIC_FLAGS",
    "TopicPermissions",
    "allowed",
]
