"""``ferry bench``: nats bench's core pub/sub and request/reply benchmarks, in one process.

Every publisher and subscriber has its own nats-py connection (as ``nats bench``
gives each client one). Figures follow nats bench's stats (the classic
nats.go bench package and natscli internal/bench/stats.go):

- a sample is one client: messages, bytes (messages x --size), seconds;
  msgs/sec = messages / seconds, truncated to an integer in the text report;
- a group (publishers, subscribers) spans its earliest start to its latest end;
  min/avg/max/stddev are over its clients' msgs/sec (population stddev);
- the Pub/Sub line aggregates every sample of both groups;
- request latencies: P = sorted[ceil(p/100 x n) - 1], in microseconds.

Publishers start together after every subscriber has subscribed; a subscriber's
clock starts then too (nats bench starts it at its first message, which makes
a run of a few messages report a near-infinite rate) and stops at its last
message. A run that stops moving for --timeout (no message sent or received)
fails instead of hanging; so does a subscriber whose connection the server cut
(a slow consumer).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from dataclasses import dataclass, field

from .nats_client import (EXIT_USAGE, Connection, NatsCliError, check_subject, connection_settings,
                          log, parse_size, positive_int, reason)

BENCH_QUEUE = "ferry-bench"  # request mode: repliers share one queue group, so each request is answered once
WATCH_INTERVAL_S = 0.1  # how often the progress bar and the stall check look at the counters
NO_RESPONDERS = "No responders available for request"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("subject")
    p.add_argument("--pub", type=positive_int, default=1, metavar="N",
                   help="publishers, or requesters with --request (default 1)")
    p.add_argument("--sub", type=positive_int, default=0, metavar="M",
                   help="subscribers, or repliers with --request (default 0)")
    p.add_argument("--msgs", type=positive_int, default=100_000, metavar="K",
                   help="messages to send, split among the publishers (default 100000)")
    p.add_argument("--size", type=parse_size, default=128, metavar="B",
                   help="message size: 128, 128B, 1KB, 1KiB (default 128)")
    p.add_argument("--request", action="store_true",
                   help="request/reply: publishers send requests one at a time and time each reply")
    p.add_argument("--json", action="store_true", help="print the results as one JSON object")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="a progress bar on stderr (default: only when stderr is a terminal)")


# -- statistics ------------------------------------------------------------------
@dataclass
class Sample:
    """One client's run."""

    msgs: int
    size: int
    start: float
    end: float
    latencies: list[float] = field(default_factory=list)  # seconds, request mode only

    @property
    def seconds(self) -> float:
        return max(self.end - self.start, 1e-9)  # a clock that did not move still divides

    @property
    def rate(self) -> float:
        return self.msgs / self.seconds if self.msgs else 0.0

    @property
    def throughput(self) -> float:
        return self.msgs * self.size / self.seconds if self.msgs else 0.0

    def as_dict(self) -> dict:
        return {"msgs": self.msgs, "bytes": self.msgs * self.size, "seconds": self.seconds,
                "msgs_per_sec": self.rate, "bytes_per_sec": self.throughput}


def group(samples: list[Sample], size: int) -> Sample:
    """The samples as one: all their messages over the span from first start to last end."""
    return Sample(sum(s.msgs for s in samples), size, min(s.start for s in samples),
                  max(s.end for s in samples), sorted(x for s in samples for x in s.latencies))


def rate_stats(samples: list[Sample]) -> dict:
    """min/avg/max/stddev of the clients' integer msgs/sec (nats bench's MsgRateStatistics)."""
    rates = [int(s.rate) for s in samples]
    avg = sum(rates) // len(rates)
    return {"min": min(rates), "avg": avg, "max": max(rates),
            "stddev": math.sqrt(sum((r - avg) ** 2 for r in rates) / len(rates))}


def percentile(sorted_values: list[float], p: float) -> float:
    return sorted_values[max(math.ceil(p / 100 * len(sorted_values)) - 1, 0)]


