"""Hypothesis strategies for header values, shared by the core message tests."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st

from core.message import MAX_HEADER_FIELD, HeaderKind, HeaderValue

K = HeaderKind
HV = HeaderValue
# Deterministic property runs with no timing threshold (tests must not flake on CI).
PROPS = settings(deadline=None, derandomize=True, max_examples=150)


def _int_values(kind: HeaderKind) -> st.SearchStrategy[HeaderValue]:
    width = kind.fixed_size * 8
    signed = kind.name.startswith("INT")
    lo, hi = (-(2 ** (width - 1)), 2 ** (width - 1) - 1) if signed else (0, 2**width - 1)
    ctor = getattr(HV, kind.json_name)
    return st.integers(lo, hi).map(ctor)


utf8_text = st.text(st.characters(codec="utf-8"), min_size=1, max_size=80).filter(
    lambda s: len(s.encode("utf-8")) <= MAX_HEADER_FIELD
)
_INT_KINDS = [k for k in HeaderKind if k.fixed_size and k not in (K.BOOL, K.FLOAT32, K.FLOAT64)]
VALUES_BY_KIND: dict[HeaderKind, st.SearchStrategy[HeaderValue]] = {
    K.RAW: st.binary(min_size=1, max_size=MAX_HEADER_FIELD).map(HV.raw),
    K.STRING: utf8_text.map(HV.string),
    K.BOOL: st.booleans().map(HV.bool),
    # floats from raw bits cover every NaN payload, subnormals and both zeros
    K.FLOAT32: st.binary(min_size=4, max_size=4).map(lambda b: HV(K.FLOAT32, b)),
    K.FLOAT64: st.binary(min_size=8, max_size=8).map(lambda b: HV(K.FLOAT64, b)),
    **{k: _int_values(k) for k in _INT_KINDS},
}


any_value = st.sampled_from(list(HeaderKind)).flatmap(lambda k: VALUES_BY_KIND[k])
