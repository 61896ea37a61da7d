"""core.metadata users, passwords, permissions and personal access tokens
(core.auth, core.permissions)."""

from __future__ import annotations

import hashlib
import threading

import pytest
from argon2 import PasswordHasher

from core.auth import MAX_TOKENS_PER_USER
from core.errors import (
    CannotChangePermissions,
    CannotDeleteUser,
    InvalidArgument,
    InvalidCredentials,
    InvalidName,
    InvalidPassword,
    InvalidToken,
    InvalidTokenName,
    InvalidUsername,
    PermissionDenied,
    TokenAlreadyExists,
    TokenExpired,
    TokenLimitReached,
    TokenNotFound,
    Unauthenticated,
    UserAlreadyExists,
    UserInactive,
    UserNotFound,
)
from core.metadata import (
    Action,
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)
from core.permissions import GLOBAL_FLAGS, STREAM_FLAGS, TOPIC_FLAGS, allowed
from metadata_helpers import T0, FakeClock, file_bytes, open_meta, raw_rows

HOUR_US = 3_600_000_000


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def meta(tmp_path, clock):
    m = open_meta(tmp_path / "metadata.sqlite", clock)
    m.users.ensure_root("iggy", "iggy")
    yield m
    m.close()


# -- users -----------------------------------------------------------------------------
def test_ensure_root(meta):
    root = meta.users.get_user(0)
    assert (root.id, root.username, root.status, root.created_at) == (0, "iggy", "active", T0)
    assert root.is_root and root.permissions == Permissions.root()
    assert meta.users.ensure_root("other", "changed") == root  # an existing root is kept as is
    assert meta.users.authenticate("iggy", "iggy").id == 0
    with pytest.raises(InvalidCredentials):
        meta.users.authenticate("iggy", "changed")


def test_user_ids_start_after_root_even_before_it_exists(tmp_path, clock):
    with open_meta(tmp_path / "m.sqlite", clock) as m:
        assert m.users.create_user("early", "secret").id == 1  # id 0 stays reserved for root
        assert m.users.ensure_root("iggy", "iggy").id == 0


def test_create_get_list_users(meta):
    perms = Permissions(GlobalPermissions(read_streams=True))
    a = meta.users.create_user("alice", "secret-a", permissions=perms)
    b = meta.users.create_user("bob", "secret-b", "inactive")
    assert (a.id, a.username, a.status, a.permissions) == (1, "alice", "active", perms)
    assert (b.id, b.status, b.permissions, b.active) == (2, "inactive", None, False)
    assert meta.users.get_user("alice") == meta.users.get_user(1) == a
    assert [u.username for u in meta.users.list_users()] == ["iggy", "alice", "bob"]
    meta.users.delete_user("alice")
    assert meta.users.create_user("carol", "secret-c").id == 1  # lowest free id
    assert meta.users.create_user("dave", "secret-d", user_id=10).id == 10


def test_user_duplicates_and_lookups(meta):
    meta.users.create_user("alice", "secret")
    with pytest.raises(UserAlreadyExists) as by_name:
        meta.users.create_user("alice", "secret")
    with pytest.raises(UserAlreadyExists) as by_id:
        meta.users.create_user("zed", "secret", user_id=1)
    assert (by_name.value.details["field"], by_id.value.details["field"]) == ("name", "id")
    with pytest.raises(UserNotFound):
        meta.users.get_user("nobody")
    with pytest.raises(UserNotFound):
        meta.users.get_user(42)


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"username": "ab"}, InvalidUsername),
        ({"username": "x" * 51}, InvalidUsername),
        ({"username": 5}, InvalidUsername),
        ({"password": "pw"}, InvalidPassword),
        ({"password": "p" * 101}, InvalidPassword),
        ({"password": None}, InvalidPassword),
        ({"status": "banned"}, InvalidArgument),
        ({"permissions": {"global": {}}}, InvalidArgument),
        ({"user_id": -1}, InvalidArgument),
    ],
)
def test_bad_user_arguments(meta, kwargs, error):
    args = {"username": "alice", "password": "secret", **kwargs}
    with pytest.raises(error):
        meta.users.create_user(args.pop("username"), args.pop("password"), **args)
    assert [u.username for u in meta.users.list_users()] == ["iggy"]
    assert issubclass(InvalidUsername, InvalidName)


