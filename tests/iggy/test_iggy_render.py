"""Polled messages rendered for dialect 3 (render._vsr_batches): the same bytes as
the straightforward encoding with messages.encode_vsr_batch, for runs split by
timestamp and by origin deltas (the renderer scans each run once)."""

from __future__ import annotations

import random
import struct

from adapters.iggy import render
from adapters.iggy.messages import encode_vsr_batch
from core.log import AppendInput, LogConfig, Partition
from core.message import Headers

_REC = struct.Struct("<QQQQQQII8x")


def reference_batches(partition_id: int, batch) -> bytes:
    """One VSR batch per run of equal timestamps whose origins stay within u32 of the
    run's first origin and never below it (the rule render.py documents)."""
    runs: list[list] = []
    for raw in batch.raw_records():
        _c, lo, hi, offset, ts, origin, hlen, plen = _REC.unpack_from(raw, 0)
        origin = origin or ts
        rec = (lo | (hi << 64), offset, ts, origin, bytes(raw[64:64 + plen]), bytes(raw[64 + plen:64 + plen + hlen]))
        run = runs[-1] if runs else None
        if run and rec[2] == run[0][2] and 0 <= origin - run[0][3] <= 0xFFFFFFFF \
                and max(r[3] for r in run) - origin <= 0xFFFFFFFF:
            run.append(rec)
        else:
            runs.append([rec])
    out = []
    for run in runs:
        base, origin = run[0][1], run[0][3]
        out.append(encode_vsr_batch(partition_id, base, run[0][2], origin,
                                    [(r[0], r[1] - base, r[3] - origin, r[4], r[5]) for r in run]))
    return b"".join(out)


def test_vsr_poll_matches_the_reference_encoding(tmp_path):
    rng = random.Random(5)
    now = [1_700_000_000_000_000]
    part = Partition.open(tmp_path, 3, LogConfig(fsync="never"), clock=lambda: now[0])
    for _ in range(40):
        items = []
        for _ in range(rng.randint(1, 5)):
            headers = Headers([("k", rng.randint(0, 9))]).encode() if rng.random() < 0.4 else b""
            origin = rng.choice([0, 5, now[0] - rng.randint(0, 10**6), now[0] + rng.randint(0, 10**10)])
            items.append(AppendInput(rng.randbytes(rng.randint(0, 50)), headers, rng.randint(1, 2**128 - 1), origin))
        part.append(items)
        now[0] += rng.choice([0, 0, 3])
        if rng.random() < 0.3:
            part.flush()
    for start in (0, 7, 33):
        batch = part.read(start, 500)
        prefix_len = len(render.polled(3, 3, 99, None))
        assert render.polled(3, 3, 99, batch)[prefix_len:] == reference_batches(3, batch)
    part.close()
