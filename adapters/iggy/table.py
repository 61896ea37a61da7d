"""Iggy's layouts on the shared engine (adapters/wire/table.py): dialects, Struct, Command.

The engine derives dataclasses, plans, codecs and strategies from the
declarations in :mod:`adapters.iggy.spec` (requests) and
:mod:`adapters.iggy.replies` (response records); this module binds it to
Iggy's conventions (:data:`adapters.iggy.types.IGGY`) and adds what only Iggy's
commands carry: whether they need a login and their VSR operation.

Dialect ranges name Ferry's dialect numbers (:mod:`adapters.iggy.spec`):
``"1"``, ``"2+"``, ``"1-2"``, or such ranges joined by commas (``"1,5"``);
``None`` means every dialect. :data:`LEGACY` and :data:`ONE_BASED` name the
two groups that are not one range.
"""

from __future__ import annotations

from typing import Iterable

from adapters.wire import table
from adapters.wire.table import Field, SpecError

from .types import DIALECTS, IGGY

LEGACY = "1-2,4-5"  # the legacy framing (u32 length, u32 code): all but VSR
ONE_BASED = "1,5"  # seed-era numbering: 1-based, client-chosen ids on create, u32 partition (0 = none)


def parse_versions(text: str | None) -> frozenset[int]:
    """``"1"``, ``"2+"``, ``"1-2"``, ``"1,4-5"`` or ``None`` (all) -> the set of dialect numbers."""
    return table.parse_versions(text, DIALECTS)


class Struct(table.Struct):
    """An Iggy body layout (a response record, a snapshot entry)."""

    wire = IGGY


class Command(table.Command):
    """An Iggy request: a code, a dotted name, its fields and how sessions treat it.

    ``auth``: needs a logged-in session. ``vsr_op``: the VSR operation byte
    (iggy-current.md section 5; 2 = NonReplicated read, code at header byte 196).
    ``result_framed``: the VSR reply body starts with the ``u32 count`` result
    section (iggy-current.md section 4.3): by default the ops 128..149, 161,
    162 and 1; a command whose op is the exception declares it (spec.py)."""

    wire = IGGY

    def __init__(self, code: int, name: str, fields: Iterable[Field] = (), *, versions: str | None = None,
                 auth: bool = True, vsr_op: int = 2, result_framed: bool | None = None, about: str = "") -> None:
        self.auth = auth
        self.vsr_op = vsr_op
        self.result_framed = (128 <= vsr_op <= 149 or vsr_op in (161, 162, 1)) if result_framed is None \
            else result_framed
        super().__init__(code, name, fields, versions=versions, about=about)


class CommandTable(table.CommandTable):
    """Iggy's commands; adds the lookup by VSR operation (dialect 3)."""

    def __init__(self, commands: Iterable[Command]) -> None:
        super().__init__(commands)
        self.by_vsr_op: dict[int, Command] = {}
        for c in self.commands:
            if c.vsr_op != 2 and 3 in c.dialects:
                if c.vsr_op in self.by_vsr_op and c.vsr_op != 1:
                    raise SpecError(f"duplicate VSR operation {c.vsr_op}")
                self.by_vsr_op.setdefault(c.vsr_op, c)


__all__ = ["Command", "CommandTable", "LEGACY", "ONE_BASED", "Struct", "parse_versions"]