def test_update_user(meta):
    meta.users.create_user("alice", "secret")
    meta.users.create_user("bob", "secret")
    assert meta.users.update_user("alice", username="alicia").username == "alicia"
    assert meta.users.update_user(1, status="inactive").status == "inactive"
    assert meta.users.update_user(1, username="alicia").username == "alicia"  # own name: fine
    with pytest.raises(UserAlreadyExists):
        meta.users.update_user("alicia", username="bob")
    with pytest.raises(InvalidUsername):
        meta.users.update_user("bob", username="b")
    with pytest.raises(InvalidArgument):
        meta.users.update_user("bob", status="gone")
    with pytest.raises(PermissionDenied):
        meta.users.update_user(0, status="inactive")  # would lock everyone out
    with pytest.raises(UserNotFound):
        meta.users.update_user("carol", status="active")


def test_update_permissions(meta):
    meta.users.create_user("alice", "secret")
    perms = Permissions(
        GlobalPermissions(read_users=True),
        {3: StreamPermissions(read_stream=True, topics={1: TopicPermissions(send_messages=True)})},
    )
    assert meta.users.update_permissions("alice", perms).permissions == perms
    assert meta.users.get_user(1).permissions == perms
    assert meta.users.update_permissions(1, None).permissions is None
    with pytest.raises(CannotChangePermissions):
        meta.users.update_permissions(0, None)
    with pytest.raises(UserNotFound):
        meta.users.update_permissions("carol", None)


def test_change_password(meta):
    meta.users.create_user("alice", "old-secret")
    with pytest.raises(InvalidCredentials):
        meta.users.change_password("alice", "wrong", "new-secret")
    with pytest.raises(InvalidPassword):
        meta.users.change_password("alice", "old-secret", "no")
    meta.users.change_password("alice", "old-secret", "new-secret")
    assert meta.users.authenticate("alice", "new-secret").username == "alice"
    with pytest.raises(InvalidCredentials):
        meta.users.authenticate("alice", "old-secret")


def test_delete_user(meta):
    meta.users.create_user("alice", "secret")
    token = meta.users.create_pat(1, "laptop")
    meta.users.delete_user("alice")
    with pytest.raises(UserNotFound):
        meta.users.get_user("alice")
    with pytest.raises(InvalidToken):  # the tokens went with the user
        meta.users.login_with_pat(token)
    with pytest.raises(CannotDeleteUser):
        meta.users.delete_user(0)
    with pytest.raises(UserNotFound):
        meta.users.delete_user("alice")


# -- authentication ----------------------------------------------------------------------
def test_unknown_user_and_wrong_password_look_the_same(meta):
    meta.users.create_user("alice", "secret")
    errors = []
    for username, password in [("nobody", "secret"), ("alice", "wrong"), (99, "secret"), ("alice", None)]:
        with pytest.raises(InvalidCredentials) as err:
            meta.users.authenticate(username, password)
        errors.append((type(err.value), err.value.message))
    assert len(set(errors)) == 1
    assert meta.users.authenticate(1, "secret").username == "alice"  # by id too


def test_inactive_user(meta):
    meta.users.create_user("alice", "secret", "inactive")
    with pytest.raises(UserInactive) as err:
        meta.users.authenticate("alice", "secret")
    assert isinstance(err.value, Unauthenticated)
    with pytest.raises(InvalidCredentials):  # no password, no hint about the status
        meta.users.authenticate("alice", "wrong")


def test_a_token_never_starts_with_a_dash(meta, monkeypatch):
    """A token follows an option on command lines (``--token T``), where a leading '-'
    reads as an option: such a draw is replaced (it was 1 in 64 tokens)."""
    import core.auth

    draws = iter(["-starts-with-a-dash", "-again", "fine-token"])
    monkeypatch.setattr(core.auth.secrets, "token_urlsafe", lambda n: next(draws))
    assert meta.users.create_pat(0, "cli") == "fine-token"
    assert meta.users.login_with_pat("fine-token")


