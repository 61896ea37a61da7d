"""Fixtures of the Iggy tests (helpers: iggy_clients.py)."""

from __future__ import annotations

import pytest

from ferry_harness import running_gateway


@pytest.fixture
def iggy_gateway(tmp_path):
    with running_gateway(tmp_path) as gw:
        yield gw
