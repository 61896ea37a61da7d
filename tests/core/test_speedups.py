"""core._speedups (core/_speedups.c): the compiled stamping loop gives the same
stamped bytes, the same (sizes, payload lengths) and the same typed errors as
the pure-Python loop of core/log/encoded.py, on valid and on malformed blocks.

`make test` builds the extension (setup.py); where it could not be built this
module fails rather than skips, so a broken build is never mistaken for a pass."""

from __future__ import annotations

import struct

import pytest
import xxhash
from header_strategies import PROPS
from hypothesis import given
from hypothesis import strategies as st
from test_log_append_encoded import client_block, header_blocks

from core import errors as ce
from core.log import encoded


def test_the_compiled_loop_is_built_and_in_use():
    # FERRY_PURE_PYTHON is not set by the test run; a missing compiler would show here.
    assert encoded.COMPILED, "core._speedups was not built (is gcc installed?) or failed its self-check"


@given(data=st.binary(max_size=5000))
def test_compiled_hash_is_xxh3_64(data):
    from core import _speedups
    assert _speedups.xxh3_64(data) == xxhash.xxh3_64_intdigest(data)


def _ids(count: int, first: int) -> tuple[int, int]:  # deterministic stand-in for the UUIDv7 reservation
    return 0xFFFF_FFFF_FFFF_FF00 - first, 0x0123_4567_89AB_7DEF


def _run(fn, block: bytes, count: int, base: int, ts: int):
    buf = bytearray(block)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(encoded, "_id_block", _ids)
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
    with pytest.raises(ce.PayloadTooLarge):
        fn(block, 1, 0, 1)
