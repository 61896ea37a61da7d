"""Declarative layouts: Field, Struct, Command, CommandTable (STYLE.md section 4, Kafka's message specs).

Theory of operation
-------------------
A body layout is a tuple of :class:`Field` objects (name, wire type from
:mod:`adapters.wire.types`, default, version range). From it, once, when the
table loads, :class:`Struct` derives everything else:

* a frozen, slotted dataclass (``Struct.cls``) whose fields are the union of
  the field names of every version; a field absent from a version takes its
  default when decoded in that version;
* per version a *plan*: runs of consecutive fixed-width scalar fields fused
  into one precompiled ``struct.Struct`` in the wire's byte order, each other
  field read by its type;
* ``decode(version, body)`` / ``encode(version, value)`` / ``write(version,
  out, value)`` walking that plan. The decoder checks lengths in one place: a
  short body raises the protocol's own decode error (``Wire.short``), never
  ``IndexError``; bytes after the last field are an error too, unless the
  struct says ``ignore_tail``;
* ``strategy(version)``: a hypothesis strategy of valid values, so round-trip
  property tests cover every message and version without a list;
* ``to_json(value)``: the JSON-ready form (bytes as base64, tuples as lists).

*Derived* fields (``derive=``) are on the wire but not in the dataclass, like
Kafka's hidden length fields: the encoder computes them from the other
values, the decoder checks them. *Optional* fields (``optional=True``) may be
missing from the end of a body, as peers of older releases leave them out
(Pravega's Java clients): the decoder stops cleanly right before one and gives
it and every later field its default; the encoder always writes every field.

Version ranges are ``"1"``, ``"2+"``, ``"1-2"``, or such ranges joined by
commas (``"1,5"``), over the protocol's ``Wire.versions``; ``None`` means
every version. A protocol with one layout per message has the single version 0.

Versioned layouts (Kafka's message specs) add four things, all off by default:

* :meth:`Struct.resolve` picks a field's concrete wire type per version when
  the plans are built: a protocol whose strings or lists change form between
  versions (a compact count, a nullable form) declares a placeholder type and
  overrides the hook; the default is the declared type;
* :meth:`Struct.at` makes a struct, in one version, a wire type, so a list of
  nested structs (each declared with fields and version ranges like a
  top-level one) is an ordinary :class:`~adapters.wire.types.ListOf`;
* ``flexible=`` versions end the struct with a *tagged-field section*: an
  unsigned varint count, then per field its tag, its byte size (both unsigned
  varints) and its bytes. Fields declared with ``tag=`` (in their ``tagged=``
  versions, by default all of theirs) travel there instead of in line: a
  known tag decodes into its dataclass field, an absent one leaves the
  default, an unknown one is skipped; the encoder writes, in tag order, the
  tagged fields whose value differs from their default. A nested struct has
  its own section, in the same versions;
* ``Field.nullable``: the versions in which the value may be ``None``, for a
  protocol's ``resolve`` to read (the engine only parses it).

:class:`Struct` and :class:`CommandTable` refuse a bad spec when it loads:
duplicate codes or names, a code outside ``Wire.codes``, overlapping version
ranges for one field name, a rest-of-body field that is not last, a required
field after an optional one, a default its type cannot write.

A protocol subclasses :class:`Struct` and :class:`Command` once, to bind its
:class:`~adapters.wire.types.Wire` (the ``wire`` class attribute) and to add
what only it knows about a command (Iggy's VSR operation, Pravega's
block-only frames).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import re
import struct
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from .types import Wire, WireType, read_uvarint, uvarint_bytes

REQUIRED = object()  # a Field default: none; the value must be given
_FIXED, _VAR = "fixed", "var"  # plan step kinds


class SpecError(Exception):
    """A declared layout or table is malformed: a bug in its declarations, raised at import."""


@functools.lru_cache(maxsize=None)  # a handful of distinct ranges, parsed per field and version at load
def parse_versions(text: str | None, versions: tuple[int, ...]) -> frozenset[int]:
    """``"1"``, ``"2+"``, ``"1-2"``, ``"1,4-5"`` or ``None`` (all) -> the set of versions."""
    if text is None:
        return frozenset(versions)
    if "," in text:
        return frozenset().union(*(parse_versions(part, versions) for part in text.split(",")))
    try:
        if text.endswith("+"):
            lo, hi = int(text[:-1]), versions[-1]
        elif "-" in text:
            a, b = text.split("-", 1)
            lo, hi = int(a), int(b)
        else:
            lo = hi = int(text)
    except ValueError:
        raise SpecError(f"bad version range {text!r}") from None
    if lo not in versions or hi not in versions or lo > hi:
        raise SpecError(f"version range {text!r} outside versions {versions}")
    return frozenset(range(lo, hi + 1))


@dataclass(frozen=True)
class Field:
    """One field of a layout. ``spec_name``: the name the protocol's spec uses when the
    Python name differs (Pravega's camelCase), for docs and greps."""

    name: str
    type: WireType
    default: Any = REQUIRED
    versions: str | None = None
    about: str = ""
    derive: Callable[[dict], int] | None = None
    optional: bool = False  # may be missing from the end of a body (module docstring)
    spec_name: str = ""
    tag: int | None = None  # travels in the tagged-field section (module docstring)
    tagged: str | None = None  # the versions in which it is tagged; None: all of the field's
    nullable: str | None = None  # the versions in which it may be None, for Struct.resolve


class Plan:
    """The decode/encode steps of one struct in one version.

    ``steps`` are ``(kind, how, fields, optional)``: ``("fixed", struct.Struct, fields,
    False)`` for a fused run of required scalars, ``("fixed", struct.Struct, (f,), True)``
    for an optional scalar (decoding may stop before it), ``("var", f, (f,), optional)``
    for a field its type reads. Fields carry their type resolved for the version.
    ``flexible``: the body ends with a tagged-field section; ``tagged``: the fields
    that travel there, in tag order, and ``by_tag`` the same by tag."""

    __slots__ = ("steps", "fields", "fixed_size", "names", "derived", "positional", "flexible", "tagged", "by_tag")

    def __init__(self, fields: list[Field], order: str, class_names: list[str], *,
                 flexible: bool = False, tagged: Iterable[Field] = ()) -> None:
        self.fields = fields
        self.flexible = flexible
        self.tagged = tuple(sorted(tagged, key=lambda f: f.tag))
        self.by_tag = {f.tag: f for f in self.tagged}
        self.steps: list[tuple] = []
        run: list[Field] = []
        for f in fields:
            if f.type.fmt is not None and not f.optional:
                run.append(f)
                continue
            self._flush(run, order)
            run = []
            if f.type.fmt is not None:
                self.steps.append((_FIXED, struct.Struct(order + f.type.fmt), (f,), True))
            else:
                self.steps.append((_VAR, f, (f,), f.optional))
        self._flush(run, order)
        self.fixed_size = sum(s[1].size for s in self.steps if s[0] == _FIXED)
        self.names = [f.name for f in fields if f.derive is None]
        # Wire positions of derived fields: taken out of the decoded values, then checked.
        self.derived = {i: f for i, f in enumerate(fields) if f.derive is not None}
        # The class takes the decoded values positionally when they are a prefix of its fields.
        self.positional = self.names == class_names[: len(self.names)]

    def _flush(self, run: list[Field], order: str) -> None:
        if run:
            self.steps.append((_FIXED, struct.Struct(order + "".join(f.type.fmt for f in run)), tuple(run), False))


def _class_name(name: str) -> str:
    """``stream.create`` -> ``StreamCreate``, ``stream_record`` -> ``StreamRecord``;
    ``SetupAppend`` stays as it is."""
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[._]", name))


class Struct:
    """A body layout (request, response record, ...) declared by fields."""

    wire: Wire  # set by each protocol's subclass
    module: str | None = None  # the module the derived classes claim (pickling, reprs)
    kind = "struct"  # in messages

    def __init__(self, name: str, fields: Iterable[Field], *, versions: str | None = None,
                 ignore_tail: bool = False, flexible: str | None = None, about: str = "") -> None:
        self.name = name
        self.fields = tuple(fields)
        self.dialects = parse_versions(versions, self.wire.versions)
        self.ignore_tail = ignore_tail  # body bytes after the fields are skipped, not refused
        # The versions that end with a tagged-field section (None: none, unlike a field's range).
        self.flexible = (frozenset() if flexible is None
                         else parse_versions(flexible, self.wire.versions) & self.dialects)
        self.about = about
        self._field_versions = [parse_versions(f.versions, self.wire.versions) for f in self.fields]
        self._tagged_versions = [
            (fv if f.tagged is None else parse_versions(f.tagged, self.wire.versions)) if f.tag is not None
            else frozenset() for f, fv in zip(self.fields, self._field_versions)]
        self._at: dict[int, StructType] = {}
        self._check()
        self.cls = self._make_class()
        class_names = [f.name for f in dataclasses.fields(self.cls)]
        self.plans = {d: self._plan(d, class_names) for d in self.dialects}

    def _plan(self, d: int, class_names: list[str]) -> Plan:
        inline: list[Field] = []
        tagged: list[Field] = []
        for f, fv, tv in zip(self.fields, self._field_versions, self._tagged_versions):
            if d in fv:
                (tagged if d in tv else inline).append(self._resolved(f, d))
        return Plan(inline, self.wire.order, class_names, flexible=d in self.flexible, tagged=tagged)

    def resolve(self, field: Field, version: int) -> WireType:
        """The concrete wire type of ``field`` in ``version``: its declared type here; a
        protocol whose types change form by version overrides this (module docstring)."""
        return field.type

    def _resolved(self, f: Field, version: int) -> Field:
        t = self.resolve(f, version)
        return f if t is f.type else dataclasses.replace(f, type=t)

    def at(self, version: int) -> StructType:
        """This struct in ``version`` as a wire type (a list item, a struct-valued field)."""
        t = self._at.get(version)
        if t is None:
            t = self._at[version] = StructType(self, version)
        return t

    # -- load-time checks -----------------------------------------------------------------
    def _check(self) -> None:
        if not _class_name(self.name).isidentifier():
            raise SpecError(f"{self.kind} name {self.name!r} is not an identifier")
        seen: dict[str, frozenset[int]] = {}
        for f, fv, tv in zip(self.fields, self._field_versions, self._tagged_versions):
            where = f"{self.name}.{f.spec_name or f.name}"
            if not isinstance(f.type, WireType):
                raise SpecError(f"{where}: {f.type!r} is not a WireType")
            if f.nullable is not None:
                parse_versions(f.nullable, self.wire.versions)  # a bad range is a SpecError
            self._check_tag(where, f, fv, tv)
            if not f.name.isidentifier():
                raise SpecError(f"{where}: duplicate or invalid field name: not an identifier")
            if f.name in seen and seen[f.name] & fv:
                raise SpecError(f"{where}: duplicate or invalid field name: overlapping version ranges")
            seen[f.name] = seen.get(f.name, frozenset()) | fv
            if f.optional and f.default is REQUIRED:
                raise SpecError(f"{where}: an optional field needs a default")
            if f.optional and self.flexible:
                raise SpecError(f"{where}: optional trailing fields and a tagged-field section exclude each other")
            if f.default is not REQUIRED:
                present = fv & self.dialects
                types = {id(t): t for t in (self.resolve(f, d) for d in sorted(present))} if present else {0: f.type}
                for t in types.values():
                    if not t.valid(f.default):
                        raise SpecError(f"{where}: default {f.default!r} does not fit {t!r}")
        for d in self.dialects:
            present = [f for f, fv in zip(self.fields, self._field_versions) if d in fv]
            for f in present[:-1]:
                if f.type.rest:
                    raise SpecError(f"{self.name}.{f.name}: a rest-of-body field must be last")
            optional_seen = False
            for f in present:
                if f.optional:
                    optional_seen = True
                elif optional_seen:
                    raise SpecError(f"{self.name}.{f.name}: a required field cannot follow an optional one")
            tags = [f.tag for f, tv in zip(self.fields, self._tagged_versions) if d in tv]
            if len(tags) != len(set(tags)):
                raise SpecError(f"{self.name}: duplicate tag in version {d}")

    def _check_tag(self, where: str, f: Field, fv: frozenset[int], tv: frozenset[int]) -> None:
        if f.tag is None:
            if f.tagged is not None:
                raise SpecError(f"{where}: tagged versions without a tag")
            return
        if isinstance(f.tag, bool) or not isinstance(f.tag, int) or f.tag < 0:
            raise SpecError(f"{where}: tag {f.tag!r} is not a non-negative int")
        if not tv <= fv:
            raise SpecError(f"{where}: tagged in versions the field does not have")
        if not (tv & self.dialects) <= self.flexible:
            raise SpecError(f"{where}: tagged in a version without a tagged-field section")
        if f.default is REQUIRED or f.derive is not None or f.optional:
            raise SpecError(f"{where}: a tagged field needs a default and cannot be derived or optional")

    def _make_class(self):
        specs: list[tuple] = []
        names: list[str] = []
        for f in self.fields:
            if f.derive is not None or f.name in names:
                continue
            names.append(f.name)
        for n in names:
            decl = [(f, fv) for f, fv in zip(self.fields, self._field_versions) if f.name == n]
            covered = frozenset().union(*(fv for _f, fv in decl))
            default = next((f.default for f, _fv in decl if f.default is not REQUIRED), REQUIRED)
            if default is REQUIRED and covered != self.dialects:
                default = None  # absent in some version: decodes as None there
            py = decl[0][0].type.py
            specs.append((n, py) if default is REQUIRED else (n, py, dataclasses.field(default=default)))
        # Required fields first: a dataclass cannot put one after a defaulted field.
        specs.sort(key=lambda s: len(s) == 3)
        cls = dataclasses.make_dataclass(_class_name(self.name), specs, frozen=True, slots=True)
        if self.module is not None:
            cls.__module__ = self.module  # make_dataclass's module= needs Python 3.12
        cls.__doc__ = f"{self._title()}: {self._layout() or 'no fields'}. {self.about}".rstrip()
        return cls

    def _title(self) -> str:
        return self.name

    def _layout(self) -> str:
        def one(f: Field) -> str:
            text = f"{f.spec_name or f.name} {f.type.name}"
            if f.optional:
                text += f" (opt {f.default!r})"
            return text + (f" [{f.versions}]" if f.versions else "")

        return ", ".join(one(f) for f in self.fields)

    # -- codec ----------------------------------------------------------------------------
    def decode(self, dialect: int, buf, pos: int = 0, end: int | None = None, *, exact: bool = True):
        """Decode one value of version ``dialect``; with ``exact`` the body must end right
        after it (or its ``ignore_tail`` skips the rest).

        Returns the dataclass instance (and, with ``exact=False``, the next position
        as ``(value, pos)``). Raises the wire's decode error."""
        end = len(buf) if end is None else end
        plan = self.plans[dialect]
        values: list[Any] = []
        for kind, how, fields, optional in plan.steps:
            if optional and pos == end:
                break  # the body stops before an optional field: defaults for the rest
            if kind == _FIXED:
                if end - pos < how.size:
                    raise self._cut(fields, end - pos)
                values.extend(how.unpack_from(buf, pos))
                pos += how.size
            else:
                try:
                    value, pos = how.type.read(buf, pos, end)
                except self.wire.error_type as exc:
                    if self.wire.at is None:
                        raise
                    raise self.wire.at(f"{self.name}.{how.name}", exc) from None
                values.append(value)
        tagged = None
        if plan.flexible:
            tagged, pos = self._read_tagged(plan, buf, pos, end)
        if exact and pos != end and not self.ignore_tail:
            raise self.wire.error(f"{self.name}: {end - pos} trailing bytes")
        if plan.derived:
            values = self._check_derived(plan, values)
        if tagged:
            obj = self.cls(**dict(zip(plan.names, values)), **tagged)
        else:
            obj = self.cls(*values) if plan.positional else self.cls(**dict(zip(plan.names, values)))
        return obj if exact else (obj, pos)

    def _read_tagged(self, plan: Plan, buf, pos: int, end: int) -> tuple[dict, int]:
        """The tagged-field section at ``pos``: the values of the known tags, by name."""
        wire = self.wire
        count, pos = read_uvarint(wire, buf, pos, end, 32, f"{self.name} tag count")
        if 2 * count > end - pos:  # a tag and a size take a byte each at least
            raise wire.error(f"{self.name}: {count} tagged fields cannot fit in {end - pos} bytes")
        found: dict[str, Any] = {}
        for _ in range(count):
            tag, pos = read_uvarint(wire, buf, pos, end, 32, f"{self.name} tag")
            size, pos = read_uvarint(wire, buf, pos, end, 32, f"{self.name} tag size")
            if size > end - pos:
                raise wire.short(f"{self.name} tag {tag}")
            f = plan.by_tag.get(tag)
            if f is not None:  # an unknown tag is skipped: a newer peer may send it
                try:
                    value, stop = f.type.read(buf, pos, pos + size)
                except wire.error_type as exc:
                    if wire.at is None:
                        raise
                    raise wire.at(f"{self.name}.{f.name}", exc) from None
                if stop != pos + size:
                    raise wire.error(f"{self.name}.{f.name}: tagged size {size}, value of {stop - pos} bytes")
                found[f.name] = value
            pos += size
        return found, pos

    def _cut(self, fields: tuple[Field, ...], avail: int) -> Exception:
        """The error for a fused run the body cuts short: for the struct, or (with
        ``Wire.at``) for the first field of the run that does not fit."""
        if self.wire.at is None:
            return self.wire.short(self.name)
        for f in fields:
            if avail < f.type.fixed:
                break
            avail -= f.type.fixed
        return self.wire.at(f"{self.name}.{f.name}", self.wire.short(f.type.name))

    def _check_derived(self, plan: Plan, on_wire: list) -> list:
        values = [v for i, v in enumerate(on_wire) if i not in plan.derived]
        named = dict(zip(plan.names, values))
        for i, f in plan.derived.items():
            if i < len(on_wire) and f.derive(named) != on_wire[i]:
                raise self.wire.error(f"{self.name}.{f.name} is inconsistent")
        return values

    def encode(self, dialect: int, value) -> bytes:
        out: list[bytes] = []
        self.write(dialect, out, value)
        return b"".join(out)

    def write(self, dialect: int, out: list, value) -> None:
        """Append the body of ``value`` in version ``dialect``; every field, optional or not."""
        plan = self.plans[dialect]
        if plan.derived:
            named = {n: getattr(value, n) for n in plan.names}

            def get(f: Field):
                return f.derive(named) if f.derive is not None else named[f.name]
        else:
            def get(f: Field):
                return getattr(value, f.name)
        for kind, how, fields, _optional in plan.steps:
            if kind == _FIXED:
                out.append(how.pack(*[get(f) for f in fields]))
            else:
                how.type.write(out, get(how))
        if plan.flexible:
            self._write_tagged(plan, out, value)

    @staticmethod
    def _write_tagged(plan: Plan, out: list, value) -> None:
        """The tagged-field section: the tagged fields not at their default, in tag order."""
        items = []
        for f in plan.tagged:
            v = getattr(value, f.name)
            if v != f.default:
                data: list[bytes] = []
                f.type.write(data, v)
                items.append((f.tag, b"".join(data)))
        out.append(uvarint_bytes(len(items)))
        for tag, data in items:
            out.append(uvarint_bytes(tag))
            out.append(uvarint_bytes(len(data)))
            out.append(data)

    def make(self, **values):
        return self.cls(**values)

    # -- derived views --------------------------------------------------------------------
    def strategy(self, dialect: int):
        """Hypothesis strategy of valid values for version ``dialect`` (test-only)."""
        from hypothesis import strategies as st

        plan = self.plans[dialect]
        kwargs = {f.name: f.type.strategy() for f in (*plan.fields, *plan.tagged) if f.derive is None}
        return st.builds(self.cls, **kwargs)

    def to_json(self, value) -> dict:
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def _jsonable(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, tuple) and hasattr(v, "_asdict"):
        return {k: _jsonable(x) for k, x in v._asdict().items()}
    if isinstance(v, (tuple, list)):
        return [_jsonable(x) for x in v]
    if dataclasses.is_dataclass(v):
        return {f.name: _jsonable(getattr(v, f.name)) for f in dataclasses.fields(v)}
    return v


class StructType(WireType):
    """A struct in one version as a field type (:meth:`Struct.at`): its fields, then its own
    tagged-field section in its flexible versions; the value is its dataclass."""

    def __init__(self, struct: Struct, version: int) -> None:
        self.struct = struct
        self.version = version
        self.wire = struct.wire
        self.name = struct.name
        self.py = struct.cls
        plan = struct.plans[version]
        self.min_size = sum(f.type.min_size for f in plan.fields) + (1 if plan.flexible else 0)

    def read(self, buf, pos, end):
        return self.struct.decode(self.version, buf, pos, end, exact=False)

    def write(self, out, value):
        if not isinstance(value, self.struct.cls):
            raise TypeError(f"{self.name} expects {self.struct.cls.__name__}, got {value!r}")
        self.struct.write(self.version, out, value)

    def strategy(self):
        return self.struct.strategy(self.version)


class Command(Struct):
    """A request or reply with a code and a name, listed in a :class:`CommandTable`."""

    kind = "command"

    def __init__(self, code: int, name: str, fields: Iterable[Field] = (), *, versions: str | None = None,
                 ignore_tail: bool = False, flexible: str | None = None, about: str = "") -> None:
        self.code = code
        super().__init__(name, fields, versions=versions, ignore_tail=ignore_tail, flexible=flexible, about=about)

    def _title(self) -> str:
        return f"{self.name} ({self.code})"

    def __repr__(self) -> str:
        return f"<Command {self.code} {self.name}>"


class CommandTable:
    """All commands of a protocol, checked when built; lookups by code, name and class."""

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
            if c.code not in c.wire.codes:
                raise SpecError(f"command code {c.code} is not {c.wire.codes_about}")
            self.by_code[c.code] = c
            self.by_name[c.name] = c
            self.by_cls[c.cls] = c

    def get(self, code: int, dialect: int) -> Command | None:
        """The command with ``code`` in version ``dialect``, or ``None`` (unknown there)."""
        cmd = self.by_code.get(code)
        return cmd if cmd is not None and dialect in cmd.dialects else None

    def __iter__(self):
        return iter(self.commands)

    def __len__(self) -> int:
        return len(self.commands)


__all__ = ["Command", "CommandTable", "Field", "Plan", "REQUIRED", "SpecError", "Struct", "StructType",
           "parse_versions"]
