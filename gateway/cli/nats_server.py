"""``ferry nats-server``: run Ferry where a script or test harness runs ``nats-server``.

Theory of operation
-------------------
The command accepts nats-server's common flags and the parts of its config
file that Ferry has (nats.md sections 11-14), turns them into Ferry
configuration keys, and runs the gateway with only the NATS listeners: the
client port, the monitoring port when ``-m``/``http_port`` is given, and the
WebSocket port when the config has a ``websocket`` block.

Precedence is nats-server's: flags override the config file, which
overrides defaults. Go's flag package accepts ``-port`` as well as
``--port`` and ``-p=4222``; :func:`normalize_argv` rewrites those spellings
(and ``-DV``-style bundles) for argparse. ``FERRY_*`` environment variables
still apply underneath (``FERRY_CONFIG`` does not: the config is ``-c``).

Data goes to ``--store_dir``/``-sd`` when given, else to a scratch directory
``<tmp>/ferry-nats-server/<port>`` (:func:`scratch_dir`), emptied at start and
removed at exit; a server that was killed leaves that one directory, which the
next start on the port reuses, never a new one per run. Several drop-in servers
can run side by side as nats-server instances do (a directory another live
server holds is skipped for ``<port>-1``, ``<port>-2``...). Flags for features Ferry lacks (JetStream,
clustering) are refused with a message instead of being ignored silently.
``-js`` (or a ``jetstream`` config entry) turns on JetStream, which is off
otherwise, as in nats-server (docs/nats.md "JetStream").
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any, Sequence

from adapters.nats.natsconf import lookup
from core.errors import InvalidArgument

from ..listeners.nats import NATS_SERVER_MODE, read_conf, with_credentials

log = logging.getLogger("ferry.natscli")

RANDOM_PORT = -1                     # nats-server's "-p -1": any free port
# Shutdown grace for connections: Ferry's default (docker's SIGKILL comes 10 s
# after SIGTERM); clients already got the lame-duck INFO by then.
GRACE_SECONDS = 5.0
_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
# Long flags Go's flag package also accepts with one dash.
_LONG = {"port", "addr", "net", "http_port", "https_port", "user", "pass", "auth", "tls", "tlscert",
         "tlskey", "tlscacert", "tlsverify", "config", "log", "pid", "name", "server_name",
         "store_dir", "jetstream", "debug", "trace", "logtime", "syslog", "max_payload",
         "cluster", "routes", "cluster_name", "help", "version", "ms", "http_base_path"}
# Config keys Ferry reads; others are reported once as ignored.
_KNOWN_KEYS = {"port", "host", "net", "listen", "http_port", "monitor_port", "http", "authorization",
               "no_auth_user", "tls", "max_payload", "max_pending", "max_control_line", "ping_interval", "ping_max",
               "server_name", "websocket", "debug", "trace", "logtime", "log_file", "logfile",
               "pid_file", "jetstream"}


class NatsCliError(Exception):
    """A flag or config value Ferry cannot honour; printed as one line, exit 2."""


def normalize_argv(argv: Sequence[str]) -> list[str]:
    """Go-style flags as argparse reads them: ``-port=1`` -> ``--port=1``,
    ``-DV`` -> ``-D -V``, ``-DVV`` -> ``-D -V -V``."""
    out: list[str] = []
    for arg in argv:
        if re.fullmatch(r"-[DV]{2,3}", arg):
            out.extend(f"-{c}" for c in arg[1:])
        elif arg.startswith("-") and not arg.startswith("--") and arg[1:].split("=", 1)[0] in _LONG:
            out.append("-" + arg)
        elif re.fullmatch(r"-[a-zA-Z]=.*", arg):
            out.extend(arg.split("=", 1))
        else:
            out.append(arg)
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ferry nats-server",
                                description="Ferry as a drop-in nats-server (core NATS, JetStream streams with -js).")
    p.add_argument("-a", "--addr", "--net", dest="addr", help="bind address (default 0.0.0.0)")
    p.add_argument("-p", "--port", type=int, help="client port (default 4222; -1 = random)")
    p.add_argument("-m", "--http_port", type=int, help="monitoring port (/varz, /connz, ...)")
    p.add_argument("-n", "--name", "--server_name", dest="name", help="server name")
    p.add_argument("-c", "--config", help="nats-server configuration file")
    p.add_argument("-l", "--log", help="log file")
    p.add_argument("-P", "--pid", help="write the process id to this file")
    p.add_argument("-D", "--debug", action="store_true", help="debug logging")
    p.add_argument("-V", "--trace", action="count", default=0, help="trace logging (as debug)")
    p.add_argument("-T", "--logtime", nargs="?", const="true", help="accepted; Ferry's logs always carry times")
    p.add_argument("--user", help="user required for connections")
    p.add_argument("--pass", dest="password", help="password required for connections")
    p.add_argument("--auth", help="authorization token required for connections")
    p.add_argument("--tls", action="store_true", help="enable TLS (needs --tlscert and --tlskey)")
    p.add_argument("--tlscert", help="server certificate file")
    p.add_argument("--tlskey", help="private key for the server certificate")
    p.add_argument("--tlscacert", help="CA certificate for client certificates")
    p.add_argument("--tlsverify", action="store_true", help="require and verify client certificates")
    p.add_argument("--max_payload", "--ms", dest="max_payload", type=int, help="maximum message payload")
    p.add_argument("-sd", "--store_dir", dest="store_dir", help="Ferry's data directory (default: temporary)")
    p.add_argument("-js", "--jetstream", action="store_true",
                   help="enable JetStream (streams and acknowledged publishing on Ferry's log)")
    for flag in ("--cluster", "--routes", "--cluster_name", "--https_port", "--http_base_path"):
        p.add_argument(flag, dest=f"unsupported_{flag[2:]}", help=argparse.SUPPRESS)
    p.add_argument("-v", "--version", action="store_true", help="print the version and exit")
    return p


def parse_duration(value: Any, where: str) -> float:
    """Seconds from a number (seconds, as nats-server reads bare integers) or a
    Go duration string such as ``"2m"``, ``"1m30s"``, ``"500ms"``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    pos, total = 0, 0.0
    for m in _GO_DURATION.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _GO_UNITS[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise NatsCliError(f"{where}: {value!r} is not a duration (like 2m, 30s, 500ms)")
    return total


def _host_port(value: Any, where: str) -> tuple[str | None, int | None]:
    """``"host:port"``, ``":port"``, ``"port"`` or an int."""
    if isinstance(value, int) and not isinstance(value, bool):
        return None, value
    host, sep, port = str(value).rpartition(":")
    try:
        return (host.strip("[]") or None) if sep else None, int(port)
    except ValueError:
        raise NatsCliError(f"{where}: {value!r} is not host:port") from None


def read_config(path: str) -> dict[str, Any]:
    """The ``-c`` file, read and parsed as the NATS listener reads its auth file
    (same size limit and errors), with a config problem as :class:`NatsCliError`."""
    try:
        return read_conf(path)
    except InvalidArgument as exc:
        raise NatsCliError(exc.message) from None


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """Config file then flags, as one flat dict of what Ferry will use."""
    for name, value in vars(args).items():
        if name.startswith("unsupported_") and value is not None:
            raise NatsCliError(f"--{name[len('unsupported_'):]}: not supported by Ferry (no clustering)")
    s: dict[str, Any] = {"host": None, "port": None, "http_host": None, "http_port": None, "opts": {},
                         "ws": None, "debug": False, "log_file": None, "pid_file": None}
    if args.config:
        _apply_config(s, read_config(args.config), args.config)
    _apply_flags(s, args)
    return s


def _apply_config(s: dict[str, Any], doc: dict[str, Any], path: str) -> None:
    opts = s["opts"]
    unknown = sorted(k for k in doc if k.lower() not in _KNOWN_KEYS and not k.isupper())
    if unknown:
        log.warning("nats-server config keys Ferry ignores", extra={"keys": ",".join(unknown)})
    for key in ("host", "net"):
        if lookup(doc, key) is not None:
            s["host"] = str(lookup(doc, key))
    if lookup(doc, "listen") is not None:
        s["host"], port = _host_port(lookup(doc, "listen"), "listen")
        s["port"] = port
    if lookup(doc, "port") is not None:
        s["port"] = _int(lookup(doc, "port"), "port")
    monitor = lookup(doc, "http_port", "monitor_port", "http")
    if monitor is not None:
        s["http_host"], s["http_port"] = _host_port(monitor, "http_port")
    for key in ("max_payload", "max_pending", "max_control_line", "ping_max"):
        if lookup(doc, key) is not None:
            opts[key] = _int(lookup(doc, key), key)
    if lookup(doc, "ping_interval") is not None:
        opts["ping_interval"] = parse_duration(lookup(doc, "ping_interval"), "ping_interval")
    if lookup(doc, "server_name") is not None:
        opts["server_name"] = str(lookup(doc, "server_name"))
    if lookup(doc, "authorization") is not None:
        opts["auth_file"] = str(Path(path).absolute())
    tls = lookup(doc, "tls")
    if tls is not None:
        _apply_tls_block(opts, tls)
    ws = lookup(doc, "websocket", "ws")
    if ws is not None:
        s["ws"] = _ws_block(ws)
    s["debug"] = bool(lookup(doc, "debug", default=False) or lookup(doc, "trace", default=False))
    s["log_file"] = lookup(doc, "log_file", "logfile")
    s["pid_file"] = lookup(doc, "pid_file")
    if lookup(doc, "jetstream") not in (None, False, "disabled", "false"):
        s["jetstream"] = True     # a jetstream block's own store_dir/limits are not read


def _apply_tls_block(opts: dict[str, Any], tls: Any) -> None:
    if not isinstance(tls, dict):
        raise NatsCliError("tls: must be a block {cert_file: ..., key_file: ...}")
    first = lookup(tls, "handshake_first")
    if first is True:
        opts["tls_handshake_first"] = True
    elif first not in (None, False):   # a duration or "auto": wait for a ClientHello, else INFO first
        raise NatsCliError(f"tls.handshake_first: {first!r}: Ferry supports true or false only")
    for key, opt in (("cert_file", "tls_cert"), ("key_file", "tls_key"), ("ca_file", "tls_ca")):
        if lookup(tls, key) is not None:
            opts[opt] = str(lookup(tls, key))
    if lookup(tls, "verify") is not None:
        opts["tls_verify"] = bool(lookup(tls, "verify"))


def _ws_block(ws: Any) -> dict[str, Any]:
    if not isinstance(ws, dict):
        raise NatsCliError("websocket: must be a block {port: ..., no_tls: true}")
    out: dict[str, Any] = {"host": lookup(ws, "host"), "port": lookup(ws, "port", default=8443)}
    if lookup(ws, "listen") is not None:
        out["host"], out["port"] = _host_port(lookup(ws, "listen"), "websocket.listen")
    tls = lookup(ws, "tls")
    if isinstance(tls, dict):
        out["tls_cert"] = str(lookup(tls, "cert_file", default=""))
        out["tls_key"] = str(lookup(tls, "key_file", default=""))
    elif not lookup(ws, "no_tls", default=False):
        raise NatsCliError("websocket: needs a tls block or no_tls: true (as nats-server does)")
    return out


def _apply_flags(s: dict[str, Any], args: argparse.Namespace) -> None:
    opts = s["opts"]
    if args.addr:
        s["host"] = args.addr
    if args.port is not None:
        s["port"] = args.port
    if args.http_port is not None:
        s["http_port"] = args.http_port
    if args.name:
        opts["server_name"] = args.name
    if args.max_payload is not None:
        opts["max_payload"] = args.max_payload
    if args.user is not None or args.password is not None or args.auth is not None:
        opts.pop("auth_file", None)   # flags replace the config's authorization block
        # Handed to the listener in process (listeners/nats.py with_credentials), not as config keys.
        s["credentials"] = (args.user or "", args.password or "", args.auth or "")
    for flag, opt in (("tlscert", "tls_cert"), ("tlskey", "tls_key"), ("tlscacert", "tls_ca")):
        if getattr(args, flag):
            opts[opt] = getattr(args, flag)
    if args.tlsverify:
        opts["tls_verify"] = True
    wants_tls = args.tls or args.tlsverify or bool(args.tlscert or args.tlskey)
    if wants_tls and not (opts.get("tls_cert") and opts.get("tls_key")):
        raise NatsCliError("--tls: needs --tlscert and --tlskey")
    s["debug"] = s["debug"] or args.debug or bool(args.trace)
    s["log_file"] = args.log or s["log_file"]
    s["pid_file"] = args.pid or s["pid_file"]
    opts["jetstream"] = bool(args.jetstream or s.get("jetstream"))


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise NatsCliError(f"{where}: {value!r} must be an integer")
    return value


def _port(port: int | None) -> int | None:
    return 0 if port == RANDOM_PORT else port


def config_flags(s: dict[str, Any], data_dir: str, known) -> dict:
    """``{key path: (value, source)}`` for :func:`gateway.config.load_config`."""
    src = "ferry nats-server"
    flags: dict = {("listeners", "nats", "auth_mode"): (NATS_SERVER_MODE, src),  # nats-server's own users
                   ("server", "data_dir"): (data_dir, src),
                   ("server", "log_level"): ("debug" if s["debug"] else "info", src),
                   ("server", "grace_seconds"): (GRACE_SECONDS, src)}
    enabled = {"nats": True, "nats_monitor": s["http_port"] is not None, "nats_ws": s["ws"] is not None}
    for name in known:
        flags[("listeners", name, "enabled")] = (enabled.get(name, False), src)
    host = s["host"] or "0.0.0.0"
    flags[("listeners", "nats", "host")] = (host, src)
    flags[("listeners", "nats", "port")] = (_port(s["port"]) if s["port"] is not None else 4222, src)
    for key, value in s["opts"].items():
        flags[("listeners", "nats", key)] = (value, src)
    if s["http_port"] is not None:
        flags[("listeners", "nats_monitor", "host")] = (s["http_host"] or host, src)
        flags[("listeners", "nats_monitor", "port")] = (_port(s["http_port"]), src)
    if s["ws"] is not None:
        ws = s["ws"]
        flags[("listeners", "nats_ws", "host")] = (ws.get("host") or host, src)
        flags[("listeners", "nats_ws", "port")] = (_port(_int(ws["port"], "websocket.port")), src)
        for key in ("tls_cert", "tls_key"):
            if ws.get(key):
                flags[("listeners", "nats_ws", key)] = (ws[key], src)
    return flags


SCRATCH_DIR = "ferry-nats-server"  # under the temp dir: <tmp>/ferry-nats-server/<port>


def scratch_dir(port: int | None, base: Path | None = None) -> Path:
    """The data directory of a drop-in server without ``-sd``: one fixed
    directory per port under the temp dir (as nats-server's
    ``$TMPDIR/nats/jetstream``), emptied now, so a killed server's leftovers
    are reused instead of piling up. One held by a live server is skipped."""
    from ..lock import LOCK_FILE, DataDirLock, DataDirLocked

    base = base or Path(tempfile.gettempdir()) / SCRATCH_DIR
    name = "random" if port is not None and port < 0 else str(port or 4222)
    for n in range(100):
        path = base / (name if n == 0 else f"{name}-{n}")
        lock = DataDirLock(path)
        try:
            lock.acquire()
        except DataDirLocked:
            continue
        try:
            for child in path.iterdir():
                if child.name == LOCK_FILE:
                    continue
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        finally:
            lock.release()
        return path
    return Path(tempfile.mkdtemp(prefix="ferry-nats-"))


def main(argv: Sequence[str]) -> int:
    """Run the drop-in server; returns the exit code (2 for unusable flags or config)."""
    from .. import logs, version
    from ..config import ConfigError, load_config
    from ..registry import default_registry

    args = build_parser().parse_args(normalize_argv(argv))
    if args.version:
        print(f"nats-server: v{_nats_version()} (ferry {version()})")
        return 0
    logs.configure("info")
    try:
        s = settings(args)
    except NatsCliError as exc:
        print(f"ferry nats-server: {exc}", file=sys.stderr)
        return 2
    temp = None if args.store_dir else scratch_dir(s.get("port"))
    try:
        registry = default_registry()
        env = {k: v for k, v in os.environ.items() if k != "FERRY_CONFIG"}
        try:
            cfg = load_config(None, env=env, registry=registry,
                              flags=config_flags(s, args.store_dir or str(temp), registry.known()))
        except ConfigError as exc:
            print(f"ferry nats-server: {exc}", file=sys.stderr)
            return 2
        if s.get("credentials"):
            cfg = with_credentials(cfg, *s["credentials"])
        return _run(cfg, s)
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)


