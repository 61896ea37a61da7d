"""The listener registry: which listeners exist, their default ports, how to start them.

Theory of operation
-------------------
Listeners plug in by *discovery*: every public module of the package
``gateway.listeners`` defines ``LISTENER = ListenerSpec(...)``
(see that package's docstring). :func:`discover` imports them and checks the
specs; nothing else in the gateway names a listener. The port table below is
the documented default set (docs/quickstart.md, "Run it": the port table): configuration accepts
``[listeners.<name>]`` for every name in it even before that listener's module
lands, so a config file written today keeps working tomorrow. A spec may add
listener-specific keys with their defaults (``options``); they become valid
keys of its table, ``FERRY_<NAME>_<KEY>`` variables, and
``ListenerConfig.options`` at run time.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Awaitable, Callable, Mapping

TCP = "tcp"
UDP = "udp"
TRANSPORTS = (TCP, UDP)

# Default ports (docs/quickstart.md, "Run it": the port table). NATS ones are nats-server's own
# defaults (4222 client, 8222 monitoring); Iggy's are its server defaults (TCP
# 8090, QUIC 8080, HTTP 3000, WebSocket 8092); Pravega's are its segment store (12345) and
# controller (9090) defaults. 8443 is the port nats-server's docs use for
# WebSocket examples.
DEFAULT_LISTENERS: Mapping[str, tuple[int, str]] = MappingProxyType(
    {
        "iggy_tcp": (8090, TCP),
        "iggy_quic": (8080, UDP),
        "iggy_ws": (8092, TCP),
        "http": (3000, TCP),
        "nats": (4222, TCP),
        "nats_monitor": (8222, TCP),
        "nats_ws": (8443, TCP),
        "pravega": (12345, TCP),
        "pravega_controller": (9090, TCP),
        "kafka": (9092, TCP),
    }
)

# Keys every [listeners.<name>] table has; a spec's options may not reuse them.
COMMON_KEYS = ("enabled", "host", "port")
# Names that would make a FERRY_<NAME>_<KEY> variable read as another section's.
RESERVED_NAMES = frozenset({"server", "log", "auth", "binding", "listeners", "config"})
# A listener name is a config key, part of a flag (--nats-monitor-port) and of
# an environment variable (FERRY_NATS_MONITOR_PORT): lower-case identifier only.
_NAME_RE = re.compile(r"[a-z][a-z0-9_]*")
_OPTION_TYPES = (bool, int, float, str, tuple)
MAX_PORT = 65535  # TCP/UDP port numbers are u16 (RFC 793, RFC 768)

ServeFn = Callable[..., Awaitable[None]]


class RegistryError(Exception):
    """A listener module or spec is malformed: a bug in that module, reported at start."""


class ListenerStartError(Exception):
    """A listener could not bind its address (port taken, address not local, ...)."""

    def __init__(self, name: str, where: str, err: OSError) -> None:
        super().__init__(f"listener {name} cannot listen on {where}: {err.strerror or err}")
        self.listener = name
        self.errno = err.errno


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    """How to start one listener.

    ``serve(broker, cfg: ListenerConfig, conn_nursery, *, task_status)`` is an
    async function supporting ``nursery.start``: it binds ``cfg.host:cfg.port``
    (port 0 picks a free one), calls ``task_status.started(bound_port)`` and
    serves until cancelled. ``options`` maps extra config keys of
    ``[listeners.<name>]`` to their defaults (bool, int, float, str or a tuple
    of str); the configured values reach ``serve`` as ``cfg.options``.
    """

    name: str
    default_port: int
    transport: str
    serve: ServeFn
    options: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""

    def __post_init__(self) -> None:
        check_name(self.name)
        if isinstance(self.default_port, bool) or not isinstance(self.default_port, int):
            raise RegistryError(f"listener {self.name!r}: default_port must be an int, got {self.default_port!r}")
        if not 1 <= self.default_port <= MAX_PORT:
            raise RegistryError(f"listener {self.name!r}: default_port {self.default_port} is not in 1..{MAX_PORT}")
        if self.transport not in TRANSPORTS:
            raise RegistryError(f"listener {self.name!r}: transport must be tcp or udp, got {self.transport!r}")
        if not inspect.iscoroutinefunction(self.serve):
            raise RegistryError(f"listener {self.name!r}: serve must be an async function")
        for key, default in self.options.items():
            _check_option(self.name, key, default)
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))


def check_name(name: object) -> None:
    """Raise :class:`RegistryError` unless ``name`` is a usable listener name."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise RegistryError(f"listener name {name!r} must match [a-z][a-z0-9_]*")
    if name in RESERVED_NAMES:
        raise RegistryError(f"listener name {name!r} is reserved (it names a config section)")


