"""A blocking NATS client for short, rare metadata round trips (issue 14).

The gateway's trio thread sometimes needs one answer from the cluster before it
can go on (create a stream at startup, read a consumer's info in an admin
command). :class:`BlockingNats` does that over a plain ``socket`` (optionally
TLS), one request at a time, and never blocks longer than the timeout it was
given: every ``recv``/``send`` runs with the time left until a deadline.
The one thing no timeout covers is name resolution (``getaddrinfo`` has no
timeout parameter); use IP addresses or a local resolver where that matters.

Framing is :class:`adapters.nats.client_codec.ClientCodec`. The handshake is
the one every NATS client does (protocols/nats.md section 5): read ``INFO``,
upgrade to TLS when asked or offered-and-required, send ``CONNECT``, then
``PING`` and wait for ``PONG``, which proves the server accepted ``CONNECT``
(an ``-ERR`` before it, e.g. ``Authorization Violation``, is the reason the
connect failed). Replies come to one wildcard subscription
``_INBOX.<random>.*`` made at connect; each request uses a fresh last token,
and replies to earlier, timed-out requests are skipped.

:func:`parse_url` and :func:`connect_options` are shared with the trio client
(:mod:`gateway.jetstream_store.client`).
"""

from __future__ import annotations

import itertools
import secrets
import socket
import ssl
import time
from typing import Any
from urllib.parse import urlsplit

from adapters.nats.client_codec import (
    NEED_DATA,
    PONG,
    STATUS_NO_RESPONDERS,
    ClientCodec,
    NatsClientProtocolError,
    ServerErr,
    ServerEvent,
    ServerInfo,
    ServerMsg,
    ServerPing,
    ServerPong,
    encode_connect,
    encode_pub,
    encode_sub,
    status_of,
)

from .errors import ClusterServerError, ClusterUnreachable, NoResponders

DEFAULT_PORT = 4222  # IANA-registered NATS client port
# Per URL: a loopback or LAN server answers INFO in milliseconds; two seconds
# leaves room for a TLS handshake over a WAN without stalling the trio thread long.
DEFAULT_CONNECT_TIMEOUT_S = 2.0
# Metadata calls ($JS.API.*) are answered by the meta leader in milliseconds;
# nats-py and nats.go default to 2 s and 5 s. A stuck call must not stall the
# trio thread for long, so the shorter one.
DEFAULT_REQUEST_TIMEOUT_S = 2.0
RECV_SIZE = 64 * 1024  # one read; metadata replies are a few KiB
INBOX_PREFIX = "_INBOX"  # nats-server and every client use this prefix for replies
INBOX_SID = 1           # the only subscription of the blocking client
# 22 base64 characters (as nats.go's NUID is 22 characters) make a collision
# between two clients' inboxes negligible.
INBOX_RANDOM_BYTES = 16
PERMISSIONS_VIOLATION = "Permissions Violation"  # nats-server's non-fatal -ERR prefix
_SCHEMES = {"nats": False, "tls": True}


def parse_url(url: str) -> tuple[str, int, bool]:
    """``nats://h:p`` / ``tls://h:p`` / ``h:p`` -> ``(host, port, tls)``.

    Credentials belong in ``user=``/``password=``/``token=``, not the URL (a URL
    is logged in error messages), so a URL with them is refused."""
    parts = urlsplit(url if "://" in url else "nats://" + url)
    if parts.scheme not in _SCHEMES:
        raise ValueError(f"unsupported NATS URL scheme in {url!r} (use nats:// or tls://)")
    if parts.username or parts.password:
        raise ValueError(f"credentials in NATS URL {parts.hostname!r}: pass user=/password=/token=")
    if not parts.hostname:
        raise ValueError(f"no host in NATS URL {url!r}")
    return parts.hostname, parts.port or DEFAULT_PORT, _SCHEMES[parts.scheme]


