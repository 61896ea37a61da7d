"""core._speedups (core/_speedups.c): the compiled stamping loop gives the same
stamped bytes, the same (sizes, payload lengths) and the same typed errors as
the pure-Python loop of core/log/encoded.py, on valid and on malformed blocks.

`make test` builds the extension (setup.py); where it could not be built this
module fails rather than skips, so a broken build is never mistaken for a pass.
The compiled functions are imported directly, so these tests compare both
loops also when FERRY_PURE_PYTHON=1 keeps the running code on the Python one."""

from __future__ import annotations

import os
import struct

import pytest
import xxhash
from header_strategies import PROPS
from hypothesis import given
from hypothesis import strategies as st
from test_log_append_encoded import client_block, header_blocks

from core import _speedups
from core import errors as ce
from core.log import encoded


def test_the_compiled_loop_is_in_use_unless_pure_python_is_asked_for():
    pure = os.environ.get("FERRY_PURE_PYTHON", "") not in ("", "0")
    assert encoded.COMPILED is not pure, "core._speedups failed its self-check"


@given(data=st.binary(max_size=5000))
def test_compiled_hash_is_xxh3_64(data):
    assert _speedups.xxh3_64(data) == xxhash.xxh3_64_intdigest(data)


def _ids(count: int, first: int) -> tuple[int, int]:  # deterministic stand-in for the UUIDv7 reservation
    return 0xFFFF_FFFF_FFFF_FF00 - first, 0x0123_4567_89AB_7DEF


def _run(fn, block: bytes, count: int, base: int, ts: int):
    buf = bytearray(block)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(encoded, "_id_block", _ids)
            mp.setattr(encoded, "_compiled_stamp", _speedups.stamp)  # used by _stamp_compiled only
            out = fn(buf, count, base, ts)
    except ce.FerryError as exc:
        return ("error", type(exc), str(exc), getattr(exc, "index", None), bytes(buf))
    return ("ok", out, bytes(buf))


messages = st.lists(
    st.tuples(st.one_of(st.just(0), st.integers(1, (1 << 128) - 1)), st.binary(max_size=300), header_blocks,
              st.one_of(st.just(0), st.integers(1, (1 << 64) - 1))),
    min_size=1, max_size=12)

# Ways to break a block: (name, how) -- each applied at a drawn position.
MUTATIONS = ("none", "cut", "extra", "reserved", "hlen", "plen", "count+1", "count-1", "flip")


@PROPS
@given(msgs=messages, mutation=st.sampled_from(MUTATIONS), at=st.integers(0, 1 << 16),
       base=st.integers(0, 1 << 40), ts=st.integers(1, 1 << 62))
def test_compiled_and_python_loops_agree(msgs, mutation, at, base, ts):
    block = bytearray(client_block(msgs))
    count = len(msgs)
    starts, pos = [], 0
    for _ in msgs:
        starts.append(pos)
        h, p = struct.unpack_from("<II", block, pos + 48)
        pos += 64 + h + p
    rec = starts[at % count]
    if mutation == "cut":
        del block[at % len(block):]
    elif mutation == "extra":
        block += bytes(1 + at % 70)
    elif mutation == "reserved":
        struct.pack_into("<Q", block, rec + 56, 1 + at)
    elif mutation == "hlen":
        struct.pack_into("<I", block, rec + 48, at)
    elif mutation == "plen":
        struct.pack_into("<I", block, rec + 52, at)
    elif mutation == "count+1":
        count += 1
    elif mutation == "count-1" and count > 1:
        count -= 1
    elif mutation == "flip":  # anywhere, header blocks included: they must stay valid TLV or be refused
        block[at % len(block)] ^= 0xFF
    compiled = _run(encoded._stamp_compiled, bytes(block), count, base, ts)
    python = _run(encoded._stamp_python, bytes(block), count, base, ts)
    if compiled[0] == "error" and python[0] == "error":
        # Same error, same message; the half-stamped buffer is not part of the contract.
        assert compiled[:4] == python[:4]
    else:
        assert compiled == python


