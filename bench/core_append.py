"""Append throughput and ack latency of the core log, against the raw disk.

What it measures
----------------
Producers append to one partition through the real :class:`core.broker.Broker`
while ``core.flusher`` (trio) group-commits; an append counts once its
``on_durable`` callback fired, which under ``fsync=batch|always`` means its
batch was written and fdatasync'd (docs/storage.md). Each scenario keeps
``producers x in_flight`` appends outstanding: ``in_flight=1`` is a producer
that waits for every ack (latency-bound), a larger window is a pipelining
client (Iggy batches, NATS async publish acks). A producer appends without
yielding while its window has room, as a protocol driver handles every message
of one socket read synchronously, and waits only when the window is full.

The denominator is measured in the same run on the same filesystem (the
benchmark's temp dir): ``os.write`` + ``os.fdatasync`` in a tight loop, with
one small write per sync (the most acks per second any fsync-per-ack design can
give, "raw syncs/s") and with 1 MiB writes (the disk's durable bandwidth,
"raw MB/s"). Each row reports its MB/s as a ratio of raw MB/s and its msgs/s
as a ratio of raw syncs/s. MB/s counts payload bytes only.

Targets (issue 3): durable acked appends >= 40k msg/s at 128 B with 256 in
flight; >= 0.5 of raw disk bandwidth with 1 KiB messages in batches.

Usage: ``.venv/bin/python bench/core_append.py [--seconds 3] [--dir PATH]``;
see bench/README.md. The whole default run takes well under two minutes.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from _harness import pct  # noqa: E402

from core.broker import Broker, BrokerConfig  # noqa: E402
from core.flusher import run_broker_tasks  # noqa: E402
from core.log import AppendInput, LogConfig  # noqa: E402

SEED = 20261122  # payload bytes are random but the same on every run
WARMUP_S = 0.3  # first appends pay for file creation and cold caches
RAW_BIG = 1024 * 1024  # "bandwidth" write size: far past any fdatasync fixed cost

# (payload bytes, producers, appends in flight per producer, messages per append
# call): 1 and 8 producers waiting for each ack; 8 x 32 = 256 single-message
# appends in flight; then clients that send batches of messages per call (an Iggy
# SendMessages of 64 messages, a NATS client's pipelined publishes coalesced by
# the adapter), 4 calls in flight each.
SCENARIOS = [
    (128, 1, 1, 1), (128, 8, 1, 1), (128, 8, 32, 1), (128, 8, 4, 64),
    (1024, 1, 1, 1), (1024, 8, 1, 1), (1024, 8, 32, 1), (1024, 8, 4, 64),
]  # fmt: skip
POLICIES = ("batch", "always")


@dataclass
class Row:
    size: int
    policy: str
    producers: int
    in_flight: int
    per_call: int
    msgs_s: float
    mb_s: float
    p50_ms: float
    p99_ms: float
    per_fsync: float


# -- the raw disk ---------------------------------------------------------------------
def raw_write_sync(directory: Path, size: int, seconds: float) -> tuple[float, float]:
    """``(syncs/s, MB/s)`` of ``os.write(size bytes) + os.fdatasync`` appending to one file."""
    path = directory / f"raw-{size}.bin"
    data = random.Random(SEED).randbytes(size)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        n, start = 0, time.perf_counter()
        deadline = start + seconds
        while True:
            os.write(fd, data)
            os.fdatasync(fd)
            n += 1
            if n % 8 == 0 and time.perf_counter() >= deadline:
                break
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink()
    return n / elapsed, n * size / elapsed / 1e6


# -- Ferry ----------------------------------------------------------------------------
async def run_scenario(
    directory: Path, size: int, policy: str, producers: int, in_flight: int, per_call: int, seconds: float
) -> Row:
    data_dir = directory / f"ferry-{size}-{policy}-{producers}x{in_flight}x{per_call}"
    broker = Broker.open(data_dir, BrokerConfig(log=LogConfig(fsync=policy)))
    try:
        broker.create_stream("bench")
        broker.create_topic("bench", "t", partitions=1)
        part = broker.partition("bench", "t", 0)
        rng = random.Random(SEED + size)
        batch = [AppendInput(rng.randbytes(size)) for _ in range(per_call)]
        latencies: list[int] = []  # ns, acks after the warm-up only
        clock = time.perf_counter_ns
        window = {"start": 0, "acked": 0, "stop": False}

        async def producer() -> None:
            slots = trio.Semaphore(in_flight)

            def acked(result, sent=0):
                slots.release()
                if window["start"] and sent >= window["start"]:
                    latencies.append(clock() - sent)  # one entry per call: its messages share the ack

            append = broker.append
            while not window["stop"]:
                # Like a protocol driver handling the messages of one socket read
                # (STYLE.md section 3), append while the window has room and yield
                # to trio only when it is full: one scheduling round per refill,
                # not one per message.
                try:
                    slots.acquire_nowait()
                except trio.WouldBlock:
                    await slots.acquire()
                sent = clock()
                append("bench", "t", batch, partition=0, on_durable=lambda r, s=sent: acked(r, s))
            for _ in range(in_flight):  # drain: every append is acked before we leave
                await slots.acquire()

        gc.collect()
        async with trio.open_nursery() as nursery:
            await nursery.start(run_broker_tasks, broker)
            async with trio.open_nursery() as clients:
                for _ in range(producers):
                    clients.start_soon(producer)
                await trio.sleep(WARMUP_S)
                fsyncs0 = part.fsync_count
                window["start"] = t0 = clock()
                await trio.sleep(seconds)
                n = len(latencies) * per_call
                t1 = clock()
                fsyncs = part.fsync_count - fsyncs0
                window["stop"] = True
            nursery.cancel_scope.cancel()
        elapsed = (t1 - t0) / 1e9
        lat = sorted(latencies[: n // per_call])
        p50 = pct(lat, 0.5) / 1e6 if lat else float("nan")
        p99 = pct(lat, 0.99) / 1e6 if lat else float("nan")
        return Row(size, policy, producers, in_flight, per_call, n / elapsed, n * size / elapsed / 1e6, p50, p99,
                   n / fsyncs if fsyncs else float("nan"))  # fmt: skip
    finally:
        broker.close()
        shutil.rmtree(data_dir, ignore_errors=True)


# -- report ---------------------------------------------------------------------------
def print_table(rows: list[Row], raw_syncs: float, raw_mb: float) -> None:
    head = (
        f"{'size':>5} {'fsync':>6} {'prod':>4} {'in-flight':>9} {'msgs/call':>9} {'msgs/s':>9} {'MB/s':>7} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'msgs/fsync':>10} {'x raw MB/s':>10} {'x raw syncs/s':>13}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r.size:>5} {r.policy:>6} {r.producers:>4} {r.producers * r.in_flight:>9} {r.per_call:>9} "
            f"{r.msgs_s:>9,.0f} "
            f"{r.mb_s:>7.2f} {r.p50_ms:>7.2f} {r.p99_ms:>7.2f} {r.per_fsync:>10.1f} "
            f"{r.mb_s / raw_mb:>10.2f} {r.msgs_s / raw_syncs:>13.2f}"
        )


def check_targets(rows: list[Row], raw_mb: float) -> list[str]:
    out = []
    best128 = max((r for r in rows if r.size == 128 and r.producers * r.in_flight >= 256 and r.per_call == 1),
                  key=lambda r: r.msgs_s)  # fmt: skip
    ok = best128.msgs_s >= 40_000
    out.append(f"target 128 B, 256 in flight >= 40k msg/s durable: {best128.msgs_s:,.0f} ({best128.policy}) "
               f"{'MET' if ok else 'NOT MET'}")  # fmt: skip
    best1k = max((r for r in rows if r.size == 1024 and r.per_call > 1), key=lambda r: r.mb_s)
    ratio = best1k.mb_s / raw_mb
    out.append(f"target 1 KiB batches >= 0.5 x raw MB/s: {ratio:.2f} ({best1k.mb_s:.1f} of {raw_mb:.1f} MB/s, "
               f"{best1k.policy}) {'MET' if ratio >= 0.5 else 'NOT MET'}")  # fmt: skip
    return out


async def main_async(args: argparse.Namespace, directory: Path) -> None:
    raw_syncs, _ = raw_write_sync(directory, 128, args.raw_seconds)
    _, raw_mb = raw_write_sync(directory, RAW_BIG, args.raw_seconds)
    rows = []
    for size, producers, in_flight, per_call in SCENARIOS:
        if args.sizes and size not in args.sizes or args.batched_only and per_call == 1:
            continue
        for policy in POLICIES:
            row = await run_scenario(directory, size, policy, producers, in_flight, per_call, args.seconds)
            rows.append(row)
            print(f"  .. {size} B {policy} {producers}x{in_flight}x{per_call}: {row.msgs_s:,.0f} msg/s", file=sys.stderr)
    # A virtual disk's speed drifts over a minute: measure the raw rates again
    # and divide by the better of the two, so no ratio flatters Ferry.
    syncs2, _ = raw_write_sync(directory, 128, args.raw_seconds)
    _, mb2 = raw_write_sync(directory, RAW_BIG, args.raw_seconds)
    print(f"raw disk in {directory} (before / after the scenarios):")
    print(f"  write(128 B) + fdatasync: {raw_syncs:,.0f} / {syncs2:,.0f} per s")
    print(f"  write(1 MiB) + fdatasync: {raw_mb:.1f} / {mb2:.1f} MB/s")
    raw_syncs, raw_mb = max(raw_syncs, syncs2), max(raw_mb, mb2)
    print()
    print_table(rows, raw_syncs, raw_mb)
    print()
    if not args.sizes and not args.batched_only:
        for line in check_targets(rows, raw_mb):
            print(line)
    lat = [r.p99_ms for r in rows]
    print(f"(p99 ack latency across rows: median {statistics.median(lat):.2f} ms)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0,
                        help="measured time per scenario (default 3; 16 scenarios)")  # fmt: skip
    parser.add_argument("--raw-seconds", type=float, default=2.0, help="time per raw-disk measurement (default 2)")
    parser.add_argument("--dir", type=Path, default=Path.cwd(),
                        help="where to create the temp dir (default: the current directory, where "
                             "`ferry serve` keeps ./data; /tmp may be a tmpfs, where fsync means nothing)")  # fmt: skip
    parser.add_argument("--sizes", type=int, nargs="*", help="only these payload sizes (profiling)")
    parser.add_argument("--batched-only", action="store_true", help="only the batched scenarios (profiling)")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.raw_seconds <= 0:
        parser.error("--seconds and --raw-seconds must be > 0")
    directory = Path(tempfile.mkdtemp(prefix="ferry-bench-", dir=args.dir))
    try:
        trio.run(main_async, args, directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
