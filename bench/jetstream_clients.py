"""The nats-py clients of bench/jetstream_bench.py (not a bench: nothing here runs on its own).

Each coroutine runs in a process forked by the bench (``_harness.ForkedClient``, asyncio):
it connects and sets up (untimed), calls ``wait_go(conn)`` and returns one result dict:
``t0``/``t1`` (monotonic), ``cpu`` (its process time), ``msgs``, ``lat`` (ns per timed
operation) and ``errors`` (the bench stops on any). ``publisher`` (js.publish, publish_async;
kv.put), ``filler`` (a numbered stream or KV bucket, untimed), ``fetcher`` (pull consumer),
``kv_getter`` (kv.get), ``kv_watcher`` (watchall's initial snapshot).
"""

from __future__ import annotations

import asyncio
import random
import time
from functools import partial

from _harness import wait_go

DRAIN_S = 30           # outstanding async acks must arrive by then
ID_LEN = 10            # fetch payloads and KV values start with their 0-based index, 10 digits


def kv_key(i: int) -> str:
    return f"k{i:05d}"


async def _connect(url: str, errors: list[str]):
    import nats

    async def err_cb(exc):
        if len(errors) < 10:
            errors.append(f"connection error: {exc!r}")

    return await nats.connect(url, allow_reconnect=False, error_cb=err_cb, max_outstanding_pings=100)


async def _bucket(js, name: str):
    """A new KV bucket as nats-py makes one, in the file store, with ``direct=True`` (nats-py
    2.16 leaves ``allow_direct`` unset otherwise, and kv.get would use STREAM.MSG.GET)."""
    from nats.js.api import StorageType

    return await js.create_key_value(bucket=name, history=1, storage=StorageType.FILE, direct=True)


async def publisher(conn, cfg: dict) -> dict:
    """``cfg["subjects"]``: one connection (and asyncio task) per subject. ``sync``: await each
    js.publish; ``async``: publish_async with ``window`` outstanding per connection. With
    ``bucket`` (one subject, ``$KV.<bucket>``): a new KV bucket, ``sync`` awaits each
    ``kv.put`` and ``async`` publishes to ``$KV.<bucket>.<key>``, the keys of ``keys`` in turn."""
    errors: list[str] = []
    ncs = [await _connect(cfg["url"], errors) for _ in cfg["subjects"]]
    jss = [nc.jetstream(publish_async_max_pending=cfg["window"], timeout=10) for nc in ncs]
    kv = await _bucket(jss[0], cfg["bucket"]) if cfg.get("bucket") else None
    keys = cfg.get("keys", 0)
    payload = b"x" * cfg["size"]
    stream = cfg["stream"]
    lat: list[int] = []
    seqs: list[int] = []
    bad = 0
    clock = time.perf_counter_ns

    async def send(js, subj, i: int) -> int:
        if kv:
            return await kv.put(kv_key(i % keys), payload)
        ack = await js.publish(subj, payload)
        if ack.stream != stream and len(errors) < 10:
            errors.append(f"PubAck for stream {ack.stream!r}, not {stream!r}")
        return ack.seq

    for js, subj in zip(jss, cfg["subjects"]):  # warm-up: one acked publish each (counted by the parent)
        await send(js, subj, 0)
    if not wait_go(conn):
        return {"error": "no go"}
    t0, c0 = time.monotonic(), time.process_time()
    end = t0 + cfg["seconds"]

    async def sync_loop(js, subj):
        nonlocal bad
        i = 0
        while time.monotonic() < end:
            t = clock()
            try:
                seq = await send(js, subj, i)
            except Exception as exc:  # noqa: BLE001
                bad += 1
                if len(errors) < 10:
                    errors.append(f"{'kv.put' if kv else 'js.publish'}: {exc!r}")
                continue
            lat.append(clock() - t)
            seqs.append(seq)
            i += 1

    async def async_loop(js, subj):
        nonlocal bad

        def done(fut, t):
            nonlocal bad
            if fut.cancelled() or fut.exception() is not None:
                bad += 1
                if len(errors) < 10:
                    errors.append(f"publish_async: {'cancelled' if fut.cancelled() else repr(fut.exception())}")
                return
            lat.append(clock() - t)
            seqs.append(fut.result().seq)

        sent = 0
        while time.monotonic() < end:
            t = clock()
            fut = await js.publish_async(f"{subj}.{kv_key(sent % keys)}" if keys else subj, payload)
            fut.add_done_callback(partial(done, t=t))
            sent += 1
        try:
            await asyncio.wait_for(js.publish_async_completed(), DRAIN_S)
        except TimeoutError:
            errors.append(f"{js.publish_async_pending()} of {sent} async publishes not acked after {DRAIN_S} s")

    loop = sync_loop if cfg["mode"] == "sync" else async_loop
    await asyncio.gather(*(loop(js, subj) for js, subj in zip(jss, cfg["subjects"])))
    t1, c1 = time.monotonic(), time.process_time()
    for nc in ncs:
        await nc.close()
    return {"t0": t0, "t1": t1, "cpu": c1 - c0, "msgs": len(seqs), "bad": bad, "seqs": seqs,
            "lat": lat, "warm": len(cfg["subjects"]), "errors": errors}


