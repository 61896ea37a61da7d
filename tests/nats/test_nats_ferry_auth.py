"""nats-py against ``ferry serve``: NATS clients log in as Ferry users and Ferry's
permissions decide what they may publish and receive (docs/nats.md "Authentication
and permissions", adapters/nats/ferryauth.py).

Users, permissions and tokens are made through the HTTP API as an operator would.
Each gateway sees at most a few failed logins from 127.0.0.1, below the login
guard's free failures (core/access.py), so no test is slowed by it.
"""

from __future__ import annotations

import asyncio
import socket

import httpx
import nats
import pytest
from nats.errors import TimeoutError as NatsTimeout

from ferry_harness import running_gateway

WAIT = 5           # seconds; only guards a hang
QUIET = 0.3        # how long "nothing arrives" is watched
PW = "pw-secret"
SECRET = '[[binding]]\nstream = "secret"\ntopic = "payroll"\ncreate = true\n'


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


class Admin:
    """The HTTP API as the root user: users, permissions, tokens."""

    def __init__(self, gw) -> None:
        self.base = f"http://127.0.0.1:{gw.ports['http']}"
        self.c = self._login({"username": "iggy", "password": "iggy"})

    def _login(self, creds) -> httpx.Client:
        c = httpx.Client(base_url=self.base, timeout=20)
        r = c.post("/users/login", json=creds)
        assert r.status_code == 200, r.text
        c.headers["authorization"] = f"Bearer {r.json()['access_token']['token']}"
        return c

    def ids(self, stream: str, topic: str) -> tuple[int, int]:
        s = self.c.get(f"/streams/{stream}")
        t = self.c.get(f"/streams/{stream}/topics/{topic}")
        assert s.status_code == t.status_code == 200, (s.text, t.text)
        return s.json()["id"], t.json()["id"]

    def on_topic(self, stream: str, topic: str, **flags: bool) -> dict:
        sid, tid = self.ids(stream, topic)
        return {"global": {}, "streams": {str(sid): {"topics": {str(tid): flags}}}}

    def user(self, name: str, permissions: dict | None = None) -> int:
        r = self.c.post("/users", json={"username": name, "password": PW, "status": "active",
                                        "permissions": permissions})
        assert r.status_code in (200, 201), r.text
        return r.json()["id"]

    def permissions(self, uid: int, permissions: dict | None) -> None:
        r = self.c.put(f"/users/{uid}/permissions", json={"permissions": permissions})
        assert r.status_code in (200, 204), r.text

    def delete(self, uid: int) -> None:
        r = self.c.delete(f"/users/{uid}")
        assert r.status_code == 204, r.text

    def pat(self, name: str) -> str:
        c = self._login({"username": name, "password": PW})
        r = c.post("/personal-access-tokens", json={"name": "nats-token", "expiry": 0})
        assert r.status_code == 200, r.text
        return r.json()["token"]

    def messages(self, stream: str, topic: str) -> list[bytes]:
        r = self.c.get(f"/streams/{stream}/topics/{topic}/messages",
                       params={"consumer_id": 1, "partition_id": 0, "kind": "offset", "value": 0, "count": 10})
        if r.status_code == 404:
            return []
        assert r.status_code == 200, r.text
        import base64
        return [base64.b64decode(m["payload"]) for m in r.json()["messages"]]


def _errors():
    seen: list[str] = []

    async def cb(e):
        seen.append(str(e).lower())   # nats-py lower-cases the server's text (exact bytes: _raw)
    return seen, cb


async def _until(predicate) -> None:
    while not predicate():
        await asyncio.sleep(0.01)


async def _connect(gw, user: str, **kw):
    return await nats.connect(gw.url(login=False), user=user, password=PW, allow_reconnect=False, **kw)


async def _refused(url: str, **kw) -> str:
    with pytest.raises(Exception) as info:
        await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0, **kw)
    return str(info.value)


