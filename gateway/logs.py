"""Structured logging on the standard library.

Modules log with ``logging.getLogger("ferry.<part>")`` and pass structured
fields through ``extra={...}``. :func:`configure` installs one handler on the
``ferry`` logger that renders records either as

* ``text``: ``2024-05-01T12:00:00.123Z INFO  ferry.gateway listener started name=nats port=4222``
  (values with spaces or quotes are quoted), or
* ``json``: one JSON object per line with ``ts``, ``level``, ``logger``,
  ``msg``, the extra fields, and ``exc`` when an exception is attached.

Guarding hot-path calls (``if log.isEnabledFor(DEBUG)``) is the callers' job
(STYLE.md section 7).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import IO, Any

ROOT_LOGGER = "ferry"
FORMATS = ("text", "json")

# Attributes every LogRecord has; anything else on a record came from `extra`.
_STANDARD_ATTRS = frozenset(vars(logging.LogRecord("x", 0, "x", 0, "x", None, None))) | {"message", "asctime"}


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields a caller attached with ``extra={...}``."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD_ATTRS and not k.startswith("_")}


def _timestamp(record: logging.LogRecord) -> str:
    """RFC 3339 UTC with milliseconds (sortable, unambiguous across hosts)."""
    secs = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{secs}.{int(record.msecs):03d}Z"


def _text_value(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value) if isinstance(value, bytes) else str(value)
    if not text or any(c in text for c in ' "=\n\t'):
        return json.dumps(text)
    return text


class TextFormatter(logging.Formatter):
    """Human-readable lines with ``key=value`` fields appended."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [_timestamp(record), f"{record.levelname:<5}", record.name, record.getMessage()]
        parts.extend(f"{k}={_text_value(v)}" for k, v in record_fields(record).items())
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line; values JSON cannot hold are rendered with ``str``."""

    def format(self, record: logging.LogRecord) -> str:
        obj: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record_fields(record).items():
            obj.setdefault(key, value)
        if record.exc_info:
            obj["exc"] = self.formatException(record.exc_info)
        return json.dumps(obj, default=str, ensure_ascii=False)


def make_formatter(fmt: str) -> logging.Formatter:
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    return JsonFormatter() if fmt == "json" else TextFormatter()


def configure(level: str = "info", fmt: str = "text", stream: IO[str] | None = None) -> logging.Handler:
    """Send every ``ferry.*`` record at ``level`` or above to ``stream`` (stderr).

    Replaces a handler installed by an earlier call, so calling it twice
    (tests, the CLI) never doubles lines. Returns the handler."""
    logger = logging.getLogger(ROOT_LOGGER)
    for old in [h for h in logger.handlers if getattr(h, "_ferry", False)]:
        logger.removeHandler(old)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(make_formatter(fmt))
    handler._ferry = True  # type: ignore[attr-defined]  # marks the handler this module owns
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False
    return handler


__all__ = ["JsonFormatter", "TextFormatter", "configure", "make_formatter", "record_fields"]