def connect_options(name: str, user: str | None, password: str | None,
                    token: str | None) -> dict[str, Any]:
    """The ``CONNECT`` JSON both clients send: no ``+OK`` per operation (verbose
    off), no subject checks (pedantic off), header support (HPUB/HMSG; needed for
    JetStream), and ``no_responders`` so a request nobody serves fails at once
    with a 503 instead of waiting out its timeout."""
    opts: dict[str, Any] = {"verbose": False, "pedantic": False, "headers": True,
                            "no_responders": True, "protocol": 1, "name": name,
                            "lang": "python-ferry", "version": "1"}
    if user is not None:
        opts["user"] = user
    if password is not None:
        opts["pass"] = password
    if token is not None:
        opts["auth_token"] = token
    return opts


def new_inbox_prefix() -> str:
    """``_INBOX.<random>``, unique to one client."""
    return f"{INBOX_PREFIX}.{secrets.token_urlsafe(INBOX_RANDOM_BYTES)}"


def wants_tls(url_tls: bool, info: dict, tls: ssl.SSLContext | None) -> bool:
    """Whether to upgrade after INFO: a ``tls://`` URL, a context given, or a server
    that requires it. Raises ValueError when TLS is wanted and the server offers none."""
    want = url_tls or tls is not None or bool(info.get("tls_required"))
    if want and not (info.get("tls_required") or info.get("tls_available")):
        raise ValueError("TLS requested but the server does not offer TLS")
    return want


class _Broken(Exception):
    """The socket failed (or the server closed it); the connection is unusable."""


