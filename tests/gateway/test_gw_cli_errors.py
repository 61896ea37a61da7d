"""Configuration errors through the CLI: one line on stderr, exit code 2.

Every case of the table runs through ``gateway.cli.main`` in-process (the
whole CLI path: argument parsing, loading, reporting, the exit code). A
representative subset -- one per source (flag, variable, file) and per kind
of problem -- also runs as a real ``python -m gateway`` process, to prove the
exit status reaches the shell; those subprocesses start together in one
module fixture, so they cost about one interpreter start-up.
"""

from __future__ import annotations


import pytest

from gw_helpers import CONFIG_ERRORS, run_together

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
def test_config_error_through_main(tmp_path, ferry_main, case):
    args, env, toml, fragments = CASES[case]
    if toml is not None:
        (tmp_path / "ferry.toml").write_text(toml)
        args = [*args, "--config", "ferry.toml"]
    proc = ferry_main(*args, cwd=tmp_path, env=env)
    _check(proc.returncode, proc.stdout.decode(), proc.stderr.decode(), fragments)
    assert not (tmp_path / "data").exists()  # nothing touched the disk


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    done = run_together({name: CASES[name][:3] for name in SUBPROCESS_CASES}, tmp_path_factory, text=True)
    return {name: (p.returncode, p.stdout, p.stderr, CASES[name][3]) for name, p in done.items()}


@pytest.mark.parametrize("case", SUBPROCESS_CASES)
def test_config_error_exits_2_in_a_real_process(results, case):
    _check(*results[case])


@pytest.mark.parametrize("listener", ["kafka", "nats", "pravega"])
def test_a_listener_refusing_its_options_is_a_config_error(tmp_path, ferry_main, listener):
    """Options a listener checks as it starts (an anonymous_user that is no Ferry user)
    stop ``ferry serve`` like any bad config: exit code 2 and a config error naming
    the listener, though the data directory was opened first."""
    (tmp_path / "ferry.toml").write_text(f'[listeners.{listener}]\nanonymous_user = "ghost"\n')
    proc = ferry_main("serve", "--config", "ferry.toml", "--only", listener, cwd=tmp_path)
    assert proc.returncode == 2
    last = proc.stderr.decode().strip().splitlines()[-1]
    assert last == f"ferry: config error: listeners.{listener}.anonymous_user: no Ferry user 'ghost'"
