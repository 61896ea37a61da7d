"""The gateway's configuration: one TOML file, environment variables, flags.

Theory of operation
-------------------
Every setting has one dotted key (``log.fsync``, ``listeners.nats.port``) and
comes from the first of these that sets it:

1. a command-line flag (``--fsync always``, ``--nats-port 4333``),
2. an environment variable ``FERRY_<SECTION>_<KEY>`` (``FERRY_LOG_FSYNC``),
   or ``FERRY_<LISTENER>_<KEY>`` for a listener (``FERRY_NATS_PORT``),
3. the TOML file given by ``--config`` or ``FERRY_CONFIG``,
4. the default (docs/configuration.md lists them all).

The whole result is validated once, at start, into frozen dataclasses. The
first problem raises :class:`ConfigError` whose message names the key, the bad
value and where it came from, e.g. ``log.fsync = 'sometimes' (from
FERRY_LOG_FSYNC): must be one of always, batch, never``. Unknown keys, unknown
listener names and unknown ``FERRY_*`` variables are errors too, so a typo
never passes silently. ``[[binding]]`` tables are checked by
:func:`core.addressing.parse_bindings`.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

from core.auth_limits import MAX_PASSWORD_BYTES, MAX_USERNAME_BYTES, MIN_PASSWORD_BYTES, MIN_USERNAME_BYTES
from core.compiled import PURE_PYTHON_ENV
from core.errors import InvalidArgument
from core.log.config import (
    DEFAULT_FSYNC_INTERVAL_MS,
    DEFAULT_MAX_PENDING_BYTES,
    DEFAULT_PRODUCER_TTL_MS,
    DEFAULT_SEGMENT_BYTES,
    FSYNC_BATCH,
    FSYNC_NEVER,
    FSYNC_POLICIES,
    MAX_FSYNC_INTERVAL_MS,
    MAX_PRODUCER_TTL_MS,
    MAX_SEGMENT_BYTES,
    LogConfig,
)
from core.log.iddedup import DEFAULT_EXPIRY_US, DEFAULT_MAX_ENTRIES, MAX_ENTRIES_LIMIT, MAX_EXPIRY_US

if TYPE_CHECKING:
    from core.addressing import Binding

from .confkeys import Key, format_value, key_for_default, option_doc
from .registry import KnownListener, Registry, RegistryError, default_registry

ENV_PREFIX = "FERRY_"
ENV_CONFIG = "FERRY_CONFIG"  # the config file path; not a key itself
# Read at import by core/compiled.py (1 = run the pure-Python loops, not the
# compiled ones): a switch of the build, not a config key.
ENV_PURE_PYTHON = PURE_PYTHON_ENV
# Read by the client commands (`ferry stream ...`, `ferry user ...`: which server,
# which login; gateway/remote_target.py), not config keys: a shell that exports
# them for those commands must still be able to run `ferry serve`.
CLIENT_ENV = ("FERRY_SERVER", "FERRY_TOKEN", "FERRY_USER", "FERRY_PASSWORD")
NOT_KEYS = frozenset({ENV_CONFIG, ENV_PURE_PYTHON, *CLIENT_ENV})
DEFAULT_ROOT_USERNAME = "iggy"  # Iggy's default root user (iggy.md, server defaults)
DEFAULT_ROOT_PASSWORD = "iggy"
# `docker stop` sends SIGKILL 10 s after SIGTERM; 5 s of grace leaves the other
# half for the final flush and fsync of every partition.
DEFAULT_GRACE_SECONDS = 5.0
MAX_GRACE_SECONDS = 3600.0  # past an hour is surely a unit mistake (ms vs s)
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
LOG_FORMATS = ("text", "json")
# The bench harness (bench/) speaks of fsync "default" and "none".
FSYNC_ALIASES = {"default": FSYNC_BATCH, "none": FSYNC_NEVER}
# How often the retention task checks topics with an expiry or a size cap;
# Iggy's message_cleaner runs every minute by default, 30 s halves the overshoot.
DEFAULT_RETENTION_INTERVAL_S = 30.0
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})

SECTIONS: Mapping[str, Mapping[str, Key]] = MappingProxyType({
    "server": {
        "host": Key("str", "0.0.0.0", "address every listener binds unless its table sets host", lo=1),
        "data_dir": Key("path", Path("data"), "where streams, topics and messages are stored "
                         "(relative: to this file's folder when set here, else to the current directory)"),
        "grace_seconds": Key("float", DEFAULT_GRACE_SECONDS,
                             "on shutdown, how long connections get to close before they are cut",
                             lo=0, hi=MAX_GRACE_SECONDS),
        "log_level": Key("choice", "info", "minimum level logged", choices=LOG_LEVELS,
                         aliases={"warn": "warning"}),
        "log_format": Key("choice", "text", "text (key=value) or json (one object per line)",
                          choices=LOG_FORMATS),
    },
    "log": {
        "fsync": Key("choice", FSYNC_BATCH, "when appended messages are fsynced before acknowledging",
                     choices=FSYNC_POLICIES, aliases=FSYNC_ALIASES),
        "fsync_interval_ms": Key("float", DEFAULT_FSYNC_INTERVAL_MS, "fsync = batch: commit delay after a busy round, to gather more appends (0: none; never when idle)",
                                 lo=0, hi=MAX_FSYNC_INTERVAL_MS),
        "segment_bytes": Key("size", DEFAULT_SEGMENT_BYTES, "roll to a new segment file past this size",
                             lo=1, hi=MAX_SEGMENT_BYTES),
        "max_pending_bytes": Key("size", DEFAULT_MAX_PENDING_BYTES,
                                 "unwritten bytes per partition before producers are slowed", lo=1),
        "producer_ttl_ms": Key("int", DEFAULT_PRODUCER_TTL_MS,
                               "a producer's dedup state is forgotten after this long idle (0 = never)",
                               lo=0, hi=MAX_PRODUCER_TTL_MS),
        "retention_interval_seconds": Key("float", DEFAULT_RETENTION_INTERVAL_S,
                                          "how often message expiry and size caps are enforced",
                                          lo=0.01, hi=86400),
    },
    "auth": {
        "root_username": Key("str", DEFAULT_ROOT_USERNAME, "the root user created on first start",
                             lo=MIN_USERNAME_BYTES, hi=MAX_USERNAME_BYTES),
        "root_password": Key("str", DEFAULT_ROOT_PASSWORD, "its password (change it!)",
                             lo=MIN_PASSWORD_BYTES, hi=MAX_PASSWORD_BYTES),
    },
    # Iggy's server-wide message deduplication (its [system.message_deduplication]:
    # enabled = false, max_entries = 10000, expiry = "1 m"); docs/iggy.md.
    "iggy": {
        "message_deduplication": Key("bool", False, "Iggy sends drop a message whose id its partition stored "
                                     "recently (a topic may override it)"),
        "deduplication_max_entries": Key("int", DEFAULT_MAX_ENTRIES, "message ids remembered per partition",
                                         lo=1, hi=MAX_ENTRIES_LIMIT),
        "deduplication_expiry_seconds": Key("float", DEFAULT_EXPIRY_US / 1e6, "an id is forgotten this long "
                                            "after it was stored (0: only the entry count bounds the window)",
                                            lo=0, hi=MAX_EXPIRY_US // 1_000_000),
    },
    # Scale-out (docs/scale-out.md): where the broker's durable state lives.
    "store": {
        "url": Key("str", "", "empty: the embedded log under data_dir; nats://h1:4222,h2:4222,...: "
                   "a NATS JetStream cluster (messages, metadata, offsets)"),
        "user": Key("str", "", "cluster user (with password)"),
        "password": Key("str", "", "cluster password"),
        "token": Key("str", "", "cluster token (instead of user/password)"),
        "tls_ca": Key("str", "", "CA file that signs the cluster's certificates (turns TLS on)"),
        "tls_cert": Key("str", "", "client certificate for the cluster (mutual TLS)"),
        "tls_key": Key("str", "", "its private key"),
        "replicas": Key("int", 3, "JetStream replicas of every stream Ferry creates (3 in a 3-node cluster)",
                        lo=1, hi=5),
        "prefix": Key("str", "FERRY", "stream and subject prefix, so deployments can share a cluster",
                      lo=1, hi=32),
        "connect_timeout_seconds": Key("float", 15.0, "how long start-up waits for the cluster (an election after "
                                       "a node fails takes about 5 s)", lo=0.1, hi=600),
    },
})
LISTENER_KEYS: Mapping[str, Key] = MappingProxyType({
    "enabled": Key("bool", True, "start this listener"),
    "host": Key("str", None, "bind address (default: server.host)", lo=1),
    "port": Key("port", None, "bind port; 0 picks a free one"),
})

Path_ = tuple[str, ...]  # a dotted key split: ("listeners", "nats", "port")


class ConfigError(Exception):
    """An invalid configuration. ``str(err)`` is one line naming the key and value."""

    def __init__(self, message: str, *, key: str | None = None, value: object = None) -> None:
        super().__init__(message)
        self.key = key
        self.value = value


# Where a value came from, as `ferry config check` reports it.
SOURCE_KINDS = ("default", "file", "env", "flag")


@dataclass(frozen=True, slots=True)
class Origin:
    """A raw value and where it came from: ``source`` names the file, variable
    or flag (``"ferry.toml"``, ``"FERRY_LOG_FSYNC"``, ``"--fsync"``), ``kind``
    is one of :data:`SOURCE_KINDS` but ``"default"``."""

    value: object
    source: str
    from_text: bool
    kind: str = "file"


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str
    data_dir: Path
    grace_seconds: float
    log_level: str
    log_format: str


@dataclass(frozen=True, slots=True)
class AuthConfig:
    root_username: str
    root_password: str = field(repr=False)

    @property
    def uses_default_password(self) -> bool:
        return self.root_password == DEFAULT_ROOT_PASSWORD


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """``[store]``: empty ``url`` = the embedded log (docs/scale-out.md)."""

    url: str = ""
    user: str = ""
    password: str = field(default="", repr=False)
    token: str = field(default="", repr=False)
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    replicas: int = 3
    prefix: str = "FERRY"
    connect_timeout_seconds: float = 15.0

    @property
    def urls(self) -> list[str]:
        """``nats://h1:4222,h2:4222`` -> one URL per server (the scheme carries over)."""
        text = self.url.strip()
        if not text:
            return []
        scheme, sep, rest = text.partition("://")
        if not sep:
            scheme, rest = "nats", text
        out = []
        for part in rest.split(","):
            part = part.strip()
            if part:
                out.append(part if "://" in part else f"{scheme}://{part}")
        return out


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    """One listener's settings, as its ``serve`` function receives them."""

    name: str
    enabled: bool
    host: str
    port: int
    transport: str
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class IggyConfig:
    """``[iggy]``: Iggy's message deduplication default (adapters/iggy/dedup.py)."""

    message_deduplication: bool = False
    deduplication_max_entries: int = DEFAULT_MAX_ENTRIES
    deduplication_expiry_seconds: float = DEFAULT_EXPIRY_US / 1e6


