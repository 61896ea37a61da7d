"""Fixtures of the Iggy tests (helpers: iggy_clients.py)."""

from __future__ import annotations

import pytest

from ferry_harness import running_gateway

from core.broker import Broker
from core.flusher import run_broker_tasks


@pytest.fixture
def iggy_gateway(tmp_path):
    with running_gateway(tmp_path) as gw:
        yield gw


@pytest.fixture
async def broker(tmp_path, nursery):
    """An open broker with its background tasks in the test's nursery (pytest-trio)."""
    b = Broker.open(tmp_path / "data")
    await nursery.start(run_broker_tasks, b)
    yield b
    b.close()
