"""JetStream stream configuration: parse, validate, normalise (no trio, no broker).

Theory of operation
-------------------
A ``$JS.API.STREAM.CREATE``/``UPDATE`` body is nats-server's ``StreamConfig``
JSON. :data:`FIELDS` is the one table of the fields Ferry knows: the JSON
type nats-server's Go decoder expects (so a wrong type gets the same
``invalid JSON: json: cannot unmarshal ...`` text), the default nats-server
fills in, and what Ferry does with it (``honour``, ``accept`` = stored and
echoed, documented in docs/nats.md "JetStream"). Any other known-but-missing
feature with a non-empty value is refused (:data:`REFUSED`); unknown keys
are ignored, as Go's decoder ignores them.

:func:`parse_config` returns the normalised config dict in nats-server's key
order, ready to be echoed in replies and kept (as JSON) in the topic's
attributes. :func:`subjects_overlap` is nats-server's overlap rule for two
subject patterns.
"""

from __future__ import annotations

import json
import time
from typing import Any

from core.subjects import FWC, PWC, is_valid_pattern

from .errors import JsApiError, invalid_config, not_supported

NS_PER_S = 1_000_000_000
DEFAULT_DUPLICATE_WINDOW = 120 * NS_PER_S   # nats-server: 2 minutes
API_PREFIX = "$JS.API"
# A stream name becomes a Ferry topic name (1..255 bytes, docs/addressing.md).
MAX_NAME_BYTES = 255
_BAD_NAME_CHARS = frozenset(".*>\\/ \t\r\n\f")

# name -> (Go type named in decode errors, JSON type check, default)
_STR, _INT, _BOOL, _LIST, _MAP = "string", "int64", "bool", "[]string", "map[string]string"
FIELDS: dict[str, tuple[str, Any]] = {
    "name": (_STR, ""),
    "description": (_STR, None),
    "subjects": (_LIST, None),
    "retention": ("RetentionPolicy", "limits"),
    "max_consumers": ("int", -1),
    "max_msgs": (_INT, -1),
    "max_bytes": (_INT, -1),
    "max_age": ("time.Duration", 0),
    "max_msgs_per_subject": (_INT, -1),
    "max_msg_size": ("int32", -1),
    "discard": ("DiscardPolicy", "old"),
    "storage": ("StorageType", "file"),
    "num_replicas": ("int", 1),
    "no_ack": (_BOOL, None),
    "duplicate_window": ("time.Duration", 0),
    "compression": ("StoreCompression", "none"),
    "allow_direct": (_BOOL, False),
    "mirror_direct": (_BOOL, False),
    "sealed": (_BOOL, False),
    "deny_delete": (_BOOL, False),
    "deny_purge": (_BOOL, False),
    "allow_rollup_hdrs": (_BOOL, False),
    "allow_msg_ttl": (_BOOL, False),
    "discard_new_per_subject": (_BOOL, None),
    "metadata": (_MAP, None),
}
_ENUMS = {"retention": ("limits", "interest", "workqueue"), "discard": ("old", "new"),
          "storage": ("file", "memory"), "compression": ("none", "s2")}
# Fields nats-server has that Ferry refuses when set (docs/nats.md "JetStream").
REFUSED = ("mirror", "sources", "republish", "subject_transform", "placement", "first_seq",
           "subject_delete_marker_ttl", "allow_msg_counter", "allow_atomic", "allow_msg_schedules")
# Key order of a config in nats-server's replies.
_ORDER = ("name", "description", "subjects", "retention", "max_consumers", "max_msgs", "max_bytes", "max_age",
          "max_msgs_per_subject", "max_msg_size", "discard", "discard_new_per_subject", "storage", "num_replicas",
          "no_ack",
          "duplicate_window", "compression", "allow_direct", "mirror_direct", "sealed", "deny_delete",
          "deny_purge", "allow_rollup_hdrs", "consumer_limits", "allow_msg_ttl", "metadata")
_INT_RANGE = {"int32": (-(1 << 31), (1 << 31) - 1)}


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def type_error(struct: str, field: str, gotype: str, value: Any) -> JsApiError:
    """The text Go's encoding/json gives for a value of the wrong type."""
    kind = _json_kind(value)
    if isinstance(value, float) and gotype not in (_STR, _BOOL, _LIST, _MAP):
        kind = f"number {value:g}"          # a fraction for an integer field
    return JsApiError("JSInvalidJSONErr",
                      err=f"json: cannot unmarshal {kind} into Go struct field {struct}.{field} of type {gotype}")


def _check_type(field: str, gotype: str, value: Any) -> Any:
    struct = "StreamConfigRequest"
    if gotype == _STR:
        ok = isinstance(value, str)
    elif gotype == _BOOL:
        ok = isinstance(value, bool)
    elif gotype == _LIST:
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    elif gotype == _MAP:
        ok = isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    elif field in _ENUMS:
        if value not in _ENUMS[field]:
            # nats-server quotes the raw JSON value (Go's %q): can not unmarshal "\"bad\""
            raise JsApiError("JSInvalidJSONErr", err=f"can not unmarshal {json.dumps(json.dumps(value))}")
        return value
    else:
        ok = isinstance(value, int) and not isinstance(value, bool)
        lo, hi = _INT_RANGE.get(gotype, (-(1 << 63), (1 << 63) - 1))
        ok = ok and lo <= value <= hi
    if not ok:
        raise type_error(struct, field, gotype, value)
    return value


def go_time(ns: int) -> str:
    """RFC 3339 with nanoseconds, trailing zeros trimmed (Go's RFC3339Nano)."""
    if ns <= 0:
        return "0001-01-01T00:00:00Z"
    secs, frac = divmod(ns, NS_PER_S)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
    return f"{text}.{frac:09d}".rstrip("0").rstrip(".") + "Z"


