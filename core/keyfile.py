"""A random secret kept in a file of the data directory (token signing keys).

Created on first use with mode 0600, read back afterwards, so tokens signed
with it stay valid across restarts. It is written under a temporary name,
fsynced, renamed into place and its directory fsynced: a power cut then leaves
either no key (a new one is made) or the whole key, never an empty file that
would stop the server from starting, nor a key that vanishes after tokens were
signed with it (tests/gateway/test_powerloss.py, lazyfs). Blocking file I/O:
call it once at start (from a worker thread under trio)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from .log.segment import fsync_dir


def persistent_key(path: Path, nbytes: int) -> bytes:
    """The key stored at ``path`` (hex), made of ``nbytes`` random bytes the first
    time. ValueError when the file holds a shorter key than ``nbytes``."""
    path = Path(path)
    if path.exists():  # one gateway per data directory (its lock), so no one races us here
        text = path.read_text().strip()
        if len(text) < 2 * nbytes:
            raise ValueError(f"{path} holds a key shorter than {nbytes} bytes")
        return bytes.fromhex(text)
    key = secrets.token_bytes(nbytes)
    temp = path.with_name(path.name + ".tmp")  # a leftover from a crash is overwritten
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key.hex() + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(temp, path)
    fsync_dir(path.parent)
    return key


__all__ = ["persistent_key"]
