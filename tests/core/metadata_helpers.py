"""Shared helpers for the metadata store tests (test_metadata*.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from argon2 import PasswordHasher

from core.metadata import Metadata
from log_helpers import T0, FakeClock  # noqa: F401 - re-exported for the metadata tests

# The cheapest parameters argon2 accepts: the tests check behaviour, not cost.
FAST_HASHER = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
def open_meta(path: Path, clock: FakeClock | None = None, **kw) -> Metadata:
    return Metadata(path, clock=clock or FakeClock(), hasher=kw.pop("hasher", FAST_HASHER), **kw)


def raw_rows(path: Path, sql: str, params=()) -> list[tuple]:
    """Read the file with a connection of our own, as a post-mortem would."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def file_bytes(path: Path) -> bytes:
    """The database file plus any -wal/-shm companions, concatenated."""
    return b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))