def _run(cfg, s: dict[str, Any]) -> int:
    import trio

    from .. import logs

    log_stream = open(s["log_file"], "a", encoding="utf-8") if s["log_file"] else None
    try:
        logs.configure(cfg.server.log_level, cfg.server.log_format, stream=log_stream)
        if s["pid_file"]:
            Path(s["pid_file"]).write_text(f"{os.getpid()}\n")
        # nats-server writes nothing to stdout; the banner goes with the logs.
        return trio.run(partial(_serve, cfg, log_stream or sys.stderr))
    finally:
        if log_stream is not None:
            log_stream.close()


async def _serve(cfg, out) -> int:
    """Run the gateway until SIGINT, SIGTERM or SIGUSR2 (nats-server's lame-duck
    signal: here too every client gets the ``ldm`` INFO, then the process
    exits); a second signal cuts the grace period short (exit 1)."""
    import signal

    import trio

    from ..server import EXIT_FORCED, EXIT_OK, run_gateway

    stop = trio.Event()
    forced = False

    async def watch(signals, scope) -> None:
        nonlocal forced
        async for _ in signals:
            if stop.is_set():
                forced = True
                scope.cancel()
            stop.set()

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGUSR2) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch, signals, nursery.cancel_scope)
            async with trio.open_nursery() as gateway:
                ports = await gateway.start(partial(run_gateway, cfg, stop, out=out))
                announce(cfg, ports)
            nursery.cancel_scope.cancel()
    return EXIT_FORCED if forced else EXIT_OK


def announce(cfg, ports) -> None:
    """nats-server's start-up notices, which harnesses grep for the ports
    (with ``-p -1`` this is the only way to learn the one picked)."""
    lines = (("nats", "Listening for client connections on {}:{}"),
             ("nats_monitor", "Starting http monitor on {}:{}"),
             ("nats_ws", "Listening for websocket clients on {}:{}"))
    for name, text in lines:
        if name in ports:
            log.info(text.format(cfg.listener(name).host, ports[name]))
    log.info("Server is ready")


def _nats_version() -> str:
    from adapters.nats.connection import SERVER_VERSION
    return SERVER_VERSION


__all__ = ["NatsCliError", "build_parser", "config_flags", "main", "normalize_argv", "parse_duration", "settings"]
