#!/usr/bin/env python3
"""librdkafka's own test suite against ``ferry serve`` (issue 25; docs/kafka.md "librdkafka's test suite").

What it does, each time:

1. Gets librdkafka's sources with their ``tests/`` directory into a cache directory, once:
   the npm package ``@confluentinc/kafka-javascript`` bundles them (``deps/librdkafka``;
   1.10.1 holds librdkafka 2.15.1), fetched with ``npm pack`` and built with
   ``./configure --disable-gssapi && make libs && make -C tests build`` (a few minutes).
2. Starts ``ferry serve`` with only the Kafka listener on a free port over a temporary data
   directory, as the suite's "default" scenario expects a broker (Kafka's trivup cluster,
   ``tests/scenarios/default.json``): topics auto-created with 4 partitions, advertised as
   127.0.0.1; SASL/PLAIN as the root user, with a random password (Ferry's secure default:
   every connection logs in). A second gateway without auto-creation serves the tests of
   the ``noautocreate`` scenario.
3. Writes the suite's ``test.conf`` (bootstrap, SASL, ``test.timeout.multiplier``) and runs
   each chosen test number alone (``TESTS=NNNN test-runner -p1 -Q -E -L``: one at a time,
   quick mode, no socket fault injection, no broker-less tests) under a wall-clock limit,
   with ``TEST_KAFKA_VERSION`` set to the Kafka release whose API versions Ferry's
   ApiVersions ranges match, so the suite's version gates open what Ferry serves.
4. Prints one row per test (passed, failed, skipped by the suite, or listed in
   ``ignore.txt`` beside this script with the reason) and the counts; exits 1 when a test
   not listed there failed.

Needs: npm, a C/C++ toolchain, make, and network access the first time (rapidjson-dev
lets three more tests run); stdlib only. Not collected by pytest (no ``test_`` prefix) and
not part of ``make test``: tests 0000-0150 take about 10 minutes after the build (quick
mode; ``--full``, the suite's full mode, much longer). ``make rdkafka-suite`` runs it;
``--tests 0001,0030-0040`` picks numbers, ``--all`` also runs those in ``ignore.txt``,
``--help`` shows the rest.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO / "tests" / "support"))
from serve_banner import banner_or_exit, terminate  # noqa: E402 - shared with the test harness
IGNORE_FILE = HERE / "ignore.txt"
PACKAGE = "@confluentinc/kafka-javascript"
PACKAGE_VERSION = "1.10.1"  # bundles librdkafka 2.15.1 with deps/librdkafka/tests
DEFAULT_CACHE = Path(os.environ.get("FERRY_RDKAFKA_CACHE", Path.home() / ".cache" / "ferry" / "rdkafka-suite"))
# Ferry's ApiVersions ranges (docs/kafka.md "APIs served") are Kafka 2.8's for the APIs the
# suite gates on: Fetch 12, OffsetFetch 7, DeleteRecords 2, DescribeCluster 0-1. The suite's
# default (2.4.0.0) would skip tests for features Ferry serves; nothing it gates on lies
# between 2.8 and 3.1 (0126, OIDC, needs an identity provider).
KAFKA_VERSION = "2.8.0.0"
# Each test's own limit is 30 s x test.timeout.multiplier unless it sets a longer one;
# this wall-clock limit catches a runner that hangs past its own (the suite's tests may).
TEST_WALL_LIMIT_S = 900
TIMEOUT_MULTIPLIER = 3  # shared 2-core machines: kafka.md section 5
SERVE_START_LIMIT_S = 60
PARTITIONS = 4  # the suite's num.partitions (tests/scenarios/default.json)
ROOT_USER = "iggy"  # ferry serve's root user (docs/configuration.md [auth])
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# A row of the runner's summary: "| 0001_multiobj   |     PASSED |   3.120s | <reason>"
ROW = re.compile(r"^\|\s*(\d{4}\w*)\s*\|\s*([A-Z]+)\s*\|\s*([\d.]+)s\s*\|\s?(.*)$")
# A failure's first line: '### Test "0011_produce_batch (subtest:629)" failed at file.c:718:fn() at <date>: ###'
FAILURE = re.compile(r'^### Test "([^"]+)" failed at (\S+?):\w*\(\)')


@dataclass(frozen=True)
class SuiteTest:
    """One entry of test.c's ``tests[]`` table."""

    name: str
    flags: str
    scenario: str = "default"

    @property
    def number(self) -> str:
        return self.name[:4]

    @property
    def local(self) -> bool:  # TEST_F_LOCAL: a mock cluster or no cluster, never the broker
        return "TEST_F_LOCAL" in self.flags

    @property
    def sockem(self) -> bool:  # TEST_F_SOCKEM: socket fault injection (-E leaves them out)
        return "TEST_F_SOCKEM" in self.flags

    @property
    def manual(self) -> bool:
        return "TEST_F_MANUAL" in self.flags


