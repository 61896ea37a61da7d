"""What a credential change does to live sessions, on every transport (docs/iggy.md
"What a credential change does to live sessions"; core/credentials.py).

Deleting a user ends its logins at once, whichever listener made them and whichever
transport made the change; a permission change applies to the next request; as on
apache/iggy, a deactivation, deleting a personal access token and a password change
end nothing (they only refuse new logins). HTTP tokens follow the same rules.
Checked without sockets over every dialect, over HTTP with httpx, and with the real
clients: apache-iggy 0.9.0 over TCP, QUIC, HTTP and WebSocket, and the legacy-framed
generations (iggy-py 0.4.0, apache-iggy 0.5.0-0.8.0)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading

import httpx
import jwt
import pytest

from adapters.http.tokens import TokenError, TokenService
from adapters.iggy import replies as R
from adapters.iggy.codec import legacy_request
from adapters.iggy.errors import IggyError
from adapters.iggy.events import Deferred
from adapters.iggy.session import TRANSPORT_QUIC, IggySession, sessions_of
from adapters.iggy.spec import COMMANDS
from core.broker import Broker
from core.errors import CannotDeleteUser
from core.permissions import GlobalPermissions, Permissions, StreamPermissions
from ferry_harness import running_gateway
from iggy_clients import SCENARIO_TIMEOUT_S, SCRIPTS, client_python, run_scenario
from iggy_pair import Client

E = IggyError
DIALECTS = (1, 2, 3, 4, 5)
READ_ALL = Permissions(GlobalPermissions(read_users=True, read_streams=True))


@pytest.fixture
def broker(tmp_path):
    b = Broker.open(tmp_path / "data")
    yield b
    b.close()


def logged_in(broker, dialect, username="iggy", password="iggy"):
    c = Client(broker, dialect)
    assert c.login(username, password) == 0
    return c


def pat_login(broker, dialect, token):
    """A new connection logging in with ``token``: (client, status)."""
    c = Client(broker, dialect)
    if dialect == 3:
        status, body = c.call("pat.login_register", protocol_version=0x2C00, sdk_name="rust-sdk",
                              sdk_version="0.11.0", token=token)
        if status == 0:
            c.vsr_session = R.LOGIN_REPLY.decode(3, body).session
    else:
        status, _ = c.call("pat.login", token=token)
    return c, status


def pat_logged_in(broker, dialect, token):
    c, status = pat_login(broker, dialect, token)
    assert status == 0
    return c


def edge(dialect):
    return 1 if dialect in (1, 5) else 0


# -- the session, no sockets: every dialect --------------------------------------------------
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_deleted_users_sessions_end_at_once(broker, dialect):
    """apache/iggy removes a deleted user's clients (server 0.4/0.8 ``delete_clients_for_user``)
    and its grants (0.9 ``DeleteUserRequest::apply``); Ferry ends the logins: 40 from then on,
    not logged in for GetClients, and the id given to a new user does not revive them."""
    broker.meta.users.create_user("alice", "secret1", permissions=READ_ALL)
    root, alice, idle = logged_in(broker, dialect), logged_in(broker, dialect, "alice", "secret1"), \
        logged_in(broker, dialect, "alice", "secret1")
    assert alice.call("user.list")[0] == 0
    uid = broker.meta.users.get_user("alice").id
    assert root.ok("user.delete", user_id=uid + edge(dialect)) == b""
    assert alice.session.user is None and idle.session.user is None  # before either speaks
    for command, values in (("user.list", {}), ("stream.list", {}), ("client.me", {}),
                            ("stream.create", {"name": "mine", **({"stream_id": 9} if edge(dialect) else {})})):
        assert alice.call(command, **values)[0] == E.UNAUTHENTICATED, command
    listed = {R.CLIENT_INFO.decode(dialect, root.ok("client.get", client_id=c.session.client_id),
                                   exact=False)[0].user_id for c in (alice, idle)}
    assert listed == {0}  # connected, not logged in
    assert broker.meta.users.create_user("alice", "secret2", permissions=READ_ALL).id == uid  # the id is reused
    assert idle.call("user.list")[0] == E.UNAUTHENTICATED
    assert alice.login("alice", "secret2") == 0 and alice.call("user.list")[0] == 0


@pytest.mark.parametrize("dialect", DIALECTS)
def test_permission_changes_apply_to_the_next_request(broker, dialect):
    """Iggy updates its permissioner in place (``UpdatePermissionsRequest::apply``): a live
    session acts with the new grants at once, and loses grants on a deleted stream."""
    broker.meta.users.create_user("alice", "secret1", permissions=Permissions(GlobalPermissions(read_users=True)))
    alice = logged_in(broker, dialect, "alice", "secret1")
    assert alice.call("user.list")[0] == 0 and alice.call("stream.list")[0] == E.UNAUTHORIZED
    broker.meta.users.update_permissions("alice", Permissions(GlobalPermissions(read_streams=True)))
    assert alice.call("user.list")[0] == E.UNAUTHORIZED and alice.call("stream.list")[0] == 0
    broker.meta.users.update_permissions("alice", None)
    assert alice.call("stream.list")[0] == E.UNAUTHORIZED and alice.session.user is not None


def test_grants_on_a_deleted_stream_do_not_carry_to_its_reused_id(broker):
    s = broker.create_stream("old")
    broker.meta.users.create_user("alice", "secret1", permissions=Permissions(
        GlobalPermissions(), {s.id: StreamPermissions(read_stream=True)}))
    alice = logged_in(broker, 3, "alice", "secret1")
    assert alice.call("stream.get", stream_id="old")[0] == 0
    broker.delete_stream(s.id)
    assert broker.create_stream("new").id == s.id
    assert alice.call("stream.get", stream_id="new")[0] == E.UNAUTHORIZED


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_deactivated_users_sessions_go_on(broker, dialect):
    """apache/iggy only sets the status (server 0.4/0.8 ``update_user``, 0.9
    ``UpdateUserRequest::apply``): new logins are refused, live sessions keep acting
    with the user's grants."""
    broker.meta.users.create_user("alice", "secret1", permissions=READ_ALL)
    uid = broker.meta.users.get_user("alice").id
    token = broker.meta.users.create_pat(uid, "tok")
    alice, by_token = logged_in(broker, dialect, "alice", "secret1"), pat_logged_in(broker, dialect, token)
    broker.meta.users.update_user("alice", status="inactive")
    for c in (alice, by_token):
        assert c.call("user.list")[0] == 0 and c.call("stream.list")[0] == 0
        assert c.call("stream.create", name="mine", **({"stream_id": 9} if edge(dialect) else {}))[0] \
            == E.UNAUTHORIZED  # the grants, no more
    assert alice.session.user is not None and not alice.session.user.active
    assert Client(broker, dialect).login("alice", "secret1") == E.USER_INACTIVE
    assert pat_login(broker, dialect, token)[1] == E.USER_INACTIVE
    assert alice.login("alice", "secret1") == E.USER_INACTIVE  # a refused re-login ends nothing
    assert alice.call("user.list")[0] == 0
    broker.meta.users.update_user("alice", status="active")
    assert alice.call("user.list")[0] == 0 and Client(broker, dialect).login("alice", "secret1") == 0
    broker.meta.users.update_user("alice", username="alicia")  # a rename ends nothing
    assert alice.call("user.list")[0] == 0


