"""adapters/nats/_speedups.c: the compiled PUB scanner takes exactly what the
Python loop of ``ServerCodec.scan_pubs`` (adapters/nats/pubscan.py) takes: the same tuples (types too),
the same stop position, the same ``refuse`` calls, on well-formed runs and on
every near miss the loop rejects (tabs, double spaces, bad sizes, missing CRLF,
non-UTF-8 subjects, limits). The C function is imported directly, so this runs
under FERRY_PURE_PYTHON=1 too; the codec-level fast-path tests
(test_nats_fast_path.py) run whichever scanner is in use."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.nats import _speedups as nats_c
from adapters.nats import codec as codec_mod
from adapters.nats import pubscan
from adapters.nats.codec import ServerCodec

from test_nats_fast_path import STREAM

PIECES = st.sampled_from([
    b"PUB ", b"PUB", b"a", b"_I", b"$S", b"\xff\xfe", b"\xc3\xa9", b" ", b"  ", b"\t", b"\r\n", b"\n", b"\r",
    b"0", b"1", b"12", b"999999999", b"1234567890", b"-1", b"x", b"HPUB ", b"PING\r\n",
])
NEAR_MISSES = st.lists(PIECES, max_size=14).map(b"".join)


def _scan(stream: bytes, compiled: bool, refuse_dollar: bool, max_payload: int, max_line: int):
    calls: list = []

    def refuse(subject, reply):
        calls.append((subject, reply))
        return subject.startswith("$") if refuse_dollar else False

    codec = ServerCodec(max_payload=max_payload, max_control_line=max_line)
    codec.receive_data(stream)
    out: list = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pubscan, "scan_pubs", nats_c.scan_pubs if compiled else pubscan.scan_pubs_py)
        n = codec.scan_pubs(out, refuse)
    return n, [(s, r, type(a), bytes(a), type(p), bytes(p)) for s, r, a, p in out], codec._pos, calls


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(STREAM, NEAR_MISSES), min_size=1, max_size=4).map(b"".join),
       st.booleans(), st.sampled_from([0, 1, 5, 30, 1 << 20]), st.sampled_from([3, 8, 4096]))
def test_compiled_and_python_scanners_agree(stream, refuse_dollar, max_payload, max_line):
    assert _scan(stream, True, refuse_dollar, max_payload, max_line) == \
        _scan(stream, False, refuse_dollar, max_payload, max_line)


def test_the_scanner_in_use():
    import os
    pure = os.environ.get("FERRY_PURE_PYTHON", "") not in ("", "0")
    assert codec_mod.COMPILED is not pure, "adapters.nats._speedups is not built"


def test_a_plain_run_is_taken_whole():
    stream = b"PUB a 1\r\nx\r\nPUB b _INBOX.r 2\r\nyy\r\nPUB \xff 0\r\n\r\nPING\r\n"
    n, items, pos, calls = _scan(stream, True, False, 1 << 20, 4096)
    assert n == 3 and pos == len(stream) - 6
    assert items[2][0] == "\udcff" and calls == [("b", "_INBOX.r")]


def _runs(stream: bytes, compiled: bool, refuse_dollar: bool, max_payload: int, max_line: int, sid: bytes):
    """scan_runs, then render_msgs and expand_run of every run, with one twin."""
    calls: list = []

    def refuse(subject, reply):
        calls.append((subject, reply))
        return subject.startswith("$") if refuse_dollar else False

    scan_runs = nats_c.scan_runs if compiled else pubscan.scan_runs_py
    render = nats_c.render_msgs if compiled else pubscan.render_msgs_py
    buf = bytearray(stream)
    runs: list = []
    pos = scan_runs(buf, 0, max_line, max_payload, 9, runs, refuse)
    rendered = [render(buf, start, end, count, sid) for _s, _r, count, _n, start, end in runs]
    return runs, pos, rendered, {(s, r) for s, r in calls}


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(STREAM, NEAR_MISSES), min_size=1, max_size=4).map(b"".join),
       st.booleans(), st.sampled_from([0, 1, 5, 30, 1 << 20]), st.sampled_from([3, 8, 4096]),
       st.sampled_from([b"1", b"42", b"sid-77"]))
def test_compiled_and_python_runs_agree_and_match_the_pub_scan(stream, refuse_dollar, max_payload, max_line, sid):
    runs, pos, rendered, calls = _runs(stream, True, refuse_dollar, max_payload, max_line, sid)
    # C asks refuse once per run, Python once per frame: the same questions, fewer times.
    assert (runs, pos, rendered) == _runs(stream, False, refuse_dollar, max_payload, max_line, sid)[:3]
    # The runs are scan_pubs' frames, grouped: same stop position, same messages in order.
    n, items, scan_pos, _ = _scan(stream, True, refuse_dollar, max_payload, max_line)
    assert pos == scan_pos and sum(r[2] for r in runs) == n
    flat = [(s, r, p) for s, r, _ta, _a, _tp, p in items]
    expanded = [(s, r, bytes(p)) for run in runs for s, r, _a, p in pubscan.expand_run(stream, run[4], run[5])]
    assert expanded == flat
    for run, msgs in zip(runs, rendered):
        subject, reply, count, nbytes, _start, _end = run
        frames = pubscan.expand_run(stream, run[4], run[5])
        assert len(frames) == count and sum(len(p) for *_x, p in frames) == nbytes
        assert all((s, r) == (subject, reply) for s, r, _a, _p in frames)
        assert msgs == b"".join(b"MSG " + s.encode("utf-8", "surrogateescape") + b" " + sid + b" "
                                + (r.encode("utf-8", "surrogateescape") + b" " if r else b"")
                                + str(len(p)).encode() + b"\r\n" + bytes(p) + b"\r\n" for s, r, _a, p in frames)
    for i in range(1, len(runs)):   # a run ends where the subject or the reply changes
        assert runs[i][:2] != runs[i - 1][:2] and runs[i][4] == runs[i - 1][5]


def test_render_refuses_a_range_that_is_not_the_run():
    buf = bytearray(b"PUB a 2\r\nhi\r\nPUB a 3\r\nhey\r\n")
    runs: list = []
    nats_c.scan_runs(buf, 0, 4096, 1 << 20, 9, runs, None)
    assert runs == [("a", "", 2, 5, 0, len(buf))]
    for render in (nats_c.render_msgs, pubscan.render_msgs_py):
        assert render(buf, 0, len(buf), 2, b"9") == b"MSG a 9 2\r\nhi\r\nMSG a 9 3\r\nhey\r\n"
        with pytest.raises(ValueError):
            render(buf, 0, len(buf), 1, b"9")
