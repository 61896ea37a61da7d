"""gateway.config: defaults, TOML, FERRY_* variables, flags, validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.addressing import Binding
from gateway.config import (
    LISTENER_KEYS,
    SECTIONS,
    ConfigError,
    env_name,
    load_config,
)
from gateway.registry import DEFAULT_LISTENERS, ListenerSpec, Registry
from gw_helpers import CONFIG_ERRORS as ERRORS

EMPTY = Registry.of()


async def _serve(broker, cfg, conn_nursery, *, task_status):  # never started here
    task_status.started(0)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ferry.toml"
    path.write_text(text)
    return path


def load(path=None, env=None, flags=None, registry=EMPTY):
    return load_config(path, env=env or {}, flags=flags, registry=registry)


# -- defaults ----------------------------------------------------------------
def test_defaults_match_the_documented_values():
    cfg = load()
    assert cfg.server.host == "0.0.0.0"
    assert cfg.server.data_dir == Path("data")
    assert cfg.server.log_level == "info" and cfg.server.log_format == "text"
    assert cfg.log.fsync == "batch"
    assert cfg.log.fsync_interval_ms == 0
    assert cfg.log.segment_bytes == 256 * 1024 * 1024
    assert cfg.auth.root_username == "iggy" and cfg.auth.uses_default_password
    assert cfg.bindings == () and cfg.source is None


def test_every_documented_listener_has_its_default_port():
    cfg = load()
    got = {lc.name: (lc.port, lc.transport) for lc in cfg.listeners}
    assert got == dict(DEFAULT_LISTENERS)
    assert got["iggy_quic"] == (8080, "udp")
    assert all(lc.enabled and lc.host == "0.0.0.0" for lc in cfg.listeners)


# -- sources -----------------------------------------------------------------
FULL_TOML = """
[server]
host = "127.0.0.1"
data_dir = "/var/lib/ferry"
grace_seconds = 2.5
log_level = "DEBUG"
log_format = "json"

[log]
fsync = "always"
fsync_interval_ms = 1
segment_bytes = "64 MiB"
max_pending_bytes = 1048576
producer_ttl_ms = 3600000
retention_interval_seconds = 10

[auth]
root_username = "admin"
root_password = "s3cret-pass"

[listeners.nats]
port = 4333
host = "10.0.0.1"

[listeners.http]
enabled = false

