"""Delegation tokens and Basic credentials (adapters/pravega/auth.py), and the segment
store's AuthTokenCheckFailed replies, without a network (pravega.md section 4.4)."""

from __future__ import annotations

import base64
import uuid

import pytest

from adapters.pravega import commands as C
from adapters.pravega.auth import (AUTH_CHECK_FAILED, AUTH_TOKEN_EXPIRED, READ, WRITE, AuthError, Authenticator,
                                   TokenIssuer, load_secret, parse_basic)
from adapters.pravega.codec import NEED_DATA, FrameDecoder
from adapters.pravega.session import SegmentStoreSession
from adapters.pravega.state import state_of
from core.broker import Broker, BrokerConfig
from core.log import LogConfig
from core.permissions import Action, GlobalPermissions, Permissions

SECRET = b"k" * 32


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_token_round_trip_scope_op_and_expiry():
    clock = Clock()
    issuer = TokenIssuer(SECRET, clock=clock, lifetime_s=600)
    token = issuer.issue(7, "sc", "st", frozenset({READ}))
    assert issuer.check(token, "sc", "st", READ).user_id == 7
    assert issuer.check(token, "sc", "rg_kvtable", READ).scope == "sc"  # the scope's reader-group tables
    for scope, stream, op in (("other", "st", READ), ("sc", "other", READ), ("sc", "st", WRITE)):
        with pytest.raises(AuthError) as err:
            issuer.check(token, scope, stream, op)
        assert err.value.code == AUTH_CHECK_FAILED
    clock.now += 600
    with pytest.raises(AuthError) as err:
        issuer.check(token, "sc", "st", READ)
    assert err.value.code == AUTH_TOKEN_EXPIRED  # the client refetches a token and retries


@pytest.mark.parametrize("token", ["", "garbage", TokenIssuer(b"x" * 32).issue(1, "sc", "st", frozenset({READ}))])
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
    broker.meta.create_user("reader", "secret-pw", permissions=Permissions(
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
    seg = "sc/st/0.#epoch.0"
    writer = uuid.uuid4()
    (r,) = replies(session, C.SetupAppend(request_id=5, writer_id=writer, segment=seg, delegation_token="nope"))
    assert r == C.AuthTokenCheckFailed(request_id=5, server_stack_trace="invalid delegation token",
                                       error_code=AUTH_CHECK_FAILED)
    read_only = issuer.issue(1, "sc", "st", frozenset({READ}))
    (r,) = replies(session, C.SetupAppend(request_id=6, writer_id=writer, segment=seg, delegation_token=read_only))
    assert isinstance(r, C.AuthTokenCheckFailed) and r.error_code == AUTH_CHECK_FAILED
    (r,) = replies(session, C.GetStreamSegmentInfo(request_id=7, segment_name=seg, delegation_token=read_only))
    assert isinstance(r, C.StreamSegmentInfo)
    both = issuer.issue(1, "sc", "st", frozenset({READ, WRITE}))
    (r,) = replies(session, C.SetupAppend(request_id=8, writer_id=writer, segment=seg, delegation_token=both))
    assert isinstance(r, C.AppendSetup) and r.request_id == 8
    clock.now += 10_000
    (r,) = replies(session, C.ReadSegment(segment=seg, offset=0, suggested_length=100, delegation_token=both,
                                          request_id=9))
    assert r == C.AuthTokenCheckFailed(request_id=9, server_stack_trace="the delegation token expired",
                                       error_code=AUTH_TOKEN_EXPIRED)
    state_of(broker).issuer = None
