"""Delegation tokens and Basic credentials (adapters/pravega/auth.py), and the segment
store's AuthTokenCheckFailed replies, without a network (pravega.md section 4.4): the
live re-check of a token's user on each request, the anonymous user, the credential
cache and the audit lines of denials."""

from __future__ import annotations

import base64
import logging
import uuid

import jwt
import pytest

from adapters.pravega import commands as C
from adapters.pravega import controller_proto as P
from adapters.pravega.auth import (AUTH_CHECK_FAILED, AUTH_TOKEN_EXPIRED, READ, WRITE, AuthError, Authenticator,
                                   Principal, TokenIssuer, load_secret, parse_basic)
from adapters.pravega.codec import NEED_DATA, Append, FrameDecoder, event_frame
from adapters.pravega.controller import _NEEDS, ControllerService
from adapters.pravega.grpc import GrpcStatus
from adapters.pravega.session import SegmentStoreSession
from adapters.pravega.state import state_of
from core import access
from core.broker import Broker, BrokerConfig
from core.errors import InvalidArgument
from core.log import LogConfig
from core.permissions import Action, GlobalPermissions, Permissions, StreamPermissions, TopicPermissions

SECRET = b"k" * 32


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_token_round_trip_scope_op_and_expiry():
    clock = Clock()
    issuer = TokenIssuer(SECRET, clock=clock, lifetime_s=600)
    token = issuer.issue(7, "sc", "st", frozenset({READ}), created_at=55)
    grant = issuer.check(token, "sc", "st", READ)
    assert (grant.user_id, grant.created_at) == (7, 55)  # who, told from a later user given id 7
    assert issuer.check(token, "sc", "rg_kvtable", READ).scope == "sc"  # the scope's reader-group tables
    for scope, stream, op in (("other", "st", READ), ("sc", "other", READ), ("sc", "st", WRITE)):
        with pytest.raises(AuthError) as err:
            issuer.check(token, scope, stream, op)
        assert err.value.code == AUTH_CHECK_FAILED
    clock.now += 600
    with pytest.raises(AuthError) as err:
        issuer.check(token, "sc", "st", READ)
    assert err.value.code == AUTH_TOKEN_EXPIRED  # the client refetches a token and retries


NO_CREATED_AT = jwt.encode({"iss": "ferry-pravega", "sub": "1", "exp": 4_000_000_000, "scope": "sc",
                            "stream": "st", "ops": ["read"]}, SECRET, algorithm="HS256")


@pytest.mark.parametrize("token", ["", "garbage", NO_CREATED_AT,
                                   TokenIssuer(b"x" * 32).issue(1, "sc", "st", frozenset({READ}), created_at=0)])
def test_bad_tokens_fail_the_check(token):
    with pytest.raises(AuthError) as err:
        TokenIssuer(SECRET).check(token, "sc", "st", READ)
    assert err.value.code == AUTH_CHECK_FAILED


@pytest.mark.parametrize("header, ok", [
    ("Basic " + base64.b64encode(b"u:p:w").decode(), ("u", "p:w")),
    ("basic " + base64.b64encode(b"u:").decode(), ("u", "")),
    ("Bearer abc", None), ("Basic !!!", None), ("Basic " + base64.b64encode(b"nocolon").decode(), None),
    ("Basic", None),
])
def test_parse_basic(header, ok):
    if ok is None:
        with pytest.raises(AuthError):
            parse_basic(header)
    else:
        assert parse_basic(header) == ok


def test_secret_is_created_once_and_kept(tmp_path):
    key = load_secret(tmp_path)
    assert len(key) == 32 and load_secret(tmp_path) == key
    assert (tmp_path / "pravega-token-secret").stat().st_mode & 0o777 == 0o600


@pytest.fixture
def broker(tmp_path):
    b = Broker.open(tmp_path / "data", BrokerConfig(log=LogConfig(fsync="always")))
    b.create_stream("sc")
    b.create_topic("sc", "st", 1)
    yield b
    b.close()


