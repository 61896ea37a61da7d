"""Authentication and users: JWT login, refresh, logout, PATs, 401/403, user CRUD."""

from __future__ import annotations

import trio

from http_helpers import ROOT, TEST_LIMIT_S, client, gateway, login, make_topic


async def test_bearer_required_and_401_has_empty_body(tmp_path):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port) as c:
            for headers in ({}, {"authorization": "Bearer nope"}, {"authorization": "Basic aWdneTppZ2d5"}):
                r = await c.get("/streams", headers=headers)
                assert r.status_code == 401 and r.content == b""
            # public routes need no token
            for path in ("/", "/ping", "/healthz", "/metrics", "/stats"):
                assert (await c.get(path)).status_code == 200, path


async def test_login_failures(tmp_path):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port) as c:
            r = await c.post("/users/login", json={"username": "iggy", "password": "wrong"})
            assert r.status_code == 400 and r.json()["id"] == 42 and r.json()["code"] == "invalid_credentials"
            r = await c.post("/users/login", json={"username": "iggy"})
            assert r.status_code == 400 and r.json()["field"] == "password"
            r = await c.post("/users/login", json={"username": 5, "password": "x"})
            assert r.status_code == 400 and r.json()["field"] == "username"


async def test_logout_revokes_and_refresh_is_single_use(tmp_path):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port) as c:
            r = await c.post("/users/login", json=ROOT)
            ident = r.json()
            assert ident["user_id"] == 0 and ident["access_token"]["expiry"] > 0  # ids from 0: root is 0
            token = ident["access_token"]["token"]
            r = await c.post("/users/refresh-token", json={"token": token})
            assert r.status_code == 200
            new = r.json()["access_token"]["token"]
            assert new != token
            r = await c.post("/users/refresh-token", json={"token": token})
            assert r.status_code == 401 and r.json()["id"] == 78
            r = await c.post("/users/refresh-token", json={"token": "garbage"})
            assert r.status_code == 401 and r.json()["id"] == 40
            r = await c.post("/users/refresh-token", json={"token": ""})
            assert r.status_code == 401 and r.json()["id"] == 78
            assert (await c.get("/streams", headers={"authorization": f"Bearer {token}"})).status_code == 401
            auth = {"authorization": f"Bearer {new}"}
            assert (await c.get("/streams", headers=auth)).status_code == 200
            assert (await c.delete("/users/logout", headers=auth)).status_code == 204
            assert (await c.get("/streams", headers=auth)).status_code == 401


async def test_revocation_and_secret_survive_restart(tmp_path):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port) as c:
            kept = await login(c)
            revoked = (await c.post("/users/login", json=ROOT)).json()["access_token"]["token"]
            assert (await c.delete("/users/logout", headers={"authorization": f"Bearer {revoked}"})).status_code == 204
        assert (tmp_path / "data" / "http-jwt-secret").stat().st_mode & 0o777 == 0o600
        async with gateway(tmp_path) as port, client(port) as c:
            assert (await c.get("/streams", headers={"authorization": f"Bearer {kept}"})).status_code == 200
            assert (await c.get("/streams", headers={"authorization": f"Bearer {revoked}"})).status_code == 401


async def test_personal_access_tokens(tmp_path):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port) as c:
            await login(c)
            r = await c.post("/personal-access-tokens", json={"name": "ci-token", "expiry": 0})
            assert r.status_code == 200
            pat = r.json()["token"]
            assert (await c.get("/personal-access-tokens")).json() == [{"name": "ci-token", "expiry_at": None}]
            r = await c.post("/personal-access-tokens", json={"name": "ci-token", "expiry": 0})
            assert r.status_code == 400 and r.json()["id"] == 51
            async with client(port) as other:
                r = await other.post("/personal-access-tokens/login", json={"token": pat})
                assert r.status_code == 200 and r.json()["user_id"] == 0
                r = await other.post("/personal-access-tokens/login", json={"token": "not-a-token"})
                assert r.status_code == 401 and r.json()["id"] == 53
            assert (await c.delete("/personal-access-tokens/ci-token")).status_code == 204
            assert (await c.delete("/personal-access-tokens/ci-token")).status_code == 404


async def test_users_and_permissions(tmp_path):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port) as root, client(port) as bob:
            await login(root)
            await make_topic(root)
            perms = {"global": {"read_streams": True},
                     "streams": {"0": {"manage_stream": False, "read_stream": True, "manage_topics": False,
                                       "read_topics": True, "poll_messages": True, "send_messages": False,
                                       "topics": None}}}
            r = await root.post("/users", json={"username": "bob", "password": "secret",
                                                "status": "active", "permissions": perms})
            assert r.status_code == 200, r.text
            user = r.json()
            assert user["id"] == 1 and user["username"] == "bob"
            assert user["permissions"]["streams"]["0"]["read_stream"] is True
            r = await root.post("/users", json={"username": "bob", "password": "secret"})
            assert r.status_code == 400 and r.json()["id"] == 46
            assert [u["username"] for u in (await root.get("/users")).json()] == ["iggy", "bob"]
            await login(bob, {"username": "bob", "password": "secret"})
            assert (await bob.get("/streams")).status_code == 200
            assert (await bob.get("/streams/0/topics/0/messages")).status_code == 200
            r = await bob.post("/streams", json={"name": "x"})
            assert r.status_code == 403 and r.json()["id"] == 41
            r = await bob.post("/streams/0/topics/0/messages", json={"messages": [{"payload": "eA=="}]})
            assert r.status_code == 403
            assert (await bob.get("/users")).status_code == 403
            assert (await bob.get("/users/bob")).status_code == 200  # oneself
            r = await bob.put("/users/bob/password", json={"current_password": "secret", "new_password": "better"})
            assert r.status_code == 204
            r = await root.put("/users/1/permissions", json={"permissions": None})
            assert r.status_code == 204
            assert (await bob.get("/streams")).status_code == 403
            assert (await root.put("/users/1", json={"status": "inactive"})).status_code == 204
            assert (await bob.get("/ping")).status_code == 200
            # As Iggy's HTTP API: the status only refuses new logins; the token goes on.
            assert (await bob.get("/users/bob")).status_code == 200
            async with client(port) as again:
                r = await again.post("/users/login", json={"username": "bob", "password": "better"})
                assert r.status_code == 400 and r.json()["id"] == 47  # user inactive
            r = await root.delete("/users/0")  # the root user
            assert r.status_code == 400 and r.json()["id"] == 48
            assert (await root.delete("/users/bob")).status_code == 204
            assert (await root.get("/users/bob")).status_code == 404
