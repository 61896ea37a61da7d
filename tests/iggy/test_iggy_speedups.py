"""The apache-iggy 0.8 send decoder (adapters/iggy/messages.py _MessagesV2.read)
gives the same batch, or the same Iggy status with the same detail, whether the
record walk runs in C (core._speedups via core.log.encoded.walk_records) or in
its Python loop: on valid frames and on frames broken in every way the loop checks;
the same for apache-iggy 0.9 sends and polls (adapters/iggy/_speedups.c). The
compiled functions are imported directly, so both sides run also under
FERRY_PURE_PYTHON=1."""

from __future__ import annotations

import struct

import pytest
from header_strategies import PROPS
from hypothesis import given
from hypothesis import strategies as st

from adapters.iggy import _speedups as iggy_c
from adapters.iggy import messages
from core import _speedups as core_c
from adapters.iggy.errors import IggyStatus
from adapters.iggy.messages import MessagesV2, WireMessage

wire_messages = st.lists(
    st.builds(WireMessage, st.integers(0, (1 << 128) - 1), st.binary(max_size=200),
              st.binary(max_size=40),  # the walk frames header blocks by length, it does not parse them
              st.integers(1 << 50, (1 << 50) + (1 << 31))),  # within a VSR frame's u32 delta of each other
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
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(messages, "walk_records", core_c.walk)
        compiled = _decode(bytes(frame))
        mp.setattr(messages, "walk_records", None)
        python = _decode(bytes(frame))
    assert compiled == python


def _decode_vsr(frame: bytes):
    try:
        value, pos = messages.VsrBatch.read(frame, 0, len(frame))
    except IggyStatus as exc:
        return ("status", exc.code, exc.detail)
    return ("ok", value.messages(), value.payload_bytes, bytes(value.data), pos)


VSR_MUTATIONS = ("none", "cut", "reserved", "hlen", "plen", "delta", "origin")


@PROPS
@given(msgs=wire_messages, mutation=st.sampled_from(VSR_MUTATIONS), at=st.integers(0, 1 << 16))
def test_compiled_and_python_vsr_sends_agree(msgs, mutation, at):
    """apache-iggy 0.9 sends (one VSR batch, iggy-current.md 7.2): the C re-heading
    (adapters/iggy/_speedups.c) and the Python loop give the same stored block or
    the same status. The batch header is kept consistent with each mutation so
    the frame walk itself is what gets tested."""
    out: list = []
    messages.VsrBatch.write(out, msgs)
    frame = bytearray(b"".join(out))
    count = len(msgs)
    starts, pos = [], 4 + messages.VSR_BATCH_HEADER.size
    for _ in msgs:
        starts.append(pos)
        h, p = struct.unpack_from("<II", frame, pos + 32)
        pos += 48 + h + p
    rec = starts[at % count]
    if mutation == "cut":  # inside the frames, the batch length follows
        del frame[max(4 + messages.VSR_BATCH_HEADER.size, at % len(frame)):]
        struct.pack_into("<Q", frame, 4 + 32, len(frame) - 4)
    elif mutation == "reserved":
        struct.pack_into("<Q", frame, rec + 40, 1 + at)
    elif mutation == "hlen":
        struct.pack_into("<I", frame, rec + 32, at % 300)
    elif mutation == "plen":
        struct.pack_into("<I", frame, rec + 36, at % 300)
    elif mutation == "delta":
        struct.pack_into("<I", frame, rec + 28, at)
    elif mutation == "origin":  # origin near u64's end: a large delta overflows it
        struct.pack_into("<Q", frame, 4 + 24, (1 << 64) - 1 - at % 3)
        struct.pack_into("<I", frame, rec + 28, at % 5)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(messages, "_vsr_frames", iggy_c.vsr_frames)
        compiled = _decode_vsr(bytes(frame))
        mp.setattr(messages, "_vsr_frames", None)
        python = _decode_vsr(bytes(frame))
    assert compiled == python


@PROPS
@given(records=st.lists(st.tuples(st.integers(0, (1 << 128) - 1), st.binary(max_size=120), st.binary(max_size=30),
                                  st.sampled_from([0, 1, 2]),  # append timestamp: runs of equal ones
                                  st.sampled_from([0, 5, 1 << 33, (1 << 33) + 7, 1 << 60])),  # origins, 0 = unset
                        min_size=1, max_size=12),
       split=st.integers(0, 12), partition=st.integers(0, (1 << 32) - 2))  # the poll prefix's u32
def test_compiled_and_python_vsr_polls_agree(records, split, partition):
    """Polls of apache-iggy 0.9 (iggy-current.md 7): the C renderer and the Python
    one split runs at the same records (a new timestamp, an origin before the
    run's first or a u32 delta away) and write the same bytes, from one chunk or two."""
    from core.log.readbatch import ReadBatch
    from core.record import encode_record

    from adapters.iggy import render

    raw = [encode_record(mid, 40 + i, 1_000_000 + ts, origin, headers, payload)
           for i, (mid, payload, headers, ts, origin) in enumerate(records)]
    cut = split % len(raw)
    chunks = [b"".join(raw[:cut]), memoryview(b"".join(raw[cut:]))] if cut else [b"".join(raw)]
    batch = ReadBatch(partition, 40, chunks, [len(r) for r in raw])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(render, "_vsr_render", iggy_c.vsr_render)
        compiled = render.polled(3, partition, 99, batch)
        mp.setattr(render, "_vsr_render", None)
        python = render.polled(3, partition, 99, batch)
    assert compiled == python
