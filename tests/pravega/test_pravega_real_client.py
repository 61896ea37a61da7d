"""The real Pravega client (PyPI pravega 0.3.8, the Rust client) against Ferry.

Each scenario script (tests/pravega/clients/) runs in the client's own 3.11
venv against a gateway on 127.0.0.1 port 0, under a hard timeout with the
client's RUST_LOG output shown on failure (tests/support/pravega_clients.py).
No Pravega server can run here, so the expected answers are what the real
controller and segment store answer (protocols/pravega.md, pravega-client.md):
SUCCESS -> True, *_EXISTS -> False, INVALID_*/NOT_FOUND -> the client's errors.
"""

from __future__ import annotations

import pytest

from ferry_harness import running_gateway
from pravega_clients import run_scenario

# store: also run with every gateway on a JetStream cluster (make test, docs/scale-out.md "Tests")
pytestmark = [pytest.mark.slow, pytest.mark.store]


@pytest.fixture
def pravega_gateway(tmp_path):
    # Short tail parks keep reader shutdown quick; the default is 5 s.
    with running_gateway(tmp_path, FERRY_PRAVEGA_TAIL_PARK_MS="500") as gw:
        yield gw


def test_scopes_streams_writes_and_reader_group(pravega_gateway):
    got = run_scenario("basic.py", str(pravega_gateway.ports["pravega_controller"]))
    assert got["create_scope"] == {"value": True}
    assert got["create_scope_again"] == {"value": False}
    assert got["create_stream"] == {"value": True}
    assert got["create_stream_again"] == {"value": False}
    # Non-retryable errors, with the client's own texts (INVALID_*/SCOPE_NOT_FOUND statuses).
    assert got["create_stream_missing_scope"]["error"] == "ValueError"
    assert "Scope Not Found" in got["create_stream_missing_scope"]["text"]
    assert "Invalid scope" in got["create_scope_bad_name"]["text"]
    assert "Invalid Stream" in got["create_stream_bad_name"]["text"]
    # 81 events with routing keys over 4 segments: blocking, async and bytes writes; a
    # reader group reads each exactly once, every key's events in write order.
    assert got["written"] == {"value": 81}
    assert got["read"] == {"count": 81, "ordered": True, "distinct": 81, "unordered": {},
                           "keys": ["k0", "k1", "k2", "k3", "k4", "k9", "z0", "z1", "z2"]}
    assert got["list_scopes"] == {"value": ["sc1"]}
    assert got["list_streams"] == {"value": ["st1"]}
    assert "Stream Not Sealed" in got["delete_unsealed"]["text"]
    assert got["seal"] == {"value": True}
    assert got["delete_sealed"] == {"value": True}
    assert got["delete_scope"] == {"value": True}


def test_two_readers_share_segments_then_one_goes_offline(pravega_gateway):
    got = run_scenario("extras.py", str(pravega_gateway.ports["pravega_controller"]), "shared")
    assert got["shared"] == {"r1": True, "r2": True, "count": 400, "distinct": 400, "complete": True}


def test_read_from_tail(pravega_gateway):
    got = run_scenario("extras.py", str(pravega_gateway.ports["pravega_controller"]), "tail")
    assert got["from_tail"] == {"got": [f"new{i}" for i in range(5)]}


def test_transaction_committed_and_aborted(pravega_gateway):
    got = run_scenario("extras.py", str(pravega_gateway.ports["pravega_controller"]), "txn")
    assert got["txn_open"] == {"value": True}
    assert got["txn_committed"] == {"open": False}
    assert got["txn_aborted"] == {"open": False}
    assert got["txn_read"] == {"got": [f"c{i}" for i in range(6)]}  # the aborted event is never read


def test_byte_stream_write_seek_read_truncate(pravega_gateway):
    got = run_scenario("extras.py", str(pravega_gateway.ports["pravega_controller"]), "bytes")
    assert got["bytes_written"] == {"value": 18, "tail": 18, "head": 0}
    assert got["bytes_read"] == {"n": 11, "data": "byte stream"}
    assert got["bytes_truncated"] == {"head": 7, "tail": 18}
    assert got["bytes_after_truncate"] == {"data": "byte"}


def test_stream_policies_tags_and_refused_scaling(pravega_gateway):
    got = run_scenario("extras.py", str(pravega_gateway.ports["pravega_controller"]), "policies")
    assert got["create_with_policy"] == {"value": True}
    assert got["tags"] == {"value": ["a", "b"]}
    assert got["update_policy"] == {"value": True}
    assert got["tags_after"] == {"value": ["c"]}
    assert got["scale_refused"]["error"] == "ValueError"
    assert "scaling" in got["scale_refused"]["text"]


def test_large_events_and_a_sealed_stream(pravega_gateway):
    got = run_scenario("extras.py", str(pravega_gateway.ports["pravega_controller"]), "big")
    mib = 1024 * 1024
    assert got["big_read"] == {"got": [[mib, True], [8 * mib - 64, True], [9 * mib, True]]}
    # A sealed stream has no current segments: the client's write fails (as against Pravega).
    assert got["sealed_write"]["error"] == "ValueError"
