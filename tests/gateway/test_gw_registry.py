"""gateway.registry: listener discovery and spec checks."""

from __future__ import annotations

import itertools
import sys
import textwrap

import pytest

from gateway.config import load_config
from gateway.registry import (
    DEFAULT_LISTENERS,
    ListenerSpec,
    Registry,
    RegistryError,
    default_registry,
    discover,
)

_counter = itertools.count()

GOOD_MODULE = """
from gateway.registry import ListenerSpec

async def serve(broker, cfg, conn_nursery, *, task_status):
    task_status.started(cfg.port)

LISTENER = ListenerSpec({name!r}, {port}, {transport!r}, serve, options={options!r})
"""


@pytest.fixture
def make_package(tmp_path, monkeypatch):
    """Write a throw-away listener package; returns its importable name."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(modules: dict[str, str]) -> str:
        name = f"fake_listeners_{next(_counter)}"
        pkg = tmp_path / name
        pkg.mkdir()
        (pkg / "__init__.py").write_text("")
        for mod, text in modules.items():
            (pkg / f"{mod}.py").write_text(textwrap.dedent(text))
        return name

    yield make
    for mod in [m for m in sys.modules if m.startswith("fake_listeners_")]:
        monkeypatch.delitem(sys.modules, mod)


def good(name: str, port: int = 7000, transport: str = "tcp", options: dict | None = None) -> str:
    return GOOD_MODULE.format(name=name, port=port, transport=transport, options=options or {})


def test_discovers_every_public_module(make_package):
    pkg = make_package({"echo": good("echo"), "quack": good("quack", 7001, "udp"),
                        "_shared": "X = 1\n"})
    reg = discover(pkg)
    assert sorted(reg.specs) == ["echo", "quack"]
    assert reg.get("quack").transport == "udp"
    assert reg.get("missing") is None


def test_discovered_listeners_become_configurable(make_package):
    pkg = make_package({"echo": good("echo", options={"greeting": "hi"})})
    cfg = load_config(env={"FERRY_ECHO_PORT": "7100", "FERRY_ECHO_GREETING": "yo"}, registry=discover(pkg))
    echo = cfg.listener("echo")
    assert (echo.port, echo.options["greeting"], echo.transport) == (7100, "yo", "tcp")


def test_known_lists_the_default_table_first_then_extras(make_package):
    reg = discover(make_package({"zeta": good("zeta"), "nats": good("nats", 4222)}))
    known = reg.known()
    assert list(known)[: len(DEFAULT_LISTENERS)] == list(DEFAULT_LISTENERS)
    assert list(known)[-1] == "zeta"
    assert known["nats"].spec is reg.get("nats")
    assert known["http"].spec is None and known["http"].default_port == 3000


@pytest.mark.parametrize(
    "module, fragment",
    [
        ("X = 1\n", "must define LISTENER"),
        ("LISTENER = 'nats'\n", "must define LISTENER"),
        ("import no_such_module_here\n", "failed to import"),
        ("raise RuntimeError('boom')\n", "boom"),
    ],
)
def test_broken_module_is_named(make_package, module, fragment):
    pkg = make_package({"broken": module})
    with pytest.raises(RegistryError, match=fragment) as info:
        discover(pkg)
    assert f"{pkg}.broken" in str(info.value)


def test_duplicate_names_are_refused(make_package):
    pkg = make_package({"a": good("same"), "b": good("same")})
    with pytest.raises(RegistryError, match="defined twice"):
        discover(pkg)


def test_missing_package():
    with pytest.raises(RegistryError, match="cannot be imported"):
        discover("no_such_listener_package")


async def _serve(broker, cfg, conn_nursery, *, task_status):
    task_status.started(0)


def _sync_serve(broker, cfg, conn_nursery, *, task_status):
    return None


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(name="Bad-Name"), "must match"),
        (dict(name="log"), "reserved"),
        (dict(default_port=0), "not in 1..65535"),
        (dict(default_port=70000), "not in 1..65535"),
        (dict(default_port=True), "must be an int"),
        (dict(transport="sctp"), "tcp or udp"),
        (dict(serve=_sync_serve), "async function"),
        (dict(options={"port": 1}), "invalid or reserved"),
        (dict(options={"x": None}), "default must be"),
        (dict(options={"x": (1, 2)}), "tuple of str"),
    ],
)
def test_spec_checks(kwargs, fragment):
    args = dict(name="echo", default_port=7000, transport="tcp", serve=_serve) | kwargs
    with pytest.raises(RegistryError, match=fragment):
        ListenerSpec(**args)


def test_spec_options_are_read_only():
    spec = ListenerSpec("echo", 7000, "tcp", _serve, options={"a": 1})
    with pytest.raises(TypeError):
        spec.options["a"] = 2  # type: ignore[index]


def test_environment_variable_collisions_are_refused():
    # option "monitor_port" of "nats" and the port of "nats_monitor" would both
    # be FERRY_NATS_MONITOR_PORT.
    reg = Registry.of(ListenerSpec("nats", 4222, "tcp", _serve, options={"monitor_port": 1}))
    with pytest.raises(RegistryError, match="FERRY_NATS_MONITOR_PORT"):
        load_config(env={}, registry=reg)


def test_product_listeners_match_the_documented_ports():
    """Every listener module in gateway/listeners keeps ARCHITECTURE.md's port table."""
    for name, spec in default_registry().specs.items():
        if name in DEFAULT_LISTENERS:
            assert (spec.default_port, spec.transport) == DEFAULT_LISTENERS[name], name
