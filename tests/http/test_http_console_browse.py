"""The console's message browser API (adapters/http/routes_console_browse.py).

Pure parts first (payload views, the key query, the bounded scan over real partitions),
then one live gateway: messages written by real clients (HTTP posts through httpx, NATS
publishes with headers through nats-py) and browsed over HTTP: paging older and newer
with cursors, newest and oldest first, jumps to an offset and to a time, each filter, a
scan that stops at its limit and continues, and the API's 400 for bad parameters.
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct

import httpx
import nats
import pytest

from adapters.http.routes_console_browse import (MAX_BROWSE_COUNT, MAX_PREVIEW_BYTES, MAX_SCAN_RECORDS, Filter,
                                                 KeyQuery, payload_json, payload_text, scan)
from core.broker import Broker, BrokerConfig
from core.errors import CorruptSegment
from core.log import AppendInput, LogConfig
from core.log.batch import BATCH_HEADER, BATCH_HEADER_SIZE
from ferry_harness import running_gateway

CLIENT_LIMIT_S = 30  # bounds a hung client call, not a timing assertion
MESSAGES = "/console/api/streams/{s}/topics/{t}/messages"


# -- payload views (pure) ----------------------------------------------------------------------
def test_payload_text_escapes_what_would_not_show():
    assert payload_text(b"a\x00b\x1b[31mred\tx\r\ny\x7f") == r"a\x00b\x1b[31mred\tx\r\ny\x7f"
    assert payload_text(b"\xff\xfeok") == r"\xff\xfeok"  # not UTF-8: each byte as \xNN
    assert payload_text(rb"C:\temp\x41") == r"C:\\temp\\x41"  # a backslash is doubled: no look-alike escapes
    # C1 controls and invisible format characters (a bidi override, a zero-width space, a BOM)
    assert payload_text("x\u0085y\u202ez\u200b\ufeff".encode()) == r"x\u0085y\u202ez\u200b\ufeff"
    assert payload_text("héllo ✓".encode()) == "héllo ✓"  # ordinary text unchanged
    cut = ("x" + "é" * MAX_PREVIEW_BYTES).encode()  # the preview limit splits an "é": dropped, not \xc3
    shown = payload_text(cut)
    assert "\\" not in shown and len(shown.encode()) == MAX_PREVIEW_BYTES - 1


def test_payload_json_is_pretty_and_keeps_every_digit():
    assert payload_json(b'{"n":12345678901234567890,"a":[1,2]}') == '{\n  "n": 12345678901234567890,\n  "a": [\n' \
                                                                   '    1,\n    2\n  ]\n}'
    assert payload_json('{"s":"\u202e\x7f"}'.encode()) == '{\n  "s": "\\u202e\\u007f"\n}'  # escaped here too
    assert payload_json(b'{"c":"\\u0000"}') == '{\n  "c": "\\u0000"\n}'
    for not_json in (b"hello", b"{", b"NaN", b"", b"  ", b"\xff"):
        assert payload_json(not_json) is None
    assert payload_json(b"[" + b" " * MAX_PREVIEW_BYTES + b"]") is None  # not shown whole: no JSON view


def test_key_query_reads_ids_and_patterns():
    assert KeyQuery.parse("00000000000000000000000000000010").msg_id == 16  # 32 hex digits
    assert KeyQuery.parse("42").msg_id == 42 and not KeyQuery.parse("42").pattern
    assert KeyQuery.parse(str(2**128)).msg_id is None  # past u128: only ever text
    assert KeyQuery.parse("shop.*.eu").pattern and KeyQuery.parse("shop.>").pattern
    assert not KeyQuery.parse("shop.orders").pattern and not KeyQuery.parse("a..*").pattern


# -- the bounded scan over real partitions ------------------------------------------------------------
def test_scan_is_bounded_and_its_continuations_cover_every_match_once(tmp_path):
    broker = Broker.open(tmp_path / "data", BrokerConfig(log=LogConfig(fsync="never")))
    try:
        s = broker.create_stream("scan")
        t = broker.create_topic(s.id, "t", 3)
        for i in range(90):  # one append each: every record has its own append time
            broker.append(s.id, t.id, [AppendInput(b"hit %d" % i if i % 7 == 0 else b"miss %d" % i)], partition=i % 3)
        parts = {pid: broker.partition(s.id, t.id, pid) for pid in range(3)}
        flt = Filter(text=b"hit")
        everything = scan(parts, {p: 0 for p in parts}, False, 1000, Filter())
        assert [bytes(rv.payload) for _, rv in everything.found] == [
            (b"hit %d" if i % 7 == 0 else b"miss %d") % i for i in range(90)]  # one time line over 3 partitions
        for older in (True, False):
            start = {p: (part.next_offset if older else 0) for p, part in parts.items()}
            got, steps = [], 0
            while True:
                r = scan(parts, start, older, 4, flt, max_records=10)
                assert r.records_read <= 10  # the bound holds across partitions
                got += [bytes(rv.payload) for _, rv in r.found]
                steps += 1
                if r.stopped == "end":
                    break
                start = r.boundaries  # continue where it got to
            want = [b"hit %d" % i for i in range(0, 90, 7)]
            assert got == (want[::-1] if older else want)
            assert steps >= 90 // 10  # it really stopped at the limit on the way
        # a byte budget smaller than one record still moves (as a poll returns at least one)
        r = scan(parts, {p: 0 for p in parts}, False, 5, Filter(), max_bytes=1)
        assert r.stopped == "limit" and len(r.found) == 1 and r.found[0][1].offset == 0
    finally:
        broker.close()


def test_scan_steps_over_a_quarantined_segment(tmp_path):
    """A segment that failed its checksum leaves a gap of offsets (core/log/salvage.py): a
    scan going older in small steps finds windows with nothing in them and steps over."""
    cfg = BrokerConfig(log=LogConfig(fsync="never", segment_bytes=1500))  # a few 3-record batches a segment
    broker = Broker.open(tmp_path / "data", cfg)
    s = broker.create_stream("s")
    t = broker.create_topic(s.id, "t", 1)
    for i in range(0, 60, 3):
        broker.append(s.id, t.id, [AppendInput(b"r%02d" % j + b"." * 56) for j in range(i, i + 3)], partition=0)
        broker.flush()  # one batch each
    broker.close()
    victim = sorted((tmp_path / "data").glob("streams/*/topics/*/partitions/0/*.log"))[1]
    data = bytearray(victim.read_bytes())
    first_batch = BATCH_HEADER.unpack_from(data, 0)
    gap = range(first_batch[5], first_batch[5] + first_batch[8])  # the batch's base offset and count
    data[BATCH_HEADER_SIZE + 64 + 10] ^= 0x20  # a payload byte of its first record
    victim.write_bytes(bytes(data))
    broker = Broker.open(tmp_path / "data", cfg)
    try:
        part = broker.partition(s.id, t.id, 0)
        with pytest.raises(CorruptSegment):  # the first read finds the damage and quarantines it
            part.read(gap[0], 1)
        start, got = {0: part.next_offset}, []
        while True:  # two records a request: windows of two inside the gap come back empty
            r = scan({0: part}, start, True, 100, Filter(text=b"r"), max_records=2)
            got += [rv.offset for _, rv in r.found]
            if r.stopped == "end":
                break
            start = r.boundaries
        assert got == [o for o in range(59, -1, -1) if o not in gap]
    finally:
        broker.close()


# -- a live gateway -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with running_gateway(tmp_path_factory.mktemp("browse")) as gw:
        yield gw


@pytest.fixture
def api(gw):
    with httpx.Client(base_url=f"http://127.0.0.1:{gw.ports['http']}", timeout=CLIENT_LIMIT_S) as c:
        r = c.post("/users/login", json={"username": "iggy", "password": "iggy"})
        c.headers["authorization"] = "Bearer " + r.json()["access_token"]["token"]
        yield c


def _b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def _topic(c: httpx.Client, stream: str, topic: str, partitions: int) -> str:
    assert c.post("/streams", json={"name": stream}).status_code == 200
    assert c.post(f"/streams/{stream}/topics", json={"name": topic, "partitions_count": partitions,
                  "compression_algorithm": "none", "message_expiry": 0, "max_topic_size": 0}).status_code == 200
    return MESSAGES.format(s=stream, t=topic)


def _post(c: httpx.Client, stream: str, topic: str, messages: list[dict], partition: int = 0) -> None:
    r = c.post(f"/streams/{stream}/topics/{topic}/messages", json={
        "partitioning": {"kind": "partition_id", "value": _b64(struct.pack("<I", partition))}, "messages": messages})
    assert r.status_code == 201, r.text


def _rows(body: dict) -> list[tuple[int, int]]:
    return [(m["partition_id"], m["offset"]) for m in body["messages"]]


def _walk(c: httpx.Client, path: str, first: dict, way: str) -> list[tuple[int, int]]:
    """Every row from ``first`` on, following the ``way`` ("older"/"newer") cursors to the end."""
    body = c.get(path, params=first).json()
    rows = _rows(body)
    while body[way] is not None:
        params = {k: v for k, v in first.items() if k in ("count", "order", "partition_id")}
        body = c.get(path, params=params | {"cursor": body[way], "dir": way}).json()
        rows += _rows(body)
    return rows


def test_pages_older_and_newer_newest_or_oldest_first(api):
    path = _topic(api, "paging", "t", 2)
    for i in range(23):  # one post each: every message has its own append time
        _post(api, "paging", "t", [{"payload": _b64(f"m{i}")}], partition=i % 2)
    everything = api.get(path, params={"count": MAX_BROWSE_COUNT, "order": "oldest"}).json()
    timeline = _rows(everything)  # by append time over both partitions
    assert [m["payload"] for m in everything["messages"]] == [f"m{i}" for i in range(23)]
    assert everything["older"] is None and everything["newer"] is None

    top = api.get(path, params={"count": 5}).json()  # the default: newest first, from the newest
    assert _rows(top) == timeline[::-1][:5] and top["newer"] is None and top["order"] == "newest"
    assert top["messages"][0]["payload_size"] == len("m22")
    # older pages down to the oldest, then newer pages back up to the newest
    assert _walk(api, path, {"count": 5}, "older") == timeline[::-1]
    down = api.get(path, params={"count": 5, "cursor": top["older"], "dir": "older"}).json()
    assert _rows(down) == timeline[::-1][5:10]  # newest first, whichever way it paged
    back = api.get(path, params={"count": 5, "cursor": down["newer"], "dir": "newer"}).json()
    assert _rows(back) == _rows(top)  # "newer" from page 2 is page 1 again
    assert _walk(api, path, {"count": 5, "order": "oldest"}, "newer") == timeline
    bottom = api.get(path, params={"count": 4, "order": "oldest"}).json()
    assert bottom["older"] is None and _rows(bottom) == timeline[:4]
    # one partition of the two
    only = _walk(api, path, {"count": 3, "partition_id": 1}, "older")
    assert only == [(1, o) for o in range(10, -1, -1)]


def test_browsing_keeps_consumer_offsets_and_counts_messages_out(api):
    path = _topic(api, "offsets", "t", 1)
    _post(api, "offsets", "t", [{"payload": _b64(f"n{i}")} for i in range(6)])
    r = api.put("/streams/offsets/topics/t/consumer-offsets", json={"consumer_id": 1, "partition_id": 0, "offset": 2})
    assert r.status_code == 204, r.text
    before = api.get("/console/api/metrics").json()["listeners"]["http"]
    body = api.get(path, params={"count": 4}).json()
    after = api.get("/console/api/metrics").json()["listeners"]["http"]
    assert [m["payload"] for m in body["messages"]] == ["n5", "n4", "n3", "n2"]
    assert after["messages_out"] - before["messages_out"] == 4  # a browse is a delivery
    assert after["bytes_out"] - before["bytes_out"] == 4 * 2
    stored = api.get("/streams/offsets/topics/t/consumer-offsets", params={"consumer_id": 1, "partition_id": 0})
    assert stored.json()["stored_offset"] == 2  # untouched by the browse
    r = api.get("/streams/offsets/topics/t/consumer-offsets", params={"consumer_id": 9, "partition_id": 0})
    assert r.status_code == 404  # and nothing stored for anyone else


def test_jump_to_an_offset_or_a_time(api):
    path = _topic(api, "jumps", "t", 2)
    for i in range(12):
        _post(api, "jumps", "t", [{"payload": _b64(f"j{i}")}], partition=i % 2)
    everything = api.get(path, params={"count": MAX_BROWSE_COUNT, "order": "oldest"}).json()["messages"]
    body = api.get(path, params={"partition_id": 0, "offset": 3, "count": 2}).json()
    assert _rows(body) == [(0, 3), (0, 2)]  # newest first: the page starts at offset 3
    body = api.get(path, params={"partition_id": 0, "offset": 3, "count": 2, "order": "oldest"}).json()
    assert _rows(body) == [(0, 3), (0, 4)] and body["older"] == "0:3"
    body = api.get(path, params={"partition_id": 0, "offset": 10**6, "count": 2}).json()
    assert _rows(body) == [(0, 5), (0, 4)]  # past the end: from the newest
    # a time jump: the message stored at T and those before it (newest first), or from T on
    at = everything[5]
    key = lambda m: (m["timestamp"], m["partition_id"], m["offset"])  # noqa: E731 - the merge order
    before = sorted((m for m in everything if m["timestamp"] <= at["timestamp"]), key=key, reverse=True)
    since = sorted((m for m in everything if m["timestamp"] >= at["timestamp"]), key=key)
    body = api.get(path, params={"time": at["timestamp"], "count": 4}).json()
    assert _rows(body) == [(m["partition_id"], m["offset"]) for m in before[:4]]
    assert body["messages"][0]["timestamp"] == at["timestamp"]
    body = api.get(path, params={"time": at["timestamp"], "count": 4, "order": "oldest"}).json()
    assert _rows(body) == [(m["partition_id"], m["offset"]) for m in since[:4]]
    body = api.get(path, params={"time": 0, "count": 4}).json()
    assert body["messages"] == [] and body["older"] is None  # nothing stored before 1970


def test_filters_by_header_key_and_payload_text(api, gw):
    path = _topic(api, "shop", "orders", 1)
    big_id = 2**100 + 7

    async def publish():
        nc = await nats.connect(gw.url())
        await nc.publish("shop.orders.eu", b"NATS eu with Needle", headers={"trace": "t1"})
        await nc.publish("shop.orders.us", b"NATS us", headers={"trace": "t2", "Ferry-Partition-Key": "cust-7"})
        await nc.publish("shop.orders.eu.north", b'{"total": 12345678901234567890}')
        await nc.flush()
        await nc.close()

    asyncio.run(asyncio.wait_for(publish(), CLIENT_LIMIT_S))
    _post(api, "shop", "orders", [
        {"id": big_id, "payload": _b64("http needle"), "headers": {"Trace": {"kind": "string", "value": _b64("t1")}}},
        {"payload": _b64(b"\x00\x01bin\xff"), "headers": {"n": {"kind": "uint32", "value": _b64(struct.pack("<I", 7))}}},
    ])

    def payloads(**params) -> list[str]:
        body = api.get(path, params={"order": "oldest"} | params)
        assert body.status_code == 200, body.text
        return [m["payload_text"] for m in body.json()["messages"]]

    assert payloads(header="trace") == ["NATS eu with Needle", "NATS us", "http needle"]  # key without case
    assert payloads(header="TRACE", header_value="t1") == ["NATS eu with Needle", "http needle"]
    assert payloads(header="n", header_value="7") == [r"\x00\x01bin\xff"]  # a typed value, by its text form
    assert payloads(header="nope") == []
    assert payloads(key="shop.orders.eu") == ["NATS eu with Needle"]  # the NATS subject
    assert payloads(key="shop.orders.*") == ["NATS eu with Needle", "NATS us"]  # a NATS wildcard
    assert len(payloads(key="shop.>")) == 3
    assert payloads(key="cust-7") == ["NATS us"]  # Ferry-Partition-Key before the subject
    assert payloads(key=str(big_id)) == payloads(key=f"{big_id:032x}") == ["http needle"]  # the message id
    assert payloads(text="NEEDLE") == ["NATS eu with Needle", "http needle"]  # ASCII case folded
    assert payloads(text="needle", header="trace", header_value="t2") == []  # every condition must hold

    msgs = api.get(path, params={"order": "oldest"}).json()["messages"]
    assert [m["key"] for m in msgs] == [
        {"text": "shop.orders.eu", "source": "ferry-nats-subject"}, {"text": "cust-7", "source": "Ferry-Partition-Key"},
        {"text": "shop.orders.eu.north", "source": "ferry-nats-subject"}, {"text": f"{big_id:032x}", "source": "id"},
        {"text": msgs[4]["id"], "source": "id"}]
    assert msgs[2]["payload_json"] == '{\n  "total": 12345678901234567890\n}'
    assert msgs[0]["payload_json"] is None
    binary = msgs[4]
    assert binary["payload_encoding"] == "base64" and base64.b64decode(binary["payload"]) == b"\x00\x01bin\xff"
    assert binary["payload_size"] == 6 and json.dumps(binary)  # plain JSON all through


def test_a_filtered_scan_stops_at_its_limit_and_continues(api):
    path = _topic(api, "haystack", "t", 1)
    hay = MAX_SCAN_RECORDS + 50
    _post(api, "haystack", "t", [{"payload": _b64("needle")}] + [{"payload": _b64("hay")}] * hay)
    before = api.get("/console/api/metrics").json()["listeners"]["http"]["messages_out"]
    first = api.get(path, params={"text": "needle"}).json()  # newest first: the needle is the oldest
    assert first["messages"] == [] and first["scan"]["stopped"] == "limit"
    assert first["scan"]["examined"] == MAX_SCAN_RECORDS and first["scan"]["filtered"]
    assert first["scan"]["position"] == first["older"] == f"0:{hay + 1 - MAX_SCAN_RECORDS}"
    assert first["newer"] is None  # it started at the newest
    more = api.get(path, params={"text": "needle", "cursor": first["older"], "dir": "older"}).json()
    assert [(m["offset"], m["payload"]) for m in more["messages"]] == [(0, "needle")]
    assert more["scan"]["stopped"] == "end" and more["scan"]["examined"] == hay + 1 - MAX_SCAN_RECORDS
    assert more["older"] is None
    assert api.get("/console/api/metrics").json()["listeners"]["http"]["messages_out"] - before == 1  # only the match


@pytest.mark.parametrize("params, field", [
    ({"order": "sideways"}, "order"),
    ({"dir": "up"}, "dir"),
    ({"count": 0}, "count"),
    ({"count": MAX_BROWSE_COUNT + 1}, "count"),
    ({"partition_id": 2}, "partition_id"),  # the topic has 0 and 1
    ({"partition_id": "x"}, "partition_id"),
    ({"offset": -1}, "offset"),
    ({"time": "yesterday"}, "time"),
    ({"cursor": "junk"}, "cursor"),
    ({"cursor": "0:1"}, "cursor"),  # all partitions: both must be named
    ({"cursor": "0:1,0:2"}, "cursor"),
    ({"cursor": "0:1", "partition_id": 1}, "cursor"),
    ({"offset": 1, "time": 5}, "time"),  # one jump at a time
    ({"cursor": "0:1,1:1", "offset": 1}, "offset"),
    ({"header_value": "v"}, "header_value"),
    ({"header": "k" * 256}, "header"),  # a header key is at most 255 bytes: it could never match
    ({"key": "k" * 256}, "key"),
    ({"text": "x" * 1025}, "text"),
])
def test_bad_query_parameters_get_the_apis_400(api, params, field):
    path = MESSAGES.format(s="bad", t="t")
    if api.get("/streams/bad").status_code != 200:
        _topic(api, "bad", "t", 2)
    r = api.get(path, params=params)
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["field"] == field and body["code"] == "invalid_format" and body["reason"].startswith(field + ":")