def test_no_plain_text_password_or_token_on_disk(tmp_path, clock):
    path = tmp_path / "metadata.sqlite"
    with open_meta(path, clock) as m:
        m.users.create_user("alice", "Plain-Text-Secret-1")
        m.users.change_password("alice", "Plain-Text-Secret-1", "Plain-Text-Secret-2")
        token = m.users.create_pat(1, "ci-bot")
        on_disk_live = file_bytes(path)
    on_disk = file_bytes(path) + on_disk_live
    for secret in (b"Plain-Text-Secret-1", b"Plain-Text-Secret-2", token.encode()):
        assert secret not in on_disk
    [(pw_hash,)] = raw_rows(path, "SELECT password_hash FROM users WHERE username = 'alice'")
    assert pw_hash.startswith("$argon2id$")
    assert raw_rows(path, "SELECT token_hash FROM personal_access_tokens") == [(hashlib.sha256(token.encode()).digest(),)]


def test_login_rehashes_when_parameters_change(tmp_path, clock):
    path = tmp_path / "metadata.sqlite"
    with open_meta(path, clock) as m:
        m.users.create_user("alice", "secret")
    [(before,)] = raw_rows(path, "SELECT password_hash FROM users")
    stronger = PasswordHasher(time_cost=2, memory_cost=16, parallelism=1)
    with open_meta(path, clock, hasher=stronger) as m:
        m.users.authenticate("alice", "secret")
        [(after,)] = raw_rows(path, "SELECT password_hash FROM users")
        assert after != before and "t=2" in after and not stronger.check_needs_rehash(after)
        m.users.authenticate("alice", "secret")
        assert raw_rows(path, "SELECT password_hash FROM users") == [(after,)]  # no needless rehash


def test_auth_from_a_worker_thread_while_the_main_thread_writes(meta):
    meta.users.create_user("alice", "secret")
    meta.create_stream("s")
    meta.create_topic("s", "t", 1)
    failures = []

    def logins():
        try:
            for _ in range(20):
                meta.users.authenticate("alice", "secret")
        except Exception as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    worker = threading.Thread(target=logins)
    worker.start()
    for i in range(200):
        meta.store_offset("consumer", 1, 0, 0, 0, i)
    worker.join()
    assert failures == [] and meta.get_offset("consumer", 1, 0, 0, 0) == 199


# -- personal access tokens ---------------------------------------------------------------
def test_pat_lifecycle(meta, clock):
    meta.users.create_user("alice", "secret")
    forever = meta.users.create_pat(1, "forever")
    hourly = meta.users.create_pat(1, "hourly", expiry_us=HOUR_US)
    assert len(forever) == 67 and forever != hourly  # 50 random bytes, URL-safe base64
    assert [(t.name, t.expiry_at) for t in meta.users.list_pats(1)] == [("forever", None), ("hourly", T0 + HOUR_US)]
    assert meta.users.login_with_pat(hourly).username == "alice"
    clock.advance(HOUR_US - 1)
    assert meta.users.login_with_pat(hourly).id == 1
    clock.advance(1)
    with pytest.raises(TokenExpired) as err:
        meta.users.login_with_pat(hourly)
    assert isinstance(err.value, Unauthenticated)
    assert meta.users.login_with_pat(forever).id == 1
    meta.users.delete_pat(1, "forever")
    with pytest.raises(InvalidToken):
        meta.users.login_with_pat(forever)
    with pytest.raises(TokenNotFound):
        meta.users.delete_pat(1, "forever")
    assert meta.users.delete_expired_pats() == 1 and meta.users.list_pats(1) == []


def test_pat_names_and_errors(meta):
    meta.users.create_user("alice", "secret")
    meta.users.create_pat(1, "ci-bot")
    meta.users.create_pat(0, "ci-bot")  # names are per user
    with pytest.raises(TokenAlreadyExists):
        meta.users.create_pat(1, "ci-bot")
    for bad in ("ab", "x" * 31):
        with pytest.raises(InvalidTokenName):
            meta.users.create_pat(1, bad)
    for bad in (0, -5, True):
        with pytest.raises(InvalidArgument):
            meta.users.create_pat(1, "zero", expiry_us=bad)
    with pytest.raises(UserNotFound):
        meta.users.create_pat(7, "ci-bot")
    with pytest.raises(UserNotFound):
        meta.users.list_pats(7)
    for bad in ("", "x" * 101, "not-a-token", 5):
        with pytest.raises(InvalidToken):
            meta.users.login_with_pat(bad)


