"""The server side of one NATS client connection, sans-I/O (STYLE.md section 2).

Theory of operation
-------------------
:class:`NatsServerConnection` owns a :class:`~adapters.nats.codec.ServerCodec`
and decides what each client operation means in the current state. It never
touches a socket or a clock: the driver feeds bytes with :meth:`receive_data`
(optionally with the time they arrived), pulls events with
:meth:`next_event`, drains :meth:`data_to_send` and calls
:meth:`handle_deadline` with the current time when :meth:`next_deadline`
is due.

States: ``AWAIT_CONNECT`` (INFO queued at construction, nothing received
yet), ``CONNECTED``, ``CLOSED`` (peer EOF or :meth:`close`) and ``ERROR``
(a fatal error was raised; it is raised again on every later call).
``TRANSITIONS`` maps ``(state, event type)`` to a handler and the next
state; a pair missing from it is refused in one place
(:meth:`NatsServerConnection._refuse`). Without auth, nats-server runs every
operation before ``CONNECT`` with its default options (verbose, pedantic,
echo on: "telnet use", nats.md section 1), so ``OPEN_TRANSITIONS`` adds those
rows; with auth required only ``CONNECT`` may come first, and anything else
is ``-ERR 'Authorization Violation'`` plus close.

The connection answers by itself what nats-server answers in its protocol
layer: ``PONG`` (and the one ``connect_info`` INFO after the first PONG),
``+OK`` in verbose mode, pedantic subject checks, permission and reserved
subject refusals, ``Invalid Subject``, duplicate sids, the subscription
limit, server ``PING``s and stale-connection detection. Non-fatal refusals are
queued as ``-ERR`` and the refused operation produces no event. Fatal ones
raise :class:`~adapters.nats.errors.NatsProtocolError`: the driver sends what
:meth:`data_to_send` holds, then ``err.wire``, then closes.

The events returned are those a session must act on: the effective
``Connect``, ``Pub``/``HPub`` to deliver (echo and no-responders are the
session's: see ``options``), ``Sub``/``Unsub`` carrying their
:class:`~adapters.nats.subscriptions.Subscription`, ``Ping``/``Pong`` for
information, and ``ConnectionClosed`` once.

To keep nats-server's reply order when the session writes deliveries to the
same socket, drain :meth:`data_to_send` before acting on each event.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, replace
from typing import Callable, Protocol

from core.errors import InvalidArgument
from core.subjects import is_valid_pattern, is_valid_subject

from .codec import (
    MAX_CONTROL_LINE, MAX_PAYLOAD, OK_FRAME, PING_FRAME, PONG_FRAME, ServerCodec,
    encode_hmsg, encode_info, encode_msg,
)
from .errors import (
    AUTHENTICATION_TIMEOUT, AUTHORIZATION_VIOLATION, INVALID_CLIENT_PROTOCOL,
    INVALID_PUBLISH_SUBJECT, INVALID_SUBJECT, MAX_SUBSCRIPTIONS_EXCEEDED,
    NO_RESPONDERS_REQUIRES_HEADERS, STALE_CONNECTION, NatsError, NatsLocalProtocolError,
    NatsProtocolError, err_frame, publish_violation, reply_violation, subscribe_violation,
)
from .events import (
    DEFAULT_CONNECT, NEED_DATA, Connect, ConnectionClosed, Err, Event, HMsg, HPub, Info, Msg,
    NeedData, Ok, Ping, Pong, Pub, Sub, Unsub,
)
from .subscriptions import Subscriptions

# -- timers and limits (nats-server const.go / server.go defaults, nats.md section 11) --
PING_INTERVAL = 120.0          # DEFAULT_PING_INTERVAL, seconds
PING_MAX = 2                   # DEFAULT_PING_MAX_OUT: unanswered PINGs before Stale Connection
FIRST_PING_INTERVAL = 2.0      # firstClientPingInterval: first PING soon after CONNECT (RTT)
FIRST_PING_JITTER = 0.2        # setFirstPingTimer adds up to 20% at random
AUTH_TIMEOUT = 2.0             # AUTH_TIMEOUT: CONNECT must arrive this soon when auth is on
RTT_MEASUREMENT_INTERVAL = 3600.0  # DEFAULT_RTT_MEASUREMENT_INTERVAL: re-measure RTT hourly
SYS_QUEUE = "_sys_"            # client.go sysGroup: no client may queue-subscribe with it
GLOBAL_ACCOUNT = "$G"          # remote_account in the connect_info INFO
PROTOCOL_MAX = 1               # ClientProtoInfo: CONNECT protocol must be 0 or 1
# The nats-server release Ferry claims to be, in INFO ``version``, /varz and
# ``ferry nats-server -v`` (all read this constant). It is the release Ferry's
# behaviour was checked against side by side (tests/nats/*_vs_nats_server.py,
# the JetStream, KV, /jsz and permission comparisons: docs/nats.md), so a client
# that gates a feature on the version sees the server the replies were compared
# with. Clients read it: nats.js needs strict x.y.z and turns features on by
# version (semver.js: all of them by 2.10.0 except batch DIRECT.GET at 2.11.0,
# which Ferry serves), nats-py uses the 2.9 consumer-create subjects from 2.9 up;
# headers and no_responders need >= 2.2. Move it only with a new side-by-side run.
SERVER_VERSION = "2.15.1"

# Reserved prefixes nats-server refuses from clients (client.go processInboundClientMsg).
_GW_REPLY_PREFIX = "_GR_."     # gateway-routed replies, as subject or reply
_NRG_PREFIX = "$NRG."          # Raft traffic, as subject
_SERVICE_REPLY_PREFIX = "_R_."  # service-import replies
_JS_ACK_PREFIX = "$JS.ACK."    # JetStream acks, as reply


class ConnectionState(enum.Enum):
    AWAIT_CONNECT = "AWAIT_CONNECT"
    CONNECTED = "CONNECTED"
    CLOSED = "CLOSED"
    ERROR = "ERROR"


AWAIT_CONNECT = ConnectionState.AWAIT_CONNECT
CONNECTED = ConnectionState.CONNECTED
CLOSED = ConnectionState.CLOSED
ERROR = ConnectionState.ERROR
_LIVE = (AWAIT_CONNECT, CONNECTED)


class Permissions(Protocol):
    """Per-user publish/subscribe rights, returned by an authenticator."""

    def can_publish(self, subject: str) -> bool: ...
    def can_subscribe(self, subject: str, queue: str) -> bool: ...  # queue "" = plain


@dataclass(frozen=True, slots=True)
class DeferredAuth:
    """An authenticator's answer that needs slow work (an argon2 password check,
    tens of milliseconds) off the event loop: the driver runs ``work()`` in a
    worker thread and hands ``finish(result or exception)`` to
    :meth:`NatsServerConnection.resume_auth`. Meanwhile the connection parses
    nothing more (its bytes stay buffered), as h11 pauses between requests."""

    work: Callable[[], object]
    finish: Callable[[object], "bool | Permissions"]


# Checks a CONNECT's credentials: False refuses, True accepts with no
# restrictions, a Permissions object accepts with those rights, a DeferredAuth
# says the answer needs a worker thread first.
Authenticator = Callable[[Connect], "bool | Permissions | DeferredAuth"]


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What INFO says about the server (nats.md section 4). ``max_payload``,
    ``client_id`` and ``client_ip`` come from the limits and the connection."""

    server_id: str
    server_name: str = ""          # "" = server_id, as nats-server defaults it
    version: str = SERVER_VERSION
    host: str = "0.0.0.0"
    port: int = 4222
    go: str = "ferry"              # nats-server's Go version; clients ignore it
    git_commit: str = ""
    headers: bool = True
    auth_required: bool = False
    tls_required: bool = False
    tls_verify: bool = False
    tls_available: bool = False    # only if the listener really takes both (nats.md section 4)


