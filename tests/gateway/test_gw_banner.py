"""gateway.banner: the start-up banner's content."""

from __future__ import annotations

from gateway.banner import READY_LINE, credential_warning, format_address, format_banner, open_doors
from gateway.config import load_config
from gateway.registry import ListenerSpec, Registry


async def _serve(broker, cfg, conn_nursery, *, task_status):
    task_status.started(0)


REG = Registry.of(ListenerSpec("nats", 4222, "tcp", _serve), ListenerSpec("iggy_quic", 8080, "udp", _serve))


def banner(env=None, ports=None):
    cfg = load_config(env=env or {}, registry=REG)
    return cfg, format_banner(cfg, ports or {"nats": 40001, "iggy_quic": 40002}, set(REG.specs), "9.9.9")


def test_banner_shows_version_data_dir_fsync_and_listeners(tmp_path):
    cfg, text = banner({"FERRY_SERVER_DATA_DIR": str(tmp_path / "d"), "FERRY_HTTP_ENABLED": "false",
                        "FERRY_NATS_HOST": "127.0.0.1"})
    lines = text.splitlines()
    assert lines[0] == "Ferry 9.9.9: multi-protocol message gateway"
    assert f"data dir     {tmp_path / 'd'}" in text
    assert "fsync        batch (group commit: acks after fdatasync, concurrent appends share one)" in text
    rows = {line.split()[0]: " ".join(line.split()[1:]) for line in lines if line.startswith("    ")}
    assert rows["nats"] == "127.0.0.1:40001/tcp"
    assert rows["iggy_quic"] == "0.0.0.0:40002/udp"
    assert rows["http"] == "disabled"
    assert rows["pravega"] == "not available in this build"
    assert set(rows) == {lc.name for lc in cfg.listeners}
    assert lines[-1] == READY_LINE


def test_default_credentials_warn_and_custom_ones_do_not():
    _, text = banner()
    assert "WARNING: the root user 'iggy' uses the default password" in text
    assert "FERRY_AUTH_ROOT_PASSWORD" in text
    cfg, text = banner({"FERRY_AUTH_ROOT_PASSWORD": "something-long"})
    assert "WARNING" not in text and credential_warning(cfg) is None
    assert "something-long" not in text


def test_every_listener_that_admits_anonymous_clients_is_named():
    from gateway.registry import default_registry

    reg = default_registry()

    def full(env):
        cfg = load_config(env=env, registry=reg)
        return cfg, format_banner(cfg, {name: 1 for name in reg.specs}, set(reg.specs), "9.9.9")

    _, text = full({})
    assert "without credentials" not in text   # secure by default: no door open
    monitor = next(line for line in text.splitlines() if line.split()[:1] == ["nats_monitor"])
    assert monitor.endswith("(no login: counters, connections, subjects, stream names; never message data)")
    cfg, text = full({"FERRY_NATS_ANONYMOUS_USER": "guest", "FERRY_PRAVEGA_CONTROLLER_ANONYMOUS_USER": "guest"})
    doors = [line for line in text.splitlines() if "without credentials" in line]
    assert doors == [
        "WARNING: nats admits clients without credentials as Ferry user 'guest' ([listeners.nats] anonymous_user)",
        "WARNING: nats_ws admits clients without credentials as Ferry user 'guest' ([listeners.nats] anonymous_user)",
        "WARNING: pravega_controller admits clients without credentials as Ferry user 'guest' "
        "([listeners.pravega_controller] anonymous_user)",
    ]
    assert open_doors(cfg) == doors


def test_fsync_policies_are_explained():
    assert "always (every append" in banner({"FERRY_LOG_FSYNC": "always"})[1]
    assert "never (acknowledged after write(2)" in banner({"FERRY_LOG_FSYNC": "none"})[1]


def test_ipv6_addresses_are_bracketed():
    assert format_address("::1", 4222, "tcp") == "[::1]:4222/tcp"
    assert format_address("127.0.0.1", 8080, "udp") == "127.0.0.1:8080/udp"


def test_banner_says_whether_the_compiled_stamping_runs():
    cfg = load_config(env={}, registry=REG)
    on = format_banner(cfg, {}, set(), "9.9.9", compiled=True)
    off = format_banner(cfg, {}, set(), "9.9.9", compiled=False)
    assert "speedups     compiled record stamping, Iggy wire loops and NATS PUB scanner" in on
    assert "speedups     none: pure-Python loops" in off


def test_a_store_cluster_replaces_the_fsync_line():
    _cfg, text = banner({"FERRY_STORE_URL": "nats://10.0.0.1:4222,10.0.0.2:4222", "FERRY_STORE_REPLICAS": "3"})
    assert "  store        JetStream at nats://10.0.0.1:4222, nats://10.0.0.2:4222 (R3, prefix FERRY)" in text
    assert "(a cache of the store)" in text and "  fsync " not in text
