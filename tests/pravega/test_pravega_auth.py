"""Pravega credentials and delegation tokens with the real client (always on; ``auth = true``
is still accepted).

The 0.3.8 client sends Basic credentials from its environment with every RPC,
fetches delegation tokens and presents them to the segment store
(adapters/pravega/auth.py). Ferry's users are the accounts: the root user
``iggy``/``iggy`` here."""

from __future__ import annotations

import pytest

from ferry_harness import running_gateway
from pravega_clients import credentials, run_scenario

pytestmark = pytest.mark.slow


def creds(password: str, enabled: str = "1") -> dict:
    return {**credentials("iggy", password), "AUTH": enabled}


def test_basic_credentials_and_delegation_tokens(tmp_path):
    with running_gateway(tmp_path, FERRY_PRAVEGA_CONTROLLER_AUTH="true", FERRY_PRAVEGA_TAIL_PARK_MS="500") as gw:
        port = str(gw.ports["pravega_controller"])
        got = run_scenario("auth.py", port, "ok", env=creds("iggy"))
        assert got == {"create_scope": {"value": True}, "create_stream": {"value": True},
                       "read": {"got": [f"a{i}" for i in range(10)]}}
        wrong = run_scenario("auth.py", port, "refused", env=creds("wrong"))["create_scope"]
        assert wrong["error"] == "ValueError" and "PermissionDenied" in wrong["text"]
        assert "invalid credentials" in wrong["text"]
        anonymous = run_scenario("auth.py", port, "refused", env=creds("iggy", enabled="0"))["create_scope"]
        assert "requires credentials" in anonymous["text"]
