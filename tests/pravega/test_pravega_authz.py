"""One lock for every door, the Pravega part (issue 29), with the real pravega 0.3.8 client.

Under ``ferry serve`` the controller requires a Ferry user's Basic credentials and the
segment store a delegation token, both checked against Ferry's one permission model,
live: deleting a user or revoking its permission fails that user's live writers and
readers at their next request. ``anonymous_user`` opens the door explicitly, with
exactly that user's permissions (docs/pravega.md, "Authentication"). What was created
or stored is checked through the gateway's HTTP API, as the root user.
"""

from __future__ import annotations

import base64
import logging
import queue
import threading

import httpx
import pytest

from core.permissions import Permissions, StreamPermissions, TopicPermissions
from ferry_harness import running_gateway
from pravega_clients import SCENARIO_TIMEOUT_S, credentials, json_head, run_scenario, start_scenario

SCOPE, STREAM = "secret", "payroll"
LIVE = ("live-delete", "live-revoke")  # one stream per live case: a reader group reads from the start
BINDING = "".join(f'[[binding]]\nstream = "{SCOPE}"\ntopic = "{t}"\ncreate = true\npartitions = 1\n'
                  for t in (STREAM, *LIVE))
PASSWORD = "pw-secret-1"
NO_CREDENTIALS = {"AUTH": "0"}  # a client with auth disabled: no credentials, empty tokens


class Root:
    """The gateway's HTTP API as the root user: users, permissions, what is stored."""

    def __init__(self, gw) -> None:
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{gw.ports['http']}", timeout=20)
        r = self.http.post("/users/login", json={"username": "iggy", "password": "iggy"})
        assert r.status_code == 200, r.text
        self.http.headers["authorization"] = f"Bearer {r.json()['access_token']['token']}"

    def ids(self, topic: str = STREAM) -> tuple[int, int]:
        t = self.http.get(f"/streams/{SCOPE}/topics/{topic}").json()
        s = self.http.get(f"/streams/{SCOPE}").json()
        return s["id"], t["id"]

    def perms(self, topic: str = STREAM, *, stream: dict | None = None, **topic_flags) -> dict:
        """Permissions on ``secret/<topic>`` only (plus ``stream``-level flags)."""
        sid, tid = self.ids(topic)
        return Permissions(streams={sid: StreamPermissions(**(stream or {}), topics={
            tid: TopicPermissions(**topic_flags)})}).to_dict()

    def create_user(self, name: str, permissions: dict | None) -> None:
        r = self.http.post("/users", json={"username": name, "password": PASSWORD, "status": "active",
                                           "permissions": permissions})
        assert r.status_code == 200, r.text

    def set_permissions(self, name: str, permissions: dict | None) -> None:
        assert self.http.put(f"/users/{name}/permissions", json={"permissions": permissions}).status_code == 204

    def delete_user(self, name: str) -> None:
        assert self.http.delete(f"/users/{name}").status_code == 204

    def streams(self) -> list[str]:
        return sorted(s["name"] for s in self.http.get("/streams").json())

    def stored(self, topic: str = STREAM) -> list[str]:
        r = self.http.get(f"/streams/{SCOPE}/topics/{topic}/messages",
                          params={"partition_id": 0, "kind": "offset", "value": 0, "count": 1000})
        assert r.status_code == 200, r.text
        return [base64.b64decode(m["payload"]).decode() for m in r.json()["messages"]]

    def send(self, text: str, topic: str = STREAM) -> None:
        r = self.http.post(f"/streams/{SCOPE}/topics/{topic}/messages", json={
            "partitioning": {"kind": "partition_id", "value": base64.b64encode(bytes(4)).decode()},
            "messages": [{"id": 0, "payload": base64.b64encode(text.encode()).decode()}]})
        assert r.status_code == 201, r.text


# As tests/gateway/test_authz_matrix.py grants them: a reader may read the stream and poll in
# it; a writer may only send to the topic (finding the segments needs no more); a user of the
# live cases polls and sends on its topic only (its reader group's table needs no more).
READ_ONLY = {"stream": {"read_stream": True, "poll_messages": True}}
WRITE_ONLY = {"send_messages": True}
READ_WRITE = {"poll_messages": True, "send_messages": True}


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with running_gateway(tmp_path_factory.mktemp("pravega-authz"), BINDING, FERRY_PRAVEGA_TAIL_PARK_MS="500") as gw:
        root = Root(gw)
        root.send("seed")
        root.create_user("stranger", None)
        root.create_user("reader", root.perms(**READ_ONLY))
        root.create_user("writer", root.perms(**WRITE_ONLY))
        yield gw


