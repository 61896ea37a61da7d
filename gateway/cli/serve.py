"""``ferry serve``: its flags, what they set, and the command.

Its own module because two commands share the flags: ``serve`` itself and
``ferry config check`` (gateway/cli/config.py), which copies serve's parser and
asks :func:`serve_flags` what each flag sets, so it judges exactly what
``ferry serve`` with the same arguments would run.
"""

from __future__ import annotations

import argparse

from ..config import ConfigError, env_name, load_config
from ..registry import Registry, default_registry

FSYNC_CHOICES = "always|batch|never (aliases: default = batch, none = never)"


# -- parser ------------------------------------------------------------------
def _listener_flag(name: str) -> str:
    return f"--{name.replace('_', '-')}-port"


def _add_config_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="TOML config file (default: $FERRY_CONFIG, else none)")
    p.add_argument("--data", metavar="DIR", help="data directory (server.data_dir, default ./data)")


def add_parser(sub, registry: Registry) -> None:
    """Add ``serve`` to the ``ferry`` parser's subparsers, a port flag per listener of ``registry``."""
    p = sub.add_parser("serve", help="run the gateway (all listeners on their default ports)",
                       description="Run the gateway until SIGINT or SIGTERM. Flags override "
                                   "FERRY_* environment variables, which override the config file.")
    _add_config_options(p)
    p.add_argument("--host", help="address every listener binds (server.host, default 0.0.0.0)")
    p.add_argument("--fsync", metavar="POLICY", help=f"log.fsync: {FSYNC_CHOICES}")
    p.add_argument("--store", metavar="URL", help="store.url: nats://h1:4222,h2:4222,... keeps messages and "
                                                  "metadata in a NATS JetStream cluster (docs/scale-out.md)")
    p.add_argument("--grace-seconds", metavar="S", help="server.grace_seconds: shutdown grace period")
    p.add_argument("--log-level", metavar="LEVEL", help="server.log_level: debug|info|warning|error|critical")
    p.add_argument("--log-format", metavar="FMT", help="server.log_format: text|json")
    p.add_argument("--only", metavar="NAME[,NAME]", help="enable only these listeners (disable the rest)")
    p.add_argument("--disable", metavar="NAME", action="append", default=[], help="disable a listener (repeatable)")
    ports = p.add_argument_group("listener ports (0 picks a free port)")
    for name, kl in registry.known().items():
        ports.add_argument(_listener_flag(name), dest=f"port_{name}", metavar="N",
                           help=f"listeners.{name}.port (default {kl.default_port}/{kl.transport}; "
                                f"{env_name(('listeners', name, 'port'))})")
    p.set_defaults(func=cmd_serve)


# -- flags -> config ---------------------------------------------------------
def serve_flags(args: argparse.Namespace, registry: Registry) -> dict:
    """The serve flags given, as ``{key path: (text, flag)}`` for load_config."""
    flags: dict = {}
    simple = [("data", ("server", "data_dir"), "--data"), ("host", ("server", "host"), "--host"),
              ("fsync", ("log", "fsync"), "--fsync"), ("store", ("store", "url"), "--store"),
              ("grace_seconds", ("server", "grace_seconds"), "--grace-seconds"),
              ("log_level", ("server", "log_level"), "--log-level"),
              ("log_format", ("server", "log_format"), "--log-format")]
    for attr, path, flag in simple:
        if getattr(args, attr, None) is not None:
            flags[path] = (getattr(args, attr), flag)
    known = registry.known()
    if args.only is not None:
        wanted = {n.strip() for n in args.only.split(",") if n.strip()}
        _check_names(wanted, known, "--only")
        for name in known:
            flags[("listeners", name, "enabled")] = ("true" if name in wanted else "false", "--only")
    _check_names(set(args.disable), known, "--disable")
    for name in args.disable:
        flags[("listeners", name, "enabled")] = ("false", "--disable")
    for name in known:
        value = getattr(args, f"port_{name}", None)
        if value is not None:
            flags[("listeners", name, "port")] = (value, _listener_flag(name))
    return flags


def _check_names(names: set[str], known, flag: str) -> None:
    for name in sorted(names - set(known)):
        raise ConfigError(f"{flag} {name}: unknown listener; known listeners: {', '.join(known)}",
                          key=flag, value=name)


# -- command -----------------------------------------------------------------
def cmd_serve(args: argparse.Namespace) -> int:
    registry = default_registry()
    # load_config skips the admin commands' FERRY_SERVER/TOKEN/USER/PASSWORD (config.CLIENT_ENV)
    cfg = load_config(args.config, flags=serve_flags(args, registry), registry=registry)
    import trio  # after the config checks: a bad config fails fast, without loading trio

    from .. import logs
    from ..server import serve_until_signalled

    logs.configure(cfg.server.log_level, cfg.server.log_format)
    return trio.run(serve_until_signalled, cfg)


__all__ = ["add_parser", "cmd_serve", "serve_flags"]