@pytest.mark.parametrize("dialect", DIALECTS)
def test_deleting_a_token_ends_no_session(broker, dialect):
    """apache/iggy only deletes the token (0.4/0.8 ``delete_personal_access_token``, 0.9
    ``DeletePersonalAccessTokenRequest::apply``): the sessions that logged in with it go on."""
    broker.meta.users.create_user("alice", "secret1", permissions=READ_ALL)
    uid = broker.meta.users.get_user("alice").id
    one, two = broker.meta.users.create_pat(uid, "one"), broker.meta.users.create_pat(uid, "two")
    by_one, by_two = pat_logged_in(broker, dialect, one), pat_logged_in(broker, dialect, two)
    by_password = logged_in(broker, dialect, "alice", "secret1")
    assert by_password.ok("pat.delete", name="one") == b""
    for c in (by_one, by_two, by_password):
        assert c.call("user.list")[0] == 0
    assert pat_login(broker, dialect, one)[1] == E.INVALID_PAT  # the token is gone
    by_two.ok("pat.delete", name="two")  # deleting one's own token too
    assert by_two.call("user.list")[0] == 0


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_password_change_ends_nothing(broker, dialect):
    """As apache/iggy (``ChangePasswordRequest::apply`` only replaces the hash)."""
    broker.meta.users.create_user("alice", "secret1", permissions=READ_ALL)
    uid = broker.meta.users.get_user("alice").id
    a, b = logged_in(broker, dialect, "alice", "secret1"), logged_in(broker, dialect, "alice", "secret1")
    by_token = pat_logged_in(broker, dialect, broker.meta.users.create_pat(uid, "tok"))
    status, _ = a.call("user.password", user_id=uid + edge(dialect), current_password="secret1",
                       new_password="secret2")
    assert status == 0
    for c in (a, b, by_token):
        assert c.call("user.list")[0] == 0
    assert Client(broker, dialect).login("alice", "secret1") == E.INVALID_CREDENTIALS


