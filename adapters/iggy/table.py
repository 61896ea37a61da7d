"""Declarative command tables: Field, Struct, Command, CommandTable.

Theory of operation
-------------------
A body layout is a tuple of :class:`Field` objects (name, wire type from
:mod:`adapters.iggy.types`, default, dialect range). From it, once, when the
table loads, :class:`Struct` derives everything else (STYLE.md section 4,
Kafka's message specs):

* a frozen, slotted dataclass per struct (``Struct.cls``), whose fields are the
  union of the field names of every dialect; a field absent from a dialect
  takes its default when decoded in that dialect;
* per dialect a *plan*: runs of consecutive fixed-width integer fields fused
  into one precompiled ``struct.Struct``, the variable-width fields between;
* ``decode(dialect, body)`` / ``encode(dialect, value)`` walking that plan.
  The decoder checks lengths in one place: a short frame or a length prefix
  past the end raises :class:`IggyStatus` ``INVALID_COMMAND`` (or the type's
  more precise code), never ``IndexError``; trailing bytes after the last
  field are ``INVALID_COMMAND`` too (Iggy's decoders reject them);
* ``strategy(dialect)``: a hypothesis strategy of valid values, so the
  round-trip property test covers every command and dialect without a list;
* ``to_json(value)``: the JSON-ready form (bytes as base64, tuples as lists).

*Derived* fields (``derive=``) are on the wire but not in the dataclass, like
Kafka's hidden length fields: the encoder computes them from the other
values, the decoder checks them.

Dialect ranges name Ferry's dialect numbers (:mod:`adapters.iggy.spec`):
``"1"``, ``"2+"``, ``"1-2"``, or such ranges joined by commas (``"1,5"``);
``None`` means every dialect. :data:`LEGACY` and :data:`ONE_BASED` name the
two groups that are not one range.

:class:`CommandTable` refuses bad specs when it loads: duplicate codes or
names, overlapping ranges for one field name, a rest-of-body field that is
not last, a default its type cannot encode.
"""

from __future__ import annotations

import base64
import dataclasses
import struct
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from .errors import IggyError, IggyStatus
from .types import WireType

DIALECTS = (1, 2, 3, 4, 5)  # spec.py's docstring says which client each one is
LEGACY = "1-2,4-5"  # the legacy framing (u32 length, u32 code): all but VSR
ONE_BASED = "1,5"  # seed-era numbering: 1-based, client-chosen ids on create, u32 partition (0 = none)
_MISSING = object()


class SpecError(Exception):
    """A command table is malformed: a bug in spec.py, raised at import."""


def parse_versions(text: str | None) -> frozenset[int]:
    """``"1"``, ``"2+"``, ``"1-2"``, ``"1,4-5"`` or ``None`` (all) -> the set of dialect numbers."""
    if text is None:
        return frozenset(DIALECTS)
    if "," in text:
        return frozenset().union(*(parse_versions(part) for part in text.split(",")))
    try:
        if text.endswith("+"):
            lo, hi = int(text[:-1]), DIALECTS[-1]
        elif "-" in text:
            a, b = text.split("-", 1)
            lo, hi = int(a), int(b)
        else:
            lo = hi = int(text)
    except ValueError:
        raise SpecError(f"bad version range {text!r}") from None
    if lo not in DIALECTS or hi not in DIALECTS or lo > hi:
        raise SpecError(f"version range {text!r} outside dialects {DIALECTS}")
    return frozenset(range(lo, hi + 1))


@dataclass(frozen=True)
class Field:
    """One field of a body layout."""

    name: str
    type: WireType
    default: Any = _MISSING
    versions: str | None = None
    about: str = ""
    derive: Callable[[dict], int] | None = None

    @property
    def dialects(self) -> frozenset[int]:
        return parse_versions(self.versions)