def test_ids_are_given_where_the_client_left_zero():
    block = client_block([(0, b"a", b"", 0), (7, b"b", b"", 5), (0, b"c", b"", 0)])
    kind, (sizes, plens), out = _run(encoded._stamp_compiled, bytes(block), 3, 100, 9)
    assert kind == "ok" and plens == [1, 1, 1] and sizes == [65, 65, 65]
    ids = [struct.unpack_from("<QQ", out, 65 * i + 8) for i in range(3)]
    lo_base, hi = _ids(3, 100)
    assert ids == [(lo_base + 100, hi), (7, 0), (lo_base + 102, hi)]
    assert [struct.unpack_from("<QQQ", out, 65 * i + 24) for i in range(3)] == [(100, 9, 9), (101, 9, 5), (102, 9, 9)]


def test_pure_python_can_be_forced(monkeypatch):
    monkeypatch.setenv("FERRY_PURE_PYTHON", "1")
    assert encoded._load_compiled() is None
    monkeypatch.setenv("FERRY_PURE_PYTHON", "0")
    assert encoded._load_compiled() is not None


@pytest.mark.parametrize("fn", [encoded._stamp_compiled, encoded._stamp_python])
def test_a_payload_over_the_limit_is_refused(fn, monkeypatch):
    block = bytearray(client_block([(1, b"x", b"", 0)]))
    struct.pack_into("<I", block, 52, encoded.MAX_PAYLOAD + 1)
    block += bytes(encoded.MAX_PAYLOAD)  # the record frames exactly: only the limit is wrong
    monkeypatch.setattr(encoded, "_compiled_stamp", _speedups.stamp)
    with pytest.raises(ce.PayloadTooLarge):
        fn(block, 1, 0, 1)


@PROPS
@given(msgs=messages, pos=st.integers(0, 1 << 40), byte_pos=st.integers(0, 1 << 40), ts=st.integers(0, 1 << 62))
def test_compiled_index_entries_match_the_python_ones(msgs, pos, byte_pos, ts):
    from core.log import pending
    from core.log.pending import PendingCall

    block = bytearray(client_block(msgs))
    sizes, plens = encoded._stamp_python(block, len(msgs), 0, ts)
    call = PendingCall(0, ts, byte_pos, byte_pos + 8 * len(msgs) + sum(plens), [block], len(block), None, None,
                       None, sizes)
    call.plens = plens
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pending, "index_block", _speedups.index_block)
        compiled = pending.index_entries([call], pos)
        mp.setattr(pending, "index_block", None)
        python = pending.index_entries([call], pos)
    assert compiled == python and len(compiled) == 28 * len(msgs)


@PROPS
@given(msgs=messages, mutation=st.sampled_from(MUTATIONS), at=st.integers(0, 1 << 16))
def test_compiled_walk_finds_what_stamping_checks(msgs, mutation, at):
    """walk_records accepts exactly the framings the stamping loop accepts (header
    blocks aside: walking does not parse them), and reports the record ends."""
    block = bytearray(client_block(msgs))
    count = len(msgs)
    if mutation == "cut":
        del block[at % len(block):]
    elif mutation == "extra":
        block += bytes(1 + at % 70)
    elif mutation in ("reserved", "hlen", "plen"):
        field = {"reserved": (56, "<Q"), "hlen": (48, "<I"), "plen": (52, "<I")}[mutation]
        struct.pack_into(field[1], block, field[0], 1 + at)
    elif mutation == "count+1":
        count += 1
    out = _speedups.walk(b"pad" + bytes(block) + b"tail", 3, 3 + len(block), count)
    try:
        encoded._stamp_python(bytearray(block), count, 0, 1)
        stamped = True
    except ce.HeaderError:
        stamped = None  # a length change made the header block unreadable: not the walk's business
    except ce.FerryError:
        stamped = False
    if stamped is not None:
        assert (out[0] is not None) == stamped, out
    if out[0] is not None:
        ends, pos = [], 0
        for _ in range(count):
            h, p = struct.unpack_from("<II", block, pos + 48)
            pos += 64 + h + p
            ends.append(pos)
        assert out[0] == tuple(ends)
        assert out[1] == sum(len(m[1]) for m in msgs)