def test_an_ended_login_leaves_its_consumer_groups(broker):
    root = logged_in(broker, 3)
    root.ok("stream.create", name="s")
    root.ok("topic.create", stream_id="s", partitions_count=2, name="t")
    root.ok("consumer_group.create", stream_id="s", topic_id="t", name="g")
    broker.meta.users.create_user("alice", "secret1", permissions=Permissions(GlobalPermissions(read_topics=True)))
    alice = logged_in(broker, 3, "alice", "secret1")
    for c in (root, alice):
        c.ok("consumer_group.join", stream_id="s", topic_id="t", group_id="g")
    broker.meta.users.delete_user("alice")
    got = R.SYNC_GROUP.decode(3, root.ok("consumer_group.sync", stream_id="s", topic_id="t", group_id="g"))
    assert got.partitions == (0, 1)  # the deleted user's share went back to the group
    assert broker.consumers.groups_of(alice.session.client_id) == []


def test_a_login_whose_user_is_deleted_while_its_password_is_checked_fails(broker):
    broker.meta.users.create_user("alice", "secret1")
    c = Client(broker, 2)
    conn = c.session.conn
    cmd = COMMANDS.by_name["user.login"]
    conn.receive_data(legacy_request(cmd.code, cmd.encode(2, cmd.make(username="alice", password="secret1",
                                                                           version="0.10.0"))))
    deferred = c.session.handle(conn.next_event())
    assert isinstance(deferred, Deferred)
    deferred.outcome = deferred.work()  # the worker thread's part: the password is right
    broker.meta.users.delete_user("alice")  # meanwhile
    assert c.session.finish(deferred, cmd).status == E.INVALID_CREDENTIALS and c.session.user is None


def test_vsr_logout_without_a_login_is_ok_and_legacy_is_40(broker):
    """apache/iggy ``handle_logout_request``: an unbound VSR Logout answers OK (the 0.9.0
    client sends one before every re-login); the legacy servers answered 40."""
    assert Client(broker, 3).call("user.logout")[0] == 0
    assert Client(broker, 2).call("user.logout")[0] == E.UNAUTHENTICATED


