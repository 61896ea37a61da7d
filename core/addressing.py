"""Addressing: the one rule that names a topic in every protocol.

Theory of operation
-------------------
A Ferry topic is named by two strings, ``(stream, topic)``. By default
(../shared/ARCHITECTURE.md, "Bridging"; docs/addressing.md is the truth):

==========  ======================================================
Iggy        stream ``stream``, topic ``topic`` (by name or id)
HTTP        ``/streams/{stream}/topics/{topic}`` (percent-encoded)
Pravega     scope ``stream``, stream ``topic``
NATS        captures ``stream.topic`` and ``stream.topic.>``
Kafka       topic ``stream.topic``; a name without a dot is topic
            ``name`` of the listener's default stream (``kafka``)
==========  ======================================================

A name that cannot be a NATS token (empty, a dot, whitespace or another
non-printable character, ``*`` or ``>``) leaves the topic invisible to NATS;
a name outside Pravega's ``[A-Za-z0-9.-]`` (at most 255 characters,
../shared/protocols/pravega.md section 12) leaves it invisible to Pravega.
A ``[[binding]]`` in the config gives such a topic (or any other) explicit
names. A binding's NATS subject replaces the default one for that topic and
claims ``subject`` and ``subject.>`` before the default rule is consulted;
when two bound subjects both capture a publish, the longer (more specific)
one wins. A binding's Pravega names likewise replace the default pair.

A NATS publish on a subject nobody captures, or captured for a topic that
does not exist, is plain core NATS: delivered, not stored. Existence is asked
through an ``exists(stream, topic) -> bool`` callback so this module stays
pure (no metadata access, no I/O, no trio).

Reserved header names used by the bridges are defined here, once:
:data:`SUBJECT_HEADER`, :data:`KINDS_HEADER`, :data:`PARTITION_KEY_HEADER`.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, fields
from typing import Callable, Iterable, Mapping
from urllib.parse import quote

from .errors import InvalidArgument
from .header_value import HeaderKind
from .message import Headers
from .subjects import SEP, is_valid_subject

ExistsFn = Callable[[str, str], bool]

# Kafka's topic names: [a-zA-Z0-9._-], at most 249 characters, not "." or ".."
# (org.apache.kafka.common.internals.Topic.validate; 249 leaves room for the
# ".index"-style suffixes of Kafka's own files).
MAX_KAFKA_NAME = 249
_KAFKA_CHARS = frozenset(string.ascii_letters + string.digits + "._-")
DEFAULT_KAFKA_STREAM = "kafka"

# -- reserved headers ----------------------------------------------------------
# Canonical (stored) header, string key / string value: the exact subject a
# NATS publish used. Replay and live delivery give NATS subscribers that
# subject back; Iggy, HTTP and Spark readers see it as an ordinary header.
# Namespaced under "ferry-" so it never collides with NATS' own "Nats-*"
# headers (e.g. JetStream's "Nats-Subject" in direct-get replies).
SUBJECT_HEADER = "ferry-nats-subject"

# NATS-side header (never stored): lists the kinds of the canonical headers a
# NATS message carries as text, so that a NATS client re-publishing the message
# gives back typed headers. Its value format belongs to the NATS header codec
# and is specified in docs/headers.md.
KINDS_HEADER = "Ferry-Header-Kinds"

# NATS header whose value picks the partition of a captured publish, hashed as
# Iggy's messages_key (XXH32(key) % partitions, iggy-middle.md section 5);
# without it the publish is balanced (round robin). Matched without regard to
# case (nats.go once canonicalised header keys MIME-style).
PARTITION_KEY_HEADER = "Ferry-Partition-Key"

# Names the NATS adapter strips or rewrites on the way in (lower-cased keys).
RESERVED_NATS_HEADERS = frozenset(h.lower() for h in (SUBJECT_HEADER, KINDS_HEADER))

# -- name limits ---------------------------------------------------------------
# Stream and topic names are Iggy str8 names: 1..255 bytes of UTF-8
# (iggy.md section 4, CreateStream/CreateTopic).
MAX_NAME_BYTES = 255
# Pravega scope and stream names: [A-Za-z0-9.-], at most 255 characters
# (pravega.md section 12; Pravega's NameUtils).
MAX_PRAVEGA_NAME = 255
_PRAVEGA_CHARS = frozenset(string.ascii_letters + string.digits + ".-")
# Iggy accepts 0..1000 partitions per topic (iggy-current.md, topic record); a
# binding that creates a topic needs at least one partition to be writable.
MAX_BINDING_PARTITIONS = 1000
# Characters that stop a name from being one NATS token. Non-printable
# characters (all whitespace but the space, control characters) are refused
# separately through str.isprintable(): nats-server only refuses " \t\n\r\f",
# but a name should be subscribable from every client, and nats-py refuses
# wildcard characters misplaced inside tokens.
_NOT_IN_NATS_TOKEN = frozenset(". *>")


def is_nats_token(name: str) -> bool:
    """True if ``name`` can be one token of a NATS subject (so the default
    subject ``stream.topic`` names exactly this stream and topic)."""
    return bool(name) and name.isprintable() and _NOT_IN_NATS_TOKEN.isdisjoint(name)


def is_pravega_name(name: str) -> bool:
    """True if ``name`` is a valid Pravega scope or stream name."""
    return 0 < len(name) <= MAX_PRAVEGA_NAME and _PRAVEGA_CHARS.issuperset(name)


# -- bindings ------------------------------------------------------------------
def is_kafka_name(name: str) -> bool:
    """True for a legal Kafka topic name (``Topic.validate``)."""
    return (0 < len(name) <= MAX_KAFKA_NAME and name not in (".", "..")
            and all(c in _KAFKA_CHARS for c in name))


def topic_for_kafka(name: str, default_stream: str = DEFAULT_KAFKA_STREAM) -> tuple[str, str] | None:
    """Ferry ``(stream, topic)`` a Kafka topic name means, or ``None`` for an illegal name.

    ``S.T`` (split at the first dot, both sides non-empty) is topic ``T`` of stream
    ``S``, the same pair NATS reaches as subject ``S.T``; any other legal name is
    topic ``name`` of ``default_stream``."""
    if not is_kafka_name(name):
        return None
    stream, dot, topic = name.partition(".")
    if dot and stream and topic:
        return (stream, topic)
    return (default_stream, name)


def kafka_name_for(stream: str, topic: str, default_stream: str = DEFAULT_KAFKA_STREAM) -> str | None:
    """The Kafka name of topic ``(stream, topic)``, or ``None`` when no legal Kafka name
    means it: the bare topic name inside ``default_stream`` when it reads back to the
    same pair, else ``stream.topic``. Exactly inverse to :func:`topic_for_kafka`."""
    if stream == default_stream and topic_for_kafka(topic, default_stream) == (stream, topic):
        return topic
    name = f"{stream}.{topic}"
    return name if topic_for_kafka(name, default_stream) == (stream, topic) else None


def _field_error(field: str, reason: str) -> InvalidArgument:
    return InvalidArgument(f"binding.{field}: {reason}", field=field, reason=reason)


@dataclass(frozen=True, slots=True)
class Binding:
    """Explicit names for one topic (a ``[[binding]]`` table of the config).

    ``nats_subject``: a literal subject; the topic captures it and
    ``nats_subject.>`` instead of ``stream.topic``. ``pravega_scope`` /
    ``pravega_stream``: Pravega names (each defaults to the Ferry name).
    ``create``: the gateway creates the stream and topic at start if missing,
    with ``partitions`` partitions (default 1; only valid with ``create``).
    Raises :class:`~core.errors.InvalidArgument` naming the bad field.
    """

    stream: str
    topic: str
    nats_subject: str | None = None
    pravega_scope: str | None = None
    pravega_stream: str | None = None
    partitions: int | None = None
    create: bool = False

    def __post_init__(self) -> None:
        _check_name("stream", self.stream)
        _check_name("topic", self.topic)
        self._check_nats()
        self._check_pravega()
        self._check_create()

    def _check_nats(self) -> None:
        subj = self.nats_subject
        if subj is None:
            return
        if not isinstance(subj, str):
            raise _field_error("nats_subject", f"must be a string, got {type(subj).__name__}")
        if not is_valid_subject(subj):
            raise _field_error(
                "nats_subject",
                f"{subj!r} is not a valid literal NATS subject "
                "(dot-separated non-empty tokens, no whitespace, no * or > wildcards)",
            )

    def _check_pravega(self) -> None:
        for field, value in (("pravega_scope", self.pravega_scope), ("pravega_stream", self.pravega_stream)):
            if value is None:
                continue
            if not isinstance(value, str):
                raise _field_error(field, f"must be a string, got {type(value).__name__}")
            if not is_pravega_name(value):
                raise _field_error(field, f"{value!r} is not a Pravega name ([A-Za-z0-9.-], 1..255 characters)")
        if not self.binds_pravega:
            return
        if self.pravega_scope is None and not is_pravega_name(self.stream):
            raise _field_error("pravega_scope", f"required: stream {self.stream!r} is not a valid Pravega scope name")
        if self.pravega_stream is None and not is_pravega_name(self.topic):
            raise _field_error("pravega_stream", f"required: topic {self.topic!r} is not a valid Pravega stream name")

    def _check_create(self) -> None:
        if not isinstance(self.create, bool):
            raise _field_error("create", f"must be true or false, got {self.create!r}")
        n = self.partitions
        if n is None:
            return
        if isinstance(n, bool) or not isinstance(n, int):
            raise _field_error("partitions", f"must be an integer, got {n!r}")
        if not 1 <= n <= MAX_BINDING_PARTITIONS:
            raise _field_error("partitions", f"must be between 1 and {MAX_BINDING_PARTITIONS}, got {n}")
        if not self.create:
            raise _field_error("partitions", "only applies with create = true (Ferry creates topics only then)")

    @property
    def binds_pravega(self) -> bool:
        return self.pravega_scope is not None or self.pravega_stream is not None

    @property
    def pravega_names(self) -> tuple[str, str]:
        """The effective Pravega (scope, stream) of this binding."""
        return (self.pravega_scope or self.stream, self.pravega_stream or self.topic)

    @classmethod
    def from_config(cls, table: object, where: str = "binding") -> "Binding":
        """Build a binding from one parsed TOML table; errors start with ``where``."""
        if not isinstance(table, Mapping):
            raise InvalidArgument(f"{where}: must be a table, got {type(table).__name__}", field=None)
        known = [f.name for f in fields(cls)]
        for key in table:
            if key not in known:
                raise InvalidArgument(
                    f"{where}.{key}: unknown key (expected one of {', '.join(known)})", field=key
                )
        for key in ("stream", "topic"):
            if key not in table:
                raise InvalidArgument(f"{where}.{key}: required", field=key)
        try:
            return cls(**dict(table))
        except InvalidArgument as err:
            field = err.details.get("field")
            raise InvalidArgument(f"{where}.{field}: {err.details.get('reason')}", field=field) from None


def _check_name(field: str, value: object) -> None:
    if not isinstance(value, str):
        raise _field_error(field, f"must be a string, got {type(value).__name__}")
    size = len(value.encode("utf-8", "surrogatepass"))
    if not 1 <= size <= MAX_NAME_BYTES:
        raise _field_error(field, f"must be 1..{MAX_NAME_BYTES} bytes of UTF-8, got {size}")


def parse_bindings(tables: object) -> tuple[Binding, ...]:
    """Parse the config's ``[[binding]]`` array (a list of tables).

    Raises :class:`~core.errors.InvalidArgument` whose message names the
    binding and field, e.g. ``binding[2].nats_subject: ...``."""
    if tables is None:
        return ()
    if not isinstance(tables, (list, tuple)):
        raise InvalidArgument(f"binding: must be an array of tables, got {type(tables).__name__}", field=None)
    bindings = tuple(Binding.from_config(t, f"binding[{i}]") for i, t in enumerate(tables))
    _check_unique(bindings)
    return bindings


def _check_unique(bindings: tuple[Binding, ...]) -> None:
    """Two bindings may not name the same topic, NATS subject or Pravega pair."""
    seen: dict[tuple[str, object], int] = {}
    for i, b in enumerate(bindings):
        keys = [("stream", (b.stream, b.topic))]
        if b.nats_subject is not None:
            keys.append(("nats_subject", b.nats_subject))
        if b.binds_pravega:
            keys.append(("pravega_scope", b.pravega_names))
        for field, value in keys:
            prev = seen.setdefault((field, value), i)
            if prev != i:
                raise InvalidArgument(
                    f"binding[{i}].{field}: {value!r} is already bound by binding[{prev}]", field=field
                )


# -- the rule ------------------------------------------------------------------
class Addressing:
    """The addressing rule plus the configured bindings. Immutable after construction.

    ``exists`` is the default callback for :meth:`topic_for_subject`.
    """

    def __init__(self, bindings: Iterable[Binding] = (), exists: ExistsFn | None = None) -> None:
        self.bindings = tuple(bindings)
        _check_unique(self.bindings)
        self._exists = exists
        self._by_topic = {(b.stream, b.topic): b for b in self.bindings}
        self._by_subject = {tuple(b.nats_subject.split(SEP)): b for b in self.bindings if b.nats_subject}
        self._max_depth = max((len(k) for k in self._by_subject), default=0)
        self._by_pravega = {b.pravega_names: b for b in self.bindings if b.binds_pravega}

    def binding_for(self, stream: str, topic: str) -> Binding | None:
        return self._by_topic.get((stream, topic))

    def bindings_to_create(self) -> list[Binding]:
        """Bindings with ``create = true``: the gateway creates these topics at start."""
        return [b for b in self.bindings if b.create]

    # -- NATS ----------------------------------------------------------------
    def live_subject_for(self, stream: str, topic: str) -> str | None:
        """The subject NATS subscribers see for messages appended by other
        protocols, or ``None`` when the topic is not NATS-visible."""
        b = self._by_topic.get((stream, topic))
        if b is not None and b.nats_subject is not None:
            return b.nats_subject
        if not (is_nats_token(stream) and is_nats_token(topic)):
            return None
        by_subject = self._by_subject
        if by_subject and ((stream,) in by_subject or (stream, topic) in by_subject):
            return None  # a binding claims this subject for another topic
        return stream + SEP + topic

    def nats_subjects_for(self, stream: str, topic: str) -> list[str]:
        """The capture patterns of a topic: ``[s, s + ".>"]``, or ``[]`` if not NATS-visible.

        A longer bound subject under ``s`` is carved out for its own topic."""
        subject = self.live_subject_for(stream, topic)
        return [] if subject is None else [subject, subject + SEP + ">"]

    def owner_of_subject(self, subject: str) -> tuple[str, str] | None:
        """The topic that captures ``subject`` by the rule alone (existence not checked)."""
        tokens = subject.split(SEP)
        if "" in tokens:
            return None
        if self._max_depth:
            for n in range(min(len(tokens), self._max_depth), 0, -1):
                b = self._by_subject.get(tuple(tokens[:n]))
                if b is not None:
                    return (b.stream, b.topic)
        if len(tokens) < 2:
            return None
        stream, topic = tokens[0], tokens[1]
        if not (is_nats_token(stream) and is_nats_token(topic)):
            return None
        b = self._by_topic.get((stream, topic))
        if b is not None and b.nats_subject is not None:
            return None  # this topic answers to its bound subject only
        return (stream, topic)

    def topic_for_subject(self, subject: str, exists: ExistsFn | None = None) -> tuple[str, str] | None:
        """The existing topic a NATS publish on ``subject`` is stored in, or
        ``None`` (plain core NATS: delivered, not stored).

        Bindings are checked first (most specific subject wins), then the
        default rule. Raises ``TypeError`` when no ``exists`` callback was
        given here or to the constructor."""
        exists = exists or self._exists
        if exists is None:
            raise TypeError("topic_for_subject needs an exists(stream, topic) callback")
        owner = self.owner_of_subject(subject)
        if owner is None or not exists(owner[0], owner[1]):
            return None
        return owner

    def delivery_subject(self, stream: str, topic: str, stored: str | None) -> str | None:
        """The subject to deliver a stored message of this topic on, to NATS.

        ``stored`` is the message's :data:`SUBJECT_HEADER` value, if any; it
        is used when it is a literal subject this topic captures, otherwise
        the topic's live subject (``None``: not NATS-visible)."""
        if stored and is_valid_subject(stored) and self.owner_of_subject(stored) == (stream, topic):
            return stored
        return self.live_subject_for(stream, topic)

    # -- Pravega ---------------------------------------------------------------
    def pravega_names_for(self, stream: str, topic: str) -> tuple[str, str] | None:
        """Pravega ``(scope, stream)`` of a topic, or ``None`` if not Pravega-visible."""
        b = self._by_topic.get((stream, topic))
        if b is not None and b.binds_pravega:
            return b.pravega_names
        if not (is_pravega_name(stream) and is_pravega_name(topic)):
            return None
        if (stream, topic) in self._by_pravega:
            return None  # a binding gives this Pravega pair to another topic
        return (stream, topic)

    def topic_for_pravega(self, scope: str, stream: str) -> tuple[str, str] | None:
        """Ferry ``(stream, topic)`` named by a Pravega scope and stream, or ``None``.

        Existence is not checked: the Pravega adapter looks the topic up (and
        creates it for createStream) with these names."""
        b = self._by_pravega.get((scope, stream))
        if b is not None:
            return (b.stream, b.topic)
        if not (is_pravega_name(scope) and is_pravega_name(stream)):
            return None
        b = self._by_topic.get((scope, stream))
        if b is not None and b.binds_pravega:
            return None  # this topic answers to its bound Pravega names only
        return (scope, stream)

    # -- HTTP ------------------------------------------------------------------
    @staticmethod
    def http_path_for(stream: str | int, topic: str | int) -> str:
        """``/streams/{stream}/topics/{topic}``, each segment percent-encoded.

        Iggy's HTTP API reads a segment that parses as a number as an id, so a
        purely numeric *name* is only reachable by its id over HTTP."""
        return f"/streams/{quote(str(stream), safe='')}/topics/{quote(str(topic), safe='')}"



