"""What the gateway tells diagnostics about itself (Iggy's GetSnapshotFile).

:func:`run_gateway` sets ``broker.diagnostics`` to a :class:`Diagnostics` for
its lifetime: the effective configuration as plain data (the snapshot writer,
adapters/iggy/snapshot.py, redacts secrets before writing it; this module
already drops the root password) and a :class:`RecentLogs` handler on the
``ferry`` logger that keeps the last :data:`MAX_RECENT_LOG_LINES` lines it
emitted, formatted as the text log format. The handler sees what the
``ferry`` logger lets through: records below ``server.log_level`` are never
kept, as they are never printed.
"""

from __future__ import annotations

import collections
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from adapters.iggy.snapshot import REDACTED, plain_data

from .config import Config
from .logs import ROOT_LOGGER, TextFormatter

# A snapshot shows what led up to it; a thousand lines (a few hundred KiB)
# covers minutes of an info-level gateway and bounds the memory kept.
MAX_RECENT_LOG_LINES = 1000


class RecentLogs(logging.Handler):
    """Keeps the last ``limit`` formatted records (thread-safe: worker threads log too)."""

    def __init__(self, limit: int = MAX_RECENT_LOG_LINES) -> None:
        super().__init__()
        self.setFormatter(TextFormatter())
        self._lines: collections.deque[str] = collections.deque(maxlen=limit)
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:  # noqa: BLE001 - logging must never raise (logging.Handler contract)
            self.handleError(record)
            return
        with self._guard:
            self._lines.append(line)

    def lines(self) -> list[str]:
        with self._guard:
            return list(self._lines)


@dataclass(slots=True)
class Diagnostics:
    """``broker.diagnostics`` while a gateway runs."""

    config: dict[str, Any]
    logs: RecentLogs | None = None
    log_note: str = ""
    handler_installed: bool = field(default=False, repr=False)

    def log_lines(self) -> list[str] | None:
        return None if self.logs is None else self.logs.lines()

    def install(self) -> "Diagnostics":
        """Attach the log handler to the ``ferry`` logger (undo with :meth:`remove`)."""
        if self.logs is not None and not self.handler_installed:
            logging.getLogger(ROOT_LOGGER).addHandler(self.logs)
            self.handler_installed = True
        return self

    def remove(self) -> None:
        if self.logs is not None and self.handler_installed:
            logging.getLogger(ROOT_LOGGER).removeHandler(self.logs)
            self.handler_installed = False


def for_gateway(cfg: Config) -> Diagnostics:
    level = logging.getLevelName(logging.getLogger(ROOT_LOGGER).getEffectiveLevel()).lower()
    note = f"kept in memory, the last {MAX_RECENT_LOG_LINES} at level {level} and above"
    return Diagnostics(config_data(cfg), RecentLogs(), note)


def config_data(cfg: Config) -> dict[str, Any]:
    """The effective configuration as JSON-ready data, keyed as the TOML file is
    (``server``, ``log``, ``auth``, ``listeners.<name>``, ``binding``)."""
    listeners = {lc.name: {"enabled": lc.enabled, "host": lc.host, "port": lc.port, "transport": lc.transport,
                           **{k: plain_data(v) for k, v in lc.options.items()}} for lc in cfg.listeners}
    return {
        "source": str(cfg.source) if cfg.source else None,
        "server": plain_data(cfg.server),
        "log": {**plain_data(cfg.log), "retention_interval_seconds": cfg.retention_interval_s},
        "auth": {"root_username": cfg.auth.root_username, "root_password": REDACTED},
        "listeners": listeners,
        "binding": [plain_data(b) for b in cfg.bindings],
    }


__all__ = ["Diagnostics", "MAX_RECENT_LOG_LINES", "RecentLogs", "config_data", "for_gateway"]
