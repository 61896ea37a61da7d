"""``ferry user|perm|pat|group`` and the admin commands' server discovery, end to end.

A gateway runs in-process (tests/support/ferry_harness.py); the CLI runs as a
real ``python -m gateway`` process against its HTTP port, as a user would. A
test's preparations (the streams, topics, users and messages the commands under
test act on) run the same CLI in this process (:func:`given`): an interpreter
start-up per step proved nothing more and was most of the file's CPU time.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from ferry_harness import free_port, running_gateway
from gateway import cli
from gw_helpers import clean_env, ferry_cmd, run_ferry


@pytest.fixture
def gw(tmp_path):
    (tmp_path / "server").mkdir()
    with running_gateway(tmp_path / "server") as gw:
        yield gw


def _url(gw) -> str:
    return f"http://127.0.0.1:{gw.ports['http']}"


def client_config(directory: Path, gw, extra: str = "") -> Path:
    """A config naming the test gateway's HTTP and Iggy TCP ports, in a directory of its own."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "ferry.toml"
    path.write_text(f"[listeners.http]\nport = {gw.ports['http']}\n[listeners.iggy_tcp]\nport = {gw.ports['iggy_tcp']}\n"
                    + extra)
    return path


def ferry(*args: str, cwd: Path, env: dict[str, str] | None = None, ok: bool = True, stdin: bytes | None = None):
    done = run_ferry(*args, cwd=cwd, env=env, stdin=stdin)
    out, err = done.stdout.decode(), done.stderr.decode()
    assert "Traceback" not in err, err
    if ok:
        assert done.returncode == 0, err
    return done.returncode, out, err