@pytest.fixture
def root(gw):
    return Root(gw)


def scenario(gw, mode: str, env: dict, scope: str = SCOPE, stream: str = STREAM, tag: str = "event") -> dict:
    return run_scenario("authz.py", str(gw.ports["pravega_controller"]), mode, scope, stream, tag, env=env)


def refused(step: dict) -> bool:
    """A step the controller refused (PERMISSION_DENIED is final for the 0.3.8 client), or
    a write whose segment-store requests were refused and never acknowledged."""
    return "error" in step and "value" not in step


@pytest.mark.slow
@pytest.mark.parametrize("who", ["no credentials", "wrong password"])
def test_clients_that_do_not_log_in_get_nothing(gw, root, who):
    # (a wrong password costs 4 failed logins here: under core.access.FREE_FAILURES, so the
    # login guard does not slow the next tests, which log in from the same address)
    env = NO_CREDENTIALS if who == "no credentials" else credentials("iggy", "not-the-password")
    before = root.stored()
    made = scenario(gw, "create", env, scope="intruder")
    assert made["create_scope"]["error"] == "ValueError", made
    assert "PermissionDenied" in made["create_scope"]["text"]
    why = "requires credentials" if who == "no credentials" else "invalid credentials"
    assert why in made["create_scope"]["text"]
    assert refused(made["create_stream"])
    wrote = scenario(gw, "write", env, tag=f"by {who}")
    assert refused(wrote.get("write") or wrote["create_writer"]), wrote
    read = scenario(gw, "read", env)
    assert refused(read["reader_group"]) and "read" not in read, read
    assert "intruder" not in root.streams()
    assert root.stored() == before  # nothing written


@pytest.mark.slow
def test_a_user_without_permission_on_the_stream_gets_nothing(gw, root):
    env = credentials("stranger", PASSWORD)
    before = root.stored()
    made = scenario(gw, "create", env, scope="strangers")
    text = made["create_scope"]["text"]
    assert "PermissionDenied" in text and "may not create_stream" in text
    read = scenario(gw, "read", env)
    assert refused(read["reader_group"]) and "PermissionDenied" in read["reader_group"]["text"], read
    wrote = scenario(gw, "write", env, tag="by stranger")
    assert refused(wrote.get("write") or wrote["create_writer"]), wrote
    assert "strangers" not in root.streams() and root.stored() == before


@pytest.mark.slow
def test_a_reader_reads_and_cannot_write(gw, root):
    env = credentials("reader", PASSWORD)
    read = scenario(gw, "read", env)
    assert "seed" in read["read"]["got"], read
    before = root.stored()
    wrote = scenario(gw, "write", env, tag="by reader")
    assert refused(wrote.get("write") or wrote["create_writer"]), wrote
    assert root.stored() == before


@pytest.mark.slow
def test_a_writer_writes_and_it_is_stored(gw, root):
    wrote = scenario(gw, "write", credentials("writer", PASSWORD), tag="by writer")
    assert wrote["write"] == {"value": True}
    assert "by writer" in root.stored()


@pytest.mark.slow
@pytest.mark.parametrize("change", ["delete", "revoke"])
def test_a_change_to_the_user_fails_its_live_writer_and_reader(gw, root, change, caplog):
    """The writer and reader are set up and working; then the user is deleted, or its
    permissions on the stream revoked: the next append is refused (nothing stored, one
    audit line), and the reader, waiting at the tail, does not get the event the root user
    writes afterwards (the 0.3.8 client then gives up with a panic, or keeps retrying)."""
    caplog.set_level(logging.WARNING, logger="ferry.audit")
    stream = LIVE[0] if change == "delete" else LIVE[1]
    name = f"live{change}"
    root.create_user(name, root.perms(stream, **READ_WRITE))
    proc = start_scenario("authz.py", str(gw.ports["pravega_controller"]), "live", SCOPE, stream, name,
                          env=credentials(name, PASSWORD), stdin=True)
    steps = Steps(proc)
    try:
        assert steps.until("ready") and steps.got["write_1"] == {"value": True}, steps.got
        assert steps.got["read_1"]["got"] == [f"{name}-1"], steps.got
        if change == "delete":
            root.delete_user(name)
        else:
            root.set_permissions(name, root.perms(stream))  # no flags left on the stream
        root.send("after the change", stream)
        proc.stdin.close()  # go on: write again, read again
        steps.finish()
    finally:
        steps.kill()
    assert refused(steps.got["write_2"]), steps.got
    assert steps.got["read_2"].get("got", []) == [], steps.got  # nothing, or the client gave up (a panic)
    assert root.stored(stream) == [f"{name}-1", "after the change"]
    denied = {r.action for r in caplog.records if getattr(r, "event", "") == "denied" and r.stream == stream}
    assert denied == {"send_messages", "poll_messages"}, denied  # the segment store's live re-check


