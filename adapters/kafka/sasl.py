"""SASL on the Kafka listener, sans-I/O: one connection's handshake and exchange.

Theory of operation
-------------------
:class:`Sasl` is the collaborator a :class:`~adapters.kafka.session.KafkaSession`
owns for authentication (docs/kafka.md "Security"). A client names its
mechanism in SaslHandshake and then sends its tokens, either in
SaslAuthenticate requests (handshake v1) or, after a v0 handshake, as bare
size-prefixed frames answered by bare frames (Kafka's
``SaslServerAuthenticator`` serves both; librdkafka, kafka-python, aiokafka
and kafkajs use v1 against a broker that offers SaslAuthenticate). The
mechanisms:

* ``PLAIN`` (RFC 4616): one token, ``authzid NUL user NUL password``; the
  password check runs in the driver (argon2 is slow): a ``login`` step.
* ``SCRAM-SHA-256`` and ``SCRAM-SHA-512`` (RFC 5802, RFC 7677): two round
  trips through :class:`~adapters.kafka.scram.ScramExchange`, whose credential
  lookup (``UserStore.scram_credential``, a fast read, a mock credential for an
  unknown user) runs here. The verdict on the proof then goes to the driver as
  a ``scram_login`` step, so the user store's login guard and audit lines see
  it under the connection's actor (``UserStore.scram_login``), as they see a
  PLAIN login; on success the last answer carries the server-final message.

Every method returns a :class:`Step` that the session turns into its outcome.
A refusal answers SASL_AUTHENTICATION_FAILED (or, after a v0 handshake, no
frame) and closes, as Kafka does; a SaslAuthenticate without a handshake, or
a second handshake in the middle of an exchange, is ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Callable

from . import frames
from .errors import ErrorCode as E
from .messages_admin import SASL_AUTHENTICATE, SASL_HANDSHAKE
from .scram import ScramExchange, ScramFailure

PLAIN = "PLAIN"
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")  # the keys of core.scram.MECHANISMS
MECHANISMS = (PLAIN, *SCRAM)
# A SASL/PLAIN token is authzid NUL authcid NUL passwd (RFC 4616); the RFC bounds
# each part at 255 octets of UTF-8: anything longer is not a token to check.
MAX_PLAIN_TOKEN = 3 * 255 + 2
FAILED = "Authentication failed: Invalid username or password"


@dataclass(slots=True)
class Step:
    """What the session does next: send ``frame`` (if any), then close when ``close``
    names a reason; or, with ``login`` = (kind, arguments), let the driver decide a
    login first and hand the result to :meth:`Sasl.login_done`."""

    frame: bytes | None = None
    close: str = ""
    login: tuple[str, tuple] | None = None


@dataclass(slots=True)
class _Answer:
    """Where a token's answer goes: a SaslAuthenticate response, or (None) a bare frame."""

    version: int
    correlation_id: int