def test_pat_limit_counts_live_tokens_only(meta, clock):
    meta.users.create_user("alice", "secret")
    meta.users.create_pat(1, "short", expiry_us=10)
    for i in range(MAX_TOKENS_PER_USER - 1):
        meta.users.create_pat(1, f"tok-{i:03}")
    with pytest.raises(TokenLimitReached):
        meta.users.create_pat(1, "one-too-many")
    clock.advance(10)  # "short" expires: its slot (and name) free up
    meta.users.create_pat(1, "short")
    assert len(meta.users.list_pats(1)) == MAX_TOKENS_PER_USER


def test_pat_of_inactive_user(meta):
    meta.users.create_user("alice", "secret")
    token = meta.users.create_pat(1, "ci-bot")
    meta.users.update_user("alice", status="inactive")
    with pytest.raises(UserInactive):
        meta.users.login_with_pat(token)


# -- permissions: data --------------------------------------------------------------------
def test_permissions_dict_round_trip_and_immutability():
    perms = Permissions(
        GlobalPermissions(manage_servers=True, poll_messages=True),
        {0: StreamPermissions(manage_topics=True, topics={2: TopicPermissions(read_topic=True)}),
         5: StreamPermissions(send_messages=True)},
    )
    data = perms.to_dict()
    assert data["global"]["manage_servers"] and not data["global"]["read_users"]
    assert data["streams"]["0"]["topics"]["2"]["read_topic"] and data["streams"]["5"]["topics"] is None
    assert Permissions.from_dict(data) == perms == Permissions.from_json(perms.to_json())
    assert Permissions.from_dict({"global": {"read_users": True}}) == Permissions(GlobalPermissions(read_users=True))
    with pytest.raises(TypeError):
        perms.streams[9] = StreamPermissions()  # a read-only view


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"global": {"read_users": 1}},
        {"global": {}, "streams": {"-1": {}}},
        {"global": {}, "streams": {"x": {}}},
        {"global": {}, "streams": []},
        {"global": {}, "streams": {"0": {"topics": {"1": {"read_topic": "yes"}}}}},
    ],
)
def test_malformed_permissions(data):
    with pytest.raises(InvalidArgument):
        Permissions.from_dict(data)


# -- permissions: evaluation ---------------------------------------------------------------
# For each action, which single flag at each level grants it: transcribed from
# apache/iggy core/server/src/streaming/users/permissioner_rules/*.rs.
EXPECTED = {
    Action.READ_SERVERS: ({"manage_servers", "read_servers"}, set(), set()),
    Action.MANAGE_SERVERS: ({"manage_servers"}, set(), set()),
    Action.READ_USERS: ({"manage_users", "read_users"}, set(), set()),
    Action.MANAGE_USERS: ({"manage_users"}, set(), set()),
    Action.READ_STREAMS: ({"manage_streams", "read_streams"}, set(), set()),
    Action.CREATE_STREAM: ({"manage_streams"}, set(), set()),
    Action.READ_STREAM: ({"manage_streams", "read_streams"}, {"manage_stream", "read_stream"}, set()),
    Action.MANAGE_STREAM: ({"manage_streams"}, {"manage_stream"}, set()),
    Action.READ_TOPICS: ({"manage_streams", "read_streams", "manage_topics", "read_topics"},
                         {"manage_topics", "read_topics"}, set()),
    Action.CREATE_TOPIC: ({"manage_streams", "manage_topics"}, {"manage_topics"}, set()),
    Action.READ_TOPIC: ({"manage_streams", "read_streams", "manage_topics", "read_topics"},
                        {"manage_topics", "read_topics"}, {"manage_topic", "read_topic"}),
    Action.MANAGE_TOPIC: ({"manage_streams", "manage_topics"}, {"manage_topics"}, {"manage_topic"}),
    Action.POLL_MESSAGES: ({"poll_messages"}, {"read_stream", "manage_topics", "read_topics", "poll_messages"},
                           {"manage_topic", "read_topic", "poll_messages"}),
    Action.SEND_MESSAGES: ({"send_messages"}, {"manage_stream", "manage_topics", "send_messages"},
                           {"manage_topic", "send_messages"}),
}