class BlockingNats:
    """A blocking NATS client: :meth:`connect`, :meth:`request`, :meth:`close`.

    Not thread-safe; one request at a time. After a broken connection the next
    :meth:`request` reconnects once (starting from the next URL) and resends;
    the request may then have reached the cluster twice, which is fine for the
    idempotent metadata calls this is for.
    """

    def __init__(self, urls: list[str], *, user: str | None = None, password: str | None = None,
                 token: str | None = None, tls: ssl.SSLContext | None = None,
                 name: str = "ferry-gateway",
                 connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
                 request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S) -> None:
        if not urls:
            raise ValueError("at least one NATS URL is needed")
        self.urls = list(urls)
        self._parsed = [parse_url(u) for u in self.urls]
        self._options = connect_options(name, user, password, token)
        self._tls = tls
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self._sock: socket.socket | None = None
        self._codec = ClientCodec()
        self._index = -1           # URL index of the current (or last) connection
        self._inbox = new_inbox_prefix()
        self._tokens = itertools.count(1)
        self.server_info: dict = {}
        self.server_url: str | None = None

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def __enter__(self) -> BlockingNats:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connecting --------------------------------------------------------------------
    def connect(self, *, deadline: float | None = None) -> None:
        """Connect to the first URL that works, in order; raises
        :class:`ClusterUnreachable` naming every URL tried and why."""
        self._connect_from(0, deadline)

    def _connect_from(self, start: int, deadline: float | None) -> None:
        self.close()
        failures = []
        n = len(self.urls)
        for i in range(start, start + n):
            index = i % n
            limit = time.monotonic() + self.connect_timeout_s
            if deadline is not None:
                limit = min(limit, deadline)
            try:
                self._open(index, limit)
                return
            except (OSError, ValueError, _Broken, NatsClientProtocolError) as exc:
                failures.append(f"{self.urls[index]} ({_reason(exc)})")
                self.close()
        raise ClusterUnreachable("no NATS server reachable: " + "; ".join(failures))

    def _open(self, index: int, deadline: float) -> None:
        host, port, url_tls = self._parsed[index]
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("timed out")
        sock = socket.create_connection((host, port), timeout=remaining)
        self._sock, self._codec, self._index = sock, ClientCodec(), index
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        event = self._next_event(deadline)
        if not isinstance(event, ServerInfo):
            raise ValueError(f"expected INFO first, got {event!r}")
        self.server_info = event.fields
        if wants_tls(url_tls, event.fields, self._tls):
            ctx = self._tls or ssl.create_default_context()
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            self._sock = sock = ctx.wrap_socket(sock, server_hostname=host)
        self._send(encode_connect(self._options) + encode_sub(self._inbox + ".*", INBOX_SID)
                   + b"PING\r\n", deadline)
        while True:
            event = self._next_event(deadline)
            if isinstance(event, ServerPong):
                break
            if isinstance(event, ServerErr):
                raise _Broken(event.text)
            if isinstance(event, ServerPing):
                self._send(PONG, deadline)
        self.server_url = self.urls[index]

    def close(self) -> None:
        """Close the socket (idempotent); a later :meth:`request` reconnects."""
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    # -- I/O with a deadline ---------------------------------------------------------------
    def _send(self, data: bytes, deadline: float) -> None:
        assert self._sock is not None
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("timed out")
        self._sock.settimeout(remaining)
        try:
            self._sock.sendall(data)
        except TimeoutError:
            self.close()   # part of a frame may have gone out: the stream is out of step
            raise

    def _next_event(self, deadline: float) -> ServerEvent:
        """The next server event, reading as needed until ``deadline``. A closed
        socket raises :class:`_Broken` (with the server's last ``-ERR`` if any)."""
        assert self._sock is not None
        while True:
            event = self._codec.next_event()
            if event is not NEED_DATA:
                return event  # type: ignore[return-value]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("timed out")
            self._sock.settimeout(remaining)
            data = self._sock.recv(RECV_SIZE)
            if not data:
                raise _Broken("connection closed by the server")
            self._codec.receive_data(data)

    # -- requests ----------------------------------------------------------------------------
    def request(self, subject: str, payload: bytes = b"", header: bytes | None = None,
                timeout_s: float | None = None) -> ServerMsg:
        """Publish ``payload`` to ``subject`` with a reply inbox and return the reply.

        Raises ``TimeoutError`` when no reply comes within ``timeout_s`` (default
        ``request_timeout_s``), :class:`NoResponders` on a 503 status,
        :class:`ClusterServerError` on a permissions ``-ERR``, and
        :class:`ClusterUnreachable` when the connection broke and no URL could be
        reconnected to. Bad arguments raise ValueError before anything is sent.
        """
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        reply = f"{self._inbox}.{next(self._tokens)}"
        frame = encode_pub(subject, payload, reply, header)
        if self._sock is None:
            self._connect_from(max(self._index, 0), deadline)
        for attempt in (1, 2):
            try:
                self._send(frame, deadline)
                return self._wait_reply(subject, reply, deadline)
            except TimeoutError:
                # The connection stays: a late reply is skipped by the next request.
                raise TimeoutError(f"no reply to {subject!r} within {timeout} s") from None
            except (OSError, _Broken, NatsClientProtocolError) as exc:
                reason = _reason(exc)
                self.close()
                if attempt == 2:
                    raise ClusterUnreachable(f"connection to {self.server_url} broke twice "
                                             f"during one request ({reason})") from None
                self._connect_from(self._index + 1, deadline)
        raise AssertionError("unreachable")

    def _wait_reply(self, subject: str, reply: str, deadline: float) -> ServerMsg:
        while True:
            event = self._next_event(deadline)
            if isinstance(event, ServerMsg):
                if event.sid != INBOX_SID or event.subject != reply:
                    continue  # a late reply to an earlier, timed-out request
                if status_of(event)[0] == STATUS_NO_RESPONDERS:
                    raise NoResponders(f"no responders for {subject!r}")
                return event
            if isinstance(event, ServerPing):
                self._send(PONG, deadline)
            elif isinstance(event, ServerErr):
                if event.text.startswith(PERMISSIONS_VIOLATION):
                    raise ClusterServerError(event.text)
                # Any other -ERR is fatal: the server closes next; say why.
                raise _Broken(event.text)
            # INFO updates and +OK need nothing here.


def _reason(exc: BaseException) -> str:
    """A short, human reason for a failed connect (for ClusterUnreachable)."""
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {exc.reason or exc}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S", "DEFAULT_PORT", "DEFAULT_REQUEST_TIMEOUT_S", "INBOX_PREFIX",
    "BlockingNats", "connect_options", "new_inbox_prefix", "parse_url", "wants_tls",
]
