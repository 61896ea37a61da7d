"""One value per owner object, dropped with the owner: :class:`PerOwner`.

Several parts keep state per broker without the Broker knowing about them: the
metrics registry (core/metrics.py ``metrics_for``), the console's connection
directory (core/connections.py ``directory_for``), the live Iggy sessions
(adapters/iggy/session.py ``sessions_of``), the JetStream API
(adapters/nats/jetstream/api.py ``jetstream_for``), the NATS listeners' shared
state (adapters/nats/server_state.py ``shared_state``), the Pravega state
(adapters/pravega/state.py ``state_of``). Each keeps its values in a
:class:`weakref.WeakKeyDictionary` keyed by the owner, so a closed broker (the
tests open thousands) leaves nothing behind; this is that map, written once.

An owner that cannot be weakly referenced (a slotted test double) has nothing
stored: :meth:`PerOwner.get` answers None for it, :meth:`PerOwner.set` raises
TypeError, and :meth:`PerOwner.of` either raises TypeError too or, where the
value is only ever a sink (metrics, the connection list), gives a fresh value
each call (``fresh_if_unweakable=True``): its samples are dropped, nothing
leaks or fails.
"""

from __future__ import annotations

import weakref
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class PerOwner(Generic[T]):
    """A ``T`` per owner, made by ``factory()`` on first :meth:`of`, kept while the owner lives."""

    __slots__ = ("_values", "_factory", "_fresh_if_unweakable")

    def __init__(self, factory: Callable[[], T] | None = None, *, fresh_if_unweakable: bool = False) -> None:
        self._values: weakref.WeakKeyDictionary[object, T] = weakref.WeakKeyDictionary()
        self._factory = factory
        self._fresh_if_unweakable = fresh_if_unweakable

    def get(self, owner: object) -> T | None:
        """The value of ``owner``, or None if it has none (never one for an unweakable owner)."""
        try:
            return self._values.get(owner)
        except TypeError:
            return None

    def of(self, owner: object) -> T:
        """The value of ``owner``, made by the factory on first use."""
        if self._factory is None:
            raise TypeError("PerOwner.of needs a factory; use get and set")
        try:
            value = self._values.get(owner)
            if value is None:
                value = self._values[owner] = self._factory()
        except TypeError:
            if not self._fresh_if_unweakable:
                raise
            return self._factory()
        return value

    def set(self, owner: object, value: T) -> None:
        """Make ``value`` the value of ``owner`` (TypeError for an unweakable owner)."""
        self._values[owner] = value


__all__ = ["PerOwner"]
