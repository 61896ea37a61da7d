"""adapters/spark/_speedups.c: a poll reply's records become the same Arrow
record batch through the compiled column loop as through the Python loop of
``polled_to_batch``: ids, offsets, timestamps, payloads and header pairs (string
keys; a typed key sends the whole poll down the Python path), the ``end``
cut-off included. No JVM: this checks the batch Spark would be handed."""

from __future__ import annotations

import os

import pytest
from header_strategies import PROPS, any_value
from hypothesis import given
from hypothesis import strategies as st

from adapters.spark import _speedups as spark_c
from adapters.spark import batches
from adapters.spark.client import Polled
from core.message import Headers, HeaderValue
from core.record import encode_record

KEYS = st.one_of(st.text(min_size=1, max_size=8), st.text(min_size=1, max_size=8),  # typed keys: 1 in 3
                 st.integers(0, (1 << 31) - 1).map(HeaderValue.int32))
RECORDS = st.lists(st.tuples(st.integers(0, (1 << 128) - 1), st.binary(max_size=200),
                             st.lists(st.tuples(KEYS, any_value), max_size=3), st.integers(0, 1 << 62)),
                   min_size=1, max_size=15)


def _polled(records, prefix: bytes) -> Polled:
    body = [prefix]
    for i, (mid, payload, pairs, ts) in enumerate(records):
        headers = Headers(pairs).encode() if pairs else b""
        body.append(encode_record(mid, 100 + i, ts, 0, headers, payload))
    return Polled(3, 100 + len(records), len(records), b"".join(body), len(prefix))


@PROPS
@given(records=RECORDS, cut=st.integers(0, 20), prefix=st.binary(max_size=16))
def test_compiled_and_python_batches_agree(records, cut, prefix):
    polled = _polled(records, prefix)
    end = 100 + cut
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(batches, "_compiled_columns", spark_c.columns)
        compiled = batches.polled_to_batch("s", "t", polled, end)
        mp.setattr(batches, "_compiled_columns", None)
        python = batches.polled_to_batch("s", "t", polled, end)
    if python is None:
        assert compiled is None
    else:
        assert compiled.schema == batches.ARROW_SCHEMA
        assert compiled.equals(python), (compiled.to_pylist(), python.to_pylist())


def test_string_keys_stay_on_the_compiled_path_and_typed_ones_are_listed():
    from core.header_value import HeaderKind

    assert HeaderKind.STRING.value == 2  # the code _speedups.c compares with
    polled = _polled([(1, b"a", [("k", HeaderValue.string("v"))], 5),
                      (2, b"b", [(HeaderValue.int32(7), HeaderValue.string("w")), ("k2", HeaderValue.bool(True))], 6)],
                     b"")
    cols = spark_c.columns(polled.body, 0, 2, 1 << 63)
    assert cols[0] == 2 and cols[12] == [(1, HeaderKind.INT32.value)]
    assert spark_c.columns(polled.body, 0, 1, 1 << 63)[12] == []


def test_a_cut_record_is_refused_not_read_past():
    polled = _polled([(1, b"abc", [], 5)], b"")
    short = polled._replace(body=polled.body[:-1])
    with pytest.raises(ValueError, match="does not frame"):
        spark_c.columns(short.body, 0, 1, 1 << 63)


def test_the_loop_in_use():
    pure = os.environ.get("FERRY_PURE_PYTHON", "") not in ("", "0")
    assert batches.COMPILED is not pure, "adapters.spark._speedups is not built"


def _agree(polled, end=1 << 62):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(batches, "_compiled_columns", spark_c.columns)
        compiled = batches.polled_to_batch("s", "t", polled, end)
        mp.setattr(batches, "_compiled_columns", None)
        python = batches.polled_to_batch("s", "t", polled, end)
    assert compiled.equals(python)
    return compiled


def test_columns_sized_up_front_still_grow_for_many_or_large_headers():
    # The loop sizes its pair columns from the record count (2 pairs a record) and its
    # key/value bytes at 64 KiB: 40 pairs on one record, and 100 records of three
    # 255-byte keys and values (the field limit; ~76 KiB of each), outgrow both.
    many = [(f"k{i}", HeaderValue.string("v" * (i + 1))) for i in range(40)]
    wide = [(c * 255, HeaderValue.raw(bytes([ord(c)]) * 255)) for c in "abc"]
    records = [(1, b"p", many, 5), (2, b"q" * 70_000, [], 7)] + [(3 + i, b"", wide, 8) for i in range(100)]
    batch = _agree(_polled(records, b"xy"))
    rows = batch.to_pylist()
    assert [len(r["headers"]) for r in rows[:3]] == [40, 0, 3]
    assert rows[0]["headers"][39] == {"key": "k39", "kind": "string", "value": b"v" * 40}
    assert rows[-1]["headers"][2] == {"key": "c" * 255, "kind": "raw", "value": b"c" * 255}
    assert rows[1]["payload"] == b"q" * 70_000


def test_columns_of_a_whole_poll_match_the_records():
    # A realistic poll: 5,000 records of 100 B with one header, as the bench reads them.
    records = [(i * 7919, bytes([i % 256]) * 100, [("trace", HeaderValue.string("abcdefgh"))], 1_700_000 + i)
               for i in range(5_000)]
    batch = _agree(_polled(records, b"\0" * 16), end=100 + 4_321)
    assert batch.num_rows == 4_321
    assert batch.column("id")[4_320].as_py() == "%032x" % (4_320 * 7919)
    assert batch.column("offset")[0].as_py() == 100


def test_bad_positions_are_refused():
    polled = _polled([(1, b"abc", [], 5)], b"")
    with pytest.raises(ValueError, match=">= 0"):
        spark_c.columns(polled.body, -1, 1, 1 << 63)
    with pytest.raises(ValueError, match=">= 0"):
        spark_c.columns(polled.body, 0, -1, 1 << 63)
    with pytest.raises(ValueError, match="does not frame"):
        spark_c.columns(polled.body, len(polled.body) + 5, 1, 1 << 63)
    assert spark_c.columns(polled.body, 0, 0, 1 << 63)[0] == 0
