"""The real Pravega client (PyPI ``pravega`` 0.3.8) for the tests, in its own venv.

The package is the Rust client in a wheel, built only for CPython 3.10 and
3.11 (pravega-client.md section 1), so its venv is made with a 3.11
interpreter whatever runs the suite: ``python3.11`` on PATH, else this one if
it is 3.10/3.11, else the tests skip and say why. Created once under
``.venv/clients/pravega_0.3.8`` (a ``.ready`` stamp marks a complete install).

A scenario script from ``tests/pravega/clients/`` runs in a subprocess with a
hard timeout (the client panics in background tasks rather than raising, so a
hang is the failure mode to expect: pravega-client.md section 4); its
``RUST_LOG`` output is kept and shown when it fails.

Ferry's Pravega listeners require credentials (docs/pravega.md,
"Authentication"), so every scenario logs in as the root user ``iggy``/``iggy``
(:data:`ROOT_CREDENTIALS`, the client's own environment variables; the scripts
make their StreamManager with ``auth_enabled=True``) unless ``env`` says otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from filelock_shim import exclusive

ROOT = Path(__file__).resolve().parents[2]
CLIENTS_DIR = ROOT / ".venv" / "clients"
SCRIPTS = ROOT / "tests" / "pravega" / "clients"
SPEC = "pravega==0.3.8"
INSTALL_TIMEOUT_S = 900  # a cold pip install on CI; not a test timing threshold
SCENARIO_TIMEOUT_S = 240  # a hung client must not hang the suite
LOG_TAIL = 12_000  # characters of the client's log shown on failure
# The environment the 0.3.8 client reads its Basic credentials from (with auth_enabled=True).
ROOT_CREDENTIALS = {"pravega_client_auth_method": "Basic", "pravega_client_auth_username": "iggy",
                    "pravega_client_auth_password": "iggy"}


def credentials(username: str, password: str) -> dict:
    """The client's environment for logging in as ``username``."""
    return {**ROOT_CREDENTIALS, "pravega_client_auth_username": username, "pravega_client_auth_password": password}


def _interpreter() -> str | None:
    found = shutil.which("python3.11")
    if found:
        return found
    if sys.version_info[:2] in ((3, 10), (3, 11)):
        return sys.executable
    return None


def client_python() -> Path:
    """The interpreter of the pravega client's venv (created once, then cached)."""
    venv = CLIENTS_DIR / SPEC.replace("=", "_")
    python = venv / "bin" / "python"
    stamp = venv / ".ready"
    with exclusive(CLIENTS_DIR / ".lock"):
        if not stamp.exists():
            base = _interpreter()
            if base is None:
                pytest.skip("pravega 0.3.8 ships wheels for CPython 3.10/3.11 only; no python3.11 here")
            subprocess.run([base, "-m", "venv", "--clear", str(venv)], check=True)
            subprocess.run([str(python), "-m", "pip", "install", "-q", SPEC], check=True, timeout=INSTALL_TIMEOUT_S)
            stamp.write_text(SPEC)
    return python


def start_scenario(script: str, *args: str, rust_log: str = "warn", env: dict | None = None,
                   stdin: bool = False) -> subprocess.Popen:
    """Start ``clients/<script> ARGS`` (for tests that act while it runs; ``stdin``: a pipe
    the test writes to, or closes, to let the script go on)."""
    return subprocess.Popen([str(client_python()), "-u", str(SCRIPTS / script), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.PIPE if stdin else None, text=True,
                            env={**os.environ, "PYTHONPATH": "", "RUST_LOG": rust_log, "RUST_BACKTRACE": "1",
                                 **ROOT_CREDENTIALS, **(env or {})})


def finish(proc: subprocess.Popen, script: str, timeout: float = SCENARIO_TIMEOUT_S) -> list[dict]:
    """Wait for a started scenario; its JSON lines, or a test failure with its log."""
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        pytest.fail(f"{script} hung past {timeout} s\nstdout:\n{stdout}\nclient log (tail):\n{stderr[-LOG_TAIL:]}")
    lines = [json_head(line) for line in stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        pytest.fail(f"{script} failed ({proc.returncode}):\nstdout:\n{stdout}\nclient log (tail):\n{stderr[-LOG_TAIL:]}")
    return lines


def json_head(line: str) -> dict:
    """The JSON object a line starts with: the client's log threads share stdout, so a log
    record may follow it on the same line."""
    return json.JSONDecoder().raw_decode(line)[0]


def run_scenario(script: str, *args: str, timeout: float = SCENARIO_TIMEOUT_S, env: dict | None = None) -> dict[str, dict]:
    """Run a scenario to the end; ``{step: fields}`` (``env``: extra environment, e.g. credentials)."""
    lines = finish(start_scenario(script, *args, env=env), script, timeout)
    return {line.pop("step"): line for line in lines}