def test_credentials_required_by_default_and_checked(tmp_path):
    with running_gateway(tmp_path) as gw:
        admin = Admin(gw)
        admin.user("joe")
        token = admin.pat("joe")

        async def main():
            plain = gw.url(login=False)
            assert "Authorization Violation" in await _refused(plain)
            assert "Authorization Violation" in await _refused(plain, user="joe", password="wrong")
            assert "Authorization Violation" in await _refused(plain, token="not-a-token")
            nc = await nats.connect(plain, token=token)              # a PAT as auth_token
            assert nc._server_info["auth_required"] is True
            await nc.flush()
            await nc.close()
            again = await _connect(gw, "joe")                        # remembered login, same answer
            await again.close()
            root = await nats.connect(gw.url())                       # iggy:iggy in the URL
            await root.close()
        run(main())


def test_topic_permissions_decide_publish_subscribe_and_delivery(tmp_path):
    with running_gateway(tmp_path, SECRET) as gw:
        admin = Admin(gw)
        admin.user("nobody")
        admin.user("reader", admin.on_topic("secret", "payroll", poll_messages=True))
        admin.user("writer", admin.on_topic("secret", "payroll", send_messages=True))

        async def main():
            seen, cb = _errors()
            nobody = await _connect(gw, "nobody", error_cb=cb)
            reader = await _connect(gw, "reader", error_cb=cb)
            writer = await _connect(gw, "writer", error_cb=cb)
            wide = await nobody.subscribe("secret.>")
            refused = await nobody.subscribe("secret.payroll")
            plain = await nobody.subscribe("chat.room")
            exact = await reader.subscribe("secret.payroll")
            await nobody.flush()
            await reader.flush()
            await nobody.publish("secret.payroll", b"forged")
            await reader.publish("secret.payroll", b"forged too")
            await nobody.flush()
            await reader.flush()
            await writer.publish("secret.payroll", b"salary")
            await writer.publish("chat.room", b"hello")               # plain core NATS: open to every user
            await writer.flush()
            assert (await exact.next_msg(WAIT)).data == b"salary"
            assert (await plain.next_msg(WAIT)).data == b"hello"
            for sub in (wide, refused):
                with pytest.raises(NatsTimeout):
                    await sub.next_msg(QUIET)
            await asyncio.wait_for(_until(lambda: len(seen) >= 3), WAIT)
            text = " | ".join(seen)
            assert 'permissions violation for subscription to "secret.payroll"' in text
            assert text.count('permissions violation for publish to "secret.payroll"') == 2
            assert nobody.is_connected and reader.is_connected     # refusals do not close
            for nc in (nobody, reader, writer):
                await nc.close()
        run(main())
        raw = _raw(gw.ports["nats"], b'CONNECT {"verbose":false,"user":"nobody","pass":"' + PW.encode() + b'"}\r\n'
                                     b"SUB secret.payroll 1\r\nPUB secret.payroll 1\r\nx\r\nPING\r\n")
        assert raw == (b"-ERR 'Permissions Violation for Subscription to \"secret.payroll\"'\r\n"
                       b"-ERR 'Permissions Violation for Publish to \"secret.payroll\"'\r\nPONG\r\n")
        assert admin.messages("secret", "payroll") == [b"salary"]   # nothing forged was stored