def test_authenticator_caches_credentials_and_checks_permissions(broker):
    broker.meta.users.create_user("reader", "secret-pw", permissions=Permissions(
        global_=GlobalPermissions(read_streams=True, read_topics=True, poll_messages=True)))
    clock = Clock()
    auth = Authenticator(broker, TokenIssuer(SECRET), clock=clock)
    header = [("authorization", "Basic " + base64.b64encode(b"reader:secret-pw").decode())]
    user = auth.user(header)
    assert auth.user(header) is user  # cached: no second argon2 check
    auth.require(user, Action.READ_STREAMS)
    with pytest.raises(AuthError) as err:
        auth.require(user, Action.CREATE_STREAM)
    assert err.value.code == "PERMISSION_DENIED"
    with pytest.raises(AuthError):
        auth.user([("authorization", "Basic " + base64.b64encode(b"reader:wrong").decode())])
    with pytest.raises(AuthError):
        auth.user([])


def replies(session, cmd) -> list:
    out = []
    session._emit = out.append
    session.handle(cmd)
    dec = FrameDecoder()
    dec.receive_data(b"".join(out))
    got = []
    while (r := dec.next_event()) is not NEED_DATA:
        got.append(r)
    return got


def test_segment_store_answers_auth_token_check_failed(broker):
    clock = Clock()
    issuer = state_of(broker).issuer = TokenIssuer(SECRET, clock=clock)
    session = SegmentStoreSession(broker, lambda b: None)
    user = broker.meta.users.create_user("rwuser", "secret-pw", permissions=Permissions(
        global_=GlobalPermissions(poll_messages=True, send_messages=True)))
    seg = "sc/st/0.#epoch.0"
    writer = uuid.uuid4()
    (r,) = replies(session, C.SetupAppend(request_id=5, writer_id=writer, segment=seg, delegation_token="nope"))
    assert r == C.AuthTokenCheckFailed(request_id=5, server_stack_trace="invalid delegation token",
                                       error_code=AUTH_CHECK_FAILED)
    read_only = issuer.issue(user.id, "sc", "st", frozenset({READ}), created_at=user.created_at)
    (r,) = replies(session, C.SetupAppend(request_id=6, writer_id=writer, segment=seg, delegation_token=read_only))
    assert isinstance(r, C.AuthTokenCheckFailed) and r.error_code == AUTH_CHECK_FAILED
    (r,) = replies(session, C.GetStreamSegmentInfo(request_id=7, segment_name=seg, delegation_token=read_only))
    assert isinstance(r, C.StreamSegmentInfo)
    both = issuer.issue(user.id, "sc", "st", frozenset({READ, WRITE}), created_at=user.created_at)
    (r,) = replies(session, C.SetupAppend(request_id=8, writer_id=writer, segment=seg, delegation_token=both))
    assert isinstance(r, C.AppendSetup) and r.request_id == 8
    clock.now += 10_000
    (r,) = replies(session, C.ReadSegment(segment=seg, offset=0, suggested_length=100, delegation_token=both,
                                          request_id=9))
    assert r == C.AuthTokenCheckFailed(request_id=9, server_stack_trace="the delegation token expired",
                                       error_code=AUTH_TOKEN_EXPIRED)
    state_of(broker).issuer = None


# -- the live re-check, the anonymous user, the cache, the audit -------------------------------
SEG = "sc/st/0.#epoch.0"


SID = TID = 0  # the ids of stream sc and its topic st in these brokers (test_ids_in_these_tests)


def perms(**topic_ops) -> Permissions:
    """Permissions on topic sc/st only."""
    return Permissions(streams={SID: StreamPermissions(topics={TID: TopicPermissions(**topic_ops)})})


@pytest.fixture
def secured(broker):
    state = state_of(broker)
    state.issuer = TokenIssuer(SECRET)
    yield state
    state.issuer = state.anonymous = None


def stored(broker) -> list[bytes]:
    return [bytes(rv.payload) for rv in broker.read("sc", "st", 0, 0, 1 << 20).records()]


def append(session, writer, payload: bytes, last: int, rid: int) -> list:
    out = []
    session._emit = out.append
    session.handle(Append(writer, event_frame(payload), 1, last, rid))
    session.broker.flush()  # no flusher runs here: acknowledge what was appended
    dec = FrameDecoder()
    dec.receive_data(b"".join(out))
    got = []
    while (r := dec.next_event()) is not NEED_DATA:
        got.append(r)
    return got


