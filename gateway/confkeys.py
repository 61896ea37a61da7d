"""Typed configuration keys: how one raw value becomes a checked Python value.

A :class:`Key` describes one configuration key (kind, default, bounds). Values
come either typed, from TOML, or as text, from an environment variable or a
command-line flag; :meth:`Key.convert` accepts both and raises ``ValueError``
with a short reason ("must be an integer in 0..65535") that
:mod:`gateway.config` turns into one :class:`~gateway.config.ConfigError`
naming the key, the value and where it came from.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

# Size suffixes accepted by "size" keys ("256MiB", "64 KiB", "1GB"). Binary
# and decimal spellings both mean powers of 1024, as in Iggy's server.toml
# ("1 GiB" segment size) and nats-server's config ("max_payload: 1MB").
_SIZE_UNITS = {"": 1, "b": 1, "k": KiB, "kb": KiB, "kib": KiB, "m": MiB, "mb": MiB, "mib": MiB,
               "g": GiB, "gb": GiB, "gib": GiB}
_SIZE_RE = re.compile(r"\s*(\d+)\s*([a-zA-Z]*)\s*")
# Text spellings of booleans in environment variables and flags (the set
# systemd and most twelve-factor tools accept).
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})

KINDS = ("str", "int", "float", "bool", "choice", "size", "port", "path", "strs")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _range_text(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f" in {lo:g}..{hi:g}"
    if lo is not None:
        return f" >= {lo:g}"
    return ""


# Keys whose values are secrets, by their last name in any table (auth.root_password,
# store.password, store.token, listeners.http.jwt_secret, a listener's password/token
# option): `ferry config check` and every other printer show only that one is set.
SECRET_NAMES = frozenset({"root_password", "password", "token", "auth_token", "jwt_secret"})
SECRET_SHOWN = "<set>"


def is_secret(path: tuple[str, ...]) -> bool:
    """True for a key whose value is never printed (:data:`SECRET_NAMES`)."""
    return bool(path) and path[-1] in SECRET_NAMES


@dataclass(frozen=True, slots=True)
class Key:
    """One configuration key.

    ``kind`` is one of :data:`KINDS`. ``lo``/``hi`` bound numbers, and for
    ``str`` keys the length in UTF-8 bytes. ``choices`` lists a ``choice``
    key's values; ``aliases`` maps extra spellings onto them. ``default`` is
    the value used when no source sets the key (already converted).
    """

    kind: str
    default: Any
    doc: str = ""
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()
    aliases: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown key kind {self.kind!r}")
        object.__setattr__(self, "aliases", MappingProxyType(dict(self.aliases)))

    def convert(self, value: object, from_text: bool) -> Any:
        """The checked value; ``from_text`` means ``value`` is an env/flag string.

        Raises ``ValueError(reason)``."""
        return getattr(self, f"_to_{self.kind}")(value, from_text)

    # -- one converter per kind -------------------------------------------
    def _to_str(self, value: object, from_text: bool) -> str:
        if not isinstance(value, str):
            raise ValueError("must be a string")
        size = len(value.encode("utf-8", "surrogatepass"))
        lo = int(self.lo) if self.lo is not None else 0
        hi = int(self.hi) if self.hi is not None else None
        if size < lo or (hi is not None and size > hi):
            span = f"{lo}..{hi}" if hi is not None else f"at least {lo}"
            raise ValueError(f"must be {span} bytes of UTF-8, got {size}")
        return value

    def _to_int(self, value: object, from_text: bool) -> int:
        reason = "must be an integer" + _range_text(self.lo, self.hi)
        if from_text and isinstance(value, str):
            try:
                value = int(value.strip(), 10)
            except ValueError:
                raise ValueError(reason) from None
        if not _is_int(value):
            raise ValueError(reason)
        self._check_range(value, reason)
        return value

    def _to_port(self, value: object, from_text: bool) -> int:
        return Key("int", 0, lo=0, hi=65535)._to_int(value, from_text)

    def _to_float(self, value: object, from_text: bool) -> float:
        reason = "must be a number" + _range_text(self.lo, self.hi)
        if from_text and isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise ValueError(reason) from None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(reason)
        self._check_range(value, reason)
        return float(value)

    def _to_bool(self, value: object, from_text: bool) -> bool:
        if from_text and isinstance(value, str):
            text = value.strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
        if isinstance(value, bool):
            return value
        raise ValueError("must be true or false" + (" (or 1/0, yes/no, on/off)" if from_text else ""))

    def _to_choice(self, value: object, from_text: bool) -> str:
        if isinstance(value, str):
            text = value.strip().lower()
            text = self.aliases.get(text, text)
            if text in self.choices:
                return text
        names = ", ".join(self.choices)
        alias_text = ", ".join(f"{a} = {b}" for a, b in self.aliases.items())
        raise ValueError(f"must be one of {names}" + (f" (aliases: {alias_text})" if alias_text else ""))

    def _to_size(self, value: object, from_text: bool) -> int:
        reason = "must be a byte count (an integer, or a string like \"256MiB\")" + _range_text(self.lo, self.hi)
        if isinstance(value, str):
            match = _SIZE_RE.fullmatch(value)
            unit = _SIZE_UNITS.get(match.group(2).lower()) if match else None
            if unit is None:
                raise ValueError(reason)
            value = int(match.group(1)) * unit
        if not _is_int(value):
            raise ValueError(reason)
        self._check_range(value, reason)
        return value

    def _to_path(self, value: object, from_text: bool) -> Path:
        if not isinstance(value, str) or not value.strip():
            raise ValueError("must be a non-empty path")
        return Path(value).expanduser()

    def _to_strs(self, value: object, from_text: bool) -> tuple[str, ...]:
        if from_text and isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise ValueError("must be a list of strings" + (" (comma-separated)" if from_text else ""))

    def _check_range(self, value: float, reason: str) -> None:
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            raise ValueError(reason)


# What each listener option means. The options themselves (names, defaults) are
# declared by the listener modules (ListenerSpec.options); their meanings live
# here so `ferry config sample` and `ferry config check` can say what a key does.
# tests/gateway/test_gw_config_cli.py fails when a listener gains an option
# without a line here, so the sample cannot silently lose a key's meaning.
_TLS = {"tls_cert": "PEM certificate chain; set it (with tls_key) and every connection is TLS",
        "tls_key": "PEM private key of tls_cert (empty: the key is in tls_cert's file)"}
_MAX_CONN = {"max_connections": "open connections; past it a new one is closed at once (0 = unlimited)"}
LISTENER_OPTION_DOCS: Mapping[str, Mapping[str, str]] = MappingProxyType({
    "iggy_tcp": {**_TLS, **_MAX_CONN},
    "iggy_ws": {**_TLS, **_MAX_CONN},
    "nats_ws": {"tls_cert": "PEM certificate chain; set it (with tls_key) to serve wss:// instead of ws://",
                "tls_key": _TLS["tls_key"]},
    "http": {
        **_TLS,
        "jwt_secret": "HS256 key of access tokens (>= 32 bytes); empty: random, kept in <data_dir>/http-jwt-secret",
        "jwt_lifetime_s": "access-token lifetime in seconds",
        "max_body_bytes": "larger request bodies get 413",
        "idle_timeout_s": "a keep-alive connection idle this long is closed",
        "request_timeout_s": "a request must arrive whole within this long of its first byte",
        "max_wait_ms": "upper bound of a poll's wait_ms",
        "max_connections": "open connections; past it a new one is closed at once",
    },
    "nats": {
        "max_payload": "largest message payload in bytes (advertised in INFO)",
        "max_pending": "bytes queued for one client before it is a slow consumer (closed)",
        "max_control_line": "longest protocol line in bytes",
        "max_subscriptions": "subscriptions per connection; 0 = unlimited",
        "max_connections": "open client connections (TCP and WebSocket together); past it a new client gets "
                           "-ERR 'maximum connections exceeded' (0 = unlimited)",
        "ping_interval": "seconds between server PINGs",
        "ping_max": "unanswered PINGs before 'Stale Connection'",
        "server_name": "server name in INFO and /varz (empty: the server id)",
        "anonymous_user": "a Ferry user that clients without credentials act as (empty: credentials required); "
                          "opens the door, and the banner says so",
        "auth_mode": "'ferry': clients log in as Ferry users with Ferry's permissions; 'nats-server': "
                     "nats-server's own model, open unless auth_file has users (what `ferry nats-server` sets)",
        "auth_file": "a nats-server config file whose authorization block narrows what Ferry's users may "
                     "publish and subscribe (an extra subject filter, not a second user list)",
        "tls_cert": "PEM certificate chain; set it (with tls_key) and INFO says tls_required",
        "tls_key": _TLS["tls_key"],
        "tls_ca": "CA that signs client certificates (with tls_verify)",
        "tls_verify": "require a client certificate signed by tls_ca",
        "tls_handshake_first": "TLS handshake before INFO (nats-py tls_handshake_first=True)",
        "jetstream": "serve JetStream: streams, consumers, key-value buckets, object store",
    },
    "pravega": {
        "advertised_host": "host the controller's getURI names for segments (empty: the bind address, "
                           "127.0.0.1 for a wildcard)",
        "tail_park_ms": "how long a read at the tail waits for data before an empty answer (1..25000)",
        "anonymous_user": "a Ferry user that segment-store requests without a delegation token act as "
                          "(empty: a token is required); the banner says so",
    },
    "kafka": {
        "advertised_host": "host Metadata names for this broker (empty: the bind address, 127.0.0.1 for a "
                           "wildcard; never 0.0.0.0)",
        "advertised_port": "port Metadata names (0: the bound port); set it behind a port mapping",
        "anonymous_user": "a Ferry user that connections without SASL act as (empty: SASL PLAIN or SCRAM required); "
                          "the banner says so",
        "default_stream": "Ferry stream of a Kafka topic name without a dot (S.T is topic T of stream S)",
        "auto_create_topics": "Metadata creates a missing topic when the user may (auto.create.topics.enable)",
        "default_partitions": "partitions of an auto-created topic (num.partitions), 1..1000",
        "initial_rebalance_delay_ms": "how long a new consumer group waits for more members "
                                      "(group.initial.rebalance.delay.ms)",
        "tls_cert": "PEM certificate chain; set it (with tls_key) and every connection is TLS: clients use "
                    "security.protocol SASL_SSL (SSL with anonymous_user); no client certificates",
        "tls_key": _TLS["tls_key"],
    },
    "pravega_controller": {
        "auth": "always true: Basic credentials of a Ferry user on every RPC, delegation tokens at the "
                "segment store; false is refused at start (set anonymous_user instead)",
        "anonymous_user": "a Ferry user that RPCs without credentials act as (empty: Basic credentials "
                          "required); the banner says so",
    },
})


# The fields of one [[binding]] table (core.addressing.Binding), with an example
# value each, for the commented example in `ferry config sample`.
BINDING_FIELDS: Mapping[str, tuple[object, str]] = MappingProxyType({
    "stream": ("orders", "the Ferry stream (required)"),
    "topic": ("eu west", "the Ferry topic (required)"),
    "nats_subject": ("orders.euwest", "a literal NATS subject; the topic captures it and subject.> "
                                      "(default: stream.topic)"),
    "pravega_scope": ("orders", "Pravega scope name, [A-Za-z0-9.-] (default: the stream)"),
    "pravega_stream": ("euwest", "Pravega stream name (default: the topic)"),
    "create": (True, "create the stream and topic at start if missing"),
    "partitions": (3, "partitions of a topic created by create = true"),
})


def option_doc(listener: str, option: str) -> str:
    """The meaning of a listener option, or "" when none is written down."""
    return LISTENER_OPTION_DOCS.get(listener, {}).get(option, "")


def key_for_default(default: object, doc: str = "") -> Key:
    """The key of a listener option, typed by its default (ListenerSpec.options)."""
    if isinstance(default, bool):
        return Key("bool", default, doc)
    if isinstance(default, int):
        return Key("int", default, doc)
    if isinstance(default, float):
        return Key("float", default, doc)
    if isinstance(default, tuple):
        return Key("strs", default, doc)
    return Key("str", default, doc)


def format_value(value: object) -> str:
    """How a value is shown in messages and the banner (TOML-like)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Path):
        return repr(str(value))
    return repr(value)


__all__ = ["GiB", "KINDS", "Key", "KiB", "BINDING_FIELDS", "LISTENER_OPTION_DOCS", "MiB", "format_value", "key_for_default",
           "option_doc"]
