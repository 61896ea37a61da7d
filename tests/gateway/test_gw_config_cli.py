"""``ferry config sample`` and ``ferry config check``: the sample is generated
from the key table and loads to exactly the defaults; check reports every
value's source and fails like ``ferry serve`` on a bad config.

The CLI runs as a real ``python -m gateway`` process, except for the table of bad
configurations: every case of it runs ``config check`` through ``gateway.cli.main``
in-process (the whole CLI path: arguments, loading, reporting, the exit code), and
the three cases that compare check with serve run both as real processes, started
together in one module fixture (as tests/gateway/test_gw_cli_errors.py does for
serve). An interpreter start-up per case (about 1.3 s of CPU) proved nothing more.
"""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import subprocess
from pathlib import Path

import pytest

from core.addressing import Binding
from ferry_harness import free_port, kill_process, serve_process
from gateway.config import SECTIONS, env_name, load_config, resolve_config, schema_for
from gateway.confkeys import BINDING_FIELDS
from gateway.registry import default_registry
from gw_helpers import CONFIG_ERRORS, run_ferry, run_together

ASSIGNMENT = re.compile(r"#([a-z_]+ = .*)")  # a commented-out key of the sample


def defaults():
    return dataclasses.replace(load_config(None, env={}), source=None)


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> str:
    """The sample as the real CLI prints it."""
    proc = run_ferry("config", "sample", cwd=tmp_path_factory.mktemp("sample"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    return proc.stdout.decode()


def uncomment(text: str, *, bindings: bool) -> str:
    """Every commented-out assignment made live (the [[binding]] example only
    when ``bindings``), as a user editing the sample would."""
    out, in_binding = [], False
    for line in text.splitlines():
        in_binding = in_binding or line == "#[[binding]]"
        if in_binding and bindings and line == "#[[binding]]":
            out.append("[[binding]]")
            continue
        match = ASSIGNMENT.fullmatch(line.split("  #")[0].rstrip())
        out.append(match.group(1) if match and (bindings or not in_binding) else line)
    return "\n".join(out) + "\n"


def set_key(text: str, table: str, key: str, value: str) -> str:
    """Uncomment ``key`` in ``[table]`` of the sample and give it ``value``."""
    lines = text.splitlines()
    start = lines.index(f"[{table}]")
    for i in range(start + 1, len(lines)):
        if lines[i].startswith(f"#{key} = "):
            lines[i] = f"{key} = {value}"
            return "\n".join(lines) + "\n"
        assert not lines[i].startswith("["), f"{table}.{key} not in the sample"
    raise AssertionError(f"{table}.{key} not in the sample")


# -- sample ------------------------------------------------------------------
def test_sample_as_written_loads_to_exactly_the_defaults(sample, tmp_path):
    """All but server.data_dir: the sample sets it (to its default "data", next to the
    file), so `ferry ... --local --config ferry.toml` knows the data directory."""
    path = tmp_path / "ferry.toml"
    path.write_text(sample)
    resolved = resolve_config(path, env={})
    base = defaults()
    expected = dataclasses.replace(base, server=dataclasses.replace(base.server, data_dir=tmp_path / "data"))
    assert dataclasses.replace(resolved.config, source=None) == expected
    assert set(resolved.origins) == {("server", "data_dir")}  # every other value is a default
    assert resolved.config.source == path


def test_every_key_appears_live_with_its_default_when_uncommented(sample, tmp_path):
    # Uncommenting every line must change nothing either: each commented value
    # *is* the default, and each key of the table has exactly one such line.
    path = tmp_path / "ferry.toml"
    path.write_text(uncomment(sample, bindings=False))
    resolved = resolve_config(path, env={})
    # ... except that a relative data_dir set in a file is relative to the file's folder
    base = defaults()
    expected = dataclasses.replace(base, server=dataclasses.replace(base.server, data_dir=tmp_path / "data"))
    assert dataclasses.replace(resolved.config, source=None) == expected
    schema = schema_for(default_registry().known())
    assert set(resolved.origins) == set(schema)
    assert {o.kind for o in resolved.origins.values()} == {"file"}


def test_every_key_has_its_meaning_and_variable_in_the_sample(sample):
    schema = schema_for(default_registry().known())
    lines = sample.splitlines()
    for path, key in schema.items():
        assert key.doc, f"{'.'.join(path)} has no meaning in the key table (gateway/confkeys.py)"
        table = "[" + ".".join(path[:-1]) + "]"
        body = lines[lines.index(table):]
        at = next(i for i, line in enumerate(body) if line.startswith((f"#{path[-1]} = ", f"{path[-1]} = ")))
        assert body[at - 1].startswith(f"# {key.doc}") and env_name(path) in body[at - 1], path
    # the flags, as found by asking the real serve parser what each one sets
    for flag, key in [("--host", "FERRY_SERVER_HOST"), ("--data", "FERRY_SERVER_DATA_DIR"),
                      ("--fsync", "FERRY_LOG_FSYNC"), ("--grace-seconds", "FERRY_SERVER_GRACE_SECONDS"),
                      ("--log-level", "FERRY_SERVER_LOG_LEVEL"), ("--log-format", "FERRY_SERVER_LOG_FORMAT")]:
        assert f"[{key}, {flag}]" in sample
    for name in default_registry().known():
        assert f"[{env_name(('listeners', name, 'port'))}, --{name.replace('_', '-')}-port]" in sample


def test_binding_example_is_a_valid_binding_with_every_field(sample, tmp_path):
    assert {f.name for f in dataclasses.fields(Binding)} == set(BINDING_FIELDS)
    path = tmp_path / "ferry.toml"
    path.write_text(uncomment(sample, bindings=True))
    (binding,) = load_config(path, env={}).bindings
    assert {name: getattr(binding, name) for name in BINDING_FIELDS} == {
        name: example for name, (example, _doc) in BINDING_FIELDS.items()}


def test_sample_to_a_file_refuses_to_overwrite_without_force(tmp_path, sample):
    first = run_ferry("config", "sample", "ferry.toml", cwd=tmp_path)
    assert first.returncode == 0 and first.stdout == b""
    assert (tmp_path / "ferry.toml").read_text() == sample
    assert b"wrote ferry.toml" in first.stderr
    (tmp_path / "ferry.toml").write_text("[log]\nfsync = 'always'\n")
    again = run_ferry("config", "sample", "ferry.toml", cwd=tmp_path)
    assert again.returncode == 1
    assert again.stderr.decode().strip() == "ferry: error: ferry.toml exists; pass --force to overwrite it"
    assert (tmp_path / "ferry.toml").read_text() == "[log]\nfsync = 'always'\n"
    forced = run_ferry("config", "sample", "ferry.toml", "--force", cwd=tmp_path)
    assert forced.returncode == 0 and (tmp_path / "ferry.toml").read_text() == sample


# -- check -------------------------------------------------------------------
def test_check_reports_each_values_source(sample, tmp_path):
    text = set_key(sample, "log", "segment_bytes", '"64MiB"')
    text = set_key(text, "store", "password", '"s3cret-pw"')
    (tmp_path / "ferry.toml").write_text(text)
    proc = run_ferry("config", "check", "ferry.toml", "--nats-port", "4333", "--json", cwd=tmp_path,
                     env={"FERRY_LOG_FSYNC": "always"})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    keys = doc["keys"]
    assert doc["file"] == "ferry.toml" and doc["valid"] is True
    assert keys["log.segment_bytes"] == {"value": 64 * 1024 * 1024, "source": "file", "from": "ferry.toml",
                                         "env": "FERRY_LOG_SEGMENT_BYTES"}
    assert keys["log.fsync"] == {"value": "always", "source": "env", "from": "FERRY_LOG_FSYNC",
                                      "env": "FERRY_LOG_FSYNC"}
    assert keys["listeners.nats.port"]["value"] == 4333
    assert keys["listeners.nats.port"]["source"] == "flag" and keys["listeners.nats.port"]["from"] == "--nats-port"
    assert keys["server.data_dir"] == {"value": str(tmp_path / "data"), "source": "file", "from": "ferry.toml",
                                       "env": "FERRY_SERVER_DATA_DIR"}  # the sample sets it
    assert keys["store.password"]["value"] == "<set>"  # never printed
    assert keys["auth.root_password"] == {"value": "<set>", "source": "default", "from": None,
                                          "env": "FERRY_AUTH_ROOT_PASSWORD"}  # not "iggy"
    assert b"s3cret-pw" not in proc.stdout
    assert set(keys) == {".".join(p) for p in schema_for(default_registry().known())}
    assert doc["warnings"] and "root_password" in doc["warnings"][0]

    table = run_ferry("config", "check", "ferry.toml", "--nats-port", "4333", cwd=tmp_path,
                      env={"FERRY_LOG_FSYNC": "always"}).stdout.decode().splitlines()
    assert table[0] == "ferry.toml: valid"
    rows = {line.split()[0]: line.split(None, 2)[1:] for line in table if line.startswith(("log.", "listeners."))}
    assert rows["log.fsync"] == ['"always"', "env FERRY_LOG_FSYNC"]
    assert rows["log.segment_bytes"] == ['"64MiB"', "file ferry.toml"]
    assert rows["listeners.nats.port"] == ["4333", "flag --nats-port"]
    assert rows["log.fsync_interval_ms"] == ["0.0", "default"]


def _check_error(proc: subprocess.CompletedProcess, fragments: list[str]) -> None:
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert proc.stdout == b""
    assert err.count("\n") == 1 and err.startswith("ferry: config error: "), err
    for fragment in fragments:
        assert fragment in err


@pytest.mark.parametrize("name", sorted(CONFIG_ERRORS))
def test_check_fails_on_a_bad_config_with_one_line_and_exit_2(tmp_path, name, ferry_main):
    args, env, toml, fragments = CONFIG_ERRORS[name]
    if toml is not None:
        (tmp_path / "ferry.toml").write_text(toml)
        args = [*args, "ferry.toml"]
    _check_error(ferry_main("config", "check", *args, cwd=tmp_path, env=env), fragments)


# One bad value from each source (a file, a variable, a flag): `config check` and `serve`
# as real processes, all six started at once.
SAME_ERROR_CASES = ["interval_negative", "unknown_env", "port_range_flag"]


@pytest.fixture(scope="module")
def check_and_serve(tmp_path_factory) -> dict[tuple[str, str], subprocess.CompletedProcess]:
    """(case, "check" | "serve") -> the finished real process."""
    cases = {}
    for name in SAME_ERROR_CASES:
        args, env, toml, _ = CONFIG_ERRORS[name]
        for command, words in (("check", ["config", "check"]), ("serve", ["serve"])):
            cases[name, command] = ([*words, *args], env, toml)
    return run_together(cases, tmp_path_factory)


@pytest.mark.parametrize("name", SAME_ERROR_CASES)
def test_check_and_serve_print_the_same_error(check_and_serve, name):
    check, serve = check_and_serve[name, "check"], check_and_serve[name, "serve"]
    assert (check.returncode, check.stderr) == (serve.returncode, serve.stderr) == (2, serve.stderr)
    _check_error(check, CONFIG_ERRORS[name][3])  # as the in-process table, from a real process


def test_check_of_a_missing_file_names_it(tmp_path):
    proc = run_ferry("config", "check", "nope.toml", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.decode() == "ferry: config error: config file 'nope.toml' does not exist\n"


def test_checked_sample_is_what_serve_runs(sample, tmp_path):
    """The newcomer's path: sample > ferry.toml, edit, check, serve. The ports
    check reports are the ones the real server binds and answers on."""
    nats_port, monitor_port = free_port(), free_port()
    text = set_key(sample, "listeners.nats", "port", str(nats_port))
    text = set_key(text, "listeners.nats", "server_name", '"from-the-sample"')
    (tmp_path / "ferry.toml").write_text(text)
    args = ["--only", "nats,nats_monitor", "--nats-monitor-port", str(monitor_port)]
    check = run_ferry("config", "check", "ferry.toml", "--json", *args, cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    doc = json.loads(check.stdout)
    assert doc["enabled_listeners"] == ["nats", "nats_monitor"]
    assert doc["keys"]["listeners.nats.port"]["source"] == "file"
    assert doc["keys"]["listeners.nats_monitor.port"]["from"] == "--nats-monitor-port"
    assert doc["keys"]["listeners.http.enabled"] == {"value": False, "source": "flag", "from": "--only",
                                                     "env": "FERRY_HTTP_ENABLED"}

    proc, banner = serve_process(tmp_path, tmp_path / "data", "--config", "ferry.toml", *args)
    try:
        assert f"127.0.0.1:{doc['keys']['listeners.nats.port']['value']}/tcp" in banner
        assert f"127.0.0.1:{monitor_port}/tcp" in banner
        with socket.create_connection(("127.0.0.1", nats_port), timeout=10) as sock:
            info = sock.makefile("rb").readline()
        assert info.startswith(b"INFO ")
        assert json.loads(info[5:])["server_name"] == "from-the-sample"
    finally:
        kill_process(proc)


def test_sample_header_names_the_check_command_and_sections(sample):
    assert sample.startswith("# ferry.toml, written by `ferry config sample`")
    assert "ferry config check ferry.toml" in sample
    for section in SECTIONS:
        assert f"\n[{section}]\n" in sample
    for name in default_registry().known():
        assert f"\n[listeners.{name}]\n" in sample


def test_config_commands_need_no_server(tmp_path: Path):
    # check does not touch the data directory (no lock, nothing created)
    proc = run_ferry("config", "check", "--data", "d", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "d").exists()