def test_the_store_announces_committed_deletions_and_grant_changes(broker):
    """Deletions end logins; status and permission changes are announced as CHANGED
    (sessions that cache a decision drop it); renames, passwords and tokens are not."""
    seen = []
    stop = broker.meta.users.watch_credentials(seen.append)
    alice = broker.meta.users.create_user("alice", "secret1")
    broker.meta.users.create_pat(alice.id, "tok")
    broker.meta.users.update_permissions("alice", READ_ALL)
    broker.meta.users.update_user("alice", username="alicia")
    broker.meta.users.change_password("alicia", "secret1", "secret2")
    broker.meta.users.update_user("alicia", status="inactive")
    broker.meta.users.delete_pat(alice.id, "tok")
    assert [c.kind for c in seen] == ["changed", "changed", "changed"]   # permissions, rename, status
    assert not any(c.deleted for c in seen)
    seen.clear()
    with pytest.raises(CannotDeleteUser):
        broker.meta.users.delete_user(0)  # root: refused, nothing announced
    broker.meta.users.delete_user("alicia")
    assert [(c.user_id, c.created_at) for c in seen] == [(alice.id, alice.created_at)]
    stop()
    broker.meta.users.create_user("bob", "secret1")
    broker.meta.users.delete_user("bob")
    assert len(seen) == 1


def test_a_failing_watcher_does_not_fail_the_change(broker, caplog):
    broker.meta.users.watch_credentials(lambda change: 1 / 0)
    broker.meta.users.create_user("alice", "secret1")
    broker.meta.users.delete_user("alice")  # committed, and reported as such
    assert "credential watcher failed" in caplog.text
    assert [u.username for u in broker.meta.users.list_users()] == ["iggy"]


def test_every_session_of_the_broker_is_covered_whoever_made_it(broker):
    """One watcher per broker, over ``sessions_of(broker)``: a session of any listener
    (TCP, QUIC and WebSocket all build IggySession) ends the same way."""
    broker.meta.users.create_user("alice", "secret1")
    sessions = [IggySession(broker, client_id=900 + i, transport=t) for i, t in enumerate((1, TRANSPORT_QUIC, 3))]
    alice = broker.meta.users.get_user("alice")
    for s in sessions:
        s.user = alice
    assert all(sessions_of(broker)[s.client_id] is s for s in sessions)
    broker.meta.users.delete_user("alice")
    assert [s.user for s in sessions] == [None, None, None]


# -- HTTP access tokens -----------------------------------------------------------------------------
def _http(gw, token=None):
    c = httpx.Client(base_url=f"http://127.0.0.1:{gw.ports['http']}", timeout=20)
    if token:
        c.headers["authorization"] = f"Bearer {token}"
    return c


def _login(gw, body, path="/users/login"):
    with _http(gw) as c:
        r = c.post(path, json=body)
        assert r.status_code == 200, r.text
        return r.json()["access_token"]["token"]


ALICE = {"username": "alice", "password": "secret1"}
ALICE_JSON = {"username": "alice", "password": "secret1", "status": "active",
              "permissions": {"global": {"read_users": True, "read_streams": True}}}