@dataclass(frozen=True, slots=True)
class NatsLimits:
    """Per-connection limits and timers (nats-server defaults)."""

    max_payload: int = MAX_PAYLOAD
    max_control_line: int = MAX_CONTROL_LINE
    max_subscriptions: int = 0     # 0 = unlimited (nats-server default)
    ping_interval: float = PING_INTERVAL
    ping_max: int = PING_MAX
    auth_timeout: float = AUTH_TIMEOUT

    def __post_init__(self) -> None:
        if self.max_payload < 0 or self.max_control_line <= 0 or self.max_subscriptions < 0:
            raise InvalidArgument("NATS size limits must be positive (max_subscriptions >= 0)")
        if self.ping_interval <= 0 or self.ping_max < 0 or self.auth_timeout <= 0:
            raise InvalidArgument("NATS ping_interval and auth_timeout must be > 0, ping_max >= 0")


DEFAULT_LIMITS = NatsLimits()


def is_reserved_reply(reply: str) -> bool:
    """nats-server ``isReservedReply``: service-import, JetStream-ack and gateway replies."""
    return (reply.startswith(_SERVICE_REPLY_PREFIX)
            or (len(reply) > len(_JS_ACK_PREFIX) and reply.startswith(_JS_ACK_PREFIX))
            or (len(reply) > len(_GW_REPLY_PREFIX) and reply.startswith(_GW_REPLY_PREFIX)))