def parse_go_time(text: str) -> int:
    """RFC 3339 (Go's time.Time JSON) to ns since the epoch."""
    from datetime import datetime
    frac = 0
    base = text.rstrip("Z")
    if "." in base:
        base, digits = base.split(".", 1)
        digits = "".join(ch for ch in digits if ch.isdigit())
        frac = int((digits + "000000000")[:9])
    try:
        dt = datetime.fromisoformat(base + ("+00:00" if text.endswith("Z") else ""))
    except ValueError:
        return 0
    return int(dt.timestamp()) * 1_000_000_000 + frac


def valid_name(name: str) -> bool:
    return bool(name) and not (_BAD_NAME_CHARS & set(name)) and len(name.encode()) <= MAX_NAME_BYTES \
        and name.isprintable()


def parse_config(doc: Any) -> dict[str, Any]:
    """The normalised config of a CREATE/UPDATE body (already JSON-decoded).
    Raises :class:`JsApiError` with nats-server's error for a bad one."""
    if not isinstance(doc, dict):
        raise JsApiError("JSInvalidJSONErr",
                         err=f"json: cannot unmarshal {_json_kind(doc)} into Go value of type server.StreamConfigRequest")
    cfg: dict[str, Any] = {}
    for field, (gotype, default) in FIELDS.items():
        value = doc.get(field)
        cfg[field] = default if value is None else _check_type(field, gotype, value)
    name = cfg["name"]
    if not valid_name(name):
        raise invalid_config("stream name is required and can not contain '.', '*', '>', '\\', '/'")
    if cfg["num_replicas"] > 1:
        raise JsApiError("JSStreamReplicasNotSupportedErr")
    for field in REFUSED:
        if doc.get(field) not in (None, False, 0, [], {}, ""):
            raise not_supported(field)
    if cfg["deny_purge"] and cfg["allow_rollup_hdrs"]:
        raise invalid_config("roll-ups require the purge permission")
    if cfg["discard_new_per_subject"]:
        if cfg["discard"] != "new":
            raise invalid_config("discard new per subject requires discard new policy to be set")
        if cfg["max_msgs_per_subject"] <= 0:
            raise invalid_config("discard new per subject requires max msgs per subject > 0")
    if cfg["sealed"]:
        raise invalid_config("stream configuration for create can not be sealed")
    _normalise_limits(cfg)
    cfg["subjects"] = _check_subjects(cfg["subjects"] or [name])
    return _ordered(cfg, doc.get("metadata"))


def _normalise_limits(cfg: dict[str, Any]) -> None:
    for field in ("max_consumers", "max_msgs", "max_bytes", "max_msgs_per_subject", "max_msg_size"):
        if cfg[field] == 0:
            cfg[field] = -1
    if cfg["max_age"] < 0 or cfg["duplicate_window"] < 0:
        raise invalid_config("max age and duplicates window can not be negative")
    cfg["num_replicas"] = max(cfg["num_replicas"], 1)
    window, age = cfg["duplicate_window"], cfg["max_age"]
    if not window:
        window = min(DEFAULT_DUPLICATE_WINDOW, age) if age else DEFAULT_DUPLICATE_WINDOW
    elif age and window > age:
        raise invalid_config("duplicates window can not be larger then max age")
    cfg["duplicate_window"] = window


def _check_subjects(subjects: list[str]) -> list[str]:
    for i, subject in enumerate(subjects):
        if not is_valid_pattern(subject):
            raise invalid_config("invalid subject")
        if subjects_overlap(subject, API_PREFIX + ".>"):
            raise invalid_config("subjects that overlap with jetstream api require no-ack to be true")
        for other in subjects[i + 1:]:
            if subjects_overlap(subject, other):
                raise invalid_config(f'subject "{subject}" overlaps with "{other}"')
    return list(subjects)


def _ordered(cfg: dict[str, Any], metadata: dict | None) -> dict[str, Any]:
    cfg = dict(cfg, consumer_limits={}, metadata=metadata or None)
    # no_ack and discard_new_per_subject are omitempty in nats-server's StreamConfig
    return {k: cfg[k] for k in _ORDER if cfg.get(k) is not None
            and not (k in ("no_ack", "discard_new_per_subject") and cfg[k] is False)}


def subjects_overlap(a: str, b: str) -> bool:
    """True when some literal subject matches both patterns (nats-server's
    ``SubjectsCollide``): token by token, ``*`` meets anything, ``>`` meets
    the rest."""
    ta, tb = a.split("."), b.split(".")
    for x, y in zip(ta, tb):
        if FWC in (x, y):
            return True
        if x != y and PWC not in (x, y):
            return False
    return len(ta) == len(tb)       # a longer pattern needs a ">" in the shorter to meet it


def same_config(a: dict, b: dict) -> bool:
    """Two configs equal for CREATE's idempotence (metadata aside)."""
    strip = ("metadata",)
    return {k: v for k, v in a.items() if k not in strip} == {k: v for k, v in b.items() if k not in strip}


def check_update(old: dict, new: dict) -> None:
    """nats-server's refusals for changes an UPDATE may not make."""
    if old["storage"] != new["storage"]:
        raise invalid_config("stream configuration update can not change storage type")
    if old["retention"] != new["retention"] and "workqueue" in (old["retention"], new["retention"]):
        raise invalid_config("stream configuration update can not change retention policy to/from workqueue")


__all__ = ["API_PREFIX", "DEFAULT_DUPLICATE_WINDOW", "FIELDS", "NS_PER_S", "REFUSED", "check_update", "go_time", "parse_go_time",
           "parse_config", "same_config", "subjects_overlap", "type_error", "valid_name"]
