"""compose/: no docker daemon runs here, so the stacks are checked structurally.

Every compose file is parsed and cross-checked against the real config loader,
the config key table and the listener registry: each published port is a
listener its stack's config enables, with that port and transport (and each
enabled listener is published); each FERRY_* variable is a config key, and so
is each FERRY_* variable the files substitute from the shell; the
data volume is mounted at the configured data_dir; the health check probes an
enabled HTTP listener. The Dockerfile's COPY sources exist and pass
.dockerignore, which keeps .venv, data, .git and caches out of the context;
pyspark is only in the spark target. test_gw_compose_run.py runs the stacks' services
as processes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gateway.cli import build_parser
from gateway.config import ENV_CONFIG, ConfigError, env_names, load_config, schema_for
from gateway.registry import DEFAULT_LISTENERS, default_registry

ROOT = Path(__file__).parents[2]
COMPOSE_DIR = ROOT / "compose"
CONFIG_IN_IMAGE = "/etc/ferry/ferry.toml"
# stack compose file -> the listeners its config must enable (the stack's purpose)
STACKS = {
    "docker-compose.yml": set(DEFAULT_LISTENERS),
    "nats.yml": {"nats", "nats_monitor"},
    "iggy.yml": {"iggy_tcp", "iggy_quic", "iggy_ws", "http"},
    "scaleout.yml": {"nats", "nats_monitor", "iggy_tcp", "http", "kafka"},
}
HTTP_LISTENERS = {"http", "nats_monitor"}  # the ones that answer GET /healthz
VAR = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")  # compose's ${NAME:-default}


def interpolate(value: str) -> str:
    """Compose's variable substitution with nothing set: the defaults."""
    return VAR.sub(lambda m: m.group(2) or "", str(value))


