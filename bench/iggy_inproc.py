"""The Iggy send path in one process, without sockets or fsync: what one batch costs
the trio thread (decode, handler, ``append_records``, flush preparation and write).

Usage: ``.venv/bin/python bench/iggy_inproc.py [--dialect 2|3] [--batches 300]
[--batch 1000] [--size 128] [--profile]``. A temp data dir under ``/tmp`` is
removed at the end; ``fsync=never`` so only CPU is measured. ``--profile``
prints the cProfile top 20 by own time (its overhead inflates the total).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapters.iggy.codec import legacy_request, vsr_request  # noqa: E402
from adapters.iggy.connection import State  # noqa: E402
from adapters.iggy.events import Reply, Request  # noqa: E402
from adapters.iggy.messages import WireMessage  # noqa: E402
from adapters.iggy.session import IggySession  # noqa: E402
from adapters.iggy.spec import COMMANDS  # noqa: E402
from adapters.iggy.types import PartitioningValue  # noqa: E402
from core.broker import Broker, BrokerConfig  # noqa: E402
from core.log import LogConfig  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dialect", type=int, choices=(2, 3), default=2)
    ap.add_argument("--batches", type=int, default=300)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="iggy-inproc-")
    broker = Broker.open(tmp, BrokerConfig(log=LogConfig(fsync="never")))
    try:
        broker.create_stream("bench")
        broker.create_topic("bench", "t", 1)
        session = IggySession(broker, client_id=1)
        session.user = broker.meta.users.authenticate("iggy", "iggy")
        conn = session.conn
        conn.dialect = a.dialect
        conn.state = conn._framing = State.VSR if a.dialect == 3 else State.LEGACY  # as after detection
        cmd = COMMANDS.by_name["message.send"]
        value = cmd.make(stream_id="bench", topic_id="t", partitioning=PartitioningValue(2, struct.pack("<I", 0)),
                         messages=tuple(WireMessage(0, b"x" * a.size, b"", 1) for _ in range(a.batch)))
        body = cmd.encode(a.dialect, value)
        frame = vsr_request(2, body, code=cmd.code) if a.dialect == 3 else legacy_request(cmd.code, body)
        part = broker.partition("bench", "t", 0)

        def run() -> None:
            for _ in range(a.batches):
                conn.receive_data(frame)
                event = conn.next_event()
                if not isinstance(event, Request):
                    raise SystemExit(f"frame refused: {event}")
                session.handle(event)
                part.flush(fsync=False)  # the flusher's write, synchronously; fires the ack
                conn.send(Reply(0, command=event.command))  # the ack the driver would send
                conn.data_to_send()

        started = time.perf_counter()
        if a.profile:
            prof = cProfile.Profile()
            prof.runcall(run)
            pstats.Stats(prof).sort_stats("tottime").print_stats(20)
        else:
            run()
        took = time.perf_counter() - started
        n = a.batches * a.batch
        print(f"dialect {a.dialect}: {n / took:,.0f} msgs/s in one process ({took / n * 1e9:,.0f} ns per message)")
    finally:
        broker.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
