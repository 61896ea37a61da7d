"""Shared helpers of the gateway tests: the config-error table, subprocess runners."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


# Bad configurations: name -> (serve args, env, ferry.toml text or None, fragments
# the one-line error must contain). test_gw_config.py checks them in-process,
# test_gw_cli_errors.py through the real CLI in subprocesses (exit code 2).
CONFIG_ERRORS = {
    "fsync_flag": (["--fsync", "bogus"], {}, None,
                   ["log.fsync = 'bogus' (from --fsync)", "must be one of always, batch, never"]),
    "fsync_env": ([], {"FERRY_LOG_FSYNC": "sometimes"}, None,
                  ["log.fsync = 'sometimes' (from FERRY_LOG_FSYNC)"]),
    "port_range_flag": (["--nats-port", "70000"], {}, None,
                        ["listeners.nats.port = '70000' (from --nats-port)", "0..65535"]),
    "port_text_env": ([], {"FERRY_NATS_PORT": "abc"}, None,
                      ["listeners.nats.port = 'abc' (from FERRY_NATS_PORT)", "integer"]),
    "interval_negative": ([], {}, "[log]\nfsync_interval_ms = -1\n",
                          ["log.fsync_interval_ms = -1 (from ferry.toml)", "0..60000"]),
    "segment_unit": ([], {}, '[log]\nsegment_bytes = "12XB"\n',
                     ["log.segment_bytes = '12XB' (from ferry.toml)", "byte count"]),
    "segment_too_big": ([], {}, "[log]\nsegment_bytes = 5_000_000_000\n",
                        ["log.segment_bytes = 5000000000"]),
    "log_format": ([], {}, '[server]\nlog_format = "xml"\n',
                   ["server.log_format = 'xml' (from ferry.toml)", "text, json"]),
    "log_level_flag": (["--log-level", "loud"], {}, None,
                       ["server.log_level = 'loud' (from --log-level)"]),
    "grace_type": ([], {}, '[server]\ngrace_seconds = "5"\n',
                   ["server.grace_seconds = '5' (from ferry.toml)", "must be a number"]),
    "grace_flag": (["--grace-seconds", "-3"], {}, None, ["server.grace_seconds = '-3' (from --grace-seconds)"]),
    "password_short": ([], {}, '[auth]\nroot_password = "ab"\n',
                       ["auth.root_password = 'ab' (from ferry.toml)", "3..100 bytes"]),
    "username_env": ([], {"FERRY_AUTH_ROOT_USERNAME": "x"}, None,
                     ["auth.root_username = 'x' (from FERRY_AUTH_ROOT_USERNAME)"]),
    "enabled_type": ([], {}, '[listeners.nats]\nenabled = "yes"\n',
                     ["listeners.nats.enabled = 'yes' (from ferry.toml)", "true or false"]),
    "host_empty": ([], {}, '[server]\nhost = ""\n', ["server.host = '' (from ferry.toml)"]),
    "data_dir_empty": (["--data", ""], {}, None, ["server.data_dir = '' (from --data)"]),
    "unknown_key": ([], {}, '[log]\nfsnyc = "always"\n',
                    ["log.fsnyc: unknown key in ferry.toml", "did you mean 'fsync'?"]),
    "unknown_section": ([], {}, '[logs]\nfsync = "always"\n',
                        ["logs: unknown section in ferry.toml", "did you mean 'log'?"]),
    "unknown_listener": ([], {}, "[listeners.natz]\nport = 1\n",
                         ["listeners.natz: unknown listener in ferry.toml", "did you mean 'nats'?"]),
    "unknown_listener_key": ([], {}, "[listeners.nats]\nprot = 1\n",
                             ["listeners.nats.prot: unknown key", "did you mean 'port'?"]),
    "listener_not_table": ([], {}, "[listeners]\nnats = 4222\n", ["listeners.nats: must be a table"]),
    "unknown_env": ([], {"FERRY_NATS_PROT": "1"}, None,
                    ["FERRY_NATS_PROT: unknown environment variable", "did you mean 'FERRY_NATS_PORT'?"]),
    "bad_toml": ([], {}, "[log\nfsync = 1\n", ["is not valid TOML"]),
    "port_conflict": (["--nats-port", "3000"], {}, None,
                      ["listeners.nats.port = 3000: already used by listeners.http"]),
    "binding_missing_topic": ([], {}, '[[binding]]\nstream = "s"\n', ["binding[0].topic: required"]),
    "binding_bad_subject": ([], {}, '[[binding]]\nstream = "s"\ntopic = "t"\nnats_subject = "a.*"\n',
                            ["binding[0].nats_subject:"]),
    "only_unknown": (["--only", "nats,bogus"], {}, None, ["--only bogus: unknown listener"]),
}



def ferry_cmd(*args: str) -> list[str]:
    """``python -m gateway ARGS``: the installed CLI, independent of PATH."""
    return [sys.executable, "-m", "gateway", *args]


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without FERRY_* variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FERRY_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def run_ferry(*args: str, cwd: Path, env: dict[str, str] | None = None, stdin: bytes | None = None,
              timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(ferry_cmd(*args), cwd=cwd, env=clean_env(env), input=stdin,
                          capture_output=True, timeout=timeout)


def run_together(cases: dict, tmp_path_factory, *, text: bool = False) -> dict:
    """One real ``ferry`` process per case, all started at once (an interpreter start
    costs about 1.3 s of CPU; started together they cost about one of wall time):
    ``cases`` maps a key to (args, env, ferry.toml text or None), each case runs in a
    directory of its own with its file passed as ``--config``; key -> CompletedProcess."""
    procs = {}
    for key, (args, env, toml) in cases.items():
        cwd = tmp_path_factory.mktemp("-".join(key) if isinstance(key, tuple) else key)
        if toml is not None:
            (cwd / "ferry.toml").write_text(toml)
            args = [*args, "--config", "ferry.toml"]
        procs[key] = subprocess.Popen(ferry_cmd(*args), cwd=cwd, env=clean_env(env), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=text)
    done = {}
    for key, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=60)
        done[key] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    return done

