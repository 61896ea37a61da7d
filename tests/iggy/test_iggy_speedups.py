"""The apache-iggy 0.8 send decoder (adapters/iggy/messages.py _MessagesV2.read)
gives the same batch, or the same Iggy status with the same detail, whether the
record walk runs in C (core._speedups via core.log.encoded.walk_records) or in
its Python loop: on valid frames and on frames broken in every way the loop checks."""

from __future__ import annotations

import struct

import pytest
from header_strategies import PROPS
from hypothesis import given
from hypothesis import strategies as st

from adapters.iggy import messages
from adapters.iggy.errors import IggyStatus
from adapters.iggy.messages import MessagesV2, WireMessage

wire_messages = st.lists(
    st.builds(WireMessage, st.integers(0, (1 << 128) - 1), st.binary(max_size=200),
              st.binary(max_size=40),  # the walk frames header blocks by length, it does not parse them
              st.integers(0, (1 << 64) - 1)),
    min_size=1, max_size=10)
MUTATIONS = ("none", "cut", "extra", "reserved", "hlen", "plen", "index", "count")


def _decode(frame: bytes):
    try:
        value, pos = MessagesV2.read(frame, 0, len(frame))
    except IggyStatus as exc:
        return ("status", exc.code, exc.detail)
    return ("ok", value.messages(), value.payload_bytes, bytes(value.data), pos)


@PROPS
@given(msgs=wire_messages, mutation=st.sampled_from(MUTATIONS), at=st.integers(0, 1 << 16))
def test_compiled_and_python_walks_agree(msgs, mutation, at):
    assert messages.walk_records is not None, "core._speedups is not built"
    out: list = []
    MessagesV2.write(out, msgs)
    frame = bytearray(b"".join(out))
    count = len(msgs)
    records = 4 + 16 * count
    starts, pos = [], records
    for _ in msgs:
        starts.append(pos)
        h, p = struct.unpack_from("<II", frame, pos + 48)
        pos += 64 + h + p
    rec = starts[at % count]
    if mutation == "cut":
        del frame[at % len(frame):]
    elif mutation == "extra":
        frame += bytes(1 + at % 70)
    elif mutation == "reserved":
        struct.pack_into("<Q", frame, rec + 56, 1 + at)
    elif mutation == "hlen":
        struct.pack_into("<I", frame, rec + 48, at % 300)
    elif mutation == "plen":
        struct.pack_into("<I", frame, rec + 52, at % 300)
    elif mutation == "index":
        struct.pack_into("<I", frame, 4 + 16 * (at % count) + 4, at % 5000)
    elif mutation == "count":
        struct.pack_into("<I", frame, 0, 1 + at % (count + 2))
    compiled = _decode(bytes(frame))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(messages, "walk_records", None)
        python = _decode(bytes(frame))
    assert compiled == python
