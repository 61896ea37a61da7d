"""gateway.lock: one process per data directory."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gateway.lock import LOCK_FILE, DataDirLock, DataDirLocked


def test_second_holder_is_refused_with_the_owner_pid(tmp_path):
    with DataDirLock(tmp_path / "data") as first:
        assert first.held
        assert (tmp_path / "data" / LOCK_FILE).read_text().strip() == str(os.getpid())
        with pytest.raises(DataDirLocked) as info:
            DataDirLock(tmp_path / "data").acquire()
        assert info.value.pid == os.getpid()
        assert "is in use by process" in str(info.value)
    DataDirLock(tmp_path / "data").acquire().release()  # free again after release


def test_lock_held_by_another_process(tmp_path):
    code = ("import sys, time; from gateway.lock import DataDirLock; "
            "l = DataDirLock(sys.argv[1]).acquire(); print('locked', flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(DataDirLocked) as info:
            DataDirLock(tmp_path).acquire()
        assert info.value.pid == proc.pid
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    # the lock died with its process: no stale lock
    DataDirLock(tmp_path).acquire().release()


def test_acquire_is_idempotent_and_creates_the_directory(tmp_path):
    lock = DataDirLock(tmp_path / "a" / "b")
    assert lock.acquire() is lock.acquire()
    lock.release()
    lock.release()
    assert not lock.held