@dataclass(frozen=True, slots=True)
class Config:
    """The validated configuration of one gateway process."""

    server: ServerConfig
    log: LogConfig
    auth: AuthConfig
    listeners: tuple[ListenerConfig, ...]
    bindings: tuple[Binding, ...] = ()
    retention_interval_s: float = DEFAULT_RETENTION_INTERVAL_S
    source: Path | None = None
    store: StoreConfig = field(default_factory=StoreConfig)
    iggy: IggyConfig = field(default_factory=IggyConfig)

    def listener(self, name: str) -> ListenerConfig:
        for lc in self.listeners:
            if lc.name == name:
                return lc
        raise KeyError(name)

    def enabled_listeners(self) -> list[ListenerConfig]:
        return [lc for lc in self.listeners if lc.enabled]

    def broker_config(self):
        """The :class:`core.broker.BrokerConfig` for this configuration."""
        from core.broker import BrokerConfig  # deferred: `ferry --help` need not load the broker

        return BrokerConfig(
            log=self.log,
            bindings=self.bindings,
            root_username=self.auth.root_username,
            root_password=self.auth.root_password,
            retention_interval_s=self.retention_interval_s,
        )


# -- the schema --------------------------------------------------------------
def schema_for(known: Mapping[str, KnownListener]) -> dict[Path_, Key]:
    """Every valid dotted key, split, with its :class:`Key`."""
    schema: dict[Path_, Key] = {}
    for section, keys in SECTIONS.items():
        for name, key in keys.items():
            schema[(section, name)] = key
    for lname, kl in known.items():
        for name, key in LISTENER_KEYS.items():
            if name == "port":
                key = Key("port", kl.default_port, key.doc)
            schema[("listeners", lname, name)] = key
        for name, default in kl.options.items():
            schema[("listeners", lname, name)] = key_for_default(default, option_doc(lname, name))
    return schema