def _raw(port: int, data: bytes) -> bytes:
    """What the server answers ``data`` with, up to its PONG (INFO left out)."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
        s.sendall(data)
        got = b""
        while not got.endswith(b"PONG\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        return got.split(b"\r\n", 1)[1]


def test_revoking_poll_stops_a_live_subscription_and_deleting_closes(tmp_path):
    with running_gateway(tmp_path, SECRET) as gw:
        admin = Admin(gw)
        uid = admin.user("reader", admin.on_topic("secret", "payroll", poll_messages=True))

        async def main():
            seen, cb = _errors()
            closed = asyncio.Event()

            async def on_closed():
                closed.set()
            reader = await _connect(gw, "reader", error_cb=cb, closed_cb=on_closed)
            raw = socket.create_connection(("127.0.0.1", gw.ports["nats"]), timeout=WAIT)
            raw.sendall(b'CONNECT {"verbose":false,"user":"reader","pass":"' + PW.encode() + b'"}\r\nPING\r\n')
            got = b""
            while not got.endswith(b"PONG\r\n"):
                got += raw.recv(65536)
            root = await nats.connect(gw.url())
            sub = await reader.subscribe("secret.payroll")
            wide = await reader.subscribe("secret.>")
            await reader.flush()
            await root.publish("secret.payroll", b"one")
            await root.flush()
            assert (await sub.next_msg(WAIT)).data == b"one"
            assert (await wide.next_msg(WAIT)).data == b"one"
            admin.permissions(uid, None)                          # poll revoked: live subscriptions see nothing
            await root.publish("secret.payroll", b"two")
            await root.publish("chat.x", b"still open")
            await root.flush()
            for s in (sub, wide):
                with pytest.raises(NatsTimeout):
                    await s.next_msg(QUIET)
            await reader.publish("probe", b"")                   # the connection itself lives on
            await reader.flush()
            admin.delete(uid)                                     # deleted: the connection closes at once
            await asyncio.wait_for(closed.wait(), WAIT)
            rest = b""
            while chunk := raw.recv(65536):                      # nats-server's words, then EOF
                rest += chunk
            raw.close()
            assert rest.endswith(b"-ERR 'Authorization Violation'\r\n")
            assert "Authorization Violation" in await _refused(gw.url(login=False), user="reader", password=PW)
            await root.close()
        run(main())


def test_jetstream_requests_follow_topic_permissions(tmp_path):
    with running_gateway(tmp_path) as gw:
        admin = Admin(gw)

        async def main():
            root = await nats.connect(gw.url())
            rjs = root.jetstream()
            await rjs.add_stream(name="ORDERS", subjects=["orders.>"])
            sid, tid = admin.ids("jetstream", "ORDERS")
            admin.user("nobody")
            admin.user("owner", {"global": {}, "streams": {str(sid): {"manage_topics": True, "read_topics": True,
                                                                        "send_messages": True,
                                                                        "poll_messages": True}}})
            admin.user("viewer", {"global": {}, "streams": {str(sid): {"topics": {str(tid): {"read_topic": True}}}}})
            seen, cb = _errors()
            nobody = await _connect(gw, "nobody", error_cb=cb)
            njs = nobody.jetstream(timeout=0.5)
            for attempt in (njs.add_stream(name="MINE", subjects=["mine.>"]), njs.stream_info("ORDERS"),
                            njs.publish("orders.new", b"x")):
                with pytest.raises(NatsTimeout):
                    await attempt
            await nobody.flush()
            await asyncio.wait_for(_until(lambda: len(seen) >= 3), WAIT)
            text = " | ".join(seen)
            assert 'permissions violation for publish to "$js.api.stream.create.mine"' in text
            assert 'permissions violation for publish to "$js.api.stream.info.orders"' in text
            assert 'permissions violation for publish to "orders.new"' in text
            assert await njs.streams_info() == []                  # listed, without what it may not read

            viewer = await _connect(gw, "viewer")
            assert [s.config.name for s in await viewer.jetstream().streams_info()] == ["ORDERS"]
            await viewer.close()

            owner = await _connect(gw, "owner")
            ojs = owner.jetstream()
            await ojs.add_stream(name="MINE", subjects=["mine.>"])
            assert (await ojs.publish("orders.new", b"ok")).seq == 1
            assert (await ojs.stream_info("ORDERS")).state.messages == 1
            psub = await ojs.pull_subscribe("orders.>", durable="d", stream="ORDERS")
            assert [m.data for m in await psub.fetch(1, timeout=WAIT)] == [b"ok"]
            for nc in (root, nobody, owner):
                await nc.close()
        run(main())


def test_anonymous_user_lets_clients_without_credentials_act_as_it(tmp_path):
    with running_gateway(tmp_path, SECRET) as gw0:
        admin = Admin(gw0)
        admin.user("guest", admin.on_topic("secret", "payroll", poll_messages=True))
    # The same data directory again, now with the door open for guest.
    with running_gateway(tmp_path, SECRET, FERRY_NATS_ANONYMOUS_USER="guest") as gw:
        async def main():
            seen, cb = _errors()
            anon = await nats.connect(gw.url(login=False), error_cb=cb, allow_reconnect=False)
            assert not anon._server_info.get("auth_required")
            sub = await anon.subscribe("secret.payroll")               # guest may poll
            await anon.flush()
            await anon.publish("secret.payroll", b"forged")            # guest may not send
            await anon.flush()
            root = await nats.connect(gw.url())                        # credentials are still checked
            await root.publish("secret.payroll", b"real")
            await root.flush()
            assert (await sub.next_msg(WAIT)).data == b"real"
            await asyncio.wait_for(_until(lambda: seen), WAIT)
            assert 'permissions violation for publish to "secret.payroll"' in seen[0]
            assert "Authorization Violation" in await _refused(gw.url(login=False), user="guest", password="bad")
            await anon.close()
            await root.close()
        run(main())


def test_anonymous_user_must_exist(tmp_path):
    with pytest.raises(RuntimeError) as info:
        with running_gateway(tmp_path, FERRY_NATS_ANONYMOUS_USER="ghost"):
            pass
    assert "listeners.nats.anonymous_user: no Ferry user 'ghost'" in str(info.value)


def test_auth_file_is_read_as_a_subject_filter_without_passwords():
    from adapters.nats.ferryauth import subject_filters
    from adapters.nats.natsconf import parse
    doc = parse('authorization { default_permissions: {subscribe: "_INBOX.>"}\n'
                ' users = [ {user: orders, permissions: {publish: ["orders.>"]}}\n'
                '           {user: ops, password: x} ] }', {})
    filters, has_passwords = subject_filters(doc["authorization"])
    assert has_passwords is True                              # said in a log line at start, then ignored
    assert filters["orders"].can_publish("orders.eu") and not filters["orders"].can_publish("billing.x")
    assert filters["ops"].can_subscribe("_INBOX.x", "") and not filters["ops"].can_subscribe("orders.eu", "")


def test_revoking_poll_stops_live_jetstream_push_and_pull_consumers(tmp_path):
    """docs/security.md "Changes apply to live sessions": a push consumer's deliveries carry
    the stream's subject, so the subscriber's delivery check stops them at once; a pull
    consumer's next fetch is a refused $JS.API request."""
    with running_gateway(tmp_path) as gw:
        admin = Admin(gw)

        async def main():
            root = await nats.connect(gw.url())
            rjs = root.jetstream()
            await rjs.add_stream(name="ORDERS", subjects=["orders.>"])
            sid, tid = admin.ids("jetstream", "ORDERS")
            uid = admin.user("reader", admin.on_topic("jetstream", "ORDERS", read_topic=True, poll_messages=True))
            seen, cb = _errors()
            reader = await _connect(gw, "reader", error_cb=cb)
            js = reader.jetstream(timeout=2)
            push = await js.subscribe("orders.>", stream="ORDERS")
            pull = await js.pull_subscribe("orders.>", durable="p", stream="ORDERS")
            await rjs.publish("orders.eu", b"one")
            assert (await push.next_msg(WAIT)).data == b"one"
            assert [m.data for m in await pull.fetch(1, timeout=WAIT)] == [b"one"]
            admin.permissions(uid, None)                      # poll revoked
            await rjs.publish("orders.eu", b"two")
            with pytest.raises(NatsTimeout):
                await push.next_msg(QUIET)                    # the push consumer's delivery is held back
            with pytest.raises(NatsTimeout):
                await pull.fetch(1, timeout=QUIET)           # MSG.NEXT refused
            await reader.flush()
            await asyncio.wait_for(_until(lambda: any("$js.api.consumer.msg.next.orders.p" in e for e in seen)),
                                   WAIT)
            await reader.close()
            await root.close()
        run(main())


def test_past_max_connections_a_client_gets_nats_servers_error(tmp_path):
    """nats-server's max_connections: INFO, -ERR 'maximum connections exceeded', close;
    the connections already open go on."""
    with running_gateway(tmp_path, FERRY_NATS_MAX_CONNECTIONS="1") as gw:
        async def main():
            first = await nats.connect(gw.url())
            raw = socket.create_connection(("127.0.0.1", gw.ports["nats"]), timeout=WAIT)
            got = b""
            while chunk := raw.recv(65536):
                got += chunk
            raw.close()
            assert got.startswith(b"INFO ") and got.endswith(b"-ERR 'maximum connections exceeded'\r\n")
            await first.publish("chat.x", b"still here")
            await first.flush()
            await first.close()
        run(main())
