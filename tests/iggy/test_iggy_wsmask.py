"""adapters/wsmask.py: the compiled RFC 6455 unmasking gives wsproto's bytes
for every key, length and chunking (a frame arrives in pieces and each piece
continues the key where the last stopped), and the WebSocket listeners put it
under wsproto unless pure Python is asked for."""

from __future__ import annotations

import itertools
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st
from wsproto import frame_protocol

from adapters import wsmask
from core import _speedups


def _python_masker():
    return wsmask.python_masker or frame_protocol.XorMaskerSimple


@given(key=st.binary(min_size=4, max_size=4), data=st.binary(max_size=3000),
       cuts=st.lists(st.integers(min_value=0, max_value=3000), max_size=6))
def test_compiled_masker_matches_wsprotos_over_any_chunking(key, data, cuts):
    bounds = [0, *sorted(c for c in cuts if c <= len(data)), len(data)]
    ours, theirs = wsmask.CompiledXorMasker(key), _python_masker()(key)
    saved, wsmask._xor_mask = wsmask._xor_mask, _speedups.xor_mask  # the C loop also under FERRY_PURE_PYTHON=1
    try:
        for a, b in itertools.pairwise(bounds):
            got = ours.process(data[a:b])
            assert type(got) is bytearray
            assert got == theirs.process(bytearray(data[a:b]))
    finally:
        wsmask._xor_mask = saved


@pytest.mark.parametrize("size", [0, 1, 3, 4, 7, 8, 9, 15, 16, 17, 180_014])
def test_xor_mask_unmasks_what_masking_made(size):
    data = bytes((i * 7) & 0xFF for i in range(size))
    masked = _speedups.xor_mask(data, b"\x01\x80\xfe\x7f")
    assert len(masked) == size
    assert bytes(_speedups.xor_mask(masked, b"\x01\x80\xfe\x7f")) == data
    assert all(masked[i] == data[i] ^ b"\x01\x80\xfe\x7f"[i % 4] for i in range(min(size, 64)))


def test_xor_mask_refuses_a_key_that_is_not_four_bytes():
    with pytest.raises(ValueError, match="4 bytes"):
        _speedups.xor_mask(b"abc", b"abc")


async def test_the_iggy_ws_listener_installs_it_unless_pure_python(broker, nursery):
    from adapters.iggy.ws_driver import serve_iggy_ws

    await nursery.start(serve_iggy_ws, broker, "127.0.0.1", 0, nursery)
    pure = os.environ.get("FERRY_PURE_PYTHON", "") not in ("", "0")
    assert (frame_protocol.XorMaskerSimple is wsmask.CompiledXorMasker) is not pure
