"""Units without sockets: metrics registry, JWT tokens, JSON models (header kinds round trip)."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.http import models
from adapters.http.errors import HttpError
from adapters.http.tokens import MIN_SECRET_BYTES, TokenError, TokenService, load_secret
from core.header_value import HeaderKind, HeaderValue
from core.message import Headers, Message
from core.metrics import MAX_SERIES_PER_METRIC, MetricsRegistry, metrics_for, render_families


# -- core/metrics.py -------------------------------------------------------------------
def test_registry_renders_prometheus_text():
    reg = MetricsRegistry()
    c = reg.counter("x_total", "Things.", ("listener",))
    c.inc("http")
    c.inc("http", amount=2)
    g = reg.gauge("open", "Open now.", ("listener",))
    g.inc("a\"b\\c\nd")
    g.dec("a\"b\\c\nd")
    h = reg.histogram("lat_seconds", "Latency.", buckets=(0.1, 1.0))
    for v in (0.05, 0.5, 5.0):
        h.observe(v)
    text = reg.render()
    assert '# TYPE x_total counter\nx_total{listener="http"} 3' in text
    assert 'open{listener="a\\"b\\\\c\\nd"} 0' in text  # escaped per the exposition format
    assert 'lat_seconds_bucket{le="0.1"} 1\nlat_seconds_bucket{le="1"} 2\nlat_seconds_bucket{le="+Inf"} 3' in text
    assert "lat_seconds_sum 5.55" in text and "lat_seconds_count 3" in text
    assert reg.counter("x_total", "Things.", ("listener",)) is c  # get-or-create
    with pytest.raises(ValueError):
        reg.gauge("x_total", "clash", ("listener",))
    with pytest.raises(ValueError):
        c.inc()  # wrong label count


def test_series_budget_and_per_owner_registries():
    reg = MetricsRegistry()
    c = reg.counter("n_total", "N.", ("k",))
    for i in range(MAX_SERIES_PER_METRIC + 5):
        c.inc(str(i))
    assert len(c._values) == MAX_SERIES_PER_METRIC  # extra label sets dropped, not stored

    class Owner:
        pass

    a, b = Owner(), Owner()
    assert metrics_for(a) is metrics_for(a) and metrics_for(a) is not metrics_for(b)
    assert render_families([("f", "gauge", "F.", [({"p": "0"}, 1.5), ({"p": "1"}, math.inf)])]) == (
        '# HELP f F.\n# TYPE f gauge\nf{p="0"} 1.5\nf{p="1"} +Inf\n')


# -- adapters/http/tokens.py -------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_tokens_issue_verify_expire_revoke():
    clock, saved = Clock(), []
    svc = TokenService(b"k" * 32, lifetime_s=60, clock=clock, persist=saved.append)
    token, exp = svc.issue(0)
    claims = svc.verify(token)
    assert (claims.user_id, claims.exp, exp) == (0, int(clock.now) + 60, int(clock.now) + 60)
    clock.now += 66  # past exp + 5 s leeway
    with pytest.raises(TokenError):
        svc.verify(token)
    clock.now -= 66
    svc.revoke(claims)
    with pytest.raises(TokenError) as info:
        svc.verify(token)
    assert info.value.revoked and saved
    reloaded = TokenService(b"k" * 32, clock=clock, revoked=saved[-1])
    with pytest.raises(TokenError):
        reloaded.verify(token)
    with pytest.raises(TokenError):
        TokenService(b"o" * 32, clock=clock).verify(token)  # another key
    assert TokenService(b"k" * 32, clock=clock, revoked="{not json").verify(svc.issue(1)[0]).user_id == 1


def test_secret_is_generated_once_and_configured_one_checked(tmp_path):
    first = load_secret(tmp_path)
    assert len(first) == MIN_SECRET_BYTES and load_secret(tmp_path) == first
    assert load_secret(tmp_path, "s" * 32) == b"s" * 32
    with pytest.raises(ValueError):
        load_secret(tmp_path, "short")


# -- adapters/http/models.py -----------------------------------------------------------------
def _value(kind: HeaderKind, data: st.DataObject) -> HeaderValue:
    if kind is HeaderKind.RAW:
        return HeaderValue.raw(data.draw(st.binary(min_size=1, max_size=255)))
    if kind is HeaderKind.STRING:
        return HeaderValue.string(data.draw(st.text(min_size=1, max_size=60)))
    if kind is HeaderKind.BOOL:
        return HeaderValue.bool(data.draw(st.booleans()))
    return HeaderValue(kind, data.draw(st.binary(min_size=kind.fixed_size, max_size=kind.fixed_size)))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_every_header_kind_round_trips_through_json(data):
    """Send JSON -> stored Headers -> polled JSON gives back the same entries: the current
    ``user_headers`` (typed keys too), and the seed era's map (string keys) still read."""
    kinds = data.draw(st.lists(st.sampled_from(list(HeaderKind)), min_size=1, max_size=8))
    key_kinds = data.draw(st.lists(st.sampled_from(list(HeaderKind)), min_size=len(kinds), max_size=len(kinds)))
    entries = [{"key": {"kind": kk.json_name, "value": models.b64(_value(kk, data).data)},
                "value": {"kind": k.json_name, "value": models.b64(_value(k, data).data)}}
               for kk, k in zip(key_kinds, kinds)]
    legacy = {f"k{i}": e["value"] for i, e in enumerate(entries)}
    for form, sent, want in (("user_headers", entries, entries), ("headers", legacy, [
            {"key": {"kind": "string", "value": models.b64(k.encode())}, "value": v} for k, v in legacy.items()])):
        try:
            _, _, (item,) = models.parse_send({"messages": [{"payload": "eA==", form: sent}]}, 1 << 20)
        except HttpError as exc:  # a random float NaN payload etc. is still valid; only shape errors fail
            pytest.fail(f"valid headers refused: {exc!r}")
        msg = Message(id=1, timestamp=0, origin_timestamp=0, headers=Headers.decode(item.headers), payload=b"x")
        assert models.message_json(msg)["user_headers"] == want
        assert models.message_json(msg)["header"]["user_headers_length"] == len(item.headers)
    # the raw TLV block as one base64 string is read too (apache/iggy SendMessages)
    block = Headers.decode(item.headers).encode()
    _, _, (raw_item,) = models.parse_send({"messages": [{"payload": "eA==", "user_headers": models.b64(block)}]},
                                          1 << 20)
    assert raw_item.headers == block


