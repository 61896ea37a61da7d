"""Test tiers and parallel groups, decided in one place (issue 24, docs/testing.md).

Every test is in exactly one tier, a marker ``-m`` selects on:

* ``unit`` — no sockets, no subprocesses: codecs, state machines, the core on a
  temporary directory. ``make test-fast`` runs this tier. It is *enforced*: a unit
  test that binds or connects an internet socket, or starts a process, fails with a
  message saying which tier its module belongs in (:func:`_unit_guard`).
* ``integration`` — Ferry's own listeners on 127.0.0.1, driven by raw bytes or
  Ferry's own codecs, in this process.
* ``realclient`` — the programs and libraries users run (nats-py, apache-iggy,
  pravega, pyspark, httpx, aiohttp, curl, nats-server, node, Chromium, a ``ferry
  serve`` process) against a real gateway.

The tier is read from what a test module uses, not from a list to keep: a module
whose globals come from a real-client library, ``subprocess`` or the real-gateway
harness (:data:`REALCLIENT_ORIGINS`) is ``realclient``; else one that uses sockets
or Ferry's listeners and drivers (:data:`INTEGRATION_ORIGINS`) is
``integration``; else ``unit``. Test helper modules (``*_helpers.py``,
``tests/support``) count through what they import, one level down.

Parallel runs: the Makefile runs pytest-xdist with ``--dist loadfile``, so a file's
tests stay on one worker, in order: a module-scoped gateway starts once and
documentation blocks keep their order (docs/testing.md).

**Longest first.** xdist hands out files one at a time, to the worker that is about
to run dry, in collection order, unless it reorders them by *number of tests*
(its default, which put the few-but-long files last: a clean-clone run spent its
last minutes on one worker finishing the Spark documentation blocks). The Makefile
turns that off (``--no-loadscope-reorder``) and :func:`pytest_collection_modifyitems`
orders collection instead: the files of :data:`LONGEST_FILES` first (longest
first), then real-client files, then integration, then unit ones, so the many short
unit files fill the gaps at the end (longest-processing-time-first scheduling).
"""

from __future__ import annotations

import dis
import importlib
import importlib.util
import socket
import subprocess
import sys
import types
from pathlib import Path

import pytest
from argon2 import PasswordHasher
from hypothesis import settings as hypothesis_settings

import core.auth

# No time limit per example: Hypothesis's default deadline (200 ms) is a timing threshold,
# and on a loaded 2-core CI machine a 50 ms example took 425 ms and failed a run (the
# developers' guide: no timing thresholds in tests). Tests that set their own settings
# still may; every other one inherits this.
hypothesis_settings.register_profile("ferry", deadline=None)
hypothesis_settings.load_profile("ferry")

TESTS = Path(__file__).resolve().parent

# Module-name prefixes whose use makes a test module a real-client test.
REALCLIENT_ORIGINS = (
    "nats",  # nats-py (the `nats` package; adapters.nats is a different root)
    "httpx",
    "aiohttp",
    "pyspark",
    "pravega_client",
    "apache_iggy",
    "iggy_py",
    "subprocess",
    "asyncio.subprocess",
    "ferry_harness",  # a real gateway in a thread (or a `ferry serve` process) for real clients
    "nats_cluster",  # nats-server processes
    "nats_cluster_fixtures",
    "iggy_clients",
    "pravega_clients",
    "spark_session",
    "console_cdp",  # Chromium
    "confluent_kafka",  # librdkafka
    "aiokafka",
)
# ... and whose use makes one an integration test (sockets on loopback, in-process).
INTEGRATION_ORIGINS = (
    "socket",
    "ssl",
    "trio._highlevel_open_tcp_stream",
    "trio._highlevel_open_tcp_listeners",
    "trio._highlevel_serve_listeners",
    "trio_websocket",
    "aioquic.asyncio",
    "gateway.server",
    "gateway.listeners",
    "adapters.iggy.driver",
    "adapters.iggy.quic_driver",
    "adapters.iggy.ws_driver",
    "adapters.http.driver",
    "adapters.nats.driver",
    "adapters.pravega.driver",
    "adapters.kafka.driver",
)
TIERS = ("unit", "integration", "realclient")