def token_for(state, user, ops=frozenset({READ, WRITE})) -> str:
    return state.issuer.issue(user.id, "sc", "st", ops, created_at=user.created_at)


def test_ids_in_these_tests(broker):
    topic = broker.get_topic("sc", "st")
    assert (topic.stream_id, topic.id) == (SID, TID)


@pytest.mark.parametrize("change", ["revoke", "delete"])
def test_a_revoked_or_deleted_writer_fails_its_next_block(broker, secured, change, caplog):
    user = broker.meta.users.create_user("writer", "secret-pw", permissions=perms(send_messages=True, poll_messages=True))
    session = SegmentStoreSession(broker, lambda b: None)
    writer = uuid.uuid4()
    (r,) = replies(session, C.SetupAppend(request_id=1, writer_id=writer, segment=SEG,
                                          delegation_token=token_for(secured, user)))
    assert isinstance(r, C.AppendSetup)
    (ack,) = append(session, writer, b"first", 1, 2)
    assert isinstance(ack, C.DataAppended) and stored(broker) == [b"first"]
    if change == "revoke":
        broker.meta.users.update_permissions("writer", perms(poll_messages=True))
    else:
        broker.meta.users.delete_user("writer")
    with caplog.at_level(logging.WARNING, logger="ferry.audit"):
        (r,) = append(session, writer, b"second", 2, 3)
    assert isinstance(r, C.AuthTokenCheckFailed) and (r.request_id, r.error_code) == (3, AUTH_CHECK_FAILED)
    assert stored(broker) == [b"first"]  # nothing stored after the change
    denials = [rec for rec in caplog.records if getattr(rec, "event", "") == "denied"]
    assert len(denials) == 1 and denials[0].action == "send_messages" and denials[0].stream == "st"
    # ... and the token it still holds no longer opens anything
    (r,) = replies(session, C.ReadSegment(segment=SEG, offset=0, suggested_length=100, request_id=4,
                                          delegation_token=token_for(secured, user)))
    assert isinstance(r, C.AuthTokenCheckFailed) == (change == "delete")


def test_a_token_of_a_deleted_user_does_not_open_for_a_new_user_with_its_id(broker, secured):
    old = broker.meta.users.create_user("old", "secret-pw", permissions=perms(poll_messages=True))
    token = token_for(secured, old)
    broker.meta.users.delete_user("old")
    new = broker.meta.users.create_user("new", "secret-pw", permissions=perms(poll_messages=True), user_id=old.id)
    assert new.id == old.id and new.created_at != old.created_at
    session = SegmentStoreSession(broker, lambda b: None)
    (r,) = replies(session, C.ReadSegment(segment=SEG, offset=0, suggested_length=100, request_id=1,
                                          delegation_token=token))
    assert isinstance(r, C.AuthTokenCheckFailed)


def test_read_is_rechecked_against_the_topic_permission_now(broker, secured):
    user = broker.meta.users.create_user("reader", "secret-pw", permissions=perms(poll_messages=True))
    token = token_for(secured, user, frozenset({READ}))
    session = SegmentStoreSession(broker, lambda b: None)
    read = C.ReadSegment(segment=SEG, offset=0, suggested_length=100, request_id=1, delegation_token=token)
    park = session.handle(read)
    assert park is not None  # at the tail: it waits for an append
    broker.meta.users.update_permissions("reader", perms())  # read_topic would still allow polling
    out = []
    session._emit = out.append
    session.read(park.cmd, parked=True)  # woken: checked again before answering
    dec = FrameDecoder()
    dec.receive_data(b"".join(out))
    r = dec.next_event()
    assert isinstance(r, C.AuthTokenCheckFailed) and r.error_code == AUTH_CHECK_FAILED
    (r,) = replies(session, read)
    assert isinstance(r, C.AuthTokenCheckFailed)


