"""JetStream consumer configuration: parse, validate, fill defaults (no trio, no broker).

Theory of operation
-------------------
A ``$JS.API.CONSUMER.CREATE`` body is ``{"stream_name", "config", "action"}``
with nats-server's ``ConsumerConfig`` as ``config``. :data:`FIELDS` is the
one table of the fields Ferry knows, with the Go type nats-server's decoder
names in its type errors; unknown keys are ignored as Go ignores them.
:func:`parse_consumer_config` checks types, refuses what Ferry does not do
(rate limits, sampling, per-request
limits: docs/nats.md "JetStream"), applies nats-server's checks in its order
(``checkConsumerCfg``: a push consumer's ``deliver_subject`` must be a literal
subject outside the stream's subjects, no ``max_waiting``, heartbeats of at
least 100 ms, flow control only with heartbeats) and fills its defaults
(``setConsumerConfigDefaults``: 30 s ``ack_wait`` or the first ``backoff``,
``max_deliver`` -1, ``max_waiting`` 512 for pull consumers,
``max_ack_pending`` 1000, 5 s ``inactive_threshold`` for ephemerals). The
result is in nats-server's key order, ready to echo.
"""

from __future__ import annotations

import json
from typing import Any

from core.subjects import (
    is_literal,
    is_valid_pattern,
    is_valid_subject,
    subject_matches,
)

from .config import NS_PER_S, subjects_overlap, type_error, valid_name
from .errors import JsApiError, invalid_config

DEFAULT_ACK_WAIT = 30 * NS_PER_S
DEFAULT_MAX_WAITING = 512          # nats-server: waiting pull requests per consumer
DEFAULT_MAX_ACK_PENDING = 1000
DEFAULT_INACTIVE = 5 * NS_PER_S    # ephemerals go after 5 s with no pull request (or no push subscriber)
MIN_HEARTBEAT = NS_PER_S // 10     # nats-server: push idle heartbeats of at least 100 ms

_S, _I, _U, _D, _B = "string", "int", "uint64", "time.Duration", "bool"
# field -> Go type (in decode errors); order = nats-server's key order in replies
FIELDS: dict[str, str] = {
    "durable_name": _S, "name": _S, "description": _S, "deliver_policy": "DeliverPolicy",
    "opt_start_seq": _U, "opt_start_time": "time.Time", "ack_policy": "AckPolicy", "ack_wait": _D,
    "max_deliver": _I, "backoff": "[]time.Duration", "filter_subject": _S, "filter_subjects": "[]string",
    "replay_policy": "ReplayPolicy", "rate_limit_bps": _U, "sample_freq": _S, "max_waiting": _I,
    "max_ack_pending": _I, "flow_control": _B, "headers_only": _B, "max_batch": _I, "max_expires": _D,
    "max_bytes": _I, "deliver_subject": _S, "deliver_group": _S, "idle_heartbeat": _D, "inactive_threshold": _D,
    "num_replicas": _I, "mem_storage": _B, "metadata": "map[string]string", "pause_until": "time.Time",
}
_ENUMS = {"deliver_policy": ("all", "last", "new", "by_start_sequence", "by_start_time", "last_per_subject"),
          "ack_policy": ("none", "all", "explicit"), "replay_policy": ("instant", "original")}
_POLICY_TEXT = {"all": "deliver all", "last": "deliver last", "new": "deliver new",
                "by_start_sequence": "deliver by start sequence", "by_start_time": "deliver by start time",
                "last_per_subject": "deliver last per subject"}
# Set (non-empty) fields Ferry refuses, with the feature named in the error.
_REFUSED = {"rate_limit_bps": "rate_limit_bps", "sample_freq": "sample_freq",
            "max_batch": "max_batch", "max_expires": "max_expires", "max_bytes": "max_bytes"}


def _type_ok(gotype: str, value: Any) -> bool:
    if gotype == _S or gotype == "time.Time":
        return isinstance(value, str)
    if gotype == _B:
        return isinstance(value, bool)
    if gotype == "[]string":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if gotype == "[]time.Duration":
        return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    if gotype.startswith("map"):
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    ok = isinstance(value, int) and not isinstance(value, bool)
    return ok and (gotype != _U or value >= 0)


