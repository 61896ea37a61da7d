"""Kafka's layouts on the shared engine (adapters/wire/table.py): fields, nested structs, APIs.

Theory of operation
-------------------
Each API is one :class:`Api`: its key, its name, the version range Ferry
serves, its flexible versions, and the fields of its request and its
response, declared as the spec files lay them out (seed 004): :func:`F` names
a field by its spec name (the Python name is its snake_case form), its type
from :mod:`adapters.kafka.types`, its version range, nullable versions,
default and, for a tagged field, its tag and tagged versions. A struct
nested in an array (or a struct-valued field) is declared inline with
:func:`S`: a name and fields, with their own version ranges.

From that, once, at import, the engine derives per message and per version
the dataclass, the plan, the codec and the hypothesis strategy. Two things
are Kafka's own:

* :meth:`_Kafka.resolve` turns the placeholder types (strings, bytes,
  records, arrays) into their compact forms in flexible versions and their
  nullable forms in the field's nullable versions;
* each nested struct is built as a :class:`KafkaStruct` with its message's
  version range and flexible versions (so it ends with its own tagged-field
  section where the message does), named ``Message.Struct``; a message's
  nested structs are in ``Message.structs`` by their spec names.

Defaults follow the spec: a field without one decodes, in versions that lack
it, as 0, false, "", empty bytes, an empty array, the zero UUID, a struct of
defaults (records: null); ``default=None`` is the spec's ``"null"``.
Fields whose versions all lie outside Ferry's range are left out.

Not carried over: ``ignorable`` (a field set to a non-default value is
silently dropped when encoding a version without it), ``mapKey`` and
``entityType``, which only shape Kafka's generated Java.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable

from adapters.wire import table
from adapters.wire.table import CommandTable, Field, SpecError, parse_versions
from adapters.wire.types import Float, Int, WireType, snake

from .types import BOOL, KAFKA, UUID, ZERO_UUID, Array, StructField, Versioned

_IMPLICIT: Any = object()  # F's default: the spec's implicit default for the type


@dataclass(frozen=True)
class Nested:
    """A struct declared inline (:func:`S`); its message builds it (module docstring)."""

    name: str
    fields: tuple[Field, ...]
    about: str = ""


def S(name: str, *fields: Field, about: str = "") -> Nested:  # noqa: N802 - reads like the spec
    """A nested struct: the spec's type name (without ``[]``) and its fields."""
    return Nested(name, fields, about)


def F(spec_name: str, type_, versions: str = "0+", *, nullable: str | None = None,  # noqa: N802
      default: Any = _IMPLICIT, tag: int | None = None, tagged: str | None = None, about: str = "") -> Field:
    """One field as the spec declares it; ``type_`` a type of :mod:`adapters.kafka.types`, an
    :func:`~adapters.kafka.types.ARRAY` or a :func:`S` struct."""
    return Field(snake(spec_name), type_, default, versions, about, spec_name=spec_name, tag=tag, tagged=tagged,
                 nullable=nullable)


def _implicit_default(t: WireType) -> Any:
    if isinstance(t, Array):
        return ()
    if t is BOOL:
        return False
    if t is UUID:
        return ZERO_UUID
    if isinstance(t, Float):
        return 0.0
    if isinstance(t, Int):
        return 0
    if isinstance(t, Versioned):
        return None if t.name == "records" else t.py()  # "" or b""; Kafka's records default to null
    raise SpecError(f"no implicit default for {t!r}")


class _Kafka:
    """What Kafka's structs and messages share: the wire and the per-version forms."""

    wire = KAFKA
    flexible: frozenset[int]

    def resolve(self, field: Field, version: int) -> WireType:
        t = field.type
        if isinstance(t, Versioned):
            nullable = field.nullable is not None and version in parse_versions(field.nullable, KAFKA.versions)
            return t.form(version in self.flexible, nullable, version)
        return t


def _adopt(fields: Iterable[Field], root: str, versions: str, flexible: str | None,
           structs: dict[str, tuple[Nested, KafkaStruct]]) -> tuple[Field, ...]:
    """``fields`` with their inline structs built and their implicit defaults filled in."""
    out = []
    for f in fields:
        t = f.type
        if isinstance(t, Nested):
            t = StructField(_child(t, root, versions, flexible, structs))
        elif isinstance(t, Array) and isinstance(t.item, Nested):
            t = Array(_child(t.item, root, versions, flexible, structs))
        default = f.default
        if default is _IMPLICIT:
            default = t.struct.cls() if isinstance(t, StructField) else _implicit_default(t)
        out.append(dataclasses.replace(f, type=t, default=default))
    return tuple(out)