def test_partitioning_and_ids():
    assert models.parse_partitioning(None) == (None, None)
    value = models.b64(struct.pack("<I", 3))
    # ids are numbered from 0, as the current server and the core (docs/http.md)
    assert models.parse_partitioning(models.Fields({"kind": "partition_id", "value": value})) == (3, None)
    assert models.parse_identifier("42", "stream_id") == 42 and models.parse_identifier("orders", "s") == "orders"
    assert models.parse_identifier("0", "stream_id") == 0
    assert models.parse_identifier(str(2**32), "stream_id") == str(2**32)  # past u32: a name (iggy.md 3.1)
    assert models.consumer_id("7") == 7 and models.consumer_id("worker") != models.consumer_id("worker2")
    perms = {"global": {"read_streams": True}, "streams": {"2": {"read_stream": True, "topics": {"0": {}}}}}
    parsed = models.permissions_from_json(perms)
    assert set(parsed.streams) == {2} and set(parsed.streams[2].topics) == {0}
    out = models.permissions_json(parsed)
    assert list(out["streams"]) == ["2"] and list(out["streams"]["2"]["topics"]) == ["0"]


def test_verified_token_cache_still_checks_expiry_and_revocation():
    clock = Clock()
    svc = TokenService(b"k" * 32, lifetime_s=60, clock=clock)
    token, _ = svc.issue(3)
    assert svc.verify(token).user_id == 3
    assert svc.verify(token).user_id == 3  # from the cache
    clock.now += 66
    with pytest.raises(TokenError):
        svc.verify(token)  # expired although cached
    clock.now -= 66
    fresh, _ = svc.issue(4)
    claims = svc.verify(fresh)
    svc.revoke(claims)
    with pytest.raises(TokenError):
        svc.verify(fresh)  # revoked although cached
    with pytest.raises(TokenError):
        svc.verify(fresh[:-2] + ("A" if fresh[-2] != "A" else "B") + fresh[-1])  # tampered: never cached


# -- adapters/http/errors.py: the core-error table ----------------------------------------
from core import errors as ce  # noqa: E402
from adapters.http.errors import from_core  # noqa: E402

