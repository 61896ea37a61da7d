"""Spark drivers in their own processes: kill -9 mid-stream, and a standalone cluster.

Each test starts a new JVM (or three), so they are marked ``slow`` as well as ``spark``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ferry_harness import free_port, wait_for_port
from spark_helpers import produce

pytestmark = [pytest.mark.spark, pytest.mark.slow]
JOB = Path(__file__).with_name("spark_driver_job.py")
ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 180  # guards a hang only


def driver(cfg: dict, **kw) -> subprocess.Popen:
    # Own session: the kill takes the Python driver and its JVM child together.
    return subprocess.Popen([sys.executable, str(JOB), json.dumps(cfg)], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, **kw)


def result(proc: subprocess.Popen) -> dict:
    out, _ = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 0, out
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


def out_payloads(client, stream: str) -> list[bytes]:
    got = []
    for pid, end in client.next_offsets(stream, "out").items():
        for polled in client.poll_range(stream, "out", pid, 0, end):
            got += [r.payload for r in polled.records()]
    return got


def test_kill_9_of_the_driver_mid_stream_leaves_the_ferry_sink_exactly_once(ferry, client, stream_name, tmp_path):
    client.ensure_topic(stream_name, "in", 2)
    client.ensure_topic(stream_name, "out", 2)
    # Per partition, offsets [0, 300) exist before the kill and [300, 600) arrive after it, so
    # the kill always lands with the stream unfinished; the driver copies 200 per micro-batch.
    before, total = 300, 600
    for p in range(2):
        produce(client, stream_name, "in", p, [b"%d-%d" % (p, i) for i in range(before)])
    cfg = {"action": "stream-copy", "master": "local[1]", "servers": f"127.0.0.1:{ferry.ports['iggy_tcp']}",
           "stream": stream_name, "checkpoint": str(tmp_path / "cp"), "trigger": "continuous"}
    proc = driver(cfg)
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and len(out_payloads(client, stream_name)) < 400:
            assert proc.poll() is None, "the driver ended before it was killed"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert 400 <= len(out_payloads(client, stream_name)) <= 2 * before
    for p in range(2):
        produce(client, stream_name, "in", p, [b"%d-%d" % (p, i) for i in range(before, total)])
    assert result(driver(cfg | {"trigger": "available-now"})) == {"done": True}
    got = out_payloads(client, stream_name)
    assert sorted(got) == sorted(b"%d-%d" % (p, i) for p in range(2) for i in range(total))


def wait_port(port: int, proc: subprocess.Popen) -> None:
    if not wait_for_port(port, timeout=WAIT_S, proc=proc, interval=0.2):
        assert proc.poll() is None, "a Spark daemon exited"
        raise AssertionError(f"nothing listens on {port}")


def test_batch_read_on_a_standalone_cluster(ferry, client, stream_name, tmp_path):
    import pyspark

    client.ensure_topic(stream_name, "t", 2)
    produce(client, stream_name, "t", 0, [b"a", b"b"])
    produce(client, stream_name, "t", 1, [b"c"])
    home = Path(pyspark.__file__).parent
    env = os.environ | {"SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
                        "SPARK_WORKER_DIR": str(tmp_path / "work"), "SPARK_LOG_DIR": str(tmp_path / "logs")}
    port = free_port()
    spark_class = str(home / "bin" / "spark-class")
    daemons = []
    try:
        master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                   "--port", str(port), "--webui-port", str(free_port())], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        daemons.append(master)
        wait_port(port, master)
        worker = subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                   "--webui-port", str(free_port()), "--cores", "1", "--memory", "1g",
                                   f"spark://127.0.0.1:{port}"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        daemons.append(worker)
        got = result(driver({"action": "batch-count", "master": f"spark://127.0.0.1:{port}", "topic": "t",
                             "servers": f"127.0.0.1:{ferry.ports['iggy_tcp']}", "stream": stream_name}, env=env))
        assert got == {"rows": [[0, 0, "a"], [0, 1, "b"], [1, 0, "c"]], "master": f"spark://127.0.0.1:{port}"}
    finally:
        for d in reversed(daemons):  # stop by PID, as started
            os.killpg(d.pid, signal.SIGTERM)
            try:
                d.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(d.pid, signal.SIGKILL)
                d.wait(30)


def test_ferry_pipeline_cli_archive_then_replay(ferry, client, stream_name, tmp_path):
    client.ensure_topic(stream_name, "t", 2)
    produce(client, stream_name, "t", 0, [b"a", b"b"])
    produce(client, stream_name, "t", 1, [b"c"])
    ferry_bin = Path(sys.executable).with_name("ferry")
    base = ["--servers", f"127.0.0.1:{ferry.ports['iggy_tcp']}", "--stream", stream_name, "--master", "local[1]"]
    env = os.environ | {"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    for argv in (["archive", "--topic", "t", "--out", str(tmp_path / "arch"), "--trigger", "available-now"],
                 ["replay", "--in", str(tmp_path / "arch"), "--topic", "back", "--partitions", "2",
                  "--keep-partitions"]):
        proc = subprocess.run([str(ferry_bin), "pipeline", *argv, *base], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=WAIT_S)
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert "replayed 3 messages" in proc.stderr
    got = {p: [r.payload for polled in client.poll_range(stream_name, "back", p, 0, end) for r in polled.records()]
           for p, end in client.next_offsets(stream_name, "back").items()}
    assert got == {0: [b"a", b"b"], 1: [b"c"]}