def load_stack(name: str) -> dict:
    return yaml.safe_load((COMPOSE_DIR / name).read_text())


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = (COMPOSE_DIR / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [tuple(line.split(None, 1)) for line in lines if line and not line.startswith("#")]


def stages(dockerfile) -> dict[str, list[tuple[str, str]]]:
    """Instructions per stage name (``FROM image AS name``)."""
    out: dict[str, list] = {}
    current = None
    for ins, args in dockerfile:
        if ins == "FROM":
            current = args.split(" AS ")[-1]
            out[current] = []
        out[current].append((ins, args))
    return out


def published(service: dict) -> set[tuple[int, int, str]]:
    out = set()
    for entry in service.get("ports", []):
        match = re.fullmatch(r"(\d+):(\d+)(?:/(tcp|udp))?", str(entry))
        assert match, f"port entry {entry!r}: write it as HOST:CONTAINER/PROTO"
        out.add((int(match.group(1)), int(match.group(2)), match.group(3) or "tcp"))
    return out


def stack_config(service: dict):
    """The config the stack's ferry service runs: the file mounted at the
    path its command names, with the service's environment applied."""
    cmd = service["command"]
    assert cmd[:3] == ["ferry", "serve", "--config"]
    mounts = dict(m.rsplit(":", 1)[0].split(":", 1) if m.endswith(":ro") else m.split(":", 1)
                  for m in service["volumes"])
    by_target = {target: source for source, target in mounts.items()}
    source = by_target[cmd[3]]
    assert source.startswith("./"), source
    env = {k: interpolate(v) for k, v in service.get("environment", {}).items()}
    return load_config(COMPOSE_DIR / source, env=env), mounts


# -- every stack -------------------------------------------------------------
def test_every_compose_file_is_a_known_stack():
    files = {p.name for p in COMPOSE_DIR.glob("*.yml")} | {p.name for p in COMPOSE_DIR.glob("*.yaml")}
    assert files == set(STACKS)
    names = [load_stack(f)["name"] for f in STACKS]
    assert len(set(names)) == len(names)  # own project: own containers and volumes


@pytest.mark.parametrize("stack", STACKS)
def test_ferry_service_builds_the_gateway_target(stack, dockerfile):
    service = load_stack(stack)["services"]["ferry"]
    build = service["build"]
    context = (COMPOSE_DIR / build["context"]).resolve()
    assert context == ROOT and (ROOT / ".dockerignore").is_file()
    assert (context / build["dockerfile"]).is_file()
    assert build["target"] == "gateway" and "gateway" in stages(dockerfile)


@pytest.mark.parametrize("stack", STACKS)
def test_published_ports_are_exactly_the_enabled_listeners(stack):
    service = load_stack(stack)["services"]["ferry"]
    cfg, _ = stack_config(service)
    enabled = {lc.name: lc for lc in cfg.enabled_listeners()}
    assert set(enabled) == STACKS[stack]
    ports = published(service)
    want = {(lc.port, lc.port, lc.transport) for lc in enabled.values()}
    assert ports == want, f"published {sorted(ports)}, config enables {sorted(want)}"
    for lc in enabled.values():
        assert lc.host == "0.0.0.0", f"{lc.name} binds {lc.host}: not reachable through a published port"


@pytest.mark.parametrize("stack", STACKS)
def test_environment_sets_real_config_keys(stack):
    names = env_names(schema_for(default_registry().known()))
    for service in load_stack(stack)["services"].values():
        for var in service.get("environment", {}):
            if var.startswith("FERRY_"):
                assert var in names or var == ENV_CONFIG, f"{stack}: {var} is not a config key"


# Compose's substitution: $$ (a literal dollar), ${NAME...} and $NAME.
SUBSTITUTION = re.compile(r"\$\$|\$\{(\w+)(?::?[-?+]([^}]*))?\}|\$(\w+)")


def interpolated(node) -> dict[str, str]:
    """{variable: its default ("" without one)} for every variable the parsed
    compose file substitutes (comments are not substituted, so not read)."""
    out: dict[str, str] = {}
    if isinstance(node, dict):
        for key, value in node.items():
            out |= interpolated(key) | interpolated(value)
    elif isinstance(node, list):
        for item in node:
            out |= interpolated(item)
    elif isinstance(node, str):
        for m in SUBSTITUTION.finditer(node):
            name = m.group(1) or m.group(3)
            if name:
                out[name] = m.group(2) or ""
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_interpolated_variables_are_safe_to_export(stack):
    """The variables the compose files read from the shell (``FERRY_AUTH_ROOT_PASSWORD=x
    docker compose ...``) end up exported in it, and every local ``ferry serve`` or admin
    command then reads them: a FERRY_* name must be a config variable the loader
    accepts, never one of the stack's own (issue 28: FERRY_ROOT_PASSWORD broke them all)."""
    variables = interpolated(load_stack(stack))
    assert variables, f"{stack} substitutes nothing: is the root password still settable?"
    for name, default in variables.items():
        if name.startswith("FERRY_"):
            load_config(None, env={name: default or "x"})   # raises ConfigError for an unknown one
    assert "FERRY_AUTH_ROOT_PASSWORD" in variables


def test_substitution_finder_sees_an_unknown_ferry_variable():
    """The check above would catch the old name: the loader refuses it."""
    assert interpolated({"a": ["${FERRY_ROOT_PASSWORD:-iggy}", "$$HOME $X_Y"]}) == {"FERRY_ROOT_PASSWORD": "iggy",
                                                                                   "X_Y": ""}
    with pytest.raises(ConfigError, match="FERRY_ROOT_PASSWORD: unknown environment variable"):
        load_config(None, env={"FERRY_ROOT_PASSWORD": "iggy"})


@pytest.mark.parametrize("stack", STACKS)
def test_data_volume_is_mounted_at_the_configured_data_dir(stack):
    compose = load_stack(stack)
    service = compose["services"]["ferry"]
    cfg, mounts = stack_config(service)
    named = {src: dst for src, dst in mounts.items() if not src.startswith(("./", "/"))}
    assert set(named) <= set(compose["volumes"])
    assert list(named.values()).count(str(cfg.server.data_dir)) == 1
    assert str(cfg.server.data_dir) == "/data"  # owned by the image's ferry user (Dockerfile)


@pytest.mark.parametrize("stack", STACKS)
def test_healthcheck_probes_an_enabled_http_listener(stack):
    service = load_stack(stack)["services"]["ferry"]
    cfg, _ = stack_config(service)
    probe = " ".join(service["healthcheck"]["test"])
    (port,) = re.findall(r"http://127\.0\.0\.1:(\d+)/healthz", probe)
    served = {lc.port: lc.name for lc in cfg.enabled_listeners() if lc.name in HTTP_LISTENERS}
    assert int(port) in served, f"{stack}: the health check probes {port}, served: {served}"


@pytest.mark.parametrize("stack", STACKS)
def test_stop_grace_leaves_time_past_the_configured_grace(stack):
    service = load_stack(stack)["services"]["ferry"]
    cfg, _ = stack_config(service)
    # docker's SIGKILL comes stop_grace_period after SIGTERM: leave time past our grace period
    assert int(str(service["stop_grace_period"]).rstrip("s")) > cfg.server.grace_seconds


# -- the full stack's Spark job --------------------------------------------------
def test_spark_job_reads_a_created_topic_from_the_iggy_listener(dockerfile):
    compose = load_stack("docker-compose.yml")
    job = compose["services"]["spark-archive"]
    assert job["build"]["target"] == "spark" and "spark" in stages(dockerfile)
    assert job["depends_on"]["ferry"]["condition"] == "service_healthy"
    argv = [interpolate(a) for a in job["command"]]
    assert argv[:3] == ["ferry", "pipeline", "archive"]
    args = build_parser().parse_args(argv[1:])  # the real CLI accepts it
    cfg, _ = stack_config(compose["services"]["ferry"])
    host, port = args.servers.split(":")
    assert host == "ferry" and int(port) == cfg.listener("iggy_tcp").port and cfg.listener("iggy_tcp").enabled
    assert args.password == interpolate(compose["services"]["ferry"]["environment"]["FERRY_AUTH_ROOT_PASSWORD"])
    assert args.username == cfg.auth.root_username
    assert any(b.stream == args.stream and b.topic == args.topic and b.create for b in cfg.bindings)
    (mount,) = job["volumes"]
    volume, target = mount.split(":")
    assert volume in compose["volumes"] and args.out.startswith(target + "/")


def test_pyspark_and_java_only_in_the_spark_image(dockerfile):
    by_stage = stages(dockerfile)
    assert list(by_stage) == ["build", "spark", "gateway"]  # gateway last: the default target
    gateway_runs = " ".join(a for i, a in by_stage["gateway"] if i == "RUN")
    assert "pip install /wheels/*.whl" in gateway_runs
    assert "spark" not in gateway_runs and "jre" not in gateway_runs
    spark_runs = " ".join(a for i, a in by_stage["spark"] if i == "RUN")
    assert "[spark]" in spark_runs and "openjdk-17-jre-headless" in spark_runs
    # the same Debian release everywhere: the C extensions built in `build` load in both runtimes
    bases = [args.split()[0] for ins, args in dockerfile if ins == "FROM"]
    assert {b.rsplit("-", 1)[-1] for b in bases} == {"bookworm"}


# -- Dockerfile and build context -----------------------------------------------
def test_scaleout_gateways_share_one_cluster_config():
    """Both gateways of compose/scaleout.yml run the same config, which names every nats
    service of the stack (client port 4222) as its store; each gateway has its own cache."""
    compose = load_stack("scaleout.yml")
    a, b = compose["services"]["ferry"], compose["services"]["ferry-b"]
    cfg, mounts = stack_config(a)
    assert stack_config(b)[0].store == cfg.store
    nats = sorted(n for n, svc in compose["services"].items() if str(svc.get("image", "")).startswith("nats:"))
    assert cfg.store.urls == [f"nats://{n}:4222" for n in nats] and len(nats) == 3
    assert cfg.store.replicas == 3
    for svc in (compose["services"][n] for n in nats):
        assert "-js" in svc["command"] and "--routes" in svc["command"]
    assert {int(p.split(":")[1].split("/")[0]) for p in b["ports"]} == {
        int(p.split(":")[1].split("/")[0]) for p in a["ports"]}
    assert [v for v in a["volumes"] if v.endswith(":/data")] != [v for v in b["volumes"] if v.endswith(":/data")]


def test_dockerfile_install_volume_and_command(dockerfile):
    gateway = stages(dockerfile)["gateway"]
    runs = [args for ins, args in stages(dockerfile)["build"] if ins == "RUN"]
    assert any("pip wheel --no-deps --wheel-dir /wheels ." in r for r in runs)
    assert ("VOLUME", "/data") in gateway
    cmd = [args for ins, args in gateway if ins == "CMD"][-1]
    assert cmd == f'["ferry", "serve", "--config", "{CONFIG_IN_IMAGE}"]'
    assert ["compose/ferry.toml", CONFIG_IN_IMAGE] in [a.split() for i, a in gateway if i == "COPY"]
    baked = load_config(COMPOSE_DIR / "ferry.toml", env={})
    assert {lc.name for lc in baked.enabled_listeners()} == set(DEFAULT_LISTENERS)


def test_dockerfile_exposes_every_default_port(dockerfile):
    exposed = set()
    for ins, args in dockerfile:
        if ins == "EXPOSE":
            for item in args.split():
                port, _, proto = item.partition("/")
                exposed.add((int(port), proto or "tcp"))
    assert exposed == {(port, transport) for port, transport in DEFAULT_LISTENERS.values()}


def _docker_pattern(pattern: str) -> re.Pattern:
    """A .dockerignore line as a regex over context-relative paths (Go's
    filepath.Match plus ``**``, as moby's patternmatcher reads them)."""
    out, i = "", 0
    pattern = pattern.strip("/")
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[":
            end = pattern.index("]", i)
            out, i = out + pattern[i:end + 1], end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def dockerignored(path: str) -> bool:
    """Whether docker leaves ``path`` out of the build context: the last
    matching line wins, and a line matching a parent directory excludes it."""
    lines = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()]
    excluded = False
    parts = path.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    for line in lines:
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        regex = _docker_pattern(line.lstrip("!"))
        if any(regex.fullmatch(p) for p in prefixes):
            excluded = not negate
    return excluded


@pytest.mark.parametrize("path", [
    ".venv/bin/python", ".git/HEAD", "data/LOCK", "data/streams/1/0/00000000.log",
    "core/__pycache__/broker.cpython-311.pyc", "adapters/iggy/__pycache__/spec.cpython-311.pyc",
    "core/_speedups.cpython-311-x86_64-linux-gnu.so", ".pytest_cache/v/cache/nodeids",
    ".hypothesis/examples/x", ".ruff_cache/content", "build/lib/core/broker.py", "ferry.egg-info/PKG-INFO",
    "tests/nats/node/node_modules/nats/index.js",
])
def test_dockerignore_keeps_environments_data_and_caches_out(path):
    assert dockerignored(path)


def test_every_copy_source_exists_and_is_in_the_build_context(dockerfile):
    sources = []
    for ins, args in dockerfile:
        if ins == "COPY" and not args.startswith("--from="):
            sources += args.split()[:-1]
    assert sources
    for src in sources:
        assert (ROOT / src).exists(), f"COPY source {src} missing from the build context"
        assert not dockerignored(src), f"COPY source {src} is excluded by .dockerignore"
        if (ROOT / src).is_dir():  # the sources themselves, not only the directory entry
            for f in (ROOT / src).rglob("*.py"):
                if "__pycache__" not in f.parts:
                    assert not dockerignored(str(f.relative_to(ROOT))), f
    for needed in ("core/_speedups.c", "core/_speedups_le.h", "adapters/iggy/_speedups.c"):
        assert not dockerignored(needed)  # the build stage compiles them


@pytest.mark.parametrize("name", ["Dockerfile", "docker-compose.yml", "nats.yml", "iggy.yml",
                                  "ferry.toml", "nats.toml", "iggy.toml"])
def test_files_cited_in_compose_exist(name):
    """Comments name files (docs, sources, configs); each must exist."""
    text = (COMPOSE_DIR / name).read_text()
    cited = set(re.findall(r"(?<![\w/.-])((?:[\w-]+/)*[\w.-]+\.(?:md|py|toml|yml|c|h))\b", text))
    assert cited
    for ref in cited:
        if ref.startswith("/") or ref.startswith("etc/"):
            continue
        assert (ROOT / ref).exists() or (COMPOSE_DIR / ref).exists(), f"{name} cites {ref}, which does not exist"

