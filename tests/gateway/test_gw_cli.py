"""gateway.cli: --help everywhere, version, and the admin commands end to end."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest

from core.broker import Broker
from gateway import cli, version
from gateway.admin import format_message, parse_header, start_offset, tail
from gateway.config import load_config
from gateway.lock import DataDirLock
from gw_helpers import run_ferry

COMMANDS = [
    [], ["serve"], ["version"], ["stream"], ["stream", "create"], ["stream", "list"], ["stream", "delete"],
    ["topic"], ["topic", "create"], ["topic", "list"], ["topic", "delete"], ["produce"], ["tail"],
    ["user"], ["user", "list"], ["user", "create"], ["user", "delete"], ["user", "passwd"], ["user", "activate"],
    ["user", "deactivate"], ["perm"], ["perm", "show"], ["perm", "set"], ["pat"], ["pat", "list"],
    ["pat", "create"], ["pat", "delete"], ["group"], ["group", "list"], ["group", "create"], ["group", "delete"], ["snapshot"],
]


@pytest.fixture(autouse=True)
def no_ferry_env(monkeypatch):
    for name in [n for n in os.environ if n.startswith("FERRY_")]:
        monkeypatch.delenv(name)


@pytest.mark.parametrize("words", COMMANDS, ids=lambda w: " ".join(w) or "ferry")
def test_help_everywhere(capsys, words):
    with pytest.raises(SystemExit) as info:
        cli.main([*words, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: ferry {' '.join(words)}".rstrip())


def test_serve_help_has_a_port_flag_per_listener(capsys):
    with pytest.raises(SystemExit):
        cli.main(["serve", "--help"])
    out = capsys.readouterr().out
    for flag in ["--nats-port", "--nats-monitor-port", "--iggy-quic-port", "--pravega-controller-port",
                 "--fsync", "--data", "--config", "--host", "--log-level", "--log-format", "--only"]:
        assert flag in out
    assert "FERRY_NATS_PORT" in out and "8080/udp" in out


def test_version(capsys):
    assert cli.main(["version"]) == 0
    assert capsys.readouterr().out == f"ferry {version()}\n"
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out == f"ferry {version()}\n"


def test_python_dash_m_gateway_runs_the_cli(tmp_path):
    done = run_ferry("version", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.decode().startswith("ferry ")


def test_console_script_is_installed():
    assert (Path(sys.executable).parent / "ferry").exists()


# -- admin commands ------------------------------------------------------------
@pytest.fixture
def ferry(tmp_path, capsys, monkeypatch):
    """Run ``ferry ARGS --data <tmp>`` in-process: returns (code, stdout, stderr)."""
    data = tmp_path / "data"

    def run(*args: str, stdin: bytes = b""):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        code = cli.main([*args, "--data", str(data)])
        out = capsys.readouterr()
        return code, out.out, out.err

    run.data = data
    return run


def test_streams_and_topics_end_to_end(ferry):
    assert ferry("stream", "create", "orders") == (0, "created stream 'orders' with id 0\n", "")
    assert ferry("stream", "create", "audit", "--id", "7")[0] == 0
    code, out, _ = ferry("stream", "list", "--json")
    assert [(s["id"], s["name"]) for s in json.loads(out)] == [(0, "orders"), (7, "audit")]
    code, out, _ = ferry("stream", "list")
    assert out.splitlines()[0].split() == ["ID", "NAME", "TOPICS", "CREATED"]

    code, out, _ = ferry("topic", "create", "orders", "eu", "--partitions", "3",
                         "--message-expiry", "2h", "--max-size", "1MiB")
    assert (code, out) == (0, "created topic 'eu' with id 0 and 3 partition(s)\n")
    code, out, _ = ferry("topic", "list", "0", "--json")
    (topic,) = json.loads(out)
    assert (topic["name"], topic["partitions"], topic["messages"]) == ("eu", 3, 0)
    assert (topic["message_expiry_us"], topic["max_topic_size"]) == (2 * 3600 * 10**6, 1 << 20)

    assert ferry("topic", "delete", "orders", "eu")[0] == 0
    assert json.loads(ferry("topic", "list", "orders", "--json")[1]) == []
    assert ferry("stream", "delete", "orders") == (0, "deleted stream 'orders' (id 0)\n", "")
    assert [s["name"] for s in json.loads(ferry("stream", "list", "--json")[1])] == ["audit"]


def test_produce_and_tail_end_to_end(ferry):
    ferry("stream", "create", "s")
    ferry("topic", "create", "s", "t", "--partitions", "2")
    assert ferry("produce", "s/t", "hello", "--header", "k=v", "--header", "n:int64=-5",
                 "--partition", "1") == (0, "partition=1 offset=0\n", "")
    assert ferry("produce", "s/t", "-", "--lines", "--partition", "1", stdin=b"a\nb\n")[1] == \
        "partition=1 offsets=1..2\n"
    assert ferry("produce", "s/t", "--partition", "0", stdin=b"\x00\xffbin")[1] == "partition=0 offset=0\n"

    code, out, _ = ferry("tail", "s/t")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 4
    assert lines[0].startswith("partition=0 offset=0 timestamp=") and lines[0].endswith("payload=base64:AP9iaW4=")
    assert "headers={k=v, n:int64=-5} payload=hello" in lines[1]
    assert lines[3].endswith("payload=b")

    code, out, _ = ferry("tail", "s/t", "--partition", "1", "--from", "last", "--json")
    (msg,) = [json.loads(line) for line in out.splitlines()]
    assert (msg["partition"], msg["offset"], msg["payload"], msg["headers"]) == (1, 2, "b", [])
    code, out, _ = ferry("tail", "s/t", "--partition", "1", "--from", "1", "--json")
    assert [json.loads(line)["offset"] for line in out.splitlines()] == [1, 2]


def test_produce_with_key_is_stable(ferry):
    ferry("stream", "create", "s")
    ferry("topic", "create", "s", "t", "--partitions", "4")
    first = ferry("produce", "s/t", "a", "--key", "user-42")[1].split()[0]
    assert ferry("produce", "s/t", "b", "--key", "user-42")[1].split()[0] == first


@pytest.mark.parametrize(
    "args, fragment, exit_code",
    [
        (["produce", "s/nope", "x"], "topic 'nope' not found", 1),
        (["stream", "create", "s"], "already exists", 1),
        (["stream", "delete", "zzz"], "not found", 1),
        # malformed arguments are bad usage (docs/cli.md): exit 2
        (["produce", "nostream", "x"], "is not STREAM/TOPIC", 2),
        (["produce", "s/t", "x", "--header", "novalue"], "not KEY=VALUE", 2),
        (["produce", "s/t", "x", "--header", "n:int8=300"], "header 'n' is not a valid int8", 2),
        (["topic", "create", "s", "u", "--message-expiry", "soon"], "is not a duration", 2),
        (["tail", "s/t", "--from", "middle"], "expected first, last or an offset", 2),
    ],
)
def test_admin_errors_are_one_line(ferry, args, fragment, exit_code):
    ferry("stream", "create", "s")
    ferry("topic", "create", "s", "t")
    code, out, err = ferry(*args)
    assert code == exit_code and out == ""
    assert err.startswith("ferry: error: ") and fragment in err and len(err.strip().splitlines()) == 1


def test_read_commands_need_an_existing_data_dir(ferry):
    code, _, err = ferry("stream", "list")
    assert code == 1 and "does not exist" in err
    assert not ferry.data.exists()


def test_admin_refuses_a_locked_data_dir(ferry):
    ferry("stream", "create", "s")
    with DataDirLock(ferry.data):
        code, out, err = ferry("stream", "list")
    assert code == 2 and out == ""
    assert f"is in use by process {os.getpid()}" in err and "stop the server first" in err


def test_tail_follow_sees_messages_produced_between_rounds(tmp_path):
    cfg = load_config(env={"FERRY_SERVER_DATA_DIR": str(tmp_path)})
    with Broker.open(tmp_path, cfg.broker_config()) as broker:
        broker.create_stream("s")
        broker.create_topic("s", "t")
    out = io.StringIO()

    def sleep_then_produce(_interval: float) -> None:  # stands in for time.sleep between polls
        assert cli.main(["produce", "s/t", f"m{out.getvalue().count(chr(10))}", "--data", str(tmp_path)]) == 0

    tail(cfg, "s/t", spec="first", partition=None, follow=True, as_json=True, out=out,
         sleep=sleep_then_produce, rounds=3)
    assert [json.loads(line)["payload"] for line in out.getvalue().splitlines()] == ["m0", "m1", "m2"]


def test_header_parsing_and_formatting():
    assert parse_header("a=b=c") == ("a", parse_header("a=b=c")[1])
    assert parse_header("a=b=c")[1].as_str() == "b=c"
    key, value = parse_header("flag:bool=true")
    assert key == "flag" and value.as_bool() is True
    key, value = parse_header("url:http=x")  # not a kind name: part of the key
    assert key == "url:http" and value.as_str() == "x"
    assert start_offset(5, 10, "first") == 5 and start_offset(5, 10, "last") == 9
    assert start_offset(5, 5, "last") == 5 and start_offset(5, 10, "2") == 5


def test_text_payloads_stay_on_one_line():
    from core.message import Headers, Message

    msg = Message(id=1, timestamp=0, origin_timestamp=0, headers=Headers(), payload=b"two\nlines")
    assert format_message(0, msg, as_json=False).endswith('payload="two\\nlines"')