def env_name(path: Path_) -> str:
    """``("log", "fsync")`` -> ``FERRY_LOG_FSYNC``; ``("listeners", "nats", "port")`` -> ``FERRY_NATS_PORT``."""
    parts = path[1:] if path[0] == "listeners" else path
    return ENV_PREFIX + "_".join(parts).upper()


def env_names(schema: Mapping[Path_, Key]) -> dict[str, Path_]:
    names: dict[str, Path_] = {}
    for path in schema:
        name = env_name(path)
        if name in names:  # e.g. an option "monitor_port" of "nats" vs listener "nats_monitor"
            raise RegistryError(f"{dotted(path)} and {dotted(names[name])} would share the variable {name}")
        names[name] = path
    return names


def dotted(path: Path_) -> str:
    return ".".join(path)


def _suggest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# -- sources -----------------------------------------------------------------
def read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} does not exist", key="config", value=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {exc.strerror}", key="config") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}", key="config") from None


def flatten_toml(doc: Mapping[str, Any], schema: Mapping[Path_, Key], source: str) -> dict[Path_, Origin]:
    """The file's keys as ``{path: Origin}``; unknown keys and listeners raise ConfigError."""
    out: dict[Path_, Origin] = {}
    sections = [*SECTIONS, "listeners", "binding"]
    for top, value in doc.items():
        if top == "binding":
            continue
        if top not in sections:
            raise ConfigError(f"{top}: unknown section in {source}{_suggest(top, sections)}; "
                              f"expected one of {', '.join(sections)}", key=top)
        tables = value.items() if top == "listeners" and isinstance(value, dict) else [(None, value)]
        if top == "listeners" and not isinstance(value, dict):
            raise ConfigError(f"listeners: must be a table of [listeners.<name>] tables in {source}", key=top)
        for lname, table in tables:
            prefix = (top,) if lname is None else (top, lname)
            _flatten_table(prefix, table, schema, source, out)
    return out


