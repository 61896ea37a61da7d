"""The Makefile's newcomer path, run for real with GNU make against a fake
interpreter (so nothing is downloaded and the shared .venv is never touched):
which Python it picks, one quiet progress line before the banner, and a failed
install that names its log and exit code. One test runs the real server through
`make run FERRY_ARGS=...` with the project's installed .venv (no install)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from ferry_harness import free_port, read_until_ready

ROOT = Path(__file__).parents[2]
MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="GNU make is not installed")

# A stand-in for `pythonX.Y`: answers the Makefile's version probe (-c) with
# FAKE_OK's exit code, `-m venv DIR` with a venv whose `ferry` prints a banner,
# and `-m pip install` with 100 lines of noise and FAKE_PIP_RC's exit code.
FAKE_PYTHON = """#!/bin/sh
case "$1" in
  -c) exit {ok} ;;
  --version) echo "Python {version}"; exit 0 ;;
  -m)
    case "$2" in
      venv) mkdir -p "$3/bin"; cp "$0" "$3/bin/python"
            printf '#!/bin/sh\\necho "banner: $*"\\necho ready\\n' > "$3/bin/ferry"; chmod +x "$3/bin/ferry"
            printf '#!/bin/sh\\necho "pytest: $*"\\n' > "$3/bin/pytest"; chmod +x "$3/bin/pytest"; exit 0 ;;
      pip) shift 2; echo "$*" > "$(dirname "$0")/../pip-args"
           i=0; while [ $i -lt 100 ]; do echo "Collecting package-$i"; i=$((i+1)); done
           echo "some warning" >&2; exit ${{FAKE_PIP_RC:-0}} ;;
    esac ;;