# The longest files of the suite by the sum of their tests' durations (clean-clone run
# of 2026-11-28, 4 workers, `--durations=60`), longest first: scheduled before the rest.
LONGEST_FILES = (
    "tests/docs/test_doc_blocks.py",  # 271 s: Spark quick starts, each block twice
    "tests/gateway/test_gw_kill.py",  # 195 s: 20 kill -9 cycles per fsync policy
    "tests/spark/test_spark_processes.py",  # 190 s: spark-submit jobs and their kills
    "tests/spark/test_spark_stream.py",  # 115 s
    "tests/iggy/test_iggy_credential_changes.py",  # 83 s: five client generations
    "tests/gateway/test_crash_loop.py",  # 50-75 s: 3 kill -9 cycles, five real clients
    "tests/http/test_http_schemathesis.py",  # 64 s
    "tests/spark/test_spark_write.py",  # 61 s
    "tests/gateway/test_authz_matrix.py",  # 52 s
    "tests/gateway/test_gw_cli_admin.py",  # 50 s
    "tests/spark/test_spark_read.py",  # 47 s
    "tests/http/test_http_login_guard.py",  # 46 s
    "tests/gateway/test_gw_admin_remote.py",  # 44 s
    "tests/pravega/test_pravega_scaleout.py",  # 43 s
    "tests/nats/test_nats_jetstream_large.py",  # 31 s: 200,000 messages filled, restarted, probed
    "tests/gateway/test_powerloss.py",  # 30 s: lazyfs mounts, a Pravega writer cut mid-stream
)
_TIER_RANK = {"realclient": 0, "integration": 1, "unit": 2}


def _origin(value: object) -> str | None:
    if isinstance(value, types.ModuleType):
        return value.__name__
    return getattr(value, "__module__", None) if callable(value) or isinstance(value, type) else None


def _matches(name: str | None, prefixes: tuple[str, ...]) -> bool:
    return name is not None and any(name == p or name.startswith(p + ".") for p in prefixes)


def _is_test_helper(name: str | None, load: bool = False) -> bool:
    if name == "conftest":  # several files share this name in sys.modules; fixtures are read by their globals
        return False
    if load and name and name not in sys.modules:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return False
        if spec is None or spec.origin is None or not Path(spec.origin).resolve().is_relative_to(TESTS):
            return False
        importlib.import_module(name)
    mod = sys.modules.get(name or "")
    path = getattr(mod, "__file__", None)
    return path is not None and Path(path).resolve().is_relative_to(TESTS)


def _origins(module: types.ModuleType, depth: int = 1) -> set[str]:
    """The modules a test module's globals come from, through test helpers ``depth`` deep."""
    found: set[str] = set()
    for value in list(vars(module).values()):
        name = _origin(value)
        if name is None:
            continue
        found.add(name)
        if depth and name != module.__name__ and _is_test_helper(name):
            found |= _origins(sys.modules[name], depth - 1)
    return found


_tier_of_module: dict[str, str] = {}


def tier_of(module: types.ModuleType) -> str:
    cached = _tier_of_module.get(module.__name__)
    if cached is None:
        origins = _origins(module)
        if any(_matches(o, REALCLIENT_ORIGINS) for o in origins):
            cached = "realclient"
        elif any(_matches(o, INTEGRATION_ORIGINS) for o in origins):
            cached = "integration"
        else:
            cached = "unit"
        _tier_of_module[module.__name__] = cached
    return cached


# (code, id of its globals) -> _code_origins: a parametrized test or a shared fixture is
# one code object for hundreds of items, and disassembling it again for each was a
# third of the collection's CPU (every xdist worker collects the whole suite).
_code_origins_cache: dict[tuple[types.CodeType, int], frozenset[str]] = {}


def _code_origins(code, namespace: dict) -> frozenset[str]:
    """The modules a function imports, and those the globals its code names come from
    (nested code included); ``namespace`` is the function's own ``__globals__``."""
    key = (code, id(namespace))
    cached = _code_origins_cache.get(key)
    if cached is None:
        cached = _code_origins_cache[key] = frozenset(_code_origins_uncached(code, namespace))
    return cached


def _code_origins_uncached(code, namespace: dict) -> set[str]:
    found: set[str] = set()
    for imported in {i.argval for i in dis.get_instructions(code) if i.opname == "IMPORT_NAME"}:
        found.add(imported)
        if _is_test_helper(imported, load=True):  # e.g. `from http_helpers import gateway` in a test
            found |= _origins(sys.modules[imported], 0)
    own = namespace.get("__name__")
    for name in code.co_names:
        origin = _origin(namespace.get(name))
        if origin is not None:
            found.add(origin)
            if origin != own and _is_test_helper(origin):
                found |= _origins(sys.modules[origin], 0)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _code_origins(const, namespace)
    return found