[[binding]]
stream = "orders"
topic = "eu west"
nats_subject = "orders.euwest"
"""


def test_toml_file_sets_every_section(tmp_path):
    cfg = load(write(tmp_path, FULL_TOML))
    assert cfg.server.host == "127.0.0.1"
    assert cfg.server.data_dir == Path("/var/lib/ferry")
    assert cfg.server.grace_seconds == 2.5
    assert cfg.server.log_level == "debug" and cfg.server.log_format == "json"
    assert (cfg.log.fsync, cfg.log.fsync_interval_ms) == ("always", 1.0)
    assert cfg.log.segment_bytes == 64 * 1024 * 1024
    assert cfg.log.max_pending_bytes == 1048576
    assert cfg.log.producer_ttl_ms == 3_600_000
    assert cfg.retention_interval_s == 10
    assert cfg.auth.root_username == "admin" and not cfg.auth.uses_default_password
    nats = cfg.listener("nats")
    assert (nats.host, nats.port) == ("10.0.0.1", 4333)
    assert cfg.listener("iggy_tcp").host == "127.0.0.1"  # inherits server.host
    assert not cfg.listener("http").enabled
    assert cfg.bindings == (Binding("orders", "eu west", nats_subject="orders.euwest"),)
    assert cfg.source == tmp_path / "ferry.toml"


def test_config_path_from_ferry_config_variable(tmp_path):
    path = write(tmp_path, '[log]\nfsync = "never"\n')
    assert load(env={"FERRY_CONFIG": str(path)}).log.fsync == "never"


def test_env_overrides_file(tmp_path):
    path = write(tmp_path, '[log]\nfsync = "always"\n[listeners.nats]\nport = 1111\n')
    cfg = load(path, env={"FERRY_LOG_FSYNC": "never", "FERRY_NATS_PORT": "4333",
                          "FERRY_HTTP_ENABLED": "off", "FERRY_SERVER_GRACE_SECONDS": "0.5"})
    assert cfg.log.fsync == "never"
    assert cfg.listener("nats").port == 4333
    assert not cfg.listener("http").enabled
    assert cfg.server.grace_seconds == 0.5


def test_flags_override_env_and_file(tmp_path):
    path = write(tmp_path, '[listeners.nats]\nport = 1111\n')
    cfg = load(path, env={"FERRY_NATS_PORT": "2222"},
               flags={("listeners", "nats", "port"): ("0", "--nats-port")})
    assert cfg.listener("nats").port == 0


def test_unrelated_environment_is_ignored():
    assert load(env={"PATH": "/bin", "FERRYMAN": "x"}).log.fsync == "batch"


@pytest.mark.parametrize("given, policy", [("default", "batch"), ("none", "never"), ("ALWAYS", "always")])
def test_fsync_aliases_of_the_bench_harness(given, policy):
    flags = {("log", "fsync"): (given, "--fsync")}
    assert load(flags=flags).log.fsync == policy


@pytest.mark.parametrize("text, size", [("4096", 4096), ("64KiB", 65536), ("1 MB", 1 << 20), ("2g", 2 << 30)])
def test_sizes_accept_units(text, size):
    flags = {("log", "segment_bytes"): (text, "--x")}
    assert load(flags=flags).log.segment_bytes == size


def test_listener_options_come_from_the_spec(tmp_path):
    spec = ListenerSpec("echo", 7000, "tcp", _serve, options={"max_payload": 1024, "banner": "hi",
                                                             "verbose": False, "tags": ("a",)})
    reg = Registry.of(spec)
    path = write(tmp_path, '[listeners.echo]\nmax_payload = 10\ntags = ["x", "y"]\n')
    cfg = load(path, env={"FERRY_ECHO_VERBOSE": "yes"}, registry=reg)
    echo = cfg.listener("echo")
    assert dict(echo.options) == {"max_payload": 10, "banner": "hi", "verbose": True, "tags": ("x", "y")}
    assert echo.port == 7000


def test_spec_port_overrides_the_table_for_its_name():
    spec = ListenerSpec("nats", 4223, "tcp", _serve)
    assert load(registry=Registry.of(spec)).listener("nats").port == 4223


def test_same_port_on_distinct_hosts_is_allowed():
    env = {"FERRY_NATS_PORT": "3000", "FERRY_NATS_HOST": "127.0.0.1", "FERRY_HTTP_HOST": "127.0.0.2"}
    assert load(env=env).listener("nats").port == 3000


def test_same_port_number_on_tcp_and_udp_is_allowed():
    assert load(env={"FERRY_NATS_PORT": "8080"}).listener("nats").port == 8080  # QUIC has 8080/udp


def test_port_zero_never_conflicts():
    env = {"FERRY_NATS_PORT": "0", "FERRY_HTTP_PORT": "0"}
    assert load(env=env).listener("http").port == 0


def test_broker_config_carries_log_auth_and_bindings(tmp_path):
    cfg = load(write(tmp_path, FULL_TOML))
    bc = cfg.broker_config()
    assert bc.log == cfg.log
    assert (bc.root_username, bc.root_password) == ("admin", "s3cret-pass")
    assert bc.bindings == cfg.bindings
    assert bc.retention_interval_s == 10


def test_config_is_frozen():
    cfg = load()
    with pytest.raises(AttributeError):
        cfg.server.host = "x"  # type: ignore[misc]


def test_password_is_not_in_repr(tmp_path):
    assert "s3cret-pass" not in repr(load(write(tmp_path, FULL_TOML)))


# -- validation: one message naming key, value and source ----------------------
def _flags_of(args: list[str]) -> dict:
    """The few flags the table uses, mapped as gateway.cli does."""
    from gateway.cli import build_parser, serve_flags

    ns = build_parser(EMPTY).parse_args(["serve", *args])
    return serve_flags(ns, EMPTY)


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_invalid_configuration_names_key_value_and_source(tmp_path, case):
    args, env, toml, fragments = ERRORS[case]
    path = write(tmp_path, toml) if toml is not None else None
    with pytest.raises(ConfigError) as info:
        load(path, env=env, flags=_flags_of(args))
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load(tmp_path / "nope.toml")


def test_error_carries_the_key():
    with pytest.raises(ConfigError) as info:
        load(env={"FERRY_LOG_FSYNC": "x"})
    assert (info.value.key, info.value.value) == ("log.fsync", "x")


# -- docs stay in step with the schema -----------------------------------------
def test_configuration_doc_lists_every_key_and_variable():
    doc = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    for section, keys in SECTIONS.items():
        for key in keys:
            assert f"`{section}.{key}`" in doc or f"`{key}`" in doc, key
            assert env_name((section, key)) in doc
    for name in DEFAULT_LISTENERS:
        for key in LISTENER_KEYS:
            assert env_name(("listeners", name, key)) in doc or "FERRY_<NAME>_" + key.upper() in doc
        assert f"`{name}`" in doc


def test_the_pure_python_switch_is_not_a_config_key():
    # FERRY_PURE_PYTHON is read by core/log/encoded.py at import: it must not stop the server.
    assert load(env={"FERRY_PURE_PYTHON": "1"}).log.fsync == "batch"


def test_client_command_variables_do_not_stop_the_server():
    # FERRY_SERVER/TOKEN/USER/PASSWORD tell `ferry stream ...` which server and
    # login to use; a shell that exports them must still run `ferry serve`.
    from gateway.config import CLIENT_ENV, env_names, schema_for
    from gateway.registry import default_registry

    env = {name: "x" for name in CLIENT_ENV}
    assert load(env=env).server.host == "0.0.0.0"
    assert not set(CLIENT_ENV) & set(env_names(schema_for(default_registry().known())))
    with pytest.raises(ConfigError, match="FERRY_TOKENS: unknown environment variable"):
        load(env={"FERRY_TOKENS": "x"})  # a near miss is still an error


def test_relative_data_dir_in_a_file_is_relative_to_the_file(tmp_path, monkeypatch):
    """`ferry serve --config /etc/ferry/ferry.toml` and `ferry ... --local` open the
    same folder wherever they run; --data and the variable stay relative to the CWD."""
    conf_dir = tmp_path / "etc"
    conf_dir.mkdir()
    conf = conf_dir / "ferry.toml"
    conf.write_text('[server]\ndata_dir = "store"\n')
    monkeypatch.chdir(tmp_path)
    assert load_config(conf, env={}).server.data_dir == conf_dir.resolve() / "store"
    conf.write_text('[server]\ndata_dir = "/srv/ferry"\n')
    assert load_config(conf, env={}).server.data_dir == Path("/srv/ferry")
    conf.write_text('[server]\ndata_dir = "store"\n')
    assert load_config(conf, env={"FERRY_SERVER_DATA_DIR": "here"}).server.data_dir == Path("here")
    assert load_config(conf, env={}, flags={("server", "data_dir"): ("cwd", "--data")}).server.data_dir == Path("cwd")


@pytest.mark.parametrize("env, message", [
    ({"FERRY_STORE_URL": "http://x:1"}, "is not nats://host:port"),
    ({"FERRY_STORE_URL": "nats://x"}, "is not nats://host:port"),
    ({"FERRY_STORE_URL": "nats://a:1", "FERRY_STORE_TOKEN": "t", "FERRY_STORE_USER": "u"}, "not both"),
    ({"FERRY_STORE_URL": "nats://a:1", "FERRY_STORE_TLS_CA": "/nope/ca.pem"}, "store.tls_ca: '/nope/ca.pem' is not"),
    ({"FERRY_STORE_URL": "nats://a:1", "FERRY_STORE_TLS_CERT": __file__}, "go together"),
])
def test_store_settings_are_checked_at_load(env, message):
    with pytest.raises(ConfigError, match=message):
        load_config(env=env)


def test_store_urls_take_one_scheme_for_all():
    cfg = load_config(env={"FERRY_STORE_URL": "tls://a:1, b:2"})
    assert cfg.store.urls == ["tls://a:1", "tls://b:2"] and load_config(env={}).store.urls == []
