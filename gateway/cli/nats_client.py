"""What ``ferry pub``, ``sub``, ``req``, ``reply`` and ``bench`` share (gateway/cli/nats.py
registers them): argument types, natscli's connection options and login, the nats-py
:class:`Connection`, natscli's output helpers and :func:`run`, the asyncio runner.

A module of its own so that the command bodies (nats_cmds.py, nats_bench.py) and
the parsers (nats.py) all import it and none imports the other: nats.py imports
the bodies, never the reverse.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import os
import random
import re
import signal
import string
import sys
import time
from urllib.parse import urlsplit

from .exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE

DEFAULT_URL = "nats://127.0.0.1:4222"
DEFAULT_TIMEOUT_S = 5.0  # natscli's --timeout default
SCHEMES = ("nats", "tls", "ws", "wss")  # what nats-py can dial
REPLY_QUEUE = "NATS-RPLY-22"  # natscli reply's default queue group: replies share the work
PUB_LINES_MAX = 20  # natscli prints a line per message up to 20, then shows a progress bar
NEXT_REPLY_GRACE_S = 0.3  # natscli req --reply-timeout default: wait avg rtt + this for more replies


class NatsCliError(Exception):
    """A failure to report as one line (``ferry: <text>``) with exit code ``code``."""

    def __init__(self, text: str, code: int = EXIT_FAILED) -> None:
        super().__init__(text)
        self.code = code


# -- parsing -------------------------------------------------------------------
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds from a Go duration (``300ms``, ``1m30s``) or a plain number of seconds."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        pos, value = 0, 0.0
        for match in _DURATION_PART.finditer(text):
            if match.start() != pos:
                break
            value += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
            pos = match.end()
        if pos != len(text) or not text:
            raise argparse.ArgumentTypeError(f"invalid duration {text!r} (like 5s, 250ms, 1m30s or seconds)")
    if value < 0:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: negative")
    return value


_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2,
               "mib": 1024**2, "g": 1000**3, "gb": 1000**3, "gib": 1024**3}


def parse_size(text: str) -> int:
    """Bytes from ``128``, ``128B``, ``1KB`` (1000), ``1KiB`` (1024), ... (natscli's --size)."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in _SIZE_UNITS:
        raise argparse.ArgumentTypeError(f"invalid size {text!r} (like 128, 128B, 1KB, 1KiB, 1MiB)")
    return int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}: negative")
    return value


# nats-py refuses header names outside this set (its _HEADER_KEY_RE); checking here
# makes a bad -H a usage error before any connection is made.
_HEADER_KEY = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def parse_header(text: str) -> tuple[str, str]:
    """``KEY:VALUE`` (natscli's -H; split at the first colon, both sides trimmed)."""
    key, sep, value = text.partition(":")
    key = key.strip()
    if not sep or not _HEADER_KEY.fullmatch(key):
        raise argparse.ArgumentTypeError(f"invalid header {text!r} (want KEY:VALUE)")
    return key, value.strip()


def check_subject(subject: str, *, wildcards: bool) -> str:
    """Refuse a subject no server would take (whitespace, empty tokens; for a
    subscription also ``>`` before the last token) as a usage error."""
    tokens = subject.split(".")
    if not subject or any(c.isspace() for c in subject) or "" in tokens:
        raise NatsCliError(f"invalid subject {subject!r}", EXIT_USAGE)
    if wildcards and ">" in tokens[:-1]:
        raise NatsCliError(f"invalid subject {subject!r}: '>' must be the last token", EXIT_USAGE)
    return subject


# -- templates (natscli internal/util/headers.go PubReplyBodyTemplate) -----------------
_TEMPLATE = re.compile(r"\{\{\s*\.?(\w+)((?:\s+\d+){0,2})\s*\}\}")
_RANDOM_CHARS = string.ascii_letters + string.digits


def render(text: str, count: int, request: bytes | None = None) -> str:
    """Replace natscli's template calls: ``{{Count}}`` (1-based message number,
    alias ``Cnt``), ``Unix``, ``UnixNano``, ``TimeStamp`` (RFC 3339), ``Time``
    (3:04PM), ``ID``, ``Random MIN MAX`` and, for replies, ``Request``. An unknown
    call is left as written (natscli then sends the text unparsed too)."""
    if "{{" not in text:
        return text
    now = time.time()

    def one(match: re.Match) -> str:
        name, args = match.group(1), [int(a) for a in match.group(2).split()]
        if name in ("Count", "Cnt") and not args:
            return str(count)
        if name == "Unix" and not args:
            return str(int(now))
        if name == "UnixNano" and not args:
            return str(time.time_ns())
        if name == "TimeStamp" and not args:
            return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now)) + _utc_offset(now)
        if name == "Time" and not args:
            return time.strftime("%I:%M%p", time.localtime(now)).lstrip("0")
        if name == "ID" and not args:
            from nats.nuid import NUID

            return NUID().next().decode()
        if name == "Random" and len(args) == 2 and args[0] <= args[1]:
            return "".join(random.choices(_RANDOM_CHARS, k=random.randint(args[0], args[1])))
        if name == "Request" and request is not None and not args:
            return request.decode(errors="replace")
        return match.group(0)

    return _TEMPLATE.sub(one, text)


