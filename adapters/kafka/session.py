"""One Kafka connection, sans-I/O: frames in, outcomes out.

Theory of operation
-------------------
Kafka's broker reads one request of a connection, answers it, and only then
reads the next (its SocketServer mutes the channel while a request is in
flight), so answers leave in request order with no bookkeeping. The driver
(adapters/kafka/driver.py) does the same: it hands :meth:`KafkaSession.handle`
one request frame and acts on the :class:`Outcome` before the next:

* ``Reply(frame)``: send it; ``Silent``: nothing to send (Produce acks=0);
* ``Close(frame, reason)``: send the frame if any, then close, which is what
  Kafka does after a request it cannot serve or a failed authentication;
* ``login`` (user, password): check the credentials off the event loop (argon2
  is slow) and give the result to :meth:`KafkaSession.login_done`;
* ``scram_login`` (user, proof verified, credential): a SCRAM exchange's verdict,
  which the driver puts through ``UserStore.scram_login`` (the login guard and
  audit under the connection's actor) and gives to :meth:`KafkaSession.login_done`;
* ``Wait(...)``: a Produce waiting for durability, a Fetch waiting for data,
  a group request parked in the coordinator, or an EndTxn(commit) waiting for
  its transaction's appends (:class:`TxnWait`); the driver waits and asks
  :meth:`KafkaSession.resume` for the outcome.

**Authentication** is SASL/PLAIN or SASL/SCRAM-SHA-256/512 against Ferry's
users (docs/kafka.md "Security"; the collaborator :class:`adapters.kafka.sasl.Sasl`):
SaslHandshake v0 (the next frames are bare SASL tokens) or v1
(SaslAuthenticate requests). Until it succeeds only ApiVersions and the SASL
requests are served; any other request closes the connection, as Kafka does
on a SASL listener (``IllegalSaslStateException``). The listener's
``anonymous_user`` opens the door explicitly: connections that do not
authenticate act as that user. A failed login answers
SASL_AUTHENTICATION_FAILED and closes. Every later request is checked against
the user's current permissions (adapters/kafka/context.py :class:`Access`).

Only APIs that are handled here are advertised in ApiVersions (:data:`SERVED`);
a request for another key closes the connection, as Kafka does for an
unknown API key.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import FerryError
from core.permissions import Action

from . import frames
from .admin import Admin
from .context import AccessDenied
from .dataplane import DataPlane, FetchWait, ProduceWait
from .errors import ErrorCode as E
from .messages import API, api_versions
from .messages_txn import END_TXN, INIT_PRODUCER_ID
from .sasl import MECHANISMS, Sasl, Step
from .types import KafkaDecodeError

__all__ = ["MECHANISMS", "GroupWait", "KafkaSession", "Outcome", "TxnWait", "deliver"]

GROUP_KEYS = frozenset({8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47, 68, 69})
PRE_AUTH_KEYS = frozenset({18, 17, 36})  # ApiVersions, SaslHandshake, SaslAuthenticate
DATA_KEYS = {0: "produce", 1: "fetch", 2: "list_offsets"}
ADMIN_KEYS = {3: "metadata", 19: "create_topics", 20: "delete_topics", 21: "delete_records", 32: "describe_configs",
              37: "create_partitions", 44: "incremental_alter_configs", 60: "describe_cluster"}
# The transaction APIs (adapters/kafka/txn.py); served with the group APIs, since a
# client finds its transaction coordinator through FindCoordinator.
TXN_KEYS = {24: "add_partitions", 25: "add_offsets", 26: "end_txn", 28: "txn_offset_commit"}
SERVED = frozenset(PRE_AUTH_KEYS | set(DATA_KEYS) | set(ADMIN_KEYS) | {22} | GROUP_KEYS | set(TXN_KEYS))
SERVED_WITHOUT_GROUPS = SERVED - GROUP_KEYS - set(TXN_KEYS)


@dataclass(slots=True)
class Outcome:
    kind: str  # "reply" | "silent" | "close" | "login" | "scram_login" | "wait"
    frame: bytes | None = None
    reason: str = ""
    wait: object = None  # ProduceWait | FetchWait | GroupWait | the login's arguments


@dataclass(eq=False)
class GroupWait:
    """A group request parked in the coordinator; ``answer`` is filled by a completion."""

    api_key: int
    version: int
    correlation_id: int
    answer: object = None
    wake: object = None

    @property
    def done(self) -> bool:
        return self.answer is not None

    def deliver(self, value) -> None:
        self.answer = value
        if self.wake is not None:
            self.wake()


@dataclass(eq=False)
class TxnWait:
    """An EndTxn(commit) waiting for its appends to be durable (adapters/kafka/txn.py
    ``Completion``); the driver waits as for a ProduceWait."""

    api_key: int
    version: int
    correlation_id: int
    completion: object

    @property
    def done(self) -> bool:
        return self.completion.done

    @property
    def wake(self):
        return None

    @wake.setter
    def wake(self, wake) -> None:
        self.completion.waiters.append(wake)


@dataclass(slots=True)
class _Pending:
    api_key: int
    version: int
    correlation_id: int


def _reply(frame: bytes) -> Outcome:
    return Outcome("reply", frame)


def _close(reason: str, frame: bytes | None = None) -> Outcome:
    return Outcome("close", frame, reason)


class KafkaSession:
    """One connection's state (module docstring). ``access`` is the connection's
    :class:`~adapters.kafka.context.Access` (anonymous when the listener opens that door)."""

    def __init__(self, ctx, access) -> None:
        self.ctx = ctx
        self.access = access
        self.data = DataPlane(ctx, access)
        self.admin = Admin(ctx, access)
        self.client_id = ""
        self.sasl = Sasl(ctx.broker.meta.users.scram_credential)
        self._group_touched = False
        self.served = SERVED if ctx.groups is not None else SERVED_WITHOUT_GROUPS

    def take_group_touch(self) -> bool:
        """True once after a group request (the coordinator's next deadline may have moved)."""
        touched, self._group_touched = self._group_touched, False
        return touched

    @property
    def authenticated(self) -> bool:
        return self.access.known

    # -- requests ---------------------------------------------------------------------------
    def handle(self, frame: bytes, now_ms: int) -> Outcome:
        if self.sasl.raw:  # after SaslHandshake v0: a bare SASL token
            return _step(self.sasl.token(frame))
        try:
            header, body = frames.decode_request(frame)
        except frames.UnsupportedRequest as exc:
            if exc.api_key == frames.API_VERSIONS_KEY:  # v0, UNSUPPORTED_VERSION, the ranges served here;
                # the client retries on this connection with a version both sides know
                return _reply(frames.encode_response(exc.api_key, 0, exc.correlation_id, api_versions(
                    error_code=int(E.UNSUPPORTED_VERSION), keys=self.served)))
            return _close(str(exc))
        except KafkaDecodeError as exc:
            return _close(f"malformed request: {exc}")
        key, version, corr = header.request_api_key, header.request_api_version, header.correlation_id
        if key not in self.served:
            return _close(f"{API[key].name} is not served")
        self.client_id = header.client_id or ""
        if not self.authenticated and key not in PRE_AUTH_KEYS:
            return _close(f"{API[key].name} before SASL authentication")
        try:
            return self._dispatch(key, version, corr, body, now_ms)
        except AccessDenied as exc:
            return _close(str(exc))

    def _dispatch(self, key: int, version: int, corr: int, body, now_ms: int) -> Outcome:
        if key == 18:
            return _reply(frames.encode_response(key, version, corr, api_versions(keys=self.served)))
        if key == 17:
            return _step(self.sasl.handshake(version, corr, body.mechanism, self.authenticated))
        if key == 36:
            return _step(self.sasl.authenticate(version, corr, body.auth_bytes, self.authenticated))
        if key in ADMIN_KEYS:
            value = getattr(self.admin, ADMIN_KEYS[key])(version, body)
            return _reply(frames.encode_response(key, version, corr, value))
        if key == 0:
            wait = self.data.produce(version, body)
            if wait is None:
                return Outcome("silent")
            wait.pending_request = _Pending(key, version, corr)
            if wait.done:
                return _reply(frames.encode_response(key, version, corr, wait.finish()))
            return Outcome("wait", wait=wait)
        if key == 1:
            return self._fetch_outcome(_Pending(key, version, corr), self.data.fetch(version, body, now_ms))
        if key == 2:
            return _reply(frames.encode_response(key, version, corr, self.data.list_offsets(version, body)))
        if key == 22:
            return _reply(frames.encode_response(key, version, corr, self._init_producer_id(version, body, now_ms)))
        if key in TXN_KEYS:
            return self._txn(key, version, corr, body, now_ms)
        return self._group(key, version, corr, body, now_ms)

    # -- waits --------------------------------------------------------------------------------
    def resume(self, wait, now_ms: int) -> Outcome:
        """The outcome of a request that waited (the driver calls it when woken or at the
        wait's deadline)."""
        if isinstance(wait, ProduceWait):
            p = wait.pending_request
            return _reply(frames.encode_response(p.api_key, p.version, p.correlation_id, wait.finish()))
        if isinstance(wait, FetchWait):
            try:
                value = self.data.fetch(wait.version, wait.request, now_ms, wait.deadline_ms, wait.plan)
            except AccessDenied as exc:
                return _close(str(exc))
            return self._fetch_outcome(wait.pending, value)
        if isinstance(wait, GroupWait):
            return _reply(frames.encode_response(wait.api_key, wait.version, wait.correlation_id, wait.answer))
        if isinstance(wait, TxnWait):
            code = self.ctx.txn.finish(wait.completion, now_ms)
            return _reply(frames.encode_response(wait.api_key, wait.version, wait.correlation_id,
                                                 END_TXN.response.make(error_code=code)))
        raise TypeError(f"not a wait: {wait!r}")

    @staticmethod
    def _fetch_outcome(pending: _Pending, value) -> Outcome:
        if isinstance(value, FetchWait):
            value.pending = pending
            return Outcome("wait", wait=value)
        return _reply(frames.encode_response(pending.api_key, pending.version, pending.correlation_id, value))

    # -- groups ------------------------------------------------------------------------------
    def _group(self, key: int, version: int, corr: int, body, now_ms: int) -> Outcome:
        token = GroupWait(key, version, corr)
        self._group_touched = True
        value, completions = self.ctx.groups.handle(key, version, body, now_ms=now_ms, token=token,
                                                    client_id=self.client_id, topics=self)
        deliver(completions)
        if value is None:
            return Outcome("wait", wait=token)
        return _reply(frames.encode_response(key, version, corr, value))

    # TopicAccess for the group API (adapters/kafka/group_api.py)
    def readable(self, topic: str) -> int:
        info = self.ctx.topic(topic)
        if info is None:
            return int(E.UNKNOWN_TOPIC_OR_PARTITION)
        if not self.access.can(Action.POLL_MESSAGES, info.stream_id, info.id):
            return int(E.TOPIC_AUTHORIZATION_FAILED)
        return 0

    def partitions(self, topic: str) -> int | None:
        info = self.ctx.topic(topic)
        return None if info is None else info.partitions_count

    # -- transactions (adapters/kafka/txn.py) --------------------------------------------------
    def _txn(self, key: int, version: int, corr: int, body, now_ms: int) -> Outcome:
        value = getattr(self.ctx.txn, TXN_KEYS[key])(version, body, self.access, now_ms)
        if key == 26 and not hasattr(value, "error_code"):  # a commit's appends, not yet durable
            wait = TxnWait(key, version, corr, value)
            if not wait.done:
                return Outcome("wait", wait=wait)
            value = END_TXN.response.make(error_code=self.ctx.txn.finish(value, now_ms))
        return _reply(frames.encode_response(key, version, corr, value))

    # -- producer ids ------------------------------------------------------------------------
    def _init_producer_id(self, version: int, body, now_ms: int):
        if body.transactional_id is not None:
            code, pid, epoch = self.ctx.txn.init_producer_id(version, body, self.access, now_ms)
            return INIT_PRODUCER_ID.response.make(error_code=code, producer_id=pid, producer_epoch=epoch)
        try:
            pid = self.ctx.next_producer_id()
        except FerryError:
            return INIT_PRODUCER_ID.response.make(error_code=int(E.KAFKA_STORAGE_ERROR), producer_id=-1,
                                                  producer_epoch=-1)
        return INIT_PRODUCER_ID.response.make(error_code=0, producer_id=pid, producer_epoch=0)

    # -- SASL (adapters/kafka/sasl.py) ---------------------------------------------------------
    def login_done(self, user_or_error) -> Outcome:
        """The driver's answer to a ``login`` or ``scram_login`` outcome: a UserInfo, or
        the exception raised."""
        if not isinstance(user_or_error, BaseException):
            self.access.login(user_or_error)
        return _step(self.sasl.login_done(user_or_error))


def _step(step: Step) -> Outcome:
    """The outcome of a SASL step."""
    if step.login is not None:
        kind, args = step.login
        return Outcome(kind, wait=args)
    if step.close:
        return _close(step.close, step.frame)
    return _reply(step.frame)


def deliver(completions) -> None:
    """Hand each completed group request its answer (any connection's)."""
    for token, value in completions:
        token.deliver(value)