CORE_CASES = [
    (ce.StreamNotFound("x", field="id"), None, 404, 1009, "stream_id"),
    (ce.StreamNotFound("x", field="name"), None, 400, 1010, None),
    (ce.TopicNotFound("x", field="id"), None, 404, 2010, "topic_id"),
    (ce.TopicNotFound("x", field="name"), None, 400, 2011, None),
    (ce.PartitionNotFound("x"), None, 404, 3007, "partition_id"),
    (ce.ConsumerGroupNotFound("x", field="id"), None, 404, 5000, None),
    (ce.ConsumerGroupNotFound("x", field="name"), None, 404, 5003, None),
    (ce.ConsumerOffsetNotFound("x"), None, 404, 3021, None),
    (ce.UserNotFound("x"), None, 404, 20, None),
    (ce.StreamAlreadyExists("x", field="id"), None, 400, 1011, "stream_id"),
    (ce.StreamAlreadyExists("x", field="name"), None, 400, 1012, "name"),
    (ce.TopicAlreadyExists("x", field="name"), None, 400, 2013, "name"),
    (ce.ConsumerGroupAlreadyExists("x", field="name"), None, 400, 5004, "name"),
    (ce.UserAlreadyExists("x", field="name"), None, 400, 46, "username"),
    (ce.InvalidName("x"), "stream", 400, 1013, "name"),
    (ce.InvalidName("x"), "topic", 400, 2014, "name"),
    (ce.InvalidName("x"), "group", 400, 5005, None),
    (ce.InvalidCredentials("x"), None, 400, 42, None),
    (ce.InvalidToken("x"), None, 401, 53, None),
    (ce.Unauthenticated("x"), None, 401, 40, None),
    (ce.PermissionDenied("x"), None, 403, 41, None),
    (ce.CannotDeleteUser("x"), None, 400, 48, None),
    (ce.InvalidHeaderKind("x"), None, 400, 209, None),
    (ce.InvalidOffset("x"), None, 400, 4100, "offset"),
    (ce.TooManyPartitions("x"), None, 400, 2015, None),
    (ce.TopicSealed("x"), None, 400, 5, None),
    (ce.ShuttingDown("x"), None, 503, 503, None),
    (ce.CorruptSegment("x"), None, 500, 500, None),
    (ce.FerryError("x"), None, 400, 1, None),
]


@pytest.mark.parametrize("exc,entity,status,iggy_id,field", CORE_CASES, ids=lambda v: getattr(v, "code", None))
def test_core_error_table(exc, entity, status, iggy_id, field):
    err = from_core(exc, entity)
    assert (err.status, err.iggy_id, err.field) == (status, iggy_id, field)
    body = err.body()
    assert body["code"]
    if status < 500:
        assert body["reason"] == exc.message
    else:
        assert body["reason"] != exc.message  # server-side details are never echoed


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_polled_json_bytes_are_what_dumps_of_the_dicts_gives(data):
    """The poll path formats message JSON directly (models.record_json_entry); it
    must be byte for byte ``dumps`` of message_json's dict and of the PolledMessages dict:
    any id up to u128, any payload, with or without headers of any kind."""
    from core.record import encode_record, parse_record

    views, entries = [], []
    for offset in range(data.draw(st.integers(0, 4))):
        kinds = data.draw(st.lists(st.sampled_from(list(HeaderKind)), max_size=4))
        headers = Headers([(f"k{i}é", _value(k, data)) for i, k in enumerate(kinds)])
        raw = encode_record(data.draw(st.integers(0, (1 << 128) - 1)), offset, data.draw(st.integers(0, 1 << 63)),
                            data.draw(st.sampled_from([0, 1, 1 << 62])), headers.encode() if kinds else b"",
                            data.draw(st.binary(max_size=300)))
        views.append(parse_record(raw))
        entries.append(models.record_json_entry(memoryview(raw)))
    records = [body for _o, _p, body in entries]
    assert records == [models.dumps(models.message_json(Message.from_record(v))) for v in views]
    assert [(o, p) for o, p, _b in entries] == [(v.offset, len(v.payload)) for v in views]
    pid, current = data.draw(st.integers(0, 1000)), data.draw(st.integers(-1, 1 << 63))
    assert models.polled_json_bytes(pid, current, records) == models.dumps({
        "partition_id": models.wire_id(pid), "current_offset": max(current, 0), "count": len(records),
        "messages": [models.message_json(Message.from_record(v)) for v in views]})