def render_bytes(data: bytes, count: int, request: bytes | None = None) -> bytes:
    """:func:`render` on a body; a body that is not UTF-8 is sent as it is."""
    if b"{{" not in data:
        return data
    try:
        return render(data.decode(), count, request).encode()
    except UnicodeDecodeError:
        return data


def go_duration(seconds: float) -> str:
    """A duration as Go's ``time.Duration.String`` prints it (``1.234567ms``), for natscli's rtt lines."""
    ns = max(int(round(seconds * 1e9)), 0)
    for scale, unit in ((10**9, "s"), (10**6, "ms"), (10**3, "µs")):
        if ns >= scale:
            whole, frac = divmod(ns, scale)
            digits = f"{frac:0{len(str(scale)) - 1}d}".rstrip("0")
            return f"{whole}.{digits}{unit}" if digits else f"{whole}{unit}"
    return f"{ns}ns"


def _utc_offset(now: float) -> str:
    offset = time.localtime(now).tm_gmtoff
    if offset == 0:
        return "Z"
    sign, offset = ("+" if offset > 0 else "-"), abs(offset)
    return f"{sign}{offset // 3600:02d}:{offset % 3600 // 60:02d}"


# -- connection ------------------------------------------------------------------
class _DeprecatedFlag(argparse.Action):
    """An old spelling that still works, with a one-line note naming the new one."""

    def __init__(self, option_strings, dest, new: str, **kwargs) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"{parser.prog}: note: {option_string} is deprecated for the NATS commands, use {self.new} "
              f"({option_string} names Ferry's HTTP API in the admin commands)", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_connection_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("connection (natscli's flags and variables)")
    g.add_argument("-s", "--nats-server", dest="server", metavar="URL[,URL]",
                   help=f"NATS server URLs, comma-separated (default $NATS_URL, else {DEFAULT_URL})")
    g.add_argument("--nats-user", dest="user", metavar="USER", help="user name (default $NATS_USER, else "
                   "$FERRY_USER, else the configured root user)")
    g.add_argument("--nats-password", dest="password", metavar="PASSWORD",
                   help="password (default $NATS_PASSWORD, else $FERRY_PASSWORD)")
    # The old spellings: in ferry, --server/--user/--password name the HTTP API's (admin commands).
    for old_flag, dest, new in (("--server", "server", "-s/--nats-server"), ("--user", "user", "--nats-user"),
                                ("--password", "password", "--nats-password")):
        g.add_argument(old_flag, dest=dest, action=_DeprecatedFlag, new=new, help=argparse.SUPPRESS)
    g.add_argument("--token", metavar="TOKEN", help="authentication token, e.g. a Ferry personal access token "
                   "(default $NATS_TOKEN, else $FERRY_TOKEN)")
    g.add_argument("--creds", metavar="FILE", help="user credentials file (default $NATS_CREDS; needs nkeys)")
    g.add_argument("--timeout", metavar="DURATION", type=parse_duration,
                   help="connect and reply timeout (default $NATS_TIMEOUT, else 5s)")


def server_urls(text: str) -> list[str]:
    """The comma-separated server list as nats-py URLs (``host:port`` gets ``nats://``)."""
    urls = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        url = part if "://" in part else f"nats://{part}"
        parts = urlsplit(url)
        try:
            parts.port  # noqa: B018 - raises ValueError on a bad port
        except ValueError:
            raise NatsCliError(f"invalid server URL {part!r}: bad port", EXIT_USAGE) from None
        if parts.scheme not in SCHEMES or not parts.hostname:
            raise NatsCliError(f"invalid server URL {part!r} (want nats://HOST:PORT; schemes "
                               f"{', '.join(SCHEMES)})", EXIT_USAGE)
        urls.append(url)
    if not urls:
        raise NatsCliError("no server URL given", EXIT_USAGE)
    return urls


