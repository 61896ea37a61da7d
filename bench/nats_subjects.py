"""NATS publishing with interleaved subjects: Ferry against nats-server, same run.

Why this bench exists
---------------------
The shared harness (``bench/nats_anchors.sh`` -> ``../shared/bench/anchors.py``)
publishes every message on one subject, with varied sizes so no PUB line
repeats. Ferry's PUB fast path takes a receive as *runs* of one subject and
reply (adapters/nats/pubscan.py): a run with no subscriber is only counted, and a
run's MSG frames are rendered once per subscriber. One subject is a real
producer's pattern, but not everyone's, so this bench alternates every message
between the subscribed subject (``bench.s``) and a second one nobody subscribes
to (``bench.t``): every run is one message long, the worst case for runs.

It reuses the shared ``natsbench.py`` clients (their exact frame counting),
with one change: the publisher sends each frame on ``bench.s`` followed by a
frame of the same size on ``bench.t``. ``published``/``delivered`` count the
``bench.s`` messages; ``sent`` msgs/s (pub) counts both.

    .venv/bin/python bench/nats_subjects.py                    # pub, pubsub, fanout4 x 16 B, 128 B; 3 x 2 s
    .venv/bin/python bench/nats_subjects.py --sizes 128 --repeats 1

Prints median [min..max] per server and the ratio Ferry / nats-server, with the
load average before and after (absolute rates move +-30 % on a shared 2-core VM).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("SHARED_BENCH", ROOT.parent / "shared" / "bench"))
OTHER = b"bench.t"   # same length as natsbench.SUBJ (b"bench.s"): frames of both have equal sizes
START_LIMIT_S = 30


def interleaved_publish(host, port, size, seconds, max_msgs, subject=None, batch_bytes=65536, sockbuf=0,
                        vary=False):
    """natsbench.raw_publish, every frame followed by one of the same size on OTHER."""
    import natsbench as nb
    subject = subject or nb.SUBJ
    c = nb.RawConn(host, port, name="natsbench-pub", sockbuf=sockbuf)
    sizes = nb.cycle_sizes(size, vary)
    frame = b"".join(b"PUB %s %d\r\n%s\r\nPUB %s %d\r\n%s\r\n" % (subject, z, b"x" * z, OTHER, z, b"x" * z)
                     for z in sizes)
    k = max(1, batch_bytes // len(frame))
    batch = frame * k
    k *= len(sizes)   # bench.s messages per batch (and as many on OTHER)
    sendall = c.sock.sendall
    c.sock.settimeout(60)
    n = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while n < max_msgs:
        sendall(batch)
        n += k
        if time.perf_counter() >= deadline:
            break
    t_sent = time.perf_counter()
    c.ping_pong(timeout=60)   # the server has processed every PUB before this PONG
    return c, {"published": n, "t0": t0, "t_sent": t_sent, "t_flushed": time.perf_counter(),
               "frame_bytes": len(frame) // (2 * len(sizes)), "batch_frames": k, "errors": list(c.errors)}


def run_client(argv: list[str]) -> None:
    """``nats_subjects.py run ...``: natsbench's ``run`` with the interleaved publisher."""
    sys.path.insert(0, str(SHARED))
    import natsbench as nb
    nb.raw_publish = interleaved_publish
    sys.argv = [str(SHARED / "natsbench.py"), *argv]
    nb.main()


def _start(argv: list[str], port: int, workdir: Path, name: str) -> subprocess.Popen:
    sys.path.insert(0, str(ROOT / "bench"))
    from _harness import wait_listening
    proc = subprocess.Popen(argv, cwd=workdir, stdout=subprocess.DEVNULL,
                            stderr=open(workdir / f"{name}.log", "wb"), start_new_session=True)
    if not wait_listening(port, proc, START_LIMIT_S):
        raise SystemExit(f"{name} did not listen on {port} (log: {workdir / (name + '.log')})")
    return proc


def cell(url: str, mode: str, size: int, seconds: float) -> dict:
    out = subprocess.run([sys.executable, __file__, "run", "--url", url, "--mode", mode, "--size", str(size),
                          "--seconds", str(seconds), "--vary"], capture_output=True, text=True, timeout=seconds + 120)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise SystemExit(f"natsbench failed ({mode} {size} B): {out.stderr[-800:]}")
    r = json.loads(lines[-1])
    if r.get("lost") or r.get("errors"):
        raise SystemExit(f"{mode} {size} B at {url}: lost {r.get('lost')} errors {r.get('errors')}")
    if mode == "pub":
        r["value"] *= 2   # both subjects' PUBs
    return r


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "run":
        run_client(sys.argv[1:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="16,128")
    ap.add_argument("--modes", default="pub,pubsub,fanout4")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--ferry-cmd", default=None,
                    help="command that starts the Ferry under test on {port} with data in {data} "
                         "(default: this checkout's .venv/bin/ferry serve --only nats)")
    a = ap.parse_args()
    sys.path.insert(0, str(SHARED))
    sys.path.insert(0, str(ROOT / "bench"))
    from _harness import free_port, stop
    from anchors import find_nats_server
    work = Path(tempfile.mkdtemp(prefix="nats-subjects-", dir="."))
    load0 = os.getloadavg()
    procs = []
    try:
        ref_port, ferry_port = free_port(), free_port()
        procs.append(_start([find_nats_server(), "-a", "127.0.0.1", "-p", str(ref_port)], ref_port, work,
                            "nats-server"))
        if a.ferry_cmd:
            ferry = ["bash", "-c", a.ferry_cmd.format(port=ferry_port, data=work / "data")]
        else:
            ferry = [str(ROOT / ".venv" / "bin" / "ferry"), "serve", "--only", "nats", "--host", "127.0.0.1",
                     "--nats-port", str(ferry_port), "--data", str(work / "data")]
        procs.append(_start(ferry, ferry_port, work, "ferry"))
        # Ferry asks for credentials (docs/security.md); nats-server without an
        # authorization block ignores them, so both get the same CONNECT.
        servers = {"nats-server": f"nats://iggy:iggy@127.0.0.1:{ref_port}",
                   "ferry": f"nats://iggy:iggy@127.0.0.1:{ferry_port}"}
        results: dict = {}
        for rep in range(a.repeats):
            for mode in a.modes.split(","):
                for size in map(int, a.sizes.split(",")):
                    for name, url in servers.items():   # interleaved, as anchors.py does
                        r = cell(url, mode, size, a.seconds)
                        results.setdefault((mode, size), {}).setdefault(name, []).append(r["value"])
                        print(f"#   rep {rep} {mode} {size}B {name:<12} {r['value'] / 1e3:,.0f}k", flush=True)
        load1 = os.getloadavg()
        print(f"\ninterleaved subjects (bench.s / bench.t alternating), {a.repeats} x {a.seconds:g} s per cell, "
              f"load average {load0[0]:.2f} -> {load1[0]:.2f}")
        print(f"{'cell':<16} | {'nats-server msgs/s':>28} | {'ferry msgs/s':>28} | ratio")
        for (mode, size), by in results.items():
            def fmt(v: list) -> str:
                return f"{statistics.median(v) / 1e3:,.0f}k [{min(v) / 1e3:,.0f}k..{max(v) / 1e3:,.0f}k]"
            ratio = statistics.median(by["ferry"]) / statistics.median(by["nats-server"])
            print(f"{mode + ' ' + str(size) + 'B':<16} | {fmt(by['nats-server']):>28} | {fmt(by['ferry']):>28} | "
                  f"{ratio:5.2f}")
    finally:
        stop(*procs, group=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