@dataclass
class Result:
    name: str
    state: str  # PASSED FAILED SKIPPED (by the suite) TIMEOUT IGNORED BROKERLESS SOCKEM
    seconds: float = 0.0
    note: str = ""


# -- the suite ---------------------------------------------------------------------------
def run(cmd, cwd, **kw) -> None:
    print("+", " ".join(map(str, cmd)), f"(in {cwd})", flush=True)
    subprocess.run(cmd, cwd=cwd, check=True, **kw)


def ensure_build(cache: Path, version: str, jobs: int) -> Path:
    """The built ``deps/librdkafka`` directory of the package, fetched and built if absent."""
    cache.mkdir(parents=True, exist_ok=True)
    tgz = cache / f"confluentinc-kafka-javascript-{version}.tgz"
    if not tgz.exists():
        if shutil.which("npm") is None:
            sys.exit("npm is needed once to fetch the package (or put its .tgz in " + str(cache) + ")")
        run(["npm", "pack", f"{PACKAGE}@{version}", "--pack-destination", str(cache)], cwd=cache)
    src = cache / f"kafka-javascript-{version}"
    rdk = src / "package" / "deps" / "librdkafka"
    if not rdk.is_dir():
        tmp = cache / f".extract-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        with tarfile.open(tgz) as tar:
            tar.extractall(tmp, filter="data")
        tmp.rename(src)
    runner = rdk / "tests" / "test-runner"
    if not runner.exists():
        log = cache / "build.log"
        print(f"building librdkafka and its tests in {rdk} (a few minutes; output in {log})", flush=True)
        with open(log, "ab") as out:
            for step in (["./configure", "--disable-gssapi"], ["make", f"-j{jobs}", "libs"],
                         ["make", f"-j{jobs}", "-C", "tests", "build"]):
                try:
                    run(step, cwd=rdk, stdout=out, stderr=subprocess.STDOUT)
                except subprocess.CalledProcessError:
                    sys.exit(f"build step {' '.join(step)} failed; see {log}")
    return rdk


def suite_tests(rdk: Path) -> list[SuiteTest]:
    """Every entry of tests/test.c's ``tests[]`` table (name, flags, scenario)."""
    src = (rdk / "tests" / "test.c").read_text()
    start = src.index("struct test tests[] = {")
    block = src[start:src.index("{NULL}};", start)]
    out = []
    for chunk in block.split("_TEST(")[1:]:
        name = re.match(r"\s*(\w+)", chunk).group(1)
        flags = re.match(r"\s*\w+\s*,\s*([^,)]*)", chunk)
        scenario = re.search(r'\.scenario\s*=\s*"([^"]+)"', chunk)
        out.append(SuiteTest(name, flags.group(1).strip() if flags else "0",
                             scenario.group(1) if scenario else "default"))
    return out