esac
exit 1
"""


def fake_python(where: Path, name: str, *, version: str = "3.12.0") -> Path:
    ok = 0 if tuple(int(p) for p in version.split(".")[:2]) >= (3, 11) else 1
    where.mkdir(parents=True, exist_ok=True)
    path = where / name
    path.write_text(FAKE_PYTHON.format(ok=ok, version=version))
    path.chmod(0o755)
    return path


def make(*args: str, path: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "MAKEFLAGS", "MAKELEVEL")}
    if path is not None:
        base["PATH"] = path
    return subprocess.run([MAKE, "--no-print-directory", "-C", str(ROOT), *args], env=base | (env or {}),
                          capture_output=True, text=True, timeout=120)


def test_run_prints_one_progress_line_then_the_banner(tmp_path):
    py = fake_python(tmp_path / "bin", "python3.12")
    venv = tmp_path / "venv"
    first = make("run", f"PYTHON={py}", f"VENV={venv}", "FERRY_ARGS=--fsync always")
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [f"installing Ferry into {venv} (first run only)...",
                                         "banner: serve --fsync always", "ready"]
    assert first.stderr == ""
    log = (venv / "install.log").read_text()
    assert log.count("Collecting package-") == 100 and "some warning" in log  # all of pip's output, kept
    assert (tmp_path / "venv" / "pip-args").read_text().split() == ["install", "-e", "."]
    # the stamp: a second run installs nothing and prints only the banner
    again = make("run", f"PYTHON={py}", f"VENV={venv}")
    assert again.returncode == 0
    assert again.stdout.splitlines() == ["banner: serve", "ready"]


def test_failed_install_names_its_log_and_exit_code(tmp_path):
    py = fake_python(tmp_path / "bin", "python3.12")
    venv = tmp_path / "venv"
    proc = make("run", f"PYTHON={py}", f"VENV={venv}", env={"FAKE_PIP_RC": "3"})
    assert proc.returncode != 0
    assert proc.stdout.splitlines() == [f"installing Ferry into {venv} (first run only)..."]
    assert f"pip install failed (exit code 3); full output in {venv}/install.log" in proc.stderr
    tail = (venv / "install.log").read_text().splitlines()[-15:]  # the log's end, not all 100 lines
    assert "\n".join(tail) in proc.stderr and "Collecting package-0\n" not in proc.stderr
    assert "banner" not in proc.stdout + proc.stderr
    assert not list(venv.glob(".stamp-*"))  # the next run tries again


def test_install_test_is_quiet_too(tmp_path):
    py = fake_python(tmp_path / "bin", "python3.12")
    venv = tmp_path / "venv"
    proc = make("install-test", f"PYTHON={py}", f"VENV={venv}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"installing Ferry and its test tools into {venv} (first run only)..."]
    assert (venv / "pip-args").read_text().split() == ["install", "-e", ".[test]"]
    assert len(list(venv.glob(".stamp-test-*"))) == 1 and len(list(venv.glob(".stamp-run-*"))) == 1


def _path_with(fakes: Path) -> str:
    # the fakes first, then the system tools the Makefile uses (cat, cksum, tail, ...)
    return f"{fakes}:/usr/bin:/bin"


def test_finds_the_first_python_that_runs_and_is_new_enough(tmp_path):
    fakes = tmp_path / "bin"
    fake_python(fakes, "python3.13", version="3.10.4")  # like a pyenv shim of an unselected version: fails
    fake_python(fakes, "python3.12", version="3.12.1")
    fake_python(fakes, "python3.11", version="3.11.7")
    proc = make("-s", "print-python", path=_path_with(fakes))
    assert proc.stdout.strip() == "python3.12"
    # PYTHON overrides the search, from the environment or the command line
    assert make("-s", "print-python", path=_path_with(fakes), env={"PYTHON": "python3.11"}).stdout.strip() == "python3.11"
    assert make("-s", "print-python", "PYTHON=python3.13", path=_path_with(fakes)).stdout.strip() == "python3.13"


def test_no_suitable_python_says_what_to_do(tmp_path):
    fakes = tmp_path / "bin"
    for name in ("python3.13", "python3.12", "python3.11", "python3"):
        fake_python(fakes, name, version="3.9.18")
    assert make("-s", "print-python", path=_path_with(fakes)).stdout.strip() == ""
    proc = make("run", f"VENV={tmp_path / 'venv'}", path=_path_with(fakes))
    assert proc.returncode != 0
    assert ("no Python >= 3.11 found (tried python3.13 python3.12 python3.11 python3); install one, "
            "or run PYTHON=/path/to/python3.11 make run") in proc.stderr
    assert not (tmp_path / "venv").exists()


def test_an_old_python_given_explicitly_is_refused(tmp_path):
    old = fake_python(tmp_path / "bin", "python3.10", version="3.10.12")
    proc = make("run", f"PYTHON={old}", f"VENV={tmp_path / 'venv'}")
    assert proc.returncode != 0
    assert f"PYTHON={old}: not a Python >= 3.11 (Python 3.10.12)" in proc.stderr
    assert not (tmp_path / "venv").exists()


def test_dry_run_of_the_real_targets_keeps_pip_quiet(tmp_path):
    # The real recipe (no fakes): pip's output is redirected to the log.
    text = make("-n", "run", f"VENV={tmp_path / 'v'}", "PYTHON=python3").stdout
    assert f"-m pip install -e . >{tmp_path / 'v'}/install.log 2>&1" in text
    assert "ferry serve" in text


def test_run_with_ferry_args_starts_the_real_server(tmp_path):
    """`make run FERRY_ARGS=...` as docs/quickstart.md shows it, with the real `ferry`:
    make exports command-line variables to its recipes, and a FERRY_ARGS in the
    server's environment was refused as an unknown config variable (issue 28). The
    project's own .venv is used, so nothing is installed (skipped if make would)."""
    venv = ROOT / ".venv"
    if not (venv / "bin" / "ferry").exists():
        pytest.skip("no .venv with ferry installed")
    port = free_port()
    args = [f"VENV={venv}", f"FERRY_ARGS=--only nats --nats-port {port} --host 127.0.0.1 --data {tmp_path / 'data'}"]
    if "pip install" in make("-n", "run", *args).stdout:
        pytest.skip(".venv's install stamp is stale: `make run` would reinstall into it")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("FERRY_") and k not in ("PYTHON", "MAKEFLAGS", "MAKELEVEL")}
    env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen([MAKE, "--no-print-directory", "-C", str(ROOT), "run", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out = _read_until_ready(proc, limit_s=60)
        assert f"127.0.0.1:{port}/tcp" in out, out
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)   # make and the server it started: one process group
            proc.wait(30)
        except ProcessLookupError:
            pass   # already gone (a failed start)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        errors = proc.stderr.read().decode(errors="replace")
        proc.stdout.close()
        proc.stderr.close()
    assert "unknown environment variable" not in errors, errors


def _read_until_ready(proc: subprocess.Popen, limit_s: float) -> str:
    """The server's stdout up to its ``ready`` line (``limit_s`` bounds a hung start,
    no timing is asserted); fails with stderr when it exits first."""
    def exited(code: int, buf: bytes) -> Exception:
        return AssertionError(f"make run exited ({code}): {buf!r}\n{proc.stderr.read().decode(errors='replace')}")

    try:
        return read_until_ready(proc, limit_s, exited)
    except TimeoutError as hung:
        raise AssertionError(f"no banner within {limit_s} s: {hung}") from None
