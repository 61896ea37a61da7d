"""Real pravega 0.3.8 half of the scale-out tests: ``scaleout.py CONTROLLER_PORT MODE ARGS``.

Each mode is one step the test runs against one gateway's controller (the other
gateway's steps run in other processes, so nothing is shared but the cluster):

* ``write SCOPE STREAM N``: scope and stream (4 segments), then N events
  ``k<i % 5>:<i>`` with routing key ``k<i % 5>``, blocking, then flushed.
* ``read SCOPE STREAM N``: a new reader group reads N events; prints the
  ``k*`` events' per-key order, the count, the distinct count, the event
  numbers (``waves`` events' too) and every other event's text (other
  protocols' messages).
* ``txn SCOPE STREAM``: a 2-segment stream; a committed transaction of six
  events ``c<i>`` and an aborted one.
* ``bytes SCOPE STREAM TAGGED``: the byte stream's head, tail and bytes from its
  head, and the tags of stream TAGGED.
* ``waves SCOPE STREAM N``: N events ``<i>:`` plus 200 bytes of padding (so
  every block is large enough for the test's proxy to cut right after it), 7
  routing keys, in waves of 50 awaited acks, a moment apart so that several
  blocks are in flight at once; then flushed.
"""

import asyncio
import sys
import uuid

from pvcommon import manager, out, read_texts, run

PORT, MODE = int(sys.argv[1]), sys.argv[2]
WAVE = 50
PAD = "x" * 200


async def main():
    m = manager(PORT)
    scope, stream = sys.argv[3], sys.argv[4]
    if MODE == "write":
        n = int(sys.argv[5])
        out("scope", value=m.create_scope(scope))
        out("stream", value=m.create_stream(scope, stream, 4))
        w = m.create_writer(scope, stream)
        for i in range(n):
            w.write_event(f"k{i % 5}:{i}", f"k{i % 5}")
        w.flush()
        out("written", value=n)
    elif MODE == "read":
        want = int(sys.argv[5])
        rg = m.create_reader_group("rg" + uuid.uuid4().hex[:8], scope, stream)
        r = rg.create_reader("r")
        got = await read_texts(r, want)
        per_key, other = {}, []
        for e in got:
            k, _, i = e.partition(":")
            if k.startswith("k") and i.isdigit():
                per_key.setdefault(k, []).append(int(i))
            elif k.isdigit():  # a ``waves`` event: its number, the padding dropped
                per_key.setdefault("w", []).append(int(k))
            else:
                other.append(e)
        out("read", count=len(got), distinct=len(set(got)), keys=sorted(per_key),
            ordered=all(v == sorted(v) for v in per_key.values()),
            numbers=sorted(i for v in per_key.values() for i in v), other=sorted(other))
        r.reader_offline()
    elif MODE == "txn":
        m.create_stream(scope, stream, 2)
        tw = m.create_transaction_writer(scope, stream, 7)
        t1 = tw.begin_txn()
        for i in range(6):
            t1.write_event(f"c{i}", f"k{i}")
        t1.commit()
        out("txn_committed", open=t1.is_open())
        t2 = tw.begin_txn()
        t2.write_event("aborted", "k1")
        t2.abort()
        out("txn_aborted", open=t2.is_open())
    elif MODE == "waves":
        n = int(sys.argv[5])
        m.create_scope(scope)
        m.create_stream(scope, stream, 2)
        w = m.create_writer(scope, stream)
        for start in range(0, n, WAVE):
            futs = []
            for i in range(start, min(n, start + WAVE)):
                futs.append(w.write_event_async(f"{i}:{PAD}", f"k{i % 7}"))
                await asyncio.sleep(0.002)  # a few events per block: several blocks in flight at once
            for f in futs:
                await asyncio.wait_for(f, 120)
            out("acked", n=min(n, start + WAVE))
        w.flush()
        out("written", value=n)
    elif MODE == "bytes":  # extras.py wrote (and truncated) the byte stream; TAGGED has tags
        bs = m.create_byte_stream(scope, stream)
        bs.seek(bs.current_head_offset(), 0)
        buf = bytearray(64)
        got = bs.readinto(buf)
        out("bytes", head=bs.current_head_offset(), tail=bs.current_tail_offset(), data=bytes(buf[:got]).decode(),
            tags=m.get_stream_tags(scope, sys.argv[5]))
    else:
        out("error", text=f"unknown mode {MODE}")


run(main)
