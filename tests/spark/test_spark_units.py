"""Pure parts of the data source: offset arithmetic and option parsing (no JVM)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark.sql.datasource")

from adapters.spark.options import FerryOptionError, parse_offsets, parse_servers, source_options  # noqa: E402
from adapters.spark.source import FerryRange, advance, split_ranges  # noqa: E402


class Opts(dict):
    """Spark's options mapping is case-insensitive with lower-cased keys."""

    def __init__(self, **kw):
        super().__init__({k.lower(): v for k, v in kw.items()})

    def get(self, key, default=None):
        return super().get(key.lower(), default)


def test_advance_without_limit_reaches_latest_and_adds_new_partitions_at_zero():
    start = {"t": {0: 5, 1: 2}}
    latest = {"t": {0: 9, 1: 2, 2: 4}, "u": {0: 3}}
    assert advance(start, latest, None) == {"t": {0: 9, 1: 2, 2: 4}, "u": {0: 3}}


def test_advance_shares_the_limit_by_backlog_and_spends_it_exactly():
    start = {"t": {0: 0, 1: 0, 2: 0}}
    latest = {"t": {0: 90, 1: 9, 2: 1}}
    end = advance(start, latest, 10)
    assert sum(end["t"].values()) == 10
    assert end["t"][0] >= 8 and all(end["t"][p] <= latest["t"][p] for p in end["t"])
    assert sum(advance(start, latest, 1)["t"].values()) == 1  # always progress
    assert advance(start, {"t": {0: 0}}, 10) == {"t": {0: 0, 1: 0, 2: 0}}  # nothing due: start back


def test_advance_in_limited_steps_covers_everything_once():
    start, latest, seen = {}, {"t": {0: 17, 1: 5, 2: 0}}, 0
    while True:
        end = advance(start, latest, 4)
        step = sum(end["t"][p] - start.get("t", {}).get(p, 0) for p in end["t"])
        if step == 0:
            break
        assert step <= 4
        seen += step
        start = end
    assert seen == 22 and start == latest


def test_split_ranges():
    got = split_ranges({"t": {0: 3}}, {"t": {0: 10, 1: 2}}, 3)
    assert got == [FerryRange("t", 0, 3, 6), FerryRange("t", 0, 6, 9), FerryRange("t", 0, 9, 10),
                   FerryRange("t", 1, 0, 2)]
    assert split_ranges({"t": {0: 5}}, {"t": {0: 5}}, 3) == []


def test_parse_offsets_and_servers():
    assert parse_offsets("x", None, "earliest") == "earliest"
    assert parse_offsets("x", " LATEST ", "earliest") == "latest"
    assert parse_offsets("x", '{"t": {"0": 5, "1": -2}}', "latest") == {"t": {0: 5, 1: -2}}
    for bad in ('{"t": 5}', '{"t": {"a": 1}}', '{"t": {"0": -3}}', "[1]", '{"t": {"0": true}}'):
        with pytest.raises(FerryOptionError, match="^x: "):
            parse_offsets("x", bad, "latest")
    assert parse_servers("a:1, [::1]:2") == (("a", 1), ("::1", 2))
    with pytest.raises(FerryOptionError, match="^servers: "):
        parse_servers("a:99999")


def test_source_options_defaults_follow_the_kafka_source():
    batch = source_options(Opts(stream="s", topic="t"), streaming=False)
    stream = source_options(Opts(stream="s", topic="t"), streaming=True)
    assert (batch.starting, batch.ending, stream.starting) == ("earliest", "latest", "latest")
    assert batch.conn.servers == (("127.0.0.1", 8090),)
    with pytest.raises(FerryOptionError, match="^endingOffsets: "):
        source_options(Opts(stream="s", topic="t", endingOffsets="latest"), streaming=True)
    with pytest.raises(FerryOptionError, match="^startingOffsets: names topics"):
        source_options(Opts(stream="s", topic="t", startingOffsets='{"u": {"0": 1}}'), streaming=False)
    with pytest.raises(FerryOptionError, match="^stream: "):
        source_options(Opts(topic="t"), streaming=False)
    with pytest.raises(FerryOptionError, match="^subscribePattern: "):
        source_options(Opts(stream="s", subscribePattern="("), streaming=False)


def test_sink_header_blocks_match_the_core_encoding_and_refuse_bad_values():
    import pyarrow as pa

    from adapters.spark.batches import HEADER_TYPE
    from adapters.spark.sink import _header_blocks
    from core.errors import InvalidHeaderValue
    from core.message import Headers, HeaderValue

    rows = [[{"key": "a", "kind": "string", "value": b"x"}, {"key": "n", "kind": "uint16", "value": b"\x01\x00"}],
            [], None, [{"key": "r", "kind": None, "value": b"\x00"}]]
    col = pa.array(rows, pa.list_(HEADER_TYPE))
    assert _header_blocks(col, 4) == [
        Headers([("a", "x"), ("n", HeaderValue.uint16(1))]).encode(), b"", b"",
        Headers([("r", HeaderValue.raw(b"\x00"))]).encode()]
    assert _header_blocks(col.slice(1, 3), 3)[2] == Headers([("r", HeaderValue.raw(b"\x00"))]).encode()
    with pytest.raises(InvalidHeaderValue):
        _header_blocks(pa.array([[{"key": "n", "kind": "uint16", "value": b"\x01"}]], pa.list_(HEADER_TYPE)), 1)
    with pytest.raises(FerryOptionError, match="^headers: unknown kind"):
        _header_blocks(pa.array([[{"key": "n", "kind": "u16", "value": b"\x01"}]], pa.list_(HEADER_TYPE)), 1)


def test_sink_message_ids_are_checked():
    from adapters.spark.sink import _message_id

    assert _message_id("%032x" % ((1 << 128) - 1)) == (1 << 128) - 1
    for bad in ("xyz", "1" * 33, "-1"):
        with pytest.raises(FerryOptionError, match="^id: "):
            _message_id(bad)


def test_advance_starts_new_partitions_at_their_join_offsets():
    end = advance({"t": {0: 5}}, {"t": {0: 9, 1: 30}}, None, joins={"t": {1: 25}})
    assert end == {"t": {0: 9, 1: 30}}
    assert sum(advance({"t": {0: 5}}, {"t": {0: 9, 1: 30}}, 3, joins={"t": {1: 25}})["t"].values()) == 5 + 25 + 3


def test_fail_on_data_loss_option():
    assert source_options(Opts(stream="s", topic="t"), streaming=False).fail_on_data_loss is True
    assert source_options(Opts(stream="s", topic="t", failOnDataLoss="FALSE"), streaming=True).fail_on_data_loss is False
    with pytest.raises(FerryOptionError, match="^failOnDataLoss: "):
        source_options(Opts(stream="s", topic="t", failOnDataLoss="nope"), streaming=False)
