"""Iggy's HTTP API through httpx, over HTTP/1.1 and HTTP/2 (h2c prior knowledge).

Ids are numbered from 0 and messages are in the current Iggy server's JSON
(docs/http.md); tests/http/test_http_current_client.py drives the same API with
the real apache-iggy 0.9.0 client."""

from __future__ import annotations

import struct

import pytest
import trio
import xxhash

from http_helpers import TEST_LIMIT_S, b64, client, gateway, login, make_topic, partition_value

pytestmark = pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])


async def test_streams_topics_partitions(tmp_path, http2):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port, http2=http2) as c:
            await login(c)
            topic = await make_topic(c, "orders", "eu", partitions=3)
            assert topic["id"] == 0 and topic["partitions_count"] == 3
            assert [p["id"] for p in topic["partitions"]] == [0, 1, 2]
            assert topic["size"] == "0 B" and topic["message_expiry"] == 2**64 - 1
            r = await c.get("/streams")
            assert [s["name"] for s in r.json()] == ["orders"]
            assert list(r.json()[0]) == ["id", "created_at", "name", "size", "messages_count", "topics_count"]
            r = await c.get("/streams/0")
            assert r.json()["topics"][0]["name"] == "eu"
            assert (await c.get("/streams/orders/topics/eu")).json()["id"] == 0
            # missing single entity: Iggy's generic 404
            r = await c.get("/streams/99")
            assert r.status_code == 404 and r.json() == {"id": 404, "code": "not_found",
                                                         "reason": "Resource not found", "field": None}
            # missing parent on a collection: the specific Iggy error
            r = await c.get("/streams/99/topics")
            assert r.status_code == 404 and r.json()["id"] == 1009 and r.json()["field"] == "stream_id"
            r = await c.get("/streams/nope/topics")
            assert r.status_code == 400 and r.json()["id"] == 1010
            r = await c.post("/streams", json={"name": "orders"})
            assert r.status_code == 400 and r.json()["id"] == 1012 and r.json()["field"] == "name"
            r = await c.post("/streams/orders/topics/eu/partitions", json={"partitions_count": 2})
            assert r.status_code == 201 and r.content == b""
            r = await c.delete("/streams/orders/topics/eu/partitions", params={"partitions_count": 4})
            assert r.status_code == 204
            assert (await c.get("/streams/0/topics/0")).json()["partitions_count"] == 1
            r = await c.put("/streams/0/topics/0", json={"name": "west", "compression_algorithm": "GZIP",
                                                          "message_expiry": 0, "max_topic_size": 0})
            assert r.status_code == 204
            assert (await c.get("/streams/0/topics/west")).json()["compression_algorithm"] == "gzip"
            # the settings are optional on update (the current server's UpdateTopic): a patch
            r = await c.put("/streams/0/topics/0", json={"name": "west", "message_expiry": 5_000_000})
            assert r.status_code == 204
            west = (await c.get("/streams/0/topics/west")).json()
            assert (west["compression_algorithm"], west["message_expiry"], west["max_topic_size"]) == \
                ("gzip", 5_000_000, 2**64 - 1)
            r = await c.put("/streams/0/topics/0", json={"name": "west", "options": {"compression_algorithm": "none"}})
            assert r.status_code == 204
            west = (await c.get("/streams/0/topics/west")).json()
            assert (west["compression_algorithm"], west["message_expiry"]) == ("none", 5_000_000)
            r = await c.put("/streams/0/topics/0", json={"name": "west", "options": {"bogus": "1"}})
            assert r.status_code == 400 and r.json()["id"] == 4041 and r.json()["field"] == "options"
            # options as the current server's ResourceOptions JSON: text values, explicit or derived
            opts = (await c.get("/streams/0/topics/west")).json()["options"]
            assert opts["compression_algorithm"] == {"value": "none", "explicit": True}
            assert opts["message_expiry"] == {"value": "5000000", "explicit": True}
            assert opts["max_topic_size"] == {"value": str(2**64 - 1), "explicit": False}
            assert (await c.put("/streams/0", json={"name": "sales"})).status_code == 204
            assert (await c.delete("/streams/sales/topics/west/purge")).status_code == 204
            assert (await c.delete("/streams/sales/purge")).status_code == 204
            assert (await c.delete("/streams/sales/topics/west")).status_code == 204
            assert (await c.delete("/streams/sales")).status_code == 204
            assert (await c.get("/streams")).json() == []