def latency_stats(latencies: list[float]) -> dict:
    """Microseconds: count, min, avg, max, stddev, p50, p90, p99, p99_9."""
    us = sorted(x * 1e6 for x in latencies)
    avg = sum(us) / len(us)
    return {"count": len(us), "min": us[0], "avg": avg, "max": us[-1],
            "stddev": math.sqrt(sum((x - avg) ** 2 for x in us) / len(us)),
            "p50": percentile(us, 50), "p90": percentile(us, 90), "p99": percentile(us, 99),
            "p99_9": percentile(us, 99.9)}


def split(total: int, clients: int) -> list[int]:
    """nats bench's MsgsPerClient: equal shares, the remainder one each to the first clients."""
    if clients == 0:
        return []
    share, extra = divmod(total, clients)
    return [share + (1 if i < extra else 0) for i in range(clients)]


# -- text report (nats bench's layout) -------------------------------------------------
def comma(n: float) -> str:
    return f"{int(n):,}"


def si_bytes(n: float) -> str:
    """go-humanize Bytes: 980 B, 1.2 kB, 15 MB."""
    if n < 10:
        return f"{int(n)} B"
    exp = min(int(math.floor(math.log(n, 1000))), 6)
    value = math.floor(n / 1000**exp * 10 + 0.5) / 10
    unit = ("B", "kB", "MB", "GB", "TB", "PB", "EB")[exp]
    return f"{value:.0f} {unit}" if value >= 10 else f"{value:.1f} {unit}"


def micros(x: float) -> str:
    """go-humanize CommafWithDigits(x, 2)."""
    return f"{x:,.2f}".rstrip("0").rstrip(".")


def _line(s: Sample) -> str:
    return f"{comma(s.rate)} msgs/sec ~ {si_bytes(s.throughput)}/sec"


def report_text(result: dict, pubs: list[Sample], subs: list[Sample], size: int, request: bool) -> str:
    names = ("Request", "Reply") if request else ("Pub", "Sub")
    lines, indent = [], ""
    if pubs and subs:
        lines.append(f"NATS {'Request/Reply' if request else 'Pub/Sub'} stats: {_line(group(pubs + subs, size))}")
        indent = " "
    for name, samples in zip(names, (pubs, subs)):
        if not samples:
            continue
        lines.append(f"{indent}{name} stats: {_line(group(samples, size))}")
        if len(samples) > 1:
            for i, s in enumerate(samples, 1):
                lines.append(f"{indent} [{i}] {_line(s)} ({comma(s.msgs)} msgs)")
            st = rate_stats(samples)
            lines.append(f"{indent} min {comma(st['min'])} | avg {comma(st['avg'])} | max {comma(st['max'])}"
                         f" | stddev {comma(st['stddev'])} msgs")
        if request and name == "Request":
            lat = result["latency_us"]
            lines.append(f"{indent} latency min {micros(lat['min'])}us | avg {micros(lat['avg'])}us"
                         f" | max {micros(lat['max'])}us | stddev {micros(lat['stddev'])}us"
                         f" | P50 {micros(lat['p50'])}us | P90 {micros(lat['p90'])}us"
                         f" | P99 {micros(lat['p99'])}us | P99.9 {micros(lat['p99_9'])}us")
    return "\n".join(lines) + "\n"


def results(args: argparse.Namespace, pubs: list[Sample], subs: list[Sample]) -> dict:
    def part(samples: list[Sample]) -> dict | None:
        if not samples:
            return None
        return {"count": len(samples), **group(samples, args.size).as_dict(), **rate_stats(samples),
                "clients": [s.as_dict() for s in samples]}

    out = {"mode": "request" if args.request else "pubsub", "subject": args.subject, "msgs": args.msgs,
           "size": args.size, "publishers": part(pubs), "subscribers": part(subs),
           "total": group(pubs + subs, args.size).as_dict()}
    if args.request:
        out["latency_us"] = latency_stats([x for s in pubs for x in s.latencies])
    return out