def test_anonymous_user_acts_with_exactly_its_permissions(broker, secured):
    broker.meta.users.create_user("guest", "secret-pw", permissions=perms(poll_messages=True))
    secured.anonymous = Principal.anonymous_user(broker.meta.users, "guest", "listeners.pravega.anonymous_user")
    session = SegmentStoreSession(broker, lambda b: None)
    writer = uuid.uuid4()
    (r,) = replies(session, C.SetupAppend(request_id=1, writer_id=writer, segment=SEG, delegation_token=""))
    assert isinstance(r, C.AuthTokenCheckFailed)  # guest may not send
    (r,) = replies(session, C.GetStreamSegmentInfo(request_id=2, segment_name=SEG, delegation_token=""))
    assert isinstance(r, C.StreamSegmentInfo)  # ... but may read
    (r,) = replies(session, C.ReadSegment(segment="sc/other/0.#epoch.0", offset=0, suggested_length=10,
                                          request_id=3, delegation_token=""))
    assert isinstance(r, C.NoSuchSegment)  # nothing there: nothing to protect
    broker.meta.users.update_permissions("guest", perms(poll_messages=True, send_messages=True))
    (r,) = replies(session, C.SetupAppend(request_id=4, writer_id=writer, segment=SEG, delegation_token=""))
    assert isinstance(r, C.AppendSetup)  # its permissions now, not at start
    append(session, writer, b"by guest", 1, 5)
    assert stored(broker) == [b"by guest"]
    broker.meta.users.update_user("guest", status="inactive")
    (r,) = replies(session, C.GetStreamSegmentInfo(request_id=6, segment_name=SEG, delegation_token=""))
    assert isinstance(r, C.AuthTokenCheckFailed)  # a deactivated anonymous user closes the door


def test_without_an_anonymous_user_an_empty_token_is_refused(broker, secured):
    session = SegmentStoreSession(broker, lambda b: None)
    for cmd in (C.GetStreamSegmentInfo(request_id=1, segment_name=SEG, delegation_token=""),
                C.CreateTableSegment(request_id=2, segment="sc/rg_kvtable/0.#epoch.0", delegation_token="")):
        (r,) = replies(session, cmd)
        assert isinstance(r, C.AuthTokenCheckFailed), r
    assert not broker.tables.list("sc/")


def test_reader_group_tables_need_read_on_the_scope_or_poll_in_it(broker, secured):
    """A reader group's table names no topic: who may read the scope, or poll one of its
    topics, may keep one there; a user of another stream may not."""
    users = {"outsider": (Permissions(streams={SID + 1: StreamPermissions(read_stream=True)}), False),
             "poller": (perms(poll_messages=True), True),
             "scopereader": (Permissions(streams={SID: StreamPermissions(read_stream=True)}), True),
             "sender": (perms(send_messages=True), False)}
    session = SegmentStoreSession(broker, lambda b: None)
    for rid, (name, (permissions, ok)) in enumerate(users.items()):
        user = broker.meta.users.create_user(name, "secret-pw", permissions=permissions)
        cmd = C.CreateTableSegment(request_id=rid, segment=f"sc/{name}_kvtable/0.#epoch.0",
                                   delegation_token=token_for(secured, user))
        (r,) = replies(session, cmd)
        assert isinstance(r, C.AuthTokenCheckFailed) != ok, (name, r)


def test_anonymous_user_must_exist():
    class Meta:
        def get_user(self, name):
            from core.errors import UserNotFound
            raise UserNotFound(f"no user {name!r}")

    with pytest.raises(InvalidArgument, match="listeners.pravega.anonymous_user: no Ferry user 'x'"):
        Principal.anonymous_user(Meta(), "x", "listeners.pravega.anonymous_user")