def _child(nested: Nested, root: str, versions: str, flexible: str | None,
           structs: dict[str, tuple[Nested, KafkaStruct]]) -> KafkaStruct:
    known = structs.get(nested.name)
    if known is not None:
        if known[0] is not nested:  # the spec's struct names are unique within a message
            raise SpecError(f"{root}: two structs named {nested.name}")
        return known[1]
    child = KafkaStruct(f"{root}.{nested.name}", nested.fields, versions=versions, flexible=flexible,
                        root=root, structs=structs, about=nested.about)
    structs[nested.name] = (nested, child)
    return child


class KafkaStruct(_Kafka, table.Struct):
    """A struct nested in a message (or a header): the message's versions and flexible versions."""

    def __init__(self, name: str, fields: Iterable[Field], *, versions: str, flexible: str | None = None,
                 root: str | None = None, structs: dict | None = None, about: str = "") -> None:
        structs = {} if structs is None else structs
        fields = _adopt(fields, root or name, versions, flexible, structs)
        super().__init__(name, fields, versions=versions, flexible=flexible, about=about)


class Message(_Kafka, table.Command):
    """A request or response body: code = API key, name = the spec's message name."""

    def __init__(self, key: int, name: str, fields: Iterable[Field], *, versions: str, flexible: str | None,
                 about: str = "") -> None:
        self._structs: dict[str, tuple[Nested, KafkaStruct]] = {}
        fields = _adopt(fields, name, versions, flexible, self._structs)
        super().__init__(key, name, fields, versions=versions, flexible=flexible, about=about)
        self.structs = {name: s for name, (_n, s) in self._structs.items()}


class Api:
    """One API: its key, name, the versions Ferry serves (``min``..``max``), its flexible
    versions and its two messages (:class:`Message`, ``request`` and ``response``)."""

    def __init__(self, key: int, name: str, versions: str, *, flexible: str | None,
                 request: Iterable[Field], response: Iterable[Field], about: str = "") -> None:
        self.key = key
        self.name = name
        served = sorted(parse_versions(versions, KAFKA.versions))
        if served != list(range(served[0], served[-1] + 1)):
            raise SpecError(f"{name}: versions {versions!r} are not one range")
        self.min, self.max = served[0], served[-1]
        self.versions = range(self.min, self.max + 1)
        self.about = about
        self.request = Message(key, f"{name}Request", request, versions=versions, flexible=flexible)
        self.response = Message(key, f"{name}Response", response, versions=versions, flexible=flexible)
        self.flexible_versions = self.request.flexible

    def flexible(self, version: int) -> bool:
        """True when ``version`` uses compact forms, tagged fields and the newer headers."""
        return version in self.flexible_versions

    def __repr__(self) -> str:
        return f"<Api {self.key} {self.name} v{self.min}-{self.max}>"


class ApiTable:
    """Every API Ferry serves, by key (``API[18]``), checked when built: the engine's
    command tables refuse a duplicate key or name."""

    def __init__(self, apis: Iterable[Api]) -> None:
        self.apis = tuple(sorted(apis, key=lambda a: a.key))
        self.requests = CommandTable(a.request for a in self.apis)
        self.responses = CommandTable(a.response for a in self.apis)
        self.by_key = {a.key: a for a in self.apis}
        self.by_name = {a.name: a for a in self.apis}

    def __getitem__(self, key: int) -> Api:
        return self.by_key[key]

    def get(self, key: int) -> Api | None:
        return self.by_key.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self.by_key

    def __iter__(self):
        return iter(self.apis)

    def __len__(self) -> int:
        return len(self.apis)

    def ranges(self) -> tuple[tuple[int, int, int], ...]:
        """``(key, min, max)`` per API, by key: what an ApiVersions answer lists."""
        return tuple((a.key, a.min, a.max) for a in self.apis)


__all__ = ["Api", "ApiTable", "F", "KafkaStruct", "Message", "Nested", "S"]