class NatsServerConnection:
    """One client connection, server side. INFO is queued on construction."""

    # Slots: one of these lives per connection (docs/internals.md "Memory").
    __slots__ = ("info", "limits", "client_id", "client_ip", "nonce", "subscriptions", "options", "headers",
                 "permissions", "auth_pending", "_pending_opts", "_authenticate", "_rng", "_codec", "_table", "_state", "_error", "_out",
                 "errors_sent", "on_error",
                 "_now", "_auth_deadline", "_ping_deadline", "_connected_once", "_first_pong_sent",
                 "_rtt_known", "_rtt_start", "_last_in", "pings_out")

    def __init__(self, info: ServerInfo, limits: NatsLimits = DEFAULT_LIMITS, *,
                 client_id: int, client_ip: str, now: float = 0.0,
                 authenticate: Authenticator | None = None, nonce: str = "",
                 permissions: Permissions | None = None,
                 rng: Callable[[], float] = random.random) -> None:
        if client_id <= 0:
            raise InvalidArgument("client_id must be positive (nats-py tests assert > 0)")
        if info.auth_required and authenticate is None:
            raise InvalidArgument("auth_required needs an authenticate callable")
        self.info = info
        self.limits = limits
        self.client_id = client_id
        self.client_ip = client_ip
        self.nonce = nonce
        self.subscriptions = Subscriptions(limits.max_subscriptions)
        self.options: Connect = DEFAULT_CONNECT   # effective CONNECT options
        self.headers = False                      # client takes HMSG
        # Rights before CONNECT (nats-server's no_auth_user: INFO says no auth,
        # yet operations run as that user); CONNECT's verdict replaces them.
        self.permissions: Permissions | None = permissions
        # A CONNECT whose credentials are being checked in a worker thread (DeferredAuth).
        self.auth_pending: DeferredAuth | None = None
        self._pending_opts: Connect | None = None
        self._authenticate = authenticate
        self._rng = rng
        self._codec = ServerCodec(max_payload=limits.max_payload,
                                  max_control_line=limits.max_control_line)
        self._codec.connect_only = info.auth_required
        self._table = TRANSITIONS if info.auth_required else OPEN_TRANSITIONS
        self._state = AWAIT_CONNECT
        self._error: NatsError | None = None
        self._out: list[bytes | memoryview] = [encode_info(self._info_fields())]
        self.errors_sent = 0  # non-fatal -ERRs queued (_err)
        # Told the text of each non-fatal -ERR (the driver keeps the listener's last
        # errors for the console, core/connections.py); None: nobody listens.
        self.on_error: Callable[[str], None] | None = None
        self._now = now
        self._auth_deadline = now + limits.auth_timeout if info.auth_required else None
        self._ping_deadline: float | None = now + limits.ping_interval
        self._connected_once = False
        self._first_pong_sent = False
        self._rtt_known = False
        self._rtt_start: float | None = None
        self._last_in: float | None = None
        self.pings_out = 0

    # -- the sans-I/O API -------------------------------------------------------
    @property
    def state(self) -> ConnectionState:
        return self._state

    def receive_data(self, data: bytes | bytearray | memoryview, now: float | None = None) -> None:
        """Buffer bytes from the client; ``b""`` means EOF. ``now`` (the arrival
        time) dates a CONNECT or activity found in these bytes; without it the
        latest time this connection was given is used."""
        if self._state not in _LIVE or self._codec.eof:
            raise NatsLocalProtocolError(f"receive_data in state {self._state.value} / after EOF")
        if now is not None:
            self._now = now
        self._codec.receive_data(data)

    def next_event(self) -> Event | NeedData:
        """The next event for the session, or ``NEED_DATA``.

        Raises :class:`NatsProtocolError` (fatal; again on every later call)."""
        if self._state is ERROR:
            raise self._error  # type: ignore[misc]
        if self._state is CLOSED or self.auth_pending is not None:
            return NEED_DATA
        codec = self._codec
        try:
            while True:
                event = codec.next_event()
                if event is NEED_DATA:
                    if codec.eof:
                        self._state = CLOSED
                        self._stop_timers()
                        return ConnectionClosed()
                    return NEED_DATA
                row = self._table.get((self._state, type(event)))
                if row is None:
                    self._refuse(event)
                handler, next_state = row
                result = handler(self, event)
                if self.auth_pending is not None:   # CONNECT deferred: nothing more until resume_auth
                    return NEED_DATA
                self._state = next_state
                if result is not None:
                    return result
        except NatsError as err:
            self._fail(err)
            raise

    def next_pubs(self, out: list) -> int:
        """The fast path for the common case: every plain ``PUB`` now buffered
        that needs no answer from the connection, appended to ``out`` as
        ``(subject, reply, arg, payload)`` (see :meth:`ServerCodec.scan_pubs`)
        without an event per message (PERF-ANCHORS.md recommendation 3).

        It runs only where ``_on_pub`` would return the event unchanged and
        queue nothing: a live state that accepts ``PUB`` without auth pending,
        no permissions, neither verbose (``+OK``) nor pedantic (subject
        check). A reserved subject or reply stops the scan so that
        :meth:`next_event` refuses it. Returns how many were appended; 0 means
        "use :meth:`next_event`", which always remains correct."""
        return self._fast_path(self._codec.scan_pubs, out)

    def next_runs(self, out: list) -> int:
        """:meth:`next_pubs` as runs of one subject and reply (see
        :meth:`ServerCodec.scan_runs`): ``(subject, reply, count, payload_bytes,
        start, end)`` with ``start:end`` in :attr:`pub_buffer`."""
        return self._fast_path(self._codec.scan_runs, out)

    def _fast_path(self, scan, out: list) -> int:
        """``scan`` (a codec scan) where ``_on_pub`` would pass a plain PUB through unchanged."""
        if self._state is not CONNECTED and (self._state is not AWAIT_CONNECT or self.info.auth_required):
            return 0
        if self.auth_pending is not None:
            return 0
        opts = self.options
        if opts.verbose or opts.pedantic or self.permissions is not None:
            return 0
        count = scan(out, self._refused)
        if count:
            self._last_in = self._now
        return count

    @property
    def pub_buffer(self) -> bytearray:
        """The receive buffer the runs of :meth:`next_runs` point into."""
        return self._codec.buffer

    def _refused(self, subject: str, reply: str) -> bool:
        return self._publish_refusal(subject, reply) is not None

    def send(self, event: Event) -> None:
        """Queue a server event (``Msg``, ``HMsg``, ``Info``, ``Ping``, ``Pong``,
        ``Ok``, or a non-fatal ``Err``). Raises :class:`NatsLocalProtocolError`
        after the connection closed or for any other event."""
        if self._state not in _LIVE:
            raise NatsLocalProtocolError(f"send({type(event).__name__}) in state {self._state.value}")
        if isinstance(event, HMsg) and self.headers and event.header:
            self._out += encode_hmsg(_wire(event.subject), event.sid, _wire(event.reply),
                                     event.header, event.payload)
        elif isinstance(event, (Msg, HMsg)):   # an HMsg loses its header block here
            self._out += encode_msg(_wire(event.subject), event.sid, _wire(event.reply), event.payload)
        elif isinstance(event, Ping):
            self._send_ping(self._now)
        elif isinstance(event, Pong):
            self._out.append(PONG_FRAME)
        elif isinstance(event, Ok):
            self._out.append(OK_FRAME)
        elif isinstance(event, Err):
            self._err(event.text)
        elif isinstance(event, Info):
            self._out.append(encode_info(self._info_fields(event.fields)))
        else:
            raise NatsLocalProtocolError(f"cannot send {type(event).__name__} to a client")

    def _err(self, text: str) -> None:
        """Queue a non-fatal ``-ERR`` (the connection stays open) and count it
        (``errors_sent``: ferry_errors_total of the listener, server_state.Meter)."""
        self._out.append(err_frame(text))
        self.errors_sent += 1
        if self.on_error is not None:
            self.on_error(text)

    def data_to_send(self) -> bytes:
        """Everything queued for the client since the last call, as one bytes."""
        if not self._out:
            return b""
        data = b"".join(self._out)
        self._out.clear()
        return data

    def next_deadline(self) -> float | None:
        """When :meth:`handle_deadline` must run next, or None (closed)."""
        if self._state not in _LIVE:
            return None
        if self._auth_deadline is None:
            return self._ping_deadline
        if self._ping_deadline is None:
            return self._auth_deadline
        return min(self._auth_deadline, self._ping_deadline)

    def handle_deadline(self, now: float) -> None:
        """Run the timers due at ``now``: the auth timeout (``Authentication
        Timeout``) and the ping timer (send ``PING``, or ``Stale Connection``
        once ``ping_max`` PINGs are unanswered). Fatal ones raise
        :class:`NatsProtocolError` like :meth:`next_event`."""
        if self._state not in _LIVE:
            return
        self._now = now
        try:
            if self._auth_deadline is not None and now >= self._auth_deadline:
                raise NatsProtocolError(AUTHENTICATION_TIMEOUT, "no CONNECT in time")
            if self._ping_deadline is not None and now >= self._ping_deadline:
                self._ping_timer(now)
        except NatsError as err:
            self._fail(err)
            raise

    def close(self) -> None:
        """The server ends the connection (shutdown, slow consumer): state
        ``CLOSED``, timers stopped. Idempotent; keeps an ``ERROR`` state."""
        if self._state in _LIVE:
            self._state = CLOSED
            self._stop_timers()

    @property
    def echo(self) -> bool:
        """Deliver this client's own publishes to its own subscriptions."""
        return self.options.echo

    @property
    def no_responders(self) -> bool:
        """The client wants 503 status messages for requests nobody answers."""
        return self.options.no_responders and self.headers

    # -- handlers (see TRANSITIONS) --------------------------------------------------
    def _on_connect(self, event: Connect) -> Connect:
        opts = replace(self.options, **{f: getattr(event, f) for f in event.fields},
                       fields=_shared_fields(event.fields))
        if self._authenticate is not None:   # also without auth_required: no_auth_user
            verdict = self._authenticate(opts)
            if isinstance(verdict, DeferredAuth):
                self.auth_pending, self._pending_opts = verdict, opts
                return None
            self._admit(verdict)
        return self._connected(opts)

    def resume_auth(self, verdict: "bool | Permissions") -> Connect | None:
        """Complete the CONNECT a :class:`DeferredAuth` held with the ``finish``
        verdict; parsing goes on at the next :meth:`next_event`. Returns the
        effective ``Connect`` (None if the connection ended meanwhile). Raises
        :class:`NatsProtocolError` (fatal, e.g. credentials refused) as
        :meth:`next_event` does."""
        opts = self._pending_opts
        if self.auth_pending is None or opts is None:
            raise NatsLocalProtocolError("resume_auth without a deferred CONNECT")
        self.auth_pending = self._pending_opts = None
        if self._state is ERROR:
            raise self._error  # type: ignore[misc]
        if self._state is CLOSED:
            return None
        try:
            self._admit(verdict)
            result = self._connected(opts)
        except NatsError as err:
            self._fail(err)
            raise
        self._state = CONNECTED
        return result

    def _admit(self, verdict: "bool | Permissions") -> None:
        if not verdict:
            raise NatsProtocolError(AUTHORIZATION_VIOLATION, "credentials refused")
        self.permissions = None if verdict is True else verdict

    def _connected(self, opts: Connect) -> Connect:
        headers = self.info.headers and opts.headers
        if opts.account or opts.new_account:
            raise NatsProtocolError(AUTHORIZATION_VIOLATION, "obsolete account field in CONNECT")
        if not 0 <= opts.protocol <= PROTOCOL_MAX:
            raise NatsProtocolError(INVALID_CLIENT_PROTOCOL, f"protocol {opts.protocol}")
        if opts.no_responders and not headers:
            raise NatsProtocolError(NO_RESPONDERS_REQUIRES_HEADERS)
        self.options = opts
        self.headers = self._codec.allow_headers = headers
        self._codec.connect_only = False
        self._connected_once = self._rtt_known = True
        self._auth_deadline = None
        first = min(self.limits.ping_interval, FIRST_PING_INTERVAL)
        self._ping_deadline = self._now + first + first * FIRST_PING_JITTER * self._rng()
        if opts.verbose:
            self._out.append(OK_FRAME)
        return opts

    def _on_pub(self, event: Pub | HPub) -> Pub | HPub | None:
        self._last_in = self._now
        subject, reply = event.subject, event.reply
        if self.options.pedantic and not is_valid_subject(subject):
            self._err(INVALID_PUBLISH_SUBJECT)  # still delivered
        if subject[0] in "_$" or (reply and reply[0] in "_$") or self.permissions is not None:
            refusal = self._publish_refusal(subject, reply)
            if refusal is not None:
                self._err(refusal)
                return None
        if self.options.verbose:
            self._out.append(OK_FRAME)
        return event

    def _publish_refusal(self, subject: str, reply: str) -> str | None:
        """nats-server's order: gateway prefix, permissions, $NRG., reserved reply."""
        if len(subject) > len(_GW_REPLY_PREFIX) and subject.startswith(_GW_REPLY_PREFIX):
            return publish_violation(subject)
        if self.permissions is not None and not self.permissions.can_publish(subject):
            return publish_violation(subject)
        if subject.startswith(_NRG_PREFIX):
            return publish_violation(subject)
        if reply and is_reserved_reply(reply):
            return reply_violation(reply)
        return None

    def _on_sub(self, event: Sub) -> Sub | None:
        self._last_in = self._now
        subject, queue, perms = event.subject, event.queue, self.permissions
        if queue == SYS_QUEUE or (perms is not None and not perms.can_subscribe(subject, queue)):
            self._err(subscribe_violation(subject, queue))
            return None
        subs = self.subscriptions
        if subs.at_limit:
            self._err(MAX_SUBSCRIPTIONS_EXCEEDED)
            return None
        if event.sid in subs:   # nats-server keeps the first subscription, says nothing
            if self.options.verbose:
                self._out.append(OK_FRAME)
            return None
        if not is_valid_pattern(subject):
            self._err(INVALID_SUBJECT)
            return None
        sub = subs.add(event.sid, subject, queue)
        if self.options.verbose:
            self._out.append(OK_FRAME)
        return replace(event, subscription=sub)

    def _on_unsub(self, event: Unsub) -> Unsub | None:
        self._last_in = self._now
        sub = self.subscriptions.unsubscribe(event.sid, event.max_msgs)
        if self.options.verbose:
            self._out.append(OK_FRAME)
        return None if sub is None else replace(event, subscription=sub)

    def _on_ping(self, event: Ping) -> Ping:
        self._last_in = self._now
        self._out.append(PONG_FRAME)
        if self._connected_once and not self._first_pong_sent:
            self._first_pong_sent = True
            if self.options.protocol >= 1:   # client takes async INFO (processPing)
                extra = {"connect_info": True, "remote_account": GLOBAL_ACCOUNT}
                self._out.append(encode_info(self._info_fields(extra)))
        return event

    def _on_pong(self, event: Pong) -> Pong:
        self.pings_out = 0
        self._rtt_known = True
        return event

    def _on_ignored(self, event: Event) -> None:
        return None   # +OK and a well-formed INFO from a client (nats-server ignores both)

    def _on_client_err(self, event: Err) -> None:
        raise NatsProtocolError(None, f"client sent -ERR {event.text[:64]!r}")

    def _refuse(self, event: Event) -> None:
        """The one place an operation not allowed in this state is refused."""
        if self._state is AWAIT_CONNECT:
            raise NatsProtocolError(AUTHORIZATION_VIOLATION, f"{type(event).__name__} before CONNECT")
        raise NatsLocalProtocolError(f"{type(event).__name__} in state {self._state.value}")

    # -- internals -------------------------------------------------------------------
    def _fail(self, err: NatsError) -> None:
        self._state = ERROR
        self._error = err
        self._stop_timers()

    def _stop_timers(self) -> None:
        self._auth_deadline = self._ping_deadline = None

    def _send_ping(self, now: float) -> None:
        self._out.append(PING_FRAME)
        self.pings_out += 1
        self._rtt_start = now

    def _ping_timer(self, now: float) -> None:
        """nats-server ``processPingTimer``: skip the PING when the client was
        active within the interval and the RTT is fresh; close as stale when
        one more PING would exceed ``ping_max``; re-arm."""
        interval = self.limits.ping_interval
        need_rtt = (not self._rtt_known or self._rtt_start is None
                    or now - self._rtt_start > RTT_MEASUREMENT_INTERVAL)
        active = self._last_in is not None and now - self._last_in < interval
        if need_rtt or not active:
            if self.pings_out + 1 > self.limits.ping_max:
                raise NatsProtocolError(STALE_CONNECTION, f"{self.pings_out} PINGs unanswered")
            self._send_ping(now)
        self._ping_deadline = now + interval

    def _info_fields(self, extra: dict | None = None) -> dict:
        info = self.info
        fields: dict = {"server_id": info.server_id, "server_name": info.server_name or info.server_id,
                        "version": info.version, "proto": 1}
        if info.git_commit:
            fields["git_commit"] = info.git_commit
        fields.update(go=info.go, host=info.host, port=info.port, headers=info.headers)
        for flag in ("auth_required", "tls_required", "tls_verify", "tls_available"):
            if getattr(info, flag):   # omitempty in nats-server's Info struct
                fields[flag] = True
        fields.update(max_payload=self.limits.max_payload, client_id=self.client_id)
        if self.client_ip:
            fields["client_ip"] = self.client_ip
        if self.nonce:
            fields["nonce"] = self.nonce
        if extra:
            fields.update(extra)
        return fields