class Sasl:
    """One connection's SASL state (module docstring). ``lookup(username, mechanism)``
    gives a SCRAM credential; ``random(n)`` gives n random bytes (the server nonce)."""

    def __init__(self, lookup: Callable[[str, str], object],
                 random: Callable[[int], bytes] = secrets.token_bytes) -> None:
        self._lookup = lookup
        self._random = random
        self.mechanism: str | None = None  # chosen by the handshake, until the exchange ends
        self.raw = False  # after SaslHandshake v0 the next frames are bare tokens
        self._scram: ScramExchange | None = None
        self._answer: _Answer | None = None  # where the login's result goes
        self._server_final = b""

    # -- requests -----------------------------------------------------------------------
    def handshake(self, version: int, corr: int, mechanism: str, authenticated: bool) -> Step:
        """SaslHandshake: accept ``mechanism`` if offered and no exchange is under way."""
        busy = authenticated or self.mechanism is not None
        ok = mechanism in MECHANISMS and not busy
        code = 0 if ok else int(E.ILLEGAL_SASL_STATE if busy else E.UNSUPPORTED_SASL_MECHANISM)
        frame = frames.encode_response(17, version, corr, SASL_HANDSHAKE.response.make(
            error_code=code, mechanisms=MECHANISMS))
        if not ok:
            return Step(frame, f"SASL mechanism {mechanism!r} refused")
        self.mechanism, self.raw = mechanism, version == 0
        self._scram = ScramExchange(mechanism, self._lookup, self._random) if mechanism in SCRAM else None
        return Step(frame)

    def authenticate(self, version: int, corr: int, auth_bytes: bytes, authenticated: bool) -> Step:
        """SaslAuthenticate: the next token of the exchange the handshake opened."""
        if self.mechanism is None or self.raw or authenticated:
            value = SASL_AUTHENTICATE.response.make(error_code=int(E.ILLEGAL_SASL_STATE),
                                                    error_message="SaslAuthenticate without a SaslHandshake",
                                                    auth_bytes=b"")
            return Step(frames.encode_response(36, version, corr, value), "SaslAuthenticate out of order")
        return self._token(bytes(auth_bytes), _Answer(version, corr))

    def token(self, frame: bytes) -> Step:
        """A bare token (the frame after a SaslHandshake v0, or the next SCRAM one)."""
        return self._token(bytes(frame), None)

    def login_done(self, user_or_error) -> Step:
        """The driver's result for a ``login`` or ``scram_login`` step: a UserInfo (the
        session has logged it in) or the exception raised."""
        answer, self._answer = self._answer, None
        final, self._server_final = self._server_final, b""
        if isinstance(user_or_error, BaseException):
            return _refused(answer, FAILED)
        return Step(_encode(answer, final))

    # -- tokens -------------------------------------------------------------------------
    def _token(self, token: bytes, answer: _Answer | None) -> Step:
        if self._scram is not None:
            return self._scram_token(self._scram, token, answer)
        self._end()
        parts = token.split(b"\0") if len(token) <= MAX_PLAIN_TOKEN else []
        try:
            _authzid, user, password = (p.decode("utf-8") for p in parts) if len(parts) == 3 else ((), (), ())
        except UnicodeDecodeError:
            user = password = ()
        if not isinstance(user, str) or not user or not isinstance(password, str):
            return _refused(answer, "malformed SASL/PLAIN token")
        self._answer = answer
        return Step(login=("login", (user, password)))

    def _scram_token(self, exchange: ScramExchange, token: bytes, answer: _Answer | None) -> Step:
        if exchange.username is None:  # the client-first message
            try:
                server_first = exchange.first(token)
            except ScramFailure as exc:
                self._end()
                return _refused(answer, FAILED, f"{FAILED}: {exc}")
            return Step(_encode(answer, server_first))
        self._end()  # the client-final message: the exchange ends whatever it says
        try:
            self._server_final = exchange.final(token)
            ok = True
        except ScramFailure:
            ok = False  # the guard counts it and the audit names the user (UserStore.scram_login)
        self._answer = answer
        return Step(login=("scram_login", (exchange.username, ok, exchange.credential)))

    def _end(self) -> None:
        self.mechanism, self.raw, self._scram = None, False, None


def _encode(answer: _Answer | None, auth_bytes: bytes) -> bytes:
    if answer is None:  # a bare token answers a bare token
        return frames.SIZE.pack(len(auth_bytes)) + auth_bytes
    value = SASL_AUTHENTICATE.response.make(error_code=0, error_message=None, auth_bytes=auth_bytes,
                                            session_lifetime_ms=0)
    return frames.encode_response(36, answer.version, answer.correlation_id, value)


def _refused(answer: _Answer | None, message: str, reason: str = "") -> Step:
    """SASL_AUTHENTICATION_FAILED with ``message`` for the client, then the close;
    ``reason`` (default: the message) is what the driver logs."""
    if answer is None:  # after a v0 handshake Kafka has no error frame: it closes
        return Step(None, reason or message)
    value = SASL_AUTHENTICATE.response.make(error_code=int(E.SASL_AUTHENTICATION_FAILED),
                                            error_message=message, auth_bytes=b"")
    return Step(frames.encode_response(36, answer.version, answer.correlation_id, value), reason or message)
