"""Real pravega 0.3.8 client: shared reader groups, read from tail, transactions,
byte streams, stream policies. ``extras.py CONTROLLER_PORT``; one JSON line per step."""

import asyncio
import sys
import time

import pravega_client
from pvcommon import STEP_TIMEOUT_S, attempt, manager, out, read_texts, run

PORT = int(sys.argv[1])


async def shared_group(m):
    """Two readers share a 4-segment stream; the client rebalances every 10 s
    (REBALANCE_INTERVAL in its event reader), so events keep coming for longer
    than that; then r2 goes offline and r1 must read everything left."""
    m.create_scope("grp")
    m.create_stream("grp", "orders", 4)
    w = m.create_writer("grp", "orders")
    rg = m.create_reader_group("shared", "grp", "orders")
    r1 = rg.create_reader("r1")
    r2 = rg.create_reader("r2")
    total = 400  # at 0.06 s apart: 24 s of traffic, two of the client's 10 s rebalance rounds
    done = asyncio.Event()

    async def produce():
        for i in range(total):
            await w.write_event_async(f"e{i}", f"key{i % 16}")
            await asyncio.sleep(0.06)
        done.set()

    async def consume(reader, sink, stop):
        while not stop():
            try:
                slice_ = await asyncio.wait_for(reader.get_segment_slice_async(), timeout=5)
            except asyncio.TimeoutError:
                continue
            for event in slice_:
                sink.append(bytes(event.data()).decode())
            reader.release_segment(slice_)

    got1, got2 = [], []
    await asyncio.gather(produce(), consume(r1, got1, done.is_set), consume(r2, got2, done.is_set))
    r2.reader_offline()  # its segments (and positions) go back to the group
    deadline = time.monotonic() + 20
    await consume(r1, got1, lambda: len(set(got1 + got2)) >= total or time.monotonic() > deadline)
    seen = got1 + got2
    out("shared", r1=len(got1) > 0, r2=len(got2) > 0, count=len(seen), distinct=len(set(seen)),
        complete=set(seen) == {f"e{i}" for i in range(total)})
    r1.reader_offline()


async def from_tail(m):
    m.create_stream("grp", "tail", 2)
    w = m.create_writer("grp", "tail")
    for i in range(10):
        w.write_event(f"old{i}")
    w.flush()
    rg = m.create_reader_group("tailgrp", "grp", "tail", True)
    r = rg.create_reader("t1")
    for i in range(5):
        w.write_event(f"new{i}")
    w.flush()
    got = await read_texts(r, 5)
    out("from_tail", got=sorted(got))
    r.reader_offline()


async def transactions(m):
    m.create_stream("grp", "txn", 2)
    tw = m.create_transaction_writer("grp", "txn", 7)
    t1 = tw.begin_txn()
    out("txn_open", value=t1.is_open())
    for i in range(6):
        t1.write_event(f"c{i}", f"k{i}")
    t1.commit()
    out("txn_committed", open=t1.is_open())
    t2 = tw.begin_txn()
    t2.write_event("aborted", "k1")
    t2.abort()
    out("txn_aborted", open=t2.is_open())
    rg = m.create_reader_group("txngrp", "grp", "txn")
    r = rg.create_reader("x1")
    got = await read_texts(r, 7, limit_s=6)
    out("txn_read", got=sorted(got))
    r.reader_offline()


def byte_stream(m):
    m.create_stream("grp", "bytes", 1)
    bs = m.create_byte_stream("grp", "bytes")
    n = bs.write(b"hello, ")
    n += bs.write(b"byte stream")
    bs.flush()
    out("bytes_written", value=n, tail=bs.current_tail_offset(), head=bs.current_head_offset())
    bs.seek(7, 0)
    buf = bytearray(11)
    got = bs.readinto(buf)
    out("bytes_read", n=got, data=bytes(buf[:got]).decode())
    bs.truncate(7)
    out("bytes_truncated", head=bs.current_head_offset(), tail=bs.current_tail_offset())
    bs.seek(7, 0)
    buf = bytearray(4)
    got = bs.readinto(buf)
    out("bytes_after_truncate", data=bytes(buf[:got]).decode())


def policies(m):
    fixed = pravega_client.StreamScalingPolicy.fixed_scaling_policy(3)
    by_time = pravega_client.StreamRetentionPolicy.by_time(3_600_000)
    attempt("create_with_policy", m.create_stream_with_policy, "grp", "pol", fixed, by_time, ["a", "b"])
    attempt("tags", m.get_stream_tags, "grp", "pol")
    attempt("update_policy", m.update_stream_with_policy, "grp", "pol", fixed,
            pravega_client.StreamRetentionPolicy.by_size(1 << 30), ["c"])
    attempt("tags_after", m.get_stream_tags, "grp", "pol")
    attempt("scale_refused", m.update_stream_with_policy, "grp", "pol",
            pravega_client.StreamScalingPolicy.fixed_scaling_policy(5), pravega_client.StreamRetentionPolicy.none(), [])


async def big_events(m):
    """Events up to the client's 8 MiB block limit go as one append; larger ones take the
    large-event path (CreateTransientSegment, ConditionalBlockEnd parts, MergeSegments).
    Then the stream is sealed and a new writer's write fails."""
    m.create_stream("grp", "big", 1)
    w = m.create_writer("grp", "big")
    sizes = [1 << 20, 8 * 1024 * 1024 - 64, 9 * 1024 * 1024]
    for n in sizes:
        w.write_event_bytes(bytes([n % 251]) * n)
    w.flush()
    rg = m.create_reader_group("bigrg", "grp", "big")
    r = rg.create_reader("b1")
    got = []
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while len(got) < len(sizes) and time.monotonic() < deadline:
        slice_ = await asyncio.wait_for(r.get_segment_slice_async(), STEP_TIMEOUT_S)
        got += [(len(bytes(e.data())), bytes(e.data())[:1] == bytes([len(bytes(e.data())) % 251])) for e in slice_]
        r.release_segment(slice_)
    out("big_read", got=got)
    r.reader_offline()
    m.seal_stream("grp", "big")
    w2 = m.create_writer("grp", "big")
    attempt("sealed_write", w2.write_event, "after seal")


async def main():
    m = manager(PORT)
    parts = sys.argv[2].split(",") if len(sys.argv) > 2 else ["shared", "tail", "txn", "bytes", "policies"]
    if "shared" in parts:
        await shared_group(m)
    else:
        m.create_scope("grp")
    if "tail" in parts:
        await from_tail(m)
    if "txn" in parts:
        await transactions(m)
    if "bytes" in parts:
        byte_stream(m)
    if "policies" in parts:
        policies(m)
    if "big" in parts:
        await big_events(m)
    out("done")


run(main)
