"""compose/: no docker daemon runs here, so the stack is checked structurally.

The compose file must build the image from a Dockerfile that exists, mount a
declared named volume at the data directory the baked-in config uses, and
publish every default listener port with its transport (QUIC on UDP).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gateway.config import load_config
from gateway.registry import DEFAULT_LISTENERS, default_registry

ROOT = Path(__file__).parents[2]
COMPOSE_DIR = ROOT / "compose"
CONFIG_IN_IMAGE = "/etc/ferry/ferry.toml"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((COMPOSE_DIR / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def service(compose) -> dict:
    assert list(compose["services"]) == ["ferry"]
    return compose["services"]["ferry"]


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = (COMPOSE_DIR / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [tuple(line.split(None, 1)) for line in lines if line and not line.startswith("#")]


def _published(service: dict) -> set[tuple[int, int, str]]:
    out = set()
    for entry in service["ports"]:
        match = re.fullmatch(r"(\d+):(\d+)(?:/(tcp|udp))?", str(entry))
        assert match, entry
        out.add((int(match.group(1)), int(match.group(2)), match.group(3) or "tcp"))
    return out


def test_build_context_holds_the_dockerfile_and_the_sources(service):
    build = service["build"]
    context = (COMPOSE_DIR / build["context"]).resolve()
    assert context == ROOT
    assert (context / build["dockerfile"]).is_file()
    assert (context / "pyproject.toml").is_file()


def test_dockerfile_base_install_volume_and_command(dockerfile):
    # Two stages: the wheel (with the C extensions) is built where gcc is, the
    # runtime is slim; the last FROM is what the image runs on.
    stages = [args for ins, args in dockerfile if ins == "FROM"]
    assert stages == ["python:3.11 AS build", "python:3.11-slim"]
    runs = [args for ins, args in dockerfile if ins == "RUN"]
    assert any("pip wheel --no-deps --wheel-dir /wheels ." in r for r in runs)
    assert any("pip install /wheels/*.whl" in r for r in runs)
    assert ("VOLUME", "/data") in dockerfile
    cmd = [args for ins, args in dockerfile if ins == "CMD"][-1]
    assert cmd == f'["ferry", "serve", "--config", "{CONFIG_IN_IMAGE}"]'
    for ins, args in dockerfile:
        if ins == "COPY" and not args.startswith("--from="):
            *sources, _dest = args.split()
            for src in sources:
                assert (ROOT / src).exists(), f"COPY source {src} missing from the build context"


def test_dockerfile_exposes_every_default_port(dockerfile):
    exposed = set()
    for ins, args in dockerfile:
        if ins == "EXPOSE":
            for item in args.split():
                port, _, proto = item.partition("/")
                exposed.add((int(port), proto or "tcp"))
    assert exposed == {(port, transport) for port, transport in DEFAULT_LISTENERS.values()}


def test_named_volume_is_mounted_at_the_configured_data_dir(compose, service, dockerfile):
    assert "ferry-data" in compose["volumes"]
    mounts = dict(m.split(":", 1) for m in service["volumes"])
    cfg = load_config(COMPOSE_DIR / "ferry.toml", env={})
    assert mounts["ferry-data"] == str(cfg.server.data_dir) == "/data"
    copies = [args.split() for ins, args in dockerfile if ins == "COPY"]
    assert ["compose/ferry.toml", CONFIG_IN_IMAGE] in copies


def test_every_default_port_is_published_with_its_transport(service):
    published = _published(service)
    for name, kl in default_registry().known().items():
        assert (kl.default_port, kl.default_port, kl.transport) in published, name
    assert (8080, 8080, "udp") in published  # Iggy QUIC
    assert len(published) == len(DEFAULT_LISTENERS)


def test_image_config_binds_every_interface_and_validates(service):
    cfg = load_config(COMPOSE_DIR / "ferry.toml", env={k: str(v) for k, v in service["environment"].items()
                                                      if not v.startswith("${")})
    assert cfg.server.host == "0.0.0.0"
    assert service["command"][-1] == CONFIG_IN_IMAGE
    # docker's SIGKILL comes stop_grace_period after SIGTERM: leave time past our grace period
    grace = int(str(service["stop_grace_period"]).rstrip("s"))
    assert grace > cfg.server.grace_seconds