def _fixture_origins(item: pytest.Item) -> set[str]:
    """What a test function and the fixtures it uses (conftest ones included) import and
    call. This file's own fixtures (the guard) are not the test's doing."""
    found: set[str] = set()
    test = getattr(item, "function", None)
    if test is not None:
        found |= _code_origins(test.__code__, test.__globals__)
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info else ()):
        func = getattr(defs[-1], "func", None)
        code = getattr(func, "__code__", None)
        if code is not None and getattr(func, "__globals__", None) is not globals():
            found |= _code_origins(code, func.__globals__)
    return found


def tier_of_item(item: pytest.Item) -> str:
    module = getattr(item, "module", None)
    tier = tier_of(module) if module is not None else "unit"
    if tier == "realclient":
        return tier
    origins = _fixture_origins(item)
    if any(_matches(o, REALCLIENT_ORIGINS) for o in origins):
        return "realclient"
    if tier == "unit" and any(_matches(o, INTEGRATION_ORIGINS) for o in origins):
        return "integration"
    return tier


# Every user store made in a test process hashes and checks passwords with argon2's
# cheapest parameters: tests check what a login, a user creation or a password change
# does, never what it costs, and the defaults cost about 0.25 s of CPU each by design
# (every Broker.open hashes the root password: hypothesis tests that open a broker per
# example paid it hundreds of times). `ferry serve` and the CLI as real processes keep
# the defaults; tests/core/test_metadata_auth.py checks the rehash to stronger ones.
CHEAP_ARGON2 = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)


@pytest.fixture(autouse=True, scope="session")
def _cheap_password_hashing():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(core.auth, "PasswordHasher", lambda: CHEAP_ARGON2)
        yield


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "unit: no sockets, no subprocesses (tests/conftest.py)")
    config.addinivalue_line("markers", "integration: Ferry's own listeners on loopback, in this process")
    config.addinivalue_line("markers", "realclient: the clients and programs users run, against a real gateway")


# Marked as each item is collected, before any plugin's pytest_collection_modifyitems
# (the mark plugin's -m selection among them) runs.
def pytest_itemcollected(item: pytest.Item) -> None:
    if not any(item.get_closest_marker(t) for t in TIERS):
        item.add_marker(getattr(pytest.mark, tier_of_item(item)))


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest files first, then by tier (module docstring); a stable sort, so each
    file's tests keep their order."""
    rank: dict[str, tuple[int, int]] = {}
    for item in items:
        path = _file_of(item.nodeid)
        if path in LONGEST_FILES:
            key = (0, LONGEST_FILES.index(path))
        else:
            tier = next((t for t in TIERS if item.get_closest_marker(t)), "unit")
            key = (1 + _TIER_RANK[tier], 0)
        rank[path] = min(rank.get(path, key), key)
    items.sort(key=lambda item: rank[_file_of(item.nodeid)])


class TierViolation(AssertionError):
    pass


def _refuse(what: str):
    def refuse(*args, **kwargs):
        raise TierViolation(
            f"a unit-tier test {what}; unit tests open no sockets and start no processes "
            "(tests/conftest.py decides the tier from what the module imports: import the "
            "real client or use the harness, or add its origin to INTEGRATION_ORIGINS)")
    return refuse


_INET = (socket.AF_INET, socket.AF_INET6)


@pytest.fixture(autouse=True)
def _unit_guard(request, monkeypatch):
    """Keeps the unit tier honest: internet sockets and processes raise there.

    trio's own wake-up socketpair (AF_UNIX, never bound or connected) is untouched."""
    if request.node.get_closest_marker("unit") is None:
        yield
        return
    real_connect, real_bind = socket.socket.connect, socket.socket.bind

    def connect(self, address):
        if self.family in _INET:
            _refuse(f"connected a socket to {address!r}")()
        return real_connect(self, address)

    def bind(self, address):
        if self.family in _INET:
            _refuse(f"bound a socket to {address!r}")()
        return real_bind(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "bind", bind)
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("started a process"))
    yield
