"""Which server the admin commands talk to, and as whom (no I/O but reading files).

Theory of operation
-------------------
Every admin command (``stream``, ``topic``, ``produce``, ``tail``, ``user``,
``perm``, ``pat``, ``group``) talks to a running server through its HTTP API
unless told ``--local``. This module turns flags, ``FERRY_*`` client variables
and the configuration into a :class:`Target`, in this order (first found wins):

* the URL: ``--server URL``, ``$FERRY_SERVER``, the config's
  ``[listeners.http]`` host and port (``--config FILE`` / ``$FERRY_CONFIG``,
  ``FERRY_HTTP_PORT``; a wildcard host is reached on loopback), which without
  any config is ``http://127.0.0.1:3000``;
* the identity: ``--token`` / ``$FERRY_TOKEN`` (a personal access token or a
  JWT), else ``--user``/``--password`` (``$FERRY_USER``/``$FERRY_PASSWORD``),
  else the configured root user (``[auth]``, ``iggy``/``iggy`` by default).

``--local`` opens the data directory instead; it must be named (``--data
DIR``, ``$FERRY_SERVER_DATA_DIR`` or the config's ``server.data_dir``, a
relative one resolved against the config file's directory), never silently
the current directory: an admin command run from another folder must not
report "nothing stored" about a directory the server never used.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping
from urllib.parse import urlsplit

from .config import CLIENT_ENV, Config, ConfigError, load_config, read_toml

DEFAULT_SERVER = "http://127.0.0.1:3000"
LOOPBACK = "127.0.0.1"   # a listener bound to every address is reached on loopback
_ANY_HOSTS = ("0.0.0.0", "::", "[::]", "")
# The admin commands' own variables, which `ferry serve` ignores (gateway/config.py CLIENT_ENV).
ENV_SERVER, ENV_TOKEN, ENV_USER, ENV_PASSWORD = CLIENT_ENV
ENV_DATA_DIR = "FERRY_SERVER_DATA_DIR"


@dataclass(frozen=True, slots=True)
class Auth:
    """Who the commands log in as: a token (PAT or JWT), else a username and password."""

    username: str = ""
    password: str = dataclasses.field(default="", repr=False)
    token: str = dataclasses.field(default="", repr=False)

    @property
    def is_jwt(self) -> bool:
        """A JWT is three base64url parts joined by dots; Ferry's PATs have no dot
        (core/auth.py: ``secrets.token_urlsafe``)."""
        return self.token.count(".") == 2

    def describe(self) -> str:
        if self.token:
            return "the given JWT" if self.is_jwt else "the given personal access token"
        return f"user {self.username!r}"


@dataclass(frozen=True, slots=True)
class Target:
    """A running server's HTTP API: ``scheme://host:port`` and the identity to use."""

    scheme: str
    host: str
    port: int
    auth: Auth
    source: str = "default"   # where the URL came from, for error messages
    tcp_port: int | None = None  # the Iggy TCP listener of the same config, if known (group offsets)
    local: bool = False      # --local: open the config's data directory; this target is only the fallback

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def parse_server_url(text: str, auth: Auth, source: str) -> Target:
    """``http://host:port``, ``https://host:port`` or ``host:port`` (http);
    ConfigError (exit 2) when it is none of these."""
    raw = text.strip()
    parts = urlsplit(raw if "://" in raw else f"http://{raw}")
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise ConfigError(f"{source} = {text!r}: expected http://HOST:PORT or https://HOST:PORT", key=source)
    if port is None:  # Ferry's HTTP port, or HTTPS's own when the scheme says so
        port = 443 if parts.scheme == "https" else 3000
    return Target(parts.scheme, parts.hostname, port, auth, source)


def _config_target(cfg: Config, auth: Auth) -> Target:
    lc = cfg.listener("http")
    where = f"[listeners.http] of {cfg.source}" if cfg.source else "the default [listeners.http]"
    if not lc.enabled:
        raise ConfigError(f"{where} is disabled, and the admin commands talk to the server through it; "
                          "enable it, pass --server URL, or use --local", key="listeners.http.enabled")
    if lc.port == 0:
        raise ConfigError(f"{where} has port 0 (a free port picked at start), so the admin commands cannot "
                          "find it; pass --server URL or use --local", key="listeners.http.port")
    host = LOOPBACK if lc.host in _ANY_HOSTS else lc.host
    scheme = "https" if lc.options.get("tls_cert") else "http"
    return Target(scheme, host, lc.port, auth, where)


def _tcp_port(cfg: Config) -> int | None:
    try:
        lc = cfg.listener("iggy_tcp")
    except KeyError:
        return None
    return lc.port if lc.enabled and lc.port and not lc.options.get("tls_cert") else None


