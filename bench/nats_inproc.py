"""NATS listener cost per message without sockets or trio (docs/nats.md, "Performance").

Feeds 200k PUBs (sizes varied size-3..size+4, like the shared harness) in
256 KiB chunks through NatsServerConnection + NatsSession on a real Broker,
with 0 (pub), 1 (pubsub) or 4 (fanout4) subscribers whose outboxes are
joined after every chunk, and prints the best of 7 passes in ns/message.
Pass ``--codec-proto`` to also time the typed Cython scanner prototype
(``bench/nats_cscan_proto.pyx``, built by hand; see bench/README.md).

    .venv/bin/python bench/nats_inproc.py --mode pubsub --size 128
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapters.nats.codec import ServerCodec  # noqa: E402
from adapters.nats.connection import NatsServerConnection, ServerInfo  # noqa: E402
from adapters.nats.outbox import Outbox  # noqa: E402
from adapters.nats.session import NatsSession  # noqa: E402
from core.broker import Broker  # noqa: E402

FRAMES = 200_000          # per pass; enough for a stable best-of
CHUNK = 256 * 1024        # the driver's RECV_CHUNK
PASSES = 7
SUBSCRIBERS = {"pub": 0, "pubsub": 1, "fanout4": 4}


def frames(size: int, interleave: bool = False) -> bytes:
    """FRAMES PUBs on ``bench``; with ``interleave`` every other one on ``bencx``
    (nobody subscribes), so no two consecutive PUBs share a subject and the
    session's runs (adapters/nats/pubscan.py) are one message long."""
    out = []
    for i in range(FRAMES):
        n = max(size - 3, 0) + i % 8
        subject = b"bencx" if interleave and i % 2 else b"bench"
        out.append(b"PUB %s %d\r\n" % (subject, n) + b"x" * n + b"\r\n")
    return b"".join(out)


def session(broker, cid: int) -> NatsSession:
    conn = NatsServerConnection(ServerInfo("NBENCH"), client_id=cid, client_ip="")
    s = NatsSession(broker, conn, Outbox(1 << 40))   # never a slow consumer here
    conn.data_to_send()
    return s


def feed(s: NatsSession, data: bytes) -> None:
    s.conn.receive_data(data)
    s.process()


def run(mode: str, size: int, interleave: bool = False) -> float:
    tmp = tempfile.mkdtemp(prefix="ferry-nats-inproc-")
    try:
        with Broker.open(tmp) as broker:
            pub = session(broker, 1)
            feed(pub, b'CONNECT {"verbose":false,"pedantic":false}\r\n')
            subs = []
            for i in range(SUBSCRIBERS[mode]):
                s = session(broker, 10 + i)
                feed(s, b'CONNECT {"verbose":false}\r\nSUB bench 1\r\n')
                subs.append(s.outbox)
            blob = frames(size, interleave)
            chunks = [blob[i:i + CHUNK] for i in range(0, len(blob), CHUNK)]
            best = float("inf")
            for _ in range(PASSES):
                t = time.perf_counter()
                for chunk in chunks:
                    feed(pub, chunk)
                    for outbox in subs:
                        outbox.take()
                best = min(best, time.perf_counter() - t)
            return best / FRAMES * 1e9
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def scan_only(size: int) -> tuple[float, float | None]:
    """ns/frame of ServerCodec.scan_pubs and, if built, of the Cython prototype."""
    blob = bytearray(frames(size))
    try:
        from nats_cscan_proto import scan_pubs as cscan  # type: ignore[import-not-found]
    except ImportError:
        cscan = None
    py = c = float("inf")
    for _ in range(PASSES):
        codec = ServerCodec()
        codec.receive_data(blob)
        out: list = []
        t = time.perf_counter()
        codec.scan_pubs(out)
        py = min(py, time.perf_counter() - t)
        if cscan is not None:
            out2: list = []
            t = time.perf_counter()
            cscan(blob, 0, out2)
            c = min(c, time.perf_counter() - t)
            if len(out2) != len(out) or out2[-1][:2] != out[-1][:2] or out2[-1][3] != out[-1][3]:
                raise SystemExit("the prototype disagrees with scan_pubs")
    return py / FRAMES * 1e9, (c / FRAMES * 1e9 if cscan is not None else None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=sorted(SUBSCRIBERS), default="pub")
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--interleave", action="store_true",
                    help="every other PUB on a subject nobody subscribes to (runs of one message)")
    ap.add_argument("--codec-proto", action="store_true", help="time scan_pubs alone, and the Cython prototype")
    args = ap.parse_args()
    if args.codec_proto:
        py, c = scan_only(args.size)
        extra = f", Cython prototype {c:.0f} ns/frame" if c is not None else " (prototype not built)"
        print(f"scan {args.size} B: scan_pubs {py:.0f} ns/frame{extra}")
        return
    ns = run(args.mode, args.size, args.interleave)
    label = " interleaved" if args.interleave else ""
    print(f"{args.mode}{label} {args.size} B: {ns:.0f} ns/msg ({1e9 / ns / 1e3:.0f}k msg/s, one core, no sockets)")


if __name__ == "__main__":
    main()
