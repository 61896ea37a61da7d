"""schemathesis against /openapi.json: no 5xx, and responses conform to the document.

Runs the schemathesis CLI in a subprocess against the in-process gateway, with
a fixed seed (reproducible) and a bearer token. User routes that would lock the
test out (logout, changing or deleting users) are excluded.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import trio

from http_helpers import client, gateway, login, make_topic

ST = shutil.which("schemathesis") or str(Path(sys.executable).with_name("schemathesis"))
CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,"
          "response_schema_conformance,response_headers_conformance")
RUN_LIMIT_S = 600  # guards a hang only
# Random cases per operation in the fuzzing phase (it also bounds the stateful phase's
# scenarios); the coverage phase's deterministic boundary and negative cases for every
# operation do not depend on it. 25 cost a third more CPU.
MAX_EXAMPLES = 15


@pytest.mark.skipif(not Path(ST).exists(), reason="schemathesis is not installed (pip install '.[test]')")
async def test_schemathesis_finds_no_server_errors(tmp_path):
    with trio.fail_after(RUN_LIMIT_S):
        async with gateway(tmp_path) as port, client(port) as c:
            token = await login(c)
            await make_topic(c, partitions=2)
            result = await trio.run_process(
                [ST, "run", f"http://127.0.0.1:{port}/openapi.json", "-H", f"Authorization: Bearer {token}",
                 "--checks", CHECKS, "--max-examples", str(MAX_EXAMPLES), "--seed", "1",
                 # user routes that would lock the run out; the endless SSE stream
                 "--exclude-path-regex", r"^/users/(logout|\{)|/messages/stream$", "--no-color"],
                capture_stdout=True, capture_stderr=True, check=False, cwd=tmp_path)  # its cache dir stays there
    out = result.stdout.decode(errors="replace")
    assert result.returncode == 0, out[-6000:] + result.stderr.decode(errors="replace")[-2000:]
    assert " passed" in out and "failed" not in out.split("SUMMARY")[-1]