def test_http_tokens_follow_every_credential_change(tmp_path):
    """Iggy's HTTP API checks only a token's signature, expiry and revocation (0.8
    ``http/jwt/middleware.rs`` ``jwt_auth``, 0.9 ``http/extractor.rs`` ``resolve_credential``),
    and refreshes without looking at the user: a deactivation or a deleted personal
    access token ends no token. Ferry also ends the tokens of a deleted user."""
    with running_gateway(tmp_path) as gw, _http(gw, _login(gw, {"username": "iggy", "password": "iggy"})) as root:
        assert root.post("/users", json=ALICE_JSON).status_code == 200
        alice = _http(gw, _login(gw, ALICE))
        assert alice.get("/users").status_code == 200
        # permissions: the next request
        assert root.put("/users/alice/permissions", json={"permissions": {"global": {"read_streams": True}}}) \
            .status_code == 204
        assert alice.get("/users").status_code == 403 and alice.get("/streams").status_code == 200
        assert root.put("/users/alice/permissions", json={"permissions": ALICE_JSON["permissions"]}) \
            .status_code == 204
        assert alice.get("/users").status_code == 200
        # password: nothing ends
        assert alice.put("/users/alice/password", json={"current_password": "secret1",
                                                        "new_password": "secret2"}).status_code == 204
        assert alice.get("/users").status_code == 200
        # personal access token: the tokens it bought go on; only logins with it end
        raw = alice.post("/personal-access-tokens", json={"name": "tok"}).json()["token"]
        by_pat = _http(gw, _login(gw, {"token": raw}, "/personal-access-tokens/login"))
        assert by_pat.get("/users").status_code == 200
        assert alice.delete("/personal-access-tokens/tok").status_code == 204
        assert by_pat.get("/users").status_code == 200 and alice.get("/users").status_code == 200
        with _http(gw) as anon:
            r = anon.post("/personal-access-tokens/login", json={"token": raw})
            assert r.status_code == 401 and r.json()["id"] == 53
        # deactivation: tokens go on (with the grants) and refresh; new logins are refused
        kept = by_pat.headers["authorization"][7:]
        assert root.put("/users/alice", json={"status": "inactive"}).status_code == 204
        assert alice.get("/users").status_code == 200 and alice.post("/streams", json={"name": "x"}).status_code == 403
        with _http(gw) as anon:
            r = anon.post("/users/login", json={"username": "alice", "password": "secret2"})
            assert r.status_code == 400 and r.json()["id"] == 47
            raw = alice.post("/personal-access-tokens", json={"name": "tok2"}).json()["token"]
            r = anon.post("/personal-access-tokens/login", json={"token": raw})
            assert r.status_code == 400 and r.json()["id"] == 47
            r = anon.post("/users/refresh-token", json={"token": alice.headers["authorization"][7:]})
            assert r.status_code == 200, r.text
        alice.headers["authorization"] = "Bearer " + r.json()["access_token"]["token"]
        assert alice.get("/users").status_code == 200
        assert root.put("/users/alice", json={"status": "active"}).status_code == 204
        assert alice.get("/users").status_code == 200
        # deletion: refused, refresh refused, and a new user with the reused id is not the old one
        old = alice.headers["authorization"][7:]
        assert root.delete("/users/alice").status_code == 204
        assert alice.get("/users").status_code == 401
        r = alice.post("/users/refresh-token", json={"token": old})
        assert r.status_code == 401 and r.json()["id"] == 40
        assert root.post("/users", json=ALICE_JSON).status_code == 200
        assert alice.get("/users").status_code == 401 and _http(gw, kept).get("/users").status_code == 401
        assert _http(gw, _login(gw, ALICE)).get("/users").status_code == 200
        assert root.get("/users").status_code == 200


def test_http_refresh_keeps_the_user_tie(tmp_path):
    with running_gateway(tmp_path) as gw, _http(gw, _login(gw, {"username": "iggy", "password": "iggy"})) as root:
        assert root.post("/users", json=ALICE_JSON).status_code == 200
        alice = _http(gw, _login(gw, ALICE))
        r = alice.post("/users/refresh-token", json={"token": alice.headers["authorization"][7:]})
        assert r.status_code == 200, r.text
        fresh = r.json()["access_token"]["token"]
        claims = jwt.decode(fresh, options={"verify_signature": False})
        assert "ferry_uc" in claims and "ferry_pat" not in claims
        assert root.delete("/users/alice").status_code == 204
        assert root.post("/users", json=ALICE_JSON).status_code == 200  # the same id again
        assert _http(gw, fresh).get("/users").status_code == 401
        r = alice.post("/users/refresh-token", json={"token": fresh})
        assert r.status_code == 401 and r.json()["id"] == 40