async def test_send_and_poll_with_typed_headers(tmp_path, http2):
    headers = {
        "s": {"kind": "string", "value": b64("hello")},
        "b": {"kind": "bool", "value": b64(b"\x01")},
        "u64": {"kind": "uint64", "value": b64((123456).to_bytes(8, "little"))},
        "f": {"kind": "float64", "value": b64(b"\x00" * 7 + b"\x40")},
        "r": {"kind": "raw", "value": b64(b"\x00\xff")},
    }
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port, http2=http2) as c:
            await login(c)
            await make_topic(c, partitions=2)
            typed = [{"key": {"kind": "uint32", "value": b64((9).to_bytes(4, "little"))},
                      "value": {"kind": "string", "value": b64("typed key")}}]
            body = {"partitioning": {"kind": "partition_id", "value": partition_value(1)},
                    "messages": [{"id": 0, "payload": b64("one")},
                                 {"id": 2**127 + 5, "payload": b64("two"), "headers": headers},
                                 {"payload": b64("three"), "user_headers": typed}]}
            r = await c.post("/streams/s1/topics/t1/messages", json=body)
            assert r.status_code == 201 and r.json() == {"confirmations": [
                {"stream_id": 0, "topic_id": 0, "partition_id": 1, "base_offset": 0}]}
            r = await c.get("/streams/s1/topics/t1/messages",
                            params={"partition_id": 1, "kind": "offset", "value": 0, "count": 10})
            assert r.status_code == 200, r.text
            data = r.json()
            assert (data["partition_id"], data["current_offset"], data["count"]) == (1, 2, 3)
            m0, m1, m2 = data["messages"]
            h0 = m0["header"]
            assert h0["offset"] == 0 and m0["payload"] == b64("one") and m0["user_headers"] == [] and h0["id"] > 0
            assert (h0["payload_length"], h0["user_headers_length"], h0["reserved"]) == (3, 0, 0)
            assert h0["origin_timestamp"] == h0["timestamp"] > 0
            # the stored XXH3-64 of the record from byte 8 on (core/record.py)
            tail = struct.pack("<QQQQQIIQ", h0["id"] & (2**64 - 1), h0["id"] >> 64, 0, h0["timestamp"],
                               h0["timestamp"], 0, 3, 0) + b"one"
            assert h0["checksum"] == xxhash.xxh3_64_intdigest(tail)
            assert m1["header"]["id"] == 2**127 + 5 and m1["header"]["offset"] == 1
            # the seed era's header map, sent, comes back as the current typed entries
            assert {e["key"]["value"]: e["value"] for e in m1["user_headers"]} == {
                b64(k): v for k, v in headers.items()}
            assert all(e["key"]["kind"] == "string" for e in m1["user_headers"])
            assert m2["user_headers"] == typed and m2["header"]["user_headers_length"] > 0
            # balanced and messages_key partitioning
            for part in ({"kind": "balanced", "value": ""}, {"kind": "messages_key", "value": b64("k")}):
                r = await c.post("/streams/s1/topics/t1/messages",
                                 json={"partitioning": part, "messages": [{"payload": b64("x")}]})
                assert r.status_code == 201, r.text
            # last / next / auto_commit and consumer offsets
            r = await c.get("/streams/s1/topics/t1/messages",
                            params={"partition_id": 1, "kind": "last", "count": 1})
            assert [m["header"]["offset"] for m in r.json()["messages"]] == [r.json()["current_offset"]]
            r = await c.get("/streams/s1/topics/t1/messages",
                            params={"partition_id": 1, "kind": "next", "count": 1, "auto_commit": "true",
                                    "consumer_id": "7"})
            assert [m["header"]["offset"] for m in r.json()["messages"]] == [0]
            r = await c.get("/streams/s1/topics/t1/consumer-offsets", params={"consumer_id": "7", "partition_id": 1})
            assert r.json() == {"partition_id": 1, "current_offset": r.json()["current_offset"],
                                "stored_offset": 0}
            r = await c.put("/streams/s1/topics/t1/consumer-offsets",
                            json={"consumer_id": "7", "partition_id": 1, "offset": 1})
            assert r.status_code == 204
            # the seed-era key `id` is still read, on polls and on stores
            r = await c.get("/streams/s1/topics/t1/messages",
                            params={"partition_id": 1, "kind": "n", "count": 5, "id": "7"})
            assert [m["header"]["offset"] for m in r.json()["messages"]] == \
                list(range(2, r.json()["current_offset"] + 1))
            r = await c.put("/streams/s1/topics/t1/consumer-offsets", json={"id": "8", "offset": 0})
            assert r.status_code == 204  # partition_id left out: the first partition (0)
            r = await c.get("/streams/s1/topics/t1/consumer-offsets", params={"consumer_id": "8"})
            assert r.json()["partition_id"] == 0 and r.json()["stored_offset"] == 0
            r = await c.delete("/streams/s1/topics/t1/consumer-offsets/7", params={"partition_id": 1})
            assert r.status_code == 204
            r = await c.get("/streams/s1/topics/t1/consumer-offsets", params={"id": "7", "partition_id": 1})
            assert r.status_code == 404
            r = await c.delete("/streams/s1/topics/t1/consumer-offsets/7", params={"partition_id": 1})
            assert r.status_code == 404 and r.json()["id"] == 3021
            r = await c.get("/streams/s1/topics/t1/messages/flush/0/true")
            assert r.status_code == 200


async def test_consumer_groups(tmp_path, http2):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port, http2=http2) as c:
            await login(c)
            await make_topic(c, partitions=2)
            g = "/streams/s1/topics/t1/consumer-groups"
            r = await c.post(g, json={"name": "workers"})
            assert r.status_code == 201 and r.json() == {"id": 0, "name": "workers", "partitions_count": 2,
                                                         "members_count": 0, "members": []}
            r = await c.post(g, json={"name": "workers"})
            assert r.status_code == 400 and r.json()["id"] == 5004
            assert [x["name"] for x in (await c.get(g)).json()] == ["workers"]
            assert (await c.get(g + "/workers")).json()["id"] == 0
            assert (await c.get(g + "/9")).status_code == 404
            assert (await c.delete(g + "/0")).status_code == 204
            assert (await c.get(g)).json() == []
