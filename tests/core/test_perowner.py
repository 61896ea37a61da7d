"""core.perowner.PerOwner: one value per owner, made once, dropped with the owner."""

from __future__ import annotations

import gc

import pytest

from core.perowner import PerOwner


class Owner:
    """A stand-in broker (weakly referenceable, as Broker is)."""


class Slotted:
    """A slotted test double: no __weakref__, so nothing can be stored for it."""

    __slots__ = ()


def test_of_makes_once_per_owner_and_get_does_not_make():
    made = []
    per = PerOwner(lambda: made.append(1) or object())
    a, b = Owner(), Owner()
    assert per.get(a) is None and made == []
    first = per.of(a)
    assert per.of(a) is first and per.get(a) is first
    assert per.of(b) is not first
    assert len(made) == 2


def test_value_goes_with_its_owner():
    per: PerOwner[list] = PerOwner(list)
    owner = Owner()
    per.of(owner).append("x")
    del owner
    gc.collect()
    assert len(per._values) == 0  # noqa: SLF001 - the weak map itself is the point


def test_set_then_get():
    per: PerOwner[str] = PerOwner()
    owner = Owner()
    per.set(owner, "state")
    assert per.get(owner) == "state"
    with pytest.raises(TypeError):
        per.of(owner)  # no factory: registration only


def test_unweakable_owner():
    strict: PerOwner[list] = PerOwner(list)
    sink: PerOwner[list] = PerOwner(list, fresh_if_unweakable=True)
    owner = Slotted()
    assert strict.get(owner) is None
    with pytest.raises(TypeError):
        strict.of(owner)
    with pytest.raises(TypeError):
        strict.set(owner, [])
    assert sink.of(owner) == [] and sink.of(owner) is not sink.of(owner)  # fresh each call, never kept
