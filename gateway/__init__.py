"""Ferry's gateway: trio listeners, configuration, the CLI and the process lifecycle.

Nothing imports this package except the ``ferry`` entry point (``gateway.cli:main``)
and the tests (docs/internals.md: gateway -> adapters -> core).
"""

from __future__ import annotations

import functools


@functools.cache
def version() -> str:
    """The installed distribution's version (read once, on first use: importing
    importlib.metadata costs ~30 ms, which every CLI start would pay)."""
    from importlib import metadata

    try:
        return metadata.version("ferry")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def __getattr__(name: str) -> str:
    if name == "__version__":
        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
