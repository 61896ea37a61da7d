"""adapters/nats/_speedups.c: the compiled PUB scanner takes exactly what the
Python loop of ``ServerCodec.scan_pubs`` takes: the same tuples (types too),
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
        mp.setattr(codec_mod, "_compiled_scan", nats_c.scan_pubs if compiled else None)
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