class _Plan:
    """The decode/encode steps of one struct in one dialect."""

    __slots__ = ("steps", "fields", "fixed_size")

    def __init__(self, fields: list[Field]) -> None:
        self.fields = fields
        self.steps: list[tuple] = []
        run: list[Field] = []
        for f in fields:
            if f.type.fmt is not None:
                run.append(f)
                continue
            self._flush(run)
            run = []
            self.steps.append(("var", f))
        self._flush(run)
        self.fixed_size = sum(s[1].size for s in self.steps if s[0] == "fixed")

    def _flush(self, run: list[Field]) -> None:
        if run:
            st = struct.Struct("<" + "".join(f.type.fmt for f in run))
            self.steps.append(("fixed", st, tuple(run)))


class Struct:
    """A body layout (request, response record, ...) declared by fields."""

    def __init__(self, name: str, fields: Iterable[Field], *, versions: str | None = None) -> None:
        self.name = name
        self.fields = tuple(fields)
        self.dialects = parse_versions(versions)
        self._check()
        self.cls = self._make_class()
        self.plans = {d: _Plan([f for f in self.fields if d in f.dialects]) for d in self.dialects}

    # -- load-time checks -------------------------------------------------------
    def _check(self) -> None:
        seen: dict[str, frozenset[int]] = {}
        for f in self.fields:
            if not isinstance(f.type, WireType):
                raise SpecError(f"{self.name}.{f.name}: type {f.type!r} is not a WireType")
            if f.name in seen and seen[f.name] & f.dialects:
                raise SpecError(f"{self.name}.{f.name}: overlapping version ranges")
            seen[f.name] = seen.get(f.name, frozenset()) | f.dialects
            if f.default is not _MISSING and not f.type.valid(f.default):
                raise SpecError(f"{self.name}.{f.name}: default {f.default!r} does not fit {f.type!r}")
        for d in self.dialects:
            present = [f for f in self.fields if d in f.dialects]
            for f in present[:-1]:
                if getattr(f.type, "rest", False):
                    raise SpecError(f"{self.name}.{f.name}: a rest-of-body field must be last")

    def _make_class(self):
        specs: list[tuple] = []
        names: list[str] = []
        for f in self.fields:
            if f.derive is not None or f.name in names:
                continue
            names.append(f.name)
        for n in names:
            decl = [f for f in self.fields if f.name == n]
            covered = frozenset().union(*(f.dialects for f in decl))
            default = next((f.default for f in decl if f.default is not _MISSING), _MISSING)
            if default is _MISSING and covered != self.dialects:
                default = None  # absent in some dialect: decodes as None there
            specs.append((n, Any) if default is _MISSING else (n, Any, dataclasses.field(default=default)))
        # Required fields first: a dataclass cannot put one after a defaulted field.
        specs.sort(key=lambda s: len(s) == 3)
        cls_name = "".join(p.capitalize() for p in self.name.replace(".", "_").split("_"))
        return dataclasses.make_dataclass(cls_name, specs, frozen=True, slots=True)

    # -- codec ----------------------------------------------------------------------
    def decode(self, dialect: int, buf, pos: int = 0, end: int | None = None, *, exact: bool = True):
        """Decode one value; with ``exact`` the body must end right after it.

        Returns the dataclass instance (and, with ``exact=False``, the next position
        as ``(value, pos)``). Raises :class:`IggyStatus`."""
        end = len(buf) if end is None else end
        plan = self.plans[dialect]
        values: dict[str, Any] = {}
        derived: dict[str, int] = {}
        for step in plan.steps:
            if step[0] == "fixed":
                st = step[1]
                if end - pos < st.size:
                    raise IggyStatus(IggyError.INVALID_COMMAND, f"{self.name}: frame ends early")
                for f, v in zip(step[2], st.unpack_from(buf, pos)):
                    (derived if f.derive else values)[f.name] = v
                pos += st.size
            else:
                f = step[1]
                v, pos = f.type.read(buf, pos, end)
                (derived if f.derive else values)[f.name] = v
        if exact and pos != end:
            raise IggyStatus(IggyError.INVALID_COMMAND, f"{self.name}: {end - pos} trailing bytes")
        for f in plan.fields:
            if f.derive is not None and f.derive(values) != derived[f.name]:
                raise IggyStatus(IggyError.INVALID_COMMAND, f"{self.name}.{f.name} is inconsistent")
        obj = self.cls(**values)
        return obj if exact else (obj, pos)

    def encode(self, dialect: int, value) -> bytes:
        out: list[bytes] = []
        self.write(dialect, out, value)
        return b"".join(out)

    def write(self, dialect: int, out: list, value) -> None:
        values = {f.name: getattr(value, f.name) for f in self.plans[dialect].fields if f.derive is None}
        for step in self.plans[dialect].steps:
            if step[0] == "fixed":
                out.append(step[1].pack(*(f.derive(values) if f.derive else values[f.name] for f in step[2])))
            else:
                f = step[1]
                f.type.write(out, f.derive(values) if f.derive else values[f.name])

    def make(self, **values):
        return self.cls(**values)

    # -- derived views ------------------------------------------------------------------
    def strategy(self, dialect: int):
        """Hypothesis strategy of valid values for ``dialect`` (test-only)."""
        from hypothesis import strategies as st

        kwargs = {f.name: f.type.strategy() for f in self.plans[dialect].fields if f.derive is None}
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