# -- the run ---------------------------------------------------------------------
class Run:
    """Counters the watcher reads: messages each client has sent or received."""

    def __init__(self, settings: dict, pubs: int, subs: int) -> None:
        self.settings = settings
        self.sent = [0] * pubs
        self.received = [0] * subs
        self.conns: list[Connection] = []

    def moved(self) -> int:
        return sum(self.sent) + sum(self.received)

    async def connect(self, name: str) -> Connection:
        conn = Connection(self.settings)
        self.conns.append(conn)
        await conn.open(name)
        return conn

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.conns), return_exceptions=True)


async def _subscriber(run: Run, i: int, subject: str, expect: int, size: int, started: asyncio.Event,
                      t0: list[float]) -> Sample:
    conn = run.conns[i]
    sub = await conn.nc.subscribe(subject)
    await conn.nc.flush(timeout=run.settings["timeout"])
    conn.check()
    started.set()
    last = None
    async for _ in sub.messages:
        run.received[i] += 1
        if run.received[i] >= expect:
            last = time.perf_counter()
            break
    if last is None:
        raise NatsCliError(f"subscriber {i + 1} lost its connection after {run.received[i]:,} of "
                           f"{expect:,} messages: {reason(conn.errors[-1]) if conn.errors else 'closed'}")
    await sub.unsubscribe()
    return Sample(run.received[i], size, t0[0], last)


async def _publisher(run: Run, i: int, conn: Connection, subject: str, count: int, payload: bytes) -> Sample:
    nc, publish = conn.nc, conn.nc.publish
    start = time.perf_counter()
    for _ in range(count):
        await publish(subject, payload)
        run.sent[i] += 1
    await nc.flush(timeout=run.settings["timeout"])
    conn.check()
    return Sample(count, len(payload), start, time.perf_counter())


async def _requester(run: Run, i: int, conn: Connection, subject: str, count: int, payload: bytes) -> Sample:
    import nats.errors

    nc, timeout, latencies = conn.nc, run.settings["timeout"], []
    start = time.perf_counter()
    for _ in range(count):
        t = time.perf_counter()
        try:
            await nc.request(subject, payload, timeout=timeout)
        except nats.errors.NoRespondersError:
            raise NatsCliError(NO_RESPONDERS) from None
        except nats.errors.TimeoutError:
            raise NatsCliError(f"no reply on {subject!r} within {timeout:g}s") from None
        latencies.append(time.perf_counter() - t)
        run.sent[i] += 1
    return Sample(count, len(payload), start, time.perf_counter(), latencies)


async def _replier(run: Run, i: int, conn: Connection, subject: str, size: int, t0: list[float]):
    """Answers requests with their own payload until cancelled; returns its sample via ``box``."""
    state = {"last": None}

    async def answer(msg) -> None:
        await msg.respond(msg.data)
        run.received[i] += 1
        state["last"] = time.perf_counter()

    await conn.nc.subscribe(subject, queue=BENCH_QUEUE, cb=answer)
    await conn.nc.flush(timeout=run.settings["timeout"])
    conn.check()
    return lambda: Sample(run.received[i], size, t0[0], state["last"] or t0[0])


async def _watch(run: Run, bar, stall_s: float, armed: bool) -> None:
    """Update the progress bar; fail when nothing moved for ``stall_s`` seconds or a
    connection was lost. ``armed`` False waits for the first message (only outside
    publishers send: their start is not ours to time)."""
    last_moved, last_change = -1, time.monotonic()
    while True:
        await asyncio.sleep(WATCH_INTERVAL_S)
        moved = run.moved()
        if bar is not None:
            bar.n = moved
            bar.refresh()
        for conn in run.conns:
            if conn.lost.is_set():
                raise conn.lost_error()
        if moved != last_moved:
            armed = armed or moved > 0
            last_moved, last_change = moved, time.monotonic()
        elif armed and time.monotonic() - last_change > stall_s:
            raise NatsCliError(f"bench stalled: nothing moved for {stall_s:g}s (sent {sum(run.sent):,}, "
                               f"received {', '.join(f'{r:,}' for r in run.received) or 0})")


