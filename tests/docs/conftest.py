"""One gateway for every documentation block (tests/docs/test_doc_blocks.py).

The blocks share it on purpose: a reader runs one quick start after another against
the same `ferry serve`, so each block must cope with what the others left behind.
"""

from __future__ import annotations

import pytest

from ferry_harness import running_gateway


@pytest.fixture(scope="module")
def docs_gateway(tmp_path_factory):
    with running_gateway(tmp_path_factory.mktemp("docs-gateway")) as gw:
        yield gw


@pytest.fixture(scope="module")
def docs_workdir(tmp_path_factory):
    """The blocks' working directory (Spark's Parquet output and checkpoint land here)."""
    return tmp_path_factory.mktemp("docs-cwd")