def _flatten_table(prefix: Path_, table: object, schema, source: str, out: dict) -> None:
    where = dotted(prefix)
    if prefix[0] == "listeners":
        names = sorted({p[1] for p in schema if p[0] == "listeners"})
        if prefix[1] not in names:
            raise ConfigError(f"{where}: unknown listener in {source}{_suggest(prefix[1], names)}; "
                              f"known listeners: {', '.join(names)}", key=where)
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table in {source}, got {format_value(table)}", key=where)
    keys = [p[-1] for p in schema if p[:-1] == prefix]
    for key, value in table.items():
        if key not in keys:
            raise ConfigError(f"{where}.{key}: unknown key in {source}{_suggest(key, keys)}; "
                              f"expected one of {', '.join(keys)}", key=f"{where}.{key}")
        out[prefix + (key,)] = Origin(value, source, from_text=False)


def from_env(env: Mapping[str, str], schema: Mapping[Path_, Key]) -> dict[Path_, Origin]:
    """``FERRY_*`` variables as ``{path: Origin}``; an unknown one raises ConfigError."""
    names = env_names(schema)
    out: dict[Path_, Origin] = {}
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX) or name in NOT_KEYS:
            continue
        path = names.get(name)
        if path is None:
            hint = _suggest(name, [*names, *sorted(NOT_KEYS)])
            raise ConfigError(f"{name}: unknown environment variable{hint}; "
                              "see docs/configuration.md for the FERRY_* variables", key=name)
        out[path] = Origin(value, name, from_text=True, kind="env")
    return out