def header(user: str, password: str) -> list:
    return [("authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())]


def test_credential_cache_is_dropped_when_users_change(broker):
    broker.meta.users.create_user("gone", "secret-pw", permissions=Permissions(global_=GlobalPermissions(read_streams=True)))
    auth = Authenticator(broker, TokenIssuer(SECRET), clock=Clock())
    auth.user(header("gone", "secret-pw"))
    broker.meta.users.delete_user("gone")
    with pytest.raises(AuthError) as err:
        auth.user(header("gone", "secret-pw"))  # the cached entry went with the users.version bump
    assert err.value.code == "UNAUTHENTICATED"


def test_failed_and_throttled_logins_are_not_cached(broker):
    broker.meta.users.create_user("uuu", "secret-pw")
    auth = Authenticator(broker, TokenIssuer(SECRET), clock=Clock())
    actor = access.bind_actor("pravega_controller", ("192.0.2.7", 5000))
    for _ in range(access.FREE_FAILURES + 1):
        with pytest.raises(AuthError):
            auth.user(header("uuu", "wrong"))
    with pytest.raises(AuthError) as err:
        auth.user(header("uuu", "secret-pw"))  # throttled: refused unchecked, as a bad credential
    assert err.value.code == "UNAUTHENTICATED" and "too many failed logins" in err.value.message
    assert not auth._cache
    broker.meta.users.login_guard.succeeded(actor.addr)
    assert auth.user(header("uuu", "secret-pw")).username == "uuu"
    assert (actor.user, actor.addr) == ("uuu", "192.0.2.7")  # the connection's actor logged in
    access.use_actor(access.LOCAL)


def test_controller_anonymous_user_and_missing_credentials(broker):
    broker.meta.users.create_user("guest", "secret-pw", permissions=Permissions(global_=GlobalPermissions(read_streams=True)))
    issuer = TokenIssuer(SECRET)
    closed = Authenticator(broker, issuer)
    with pytest.raises(AuthError, match="requires credentials"):
        closed.user([])
    open_ = Authenticator(broker, issuer, anonymous=Principal.anonymous_user(broker.meta.users, "guest", "k"))
    guest = open_.user([])
    assert guest.username == "guest"
    open_.require(guest, Action.READ_STREAMS)
    with pytest.raises(AuthError):
        open_.require(guest, Action.CREATE_STREAM)
    assert open_.user(header("guest", "secret-pw")).username == "guest"  # credentials: checked as usual
    broker.meta.users.delete_user("guest")
    with pytest.raises(AuthError) as err:
        open_.user([])
    assert err.value.code == "UNAUTHENTICATED"


class Conn:
    def __init__(self) -> None:
        self.answers = []

    def reply(self, stream_id, body):
        self.answers.append(("OK", body))

    def fail(self, stream_id, code, message=""):
        self.answers.append((GrpcStatus(code).name, message))


class Call:
    def __init__(self, method, body, metadata=()) -> None:
        self.service, self.method, self.body, self.metadata, self.stream_id = P.SERVICE, method, body, metadata, 1


def test_every_controller_rpc_is_checked(broker):
    service = ControllerService(broker)
    assert set(service.handlers) - set(_NEEDS) == {"getDelegationToken"}  # decides in its handler


def test_controller_denials_are_audited_and_nothing_is_created(broker, caplog):
    broker.meta.users.create_user("nobody", "secret-pw")
    service = ControllerService(broker, auth=Authenticator(broker, TokenIssuer(SECRET)))
    conn = Conn()
    with caplog.at_level(logging.WARNING, logger="ferry.audit"):
        service.dispatch(conn, Call("createScope", P.ScopeInfo(scope="secret").encode(), header("nobody", "secret-pw")))
        service.dispatch(conn, Call("createScope", P.ScopeInfo(scope="secret").encode()))
        service.dispatch(conn, Call("getDelegationToken", P.StreamInfo(scope="sc", stream="st").encode(),
                                    header("nobody", "secret-pw")))
    assert [a[0] for a in conn.answers] == ["PERMISSION_DENIED"] * 3
    assert "requires credentials" in conn.answers[1][1]
    assert [s.name for s in broker.list_streams()] == ["sc"]
    denials = [(r.action, getattr(r, "scope", None)) for r in caplog.records if getattr(r, "event", "") == "denied"]
    assert denials == [("create_stream", "secret"), ("poll_messages", "sc")]


def test_readers_and_writers_of_a_topic_may_find_its_segments(broker):
    """The READ_TOPIC RPCs (segments, URIs, configuration) admit who may poll or send on the
    topic: a writer that may only send still finds where to write."""
    broker.meta.users.create_user("sender", "secret-pw", permissions=perms(send_messages=True))
    broker.meta.users.create_user("poller", "secret-pw", permissions=perms(poll_messages=True))
    broker.meta.users.create_user("nobody", "secret-pw")
    service = ControllerService(broker, auth=Authenticator(broker, TokenIssuer(SECRET)))
    conn = Conn()
    body = P.StreamInfo(scope="sc", stream="st").encode()
    for name in ("sender", "poller", "nobody"):
        service.dispatch(conn, Call("getCurrentSegments", body, header(name, "secret-pw")))
    assert [a[0] for a in conn.answers] == ["OK", "OK", "PERMISSION_DENIED"]
    assert "may not read_topic" in conn.answers[2][1]
    # a reader group's table: its getURI admits who may poll in the scope (not a mere sender)
    conn.answers.clear()
    table = P.SegmentId(stream_info=P.StreamInfo(scope="sc", stream="rg_kvtable"), segment_id=0).encode()
    for name in ("poller", "sender"):
        service.dispatch(conn, Call("getURI", table, header(name, "secret-pw")))
    assert [a[0] for a in conn.answers] == ["UNAVAILABLE", "PERMISSION_DENIED"]  # (no segment store here)


def test_a_binding_s_pravega_names_are_checked_on_the_bound_topic(tmp_path):
    """A ``[[binding]]`` may give a topic Pravega names unlike its Ferry names (a scope that is
    no Ferry stream): the controller and the segment store check the bound topic all the same."""
    from core.addressing import Binding

    b = Broker.open(tmp_path / "data", BrokerConfig(log=LogConfig(fsync="always"), bindings=(
        Binding(stream="hr dept", topic="pay roll", pravega_scope="hr", pravega_stream="pay"),)))
    try:
        b.create_stream("hr dept")
        b.create_topic("hr dept", "pay roll", 1)
        b.meta.users.create_user("nobody", "secret-pw")
        service = ControllerService(b, auth=Authenticator(b, TokenIssuer(SECRET)))
        conn = Conn()
        service.dispatch(conn, Call("getCurrentSegments", P.StreamInfo(scope="hr", stream="pay").encode(),
                                    header("nobody", "secret-pw")))
        assert conn.answers[0][0] == "PERMISSION_DENIED"
        state = state_of(b)
        state.issuer = TokenIssuer(SECRET)
        nobody = b.meta.users.get_user("nobody")
        token = state.issuer.issue(nobody.id, "hr", "pay", frozenset({READ}), created_at=nobody.created_at)
        (r,) = replies(SegmentStoreSession(b, lambda x: None),
                       C.ReadSegment(segment="hr/pay/0.#epoch.0", offset=0, suggested_length=10, request_id=1,
                                     delegation_token=token))
        assert isinstance(r, C.AuthTokenCheckFailed) and "may not poll_messages" in r.server_stack_trace
    finally:
        b.close()


def test_the_password_check_can_run_before_the_call_in_a_worker_thread(broker, monkeypatch):
    """The controller driver asks prepare() for the argon2 check a call needs, runs it in
    a worker thread and settles it; user() then answers without checking again. A
    remembered credential needs no check; a wrong one is refused as before."""
    import threading

    broker.meta.users.create_user("ppp", "secret-pw", permissions=Permissions(global_=GlobalPermissions(read_streams=True)))
    auth = Authenticator(broker, TokenIssuer(SECRET), clock=Clock())
    assert auth.prepare([]) is None                          # no credentials: nothing slow
    check = auth.prepare(header("ppp", "secret-pw"))
    box = {}
    worker = threading.Thread(target=lambda: box.setdefault("outcome", check()))
    worker.start()
    worker.join()
    check.settle(box["outcome"])
    calls = []
    real = broker.meta.users.authenticate
    monkeypatch.setattr(broker.meta.users, "authenticate", lambda *a: calls.append(a) or real(*a))
    user = auth.user(header("ppp", "secret-pw"))
    assert user.username == "ppp" and calls == []            # the thread's check was used
    assert auth.prepare(header("ppp", "secret-pw")) is None   # remembered now
    bad = auth.prepare(header("ppp", "wrong"))
    bad.settle(bad())
    with pytest.raises(AuthError) as err:
        auth.user(header("ppp", "wrong"))
    assert err.value.code == "UNAUTHENTICATED" and calls == [("ppp", "wrong")]   # checked once: in bad()