async def bench(args: argparse.Namespace) -> int:
    import nats.errors

    check_subject(args.subject, wildcards=not args.request and args.pub == 0)
    if args.msgs < 1:
        raise NatsCliError("--msgs must be at least 1", EXIT_USAGE)
    if args.pub + args.sub == 0:
        raise NatsCliError("nothing to run: give --pub or --sub at least 1", EXIT_USAGE)
    if args.request and args.pub == 0:
        raise NatsCliError("--request needs --pub 1 or more (the requesters)", EXIT_USAGE)
    settings = connection_settings(args)
    run = Run(settings, args.pub, args.sub)
    bar = None
    try:
        for i in range(args.sub):
            await run.connect(f"ferry bench {'replier' if args.request else 'sub'} {i + 1}")
        pub_conns = [await run.connect(f"ferry bench {'requester' if args.request else 'pub'} {i + 1}")
                     for i in range(args.pub)]
        show = args.progress if args.progress is not None else sys.stderr.isatty()
        if show:
            from tqdm import tqdm

            # what the counters reach: messages sent (requests) plus those received (answered)
            total = args.msgs * ((1 if args.pub else 0) + (min(args.sub, 1) if args.request else args.sub))
            bar = tqdm(total=total, unit="msg", unit_scale=True, file=sys.stderr, leave=False)
        try:
            pubs, subs = await _measure(run, args, pub_conns, bar, settings["timeout"])
        except nats.errors.Error as exc:  # a payload over max_payload, a connection the server closed
            raise NatsCliError(f"bench: {reason(exc)}") from None
    finally:
        if bar is not None:
            bar.close()
        await run.close()
    result = results(args, pubs, subs)
    sys.stdout.write(json.dumps(result) + "\n" if args.json
                     else report_text(result, pubs, subs, args.size, args.request))
    sys.stdout.flush()
    return 0


async def _measure(run: Run, args: argparse.Namespace, pub_conns, bar, stall_s: float):
    payload = b"a" * args.size
    t0 = [0.0]
    shares = split(args.msgs, args.pub)
    tasks: list[asyncio.Task] = []
    try:
        if args.request:
            finish = [await _replier(run, i, run.conns[i], args.subject, args.size, t0) for i in range(args.sub)]
        else:
            ready = [asyncio.Event() for _ in range(args.sub)]
            tasks += [asyncio.ensure_future(_subscriber(run, i, args.subject, args.msgs, args.size, ready[i], t0))
                      for i in range(args.sub)]
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in ready)), run.settings["timeout"])
        # printed once every subscriber is subscribed: a script may start publishers on it
        kind = "request/reply" if args.request else "pub/sub"
        log(f"Starting Core NATS {kind} benchmark [subject={args.subject}, msgs={args.msgs:,}, "
            f"msgsize={si_bytes(args.size)}, pubs={args.pub}, subs={args.sub}]")
        t0[0] = time.perf_counter()
        work = _requester if args.request else _publisher
        pub_tasks = [asyncio.ensure_future(work(run, i, conn, args.subject, shares[i], payload))
                     for i, conn in enumerate(pub_conns)]
        tasks += pub_tasks
        workers = list(tasks)
        watcher = asyncio.ensure_future(_watch(run, bar, stall_s, armed=args.pub > 0))
        tasks.append(watcher)
        pending = set(tasks)
        while not all(t.done() for t in workers):
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # the first failure (the watcher only ever ends by raising) ends the run
        pubs = [t.result() for t in pub_tasks]
        subs = [f() for f in finish] if args.request else [t.result() for t in workers[:args.sub]]
        return pubs, subs
    except asyncio.TimeoutError:
        raise NatsCliError(f"bench: subscribers not ready within {run.settings['timeout']:g}s") from None
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