async def filler(conn, cfg: dict) -> dict:
    """Untimed: ``n`` numbered messages (payload = 10-digit index + padding) through
    publish_async, 256 outstanding; then the acked count. With ``bucket``: a new KV bucket
    first, and message i goes to key ``kv_key(i)`` (``$KV.<bucket>.k00000`` ...)."""
    errors: list[str] = []
    nc = await _connect(cfg["url"], errors)
    js = nc.jetstream(publish_async_max_pending=256, timeout=10)
    bucket = cfg.get("bucket")
    if bucket:
        await _bucket(js, bucket)
    pad = b"x" * max(cfg["size"] - ID_LEN, 0)
    futs = []
    if not wait_go(conn):
        return {"error": "no go"}
    for i in range(cfg["n"]):  # in order: one connection, so the stream sequence is i + 1
        subject = f"$KV.{bucket}.{kv_key(i)}" if bucket else cfg["subject"]
        futs.append(await js.publish_async(subject, b"%010d" % i + pad))
    try:
        await asyncio.wait_for(js.publish_async_completed(), DRAIN_S)
    except TimeoutError:
        errors.append(f"{js.publish_async_pending()} of {cfg['n']} fill publishes not acked after {DRAIN_S} s")
    seqs = []
    for f in futs:
        if f.done() and not f.cancelled() and f.exception() is None:
            seqs.append(f.result().seq)
        elif len(errors) < 10:
            errors.append(f"fill publish failed: {f.exception() if f.done() else 'no ack'!r}")
    await nc.close()
    if seqs != list(range(1, cfg["n"] + 1)):
        errors.append(f"fill acks are not sequences 1..{cfg['n']} in order (got {len(seqs)}, first {seqs[:3]})")
    return {"msgs": len(seqs), "errors": errors}


def _ack_tokens(reply: str) -> tuple[int, int]:
    """(delivery count, stream sequence) of a ``$JS.ACK`` reply subject, either form."""
    t = reply.split(".")
    return (int(t[4]), int(t[5])) if len(t) == 9 else (int(t[6]), int(t[7]))


async def fetcher(conn, cfg: dict) -> dict:
    """A new durable pull consumer over the whole stream, read with fetch(batch) to the end."""
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    errors: list[str] = []
    nc = await _connect(cfg["url"], errors)
    js = nc.jetstream(timeout=10)
    explicit = cfg["ack"] == "explicit"
    psub = await js.pull_subscribe(
        cfg["filter"], durable=cfg["consumer"], stream=cfg["stream"],
        config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT if explicit else AckPolicy.NONE,
                              deliver_policy=DeliverPolicy.ALL, ack_wait=60),
        pending_msgs_limit=1_000_000, pending_bytes_limit=1 << 30)
    n, batch, size = cfg["n"], cfg["batch"], cfg["size"]
    seen = bytearray(n + 1)
    lat: list[int] = []
    got = dup = wrong = 0
    clock = time.perf_counter_ns
    if not wait_go(conn):
        return {"error": "no go"}
    t0, c0 = time.monotonic(), time.process_time()
    limit = t0 + cfg["limit_s"]
    while got < n and time.monotonic() < limit:
        t = clock()
        try:
            msgs = await psub.fetch(min(batch, n - got), timeout=10)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"fetch after {got} messages: {exc!r}")
            break
        lat.append(clock() - t)
        for m in msgs:
            dc, seq = _ack_tokens(m.reply)
            if not 1 <= seq <= n or seen[seq] or dc != 1:
                dup += 1
            else:
                seen[seq] = 1
            if len(m.data) != size or m.data[:ID_LEN] != b"%010d" % (seq - 1):
                wrong += 1
            if explicit:
                await m.ack()
        got += len(msgs)
    if explicit:
        await nc.flush()
    t1, c1 = time.monotonic(), time.process_time()
    # Everything, or (time cap) exactly the first `got` sequences, each once.
    if dup or wrong or seen.count(1) != got or seen.find(0, 1) not in (-1, got + 1):
        errors.append(f"fetched {got} of {n}: {dup} duplicate/redelivered/out of range, {wrong} wrong payloads, "
                      f"first missing sequence {seen.find(0, 1)}")
    # The consumer afterwards: delivered up to `got`, the rest pending; with explicit acks all acked.
    info, deadline = None, time.monotonic() + 10
    while time.monotonic() < deadline:
        info = await js.consumer_info(cfg["stream"], cfg["consumer"])
        done = info.num_pending == n - got and info.delivered.stream_seq == got
        if explicit:
            done = done and info.num_ack_pending == 0 and info.ack_floor.stream_seq == got
        if done:
            break
        await asyncio.sleep(0.1)
    else:
        errors.append(f"consumer after reading {got}: num_pending {info.num_pending}, delivered "
                      f"{info.delivered.stream_seq}, num_ack_pending {info.num_ack_pending}, ack floor "
                      f"{info.ack_floor.stream_seq} (want {n - got}, {got}" + (f", 0, {got})" if explicit else ")"))
    await nc.close()
    return {"t0": t0, "t1": t1, "cpu": c1 - c0, "msgs": got, "lat": lat, "errors": errors}


