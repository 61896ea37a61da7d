"""gateway.diagnostics: the configuration and log lines a snapshot reports."""

from __future__ import annotations

import json
import logging

from adapters.iggy import snapshot
from gateway.config import load_config
from gateway.diagnostics import Diagnostics, RecentLogs, config_data, for_gateway
from gateway.logs import ROOT_LOGGER


def test_config_data_is_plain_and_snapshot_redacts_secrets(tmp_path):
    env = {"FERRY_SERVER_DATA_DIR": str(tmp_path / "d"), "FERRY_AUTH_ROOT_PASSWORD": "hunter2-root",
           "FERRY_HTTP_JWT_SECRET": "jwt-very-secret", "FERRY_STORE_TOKEN": "nats-tok-1", "FERRY_NATS_PORT": "4333"}
    data = config_data(load_config(None, env=env))
    text = json.dumps(data)  # JSON-ready: paths and mappings made plain
    assert "hunter2-root" not in text  # dropped here already
    assert data["server"]["data_dir"] == str(tmp_path / "d")
    assert data["listeners"]["nats"]["port"] == 4333
    written = snapshot.server_config(snapshot.SnapshotInputs(tmp_path, config=data))
    for secret in ("hunter2-root", "jwt-very-secret", "nats-tok-1"):
        assert secret not in written
    shown = json.loads(written.split("\n", 1)[1])
    assert shown["listeners"]["http"]["jwt_secret"] == snapshot.REDACTED
    assert shown["auth"]["root_username"] == "iggy"
    assert shown["log"]["fsync"] == "batch"


def test_recent_logs_keep_the_last_lines_while_installed():
    logger = logging.getLogger(ROOT_LOGGER + ".test")
    logger.setLevel(logging.INFO)  # whatever level other tests left on "ferry"
    diag = Diagnostics({}, RecentLogs(limit=3)).install()
    try:
        for i in range(5):
            logger.warning("event %d", i, extra={"n": i})
    finally:
        diag.remove()
    logger.warning("after removal")
    logger.setLevel(logging.NOTSET)
    lines = diag.log_lines()
    assert len(lines) == 3
    assert "event 2" in lines[0] and "n=2" in lines[0] and "WARNING" in lines[0]
    assert "event 4" in lines[-1]
    assert Diagnostics({}).log_lines() is None


def test_for_gateway_names_the_level(tmp_path):
    diag = for_gateway(load_config(None, env={"FERRY_SERVER_DATA_DIR": str(tmp_path)}))
    assert "1000" in diag.log_note and "level" in diag.log_note