@pytest.mark.parametrize("extra", [{"ferry_uc": "x"}, {"ferry_uc": True}, {"ferry_uc": 1.5}])
def test_malformed_private_claims_are_invalid_tokens(extra):
    svc = TokenService(b"k" * 32)
    token, _ = svc.issue(1)
    claims = jwt.decode(token, b"k" * 32, algorithms=["HS256"], audience="iggy.rs")
    with pytest.raises(TokenError):
        svc.verify(jwt.encode({**claims, **extra}, b"k" * 32, algorithm="HS256"))


# -- real clients ----------------------------------------------------------------------------------
STEADY = {
    "before": {"names": ["alice", "iggy"]},
    "permissions_revoked": {"error": "Unauthorized"},
    "permissions_granted": {"streams": ["s"]},
    "permissions_restored": {"names": ["alice", "iggy"]},
    "password_same_session": {"names": ["alice", "iggy"]},
    "password_other_session": {"names": ["alice", "iggy"]},
    "password_new_login": {"names": ["alice", "iggy"]},
    "inactive_session": {"names": ["alice", "iggy"]},
    "inactive_other_session": {"names": ["alice", "iggy"]},
    "reactivated_session": {"names": ["alice", "iggy"]},
    "reactivated_login": {"names": ["alice", "iggy"]},
    "recreated": {"id": 1},
    "recreated_new_login": {"names": ["alice", "iggy"]},
    "root_unaffected": {"names": ["alice", "iggy"]},
}
# The one change that ends logins, a deletion: each transport's client shows it its
# own way. The binary ones reconnect and replay their login (then its refusal is the
# error), except QUIC, which reports the 40; the HTTP one reports the 401. Never
# "Unauthorized": that would be the old login acting.
DELETED = {"tcp": "Invalid credentials", "quic": "Unauthenticated", "http": "Unauthenticated",
           "ws": "Invalid credentials"}
PORT_OF = {"tcp": "iggy_tcp", "quic": "iggy_quic", "http": "http", "ws": "iggy_ws"}


@pytest.mark.parametrize("transport", ["tcp", "quic", "http", "ws"])
def test_apache_iggy_0_9_0_sessions_follow_credential_changes(iggy_gateway, transport):
    """The root changes alice's credentials over TCP while alice acts over ``transport``."""
    if PORT_OF[transport] not in iggy_gateway.ports:
        pytest.skip(f"no {transport} listener")
    got = {line.pop("step"): line for line in run_scenario(
        "apache-iggy==0.9.0", "current_credentials.py", iggy_gateway.ports["iggy_tcp"], transport,
        str(iggy_gateway.ports[PORT_OF[transport]]))}
    refused = {"password_old_login": ("Invalid credentials", 42), "deleted_login": ("Invalid credentials", 42),
               "inactive_login": ("User inactive", 47)}
    if transport in ("tcp", "quic"):
        refused["token_deleted_login"] = ("Invalid personal access token", 53)
        assert got.pop("token_session") == got.pop("token_deleted_session") \
            == got.pop("token_deleted_password_session") == {"names": ["alice", "iggy"]}
    for step, (text, code) in refused.items():  # the HTTP transport prints the whole answer
        error = got.pop(step)["error"]
        assert error == text or (transport == "http" and f'"id":{code},' in error), (step, error)
    ended = ("deleted_session", "deleted_create_stream", "recreated_old_session")
    assert got == {**STEADY, **{step: {"error": DELETED[transport]} for step in ended}}


class _Session:
    """legacy_session.py in a client's venv, fed one call at a time."""

    def __init__(self, spec, port, user, password):
        self.proc = subprocess.Popen([str(client_python(spec)), str(SCRIPTS / "legacy_session.py"), str(port), user,
                                      password], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": ""})
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        assert self._next() == {"step": "login"}

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.lines.put(json.loads(line))
        self.lines.put(None)

    def _next(self):
        got = self.lines.get(timeout=SCENARIO_TIMEOUT_S)
        if got is None:
            pytest.fail(f"legacy_session.py ended: {self.proc.stderr.read()}")
        return got

    def __call__(self, step):
        self.proc.stdin.write(step + "\n")
        self.proc.stdin.flush()
        got = self._next()
        assert got.pop("step") == step.split()[0]
        return got

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=SCENARIO_TIMEOUT_S)