def connection_settings(args: argparse.Namespace, env=os.environ) -> dict:
    """Flags over natscli's variables over defaults: servers, auth, timeout."""
    def pick(flag, var):
        value = getattr(args, flag, None)
        return value if value is not None else (env.get(var) or None)

    timeout = args.timeout
    if timeout is None and env.get("NATS_TIMEOUT"):
        try:
            timeout = parse_duration(env["NATS_TIMEOUT"])
        except argparse.ArgumentTypeError as exc:
            raise NatsCliError(f"NATS_TIMEOUT: {exc}", EXIT_USAGE) from None
    creds = pick("creds", "NATS_CREDS")
    if creds is not None:
        if not os.path.isfile(creds):
            raise NatsCliError(f"--creds {creds}: no such file", EXIT_USAGE)
        try:
            import nkeys  # noqa: F401 - nats-py signs the server's nonce with it
        except ImportError:
            raise NatsCliError("--creds needs the nkeys package (pip install nkeys)", EXIT_USAGE) from None
    servers = server_urls(pick("server", "NATS_URL") or DEFAULT_URL)
    user, password, token = pick("user", "NATS_USER"), pick("password", "NATS_PASSWORD"), pick("token", "NATS_TOKEN")
    if user is None and token is None and creds is None and not any(urlsplit(u).username for u in servers):
        user, password, token = ferry_login(env)
    return {"servers": servers, "user": user, "password": password, "token": token, "creds": creds,
            "timeout": DEFAULT_TIMEOUT_S if timeout is None else timeout}


def ferry_login(env) -> tuple[str | None, str | None, str | None]:
    """``(user, password, token)`` when no NATS credentials were given: Ferry's
    login, as the admin commands make it (gateway/remote_target.py ``resolve_auth``):
    ``$FERRY_TOKEN`` (a personal access token, sent as ``auth_token``), else
    ``$FERRY_USER``/``$FERRY_PASSWORD``, else the configured root user (``iggy``/
    ``iggy`` by default). ``ferry serve``'s NATS listener requires a login; a server
    without authentication (nats-server's default) ignores it."""
    from ..config import ConfigError
    from ..remote_target import client_config, resolve_auth

    try:
        auth = resolve_auth(client_config(None, env=env), token=None, user=None, password=None, env=env)
    except ConfigError:   # an unreadable config: the defaults, as a server without one has them
        from ..config import DEFAULT_ROOT_PASSWORD, DEFAULT_ROOT_USERNAME
        return env.get("FERRY_USER") or DEFAULT_ROOT_USERNAME, env.get("FERRY_PASSWORD") or DEFAULT_ROOT_PASSWORD, \
            env.get("FERRY_TOKEN") or None
    if auth.token:
        return None, None, auth.token
    return auth.username, auth.password, None


def reason(exc: BaseException) -> str:
    """A short human reason for a connection failure."""
    if isinstance(exc, OSError) and exc.errno and not isinstance(exc, TimeoutError):
        text = os.strerror(exc.errno) if exc.errno > 0 else (exc.strerror or str(exc))
        return text if exc.errno not in (errno.ECONNREFUSED,) else "connection refused"
    if isinstance(exc, OSError) and exc.strerror:  # socket.gaierror: errno is negative
        return exc.strerror
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timed out"
    text = str(exc) or type(exc).__name__
    return text[len("nats: "):] if text.startswith("nats: ") else text


def import_nats(servers):
    """``import nats``, without aiohttp unless a server is ``ws://``/``wss://``.

    nats-py imports aiohttp (~0.2 s) at import for its WebSocket transport, which a
    ``nats://`` or ``tls://`` connection never uses; nats-py treats a missing aiohttp
    as "no WebSocket support". Blocking it for that one import keeps ``ferry pub``
    quick. Once nats-py is loaded (as it may be already), this changes nothing."""
    import sys

    if "nats" in sys.modules or any(urlsplit(u).scheme in ("ws", "wss") for u in servers) \
            or "aiohttp" in sys.modules:
        import nats

        return nats
    sys.modules["aiohttp"] = None  # type: ignore[assignment]  # import aiohttp -> ImportError
    try:
        import nats
    finally:
        del sys.modules["aiohttp"]
    return nats


