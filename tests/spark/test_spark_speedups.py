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
