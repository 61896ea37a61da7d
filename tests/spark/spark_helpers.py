"""Helpers shared by the Spark tests."""

from __future__ import annotations

from adapters.spark.client import WireMessage
from core.message import Headers, HeaderValue


def every_kind_headers(i: int) -> Headers:
    """A header block with every kind, a repeated key and a typed key."""
    h = Headers()
    h.add("s", f"v{i}")
    h.add("raw", HeaderValue.raw(bytes([i % 256, 0, 255])))
    h.add("b", HeaderValue.bool(i % 2 == 0))
    for kind in ("int8", "int16", "int32", "int64", "int128"):
        h.add(kind, getattr(HeaderValue, kind)(-i - 1))
    for kind in ("uint8", "uint16", "uint32", "uint64", "uint128"):
        h.add(kind, getattr(HeaderValue, kind)(i + 1))
    h.add("f32", HeaderValue.float32(1.5))
    h.add("f64", HeaderValue.float64(-2.25e300))
    h.add("s", "repeated key")
    h.add(HeaderValue.uint32(7), "typed key")
    return h


def as_rows(headers: Headers) -> list[tuple[str, str, bytes]]:
    """What the Spark ``headers`` column holds for ``headers``."""
    return [(k.data.decode() if k.kind.json_name == "string" else k.to_text(), v.kind.json_name, v.data)
            for k, v in headers]


def produce(client, stream: str, topic: str, partition: int, payloads, headers=None, ids=None) -> None:
    msgs = [WireMessage(ids[i] if ids else 0, p, headers(i).encode() if headers else b"")
            for i, p in enumerate(payloads)]
    client.send_many(stream, topic, partition, msgs)


def ferry_options(gw, stream: str, topic: str | None = "t", **extra) -> dict[str, str]:
    opts = {"servers": f"127.0.0.1:{gw.ports['iggy_tcp']}", "stream": stream}
    if topic is not None:
        opts["topic"] = topic
    return opts | {k: str(v) for k, v in extra.items()}


def read_rows(spark, gw, stream: str, topic: str | None = "t", **extra):
    return spark.read.format("ferry").options(**ferry_options(gw, stream, topic, **extra)).load().collect()


def keyed(rows) -> list[tuple]:
    return sorted((r.topic, r.partition, r.offset, bytes(r.payload)) for r in rows)
