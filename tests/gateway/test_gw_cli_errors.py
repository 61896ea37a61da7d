"""Configuration errors through the CLI: one line on stderr, exit code 2.

Every case of the table runs through ``gateway.cli.main`` in-process (the
whole CLI path: argument parsing, loading, reporting, the exit code). A
representative subset -- one per source (flag, variable, file) and per kind
of problem -- also runs as a real ``python -m gateway`` process, to prove the
exit status reaches the shell; those subprocesses start together in one
module fixture, so they cost about one interpreter start-up.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from gateway import cli
from gw_helpers import CONFIG_ERRORS, clean_env, ferry_cmd

ADMIN_CASES = {
    "stream_list_bad_toml": (["stream", "list"], {}, "[server]\nlog_format = 1\n", ["server.log_format = 1"]),
    "produce_bad_env": (["produce", "s/t", "x"], {"FERRY_LOG_FSYNC": "sometimes"}, None, ["log.fsync"]),
}


CASES = {**{k: (["serve", *v[0]], *v[1:]) for k, v in CONFIG_ERRORS.items()}, **ADMIN_CASES}
SUBPROCESS_CASES = ["fsync_flag", "port_text_env", "interval_negative", "unknown_key", "unknown_env",
                    "bad_toml", "port_conflict", "binding_missing_topic", *ADMIN_CASES]


def _check(code: int, stdout: str, stderr: str, fragments: list[str]) -> None:
    assert code == 2, stderr
    assert stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ferry: config error: "), stderr
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_config_error_through_main(tmp_path, monkeypatch, capsys, case):
    args, env, toml, fragments = CASES[case]
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("FERRY_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if toml is not None:
        (tmp_path / "ferry.toml").write_text(toml)
        args = [*args, "--config", "ferry.toml"]
    code = cli.main(args)
    out = capsys.readouterr()
    _check(code, out.out, out.err, fragments)
    assert not (tmp_path / "data").exists()  # nothing touched the disk


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    procs = {}
    for name in SUBPROCESS_CASES:
        args, env, toml, _ = CASES[name]
        cwd = tmp_path_factory.mktemp(name)
        if toml is not None:
            (cwd / "ferry.toml").write_text(toml)
            args = [*args, "--config", "ferry.toml"]
        procs[name] = subprocess.Popen(ferry_cmd(*args), cwd=cwd, env=clean_env(env),
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=60)
        out[name] = (proc.returncode, stdout, stderr, CASES[name][3])
    return out


@pytest.mark.parametrize("case", SUBPROCESS_CASES)
def test_config_error_exits_2_in_a_real_process(results, case):
    _check(*results[case])


@pytest.mark.parametrize("listener", ["kafka", "nats", "pravega"])
def test_a_listener_refusing_its_options_is_a_config_error(tmp_path, monkeypatch, capsys, listener):
    """Options a listener checks as it starts (an anonymous_user that is no Ferry user)
    stop ``ferry serve`` like any bad config: exit code 2 and a config error naming
    the listener, though the data directory was opened first."""
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("FERRY_")]:
        monkeypatch.delenv(name)
    (tmp_path / "ferry.toml").write_text(f'[listeners.{listener}]\nanonymous_user = "ghost"\n')
    code = cli.main(["serve", "--config", "ferry.toml", "--only", listener])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1] == f"ferry: config error: listeners.{listener}.anonymous_user: no Ferry user 'ghost'"
