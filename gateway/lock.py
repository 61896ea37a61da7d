"""The data-directory lock: one process owns a data directory at a time.

Two brokers appending to the same segment files would interleave records and
corrupt both logs, so every process that opens a data directory (``ferry
serve`` and the admin commands) first takes an exclusive ``flock(2)`` on
``<data_dir>/LOCK``, as Kafka's ``.lock`` and PostgreSQL's ``postmaster.pid``
do. ``flock`` locks vanish with the process, so a crash never leaves a stale
lock behind. The file holds the owner's pid for the error message only.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from core.log.segment import make_dirs

LOCK_FILE = "LOCK"
# The pid text is a few digits; never read more than this from a lock file.
MAX_LOCK_TEXT = 64


class DataDirLocked(Exception):
    """Another process holds the data directory. ``pid`` is its pid if known."""

    def __init__(self, data_dir: Path, pid: int | None) -> None:
        who = f"process {pid}" if pid else "another process"
        super().__init__(f"data directory {str(data_dir)!r} is in use by {who} (a running ferry server?)")
        self.data_dir = data_dir
        self.pid = pid


class DataDirLock:
    """An exclusive lock on one data directory; a context manager.

    ``acquire()`` creates the directory if needed and raises
    :class:`DataDirLocked` at once (never waits) when another holder exists.
    """

    def __init__(self, data_dir: Path | str) -> None:
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "DataDirLock":
        if self._fd is not None:
            return self
        make_dirs(self.data_dir)  # every level it creates is durable (a power cut keeps the names)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise DataDirLocked(self.data_dir, pid) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the last descriptor drops the flock

    def __enter__(self) -> "DataDirLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, MAX_LOCK_TEXT, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None


__all__ = ["DataDirLock", "DataDirLocked", "LOCK_FILE"]