def _wire(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


# The sets of CONNECT field names seen, each kept once: every connection keeps
# its effective options, and a frozenset of a client library's ten or so names
# is ~600 bytes, the same few sets for all clients (docs/internals.md "Memory").
# Past this many shapes (odd clients) a connection keeps its own set.
MAX_SHARED_FIELD_SETS = 256
_FIELD_SETS: dict[frozenset[str], frozenset[str]] = {}


def _shared_fields(fields: frozenset[str]) -> frozenset[str]:
    shared = _FIELD_SETS.get(fields)
    if shared is not None:
        return shared
    if len(_FIELD_SETS) < MAX_SHARED_FIELD_SETS:
        _FIELD_SETS[fields] = fields
    return fields


_H = NatsServerConnection
# Operations on a live connection: handler and the state after it.
_AFTER_CONNECT: dict[type[Event], Callable] = {
    Connect: _H._on_connect, Pub: _H._on_pub, HPub: _H._on_pub, Sub: _H._on_sub,
    Unsub: _H._on_unsub, Ping: _H._on_ping, Pong: _H._on_pong, Ok: _H._on_ignored,
    Info: _H._on_ignored, Err: _H._on_client_err,
}
TRANSITIONS: dict[tuple[ConnectionState, type[Event]], tuple[Callable, ConnectionState]] = {
    (CONNECTED, kind): (handler, CONNECTED) for kind, handler in _AFTER_CONNECT.items()
}
TRANSITIONS[(AWAIT_CONNECT, Connect)] = (_H._on_connect, CONNECTED)
# No auth: nats-server accepts every operation before CONNECT, with default options.
OPEN_TRANSITIONS = dict(TRANSITIONS)
OPEN_TRANSITIONS.update({
    (AWAIT_CONNECT, kind): (handler, AWAIT_CONNECT)
    for kind, handler in _AFTER_CONNECT.items() if kind is not Connect
})
del _H

__all__ = [
    "AUTH_TIMEOUT", "AWAIT_CONNECT", "Authenticator", "CLOSED", "CONNECTED", "ConnectionState",
    "DEFAULT_LIMITS", "DeferredAuth", "ERROR", "FIRST_PING_INTERVAL", "FIRST_PING_JITTER", "NatsLimits",
    "NatsServerConnection", "OPEN_TRANSITIONS", "PING_INTERVAL", "PING_MAX", "Permissions",
    "SERVER_VERSION", "ServerInfo", "TRANSITIONS", "is_reserved_reply",
]
