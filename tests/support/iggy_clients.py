"""Real Iggy clients for the tests: one cached venv per client, scenario runner.

The real Iggy clients clash on import names (``apache_iggy`` twice) and
pin different native runtimes, so each lives in its own virtualenv under
``.venv/clients/<name>``, created on first use with the running Python and
pip from PyPI, and reused afterwards (a ``.ready`` stamp marks a complete
install). A scenario script from ``tests/iggy/clients/`` then runs in a
subprocess against the gateway, which a background thread serves on
127.0.0.1 port 0 (``tests/support/ferry_harness.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from filelock_shim import exclusive


ROOT = Path(__file__).resolve().parents[2]
CLIENTS_DIR = ROOT / ".venv" / "clients"
SCRIPTS = ROOT / "tests" / "iggy" / "clients"
# Each real client and what it installs (xxhash: some scenario scripts check checksums).
CLIENTS = {
    "iggy-py==0.4.0": ("iggy-py==0.4.0",),
    "apache-iggy==0.5.0": ("apache-iggy==0.5.0",),
    "apache-iggy==0.6.0": ("apache-iggy==0.6.0",),
    "apache-iggy==0.7.0": ("apache-iggy==0.7.0",),
    "apache-iggy==0.8.0": ("apache-iggy==0.8.0",),
    "apache-iggy==0.9.0": ("apache-iggy==0.9.0",),
}
INSTALL_TIMEOUT_S = 900  # a cold pip install on CI; not a test timing threshold
SCENARIO_TIMEOUT_S = 300  # a hung client must not hang the suite


def client_python(spec: str) -> Path:
    """The interpreter of the venv holding ``spec`` (created once, then cached)."""
    venv = CLIENTS_DIR / spec.replace("=", "_")
    python = venv / "bin" / "python"
    stamp = venv / ".ready"
    with exclusive(CLIENTS_DIR / ".lock"):
        if not stamp.exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
            subprocess.run([str(python), "-m", "pip", "install", "-q", *CLIENTS[spec]], check=True,
                           timeout=INSTALL_TIMEOUT_S)
            stamp.write_text(spec)
    return python


def run_scenario(spec: str, script: str, port: int, *args: str) -> list[dict]:
    """Run ``clients/<script> PORT ARGS`` with ``spec``'s venv; return its JSON lines."""
    python = client_python(spec)
    proc = subprocess.run([str(python), str(SCRIPTS / script), str(port), *args], capture_output=True, text=True,
                          timeout=SCENARIO_TIMEOUT_S, env={**os.environ, "PYTHONPATH": ""})
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        pytest.fail(f"{script} with {spec} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return lines
