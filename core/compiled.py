"""Which compiled twins of the per-message loops run (docs/internals.md "Compiled loops").

Every optional C extension (``core._speedups``, ``adapters.iggy._speedups``,
``adapters.nats._speedups``, ``adapters.spark._speedups``; setup.py builds them
where a C compiler is there) is loaded through :func:`load`, so one switch,
``FERRY_PURE_PYTHON=1``, puts every caller on its Python loop, and a missing
build does the same. Read once, at import, by each module that has a twin.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

PURE_PYTHON_ENV = "FERRY_PURE_PYTHON"


def pure_python_requested() -> bool:
    """True when ``FERRY_PURE_PYTHON`` is set to anything but empty or ``0``."""
    return os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")


def load(name: str) -> ModuleType | None:
    """The extension module ``name``, or None when pure Python is asked for or it
    was not built (or fails to initialise: it raises ImportError then)."""
    if pure_python_requested():
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


__all__ = ["PURE_PYTHON_ENV", "load", "pure_python_requested"]
