"""Shared helpers for the core.log tests (test_log_*.py)."""

from __future__ import annotations

from pathlib import Path

import trio

from core.log import AppendInput, LogConfig, Partition

T0 = 1_700_000_000_000_000  # µs, a fixed "now" for deterministic timestamps


class FakeClock:
    """A µs clock the test moves by hand."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, us: int) -> int:
        self.now += us
        return self.now


def open_part(path: Path, clock: FakeClock | None = None, **cfg) -> Partition:
    cfg.setdefault("fsync", "always")
    return Partition.open(path, 7, LogConfig(**cfg), clock=clock or FakeClock())


def items(*payloads: bytes | str) -> list[AppendInput]:
    return [AppendInput(p.encode() if isinstance(p, str) else p) for p in payloads]


def numbered(start: int, n: int, size: int = 10) -> list[AppendInput]:
    """``n`` inputs whose payloads say their index: b"m000017......" padded to ``size``."""
    return [AppendInput(f"m{i:06d}".encode().ljust(size, b".")) for i in range(start, start + n)]


def payloads(batch) -> list[bytes]:
    return [bytes(rv.payload) for rv in batch.records()]


def offsets(batch) -> list[int]:
    return [rv.offset for rv in batch.records()]


def read_all(part: Partition) -> list[tuple[int, bytes]]:
    batch = part.read(0, 1 << 30)
    return [(rv.offset, bytes(rv.payload)) for rv in batch.records()]


def segment_files(path: Path, suffix: str = ".log") -> list[Path]:
    return sorted(path.glob("*" + suffix))


class Acks:
    """Collects on_durable outcomes; ``await wait(n)`` returns once n have arrived."""

    def __init__(self) -> None:
        self.outcomes: list[object] = []
        self._event = trio.Event()
        self._want = 0

    def __call__(self, outcome: object) -> None:
        self.outcomes.append(outcome)
        if len(self.outcomes) >= self._want:
            self._event.set()

    async def wait(self, n: int) -> list[object]:
        self._want = n
        if len(self.outcomes) < n:
            self._event = trio.Event()
            await self._event.wait()
        return self.outcomes