# -- building ----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Resolved:
    """A validated configuration and, for every key, its value and origin
    (None: the default). What ``ferry config check`` prints."""

    config: Config
    schema: Mapping[Path_, Key]
    values: Mapping[Path_, Any]
    origins: Mapping[Path_, Origin]

    def source_of(self, path: Path_) -> tuple[str, str]:
        """``(kind, name)``: ``("default", "")``, ``("file", "ferry.toml")``,
        ``("env", "FERRY_LOG_FSYNC")`` or ``("flag", "--fsync")``."""
        origin = self.origins.get(path)
        return ("default", "") if origin is None else (origin.kind, origin.source)


def load_config(
    path: Path | str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    flags: Mapping[Path_, tuple[object, str]] | None = None,
    registry: Registry | None = None,
) -> Config:
    """Read, merge and validate the configuration.

    ``path`` (else ``$FERRY_CONFIG``, else none) is the TOML file; ``env``
    defaults to ``os.environ``; ``flags`` maps key paths to ``(text, flag
    name)``. Raises :class:`ConfigError` on the first problem."""
    return resolve_config(path, env=env, flags=flags, registry=registry).config


def resolve_config(
    path: Path | str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    flags: Mapping[Path_, tuple[object, str]] | None = None,
    registry: Registry | None = None,
) -> Resolved:
    """:func:`load_config`, keeping where every value came from (same arguments,
    same errors)."""
    registry = registry or default_registry()
    known = registry.known()
    schema = schema_for(known)
    env = os.environ if env is None else env
    path = path or env.get(ENV_CONFIG) or None
    origins: dict[Path_, Origin] = {}
    doc: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        doc = read_toml(path)
        origins.update(flatten_toml(doc, schema, path.name))
    origins.update(from_env(env, schema))
    for fpath, (value, flag) in (flags or {}).items():
        if fpath not in schema:
            raise ConfigError(f"{flag}: sets unknown key {dotted(fpath)}", key=dotted(fpath))
        origins[fpath] = Origin(value, flag, from_text=isinstance(value, str), kind="flag")
    values = {p: _convert(p, key, origins.get(p)) for p, key in schema.items()}
    data_origin = origins.get(("server", "data_dir"))
    if path is not None and data_origin is not None and data_origin.kind == "file":
        # A relative data_dir in a config file is relative to that file, not to wherever
        # the command runs: `ferry serve --config /etc/ferry/ferry.toml` and the admin
        # commands' --local open the same directory from any folder (docs/configuration.md).
        data_dir = Path(values[("server", "data_dir")]).expanduser()
        if not data_dir.is_absolute():
            values[("server", "data_dir")] = path.resolve().parent / data_dir
    config = _build(values, known, _bindings(doc.get("binding"), path), path)
    return Resolved(config, MappingProxyType(schema), MappingProxyType(values), MappingProxyType(origins))


def _convert(path: Path_, key: Key, origin: Origin | None) -> Any:
    if origin is None:
        return key.default
    try:
        return key.convert(origin.value, origin.from_text)
    except ValueError as exc:
        raise ConfigError(
            f"{dotted(path)} = {format_value(origin.value)} (from {origin.source}): {exc}",
            key=dotted(path),
            value=origin.value,
        ) from None


