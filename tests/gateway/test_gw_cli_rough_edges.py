"""Issue 28, "A user's second hour": the CLI's rough edges, each pinned by a test.

A gateway runs in-process (tests/support/ferry_harness.py); the CLI runs as a
real ``python -m gateway`` process, as a user would.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ferry_harness import running_gateway
from gw_helpers import run_ferry

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    root = tmp_path_factory.mktemp("rough")
    (root / "server").mkdir()
    with running_gateway(root / "server") as gw:
        yield gw


def ferry(*args: str, cwd: Path, env: dict[str, str] | None = None):
    done = run_ferry(*args, cwd=cwd, env=env)
    err = done.stderr.decode()
    assert "Traceback" not in err, err
    return done.returncode, done.stdout.decode(), err


def _s(gw) -> list[str]:
    return ["--server", f"http://127.0.0.1:{gw.ports['http']}"]


# 1. an admin command pointed at a NATS port -----------------------------------------------------
def test_admin_command_on_a_nats_port_says_so_in_one_line(gw, tmp_path):
    port = gw.ports["nats"]
    code, out, err = ferry("stream", "list", "--server", f"127.0.0.1:{port}", cwd=tmp_path)
    assert (code, out) == (1, "")
    assert err == (f"ferry: error: 127.0.0.1:{port} is a NATS port, not Ferry's HTTP API "
                   "(default 127.0.0.1:3000)\n")


def test_admin_command_on_a_non_http_port_says_so(tmp_path):
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]

    def answer() -> None:
        conn, _ = srv.accept()
        conn.sendall(b"+OK hello from something else\r\n")
        conn.recv(1000)
        conn.close()

    t = threading.Thread(target=answer, daemon=True)
    t.start()
    try:
        code, _, err = ferry("stream", "list", "--server", f"127.0.0.1:{port}", cwd=tmp_path)
    finally:
        srv.close()
    assert code == 1 and err == (f"ferry: error: 127.0.0.1:{port} is not an HTTP port, not Ferry's HTTP API "
                                 "(default 127.0.0.1:3000)\n")


# 2. did you mean ------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, line", [
    (["strem", "list"], "ferry: unknown command 'strem' (did you mean 'stream'?)"),
    (["stream", "lst"], "ferry stream: unknown action 'lst' (did you mean 'list'?)"),
    (["zzzqqq"], "ferry: unknown command 'zzzqqq' (see ferry --help)"),
])
def test_unknown_command_suggests_the_closest(argv, line, tmp_path):
    code, out, err = ferry(*argv, cwd=tmp_path)
    assert (code, out, err) == (2, "", line + "\n")


# 3. usage errors exit 2 -----------------------------------------------------------------------
def test_bad_arguments_are_usage_errors_exit_2(gw, tmp_path):
    s = _s(gw)
    assert ferry("stream", "create", "ux", "--exist-ok", *s, cwd=tmp_path)[0] == 0
    assert ferry("topic", "create", "ux", "t", "--exist-ok", *s, cwd=tmp_path)[0] == 0
    code, _, err = ferry("tail", "ux/t", "--from", "banana", *s, cwd=tmp_path)
    assert code == 2 and "--from 'banana'" in err
    code, _, err = ferry("produce", "ux/t", "x", "--header", "attempt:uint8=300", *s, cwd=tmp_path)
    assert code == 2 and "header 'attempt' is not a valid uint8" in err and len(err.splitlines()) == 1
    code, _, err = ferry("produce", "ux/t", "x", "--header", "novalue", *s, cwd=tmp_path)
    assert code == 2 and "'novalue'" in err
    code, _, err = ferry("produce", "no-slash", "x", *s, cwd=tmp_path)
    assert code == 2 and "'no-slash' is not STREAM/TOPIC" in err
    code, _, err = ferry("topic", "create", "ux", "t2", "--message-expiry", "soon", *s, cwd=tmp_path)
    assert code == 2 and "not a duration" in err


# 4. not found, named -----------------------------------------------------------------------------
def test_tail_and_topic_commands_name_what_is_missing(gw, tmp_path):
    s = _s(gw)
    assert ferry("stream", "create", "nf", "--exist-ok", *s, cwd=tmp_path)[0] == 0
    for args, what in [(["tail", "nosuch/topic"], "stream 'nosuch' not found"),
                       (["tail", "nf/nosuch"], "topic 'nosuch' not found in stream 'nf'"),
                       (["topic", "list", "nosuch"], "stream 'nosuch' not found"),
                       (["topic", "delete", "nf", "nosuch"], "topic 'nosuch' not found in stream 'nf'"),
                       (["stream", "delete", "nosuch"], "stream 'nosuch' not found"),
                       (["group", "list", "nf/nosuch"], "topic 'nosuch' not found in stream 'nf'"),
                       (["group", "delete", "nosuch/t", "g"], "stream 'nosuch' not found")]:
        code, _, err = ferry(*args, *s, cwd=tmp_path)
        assert code == 1 and what in err and "Resource not found" not in err, (args, err)


# 5. unlimited and human sizes in tables ---------------------------------------------------------
def test_topic_list_shows_unlimited_and_human_sizes(gw, tmp_path):
    s = _s(gw)
    ferry("stream", "create", "tl", "--exist-ok", *s, cwd=tmp_path)
    ferry("topic", "create", "tl", "free", "--exist-ok", *s, cwd=tmp_path)
    ferry("topic", "create", "tl", "capped", "--max-size", "1536MiB", "--message-expiry", "7d", "--exist-ok",
          *s, cwd=tmp_path)
    code, out, _ = ferry("topic", "list", "tl", *s, cwd=tmp_path)
    assert code == 0 and "18446744073709551615" not in out
    rows = {r.split()[1]: r.split() for r in out.splitlines()[1:]}
    assert rows["free"][-2:] == ["unlimited", "unlimited"]
    assert rows["capped"][-3:] == ["7d", "1.5", "GiB"]
    topics = {t["name"]: t for t in json.loads(ferry("topic", "list", "tl", "--json", *s, cwd=tmp_path)[1])}
    assert topics["capped"]["max_topic_size"] == 1536 * 1024 * 1024
    assert topics["capped"]["message_expiry_us"] == 7 * 86400 * 10**6


# 6. start-up: the parser does not pull in the servers ---------------------------------------------
HEAVY = ["trio", "aioquic", "h2", "nats", "argon2", "pyarrow", "core.broker", "adapters.http.app",
         "adapters.nats.driver", "adapters.iggy.driver", "adapters.pravega.driver"]


@pytest.mark.parametrize("argv", [["version"], ["--help"], ["stream", "--help"], ["pub", "--help"]])
def test_common_commands_do_not_import_the_servers(argv):
    code = ("import sys, runpy, io, contextlib\n"
            f"sys.argv = ['ferry', *{argv!r}]\n"
            "from gateway.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n"
            "        main()\n"
            "    except SystemExit:\n"
            "        pass\n"
            f"print([m for m in {HEAVY!r} if m in sys.modules])\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout


# 7. secrets ----------------------------------------------------------------------------------------
def test_config_check_never_prints_a_secret(tmp_path):
    (tmp_path / "ferry.toml").write_text('[store]\npassword = "st0re-pw"\ntoken = "t0ken-x"\n')
    done = run_ferry("config", "check", "ferry.toml", cwd=tmp_path,
                     env={"FERRY_AUTH_ROOT_PASSWORD": "r00t-pw-x"})
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr
    for secret in ("st0re-pw", "t0ken-x", "r00t-pw-x"):
        assert secret not in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith(("auth.", "store."))}
    assert rows["auth.root_password"] == ["<set>", "env", "FERRY_AUTH_ROOT_PASSWORD"]
    assert rows["store.password"] == ["<set>", "file", "ferry.toml"]
    default = run_ferry("config", "check", cwd=tmp_path, env={}).stdout.decode()
    line = next(x for x in default.splitlines() if x.startswith("auth.root_password"))
    assert line.split()[1:] == ["<set>", "default"] and '"iggy"' not in default.split("root_password")[1]


# 8. the sample's data_dir is active, so --local --config works --------------------------------------
def test_sample_config_works_with_local(tmp_path):
    sample = run_ferry("config", "sample", cwd=tmp_path)
    assert sample.returncode == 0
    (tmp_path / "ferry.toml").write_bytes(sample.stdout)
    assert 'data_dir = "data"' in sample.stdout.decode().splitlines()
    for expected in ("created stream 'orders' with id 0\n", "stream 'orders' exists with id 0\n"):
        code, out, err = ferry("stream", "create", "orders", "--exist-ok", "--local", "--config", "ferry.toml",
                               cwd=tmp_path)
        assert (code, out) == (0, expected), err
    assert (tmp_path / "data").is_dir()


def test_the_listener_table_the_parser_uses_matches_the_listeners():
    """build_parser takes serve's --NAME-port flags from registry.DEFAULT_LISTENERS instead of
    importing every listener module: the table must name each discovered listener, port and transport."""
    from gateway.cli import build_parser
    from gateway.registry import DEFAULT_LISTENERS, default_registry

    discovered = {n: (k.default_port, k.transport) for n, k in default_registry().known().items()}
    assert discovered == dict(DEFAULT_LISTENERS)
    serve = next(a for a in build_parser()._actions if a.dest == "command").choices["serve"]
    flags = {s for a in serve._actions for s in a.option_strings}
    assert {f"--{n.replace('_', '-')}-port" for n in discovered} <= flags
