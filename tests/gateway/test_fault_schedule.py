"""Scale-out under a fault schedule, short (issue 30): bench/fault_schedule.py for one minute
with seed 1 (two gateways over a real 3-node nats-server cluster; SIGKILL, SIGSTOP/SIGCONT and
restarts of nodes and gateways; Kafka idempotent producers and a consumer group, JetStream
publishers with msg ids and a durable pull consumer across the gateways), then the history
checker (bench/history_check.py) on what it recorded.

The ten-minute runs and their figures are in docs/scale-out.md ("Fault schedule")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nats_cluster import find_nats_server
from nats_cluster_fixtures import SKIP_REASON

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import history_check as hc  # noqa: E402

# Not part of `make test`: two minutes of a 3-node cluster, two gateways and their clients
# under faults took the CPU the rest of the suite needed (a CI run at 18 minutes, a Spark
# worker timing out); `make fault-schedule` runs it (Makefile), as `make rdkafka-suite`
# runs librdkafka's suite. The checker's own tests (test_history_check.py) stay in the suite.
OPT_IN = "FERRY_FAULT_SCHEDULE"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(find_nats_server() is None, reason=SKIP_REASON),
              pytest.mark.skipif(not os.environ.get(OPT_IN), reason=f"run by `make fault-schedule` ({OPT_IN}=1)")]
RUN_LIMIT_S = 900  # a hang guard: the run itself is ~1 min of faults plus start, drain and reads

# What the schedule found and is not fixed yet (docs/scale-out.md "Fault schedule", items 1
# and 6 in part): a Kafka call cut by a gateway SIGKILL between its messages is completed by
# the retry after what came in between (its acked offsets then name other records), and a
# librdkafka epoch bump after NOT_LEADER_OR_FOLLOWER may store a "possibly persisted" batch
# twice. Until they are fixed the full check is an expected failure; what already holds is
# asserted first, so it cannot regress unseen.


def test_a_one_minute_fault_schedule_then_the_history_check(tmp_path):
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "fault_schedule.py"), "--seed", "1",
                           "--minutes", "1", "--gateways", "2", "--writers", "1", "--converge-seconds", "15",
                           "--out", str(out)], capture_output=True, text=True, timeout=RUN_LIMIT_S, cwd=ROOT)
    assert done.returncode in (0, 1), done.stderr[-3000:]  # 1: the checker found something (judged below)
    summary = json.loads((out / "summary.json").read_text())
    rep = hc.check(hc.load(out / "history.jsonl"))
    assert summary["faults_applied"] >= 5 and summary["fault_errors"] == [], summary
    by = summary["by_path"]
    assert by["kafka"]["acked"] > 0 and by["js"]["acked"] > 0 and by["kafka"]["read"] > 0 and by["js"]["read"] > 0
    assert rep.final >= rep.acked - len(rep.lost)  # the end-state logs were read
    assert {e["target"] for e in hc.load(out / "history.jsonl") if e["ev"] == "fault"} >= {"gw0", "gw1"}
    assert [v for v in rep.lost if v["path"] == "kafka"] == []          # acked Kafka records all there
    assert rep.offset_regressions == [] and rep.skipped == [] and rep.unread == []
    assert rep.diverged == []   # the JetStream consumer's state too (finding 5, fixed)
    if not rep.ok:
        pytest.xfail(f"known defects (docs/scale-out.md, Fault schedule): {rep.figures()}")
