"""The start-up banner: what a person starting ``ferry serve`` needs to see.

Printed once every enabled listener is bound, so the ports shown are the real
ones (port 0 in the config shows the port the OS picked). The last line is
``ready``: scripts and tests wait for it.
"""

from __future__ import annotations

from typing import Collection, Mapping

from adapters.iggy._compiled import COMPILED as IGGY_COMPILED
from adapters.nats.codec import COMPILED as NATS_COMPILED
from core.log.encoded import COMPILED as STAMPING_COMPILED

from .config import Config, ListenerConfig, env_name

READY_LINE = "ready"
_NAME_WIDTH = 20


def format_address(host: str, port: int, transport: str) -> str:
    """``0.0.0.0:4222/tcp``; IPv6 hosts in brackets (RFC 3986 section 3.2.2)."""
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}/{transport}"


def _fsync_text(cfg: Config) -> str:
    policy = cfg.log.fsync
    if policy == "batch":
        if cfg.log.fsync_interval_ms:
            return f"batch (group commit, busy rounds wait <= {cfg.log.fsync_interval_ms:g} ms)"
        return "batch (group commit: acks after fdatasync, concurrent appends share one)"
    if policy == "always":
        return "always (every append is fsynced before it is acknowledged)"
    return "never (acknowledged after write(2); the OS decides when data reaches disk)"


def _speedups_text(compiled: bool) -> str:
    if compiled:
        return "compiled record stamping, Iggy wire loops and NATS PUB scanner (core, adapters.iggy, adapters.nats)"
    return "none: pure-Python loops (FERRY_PURE_PYTHON set, or no C compiler when Ferry was installed)"


def _listener_line(lc: ListenerConfig, ports: Mapping[str, int], available: Collection[str]) -> str:
    if not lc.enabled:
        status = "disabled"
    elif lc.name not in available:
        status = "not available in this build"
    else:
        status = format_address(lc.host, ports[lc.name], lc.transport)
        if lc.name in _NO_LOGIN:
            status += f"  ({_NO_LOGIN[lc.name]})"
    return f"    {lc.name:<{_NAME_WIDTH}} {status}"


# Every listener's clients log in as Ferry's users (docs/security.md), except the
# NATS ones run as the nats-server drop-in (`ferry nats-server`, auth_mode =
# "nats-server"), which check nats-server's own user list and have no Ferry login
# for a default password to open. nats_ws shares the nats listener's settings.
_SHARES_SETTINGS_OF = {"nats_ws": "nats"}
# Listeners with no login at all, and what they show (docs/security.md "What is public").
_NO_LOGIN = {"nats_monitor": "no login: counters, connections, subjects, stream names; never message data"}
NATS_SERVER_MODE = "nats-server"


def _settings_of(cfg: Config, lc: ListenerConfig) -> ListenerConfig:
    owner = _SHARES_SETTINGS_OF.get(lc.name)
    if owner is None:
        return lc
    try:
        return cfg.listener(owner)
    except KeyError:
        return lc


def _ferry_login(cfg: Config, lc: ListenerConfig) -> bool:
    if lc.name in _NO_LOGIN:
        return False
    return _settings_of(cfg, lc).options.get("auth_mode", "ferry") != NATS_SERVER_MODE


def _ferry_logins_served(cfg: Config) -> bool:
    return any(_ferry_login(cfg, lc) for lc in cfg.enabled_listeners())


def credential_warning(cfg: Config) -> str | None:
    """The warning shown while the root user keeps the default password and some
    enabled listener accepts Ferry logins, else None."""
    if not cfg.auth.uses_default_password or not _ferry_logins_served(cfg):
        return None
    var = env_name(("auth", "root_password"))
    return (
        f"WARNING: the root user {cfg.auth.root_username!r} uses the default password; "
        f"set [auth] root_password or {var} before exposing this server"
    )


def open_doors(cfg: Config) -> list[str]:
    """One warning per enabled listener that admits clients without credentials
    (its ``anonymous_user``, or the settings it shares), naming the user they act as."""
    out = []
    for lc in cfg.enabled_listeners():
        if not _ferry_login(cfg, lc):
            continue
        owner = _settings_of(cfg, lc)
        user = str(owner.options.get("anonymous_user", "") or "")
        if user:
            out.append(f"WARNING: {lc.name} admits clients without credentials as Ferry user {user!r} "
                       f"([listeners.{owner.name}] anonymous_user)")
    return out


def format_banner(cfg: Config, ports: Mapping[str, int], available: Collection[str], version: str,
                  compiled: bool = STAMPING_COMPILED and IGGY_COMPILED and NATS_COMPILED) -> str:
    """The banner text. ``ports`` maps each started listener to its bound
    port; ``available`` names the listeners this build implements;
    ``compiled``: whether core._speedups is in use (core/log/encoded.py)."""
    lines = [
        f"Ferry {version}: multi-protocol message gateway",
        f"  config       {cfg.source if cfg.source else '(defaults, environment and flags)'}",
        f"  data dir     {cfg.server.data_dir.absolute()}",
    ]
    if cfg.store.urls:  # scale-out (docs/scale-out.md): the cluster is the store, data dir a cache
        lines[-1] += " (a cache of the store)"
        lines.append(f"  store        JetStream at {', '.join(cfg.store.urls)} "
                     f"(R{cfg.store.replicas}, prefix {cfg.store.prefix}): acks once the cluster stored")
    else:
        lines.append(f"  fsync        {_fsync_text(cfg)}")
    lines += [
        f"  speedups     {_speedups_text(compiled)}",
        "  listeners",
    ]
    lines.extend(_listener_line(lc, ports, available) for lc in cfg.listeners)
    warning = credential_warning(cfg)
    if warning:
        lines.append(warning)
    lines.extend(open_doors(cfg))
    lines.append(READY_LINE)
    return "\n".join(lines) + "\n"


__all__ = ["READY_LINE", "credential_warning", "format_address", "format_banner", "open_doors"]
