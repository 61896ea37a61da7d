"""The web console's JSON endpoints (adapters/http/routes_console.py) and its origin inference.

Units without sockets (the inference, the exposition parser, the app over a real broker for
stored group offsets), then a live gateway with every listener: messages published through
NATS and HTTP come back from the browser endpoint decoded, with their origin, and the
metrics snapshot counts them per listener.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import struct

import httpx
import nats
import pytest

from adapters.http.app import HttpApp
from adapters.http.events import Request
from adapters.http.routes_console import infer_origin, listener_snapshot
from adapters.http.routes_console_browse import MAX_BROWSE_COUNT, payload_preview
from adapters.http.tokens import TokenService
from adapters.http import console
from core.broker import Broker, BrokerConfig
from core.consumers import Consumer
from core.header_value import HeaderKind, HeaderValue
from core.log import AppendInput, LogConfig
from core.message import Headers
from core.metrics import MetricsRegistry, listener_metrics
from ferry_harness import running_gateway

CLIENT_LIMIT_S = 30  # bounds a hung client call, not a timing assertion


# -- origin inference (pure) -----------------------------------------------------------------
def _headers(*pairs) -> Headers:
    h = Headers()
    for k, v in pairs:
        h.add(k, v)
    return h


@pytest.mark.parametrize("headers, stream, pravega, expected", [
    (_headers(("ferry-nats-subject", "orders.eu")), "orders", True, "NATS"),
    (_headers(("trace", "x"), ("ferry-nats-subject", "$KV.b.k")), "jetstream", False, "NATS JetStream"),
    (_headers(("source", "pytest")), "orders", True, "Iggy/HTTP"),  # Pravega stores no headers
    (_headers(), "orders", True, "Iggy/HTTP/Pravega"),
    (_headers(), "my stream", False, "Iggy/HTTP"),  # not Pravega-visible: Pravega cannot have written it
    (_headers((HeaderValue.uint32(7), "ferry-nats-subject")), "orders", True, "Iggy/HTTP"),  # a typed key
])
def test_infer_origin(headers, stream, pravega, expected):
    origin = infer_origin(headers, stream, pravega)
    assert origin.protocol == expected
    assert origin.evidence  # every answer says why
    if expected.startswith("NATS"):
        assert "ferry-nats-subject: " in origin.evidence


def test_payload_preview_keeps_text_cut_at_the_limit():
    text = "é" * 3000  # 6000 bytes; the 4096-byte cut falls inside no character here, 4095 would
    assert payload_preview(text.encode())[1] == "utf-8"
    odd = ("x" + "é" * 3000).encode()  # the cut at 4096 splits an "é"
    shown, encoding = payload_preview(odd)
    assert encoding == "utf-8" and odd.startswith(shown.encode()) and len(shown.encode()) == 4095
    assert payload_preview(b"\xff\xfe\x00") == (base64.b64encode(b"\xff\xfe\x00").decode(), "base64")


def test_listener_snapshot_reads_families_generically():
    reg = MetricsRegistry()
    shared = listener_metrics(reg)
    shared["messages_in"].inc("nats", amount=3)
    shared["bytes_in"].inc("nats", amount=30)
    shared["connections_open"].inc('we"ird\\name')
    reg.counter("ferry_errors_total", "Errors.", ("listener",)).inc("nats", amount=4)
    # a family with an extra label (as another adapter might add) is summed per listener
    extra = reg.counter("ferry_messages_out_total_x", "not ours", ("listener",))
    extra.inc("nats", amount=100)
    text = reg.render() + 'ferry_messages_out_total{listener="iggy_tcp",transport="tcp"} 2\n' \
                          'ferry_messages_out_total{listener="iggy_tcp",transport="tls"} 5\n' \
                          'ferry_messages_in_total 9\n'  # no listener label: skipped
    snap = listener_snapshot(text)
    assert snap["nats"]["messages_in"] == 3 and snap["nats"]["bytes_in"] == 30
    assert snap["nats"]["messages_out"] == 0  # the look-alike family is not read
    assert snap["nats"]["errors"] == 4 and snap["iggy_tcp"]["errors"] == 0  # no series yet = 0
    assert snap["iggy_tcp"]["messages_out"] == 7
    assert snap['we"ird\\name']["connections_open"] == 1
    assert set(snap) == {"nats", "iggy_tcp", 'we"ird\\name'}


def test_static_files_are_all_there():
    assert {"app.js", "chart.js", "console.css", "consumers.js", "jetstream.js", "messages.js"} <= set(console.ASSETS)
    # every file the page asks for is served, and nothing else is
    assert set(re.findall(r'"/console/([^"]+)"', console.INDEX)) == set(console.ASSETS)
    assert "/console/app.js" in console.INDEX and "<script>" not in console.INDEX  # no inline script
    assert b"script-src 'self'" in console.CSP and b"unsafe-inline" not in console.CSP


# -- the app over a real broker: stored group offsets and lag -----------------------------------
def _get(app: HttpApp, token: str, target: str) -> tuple[int, object]:
    req = Request(1, "GET", target, ((b"authorization", b"Bearer " + token.encode()),), b"", "1.1")
    resp = app.handle(req)
    return resp.status, json.loads(resp.body) if resp.body else None


def test_topic_details_report_group_lag(tmp_path):
    broker = Broker.open(tmp_path / "data", BrokerConfig(log=LogConfig(fsync="never")))
    try:
        tokens = TokenService(b"k" * 32)
        app = HttpApp(broker, tokens, MetricsRegistry())
        root = broker.meta.users.list_users()[0]
        token, _ = tokens.issue(root.id, user_created_at=root.created_at)
        s = broker.create_stream("shop")
        t = broker.create_topic(s.id, "orders", 2)
        broker.append(s.id, t.id, [AppendInput(b"m%d" % i) for i in range(5)], partition=0)
        broker.append(s.id, t.id, [AppendInput(b"n")], partition=1)
        g = broker.consumers.create_group(s.id, t.id, "billing")
        broker.consumers.store_offset(Consumer("group", g.id), s.id, t.id, 0, 2)  # consumed offsets 0..2
        status, body = _get(app, token, "/console/api/streams/shop/topics/orders")
        assert status == 200, body
        assert [(p["id"], p["messages"], p["next_offset"]) for p in body["partitions"]] == [(0, 5, 5), (1, 1, 1)]
        assert all(p["size_bytes"] > 0 for p in body["partitions"])
        (group,) = body["groups"]
        assert group["name"] == "billing" and group["lag"] == 2 + 1
        assert group["partitions"] == [{"partition": 0, "stored_offset": 2, "lag": 2},
                                       {"partition": 1, "stored_offset": None, "lag": 1}]
        assert body["nats_subject"] == "shop.orders" and body["pravega"] == "shop/orders"
        status, body = _get(app, token, "/console/api/streams/shop/topics/nope")
        assert (status, body["code"]) == (400, "topic_name_not_found")  # as GET /streams/{s}/topics/{t}/...
        assert _get(app, "not-a-token", "/console/api/metrics")[0] == 401
        status, body = _get(app, token, f"/console/api/streams/shop/topics/orders/messages?count={MAX_BROWSE_COUNT + 1}")
        assert status == 400 and body["field"] == "count"
        status, body = _get(app, token, "/console/api/streams/shop/topics/orders/messages"
                                        "?partition_id=0&offset=3&count=10&order=oldest")
        assert status == 200 and [m["offset"] for m in body["messages"]] == [3, 4]
        status, body = _get(app, token, "/console/api/streams/shop/topics/orders/messages?count=2&partition_id=0")
        assert [m["payload"] for m in body["messages"]] == ["m4", "m3"]  # the last two, newest first
        assert broker.consumers.get_offset(Consumer("group", g.id), s.id, t.id, 0) == 2  # browsing stored nothing
    finally:
        broker.close()


# -- a live gateway: NATS and HTTP writers, the browser endpoint and the metrics snapshot ------------
KIND_SAMPLES = {  # one value of each of the 15 kinds, and the text form the console shows
    "raw": (b"\x00\xff", "AP8="), "string": (b"text", "text"), "bool": (b"\x01", "true"),
    "int8": (struct.pack("<b", -5), "-5"), "int16": (struct.pack("<h", -300), "-300"),
    "int32": (struct.pack("<i", -70000), "-70000"), "int64": (struct.pack("<q", -2**40), str(-2**40)),
    "int128": ((-2**100).to_bytes(16, "little", signed=True), str(-2**100)),
    "uint8": (b"\xfa", "250"), "uint16": (struct.pack("<H", 65000), "65000"),
    "uint32": (struct.pack("<I", 4_000_000_000), "4000000000"), "uint64": (struct.pack("<Q", 2**63), str(2**63)),
    "uint128": ((2**127).to_bytes(16, "little"), str(2**127)),
    "float32": (struct.pack("<f", 1.5), "1.5"), "float64": (struct.pack("<d", 0.1), "0.1"),
}
assert {k.json_name for k in HeaderKind} == set(KIND_SAMPLES)


def _b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def test_browser_endpoint_decodes_headers_and_names_the_writer(tmp_path):
    with running_gateway(tmp_path) as gw, httpx.Client(base_url=f"http://127.0.0.1:{gw.ports['http']}",
                                                      timeout=CLIENT_LIMIT_S) as c:
        r = c.post("/users/login", json={"username": "iggy", "password": "iggy"})
        c.headers["authorization"] = "Bearer " + r.json()["access_token"]["token"]
        assert c.post("/streams", json={"name": "shop"}).status_code == 200
        assert c.post("/streams/shop/topics", json={"name": "orders", "partitions_count": 1,
                      "compression_algorithm": "none", "message_expiry": 0, "max_topic_size": 0}).status_code == 200
        before = c.get("/console/api/metrics").json()["listeners"]

        async def publish():
            nc = await nats.connect(gw.url())
            for i in range(3):
                await nc.publish("shop.orders.eu", b"from nats %d" % i, headers={"trace": "t%d" % i})
            await nc.flush()
            await nc.close()

        asyncio.run(asyncio.wait_for(publish(), CLIENT_LIMIT_S))
        headers = {f"k-{name}": {"kind": name, "value": _b64(raw)} for name, (raw, _text) in KIND_SAMPLES.items()}
        r = c.post("/streams/shop/topics/orders/messages",
                   json={"messages": [{"payload": _b64("from http"), "headers": headers}]})
        assert r.status_code == 201, r.text

        r = c.get("/console/api/streams/shop/topics/orders/messages", params={"partition_id": 0, "order": "oldest"})
        assert r.status_code == 200, r.text
        msgs = r.json()["messages"]
        assert [(m["offset"], m["origin"], m["payload"]) for m in msgs] == [
            (0, "NATS", "from nats 0"), (1, "NATS", "from nats 1"), (2, "NATS", "from nats 2"),
            (3, "Iggy/HTTP", "from http")]
        assert msgs[1]["headers"] == [{"key": {"kind": "string", "text": "trace"}, "value": {"kind": "string", "text": "t1"}},
                                      {"key": {"kind": "string", "text": "ferry-nats-subject"},
                                       "value": {"kind": "string", "text": "shop.orders.eu"}}]
        assert msgs[0]["origin_evidence"] == "ferry-nats-subject: shop.orders.eu"
        shown = {h["key"]["text"]: (h["value"]["kind"], h["value"]["text"]) for h in msgs[3]["headers"]}
        assert shown == {f"k-{name}": (name, text) for name, (_raw, text) in KIND_SAMPLES.items()}

        out_before = c.get("/console/api/metrics").json()["listeners"]["http"]
        c.get("/console/api/streams/shop/topics/orders/messages", params={"offset": 1, "count": 2, "order": "oldest"})
        after = c.get("/console/api/metrics").json()["listeners"]
        assert after["http"]["messages_out"] - out_before["messages_out"] == 2  # a browse is a delivery
        assert after["http"]["bytes_out"] - out_before["bytes_out"] == 2 * len("from nats 0")
        assert after["nats"]["messages_in"] - before.get("nats", {}).get("messages_in", 0) == 3
        # as nats-server counts in_bytes: each HPUB's header block (nats-py's) and payload
        hpub = len(b"NATS/1.0\r\ntrace: t0\r\n\r\n") + len("from nats 0")
        assert after["nats"]["bytes_in"] - before.get("nats", {}).get("bytes_in", 0) == 3 * hpub
        assert after["http"]["messages_in"] - before["http"]["messages_in"] == 1
        assert after["http"]["connections_open"] >= 1  # this client
