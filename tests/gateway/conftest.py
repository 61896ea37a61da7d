"""Fixtures of the gateway tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gateway import cli


@pytest.fixture
def ferry_main(capsys, monkeypatch):
    """``run_ferry`` in this process: ``gateway.cli.main(ARGS)`` in ``cwd`` with the
    environment ``run_ferry`` gives (no FERRY_* variables but ``env``'s); its exit
    code and output (bytes) as a CompletedProcess."""

    def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        with monkeypatch.context() as mp:
            mp.chdir(cwd)
            for name in [n for n in os.environ if n.startswith("FERRY_")]:
                mp.delenv(name)
            for name, value in (env or {}).items():
                mp.setenv(name, value)
            code = cli.main(list(args))
        out = capsys.readouterr()
        return subprocess.CompletedProcess(["ferry", *args], code, out.out.encode(), out.err.encode())

    return run
