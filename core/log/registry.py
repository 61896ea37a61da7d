"""What the flusher iterates: any object with ``partitions()`` and
``set_flusher_wakeup(wake)`` (the broker is one). Core imports no trio, so the
flusher hands in a plain ``wake()`` callable that partitions call when they
turn dirty; the flusher then asks each partition ``needs_flush``."""

from __future__ import annotations

from typing import Callable, Iterable, Protocol

from .partition import Partition


class LogRegistry(Protocol):
    def partitions(self) -> Iterable[Partition]:
        """Every open partition (iterated once per flush round)."""
        ...

    def set_flusher_wakeup(self, wake: Callable[[], None]) -> None:
        """Install ``wake`` on every partition, present and future."""
        ...


def _nothing() -> None:
    return None


class PartitionSet:
    """A minimal :class:`LogRegistry`: a list of partitions (tests, CLI tools)."""

    def __init__(self, partitions: Iterable[Partition] = ()) -> None:
        self._wake: Callable[[], None] = _nothing
        self._parts: list[Partition] = []
        for part in partitions:
            self.add(part)

    def add(self, part: Partition) -> Partition:
        part.set_wakeup(self._wake)
        self._parts.append(part)
        return part

    def remove(self, part: Partition) -> None:
        self._parts.remove(part)
        part.set_wakeup(_nothing)

    def partitions(self) -> list[Partition]:
        return self._parts

    def set_flusher_wakeup(self, wake: Callable[[], None]) -> None:
        self._wake = wake
        for part in self._parts:
            part.set_wakeup(wake)
