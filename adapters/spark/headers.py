"""Helpers for the ``headers`` column: pick a header, decode its typed value.

``headers`` is ``array<struct<key string, kind string, value binary>>``: an
ordered multi-map, so repeated keys (NATS allows them) and order survive
(spark-datasource.md section 4). The picking helpers are plain Spark
expressions (no Python worker); decoding a typed value needs its kind, so
those helpers are Python UDFs over ``(kind, value)``.

Kinds are Iggy's JSON names (``"string"``, ``"uint64"``...); values are their
exact wire bytes: little-endian integers, IEEE 754 floats, UTF-8 strings,
``0``/``1`` bools (core/header_value.py). :func:`decode_value` is the one
decoding rule, usable in plain Python too.

    from adapters.spark.headers import header, header_text, header_long
    df.select(header_text("trace"), header_long("attempt"))
"""

from __future__ import annotations

from typing import Any

from core.header_value import HeaderKind, HeaderValue

_I64 = (-(1 << 63), (1 << 63) - 1)


def decode_value(kind: str | None, value: bytes | None) -> Any:
    """The Python value of one header (str, bytes, bool, int or float); None for None.
    Raises core.errors.InvalidHeaderKind/InvalidHeaderValue on a malformed pair."""
    if kind is None or value is None:
        return None
    return HeaderValue(HeaderKind.from_json_name(kind), bytes(value)).to_python()


def _text(kind, value):
    return None if kind is None or value is None else HeaderValue(HeaderKind.from_json_name(kind), bytes(value)).to_text()


def _long(kind, value):
    v = decode_value(kind, value)
    if isinstance(v, bool):
        return int(v)
    return v if isinstance(v, int) and _I64[0] <= v <= _I64[1] else None


def _double(kind, value):
    v = decode_value(kind, value)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _first(key: str, column: str):
    from pyspark.sql import functions as F

    # get() answers NULL past the end (element_at/[] raise under ANSI mode, Spark 4's default).
    return F.get(F.filter(F.col(column), lambda h: h["key"] == F.lit(key)), 0)


def header(key: str, column: str = "headers"):
    """The first header named ``key`` as a ``struct<key, kind, value>`` Column (NULL if absent)."""
    return _first(key, column).alias(key)


def header_value(key: str, column: str = "headers"):
    """The raw bytes of the first header named ``key`` (binary Column)."""
    return _first(key, column)["value"].alias(key)


def header_values(key: str, column: str = "headers"):
    """Every value of ``key``, in order (array<binary> Column): repeated keys kept."""
    from pyspark.sql import functions as F

    return F.transform(F.filter(F.col(column), lambda h: h["key"] == F.lit(key)), lambda h: h["value"]).alias(key)


def header_string(key: str, column: str = "headers"):
    """The value bytes of ``key`` read as UTF-8 (right for ``string`` headers; NATS headers are strings)."""
    return _first(key, column)["value"].cast("string").alias(key)


def _udf(fn, return_type: str):
    from pyspark.sql.functions import udf

    return udf(fn, return_type, useArrow=False)  # plain UDF: the Arrow-optimised kind needs pandas, which Ferry does not require


def header_text(key: str, column: str = "headers"):
    """The value of ``key`` as text, whatever its kind: the text form NATS clients see
    (decimal ints, shortest floats, ``true``/``false``, base64 for raw)."""
    h = _first(key, column)
    return _udf(_text, "string")(h["kind"], h["value"]).alias(key)


def header_long(key: str, column: str = "headers"):
    """The value of ``key`` as bigint: any integer kind or bool; NULL for other kinds
    or values outside the i64 range (a large uint64/int128: use :func:`header_text`)."""
    h = _first(key, column)
    return _udf(_long, "bigint")(h["kind"], h["value"]).alias(key)


def header_double(key: str, column: str = "headers"):
    """The value of ``key`` as double: float32/float64 or any integer kind."""
    h = _first(key, column)
    return _udf(_double, "double")(h["kind"], h["value"]).alias(key)


def header_entry(key: str, value, kind: str = "string"):
    """A ``struct<key, kind, value>`` Column for writes: ``value`` a Column or literal
    already in the kind's wire form (strings are cast to UTF-8 bytes)."""
    from pyspark.sql import Column
    from pyspark.sql import functions as F

    v = value if isinstance(value, Column) else F.lit(value)
    return F.struct(F.lit(key).alias("key"), F.lit(kind).alias("kind"), v.cast("binary").alias("value"))


def _first_in(headers, key):
    for h in headers or ():
        if h["key"] == key:
            return h["kind"], h["value"]
    return None, None


SQL_FUNCTIONS = {  # name -> (Python function of (headers, key), Spark return type)
    "ferry_header_text": (lambda hs, k: _text(*_first_in(hs, k)), "string"),
    "ferry_header_long": (lambda hs, k: _long(*_first_in(hs, k)), "bigint"),
    "ferry_header_double": (lambda hs, k: _double(*_first_in(hs, k)), "double"),
}


def register_sql_functions(spark) -> None:
    """Make the typed decoders callable from SQL on a session:
    ``select ferry_header_long(headers, 'attempt') from t`` (first header with that key)."""
    for name, (fn, return_type) in SQL_FUNCTIONS.items():
        spark.udf.register(name, fn, return_type)


__all__ = [
    "decode_value", "register_sql_functions", "header", "header_double", "header_entry", "header_long", "header_string", "header_text",
    "header_value", "header_values",
]