def _decode(doc: dict) -> dict[str, Any]:
    cfg: dict[str, Any] = {}
    for field, gotype in FIELDS.items():
        value = doc.get(field)
        if value is None:
            continue
        if field in _ENUMS:
            if value not in _ENUMS[field]:
                raise JsApiError("JSInvalidJSONErr", err=f"can not unmarshal {json.dumps(json.dumps(value))}")
        elif not _type_ok(gotype, value):
            raise type_error("CreateConsumerRequest.config", field, gotype, value)
        cfg[field] = value
    return cfg


def parse_consumer_config(doc: Any, ephemeral: bool, stream_subjects: list[str] | None = None) -> dict[str, Any]:
    """The checked, defaulted config of a create request's ``config``
    (``stream_subjects``: the stream's, which a deliver subject must avoid)."""
    if not isinstance(doc, dict):
        doc = {}
    cfg = _decode(doc)
    if cfg.get("num_replicas", 0) > 1:
        raise JsApiError("JSStreamReplicasNotSupportedErr")      # nats-server without clustering
    for key in ("durable_name", "name"):
        if cfg.get(key) == "":
            del cfg[key]                     # nats-server: an empty name is no name (nats.js sends "")
    for name in (cfg.get("durable_name"), cfg.get("name")):
        if name is not None and not valid_name(name):
            raise invalid_config("consumer name can not contain '.', '*', '>', '\\', '/'")
    _check_policy(cfg)
    if cfg.get("ack_wait", 0) < 0:
        raise JsApiError("JSConsumerAckWaitNegativeErr")
    backoff = cfg.get("backoff") or []
    if backoff and 0 < cfg.get("max_deliver", 0) <= len(backoff):
        raise JsApiError("JSConsumerMaxDeliverBackoffErr")
    if cfg.get("deliver_subject"):
        _check_push(cfg, stream_subjects or [])
    elif cfg.get("idle_heartbeat", 0) > 0:
        raise JsApiError("JSConsumerHBRequiresPushErr")
    elif cfg.get("flow_control"):
        raise JsApiError("JSConsumerFCRequiresPushErr")
    _check_filters(cfg)
    for field, feature in _REFUSED.items():
        if cfg.get(field):
            raise JsApiError("JSConsumerCreateErrF", err=f"{feature} is not supported by Ferry")
    if cfg.get("flow_control") and cfg.get("idle_heartbeat", 0) <= 0:
        raise JsApiError("JSConsumerWithFlowControlNeedsHeartbeats")
    return _defaults(cfg, ephemeral)


def _check_push(cfg: dict, stream_subjects: list[str]) -> None:
    """nats-server's checks of a push consumer (``checkConsumerCfg``), in its order."""
    subject = cfg["deliver_subject"]
    if not is_literal(subject):
        raise JsApiError("JSConsumerDeliverToWildcardsErr")
    if not is_valid_subject(subject):
        raise JsApiError("JSConsumerInvalidDeliverSubject")
    if any(subject_matches(pattern, subject) for pattern in stream_subjects):
        raise JsApiError("JSConsumerDeliverCycleErr")      # the stream would store its own deliveries
    if cfg.get("max_waiting", 0) > 0:
        raise JsApiError("JSConsumerPushMaxWaitingErr")
    if cfg.get("max_ack_pending", 0) > 0 and cfg.get("ack_policy", "none") == "none":
        raise JsApiError("JSConsumerMaxPendingAckPolicyRequiredErr")
    if 0 < cfg.get("idle_heartbeat", 0) < MIN_HEARTBEAT:
        raise JsApiError("JSConsumerSmallHeartbeatErr")


# deliver policy -> the option it needs; every other policy must leave that option out
_POLICY_OPTIONS = (("by_start_sequence", "opt_start_seq", "start sequence"),
                   ("by_start_time", "opt_start_time", "start time"))