def stored_subject(tlv: bytes | memoryview) -> str | None:
    """The :data:`SUBJECT_HEADER` value of a canonical block (the NATS subject a message
    was published on), if any. Cached by block: a subject's messages usually carry the
    same headers, and a scale-out gateway asks for every message it applies."""
    if not tlv:
        return None
    data = tlv if type(tlv) is bytes else bytes(tlv)
    if _SUBJECT_BYTES not in data:  # the key is stored as its raw bytes: absent, no decode
        return None
    try:
        return _STORED_SUBJECTS[data]
    except KeyError:
        pass
    value = Headers.decode(data).get(SUBJECT_HEADER)
    subject = value.as_str() if value is not None and value.kind is HeaderKind.STRING else None
    if len(_STORED_SUBJECTS) >= STORED_SUBJECTS_MAX:
        _STORED_SUBJECTS.clear()
    _STORED_SUBJECTS[data] = subject
    return subject


# Distinct header blocks remembered by stored_subject (a few hundred KiB at most).
STORED_SUBJECTS_MAX = 10_000
_SUBJECT_BYTES = SUBJECT_HEADER.encode()
_STORED_SUBJECTS: dict[bytes, str | None] = {}

__all__ = [
    "Addressing",
    "Binding",
    "DEFAULT_KAFKA_STREAM",
    "KINDS_HEADER",
    "MAX_KAFKA_NAME",
    "MAX_BINDING_PARTITIONS",
    "MAX_NAME_BYTES",
    "MAX_PRAVEGA_NAME",
    "PARTITION_KEY_HEADER",
    "RESERVED_NATS_HEADERS",
    "SUBJECT_HEADER",
    "stored_subject",
    "is_kafka_name",
    "is_nats_token",
    "kafka_name_for",
    "is_pravega_name",
    "parse_bindings",
    "topic_for_kafka",
]