class Steps:
    """The JSON steps of a running scenario as they come (threads drain both pipes)."""

    def __init__(self, proc) -> None:
        self.proc, self.got, self.lines = proc, {}, queue.Queue()
        self.err: list[str] = []
        self.threads = [threading.Thread(target=self._pump, daemon=True),
                        threading.Thread(target=lambda: self.err.extend(proc.stderr), daemon=True)]
        for t in self.threads:
            t.start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.lines.put(json_head(line))
        self.lines.put(None)

    def until(self, step: str) -> bool:
        while True:
            try:
                line = self.lines.get(timeout=SCENARIO_TIMEOUT_S)
            except queue.Empty:
                pytest.fail(f"no {step!r} within {SCENARIO_TIMEOUT_S} s: {self.got}\n{''.join(self.err)[-4000:]}")
            if line is None:
                pytest.fail(f"the scenario ended before {step!r}: {self.got}\n{''.join(self.err)[-4000:]}")
            self.got[line.pop("step")] = line
            if step in self.got:
                return True

    def finish(self) -> None:
        assert self.proc.wait(timeout=SCENARIO_TIMEOUT_S) == 0, "".join(self.err)[-4000:]
        for t in self.threads:
            t.join(SCENARIO_TIMEOUT_S)
        while (line := self.lines.get_nowait()) is not None:
            self.got[line.pop("step")] = line

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# -- the anonymous door, and what start refuses -------------------------------------------------
@pytest.mark.slow
def test_anonymous_user_lets_credential_less_clients_do_what_it_may(tmp_path):
    with running_gateway(tmp_path, BINDING) as gw:  # first make the user the door will name
        root = Root(gw)
        root.create_user("guest", root.perms(**READ_ONLY))
        root.send("for guests")
    anonymous = {"FERRY_PRAVEGA_ANONYMOUS_USER": "guest", "FERRY_PRAVEGA_CONTROLLER_ANONYMOUS_USER": "guest"}
    with running_gateway(tmp_path, BINDING, FERRY_PRAVEGA_TAIL_PARK_MS="500", **anonymous) as gw:
        root = Root(gw)
        read = scenario(gw, "read", NO_CREDENTIALS)
        assert read["read"]["got"] == ["for guests"], read
        wrote = scenario(gw, "write", NO_CREDENTIALS, tag="by guest")
        assert refused(wrote.get("write") or wrote["create_writer"]), wrote
        made = scenario(gw, "create", NO_CREDENTIALS, scope="guests")
        assert "PermissionDenied" in made["create_scope"]["text"] and "'guest'" in made["create_scope"]["text"]
        assert root.stored() == ["for guests"] and "guests" not in root.streams()
        # the door is the user's permissions now, not at start
        root.set_permissions("guest", root.perms(stream={"read_stream": True, "poll_messages": True},
                                                 send_messages=True))
        assert scenario(gw, "write", NO_CREDENTIALS, tag="by guest")["write"] == {"value": True}
        assert root.stored() == ["for guests", "by guest"]
        # clients that log in are checked as usual
        wrong = scenario(gw, "create", credentials("guest", "wrong-pw"), scope="guests")
        assert "invalid credentials" in wrong["create_scope"]["text"]


@pytest.mark.parametrize("env, message", [
    ({"FERRY_PRAVEGA_ANONYMOUS_USER": "nobody"}, "listeners.pravega.anonymous_user: no Ferry user 'nobody'"),
    ({"FERRY_PRAVEGA_CONTROLLER_ANONYMOUS_USER": "nobody"},
     "listeners.pravega_controller.anonymous_user: no Ferry user 'nobody'"),
    ({"FERRY_PRAVEGA_CONTROLLER_AUTH": "false"}, "listeners.pravega_controller.auth = false: "),
])
def test_start_refuses_a_missing_anonymous_user_and_auth_off(tmp_path, env, message):
    with pytest.raises(RuntimeError) as err:
        with running_gateway(tmp_path, **env):
            pass
    assert message in str(err.value) and "anonymous_user" in str(err.value)


def test_auth_true_is_still_accepted(tmp_path):
    with running_gateway(tmp_path, FERRY_PRAVEGA_CONTROLLER_AUTH="true") as gw:
        assert gw.ports["pravega_controller"]