def _python_accepts(block: bytes) -> bool:
    from core.message import Headers
    try:
        Headers.decode(block)
    except ce.HeaderError:
        return False
    return True


UTF8_EDGES = [b"\xc2\x80", b"\xc1\xbf", b"\xe0\x9f\xbf", b"\xe0\xa0\x80", b"\xed\x9f\xbf", b"\xed\xa0\x80",
              b"\xef\xbf\xbf", b"\xf0\x8f\xbf\xbf", b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80",
              b"\xf5\x80\x80\x80", b"\xff", b"\x80", b"\xe2\x82", b"a\xc3"]


@PROPS
@given(block=header_blocks, flip=st.integers(0, 1 << 16), how=st.sampled_from(["none", "flip", "cut", "utf8", "random"]),
       edge=st.sampled_from(UTF8_EDGES), noise=st.binary(max_size=40))
def test_compiled_header_check_accepts_exactly_what_headers_decode_accepts(block, flip, how, edge, noise):
    """The C stamping loop skips the Python header check only for blocks
    ``headers_ok`` accepts: it must never accept one Headers.decode refuses
    (and refusing a good one would only cost speed, but it does not either)."""
    data = bytearray(block)
    if how == "flip" and data:
        data[flip % len(data)] ^= 1 << (flip % 8)
    elif how == "cut" and data:
        del data[flip % len(data):]
    elif how == "utf8":  # a string key holding one UTF-8 edge case
        data = bytearray(b"\x02" + struct.pack("<I", len(edge)) + edge + b"\x03\x01\x00\x00\x00\x01") + data
    elif how == "random":
        data = bytearray(noise)
    assert _speedups.headers_ok(bytes(data)) == _python_accepts(bytes(data))


def test_records_with_valid_headers_skip_the_python_check(monkeypatch):
    from core.message import Headers, HeaderValue

    block = bytearray(client_block([(1, b"p", Headers([("k", HeaderValue.string("v"))]).encode(), 0)] * 3))

    def check(*args):
        raise AssertionError("the Python check was called for a valid header block")

    monkeypatch.setattr(encoded, "_check_record", check)
    monkeypatch.setattr(encoded, "_compiled_stamp", _speedups.stamp)
    assert encoded._stamp_compiled(block, 3, 0, 1)[1] == [1, 1, 1]


# -- index_spans: the record walk of Segment.read -----------------------------------------
@given(entries=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 600)), max_size=60),
       window=st.tuples(st.integers(0, 70), st.integers(0, 70)),
       budget=st.integers(-500, 20_000), need_one=st.booleans())
def test_index_spans_is_the_python_walk(entries, window, budget, need_one):
    """Same lengths and runs as segment._spans_python for any index (gaps between
    records = batch headers), window, budget (negative: already spent) and need_one."""
    from core.log.index import INDEX_ENTRY
    from core.log.segment import _spans_python

    buf, pos = bytearray(), 0
    for gap, ln in entries:
        pos += gap * 8
        buf += INDEX_ENTRY.pack(pos, ln, pos, 0)
        pos += ln
    rel = min(window[0], len(entries))
    end_rel = min(max(rel, window[1]), len(entries))
    assert _speedups.index_spans(bytes(buf), rel, end_rel, budget, need_one) == \
        _spans_python(buf, rel, end_rel, budget, need_one)


def test_index_spans_refuses_entries_out_of_range():
    with pytest.raises(ValueError, match="out of range"):
        _speedups.index_spans(b"\0" * 28, 0, 2, 100, True)
    with pytest.raises(ValueError, match="out of range"):
        _speedups.index_spans(b"\0" * 28, 1, 0, 100, True)
