#!/usr/bin/env python3
"""The Pravega Python client's own tests against ``ferry serve`` (issue 30; docs/pravega.md
"The client's own tests").

What it does, each time:

1. Gets the tests of the client release the project uses, ``pravega`` 0.3.8, into a cache
   directory, once: the release's source distribution on PyPI (``pravega-0.3.8.tar.gz``,
   checked against :data:`SDIST_SHA256`) holds ``tests/`` and ``requirements.txt`` exactly as
   tag v0.3.8 (commit :data:`SOURCE_COMMIT`) of github.com/pravega/pravega-client-python has
   them. ``pip download`` cannot fetch it (pip would build the Rust crate to read its
   metadata), so it comes from PyPI's JSON API with urllib; put the file in the cache
   directory to run offline.
2. Makes a CPython 3.11 venv there (the wheel is built for 3.10/3.11 only) with ``pravega==0.3.8``
   and the test requirements the release pins (pytest, pytest-timeout, aiounittest; not
   pytest-cov, which measures the client's own coverage).
3. Copies the tests to a temporary directory and changes one thing in them: the controller
   URI ``tcp://127.0.0.1:9090`` (a Pravega standalone's) becomes the gateway's.
4. Starts ``ferry serve`` with only the two Pravega listeners on free ports over a temporary
   data directory, through ``serve_checked.py`` beside this script: the tests make their
   ``StreamManager`` with ``auth_enabled=False``, so both listeners admit clients without
   credentials as the root user (``anonymous_user``, docs/pravega.md "Opening the door"; the
   root password is random). ``serve_checked.py`` also watches every read the segment store
   answers and, with ``--fsync-delays`` above 0, slows the log's fdatasync by that many
   milliseconds: no reader may get a byte its writer has not been acknowledged for.
5. Runs ``pytest tests --timeout=300`` with the venv's Python, as the release's CI does
   (.github/workflows/python_test.yml), once per fsync delay, each time against a new gateway.
6. Prints one row per test (passed, failed, skipped, or listed in ``expected.txt`` beside this
   script with the Ferry limit that fails it), the counts, and the read watch's figures; exits 1
   when a test not listed there failed or a read went past an acknowledged append.

Needs: python3.11 and network access to PyPI the first time; stdlib only. Not collected by
pytest (no ``test_`` prefix) and not part of ``make test`` (the suite writes 100 MB in one test
and takes minutes): ``make pravega-suite`` runs it; ``--help`` shows the options.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO / "tests" / "support"))
from serve_banner import banner_or_exit, terminate  # noqa: E402 - shared with the test harness
EXPECTED_FILE = HERE / "expected.txt"
SERVE = HERE / "serve_checked.py"
PACKAGE, VERSION = "pravega", "0.3.8"
SDIST = f"{PACKAGE}-{VERSION}.tar.gz"
SDIST_SHA256 = "5b7ba63514265dc28a6415b8085612881c28c4c33124a6d97d2cdc81765fadee"  # PyPI's, for the file above
SOURCE_COMMIT = "3ab7eb66f209c53e5acc36b46391bf6b359bd50b"  # tag v0.3.8; its tests/ equal the sdist's
PYPI_JSON = f"https://pypi.org/pypi/{PACKAGE}/{VERSION}/json"
NOT_NEEDED = {"pytest-cov"}  # the release's requirements.txt: coverage of the client itself
UPSTREAM_URI = "tcp://127.0.0.1:9090"  # what every test passes to StreamManager
DEFAULT_CACHE = Path(os.environ.get("FERRY_PRAVEGA_SUITE_CACHE", Path.home() / ".cache" / "ferry" / "pravega-suite"))
TEST_TIMEOUT_S = 300  # per test: the release's CI (pytest --timeout=300)
RUN_WALL_LIMIT_S = 3600  # one pytest run, all tests; a hung client must not hang the runner
SERVE_START_LIMIT_S = 60
INSTALL_TIMEOUT_S = 900  # a cold pip install; not a test timing threshold
ROOT_USER = "iggy"  # ferry serve's root user (docs/configuration.md [auth])
DEFAULT_DELAYS = "0,50"  # ms: as configured, then each fdatasync 50 ms slower (Ferry's group commit waits <= 5 ms)


@dataclass
class Result:
    name: str  # file::Class::test
    state: str  # PASSED FAILED ERROR SKIPPED LIMIT (failed, listed in expected.txt) MISSING
    seconds: float = 0.0
    note: str = ""


# -- the sources and the client ---------------------------------------------------------
def fetch_sdist(cache: Path) -> Path:
    """The release's sdist in ``cache``, downloaded once from PyPI and checked."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / SDIST
    if not path.exists():
        print(f"fetching {SDIST} from PyPI into {cache}", flush=True)
        with urllib.request.urlopen(PYPI_JSON, timeout=60) as resp:
            files = json.load(resp)["urls"]
        url = next((f["url"] for f in files if f["filename"] == SDIST), None)
        if url is None:
            sys.exit(f"PyPI lists no {SDIST}")
        tmp = path.with_suffix(".part")
        with urllib.request.urlopen(url, timeout=120) as resp, open(tmp, "wb") as out:
            shutil.copyfileobj(resp, out)
        tmp.rename(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        sys.exit(f"{path}: sha256 {digest}, expected {SDIST_SHA256} (delete it to fetch it again)")
    return path


def extract_tests(sdist: Path, into: Path) -> tuple[Path, list[str]]:
    """``tests/`` of the sdist in ``into/tests``; the pins of its requirements.txt."""
    prefix = f"{PACKAGE}-{VERSION}/"
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.isfile()
                   and (m.name.startswith(prefix + "tests/") or m.name == prefix + "requirements.txt")]
        for m in members:
            m.name = m.name[len(prefix):]
        tar.extractall(into, members=members, filter="data")
    pins = [line.strip() for line in (into / "requirements.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    return into / "tests", [p for p in pins if re.split(r"[=<>!~ ]", p)[0] not in NOT_NEEDED]


def client_python(cache: Path, pins: list[str]) -> Path:
    """The venv's interpreter, with the client and the test pins installed once."""
    venv = cache / f"venv-{VERSION}"
    python = venv / "bin" / "python"
    stamp = venv / ".ready"
    want = "\n".join([f"{PACKAGE}=={VERSION}", *pins])
    if stamp.exists() and stamp.read_text() == want:
        return python
    base = shutil.which("python3.11") or (sys.executable if sys.version_info[:2] in ((3, 10), (3, 11)) else None)
    if base is None:
        sys.exit(f"{PACKAGE} {VERSION} ships wheels for CPython 3.10/3.11 only; no python3.11 here")
    print(f"making the client venv {venv}", flush=True)
    subprocess.run([base, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *want.split("\n")], check=True,
                   timeout=INSTALL_TIMEOUT_S)
    stamp.write_text(want)
    return python


def point_at(tests: Path, uri: str) -> dict[str, int]:
    """Replace the upstream controller URI with ``uri`` in every test file; how many per file."""
    counts = {}
    for path in sorted(tests.glob("*.py")):
        text = path.read_text()
        counts[path.name] = text.count(UPSTREAM_URI)
        path.write_text(text.replace(UPSTREAM_URI, uri))
    return counts


def read_expected(path: Path) -> dict[str, str]:
    """expected.txt: ``<test id> <reason>`` per line (``file::Class::test``); ``#`` comments."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, reason = line.partition(" ")
            out[key] = reason.strip()
    return out


# -- the gateway --------------------------------------------------------------------------
class Gateway:
    """``ferry serve`` (through serve_checked.py) with the Pravega listeners, in ``workdir``."""

    def __init__(self, workdir: Path, delay_ms: float) -> None:
        self.workdir, self.delay_ms = workdir, delay_ms
        self.proc: subprocess.Popen | None = None
        self.controller = self.segment_store = 0
        self.log = workdir / "serve.log"
        self.report = workdir / "read-watch.json"

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FERRY_")}
        env |= {"PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO),
                "FERRY_AUTH_ROOT_PASSWORD": secrets.token_urlsafe(16),
                "FERRY_PRAVEGA_ANONYMOUS_USER": ROOT_USER, "FERRY_PRAVEGA_CONTROLLER_ANONYMOUS_USER": ROOT_USER}
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(SERVE), "--fsync-delay-ms", str(self.delay_ms), "--report", str(self.report),
                 "--", "serve", "--data", str(self.workdir / "data"), "--host", "127.0.0.1",
                 "--only", "pravega,pravega_controller", "--pravega-port", "0", "--pravega-controller-port", "0",
                 "--fsync", "batch"],
                cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=err)
        banner = self._banner()
        ports = dict(re.findall(r"^\s+(pravega\w*)\s+127\.0\.0\.1:(\d+)/tcp", banner, re.MULTILINE))
        if set(ports) != {"pravega", "pravega_controller"}:
            self.stop()
            sys.exit(f"ferry serve printed no Pravega ports:\n{banner}")
        self.segment_store, self.controller = int(ports["pravega"]), int(ports["pravega_controller"])

    def _banner(self) -> str:
        return banner_or_exit(self.proc, SERVE_START_LIMIT_S, self.log, self.stop)

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        terminate(self.proc)
        self.proc.stdout.close()
        return self.proc.returncode

    def watch(self) -> dict:
        return json.loads(self.report.read_text()) if self.report.exists() else {}


# -- running ------------------------------------------------------------------------------
def run_pytest(python: Path, tests: Path, select: str, out: Path) -> tuple[int, Path, Path]:
    """``pytest tests`` as the release's CI runs it; (exit code, junit xml, log)."""
    junit, log = out.with_suffix(".xml"), out.with_suffix(".log")
    cmd = [str(python), "-m", "pytest", "tests", "-p", "no:cacheprovider", f"--timeout={TEST_TIMEOUT_S}", "-v",
           "-rA", f"--junitxml={junit}"]
    if select:
        cmd += ["-k", select]
    env = {k: v for k, v in os.environ.items() if not k.startswith("pravega_client_")}
    env |= {"PYTHONPATH": "", "RUST_BACKTRACE": "1", "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
    print("+", shlex.join(cmd), f"(in {tests.parent})", flush=True)
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, cwd=tests.parent, env=env, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            code = proc.wait(RUN_WALL_LIMIT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            code = proc.wait()
    return code, junit, log


def results_of(junit: Path, expected: dict[str, str]) -> list[Result]:
    """One row per test case of the junit report; a failure listed in expected.txt is LIMIT."""
    rows = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        name = f"{module[-2] if len(module) > 1 else ''}.py::{module[-1]}::{case.get('name')}"
        state, note = "PASSED", ""
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                state = {"failure": "FAILED", "error": "ERROR", "skipped": "SKIPPED"}[tag]
                note = reason_of(el)
                break
        if state in ("FAILED", "ERROR") and name in expected:
            state, note = "LIMIT", f"{expected[name]} [{note}]"
        rows.append(Result(name, state, float(case.get("time") or 0), note))
    return rows


def reason_of(el: ET.Element) -> str:
    """The telling line of a junit failure: the exception the client raised, else the message."""
    text = el.text or ""
    raised = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    for line in raised:
        if "Error" in line or "Exception" in line or "assert" in line.lower():
            return line[:300]
    if raised:
        return raised[0][:300]
    return (el.get("message") or (text.strip().splitlines() or [""])[-1])[:300]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                    help="where the sdist and the client venv are kept "
                    "($FERRY_PRAVEGA_SUITE_CACHE; default %(default)s)")
    ap.add_argument("--fsync-delays", default=DEFAULT_DELAYS,
                    help="one run per value: milliseconds added to every fdatasync (default %(default)s)")
    ap.add_argument("-k", dest="select", default="", help="pytest -k expression: run only these tests")
    ap.add_argument("--keep", action="store_true", help="keep the gateways' data directories (logs are always kept)")
    args = ap.parse_args()

    sdist = fetch_sdist(args.cache)
    workdir = Path(tempfile.mkdtemp(prefix="ferry-pravega-suite-"))
    expected = read_expected(EXPECTED_FILE)
    print(f"client tests: {SDIST} (= pravega-client-python tag v{VERSION}, commit {SOURCE_COMMIT}); logs in {workdir}")
    failed, violations = False, 0
    for delay in [float(d) for d in args.fsync_delays.split(",") if d.strip()]:
        run = workdir / f"fsync+{delay:g}ms"
        run.mkdir()
        tests, pins = extract_tests(sdist, run)
        python = client_python(args.cache, pins)
        gw = Gateway(run, delay)
        gw.start()
        counts = point_at(tests, f"tcp://127.0.0.1:{gw.controller}")
        print(f"\n== fsync +{delay:g} ms: controller 127.0.0.1:{gw.controller}, segment store "
              f"127.0.0.1:{gw.segment_store}; URI replaced {counts}", flush=True)
        start = time.monotonic()
        try:
            code, junit, log = run_pytest(python, tests, args.select, run / "pytest")
        finally:
            serve_code = gw.stop()
            if not args.keep:
                shutil.rmtree(run / "data", ignore_errors=True)
        rows = results_of(junit, expected) if junit.exists() else []
        if not rows:
            rows = [Result("(pytest)", "ERROR", time.monotonic() - start, f"exit {code}, no junit report; see {log}")]
        failed |= report(rows, code, log)
        watch = gw.watch()
        violations += watch.get("violations", 1)
        read_passed = any(r.state == "PASSED" and r.name.startswith("pravega_reader_test.py") for r in rows)
        if read_passed and not watch.get("reads_checked"):  # the watch lost its hooks: say so, fail
            print("the read watch saw no read although reading tests passed: serve_checked.py no longer "
                  "hooks SegmentStoreSession")
            failed = True
        print(f"ferry serve exited {serve_code} (log {gw.log})")
        print("read watch: " + ", ".join(f"{k} {v}" for k, v in watch.items() if k != "first_violations"))
        for v in watch.get("first_violations", []):
            print(f"  READ PAST THE ACKNOWLEDGED END: {v}")
    if violations:
        print(f"\n{violations} read(s) past an acknowledged append")
    return 1 if failed or violations else 0


def report(rows: list[Result], code: int, log: Path) -> bool:
    """Print the rows and counts; True when something failed that expected.txt does not list."""
    print(f"\n{'test':<62} {'result':<8} {'time':>7}  note")
    for r in rows:
        print(f"{r.name:<62} {r.state:<8} {r.seconds:6.1f}s  {r.note}")
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.state] = counts.get(r.state, 0) + 1
    print(", ".join(f"{k.lower()} {v}" for k, v in sorted(counts.items())) + f"  (pytest exit {code}; log {log})")
    bad = [r.name for r in rows if r.state in ("FAILED", "ERROR")]
    if bad:
        print("failing and not in expected.txt: " + " ".join(bad))
    return bool(bad)


if __name__ == "__main__":
    sys.exit(main())