def resolve_auth(cfg: Config, *, token: str | None, user: str | None, password: str | None,
                 env: Mapping[str, str]) -> Auth:
    if token == "":
        raise ConfigError("--token is empty (a personal access token or JWT)", key="--token")
    token = token if token is not None else env.get(ENV_TOKEN)
    if token:
        return Auth(token=token)
    user = user if user is not None else env.get(ENV_USER)
    password = password if password is not None else env.get(ENV_PASSWORD)
    if user:
        if password is None:
            password = _ask_password(user)
        return Auth(user, password)
    return Auth(cfg.auth.root_username, password if password is not None else cfg.auth.root_password)


def _ask_password(user: str) -> str:
    import sys

    if not sys.stdin.isatty():
        raise ConfigError(f"--user {user}: no password given (--password or {ENV_PASSWORD})", key="--password")
    import getpass

    return getpass.getpass(f"password for {user}: ")


def resolve_target(cfg: Config, auth: Auth, server: str | None, env: Mapping[str, str]) -> Target:
    """The server to talk to (see the module docstring for the order)."""
    tcp = _tcp_port(cfg)
    if server:
        return dataclasses.replace(parse_server_url(server, auth, "--server"), tcp_port=tcp)
    if env.get(ENV_SERVER):
        return dataclasses.replace(parse_server_url(env[ENV_SERVER], auth, ENV_SERVER), tcp_port=tcp)
    return dataclasses.replace(_config_target(cfg, auth), tcp_port=tcp)


def local_data_dir(cfg: Config, data: str | None, env: Mapping[str, str]) -> Path:
    """The data directory ``--local`` opens: ``--data`` (as typed, relative to the
    current directory), ``$FERRY_SERVER_DATA_DIR``, or the config file's
    ``server.data_dir`` (load_config makes a relative one relative to the file's
    directory, as ``ferry serve`` does). ConfigError when none names one."""
    if data is not None or env.get(ENV_DATA_DIR):
        return cfg.server.data_dir  # load_config took --data as a flag, or read the variable
    if cfg.source is not None and "data_dir" in (read_toml(Path(cfg.source)).get("server") or {}):
        return cfg.server.data_dir
    raise ConfigError("--local needs to know the data directory: pass --data DIR, or a config "
                      "(--config FILE / FERRY_CONFIG) that sets server.data_dir", key="--data")


def client_config(path, *, env: Mapping[str, str], flags: Mapping | None = None) -> Config:
    """The config a client command (admin or NATS) reads, for its server and login.

    It first validates against the listener table alone (registry.DEFAULT_LISTENERS:
    names, ports, the keys every listener has) instead of importing every listener
    module, which loads trio, aioquic, h2, the adapters... (~1 s). Only a setting the
    table does not know (a listener's own option in the file or a FERRY_* variable)
    needs the real listeners: then it loads them and validates again, so an error
    is the same as ``ferry serve``'s. load_config skips CLIENT_ENV itself."""
    from .registry import Registry

    try:
        return load_config(path, env=env, flags=dict(flags or {}), registry=Registry.of())
    except ConfigError:
        return load_config(path, env=env, flags=dict(flags or {}))


def admin_setup(args, env: Mapping[str, str] | None = None) -> tuple[Config, Target]:
    """The configuration and target of an admin command's parsed ``args``
    (``config``, ``data``, ``local``, ``server``, ``token``, ``user``, ``password``).

    With ``--local`` the returned config's ``server.data_dir`` is the directory to open."""
    env = os.environ if env is None else env
    data = getattr(args, "data", None)
    flags = {("server", "data_dir"): (data, "--data")} if data is not None else {}
    cfg = client_config(getattr(args, "config", None), env=env, flags=flags)
    auth = resolve_auth(cfg, token=getattr(args, "token", None), user=getattr(args, "user", None),
                        password=getattr(args, "password", None), env=env)
    if is_local(args):
        server = dataclasses.replace(cfg.server, data_dir=local_data_dir(cfg, data, env))
        cfg = dataclasses.replace(cfg, server=server)
        # The fallback when a server holds the directory is the same config's listener.
        try:
            target = _config_target(cfg, auth)
        except ConfigError:
            target = Target("http", LOOPBACK, 0, auth, "none")
        return cfg, dataclasses.replace(target, local=True)
    target = resolve_target(cfg, auth, getattr(args, "server", None), env)
    return cfg, target


def is_local(args) -> bool:
    """``--local``, or ``--data DIR`` (naming a directory is asking for it)."""
    return bool(getattr(args, "local", False) or getattr(args, "data", None) is not None)


__all__ = ["Auth", "CLIENT_ENV", "client_config", "DEFAULT_SERVER", "Target", "admin_setup", "is_local",
           "local_data_dir", "parse_server_url", "resolve_auth", "resolve_target"]
