"""nats.js (npm ``nats``) with TLS client certificates and per-user permissions.

Same installation and skips as test_nats_node.py (``make test`` installs the client).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import trustme

from ferry_harness import running_gateway

NODE_DIR = Path(__file__).parent / "node"
NODE = shutil.which("node")
AUTH_CONF = """
authorization {
  users = [
    {user: alice, password: a1, permissions: {
        publish: {allow: ["orders.>", "_INBOX.>"], deny: ["orders.secret"]}
        subscribe: ["orders.*", "_INBOX.>"]
    }}
  ]
}
"""

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node is not installed"),
    pytest.mark.skipif(not (NODE_DIR / "node_modules" / "nats").is_dir(),
                       reason="nats.js not installed: run `make test` (npm install in tests/nats/node)"),
]


def test_nats_js_tls_client_cert_and_permission_violations(tmp_path):
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    server.cert_chain_pems[0].write_to_path(str(tmp_path / "s.pem"))
    server.private_key_pem.write_to_path(str(tmp_path / "s.key"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    client = ca.issue_cert("alice@example.test")
    client.cert_chain_pems[0].write_to_path(str(tmp_path / "c.pem"))
    client.private_key_pem.write_to_path(str(tmp_path / "c.key"))
    (tmp_path / "auth.conf").write_text(AUTH_CONF)
    env = {"FERRY_NATS_TLS_CERT": str(tmp_path / "s.pem"), "FERRY_NATS_TLS_KEY": str(tmp_path / "s.key"),
           "FERRY_NATS_TLS_CA": str(tmp_path / "ca.pem"), "FERRY_NATS_TLS_VERIFY": "true",
           "FERRY_NATS_AUTH_FILE": str(tmp_path / "auth.conf"), "FERRY_NATS_AUTH_MODE": "nats-server"}
    with running_gateway(tmp_path, **env) as gw:
        done = subprocess.run([NODE, str(NODE_DIR / "secure_scenario.js"), f"127.0.0.1:{gw.ports['nats']}",
                               str(tmp_path / "ca.pem"), str(tmp_path / "c.pem"), str(tmp_path / "c.key")],
                              cwd=NODE_DIR, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    out = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert out["tls_required"] and out["tls_verify"]
    assert out["denied_sub"] == "PERMISSIONS_VIOLATION"     # that subscription failed, alone
    assert out["allowed"] == "yes" and out["closed"] is False
    assert "publish orders.secret" in out["errors"] and "subscription billing.x" in out["errors"], out["errors"]
