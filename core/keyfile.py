"""A random secret kept in a file of the data directory (token signing keys).

Created on first use with mode 0600 and fsynced, read back afterwards, so
tokens signed with it stay valid across restarts. Blocking file I/O: call it
once at start (from a worker thread under trio)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def persistent_key(path: Path, nbytes: int) -> bytes:
    """The key stored at ``path`` (hex), made of ``nbytes`` random bytes the first
    time. ValueError when the file holds a shorter key than ``nbytes``."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        text = path.read_text().strip()
        if len(text) < 2 * nbytes:
            raise ValueError(f"{path} holds a key shorter than {nbytes} bytes") from None
        return bytes.fromhex(text)
    key = secrets.token_bytes(nbytes)
    with os.fdopen(fd, "w") as fh:
        fh.write(key.hex() + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return key


__all__ = ["persistent_key"]
