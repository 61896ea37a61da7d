"""The blocking Iggy client of the Spark data source, against a real gateway (no Spark)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from adapters.iggy.errors import IggyError
from adapters.spark.client import MAX_SEND_BYTES, FerryClient, FerryClientError, WireMessage, chunked
from core.message import Headers
from spark_helpers import every_kind_headers


def test_client_imports_neither_trio_nor_pyspark():
    code = ("import sys, adapters.spark.client; "
            "bad = [m for m in ('trio', 'pyspark', 'gateway') if m in sys.modules]; sys.exit(str(bad) if bad else 0)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=".")


def test_bad_password_is_the_iggy_error(ferry):
    with pytest.raises(FerryClientError) as err:
        FerryClient("127.0.0.1", ferry.ports["iggy_tcp"], password="wrong").connect()
    assert err.value.code == IggyError.INVALID_CREDENTIALS
    assert "invalid_credentials" in str(err.value)


def test_unreachable_gateway_is_a_client_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connection refused
        with pytest.raises(FerryClientError) as err:
            FerryClient("127.0.0.1", port, timeout=5).connect()
    assert err.value.code is None and str(port) in str(err.value)


def test_metadata_and_missing_entities(client, stream_name):
    info = client.ensure_topic(stream_name, "t", 3)
    assert [p.id for p in info.partitions] == [0, 1, 2]
    assert client.ensure_topic(stream_name, "t", 3) == info  # idempotent
    assert client.stream(stream_name).topics == ("t",)
    assert stream_name in [s.name for s in client.streams()]
    assert client.topic(stream_name, "missing") is None
    assert client.topic(stream_name + "-missing", "t") is None
    assert client.stream(stream_name + "-missing") is None
    with pytest.raises(FerryClientError):
        client.next_offsets(stream_name, "missing")


def test_next_offsets_tell_empty_from_one_message(client, stream_name):
    client.ensure_topic(stream_name, "t", 3)
    client.send(stream_name, "t", 1, [WireMessage(0, b"a")])
    client.send(stream_name, "t", 2, [WireMessage(0, b"a"), WireMessage(0, b"b")])
    assert client.next_offsets(stream_name, "t") == {0: 0, 1: 1, 2: 2}


def test_send_and_poll_keep_ids_payloads_and_every_header_kind(client, stream_name):
    client.ensure_topic(stream_name, "t", 1)
    sent = [WireMessage(1000 + i, b"p%d" % i, every_kind_headers(i).encode()) for i in range(20)]
    client.send(stream_name, "t", 0, sent)
    got = client.poll(stream_name, "t", 0, 5, 10)
    assert (got.partition_id, got.current_offset, got.count) == (0, 19, 10)
    recs = list(got.records())
    assert [r.offset for r in recs] == list(range(5, 15))
    assert [r.id for r in recs] == [1000 + i for i in range(5, 15)]
    assert [r.payload for r in recs] == [b"p%d" % i for i in range(5, 15)]
    assert [Headers.decode(r.headers) for r in recs] == [every_kind_headers(i) for i in range(5, 15)]
    assert all(r.timestamp > 0 for r in recs)


def test_poll_range_covers_exactly_the_range_in_several_polls(client, stream_name):
    client.ensure_topic(stream_name, "t", 1)
    client.send_many(stream_name, "t", 0, (WireMessage(0, b"%d" % i) for i in range(50)), max_count=7)
    polls = list(client.poll_range(stream_name, "t", 0, 3, 41, count=8))
    offsets = [r.offset for p in polls for r in p.records()]
    assert offsets == list(range(3, 41))
    assert len(polls) == 5
    assert list(client.poll_range(stream_name, "t", 0, 50, 60)) == []  # past the end: nothing, no wait


def test_partitioning_by_key_is_stable_and_balanced_spreads(client, stream_name):
    client.ensure_topic(stream_name, "t", 4)
    for _ in range(3):
        client.send(stream_name, "t", None, [WireMessage(0, b"k")], key=b"user-1")
    ends = client.next_offsets(stream_name, "t")
    assert sorted(ends.values()) == [0, 0, 0, 3]
    for _ in range(4):
        client.send(stream_name, "t", None, [WireMessage(0, b"b")])
    assert sum(client.next_offsets(stream_name, "t").values()) == 7


def test_offset_for_timestamp(client, stream_name):
    client.ensure_topic(stream_name, "t", 1)
    client.send(stream_name, "t", 0, [WireMessage(0, b"a")])
    first = next(client.poll(stream_name, "t", 0, 0, 1).records())
    client.send(stream_name, "t", 0, [WireMessage(0, b"b")])
    second = next(client.poll(stream_name, "t", 0, 1, 1).records())
    assert client.offset_for_timestamp(stream_name, "t", 0, 0) == 0
    assert client.offset_for_timestamp(stream_name, "t", 0, first.timestamp + 1) == (
        1 if second.timestamp > first.timestamp else None)
    assert client.offset_for_timestamp(stream_name, "t", 0, second.timestamp + 1) is None


def test_missing_topic_on_poll_is_the_iggy_code(client, stream_name):
    client.ensure_topic(stream_name, "t", 1)
    with pytest.raises(FerryClientError) as err:
        client.poll(stream_name, "nope", 0, 0, 1)
    assert err.value.code in (IggyError.TOPIC_NAME_NOT_FOUND, IggyError.TOPIC_ID_NOT_FOUND)
    client.ping()  # an error status leaves the connection usable


def test_chunked_bounds_count_and_bytes():
    small = [WireMessage(0, b"x")] * 10
    assert [len(c) for c in chunked(small, 4)] == [4, 4, 2]
    big = [WireMessage(0, b"x" * (MAX_SEND_BYTES // 3))] * 4
    assert [len(c) for c in chunked(big, 100)] == [2, 2]
    assert list(chunked([], 4)) == []


def test_personal_access_token_login(ferry, client, stream_name):
    token = client.create_token(f"tok-{stream_name}"[:30])
    with FerryClient("127.0.0.1", ferry.ports["iggy_tcp"], token=token) as c:
        c.ensure_topic(stream_name, "t", 1)
        c.send(stream_name, "t", 0, [WireMessage(0, b"with a token")])
        assert [r.payload for r in c.poll(stream_name, "t", 0, 0, 5).records()] == [b"with a token"]
    with pytest.raises(FerryClientError) as err:
        FerryClient("127.0.0.1", ferry.ports["iggy_tcp"], token="not-a-token").connect()
    assert err.value.code is not None


def test_stopping_a_poll_range_early_leaves_the_connection_in_step(client, stream_name):
    client.ensure_topic(stream_name, "t", 1)
    client.send(stream_name, "t", 0, [WireMessage(0, b"%d" % i) for i in range(30)])
    polls = client.poll_range(stream_name, "t", 0, 0, 30, count=10)
    first = next(polls)  # the second poll is already requested
    polls.close()
    assert first.count == 10
    assert [r.offset for r in client.poll(stream_name, "t", 0, 25, 10).records()] == [25, 26, 27, 28, 29]


def test_session_pool_reuses_logged_in_connections_and_replaces_broken_ones(ferry):
    from adapters.spark.options import Conn

    conn = Conn((("127.0.0.1", ferry.ports["iggy_tcp"]),), "iggy", "iggy", 10.0)
    with conn.session() as a:
        a.ping()
    with conn.session() as b:
        assert b is a  # the same login, taken from the pool
        b._sock.shutdown(socket.SHUT_RDWR)  # broken while idle in the pool (as by a gateway restart)
    with conn.session() as c:
        assert c is not a
        c.ping()
    with pytest.raises(RuntimeError):
        with conn.session() as d:
            raise RuntimeError("a failed task")
    with conn.session() as e:
        assert e is not d and not d.connected  # not pooled after a failure


def test_poll_range_sizes_polls_by_bytes(client, stream_name, monkeypatch):
    import adapters.spark.client as mod

    monkeypatch.setattr(mod, "FIRST_POLL_COUNT", 5)
    monkeypatch.setattr(mod, "TARGET_POLL_BYTES", 10_000)
    client.ensure_topic(stream_name, "t", 1)
    client.send_many(stream_name, "t", 0, (WireMessage(0, bytes(1000)) for _ in range(50)))
    polls = list(client.poll_range(stream_name, "t", 0, 0, 50))
    assert polls[0].count == 5
    per_record = 64 + 1000
    assert all(p.count == 10_000 // per_record for p in polls[1:-1])
    assert [r.offset for p in polls for r in p.records()] == list(range(50))