def _bindings(tables: object, path: Path | None) -> tuple[Binding, ...]:
    if tables is None:
        return ()
    try:
        from core.addressing import parse_bindings  # core.message, xxhash: only for a file with bindings

        return parse_bindings(tables)
    except InvalidArgument as exc:
        where = f" (in {path.name})" if path else ""
        raise ConfigError(f"{exc.message}{where}", key=str(exc.details.get("field") or "binding")) from None


def _section(values: Mapping[Path_, Any], section: str) -> dict[str, Any]:
    return {p[1]: v for p, v in values.items() if p[0] == section}


def _build(values, known, bindings, path) -> Config:
    server = ServerConfig(**_section(values, "server"))
    logv = _section(values, "log")
    retention = logv.pop("retention_interval_seconds")
    try:
        logcfg = LogConfig(**logv)
    except InvalidArgument as exc:  # a check LogConfig makes that the keys above do not
        raise ConfigError(str(exc), key="log") from None
    listeners = tuple(_listener(values, kl, server.host) for kl in known.values())
    _check_port_conflicts(listeners)
    return Config(
        server=server,
        log=logcfg,
        auth=AuthConfig(**_section(values, "auth")),
        listeners=listeners,
        bindings=bindings,
        retention_interval_s=retention,
        source=path,
        store=_store(_section(values, "store")),
        iggy=IggyConfig(**_section(values, "iggy")),
    )


def _store(values: Mapping[str, Any]) -> StoreConfig:
    store = StoreConfig(**values)
    for url in store.urls:
        scheme, _, hostport = url.partition("://")
        host, _, port = hostport.rpartition(":")
        if scheme not in ("nats", "tls") or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"store.url: {url!r} is not nats://host:port or tls://host:port",
                              key="store.url", value=store.url)
    if store.urls and store.token and store.user:
        raise ConfigError("store: give a token or a user/password, not both", key="store.token")
    for key in ("tls_ca", "tls_cert", "tls_key"):
        path = getattr(store, key)
        if store.urls and path and not Path(path).is_file():
            raise ConfigError(f"store.{key}: {path!r} is not a readable file", key=f"store.{key}", value=path)
    if store.urls and bool(store.tls_cert) != bool(store.tls_key):
        raise ConfigError("store: tls_cert and tls_key go together (mutual TLS)", key="store.tls_cert")
    return store


def _listener(values: Mapping[Path_, Any], kl: KnownListener, default_host: str) -> ListenerConfig:
    mine = {p[2]: v for p, v in values.items() if p[:2] == ("listeners", kl.name)}
    options = {k: mine[k] for k in kl.options}
    return ListenerConfig(
        name=kl.name,
        enabled=mine["enabled"],
        host=mine["host"] if mine["host"] is not None else default_host,
        port=mine["port"],
        transport=kl.transport,
        options=MappingProxyType(options),
    )


def _check_port_conflicts(listeners: tuple[ListenerConfig, ...]) -> None:
    """Two enabled listeners may not bind the same port and transport on
    overlapping addresses (port 0 always gets a fresh port)."""
    seen: list[ListenerConfig] = []
    for lc in listeners:
        if not lc.enabled or lc.port == 0:
            continue
        for other in seen:
            overlap = lc.host == other.host or lc.host in WILDCARD_HOSTS or other.host in WILDCARD_HOSTS
            if other.port == lc.port and other.transport == lc.transport and overlap:
                raise ConfigError(
                    f"listeners.{lc.name}.port = {lc.port}: already used by listeners.{other.name} "
                    f"({lc.transport} on {other.host}); give one of them another port or disable it",
                    key=f"listeners.{lc.name}.port",
                    value=lc.port,
                )
        seen.append(lc)


__all__ = [
    "AuthConfig",
    "Config",
    "ConfigError",
    "IggyConfig",
    "ListenerConfig",
    "Origin",
    "Resolved",
    "SECTIONS",
    "SOURCE_KINDS",
    "LISTENER_KEYS",
    "ServerConfig",
    "env_name",
    "load_config",
    "resolve_config",
    "schema_for",
]