def _single(level: str, flag: str) -> Permissions:
    if level == "global":
        return Permissions(GlobalPermissions(**{flag: True}))
    if level == "stream":
        return Permissions(streams={1: StreamPermissions(**{flag: True})})
    return Permissions(streams={1: StreamPermissions(topics={2: TopicPermissions(**{flag: True})})})


@pytest.mark.parametrize("action", list(Action))
def test_every_single_flag_against_iggys_rules(action):
    glob, stream, topic = EXPECTED[action]
    for level, flags, granted in [("global", GLOBAL_FLAGS, glob), ("stream", STREAM_FLAGS, stream),
                                  ("topic", TOPIC_FLAGS, topic)]:
        for flag in flags:
            got = allowed(_single(level, flag), action, 1, 2)
            assert got == (flag in granted), (level, flag)


@pytest.mark.parametrize(
    "perms, action, sid, tid, expected",
    [
        # grants are scoped to their own stream and topic
        (Permissions(streams={1: StreamPermissions(read_stream=True)}), Action.POLL_MESSAGES, 2, 2, False),
        (Permissions(streams={1: StreamPermissions(topics={2: TopicPermissions(read_topic=True)})}),
         Action.POLL_MESSAGES, 1, 3, False),
        # Iggy's server, not the flag doc-comments: global read_streams does not let you poll...
        (Permissions(GlobalPermissions(read_streams=True, manage_streams=True)), Action.POLL_MESSAGES, 1, 2, False),
        # ...and a stream's manage_stream lets you send but not poll
        (Permissions(streams={1: StreamPermissions(manage_stream=True)}), Action.SEND_MESSAGES, 1, 2, True),
        (Permissions(streams={1: StreamPermissions(manage_stream=True)}), Action.POLL_MESSAGES, 1, 2, False),
        (None, Action.READ_STREAMS, None, None, False),
        (Permissions(), Action.READ_SERVERS, None, None, False),
    ],
)
def test_permission_cases(perms, action, sid, tid, expected):
    assert allowed(perms, action, sid, tid) is expected


def test_root_inactive_and_bad_calls():
    assert allowed(None, Action.MANAGE_USERS, is_root=True)
    assert allowed(None, "poll_messages", 7, 7, is_root=True)  # plain strings work too
    assert not allowed(Permissions.root(), Action.READ_SERVERS, active=False)
    for bad in [("fly",), (Action.READ_STREAM,), (Action.POLL_MESSAGES, 1)]:
        with pytest.raises(InvalidArgument):
            allowed(Permissions.root(), *bad)


def test_can_reads_users_from_the_store(meta):
    alice = meta.users.create_user("alice", "secret", permissions=Permissions(GlobalPermissions(send_messages=True)))
    assert meta.users.can(alice, Action.SEND_MESSAGES, 0, 0)
    assert not meta.users.can(1, Action.POLL_MESSAGES, 0, 0)
    meta.users.update_permissions(1, Permissions(GlobalPermissions(poll_messages=True)))
    assert meta.users.can(1, Action.POLL_MESSAGES, 0, 0)  # an id is looked up fresh
    assert meta.users.can(0, Action.MANAGE_SERVERS) and meta.users.can(meta.users.get_user(0), Action.MANAGE_USERS)
    meta.users.update_user(1, status="inactive")
    assert not meta.users.can(1, Action.POLL_MESSAGES, 0, 0)
    with pytest.raises(UserNotFound):
        meta.users.can(9, Action.READ_STREAMS)


def test_grants_do_not_outlive_their_stream_or_topic(meta):
    meta.create_stream("secret")
    meta.create_topic("secret", "a", 1)
    meta.create_topic("secret", "b", 1)
    grant = StreamPermissions(read_stream=True, topics={0: TopicPermissions(send_messages=True),
                                                        1: TopicPermissions(send_messages=True)})
    meta.users.create_user("alice", "secret", permissions=Permissions(streams={0: grant}))
    meta.delete_topic("secret", "a")
    kept = meta.users.get_user("alice").permissions.streams[0]
    assert set(kept.topics) == {1} and kept.read_stream
    meta.delete_stream("secret")
    assert meta.users.get_user("alice").permissions == Permissions(streams={})
    meta.create_stream("public")  # reuses id 0: alice must not inherit the old grant
    assert not meta.users.can(1, Action.READ_STREAM, 0)