def _check_option(listener: str, key: object, default: object) -> None:
    if not isinstance(key, str) or not _NAME_RE.fullmatch(key) or key in COMMON_KEYS:
        raise RegistryError(f"listener {listener!r}: option name {key!r} is invalid or reserved")
    if not isinstance(default, _OPTION_TYPES):
        raise RegistryError(
            f"listener {listener!r}: option {key!r} default must be bool, int, float, str or tuple, "
            f"got {type(default).__name__}"
        )
    if isinstance(default, tuple) and not all(isinstance(v, str) for v in default):
        raise RegistryError(f"listener {listener!r}: option {key!r} default must be a tuple of str")


@dataclass(frozen=True, slots=True)
class KnownListener:
    """A listener name configuration accepts; ``spec`` is None until its module exists."""

    name: str
    default_port: int
    transport: str
    options: Mapping[str, Any]
    spec: ListenerSpec | None


@dataclass(frozen=True)
class Registry:
    """The discovered listener specs, by name."""

    specs: Mapping[str, ListenerSpec]

    @classmethod
    def of(cls, *specs: ListenerSpec) -> "Registry":
        """A registry holding exactly ``specs`` (tests build one by hand)."""
        by_name: dict[str, ListenerSpec] = {}
        for spec in specs:
            if spec.name in by_name:
                raise RegistryError(f"listener {spec.name!r} is defined twice")
            by_name[spec.name] = spec
        return cls(MappingProxyType(by_name))

    def get(self, name: str) -> ListenerSpec | None:
        return self.specs.get(name)

    def known(self) -> dict[str, KnownListener]:
        """Every configurable listener: the default table in its order, then
        discovered listeners that are not in it, by name. A discovered spec
        overrides the table's port and transport for its name."""
        names = list(DEFAULT_LISTENERS) + sorted(n for n in self.specs if n not in DEFAULT_LISTENERS)
        known: dict[str, KnownListener] = {}
        for name in names:
            spec = self.specs.get(name)
            if spec is not None:
                known[name] = KnownListener(name, spec.default_port, spec.transport, spec.options, spec)
            else:
                port, transport = DEFAULT_LISTENERS[name]
                known[name] = KnownListener(name, port, transport, MappingProxyType({}), None)
        return known


def discover(package: str = "gateway.listeners") -> Registry:
    """Import every public module of ``package`` and collect its ``LISTENER``.

    Raises :class:`RegistryError` naming the module when one fails to import,
    lacks ``LISTENER``, holds something else, or repeats a name."""
    try:
        pkg = importlib.import_module(package)
    except ImportError as exc:
        raise RegistryError(f"listener package {package!r} cannot be imported: {exc}") from exc
    specs: list[ListenerSpec] = []
    for info in sorted(pkgutil.iter_modules(getattr(pkg, "__path__", [])), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        modname = f"{package}.{info.name}"
        try:
            module = importlib.import_module(modname)
        except Exception as exc:  # noqa: BLE001 - any failure is that module's bug; name it
            raise RegistryError(f"listener module {modname} failed to import: {exc!r}") from exc
        spec = getattr(module, "LISTENER", None)
        if not isinstance(spec, ListenerSpec):
            raise RegistryError(f"listener module {modname} must define LISTENER = ListenerSpec(...)")
        specs.append(spec)
    return Registry.of(*specs)


@functools.cache
def default_registry() -> Registry:
    """The product's listeners (``gateway.listeners``), discovered once per process."""
    return discover()


__all__ = [
    "DEFAULT_LISTENERS",
    "KnownListener",
    "ListenerSpec",
    "ListenerStartError",
    "Registry",
    "RegistryError",
    "TCP",
    "UDP",
    "default_registry",
    "discover",
]