async def _filled_bucket(cfg: dict, errors: list[str]):
    """The connection and KeyValue of a bucket ``filler`` filled (``js.key_value``: its
    ``direct`` flag from the stream's ``allow_direct``, which must be true)."""
    nc = await _connect(cfg["url"], errors)
    kv = await nc.jetstream(timeout=10).key_value(cfg["bucket"])
    if not kv._direct:
        errors.append(f"bucket {cfg['bucket']}: stream info says allow_direct is not true (kv.get would not "
                      "use DIRECT.GET)")
    return nc, kv


def _value_ok(e, i: int, size: int) -> bool:
    return e.revision == i + 1 and len(e.value) == size and e.value[:ID_LEN] == b"%010d" % i


async def kv_getter(conn, cfg: dict) -> dict:
    """``kv.get`` of random keys (seeded) of a filled bucket, one at a time, for ``seconds``;
    each value and revision checked."""
    errors: list[str] = []
    nc, kv = await _filled_bucket(cfg, errors)
    n, size, rng = cfg["n"], cfg["size"], random.Random(1)
    lat: list[int] = []
    wrong = 0
    clock = time.perf_counter_ns
    await kv.get(kv_key(0))
    if not wait_go(conn):
        return {"error": "no go"}
    t0, c0 = time.monotonic(), time.process_time()
    end = t0 + cfg["seconds"]
    while time.monotonic() < end:
        i = rng.randrange(n)
        t = clock()
        try:
            e = await kv.get(kv_key(i))
        except Exception as exc:  # noqa: BLE001
            errors.append(f"kv.get({kv_key(i)!r}) after {len(lat)} gets: {exc!r}")
            break
        lat.append(clock() - t)
        wrong += not _value_ok(e, i, size)
    t1, c1 = time.monotonic(), time.process_time()
    if wrong:
        errors.append(f"{wrong} of {len(lat)} kv.get answers with a wrong value or revision")
    await nc.close()
    return {"t0": t0, "t1": t1, "cpu": c1 - c0, "msgs": len(lat), "lat": lat, "errors": errors}


async def kv_watcher(conn, cfg: dict) -> dict:
    """``kv.watchall()`` of a filled bucket read to the None marker (its initial snapshot: every
    key once, values and revisions checked), then ``stop()``; again until ``seconds`` passed,
    at least 3 times. ``lat``: per snapshot; ``msgs``: entries. A None before any entry is
    nats-py's early marker (nats.py#842: its setup compares the consumer's num_pending 0 with
    the messages it has processed, not those in flight): counted in ``early``, and that
    snapshot ends at the entry with num_pending 0, where the marker would have been."""
    errors: list[str] = []
    nc, kv = await _filled_bucket(cfg, errors)
    n, size = cfg["n"], cfg["size"]
    lat: list[int] = []
    entries = early = 0
    clock = time.perf_counter_ns
    if not wait_go(conn):
        return {"error": "no go"}
    t0, c0 = time.monotonic(), time.process_time()
    end = t0 + cfg["seconds"]
    while not errors and (len(lat) < 3 or time.monotonic() < end):
        t = clock()
        seen = bytearray(n)
        wrong = got = 0
        try:
            w = await kv.watchall()
            e = await w.updates(timeout=cfg["limit_s"])
            is_early = e is None
            if is_early:
                early += 1
                e = await w.updates(timeout=cfg["limit_s"])
            while e is not None:
                got += 1
                i = int(e.key[1:]) if e.key[1:].isdigit() else -1
                if not 0 <= i < n or seen[i] or not _value_ok(e, i, size):
                    wrong += 1
                else:
                    seen[i] = 1
                e = None if is_early and e.delta == 0 else await w.updates(timeout=cfg["limit_s"])
        except Exception as exc:  # noqa: BLE001
            errors.append(f"watchall after {len(lat)} snapshots, {got} entries into this one: {exc!r}")
            break
        lat.append(clock() - t)
        entries += got
        await w.stop()
        if wrong or got != n:
            errors.append(f"watchall snapshot {len(lat)}: {got} entries before the None marker (want {n}), "
                          f"{wrong} repeated, unknown or with a wrong value/revision")
    t1, c1 = time.monotonic(), time.process_time()
    await nc.close()
    return {"t0": t0, "t1": t1, "cpu": c1 - c0, "msgs": entries, "lat": lat, "early": early,
            "errors": errors}