def _check_policy(cfg: dict) -> None:
    policy = cfg.setdefault("deliver_policy", "all")
    text = _POLICY_TEXT[policy]
    for needs, option, what in _POLICY_OPTIONS:
        if (policy == needs) != bool(cfg.get(option)):
            state = "is not set" if policy == needs else "is also set"
            raise JsApiError("JSConsumerInvalidPolicyErrF",
                             err=f"consumer delivery policy is {text}, but optional {what} {state}")
    if policy == "last_per_subject":
        if not cfg.get("filter_subject") and not cfg.get("filter_subjects"):
            raise JsApiError("JSConsumerInvalidPolicyErrF",
                             err=f"consumer delivery policy is {text}, but optional filter subject is not set")


def _check_filters(cfg: dict) -> None:
    single, many = cfg.get("filter_subject"), cfg.get("filter_subjects")
    if single and many:
        raise JsApiError("JSConsumerDuplicateFilterSubjects")
    for i, subject in enumerate(many or []):
        if not is_valid_pattern(subject):
            raise JsApiError("JSConsumerCreateErrF", err="consumer filter subject is not a valid subset of the interest subjects")
        if any(subjects_overlap(subject, other) for other in many[i + 1:]):
            raise JsApiError("JSConsumerOverlappingSubjectFilters")
    if single and not is_valid_pattern(single):
        raise JsApiError("JSConsumerCreateErrF", err="consumer filter subject is not a valid subset of the interest subjects")


def _defaults(cfg: dict, ephemeral: bool) -> dict[str, Any]:
    cfg.setdefault("ack_policy", "none")
    cfg.setdefault("replay_policy", "instant")
    backoff = cfg.get("backoff")
    if backoff:
        cfg["ack_wait"] = backoff[0]
    elif cfg["ack_policy"] != "none" and not cfg.get("ack_wait"):
        cfg["ack_wait"] = DEFAULT_ACK_WAIT
    if cfg.get("max_deliver", 0) <= 0:
        cfg["max_deliver"] = -1
    if cfg.get("deliver_subject"):
        cfg.pop("max_waiting", None)
    elif cfg.get("max_waiting", 0) <= 0:
        cfg["max_waiting"] = DEFAULT_MAX_WAITING
    if cfg["ack_policy"] != "none" and not cfg.get("max_ack_pending"):
        cfg["max_ack_pending"] = DEFAULT_MAX_ACK_PENDING
    if ephemeral and not cfg.get("inactive_threshold"):
        cfg["inactive_threshold"] = DEFAULT_INACTIVE
    cfg["num_replicas"] = 1 if cfg.get("num_replicas") == 1 else 0     # echoed as given (R1 only)
    return {k: cfg[k] for k in FIELDS if cfg.get(k) not in (None, "", 0, False, [], {}) or k == "num_replicas"}


def filters_of(cfg: dict) -> list[str]:
    """The consumer's subject filters (empty: every message)."""
    if cfg.get("filter_subject"):
        return [cfg["filter_subject"]]
    return list(cfg.get("filter_subjects") or [])


def same_settings(old: dict, new: dict) -> bool:
    """Two configs equal for an idempotent create (metadata aside)."""
    return {k: v for k, v in old.items() if k != "metadata"} == {k: v for k, v in new.items() if k != "metadata"}


def check_consumer_update(old: dict, new: dict) -> None:
    """nats-server's refusals for changes an existing consumer may not take
    (``checkNewConsumerConfig``, in its order)."""
    for field, text in (("deliver_policy", "deliver policy"), ("mem_storage", "storage type"),
                        ("opt_start_seq", "start sequence"), ("opt_start_time", "start time"),
                        ("ack_policy", "ack policy"), ("replay_policy", "replay policy"),
                        ("idle_heartbeat", "heart beats"), ("flow_control", "flow control")):
        if old.get(field) != new.get(field):
            raise JsApiError("JSConsumerCreateErrF", err=f"{text} can not be updated")
    if bool(old.get("deliver_subject")) != bool(new.get("deliver_subject")):
        way = "pull consumer to push" if new.get("deliver_subject") else "push consumer to pull"
        raise JsApiError("JSConsumerCreateErrF", err=f"can not update {way} based")


__all__ = ["DEFAULT_ACK_WAIT", "DEFAULT_INACTIVE", "DEFAULT_MAX_ACK_PENDING", "DEFAULT_MAX_WAITING", "FIELDS",
           "check_consumer_update", "filters_of", "parse_consumer_config", "same_settings"]