class Command(Struct):
    """A request: a code, a dotted name, its fields and how sessions treat it.

    ``auth``: needs a logged-in session. ``vsr_op``: the VSR operation byte
    (iggy-current.md section 5; 2 = NonReplicated read, code at header byte 196).
    ``result_framed``: the VSR reply body starts with the ``u32 count`` result
    section (iggy-current.md section 4.3): by default the ops 128..149, 161,
    162 and 1; a command whose op is the exception declares it (spec.py)."""

    def __init__(self, code: int, name: str, fields: Iterable[Field] = (), *, versions: str | None = None,
                 auth: bool = True, vsr_op: int = 2, result_framed: bool | None = None, about: str = "") -> None:
        self.code = code
        self.auth = auth
        self.vsr_op = vsr_op
        self.result_framed = (128 <= vsr_op <= 149 or vsr_op in (161, 162, 1)) if result_framed is None \
            else result_framed
        self.about = about
        super().__init__(name, fields, versions=versions)


class CommandTable:
    """All commands, checked when built; lookups by code and dialect."""

    def __init__(self, commands: Iterable[Command]) -> None:
        self.commands = tuple(commands)
        self.by_code: dict[int, Command] = {}
        self.by_name: dict[str, Command] = {}
        self.by_vsr_op: dict[int, Command] = {}
        for c in self.commands:
            if c.code in self.by_code:
                raise SpecError(f"duplicate command code {c.code}")
            if c.name in self.by_name:
                raise SpecError(f"duplicate command name {c.name!r}")
            if not 0 < c.code < 1 << 32:
                raise SpecError(f"command code {c.code} is not a u32")
            self.by_code[c.code] = c
            self.by_name[c.name] = c
            if c.vsr_op != 2 and 3 in c.dialects:
                if c.vsr_op in self.by_vsr_op and c.vsr_op != 1:
                    raise SpecError(f"duplicate VSR operation {c.vsr_op}")
                self.by_vsr_op.setdefault(c.vsr_op, c)

    def get(self, code: int, dialect: int) -> Command | None:
        """The command with ``code`` in ``dialect``, or ``None`` (unknown there)."""
        cmd = self.by_code.get(code)
        return cmd if cmd is not None and dialect in cmd.dialects else None

    def __iter__(self):
        return iter(self.commands)

    def __len__(self) -> int:
        return len(self.commands)


__all__ = ["Command", "CommandTable", "DIALECTS", "Field", "LEGACY", "ONE_BASED", "SpecError", "Struct",
           "parse_versions"]