def read_ignore(path: Path) -> dict[str, str]:
    """ignore.txt: ``<test name or number> <reason>`` per line; a line starting with ``#`` is
    a comment."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, reason = line.partition(" ")
        out[key] = reason.strip()
    return out


def ignored(test: SuiteTest, ignore: dict[str, str]) -> str | None:
    return ignore.get(test.name, ignore.get(test.number))


def parse_numbers(spec: str) -> set[str]:
    out = set()
    for part in spec.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-")
            out |= {f"{n:04d}" for n in range(int(lo), int(hi) + 1)}
        elif part:
            out.add(f"{int(part):04d}")
    return out


# -- the gateway --------------------------------------------------------------------------
class Gateway:
    """``ferry serve`` with only the Kafka listener, on a free port, in ``workdir``."""

    def __init__(self, workdir: Path, password: str, *, auto_create: bool) -> None:
        self.workdir, self.password, self.auto_create = workdir, password, auto_create
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.log = workdir / "serve.log"

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FERRY_")}
        # initial_rebalance_delay_ms stays 3 s, Kafka's group.initial.rebalance.delay.ms
        # default: the suite's group tests count on it (0089, 0113's comments).
        env |= {"PYTHONUNBUFFERED": "1", "FERRY_AUTH_ROOT_PASSWORD": self.password,
                "FERRY_KAFKA_DEFAULT_PARTITIONS": str(PARTITIONS),
                "FERRY_KAFKA_AUTO_CREATE_TOPICS": "true" if self.auto_create else "false"}
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gateway", "serve", "--data", str(self.workdir / "data"), "--host", "127.0.0.1",
                 "--only", "kafka", "--kafka-port", "0", "--fsync", "never"],
                cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=err)
        banner = self._banner()
        found = re.search(r"^\s+kafka\s+127\.0\.0\.1:(\d+)/tcp", banner, re.MULTILINE)
        if not found:
            self.stop()
            sys.exit(f"ferry serve printed no Kafka port:\n{banner}")
        self.port = int(found.group(1))

    def _banner(self) -> str:
        return banner_or_exit(self.proc, SERVE_START_LIMIT_S, self.log, self.stop)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None:
            terminate(self.proc)

    def test_conf(self, path: Path) -> Path:
        path.write_text("\n".join((
            f"bootstrap.servers=127.0.0.1:{self.port}",
            "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN",
            f"sasl.username={ROOT_USER}", f"sasl.password={self.password}",
            f"test.timeout.multiplier={TIMEOUT_MULTIPLIER}", "")))
        return path


# -- running ------------------------------------------------------------------------------
def run_number(rdk: Path, number: str, scenario: str, conf: Path, logdir: Path, args) -> list[Result]:
    """One test number's entries (of ``scenario``) through the runner; their rows."""
    env = os.environ | {"TESTS": number, "RDKAFKA_TEST_CONF": str(conf), "TEST_KAFKA_VERSION": args.kafka_version,
                        "LD_LIBRARY_PATH": "../src:../src-cpp"}
    log = logdir / f"{number}-{scenario}.log"
    start = time.monotonic()
    with open(log, "wb") as out:
        quick = [] if args.full else ["-Q"]
        proc = subprocess.Popen(["./test-runner", "-p1", *quick, "-E", "-L", "-s", scenario], cwd=rdk / "tests",
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            return [Result(number, "TIMEOUT", time.monotonic() - start, f"over {args.timeout} s; log {log}")]
    rows = []
    lines = [ANSI.sub("", line) for line in log.read_text(errors="replace").splitlines()]
    for line in lines:
        m = ROW.match(line)
        if m and m.group(1).startswith(number):
            rows.append(Result(m.group(1), m.group(2), float(m.group(3)), m.group(4).strip()))
    if not rows:  # the runner aborts without a summary when librdkafka threads outlive a failure
        for i, line in enumerate(lines):
            m = FAILURE.match(line)
            if m and m.group(1).startswith(number) and i + 1 < len(lines):
                rows.append(Result(m.group(1).split()[0], "FAILED", time.monotonic() - start,
                                   f"{m.group(1)} at {m.group(2)}: {lines[i + 1].strip()}"))
                break
    if not rows:
        rows.append(Result(number, "FAILED", time.monotonic() - start,
                           f"runner exited {proc.returncode} without a summary; log {log}"))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", default="0000-0150", help="test numbers: 0001,0030-0040 (default %(default)s)")
    ap.add_argument("--all", action="store_true", help="also run the tests ignore.txt lists")
    ap.add_argument("--full", action="store_true",
                    help="the suite's full mode (no -Q: every sub-test, more messages; much longer)")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                    help="where the package is fetched and built ($FERRY_RDKAFKA_CACHE; default %(default)s)")
    ap.add_argument("--version", default=PACKAGE_VERSION, help=f"{PACKAGE} version (default %(default)s)")
    ap.add_argument("--kafka-version", default=KAFKA_VERSION, help="TEST_KAFKA_VERSION (default %(default)s)")
    ap.add_argument("--timeout", type=float, default=TEST_WALL_LIMIT_S,
                    help="wall-clock limit per test number, seconds (default %(default)s)")
    ap.add_argument("--jobs", type=int, default=2, help="make -j for the build (default %(default)s)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the gateways' data directories too (the logs are always kept)")
    args = ap.parse_args()

    rdk = ensure_build(args.cache, args.version, args.jobs)
    ignore = read_ignore(IGNORE_FILE)
    wanted = parse_numbers(args.tests)
    chosen = [t for t in suite_tests(rdk) if t.number in wanted and not t.manual]
    results: list[Result] = []
    plan: dict[tuple[str, str], list[SuiteTest]] = {}
    for t in chosen:
        reason = ignored(t, ignore)
        if t.local:
            results.append(Result(t.name, "BROKERLESS", note="TEST_F_LOCAL: runs without a broker, not against Ferry"))
        elif t.sockem:
            results.append(Result(t.name, "SOCKEM", note="TEST_F_SOCKEM: socket fault injection, left out by -E"))
        elif reason and not args.all:
            results.append(Result(t.name, "IGNORED", note=reason))
        else:
            plan.setdefault((t.number, t.scenario.split(",")[0]), []).append(t)

    workdir = Path(tempfile.mkdtemp(prefix="ferry-rdkafka-"))
    logdir = workdir / "logs"
    logdir.mkdir()
    password = secrets.token_urlsafe(16)
    gateways: dict[str, Gateway] = {}
    try:
        for (number, scenario), entries in sorted(plan.items()):
            gw = gateways.get(scenario)
            if gw is None or not gw.alive():
                if gw is not None:
                    print(f"ferry serve ({scenario}) exited; restarting (see {gw.log})", flush=True)
                gdir = workdir / scenario
                gdir.mkdir(exist_ok=True)
                gw = gateways[scenario] = Gateway(gdir, password, auto_create=scenario != "noautocreate")
                gw.start()
                gw.test_conf(gdir / "test.conf")
            names = {t.name for t in entries}
            rows = [r for r in run_number(rdk, number, scenario, gw.workdir / "test.conf", logdir, args)
                    if r.name in names or r.name == number]
            for r in rows:
                reason = ignore.get(r.name, ignore.get(number))
                if reason and r.state != "PASSED":
                    r.note = f"{reason} [{r.state}: {r.note}]" if r.note else f"{reason} [{r.state}]"
                    r.state = "IGNORED"
            results += rows
            for r in rows:
                print(f"{r.name:<48} {r.state:<10} {r.seconds:8.1f}s  {r.note[:160]}", flush=True)
    finally:
        for gw in gateways.values():
            gw.stop()
        if not args.keep:
            for sub in gateways:
                shutil.rmtree(workdir / sub / "data", ignore_errors=True)
    return report(results, logdir)


def report(results: list[Result], logdir: Path) -> int:
    results.sort(key=lambda r: r.name)
    print(f"\n{'test':<48} {'result':<10} {'time':>9}  note")
    for r in results:
        print(f"{r.name:<48} {r.state:<10} {r.seconds:8.1f}s  {r.note[:200]}")
    counts: dict[str, int] = {}
    for r in results:
        counts[r.state] = counts.get(r.state, 0) + 1
    print("\n" + ", ".join(f"{k.lower()} {v}" for k, v in sorted(counts.items())))
    print(f"logs: {logdir}")
    failed = [r.name for r in results if r.state in ("FAILED", "TIMEOUT")]
    if failed:
        print("not passing and not in ignore.txt: " + " ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