# One release per legacy dialect (iggy-middle.md 2): 1, 5, 4 and 2 (0.7.0 speaks 0.8.0's).
@pytest.mark.parametrize("spec", ["iggy-py==0.4.0", "apache-iggy==0.5.0", "apache-iggy==0.6.0", "apache-iggy==0.8.0"])
def test_legacy_clients_sessions_follow_credential_changes(iggy_gateway, spec):
    """A legacy client's live session while the root changes alice over HTTP: one broker,
    so a change made on one transport reaches the sessions of another."""
    with _http(iggy_gateway, _login(iggy_gateway, {"username": "iggy", "password": "iggy"})) as root:
        assert root.post("/streams", json={"name": "orders"}).status_code == 200
        assert root.post("/users", json=ALICE_JSON).status_code == 200
        alice = _Session(spec, iggy_gateway.ports["iggy_tcp"], "alice", "secret1")
        try:
            assert alice("get_stream") == {"name": "orders"}
            root.put("/users/alice/permissions", json={"permissions": {"global": {"read_users": True}}})
            assert alice("get_stream") == {"error": "Unauthorized"}
            root.put("/users/alice/permissions", json={"permissions": ALICE_JSON["permissions"]})
            assert alice("get_stream") == {"name": "orders"}
            assert root.put("/users/alice/password", json={"current_password": "secret1",
                                                           "new_password": "secret2"}).status_code == 204
            assert alice("get_stream") == {"name": "orders"}
            # Deactivation only refuses new logins (0.4/0.8 ``update_user`` sets the status).
            root.put("/users/alice", json={"status": "inactive"})
            assert alice("get_stream") == {"name": "orders"}
            assert alice("login secret2") == {"error": "UserInactive"}  # these clients print the variant
            assert alice("get_stream") == {"name": "orders"}  # the refused login ended nothing
            root.put("/users/alice", json={"status": "active"})
            assert alice("get_stream") == {"name": "orders"}
            assert alice("login secret2") == {"error": None}
            assert alice("get_stream") == {"name": "orders"}
            assert root.delete("/users/alice").status_code == 204
            assert alice("get_stream") == {"error": "Unauthenticated"}
            assert alice("create_stream") == {"error": "Unauthenticated"}
            assert root.post("/users", json=ALICE_JSON).status_code == 200  # the same id again
            assert alice("get_stream") == {"error": "Unauthenticated"}
        finally:
            alice.close()


def test_audit_lines_name_the_iggy_session_that_acted(broker, caplog):
    """docs/security.md "Audit": a change made through Iggy names the session's user,
    address and protocol, also when its work ran in a worker thread (create_user
    hashes the password there); a failed login and a denial are audited too."""
    import logging
    import threading

    caplog.set_level(logging.INFO, logger="ferry.audit")
    root, bob = Client(broker, 2), Client(broker, 2)
    root.login()
    status, _ = root.call("user.create", username="bob", password="bob-pw", status=1, permissions=None)
    assert status == 0
    assert bob.login("bob", "nope") != 0
    bob.login("bob", "bob-pw")
    assert bob.call("stream.create", name="mine")[0] == E.UNAUTHORIZED
    seen = [(r.event, r.outcome, r.protocol, r.addr, r.user) for r in caplog.records if r.name == "ferry.audit"]
    assert ("user.create", "ok", "iggy", "127.0.0.1", "iggy") in seen
    assert ("login", "failed", "iggy", "127.0.0.1", "-") in seen
    assert ("denied", "denied", "iggy", "127.0.0.1", "bob") in seen
    assert threading.current_thread() is threading.main_thread()