class Connection:
    """A nats-py client plus what its callbacks saw: asynchronous server errors
    (permissions, slow consumer) and whether the connection was lost."""

    def __init__(self, settings: dict) -> None:
        self.settings = settings
        self.errors: list[BaseException] = []
        self.nc = None
        self.closing = False
        self.lost = asyncio.Event()

    async def open(self, name: str):
        nats = import_nats(self.settings["servers"])

        async def on_error(exc: BaseException) -> None:  # nats-py would log a traceback
            self.errors.append(exc)

        async def on_closed() -> None:
            if not self.closing:
                self.lost.set()

        s = self.settings
        kwargs = dict(servers=s["servers"], name=name, connect_timeout=s["timeout"], error_cb=on_error,
                      closed_cb=on_closed, disconnected_cb=on_closed,
                      # A CLI fails rather than retrying for ever: each server once more
                      # straight away (nats-py's pool drops it after max_reconnect_attempts).
                      allow_reconnect=False, max_reconnect_attempts=1, reconnect_time_wait=0)
        if s["user"] is not None:
            kwargs["user"], kwargs["password"] = s["user"], s["password"] or ""
        if s["token"] is not None:
            kwargs["token"] = s["token"]
        if s["creds"] is not None:
            kwargs["user_credentials"] = s["creds"]
        try:
            self.nc = await nats.connect(**kwargs)
        except Exception as exc:  # noqa: BLE001 - every connect failure is one line
            cause = self.errors[-1] if self.errors and type(exc).__name__ == "NoServersError" else exc
            raise NatsCliError(f"cannot connect to {','.join(s['servers'])}: {reason(cause)}") from None
        self.errors.clear()
        return self.nc

    def check(self) -> None:
        """Raise the first asynchronous server error seen (after a flush)."""
        if self.errors:
            raise NatsCliError(reason(self.errors[0]))

    def lost_error(self) -> NatsCliError:
        """``connection to URL lost: why`` (the last asynchronous error, if any)."""
        servers = self.settings["servers"]
        url = servers[0] if len(servers) == 1 else ",".join(servers)
        if self.nc is not None and self.nc.connected_url is not None:
            url = self.nc.connected_url.geturl()
        why = reason(self.errors[-1]) if self.errors else "closed by the server"
        return NatsCliError(f"connection to {url} lost: {why}")

    async def close(self) -> None:
        self.closing = True
        if self.nc is not None and not self.nc.is_closed:
            await self.nc.close()


# -- output ----------------------------------------------------------------------
def log(text: str = "") -> None:
    """A status line on stderr, stamped like Go's log package (natscli's ``log.Printf``)."""
    sys.stderr.write(f"{time.strftime('%H:%M:%S')} {text}\n" if text else "\n")
    sys.stderr.flush()


def write_out(data: bytes) -> None:
    out = sys.stdout.buffer
    out.write(data)
    out.flush()


def body_block(data: bytes, *, compact: bool = False) -> bytes:
    """natscli's ``outPutMSGBody``: the body, a newline if it lacks one, then (not
    compact) one blank line more, plus another when the body did not end in a
    newline; an empty body prints ``nil body``."""
    if not data:
        return b"nil body\n" if compact else b"nil body\n\n\n"
    text = data if data.endswith(b"\n") else data + b"\n"
    if compact:
        return text
    return text + (b"\n" if data.endswith(b"\n") else b"\n\n")


def header_lines(headers: dict | None) -> bytes:
    if not headers:
        return b""
    return b"".join(f"{k}: {v}\n".encode() for k, v in headers.items()) + b"\n"


# -- running ---------------------------------------------------------------------
def run(command, args: argparse.Namespace, *, ctrl_c_ends: bool = False) -> int:
    """Run ``command(args)`` (a coroutine function returning an exit code) on
    asyncio. SIGINT/SIGTERM cancel it; it closes its connections in ``finally``.
    Then exit 0 when Ctrl-C is how the command ends (``sub``, ``reply``), else
    130. A closed stdout (``| head``) ends it with 0 and no traceback."""
    interrupted: list[int] = []

    async def main() -> int:
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(command(args))

        def stop(signum: int) -> None:
            interrupted.append(signum)
            task.cancel()

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop, signum)
        try:
            return await task
        except asyncio.CancelledError:
            if not interrupted:
                raise
            return 0 if ctrl_c_ends else EXIT_INTERRUPTED
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)

    try:
        code = asyncio.run(main())
    except NatsCliError as exc:
        print(f"ferry: {exc}", file=sys.stderr)
        return exc.code
    except BrokenPipeError:
        # The reader went away (``ferry sub x | head -3``): it has what it wanted.
        # Point stdout at /dev/null so the interpreter's final flush cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    if code == EXIT_INTERRUPTED:
        print("ferry: interrupted", file=sys.stderr)
    return code


async def wait_or_lost(conn: Connection, awaitable):
    """Await ``awaitable`` unless the connection is lost first (then fail)."""
    work = asyncio.ensure_future(awaitable)
    lost = asyncio.ensure_future(conn.lost.wait())
    try:
        done, _ = await asyncio.wait({work, lost}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        lost.cancel()
        if not work.done():
            work.cancel()
    if work in done:
        return work.result()
    raise conn.lost_error()