@pytest.fixture
def given(tmp_path, capsys, monkeypatch):
    """``given(*ARGS, stdin=b"")``: ``ferry ARGS`` in this process (the environment
    without FERRY_* variables, in ``tmp_path``, as :func:`ferry` runs it), for a
    preparation step; it must succeed. Returns its stdout."""
    for name in [n for n in os.environ if n.startswith("FERRY_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)

    def run(*args: str, stdin: bytes = b"") -> str:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        code = cli.main(list(args))
        out = capsys.readouterr()
        assert code == 0, out.err
        return out.out

    return run


def login(gw, username: str, password: str) -> httpx.Response:
    return httpx.post(f"{_url(gw)}/users/login", json={"username": username, "password": password})


# -- users ----------------------------------------------------------------------------------
def test_user_lifecycle_with_real_logins(gw, tmp_path):
    s = ["--server", _url(gw)]
    _, out, _ = ferry("user", "create", "bob", "--password", "bob-pw-1", *s, cwd=tmp_path)
    assert out == "created user 'bob' with id 1 (active)\n"
    assert login(gw, "bob", "bob-pw-1").status_code == 200
    _, out, _ = ferry("user", "list", *s, cwd=tmp_path)
    rows = [line.split() for line in out.splitlines()]
    assert rows[0] == ["ID", "USERNAME", "STATUS", "CREATED"] and rows[2][:3] == ["1", "bob", "active"]

    assert ferry("user", "deactivate", "bob", *s, cwd=tmp_path)[1] == "user 'bob' is now inactive\n"
    assert login(gw, "bob", "bob-pw-1").status_code == 400  # docs/http.md: 47 User inactive
    users = json.loads(ferry("user", "list", "--json", *s, cwd=tmp_path)[1])
    assert [(u["username"], u["status"]) for u in users] == [("iggy", "active"), ("bob", "inactive")]
    ferry("user", "activate", "1", *s, cwd=tmp_path)  # by id

    code, _, err = ferry("user", "passwd", "bob", "--current", "wrong", "--new", "bob-pw-2", *s, cwd=tmp_path,
                         ok=False)
    assert code == 1 and err.startswith("ferry: error: ") and len(err.splitlines()) == 1
    ferry("user", "passwd", "bob", "--current", "bob-pw-1", "--new", "bob-pw-2", *s, cwd=tmp_path)
    assert login(gw, "bob", "bob-pw-1").status_code != 200
    assert login(gw, "bob", "bob-pw-2").status_code == 200
    # the new user logs in through the CLI too (it may not list users: no permissions)
    code, _, err = ferry("user", "list", *s, "--login-user", "bob", "--login-password", "bob-pw-2", cwd=tmp_path,
                         ok=False)
    assert code == 1 and "not allowed" in err

    ferry("user", "create", "eve", "--password", "eve-pw-1", "--inactive", *s, cwd=tmp_path)
    assert login(gw, "eve", "eve-pw-1").status_code == 400
    assert ferry("user", "delete", "bob", *s, cwd=tmp_path)[1] == "deleted user 'bob' (id 1)\n"
    assert login(gw, "bob", "bob-pw-2").status_code != 200
    code, _, err = ferry("user", "delete", "bob", *s, cwd=tmp_path, ok=False)
    assert code == 1 and len(err.splitlines()) == 1


# -- permissions ----------------------------------------------------------------------------
def test_perm_set_decides_what_the_user_may_do(gw, tmp_path, given):
    s = ["--server", _url(gw)]
    given("stream", "create", "orders", *s)
    given("topic", "create", "orders", "eu", *s)
    given("user", "create", "ann", "--password", "ann-pw-1", *s)
    as_ann = [*s, "--user", "ann", "--password", "ann-pw-1"]

    code, _, err = ferry("stream", "create", "audit", *as_ann, cwd=tmp_path, ok=False)
    assert code == 1 and "not allowed" in err and len(err.splitlines()) == 1

    _, out, _ = ferry("perm", "set", "ann", "--global", "manage_streams,read_streams",
                      "--stream", "orders:read_stream,poll_messages", "--topic", "orders/eu:send_messages",
                      *s, cwd=tmp_path)
    assert out.splitlines()[0] == "set the permissions of user 'ann'"
    _, out, _ = ferry("perm", "show", "ann", *s, cwd=tmp_path)
    assert out.splitlines()[1:] == ["global: manage_streams, read_streams",
                                    "stream orders (id 0): read_stream, poll_messages",
                                    "  topic eu (id 0): send_messages"]
    perms = json.loads(ferry("perm", "show", "ann", "--json", *s, cwd=tmp_path)[1])["permissions"]
    assert perms["global"]["manage_streams"] and not perms["global"]["manage_users"]
    assert perms["streams"]["0"]["topics"]["0"]["send_messages"] is True

    assert ferry("stream", "create", "audit", *as_ann, cwd=tmp_path)[1] == "created stream 'audit' with id 1\n"
    assert ferry("produce", "orders/eu", "hi", *as_ann, cwd=tmp_path)[1] == "partition=0 offset=0\n"

    ferry("perm", "set", "ann", "--global", "none", *s, cwd=tmp_path)
    code, _, err = ferry("stream", "create", "more", *as_ann, cwd=tmp_path, ok=False)
    assert code == 1 and "not allowed" in err

    code, _, err = ferry("perm", "set", "ann", "--global", "fly", *s, cwd=tmp_path, ok=False)
    assert code == 1 and "unknown permission 'fly'" in err
    code, _, err = ferry("perm", "set", "ann", "--stream", "nope:read_stream", *s, cwd=tmp_path, ok=False)
    assert code == 1 and "stream 'nope' not found" in err


# -- personal access tokens -------------------------------------------------------------------
def test_pat_create_then_use_it_as_token(gw, tmp_path, given):
    s = ["--server", _url(gw)]
    given("stream", "create", "orders", *s)
    _, token, err = ferry("pat", "create", "ci-token", "--expiry", "7d", *s, cwd=tmp_path)
    token = token.strip()
    assert token and " " not in token and "shown only this once" in err
    rows = [line.split() for line in ferry("pat", "list", *s, cwd=tmp_path)[1].splitlines()]
    assert rows[0] == ["NAME", "EXPIRES"] and rows[1][0] == "ci-token" and rows[1][1] != "never"
    assert token not in ferry("pat", "list", "--json", *s, cwd=tmp_path)[1]

    streams = json.loads(ferry("stream", "list", "--json", *s, "--token", token, cwd=tmp_path)[1])
    assert [x["name"] for x in streams] == ["orders"]
    _, out, _ = ferry("stream", "list", "--json", cwd=tmp_path, env={"FERRY_SERVER": _url(gw), "FERRY_TOKEN": token})
    assert json.loads(out) == streams
    jwt = login(gw, "iggy", "iggy").json()["access_token"]["token"]
    assert json.loads(ferry("stream", "list", "--json", *s, "--token", jwt, cwd=tmp_path)[1]) == streams

    assert ferry("pat", "delete", "ci-token", *s, cwd=tmp_path)[1] == "deleted personal access token 'ci-token'\n"
    code, _, err = ferry("stream", "list", *s, "--token", token, cwd=tmp_path, ok=False)
    assert code == 1 and "refused the login as the given personal access token" in err


# -- consumer groups ------------------------------------------------------------------------
STORE_GROUP_OFFSET = textwrap.dedent("""
    import asyncio, os, sys
    from apache_iggy import IggyClient

    async def main(port, offset, partition):
        c = IggyClient(f"127.0.0.1:{port}")
        await c.connect()
        await c.login_user("iggy", "iggy")
        consumer = await c.consumer_group("workers", "orders", "eu", batch_length=10)
        await consumer.store_offset(offset, partition)
        print("stored", flush=True)

    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])))
    sys.stdout.flush()
    os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown
""")


def _lags(out: str) -> dict[int, tuple]:
    (group,) = json.loads(out)
    return {p["partition"]: (p["current_offset"], p["stored_offset"], p["lag"]) for p in group["partitions"]}


def test_group_list_shows_lag_that_moves(gw, tmp_path, given):
    from iggy_clients import client_python

    conf = client_config(tmp_path / "conf", gw)
    c = ["--config", str(conf)]
    given("stream", "create", "orders", *c)
    given("topic", "create", "orders", "eu", "--partitions", "2", *c)
    assert ferry("group", "create", "orders/eu", "workers", *c, cwd=tmp_path)[1] == \
        "created consumer group 'workers' with id 0 on orders/eu\n"
    given("produce", "orders/eu", "-", "--lines", "--partition", "0", *c, stdin=b"a\nb\nc\nd\n")
    assert _lags(ferry("group", "list", "orders/eu", "--json", *c, cwd=tmp_path)[1]) == \
        {0: (3, None, 4), 1: (None, None, 0)}

    script = tmp_path / "store.py"
    script.write_text(STORE_GROUP_OFFSET)
    done = subprocess.run([str(client_python("apache-iggy==0.9.0")), str(script), str(gw.ports["iggy_tcp"]), "1", "0"],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "stored", done.stderr
    assert _lags(ferry("group", "list", "orders/eu", "--json", *c, cwd=tmp_path)[1])[0] == (3, 1, 2)

    given("produce", "orders/eu", "-", "--lines", "--partition", "0", *c, stdin=b"e\nf\ng\n")
    _, out, _ = ferry("group", "list", "orders/eu", *c, cwd=tmp_path)
    rows = [line.split() for line in out.splitlines()]
    assert rows[0] == ["ID", "GROUP", "MEMBERS", "PARTITION", "CURRENT", "STORED", "LAG", "MEMBER"]
    assert rows[1] == ["0", "workers", "0", "0", "6", "1", "5", "-"]  # the script's member has left
    assert rows[2] == ["0", "workers", "0", "1", "-", "-", "0", "-"]

    # Without the Iggy TCP listener the lag is unknown, and stderr says why.
    _, out, err = ferry("group", "list", "orders/eu", "--server", _url(gw), cwd=tmp_path,
                        env={"FERRY_IGGY_TCP_ENABLED": "false"})
    assert "lag unknown" in err and out.splitlines()[1].split()[6] == "?"

    assert ferry("group", "delete", "orders/eu", "workers", *c, cwd=tmp_path)[1] == \
        "deleted consumer group 'workers' (id 0) of orders/eu\n"
    assert ferry("group", "list", "orders/eu", "--json", *c, cwd=tmp_path)[1] == "[]\n"
    code, _, err = ferry("group", "delete", "orders/eu", "workers", *c, cwd=tmp_path, ok=False)
    assert code == 1 and len(err.splitlines()) == 1


# -- where the server is ------------------------------------------------------------------------
def test_server_found_from_config_env_and_flag(gw, tmp_path):
    conf = client_config(tmp_path / "conf", gw)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ferry("stream", "create", "orders", "--config", str(conf), cwd=elsewhere)
    expected = [("orders", 0)]

    def names(out: str):
        return [(x["name"], x["topics"]) for x in json.loads(out)]

    assert names(ferry("stream", "list", "--json", cwd=elsewhere, env={"FERRY_CONFIG": str(conf)})[1]) == expected
    assert names(ferry("stream", "list", "--json", cwd=elsewhere, env={"FERRY_SERVER": _url(gw)})[1]) == expected
    hostport = f"127.0.0.1:{gw.ports['http']}"  # a scheme-less host:port is http
    assert names(ferry("stream", "list", "--json", cwd=elsewhere, env={"FERRY_SERVER": hostport})[1]) == expected
    dead = f"http://127.0.0.1:{free_port()}"
    # --server beats FERRY_SERVER, which beats the config
    assert names(ferry("stream", "list", "--json", "--server", _url(gw), cwd=elsewhere,
                       env={"FERRY_SERVER": dead})[1]) == expected
    code, _, err = ferry("stream", "list", "--config", str(conf), cwd=elsewhere, env={"FERRY_SERVER": dead},
                         ok=False)
    assert code == 1 and dead in err
    # nothing was opened in the current directory
    assert list(elsewhere.iterdir()) == []


def test_unreachable_server_is_one_line_exit_1(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    for args in (["stream", "list"], ["tail", "s/t"], ["user", "list"], ["group", "list", "s/t"]):
        code, out, err = ferry(*args, "--server", url, cwd=tmp_path, ok=False)
        assert code == 1 and out == ""
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert url in lines[0] and "connection refused" in lines[0]
        assert "ferry serve" in lines[0] and "--local" in lines[0]
    code, _, err = ferry("stream", "list", "--server", "ftp://x", cwd=tmp_path, ok=False)
    assert code == 2 and "expected http://HOST:PORT" in err


# -- --local ------------------------------------------------------------------------------------
def test_local_uses_the_configs_data_dir_relative_to_the_config(tmp_path):
    conf_dir = tmp_path / "etc"
    conf_dir.mkdir()
    conf = conf_dir / "ferry.toml"
    conf.write_text('[server]\ndata_dir = "store"\n')
    cwd = tmp_path / "work"
    cwd.mkdir()
    assert ferry("stream", "create", "orders", "--local", "--config", "../etc/ferry.toml", cwd=cwd)[1] == \
        "created stream 'orders' with id 0\n"
    assert (conf_dir / "store").is_dir() and list(cwd.iterdir()) == []
    ferry("topic", "create", "orders", "eu", "--local", cwd=cwd, env={"FERRY_CONFIG": str(conf)})
    ferry("produce", "orders/eu", "x", "--local", "--config", str(conf), cwd=tmp_path)
    _, out, _ = ferry("tail", "orders/eu", "--json", "--local", "--config", str(conf), cwd=cwd)
    assert [json.loads(line)["payload"] for line in out.splitlines()] == ["x"]

    # --local without a directory to open: bad usage, nothing created
    code, out, err = ferry("stream", "list", "--local", cwd=cwd, ok=False)
    assert code == 2 and "--local needs to know the data directory" in err and list(cwd.iterdir()) == []


# -- pipes and progress -----------------------------------------------------------------------
def test_tail_into_a_closed_pipe_ends_quietly(gw, tmp_path, given):
    s = ["--server", _url(gw)]
    given("stream", "create", "s", *s)
    given("topic", "create", "s", "t", *s)
    lines = b"".join(b"line-%d\n" % i for i in range(5000))
    assert given("produce", "s/t", "--lines", *s, stdin=lines) == "partition=0 offsets=0..4999\n"
    for extra in ([], ["--follow"]):
        proc = subprocess.Popen(ferry_cmd("tail", "s/t", *extra, *s), cwd=tmp_path, env=clean_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        got = [proc.stdout.readline() for _ in range(3)]
        assert [g.split()[1] for g in got] == [b"offset=0", b"offset=1", b"offset=2"]
        proc.stdout.close()  # the reader goes away, as `head -3` does
        if extra:
            # a follow only notices at its next write: append one more message
            given("produce", "s/t", "more", *s)
        assert proc.wait(timeout=60) == 0
        err = proc.stderr.read().decode()
        proc.stderr.close()
        assert err == "", err


def test_tail_count_and_large_produce_batches(gw, tmp_path, given):
    s = ["--server", _url(gw)]
    given("stream", "create", "s", *s)
    given("topic", "create", "s", "t", "--partitions", "2", *s)
    # 3 MB of lines: more than one HTTP body may hold (max_body_bytes 2 MB), so several sends
    payload = b"".join(b"%06d" % i + b"x" * 293 + b"\n" for i in range(10_000))
    _, out, _ = ferry("produce", "s/t", "--lines", "--partition", "1", *s, cwd=tmp_path, stdin=payload)
    assert out == "partition=1 offsets=0..9999\n"
    _, out, _ = ferry("tail", "s/t", "--partition", "1", "--from", "9990", "--count", "4", "--json", *s, cwd=tmp_path)
    assert [json.loads(line)["offset"] for line in out.splitlines()] == [9990, 9991, 9992, 9993]
    _, out, _ = ferry("tail", "s/t", "-n", "1500", *s, cwd=tmp_path)
    assert len(out.splitlines()) == 1500 and out.splitlines()[-1].split()[1] == "offset=1499"


def test_progress_bar_only_on_a_terminal(gw, tmp_path, monkeypatch, given):
    """The bar goes to stderr when it is a TTY (a fake one here) and never into stdout."""
    from gateway import admin
    from gateway.config import load_config
    from gateway.remote_target import Auth, Target

    s = ["--server", _url(gw)]
    given("stream", "create", "s", *s)
    given("topic", "create", "s", "t", *s)
    given("produce", "s/t", "--lines", *s, stdin=b"".join(b"m%d\n" % i for i in range(2500)))

    class FakeTTY(io.StringIO):
        def isatty(self) -> bool:
            return True

    cfg = load_config(env={})
    target = Target("http", "127.0.0.1", gw.ports["http"], Auth("iggy", "iggy"))
    monkeypatch.setattr(admin, "PROGRESS_DELAY_S", 0)
    for tty in (False, True):
        err = FakeTTY() if tty else io.StringIO()
        monkeypatch.setattr(sys, "stderr", err)
        out = io.StringIO()
        admin.tail(cfg, "s/t", spec="first", partition=None, follow=False, as_json=False, out=out, server=target)
        assert len(out.getvalue().splitlines()) == 2500 and "it/s" not in out.getvalue()
        if tty:
            assert "/2500" in err.getvalue() and "msg" in err.getvalue()  # total known, unit shown
        else:
            assert err.getvalue() == ""


# -- snapshot ----------------------------------------------------------------------------------
def test_snapshot_downloads_the_servers_zip(gw, tmp_path, given):
    """`ferry snapshot` writes the ZIP of POST /snapshot: the parts asked for, whole;
    an existing file is kept unless --force; a user without read_servers is refused."""
    import zipfile

    s = ["--server", _url(gw)]
    code, out, _ = ferry("snapshot", "--out", "diag.zip", "--type", "ResourceUsage", "--type", "FilesystemOverview",
                         *s, cwd=tmp_path)
    assert out.startswith("wrote diag.zip (") and out.rstrip().endswith("bytes)")
    with zipfile.ZipFile(tmp_path / "diag.zip") as z:
        assert z.testzip() is None
        names = set(z.namelist())
    assert {"resource_usage.txt", "filesystem_overview.txt"} <= names and "process_list.txt" not in names
    assert not list(tmp_path.glob("*.part"))

    code, _, err = ferry("snapshot", "--out", "diag.zip", *s, cwd=tmp_path, ok=False)
    assert code == 1 and "diag.zip exists (--force overwrites it)" in err
    ferry("snapshot", "--out", "diag.zip", "--force", *s, cwd=tmp_path)   # All parts this time
    with zipfile.ZipFile(tmp_path / "diag.zip") as z:
        assert "process_list.txt" in z.namelist()

    ferry("snapshot", *s, cwd=tmp_path)   # the server's own name: iggy_snapshot_<time>.zip
    assert len(list(tmp_path.glob("iggy_snapshot_*.zip"))) == 1

    given("user", "create", "bob", "--password", "bobsecret", *s)
    code, _, err = ferry("snapshot", "--out", "x.zip", "--server", _url(gw), "--login-user", "bob",
                         "--login-password", "bobsecret", cwd=tmp_path, ok=False)
    assert code == 1 and "server refused POST /snapshot: not allowed to read_servers" in err, err
    assert not (tmp_path / "x.zip").exists() and not list(tmp_path.glob("*.part"))


def test_create_with_exist_ok_is_idempotent(gw, tmp_path):
    """`--exist-ok` lets a script create what it needs every run (the quick starts):
    on the server and with --local; without it a second create still fails."""
    s = ["--server", _url(gw)]
    for first in (True, False):
        _, out, _ = ferry("stream", "create", "shop", "--exist-ok", *s, cwd=tmp_path)
        assert out == ("created stream 'shop' with id 0\n" if first else "stream 'shop' exists with id 0\n")
        _, out, _ = ferry("topic", "create", "shop", "orders", "--partitions", "3", "--exist-ok", *s, cwd=tmp_path)
        assert out == ("created topic 'orders' with id 0 and 3 partition(s)\n" if first
                       else "topic 'orders' exists with id 0 and 3 partition(s)\n")
    code, _, err = ferry("stream", "create", "shop", *s, cwd=tmp_path, ok=False)
    assert code == 1 and "exists" in err
    local = tmp_path / "local-data"
    for expected in ("created stream 'l' with id 0\n", "stream 'l' exists with id 0\n"):
        assert ferry("stream", "create", "l", "--exist-ok", "--data", str(local), cwd=tmp_path)[1] == expected
    for expected in ("created topic 't' with id 0 and 1 partition(s)\n", "topic 't' exists with id 0 and 1 partition(s)\n"):
        assert ferry("topic", "create", "l", "t", "--exist-ok", "--data", str(local), cwd=tmp_path)[1] == expected
